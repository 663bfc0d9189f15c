#!/usr/bin/env bash
# Builds every cargo-fuzz target in fuzz/ and runs each briefly; fails on any
# crash, hang, leak or invariant failure. Installs what it needs (idempotent).
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]      (default 10; scripts/test.sh calls it)
# On 2 cores: build about 2.5 min from scratch (plus 1.3 min to install cargo-fuzz
# once), then 10 targets x 10 s.
#
# Toolchain: cargo-fuzz needs unstable rustc flags (-Zsanitizer=address and
# friends). CI has Rust stable only, so the stable compiler is used with
# RUSTC_BOOTSTRAP=1 (which unlocks -Z flags): no second toolchain to download,
# and the compiler is the one the rest of the suite uses. With a nightly
# toolchain installed, `SUPERPACKET_FUZZ_TOOLCHAIN=nightly scripts/fuzz.sh`
# uses it instead.
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-10}"
log() { printf '\n==> %s\n' "$*"; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# libfuzzer-sys compiles libFuzzer (C++).
if ! command -v c++ >/dev/null 2>&1; then
    log "installing g++ (apt-get)"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ >/dev/null
fi

# cargo-fuzz itself (pinned: its flags are what this script relies on).
CARGO_FUZZ_VERSION=0.13.2
if ! cargo fuzz --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION\$"; then
    log "installing cargo-fuzz $CARGO_FUZZ_VERSION"
    cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked --quiet
fi

toolchain=()
if [ -n "${SUPERPACKET_FUZZ_TOOLCHAIN:-}" ]; then
    toolchain=("+$SUPERPACKET_FUZZ_TOOLCHAIN")
else
    export RUSTC_BOOTSTRAP=1
fi

cd fuzz
targets=$(cargo "${toolchain[@]}" fuzz list)

log "cargo fuzz build (all targets, AddressSanitizer, debug assertions)"
start=$(date +%s)
# More codegen units than cargo-fuzz's default of 1: a far shorter build on 2 cores.
cargo "${toolchain[@]}" fuzz build --codegen-units 16
echo "built in $(($(date +%s) - start)) s"

# Each target starts from the committed seed corpus, copied so that what the
# short run discovers does not land in the repository.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
summary=()
for t in $targets; do
    log "fuzz $t for ${secs}s"
    mkdir -p "$work/$t"
    [ -d "corpus/$t" ] && cp -r "corpus/$t/." "$work/$t/"
    out="$work/$t.log"
    if ! cargo "${toolchain[@]}" fuzz run --codegen-units 16 "$t" "$work/$t" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$out" 2>&1; then
        tail -n 60 "$out"
        echo "fuzz target $t failed: the crashing input is in fuzz/artifacts/$t/" >&2
        exit 1
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -n 1)
    summary+=("$(printf '%-10s %10s executions in %ss' "$t" "${runs:-?}" "$secs")")
done

log "fuzz summary"
printf '%s\n' "${summary[@]}"
