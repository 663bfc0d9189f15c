//! Network namespace plumbing for the engine, the lab, tests and tools:
//! namespaces made and removed as `ip netns add/del` does (a bind mount of a
//! namespace on `/run/netns/NAME`), entered with `setns(2)`, and configured
//! through rtnetlink ([`super::netlink`]) and the `SIOCETHTOOL` ioctl
//! ([`super::ethtool`]). Nothing here starts a process.
//!
//! - [`NetNs`]: a uniquely named namespace (`<prefix>-<pid>-<n>`), deleted on
//!   drop (also during a panic unwind). [`NetNs::enter_scoped`] runs a
//!   closure on a fresh thread that has `setns`-ed into the namespace; file
//!   descriptors created there (TAPs, AF_PACKET sockets) stay bound to the
//!   namespace and keep working from any thread.
//! - [`VethPair`]: a veth created directly inside its namespaces (the host
//!   never sees it), deleted on drop.
//! - Helpers: link up, addresses, MAC, MTU, promiscuity, offload features,
//!   sysfs and `/proc/sys/net` reads and writes inside the namespace.
//! - [`privileges_available`] / [`require_privileges`]: the guard of every
//!   privileged test (`SUPERPACKET_SKIP_PRIVILEGED=1` turns a failure into a
//!   printed skip).
//!
//! Network safety: only namespaces and links created here are touched; no
//! address or route is ever added outside them. Sysfs is read and written
//! from a thread that has entered the namespace and mounted a sysfs of its
//! own in a private mount namespace (as `ip netns exec` does), so only the
//! namespace's own devices are visible.

use super::error::{IoError, Result};
use super::ethtool::{self, Features};
use super::netlink::{LinkState, Netlink, parse_cidr};
use super::sys::{check_chars, check_ifname};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// The environment variable that turns a missing-privileges failure into a
/// printed skip.
pub const SKIP_ENV: &str = "SUPERPACKET_SKIP_PRIVILEGED";

