use super::csum::{CsumBenchOptions, SIZES, check_targets, render_human, run_with_progress};
use super::*;

#[test]
fn json_shape() {
    let mut r = BenchReport::new("demo");
    r.push("a_1", 1.5, "GB/s");
    r.push("flag", 1.0, "bool");
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["scenario"], "demo");
    assert_eq!(v["results"][0]["name"], "a_1");
    assert_eq!(v["results"][0]["value"], 1.5);
    assert_eq!(v["results"][0]["unit"], "GB/s");
    assert_eq!(v["results"].as_array().unwrap().len(), 2);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&r.to_json_pretty()).unwrap(), v);
    assert_eq!(r.get("flag"), Some(1.0));
    assert_eq!(r.get("missing"), None);
}

#[test]
fn table_is_aligned() {
    let mut r = BenchReport::new("demo");
    r.push("short", 1.25, "x");
    r.push("a_much_longer_name", 123.456, "GB/s");
    let t = r.to_table();
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[0], "scenario: demo");
    // Values are right-aligned: they all end in the same column.
    let ends: Vec<usize> = lines[1..].iter().map(|l| l.rfind("  ").unwrap()).collect();
    assert!(ends.windows(2).all(|w| w[0] == w[1]), "{t}");
    assert!(t.contains("1.250") && t.contains("123.5"), "{t}");
}

#[test]
fn median_and_measure() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    assert!(median(&[]).is_nan());
    let mut count = 0u64;
    let m = measure(&MeasureConfig::quick(), || count = std::hint::black_box(count + 1));
    assert_eq!(m.secs_per_iter.len(), MeasureConfig::quick().samples);
    assert!(m.iters_per_sample >= 1 && m.median() > 0.0 && m.median().is_finite());
}

#[test]
fn quick_csum_run_has_every_required_result() {
    let mut steps = Vec::new();
    let report =
        run_with_progress(&CsumBenchOptions { quick: true }, &mut |what, i, n| steps.push((what.to_string(), i, n)));
    assert_eq!(report.scenario, "csum");
    assert_eq!(steps.len(), SIZES.len() + 1);
    assert_eq!(steps.last().unwrap().1, SIZES.len());

    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    let names: Vec<&str> = json["results"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    for size in SIZES {
        for (prefix, unit) in [("csum", "GB/s"), ("memcpy", "GB/s"), ("ratio", "x")] {
            let name = format!("{prefix}_{size}");
            assert!(names.contains(&name.as_str()), "missing {name}");
            let r = report.results.iter().find(|r| r.name == name).unwrap();
            assert_eq!(r.unit, unit);
            assert!(r.value.is_finite() && r.value > 0.0, "{name} = {}", r.value);
        }
        for imp in superpacket::csum::Implementation::available() {
            let name = format!("csum_{}_{size}", imp.name());
            let v = report.get(&name).unwrap_or_else(|| panic!("missing {name}"));
            assert!(v.is_finite() && v > 0.0, "{name} = {v}");
        }
    }
    let selected = format!("impl_{}", superpacket::csum::Implementation::selected().name());
    assert_eq!(report.get(&selected), Some(1.0));
    assert!(report.results.iter().all(|r| r.value.is_finite()));

    // Targets are reported (not asserted: timings are not tested).
    assert_eq!(check_targets(&report).len(), 2);
    assert!(report.get("target_1500_pass").is_some() && report.get("target_65536_pass").is_some());
    let human = render_human(&report);
    assert!(human.contains("1500 B") && human.contains("64 MiB"), "{human}");
    assert_eq!(human.matches("PASS").count() + human.matches("FAIL").count(), 2, "{human}");
}

/// The peers harness refills every sample into the buffers the last one
/// gave back ([`gro::refill_bursts`], [`superpacket::packet::Packet::into_buffers`]):
/// after GRO merged 4 flows, every input buffer comes back, and the next
/// sample holds the same frames in the same memory.
#[test]
fn refilled_bursts_reuse_the_last_samples_buffers() {
    use superpacket::offload::gro::{Gro, GroConfig};
    use superpacket::packet::{ChecksumState, Packet};
    let p = gro::bursts(4, 1, 256, 64);
    let csum = ChecksumState::Unnecessary { level: 0 };
    let mut spare = Vec::new();
    let addresses = |bursts: &[Vec<Packet>]| {
        let mut a: Vec<usize> = bursts.iter().flatten().map(|p| p.linear().as_ptr() as usize).collect();
        a.sort_unstable();
        a
    };
    let mut first = gro::refill_bursts(&p.frames, 64, csum, &mut spare);
    let before = addresses(&first);
    let mut g = Gro::new(GroConfig::LINUX);
    let mut out = Vec::new();
    for burst in first.iter_mut() {
        g.receive_burst(burst);
        g.flush();
        g.take_delivered_into(&mut out);
    }
    assert!(out.len() < p.frames.len(), "GRO merged the flows");
    for pkt in out.drain(..) {
        pkt.into_buffers(&mut spare);
    }
    assert_eq!(spare.len(), p.frames.len());
    let second = gro::refill_bursts(&p.frames, 64, csum, &mut spare);
    assert!(spare.is_empty());
    assert_eq!(addresses(&second), before);
    let frames: Vec<Vec<u8>> = second.iter().flatten().map(|p| p.to_vec()).collect();
    assert_eq!(frames, p.frames);
}
