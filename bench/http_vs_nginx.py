#!/usr/bin/env python3
"""HTTP benchmark: eventbox against nginx serving the same bytes, in one run, interleaved.

    cargo build --release && python3 bench/http_vs_nginx.py [--passes 3] [--duration 10] [--warmup 3]
        [--connections 32,256] [--only LABEL]

What it does:
- makes a bundle from the shared deterministic fixture generator (../shared/bench/gen_fixture.py:
  an event body of about 5 KB and a payments body of about 525 KB, 1000 payments, seed 42);
- starts eventbox (target/release) and two nginx instances (Debian's nginx-light, installed with
  wrk if missing): one serving the files with sendfile and the token checked by a `map` (the
  physical-limit reference), one with `gzip on` (compressing on the fly), all on loopback;
- for each pass, for each case, for each connection count (`--connections`, default 32),
  measures eventbox and nginx one after the other (eventbox first in odd passes, nginx first in
  even ones) with `wrk -t1 -c<N> --latency` (keep-alive)
  after a warm-up: small and large body, without and with `Accept-Encoding: gzip, br`; p99.9
  and the maximum come from wrk's own histogram through a Lua `done` hook;
- prints requests/s, p50, p99, p99.9, server CPU per request (from /proc, the server's process
  tree only), peak RSS, and the eventbox/nginx ratio of each; medians over the passes; then the
  same medians as a markdown table (req/s, p99, p99.9 and their ratios) ready to paste into
  docs/performance.md.

Client and server share the machine's cores: compare ratios within one run, not absolute figures
across runs. Speed is shown here, never in tests.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.environ.get("EVENTBOX_BIN", os.path.join(ROOT, "target", "release", "eventbox"))
GEN = os.path.join(ROOT, "..", "shared", "bench", "gen_fixture.py")
TOKEN = "demo"
HZ = os.sysconf("SC_CLK_TCK")

# wrk's `--latency` lists p50..p99 only; this prints the tail from the same histogram (µs).
TAIL_LUA = """
done = function(summary, latency, requests)
  io.write(string.format("TAIL %.1f %.1f %.1f\\n",
    latency:percentile(99.9), latency:percentile(99.99), latency.max))
