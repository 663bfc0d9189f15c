//! Dropping privileges once the ports are open (`superpacket run`).
//!
//! Opening ports needs root-like powers; moving packets through open
//! descriptors needs none. What the engine still needs afterwards is what
//! [`PortDriver::reopen`](crate::device::PortDriver::reopen) needs when a
//! device comes back: `CAP_NET_ADMIN` (attach a TAP, set offloads, bring a
//! link up), `CAP_NET_RAW` (open an AF_PACKET socket) and, only if some
//! port lives in a named network namespace, `CAP_SYS_ADMIN` (`setns`).
//! [`drop_privileges`] keeps exactly those ([`PrivilegePlan::for_topology`])
//! and removes every other capability from the effective, permitted,
//! inheritable and bounding sets, so neither the engine nor anything it runs
//! (`ip`, to bring a reopened link up) can get them back; it sets
//! `PR_SET_NO_NEW_PRIVS`, and with [`PrivilegePlan::user`] it first becomes
//! that user (keeping the capabilities across `setuid` with
//! `PR_SET_KEEPCAPS`, and as ambient capabilities so that `ip` keeps them too).
//!
//! Capabilities are per thread in Linux: call [`drop_privileges`] while the
//! calling thread is the process's only one (before the workers start);
//! threads started afterwards inherit the reduced set.

use std::ffi::CString;

/// A Linux capability number (`linux/capability.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Capability(pub u32);

impl Capability {
    /// `CAP_NET_ADMIN`: TAP attach (`TUNSETIFF`), offloads, link state.
    pub const NET_ADMIN: Capability = Capability(12);
    /// `CAP_NET_RAW`: AF_PACKET sockets.
    pub const NET_RAW: Capability = Capability(13);
    /// `CAP_SYS_ADMIN`: `setns` into a named network namespace.
    pub const SYS_ADMIN: Capability = Capability(21);
    /// `CAP_SETPCAP`: needed to shrink the bounding set.
    const SETPCAP: Capability = Capability(8);

    /// The capability's name, e.g. `cap_net_admin`.
    pub fn name(self) -> String {
        match self.0 {
            12 => "cap_net_admin".into(),
            13 => "cap_net_raw".into(),
            21 => "cap_sys_admin".into(),
            n => format!("cap_{n}"),
        }
    }

    fn bit(self) -> u64 {
        1u64 << self.0
    }
}

/// What to keep after the ports are open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivilegePlan {
    /// Capabilities kept (everything else is dropped).
    pub keep: Vec<Capability>,
    /// Become this user: its uid and primary gid ([`lookup_user`]).
    pub user: Option<(u32, u32)>,
}

impl PrivilegePlan {
    /// What an engine with these ports needs to reopen them: NET_ADMIN and
    /// NET_RAW, plus SYS_ADMIN if `uses_named_netns`.
    pub fn for_topology(uses_named_netns: bool, user: Option<(u32, u32)>) -> PrivilegePlan {
        let mut keep = vec![Capability::NET_ADMIN, Capability::NET_RAW];
        if uses_named_netns {
            keep.push(Capability::SYS_ADMIN);
        }
        PrivilegePlan { keep, user }
    }

    fn keep_mask(&self) -> u64 {
        self.keep.iter().fold(0, |m, c| m | c.bit())
    }
}

/// What [`drop_privileges`] did, for the start-up message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivilegeReport {
    /// Effective capabilities now (bit mask).
    pub effective: u64,
    /// The user and group ids now.
    pub uid: u32,
    /// The group id now.
    pub gid: u32,
    /// The bounding set was shrunk too (false without `CAP_SETPCAP`, e.g.
    /// an unprivileged run with file capabilities).
    pub bounding_dropped: bool,
}

impl PrivilegeReport {
    /// `cap_net_admin,cap_net_raw` style list of the effective set.
    pub fn effective_names(&self) -> String {
        let names: Vec<String> =
            (0..64).filter(|b| self.effective & (1u64 << b) != 0).map(|b| Capability(b).name()).collect();
        if names.is_empty() { "none".into() } else { names.join(",") }
    }
}

/// Dropping privileges failed (the engine must not run on with more than it
/// asked to keep).
#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    /// No such user.
    #[error("no user `{0}` on this system")]
    UnknownUser(String),
    /// A system call failed.
    #[error("{call}: {source}")]
    Sys {
        /// The call, e.g. `setuid`.
        call: &'static str,
        /// Its error.
        source: std::io::Error,
    },
}