static COUNTER: AtomicU32 = AtomicU32::new(0);

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
    /// Creates a namespace named `<prefix>-<pid>-<n>` (as `ip netns add`
    /// does, see [`create_named`]) and brings its loopback up. Namespaces of the same prefix left behind by
    /// dead processes are removed first (once per prefix and process).
    ///
    /// # Errors
    /// Invalid prefix (use `[A-Za-z0-9_.-]`, at most 32 bytes), the
    /// namespace not being created (e.g. without root), or the handle not
    /// opening.
    pub fn create(prefix: &str) -> Result<NetNs> {
        check_chars(prefix)?;
        if prefix.len() > 32 {
            return Err(IoError::InvalidName { name: prefix.into(), reason: "namespace prefix longer than 32 bytes" });
        }
        cleanup_stale_once(prefix);
        let name = format!("{prefix}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        create_named(&name)?;
        let path = format!("{NETNS_RUN_DIR}/{name}");
        let handle = match File::open(&path) {
            Ok(f) => f,
            Err(source) => {
                let _ = delete_named(&name);
                return Err(IoError::Syscall { call: "open", what: path, source });
            }
        };
        // Dropped (and deleted) if bringing the loopback up fails.
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

    /// The namespace's file descriptor (`/run/netns/NAME`), e.g. for
    /// [`Netlink::set_netns`] or [`Netlink::add_veth`].
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.handle.as_fd()
    }

    /// An rtnetlink socket bound to this namespace (usable from any thread).
    ///
    /// # Errors
    /// `setns` or the socket failing.
    pub fn netlink(&self) -> Result<Netlink> {
        self.enter_scoped(Netlink::open)?
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

    /// Sets link `dev` up (`ip link set DEV up`), through netlink.
    ///
    /// # Errors
    /// Bad name, no such link, or the kernel refusing.
    pub fn link_up(&self, dev: &str) -> Result<()> {
        check_ifname(dev)?;
        self.netlink()?.set_up(dev, true)
    }

    /// Sets link `dev` down.
    ///
    /// # Errors
    /// Bad name, no such link, or the kernel refusing.
    pub fn link_down(&self, dev: &str) -> Result<()> {
        check_ifname(dev)?;
        self.netlink()?.set_up(dev, false)
    }

    /// Adds an address: `cidr` as `ip addr add CIDR dev DEV` takes it
    /// (`"10.77.0.1/24"`, `"fd00:77::1/64"`), through netlink.
    ///
    /// # Errors
    /// Bad name or address, or the kernel refusing.
    pub fn add_addr(&self, dev: &str, cidr: &str) -> Result<()> {
        check_ifname(dev)?;
        let (addr, prefix) = parse_cidr(cidr)?;
        self.netlink()?.add_address(dev, addr, prefix)
    }

    /// [`NetNs::add_addr`] without IPv6 duplicate address detection (`ip
    /// addr add CIDR dev DEV nodad`): the address is usable at once.
    ///
    /// # Errors
    /// Bad name or address, or the kernel refusing.
    pub fn add_addr_nodad(&self, dev: &str, cidr: &str) -> Result<()> {
        check_ifname(dev)?;
        let (addr, prefix) = parse_cidr(cidr)?;
        self.netlink()?.add_address_with(dev, addr, prefix, true)
    }

    /// Adds a route, as `ip route add DEST [via GW] [dev DEV]` takes it:
    /// `dest` is a CIDR or `default` (of the gateway's family; IPv4 without
    /// one), through netlink.
    ///
    /// # Errors
    /// Bad arguments, no such link, or the kernel refusing.
    pub fn add_route(&self, dest: &str, via: Option<&str>, dev: Option<&str>) -> Result<()> {
        let (dest, prefix, via) = route_args(dest, via, dev)?;
        self.netlink()?.add_route(dest, prefix, via, dev)
    }

    /// Deletes the route [`NetNs::add_route`] with the same arguments added.
    ///
    /// # Errors
    /// Bad arguments, no such route (`ESRCH`), or the kernel refusing.
    pub fn del_route(&self, dest: &str, via: Option<&str>, dev: Option<&str>) -> Result<()> {
        let (dest, prefix, via) = route_args(dest, via, dev)?;
        self.netlink()?.del_route(dest, prefix, via, dev)
    }

    /// The link-layer address the namespace has for neighbour `ip`, if any.
    ///
    /// # Errors
    /// The netlink dump failing.
    pub fn neighbour_mac(&self, ip: std::net::IpAddr) -> Result<Option<[u8; 6]>> {
        self.netlink()?.neighbour_mac(ip)
    }

    /// Creates a persistent TAP `name` with a virtio-net header (what `ip
    /// tuntap add dev NAME mode tap vnet_hdr` makes), down and without
    /// addresses; it stays until deleted ([`Netlink::del_link`]) or the
    /// namespace goes.
    ///
    /// # Errors
    /// Bad name, the name in use by another kind of device, or the ioctls failing.
    #[cfg(feature = "tap")]
    pub fn create_persistent_tap(&self, name: &str) -> Result<()> {
        self.create_persistent_tap_with(&super::tap::TapConfig::named(name))
    }

    /// [`NetNs::create_persistent_tap`] with the flags of `cfg` (e.g.
    /// `multi_queue`: `ip tuntap add ... multi_queue`).
    ///
    /// # Errors
    /// As [`NetNs::create_persistent_tap`].
    #[cfg(feature = "tap")]
    pub fn create_persistent_tap_with(&self, cfg: &super::tap::TapConfig) -> Result<()> {
        let tap = super::tap::TapDevice::open_in(self, cfg)?;
        tap.set_persist(true)
    }

    /// Whether link `dev` exists in the namespace.
    ///
    /// # Errors
    /// Bad name, or the netlink request failing otherwise.
    pub fn link_exists(&self, dev: &str) -> Result<bool> {
        self.netlink()?.link_exists(dev)
    }

    /// What the kernel says of link `dev`: kind, up, running, MTU, master.
    ///
    /// # Errors
    /// Bad name, or no such link.
    pub fn link_state(&self, dev: &str) -> Result<LinkState> {
        self.netlink()?.link_state(dev)?.ok_or_else(|| IoError::Syscall {
            call: "RTM_GETLINK",
            what: format!("link {dev} in netns {}", self.name),
            source: std::io::Error::from_raw_os_error(libc::ENODEV),
        })
    }

    /// Deletes link `dev` (a veth with its peer; a persistent TAP or TUN).
    ///
    /// # Errors
    /// Bad name, no such link, or the kernel refusing.
    pub fn del_link(&self, dev: &str) -> Result<()> {
        check_ifname(dev)?;
        self.netlink()?.del_link(dev)
    }

    /// Creates a veth pair `name` <-> `peer` inside this namespace, both ends
    /// down, with MTU `mtu` when given. Not deleted on drop (see
    /// [`VethPair`] for that); it goes with the namespace.
    ///
    /// # Errors
    /// Bad names, a name in use, or the kernel refusing.
    pub fn add_veth(&self, name: &str, peer: &str, mtu: Option<u32>) -> Result<()> {
        self.netlink()?.add_veth_with(name, peer, None, mtu)
    }

    /// Adds a permanent neighbour entry (`ip neigh add IP lladdr MAC dev
    /// DEV nud permanent`).
    ///
    /// # Errors
    /// Bad name or address, an existing entry, or the kernel refusing.
    pub fn add_neighbour(&self, dev: &str, ip: &str, mac: [u8; 6]) -> Result<()> {
        self.netlink()?.add_neighbour(dev, parse_ip(ip)?, mac)
    }

    /// [`NetNs::add_neighbour`], replacing an entry for `ip` if there is one.
    ///
    /// # Errors
    /// Bad name or address, or the kernel refusing.
    pub fn replace_neighbour(&self, dev: &str, ip: &str, mac: [u8; 6]) -> Result<()> {
        self.netlink()?.replace_neighbour(dev, parse_ip(ip)?, mac)
    }

    /// Sets the MAC address of `dev`, through netlink.
    ///
    /// # Errors
    /// Bad name or the kernel refusing.
    pub fn set_mac(&self, dev: &str, mac: [u8; 6]) -> Result<()> {
        check_ifname(dev)?;
        self.netlink()?.set_mac(dev, mac)
    }

    /// Sets the MTU of `dev`, through netlink.
    ///
    /// # Errors
    /// Bad name or the kernel refusing.
    pub fn set_mtu(&self, dev: &str, mtu: u32) -> Result<()> {
        check_ifname(dev)?;
        self.netlink()?.set_mtu(dev, mtu)
    }

    /// Turns promiscuous mode of `dev` on or off, through netlink.
    ///
    /// # Errors
    /// Bad name or the kernel refusing.
    pub fn set_promisc(&self, dev: &str, on: bool) -> Result<()> {
        check_ifname(dev)?;
        self.netlink()?.set_promisc(dev, on)
    }

    /// Sets offload features of `dev` as `ethtool -K DEV feature value ...`
    /// does (aliases such as `tso` included), e.g.
    /// `&[("tx", "off"), ("tso", "off"), ("gso", "off")]`, through the
    /// `SIOCETHTOOL` ioctl ([`ethtool::set`]).
    ///
    /// # Errors
    /// Bad names, an unknown feature, or the device refusing a feature.
    pub fn set_offloads(&self, dev: &str, features: &[(&str, &str)]) -> Result<()> {
        check_ifname(dev)?;
        let features: Vec<(String, String)> = features.iter().map(|(f, v)| (f.to_string(), v.to_string())).collect();
        let dev = dev.to_string();
        self.enter_scoped(move || {
            let pairs: Vec<(&str, &str)> = features.iter().map(|(f, v)| (f.as_str(), v.as_str())).collect();
            ethtool::set(&dev, &pairs)
        })?
    }

    /// The offload features of `dev` (`SIOCETHTOOL`).
    ///
    /// # Errors
    /// Bad name, no such device, or the ioctl failing.
    pub fn features(&self, dev: &str) -> Result<Features> {
        check_ifname(dev)?;
        self.enter_scoped(|| Features::read(dev))?
    }

    /// The offload features of `dev` as the text `ethtool -k DEV` prints
    /// ([`Features::to_ethtool_text`]).
    ///
    /// # Errors
    /// Bad name, no such device, or the ioctl failing.
    pub fn offloads(&self, dev: &str) -> Result<String> {
        Ok(self.features(dev)?.to_ethtool_text())
    }

    /// Writes `value` to `/sys/class/net/DEV/ATTR` as seen from inside the
    /// namespace (e.g. `gro_flush_timeout`, `napi_defer_hard_irqs`).
    ///
    /// # Errors
    /// Bad names, or the write failing (unknown attribute, invalid value).
    pub fn write_sysfs(&self, dev: &str, attr: &str, value: &str) -> Result<()> {
        check_ifname(dev)?;
        check_chars(attr)?;
        let path = format!("/sys/class/net/{dev}/{attr}");
        self.enter_scoped(|| {
            mount_own_sysfs()?;
            std::fs::write(&path, format!("{value}\n")).map_err(|source| IoError::Syscall {
                call: "write",
                what: format!("{path} in netns {}", self.name),
                source,
            })
        })?
    }

    /// Reads `/sys/class/net/DEV/ATTR` inside the namespace, trimmed.
    ///
    /// # Errors
    /// Bad names or the read failing.
    pub fn read_sysfs(&self, dev: &str, attr: &str) -> Result<String> {
        check_ifname(dev)?;
        check_chars(attr)?;
        self.read_sysfs_path(format!("/sys/class/net/{dev}/{attr}"))
    }

    /// A counter of `dev` from `/sys/class/net/DEV/statistics/` (`rx_packets`,
    /// `tx_dropped`, ...), read inside the namespace.
    ///
    /// # Errors
    /// Bad names, no such device or counter, or a value that is not a number.
    pub fn link_statistic(&self, dev: &str, stat: &str) -> Result<u64> {
        check_ifname(dev)?;
        check_chars(stat)?;
        let path = format!("/sys/class/net/{dev}/statistics/{stat}");
        let text = self.read_sysfs_path(path.clone())?;
        text.parse().map_err(|_| IoError::Syscall {
            call: "read",
            what: format!("{path} in netns {}", self.name),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not a number: {text:?}")),
        })
    }

    fn read_sysfs_path(&self, path: String) -> Result<String> {
        self.enter_scoped(|| {
            mount_own_sysfs()?;
            std::fs::read_to_string(&path).map(|s| s.trim().to_string()).map_err(|source| IoError::Syscall {
                call: "read",
                what: format!("{path} in netns {}", self.name),
                source,
            })
        })?
    }

    /// Sets a network sysctl of this namespace: `key` in dotted form
    /// (`net.ipv6.conf.all.disable_ipv6`), written to `/proc/sys/...` from a
    /// thread inside the namespace (`/proc/sys/net` follows the writer's
    /// namespace).
    ///
    /// # Errors
    /// The key is not under `net.`, has bad characters, or the write fails.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        check_chars(key)?;
        if !key.starts_with("net.") {
            return Err(IoError::InvalidName { name: key.into(), reason: "only net.* sysctls are per namespace" });
        }
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        self.enter_scoped(|| {
            std::fs::write(&path, format!("{value}\n")).map_err(|source| IoError::Syscall {
                call: "write",
                what: format!("{path} in netns {}", self.name),
                source,
            })
        })?
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
}

/// `ip route` arguments as netlink values.
fn route_args(
    dest: &str,
    via: Option<&str>,
    dev: Option<&str>,
) -> Result<(std::net::IpAddr, u8, Option<std::net::IpAddr>)> {
    if let Some(d) = dev {
        check_ifname(d)?;
    }
    let via = match via {
        Some(v) => Some(
            v.parse::<std::net::IpAddr>()
                .map_err(|_| IoError::InvalidName { name: v.into(), reason: "gateway is not an IP address" })?,
        ),
        None => None,
    };
    let (dest, prefix) = if dest == "default" {
        match via {
            Some(std::net::IpAddr::V6(_)) => (std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), 0),
            _ => (std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0),
        }
    } else {
        parse_cidr(dest)?
    };
    Ok((dest, prefix, via))
}

