//! The attach handshake and feature negotiation of a paravirtual link,
//! over a Unix `SOCK_SEQPACKET` socket (one message per record, descriptors
//! passed with `SCM_RIGHTS`, as vhost-user does).
//!
//! ```text
//! engine -> client  OFFER   features offered, largest and default ring size
//! client -> engine  ACK     features accepted (a subset), ring size
//! engine -> client  READY   features in force, ring size, region size
//!                           + SCM_RIGHTS [memfd, kick0, call0, kick1, call1]
//!              (or) REFUSE  a reason; the engine closes the socket
//! ```
//!
//! Every message starts with the magic `SPPV`, the protocol version (1) and
//! the message kind; all integers are little-endian. After READY the socket
//! stays open and carries nothing: its hang-up is how the engine learns that
//! the client went away (even when killed), and releases the region.
//!
//! # Features (virtio-net bit numbers, virtio 1.x section 5.1.3)
//!
//! Queue 0 carries client-to-engine frames, queue 1 engine-to-client frames;
//! the `HOST_*` bits say what the engine accepts on queue 0, the `GUEST_*`
//! bits what the client accepts on queue 1, as for a virtio-net device
//! (engine) and driver (client). [`F_VERSION_1`] (little-endian
//! `virtio_net_hdr_v1`) and [`F_RING_INDIRECT_DESC`] are required;
//! [`F_RING_EVENT_IDX`] is optional. [`F_GUEST_HDRLEN`] means, on this link,
//! that **the receiving side needs header information with every
//! checksum-offloaded frame**: the exact `hdr_len` and the L2/L3/L4 header
//! lengths in a metadata descriptor, which only the indirect form carries
//! (see the module documentation of [`super`]). The dependencies of the
//! virtio specification are enforced ([`negotiate`]).

use super::super::error::IoError;
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

/// `VIRTIO_NET_F_CSUM`: the engine takes partial checksums from the client.
pub const F_CSUM: u64 = 1 << 0;
/// `VIRTIO_NET_F_GUEST_CSUM`: the client takes partial checksums from the engine.
pub const F_GUEST_CSUM: u64 = 1 << 1;
/// `VIRTIO_NET_F_GUEST_TSO4`: the client takes TCPv4 superpackets.
pub const F_GUEST_TSO4: u64 = 1 << 7;
/// `VIRTIO_NET_F_GUEST_TSO6`: the client takes TCPv6 superpackets.
pub const F_GUEST_TSO6: u64 = 1 << 8;
/// `VIRTIO_NET_F_GUEST_ECN`: ... with the ECN bit.
pub const F_GUEST_ECN: u64 = 1 << 9;
/// `VIRTIO_NET_F_HOST_TSO4`: the engine takes TCPv4 superpackets.
pub const F_HOST_TSO4: u64 = 1 << 11;
/// `VIRTIO_NET_F_HOST_TSO6`: the engine takes TCPv6 superpackets.
pub const F_HOST_TSO6: u64 = 1 << 12;
/// `VIRTIO_NET_F_HOST_ECN`: ... with the ECN bit.
pub const F_HOST_ECN: u64 = 1 << 13;
/// `VIRTIO_RING_F_INDIRECT_DESC` (required).
pub const F_RING_INDIRECT_DESC: u64 = 1 << 28;
/// `VIRTIO_RING_F_EVENT_IDX`: notification suppression by index.
pub const F_RING_EVENT_IDX: u64 = 1 << 29;
/// `VIRTIO_F_VERSION_1` (required): little-endian rings and headers.
pub const F_VERSION_1: u64 = 1 << 32;
/// `VIRTIO_NET_F_GUEST_USO4`: the client takes UDP_L4 superpackets over IPv4.
pub const F_GUEST_USO4: u64 = 1 << 54;
/// `VIRTIO_NET_F_GUEST_USO6`: the client takes UDP_L4 superpackets over IPv6.
pub const F_GUEST_USO6: u64 = 1 << 55;
/// `VIRTIO_NET_F_HOST_USO`: the engine takes UDP_L4 superpackets.
pub const F_HOST_USO: u64 = 1 << 56;
/// `VIRTIO_NET_F_GUEST_HDRLEN`: header information accompanies every
/// checksum-offloaded frame (see the module documentation).
pub const F_GUEST_HDRLEN: u64 = 1 << 59;

/// Features a link cannot work without.
pub const REQUIRED: u64 = F_VERSION_1 | F_RING_INDIRECT_DESC;

