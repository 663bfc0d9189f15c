#!/usr/bin/env bash
# The 64-byte loop of `superpacket bench vhost-user` (Workload::Loop), held
# open for profiling the engine: `superpacket run` with the bench's topology
# (two vhost-user ports in a bridge or, JOIN=xconnect, a cross-connect;
# busy_poll_us = 1000) on the second CPU,
# one dpdk-testpmd on the first holding both virtio-user ports, mac
# forwarding, `start tx_first 8` (512 frames circulating). After a warm-up
# it measures a window and prints: frames the engine took from the guests
# (each crossed the backend once), Mpps, the engine's CPU seconds (every
# thread) and CPU ns per frame.
#
# Usage (root, dpdk-testpmd installed):
#   scripts/vhost-loop-profile.sh BIN SECONDS [MODE]
# BIN: a superpacket binary (e.g. target/release/superpacket). MODE:
#   time      (default) nothing more;
#   syscalls  `perf stat --per-thread` of system calls, context switches and
#             CPU time over the window (written to $OUT/perf-stat.txt);
#   callgrind the engine runs under valgrind --tool=callgrind; its counters
#             are zeroed at the window's start and dumped at its end
#             ($OUT/callgrind.out.*); instructions per frame = the dump's
#             `summary` / frames.
# JOIN=bridge (default) joins the two ports in a learning bridge, as the
# bench's bridge rows; JOIN=xconnect in a cross-connect (no lookup), as its
# `*_loop_xc_*` rows and DPDK's io forwarding.
# OUT defaults to a fresh directory under /tmp; it is kept (sockets,
# topology, logs, profiles). Only the processes this script starts are
# stopped (by PID), also on failure or Ctrl-C.
set -euo pipefail
BIN=$(realpath "${1:?usage: $0 BIN SECONDS [time|syscalls|callgrind]}")
SECS=${2:?seconds}
MODE=${3:-time}
OUT=${OUT:-$(mktemp -d /tmp/vhost-loop-profile.XXXXXX)}
mkdir -p "$OUT"
JOIN=${JOIN:-bridge}
WARMUP=5
[ "$MODE" = callgrind ] && WARMUP=15
. "$(dirname "$0")/vhost-profile-lib.sh"
pick_cpus
write_topology "$OUT/topo.toml" "$OUT/s0.sock" "$OUT/s1.sock" "$JOIN"

EPID= TPID=
cleanup() {
    exec 3>&- 2>/dev/null || true
    [ -n "$TPID" ] && kill "$TPID" 2>/dev/null && wait "$TPID" 2>/dev/null
    [ -n "$EPID" ] && kill "$EPID" 2>/dev/null && wait "$EPID" 2>/dev/null
    # testpmd's EAL runtime directory (its --file-prefix) outlives it:
    # /var/run/dpdk as root, else $XDG_RUNTIME_DIR/dpdk (or /tmp/dpdk).
    if [ "$(id -u)" = 0 ]; then rm -rf "/var/run/dpdk/vlp$$"; else rm -rf "${XDG_RUNTIME_DIR:-/tmp}/dpdk/vlp$$"; fi
    true
}
trap cleanup EXIT INT TERM

engine=("$BIN" run --workers 1 --status-interval 0 --stats-socket "$OUT/engine.sock" "$OUT/topo.toml")
if [ "$MODE" = callgrind ]; then
    engine=(valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out" --compress-strings=no \
        --compress-pos=no "${engine[@]}")
fi
taskset -c "$BE_CPU" "${engine[@]}" > "$OUT/engine.log" 2>&1 &
EPID=$!
for _ in $(seq 600); do [ -S "$OUT/s0.sock" ] && [ -S "$OUT/s1.sock" ] && break; sleep 0.05; done
[ -S "$OUT/s1.sock" ] || { echo "the engine does not listen: $(tail -3 "$OUT/engine.log")" >&2; exit 1; }

mkfifo "$OUT/testpmd.in"
taskset -c "$FE_CPU" dpdk-testpmd --lcores "0@$FE_CPU,1@$FE_CPU" --no-huge -m 512 --no-pci --single-file-segments \
    --no-telemetry --file-prefix "vlp$$" \
    --vdev "net_virtio_user0,path=$OUT/s0.sock,mac=02:5e:00:00:00:0a,queue_size=1024" \
    --vdev "net_virtio_user1,path=$OUT/s1.sock,mac=02:5e:00:00:00:0b,queue_size=1024" \
    -- -i --disable-link-check --forward-mode=mac --eth-peer=0,02:5e:00:00:00:0b --eth-peer=1,02:5e:00:00:00:0a \
    --rxd=1024 --txd=1024 --total-num-mbufs=16384 < "$OUT/testpmd.in" > "$OUT/testpmd.log" 2>&1 &
TPID=$!
exec 3> "$OUT/testpmd.in"
sleep 3
echo "start tx_first 8" >&3
sleep "$WARMUP"

polled() { "$BIN" stats --json --socket "$OUT/engine.sock" | grep -o '"packets_polled": *[0-9]*' | grep -o '[0-9]*$'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$EPID/stat"; }
p0=$(polled) c0=$(cpu_ticks) t0=$(date +%s.%N)
case "$MODE" in
    time) sleep "$SECS" ;;
    syscalls) perf stat --per-thread -e raw_syscalls:sys_enter,context-switches,task-clock -p "$EPID" \
        -o "$OUT/perf-stat.txt" -- sleep "$SECS" ;;
    callgrind) callgrind_control -z "$EPID" > /dev/null 2>&1; sleep "$SECS"; callgrind_control -d "$EPID" > /dev/null 2>&1 ;;
    *) echo "unknown mode $MODE" >&2; exit 2 ;;
esac
p1=$(polled) c1=$(cpu_ticks) t1=$(date +%s.%N)
echo "stop" >&3
hz=$(getconf CLK_TCK)
awk -v p="$((p1 - p0))" -v c="$((c1 - c0))" -v t0="$t0" -v t1="$t1" -v hz="$hz" -v out="$OUT" 'BEGIN {
    dt = t1 - t0; cpu = c / hz
    printf "window %.2f s: %d frames, %.3f Mpps; engine CPU %.2f s (%.2f of a CPU), %.0f ns per frame; files in %s\n",
        dt, p, p / dt / 1e6, cpu, cpu / dt, cpu / p * 1e9, out }'
if [ "$MODE" = callgrind ]; then
    for f in "$OUT"/callgrind.out.*; do
        awk -v p="$((p1 - p0))" '/^summary:/ { printf "callgrind: %.0f instructions, %.0f per frame\n", $2, $2 / p }' "$f"
    done
fi
