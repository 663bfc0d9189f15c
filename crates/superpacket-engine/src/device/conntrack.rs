//! The NAT connection table, shared by every engine worker
//! (`docs/topology.md`, "NAT and routing with several workers").
//!
//! With several workers the kernel picks the worker of each packet
//! (multi-queue TAP, `PACKET_FANOUT`) by the packet's own flow hash, so the
//! two directions of a translated connection (different tuples once
//! translated) generally reach different workers. Every worker therefore
//! looks connections up in this one table, split into [`SHARDS`] shards by
//! a keyed hash of the tuple, each behind its own lock on its own cache
//! line: two workers contend only when they touch the same shard at the
//! same moment. The alternative, steering each packet to the worker that
//! owns its connection, would hand most packets across cores through a
//! ring (`docs/benchmarks.md`, "Scaling with workers", says why this
//! measured better).
//!
//! Invariants:
//! - Both tuples of a connection (original, reply) are indexed; each entry
//!   holds the other tuple and the connection's state (expiry, replied,
//!   closing), so a lookup locks one shard only.
//! - Creating and removing a connection lock the shards of both tuples in
//!   shard order (never one while holding a higher one): no deadlock, and
//!   a reply tuple (the translated source port) is claimed atomically, so
//!   port allocation is unique across workers.
//! - [`ConnTable::len`] never exceeds the limit a creator passes: a slot
//!   is reserved (atomically) before a connection is inserted.

use super::nat::{NatTimeouts, Tuple};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Shards of the table (a power of two). 64 keeps the chance that two
/// workers touch the same shard at once small for a few dozen workers,
/// at 4 KiB of locks.
pub const SHARDS: usize = 64;

/// A connection's expiry is rewritten by a refresh only when it moves by
/// this much (1 s; the shortest timeout is 10 s): a connection may then
/// live up to 1 s less than its timeout after its last packet.
pub const REFRESH_SLACK_NS: u64 = 1_000_000_000;

const REPLIED: u8 = 1;
const CLOSING: u8 = 2;

/// The mutable state of one connection, seen by both of its entries.
#[derive(Debug)]
struct ConnState {
    /// Engine clock (ns) at which it expires.
    expires: AtomicU64,
    /// [`REPLIED`] | [`CLOSING`].
    flags: AtomicU8,
}

/// One indexed tuple.
#[derive(Debug, Clone)]
struct Entry {
    /// The connection's other tuple.
    peer: Tuple,
    /// 0: this is the original direction; 1: the reply direction.
    dir: u8,
    state: Arc<ConnState>,
}

/// A worker's scratch for the table: what [`ConnTable::expire`] collects
/// before removing (kept between calls, so a scan allocates only when it
/// grows), and how many connections [`ConnTable::create`] reclaimed.
#[derive(Debug, Default)]
pub struct Scratch {
    found: Vec<(Tuple, Tuple, Arc<ConnState>)>,
    reclaimed: u64,
}

impl Scratch {
    /// Expired connections [`ConnTable::create`] removed to make room
    /// since the last call.
    pub fn take_reclaimed(&mut self) -> u64 {
        std::mem::take(&mut self.reclaimed)
    }
}

type ShardMap = HashMap<Tuple, Entry, ahash::RandomState>;

/// A shard: its lock alone on a cache line, so that two workers locking
/// neighbouring shards do not bounce one line between their cores.
#[repr(align(64))]
#[derive(Debug)]
struct Shard(Mutex<ShardMap>);

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A live connection: the tuple the packet must get.
    Live(Tuple),
    /// A connection that had expired (removed by this lookup).
    Expired,
    /// Nothing.
    None,
}

/// Why a connection was not created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The table holds its limit of live connections.
    Full,
    /// No source port is free for the translated tuple.
    NoPort,
    /// One of the tuples belongs to another connection (a race with
    /// another worker creating the same connection).
    Exists,
}

