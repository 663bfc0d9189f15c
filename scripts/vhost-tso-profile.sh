#!/usr/bin/env bash
# The 64 KB TSO workload of `superpacket bench vhost-user` (Workload::Tso),
# held open for profiling the engine: `superpacket run` with the bench's
# topology (two vhost-user ports in a bridge or, JOIN=xconnect, a
# cross-connect; busy_poll_us = 1000) on the
# second CPU; on the first, the receiver (testpmd rxonly, TSO and checksum
# offloads, 64 KiB mbufs) and the sender (testpmd csum forwarding from a pcap
# replay to its virtio-user port with `csum set tcp hw` and `tso set 1448`).
# After a warm-up it measures a window and prints the receiver's bytes,
# Gbit/s, the engine's CPU seconds (every thread) and CPU seconds per GB.
#
# Usage (root, dpdk-testpmd installed):
#   scripts/vhost-tso-profile.sh BIN PCAP SECONDS [time|perf]
# BIN: a superpacket binary. PCAP: the bench's replayed frames (8 TCP/IPv4
# frames of 65,226 bytes): `bench vhost-user` writes them to tso.pcap in its
# directory /tmp/superpacket-bench-vhost-user-PID-0 and removes it at the
# end; copy it out while a run is under way. MODE perf: `perf record -g` of
# the engine over the window ($OUT/perf.data; PERF_CG overrides `-g`, e.g.
# PERF_CG="--call-graph dwarf,16384"). OUT defaults to a fresh directory
# under /tmp; it is kept. Only the processes this script starts are stopped
# (by PID), also on failure or Ctrl-C.
set -euo pipefail
BIN=$(realpath "${1:?usage: $0 BIN PCAP SECONDS [time|perf]}")
PCAP=$(realpath "${2:?pcap}")
SECS=${3:?seconds}
MODE=${4:-time}
OUT=${OUT:-$(mktemp -d /tmp/vhost-tso-profile.XXXXXX)}
mkdir -p "$OUT"
. "$(dirname "$0")/vhost-profile-lib.sh"
pick_cpus
write_topology "$OUT/topo.toml" "$OUT/send.sock" "$OUT/recv.sock" "${JOIN:-bridge}"

EPID= RPID= SPID=
cleanup() {
    exec 3>&- 4>&- 2>/dev/null || true
    for p in $SPID $RPID $EPID; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    # testpmd's EAL runtime directories (its --file-prefix) outlive it.
    if [ "$(id -u)" = 0 ]; then d=/var/run/dpdk; else d=${XDG_RUNTIME_DIR:-/tmp}/dpdk; fi
    rm -rf "$d/vtp$$r" "$d/vtp$$s"
    true
}
trap cleanup EXIT INT TERM

taskset -c "$BE_CPU" "$BIN" run --workers 1 --status-interval 0 --stats-socket "$OUT/engine.sock" "$OUT/topo.toml" \
    > "$OUT/engine.log" 2>&1 &
EPID=$!
for _ in $(seq 600); do [ -S "$OUT/send.sock" ] && [ -S "$OUT/recv.sock" ] && break; sleep 0.05; done
[ -S "$OUT/recv.sock" ] || { echo "the engine does not listen: $(tail -3 "$OUT/engine.log")" >&2; exit 1; }

testpmd=(taskset -c "$FE_CPU" stdbuf -oL dpdk-testpmd --lcores "0@$FE_CPU,1@$FE_CPU" --no-huge -m 512 --no-pci
    --single-file-segments --no-telemetry)
mkfifo "$OUT/recv.in" "$OUT/send.in"
"${testpmd[@]}" --file-prefix "vtp$$r" \
    --vdev "net_virtio_user0,path=$OUT/recv.sock,mac=02:5e:00:00:00:0b,queue_size=1024" \
    -- -i --disable-link-check --forward-mode=rxonly --rx-offloads=0x2018 --rxd=1024 --txd=1024 \
    --mbuf-size=65535 --total-num-mbufs=4096 < "$OUT/recv.in" > "$OUT/recv.log" 2>&1 &
RPID=$!
exec 3> "$OUT/recv.in"
"${testpmd[@]}" --file-prefix "vtp$$s" --vdev "net_pcap0,rx_pcap=$PCAP,infinite_rx=1" \
    --vdev "net_virtio_user1,path=$OUT/send.sock,mac=02:5e:00:00:00:0a,queue_size=1024" \
    -- -i --disable-link-check --forward-mode=csum --eth-peer=1,02:5e:00:00:00:0b \
    --mbuf-size=65535 --total-num-mbufs=4096 --rxd=1024 --txd=1024 < "$OUT/send.in" > "$OUT/send.log" 2>&1 &
SPID=$!
exec 4> "$OUT/send.in"
sleep 4
echo start >&3
for c in "port stop 1" "csum set ip sw 1" "csum set tcp hw 1" "tso set 1448 1" "port start 1" "start"; do
    echo "$c" >&4
    sleep 0.3
done
sleep 3

rx_bytes() {
    echo "show port stats 0" >&3
    sleep 0.5
    grep -o "RX-bytes: *[0-9]*" "$OUT/recv.log" | tail -1 | grep -o "[0-9]*$"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$EPID/stat"; }
b0=$(rx_bytes) c0=$(cpu_ticks) t0=$(date +%s.%N)
case "$MODE" in
    time) sleep "$SECS" ;;
    perf) perf record -F 2000 ${PERF_CG:--g} -p "$EPID" -o "$OUT/perf.data" -- sleep "$SECS" > "$OUT/perf.log" 2>&1 ;;
    *) echo "unknown mode $MODE" >&2; exit 2 ;;
esac
b1=$(rx_bytes) c1=$(cpu_ticks) t1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
# The byte counts are read half a second before each CPU reading (the
# stats command's wait): two windows of the same length.
awk -v b="$((b1 - b0))" -v c="$((c1 - c0))" -v t0="$t0" -v t1="$t1" -v hz="$hz" -v out="$OUT" 'BEGIN {
    dt = t1 - t0; cpu = c / hz
    printf "window %.2f s: %.2f GB received, %.2f Gbit/s; engine CPU %.2f s (%.2f of a CPU), %.4f CPU s/GB; files in %s\n",
        dt, b / 1e9, b * 8 / 1e9 / dt, cpu, cpu / dt, cpu / (b / 1e9), out }'
