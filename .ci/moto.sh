#!/usr/bin/env bash
# Installs moto in server mode (from PyPI, pinned) into a private venv under target/, for the
# object-storage tests (tests/api/mirror.rs). Idempotent; prints the venv's python.
set -euo pipefail
cd "$(dirname "$0")/.."
MOTO_VERSION=5.1.18
venv=${CARGO_TARGET_DIR:-target}/moto-venv
mkdir -p "$(dirname "$venv")"
# Tests run in parallel: one installs, the others wait for it.
exec 9>"$venv.lock"
flock 9
if ! "$venv/bin/python" -c "import moto, sys; sys.exit(moto.__version__ != '$MOTO_VERSION')" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "moto[server]==$MOTO_VERSION"
fi
echo "$venv/bin/python"
