//! The transmit burst, into the guest's receive queue (issue 24; named
//! from the guest's side, as `push_rx`; not [`held`] frames, whose payload
//! stays in a sending guest's memory): between [`PortDriver::hold_tx`] and the
//! next [`PortDriver::flush`] (one engine round) the port holds the frames
//! the graph gives it and places them together, so that what
//! [`VhostUserDriver::place`] does per call (the guest and queue checks,
//! the receive queue's lock, [`ring::Rings::cached`]'s key check) is done
//! once per burst, as [`PortDriver::recv_burst`] does on the transmit
//! queue. The virtio-net header and [`virtq::push_rx_frame`] are per frame.
//!
//! A run the graph hands over at once ([`PortDriver::xmit_burst`]) is
//! already a burst: with nothing held it is placed at once from the
//! caller's slots (the flush would place it first anyway), the placed
//! frames' small buffers given back to the pool together
//! ([`Packet::recycle_small_all`]); behind held frames it is held too.
//!
//! Invariants: frames leave in the order the graph gave them, after the
//! backlog and before any later frame (a segmented one through the sink
//! and a [`held`] frame through `xmit_held` place the burst first); at most [`RX_BURST`] are held (a full
//! burst is placed at once, so holding never allocates); a frame refused
//! at placement is a driver drop with the reason an unheld one would have
//! got, reported through [`PortDriver::take_drops`] after the flush.

use super::*;

/// Most frames held for one burst (the engine's default budget per port
/// and round is 64).
pub const RX_BURST: usize = 64;

impl VhostUserDriver {
    /// Holds `pkt` (`len` bytes) for the burst; a full burst is placed first.
    pub(super) fn push_rx_burst(&mut self, pkt: Packet, len: usize) {
        if self.rx_burst.len() >= RX_BURST {
            self.place_rx_burst();
        }
        // Packets and lengths apart: a `(Packet, usize)` is past the 128
        // bytes a move copies inline (docs/benchmarks.md, "Packet moves").
        self.rx_burst.push(pkt);
        self.rx_burst_len.push(len);
    }

    /// Holds `pkts` (lengths `lens`) for the burst, each moved out of its
    /// slot (left owning nothing), a full burst placed first: what
    /// [`Self::push_rx_burst`] of each does, without moving each packet
    /// through a call.
    pub(super) fn push_rx_burst_all(&mut self, pkts: &mut [Packet], lens: &[usize]) {
        let mut from = 0;
        while from < pkts.len() {
            if self.rx_burst.len() >= RX_BURST {
                self.place_rx_burst();
            }
            let to = pkts.len().min(from + RX_BURST - self.rx_burst.len());
            self.rx_burst.extend(pkts[from..to].iter_mut().map(Packet::move_out));
            self.rx_burst_len.extend_from_slice(&lens[from..to]);
            from = to;
        }
    }

    /// Places the held frames in order: behind the backlog, each in the
    /// guest's receive queue or, with no room, in the backlog. Inlined:
    /// every flush (engine round) calls it, most with nothing held.
    #[inline(always)]
    pub(super) fn place_rx_burst(&mut self) {
        if !self.rx_burst.is_empty() {
            self.place_held();
        }
    }

    /// [`Self::place_rx_burst`] with frames held.
    #[inline(never)]
    fn place_held(&mut self) {
        let mut held = std::mem::take(&mut self.rx_burst);
        let lens = std::mem::take(&mut self.rx_burst_len);
        self.place_frames(&mut held, &lens);
        // The placed frames' buffers go back to the pool together.
        Packet::drop_all(&mut held);
        self.rx_burst = held;
        self.rx_burst_len = lens;
        self.rx_burst_len.clear();
    }

    /// Places `pkts` (lengths `lens`) in order, behind the backlog: each in
    /// the guest's receive queue or, with no room, moved to the backlog
    /// (with every frame after it). The frames placed or dropped stay in
    /// their slots for the caller to drop; those moved to the backlog leave
    /// theirs owning nothing.
    pub(super) fn place_frames(&mut self, pkts: &mut [Packet], lens: &[usize]) {
        self.refresh();
        if !self.backlog.is_empty() {
            self.drain_backlog();
        }
        let mut next = 0;
        while next < pkts.len() {
            if !self.backlog.is_empty() {
                for p in &mut pkts[next..] {
                    let p = p.move_out();
                    self.backlog_push(p);
                }
                break;
            }
            next = self.place_run(pkts, lens, next);
        }
    }

