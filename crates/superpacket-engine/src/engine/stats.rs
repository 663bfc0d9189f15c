//! Counters of a running engine: what each worker publishes, how the
//! workers' figures are summed, and the three ways `superpacket stats`
//! shows them (a table, JSON, Prometheus text format).
//!
//! Every counter is a flat `(name, value)` pair: the device counters
//! (`rx_packets`, `tx_superpackets`, `drops.<reason>`, ...), the driver's own
//! (`driver.tx_batches`, ...) and GRO's (`gro.merged`, `gro.flushed.batch_end`,
//! ...). Summing workers is summing equal names.
//!
//! Next to the devices, the bounded tables ([`crate::device::tables`]:
//! neighbours, neighbour queue, NAT connections, reassembly bytes and
//! queues, GRO flow tables) with their size, peak and limit, and their
//! refusals/evictions by reason. Most tables are each worker's own: the
//! engine's figures are the workers' sums (a summed peak is an upper bound
//! of the engine's peak). NAT's connection table and, with several
//! workers, the neighbour table are one table all workers use
//! ([`TableUsage::shared`]): counted once, their events still summed.

use crate::device::{DeviceCounters, TableUsage};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;
use superpacket::offload::gro::GroCounters;

/// One device as a worker saw it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeviceSnapshot {
    /// Device name.
    pub name: String,
    /// `port`, `vlan`, `bond`, `team` or `bridge`.
    pub kind: String,
    /// Carrier up.
    pub carrier: bool,
    /// The graph's counters for the device.
    pub counters: DeviceCounters,
    /// The port driver's own counters.
    pub driver: Vec<(String, u64)>,
    /// GRO counters of a port with `gro = true`.
    pub gro: Option<GroCounters>,
}

/// What one worker publishes.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WorkerSnapshot {
    /// Worker index.
    pub worker: usize,
    /// Seconds since it started.
    pub uptime_s: f64,
    /// Loop rounds.
    pub rounds: u64,
    /// Packets taken from port drivers.
    pub packets_polled: u64,
    /// CPU time of the worker thread.
    pub cpu_seconds: f64,
    /// Every device of its graph.
    pub devices: Vec<DeviceSnapshot>,
    /// Its bounded tables.
    pub tables: Vec<TableUsage>,
}

/// One device, summed over the workers, as flat counters.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DeviceTotals {
    /// Device name.
    pub name: String,
    /// Device kind.
    pub kind: String,
    /// Carrier up on every worker.
    pub carrier: bool,
    /// Flat counters (see the module documentation).
    pub counters: BTreeMap<String, u64>,
}

impl DeviceTotals {
    /// A counter, 0 when absent.
    pub fn get(&self, key: &str) -> u64 {
        self.counters.get(key).copied().unwrap_or(0)
    }

    /// Every `drops.*` counter summed.
    pub fn dropped(&self) -> u64 {
        self.counters.iter().filter(|(k, _)| k.starts_with("drops.")).map(|(_, v)| v).sum()
    }
}

/// The whole engine: workers summed.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct EngineSnapshot {
    /// Workers running.
    pub workers: usize,
    /// Seconds since the engine started (the oldest worker).
    pub uptime_s: f64,
    /// CPU seconds of all workers.
    pub cpu_seconds: f64,
    /// Loop rounds of all workers.
    pub rounds: u64,
    /// Packets taken from port drivers by all workers.
    pub packets_polled: u64,
    /// Packets taken from port drivers by each worker, in worker order:
    /// how the kernel spread the traffic over them.
    pub worker_packets: Vec<u64>,
    /// Devices, in topology order.
    pub devices: Vec<DeviceTotals>,
    /// Bounded tables, summed over the workers by name (a table the
    /// workers share, [`TableUsage::shared`], counted once).
    pub tables: Vec<TableTotals>,
}

/// One bounded table, summed over the workers.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct TableTotals {
    /// Table name (`neighbours`, `neighbour-queue`, `conntrack`,
    /// `reasm-bytes`, `reasm-queues`, `gro:<port>`).
    pub name: String,
    /// In use now (entries; bytes for `reasm-bytes`).
    pub size: u64,
    /// Highest size seen.
    pub peak: u64,
    /// Configured limit.
    pub limit: u64,
    /// Refusals, evictions and expiries by reason.
    pub events: BTreeMap<String, u64>,
}

/// Adds every numeric leaf of `v` to `out` under `prefix` + its dotted path.
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, u64>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, child) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, child, out);
            }
        }
        serde_json::Value::Number(n) => {
            if let Some(x) = n.as_u64() {
                *out.entry(prefix.to_string()).or_insert(0) += x;
            }
        }
        _ => {}
    }
}

