//! A relay between a frontend's vhost-user socket and the port's daemon
//! that holds back `VHOST_USER_SET_VRING_ENABLE` until the frontend's first
//! `VHOST_USER_SET_FEATURES`.
//!
//! QEMU's virtio-net (7.2, Debian 12) enables the vrings of a vhost-user
//! peer as soon as the guest driver probes the device, before it sends
//! `SET_FEATURES`; the `vhost` crate (0.18, and upstream) refuses a
//! `SET_VRING_ENABLE` until `SET_FEATURES` acked
//! `VHOST_USER_F_PROTOCOL_FEATURES` and ends the connection, and
//! `vhost-user-backend` ignores the request likewise. So the relay keeps the
//! latest enable state of each vring asked for before `SET_FEATURES` and
//! replays it to the daemon right after forwarding `SET_FEATURES` when that
//! acks `PROTOCOL_FEATURES` (the rings then start as the frontend asked).
//! Without `PROTOCOL_FEATURES` the held requests are dropped: the rings
//! start enabled then (vhost-user specification, "Ring states").
//!
//! Everything else passes unchanged, with its file descriptors, one
//! message at a time towards the daemon and as a byte stream back (the
//! daemon sends the frontend no file descriptors on this socket: none of
//! the protocol features it offers do).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use vhost::vhost_user::message::MAX_ATTACHED_FD_ENTRIES;
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

/// `VHOST_USER_SET_FEATURES`.
const SET_FEATURES: u32 = 2;
/// `VHOST_USER_SET_VRING_ENABLE`.
const SET_VRING_ENABLE: u32 = 18;
/// Header flags: protocol version 1.
const VERSION_1: u32 = 0x1;
/// Header flags: this is a reply.
const REPLY: u32 = 0x4;
/// Header flags: the frontend wants an ack (`REPLY_ACK`).
const NEED_REPLY: u32 = 0x8;
/// `VHOST_USER_F_PROTOCOL_FEATURES` in `SET_FEATURES`.
const PROTOCOL_FEATURES: u64 = 1 << 30;
/// Request, flags and payload size, each a little-endian u32.
const HEADER_LEN: usize = 12;
/// The largest payload the protocol has (`MAX_MSG_SIZE` of the crates,
/// plus the header of a config-space message).
const MAX_PAYLOAD: usize = 0x1000 + 12;

/// One frontend message: header, payload and the descriptors it carried.
struct Message {
    header: [u8; HEADER_LEN],
    payload: Vec<u8>,
    fds: Vec<OwnedFd>,
}

impl Message {
    fn word(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.header[at..at + 4].try_into().unwrap_or_default())
    }
    fn request(&self) -> u32 {
        self.word(0)
    }
    fn flags(&self) -> u32 {
        self.word(4)
    }
    /// The payload's first u64 (`SET_FEATURES`), 0 if it is shorter.
    fn u64_payload(&self) -> u64 {
        self.payload.get(..8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }
    /// The vring index of a `SET_VRING_ENABLE` (`struct vhost_vring_state`).
    fn vring_index(&self) -> u32 {
        self.payload.get(..4).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
    }
}

/// Reads one message from the frontend; `None` when it closed the socket
/// or sent something that is not a vhost-user message.
fn read_message(from: &UnixStream) -> Option<Message> {
    let mut header = [0u8; HEADER_LEN];
    let mut fds: [RawFd; MAX_ATTACHED_FD_ENTRIES] = [-1; MAX_ATTACHED_FD_ENTRIES];
    let mut iov = [libc::iovec { iov_base: header.as_mut_ptr().cast(), iov_len: HEADER_LEN }];
    // SAFETY: the iovec points at `header`, which lives across the call and
    // may hold any bytes; `fds` has room for the descriptors asked for.
    let (got, nfds) = unsafe { from.recv_with_fds(&mut iov, &mut fds) }.ok()?;
    // SAFETY: recvmsg returned `nfds` new descriptors in `fds`, owned by
    // nobody else; wrapping them closes them when the message is dropped.
    let fds: Vec<OwnedFd> = fds[..nfds].iter().map(|&fd| unsafe { OwnedFd::from_raw_fd(fd) }).collect();
    if got == 0 {
        return None;
    }
    // A stream socket may split the header; the rest carries no descriptors.
    let mut reader = from;
    reader.read_exact(&mut header[got..]).ok()?;
    let size = u32::from_le_bytes(header[8..12].try_into().ok()?) as usize;
    if size > MAX_PAYLOAD {
        return None;
    }
    let mut payload = vec![0u8; size];
    reader.read_exact(&mut payload).ok()?;
    Some(Message { header, payload, fds })
}