/// Gives the calling thread a private mount namespace with a sysfs of its
/// current network namespace on `/sys` (what `ip netns exec` does for its
/// child), so `/sys/class/net` lists that namespace's devices. Only for
/// short-lived threads ([`NetNs::enter_scoped`]): the thread keeps the
/// mount namespace until it exits, and nothing is seen outside it.
fn mount_own_sysfs() -> Result<()> {
    // SAFETY: unshare(2) with a constant flag; it affects only this thread (which gets its own
    // fs_struct), and the thread is a scoped helper that exits after its closure.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(IoError::last_os("unshare(CLONE_NEWNS)", "sysfs of the namespace"));
    }
    let root = c"/";
    let sys = c"/sys";
    // SAFETY: NUL-terminated constant strings; MS_SLAVE|MS_REC on "/" only changes the
    // propagation of this thread's new mount namespace, so nothing below reaches the host's.
    if unsafe {
        libc::mount(std::ptr::null(), root.as_ptr(), std::ptr::null(), libc::MS_SLAVE | libc::MS_REC, std::ptr::null())
    } != 0
    {
        return Err(IoError::last_os("mount(/, MS_SLAVE|MS_REC)", "sysfs of the namespace"));
    }
    // SAFETY: NUL-terminated constant path; detaches /sys in this private mount namespace only.
    // A failure (nothing mounted there) is fine: the mount below covers it.
    unsafe { libc::umount2(sys.as_ptr(), libc::MNT_DETACH) };
    // SAFETY: NUL-terminated constant strings; mounts a sysfs of the current network namespace
    // on /sys in this thread's private mount namespace.
    if unsafe { libc::mount(c"sysfs".as_ptr(), sys.as_ptr(), c"sysfs".as_ptr(), 0, std::ptr::null()) } != 0 {
        return Err(IoError::last_os("mount(sysfs, /sys)", "sysfs of the namespace"));
    }
    Ok(())
}