fn sys(call: &'static str, rc: libc::c_long) -> Result<(), PrivilegeError> {
    if rc < 0 { Err(PrivilegeError::Sys { call, source: std::io::Error::last_os_error() }) } else { Ok(()) }
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct` (two of them for 64 capabilities).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// The calling thread's (effective, permitted, inheritable) sets.
fn capget() -> Result<(u64, u64, u64), PrivilegeError> {
    let mut hdr = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two cap_data structs for version 3; both pointers are live and sized.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &mut hdr as *mut CapHeader, data.as_mut_ptr()) };
    sys("capget", rc)?;
    let join = |f: fn(&CapData) -> u32| u64::from(f(&data[0])) | (u64::from(f(&data[1])) << 32);
    Ok((join(|d| d.effective), join(|d| d.permitted), join(|d| d.inheritable)))
}

/// Sets the calling thread's effective, permitted and inheritable sets to `mask`.
fn capset(mask: u64) -> Result<(), PrivilegeError> {
    let mut hdr = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    let lo = mask as u32;
    let hi = (mask >> 32) as u32;
    let data = [
        CapData { effective: lo, permitted: lo, inheritable: lo },
        CapData { effective: hi, permitted: hi, inheritable: hi },
    ];
    // SAFETY: capset reads two cap_data structs for version 3; both pointers are live and sized.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut hdr as *mut CapHeader, data.as_ptr()) };
    sys("capset", rc)
}

/// `prctl(option, arg2, arg3, 0, 0)`.
fn prctl(
    call: &'static str,
    option: libc::c_int,
    arg2: libc::c_ulong,
    arg3: libc::c_ulong,
) -> Result<(), PrivilegeError> {
    // SAFETY: the prctl options used here take integer arguments only and touch no memory.
    let rc = unsafe { libc::prctl(option, arg2, arg3, 0 as libc::c_ulong, 0 as libc::c_ulong) };
    sys(call, rc as libc::c_long)
}

/// The highest capability number this kernel knows.
fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
        .min(63)
}

/// The uid and primary gid of `user` (a name or a number).
///
/// # Errors
/// [`PrivilegeError::UnknownUser`].
pub fn lookup_user(user: &str) -> Result<(u32, u32), PrivilegeError> {
    let name = CString::new(user).map_err(|_| PrivilegeError::UnknownUser(user.into()))?;
    // SAFETY: `passwd` is a plain C struct of integers and pointers, for which all-zero bytes
    // (null pointers) are a valid value; getpwnam_r fills it in.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is live for the call; getpwnam_r writes into `pwd` and `buf` (of the
    // stated length) only, and `result` tells whether an entry was found.
    let rc = unsafe { libc::getpwnam_r(name.as_ptr(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc == 0 && !result.is_null() {
        return Ok((pwd.pw_uid, pwd.pw_gid));
    }
    match user.parse::<u32>() {
        Ok(uid) => Ok((uid, uid)),
        Err(_) => Err(PrivilegeError::UnknownUser(user.into())),
    }
}

/// Drops every privilege `plan` does not keep (see the module
/// documentation). Call it from the process's only thread.
///
/// # Errors
/// A system call refusing (the caller should stop: the
/// process would otherwise run with more than it asked to keep).
pub fn drop_privileges(plan: &PrivilegePlan) -> Result<PrivilegeReport, PrivilegeError> {
    let keep = plan.keep_mask();
    let (_, permitted, _) = capget()?;
    let keep = keep & permitted;
    // The bounding set first, while CAP_SETPCAP is still effective.
    let bounding_dropped = permitted & Capability::SETPCAP.bit() != 0;
    if bounding_dropped {
        for cap in 0..=last_cap() {
            if keep & Capability(cap).bit() == 0 {
                prctl("prctl(PR_CAPBSET_DROP)", libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0)?;
            }
        }
    }
    if let Some((uid, gid)) = plan.user {
        prctl("prctl(PR_SET_KEEPCAPS)", libc::PR_SET_KEEPCAPS, 1, 0)?;
        let groups = [gid];
        // SAFETY: setgroups reads one gid from a live array; setgid/setuid take plain integers.
        // glibc applies setgid/setuid to every thread of the process.
        unsafe {
            sys("setgroups", libc::setgroups(1, groups.as_ptr()) as libc::c_long)?;
            sys("setgid", libc::setgid(gid) as libc::c_long)?;
            sys("setuid", libc::setuid(uid) as libc::c_long)?;
        }
        prctl("prctl(PR_SET_KEEPCAPS)", libc::PR_SET_KEEPCAPS, 0, 0)?;
    }
    capset(keep)?;
    // Ambient: programs the engine runs (`ip`) keep exactly these, even as a non-root user.
    let ambient = |op: libc::c_int| op as libc::c_ulong;
    prctl("prctl(PR_CAP_AMBIENT)", libc::PR_CAP_AMBIENT, ambient(libc::PR_CAP_AMBIENT_CLEAR_ALL), 0)?;
    for cap in (0..64u32).filter(|&c| keep & Capability(c).bit() != 0) {
        let raise = ambient(libc::PR_CAP_AMBIENT_RAISE);
        prctl("prctl(PR_CAP_AMBIENT_RAISE)", libc::PR_CAP_AMBIENT, raise, libc::c_ulong::from(cap))?;
    }
    prctl("prctl(PR_SET_NO_NEW_PRIVS)", libc::PR_SET_NO_NEW_PRIVS, 1, 0)?;
    let (effective, _, _) = capget()?;
    // SAFETY: getuid/getgid have no failure mode and touch no memory.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    Ok(PrivilegeReport { effective, uid, gid, bounding_dropped })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_keeps_what_reopening_needs() {
        let p = PrivilegePlan::for_topology(false, None);
        assert_eq!(p.keep_mask(), (1 << 12) | (1 << 13));
        let p = PrivilegePlan::for_topology(true, Some((65534, 65534)));
        assert_eq!(p.keep_mask(), (1 << 12) | (1 << 13) | (1 << 21));
        let r = PrivilegeReport { effective: p.keep_mask(), uid: 0, gid: 0, bounding_dropped: true };
        assert_eq!(r.effective_names(), "cap_net_admin,cap_net_raw,cap_sys_admin");
    }

    #[test]
    fn users_resolve_by_name_or_number() {
        assert_eq!(lookup_user("root").unwrap(), (0, 0));
        assert_eq!(lookup_user("4242").unwrap(), (4242, 4242));
        assert!(matches!(lookup_user("no-such-user-sp"), Err(PrivilegeError::UnknownUser(_))));
        assert!(matches!(lookup_user("bad\0name"), Err(PrivilegeError::UnknownUser(_))));
    }

    /// Drops privileges in a child process (capabilities are per thread and
    /// irreversible, so not in the test process) and reads back
    /// /proc/self/status there.
    #[test]
    fn dropping_leaves_only_the_kept_capabilities() {
        // SAFETY: geteuid has no failure mode.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root");
            return;
        }
        // SAFETY: fork in a test: the child only makes system calls and reads a file, then _exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let plan = PrivilegePlan::for_topology(false, Some(lookup_user("nobody").unwrap_or((65534, 65534))));
            let ok = match drop_privileges(&plan) {
                Ok(r) => {
                    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
                    let field =
                        |k: &str| status.lines().find(|l| l.starts_with(k)).map(|l| l[k.len()..].trim().to_string());
                    r.effective == 0x3000
                        && field("CapEff:").as_deref() == Some("0000000000003000")
                        && field("CapPrm:").as_deref() == Some("0000000000003000")
                        && field("CapBnd:").as_deref() == Some("0000000000003000")
                        && field("CapAmb:").as_deref() == Some("0000000000003000")
                        && field("NoNewPrivs:").as_deref() == Some("1")
                        && r.uid != 0
                        // A new socket needs CAP_NET_RAW, still there.
                        && {
                            // SAFETY: plain socket call; the fd is closed right away.
                            let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
                            // SAFETY: closing the descriptor just created.
                            fd >= 0 && unsafe { libc::close(fd) } == 0
                        }
                        // Root-only files are out of reach now (CAP_DAC_OVERRIDE is gone).
                        && std::fs::read("/etc/shadow").is_err()
                }
                Err(_) => false,
            };
            // SAFETY: leave the forked child without running the test harness's destructors.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status}");
    }
}
