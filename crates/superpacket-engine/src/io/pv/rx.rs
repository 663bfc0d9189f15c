//! The receive side of a paravirtual link: the device of the peer's
//! transmit queue. Everything the peer wrote is untrusted input.
//!
//! For each available head ([`PvRx::recv`]):
//!
//! 1. the head is an index `< N`; its descriptor is copied out;
//! 2. **indirect** (`INDIRECT`, negotiated, not combined with `NEXT`): the
//!    table's address and length are checked (inside the queue's data area,
//!    16-byte aligned, 1..=[`MAX_INDIRECT`] entries) and the whole table is
//!    copied out at once; its chain (from entry 0, `next` inside the table,
//!    at most one visit per entry) may not nest `INDIRECT`. **Direct**: the
//!    ring chain is followed the same way, bounded by N. No descriptor may
//!    be device-writable (this is a transmit queue);
//! 3. every buffer lies inside the queue's data area;
//! 4. the first bytes are the `virtio_net_hdr_v1`; in the indirect form a
//!    20-byte entry 0 also holds [`HdrInfo`], which must agree with the
//!    next three entries, with the header and with the frame's real headers
//!    ([`HdrInfo::check`]); a checksum-offloaded frame without it, when
//!    header information was negotiated, is accepted but counted
//!    (`csum_without_hdr_info`: the unsafe direct path);
//! 5. the frame is gathered (copied) into the caller's buffer and imported
//!    with the kernel's rules ([`VirtioNetHdr::to_meta`], offload-rules
//!    4.2), after checking the GSO type and the checksum offload were
//!    negotiated.
//!
//! A frame failing any check is dropped with a reason
//! ([`RxStats::drops`]) and its head still returned to the used ring, so a
//! buggy peer does not leak its own buffers; only a ring that is corrupt as
//! a whole ([`RingError`]) ends the link.

use super::hdrinfo::{HDR_INFO_LEN, HdrInfo};
use super::ring::{
    DESC_F_INDIRECT, DESC_F_NEXT, DESC_F_WRITE, DESC_SIZE, Desc, MAX_INDIRECT, QueueLayout, RingError, VqDevice,
};
use super::shm::ShmRegion;
use super::tx::{MAX_FRAME, RxCaps, VNET_HDR_LEN};
use std::collections::BTreeMap;
use superpacket::packet::OffloadMeta;
use superpacket::packet::virtio::{
    F_NEEDS_CSUM, GSO_ECN, GSO_NONE, GSO_TCPV4, GSO_TCPV6, GSO_UDP_L4, HdrByteOrder, HdrLayout, ImportOptions,
    VirtioNetHdr,
};

/// Most frames one [`PvRx::recv`] call drops before it returns, so a flood
/// of bad descriptors cannot hold the caller.
pub const MAX_DISCARDS_PER_RECV: usize = 64;

/// The form a frame arrived in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxForm {
    /// One descriptor.
    Direct,
    /// A chain of ring descriptors (`NEXT`), not produced by this crate's
    /// transmitter but valid virtio.
    Chain,
    /// An indirect table without header information.
    Indirect,
    /// An indirect table with header information.
    IndirectHdrInfo,
}

/// One received frame (its bytes were appended to the caller's buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxFrame {
    /// Frame length.
    pub len: usize,
    /// The header as sent.
    pub hdr: VirtioNetHdr,
    /// Metadata imported from it.
    pub meta: OffloadMeta,
    /// How it was submitted.
    pub form: RxForm,
}

/// Counters of the receive side.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Frames received.
    pub frames: u64,
    /// Their bytes.
    pub bytes: u64,
    /// GSO superpackets among them.
    pub superpackets: u64,
    /// Frames with a partial checksum (offloaded to this side).
    pub csum_partial: u64,
    /// Received direct.
    pub direct: u64,
    /// Received as ring chains.
    pub chains: u64,
    /// Received indirect without header information.
    pub indirect: u64,
    /// Received indirect with header information.
    pub indirect_hdr_info: u64,
    /// Checksum-offloaded frames without the header information negotiated.
    pub csum_without_hdr_info: u64,
    /// Drops by reason.
    pub drops: BTreeMap<&'static str, u64>,
}

/// The receive side of one queue.
#[derive(Debug)]
pub struct PvRx {
    vq: VqDevice,
    lay: QueueLayout,
    /// What this side accepts.
    pub caps: RxCaps,
    indirect_ok: bool,
    scratch: Box<RxScratch>,
    /// Counters.
    pub stats: RxStats,
}

/// Buffers reused for every frame (written before they are read).
#[derive(Debug)]
struct RxScratch {
    chain: Chain,
    table: [u8; MAX_INDIRECT * DESC_SIZE],
}

/// The buffers of one frame, copied out of the ring or table.
#[derive(Debug)]
struct Chain {
    d: [Desc; MAX_INDIRECT],
    n: usize,
    indirect: bool,
}

