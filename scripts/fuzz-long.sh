#!/usr/bin/env bash
# One long fuzz run of one target: the command behind the README's table of
# 10-million-execution runs.
# Usage: scripts/fuzz-long.sh TARGET [RUNS] [CORPUS_DIR]
#   RUNS        executions before it stops (default 10200000)
#   CORPUS_DIR  working corpus (default: a copy of fuzz/corpus/TARGET in
#               fuzz/long-corpus/TARGET, kept between runs; it grows)
# Crashes go to fuzz/artifacts/TARGET/. Needs cargo-fuzz (scripts/fuzz.sh installs it).
# SUPERPACKET_FUZZ_WORKERS=W (default 1) runs W fuzzer processes side by side
# on the one corpus (libFuzzer -jobs=W -workers=W), RUNS/W executions each,
# their output in fuzz/fuzz-<job>.log.
#
# Speed: the short CI runs (scripts/fuzz.sh) use cargo-fuzz's defaults. The
# long runs trade some guidance for 2-3x more executions per second, as
# measured on the 2-vCPU project machine (`gso`: 2,400 -> 6,100 exec/s):
# - built with --no-trace-compares (no comparison tracing; coverage
#   counters, AddressSanitizer and debug assertions stay on);
# - ASAN_OPTIONS=detect_stack_use_after_return=0:malloc_context_size=0
#   (no fake stacks, no allocation stack traces; out-of-bounds accesses and
#   use-after-free are still caught);
# - libFuzzer's -entropic=0 (plain corpus scheduling).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

target="${1:?usage: scripts/fuzz-long.sh TARGET [RUNS] [CORPUS_DIR]}"
runs="${2:-10200000}"
corpus="${3:-long-corpus/$target}"

toolchain=()
if [ -n "${SUPERPACKET_FUZZ_TOOLCHAIN:-}" ]; then
    toolchain=("+$SUPERPACKET_FUZZ_TOOLCHAIN")
else
    export RUSTC_BOOTSTRAP=1
fi
if ! cargo "${toolchain[@]}" fuzz list | grep -qx "$target"; then
    echo "unknown fuzz target '$target' (cargo fuzz list: $(cargo "${toolchain[@]}" fuzz list | tr '\n' ' '))" >&2
    exit 2
fi
cargo "${toolchain[@]}" fuzz build --no-trace-compares --codegen-units 16 --target-dir target-long "$target"
if [ ! -d "$corpus" ]; then
    mkdir -p "$corpus"
    cp -r "corpus/$target/." "$corpus/"
fi
mkdir -p "artifacts/$target"
bin="target-long/$(rustc -vV | sed -n 's/^host: //p')/release/$target"
workers="${SUPERPACKET_FUZZ_WORKERS:-1}"
parallel=()
if [ "$workers" -gt 1 ]; then
    parallel=(-jobs="$workers" -workers="$workers")
    runs=$(( (runs + workers - 1) / workers ))
    echo "$workers workers, $runs executions each, output in fuzz/fuzz-<job>.log"
fi
echo "fuzzing $target for $runs executions from $corpus (commit $(git rev-parse --short HEAD))"
ASAN_OPTIONS=detect_stack_use_after_return=0:malloc_context_size=0 \
    exec "$bin" -entropic=0 -runs="$runs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "${parallel[@]}" -artifact_prefix="artifacts/$target/" "$corpus"
