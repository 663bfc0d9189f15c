//! The suite's registry: one [`Scenario`] per reproduced result, built on
//! the engine's own components through the existing bench modules.
//!
//! Adding a scenario is one entry in [`SCENARIOS`] (in result order): its
//! run function (a named function or a non-capturing closure, e.g.
//! `run: |o, p| Ok(module::run_with_progress(&Options { quick: o.quick }, p))`),
//! pairs, key figures, plots and description. The live demo
//! (real kernel traffic, root only) is registered by the command line
//! (`superpacket bench live`), which runs it as a child process.

use super::suite::{Better, KeyFigure, Kind, Pair, PlotSpec, RunOptions, Scenario, always};
use super::{BenchReport, MeasureConfig, defrag, lro_forward, seed_qinq_tso, seed_vlan_nat};
use superpacket::offload::frag::{Delivery, MemoryPolicy};

/// Every scenario of `superpacket bench`, in result order.
pub static SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "vlan-nat",
        result: Some(1),
        title: "UDP L4 and fraglist superpackets through a VLAN NAT router, passthrough vs legacy",
        kind: Kind::Model,
        default: true,
        original: "Linux passed UDP L4 (USO) and fraglist GSO superpackets through VLAN, bond and team devices \
                   instead of segmenting them in the middle of the stack: a VLAN NAT router went from 20 Mbps \
                   to 1 Gbps.",
        models: "A NAT router between VLAN 10 and VLAN 20 (examples/seed-vlan-nat.toml) forwarding 16 UDP flows \
                 as superpackets of 44 datagrams of 1400 bytes, UDP_L4 (USO) or fraglist. passthrough: the VLAN \
                 devices carry both GSO types, NAT rewrites each superpacket once and the egress port takes it \
                 whole; legacy: the egress VLAN device lacks them (the old GSO_SOFTWARE), so every superpacket \
                 is cut in software there and its 44 datagrams go down one by one.",
        real: "The device graph is the engine's code (VLAN devices, router, NAT with connection tracking, \
               feature negotiation, software segmentation with checksums), timed on this CPU: wall time and the \
               thread's CPU time of the receive calls.",
        simulated: "The ports are in memory: a port that takes a superpacket whole costs nothing (a NIC with \
                    USO), segmented frames are counted, not copied. No wire, no kernel: the Gbps figures are \
                    what one core pushes through the stack, not a line rate.",
        pairs: &[
            Pair {
                label: "UDP L4 throughput",
                baseline: "udp_l4_legacy_gbps",
                candidate: "udp_l4_passthrough_gbps",
                better: Better::Higher,
            },
            Pair {
                label: "fraglist throughput",
                baseline: "fraglist_legacy_gbps",
                candidate: "fraglist_passthrough_gbps",
                better: Better::Higher,
            },
            Pair {
                label: "UDP L4 CPU per GB",
                baseline: "udp_l4_legacy_cpu_s_per_gb",
                candidate: "udp_l4_passthrough_cpu_s_per_gb",
                better: Better::Lower,
            },
            Pair {
                label: "fraglist CPU per GB",
                baseline: "fraglist_legacy_cpu_s_per_gb",
                candidate: "fraglist_passthrough_cpu_s_per_gb",
                better: Better::Lower,
            },
        ],
        key: &[KeyFigure {
            label: "router throughput, passthrough / legacy (UDP L4 and fraglist averaged)",
            baseline: "vlan_nat_legacy_gbps",
            candidate: "vlan_nat_passthrough_gbps",
            better: Better::Higher,
            original: "20 Mbps -> 1 Gbps",
            original_ratio: Some(50.0),
        }],
        plots: &[
            PlotSpec {
                file: "vlan-nat-gbps.svg",
                title: "VLAN NAT router: payload throughput per core",
                y_label: "Gbps (log)",
                log: true,
                series: &["legacy", "passthrough"],
                groups: &[
                    ("UDP L4", &["udp_l4_legacy_gbps", "udp_l4_passthrough_gbps"]),
                    ("fraglist", &["fraglist_legacy_gbps", "fraglist_passthrough_gbps"]),
                ],
            },
            PlotSpec {
                file: "vlan-nat-cpu.svg",
                title: "VLAN NAT router: engine CPU per GB",
                y_label: "CPU s/GB (log)",
                log: true,
                series: &["legacy", "passthrough"],
                groups: &[
                    ("UDP L4", &["udp_l4_legacy_cpu_s_per_gb", "udp_l4_passthrough_cpu_s_per_gb"]),
                    ("fraglist", &["fraglist_legacy_cpu_s_per_gb", "fraglist_passthrough_cpu_s_per_gb"]),
                ],
            },
        ],
        available: always,
        run: run_vlan_nat,
    },
    Scenario {
        name: "defrag",
        result: Some(2),
        title: "IPv4 and IPv6 reassembly under receive-ring pressure, coalescing vs not",
        kind: Kind::Model,
        default: true,
        original: "Linux reassembly copies (coalesces) each fragment into the datagram so that its receive \
                   buffer returns to the ring at once: 9 Mbps -> 6.6 Gbps.",
        models: "60000-byte UDP datagrams (41 IPv4 / 42 IPv6 fragments over a 1500-byte MTU) arriving at 10 \
                 Gbit/s with 0.1%, 0.5% or 1% random fragment loss at a port with 256 receive buffers. coalesce: \
                 each fragment's payload is copied into the datagram and its buffer freed at once; no coalesce: \
                 the reassembler holds every fragment's buffer until its datagram completes or times out (30 s \
                 IPv4, 60 s IPv6), so a few lost fragments empty the ring and the NIC drops everything until a \
                 timeout. Both with the EvictOldest memory policy.",
        real: "The reassembler (the code behind `pcap defrag` and the engine) on fragments cut by the engine's \
               fragmenter, every fragment pushed through it. The in-order reassembly speed (reasm_gbps_*) is \
               measured on this CPU: it shows the host keeps up with the 10 Gbit/s line the model assumes.",
        simulated: "The wire, the loss (a seeded hash: each run draws other losses), the NIC's ring and the clock \
                    (virtual: 2 s of line time with coalescing, 0.25 s in quick mode; two timeout periods \
                    without). The host is taken as infinitely fast.",
        pairs: &[
            Pair {
                label: "IPv4 goodput at 0.1% loss",
                baseline: "v4_0.1pct_nocoalesce_gbps",
                candidate: "v4_0.1pct_coalesce_gbps",
                better: Better::Higher,
            },
            Pair {
                label: "IPv4 goodput at 0.5% loss",
                baseline: "v4_0.5pct_nocoalesce_gbps",
                candidate: "v4_0.5pct_coalesce_gbps",
                better: Better::Higher,
            },
            Pair {
                label: "IPv4 goodput at 1% loss",
                baseline: "v4_1pct_nocoalesce_gbps",
                candidate: "v4_1pct_coalesce_gbps",
                better: Better::Higher,
            },
            Pair {
                label: "IPv6 goodput at 0.1% loss",
                baseline: "v6_0.1pct_nocoalesce_gbps",
                candidate: "v6_0.1pct_coalesce_gbps",
                better: Better::Higher,
            },
            Pair {
                label: "IPv6 goodput at 0.5% loss",
                baseline: "v6_0.5pct_nocoalesce_gbps",
                candidate: "v6_0.5pct_coalesce_gbps",
                better: Better::Higher,
            },
            Pair {
                label: "IPv6 goodput at 1% loss",
                baseline: "v6_1pct_nocoalesce_gbps",
                candidate: "v6_1pct_coalesce_gbps",
                better: Better::Higher,
            },
        ],
        key: &[
            KeyFigure {
                label: "IPv4 goodput at 1% loss, coalesce / no coalesce",
                baseline: "v4_1pct_nocoalesce_gbps",
                candidate: "v4_1pct_coalesce_gbps",
                better: Better::Higher,
                original: "9 Mbps -> 6.6 Gbps",
                original_ratio: Some(6600.0 / 9.0),
            },
            KeyFigure {
                label: "IPv6 goodput at 1% loss, coalesce / no coalesce",
                baseline: "v6_1pct_nocoalesce_gbps",
                candidate: "v6_1pct_coalesce_gbps",
                better: Better::Higher,
                original: "9 Mbps -> 6.6 Gbps",
                original_ratio: Some(6600.0 / 9.0),
            },
        ],
        plots: &[PlotSpec {
            file: "defrag-goodput.svg",
            title: "Reassembly under ring pressure: UDP goodput at 10 Gbit/s",
            y_label: "Gbps (log)",
            log: true,
            series: &["no coalesce", "coalesce"],
            groups: &[
                ("v4 0.1%", &["v4_0.1pct_nocoalesce_gbps", "v4_0.1pct_coalesce_gbps"]),
                ("v4 0.5%", &["v4_0.5pct_nocoalesce_gbps", "v4_0.5pct_coalesce_gbps"]),
                ("v4 1%", &["v4_1pct_nocoalesce_gbps", "v4_1pct_coalesce_gbps"]),
                ("v6 0.1%", &["v6_0.1pct_nocoalesce_gbps", "v6_0.1pct_coalesce_gbps"]),
                ("v6 0.5%", &["v6_0.5pct_nocoalesce_gbps", "v6_0.5pct_coalesce_gbps"]),
                ("v6 1%", &["v6_1pct_nocoalesce_gbps", "v6_1pct_coalesce_gbps"]),
            ],
        }],
        available: always,
        run: run_defrag,
    },
    Scenario {
        name: "lro",
        result: Some(3),
        title: "Forwarding with LRO off, unsorted and RSS-sorted at 1, 64 and 1000 flows",
        kind: Kind::Model,
        default: true,
        original: "FreeBSD's LRO sorts each receive batch by RSS hash (tcp_lro_queue_mbuf), which iflib uses \
                   since D51772: with many connections ACK aggregation went from about 1.3:1 to almost 3:1 \
                   (D4914), and IPv4 forwarding stayed at about 4.49 Mpps with and without the change (judged \
                   with ministat at 95%).",
        models: "A router (two ports, IPv4 forwarding) fed by the GRO engine in 1024-packet receive batches \
                 (iflib's sort array) of 1448-byte TCP segments from 1, 64 or 1000 flows, up to 128 bursts of 16 \
                 segments in flight, interleaved packet by packet in random order. off: every wire packet is \
                 forwarded; unsorted: GRO/LRO takes packets in arrival order (an 8 x 8 flow table, as Linux GRO \
                 and FreeBSD's classic tcp_lro_rx); sorted: the batch is sorted by RSS hash first. Aggregates \
                 leave the egress port whole (TSO).",
        real: "The GRO/LRO engine, its RSS sort, the router (TTL, checksum, MAC rewrite) and the egress port's \
               TSO decision, timed on this CPU (median of the samples of each run; the three modes \
               round-robin).",
        simulated: "The NIC: frames are built in memory before the clock starts, with their checksums marked \
                    verified and their RSS hash set, as a NIC does; the egress port is in memory. The arrival \
                    order is drawn from a seed that changes with every run.",
        pairs: &[
            Pair {
                label: "1 flow: forwarding, sorted vs unsorted",
                baseline: "fwd_mpps_1flow_unsorted",
                candidate: "fwd_mpps_1flow_sorted",
                better: Better::Higher,
            },
            Pair {
                label: "64 flows: forwarding, sorted vs unsorted",
                baseline: "fwd_mpps_64flows_unsorted",
                candidate: "fwd_mpps_64flows_sorted",
                better: Better::Higher,
            },
            Pair {
                label: "1000 flows: forwarding, sorted vs unsorted",
                baseline: "fwd_mpps_1000flows_unsorted",
                candidate: "fwd_mpps_1000flows_sorted",
                better: Better::Higher,
            },
            Pair {
                label: "1 flow: forwarding, LRO (sorted) vs off",
                baseline: "fwd_mpps_1flow_off",
                candidate: "fwd_mpps_1flow_sorted",
                better: Better::Higher,
            },
            Pair {
                label: "64 flows: forwarding, LRO (sorted) vs off",
                baseline: "fwd_mpps_64flows_off",
                candidate: "fwd_mpps_64flows_sorted",
                better: Better::Higher,
            },
            Pair {
                label: "1000 flows: forwarding, LRO (sorted) vs off",
                baseline: "fwd_mpps_1000flows_off",
                candidate: "fwd_mpps_1000flows_sorted",
                better: Better::Higher,
            },
            Pair {
                label: "1 flow: aggregation, sorted vs unsorted",
                baseline: "agg_1flow_unsorted",
                candidate: "agg_1flow_sorted",
                better: Better::Higher,
            },
            Pair {
                label: "64 flows: aggregation, sorted vs unsorted",
                baseline: "agg_64flows_unsorted",
                candidate: "agg_64flows_sorted",
                better: Better::Higher,
            },
            Pair {
                label: "1000 flows: aggregation, sorted vs unsorted",
                baseline: "agg_1000flows_unsorted",
                candidate: "agg_1000flows_sorted",
                better: Better::Higher,
            },
        ],
        key: &[
            KeyFigure {
                label: "aggregation at 1000 flows, sorted / unsorted",
                baseline: "agg_1000flows_unsorted",
                candidate: "agg_1000flows_sorted",
                better: Better::Higher,
                original: "about 1.3:1 -> almost 3:1 (D4914)",
                original_ratio: Some(3.0 / 1.3),
            },
            KeyFigure {
                label: "forwarding at 1000 flows, sorted / unsorted",
                baseline: "fwd_mpps_1000flows_unsorted",
                candidate: "fwd_mpps_1000flows_sorted",
                better: Better::Higher,
                original: "about 4.49 Mpps with and without (D51772)",
                original_ratio: Some(1.0),
            },
        ],
        plots: &[
            PlotSpec {
                file: "lro-forwarding.svg",
                title: "Forwarding rate per core: LRO off, unsorted, RSS-sorted",
                y_label: "Mpps (wire packets)",
                log: false,
                series: &["off", "unsorted", "sorted"],
                groups: &[
                    ("1 flow", &["fwd_mpps_1flow_off", "fwd_mpps_1flow_unsorted", "fwd_mpps_1flow_sorted"]),
                    ("64 flows", &["fwd_mpps_64flows_off", "fwd_mpps_64flows_unsorted", "fwd_mpps_64flows_sorted"]),
                    (
                        "1000 flows",
                        &["fwd_mpps_1000flows_off", "fwd_mpps_1000flows_unsorted", "fwd_mpps_1000flows_sorted"],
                    ),
                ],
            },
            PlotSpec {
                file: "lro-aggregation.svg",
                title: "Aggregation: wire packets per forwarded packet",
                y_label: "packets per aggregate",
                log: false,
                series: &["unsorted", "sorted"],
                groups: &[
                    ("1 flow", &["agg_1flow_unsorted", "agg_1flow_sorted"]),
                    ("64 flows", &["agg_64flows_unsorted", "agg_64flows_sorted"]),
                    ("1000 flows", &["agg_1000flows_unsorted", "agg_1000flows_sorted"]),
                ],
            },
        ],
        available: always,
        run: run_lro,
    },
    Scenario {
        name: "vhost",
        result: Some(4),
        title: "Paravirtual NIC transmit strategies on vhost-user, between two processes",
        kind: Kind::Model,
        default: true,
        original: "Paravirtual NIC: a lone non-GSO packet gets its checksum in software so that it can use the \
                   single-descriptor path: 631k -> 829k packets/s.",
        models: "superpacket's virtio-user frontend in this process and the engine's vhost-user port in a peer \
                 process (`superpacket vhost-peer`, an echo responder), request/response UDP over split \
                 virtqueues with INDIRECT_DESC and the three transmit strategies: swcsum_direct (the policy: a \
                 lone packet gets a software checksum and one direct descriptor), offload_indirect (always \
                 offload, the virtio_net_hdr in its own descriptor behind an indirect table) and direct_nocsum \
                 (offload in one direct descriptor).",
        real: "A real vhost-user connection (the vhost crate's frontend and vhost-user-backend's daemon), \
               guest memory in a shared memfd, eventfd kicks and calls with EVENT_IDX, busy polling; the \
               device side is the code a vhost-user port of `superpacket run` runs; the strategies run \
               interleaved.",
        simulated: "No hypervisor and no guest kernel: the frontend stands in for a guest's virtio-net driver.",
        pairs: &[
            Pair {
                label: "request/response rate, software checksum + direct vs offload + indirect",
                baseline: "rr_tps_offload_indirect",
                candidate: "rr_tps_swcsum_direct",
                better: Better::Higher,
            },
            Pair {
                label: "request/response rate, software checksum + direct vs direct without checksum offload",
                baseline: "rr_tps_direct_nocsum",
                candidate: "rr_tps_swcsum_direct",
                better: Better::Higher,
            },
            Pair {
                label: "lone-packet stream rate, software checksum + direct vs offload + indirect",
                baseline: "stream_pps_offload_indirect",
                candidate: "stream_pps_swcsum_direct",
                better: Better::Higher,
            },
        ],
        key: &[KeyFigure {
            label: "request/response rate, swcsum_direct / offload_indirect",
            baseline: "rr_tps_offload_indirect",
            candidate: "rr_tps_swcsum_direct",
            better: Better::Higher,
            original: "631k -> 829k packets/s",
            original_ratio: Some(829.0 / 631.0),
        }],
        plots: &[PlotSpec {
            file: "vhost-tx.svg",
            title: "vhost-user: transmit strategies of the virtio-user frontend",
            y_label: "transactions or packets per second",
            log: false,
            series: &["offload_indirect", "direct_nocsum", "swcsum_direct"],
            groups: &[
                ("request/response", &["rr_tps_offload_indirect", "rr_tps_direct_nocsum", "rr_tps_swcsum_direct"]),
                (
                    "lone-packet stream",
                    &["stream_pps_offload_indirect", "stream_pps_direct_nocsum", "stream_pps_swcsum_direct"],
                ),
            ],
        }],
        available: always,
        run: |o, p| Ok(super::vhost_tx::run_with_progress(&super::tx_strategies::TxBenchOptions { quick: o.quick }, p)),
    },
    Scenario {
        name: "qinq-tso",
        result: Some(5),
        title: "TCP TSO over 802.1Q on 802.1ad on a bond and a team: CPU per GB, passthrough vs legacy",
        kind: Kind::Model,
        default: true,
        original: "Linux enabled TSO for double-tagged (802.1ad + 802.1Q) packets on bond and team devices: \
                   system CPU went from 11.3% to 4.2% at the same throughput.",
        models: "8 TCP flows sending 62 KB TSO superpackets (MSS 1448) down 802.1Q VLAN 200 on 802.1ad VLAN 100 \
                 on a bond and on a team of two ports (examples/seed-qinq-tso.toml). passthrough: the ports' \
                 features_check takes two tags, so superpackets reach them whole (NIC TSO); legacy: the old core \
                 rule strips TSO from double-tagged packets, so they are cut in software at the bond or team.",
        real: "The device graph (VLAN stack, bond and team transmit hashing, feature negotiation, software \
               segmentation with checksums), timed with the engine thread's CPU time (and wall time).",
        simulated: "In-memory ports (segments counted, not copied). Only the engine's CPU is counted; the \
                    original measured a whole system's CPU at a fixed throughput.",
        pairs: &[
            Pair {
                label: "bond CPU per GB",
                baseline: "bond_legacy_cpu_s_per_gb",
                candidate: "bond_passthrough_cpu_s_per_gb",
                better: Better::Lower,
            },
            Pair {
                label: "team CPU per GB",
                baseline: "team_legacy_cpu_s_per_gb",
                candidate: "team_passthrough_cpu_s_per_gb",
                better: Better::Lower,
            },
            Pair {
                label: "bond throughput",
                baseline: "bond_legacy_gbps",
                candidate: "bond_passthrough_gbps",
                better: Better::Higher,
            },
            Pair {
                label: "team throughput",
                baseline: "team_legacy_gbps",
                candidate: "team_passthrough_gbps",
                better: Better::Higher,
            },
        ],
        key: &[KeyFigure {
            label: "CPU per GB, legacy / passthrough (bond and team averaged)",
            baseline: "qinq_tso_legacy_cpu_s_per_gb",
            candidate: "qinq_tso_passthrough_cpu_s_per_gb",
            better: Better::Lower,
            original: "11.3% -> 4.2% system CPU",
            original_ratio: Some(11.3 / 4.2),
        }],
        plots: &[PlotSpec {
            file: "qinq-tso-cpu.svg",
            title: "QinQ TSO on bond and team: engine CPU per GB",
            y_label: "CPU s/GB (log)",
            log: true,
            series: &["legacy", "passthrough"],
            groups: &[
                ("bond", &["bond_legacy_cpu_s_per_gb", "bond_passthrough_cpu_s_per_gb"]),
                ("team", &["team_legacy_cpu_s_per_gb", "team_passthrough_cpu_s_per_gb"]),
            ],
        }],
        available: always,
        run: run_qinq_tso,
    },
];

