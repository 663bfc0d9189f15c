//! Netdev offload features through the `SIOCETHTOOL` ioctl, as `ethtool -k`
//! and `ethtool -K` use them: the feature names (`ETHTOOL_GSSET_INFO`,
//! `ETHTOOL_GSTRINGS` of `ETH_SS_FEATURES`), their state
//! (`ETHTOOL_GFEATURES`) and changes (`ETHTOOL_SFEATURES`).
//!
//! The ioctl reaches the device in the namespace of the socket it is made
//! on, which is the calling thread's namespace when [`Features::read`] or
//! [`set`] is called: call them inside [`super::NetNs::enter_scoped`].

use super::error::{IoError, Result};
use super::sys::{check_chars, check_ifname};
use std::fmt::Write as _;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GFEATURES: u32 = 0x3a;
const ETHTOOL_SFEATURES: u32 = 0x3b;
const ETH_SS_FEATURES: u32 = 4;
const ETH_GSTRING_LEN: usize = 32;
/// `ETHTOOL_SFEATURES` result bit: some valid bits were not changeable.
const ETHTOOL_F_UNSUPPORTED: i32 = 1 << 0;

/// The `ethtool -K` aliases: short name, long name (as `ethtool -k` prints
/// it), pattern of the features it stands for (`*` matches any run).
pub const ALIASES: [(&str, &str, &str); 12] = [
    ("rx", "rx-checksumming", "rx-checksum"),
    ("tx", "tx-checksumming", "tx-checksum-*"),
    ("sg", "scatter-gather", "tx-scatter-gather*"),
    ("tso", "tcp-segmentation-offload", "tx-tcp*-segmentation"),
    ("ufo", "udp-fragmentation-offload", "tx-udp-fragmentation"),
    ("gso", "generic-segmentation-offload", "tx-generic-segmentation"),
    ("gro", "generic-receive-offload", "rx-gro"),
    ("lro", "large-receive-offload", "rx-lro"),
    ("rxvlan", "rx-vlan-offload", "rx-vlan-hw-parse"),
    ("txvlan", "tx-vlan-offload", "tx-vlan-hw-insert"),
    ("ntuple", "ntuple-filters", "rx-ntuple-filter"),
    ("rxhash", "receive-hashing", "rx-hashing"),
];

/// `name` matches `pattern` with at most one `*`.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((pre, post)) => name.len() >= pre.len() + post.len() && name.starts_with(pre) && name.ends_with(post),
    }
}

/// One netdev feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feature {
    /// Its `ETH_SS_FEATURES` name (`tx-tcp-segmentation`).
    pub name: String,
    /// The device can change it (`hw_features`).
    pub available: bool,
    /// Asked for (`wanted_features`).
    pub requested: bool,
    /// In effect (`features`).
    pub active: bool,
    /// Never changeable (`NETIF_F_NEVER_CHANGE`).
    pub never_changed: bool,
}

impl Feature {
    /// Shown `[fixed]` by ethtool: not changeable.
    pub fn fixed(&self) -> bool {
        !self.available || self.never_changed
    }
}

/// All features of one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features {
    /// The device.
    pub device: String,
    /// In `ETH_SS_FEATURES` order (the bit order of the feature words).
    pub features: Vec<Feature>,
}

