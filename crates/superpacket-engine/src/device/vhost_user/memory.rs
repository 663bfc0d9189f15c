//! The guest memory a frontend shares with `SET_MEM_TABLE`, checked
//! against the files behind it before any worker may touch it.
//!
//! `vhost-user-backend` maps each region of the table with `vm-memory`,
//! which does not compare a region with its file's size (0.18 has a
//! `MappingPastEof` error but never raises it), and a shared mapping past
//! the end of its file faults with SIGBUS on access: a frontend that sends
//! a region larger than its file, or shrinks the file afterwards, would
//! kill the engine. So, for every region, in this order:
//!
//! 1. **seal**: `F_SEAL_SHRINK` is added to the file (kept if it is there
//!    already) so that it can never shrink again. That takes a memfd made
//!    with `MFD_ALLOW_SEALING` (QEMU's `memory-backend-memfd` makes them
//!    so, and seals them itself by default) opened for writing; a memfd
//!    whose seals are sealed, any other file (hugetlbfs, /dev/shm) or a
//!    read-only descriptor cannot be sealed ([`Checked::unsealed`]);
//! 2. **size**: the file must hold the region (`mmap_offset` plus size at
//!    most its size, by `fstat` after the seal, so that the size cannot
//!    change between the check and the seal); else the table is refused
//!    ([`Refused`]).
//!
//! A region that could not be sealed still passes the size check: DPDK
//! 22.11's testpmd with `--no-huge` shares a memfd made without
//! `MFD_ALLOW_SEALING`, and refusing it would refuse DPDK. Such a
//! frontend can still shrink its file later and make the engine's next
//! access to the lost pages a SIGBUS; the port counts these regions
//! (`driver.mem_regions_unsealed`) so that it is known.

use std::fmt;
use std::os::fd::AsRawFd;
use vm_memory::{GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion};

/// What the check of one table found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checked {
    /// Regions whose file cannot shrink any more (`F_SEAL_SHRINK`).
    pub sealed: u64,
    /// Regions whose file could not be sealed (see the module documentation).
    pub unsealed: u64,
}

/// Why a table was refused.
#[derive(Debug)]
pub enum Refused {
    /// A region reaches past the end of its file.
    PastEof {
        /// Region index in the table (by guest address).
        region: usize,
        /// `mmap_offset` + size of the region.
        end: u64,
        /// The file's size.
        file_size: u64,
    },
    /// A region without a file (never from a vhost-user table).
    NoFile {
        /// Region index.
        region: usize,
    },
    /// `fstat` failed.
    Stat {
        /// Region index.
        region: usize,
        /// The error.
        error: std::io::Error,
    },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::PastEof { region, end, file_size } => write!(
                f,
                "memory region {region} ends at byte {end} of its file, which has {file_size}: refused (a SIGBUS on access)"
            ),
            Refused::NoFile { region } => write!(f, "memory region {region} has no file"),
            Refused::Stat { region, error } => write!(f, "memory region {region}: fstat: {error}"),
        }
    }
}

impl std::error::Error for Refused {}

/// `F_SEAL_SHRINK` on `fd`: true if the file now has it.
fn seal_shrink(fd: &impl AsRawFd) -> bool {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl with F_GET_SEALS / F_ADD_SEALS on a descriptor the
    // region owns (open for the whole call) reads or sets the file's seal
    // flags; no memory is passed.
    let seals = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
    if seals < 0 {
        return false;
    }
    if seals & libc::F_SEAL_SHRINK != 0 {
        return true;
    }
    if seals & libc::F_SEAL_SEAL != 0 {
        return false;
    }
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) == 0 }
}

/// Seals and checks every region of `mem` (see the module documentation).
///
/// # Errors
/// [`Refused`]: a region reaches past its file's end, or its file cannot
/// be examined; the caller refuses the whole table.
pub fn check_and_seal(mem: &GuestMemoryMmap<()>) -> Result<Checked, Refused> {
    let mut checked = Checked::default();
    for (region, r) in mem.iter().enumerate() {
        let fo = r.file_offset().ok_or(Refused::NoFile { region })?;
        if seal_shrink(fo.file()) {
            checked.sealed += 1;
        } else {
            checked.unsealed += 1;
        }
        let file_size = fo.file().metadata().map_err(|error| Refused::Stat { region, error })?.len();
        let end = fo.start().saturating_add(r.len());
        if end > file_size {
            return Err(Refused::PastEof { region, end, file_size });
        }
    }
    Ok(checked)
}