/// The registry entry called `name`.
pub fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

fn run_vlan_nat(o: &RunOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> Result<BenchReport, String> {
    on_step("UDP L4 and fraglist, passthrough and legacy", 0, 1);
    Ok(seed_vlan_nat::run(&seed_vlan_nat::VlanNatOptions { quick: o.quick }))
}

fn run_qinq_tso(o: &RunOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> Result<BenchReport, String> {
    on_step("bond and team, passthrough and legacy", 0, 1);
    Ok(seed_qinq_tso::run(&seed_qinq_tso::QinqTsoOptions { quick: o.quick }))
}

fn run_lro(o: &RunOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> Result<BenchReport, String> {
    let opts = lro_forward::LroForwardOptions { quick: o.quick, seed: o.run as u64 + 1 };
    Ok(lro_forward::run_with_progress(&opts, on_step))
}

/// Result 2: the ring-pressure model of [`defrag`] for both families and
/// every loss rate, a different loss pattern per run, plus the measured
/// in-order reassembly speed.
fn run_defrag(o: &RunOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> Result<BenchReport, String> {
    let mut report = BenchReport::new("defrag");
    let seed = o.run as u64 + 1;
    let short = if o.quick { 0.25 } else { 2.0 };
    let steps = 2 * defrag::LOSSES.len() + 2;
    let mut step = 0;
    for v6 in [false, true] {
        let fam = if v6 { "v6" } else { "v4" };
        let long = if v6 { 120.0 } else { 60.0 };
        for loss in defrag::LOSSES {
            on_step(&format!("{fam} loss {}%", loss * 100.0), step, steps);
            step += 1;
            let c = defrag::simulate(v6, loss, Delivery::Local, MemoryPolicy::EvictOldest, short, seed);
            let nc = defrag::simulate(v6, loss, Delivery::Forward, MemoryPolicy::EvictOldest, long, seed);
            let tag = format!("{fam}_{}pct", loss * 100.0);
            report.push(format!("{tag}_coalesce_gbps"), c.goodput_gbps(), "Gbps");
            report.push(format!("{tag}_nocoalesce_gbps"), nc.goodput_gbps(), "Gbps");
            report.push(format!("{tag}_nocoalesce_ring_drops"), nc.ring_drops as f64, "fragments");
        }
    }
    let cfg = if o.quick { MeasureConfig::quick() } else { MeasureConfig::standard() };
    for v6 in [false, true] {
        let fam = if v6 { "v6" } else { "v4" };
        on_step(&format!("in-order reassembly {fam}"), step, steps);
        step += 1;
        let (reasm, memcpy, _) = defrag::reasm_vs_memcpy(v6, &cfg);
        report.push(format!("reasm_gbps_{fam}"), reasm, "Gbps");
        report.push(format!("memcpy_gbps_{fam}"), memcpy, "Gbps");
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_consistent() {
        let mut names = Vec::new();
        for s in SCENARIOS {
            assert!(!names.contains(&s.name), "duplicate {}", s.name);
            names.push(s.name);
            assert!(!s.pairs.is_empty() && !s.key.is_empty() && !s.plots.is_empty(), "{}", s.name);
            for p in s.plots {
                assert!(p.file.ends_with(".svg"));
                for (_, figs) in p.groups {
                    assert_eq!(figs.len(), p.series.len(), "{} {}", s.name, p.file);
                }
            }
        }
        assert_eq!(find("lro").map(|s| s.result), Some(Some(3)));
        assert!(find("nope").is_none());
    }

    #[test]
    fn defrag_runs_differ_by_seed() {
        let o = |run| RunOptions { quick: true, run, live_seconds: 1.0 };
        let a = run_defrag(&o(0), &mut |_, _, _| {}).unwrap();
        let b = run_defrag(&o(1), &mut |_, _, _| {}).unwrap();
        for s in SCENARIOS.iter().filter(|s| s.name == "defrag") {
            for p in s.pairs {
                let (x, y) = (a.get(p.candidate).unwrap(), a.get(p.baseline).unwrap());
                assert!(x > 5.0 && y > 0.0 && x > 100.0 * y, "{}: {x} vs {y}", p.label);
            }
        }
        // Another run draws other losses: the goodputs differ.
        assert_ne!(a.get("v4_1pct_coalesce_gbps"), b.get("v4_1pct_coalesce_gbps"));
    }
}
