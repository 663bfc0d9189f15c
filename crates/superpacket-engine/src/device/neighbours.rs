//! The neighbour table (ARP/NDP) the routers of an engine's workers share
//! (`docs/topology.md`, "NAT and routing with several workers").
//!
//! An ARP reply or neighbour advertisement reaches whichever worker the
//! kernel picked for it, not necessarily the one whose packets wait for
//! that neighbour. Every router keeps its own copy of the table for the
//! per-packet lookup (no lock, no shared cache line written per packet)
//! and learns into this shared table too, which bumps a generation
//! counter; a router whose copy is older copies the table when a lookup
//! misses and at every housekeeping pass (one atomic load each; a copy is
//! thus at most one housekeeping interval old), and releases the packets
//! that were waiting for a neighbour now known.
//!
//! Invariants: at most [`super::router::MAX_NEIGHBOURS`] entries, except
//! that a neighbour some worker is resolving is always learned (its
//! packets wait for it); the generation changes after every change of the
//! table, so a copy taken at generation g holds every change up to g.

use super::router::MAX_NEIGHBOURS;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use superpacket::wire::MacAddr;

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<IpAddr, MacAddr>,
    /// Neighbours being resolved, with how many workers resolve each.
    awaited: HashMap<IpAddr, u32>,
}

/// See the module documentation.
#[derive(Debug)]
pub struct SharedNeighbours {
    /// Read by every worker on every send: alone on its cache line, so
    /// the lock's line (written when a neighbour is learned) is not it.
    generation: Generation,
    inner: Mutex<Inner>,
}

#[repr(align(64))]
#[derive(Debug)]
struct Generation(AtomicU64);

impl SharedNeighbours {
    /// A shared table holding `seed` (the first worker's static
    /// neighbours) at generation 1.
    pub fn new(seed: &HashMap<IpAddr, MacAddr>) -> SharedNeighbours {
        SharedNeighbours {
            generation: Generation(AtomicU64::new(1)),
            inner: Mutex::new(Inner { map: seed.clone(), awaited: HashMap::new() }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every update is a single insert or counter change: a worker
        // that panicked holding the lock left the table consistent.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The generation now (changes after every change of the table).
    pub fn generation(&self) -> u64 {
        self.generation.0.load(Ordering::Acquire)
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// No entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Learns `addr` → `mac` unless the table is full and nobody is
    /// resolving `addr` (`awaited_here`: the caller is); returns whether
    /// it was learned.
    pub fn learn(&self, addr: IpAddr, mac: MacAddr, awaited_here: bool) -> bool {
        let mut g = self.lock();
        let known = g.map.get(&addr);
        if known == Some(&mac) {
            return true;
        }
        if known.is_none() && g.map.len() >= MAX_NEIGHBOURS && !awaited_here && !g.awaited.contains_key(&addr) {
            return false;
        }
        g.map.insert(addr, mac);
        self.generation.0.fetch_add(1, Ordering::Release);
        true
    }

    /// A worker starts (`true`) or stops (`false`: resolved or given up)
    /// resolving `addr`.
    pub fn awaiting(&self, addr: IpAddr, start: bool) {
        let mut g = self.lock();
        if start {
            *g.awaited.entry(addr).or_insert(0) += 1;
        } else if let Some(n) = g.awaited.get_mut(&addr) {
            *n -= 1;
            if *n == 0 {
                g.awaited.remove(&addr);
            }
        }
    }

    /// Copies the table into `local` (adding and updating entries);
    /// returns the generation the copy holds.
    pub fn copy_into(&self, local: &mut HashMap<IpAddr, MacAddr>) -> u64 {
        let g = self.lock();
        // Read under the lock: every learn bumps it while holding the lock.
        let generation = self.generation();
        local.extend(g.map.iter().map(|(a, m)| (*a, *m)));
        generation
    }
}