/// The sharded connection table. See the module documentation.
#[derive(Debug)]
pub struct ConnTable {
    shards: Box<[Shard]>,
    /// Picks the shard; independent of the maps' own hasher, so every
    /// shard's map spreads its keys over all of its buckets.
    shard_hash: ahash::RandomState,
    len: AtomicUsize,
    peak: AtomicUsize,
    /// No connection expires before this (a lower bound): a full table is
    /// scanned only once one can have expired.
    next_expiry: AtomicU64,
}

fn lock(m: &Mutex<ShardMap>) -> MutexGuard<'_, ShardMap> {
    // A worker that panicked while holding a shard left no half-written
    // entry (every update is one insert or remove): keep using it.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn timeout(t: &NatTimeouts, proto: u8, flags: u8) -> u64 {
    match (proto, flags & REPLIED != 0, flags & CLOSING != 0) {
        (6, _, true) => t.tcp_closing,
        (6, true, _) => t.tcp_established,
        (6, false, _) => t.tcp_unreplied,
        (_, true, _) => t.udp_replied,
        _ => t.udp_unreplied,
    }
}

impl ConnTable {
    /// An empty table with room reserved for `capacity` connections (so
    /// that creating them does not grow the maps).
    pub fn new(capacity: usize) -> ConnTable {
        let hasher = ahash::RandomState::new();
        let per_shard = (capacity.min(1 << 16) * 2).div_ceil(SHARDS);
        let shards = (0..SHARDS)
            .map(|_| Shard(Mutex::new(HashMap::with_capacity_and_hasher(per_shard, hasher.clone()))))
            .collect();
        ConnTable {
            shards,
            shard_hash: ahash::RandomState::new(),
            len: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            next_expiry: AtomicU64::new(u64::MAX),
        }
    }

    fn shard_of(&self, t: &Tuple) -> usize {
        self.shard_hash.hash_one(t) as usize & (SHARDS - 1)
    }

    /// Live connections.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// No live connection.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Most connections alive at once so far.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Whether `t` is a tuple of a connection (no refresh).
    pub fn contains(&self, t: &Tuple) -> bool {
        lock(&self.shards[self.shard_of(t)].0).contains_key(t)
    }

    /// Looks `t` up at `now`: a live connection is refreshed (a reply marks
    /// it replied, `fin_rst` closing, and its timeout restarts from
    /// `timeouts`); an expired one is removed.
    pub fn lookup(&self, t: &Tuple, now: u64, fin_rst: bool, timeouts: &NatTimeouts) -> Found {
        let stale = {
            let shard = lock(&self.shards[self.shard_of(t)].0);
            let Some(e) = shard.get(t) else { return Found::None };
            let st = &e.state;
            let old = st.expires.load(Ordering::Relaxed);
            if old > now {
                // Written only when something changes: a connection whose
                // two directions run on two workers then shares its state
                // read-only, without moving a cache line per packet.
                let bits = if e.dir == 1 { REPLIED } else { 0 } | if fin_rst { CLOSING } else { 0 };
                let mut flags = st.flags.load(Ordering::Relaxed);
                if flags & bits != bits {
                    flags = st.flags.fetch_or(bits, Ordering::Relaxed) | bits;
                }
                let expires = now + timeout(timeouts, t.proto, flags);
                // A refresh moves the expiry by at least REFRESH_SLACK_NS
                // (or back, when the connection starts closing). Two
                // workers refreshing at once store nearly the same instant.
                if expires >= old.saturating_add(REFRESH_SLACK_NS) || expires < old {
                    st.expires.store(expires, Ordering::Relaxed);
                }
                // A later expiry keeps the lower bound a lower bound.
                if expires < old {
                    self.next_expiry.fetch_min(expires, Ordering::Relaxed);
                }
                return Found::Live(e.peer.reversed());
            }
            e.clone()
        };
        // Removing needs both shards, taken in order: release this one first.
        let (orig, reply) = if stale.dir == 0 { (*t, stale.peer) } else { (stale.peer, *t) };
        if self.remove(&orig, &reply, &stale.state) { Found::Expired } else { Found::None }
    }

