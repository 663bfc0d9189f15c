//! `superpacket lab` as a user runs it, for the tests of the live examples.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

/// `superpacket ARGS... FILE`.
pub fn superpacket(args: &[&str], file: &Path) -> Output {
    Command::new(BIN).args(args).arg(file).output().unwrap()
}

/// A command's stdout and stderr, for messages.
pub fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A lab made by `lab up`, removed by `lab down` on drop (a failing test
/// leaves nothing either).
pub struct LabUp {
    file: PathBuf,
}

impl LabUp {
    /// `superpacket lab up FILE`, which must succeed.
    pub fn up(file: &Path) -> LabUp {
        let out = superpacket(&["lab", "up"], file);
        assert_eq!(out.status.code(), Some(0), "lab up {}: {}", file.display(), text(&out));
        LabUp { file: file.to_path_buf() }
    }
}

impl Drop for LabUp {
    fn drop(&mut self) {
        let _ = superpacket(&["lab", "down"], &self.file);
    }
}
