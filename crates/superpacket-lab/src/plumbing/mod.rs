//! The plumbing a live topology expects, declared in its own `[lab]` table
//! and made or removed by code (`superpacket lab up|down|status FILE`,
//! `superpacket run --lab FILE`): network namespaces, persistent TAPs and
//! TUNs with a virtio-net header, veth pairs, bridges, VXLAN devices,
//! addresses and routes.
//! Format reference: `docs/topology.md` (`[lab]`).
//!
//! ```toml
//! [lab]
//! netns = ["sp-lab-a", "sp-lab-b"]
//!
//! [[lab.link]]
//! kind = "tap"
//! name = "spd-a"
//! netns = "sp-lab-a"
//! addresses = ["10.71.0.2/24", "fd71::2/64"]
//!
//! [[lab.route]]
//! netns = "sp-lab-a"
//! to = "default"
//! via = "10.71.0.1"
//! ```
//!
//! - [`schema`]: the table's structures and checks ([`parse`] -> [`LabSpec`]),
//!   errors naming line and column as the topology's do;
//! - [`state`]: the record of what `up` made (`/run/superpacket/lab/*.json`);
//! - `apply`: [`up`] and [`down`];
//! - `status`: [`status`], each declared object and whether it is there.
//!
//! Network safety: everything a lab declares lives in namespaces the lab
//! itself creates (a link or route naming any other namespace is refused
//! when the file is read), so nothing outside them is ever changed. [`up`]
//! refuses to start if a declared namespace already exists and is not the
//! one its own earlier `up` made; [`down`] deletes only the namespaces (and
//! links) the record lists, each after checking that the namespace of that
//! name is still the very one made (its inode). No process is started:
//! namespaces are made with `unshare` and bind mounts, links, addresses and
//! routes through rtnetlink, TAPs and TUNs with the `/dev/net/tun` ioctls.

mod apply;
pub mod schema;
pub mod state;
mod status;

pub use apply::{DownOutcome, UpOutcome, down, up};
pub use schema::{LabSpec, LinkDecl, LinkKind, PeerDecl, RouteDecl, VxlanDecl, parse};
pub use state::{LabState, STATE_DIR, state_path};
pub use status::{ItemState, LabStatus, StatusItem, status};

use superpacket_engine::device::TopologyError;

/// Why a lab could not be read, made, checked or removed.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The `[lab]` table of `file` is wrong (line and column).
    #[error("{file}: {error}")]
    Declaration {
        /// The topology file.
        file: String,
        /// What is wrong, and where.
        error: TopologyError,
    },
    /// The file declares no `[lab]` table.
    #[error("{0} declares no [lab] table (see docs/topology.md)")]
    NoLab(String),
    /// Root (CAP_NET_ADMIN, CAP_SYS_ADMIN) is missing: what and why.
    #[error("{0}")]
    Privileges(String),
    /// Something in the way that the lab did not make (a namespace of the
    /// same name), or a lab already up in another form.
    #[error("{0}")]
    Conflict(String),
    /// A system call, netlink request or record failed.
    #[error("{0}")]
    Io(String),
}

/// Reads `file` and parses its `[lab]` table.
///
/// # Errors
/// The file cannot be read, declares no lab, or the lab is wrong.
pub fn load(file: &std::path::Path) -> Result<LabSpec, LabError> {
    let src = std::fs::read_to_string(file).map_err(|e| LabError::Io(format!("{}: {e}", file.display())))?;
    parse(&src)
        .map_err(|error| LabError::Declaration { file: file.display().to_string(), error })?
        .ok_or_else(|| LabError::NoLab(file.display().to_string()))
}

/// Root, or a clear error naming what is missing for `what` (`lab up`, ...).
fn require_root(what: &str) -> Result<(), LabError> {
    superpacket_engine::io::privileges_available()
        .map_err(|why| LabError::Privileges(format!("superpacket {what} needs root: {why}")))
}

/// A short fingerprint of a declaration, to tell whether the lab that is up
/// is the one the file declares now.
fn fingerprint(spec: &LabSpec) -> String {
    let mut s = spec.clone();
    // Lines move when comments are edited; the declaration is the same.
    s.line = 0;
    for l in &mut s.links {
        l.line = 0;
    }
    for r in &mut s.routes {
        r.line = 0;
    }
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(format!("{s:?}").as_bytes()))
}
