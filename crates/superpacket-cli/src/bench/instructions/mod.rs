//! `superpacket bench instructions`: the instruction budget (issue 27).
//!
//! Instructions executed per unit of work, which unlike times do not move
//! with the neighbours on a shared machine: per wire packet for GRO (TCP and
//! UDP, 1 and 64 flows, checksums verified and trusted), per segment and per
//! payload byte for GSO (scatter-gather and linear), per fragment for
//! reassembly, per superpacket for the device graph's bridge and router
//! paths, and per byte for the checksum. The rows and their work are in
//! [`rows`]; the counting methods in [`counter`]: the hardware counter when
//! the machine exposes it, else callgrind (the benchmark runs itself again
//! under valgrind, one row per process). The two methods count the same
//! code but not the same CPU: callgrind's simulated CPU may lack features
//! the real one has (AVX-512), so the checksum dispatch may differ.
//!
//! Budgets (most instructions per packet) are the issue's: GRO TCP single
//! flow trusted 450, 64 flows trusted 600. They are reported, met or not;
//! `--check` turns a missed budget into exit 1.

pub mod counter;
pub mod rows;

use std::path::Path;

use serde::Serialize;

use counter::{CallgrindMeter, HardwareCounter, Method, run_under_callgrind, valgrind_version};
use rows::{Counted, Per, ROWS, Row};

/// Which counting method to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MethodChoice {
    /// The hardware counter if it works here, else callgrind.
    #[default]
    Auto,
    /// The hardware counter only.
    Hardware,
    /// callgrind only.
    Callgrind,
}

/// Options of [`run`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstructionsOptions {
    /// Less work per row (figures differ slightly: fewer passes amortise
    /// less); for tests and smoke runs.
    pub quick: bool,
    /// Counting method.
    pub method: MethodChoice,
    /// Only the rows whose name contains this.
    pub only: Option<String>,
}

/// One row's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RowResult {
    /// Row name, e.g. `gro_tcp4_1flow_trusted`.
    pub name: String,
    /// What `per_unit` is per.
    pub per: Per,
    /// Instructions counted.
    pub instructions: u64,
    /// Units of work counted ([`RowResult::per`]).
    pub units: u64,
    /// Payload bytes of the counted work.
    pub bytes: u64,
    /// Instructions per unit.
    pub per_unit: f64,
    /// Instructions per payload byte (GSO rows).
    pub per_byte: Option<f64>,
    /// The budget: at most this many instructions per unit.
    pub budget: Option<f64>,
    /// Whether the budget is met (`None` without a budget).
    pub met: Option<bool>,
}

impl RowResult {
    fn new(row: &Row, instructions: u64, counted: Counted) -> RowResult {
        let per_unit = instructions as f64 / counted.units.max(1) as f64;
        RowResult {
            name: row.name.to_string(),
            per: row.per,
            instructions,
            units: counted.units,
            bytes: counted.bytes,
            per_unit,
            per_byte: (row.per == Per::Segment).then(|| instructions as f64 / counted.bytes.max(1) as f64),
            budget: row.budget,
            met: row.budget.map(|b| per_unit <= b),
        }
    }
}

/// The report of `superpacket bench instructions` (its `--json` shape).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstructionsReport {
    /// Always `"instructions"`.
    pub scenario: String,
    /// The counting method used.
    pub method: Method,
    /// Why the hardware counter was not used, when it was not; the
    /// valgrind version with callgrind.
    pub method_note: String,
    /// Whether `--quick` was given.
    pub quick: bool,
    /// The rows, in [`ROWS`] order.
    pub rows: Vec<RowResult>,
}

impl InstructionsReport {
    /// Whether every budget is met.
    pub fn budgets_met(&self) -> bool {
        self.rows.iter().all(|r| r.met != Some(false))
    }

    /// Compact JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a report always serialises")
    }
}

/// The rows `opts` selects.
fn selected(opts: &InstructionsOptions) -> Vec<&'static Row> {
    ROWS.iter().filter(|r| opts.only.as_deref().is_none_or(|s| r.name.contains(s))).collect()
}

/// The hidden argument a callgrind child gets: the row to run.
pub const CHILD_ARG: &str = "--callgrind-child";

