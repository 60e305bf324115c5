#!/usr/bin/env bash
# CI: the Python Testcontainers example (examples/python/test_eventbox.py) runs against the
# image, in a private venv under target/ with testcontainers and pytest from PyPI (pinned).
# Skipped, saying so, when Docker is not there. Ryuk (Testcontainers' reaper) is an image that
# would have to be pulled, so it is off; the example's fixture removes its own container.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! docker info >/dev/null 2>&1; then
    echo "python example: skipped: docker info failed (no Docker)" >&2
    exit 0
fi

TESTCONTAINERS_VERSION=4.15.0
PYTEST_VERSION=9.2.0
venv=target/python-example-venv
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; \
        sys.exit(m.version('testcontainers') != '$TESTCONTAINERS_VERSION' \
                 or m.version('pytest') != '$PYTEST_VERSION')" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "testcontainers==$TESTCONTAINERS_VERSION" "pytest==$PYTEST_VERSION"
fi

# The image as the sources are now (a no-op when cargo test's container tests just built it).
image=$(scripts/image.sh | cut -d' ' -f1)
EVENTBOX_IMAGE=$image TESTCONTAINERS_RYUK_DISABLED=true \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider examples/python