/// Everything this implementation knows.
pub const ALL_FEATURES: u64 = F_CSUM
    | F_GUEST_CSUM
    | F_GUEST_TSO4
    | F_GUEST_TSO6
    | F_GUEST_ECN
    | F_HOST_TSO4
    | F_HOST_TSO6
    | F_HOST_ECN
    | F_RING_INDIRECT_DESC
    | F_RING_EVENT_IDX
    | F_VERSION_1
    | F_GUEST_USO4
    | F_GUEST_USO6
    | F_HOST_USO
    | F_GUEST_HDRLEN;

const NAMES: [(u64, &str); 15] = [
    (F_CSUM, "CSUM"),
    (F_GUEST_CSUM, "GUEST_CSUM"),
    (F_GUEST_TSO4, "GUEST_TSO4"),
    (F_GUEST_TSO6, "GUEST_TSO6"),
    (F_GUEST_ECN, "GUEST_ECN"),
    (F_HOST_TSO4, "HOST_TSO4"),
    (F_HOST_TSO6, "HOST_TSO6"),
    (F_HOST_ECN, "HOST_ECN"),
    (F_RING_INDIRECT_DESC, "RING_INDIRECT_DESC"),
    (F_RING_EVENT_IDX, "RING_EVENT_IDX"),
    (F_VERSION_1, "VERSION_1"),
    (F_GUEST_USO4, "GUEST_USO4"),
    (F_GUEST_USO6, "GUEST_USO6"),
    (F_HOST_USO, "HOST_USO"),
    (F_GUEST_HDRLEN, "GUEST_HDRLEN"),
];

/// `(feature, needs one of)` per the virtio specification (5.1.3.1), plus
/// GUEST_HDRLEN, which only means something with a checksum offload.
const DEPENDENCIES: [(u64, u64); 10] = [
    (F_HOST_TSO4, F_CSUM),
    (F_HOST_TSO6, F_CSUM),
    (F_HOST_USO, F_CSUM),
    (F_HOST_ECN, F_HOST_TSO4 | F_HOST_TSO6),
    (F_GUEST_TSO4, F_GUEST_CSUM),
    (F_GUEST_TSO6, F_GUEST_CSUM),
    (F_GUEST_USO4, F_GUEST_CSUM),
    (F_GUEST_USO6, F_GUEST_CSUM),
    (F_GUEST_ECN, F_GUEST_TSO4 | F_GUEST_TSO6),
    (F_GUEST_HDRLEN, F_CSUM | F_GUEST_CSUM),
];

/// Names of the set bits, `|`-separated (unknown bits as `bitN`).
pub fn feature_names(bits: u64) -> String {
    let mut out: Vec<String> = Vec::new();
    for i in 0..64 {
        let b = 1u64 << i;
        if bits & b != 0 {
            match NAMES.iter().find(|(f, _)| *f == b) {
                Some((_, n)) => out.push((*n).to_string()),
                None => out.push(format!("bit{i}")),
            }
        }
    }
    if out.is_empty() { "none".into() } else { out.join("|") }
}

/// Drops the features whose dependencies are missing (what a driver does
/// before acknowledging a subset of an offer).
pub fn with_dependencies(mut bits: u64) -> u64 {
    loop {
        let before = bits;
        for (f, needs) in DEPENDENCIES {
            if bits & f != 0 && bits & needs == 0 {
                bits &= !f;
            }
        }
        if bits == before {
            return bits;
        }
    }
}

/// Checks the features a client acknowledged against the offer: a subset,
/// the required ones present, every dependency met. Returns them.
///
/// # Errors
/// Why the set is refused, for the REFUSE message.
pub fn negotiate(offered: u64, acked: u64) -> Result<u64, String> {
    let extra = acked & !offered;
    if extra != 0 {
        return Err(format!("features not offered: {}", feature_names(extra)));
    }
    let missing = REQUIRED & !acked;
    if missing != 0 {
        return Err(format!("required features missing: {}", feature_names(missing)));
    }
    for (f, needs) in DEPENDENCIES {
        if acked & f != 0 && acked & needs == 0 {
            return Err(format!("{} requires {}", feature_names(f), feature_names(needs)));
        }
    }
    Ok(acked)
}

const MAGIC: &[u8; 4] = b"SPPV";
/// Protocol version.
pub const VERSION: u16 = 1;
const OFFER: u16 = 1;
const ACK: u16 = 2;
const READY: u16 = 3;
const REFUSE: u16 = 4;