impl EngineSnapshot {
    /// Sums the workers' snapshots device by device (by name).
    pub fn merge(workers: &[WorkerSnapshot]) -> EngineSnapshot {
        let mut snap = EngineSnapshot { workers: workers.len(), ..EngineSnapshot::default() };
        for w in workers {
            snap.uptime_s = snap.uptime_s.max(w.uptime_s);
            snap.cpu_seconds += w.cpu_seconds;
            snap.rounds += w.rounds;
            snap.packets_polled += w.packets_polled;
            snap.worker_packets.push(w.packets_polled);
            for t in &w.tables {
                let pos = match snap.tables.iter().position(|x| x.name == t.name) {
                    Some(p) => p,
                    None => {
                        snap.tables.push(TableTotals { name: t.name.clone(), ..TableTotals::default() });
                        snap.tables.len() - 1
                    }
                };
                let x = &mut snap.tables[pos];
                if t.shared {
                    // Every worker reports the one table: count it once.
                    x.size = x.size.max(t.size);
                    x.peak = x.peak.max(t.peak);
                    x.limit = x.limit.max(t.limit);
                } else {
                    x.size += t.size;
                    x.peak += t.peak;
                    x.limit += t.limit;
                }
                for (k, v) in &t.events {
                    *x.events.entry(k.clone()).or_insert(0) += v;
                }
            }
            for d in &w.devices {
                let pos = match snap.devices.iter().position(|t| t.name == d.name) {
                    Some(p) => p,
                    None => {
                        snap.devices.push(DeviceTotals {
                            name: d.name.clone(),
                            kind: d.kind.clone(),
                            carrier: true,
                            counters: BTreeMap::new(),
                        });
                        snap.devices.len() - 1
                    }
                };
                let t = &mut snap.devices[pos];
                t.carrier &= d.carrier;
                if let Ok(v) = serde_json::to_value(&d.counters) {
                    flatten("", &v, &mut t.counters);
                }
                for (k, v) in &d.driver {
                    *t.counters.entry(format!("driver.{k}")).or_insert(0) += v;
                }
                if let Some(g) = &d.gro
                    && let Ok(v) = serde_json::to_value(g)
                {
                    flatten("gro", &v, &mut t.counters);
                }
            }
        }
        snap
    }

    /// A table by name.
    pub fn table(&self, name: &str) -> Option<&TableTotals> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// A device by name.
    pub fn device(&self, name: &str) -> Option<&DeviceTotals> {
        self.devices.iter().find(|d| d.name == name)
    }