impl PvRx {
    /// The receive side of queue `lay`.
    pub fn new(lay: QueueLayout, event_idx: bool, indirect_ok: bool, caps: RxCaps) -> PvRx {
        let scratch = Box::new(RxScratch {
            chain: Chain { d: [Desc::default(); MAX_INDIRECT], n: 0, indirect: false },
            table: [0; MAX_INDIRECT * DESC_SIZE],
        });
        PvRx { vq: VqDevice::new(lay, event_idx), lay, caps, indirect_ok, scratch, stats: RxStats::default() }
    }

    /// Frames waiting.
    ///
    /// # Errors
    /// A corrupt available index.
    #[inline]
    pub fn pending(&self, shm: &ShmRegion) -> Result<u16, RingError> {
        self.vq.avail_pending(shm)
    }

    /// Asks for a kick at the next frame; true if one is already there.
    ///
    /// # Errors
    /// A ring error.
    pub fn enable_kicks(&mut self, shm: &mut ShmRegion) -> Result<bool, RingError> {
        self.vq.enable_kicks(shm)
    }

    /// Stops asking for kicks (polling).
    ///
    /// # Errors
    /// A ring error.
    pub fn disable_kicks(&mut self, shm: &mut ShmRegion) -> Result<(), RingError> {
        self.vq.disable_kicks(shm)
    }

    /// Whether the peer must be called for the entries used since the last decision.
    ///
    /// # Errors
    /// A ring error.
    #[inline]
    pub fn call_needed(&mut self, shm: &ShmRegion) -> Result<bool, RingError> {
        self.vq.call_needed(shm)
    }

    fn drop_frame(&mut self, reason: &'static str) {
        *self.stats.drops.entry(reason).or_insert(0) += 1;
    }

    /// Receives the next valid frame, appending its bytes to `out`; `None`
    /// when the ring is empty (or after [`MAX_DISCARDS_PER_RECV`] bad ones).
    ///
    /// # Errors
    /// A corrupt ring: the link must be closed.
    pub fn recv(&mut self, shm: &mut ShmRegion, out: &mut Vec<u8>) -> Result<Option<RxFrame>, RingError> {
        for _ in 0..MAX_DISCARDS_PER_RECV {
            let Some(head) = self.vq.pop(shm)? else { return Ok(None) };
            let start = out.len();
            let r = self.read(shm, head, out);
            if head < self.lay.num {
                self.vq.push_used(shm, head, 0)?;
            }
            match r {
                Ok(f) => {
                    let s = &mut self.stats;
                    s.frames += 1;
                    s.bytes += f.len as u64;
                    s.superpackets += u64::from(f.meta.is_gso());
                    s.csum_partial += u64::from(f.hdr.flags & F_NEEDS_CSUM != 0);
                    match f.form {
                        RxForm::Direct => s.direct += 1,
                        RxForm::Chain => s.chains += 1,
                        RxForm::Indirect => s.indirect += 1,
                        RxForm::IndirectHdrInfo => s.indirect_hdr_info += 1,
                    }
                    return Ok(Some(f));
                }
                Err(reason) => {
                    out.truncate(start);
                    self.drop_frame(reason);
                }
            }
        }
        Ok(None)
    }