    /// Locks the shards of `a` and `b` in shard order and runs `f` on
    /// them (the same guard twice when they share a shard).
    fn with_pair<R>(&self, a: &Tuple, b: &Tuple, f: impl FnOnce(&mut ShardMap, Option<&mut ShardMap>) -> R) -> R {
        let (sa, sb) = (self.shard_of(a), self.shard_of(b));
        if sa == sb {
            return f(&mut lock(&self.shards[sa].0), None);
        }
        let (lo, hi) = (sa.min(sb), sa.max(sb));
        let mut g_lo = lock(&self.shards[lo].0);
        let mut g_hi = lock(&self.shards[hi].0);
        if sa == lo { f(&mut g_lo, Some(&mut g_hi)) } else { f(&mut g_hi, Some(&mut g_lo)) }
    }

    /// Removes the connection (`orig`, `reply`) if its entries still hold
    /// `state` (another worker may have removed it, or a new connection
    /// reused a tuple, meanwhile). Returns whether it was removed here.
    fn remove(&self, orig: &Tuple, reply: &Tuple, state: &Arc<ConnState>) -> bool {
        let ours = |m: &ShardMap, t: &Tuple| m.get(t).is_some_and(|e| Arc::ptr_eq(&e.state, state));
        let removed = self.with_pair(orig, reply, |ma, mb| {
            if !ours(ma, orig) {
                return false;
            }
            ma.remove(orig);
            let mb = match mb {
                Some(mb) => mb,
                None => ma,
            };
            if ours(mb, reply) {
                mb.remove(reply);
            }
            true
        });
        if removed {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }

    /// Removes every connection expired at `now`; returns how many this
    /// call removed. `scratch` is reused between calls.
    pub fn expire(&self, now: u64, scratch: &mut Scratch) -> usize {
        if now < self.next_expiry.load(Ordering::Relaxed) {
            return 0;
        }
        let mut next = u64::MAX;
        let scratch = &mut scratch.found;
        scratch.clear();
        for s in self.shards.iter() {
            for (t, e) in lock(&s.0).iter().filter(|(_, e)| e.dir == 0) {
                let at = e.state.expires.load(Ordering::Relaxed);
                if at <= now {
                    scratch.push((*t, e.peer, e.state.clone()));
                } else {
                    next = next.min(at);
                }
            }
        }
        // A connection refreshed since the scan holds a later expiry than
        // `next` may say: a lower bound only needs to be low.
        self.next_expiry.store(next, Ordering::Relaxed);
        scratch.drain(..).filter(|(o, r, st)| self.remove(o, r, st)).count()
    }

    /// Creates the connection `orig` translated to `to` at `now`, if fewer
    /// than `max` are alive (expired ones are reclaimed first when the
    /// table is full; see [`Scratch::take_reclaimed`]). When the reply
    /// tuple of `to` is taken and the source changes, the next free source
    /// port from `to.sport` on (1024..=65535) is claimed instead. Returns
    /// the translated tuple.
    ///
    /// # Errors
    /// [`Refused`].
    pub fn create(
        &self,
        orig: Tuple,
        to: Tuple,
        now: u64,
        max: usize,
        timeouts: &NatTimeouts,
        scratch: &mut Scratch,
    ) -> Result<Tuple, Refused> {
        if self.len.fetch_add(1, Ordering::Relaxed) >= max {
            self.len.fetch_sub(1, Ordering::Relaxed);
            scratch.reclaimed += self.expire(now, scratch) as u64;
            if self.len.fetch_add(1, Ordering::Relaxed) >= max {
                self.len.fetch_sub(1, Ordering::Relaxed);
                return Err(Refused::Full);
            }
        }
        let res = self.claim(orig, to, now, timeouts);
        match res {
            Ok(_) => {
                self.peak.fetch_max(self.len(), Ordering::Relaxed);
            }
            Err(_) => {
                self.len.fetch_sub(1, Ordering::Relaxed);
            }
        }
        res
    }

    /// Inserts both tuples of the new connection (a reserved slot), trying
    /// source ports as [`ConnTable::create`] says.
    fn claim(&self, orig: Tuple, mut to: Tuple, now: u64, timeouts: &NatTimeouts) -> Result<Tuple, Refused> {
        let expires = now + timeout(timeouts, orig.proto, 0);
        let state = Arc::new(ConnState { expires: AtomicU64::new(expires), flags: AtomicU8::new(0) });
        let mut port = to.sport.max(1024);
        for _ in 0..=64512u32 {
            let reply = to.reversed();
            let res = self.with_pair(&orig, &reply, |ma, mb| {
                let taken = match &mb {
                    Some(mb) => mb.contains_key(&reply),
                    None => ma.contains_key(&reply),
                };
                if ma.contains_key(&orig) {
                    return Err(Refused::Exists);
                }
                if taken {
                    return Err(Refused::NoPort);
                }
                ma.insert(orig, Entry { peer: reply, dir: 0, state: state.clone() });
                let mb = match mb {
                    Some(mb) => mb,
                    None => ma,
                };
                mb.insert(reply, Entry { peer: orig, dir: 1, state: state.clone() });
                Ok(())
            });
            match res {
                Ok(()) => {
                    self.next_expiry.fetch_min(expires, Ordering::Relaxed);
                    return Ok(to);
                }
                // The reply tuple is another connection's: without source
                // translation it cannot change (the kernel's conntrack
                // refuses such a clash too).
                Err(Refused::NoPort) if to.src != orig.src => {
                    port = if port == 65535 { 1024 } else { port + 1 };
                    to = Tuple { sport: port, ..to };
                }
                Err(Refused::NoPort) => return Err(Refused::Exists),
                Err(e) => return Err(e),
            }
        }
        Err(Refused::NoPort)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::net::Ipv4Addr;

    /// Client `i` (10.0.x.y:40000) to one server, masqueraded to 9.9.9.9
    /// with its own source port asked for: every one clashes with the rest.
    fn conn(i: u32) -> (Tuple, Tuple) {
        let c = Ipv4Addr::from(0x0a00_0000 + i);
        let orig = Tuple { proto: 6, src: c, sport: 40000, dst: Ipv4Addr::new(198, 51, 100, 7), dport: 80 };
        (orig, Tuple { src: Ipv4Addr::new(9, 9, 9, 9), ..orig })
    }

    #[test]
    fn workers_creating_at_once_get_unique_ports_and_never_pass_the_limit() {
        let table = Arc::new(ConnTable::new(1000));
        let t = NatTimeouts::default();
        let got: Vec<Vec<Tuple>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2u32)
                .map(|w| {
                    let table = table.clone();
                    s.spawn(move || {
                        let (mut scratch, mut out) = (Scratch::default(), Vec::new());
                        for i in (w..1200).step_by(2) {
                            let (orig, to) = conn(i);
                            if let Ok(x) = table.create(orig, to, 0, 1000, &t, &mut scratch) {
                                out.push(x);
                            }
                        }
                        out
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let all: Vec<Tuple> = got.concat();
        assert_eq!(all.len(), 1000, "exactly the limit");
        assert_eq!(table.len(), 1000);
        assert_eq!(all.iter().map(|x| x.sport).collect::<HashSet<_>>().len(), 1000, "one port each");
        // Every reply finds its connection, the original direction too.
        for x in &all {
            assert!(matches!(table.lookup(&x.reversed(), 1, false, &t), Found::Live(_)));
        }
        // All expire at once; a second pass finds nothing.
        let mut scratch = Scratch::default();
        assert_eq!(table.expire(u64::MAX - 1, &mut scratch), 1000);
        assert_eq!((table.len(), table.expire(u64::MAX - 1, &mut scratch)), (0, 0));
    }
}
