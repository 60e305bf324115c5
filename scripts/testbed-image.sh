#!/usr/bin/env bash
# Builds the testbed image of the Compose deployment's test (deploy/compose/, tests/api/compose.rs):
# a Debian bookworm root file system made here with debootstrap (no base image can be pulled),
# holding HAProxy (the balancer in front of the replicas) and moto in server mode (the S3 the
# replicas read, the same version as .ci/moto.sh). One image, two roles: the Compose file picks
# the command.
#
#   scripts/testbed-image.sh          prints the tag, building the image when it is missing
#
# The tag carries a hash of this script and of the moto version, so a change to either builds a
# new image and an unchanged one is built once per machine (about 3 minutes, mostly downloads).
# debootstrap and chroot need root: run as root, or with sudo available.
set -euo pipefail
cd "$(dirname "$0")/.."

moto_version=$(sed -n 's/^MOTO_VERSION=//p' .ci/moto.sh)
revision=$( (cat "$0"; echo "$moto_version") | sha256sum | cut -c1-12)
tag=eventbox-testbed:$revision
if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "$tag"
    exit 0
fi

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
if ! command -v debootstrap >/dev/null 2>&1; then
    echo "testbed-image.sh: installing debootstrap (Debian package)" >&2
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq debootstrap >&2
fi

work=${CARGO_TARGET_DIR:-target}/testbed
rootfs=$work/rootfs
mkdir -p "$work"
# Concurrent test binaries may call this at once: one builds, the others wait and reuse it.
exec 9>"$work.lock"
flock 9
if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "$tag"
    exit 0
fi
"${sudo[@]}" rm -rf "$rootfs"

echo "testbed-image.sh: debootstrap of bookworm with haproxy and python3 into $rootfs" >&2
"${sudo[@]}" debootstrap --variant=minbase \
    --include=haproxy,python3,python3-venv,ca-certificates \
    bookworm "$rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >&2
# moto from PyPI into a venv of the root file system, installed by its own python. The host's
# resolver and certificate authorities are lent to pip (a proxy that inspects TLS has its own
# authority there), then taken back.
"${sudo[@]}" cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
"${sudo[@]}" cp "${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}" "$rootfs/tmp/host-ca.pem"
"${sudo[@]}" chroot "$rootfs" python3 -m venv /opt/moto
"${sudo[@]}" chroot "$rootfs" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root \
    PIP_CERT=/tmp/host-ca.pem SSL_CERT_FILE=/tmp/host-ca.pem REQUESTS_CA_BUNDLE=/tmp/host-ca.pem \
    /opt/moto/bin/pip install --quiet --disable-pip-version-check "moto[server]==$moto_version" >&2
"${sudo[@]}" rm -f "$rootfs/tmp/host-ca.pem" "$rootfs/etc/resolv.conf"
"${sudo[@]}" rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/usr/share/doc "$rootfs"/usr/share/man "$rootfs"/root/.cache
"${sudo[@]}" tar -C "$rootfs" -c . | docker import \
    --change 'LABEL org.opencontainers.image.title=eventbox-testbed' \
    --change 'LABEL org.opencontainers.image.description="HAProxy and moto for the Compose test of eventbox"' \
    --change 'ENV PATH=/opt/moto/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    - "$tag" >/dev/null
"${sudo[@]}" rm -rf "$rootfs"
echo "$tag"
