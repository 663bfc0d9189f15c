//! `superpacket stats`: the counters of a running engine, read from its
//! Unix socket (see [`superpacket_engine::engine::control`]).

use super::{CliError, EXIT_OK};
use clap::Args;
use std::path::PathBuf;
use superpacket_engine::engine::control::{StatsFormat, default_socket_dir, query};

/// Arguments of `stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The engine's socket (default: the only one in /run/superpacket).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Print JSON.
    #[arg(long, conflicts_with = "prometheus")]
    pub json: bool,
    /// Print Prometheus text format.
    #[arg(long)]
    pub prometheus: bool,
}

/// Runs the command.
pub fn run(args: &StatsArgs) -> Result<u8, CliError> {
    let path = match &args.socket {
        Some(p) => p.clone(),
        None => {
            let dir = default_socket_dir();
            let socks: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map(|rd| {
                    rd.filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                        .collect()
                })
                .unwrap_or_default();
            match socks.len() {
                1 => socks[0].clone(),
                0 => return Err(CliError(format!("no running engine found in {} (use --socket)", dir.display()))),
                _ => {
                    let names: Vec<String> = socks.iter().map(|p| p.display().to_string()).collect();
                    return Err(CliError(format!(
                        "several engines are running; pick one with --socket: {}",
                        names.join(", ")
                    )));
                }
            }
        }
    };
    let format = if args.json {
        StatsFormat::Json
    } else if args.prometheus {
        StatsFormat::Prometheus
    } else {
        StatsFormat::Text
    };
    let out = query(&path, format).map_err(|e| CliError::context(path.display(), e))?;
    print!("{out}");
    Ok(EXIT_OK)
}