/// A handshake message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// Engine to client: what the engine offers.
    Offer {
        /// Features offered.
        features: u64,
        /// Largest ring accepted.
        max_ring: u16,
        /// Ring size used if the client has no preference.
        default_ring: u16,
    },
    /// Client to engine: what the client accepts.
    Ack {
        /// Features accepted.
        features: u64,
        /// Ring size asked for.
        ring: u16,
    },
    /// Engine to client: the link is set up (descriptors attached).
    Ready {
        /// Features in force.
        features: u64,
        /// Ring size.
        ring: u16,
        /// Bytes of the shared region.
        region_size: u64,
    },
    /// Engine to client: refused.
    Refuse {
        /// Why.
        reason: String,
    },
}

impl Msg {
    /// Encodes into `out`; returns the length.
    pub fn encode(&self, out: &mut [u8; 256]) -> usize {
        out[..4].copy_from_slice(MAGIC);
        out[4..6].copy_from_slice(&VERSION.to_le_bytes());
        let body = &mut out[8..];
        let (kind, len) = match self {
            Msg::Offer { features, max_ring, default_ring } => {
                body[..8].copy_from_slice(&features.to_le_bytes());
                body[8..10].copy_from_slice(&max_ring.to_le_bytes());
                body[10..12].copy_from_slice(&default_ring.to_le_bytes());
                (OFFER, 12)
            }
            Msg::Ack { features, ring } => {
                body[..8].copy_from_slice(&features.to_le_bytes());
                body[8..10].copy_from_slice(&ring.to_le_bytes());
                (ACK, 10)
            }
            Msg::Ready { features, ring, region_size } => {
                body[..8].copy_from_slice(&features.to_le_bytes());
                body[8..10].copy_from_slice(&ring.to_le_bytes());
                body[10..18].copy_from_slice(&region_size.to_le_bytes());
                (READY, 18)
            }
            Msg::Refuse { reason } => {
                let r = reason.as_bytes();
                let n = r.len().min(body.len() - 2);
                body[..2].copy_from_slice(&(n as u16).to_le_bytes());
                body[2..2 + n].copy_from_slice(&r[..n]);
                (REFUSE, 2 + n)
            }
        };
        out[6..8].copy_from_slice(&kind.to_le_bytes());
        8 + len
    }

    /// Decodes a message.
    ///
    /// # Errors
    /// Wrong magic or version, unknown kind, or a short message.
    pub fn decode(b: &[u8]) -> Result<Msg, String> {
        if b.len() < 8 || &b[..4] != MAGIC {
            return Err("not a superpacket pv message (bad magic)".into());
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if version != VERSION {
            return Err(format!("protocol version {version}, this side speaks {VERSION}"));
        }
        let kind = u16::from_le_bytes([b[6], b[7]]);
        let body = &b[8..];
        let need = |n: usize| if body.len() < n { Err(format!("message kind {kind} truncated")) } else { Ok(()) };
        let u64_at = |at: usize| u64::from_le_bytes(body[at..at + 8].try_into().expect("8 bytes"));
        let u16_at = |at: usize| u16::from_le_bytes([body[at], body[at + 1]]);
        match kind {
            OFFER => {
                need(12)?;
                Ok(Msg::Offer { features: u64_at(0), max_ring: u16_at(8), default_ring: u16_at(10) })
            }
            ACK => {
                need(10)?;
                Ok(Msg::Ack { features: u64_at(0), ring: u16_at(8) })
            }
            READY => {
                need(18)?;
                Ok(Msg::Ready { features: u64_at(0), ring: u16_at(8), region_size: u64_at(10) })
            }
            REFUSE => {
                need(2)?;
                let n = (u16_at(0) as usize).min(body.len() - 2);
                Ok(Msg::Refuse { reason: String::from_utf8_lossy(&body[2..2 + n]).into_owned() })
            }
            k => Err(format!("unknown message kind {k}")),
        }
    }
}

/// Most descriptors a message may carry.
pub const MAX_FDS: usize = 8;

/// A connected `SOCK_SEQPACKET` Unix socket.
#[derive(Debug)]
pub struct SeqPacket {
    fd: OwnedFd,
}

fn sockaddr(path: &Path) -> Result<(libc::sockaddr_un, libc::socklen_t), IoError> {
    // SAFETY: sockaddr_un is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.is_empty() || bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(IoError::InvalidName {
            name: path.display().to_string(),
            reason: "a Unix socket path has 1-107 bytes and no NUL",
        });
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Ok((addr, len as libc::socklen_t))
}

