//! Counting the user-space instructions of a measured piece of work, by
//! one of two methods:
//!
//! - [`HardwareCounter`]: the CPU's retired-instruction counter through
//!   `perf_event_open` (the `perf-event2` crate), this thread only, user
//!   space only, read around the work in the same process. Virtual machines
//!   often do not expose it (the syscall fails with `ENOENT` or
//!   `EOPNOTSUPP`), and `perf_event_paranoid` may forbid it.
//! - callgrind: the benchmark runs itself again under `valgrind
//!   --tool=callgrind --collect-atstart=no --toggle-collect=` [`TOGGLE_PATTERN`]
//!   (so only [`instructions_measured`] and what it calls are counted), one
//!   process per row, and reads the collected `Ir` from callgrind's output
//!   file ([`run_under_callgrind`]).
//!
//! Both count the same code: the work always runs inside
//! [`instructions_measured`], whose one indirect call is the only overhead
//! either method adds (a handful of instructions per measured block, not per
//! packet).

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use perf_event::Builder;
use perf_event::events::Hardware;

/// Which method counted the instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// The CPU's retired-instruction counter (`perf_event_open`).
    Hardware,
    /// valgrind's callgrind (`Ir`: instructions executed on its simulated CPU).
    Callgrind,
}

impl Method {
    /// How the human table names the method.
    pub fn describe(self) -> &'static str {
        match self {
            Method::Hardware => {
                "hardware counter (perf_event_open, PERF_COUNT_HW_INSTRUCTIONS, user space, this thread)"
            }
            Method::Callgrind => {
                "callgrind (valgrind --tool=callgrind, Ir inside the measured function, one process per row)"
            }
        }
    }
}

/// The glob callgrind's `--toggle-collect` is given: it matches
/// [`instructions_measured`]'s demangled name.
pub const TOGGLE_PATTERN: &str = "*instructions_measured*";

/// Runs `work`. Never inlined, so that callgrind can switch collection on
/// at its entry and off at its exit ([`TOGGLE_PATTERN`]); everything `work`
/// calls is counted.
#[inline(never)]
pub fn instructions_measured(work: &mut dyn FnMut()) {
    work();
}

/// Where a row's work goes to be counted: the row calls [`Meter::measure`]
/// for each block of work it wants counted, and runs warm-up work directly.
pub trait Meter {
    /// Runs `work` as counted work.
    fn measure(&mut self, work: &mut dyn FnMut());
}

/// The meter of a process running under callgrind: it only runs the work
/// inside [`instructions_measured`]; callgrind does the counting.
#[derive(Debug, Default)]
pub struct CallgrindMeter;

impl Meter for CallgrindMeter {
    fn measure(&mut self, work: &mut dyn FnMut()) {
        instructions_measured(work);
    }
}

/// The hardware instruction counter of the calling thread (user space only).
pub struct HardwareCounter {
    counter: perf_event::Counter,
    /// Instructions counted so far by [`Meter::measure`].
    pub total: u64,
    /// The first error met while counting (the count is then unusable).
    pub error: Option<String>,
}

impl HardwareCounter {
    /// Opens the counter, and checks that it counts: a VM may accept the
    /// event and never advance it.
    ///
    /// # Errors
    /// Why the counter cannot be used, as text.
    pub fn open() -> Result<HardwareCounter, String> {
        let counter = Builder::new(Hardware::INSTRUCTIONS)
            .build()
            .map_err(|e| format!("perf_event_open(PERF_COUNT_HW_INSTRUCTIONS): {e}"))?;
        let mut hw = HardwareCounter { counter, total: 0, error: None };
        let mut x = 0u64;
        hw.measure(&mut || {
            for i in 0..1000u64 {
                x = std::hint::black_box(x.wrapping_add(i));
            }
        });
        match (hw.error.take(), hw.total) {
            (Some(e), _) => Err(e),
            (None, 0) => Err("the hardware instruction counter opened but did not count".to_string()),
            (None, _) => {
                hw.total = 0;
                Ok(hw)
            }
        }
    }