/// Runs the benchmark, calling `on_step(row, done, total)` as it goes.
///
/// # Errors
/// No method can count here (the text says why for each), a row named by
/// `only` does not exist, or a row failed.
pub fn run(
    opts: &InstructionsOptions,
    on_step: &mut dyn FnMut(&str, usize, usize),
) -> Result<InstructionsReport, String> {
    let rows = selected(opts);
    if rows.is_empty() {
        let names: Vec<&str> = ROWS.iter().map(|r| r.name).collect();
        return Err(format!("no row matches {:?}; rows: {}", opts.only.as_deref().unwrap_or(""), names.join(", ")));
    }
    let hardware = match opts.method {
        MethodChoice::Callgrind => Err("not tried (--method callgrind)".to_string()),
        _ => HardwareCounter::open(),
    };
    let mut results = Vec::with_capacity(rows.len());
    let (method, method_note) = match hardware {
        Ok(mut hw) => {
            for (i, row) in rows.iter().enumerate() {
                on_step(row.name, i, rows.len());
                hw.total = 0;
                let counted = rows::run(row, opts.quick, &mut hw).map_err(|e| format!("{}: {e}", row.name))?;
                if let Some(e) = hw.error.take() {
                    return Err(format!("{}: {e}", row.name));
                }
                results.push(RowResult::new(row, hw.total, counted));
            }
            (Method::Hardware, String::new())
        }
        Err(hw_why) if opts.method == MethodChoice::Hardware => {
            return Err(format!("hardware instruction counter unavailable: {hw_why}"));
        }
        Err(hw_why) => {
            let version = valgrind_version().map_err(|vg_why| {
                format!("no way to count instructions here: hardware counter: {hw_why}; callgrind: {vg_why}")
            })?;
            let exe = std::env::current_exe().map_err(|e| format!("the benchmark's own executable: {e}"))?;
            for (i, row) in rows.iter().enumerate() {
                on_step(row.name, i, rows.len());
                let (instructions, counted) =
                    callgrind_row(&exe, row, opts.quick).map_err(|e| format!("{}: {e}", row.name))?;
                results.push(RowResult::new(row, instructions, counted));
            }
            (Method::Callgrind, format!("{version}; hardware counter not used: {hw_why}"))
        }
    };
    on_step("done", rows.len(), rows.len());
    Ok(InstructionsReport {
        scenario: "instructions".to_string(),
        method,
        method_note,
        quick: opts.quick,
        rows: results,
    })
}

/// Runs one row in a child process under callgrind: the child is this
/// executable with `bench instructions --callgrind-child ROW`, which prints
/// what it counted over as JSON.
fn callgrind_row(exe: &Path, row: &Row, quick: bool) -> Result<(u64, Counted), String> {
    let mut args = vec!["bench".to_string(), "instructions".to_string(), CHILD_ARG.to_string(), row.name.to_string()];
    if quick {
        args.push("--quick".to_string());
    }
    let run = run_under_callgrind(exe, &args, &std::env::temp_dir())?;
    let last = run.stdout.lines().last().unwrap_or("");
    let counted: Counted =
        serde_json::from_str(last).map_err(|e| format!("the callgrind child printed {last:?}, not its work: {e}"))?;
    if run.instructions == 0 {
        return Err("callgrind collected no instructions: the measured function was not found".to_string());
    }
    Ok((run.instructions, counted))
}

/// The callgrind child: runs `row` with every measured block inside
/// [`counter::instructions_measured`] and returns what it counted over, as
/// the JSON line the parent reads.
///
/// # Errors
/// No such row, or the row failed.
pub fn child(row: &str, quick: bool) -> Result<String, String> {
    let row = rows::row(row).ok_or_else(|| format!("no row {row:?}"))?;
    let counted = rows::run(row, quick, &mut CallgrindMeter)?;
    Ok(serde_json::to_string(&counted).expect("plain numbers serialise"))
}

/// Human-readable rendering: the method, then one line per row.
pub fn render_human(report: &InstructionsReport) -> String {
    let mut out = format!("instructions benchmark, counted by {}\n", report.method.describe());
    if !report.method_note.is_empty() {
        out += &format!("  ({})\n", report.method_note);
    }
    if report.quick {
        out += "  (--quick: less work per row; figures are indicative)\n";
    }
    let name_w = report.rows.iter().map(|r| r.name.len()).max().unwrap_or(0).max(4);
    out += &format!(
        "{:<name_w$}  {:>12}  {:<12}  {:>9}  {:>7}  verdict\n",
        "row", "instructions", "per", "per byte", "budget"
    );
    for r in &report.rows {
        let per = serde_json::to_value(r.per).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        out += &format!(
            "{:<name_w$}  {:>12}  {:<12}  {:>9}  {:>7}  {}\n",
            r.name,
            if r.per_unit < 10.0 { format!("{:.3}", r.per_unit) } else { format!("{:.1}", r.per_unit) },
            per,
            r.per_byte.map_or("-".to_string(), |b| format!("{b:.3}")),
            r.budget.map_or("-".to_string(), |b| format!("{b:.0}")),
            match r.met {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "-",
            }
        );
    }
    out
}
