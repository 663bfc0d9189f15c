#!/usr/bin/env bash
# Checks what an embedder of the `superpacket` crate pays for (issue 21):
#   - its normal dependency tree, itself included, is 10 crates or fewer;
#   - building it runs no build script (its own or a dependency's);
#   - it builds with its stated minimum Rust version (rust-version in
#     Cargo.toml), installed with rustup when missing.
# Prints the figures; exits 1 if a limit is broken, 2 if it cannot check.
# Usage: scripts/core-footprint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '\n==> %s\n' "$*"; }
MAX_CRATES=10

log "superpacket (core) dependency tree"
crates=$(cargo tree -p superpacket -e normal --prefix none --locked | sed 's/ (\*)$//; s/ (proc-macro)$//' | sort -u)
n=$(printf '%s\n' "$crates" | grep -c .)
printf '%s\n' "$crates"
echo "$n crates (limit $MAX_CRATES)"
[ "$n" -le "$MAX_CRATES" ] || { echo "the core pulls $n crates, more than $MAX_CRATES" >&2; exit 1; }

log "superpacket (core) build scripts"
# A build script shows up in cargo's JSON messages as a `build-script-build` target.
scripts=$(cargo build -p superpacket --lib --locked --message-format=json 2>/dev/null \
    | grep -o '"name":"build-script-build"[^}]*"src_path":"[^"]*"' | grep -o '"src_path":"[^"]*"' || true)
if [ -n "$scripts" ]; then
    echo "building the core runs build scripts:" >&2
    printf '%s\n' "$scripts" >&2
    exit 1
fi
echo "none"

msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$msrv" ] || { echo "no rust-version in the workspace Cargo.toml" >&2; exit 2; }
log "superpacket (core) on its minimum Rust version $msrv"
if ! command -v rustup >/dev/null 2>&1; then
    echo "rustup not found: cannot install Rust $msrv to check the MSRV" >&2
    exit 2
fi
rustup toolchain list | grep -q "^$msrv" || rustup toolchain install "$msrv" --profile minimal
cargo "+$msrv" check -p superpacket --lib --examples --locked --target-dir target/msrv