/// Sends one message to the daemon with its descriptors.
fn forward(to: &UnixStream, m: &Message) -> std::io::Result<()> {
    let raw: Vec<RawFd> = m.fds.iter().map(AsRawFd::as_raw_fd).collect();
    let sent = to.send_with_fds(&[&m.header[..], &m.payload[..]], &raw).map_err(std::io::Error::other)?;
    let whole = HEADER_LEN + m.payload.len();
    if sent < whole {
        // The descriptors went with the first bytes; the rest is plain data.
        let mut w = to;
        let all: Vec<u8> = m.header.iter().chain(m.payload.iter()).copied().collect();
        w.write_all(&all[sent..])?;
    }
    Ok(())
}

/// What the relay does with `SET_VRING_ENABLE` until `SET_FEATURES`.
#[derive(Default)]
struct EnableHold {
    /// `SET_FEATURES` went through: nothing is held any more.
    features_seen: bool,
    /// The latest request per vring, in vring order.
    held: BTreeMap<u32, Message>,
}

impl EnableHold {
    /// What to send the daemon for `m`: nothing (held), `m`, or `m`
    /// followed by the held requests.
    fn take(&mut self, m: Message) -> Vec<Message> {
        if self.features_seen {
            return vec![m];
        }
        match m.request() {
            SET_VRING_ENABLE => {
                self.held.insert(m.vring_index(), m);
                Vec::new()
            }
            SET_FEATURES => {
                self.features_seen = true;
                let replay = m.u64_payload() & PROTOCOL_FEATURES != 0;
                let held = std::mem::take(&mut self.held);
                let mut out = vec![m];
                if replay {
                    // Replayed without NEED_REPLY: the frontend had its ack.
                    out.extend(held.into_values().map(|mut h| {
                        let flags = h.flags() & !NEED_REPLY;
                        h.header[4..8].copy_from_slice(&flags.to_le_bytes());
                        h
                    }));
                }
                out
            }
            _ => vec![m],
        }
    }
}

/// The ack of a held request that asked for one (`REPLY_ACK`): success.
fn ack(request: &Message) -> [u8; HEADER_LEN + 8] {
    let mut r = [0u8; HEADER_LEN + 8];
    r[0..4].copy_from_slice(&request.request().to_le_bytes());
    r[4..8].copy_from_slice(&(VERSION_1 | REPLY).to_le_bytes());
    r[8..12].copy_from_slice(&8u32.to_le_bytes());
    r
}

