#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need
# (Debian 12, as root or with sudo), then runs formatting, lint and every test.
# Usage: scripts/test.sh            (README's test command; .ci/run calls it)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# --- System tools the tests use -------------------------------------------
# tshark: cross-checks our notion of a valid frame against Wireshark's.
need_pkgs=()
command -v tshark >/dev/null 2>&1 || need_pkgs+=(tshark)
# ip (iproute2) and ethtool: only to cross-check what the code configures through netlink and
# SIOCETHTOOL (io/tests_netlink.rs, engine_live.rs); the product itself starts neither.
command -v ip >/dev/null 2>&1 || need_pkgs+=(iproute2)
command -v ethtool >/dev/null 2>&1 || need_pkgs+=(ethtool)
# dpdk-dev and pkg-config: crates/superpacket-cli/build.rs builds the DPDK 22.11 peer of `bench peers` (peers/dpdk); its tests need it.
{ command -v pkg-config >/dev/null 2>&1 && pkg-config --exists libdpdk; } || need_pkgs+=(dpdk-dev pkg-config)
# dpdk (dpdk-testpmd): the virtio-user frontend of the vhost-user port tests (tests/vhost_user.rs).
command -v dpdk-testpmd >/dev/null 2>&1 || need_pkgs+=(dpdk)
# DPDK's vhost, virtio-user and pcap PMDs: `bench vhost-user` and its test (tests/bench_vhost_user_cli.rs)
# run DPDK's vhost backend, virtio-user frontends and a pcap replay (libdpdk-dev depends on them; checked by file).
for pmd in vhost virtio pcap; do
    compgen -G "/usr/lib/*/dpdk/pmds-*/librte_net_${pmd}.so*" >/dev/null || need_pkgs+=("librte-net-${pmd}23")
done
# openvswitch-switch (ovsdb-server, ovs-vswitchd, ovs-vsctl, the schema) and iperf3: `bench live-peers` and its
# test (tests/bench_live_peers_cli.rs) run a private Open vSwitch userspace datapath; iperf3 only cross-checks the
# project's traffic generator in that test (the product never runs it).
{ [ -x /usr/sbin/ovs-vswitchd ] || command -v ovs-vswitchd >/dev/null 2>&1; } || need_pkgs+=(openvswitch-switch)
command -v iperf3 >/dev/null 2>&1 || need_pkgs+=(iperf3)
# valgrind (callgrind): `bench instructions` counts with it where the CPU's counters are not exposed
# (virtual machines); tests/instructions_cli.rs runs it.
command -v valgrind >/dev/null 2>&1 || need_pkgs+=(valgrind)
if [ ${#need_pkgs[@]} -gt 0 ]; then
    log "installing ${need_pkgs[*]} (apt-get)"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
command -v tshark >/dev/null || { echo "tshark is still missing after install" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is still missing after install" >&2; exit 2; }
pkg-config --exists libdpdk || { echo "libdpdk (dpdk-dev) is still missing after install" >&2; exit 2; }
command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd (dpdk) is still missing after install" >&2; exit 2; }
{ [ -x /usr/sbin/ovs-vswitchd ] || command -v ovs-vswitchd >/dev/null; } || { echo "ovs-vswitchd (openvswitch-switch) is still missing after install" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "iperf3 is still missing after install" >&2; exit 2; }
# QEMU, busybox-static, gcc and a Debian kernel (extracted once into target/qemu-guest): the QEMU
# guest on a vhost-user port (tests/vhost_user_qemu.rs).
log "QEMU guest (scripts/qemu-guest.sh)"
bash scripts/qemu-guest.sh

# --- Rust toolchain components -----------------------------------------------
command -v cargo >/dev/null || { echo "cargo not found: install Rust stable (rustup) first" >&2; exit 2; }
if command -v rustup >/dev/null 2>&1; then
    rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
    rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi

# --- Disk -----------------------------------------------------------------------
# The whole run writes about 2.5 GB (target/ and fuzz/target/). A full disk
# shows up as a linker killed by SIGBUS, so say up front how much room there is.
# Incremental compilation is off: it only helps rebuilds and doubles target/.
export CARGO_INCREMENTAL=0
free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
log "disk: $((free_kb / 1024)) MB free in $(pwd)"
if [ "$free_kb" -lt $((3 * 1024 * 1024)) ]; then
    echo "warning: under 3 GB free; the build may fail with 'No space left on device' or a linker bus error" >&2
fi

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

# A library user may turn port drivers off: the engine with none of them
# must still build, tests included.
log "cargo check -p superpacket-engine --no-default-features"
cargo check -p superpacket-engine --no-default-features --all-targets --locked --quiet

log "cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --lib --locked --quiet

# --- The embeddable core: small, no build script, builds on its MSRV ---------
bash scripts/core-footprint.sh

log "cargo test"
results=$(mktemp)
trap 'rm -f "$results"' EXIT
cargo test --workspace --locked --all-targets 2>&1 | tee "$results"
# --all-targets runs the criterion benches once in test mode; doc tests run separately.
cargo test --workspace --locked --doc 2>&1 | tee -a "$results"

# --- Fuzzing: builds every cargo-fuzz target and runs each briefly ----------
# (scripts/fuzz.sh installs cargo-fuzz; a few minutes on 2 cores). Skip locally
# with SUPERPACKET_SKIP_FUZZ=1.
if [ "${SUPERPACKET_SKIP_FUZZ:-0}" = 1 ]; then
    log "fuzzing skipped (SUPERPACKET_SKIP_FUZZ=1)"
else
    log "fuzz targets (scripts/fuzz.sh)"
    bash scripts/fuzz.sh
fi

# One closing line that counts every test run above.
awk '/^test result:/ { p += $4; f += $6; s += $8 } END { printf "%d passed, %d failed, %d skipped\n", p, f, s }' "$results"
