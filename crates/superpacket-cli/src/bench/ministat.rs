//! `superpacket ministat`: FreeBSD ministat's report over files of numbers.
//!
//! [`parse_values`] reads a data set as ministat does: one number per line
//! (the first whitespace-separated field, or the one `column` names), blank
//! lines and lines whose field starts with `#` skipped; anything else is an
//! error naming the line. [`render`] prints ministat's report: the data set
//! names with their symbols (`x`, `+`, `*`, `%`, `#`, `@`, `O`), the ASCII
//! distribution plot (each value a symbol, stacked when values share a
//! column; `*` where `x` and `+` share one; below, per data set, `|___|`
//! spans the mean ± one standard deviation, `M` marks the median and `A`
//! the mean), the summary table, and for every data set after the first
//! the t test against the first ([`super::stats::compare`]).
//!
//! The plot follows ministat's `PlotSet`/`DumpPlot` exactly, except that
//! the plot keeps the height of the tallest stack of any data set
//! (ministat sizes it for the last data set and cuts off taller stacks of
//! earlier ones).

use super::stats::{Summary, TestOptions, compare, fmt_g};

/// ministat's symbols: index `i + 1` is data set `i`'s; values are OR-ed
/// where data sets share a column, so `*` (3) is `x` (1) with `+` (2).
pub const SYMBOLS: [char; 8] = [' ', 'x', '+', '*', '%', '#', '@', 'O'];

/// Most data sets in one report (one symbol each).
pub const MAX_DATASETS: usize = 7;

/// ministat's default plot width.
pub const DEFAULT_WIDTH: usize = 74;

/// A named sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// Shown next to its symbol (ministat: the file name).
    pub name: String,
    /// The values, in any order.
    pub values: Vec<f64>,
}

/// A line that is not a number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Reads the numbers of a data set: field `column` (1-based) of each line,
/// fields separated by spaces or tabs; blank lines, lines with fewer fields
/// and lines where a field up to `column` starts with `#` are skipped.
///
/// # Errors
/// The first field that is not a finite number.
pub fn parse_values(text: &str, column: usize) -> Result<Vec<f64>, ParseError> {
    let column = column.max(1);
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut field = None;
        for (k, f) in line.split([' ', '\t', '\r']).filter(|f| !f.is_empty()).enumerate() {
            if f.starts_with('#') {
                break;
            }
            if k + 1 == column {
                field = Some(f);
                break;
            }
        }
        let Some(f) = field else { continue };
        match f.parse::<f64>() {
            Ok(v) if v.is_finite() => out.push(v),
            Ok(_) => return Err(ParseError { line: i + 1, message: format!("'{f}' is not a finite number") }),
            Err(_) => return Err(ParseError { line: i + 1, message: format!("'{f}' is not a number") }),
        }
    }
    Ok(out)
}

/// What [`render`] prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderOptions {
    /// Plot width in columns (ministat's `-w`, default 74).
    pub width: usize,
    /// One mean/median/stddev bar per data set (ministat's `-s`).
    pub separate_bars: bool,
    /// Draw the plot (ministat's `-A` turns it off).
    pub plot: bool,
    /// The test against the first data set.
    pub test: TestOptions,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions { width: DEFAULT_WIDTH, separate_bars: false, plot: true, test: TestOptions::default() }
    }
}