fn seqpacket_socket(what: &str) -> Result<OwnedFd, IoError> {
    // SAFETY: socket takes only integers.
    let raw = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(IoError::last_os("socket(AF_UNIX, SOCK_SEQPACKET)", what));
    }
    // SAFETY: `raw` is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

impl SeqPacket {
    /// Connects to the pv socket at `path`; receives time out after `timeout`.
    ///
    /// # Errors
    /// `connect` failing (nobody listening), or the socket calls failing.
    pub fn connect(path: &Path, timeout: Duration) -> Result<SeqPacket, IoError> {
        let what = path.display().to_string();
        let fd = seqpacket_socket(&what)?;
        let (addr, len) = sockaddr(path)?;
        // SAFETY: `addr` is a valid sockaddr_un of `len` bytes that outlives the call.
        if unsafe { libc::connect(fd.as_raw_fd(), (&addr as *const libc::sockaddr_un).cast(), len) } < 0 {
            return Err(IoError::last_os("connect", what));
        }
        let s = SeqPacket { fd };
        s.set_recv_timeout(Some(timeout))?;
        Ok(s)
    }

    /// Sets `SO_RCVTIMEO` (`None`: wait forever).
    ///
    /// # Errors
    /// `setsockopt` failing.
    pub fn set_recv_timeout(&self, timeout: Option<Duration>) -> Result<(), IoError> {
        let t = timeout.unwrap_or_default();
        let tv = libc::timeval { tv_sec: t.as_secs() as libc::time_t, tv_usec: t.subsec_micros() as libc::suseconds_t };
        // SAFETY: `tv` is a valid timeval that outlives the call.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(IoError::last_os("setsockopt(SO_RCVTIMEO)", "pv socket"));
        }
        Ok(())
    }

    /// Switches `O_NONBLOCK`.
    ///
    /// # Errors
    /// `fcntl` failing.
    pub fn set_nonblocking(&self, on: bool) -> Result<(), IoError> {
        use std::os::fd::AsFd;
        super::super::sys::set_nonblocking(self.fd.as_fd(), on, "pv socket")
    }

    /// Sends one message with `fds` attached.
    ///
    /// # Errors
    /// `sendmsg` failing.
    pub fn send(&self, msg: &Msg, fds: &[RawFd]) -> Result<(), IoError> {
        let mut buf = [0u8; 256];
        let n = msg.encode(&mut buf);
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: n };
        let fds = &fds[..fds.len().min(MAX_FDS)];
        // Room for MAX_FDS descriptors, aligned for cmsghdr.
        let mut cbuf = [0u64; 8];
        // SAFETY: msghdr is plain data; all-zero is a valid value.
        let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
        mh.msg_iov = &mut iov;
        mh.msg_iovlen = 1;
        if !fds.is_empty() {
            let data_len = std::mem::size_of_val(fds) as u32;
            // SAFETY: CMSG_SPACE is a pure size computation.
            let space = unsafe { libc::CMSG_SPACE(data_len) } as usize;
            mh.msg_control = cbuf.as_mut_ptr().cast();
            mh.msg_controllen = space;
            // SAFETY: `mh` points at `cbuf` (64 bytes, enough for
            // CMSG_SPACE of 8 descriptors); CMSG_FIRSTHDR returns a pointer
            // inside it, and CMSG_DATA the data area of that header, where
            // `data_len` bytes fit.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(&mh);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(data_len) as usize;
                std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast::<RawFd>(), fds.len());
            }
        }
        // SAFETY: `mh` describes valid buffers (the iovec and control data)
        // that outlive the call.
        let rc = unsafe { libc::sendmsg(self.fd.as_raw_fd(), &mh, libc::MSG_NOSIGNAL) };
        if rc < 0 {
            return Err(IoError::last_os("sendmsg", "pv handshake"));
        }
        Ok(())
    }

    /// Receives one message and the descriptors attached to it (every
    /// received descriptor is owned and closed on drop, whatever the message).
    /// `Ok(None)`: the peer closed the socket. A nonblocking socket with
    /// nothing queued, or a receive timeout, is an error whose
    /// [`IoError::is_would_block`] is true.
    ///
    /// # Errors
    /// `recvmsg` failing, truncated control data, or an undecodable message.
    pub fn recv(&self) -> Result<Option<(Msg, Vec<OwnedFd>)>, IoError> {
        let mut buf = [0u8; 256];
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        let mut cbuf = [0u64; 8];
        // SAFETY: msghdr is plain data; all-zero is a valid value.
        let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
        mh.msg_iov = &mut iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cbuf.as_mut_ptr().cast();
        mh.msg_controllen = std::mem::size_of_val(&cbuf);
        // SAFETY: `mh` describes writable buffers that outlive the call.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut mh, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            return Err(IoError::last_os("recvmsg", "pv handshake"));
        }
        let mut fds = Vec::new();
        // SAFETY: the kernel filled `mh.msg_control` with `msg_controllen`
        // bytes of well-formed cmsg headers inside `cbuf`; CMSG_FIRSTHDR /
        // CMSG_NXTHDR stay inside it, and each SCM_RIGHTS payload holds
        // `(cmsg_len - CMSG_LEN(0)) / 4` descriptors now owned by us.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&mh);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let bytes = (*c).cmsg_len - libc::CMSG_LEN(0) as usize;
                    let p = libc::CMSG_DATA(c).cast::<RawFd>();
                    for i in 0..bytes / std::mem::size_of::<RawFd>() {
                        fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(p.add(i))));
                    }
                }
                c = libc::CMSG_NXTHDR(&mh, c);
            }
        }
        if mh.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(IoError::Unsupported("pv handshake: too many descriptors attached".into()));
        }
        if n == 0 {
            return Ok(None);
        }
        let msg = Msg::decode(&buf[..n as usize]).map_err(IoError::Unsupported)?;
        Ok(Some((msg, fds)))
    }

    /// The descriptor (watched for hang-up by the engine).
    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// True once the peer has closed its end (a zero-length read or a hang-up).
    pub fn peer_closed(&self) -> bool {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: `pfd` is a valid pollfd array of length 1 that lives across the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
        if rc <= 0 {
            return false;
        }
        if pfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return true;
        }
        let mut b = [0u8; 1];
        // SAFETY: a nonblocking peek of at most one byte into a valid buffer.
        let n =
            unsafe { libc::recv(self.fd.as_raw_fd(), b.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        n == 0
    }
}

