//! Network namespace plumbing for tests and tools, via iproute2 (`ip`) and
//! `setns(2)`.
//!
//! - [`NetNs`]: a uniquely named namespace (`<prefix>-<pid>-<n>`), deleted on
//!   drop (also during a panic unwind). [`NetNs::enter_scoped`] runs a
//!   closure on a fresh thread that has `setns`-ed into the namespace; file
//!   descriptors created there (TAPs, AF_PACKET sockets) stay bound to the
//!   namespace and keep working from any thread.
//! - [`VethPair`]: a veth created directly inside its namespaces (the host
//!   never sees it), deleted on drop.
//! - Helpers: link up, addresses, MAC, MTU, `ethtool -K`, sysfs and
//!   `/proc/sys/net` writes inside the namespace.
//! - [`privileges_available`] / [`require_privileges`]: the guard of every
//!   privileged test (`SUPERPACKET_SKIP_PRIVILEGED=1` turns a failure into a
//!   printed skip).
//!
//! Network safety: only namespaces and links created here are touched; no
//! address or route is ever added outside them. Sysfs and sysctl writes go
//! through `ip netns exec`, which remounts `/sys` for the namespace, so only
//! the namespace's own devices are visible.

use super::error::{IoError, Result};
use super::sys::{check_chars, check_ifname};
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// The environment variable that turns a missing-privileges failure into a
/// printed skip.
pub const SKIP_ENV: &str = "SUPERPACKET_SKIP_PRIVILEGED";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Runs a command, capturing its output.
fn output_of(cmd: &mut Command) -> Result<Output> {
    cmd.output().map_err(|source| IoError::CommandSpawn { command: format!("{cmd:?}"), source })
}