/// An `AF_INET` datagram socket to carry the ioctl (as ethtool does).
fn ioctl_socket(dev: &str) -> Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(IoError::last_os("socket(AF_INET) for SIOCETHTOOL", dev));
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `struct ifreq` with `ifr_data` (40 bytes on 64-bit Linux).
#[repr(C)]
struct IfReqData {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// Runs `SIOCETHTOOL` on `dev` with the command buffer `buf` (its first
/// 32-bit word is the `ETHTOOL_*` command); returns the ioctl's
/// non-negative result.
fn ethtool_ioctl(sock: BorrowedFd<'_>, dev: &str, call: &'static str, buf: &mut [u64]) -> Result<i32> {
    let mut req = IfReqData { name: [0; libc::IFNAMSIZ], data: buf.as_mut_ptr().cast(), _pad: [0; 16] };
    req.name[..dev.len()].copy_from_slice(dev.as_bytes());
    // SAFETY: `req` is a valid ifreq whose name is NUL-terminated (check_ifname: at most 15
    // bytes) and whose data points at `buf`, sized by the caller for the command's reply
    // (the kernel writes no more than the counts the caller put in the header); both live
    // across the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL, &mut req as *mut IfReqData) };
    if rc < 0 {
        return Err(IoError::last_os(call, dev));
    }
    Ok(rc)
}

/// The 32-bit word `i` of a u64 buffer viewed as native-endian u32s.
fn word(buf: &[u64], i: usize) -> u32 {
    let w = buf[i / 2];
    let (lo, hi) =
        if cfg!(target_endian = "little") { (w as u32, (w >> 32) as u32) } else { ((w >> 32) as u32, w as u32) };
    if i.is_multiple_of(2) { lo } else { hi }
}

fn set_word(buf: &mut [u64], i: usize, v: u32) {
    let w = &mut buf[i / 2];
    let shift = if i.is_multiple_of(2) == cfg!(target_endian = "little") { 0 } else { 32 };
    *w = (*w & !(0xffff_ffffu64 << shift)) | (u64::from(v) << shift);
}

fn as_bytes(buf: &[u64]) -> Vec<u8> {
    buf.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

impl Features {
    /// Reads the features of `dev` in the calling thread's namespace.
    ///
    /// # Errors
    /// Bad name, no such device, or the ioctl failing.
    pub fn read(dev: &str) -> Result<Features> {
        check_ifname(dev)?;
        Features::read_on(ioctl_socket(dev)?.as_fd(), dev)
    }

    /// Reads the features of `dev` through `sock`, a socket of the
    /// device's namespace (any thread may call it).
    ///
    /// # Errors
    /// Bad name, no such device, or the ioctl failing.
    pub fn read_on(sock: BorrowedFd<'_>, dev: &str) -> Result<Features> {
        check_ifname(dev)?;
        let names = feature_names(sock, dev)?;
        let n = names.len();
        let blocks = n.div_ceil(32);
        // struct ethtool_gfeatures: cmd, size, then `blocks` x {available, requested, active, never_changed}.
        let mut buf = vec![0u64; 1 + blocks * 2];
        set_word(&mut buf, 0, ETHTOOL_GFEATURES);
        set_word(&mut buf, 1, blocks as u32);
        ethtool_ioctl(sock, dev, "ioctl(ETHTOOL_GFEATURES)", &mut buf)?;
        let features = names
            .into_iter()
            .enumerate()
            .map(|(i, name)| {
                let (b, bit) = (i / 32, 1u32 << (i % 32));
                let at = |k: usize| word(&buf, 2 + b * 4 + k) & bit != 0;
                Feature { name, available: at(0), requested: at(1), active: at(2), never_changed: at(3) }
            })
            .collect();
        Ok(Features { device: dev.to_string(), features })
    }

    /// The feature `name`, if the device has one.
    pub fn get(&self, name: &str) -> Option<&Feature> {
        self.features.iter().find(|f| f.name == name)
    }

    /// Whether feature `name` is active (false when unknown).
    pub fn is_active(&self, name: &str) -> bool {
        self.get(name).is_some_and(|f| f.active)
    }

    /// The text `ethtool -k DEV` prints: `Features for DEV:`, then each
    /// alias (`tcp-segmentation-offload: on`) with its features indented by
    /// a tab when it has more than one, then the other features (aliases
    /// without a feature and unnamed feature bits are left out);
    /// `[fixed]`, `[requested on]` and `[requested off]` as ethtool adds them.
    pub fn to_ethtool_text(&self) -> String {
        let mut out = format!("Features for {}:\n", self.device);
        let line = |out: &mut String, indent: &str, name: &str, f: &Feature| {
            let suffix = if f.fixed() {
                " [fixed]"
            } else if f.requested != f.active {
                if f.requested { " [requested on]" } else { " [requested off]" }
            } else {
                ""
            };
            let _ = writeln!(out, "{indent}{name}: {}{suffix}", if f.active { "on" } else { "off" });
        };
        let mut grouped = vec![false; self.features.len()];
        for (_, long, pattern) in ALIASES {
            let members: Vec<usize> =
                (0..self.features.len()).filter(|&i| matches(pattern, &self.features[i].name)).collect();
            match members.as_slice() {
                // An alias with no feature on this kernel is not shown.
                [] => {}
                [one] => {
                    grouped[*one] = true;
                    line(&mut out, "", long, &self.features[*one]);
                }
                many => {
                    let on = many.iter().any(|&i| self.features[i].active);
                    let _ = writeln!(out, "{long}: {}", if on { "on" } else { "off" });
                    for &i in many {
                        grouped[i] = true;
                        line(&mut out, "\t", &self.features[i].name, &self.features[i]);
                    }
                }
            }
        }
        // Unnamed bits (features retired from the kernel) are not shown either.
        for (i, f) in self.features.iter().enumerate() {
            if !grouped[i] && !f.name.is_empty() {
                line(&mut out, "", &f.name, f);
            }
        }
        out
    }
}

/// The `ETH_SS_FEATURES` names of `dev`.
fn feature_names(sock: BorrowedFd<'_>, dev: &str) -> Result<Vec<String>> {
    // struct ethtool_sset_info: cmd, reserved, sset_mask (u64), data[1] (u32).
    let mut info = vec![0u64; 3];
    set_word(&mut info, 0, ETHTOOL_GSSET_INFO);
    info[1] = 1 << ETH_SS_FEATURES;
    ethtool_ioctl(sock, dev, "ioctl(ETHTOOL_GSSET_INFO)", &mut info)?;
    if info[1] & (1 << ETH_SS_FEATURES) == 0 {
        return Err(IoError::Unsupported(format!("{dev}: no ETH_SS_FEATURES string set")));
    }
    let n = word(&info, 4) as usize;
    if n > 4096 {
        return Err(IoError::Unsupported(format!("{dev}: {n} features")));
    }
    // struct ethtool_gstrings: cmd, string_set, len, then len x 32 bytes.
    let mut buf = vec![0u64; (12 + n * ETH_GSTRING_LEN).div_ceil(8)];
    set_word(&mut buf, 0, ETHTOOL_GSTRINGS);
    set_word(&mut buf, 1, ETH_SS_FEATURES);
    set_word(&mut buf, 2, n as u32);
    ethtool_ioctl(sock, dev, "ioctl(ETHTOOL_GSTRINGS)", &mut buf)?;
    let got = (word(&buf, 2) as usize).min(n);
    let bytes = as_bytes(&buf);
    Ok((0..got)
        .map(|i| {
            let s = &bytes[12 + i * ETH_GSTRING_LEN..12 + (i + 1) * ETH_GSTRING_LEN];
            let end = s.iter().position(|&b| b == 0).unwrap_or(ETH_GSTRING_LEN);
            String::from_utf8_lossy(&s[..end]).into_owned()
        })
        .collect())
}

/// Sets features of `dev` in the calling thread's namespace, as `ethtool -K
/// DEV name on|off ...` does: a name is a feature (`tx-udp-segmentation`)
/// or an alias (`tso`, `tcp-segmentation-offload`: every changeable feature
/// it stands for). Values are `on` or `off`.
///
/// # Errors
/// Bad names or values, an unknown feature, a feature named directly that
/// cannot be changed and is not already as asked, or the ioctl failing.
pub fn set(dev: &str, changes: &[(&str, &str)]) -> Result<()> {
    check_ifname(dev)?;
    let before = Features::read(dev)?;
    let n = before.features.len();
    let blocks = n.div_ceil(32);
    let mut valid = vec![0u32; blocks];
    let mut requested = vec![0u32; blocks];
    // Features named directly, to check afterwards.
    let mut direct = Vec::new();
    for &(name, value) in changes {
        check_chars(name)?;
        let on = match value {
            "on" => true,
            "off" => false,
            _ => return Err(IoError::InvalidName { name: value.into(), reason: "feature value must be on or off" }),
        };
        let targets: Vec<usize> = match ALIASES.iter().find(|(short, long, _)| *short == name || *long == name) {
            Some((_, _, pattern)) => {
                (0..n).filter(|&i| matches(pattern, &before.features[i].name) && !before.features[i].fixed()).collect()
            }
            None => match before.features.iter().position(|f| f.name == name) {
                Some(i) => {
                    direct.push((i, on));
                    vec![i]
                }
                None => {
                    return Err(IoError::Syscall {
                        call: "ioctl(ETHTOOL_SFEATURES)",
                        what: format!("{dev} {name} {value}"),
                        source: io::Error::new(io::ErrorKind::NotFound, "no such feature"),
                    });
                }
            },
        };
        for i in targets {
            valid[i / 32] |= 1 << (i % 32);
            if on {
                requested[i / 32] |= 1 << (i % 32);
            } else {
                requested[i / 32] &= !(1 << (i % 32));
            }
        }
    }
    if valid.iter().all(|&v| v == 0) {
        return Ok(());
    }
    // struct ethtool_sfeatures: cmd, size, then `blocks` x {valid, requested}.
    let mut buf = vec![0u64; 1 + blocks];
    set_word(&mut buf, 0, ETHTOOL_SFEATURES);
    set_word(&mut buf, 1, blocks as u32);
    for b in 0..blocks {
        set_word(&mut buf, 2 + b * 2, valid[b]);
        set_word(&mut buf, 3 + b * 2, requested[b]);
    }
    let sock = ioctl_socket(dev)?;
    let what = || {
        let list: Vec<String> = changes.iter().map(|(n, v)| format!("{n} {v}")).collect();
        format!("{dev} {}", list.join(" "))
    };
    let rc = ethtool_ioctl(sock.as_fd(), dev, "ioctl(ETHTOOL_SFEATURES)", &mut buf).map_err(|e| {
        if let IoError::Syscall { call, source, .. } = e { IoError::Syscall { call, what: what(), source } } else { e }
    })?;
    if rc & ETHTOOL_F_UNSUPPORTED != 0 {
        let after = Features::read(dev)?;
        for (i, on) in direct {
            let f = &after.features[i];
            if f.fixed() && f.active != on {
                return Err(IoError::Syscall {
                    call: "ioctl(ETHTOOL_SFEATURES)",
                    what: what(),
                    source: io::Error::new(io::ErrorKind::Unsupported, format!("{} cannot be changed", f.name)),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(matches("tx-tcp*-segmentation", "tx-tcp-segmentation"));
        assert!(matches("tx-tcp*-segmentation", "tx-tcp6-segmentation"));
        assert!(matches("tx-tcp*-segmentation", "tx-tcp-mangleid-segmentation"));
        assert!(!matches("tx-tcp*-segmentation", "tx-udp-segmentation"));
        assert!(matches("tx-checksum-*", "tx-checksum-ip-generic"));
        assert!(matches("rx-gro", "rx-gro"));
        assert!(!matches("rx-gro", "rx-gro-list"));
    }

    #[test]
    fn words_round_trip() {
        let mut buf = vec![0u64; 2];
        for i in 0..4 {
            set_word(&mut buf, i, 0x1000 + i as u32);
        }
        for i in 0..4 {
            assert_eq!(word(&buf, i), 0x1000 + i as u32);
        }
        let bytes = as_bytes(&buf);
        assert_eq!(u32::from_ne_bytes(bytes[4..8].try_into().unwrap()), 0x1001);
    }

    #[test]
    fn text_groups_like_ethtool() {
        let f = |name: &str, active: bool, available: bool| Feature {
            name: name.into(),
            available,
            requested: active,
            active,
            never_changed: false,
        };
        let feats = Features {
            device: "x".into(),
            features: vec![
                f("tx-tcp-segmentation", true, true),
                f("tx-tcp6-segmentation", false, true),
                f("rx-gro", true, true),
                f("highdma", true, false),
            ],
        };
        let text = feats.to_ethtool_text();
        assert!(text.starts_with("Features for x:\n"));
        assert!(
            text.contains("tcp-segmentation-offload: on\n\ttx-tcp-segmentation: on\n\ttx-tcp6-segmentation: off\n")
        );
        assert!(text.contains("generic-receive-offload: on\n"));
        assert!(text.contains("highdma: on [fixed]\n"));
    }
}