end
"""

NGINX_CONF = """
worker_processes 2;
daemon off;
pid {run}/nginx.pid;
error_log {run}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    server_tokens off;
    etag off;
    {gzip}
    client_body_temp_path {run}/cb; proxy_temp_path {run}/px; fastcgi_temp_path {run}/fc;
    uwsgi_temp_path {run}/uw; scgi_temp_path {run}/sc;
    types {{ application/json json; }}
    default_type application/json;
    charset_types application/json;
    charset utf-8;
    map $http_authorization_token $auth_ok {{ default 0; "{token}" 1; }}
    server {{
        listen 127.0.0.1:{port} reuseport;
        root {fix};
        location ~ ^/api/v1/(?<res>event|payments)$ {{
            if ($auth_ok = 0) {{ return 401 '{{"error":"unauthorized"}}'; }}
            try_files /$res.json =404;
        }}
    }}
}}
"""
GZIP_ON = "gzip on; gzip_types application/json; gzip_min_length 1000; gzip_vary on;"


def ensure_tools():
    missing = [t for t in ("wrk", "nginx") if shutil.which(t) is None]
    if missing:
        print(f"installing {', '.join(missing)} (Debian packages wrk, nginx-light)...", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk", "nginx-light"], check=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(name, port, proc):
    deadline = time.monotonic() + 30
    url = f"http://127.0.0.1:{port}/api/v1/event"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{name} on port {port} exited with {proc.returncode}")
        try:
            req = urllib.request.Request(url, headers={"Authorization-Token": TOKEN})
            if urllib.request.urlopen(req, timeout=1).status == 200:
                return
        except Exception:
            time.sleep(0.05)
    sys.exit(f"{name} on port {port} not ready")


def tree(pid):
    out = [pid]
    for child in subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                                text=True).stdout.split():
        out += tree(int(child))
    return out


def ticks(pid):
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime
        except OSError:
            pass
    return total


def peak_rss_kib(pid):
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                total += int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1))
        except (OSError, AttributeError):
            pass
    return total


def to_ms(token):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", token)
    if not m:
        return float("nan")
    v, unit = float(m.group(1)), m.group(2)
    return {"us": v / 1000, "ms": v, "s": v * 1000, "m": v * 60000}[unit]


def wrk(url, seconds, headers, connections, script=None):
    args = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-H",
            f"Authorization-Token: {TOKEN}"]
    for h in headers:
        args += ["-H", h]
    if script:
        args += ["--latency", "-s", script]
    return subprocess.run(args + [url], capture_output=True, text=True).stdout


def measure(pid, url, headers, duration, warmup, connections, script):
    wrk(url, warmup, headers, connections)
    t0, s0 = ticks(pid), time.monotonic()
    out = wrk(url, duration, headers, connections, script)
    t1, s1 = ticks(pid), time.monotonic()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = to_ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
    p99 = to_ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
    p999, p9999, pmax = (float(x) / 1000 for x in
                         re.search(r"^TAIL (\S+) (\S+) (\S+)", out, re.M).groups())
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    requests = rps * (s1 - s0)
    cpu_us = (t1 - t0) / HZ / max(requests, 1) * 1e6
    return {"rps": rps, "p50": p50, "p99": p99, "p999": p999, "p9999": p9999, "max": pmax,
            "cpu_us": cpu_us,
            "bad": int(bad.group(1)) if bad else 0, "errors": errors.group(0) if errors else ""}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--only", default="", help="run only the cases whose label contains this")
    ap.add_argument("--connections", default="32",
                    help="wrk connection counts, comma-separated (e.g. 32,256)")
    args = ap.parse_args()
    if not os.path.exists(BINARY):
        sys.exit("build it first: cargo build --release")
    if not os.path.exists(GEN):
        sys.exit(f"fixture generator not found: {GEN}")
    ensure_tools()
    conns = [int(c) for c in args.connections.split(",")]

    work = tempfile.mkdtemp(prefix="eventbox-bench-")
    os.chmod(work, 0o755)  # nginx workers run as nobody and must read the fixture
    procs = []
    try:
        fix = os.path.join(work, "fixture")
        subprocess.run([sys.executable, GEN, fix], check=True, stdout=subprocess.DEVNULL)
        bundle = os.path.join(work, "data", "bench")
        os.makedirs(bundle)
        for name in ("event", "payments", "submission", "hotsite"):
            shutil.copy(os.path.join(fix, f"{name}.json"), bundle)
        with open(os.path.join(bundle, "bundle.toml"), "w") as f:
            f.write(f'tokens = ["{TOKEN}"]\n')
        sizes = {n: os.path.getsize(os.path.join(fix, f"{n}.json")) for n in ("event", "payments")}

        ports = {}
        for name, gzip in (("nginx", ""), ("nginx-gzip", GZIP_ON)):
            run = os.path.join(work, name)
            os.makedirs(run)
            port = free_port()
            conf = os.path.join(run, "nginx.conf")
            with open(conf, "w") as f:
                f.write(NGINX_CONF.format(run=run, port=port, fix=fix, token=TOKEN, gzip=gzip))
            p = subprocess.Popen(["nginx", "-c", conf, "-p", run], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
            procs.append(p)
            ports[name] = (port, p)
        port = free_port()
        # One client address opens every connection: lift the per-address limit (64) when the
        # run needs more (only then, so that older builds without the flag run the default case).
        command = [BINARY, "--data", os.path.join(work, "data"), "--addr", f"127.0.0.1:{port}", "--no-watch"]
        if max(conns) > 64:
            command += ["--max-connections-per-ip", str(max(conns) + 64)]
        p = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**os.environ, "RUST_LOG": "warn"})
        procs.append(p)
        ports["eventbox"] = (port, p)
        for name, (port, p) in ports.items():
            wait_ready(name, port, p)

        compressed = "Accept-Encoding: gzip, br"
        cases = [
            (f"event {sizes['event'] / 1000:.1f} KB", "event", [], "nginx"),
            (f"payments {sizes['payments'] / 1000:.0f} KB", "payments", [], "nginx"),
            ("event, gzip/br asked", "event", [compressed], "nginx-gzip"),
            ("payments, gzip/br asked", "payments", [compressed], "nginx-gzip"),
        ]
        cases = [(f"{label}, {c} conn" if len(conns) > 1 else label, ep, headers, reference, c)
                 for label, ep, headers, reference in cases if args.only in label for c in conns]
        script = os.path.join(work, "tail.lua")
        with open(script, "w") as f:
            f.write(TAIL_LUA)
        results = {}
        for n in range(args.passes):
            print(f"pass {n + 1}/{args.passes}...", file=sys.stderr)
            for label, ep, headers, reference, c in cases:
                # Who goes first alternates: on a shared machine the order alone moves figures.
                order = ("eventbox", reference) if n % 2 == 0 else (reference, "eventbox")
                for server in order:
                    port, p = ports[server]
                    r = measure(p.pid, f"http://127.0.0.1:{port}/api/v1/{ep}", headers,
                                args.duration, args.warmup, c, script)
                    results.setdefault((label, server), []).append(r)

        def med(label, server, key):
            return statistics.median(r[key] for r in results[(label, server)])

        def ratio(label, reference, key):
            return med(label, "eventbox", key) / med(label, reference, key)

        w = max(26, max(len(c[0]) for c in cases))
        print(f"\n{'case':<{w}} {'server':<11} {'req/s':>9} {'p50 ms':>7} {'p99 ms':>7} "
              f"{'p99.9 ms':>8} {'max ms':>7} {'CPU µs/req':>10} {'peak RSS MiB':>12}")
        for label, _, _, reference, _ in cases:
            for server in ("eventbox", reference):
                pid = ports[server][1].pid
                print(f"{label:<{w}} {server:<11} {med(label, server, 'rps'):>9.0f} "
                      f"{med(label, server, 'p50'):>7.2f} {med(label, server, 'p99'):>7.2f} "
                      f"{med(label, server, 'p999'):>8.2f} {med(label, server, 'max'):>7.1f} "
                      f"{med(label, server, 'cpu_us'):>10.1f} {peak_rss_kib(pid) / 1024:>12.1f}")
            r = lambda key: ratio(label, reference, key)  # noqa: E731
            print(f"{'':<{w}} {'ratio':<11} {r('rps'):>8.2f}x {r('p50'):>6.2f}x "
                  f"{r('p99'):>6.2f}x {r('p999'):>7.2f}x {r('max'):>6.2f}x {r('cpu_us'):>9.2f}x")
        load = os.getloadavg()
        print(f"\nMarkdown (medians of {args.passes} passes of {args.duration} s, `wrk -t1`, "
              f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} at the end):\n")
        print("| case | conns | eventbox req/s | nginx req/s | ratio | eventbox p99 ms | "
              "nginx p99 ms | ratio | eventbox p99.9 ms | nginx p99.9 ms | ratio |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for label, _, _, reference, c in cases:
            base = label.rsplit(f", {c} conn", 1)[0]
            m = lambda server, key: med(label, server, key)  # noqa: E731
            n = lambda v: f"{v:,.0f}".replace(",", " ")  # noqa: E731
            print(f"| {base} | {c} | {n(m('eventbox', 'rps'))} | {n(m(reference, 'rps'))} | "
                  f"{ratio(label, reference, 'rps'):.2f}× | {m('eventbox', 'p99'):.2f} | "
                  f"{m(reference, 'p99'):.2f} | {ratio(label, reference, 'p99'):.2f}× | "
                  f"{m('eventbox', 'p999'):.2f} | {m(reference, 'p999'):.2f} | "
                  f"{ratio(label, reference, 'p999'):.2f}× |")
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


if __name__ == "__main__":
    main()