/// Mode of a pv socket file: owner and group may attach.
pub const SOCKET_MODE: u32 = 0o660;

/// A listening `SOCK_SEQPACKET` socket bound to a path (removed on drop;
/// mode [`SOCKET_MODE`]).
#[derive(Debug)]
pub struct SeqListener {
    fd: OwnedFd,
    path: std::path::PathBuf,
}

impl SeqListener {
    /// Binds and listens at `path` (nonblocking). A stale socket file nobody
    /// listens on is replaced; a live one is an error.
    ///
    /// # Errors
    /// The path is in use or cannot be bound.
    pub fn bind(path: &Path) -> Result<SeqListener, IoError> {
        let what = path.display().to_string();
        let (addr, len) = sockaddr(path)?;
        if path.exists() {
            if SeqPacket::connect(path, Duration::from_millis(100)).is_ok() {
                return Err(IoError::Syscall {
                    call: "bind",
                    what: format!("{what}: another pv endpoint is listening there"),
                    source: std::io::Error::from_raw_os_error(libc::EADDRINUSE),
                });
            }
            std::fs::remove_file(path).map_err(|e| IoError::Syscall {
                call: "unlink",
                what: what.clone(),
                source: e,
            })?;
        }
        let fd = seqpacket_socket(&what)?;
        // SAFETY: `addr` is a valid sockaddr_un of `len` bytes that outlives the call.
        if unsafe { libc::bind(fd.as_raw_fd(), (&addr as *const libc::sockaddr_un).cast(), len) } < 0 {
            return Err(IoError::last_os("bind", what));
        }
        // Attaching lets a process inject frames into the engine: owner
        // and group only, as the stats socket.
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(SOCKET_MODE))
                .map_err(|e| IoError::Syscall { call: "chmod", what: what.clone(), source: e })?;
        }
        // SAFETY: listen on a bound socket we own.
        if unsafe { libc::listen(fd.as_raw_fd(), 8) } < 0 {
            return Err(IoError::last_os("listen", what));
        }
        {
            use std::os::fd::AsFd;
            super::super::sys::set_nonblocking(fd.as_fd(), true, &what)?;
        }
        Ok(SeqListener { fd, path: path.to_path_buf() })
    }

    /// Accepts a pending connection (blocking accepted socket), if any.
    ///
    /// # Errors
    /// `accept4` failing for another reason than "nothing pending".
    pub fn accept(&self) -> Result<Option<SeqPacket>, IoError> {
        // SAFETY: accept4 with null address pointers on a listening socket we own.
        let raw = unsafe {
            libc::accept4(self.fd.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC)
        };
        if raw < 0 {
            let e = IoError::last_os("accept4", self.path.display().to_string());
            return if e.is_would_block() || e.raw_os_error() == Some(libc::ECONNABORTED) { Ok(None) } else { Err(e) };
        }
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        Ok(Some(SeqPacket { fd: unsafe { OwnedFd::from_raw_fd(raw) } }))
    }

    /// The descriptor (readable when a connection is pending).
    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SeqListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(OsStr::from_bytes(self.path.as_os_str().as_bytes()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_table() {
        let all = ALL_FEATURES;
        let base = REQUIRED;
        // (offered, acked, Ok(expected) or error fragment)
        let cases: [(u64, u64, Result<u64, &str>); 8] = [
            (all, base, Ok(base)),
            (all, all, Ok(all)),
            (all, base | F_CSUM | F_HOST_TSO4, Ok(base | F_CSUM | F_HOST_TSO4)),
            (all & !F_HOST_USO, base | F_CSUM | F_HOST_USO, Err("not offered: HOST_USO")),
            (all, F_VERSION_1, Err("required features missing: RING_INDIRECT_DESC")),
            (all, base | F_HOST_TSO4, Err("HOST_TSO4 requires CSUM")),
            (all, base | F_GUEST_CSUM | F_GUEST_ECN, Err("GUEST_ECN requires GUEST_TSO4|GUEST_TSO6")),
            (all, base | F_GUEST_HDRLEN, Err("GUEST_HDRLEN requires CSUM|GUEST_CSUM")),
        ];
        for (offered, acked, want) in cases {
            match (negotiate(offered, acked), want) {
                (Ok(got), Ok(w)) => assert_eq!(got, w),
                (Err(e), Err(frag)) => assert!(e.contains(frag), "{e} should contain {frag}"),
                (got, want) => panic!("{} -> {got:?}, want {want:?}", feature_names(acked)),
            }
        }
        // A driver's subset with dependencies fixed is always accepted.
        for mask in [0u64, F_CSUM, F_GUEST_CSUM, !F_CSUM, !F_GUEST_CSUM, !F_HOST_TSO4] {
            let acked = with_dependencies(all & mask) | REQUIRED;
            assert!(negotiate(all, acked).is_ok(), "{}", feature_names(acked));
        }
    }

    #[test]
    fn messages_round_trip_and_garbage_is_refused() {
        let msgs = [
            Msg::Offer { features: ALL_FEATURES, max_ring: 1024, default_ring: 256 },
            Msg::Ack { features: REQUIRED, ring: 64 },
            Msg::Ready { features: REQUIRED | F_CSUM, ring: 8, region_size: 1 << 22 },
            Msg::Refuse { reason: "port busy".into() },
        ];
        for m in msgs {
            let mut b = [0u8; 256];
            let n = m.encode(&mut b);
            assert_eq!(Msg::decode(&b[..n]).unwrap(), m);
            assert!(Msg::decode(&b[..n.min(9)]).is_err() || matches!(m, Msg::Refuse { .. }));
        }
        assert!(Msg::decode(b"HTTP/1.1 200").unwrap_err().contains("magic"));
        let mut b = [0u8; 256];
        let n = Msg::Ack { features: 0, ring: 2 }.encode(&mut b);
        b[4] = 9;
        assert!(Msg::decode(&b[..n]).unwrap_err().contains("version 9"));
    }

    #[test]
    fn descriptors_cross_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pv.sock");
        let l = SeqListener::bind(&path).unwrap();
        let c = SeqPacket::connect(&path, Duration::from_secs(2)).unwrap();
        let s = l.accept().unwrap().expect("pending connection");
        assert!(SeqListener::bind(&path).is_err(), "a live socket is not replaced");
        let n = super::super::shm::Notifier::new().unwrap();
        s.send(&Msg::Ready { features: 1, ring: 2, region_size: 3 }, &[n.as_raw_fd(), n.as_raw_fd()]).unwrap();
        let (m, fds) = c.recv().unwrap().unwrap();
        assert_eq!(m, Msg::Ready { features: 1, ring: 2, region_size: 3 });
        assert_eq!(fds.len(), 2);
        // The received descriptor is the same eventfd.
        let got = super::super::shm::Notifier::from_fd(fds.into_iter().next().unwrap()).unwrap();
        got.notify();
        assert!(n.take());
        assert!(!s.peer_closed());
        drop(c);
        assert!(s.peer_closed());
        drop(l);
        assert!(!path.exists(), "socket file removed");
    }
}
