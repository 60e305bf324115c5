"""eventbox from a Python test, started the way teams start WireMock or MockServer: with
Testcontainers (https://testcontainers-python.readthedocs.io). The image is eventbox's own
(built by scripts/image.sh; EVENTBOX_IMAGE names another); a bundle folder is mounted at /data,
the request journal is on, and the test waits on /readyz before calling the API. The host reaches
the container from the Docker bridge's address, not loopback, so the container is given an admin
token and /_journal is read with it as a bearer.

    python3 -m venv .venv && .venv/bin/pip install testcontainers pytest
    TESTCONTAINERS_RYUK_DISABLED=true .venv/bin/pytest examples/python

Skipped when Docker is not there. Ryuk (Testcontainers' clean-up container) must be pulled from a
registry, so where no image can be pulled set TESTCONTAINERS_RYUK_DISABLED=true: the fixture
removes its container itself.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

IMAGE = os.environ.get("EVENTBOX_IMAGE", "eventbox:0.1.0")
DEMO = Path(__file__).resolve().parents[2] / "data" / "demo"
TOKEN = "demo-token"
ADMIN_TOKEN = "python-example-admin-token"


def docker_available() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


pytestmark = pytest.mark.skipif(not docker_available(), reason="docker info failed: no Docker")


def get(url: str, token: str | None = None, admin: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization-Token", token)
    if admin is not None:
        request.add_header("Authorization", f"Bearer {admin}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture
def eventbox(tmp_path):
    from testcontainers.core.container import DockerContainer

    # The bundle to serve, readable by the image's user (uid 10001).
    data = tmp_path / "data"
    shutil.copytree(DEMO, data / "demo")
    for path in [data, *data.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)

    container = (
        DockerContainer(IMAGE)
        .with_exposed_ports(8080)
        .with_volume_mapping(str(data), "/data", "ro")
        .with_env("EVENTBOX_ADMIN_TOKEN", ADMIN_TOKEN)
        .with_command("serve --journal 100")
    )
    with container:
        base = f"http://{container.get_container_host_ip()}:{container.get_exposed_port(8080)}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if get(f"{base}/readyz")[0] == 200:
                    break
            except OSError:
                pass  # the port is published before eventbox listens
            assert time.monotonic() < deadline, f"eventbox not ready at {base}"
            time.sleep(0.05)
        yield base


def test_the_api_answers_and_the_journal_lists_what_was_asked(eventbox):
    status, body = get(f"{eventbox}/api/v1/event", TOKEN)
    assert status == 200
    assert json.loads(body)["data"][0]["id_event"] == 48213

    status, body = get(f"{eventbox}/api/v1/payments/details?reference=PG2026000104", TOKEN)
    assert status == 200
    assert json.loads(body)["data"][0]["reference_payment"] == "PG2026000104"

    status, _ = get(f"{eventbox}/api/v1/event", "not-a-token")
    assert status == 401

    status, _ = get(f"{eventbox}/_journal")
    assert status == 401  # not loopback: the admin token is needed

    status, body = get(f"{eventbox}/_journal", admin=ADMIN_TOKEN)
    assert status == 200
    entries = [e for e in json.loads(body)["entries"] if e["path"] != "/readyz"]
    assert [(e["path"], e["status"], e.get("reference")) for e in entries] == [
        ("/api/v1/event", 200, None),
        ("/api/v1/payments/details", 200, "PG2026000104"),
        ("/api/v1/event", 401, None),
    ]
    # Tokens are never kept whole.
    assert TOKEN not in body.decode()
