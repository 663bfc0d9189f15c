#!/usr/bin/env bash
# Issue 26 item 2, the AF_XDP experiment (docs/benchmarks.md, "AF_XDP on a
# veth"): the same unpaced UDP from a sender namespace into a veth whose
# other end, in a second namespace, is read by an AF_PACKET TPACKET_V2 ring
# (the engine's port) or by an AF_XDP socket in copy mode (native XDP on the
# veth, a program redirecting to an XSKMAP, with and without frags support).
# MTU datagrams (1400 bytes) and UDP_SEGMENT superpackets (46 x 1400).
#
# Needs root, gcc and a kernel with CONFIG_XDP_SOCKETS. Makes two namespaces
# and one veth pair of its own and deletes them on exit (also on failure);
# touches nothing else. Usage: scripts/afxdp-veth/run.sh [SECONDS]
set -euo pipefail
secs=${1:-3}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
bin=$tmp/xsk_probe
ns_s=spxdp-$$-s
ns_m=spxdp-$$-m
cleanup() {
	ip netns del "$ns_s" 2>/dev/null || true
	ip netns del "$ns_m" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
gcc -O2 -Wall -o "$bin" "$here/xsk_probe.c"

setup() {
	ip netns add "$ns_s"
	ip netns add "$ns_m"
	ip -n "$ns_s" link add xs-host type veth peer name xs-mid netns "$ns_m"
	ip -n "$ns_s" addr add 10.77.0.1/24 dev xs-host
	ip -n "$ns_s" link set xs-host up
	ip -n "$ns_m" link set xs-mid up
	# GRO=1: GRO on the middle's end first (veth keeps the peer's GSO features
	# for an XDP program only when GRO was asked for).
	if [ "${GRO:-0}" = 1 ]; then ip netns exec "$ns_m" ethtool -K xs-mid gro on >/dev/null; fi
	# Nothing answers ARP behind an XDP socket: the sender gets the neighbour statically.
	local mac
	mac=$(ip -n "$ns_m" -br link show xs-mid | awk '{print $3}')
	ip -n "$ns_s" neigh add 10.77.0.2 lladdr "$mac" dev xs-host nud permanent
}

# case NAME RECEIVER-ARGS... -- SEGMENTS
case_() {
	local name=$1 segs=$2
	shift 2
	setup
	echo "== $name (sender: $segs x 1400 bytes per send; load: $(cut -d' ' -f1-3 /proc/loadavg))"
	ip netns exec "$ns_m" "$bin" "$@" > "$tmp/recv.out" 2>&1 &
	local rpid=$!
	for _ in $(seq 50); do grep -q ready "$tmp/recv.out" && break; sleep 0.1; done
	ip netns exec "$ns_s" "$bin" send 10.77.0.2 "$secs" "$segs"
	echo "sender's veth: TSO/GSO now $(ip netns exec "$ns_s" ethtool -k xs-host 2>/dev/null |
		grep -E '^(tcp-segmentation-offload|tx-udp-segmentation):' | tr '\n' ' ')"
	wait "$rpid" || true
	cat "$tmp/recv.out"
	ip netns del "$ns_s"
	ip netns del "$ns_m"
}

case_ "AF_PACKET ring, MTU datagrams" 1 ring xs-mid "$secs"
case_ "AF_XDP copy mode, MTU datagrams" 1 xsk xs-mid "$secs" 0
case_ "AF_PACKET ring, UDP_SEGMENT superpackets" 46 ring xs-mid "$secs"
case_ "AF_XDP copy mode, program without frags, UDP_SEGMENT" 46 xsk xs-mid "$secs" 0
case_ "AF_XDP copy mode, frags-aware program + XDP_USE_SG, UDP_SEGMENT" 46 xsk xs-mid "$secs" 1
GRO=1 case_ "AF_XDP copy mode, frags-aware program + XDP_USE_SG, GRO on the veth, UDP_SEGMENT" 46 xsk xs-mid "$secs" 1
GRO=1 case_ "AF_XDP copy mode, frags-aware program + XDP_USE_SG, GRO on the veth, MTU datagrams" 1 xsk xs-mid "$secs" 1
