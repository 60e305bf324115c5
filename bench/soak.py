#!/usr/bin/env python3
"""Soak: mixed reads and writes against one eventbox, with a reload every few seconds, for a
given time; samples memory, open files and latency every minute and fails on growth or on any
failed request.

    cargo build --release && python3 bench/soak.py [--minutes 30] [--connections 32]

What it does:
- copies the demo bundle (data/demo) into a temporary data folder and starts eventbox
  (target/release, or EVENTBOX_BIN) with `--state` in a temporary folder and the native watch;
- reads: `wrk -t1 -c<connections>` (keep-alive) cycling over eleven read endpoints (lists, one
  record by id, a page, a query, identity and `gzip, br` asked), one wrk run per sample period,
  so every period has its own latency percentiles (wrk's histogram, p99.9 from a Lua `done`
  hook); every answer must be 200;
- writes: `--writers` Python threads on keep-alive connections, paced to `--write-rate` writes
  per second in all, cycling registration (a new e-mail each), check-in and check-in at an
  activity; every answer is checked (status 200 and the documented body); a refused write is a
  failure. After each sample the bundle's writes are forgotten (`POST /_writes/reset`, itself
  checked), so memory measures leaks, not the writes kept on purpose (`--keep-writes` keeps
  them: then RSS grows with them by design and the memory bound is not applied);
- reloads: every `--reload-every` seconds `event.json` is rewritten (a new title, written
  aside and renamed into place); the watch reloads the bundle. Every reload must succeed
  (`eventbox_bundle_loads_total{result="error"}` stays 0) and at least half of those asked
  must have happened (debounced changes may merge);
- samples, every `--sample` seconds: VmRSS and VmHWM (/proc/PID/status), open files
  (/proc/PID/fd), threads, reloads, read req/s and p50/p99/p99.9/max, write count and p50/p99.

Bounds (the verdict; FAIL exits with status 1):
- memory: no sample's VmRSS more than `--max-rss-growth-mib` (default 32 MiB) above the first
  sample's (taken after one period of load, so allocator warm-up is not counted);
- open files: no sample more than `--max-fd-growth` (default 16) above the first sample's;
- errors: zero failed reads (non-200, socket errors, timeouts), zero failed writes, zero failed
  reloads, no panic in eventbox's log, eventbox still running at the end.

The client shares the machine's cores with the server: the latency columns are the load's, for
spotting drift over time, not a benchmark (bench/http_vs_nginx.py is).
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_vs_nginx import BINARY, ROOT, ensure_tools, free_port  # noqa: E402

TOKEN = "demo-token"

READS = """
local paths = {{ {paths} }}
local i = 0
request = function()
  i = i + 1
  local p = paths[(i % #paths) + 1]
  local headers = {{["Authorization-Token"] = "{token}"}}
  if i % 3 == 0 then headers["Accept-Encoding"] = "gzip, br" end
  return wrk.format("GET", p, headers)
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("SOAK %d %d %d %d %d %d %d %.1f %.1f %.1f %.1f\\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
"""


def percentile(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q / 100))]


def request(conn, method, path, body=None, headers=None):
    h = {"Authorization-Token": TOKEN}
    if body is not None:
        h["Content-Type"] = "application/json"
    h.update(headers or {})
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    return r.status, r.read()


class Writers:
    """Paced writes on keep-alive connections; every answer checked."""

    def __init__(self, port, n, rate, codes, attendee_ids, sessions, price):
        self.port, self.n, self.rate = port, n, rate
        self.codes, self.ids, self.sessions, self.price = codes, attendee_ids, sessions, price
        self.lock = threading.Lock()
        self.latencies = []  # ms, since the last take()
        self.done = 0
        self.failures = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(t,), daemon=True)
                        for t in range(n)]

    def start(self):
        for t in self.threads:
            t.start()

    def take(self):
        with self.lock:
            lat, self.latencies = self.latencies, []
            return lat

    def fail(self, what):
        with self.lock:
            self.failures.append(what)

    def run(self, tid):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        interval = self.n / self.rate
        next_at = time.monotonic()
        k = 0
        while not self.stop.is_set():
            k += 1
            kind = k % 3
            if kind == 0:
                path = "/api/v1/attendees/create"
                body = json.dumps({"name": f"Soak {tid} {k}",
                                   "email": f"soak-{tid}-{k}-{time.time_ns()}@example.org",
                                   "registration_confirmed": True,
                                   "registration": {"id_ticket_price": self.price, "price": 0}})
                expect = "Data entered successfully."
            elif kind == 1:
                path = "/api/v1/checkin/attendees"
                body = json.dumps([{"checkin_code": self.codes[k % len(self.codes)],
                                    "checkin": k % 2, "checkin_date": "2026-09-15T08:00:00"}])
                expect = "OK"
            else:
                path = "/api/v1/checkin/sessions"
                body = json.dumps([{"id_attendees": self.ids[k % len(self.ids)],
                                    "id_session": self.sessions[k % len(self.sessions)],
                                    "checkin": 1, "checkin_date": "2026-09-15T09:00:00"}])
                expect = "OK"
            t = time.monotonic()
            try:
                status, answer = request(conn, "POST", path, body=body)
                ms = (time.monotonic() - t) * 1000
                if status != 200 or json.loads(answer) != expect:
                    self.fail(f"{path}: {status} {answer[:200]!r}")
            except Exception as e:  # a broken connection is a failure too; reconnect
                ms = (time.monotonic() - t) * 1000
                self.fail(f"{path}: {type(e).__name__}: {e}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            with self.lock:
                self.latencies.append(ms)
                self.done += 1
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self.stop.wait(delay)
            else:
                next_at = time.monotonic()  # behind: do not burst to catch up


class Reloader:
    """Rewrites event.json every `every` seconds (written aside, renamed into place)."""

    def __init__(self, bundle, aside, every):
        self.path = os.path.join(bundle, "event.json")
        self.aside = aside
        with open(self.path, encoding="utf-8") as f:
            self.event = json.load(f)
        self.title = self.event["data"][0]["title"]
        self.every = every
        self.count = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.wait(self.every):
            self.count += 1
            self.event["data"][0]["title"] = f"{self.title} (soak {self.count})"
            tmp = os.path.join(self.aside, "event.json")
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self.event, f, ensure_ascii=False)
            os.replace(tmp, self.path)


def proc_sample(pid):
    with open(f"/proc/{pid}/status") as f:
        status = f.read()
    kib = lambda key: int(re.search(rf"{key}:\s+(\d+)", status).group(1))  # noqa: E731
    return {"rss": kib("VmRSS") / 1024, "hwm": kib("VmHWM") / 1024,
            "threads": kib("Threads"), "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def loads(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {"ok": 0, "error": 0}
    for result, n in re.findall(r'^eventbox_bundle_loads_total\{[^}]*result="(\w+)"[^}]*\}\s+(\d+)',
                                text, re.M):
        out[result] = out.get(result, 0) + int(n)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30, help="how long (default 30)")
    ap.add_argument("--sample", type=int, default=60, help="seconds between samples (default 60)")
    ap.add_argument("--connections", type=int, default=32, help="wrk read connections (32)")
    ap.add_argument("--writers", type=int, default=4, help="write threads (4)")
    ap.add_argument("--write-rate", type=float, default=200, help="writes/s in all (200)")
    ap.add_argument("--reload-every", type=float, default=5, help="seconds between reloads (5)")
    ap.add_argument("--max-rss-growth-mib", type=float, default=32)
    ap.add_argument("--max-fd-growth", type=int, default=16)
    ap.add_argument("--keep-writes", action="store_true",
                    help="never reset the writes (the memory bound is then not applied)")
    args = ap.parse_args()
    if not os.path.exists(BINARY):
        sys.exit("build it first: cargo build --release")
    ensure_tools()
    work = tempfile.mkdtemp(prefix="eventbox-soak-", dir=os.environ.get("BENCH_DIR"))
    proc = None
    stoppers = []
    try:
        data = os.path.join(work, "data")
        os.makedirs(data)
        bundle = os.path.join(data, "demo")
        shutil.copytree(os.path.join(ROOT, "data", "demo"), bundle)
        aside = os.path.join(work, "aside")
        os.makedirs(aside)
        port = free_port()
        log = open(os.path.join(work, "eventbox.log"), "w")
        proc = subprocess.Popen([BINARY, "serve", "--data", data, "--addr", f"127.0.0.1:{port}",
                                 "--state", os.path.join(work, "state"), "--log-level", "warn"],
                                stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                sys.exit(f"eventbox exited with {proc.returncode}")
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1).status == 200:
                    break
            except Exception:
                if time.monotonic() > deadline:
                    sys.exit("eventbox not ready")
                time.sleep(0.05)

        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        get = lambda path: json.loads(request(conn, "GET", path)[1])["data"]  # noqa: E731
        attendees = get("/api/v1/attendees")
        codes = [str(a["checkin_code"]) for a in attendees if a.get("checkin_code")]
        ids = [a["id_attendees"] for a in attendees]
        sessions = [s["id_session"] for s in get("/api/v1/session")]
        event = get("/api/v1/event")[0]
        price = event["tickets"][0]["prices"][0]["id_ticket_price"]
        paths = ["/api/v1/event", "/api/v1/payments", "/api/v1/attendees",
                 f"/api/v1/attendees/{ids[0]}", "/api/v1/attendees?page=2&per_page=5",
                 "/api/v1/session", f"/api/v1/session/{sessions[0]}",
                 "/api/v1/session/getschedule", "/api/v1/speaker", "/api/v1/certificates",
                 "/api/v1/submission/list"]
        for p in paths:
            status, _ = request(conn, "GET", p)
            if status != 200:
                sys.exit(f"{p} answers {status} before the soak: fix the path list")
        conn.close()
        script = os.path.join(work, "reads.lua")
        with open(script, "w") as f:
            f.write(READS.format(paths=", ".join(f'"{p}"' for p in paths), token=TOKEN))

        writers = Writers(port, args.writers, args.write_rate, codes, ids, sessions, price)
        reloader = Reloader(bundle, aside, args.reload_every)
        stoppers = [writers.stop, reloader.stop]
        writers.start()
        reloader.thread.start()

        periods = max(1, round(args.minutes * 60 / args.sample))
        print(f"soak: {periods} periods of {args.sample} s, {args.connections} read connections, "
              f"{args.write_rate:g} writes/s on {args.writers} connections, a reload every "
              f"{args.reload_every:g} s; eventbox pid {proc.pid}, binary {BINARY}", flush=True)
        header = (f"{'min':>5} {'RSS MiB':>8} {'HWM MiB':>8} {'fds':>4} {'thr':>4} {'reloads':>7} "
                  f"{'read/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'p99.9 ms':>8} {'max ms':>7} "
                  f"{'bad rd':>6} {'writes':>7} {'w p50':>6} {'w p99':>6} {'bad wr':>6} {'load1':>5}")
        print(header, flush=True)
        rows = []
        read_failures = 0
        start = time.monotonic()
        for n in range(periods):
            out = subprocess.run(["wrk", "-t1", f"-c{args.connections}", f"-d{args.sample}s",
                                  "--timeout", "10s", "-s", script, f"http://127.0.0.1:{port}"],
                                 capture_output=True, text=True).stdout
            m = re.search(r"^SOAK (.*)$", out, re.M)
            if not m:
                sys.exit(f"wrk gave no summary:\n{out}")
            f = m.group(1).split()
            requests, duration_us = int(f[0]), int(f[1])
            bad_reads = sum(int(x) for x in f[2:7])
            read_failures += bad_reads
            p50, p99, p999, pmax = (float(x) / 1000 for x in f[7:11])
            wlat = writers.take()
            if not args.keep_writes:
                reset = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                status, body = request(reset, "POST", "/_writes/reset")
                reset.close()
                if status != 204:
                    writers.fail(f"/_writes/reset: {status} {body[:200]!r}")
            if proc.poll() is not None:
                print(f"eventbox exited with {proc.returncode}", flush=True)
                break
            s = proc_sample(proc.pid)
            s.update(loads=loads(port), rps=requests / (duration_us / 1e6), p50=p50, p99=p99,
                     p999=p999, max=pmax, bad_reads=bad_reads, writes=len(wlat),
                     wp50=percentile(wlat, 50), wp99=percentile(wlat, 99),
                     bad_writes=len(writers.failures), load1=os.getloadavg()[0],
                     minute=(time.monotonic() - start) / 60)
            rows.append(s)
            print(f"{s['minute']:>5.1f} {s['rss']:>8.1f} {s['hwm']:>8.1f} {s['fds']:>4} "
                  f"{s['threads']:>4} {s['loads']['ok']:>7} {s['rps']:>8.0f} {p50:>7.2f} "
                  f"{p99:>7.2f} {p999:>8.2f} {pmax:>7.1f} {bad_reads:>6} {len(wlat):>7} "
                  f"{s['wp50']:>6.2f} {s['wp99']:>6.2f} {s['bad_writes']:>6} {s['load1']:>5.2f}",
                  flush=True)
        for e in stoppers:
            e.set()
        for t in writers.threads:
            t.join(timeout=40)
        reloader.thread.join(timeout=10)

        problems = []
        if proc.poll() is not None:
            problems.append(f"eventbox exited with {proc.returncode}")
        if not rows:
            problems.append("no sample taken")
        else:
            first, last = rows[0], rows[-1]
            top_rss = max(r["rss"] for r in rows)
            top_fds = max(r["fds"] for r in rows)
            if not args.keep_writes and top_rss > first["rss"] + args.max_rss_growth_mib:
                problems.append(f"RSS grew from {first['rss']:.1f} to {top_rss:.1f} MiB "
                                f"(bound +{args.max_rss_growth_mib:g} MiB)")
            if top_fds > first["fds"] + args.max_fd_growth:
                problems.append(f"open files grew from {first['fds']} to {top_fds} "
                                f"(bound +{args.max_fd_growth})")
            if last["loads"]["error"]:
                problems.append(f"{last['loads']['error']} reloads failed")
            reloads = last["loads"]["ok"] - 1  # the first load is the start
            if reloads < reloader.count / 2:
                problems.append(f"only {reloads} reloads for {reloader.count} rewrites")
        if read_failures:
            problems.append(f"{read_failures} failed reads")
        if writers.failures:
            problems.append(f"{len(writers.failures)} failed writes, first: {writers.failures[0]}")
        log.flush()
        with open(log.name) as f:
            text = f.read()
        if "panic" in text:
            problems.append("eventbox's log has a panic")
        total_writes = writers.done
        total_reads = sum(r["rps"] * args.sample for r in rows)
        if rows:
            print(f"\nRSS {rows[0]['rss']:.1f} → {rows[-1]['rss']:.1f} MiB (max "
                  f"{max(r['rss'] for r in rows):.1f}, bound +{args.max_rss_growth_mib:g}); open "
                  f"files {rows[0]['fds']} → {rows[-1]['fds']} (bound +{args.max_fd_growth}); "
                  f"about {total_reads / 1e6:.1f} M reads, {total_writes} writes, "
                  f"{rows[-1]['loads']['ok'] - 1} reloads for {reloader.count} rewrites; "
                  f"log: {len(text.splitlines())} lines at warn and above")
        if problems:
            print("FAIL: " + "; ".join(problems))
            return 1
        print("PASS: no growth beyond the bounds, no failed read, write or reload")
        return 0
    finally:
        for e in stoppers:
            e.set()
        if proc and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
