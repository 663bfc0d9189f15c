//! The frontend's "guest memory": one sealed memfd, mapped here through
//! `vm-memory` and shared with the backend in `SET_MEM_TABLE`, and where
//! everything lies in it ([`Layout`]). Guest physical address 0 is the
//! first byte of the memfd.

use super::ring::{DESC_SIZE, DriverRing};
use super::{MAX_FRAME_BUF, MAX_TX_PARTS, VirtioUserError};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use vm_memory::{FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestRegionMmap, MmapRegion};

const PAGE: u64 = 4096;

fn align(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

/// Where the rings, indirect tables, transmit slots and receive buffers
/// lie. Invariant: every part is inside `0..total` and none overlaps another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Descriptors per queue.
    pub size: u16,
    /// Descriptor table, available and used ring of queue 0 and queue 1.
    rings: [[u64; 3]; 2],
    tables: u64,
    slots: u64,
    /// Bytes of one transmit slot (header and frame).
    pub tx_slot: u32,
    bufs: u64,
    /// Bytes of one receive buffer.
    pub rx_buf_len: u32,
    /// Bytes of the memory (a multiple of the page size).
    pub total: usize,
}

/// Bytes of one indirect table (the header descriptor and the parts).
const TABLE: u64 = DESC_SIZE * (1 + MAX_TX_PARTS as u64);

impl Layout {
    /// The layout for queues of `size` and receive buffers of `rx_buf_len`.
    ///
    /// # Errors
    /// `rx_buf_len` outside 64..=[`MAX_FRAME_BUF`].
    pub fn new(size: u16, rx_buf_len: u32) -> Result<Layout, VirtioUserError> {
        if !(64..=MAX_FRAME_BUF).contains(&rx_buf_len) {
            return Err(VirtioUserError::Config(format!(
                "receive buffers of {rx_buf_len} bytes (64..={MAX_FRAME_BUF})"
            )));
        }
        let n = u64::from(size);
        let (desc, avail, used) = DriverRing::footprint(size);
        let mut at = 0u64;
        let mut rings = [[0u64; 3]; 2];
        for r in &mut rings {
            r[0] = align(at, PAGE);
            r[1] = r[0] + desc;
            r[2] = align(r[1] + avail, PAGE);
            at = r[2] + used;
        }
        let tables = align(at, PAGE);
        let slots = align(tables + TABLE * n, PAGE);
        let bufs = slots + u64::from(MAX_FRAME_BUF) * n;
        let total = align(bufs + u64::from(rx_buf_len) * n, PAGE);
        Ok(Layout { size, rings, tables, slots, tx_slot: MAX_FRAME_BUF, bufs, rx_buf_len, total: total as usize })
    }

    /// The driver's view of queue `q` (0 or 1).
    pub fn ring(&self, q: usize) -> DriverRing {
        let [d, a, u] = self.rings[q];
        DriverRing::new(self.size, GuestAddress(d), GuestAddress(a), GuestAddress(u))
    }

    /// Transmit slot of descriptor `i`.
    pub fn tx_slot(&self, i: u16) -> GuestAddress {
        GuestAddress(self.slots + u64::from(self.tx_slot) * u64::from(i))
    }

    /// Indirect table of transmit descriptor `i`.
    pub fn tx_table(&self, i: u16) -> GuestAddress {
        GuestAddress(self.tables + TABLE * u64::from(i))
    }

    /// Receive buffer of descriptor `i`.
    pub fn rx_buf(&self, i: u16) -> GuestAddress {
        GuestAddress(self.bufs + u64::from(self.rx_buf_len) * u64::from(i))
    }
}

/// A memfd mapped as guest memory at guest address 0.
#[derive(Debug)]
pub struct GuestMem {
    mem: GuestMemoryMmap<()>,
}

impl GuestMem {
    /// Creates a zero-filled memfd of `len` bytes named `name`, seals its
    /// size (the backend maps it whole; nobody may shrink it under a
    /// mapping) and maps it.
    ///
    /// # Errors
    /// `memfd_create`, `ftruncate`, the seals or `mmap` failing.
    pub fn create(name: &str, len: usize) -> Result<GuestMem, VirtioUserError> {
        let io = |what| move |source| VirtioUserError::Io { what, source };
        let cname = CString::new(name).map_err(|_| VirtioUserError::Config(format!("memfd name {name:?}")))?;
        // SAFETY: `cname` is a valid NUL-terminated string that outlives the call.
        let raw = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        if raw < 0 {
            return Err(io("memfd_create")(std::io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        let file = unsafe { File::from_raw_fd(raw) };
        file.set_len(len as u64).map_err(io("ftruncate"))?;
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: fcntl(F_ADD_SEALS) with an int argument on a descriptor we own.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
            return Err(io("fcntl(F_ADD_SEALS)")(std::io::Error::last_os_error()));
        }
        let region = MmapRegion::from_file(FileOffset::new(file, 0), len)
            .map_err(|e| VirtioUserError::Io { what: "mmap", source: std::io::Error::other(e.to_string()) })?;
        let region = GuestRegionMmap::new(region, GuestAddress(0))
            .ok_or_else(|| VirtioUserError::Config("guest memory region".into()))?;
        let mem = GuestMemoryMmap::from_regions(vec![region])
            .map_err(|e| VirtioUserError::Config(format!("guest memory: {e}")))?;
        Ok(GuestMem { mem })
    }

    /// The memory.
    pub fn get(&self) -> &GuestMemoryMmap<()> {
        &self.mem
    }

    /// The one region (for `SET_MEM_TABLE`; `create` makes exactly one).
    pub fn region(&self) -> Option<&GuestRegionMmap<()>> {
        self.mem.iter().next()
    }

    /// This process's address of guest address `a` (vring addresses in
    /// vhost-user are the frontend's virtual addresses).
    ///
    /// # Errors
    /// `a` is outside the memory.
    pub fn host_address(&self, a: GuestAddress) -> Result<u64, VirtioUserError> {
        self.mem
            .get_host_address(a)
            .map(|p| p as u64)
            .map_err(|e| VirtioUserError::Config(format!("guest address {:#x}: {e}", a.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_of_the_layout_do_not_overlap_and_fit() {
        let l = Layout::new(256, 2048).unwrap();
        let rx = l.ring(0);
        let tx = l.ring(1);
        assert!(rx.used.0 + 6 + 8 * 256 <= tx.desc.0);
        assert!(tx.used.0 + 6 + 8 * 256 <= l.tx_table(0).0);
        assert!(l.tx_table(255).0 + TABLE <= l.tx_slot(0).0);
        assert!(l.tx_slot(255).0 + u64::from(l.tx_slot) <= l.rx_buf(0).0);
        assert!(l.rx_buf(255).0 + 2048 <= l.total as u64);
        assert_eq!(l.total % 4096, 0);
        assert!(Layout::new(256, 10).is_err());
    }
}