/// Turns a non-zero exit into [`IoError::CommandFailed`].
fn checked(cmd: &mut Command) -> Result<Output> {
    let out = output_of(cmd)?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(IoError::CommandFailed {
            command: format!("{cmd:?}"),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// A network namespace created by this process, deleted on drop.
#[derive(Debug)]
pub struct NetNs {
    name: String,
    /// `/run/netns/NAME`, the handle for `setns`.
    handle: File,
    /// Created here (deleted on drop), or attached to ([`NetNs::attach`]: left alone).
    owned: bool,
}

impl NetNs {
    /// Creates a namespace named `<prefix>-<pid>-<n>` with `ip netns add` and
    /// brings its loopback up. Namespaces of the same prefix left behind by
    /// dead processes are removed first (once per prefix and process).
    ///
    /// # Errors
    /// Invalid prefix (use `[A-Za-z0-9_.-]`, at most 32 bytes), `ip` failing
    /// (e.g. without root), or the handle not opening.
    pub fn create(prefix: &str) -> Result<NetNs> {
        check_chars(prefix)?;
        if prefix.len() > 32 {
            return Err(IoError::InvalidName { name: prefix.into(), reason: "namespace prefix longer than 32 bytes" });
        }
        cleanup_stale_once(prefix);
        let name = format!("{prefix}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        checked(Command::new("ip").args(["netns", "add", &name]))?;
        let path = format!("/run/netns/{name}");
        let handle = match File::open(&path) {
            Ok(f) => f,
            Err(source) => {
                let _ = output_of(Command::new("ip").args(["netns", "del", &name]));
                return Err(IoError::Syscall { call: "open", what: path, source });
            }
        };
        let ns = NetNs { name, handle, owned: true };
        ns.link_up("lo")?;
        Ok(ns)
    }

    /// Attaches to an existing named namespace (`/run/netns/NAME`, as `ip
    /// netns add` creates them) without owning it: dropping the handle
    /// leaves the namespace in place. For configuration that names a
    /// namespace someone else manages (topology files).
    ///
    /// # Errors
    /// An invalid name, or no such namespace.
    pub fn attach(name: &str) -> Result<NetNs> {
        check_chars(name)?;
        if name.is_empty() || name.len() > 255 {
            return Err(IoError::InvalidName { name: name.into(), reason: "namespace name empty or too long" });
        }
        let path = format!("/run/netns/{name}");
        let handle = File::open(&path).map_err(|source| IoError::Syscall { call: "open", what: path, source })?;
        Ok(NetNs { name: name.to_string(), handle, owned: false })
    }

    /// True if this handle created the namespace and deletes it on drop.
    pub fn is_owned(&self) -> bool {
        self.owned
    }

    /// The namespace name (as `ip netns list` shows it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip netns exec NAME args...`; a non-zero exit is an error.
    ///
    /// # Errors
    /// The command does not start or exits unsuccessfully.
    pub fn run(&self, args: &[&str]) -> Result<()> {
        checked(Command::new("ip").args(["netns", "exec", &self.name]).args(args)).map(|_| ())
    }

    /// Runs `ip netns exec NAME args...` and returns its output whatever the
    /// exit status.
    ///
    /// # Errors
    /// The command does not start.
    pub fn exec(&self, args: &[&str]) -> Result<Output> {
        output_of(Command::new("ip").args(["netns", "exec", &self.name]).args(args))
    }

    /// Runs `ip -n NAME args...` (iproute2 inside the namespace).
    ///
    /// # Errors
    /// The command does not start or exits unsuccessfully.
    pub fn ip(&self, args: &[&str]) -> Result<()> {
        checked(Command::new("ip").args(["-n", &self.name]).args(args)).map(|_| ())
    }

    /// Runs `f` on a new thread that has entered this namespace with
    /// `setns(CLONE_NEWNET)`, and returns its result. The calling thread never
    /// changes namespace, so nothing has to be restored, even on error or
    /// panic (a panic in `f` is resumed on the caller).
    ///
    /// # Errors
    /// `setns` fails (needs CAP_SYS_ADMIN).
    pub fn enter_scoped<R: Send>(&self, f: impl FnOnce() -> R + Send) -> Result<R> {
        let fd = self.handle.as_fd();
        let name = self.name.as_str();
        std::thread::scope(|s| {
            let handle = s.spawn(move || -> Result<R> {
                // SAFETY: `fd` is a valid namespace file descriptor borrowed from `self.handle`,
                // which outlives this scoped thread; setns only changes this thread's namespace.
                if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(IoError::last_os("setns(CLONE_NEWNET)", name));
                }
                Ok(f())
            });
            match handle.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// `ip link set DEV up`.
    ///
    /// # Errors
    /// Bad name or `ip` failure.
    pub fn link_up(&self, dev: &str) -> Result<()> {
        check_ifname(dev)?;
        self.ip(&["link", "set", "dev", dev, "up"])
    }

    /// `ip addr add CIDR dev DEV` (e.g. `"10.77.0.1/24"`, `"fd00:77::1/64"`).
    ///
    /// # Errors
    /// Bad name or `ip` failure.
    pub fn add_addr(&self, dev: &str, cidr: &str) -> Result<()> {
        check_ifname(dev)?;
        self.ip(&["addr", "add", cidr, "dev", dev])
    }

    /// `ip link set DEV address MAC`.
    ///
    /// # Errors
    /// Bad name or `ip` failure.
    pub fn set_mac(&self, dev: &str, mac: [u8; 6]) -> Result<()> {
        check_ifname(dev)?;
        let m = format_mac(mac);
        self.ip(&["link", "set", "dev", dev, "address", &m])
    }

    /// `ip link set DEV mtu MTU`.
    ///
    /// # Errors
    /// Bad name or `ip` failure.
    pub fn set_mtu(&self, dev: &str, mtu: u32) -> Result<()> {
        check_ifname(dev)?;
        self.ip(&["link", "set", "dev", dev, "mtu", &mtu.to_string()])
    }

    /// `ip link set DEV promisc on|off`.
    ///
    /// # Errors
    /// Bad name or `ip` failure.
    pub fn set_promisc(&self, dev: &str, on: bool) -> Result<()> {
        check_ifname(dev)?;
        self.ip(&["link", "set", "dev", dev, "promisc", if on { "on" } else { "off" }])
    }

    /// `ethtool -K DEV feature value ...` inside the namespace, e.g.
    /// `&[("tx", "off"), ("tso", "off"), ("gso", "off")]`.
    ///
    /// # Errors
    /// Bad names, `ethtool` missing or refusing a feature.
    pub fn set_offloads(&self, dev: &str, features: &[(&str, &str)]) -> Result<()> {
        check_ifname(dev)?;
        let mut args = vec!["ethtool", "-K", dev];
        for (feature, value) in features {
            check_chars(feature)?;
            check_chars(value)?;
            args.push(feature);
            args.push(value);
        }
        self.run(&args)
    }

    /// `ethtool -k DEV` inside the namespace (the feature list as text).
    ///
    /// # Errors
    /// Bad name, `ethtool` missing or failing.
    pub fn offloads(&self, dev: &str) -> Result<String> {
        check_ifname(dev)?;
        let out = checked(Command::new("ip").args(["netns", "exec", &self.name, "ethtool", "-k", dev]))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Writes `value` to `/sys/class/net/DEV/ATTR` as seen from inside the
    /// namespace (e.g. `gro_flush_timeout`, `napi_defer_hard_irqs`).
    ///
    /// # Errors
    /// Bad names, or the write failing (unknown attribute, invalid value).
    pub fn write_sysfs(&self, dev: &str, attr: &str, value: &str) -> Result<()> {
        check_ifname(dev)?;
        check_chars(attr)?;
        self.write_file(&format!("/sys/class/net/{dev}/{attr}"), value)
    }

    /// Reads `/sys/class/net/DEV/ATTR` inside the namespace, trimmed.
    ///
    /// # Errors
    /// Bad names or the read failing.
    pub fn read_sysfs(&self, dev: &str, attr: &str) -> Result<String> {
        check_ifname(dev)?;
        check_chars(attr)?;
        let path = format!("/sys/class/net/{dev}/{attr}");
        let out = checked(Command::new("ip").args(["netns", "exec", &self.name, "cat", &path]))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Sets a network sysctl of this namespace: `key` in dotted form
    /// (`net.ipv6.conf.all.disable_ipv6`), written to `/proc/sys/...`.
    ///
    /// # Errors
    /// The key is not under `net.`, has bad characters, or the write fails.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        check_chars(key)?;
        if !key.starts_with("net.") {
            return Err(IoError::InvalidName { name: key.into(), reason: "only net.* sysctls are per namespace" });
        }
        self.write_file(&format!("/proc/sys/{}", key.replace('.', "/")), value)
    }

    /// Disables IPv6 on every current and future link of the namespace, so
    /// that no router solicitation, DAD or MLD frame disturbs a capture.
    ///
    /// # Errors
    /// The sysctl writes fail.
    pub fn disable_ipv6(&self) -> Result<()> {
        self.sysctl("net.ipv6.conf.all.disable_ipv6", "1")?;
        self.sysctl("net.ipv6.conf.default.disable_ipv6", "1")
    }

    /// `sh -c 'printf "%s\n" "$1" > "$2"'` inside the namespace (value and path
    /// passed as arguments, never interpolated into the script).
    fn write_file(&self, path: &str, value: &str) -> Result<()> {
        self.run(&["sh", "-c", "printf '%s\\n' \"$1\" > \"$2\"", "sh", value, path])
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        match output_of(Command::new("ip").args(["netns", "del", &self.name])) {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "superpacket: `ip netns del {}` failed: {}",
                self.name,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => eprintln!("superpacket: cannot delete namespace {}: {e}", self.name),
        }
    }
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: [u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5])
}

/// Same as [`NetNs::set_offloads`], as a free function.
///
/// # Errors
/// See [`NetNs::set_offloads`].
pub fn set_offloads(ns: &NetNs, dev: &str, features: &[(&str, &str)]) -> Result<()> {
    ns.set_offloads(dev, features)
}

/// A veth pair with one end in each namespace (they may be the same
/// namespace), deleted on drop.
#[derive(Debug)]
pub struct VethPair {
    ns_a: String,
    name_a: String,
    ns_b: String,
    name_b: String,
}

impl VethPair {
    /// `ip -n A link add NAME_A type veth peer name NAME_B netns B`: both
    /// ends are created directly in their namespaces, down and without
    /// addresses.
    ///
    /// # Errors
    /// Bad names or `ip` failure.
    pub fn create(ns_a: &NetNs, name_a: &str, ns_b: &NetNs, name_b: &str) -> Result<VethPair> {
        check_ifname(name_a)?;
        check_ifname(name_b)?;
        ns_a.ip(&["link", "add", name_a, "type", "veth", "peer", "name", name_b, "netns", ns_b.name()])?;
        Ok(VethPair {
            ns_a: ns_a.name().to_string(),
            name_a: name_a.to_string(),
            ns_b: ns_b.name().to_string(),
            name_b: name_b.to_string(),
        })
    }

    /// The end in namespace A.
    pub fn name_a(&self) -> &str {
        &self.name_a
    }

    /// The end in namespace B.
    pub fn name_b(&self) -> &str {
        &self.name_b
    }

    /// The names of the namespaces holding end A and end B.
    pub fn namespaces(&self) -> (&str, &str) {
        (&self.ns_a, &self.ns_b)
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting one end deletes both. If the namespace is already gone, so is the veth.
        if std::path::Path::new(&format!("/run/netns/{}", self.ns_a)).exists() {
            let _ = output_of(Command::new("ip").args(["-n", &self.ns_a, "link", "del", &self.name_a]));
        }
    }
}

/// Deletes namespaces named `<prefix>-<pid>-<n>` whose process no longer
/// exists (left behind by a killed test run). Returns the names deleted.
/// Namespaces of live processes and names of any other shape are never
/// touched.
pub fn cleanup_stale(prefix: &str) -> Vec<String> {
    let mut deleted = Vec::new();
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return deleted;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) else {
            continue;
        };
        let mut parts = rest.split('-');
        let (Some(pid), Some(n), None) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), n.parse::<u32>()) else {
            continue;
        };
        if pid == std::process::id() || std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if let Ok(out) = output_of(Command::new("ip").args(["netns", "del", &name]))
            && out.status.success()
        {
            deleted.push(name);
        }
    }
    deleted
}

fn cleanup_stale_once(prefix: &str) {
    static DONE: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if !done.iter().any(|p| p == prefix) {
        done.push(prefix.to_string());
        let removed = cleanup_stale(prefix);
        if !removed.is_empty() {
            eprintln!("superpacket: removed stale namespaces {removed:?}");
        }
    }
}

/// Whether this process can run the privileged tests: root or
/// CAP_NET_ADMIN + CAP_SYS_ADMIN (namespaces, `setns`), `/dev/net/tun`
/// openable, and the `ip` and `ethtool` commands present. `Err` explains
/// what is missing.
///
/// # Errors
/// The reason, as text.
pub fn privileges_available() -> std::result::Result<(), String> {
    static CACHE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    CACHE.get_or_init(check_privileges).clone()
}

fn check_privileges() -> std::result::Result<(), String> {
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_SYS_ADMIN: u32 = 21;
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| format!("/proc/self/status: {e}"))?;
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .ok_or("no CapEff line in /proc/self/status")?;
    for (bit, name) in [(CAP_NET_ADMIN, "CAP_NET_ADMIN"), (CAP_SYS_ADMIN, "CAP_SYS_ADMIN")] {
        if cap_eff & (1 << bit) == 0 {
            return Err(format!("{name} missing (run as root)"));
        }
    }
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/net/tun") {
        return Err(format!("cannot open /dev/net/tun: {e}"));
    }
    for tool in [["ip", "-V"], ["ethtool", "--version"]] {
        match Command::new(tool[0]).arg(tool[1]).output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => return Err(format!("`{} {}` failed: {}", tool[0], tool[1], out.status)),
            Err(e) => return Err(format!("`{}` not available ({e}); scripts/test.sh installs it", tool[0])),
        }
    }
    if !std::path::Path::new("/proc/self/ns/net").exists() {
        return Err("no network namespace support (/proc/self/ns/net missing)".into());
    }
    Ok(())
}

/// The guard at the top of every privileged test: `true` when the test can
/// run. Without privileges it panics with the reason, unless
/// `SUPERPACKET_SKIP_PRIVILEGED=1`, in which case it prints a skip note and
/// returns `false`.
///
/// # Panics
/// When privileges are missing and the skip variable is not set.
pub fn require_privileges() -> bool {
    match privileges_available() {
        Ok(()) => true,
        Err(why) if std::env::var(SKIP_ENV).is_ok_and(|v| v == "1") => {
            eprintln!("skipped: privileged test needs root ({why}); {SKIP_ENV}=1");
            false
        }
        Err(why) => panic!(
            "privileged test cannot run: {why}. Run the tests as root (CI does), or set {SKIP_ENV}=1 to skip them"
        ),
    }
}
