//! What `lab up` made, on record: one JSON file per topology file under
//! [`STATE_DIR`], so that `lab down` removes exactly that and nothing else.
//!
//! A namespace is recorded with the identity of the namespace itself (the
//! device and inode number `stat` gives for `/run/netns/NAME`, which is the
//! namespace's nsfs inode): a namespace of the same name made since by
//! someone else is recognised as not ours and left alone. The record is
//! written after each namespace is made, so a `lab up` killed halfway
//! leaves a record `lab down` can finish from. `up` and `down` hold an
//! exclusive `flock` on [`STATE_DIR`]`/.lock` while they work.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::LabError;
use superpacket_engine::io::netns::NETNS_RUN_DIR;

/// Where the records live.
pub const STATE_DIR: &str = "/run/superpacket/lab";

/// A namespace `lab up` made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceRecord {
    /// Its name (`/run/netns/NAME`).
    pub name: String,
    /// `st_dev` of `/run/netns/NAME` once made.
    pub dev: u64,
    /// `st_ino` of `/run/netns/NAME` once made (the namespace's inode).
    pub ino: u64,
}

/// A link `lab up` made: (namespace, interface).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkRecord {
    /// Its namespace.
    pub netns: String,
    /// Its name.
    pub name: String,
}

/// The record of one lab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabState {
    /// Format version (1).
    pub version: u32,
    /// The topology file (canonical path).
    pub file: PathBuf,
    /// Hash of the declaration that was made ([`super::LabSpec`]'s debug form).
    pub declaration: String,
    /// Who made it.
    pub pid: u32,
    /// When (seconds since the epoch).
    pub created_unix: u64,
    /// True once every declared object was made.
    pub complete: bool,
    /// Namespaces made, in order.
    pub namespaces: Vec<NamespaceRecord>,
    /// Links made, in order.
    pub links: Vec<LinkRecord>,
}

/// The canonical path of `file`, naming its lab.
///
/// # Errors
/// The file does not exist.
pub fn canonical(file: &Path) -> Result<PathBuf, LabError> {
    std::fs::canonicalize(file).map_err(|e| LabError::Io(format!("{}: {e}", file.display())))
}

/// The record of the lab of `file` (canonical path): `STATE_DIR/<stem>-<hash>.json`.
pub fn state_path(file: &Path) -> PathBuf {
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("lab");
    let stem: String =
        stem.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    let hash = xxhash_rust::xxh3::xxh3_64(file.as_os_str().as_encoded_bytes());
    Path::new(STATE_DIR).join(format!("{stem}-{hash:016x}.json"))
}

/// The identity (`st_dev`, `st_ino`) of the named namespace, if it exists.
pub fn namespace_id(name: &str) -> Option<(u64, u64)> {
    let m = std::fs::metadata(format!("{NETNS_RUN_DIR}/{name}")).ok()?;
    Some((m.dev(), m.ino()))
}

/// Whether the namespace `name` of the record is still the one `lab up` made.
pub fn is_ours(rec: &NamespaceRecord) -> bool {
    namespace_id(&rec.name) == Some((rec.dev, rec.ino))
}

impl LabState {
    /// Reads the record at `path`, `None` if there is none.
    ///
    /// # Errors
    /// A record that cannot be read or parsed.
    pub fn load(path: &Path) -> Result<Option<LabState>, LabError> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| LabError::Io(format!("{}: not a lab record: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(LabError::Io(format!("{}: {e}", path.display()))),
        }
    }

    /// Writes the record to `path` (atomically: a temporary file renamed).
    ///
    /// # Errors
    /// The directory or the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<(), LabError> {
        let io = |e: std::io::Error| LabError::Io(format!("{}: {e}", path.display()));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|e| LabError::Io(e.to_string()))?;
        std::fs::write(&tmp, text + "\n").map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Every record in [`STATE_DIR`] but the one at `except` (to name the
    /// lab a namespace belongs to).
    pub fn others(except: &Path) -> Vec<LabState> {
        let Ok(dir) = std::fs::read_dir(STATE_DIR) else { return Vec::new() };
        dir.flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json") && p != except)
            .filter_map(|p| LabState::load(&p).ok().flatten())
            .collect()
    }
}

/// An exclusive lock on the records, released on drop.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
}

impl StateLock {
    /// Takes the lock, waiting for another `lab up`/`down` to finish.
    ///
    /// # Errors
    /// The lock file cannot be made or locked.
    pub fn take() -> Result<StateLock, LabError> {
        let path = Path::new(STATE_DIR).join(".lock");
        let io = |e: std::io::Error| LabError::Io(format!("{}: {e}", path.display()));
        std::fs::create_dir_all(STATE_DIR).map_err(io)?;
        let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io)?;
        // SAFETY: flock on a descriptor this function owns; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io(std::io::Error::last_os_error()));
        }
        Ok(StateLock { _file: file })
    }
}
