#!/usr/bin/env python3
"""Times `eventbox gen` and `eventbox check --strict` on the bundle it writes.

    cargo build --release && python3 bench/gen_check.py [--payments 200000] [--runs 3]

Reports what gen made (its summary line: attendees, activities, speakers, certificates follow
from the payments; 17,770 payments give a 20,001-attendee event with seed 1), then, per command,
the median wall time of the runs and the peak RSS (GNU time's %M), with the release build
(EVENTBOX_BIN picks another binary). The figures in docs/performance.md come from this script.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.environ.get("EVENTBOX_BIN", os.path.join(ROOT, "target", "release", "eventbox"))


SUMMARY = []


def timed(args):
    """Runs `args` under /usr/bin/time; returns (seconds, peak RSS in MiB). Keeps the first line
    of the first run's output (gen's summary)."""
    out = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    if not SUMMARY and out.stdout.strip():
        SUMMARY.append(out.stdout.strip().splitlines()[0])
    seconds, kib = out.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(kib) / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--payments", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if not os.path.exists(BINARY):
        sys.exit(f"{BINARY} is missing: run `cargo build --release` first")
    results = {"gen": [], "check --strict": []}
    with tempfile.TemporaryDirectory() as tmp:
        target = os.path.join(tmp, "data", "bench")
        for _ in range(a.runs):
            results["gen"].append(
                timed([BINARY, "gen", "--into", target, "--payments", str(a.payments), "--seed", "1"])
            )
            results["check --strict"].append(timed([BINARY, "check", "--strict", os.path.join(tmp, "data")]))
        size = sum(
            os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(target) for f in fs
        )
    if SUMMARY:
        print(SUMMARY[0].split(": ", 1)[-1])
    print(f"{a.payments} payments, {size / 1e6:.0f} MB on disk, median of {a.runs} runs:")
    for name, runs in results.items():
        secs = statistics.median(r[0] for r in runs)
        rss = max(r[1] for r in runs)
        print(f"  {name:<15} {secs:6.2f} s   peak RSS {rss:6.0f} MiB")


if __name__ == "__main__":
    main()
