#!/usr/bin/env bash
# CI: the Kubernetes manifests (deploy/kubernetes/) are valid against the Kubernetes schemas.
# kubernetes-validate (from PyPI, pinned) carries the schemas, so no cluster is needed. With
# kubectl on PATH, the base and every overlay are rendered (`kubectl kustomize`) and the result
# validated; without it, every whole manifest file is validated as it is (an overlay's patch is
# a fragment, checked only once rendered; Debian's kubectl, 1.20, is too old for the
# kustomization syntax used, so it is not installed).
set -euo pipefail
cd "$(dirname "$0")/.."

KUBERNETES_VALIDATE_VERSION=1.37.0
# The Kubernetes version whose schemas apply.
KUBERNETES_VERSION=${KUBERNETES_VERSION:-1.33.0}

venv=target/kubernetes-validate-venv
if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$KUBERNETES_VALIDATE_VERSION"; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
fi
validate=("$venv/bin/kubernetes-validate" --strict --kubernetes-version "$KUBERNETES_VERSION")

kustomizations=$(find deploy/kubernetes -name kustomization.yaml -printf '%h\n' | sort)
if command -v kubectl >/dev/null 2>&1; then
    rendered=$(mktemp -d)
    trap 'rm -rf "$rendered"' EXIT
    for dir in $kustomizations; do
        out="$rendered/$(echo "$dir" | tr / _).yaml"
        kubectl kustomize "$dir" >"$out"
        echo "kubernetes: $dir (rendered)"
        "${validate[@]}" "$out"
    done
else
    echo "kubernetes: kubectl not found; validating the manifest files as they are" \
        "(overlay patches are not checked)" >&2
    for file in $(find deploy/kubernetes -name '*.yaml' ! -name kustomization.yaml \
                      ! -name '*-patch.yaml' | sort); do
        "${validate[@]}" "$file"
    done
fi
