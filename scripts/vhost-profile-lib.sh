# Shared by scripts/vhost-loop-profile.sh and scripts/vhost-tso-profile.sh
# (sourced, not run): the CPU split and the engine's topology of
# `superpacket bench vhost-user`.

# Sets FE_CPU (the frontends') and BE_CPU (the engine's) to the first two
# CPUs this shell may run on; exits 2 with fewer than two.
pick_cpus() {
    local cpus
    cpus=($(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' | while IFS=- read -r a b; do seq "$a" "${b:-$a}"; done))
    [ "${#cpus[@]}" -ge 2 ] || { echo "needs two CPUs" >&2; exit 2; }
    FE_CPU=${cpus[0]} BE_CPU=${cpus[1]}
}

# write_topology FILE SOCK0 SOCK1 [JOIN]: two busy-polling vhost-user ports
# (vsend on SOCK0, vrecv on SOCK1) joined by JOIN: `bridge` (default, the
# bench's bridge rows) or `xconnect` (its `*_loop_xc_*` rows).
write_topology() {
    local joined
    case "${4:-bridge}" in
        bridge) joined='name = "br0"
kind = "bridge"' ;;
        xconnect) joined='name = "xc0"
kind = "xconnect"' ;;
        *) echo "JOIN is bridge or xconnect, not $4" >&2; exit 2 ;;
    esac
    cat > "$1" <<TOPO
[[device]]
name = "vsend"
kind = "port"
driver = { kind = "vhost-user", socket = "$2", busy_poll_us = 1000 }

[[device]]
name = "vrecv"
kind = "port"
driver = { kind = "vhost-user", socket = "$3", busy_poll_us = 1000 }

[[device]]
$joined
ports = ["vsend", "vrecv"]
TOPO
}