/// ministat's report. Data sets without values are listed as empty and
/// left out of the plot and the table; at most [`MAX_DATASETS`] are shown.
pub fn render(datasets: &[Dataset], opts: &RenderOptions) -> String {
    let sets: Vec<(usize, &Dataset, Option<Summary>)> =
        datasets.iter().take(MAX_DATASETS).enumerate().map(|(i, d)| (i + 1, d, Summary::of(&d.values))).collect();
    let mut out = String::new();
    for (sym, d, _) in &sets {
        out += &format!("{} {}\n", SYMBOLS[*sym], d.name);
    }
    let present: Vec<(usize, &Dataset, Summary)> =
        sets.iter().filter_map(|(sym, d, s)| s.map(|s| (*sym, *d, s))).collect();
    if opts.plot && !present.is_empty() {
        out += &plot(&present, opts.width, opts.separate_bars);
    }
    out += "    N           Min           Max        Median           Avg        Stddev\n";
    for (sym, d, s) in &sets {
        let Some(s) = s else {
            out += &format!("{} {:>3}   (no values in {})\n", SYMBOLS[*sym], 0, d.name);
            continue;
        };
        out += &format!(
            "{} {:>3} {:>13} {:>13} {:>13} {:>13} {:>13}\n",
            SYMBOLS[*sym],
            s.n,
            fmt_g(s.min, 8),
            fmt_g(s.max, 8),
            fmt_g(s.median, 8),
            fmt_g(s.avg, 8),
            fmt_g(s.stddev, 8)
        );
        if *sym == 1 {
            continue;
        }
        match sets[0].2 {
            None => out += "No test: the reference data set has no values\n",
            Some(r) => match compare(&r.moments(), &s.moments(), &opts.test) {
                Ok(c) => out += &c.ministat_text(),
                Err(e) => out += &format!("No test at {} confidence: {e}\n", opts.test.confidence),
            },
        }
    }
    out
}

/// ministat's `SetupPlot` + `DimPlot` + `PlotSet` + `DumpPlot`.
fn plot(sets: &[(usize, &Dataset, Summary)], width: usize, separate: bool) -> String {
    let width = width.max(2);
    let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
    for (_, _, s) in sets {
        // NaN (no stddev) compares false and is ignored, as in ministat.
        for a in [s.min, s.max, s.avg - s.stddev, s.avg + s.stddev] {
            if a < min {
                min = a;
            }
            if a > max {
                max = a;
            }
        }
    }
    let span = max - min;
    if span == 0.0 || !span.is_finite() {
        return "[no plot, span is zero width]\n".to_string();
    }
    let dx = span / (width as f64 - 1.0);
    let x0 = min - 0.5 * dx;
    let col = |v: f64| (((v - x0) / dx) as usize).min(width - 1);

    // rows[j][x]: the symbol bits of the j-th stacked value in column x (row 0 unused).
    let mut rows: Vec<Vec<u8>> = vec![vec![0; width]];
    let mut bars: Vec<Option<Vec<u8>>> = vec![None; sets.len()];
    for (k, (sym, d, s)) in sets.iter().enumerate() {
        let bar = if separate { k } else { 0 };
        let mut values = d.values.clone();
        values.sort_by(f64::total_cmp);
        let (mut last, mut j) = (usize::MAX, 0usize);
        for v in values {
            let x = col(v);
            if x == last {
                j += 1;
            } else {
                j = 1;
                last = x;
            }
            while rows.len() <= j {
                rows.push(vec![0; width]);
            }
            rows[j][x] |= *sym as u8;
        }
        let b = bars[bar].get_or_insert_with(|| vec![0; width]);
        if !s.stddev.is_nan() {
            let (lo, hi) = (col(s.avg - s.stddev), col(s.avg + s.stddev));
            b[hi] = b'|';
            b[lo] = b'|';
            for c in b.iter_mut().take(hi).skip(lo + 1) {
                if *c == 0 {
                    *c = b'_';
                }
            }
        }
        b[col(s.median)] = b'M';
        b[col(s.avg)] = b'A';
    }
    let rule = format!("+{}+\n", "-".repeat(width));
    let mut out = rule.clone();
    for row in rows.iter().skip(1).rev() {
        out.push('|');
        out.extend(row.iter().map(|&k| SYMBOLS.get(k as usize).copied().unwrap_or('?')));
        out += "|\n";
    }
    for b in bars.iter().flatten() {
        out.push('|');
        out.extend(b.iter().map(|&k| if k == 0 { ' ' } else { k as char }));
        out += "|\n";
    }
    out + &rule
}

#[cfg(test)]
#[path = "ministat_tests.rs"]
mod tests;