    /// Places `held[from..]` (lengths `lens[from..]`) under one lock of the receive queue and one
    /// ring lookup until one finds no room (moved to the backlog) or the
    /// queue faults (the rest dropped); returns the index after the last
    /// frame dealt with.
    fn place_run(&mut self, held: &mut [Packet], lens: &[usize], from: usize) -> usize {
        let refused = if self.active.is_none() {
            Some("vhost-no-guest")
        } else if self.stopped[0] {
            Some("vhost-queue-stopped")
        } else if !self.validate(0) {
            Some(if self.stopped[0] { "vhost-queue-stopped" } else { "vhost-queue-disabled" })
        } else {
            None
        };
        if let Some(reason) = refused {
            self.drop_n(reason, (held.len() - from) as u64);
            return held.len();
        }
        let Some(a) = &self.active else { return held.len() };
        let mut st = a.rx.get_mut();
        if !in_service(a, &st) {
            drop(st);
            self.drop_n("vhost-queue-disabled", (held.len() - from) as u64);
            return held.len();
        }
        let q = st.get_queue_mut();
        let (hdr_len, mrg) = (a.hdr_len, a.mrg);
        let mut stop = None;
        let mut i = from;
        // Counted once after the run, not per frame in `self.stats`.
        let mut sent = Sent::default();
        match ring::Rings::cached(q, &a.mem, &mut self.rings[0]) {
            Err(f) => stop = Some(RxRefused::Fault(f)),
            Ok(rings) => {
                let (cursor, scratch) = (&mut self.avail[0], &mut self.rx_scratch);
                while i < held.len() {
                    let (pkt, len) = (&held[i], lens[i]);
                    let hb = match rx_header(a, &pkt.meta, pkt.linear()) {
                        Ok(hb) => hb,
                        Err(reason) => {
                            count_drop(&mut self.pending, reason, 1);
                            i += 1;
                            continue;
                        }
                    };
                    let hdr = &hb[..hdr_len];
                    // A linear packet is its one chunk (as in `xmit_len`).
                    let r = if pkt.segments().is_empty() && pkt.frag_list().is_empty() {
                        virtq::push_rx_frame(&rings, q, cursor, scratch, hdr, pkt.linear(), mrg)
                    } else {
                        virtq::push_rx_at(&rings, q, cursor, scratch, hdr, pkt.all_chunks(), len, mrg)
                    };
                    match r {
                        Ok(placed) => sent.add(len, placed.chains, pkt.meta.is_gso()),
                        Err(RxRefused::TooBig) => count_drop(&mut self.pending, "vhost-rx-too-big", 1),
                        Err(refused) => {
                            stop = Some(refused);
                            break;
                        }
                    }
                    i += 1;
                }
            }
        }
        if sent.frames > 0 {
            self.signal_rx = true;
            self.stats.add_placed(&sent);
        }
        // The guest's kicks on its receive queue (buffers added) are wanted
        // only while frames wait for room (`drain_backlog` turns them on);
        // left on, a polling guest (DPDK's virtio PMD) kicks at every
        // refill, and each kick wakes the port's vring thread on the
        // worker's CPU (14% of the engine's samples in the 64-byte loop,
        // with the reschedules it causes: docs/benchmarks.md).
        if stop.is_none() && self.rx_kicks_on && self.backlog.is_empty() {
            let _ = q.disable_notification(&*a.mem);
            self.rx_kicks_on = false;
        }
        drop(st);
        match stop {
            None => i,
            Some(RxRefused::NoRoom) => {
                let p = held[i].move_out();
                self.backlog_push(p);
                i + 1
            }
            Some(RxRefused::Fault(f)) => {
                self.stop_queue(0, f);
                self.drop_n("vhost-queue-stopped", (held.len() - i) as u64);
                held.len()
            }
            Some(RxRefused::TooBig) => unreachable!("a frame too big is dropped in the loop"),
        }
    }
}
