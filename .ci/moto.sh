#!/usr/bin/env bash
# Installs the local storage servers of the object-storage tests (tests/api/mirror.rs), from
# PyPI, pinned, into a private venv under target/: moto in server mode (S3) and WsgiDAV with
# cheroot (a WebDAV server, for http:// sources). Idempotent; prints the venv's python.
set -euo pipefail
cd "$(dirname "$0")/.."
MOTO_VERSION=5.1.18
WSGIDAV_VERSION=4.3.3
CHEROOT_VERSION=10.0.1
venv=${CARGO_TARGET_DIR:-target}/moto-venv
mkdir -p "$(dirname "$venv")"
# Tests run in parallel: one installs, the others wait for it.
exec 9>"$venv.lock"
flock 9
installed="import moto, wsgidav, sys; sys.exit(moto.__version__ != '$MOTO_VERSION' or wsgidav.__version__ != '$WSGIDAV_VERSION')"
if ! "$venv/bin/python" -c "$installed" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "moto[server]==$MOTO_VERSION" "wsgidav==$WSGIDAV_VERSION" "cheroot==$CHEROOT_VERSION"
fi
echo "$venv/bin/python"
