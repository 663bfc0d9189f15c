//! The client library: how an application attaches to a running engine's
//! pv port and exchanges superpackets with it.
//!
//! ```no_run
//! use superpacket_engine::io::pv::{PvClient, PvClientConfig};
//! use superpacket::traffic::{Flow, FlowSpec, Transport};
//! use std::time::Duration;
//!
//! let mut client = PvClient::connect("/run/superpacket/app0.sock".as_ref(), &PvClientConfig::default())?;
//! // A superpacket as a TSO stack produces it (partial checksum, gso_size).
//! let mut flow = Flow::new(FlowSpec::new(Transport::Tcp, false, 0));
//! let sp = flow.superpacket(60_000, 1448, Default::default()).unwrap();
//! client.send_packet(&sp, false)?; // waits for room if the ring is full
//! let mut buf = Vec::new();
//! if let Some(frame) = client.recv_wait(&mut buf, Duration::from_secs(1))? {
//!     println!("{} bytes, {:?}", frame.len, frame.meta);
//! }
//! # Ok::<(), superpacket_engine::io::pv::PvError>(())
//! ```

use super::link::{PvClientConfig, PvError, PvLink, PvStats};
use super::rx::RxFrame;
use super::tx::{TxError, TxForm, TxStrategy};
use std::path::Path;
use std::time::Duration;
use superpacket::packet::{OffloadMeta, Packet};

/// A client attached to an engine's pv port (or to any pv endpoint, such
/// as `superpacket pv-peer`).
#[derive(Debug)]
pub struct PvClient {
    link: PvLink,
    /// How long [`PvClient::recv_wait`] and blocking sends poll the ring
    /// before sleeping on the eventfd (default 0: sleep at once).
    pub busy_poll: Duration,
    /// How long a blocking send waits for room (default 5 s).
    pub send_timeout: Duration,
}

impl PvClient {
    /// Attaches to the pv socket at `path` (see [`PvLink::connect`]).
    ///
    /// # Errors
    /// Nobody listening, the port busy with another client, a refused
    /// feature set, or a timeout.
    pub fn connect(path: &Path, cfg: &PvClientConfig) -> Result<PvClient, PvError> {
        Ok(PvClient {
            link: PvLink::connect(path, cfg)?,
            busy_poll: Duration::ZERO,
            send_timeout: Duration::from_secs(5),
        })
    }

    /// The link underneath (non-blocking calls, counters, descriptors).
    pub fn link(&mut self) -> &mut PvLink {
        &mut self.link
    }

    /// Negotiated features.
    pub fn features(&self) -> u64 {
        self.link.features()
    }

    /// Counters.
    pub fn stats(&self) -> PvStats {
        self.link.stats()
    }

    /// Changes the transmit policy.
    pub fn set_strategy(&mut self, s: TxStrategy) {
        self.link.set_strategy(s);
    }

    /// Sends one frame with its metadata; waits for room when the ring is
    /// full. `more`: more frames follow at once (the kick waits for the last
    /// one, or for [`PvClient::flush`]).
    ///
    /// # Errors
    /// No room within `send_timeout` ([`PvError::Timeout`]), a frame the
    /// engine cannot take, or a dead link.
    pub fn send_frame(&mut self, frame: &[u8], meta: &OffloadMeta, more: bool) -> Result<TxForm, PvError> {
        loop {
            match self.link.send(&[frame], meta, more) {
                Err(PvError::Tx(TxError::RingFull)) => self.wait_room()?,
                r => return r,
            }
        }
    }

    /// Sends a packet (superpackets segmented in software if the engine
    /// does not take them whole); waits for room as [`PvClient::send_frame`].
    ///
    /// # Errors
    /// As [`PvClient::send_frame`].
    pub fn send_packet(&mut self, pkt: &Packet, more: bool) -> Result<(), PvError> {
        loop {
            match self.link.send_packet(pkt, more) {
                Err(PvError::Tx(TxError::RingFull)) => self.wait_room()?,
                r => return r,
            }
        }
    }

    fn wait_room(&mut self) -> Result<(), PvError> {
        if self.link.wait_tx(self.send_timeout, self.busy_poll)? { Ok(()) } else { Err(PvError::Timeout) }
    }

    /// Kicks the engine for frames sent with `more`.
    ///
    /// # Errors
    /// A dead link.
    pub fn flush(&mut self) -> Result<(), PvError> {
        self.link.flush()
    }

    /// The next received frame, if one is waiting; its bytes replace the
    /// content of `buf`.
    ///
    /// # Errors
    /// A dead link.
    pub fn recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RxFrame>, PvError> {
        buf.clear();
        self.link.recv(buf)
    }

    /// As [`PvClient::recv`], waiting up to `timeout` for a frame.
    ///
    /// # Errors
    /// A dead link (the engine went away).
    pub fn recv_wait(&mut self, buf: &mut Vec<u8>, timeout: Duration) -> Result<Option<RxFrame>, PvError> {
        let start = std::time::Instant::now();
        loop {
            if let Some(f) = self.recv(buf)? {
                return Ok(Some(f));
            }
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() || !self.link.wait_rx(left, self.busy_poll)? {
                return Ok(None);
            }
        }
    }

    /// Receives one frame as a [`Packet`] (allocates it), waiting up to `timeout`.
    ///
    /// # Errors
    /// A dead link.
    pub fn recv_packet(&mut self, timeout: Duration) -> Result<Option<Packet>, PvError> {
        let mut buf = Vec::new();
        Ok(self.recv_wait(&mut buf, timeout)?.map(|f| {
            let mut p = Packet::from_storage(buf, 0, f.len).expect("the frame fills the buffer");
            p.meta = f.meta;
            p
        }))
    }
}