impl Drop for NetNs {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if let Err(e) = delete_named(&self.name) {
            eprintln!("superpacket: cannot delete namespace {}: {e}", self.name);
        }
    }
}

/// Parses an IPv4 or IPv6 address given as text.
fn parse_ip(ip: &str) -> Result<std::net::IpAddr> {
    ip.parse().map_err(|_| IoError::InvalidName { name: ip.to_string(), reason: "not an IP address" })
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
    /// `ip -n A link add NAME_A type veth peer name NAME_B netns B`, through
    /// netlink: both ends are created directly in their namespaces, down and
    /// without addresses.
    ///
    /// # Errors
    /// Bad names, a name in use, or the kernel refusing.
    pub fn create(ns_a: &NetNs, name_a: &str, ns_b: &NetNs, name_b: &str) -> Result<VethPair> {
        check_ifname(name_a)?;
        check_ifname(name_b)?;
        ns_a.netlink()?.add_veth(name_a, name_b, Some(ns_b.fd()))?;
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
        if let Ok(ns) = NetNs::attach(&self.ns_a)
            && let Ok(mut nl) = ns.netlink()
            && let Err(e) = nl.del_link(&self.name_a)
            && e.raw_os_error() != Some(libc::ENODEV)
        {
            eprintln!("superpacket: cannot delete veth {} in {}: {e}", self.name_a, self.ns_a);
        }
    }
}

