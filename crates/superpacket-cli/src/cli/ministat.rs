//! `superpacket ministat FILE...`: FreeBSD ministat's statistics over files
//! of numbers (`crate::bench::ministat`). Exit 0 ok, 2 usage or I/O
//! error (a file that cannot be read, a line that is not a number, a file
//! without numbers).

use std::io::Read as _;

use clap::Args;

use super::bench_suite::parse_confidence;
use super::{CliError, EXIT_OK};
use crate::bench::ministat::{Dataset, MAX_DATASETS, RenderOptions, parse_values, render};
use crate::bench::stats::{Confidence, CriticalValues, Method, TestOptions};

/// Arguments of `superpacket ministat`.
#[derive(Debug, Args)]
#[command(after_help = "\
Each file holds one number per line (the first field, or the one --column names); blank lines and \
lines starting with '#' are skipped. The first file is the reference (x); every other one is tested \
against it: \"Difference at 95.0% confidence\" with the difference and the relative difference \
and their confidence intervals, or \"No difference proven at 95.0% confidence\".

Critical values are Student's t quantiles computed exactly and rounded to three decimals like \
ministat's table, so results match FreeBSD ministat at 80-99% up to 100 degrees of freedom. Beyond 100 \
ministat uses the normal quantile, and its 99.5% column holds 99.8% values; --ministat-table \
reproduces both.")]
pub struct MinistatArgs {
    /// Files of numbers, one per line; `-` reads standard input. The first is the reference.
    #[arg(value_name = "FILE", required = true, num_args = 1..=MAX_DATASETS)]
    pub files: Vec<String>,
    /// Confidence level: 80, 90, 95, 98, 99 or 99.5.
    #[arg(short = 'c', long, default_value = "95", value_parser = parse_confidence)]
    pub confidence: Confidence,
    /// Welch's t test (unequal variances) instead of Student's with the pooled standard deviation.
    #[arg(long)]
    pub welch: bool,
    /// Critical values from FreeBSD ministat's table verbatim.
    #[arg(long)]
    pub ministat_table: bool,
    /// Column (field) to read, counting from 1.
    #[arg(short = 'C', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub column: u32,
    /// Width of the plot.
    #[arg(short = 'w', long, default_value_t = 74, value_parser = clap::value_parser!(u16).range(10..=1000))]
    pub width: u16,
    /// One average/median/stddev bar per data set.
    #[arg(short = 's', long)]
    pub separate: bool,
    /// Statistics only, no plot.
    #[arg(short = 'A', long = "no-plot")]
    pub no_plot: bool,
}

/// Reads the data sets and prints ministat's report.
pub fn run(args: &MinistatArgs) -> Result<u8, CliError> {
    if args.files.iter().filter(|f| *f == "-").count() > 1 {
        return Err(CliError("standard input ('-') can be read only once".into()));
    }
    let mut sets = Vec::with_capacity(args.files.len());
    for f in &args.files {
        let (name, text) = if f == "-" {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).map_err(|e| CliError::context("<stdin>", e))?;
            ("<stdin>".to_string(), s)
        } else {
            (f.clone(), std::fs::read_to_string(f).map_err(|e| CliError::context(f, e))?)
        };
        let values = parse_values(&text, args.column as usize)
            .map_err(|e| CliError(format!("{name}:{}: {}", e.line, e.message)))?;
        if values.is_empty() {
            return Err(CliError(format!("{name}: no numbers (in column {})", args.column)));
        }
        sets.push(Dataset { name, values });
    }
    let opts = RenderOptions {
        width: args.width as usize,
        separate_bars: args.separate,
        plot: !args.no_plot,
        test: TestOptions {
            confidence: args.confidence,
            method: if args.welch { Method::Welch } else { Method::Student },
            critical: if args.ministat_table { CriticalValues::MinistatTable } else { CriticalValues::Exact },
        },
    };
    print!("{}", render(&sets, &opts));
    Ok(EXIT_OK)
}
