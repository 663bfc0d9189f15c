//! `superpacket lab up|down|status FILE`: the namespaces, links, addresses
//! and routes a topology's `[lab]` table declares, made, removed and
//! checked ([`superpacket_lab::plumbing`]; format in docs/topology.md).
//!
//! Exit codes: `up` 0 when made or already up as declared (1: already up
//! but objects are missing or wrong), 2 when something is in the way (a
//! namespace it did not make), not root, or a step failed (what was made is
//! removed); `down` 0 when removed or not up; `status` 0 when every
//! declared object is there, 1 when some are not.

use super::{CliError, EXIT_OK, EXIT_PROBLEMS};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use superpacket_engine::device::Topology;
use superpacket_lab::plumbing::{self, DownOutcome, ItemState, LabError, LabSpec, LabStatus, UpOutcome};

/// `lab` subcommands.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Make what FILE's [lab] table declares (namespaces, TAPs, TUNs, veths,
    /// bridges, VXLAN devices, addresses, routes) and record it in
    /// /run/superpacket/lab/.
    /// Refuses (exit 2) if a declared namespace exists that an earlier `lab
    /// up` of FILE did not make; says so (exit 0) if the lab is already up.
    Up(FileArgs),
    /// Remove what `lab up FILE` made, and nothing else (exit 0, also when
    /// it was not up).
    Down(FileArgs),
    /// Each object FILE's [lab] declares and whether it is there: exit 0 if
    /// all are, 1 if not.
    Status(StatusArgs),
}

/// A topology file with a `[lab]` table.
#[derive(Debug, Args)]
pub struct FileArgs {
    /// Topology file (TOML) with a [lab] table (see docs/topology.md).
    pub file: PathBuf,
}

/// Arguments of `lab status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Topology file (TOML) with a [lab] table (see docs/topology.md).
    pub file: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command.
pub fn run(cmd: &LabCommand) -> Result<u8, CliError> {
    match cmd {
        LabCommand::Up(a) => up(&a.file),
        LabCommand::Down(a) => down(&a.file),
        LabCommand::Status(a) => status(&a.file, a.json),
    }
}

fn lab_error(e: LabError) -> CliError {
    CliError(e.to_string())
}

/// Reads FILE's `[lab]`, and checks that the topology itself parses (the
/// lab of a file the engine would refuse is of no use).
pub fn load(file: &Path) -> Result<(LabSpec, Topology), CliError> {
    let spec = plumbing::load(file).map_err(lab_error)?;
    let src = std::fs::read_to_string(file).map_err(|e| CliError::context(file.display(), e))?;
    let topo = Topology::parse(&src).map_err(|e| CliError::context(file.display(), e))?;
    Ok((spec, topo))
}

/// Ports of the topology that will not find what they expect in the lab: a
/// TAP the lab makes as a TUN (or the reverse), an AF_PACKET interface the
/// lab does not make in a namespace it makes, and with `workers` (`run`), a
/// TAP or TUN whose multi-queue flag does not match the number of workers
/// (the kernel refuses that attach).
pub fn port_warnings(spec: &LabSpec, topo: &Topology, workers: Option<usize>) -> Vec<String> {
    use superpacket_engine::device::topology::DriverSpec;
    let mut out = Vec::new();
    for d in &topo.spec.devices {
        let Some(DriverSpec::Table(t)) = d.driver.as_ref().map(|s| s.get_ref()) else { continue };
        let Some(ns) = t.netns.as_ref().map(|n| n.get_ref().as_str()) else { continue };
        if !spec.netns.iter().any(|n| n == ns) {
            continue;
        }
        let kind = t.kind.get_ref().as_str();
        let dev = match kind {
            "tap" | "tun" => t.name.as_ref(),
            "af_packet" => t.interface.as_ref(),
            _ => None,
        };
        let Some(dev) = dev.map(|n| n.get_ref().as_str()) else { continue };
        let port = d.name.get_ref();
        match (kind, spec.interface(ns, dev)) {
            ("af_packet", None) => out.push(format!(
                "port `{port}`: [lab] makes no interface `{dev}` in `{ns}`, the AF_PACKET socket will not find it"
            )),
            ("tap" | "tun", Some((l, false))) if l.kind.name() != kind => {
                out.push(format!("port `{port}`: a {kind} driver on `{dev}`, which [lab] makes as a {}", l.kind.name()))
            }
            ("tap" | "tun", Some((l, false))) => match workers {
                Some(w) if l.multi_queue != (w > 1) => out.push(format!(
                    "port `{port}`: [lab] makes `{dev}` {}, so the engine needs {} (the kernel refuses the other)",
                    if l.multi_queue { "multi-queue" } else { "single-queue" },
                    if l.multi_queue { "--workers 2 or more" } else { "one worker" }
                )),
                _ => {}
            },
            _ => {}
        }
    }
    out
}

