//! The control side of a running engine: a Unix socket that answers
//! `superpacket stats`, and optionally Prometheus text format over HTTP on
//! a local TCP port.
//!
//! Protocol of the Unix socket: the client sends one line, `text`, `json`
//! or `prometheus` (an empty line or none means `text`), and reads the
//! answer until the server closes the connection.

use super::EngineSnapshot;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);

/// The answer formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsFormat {
    /// The table of [`EngineSnapshot::render_text`].
    Text,
    /// JSON of [`EngineSnapshot`].
    Json,
    /// [`EngineSnapshot::render_prometheus`].
    Prometheus,
}

impl StatsFormat {
    /// The request line for this format.
    pub fn request(self) -> &'static str {
        match self {
            StatsFormat::Text => "text",
            StatsFormat::Json => "json",
            StatsFormat::Prometheus => "prometheus",
        }
    }

    fn parse(line: &str) -> Option<StatsFormat> {
        match line.trim() {
            "" | "text" => Some(StatsFormat::Text),
            "json" => Some(StatsFormat::Json),
            "prometheus" => Some(StatsFormat::Prometheus),
            _ => None,
        }
    }
}

/// Renders `snap` in `format`.
pub fn render(snap: &EngineSnapshot, format: StatsFormat) -> String {
    match format {
        StatsFormat::Text => snap.render_text(),
        StatsFormat::Json => serde_json::to_string_pretty(snap).unwrap_or_default() + "\n",
        StatsFormat::Prometheus => snap.render_prometheus(),
    }
}

/// The directory stats sockets go to by default: `/run/superpacket` for
/// root, else `superpacket-<uid>` in the temporary directory. Only a choice:
/// [`StatsServer::bind`] creates it, `superpacket stats` only looks in it.
pub fn default_socket_dir() -> PathBuf {
    // SAFETY: getuid has no failure mode and touches no memory.
    let uid = unsafe { libc::getuid() };
    if uid == 0 {
        return PathBuf::from("/run/superpacket");
    }
    std::env::temp_dir().join(format!("superpacket-{uid}"))
}

/// Mode of the stats socket: owner and group may connect, others may not.
pub const SOCKET_MODE: u32 = 0o660;

/// The Unix socket (and optional Prometheus listener) of a running engine.
/// The socket file is removed on drop.
#[derive(Debug)]
pub struct StatsServer {
    unix: UnixListener,
    path: PathBuf,
    http: Option<TcpListener>,
}

impl StatsServer {
    /// Listens on `path` (a stale socket file left by a dead engine is
    /// replaced; a live one is an error) and, if given, on `prometheus`.
    ///
    /// # Errors
    /// Another engine answers on `path`, or binding fails.
    pub fn bind(path: &Path, prometheus: Option<SocketAddr>) -> std::io::Result<StatsServer> {
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)?;
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("{}: another engine is running there (use --stats-socket)", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let unix = UnixListener::bind(path)?;
        // Connecting needs write permission: owner and group only, never the world.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(SOCKET_MODE))?;
        unix.set_nonblocking(true)?;
        let http = match prometheus {
            Some(addr) => {
                let l = TcpListener::bind(addr)?;
                l.set_nonblocking(true)?;
                Some(l)
            }
            None => None,
        };
        Ok(StatsServer { unix, path: path.to_path_buf(), http })
    }

    /// Gives the socket (and, with `own_dir`, its directory) to `uid`/`gid`,
    /// for an engine about to become that user: the user can then query it
    /// and remove it at exit.
    ///
    /// # Errors
    /// `chown` failing.
    pub fn hand_to(&self, uid: u32, gid: u32, own_dir: bool) -> std::io::Result<()> {
        std::os::unix::fs::chown(&self.path, Some(uid), Some(gid))?;
        if own_dir && let Some(dir) = self.path.parent() {
            std::os::unix::fs::chown(dir, Some(uid), Some(gid))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750))?;
        }
        Ok(())
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The Prometheus listener's address.
    pub fn prometheus_addr(&self) -> Option<SocketAddr> {
        self.http.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Descriptors to wait on (Unix socket, then the TCP listener).
    pub fn fds(&self) -> Vec<RawFd> {
        let mut v = vec![self.unix.as_raw_fd()];
        if let Some(h) = &self.http {
            v.push(h.as_raw_fd());
        }
        v
    }

    /// Answers every waiting client with `snapshot()`. A misbehaving client
    /// (silent, unknown request) gets an error line or is dropped after
    /// half a second; it never stops the engine.
    pub fn serve_pending(&self, snapshot: &dyn Fn() -> EngineSnapshot) {
        while let Ok((stream, _)) = self.unix.accept() {
            let _ = serve_unix(stream, snapshot);
        }
        if let Some(h) = &self.http {
            while let Ok((stream, _)) = h.accept() {
                let _ = serve_http(stream, snapshot);
            }
        }
    }
}

impl Drop for StatsServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve_unix(stream: UnixStream, snapshot: &dyn Fn() -> EngineSnapshot) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let mut line = String::new();
    let mut reader = BufReader::new(&stream);
    let _ = reader.read_line(&mut line);
    let mut out = &stream;
    match StatsFormat::parse(&line) {
        Some(f) => out.write_all(render(&snapshot(), f).as_bytes()),
        None => {
            out.write_all(format!("error: unknown request {:?} (text, json, prometheus)\n", line.trim()).as_bytes())
        }
    }
}

fn serve_http(mut stream: std::net::TcpStream, snapshot: &dyn Fn() -> EngineSnapshot) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let mut req = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    let first = String::from_utf8_lossy(&req);
    let target = first.split_whitespace().nth(1).unwrap_or("");
    let (status, body) = if first.starts_with("GET ") && (target == "/metrics" || target == "/") {
        ("200 OK", snapshot().render_prometheus())
    } else {
        ("404 Not Found", "only GET /metrics\n".to_string())
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())
}

/// Asks the engine listening on `path` for its counters in `format`.
///
/// # Errors
/// No engine there, or the connection failing.
pub fn query(path: &Path, format: StatsFormat) -> std::io::Result<String> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(format!("{}\n", format.request()).as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}