/// Where named namespaces live (as iproute2 keeps them).
pub const NETNS_RUN_DIR: &str = "/run/netns";

fn c_path(path: &str) -> Result<CString> {
    CString::new(path).map_err(|_| IoError::InvalidName { name: path.into(), reason: "NUL byte in a path" })
}

/// Makes [`NETNS_RUN_DIR`] a shared mount point (bind-mounting it on itself
/// first if it is not a mount point), as `ip netns add` does, so that a
/// namespace unmounted in one mount namespace is unmounted in all.
fn prepare_run_dir() -> Result<()> {
    std::fs::create_dir_all(NETNS_RUN_DIR).map_err(|source| IoError::Syscall {
        call: "mkdir",
        what: NETNS_RUN_DIR.into(),
        source,
    })?;
    let dir = c_path(NETNS_RUN_DIR)?;
    let mut bound = false;
    loop {
        // SAFETY: NUL-terminated strings; changes the propagation of the /run/netns mount only.
        let rc = unsafe {
            libc::mount(c"".as_ptr(), dir.as_ptr(), c"none".as_ptr(), libc::MS_SHARED | libc::MS_REC, std::ptr::null())
        };
        if rc == 0 {
            return Ok(());
        }
        let err = IoError::last_os("mount(MS_SHARED)", NETNS_RUN_DIR);
        if err.raw_os_error() != Some(libc::EINVAL) || bound {
            return Err(err);
        }
        // SAFETY: NUL-terminated strings; bind-mounts /run/netns on itself to make it a mount point.
        if unsafe {
            libc::mount(dir.as_ptr(), dir.as_ptr(), c"none".as_ptr(), libc::MS_BIND | libc::MS_REC, std::ptr::null())
        } != 0
        {
            return Err(IoError::last_os("mount(MS_BIND)", NETNS_RUN_DIR));
        }
        bound = true;
    }
}