/// Relays between `frontend` and `daemon` until either side closes, then
/// shuts both down. Two threads (one per direction); the returned handles
/// end with the connection.
///
/// # Errors
/// A socket cannot be cloned or a thread not started.
pub fn spawn(frontend: UnixStream, daemon: UnixStream) -> std::io::Result<[JoinHandle<()>; 2]> {
    // Writes to the frontend: the daemon's replies and the relay's acks.
    let to_frontend = Arc::new(Mutex::new(frontend.try_clone()?));
    let down_from = daemon.try_clone()?;
    let down_to = to_frontend.clone();
    let ends = Arc::new([frontend.try_clone()?, daemon.try_clone()?]);
    let shutdown_down = ends.clone();
    let shutdown = move |ends: &[UnixStream; 2]| {
        for e in ends {
            let _ = e.shutdown(std::net::Shutdown::Both);
        }
    };
    let up = std::thread::Builder::new().name("sp-vhost-relay".into()).spawn(move || {
        let mut hold = EnableHold::default();
        while let Some(m) = read_message(&frontend) {
            if m.request() == SET_VRING_ENABLE && !hold.features_seen && m.flags() & NEED_REPLY != 0 {
                let mut w = to_frontend.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if w.write_all(&ack(&m)).is_err() {
                    break;
                }
            }
            if hold.take(m).iter().any(|out| forward(&daemon, out).is_err()) {
                break;
            }
        }
        shutdown(&ends);
    })?;
    let down = std::thread::Builder::new().name("sp-vhost-relay".into()).spawn(move || {
        let mut from = down_from;
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            let mut w = down_to.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if w.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        shutdown(&shutdown_down);
    })?;
    Ok([up, down])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(request: u32, flags: u32, payload: &[u8]) -> Message {
        let mut header = [0u8; HEADER_LEN];
        header[0..4].copy_from_slice(&request.to_le_bytes());
        header[4..8].copy_from_slice(&flags.to_le_bytes());
        header[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        Message { header, payload: payload.to_vec(), fds: Vec::new() }
    }

    fn enable(index: u32, on: u32, flags: u32) -> Message {
        let mut p = index.to_le_bytes().to_vec();
        p.extend_from_slice(&on.to_le_bytes());
        message(SET_VRING_ENABLE, flags, &p)
    }

    fn described(out: &[Message]) -> Vec<(u32, u32, Vec<u8>)> {
        out.iter().map(|m| (m.request(), m.flags(), m.payload.clone())).collect()
    }

    #[test]
    fn enables_before_set_features_are_replayed_after_it_latest_per_vring() {
        let mut h = EnableHold::default();
        assert!(h.take(enable(1, 1, VERSION_1)).is_empty());
        assert!(h.take(enable(0, 0, VERSION_1)).is_empty());
        assert!(h.take(enable(0, 1, VERSION_1 | NEED_REPLY)).is_empty());
        assert_eq!(h.take(message(3, VERSION_1, &[])).len(), 1, "other requests pass");
        let features = (PROTOCOL_FEATURES | 1 << 32).to_le_bytes();
        let out = h.take(message(SET_FEATURES, VERSION_1, &features));
        assert_eq!(
            described(&out),
            vec![
                (SET_FEATURES, VERSION_1, features.to_vec()),
                (SET_VRING_ENABLE, VERSION_1, enable(0, 1, 0).payload),
                (SET_VRING_ENABLE, VERSION_1, enable(1, 1, 0).payload),
            ]
        );
        // From then on, nothing is held.
        assert_eq!(described(&h.take(enable(0, 0, VERSION_1))), described(&[enable(0, 0, VERSION_1)]));
    }

    #[test]
    fn without_protocol_features_the_held_enables_are_dropped() {
        let mut h = EnableHold::default();
        assert!(h.take(enable(0, 1, VERSION_1)).is_empty());
        let out = h.take(message(SET_FEATURES, VERSION_1, &(1u64 << 32).to_le_bytes()));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].request(), SET_FEATURES);
    }

    #[test]
    fn a_held_enable_that_wants_a_reply_is_acked_with_success() {
        let a = ack(&enable(1, 1, VERSION_1 | NEED_REPLY));
        assert_eq!(&a[0..4], &SET_VRING_ENABLE.to_le_bytes());
        assert_eq!(&a[4..8], &(VERSION_1 | REPLY).to_le_bytes());
        assert_eq!(&a[8..12], &8u32.to_le_bytes());
        assert_eq!(&a[12..], &[0u8; 8]);
    }

    #[test]
    fn messages_cross_the_relay_with_their_descriptors_and_replies_come_back() {
        let (frontend, relay_f) = UnixStream::pair().unwrap();
        let (relay_d, daemon) = UnixStream::pair().unwrap();
        let handles = spawn(relay_f, relay_d).unwrap();
        // A message with a descriptor (as SET_VRING_KICK carries one).
        let (a, _b) = UnixStream::pair().unwrap();
        let m = message(12, VERSION_1, &0u64.to_le_bytes());
        frontend.send_with_fds(&[&m.header[..], &m.payload[..]], &[a.as_raw_fd()]).unwrap();
        let got = read_message(&daemon).expect("the daemon gets the message");
        assert_eq!((got.request(), got.payload.clone(), got.fds.len()), (12, m.payload.clone(), 1));
        // A held enable that wants a reply is acked by the relay.
        let e = enable(0, 1, VERSION_1 | NEED_REPLY);
        frontend.send_with_fds(&[&e.header[..], &e.payload[..]], &[]).unwrap();
        let mut reply = [0u8; HEADER_LEN + 8];
        (&frontend).read_exact(&mut reply).unwrap();
        assert_eq!(reply, ack(&e));
        // The daemon's bytes reach the frontend.
        (&daemon).write_all(b"reply").unwrap();
        let mut back = [0u8; 5];
        (&frontend).read_exact(&mut back).unwrap();
        assert_eq!(&back, b"reply");
        // The frontend leaves: the daemon's side ends too.
        drop(frontend);
        assert!(read_message(&daemon).is_none());
        for h in handles {
            h.join().unwrap();
        }
    }
}