    /// Copies out and checks the descriptors of `head` into `c` (steps 1-3).
    fn chain(
        lay: &QueueLayout,
        indirect_ok: bool,
        shm: &ShmRegion,
        head: u16,
        c: &mut Chain,
        table: &mut [u8; MAX_INDIRECT * DESC_SIZE],
    ) -> Result<(), &'static str> {
        let num = lay.num;
        if head >= num {
            return Err("rx-bad-head");
        }
        let mut b = [0u8; DESC_SIZE];
        shm.copy_out(lay.desc_at(head), &mut b).map_err(|_| "rx-desc-out-of-bounds")?;
        let first = Desc::decode(&b);
        c.n = 0;
        c.indirect = false;
        if first.flags & DESC_F_INDIRECT != 0 {
            if !indirect_ok {
                return Err("rx-indirect-not-negotiated");
            }
            if first.flags & DESC_F_NEXT != 0 {
                return Err("rx-indirect-with-next");
            }
            let count = first.len as usize / DESC_SIZE;
            if !(first.len as usize).is_multiple_of(DESC_SIZE) || count == 0 || count > MAX_INDIRECT {
                return Err("rx-indirect-bad-len");
            }
            if !first.addr.is_multiple_of(DESC_SIZE as u64) || !lay.in_data(first.addr, first.len) {
                return Err("rx-desc-out-of-bounds");
            }
            shm.copy_out(first.addr, &mut table[..first.len as usize]).map_err(|_| "rx-desc-out-of-bounds")?;
            let mut i = 0usize;
            loop {
                if c.n == count {
                    return Err("rx-chain-loop");
                }
                let d = Desc::decode(&table[i * DESC_SIZE..(i + 1) * DESC_SIZE]);
                if d.flags & DESC_F_INDIRECT != 0 {
                    return Err("rx-nested-indirect");
                }
                c.d[c.n] = d;
                c.n += 1;
                if d.flags & DESC_F_NEXT == 0 {
                    break;
                }
                i = d.next as usize;
                if i >= count {
                    return Err("rx-bad-next");
                }
            }
            c.indirect = true;
        } else {
            let mut d = first;
            loop {
                if c.n == MAX_INDIRECT || c.n == num as usize {
                    return Err("rx-chain-too-long");
                }
                if c.n > 0 && d.flags & DESC_F_INDIRECT != 0 {
                    return Err("rx-indirect-in-chain");
                }
                c.d[c.n] = d;
                c.n += 1;
                if d.flags & DESC_F_NEXT == 0 {
                    break;
                }
                if d.next >= num {
                    return Err("rx-bad-next");
                }
                shm.copy_out(lay.desc_at(d.next), &mut b).map_err(|_| "rx-desc-out-of-bounds")?;
                d = Desc::decode(&b);
            }
        }
        for d in &c.d[..c.n] {
            if d.flags & DESC_F_WRITE != 0 {
                return Err("rx-desc-write-only");
            }
            if !lay.in_data(d.addr, d.len) {
                return Err("rx-desc-out-of-bounds");
            }
        }
        Ok(())
    }

    /// Steps 1-5 for one head.
    fn read(&mut self, shm: &ShmRegion, head: u16, out: &mut Vec<u8>) -> Result<RxFrame, &'static str> {
        let sc = &mut *self.scratch;
        Self::chain(&self.lay, self.indirect_ok, shm, head, &mut sc.chain, &mut sc.table)?;
        let c = &sc.chain;
        let total: u64 = c.d[..c.n].iter().map(|d| d.len as u64).sum();
        let info_mode = c.indirect && c.d[0].len as usize == VNET_HDR_LEN + HDR_INFO_LEN;
        let meta_len = if info_mode { VNET_HDR_LEN + HDR_INFO_LEN } else { VNET_HDR_LEN };
        if total < meta_len as u64 + 14 {
            return Err("rx-frame-too-short");
        }
        let len = (total - meta_len as u64) as usize;
        if len > MAX_FRAME {
            return Err("rx-frame-too-long");
        }
        // Gather: the metadata into `mbytes`, the frame into `out`.
        let mut mbytes = [0u8; VNET_HDR_LEN + HDR_INFO_LEN];
        let mut got = 0usize;
        let start = out.len();
        out.reserve(len);
        for d in &c.d[..c.n] {
            let mut addr = d.addr;
            let mut l = d.len as usize;
            if got < meta_len {
                let k = l.min(meta_len - got);
                shm.copy_out(addr, &mut mbytes[got..got + k]).map_err(|_| "rx-desc-out-of-bounds")?;
                got += k;
                addr += k as u64;
                l -= k;
            }
            if l > 0 {
                shm.append_to(addr, l, out).map_err(|_| "rx-desc-out-of-bounds")?;
            }
        }
        let frame = &out[start..];
        let hdr = VirtioNetHdr::parse(&mbytes, HdrLayout::MrgRxbuf, HdrByteOrder::Little).map_err(|e| e.reason())?;
        let form = if info_mode {
            let info = HdrInfo::decode(&mbytes[VNET_HDR_LEN..]).map_err(|e| e.reason())?;
            if c.n < 4 {
                return Err("hdr-info-desc-mismatch");
            }
            info.check(&hdr, [c.d[1].len, c.d[2].len, c.d[3].len], frame).map_err(|e| e.reason())?;
            RxForm::IndirectHdrInfo
        } else if c.indirect {
            RxForm::Indirect
        } else if c.n == 1 {
            RxForm::Direct
        } else {
            RxForm::Chain
        };
        let needs_csum = hdr.flags & F_NEEDS_CSUM != 0;
        if needs_csum && !self.caps.csum {
            return Err("rx-csum-not-negotiated");
        }
        let gso_ok = match hdr.gso_type & !GSO_ECN {
            GSO_NONE => true,
            GSO_TCPV4 => self.caps.tso4,
            GSO_TCPV6 => self.caps.tso6,
            GSO_UDP_L4 => self.caps.uso,
            _ => true, // to_meta refuses it with its own reason
        };
        if !gso_ok || (hdr.gso_type & GSO_ECN != 0 && !self.caps.ecn) {
            return Err("rx-gso-not-negotiated");
        }
        let meta = hdr.to_meta(frame, &ImportOptions::default()).map_err(|e| e.reason())?;
        if needs_csum && self.caps.hdr_info && form != RxForm::IndirectHdrInfo {
            self.stats.csum_without_hdr_info += 1;
        }
        Ok(RxFrame { len, hdr, meta, form })
    }
}