/// Creates the named network namespace `/run/netns/NAME` as `ip netns add
/// NAME` does: the file, then a helper thread that unshares a new network
/// namespace and bind-mounts its `/proc/thread-self/ns/net` on the file
/// (which keeps the namespace alive after the thread exits).
///
/// # Errors
/// Bad name, the name in use (`EEXIST`), or a failing syscall (without
/// CAP_SYS_ADMIN: `EPERM`).
pub fn create_named(name: &str) -> Result<()> {
    check_chars(name)?;
    prepare_run_dir()?;
    let path = format!("{NETNS_RUN_DIR}/{name}");
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|source| IoError::Syscall { call: "open(O_CREAT|O_EXCL)", what: path.clone(), source })?;
    let target = c_path(&path)?;
    let result = std::thread::scope(|s| {
        s.spawn(|| -> Result<()> {
            // SAFETY: unshare(2) with a constant flag; only this helper thread changes network
            // namespace, and it exits right after the bind mount.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return Err(IoError::last_os("unshare(CLONE_NEWNET)", path.clone()));
            }
            // SAFETY: NUL-terminated strings; bind-mounts this thread's new network namespace
            // on the file just created.
            if unsafe {
                libc::mount(
                    c"/proc/thread-self/ns/net".as_ptr(),
                    target.as_ptr(),
                    c"none".as_ptr(),
                    libc::MS_BIND,
                    std::ptr::null(),
                )
            } != 0
            {
                return Err(IoError::last_os("mount(/proc/thread-self/ns/net, MS_BIND)", path.clone()));
            }
            Ok(())
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&path);
    }
    result
}

/// Deletes the named network namespace as `ip netns del NAME` does: unmount
/// `/run/netns/NAME` (`MNT_DETACH`) and remove the file. The namespace
/// itself goes away when nothing else holds it (processes, open handles).
///
/// # Errors
/// Bad name, or neither the unmount nor the removal succeeding.
pub fn delete_named(name: &str) -> Result<()> {
    check_chars(name)?;
    let path = format!("{NETNS_RUN_DIR}/{name}");
    let target = c_path(&path)?;
    // SAFETY: NUL-terminated path; detaches the namespace bind mount (EINVAL if not mounted,
    // which the removal below reports if the file is not there either).
    let umount = unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    let umount_err = (umount != 0).then(|| IoError::last_os("umount2(MNT_DETACH)", path.clone()));
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(source) => Err(umount_err.unwrap_or(IoError::Syscall { call: "unlink", what: path, source })),
    }
}

/// Deletes namespaces named `<prefix>-<pid>-<n>` whose process no longer
/// exists (left behind by a killed test run). Returns the names deleted.
/// Namespaces of live processes and names of any other shape are never
/// touched.
pub fn cleanup_stale(prefix: &str) -> Vec<String> {
    let mut deleted = Vec::new();
    let Ok(dir) = std::fs::read_dir(NETNS_RUN_DIR) else {
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
        if delete_named(&name).is_ok() {
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
/// openable, and network namespaces supported. No command is needed:
/// namespaces, links and features are configured through netlink and
/// ioctls. `Err` explains what is missing.
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
            return Err(format!(
                "{name} missing: run as root (sudo), or give a container --cap-add NET_ADMIN --cap-add SYS_ADMIN"
            ));
        }
    }
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/net/tun") {
        return Err(format!(
            "cannot open /dev/net/tun: {e} (load the tun module: `modprobe tun`; a container needs --device /dev/net/tun)"
        ));
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
