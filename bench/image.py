#!/usr/bin/env python3
"""Sizing of the container image: its size, start-to-ready time and memory, on the demo bundle
and on a generated bundle of 200,000 payments (docs/deploy.md, "Sizing").

    scripts/image.sh && cargo build --release && python3 bench/image.py [--payments 200000]

For each bundle, the image is run as in production (read-only, no capabilities, no new
privileges, the bundle mounted read-only at /data) and measured:
- start to ready: from `docker run` returning to `/readyz` answering 200 (the image's own start,
  without Docker's container creation);
- the process's resident memory after start (VmRSS) and its peak (VmHWM), read from /proc on the
  host (needs root, or the same user as the container's process);
- the same after serving: 2,000 requests for the event and, when the bundle is large, its whole
  payments list ten times; and `docker stats`' memory figure.
The generated bundle comes from the release build's `eventbox gen` (target/release/eventbox).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "target", "release", "eventbox")
HARDENED = ["--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]


def version():
    with open(os.path.join(ROOT, "Cargo.toml")) as f:
        return re.search(r'^version = "(.*)"$', f.read(), re.M).group(1)


def docker(*args):
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout.strip()


def get(url, token=None):
    req = urllib.request.Request(url, headers={"Authorization-Token": token} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            res.read()
            return res.status
    except Exception as e:
        return getattr(e, "code", None)


def vm(pid, key):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(rf"{key}:\s+(\d+)", f.read()).group(1)) * 1024


def measure(image, data, token, large):
    name = f"eventbox-bench-{os.getpid()}"
    mount = ["-v", f"{data}:/data:ro"] if data else []
    try:
        docker("run", "-d", "--name", name, "-p", "127.0.0.1::8080", *HARDENED, *mount, image)
        started = time.monotonic()
        base = "http://" + docker("port", name, "8080/tcp").splitlines()[0]
        while get(f"{base}/readyz") != 200:
            if time.monotonic() - started > 120:
                sys.exit(f"not ready after 120 s: {docker('logs', name)}")
            time.sleep(0.01)
        ready = time.monotonic() - started
        pid = int(docker("inspect", "--format", "{{.State.Pid}}", name))
        at_start = (vm(pid, "VmRSS"), vm(pid, "VmHWM"))
        for _ in range(2000):
            get(f"{base}/api/v1/event", token)
        if large:
            for _ in range(10):
                get(f"{base}/api/v1/payments", token)
        served = (vm(pid, "VmRSS"), vm(pid, "VmHWM"))
        stats = docker("stats", "--no-stream", "--format", "{{.MemUsage}}", name).split(" / ")[0]
        return ready, at_start, served, stats
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def size_of(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--payments", type=int, default=200_000)
    args = ap.parse_args()
    image = f"eventbox:{version()}"
    if not os.path.exists(BINARY):
        sys.exit(f"missing {BINARY} (cargo build --release)")
    size = int(docker("image", "inspect", "--format", "{{.Size}}", image))
    work = tempfile.mkdtemp(prefix="eventbox-image-bench-")
    try:
        big = os.path.join(work, "data")
        subprocess.run([BINARY, "gen", "--into", os.path.join(big, "big"), "--payments",
                        str(args.payments), "--token", "bench-token"], check=True,
                       capture_output=True)
        # The image's user must read the bundle (gen writes bundle.toml as 0600).
        subprocess.run(["chown", "-R", "10001:10001", big], check=True)
        os.chmod(work, 0o755)
        cases = [
            ("demo bundle", None, "demo-token", size_of(os.path.join(ROOT, "data")), False),
            (f"gen --payments {args.payments}", big, "bench-token", size_of(big), True),
        ]
        mib = 1024 * 1024
        print(f"image {image}: {size:,} bytes ({size / mib:.1f} MiB)")
        for label, data, token, disk, large in cases:
            ready, (rss, hwm), (rss2, hwm2), stats = measure(image, data, token, large)
            print(f"{label} ({disk / mib:.1f} MiB on disk): ready {ready:.2f} s after `docker run`; "
                  f"after start RSS {rss / mib:.1f} MiB (peak {hwm / mib:.1f}); after serving "
                  f"RSS {rss2 / mib:.1f} MiB (peak {hwm2 / mib:.1f}), docker stats {stats}")
    finally:
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
