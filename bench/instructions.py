#!/usr/bin/env python3
"""Instructions per request, counted by valgrind's callgrind: a measure that does not depend on
what else the machine is doing (the same binary, inputs and environment give the same count), so
two builds can be compared on a busy machine where req/s cannot.

    cargo build --release && python3 bench/instructions.py [--requests 200] [BINARY ...]

For each binary (default: target/release/eventbox), for each case (the shared fixture's event
and payments bodies, identity and with `Accept-Encoding: gzip, br`): eventbox runs under
callgrind twice, once answering N requests and once 2N on one keep-alive connection; the
difference of the two totals divided by N is the cost of one request, start-up and shutdown
cancelled out. User-space instructions only: the kernel's part of a `write` is not counted.
Needs valgrind (Debian's package; installed when missing).
"""
import argparse
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "..", "shared", "bench", "gen_fixture.py")
TOKEN = "bench-token"
CASES = [
    ("event", "/api/v1/event", {}),
    ("event, gzip br", "/api/v1/event", {"Accept-Encoding": "gzip, br"}),
    ("payments", "/api/v1/payments", {}),
    ("payments, gzip br", "/api/v1/payments", {"Accept-Encoding": "gzip, br"}),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"eventbox exited early ({proc.returncode})")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("eventbox under callgrind did not become ready")


def count(binary, data, path, headers, n, work):
    port = free_port()
    out = os.path.join(work, f"callgrind.{port}")
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary,
         "--data", data, "--addr", f"127.0.0.1:{port}", "--no-watch"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for _ in range(n):
            c.request("GET", path, headers={"Authorization-Token": TOKEN, **headers})
            r = c.getresponse()
            r.read()
            if r.status != 200:
                sys.exit(f"{path}: {r.status}")
        c.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    with open(out) as f:
        m = re.search(r"^summary:\s+(\d+)", f.read(), re.M)
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("binaries", nargs="*", default=[os.path.join(ROOT, "target", "release", "eventbox")])
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "valgrind"], check=True)
    work = tempfile.mkdtemp(prefix="eventbox-instructions-")
    try:
        fix = os.path.join(work, "fixture")
        subprocess.run([sys.executable, GEN, fix], check=True, stdout=subprocess.DEVNULL)
        bundle = os.path.join(work, "data", "bench")
        os.makedirs(bundle)
        for name in ("event", "payments", "submission", "hotsite"):
            shutil.copy(os.path.join(fix, f"{name}.json"), bundle)
        with open(os.path.join(bundle, "bundle.toml"), "w") as f:
            f.write(f'tokens = ["{TOKEN}"]\n')
        data = os.path.join(work, "data")
        n = args.requests
        print(f"| case | " + " | ".join(os.path.relpath(b) for b in args.binaries) + " |")
        print("|---|" + "---:|" * len(args.binaries))
        for label, path, headers in CASES:
            cells = []
            for b in args.binaries:
                one = count(b, data, path, headers, n, work)
                two = count(b, data, path, headers, 2 * n, work)
                cells.append(f"{(two - one) / n:,.0f}")
            print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
