#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for SECONDS each (default 60) with libFuzzer through
# cargo fuzz, and prints one line per target: runs, coverage, corpus, and any crash.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      targets: load_json load_toml request write upstream
#
# cargo fuzz needs nightly-only compiler flags (the sanitizer, coverage instrumentation); the
# pinned stable toolchain builds them with RUSTC_BOOTSTRAP=1, set here. New inputs the fuzzer
# finds go to target/fuzz-corpus/TARGET (not committed); the committed seeds in fuzz/corpus are
# read, never written. A crash leaves its input in fuzz/artifacts/TARGET/: fix the cause, then
# commit the input under fuzz/regressions/TARGET/, which `cargo test` replays
# (src/fuzzing.rs). Exits 1 when any target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(load_json load_toml request write upstream)

if ! command -v cargo-fuzz >/dev/null 2>&1; then
    echo "installing cargo-fuzz (cargo install --locked)" >&2
    cargo install --locked cargo-fuzz
fi
export RUSTC_BOOTSTRAP=1

for t in "${targets[@]}"; do cargo fuzz build "$t"; done

failed=0
for t in "${targets[@]}"; do
    work=target/fuzz-corpus/$t
    mkdir -p "$work" "fuzz/artifacts/$t"
    log=target/fuzz-$t.log
    if cargo fuzz run "$t" "$work" "fuzz/corpus/$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$log" 2>&1; then
        outcome=ok
    else
        outcome="CRASH: $(grep -o 'fuzz/artifacts/[^ ]*' "$log" | tail -1)"
        failed=1
    fi
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+' || true)
    printf '%-10s %4ss  runs %-9s %s  %s\n' "$t" "$seconds" "${runs:-?}" "${last:-}" "$outcome"
done
exit $failed
