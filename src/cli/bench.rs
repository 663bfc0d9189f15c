//! `superpacket bench ...`: benchmark scenarios, human table or `--json`.

use super::{CliError, EXIT_OK, progress};
use crate::bench::csum::{self, CsumBenchOptions};
use clap::{Args, Subcommand};

/// The benchmark scenarios.
#[derive(Debug, Subcommand)]
pub enum BenchScenario {
    /// Checksum throughput against memcpy throughput measured in the same run,
    /// at 64 B, 1500 B, 9000 B, 64 KB (in cache) and 64 MB (out of cache).
    Csum(CommonBenchArgs),
}

/// Options every scenario takes.
#[derive(Debug, Args)]
pub struct CommonBenchArgs {
    /// Print one JSON object `{"scenario", "results": [{"name","value","unit"}]}`.
    #[arg(long)]
    pub json: bool,
    /// Shorter measurements (noisier): for smoke tests.
    #[arg(long)]
    pub quick: bool,
}

/// Runs the chosen scenario.
pub fn run(scenario: &BenchScenario) -> Result<u8, CliError> {
    match scenario {
        BenchScenario::Csum(args) => {
            let opts = CsumBenchOptions { quick: args.quick };
            let bar = progress::steps_bar(!args.json, "bench csum");
            let report = csum::run_with_progress(&opts, &mut |step, done, total| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
                bar.set_message(step.to_string());
            });
            bar.finish_and_clear();
            if args.json {
                println!("{}", report.to_json());
            } else {
                print!("{}", csum::render_human(&report));
            }
            Ok(EXIT_OK)
        }
    }
}