    fn count(&mut self, work: &mut dyn FnMut()) -> io::Result<u64> {
        self.counter.reset()?;
        self.counter.enable()?;
        instructions_measured(work);
        self.counter.disable()?;
        let c = self.counter.read_count_and_time()?;
        // Multiplexed with other events, the counter ran only part of the
        // time and its count would be an estimate: refuse it.
        if c.time_running != c.time_enabled {
            return Err(io::Error::other(format!(
                "the counter was multiplexed (ran {} of {} ns): its count is an estimate",
                c.time_running, c.time_enabled
            )));
        }
        Ok(c.count)
    }
}

impl Meter for HardwareCounter {
    fn measure(&mut self, work: &mut dyn FnMut()) {
        match self.count(work) {
            Ok(n) => self.total += n,
            Err(e) => {
                self.error.get_or_insert_with(|| format!("hardware counter: {e}"));
            }
        }
    }
}

/// Whether `valgrind` runs here (its version, or why not).
///
/// # Errors
/// Why valgrind cannot be run, as text.
pub fn valgrind_version() -> Result<String, String> {
    let out = Command::new("valgrind").arg("--version").output().map_err(|e| format!("valgrind: {e}"))?;
    if !out.status.success() {
        return Err(format!("`valgrind --version` exited with {}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// What a process run under callgrind reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallgrindRun {
    /// Instructions collected inside [`instructions_measured`].
    pub instructions: u64,
    /// The process's standard output.
    pub stdout: String,
}

/// Runs `exe args` under callgrind, collecting only inside
/// [`instructions_measured`], and returns the collected instructions and
/// the program's standard output. The output file goes to `out_dir` and is
/// removed afterwards.
///
/// # Errors
/// valgrind missing or failing, the program failing, or an output file
/// without a total, as text.
pub fn run_under_callgrind(exe: &Path, args: &[String], out_dir: &Path) -> Result<CallgrindRun, String> {
    let out_file: PathBuf = out_dir.join(format!(
        "superpacket-instructions-{}-{}.callgrind",
        std::process::id(),
        args.iter().map(|a| a.replace(|c: char| !c.is_ascii_alphanumeric(), "")).collect::<Vec<_>>().join("-")
    ));
    let out = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg("--collect-atstart=no")
        .arg(format!("--toggle-collect={TOGGLE_PATTERN}"))
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(exe)
        .args(args)
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    let text = std::fs::read_to_string(&out_file);
    let _ = std::fs::remove_file(&out_file);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        return Err(format!(
            "callgrind run of {} {} exited with {}: {}",
            exe.display(),
            args.join(" "),
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    let text = text.map_err(|e| format!("callgrind output {}: {e}", out_file.display()))?;
    let instructions = parse_total(&text)
        .ok_or_else(|| format!("callgrind output {} has no `totals:` or `summary:` line", out_file.display()))?;
    Ok(CallgrindRun { instructions, stdout: String::from_utf8_lossy(&out.stdout).into_owned() })
}

/// The first event's total of a callgrind output file: its `totals:` line,
/// else its `summary:` line (older files). `None` if neither is there or
/// the figure is not a number.
pub fn parse_total(callgrind_out: &str) -> Option<u64> {
    let field = |key: &str| {
        callgrind_out
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    };
    field("totals:").or_else(|| field("summary:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_total_reads_totals_then_summary() {
        let file = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 900\nfn=(1) x\n5 3\ntotals: 1234\n";
        assert_eq!(parse_total(file), Some(1234));
        assert_eq!(parse_total("events: Ir\nsummary: 77\n"), Some(77));
        assert_eq!(parse_total("events: Ir\n"), None);
        assert_eq!(parse_total("totals: many\n"), None);
    }

    #[test]
    fn callgrind_meter_runs_the_work() {
        let mut ran = 0;
        CallgrindMeter.measure(&mut || ran += 1);
        assert_eq!(ran, 1);
    }
}