fn up(file: &Path) -> Result<u8, CliError> {
    let (spec, topo) = load(file)?;
    for w in port_warnings(&spec, &topo, None) {
        eprintln!("superpacket: warning: {}: {w}", file.display());
    }
    let f = file.display();
    match plumbing::up(file, &spec).map_err(lab_error)? {
        UpOutcome::Made(_) => {
            let links = spec.interfaces().len();
            let addresses: usize =
                spec.links.iter().map(|l| l.addresses.len() + l.peer.as_ref().map_or(0, |p| p.addresses.len())).sum();
            println!(
                "lab of {f} is up: namespaces {}; {links} interface(s), {addresses} address(es), {} route(s)",
                spec.netns.join(", "),
                spec.routes.len()
            );
            println!("next: superpacket run {f}; then superpacket lab down {f}");
            Ok(EXIT_OK)
        }
        UpOutcome::AlreadyUp(st) => {
            let s = plumbing::status(file, &spec).map_err(lab_error)?;
            if s.all_ok() {
                println!("lab of {f} is already up (made by pid {}); nothing changed", st.pid);
                Ok(EXIT_OK)
            } else {
                println!(
                    "lab of {f} is already up (made by pid {}), but {} declared object(s) are missing or wrong \
                     (superpacket lab status {f}); superpacket lab down {f} and up again remakes them",
                    st.pid,
                    s.problems()
                );
                Ok(EXIT_PROBLEMS)
            }
        }
    }
}

fn down(file: &Path) -> Result<u8, CliError> {
    let f = file.display();
    match plumbing::down(file).map_err(lab_error)? {
        DownOutcome::NotUp => println!("lab of {f} is not up (nothing on record): nothing to remove"),
        DownOutcome::Removed { namespaces, gone, left, warnings } => {
            for w in warnings {
                eprintln!("superpacket: warning: {w}");
            }
            if namespaces.is_empty() {
                println!("lab of {f} was already gone");
            } else {
                println!("lab of {f} is down: removed namespaces {}", namespaces.join(", "));
            }
            if !gone.is_empty() && !namespaces.is_empty() {
                println!("already gone: {}", gone.join(", "));
            }
            if !left.is_empty() {
                println!(
                    "left alone: {} (same name, but not the namespace lab up made: deleted and made again since)",
                    left.join(", ")
                );
            }
        }
    }
    Ok(EXIT_OK)
}

fn status(file: &Path, json: bool) -> Result<u8, CliError> {
    let (spec, _) = load(file)?;
    let s = plumbing::status(file, &spec).map_err(lab_error)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&status_json(&s)).expect("JSON of plain values"));
    } else {
        print!("{}", status_text(&s));
    }
    Ok(if s.all_ok() { EXIT_OK } else { EXIT_PROBLEMS })
}

fn summary(s: &LabStatus) -> String {
    let state = if s.all_ok() {
        "up"
    } else if s.items.iter().all(|i| i.state == ItemState::Missing) {
        "down"
    } else {
        "partly up"
    };
    match &s.record {
        Some(r) => format!("{state} (on record: made by superpacket lab up, pid {})", r.pid),
        None => format!("{state} (not on record: superpacket lab up did not make it)"),
    }
}

fn status_text(s: &LabStatus) -> String {
    let mut out = format!("lab of {}: {}\n", s.file.display(), summary(s));
    for i in &s.items {
        let (word, detail) = match &i.state {
            ItemState::Ok(d) if d.is_empty() => ("ok", String::new()),
            ItemState::Ok(d) => ("ok", format!(" ({d})")),
            ItemState::Missing => ("missing", String::new()),
            ItemState::Wrong(d) => ("wrong", format!(": {d}")),
        };
        out += &format!("  {word:<8} {}{detail}  [line {}]\n", i.object, i.line);
    }
    if !s.all_ok() {
        out += &format!("{} of {} declared objects missing or wrong\n", s.problems(), s.items.len());
    }
    out
}

fn status_json(s: &LabStatus) -> serde_json::Value {
    let objects: Vec<serde_json::Value> = s
        .items
        .iter()
        .map(|i| {
            let (state, detail) = match &i.state {
                ItemState::Ok(d) => ("ok", d.clone()),
                ItemState::Missing => ("missing", String::new()),
                ItemState::Wrong(d) => ("wrong", d.clone()),
            };
            serde_json::json!({ "object": i.object, "line": i.line, "state": state, "detail": detail })
        })
        .collect();
    serde_json::json!({
        "file": s.file,
        "up": s.all_ok(),
        "summary": summary(s),
        "record": s.record.as_ref().map(|r| serde_json::json!({
            "pid": r.pid,
            "created_unix": r.created_unix,
            "complete": r.complete,
            "namespaces": r.namespaces.iter().map(|n| n.name.clone()).collect::<Vec<_>>(),
        })),
        "objects": objects,
    })
}
