#!/usr/bin/env python3
"""Scale run: a bundle of 200,000 payments (about 100 MB of JSON).

    cargo build --release && python3 bench/scale.py [--payments 200000] [--duration 5] [--rounds 4]
        [--reload changed|same] [--write rename|in-place] [--binary path/to/another/eventbox]

Measures, with the release build of eventbox:
- the time from process start to `/readyz` answering 200;
- peak RSS (VmHWM) after the load and the background compression of the large body, and RSS
  two seconds later (settled), as multiples of the bundle's bytes on disk;
- requests/s on the event endpoint (wrk, 32 connections) while the bundle is reloaded every
  second (payments.json rewritten, which the watcher picks up), against the same load without
  reloads: windows of `--duration` seconds, quiet and reloading in turn, `--rounds` pairs (which
  goes first alternates), so that the machine's drift (single 15 s runs of one build moved by a
  fifth) falls on both sides alike; the same file is written every second in both kinds of
  window, in the quiet ones into a folder eventbox does not read (writing 100 MB takes CPU on
  the shared cores too). Printed: the ratio of the windows' summed requests/s, each round's
  ratio, how many bundle loads the server counted for the reloading windows, the failed
  requests (non-2xx, socket errors), and the peak RSS after those reloads.
  `--reload changed` (the default) alternates two versions that differ in one payment, so every
  reload reads and hashes the whole file, and decodes, prepares and compresses the part that
  changed; `--reload same` rewrites the same bytes (which a reload recognises and shares: only
  the digest is computed). `--write in-place` rewrites the file as cp does instead of renaming
  a temporary file over it;
- the CPU time (user and system) the server spends on a reload without requests, over eight
  reloads 1.5 s apart.
Uses ../shared/bench/gen_fixture.py for the data (deterministic) and wrk (Debian package).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "target", "release", "eventbox")
GEN = os.path.join(ROOT, "..", "shared", "bench", "gen_fixture.py")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(url):
    try:
        return urllib.request.urlopen(url, timeout=2).status
    except Exception as e:
        return getattr(e, "code", None)


def compressed(url):
    req = urllib.request.Request(url, method="HEAD", headers={
        "Authorization-Token": "demo", "Accept-Encoding": "br, identity;q=0"})
    return status(req) == 200


def loads(base):
    """Bundle loads published with no error so far (the server's own counter)."""
    text = urllib.request.urlopen(f"{base}/metrics", timeout=5).read().decode()
    return int(float(re.search(r'^eventbox_bundle_loads_total\{result="ok"\} (\S+)', text, re.M).group(1)))


def vm(pid, key):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(rf"{key}:\s+(\d+)", f.read()).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--payments", type=int, default=200_000)
    ap.add_argument("--duration", type=int, default=5, help="seconds of each load window")
    ap.add_argument("--rounds", type=int, default=4, help="pairs of windows, quiet then reloading")
    ap.add_argument("--reload", choices=("changed", "same"), default="changed")
    ap.add_argument("--write", choices=("rename", "in-place"), default="rename",
                    help="write a temporary file and rename it over payments.json (as pull and "
                         "careful tools do), or rewrite payments.json in place (as cp does: the "
                         "watcher may see it half-written)")
    ap.add_argument("--binary", default=BINARY, help="the eventbox to run (another build, to compare)")
    args = ap.parse_args()
    for needed, hint in ((args.binary, "cargo build --release"), (GEN, "the shared bench folder")):
        if not os.path.exists(needed):
            sys.exit(f"missing {needed} ({hint})")
    if shutil.which("wrk") is None:
        sys.exit("wrk is missing: apt-get install wrk")

    work = tempfile.mkdtemp(prefix="eventbox-scale-")
    proc = None
    try:
        fix = os.path.join(work, "fixture")
        print(f"generating {args.payments} payments...", file=sys.stderr)
        subprocess.run([sys.executable, GEN, fix, "--payments", str(args.payments)], check=True,
                       stdout=subprocess.DEVNULL)
        bundle = os.path.join(work, "data", "big")
        os.makedirs(bundle)
        for name in ("event", "payments", "submission", "hotsite"):
            shutil.copy(os.path.join(fix, f"{name}.json"), bundle)
        with open(os.path.join(bundle, "bundle.toml"), "w") as f:
            f.write('tokens = ["demo"]\n')
        disk = sum(os.path.getsize(os.path.join(bundle, n)) for n in os.listdir(bundle))

        port = free_port()
        base = f"http://127.0.0.1:{port}"
        started = time.monotonic()
        proc = subprocess.Popen([args.binary, "--data", os.path.join(work, "data"), "--addr", f"127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "RUST_LOG": "warn"})
        while status(f"{base}/readyz") != 200:
            if proc.poll() is not None:
                sys.exit(f"eventbox exited with {proc.returncode}")
            if time.monotonic() - started > 120:
                sys.exit("not ready after 120 s")
            time.sleep(0.01)
        ready = time.monotonic() - started
        # The compressed variants of the large body are made in the background once served; a
        # request refusing identity answers 503 until they exist, so it tells when they do.
        while not compressed(f"{base}/api/v1/payments"):
            if time.monotonic() - started > 120:
                sys.exit("compressed variants not made after 120 s")
            time.sleep(0.05)
        variants = time.monotonic() - started
        rss_ready = vm(proc.pid, "VmHWM") * 1024
        # Steady: what stays once the transient memory of the load and the compression is
        # returned (jemalloc gives freed pages back within a second).
        time.sleep(2)
        rss_steady = vm(proc.pid, "VmRSS") * 1024

        payments = os.path.join(bundle, "payments.json")
        with open(payments, "rb") as f:
            payload = f.read()
        versions = [payload]
        if args.reload == "changed":
            # The same size, other bytes: one payment's note ends in "!" instead of ".".
            note = b'"note_payment":"Pagamento confirmado manualmente.'
            if note not in payload:
                sys.exit("the fixture has no payment note to change")
            versions.append(payload.replace(note, note[:-1] + b"!", 1))
        written = {}

        # The quiet windows write the same files at the same rate into a folder eventbox does
        # not read, so that the two kinds of window differ only in eventbox's reloads (writing
        # 100 MB a second takes CPU of its own on the shared cores).
        elsewhere = os.path.join(work, "elsewhere")
        os.makedirs(elsewhere)

        def write(n, folder=bundle):
            final = os.path.join(folder, "payments.json")
            target = final if args.write == "in-place" else os.path.join(folder, ".payments.tmp")
            with open(target, "wb") as f:
                f.write(versions[n % len(versions)])
            if target != final:
                os.rename(target, final)

        def rewrite(stop, folder, failed):
            try:
                while True:
                    written[folder] = written.get(folder, 0) + 1
                    write(written[folder], folder)
                    if stop.wait(1.0):
                        return
            except OSError as e:
                failed.append(e)

        def windowed(folder):
            """wrk's output for one window while `folder` is rewritten every second (the first
            write as the window starts)."""
            stop, failed = threading.Event(), []
            writer = threading.Thread(target=rewrite, args=(stop, folder, failed))
            writer.start()
            try:
                return load()
            finally:
                stop.set()
                writer.join()
                if failed:
                    sys.exit(f"writing {folder} failed: {failed[0]}")

        # CPU the server spends on a reload, without requests: eight reloads 1.5 s apart.
        def cpu_seconds():
            with open(f"/proc/{proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        before = cpu_seconds()
        for n in range(1, 9):
            write(n)
            time.sleep(1.5)
        per_reload = (cpu_seconds() - before) / 8

        def load():
            run = subprocess.run(["wrk", "-t1", "-c32", f"-d{args.duration}s", "-H",
                                  "Authorization-Token: demo", "--latency", f"{base}/api/v1/event"],
                                 capture_output=True, text=True)
            if run.returncode != 0 or "Requests/sec" not in run.stdout:
                sys.exit(f"wrk failed ({run.returncode}): {run.stderr.strip() or run.stdout.strip()}")
            return run.stdout

        def rps(out):
            return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))

        def failures(out):
            non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
            sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
            return (int(non2xx.group(1)) if non2xx else 0) + (sum(map(int, sock.groups())) if sock else 0)

        # The reference, the same load without reloads, in the same run: quiet and reloading
        # windows in turn (which goes first alternates by round), the same files written in both.
        quiet, busy, failed, published, p99s = [], [], 0, 0, []
        for n in range(args.rounds):
            for reloading in ((False, True) if n % 2 == 0 else (True, False)):
                loads_before = loads(base) if reloading else 0
                out = windowed(bundle if reloading else elsewhere)
                failed += failures(out)
                if reloading:
                    busy.append(rps(out))
                    p99s.append(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
                    # The last write's reload ends after the window: counted with it.
                    time.sleep(1)
                    published += loads(base) - loads_before
                else:
                    quiet.append(rps(out))
                    time.sleep(1)
        rss_after = vm(proc.pid, "VmHWM") * 1024
        rss_now = vm(proc.pid, "VmRSS") * 1024

        mib = 1024 * 1024
        print(f"bundle on disk:            {disk / mib:.1f} MiB ({args.payments} payments)")
        print(f"start to ready:            {ready:.2f} s")
        print(f"compressed variants made:  {variants:.2f} s after start")
        print(f"peak RSS after load:       {rss_ready / mib:.1f} MiB = {rss_ready / disk:.2f}x the bytes on disk")
        print(f"RSS once settled:          {rss_steady / mib:.1f} MiB = {rss_steady / disk:.2f}x the bytes on disk")
        pairs = " ".join(f"{b / q:.2f}" for q, b in zip(quiet, busy))
        print(f"event endpoint, reloading: {sum(busy) / len(busy):.0f} req/s, p99 {' '.join(p99s)}; "
              f"{written.get(bundle, 0)} writes ({args.reload} bytes, {args.write}), {published} bundle loads (the server's count)")
        print(f"  without reloads:         {sum(quiet) / len(quiet):.0f} req/s; reloading/quiet = "
              f"{sum(busy) / sum(quiet):.2f} (by round: {pairs})")
        print(f"failed requests:           {failed} (non-2xx and socket errors)")
        print(f"CPU a reload, no requests: {per_reload:.3f} s (server user + system, 8 reloads)")
        print(f"peak RSS over the reloads: {rss_after / mib:.1f} MiB = {rss_after / disk:.2f}x; "
              f"RSS at the end {rss_now / mib:.1f} MiB")
    finally:
        if proc:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
