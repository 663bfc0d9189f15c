//! The topology parser (`Topology::parse`, TOML) on arbitrary text, and the
//! graph build for topologies that only use in-memory ports (never anything
//! that opens a TAP, socket or file). Invariants: no panic; an error names a
//! line and column inside the text (or line 0 for errors without a place);
//! parsing is deterministic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use superpacket_engine::device::topology::Topology;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    match Topology::parse(src) {
        Ok(t) => {
            // Only memory ports: no driver given (`driver` absent means memory).
            if t.spec.devices.iter().all(|d| d.driver.is_none()) {
                if let Err(e) = t.build() {
                    check_place(src, e.line, e.column);
                }
            }
        }
        Err(e) => {
            check_place(src, e.line, e.column);
            assert!(!e.to_string().is_empty());
            let again = Topology::parse(src).expect_err("parse is deterministic");
            assert_eq!((again.line, again.column), (e.line, e.column));
        }
    }
});

fn check_place(src: &str, line: usize, column: usize) {
    let lines = src.split('\n').count();
    assert!(line <= lines, "error on line {line} of a {lines}-line text");
    if line == 0 {
        return;
    }
    let text = src.split('\n').nth(line - 1).unwrap_or("");
    assert!(column <= text.len() + 1, "column {column} beyond line {line} ({text:?})");
}
