#!/usr/bin/env python3
"""Reload latency: how long after a file is written its change is served.

Starts the release build of eventbox on a temporary copy of the demo bundle, then makes N edits
(each writes event.json in place with a new title) and measures, for each, the time from the end
of the write to the first answer that shows the new title (polling every 2 ms on one keep-alive
connection). Prints the distribution per watch mode. Uses only the standard library.

    cargo build --release && python3 bench/reload_latency.py [--edits 50] [--modes native,poll]
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "target", "release", "eventbox")


def start(data, mode, poll_interval):
    args = [BINARY, "--data", data, "--addr", "127.0.0.1:0"]
    args += ["--watch", "poll", "--poll-interval", poll_interval] if mode == "poll" else ["--watch", mode]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "RUST_LOG": "warn"})
    line = proc.stdout.readline().strip()
    host, port = line.rsplit("/", 1)[1].split(":")
    return proc, host, int(port)


def title(conn):
    conn.request("GET", "/api/v1/event", headers={"Authorization-Token": "demo-token"})
    res = conn.getresponse()
    body = res.read()
    if res.status != 200:
        return None
    return json.loads(body)["data"][0]["title"]


def measure(mode, edits, poll_interval):
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(os.path.join(ROOT, "data", "demo"), os.path.join(tmp, "demo"))
        event_path = os.path.join(tmp, "demo", "event.json")
        with open(event_path, encoding="utf-8") as f:
            event = json.load(f)
        proc, host, port = start(tmp, mode, poll_interval)
        try:
            conn = http.client.HTTPConnection(host, port, timeout=5)
            deadline = time.monotonic() + 10
            while title(conn) is None:
                if time.monotonic() > deadline:
                    sys.exit("eventbox did not become ready")
                time.sleep(0.01)
            latencies = []
            for i in range(edits):
                wanted = f"Edição {mode} {i}"
                event["data"][0]["title"] = wanted
                text = json.dumps(event, ensure_ascii=False)
                with open(event_path, "w", encoding="utf-8") as f:
                    f.write(text)
                written = time.monotonic()
                while title(conn) != wanted:
                    if time.monotonic() - written > 5:
                        sys.exit(f"{mode}: edit {i} not served within 5 s")
                    time.sleep(0.002)
                latencies.append((time.monotonic() - written) * 1000)
                time.sleep(0.05)  # let the next edit be a separate change
            return latencies
        finally:
            proc.terminate()
            proc.wait(timeout=15)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--edits", type=int, default=50)
    p.add_argument("--modes", default="native,poll")
    p.add_argument("--poll-interval", default="100ms")
    args = p.parse_args()
    if not os.path.exists(BINARY):
        sys.exit("build it first: cargo build --release")
    print(f"{'mode':<22} {'edits':>5} {'median ms':>10} {'p90 ms':>8} {'max ms':>8}")
    for mode in args.modes.split(","):
        lat = sorted(measure(mode, args.edits, args.poll_interval))
        label = f"poll ({args.poll_interval})" if mode == "poll" else mode
        p90 = lat[int(0.9 * (len(lat) - 1))]
        print(f"{label:<22} {len(lat):>5} {statistics.median(lat):>10.1f} {p90:>8.1f} {max(lat):>8.1f}")


if __name__ == "__main__":
    main()