    /// The table `superpacket stats` prints: one line per device, then the
    /// non-zero drop reasons, driver and GRO counters under it.
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "superpacket engine: {} worker(s), up {:.1} s, {:.2} CPU s, {} packets polled{}",
            self.workers,
            self.uptime_s,
            self.cpu_seconds,
            self.packets_polled,
            if self.worker_packets.len() > 1 {
                let each: Vec<String> = self.worker_packets.iter().map(u64::to_string).collect();
                format!(" ({})", each.join(" + "))
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            s,
            "{:<16} {:<7} {:>4} {:>12} {:>10} {:>14} {:>12} {:>10} {:>14} {:>10} {:>9}",
            "device",
            "kind",
            "link",
            "rx_pkts",
            "rx_super",
            "rx_bytes",
            "tx_pkts",
            "tx_super",
            "tx_bytes",
            "segments",
            "drops"
        );
        for d in &self.devices {
            let _ = writeln!(
                s,
                "{:<16} {:<7} {:>4} {:>12} {:>10} {:>14} {:>12} {:>10} {:>14} {:>10} {:>9}",
                d.name,
                d.kind,
                if d.carrier { "up" } else { "down" },
                d.get("rx_packets"),
                d.get("rx_superpackets"),
                d.get("rx_bytes"),
                d.get("tx_packets"),
                d.get("tx_superpackets"),
                d.get("tx_bytes"),
                d.get("segments_produced"),
                d.dropped()
            );
            let details: Vec<String> = d
                .counters
                .iter()
                .filter(|(k, v)| {
                    **v > 0
                        && (k.starts_with("drops.")
                            || k.starts_with("driver.")
                            || matches!(
                                k.as_str(),
                                "gro.packets_in" | "gro.superpackets" | "gro.superpacket_segments" | "gro.merged"
                            ))
                })
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            if !details.is_empty() {
                let _ = writeln!(s, "    {}", details.join(" "));
            }
        }
        if !self.tables.is_empty() {
            let _ = writeln!(s, "{:<24} {:>12} {:>12} {:>12}  events", "table", "size", "peak", "limit");
            for t in &self.tables {
                let events: Vec<String> = t.events.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let _ =
                    writeln!(s, "{:<24} {:>12} {:>12} {:>12}  {}", t.name, t.size, t.peak, t.limit, events.join(" "));
            }
        }
        s
    }

    /// Prometheus text exposition format (version 0.0.4): every counter as
    /// `superpacket_<group>_<name>{device="..",kind=".."}`; drop reasons as
    /// a `reason` label of `superpacket_device_drops`.
    pub fn render_prometheus(&self) -> String {
        let mut by_metric: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for d in &self.devices {
            for (k, v) in &d.counters {
                let (metric, extra) = match k.split_once('.') {
                    Some(("drops", reason)) => {
                        ("superpacket_device_drops".to_string(), format!(",reason=\"{reason}\""))
                    }
                    Some((group, rest)) => (format!("superpacket_{group}_{}", rest.replace('.', "_")), String::new()),
                    None => (format!("superpacket_device_{k}"), String::new()),
                };
                let line = format!("{metric}{{device=\"{}\",kind=\"{}\"{extra}}} {v}", d.name, d.kind);
                by_metric.entry(metric).or_default().push(line);
            }
        }
        for t in &self.tables {
            for (metric, v) in [("size", t.size), ("peak", t.peak), ("limit", t.limit)] {
                let metric = format!("superpacket_table_{metric}");
                let line = format!("{metric}{{table=\"{}\"}} {v}", t.name);
                by_metric.entry(metric).or_default().push(line);
            }
            for (reason, v) in &t.events {
                let metric = "superpacket_table_events".to_string();
                let line = format!("{metric}{{table=\"{}\",reason=\"{reason}\"}} {v}", t.name);
                by_metric.entry(metric).or_default().push(line);
            }
        }
        let mut s = String::new();
        for (metric, lines) in by_metric {
            let kind = if matches!(metric.as_str(), "superpacket_table_size" | "superpacket_table_limit") {
                "gauge"
            } else {
                "counter"
            };
            let _ = writeln!(s, "# TYPE {metric} {kind}");
            for l in lines {
                let _ = writeln!(s, "{l}");
            }
        }
        let _ = writeln!(s, "# TYPE superpacket_engine_cpu_seconds counter");
        let _ = writeln!(s, "superpacket_engine_cpu_seconds {}", self.cpu_seconds);
        let _ = writeln!(s, "# TYPE superpacket_engine_packets_polled counter");
        let _ = writeln!(s, "superpacket_engine_packets_polled {}", self.packets_polled);
        let _ = writeln!(s, "# TYPE superpacket_engine_workers gauge");
        let _ = writeln!(s, "superpacket_engine_workers {}", self.workers);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(i: usize, rx: u64, drop: u64) -> WorkerSnapshot {
        let mut c = DeviceCounters { rx_packets: rx, ..DeviceCounters::default() };
        c.drops.insert("no-route", drop);
        WorkerSnapshot {
            worker: i,
            uptime_s: 1.0 + i as f64,
            rounds: 10,
            packets_polled: rx,
            cpu_seconds: 0.5,
            devices: vec![DeviceSnapshot {
                name: "p0".into(),
                kind: "port".into(),
                carrier: i == 0,
                counters: c,
                driver: vec![("tx_batches".into(), 3)],
                gro: Some(GroCounters { merged: 7, ..GroCounters::default() }),
            }],
            tables: vec![
                TableUsage::new("conntrack", 10 + i, 12, 100).event("table_full", 2),
                TableUsage::new("neighbours", 3 + i, 4, 1024).event("refused", 1).shared(true),
            ],
        }
    }

    #[test]
    fn workers_sum_by_device_and_name() {
        let s = EngineSnapshot::merge(&[worker(0, 5, 1), worker(1, 6, 2)]);
        assert_eq!(s.workers, 2);
        assert_eq!(s.packets_polled, 11);
        let d = s.device("p0").unwrap();
        assert_eq!(d.get("rx_packets"), 11);
        assert_eq!(d.get("drops.no-route"), 3);
        assert_eq!(d.dropped(), 3);
        assert_eq!(d.get("driver.tx_batches"), 6);
        assert_eq!(d.get("gro.merged"), 14);
        assert_eq!(d.get("gro.flushed.batch_end"), 0);
        assert!(!d.carrier, "down on one worker is down");
        let t = s.table("conntrack").unwrap();
        assert_eq!((t.size, t.peak, t.limit, t.events["table_full"]), (21, 24, 200, 4));
        let t = s.table("neighbours").unwrap();
        assert_eq!((t.size, t.peak, t.limit, t.events["refused"]), (4, 4, 1024, 2), "a shared table counts once");
        assert_eq!(s.worker_packets, [5, 6]);
        assert!(s.render_text().contains("11 packets polled (5 + 6)"), "{}", s.render_text());
        assert!(s.render_text().contains("conntrack"), "{}", s.render_text());
        assert!(s.render_text().contains("no-route") || s.render_text().contains("drops.no-route=3"));
    }

    #[test]
    fn prometheus_lines_are_well_formed() {
        let s = EngineSnapshot::merge(&[worker(0, 5, 1)]);
        let text = s.render_prometheus();
        assert!(text.contains("superpacket_device_rx_packets{device=\"p0\",kind=\"port\"} 5"), "{text}");
        assert!(text.contains("superpacket_device_drops{device=\"p0\",kind=\"port\",reason=\"no-route\"} 1"));
        assert!(text.contains("superpacket_gro_flushed_batch_end{"));
        assert!(text.contains("superpacket_table_limit{table=\"conntrack\"} 100"), "{text}");
        assert!(text.contains("superpacket_table_events{table=\"conntrack\",reason=\"table_full\"} 2"));
        assert!(text.contains("# TYPE superpacket_table_size gauge"));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
            assert!(name.starts_with("superpacket_"), "{line}");
        }
    }
}
