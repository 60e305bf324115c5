#!/usr/bin/env python3
"""Writes benchmark: acknowledged writes per second with `--state` (fdatasync before each answer),
against a plain fsync-per-write loop on the same disk in the same run (the limit without group
commit).

    cargo build --release && python3 bench/writes.py [--duration 10] [--connections 1,8,32]

What it does:
- copies the demo bundle, starts eventbox (target/release) with `--state` in a fresh folder;
- for each connection count, runs `wrk` for `--duration` seconds posting check-ins
  (`POST /api/v1/checkin/attendees`, one item) and then registrations
  (`POST /api/v1/attendees/create`, a new e-mail each: a Lua counter), keep-alive;
- counts the writes eventbox acknowledged (200s), their p50/p99, and checks the log holds at
  least that many lines;
- measures the reference: one process appending a line and calling fdatasync, in a loop, for the
  same duration, in the same folder's file system.

Prints writes/s, p50, p99 per case and the ratio to the fsync loop. Compare within one run.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_vs_nginx import BINARY, ROOT, ensure_tools, free_port, to_ms  # noqa: E402

TOKEN = "demo-token"

CHECKIN = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization-Token"] = "{token}"
wrk.body = '[{{"checkin_code": "{code}", "checkin": 1, "checkin_date": "2026-09-15T08:00:00"}}]'
"""

REGISTER = """
counter = 0
thread_id = 0
setup = function(thread) thread:set("tid", thread_id); thread_id = thread_id + 1 end
request = function()
  counter = counter + 1
  local body = string.format('{{"name": "Bench %d", "email": "bench-%s-%d-%d@example.org", ' ..
    '"registration_confirmed": true, "registration": {{"id_ticket_price": {price}, "price": 0}}}}',
    counter, "{run}", tid or 0, counter)
  return wrk.format("POST", "/api/v1/attendees/create",
    {{["Content-Type"] = "application/json", ["Authorization-Token"] = "{token}"}}, body)
end
"""


def wait_ready(port, proc):
    import urllib.request
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"eventbox exited with {proc.returncode}")
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/readyz")
            if urllib.request.urlopen(req, timeout=1).status == 200:
                return
        except Exception:
            time.sleep(0.05)
    sys.exit("eventbox not ready")


def wrk(url, script, seconds, connections):
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", script, url],
        capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    p50 = to_ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
    p99 = to_ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
    return {"rps": rps, "total": total, "bad": int(bad.group(1)) if bad else 0,
            "p50": p50, "p99": p99}


def fsync_loop(folder, seconds):
    """One append and one fdatasync per write, as long as `seconds`: writes per second."""
    path = os.path.join(folder, "fsync-loop.jsonl")
    line = b'{"at":"2026-11-23T00:00:00Z","bundle":"demo","write":"checkin","checkin_code":"1",' \
           b'"checkin":1,"checkin_date":"2026-09-15T08:00:00"}\n'
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    n, start = 0, time.monotonic()
    latencies = []
    try:
        while time.monotonic() - start < seconds:
            t = time.monotonic()
            os.write(fd, line)
            os.fdatasync(fd)
            latencies.append((time.monotonic() - t) * 1000)
            n += 1
    finally:
        os.close(fd)
    latencies.sort()
    elapsed = time.monotonic() - start
    return {"rps": n / elapsed, "p50": latencies[len(latencies) // 2],
            "p99": latencies[int(len(latencies) * 0.99)]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", default="1,8,32")
    args = ap.parse_args()
    if not os.path.exists(BINARY):
        sys.exit("build it first: cargo build --release")
    ensure_tools()
    work = tempfile.mkdtemp(prefix="eventbox-writes-", dir=os.environ.get("BENCH_DIR"))
    proc = None
    try:
        data = os.path.join(work, "data")
        shutil.copytree(os.path.join(ROOT, "data"), data)
        state = os.path.join(work, "state")
        port = free_port()
        proc = subprocess.Popen([BINARY, "serve", "--data", data, "--addr", f"127.0.0.1:{port}",
                                 "--state", state, "--no-watch", "-q"],
                                stdout=subprocess.DEVNULL)
        wait_ready(port, proc)
        import json
        import urllib.request
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/attendees",
                                     headers={"Authorization-Token": TOKEN})
        first = json.load(urllib.request.urlopen(req))["data"][0]
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/event",
                                     headers={"Authorization-Token": TOKEN})
        price = json.load(urllib.request.urlopen(req))["data"][0]["tickets"][0]["prices"][0][
            "id_ticket_price"]
        checkin = os.path.join(work, "checkin.lua")
        with open(checkin, "w") as f:
            f.write(CHECKIN.format(token=TOKEN, code=first["checkin_code"]))

        # Each case right after its own run of the reference: the disk's sync time drifts with
        # whatever else the machine does, so a ratio only holds between neighbours.
        rows = []
        acknowledged = 0
        for c in [int(x) for x in args.connections.split(",")]:
            register = os.path.join(work, f"register-{c}.lua")
            with open(register, "w") as f:
                f.write(REGISTER.format(token=TOKEN, price=price, run=c))
            for kind, path, script in (("check-in", "checkin/attendees", checkin),
                                       ("registration", "attendees/create", register)):
                reference = fsync_loop(state, args.duration)
                r = wrk(f"http://127.0.0.1:{port}/api/v1/{path}", script, args.duration, c)
                r["reference"] = reference
                rows.append((f"{kind}, {c} conn", r))
                acknowledged += r["total"] - r["bad"]
        with open(os.path.join(state, "writes.jsonl"), "rb") as f:
            logged = sum(1 for _ in f)
        print(f"{'case':<24} {'writes/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'non-200':>7} "
              f"{'fsync loop/s':>12} {'its p50':>7} {'ratio':>7}")
        for name, r in rows:
            ref = r["reference"]
            print(f"{name:<24} {r['rps']:>9.0f} {r['p50']:>7.2f} {r['p99']:>7.2f} "
                  f"{r['bad']:>7} {ref['rps']:>12.0f} {ref['p50']:>7.2f} "
                  f"{r['rps'] / ref['rps']:>6.2f}x")
        print(f"acknowledged {acknowledged}, logged {logged}: "
              f"{'every acknowledged write is in the log' if logged >= acknowledged else 'MISSING'}")
    finally:
        if proc:
            proc.terminate()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
