#!/usr/bin/env python3
"""Reads of a large event's participants and programme: eventbox against nginx serving the same
bytes, in one run, interleaved.

    cargo build --release && python3 bench/programme_vs_nginx.py [--passes 3] [--duration 10]

What it does:
- `eventbox gen --payments 17770 --seed 1`: an event of about 20,000 participants and its
  programme (activities over the event's days, speakers, certificates);
- starts eventbox (target/release) on it, asks it for `/api/v1/attendees` and
  `/api/v1/session/getschedule`, and writes those exact bytes as the files nginx serves (with the
  token checked by a `map`, sendfile on: the physical-limit reference);
- for each pass, measures eventbox then nginx with `wrk -t1 -c32 --latency` after a warm-up, on
  the participants (identity), the programme (identity), one participant by id and a page of
  100 (eventbox only: nginx has no such answer; shown for their cost);
- prints requests/s, p50, p99, server CPU µs per request and the eventbox/nginx ratios (medians).

Client and server share the machine's two cores: compare ratios within a run, not across runs.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_vs_nginx import (BINARY, NGINX_CONF, ensure_tools, free_port, measure,  # noqa: E402
                           peak_rss_kib, wait_ready)

TOKEN = "demo"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--payments", type=int, default=17770)
    args = ap.parse_args()
    if not os.path.exists(BINARY):
        sys.exit("build it first: cargo build --release")
    ensure_tools()
    work = tempfile.mkdtemp(prefix="eventbox-programme-")
    os.chmod(work, 0o755)
    procs = []
    try:
        bundle = os.path.join(work, "data", "big")
        subprocess.run([BINARY, "gen", "--into", bundle, "--payments", str(args.payments),
                        "--seed", "1", "--token", TOKEN], check=True, stdout=subprocess.DEVNULL)
        port = free_port()
        eb = subprocess.Popen([BINARY, "--data", os.path.join(work, "data"), "--addr",
                               f"127.0.0.1:{port}", "--no-watch"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "warn"})
        procs.append(eb)
        wait_ready("eventbox", port, eb)

        def fetch(path):
            req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                         headers={"Authorization-Token": TOKEN})
            return urllib.request.urlopen(req).read()

        fix = os.path.join(work, "fixture")
        os.makedirs(fix)
        attendees = fetch("/api/v1/attendees")
        schedule = fetch("/api/v1/session/getschedule")
        with open(os.path.join(fix, "attendees.json"), "wb") as f:
            f.write(attendees)
        with open(os.path.join(fix, "getschedule.json"), "wb") as f:
            f.write(schedule)
        people = json.loads(attendees)["data"]
        some_id = people[len(people) // 2]["id_attendees"]
        run = os.path.join(work, "nginx")
        os.makedirs(run)
        nport = free_port()
        conf = NGINX_CONF.format(run=run, port=nport, fix=fix, token=TOKEN, gzip="").replace(
            "location ~ ^/api/v1/(?<res>event|payments)$",
            "location ~ ^/api/v1/(?:session/)?(?<res>attendees|getschedule)$")
        with open(os.path.join(run, "nginx.conf"), "w") as f:
            f.write(conf)
        ng = subprocess.Popen(["nginx", "-c", os.path.join(run, "nginx.conf"), "-p", run],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
        procs.append(ng)
        wait_ready_path(nport, ng, "/api/v1/attendees")
        if fetch_from(nport, "/api/v1/session/getschedule") != schedule:
            sys.exit("nginx does not serve the same bytes")
        servers = {"eventbox": (port, eb), "nginx": (nport, ng)}

        cases = [
            (f"attendees {len(attendees) / 1e6:.1f} MB ({len(people)})", "/api/v1/attendees",
             ("eventbox", "nginx")),
            (f"getschedule {len(schedule) / 1e3:.0f} KB", "/api/v1/session/getschedule",
             ("eventbox", "nginx")),
            ("one attendee by id", f"/api/v1/attendees/{some_id}", ("eventbox",)),
            ("a page of 100", "/api/v1/attendees?page=50&per_page=100", ("eventbox",)),
        ]
        results = {}
        for n in range(args.passes):
            print(f"pass {n + 1}/{args.passes}...", file=sys.stderr)
            for label, path, who in cases:
                for server in who:
                    sport, p = servers[server]
                    r = measure(p.pid, f"http://127.0.0.1:{sport}{path}", [], args.duration,
                                args.warmup)
                    results.setdefault((label, server), []).append(r)

        def med(label, server, key):
            return statistics.median(r[key] for r in results[(label, server)])

        print(f"\n{'case':<32} {'server':<9} {'req/s':>9} {'p50 ms':>7} {'p99 ms':>7} "
              f"{'CPU µs/req':>10}")
        for label, _, who in cases:
            for server in who:
                print(f"{label:<32} {server:<9} {med(label, server, 'rps'):>9.0f} "
                      f"{med(label, server, 'p50'):>7.2f} {med(label, server, 'p99'):>7.2f} "
                      f"{med(label, server, 'cpu_us'):>10.1f}")
            if len(who) == 2:
                ratio = lambda key: med(label, "eventbox", key) / med(label, "nginx", key)
                print(f"{'':<32} {'ratio':<9} {ratio('rps'):>8.2f}x {ratio('p50'):>6.2f}x "
                      f"{ratio('p99'):>6.2f}x {ratio('cpu_us'):>9.2f}x")
        print(f"peak RSS: eventbox {peak_rss_kib(eb.pid) / 1024:.1f} MiB, "
              f"nginx {peak_rss_kib(ng.pid) / 1024:.1f} MiB")
        bad = [(k, r) for k, rs in results.items() for r in rs if r["bad"] or r["errors"]]
        for (label, server), r in bad:
            print(f"warning: {server} {label}: {r['bad']} non-2xx, {r['errors']}")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


def fetch_from(port, path):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 headers={"Authorization-Token": TOKEN})
    return urllib.request.urlopen(req).read()


def wait_ready_path(port, proc, path):
    import time
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"nginx exited with {proc.returncode}")
        try:
            fetch_from(port, path)
            return
        except Exception:
            time.sleep(0.05)
    sys.exit("nginx not ready")


if __name__ == "__main__":
    main()
