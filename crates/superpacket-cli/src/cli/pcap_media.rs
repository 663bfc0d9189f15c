//! The media of the pcap commands: which link types `pcap gro`, `pcap gso`,
//! `pcap defrag` and `pcap check` read, and what they write.
//!
//! Ethernet (linktype 1) is [`Medium::Ethernet`]; raw IP, linktype 101
//! (`LINKTYPE_RAW`, version from the first nibble), 228 (`LINKTYPE_IPV4`) and
//! 229 (`LINKTYPE_IPV6`), is [`Medium::Ip`]. Output keeps the input's medium:
//! Ethernet is written as 1, raw IP as 101. Any other link type is refused
//! (exit 2) with a message naming it, never read as something else. A packet
//! of linktype 228 that is not IPv4, or of 229 that is not IPv6, is a
//! problem the command counts and reports (it is not read with the other
//! version). A command that keeps state across frames (GRO, GSO, reassembly)
//! runs with one medium: a pcapng whose interfaces mix Ethernet and raw IP
//! is refused at the first frame of the second medium.

use super::CliError;
use std::path::Path;
use superpacket::pcap::{CaptureFormat, CaptureReader, CapturedFrame, LinkType};
use superpacket::wire::Medium;

/// What the message of a refused link type says the commands read.
pub const SUPPORTED: &str = "Ethernet (1) and raw IP (101, 228, 229) captures";

/// The `LINKTYPE_*` name of common link types (without the prefix).
fn registry_name(link: LinkType) -> Option<&'static str> {
    const USER: [&str; 16] = [
        "USER0", "USER1", "USER2", "USER3", "USER4", "USER5", "USER6", "USER7", "USER8", "USER9", "USER10", "USER11",
        "USER12", "USER13", "USER14", "USER15",
    ];
    Some(match link.0 {
        0 => "NULL",
        1 => "ETHERNET",
        6 => "IEEE802_5",
        9 => "PPP",
        10 => "FDDI",
        50 => "PPP_HDLC",
        51 => "PPP_ETHER",
        101 => "RAW",
        104 => "C_HDLC",
        105 => "IEEE802_11",
        108 => "LOOP",
        113 => "LINUX_SLL",
        119 => "IEEE802_11_PRISM",
        127 => "IEEE802_11_RADIOTAP",
        n @ 147..=162 => USER[usize::from(n - 147)],
        192 => "PPI",
        220 => "USB_LINUX_MMAPPED",
        228 => "IPV4",
        229 => "IPV6",
        239 => "NFLOG",
        249 => "USBPCAP",
        252 => "WIRESHARK_UPPER_PDU",
        253 => "NETLINK",
        276 => "LINUX_SLL2",
        _ => return None,
    })
}

/// `113 (LINUX_SLL)`, or just the number for link types without a known name.
pub fn describe(link: LinkType) -> String {
    match registry_name(link) {
        Some(name) => format!("{} ({name})", link.0),
        None => match link.name() {
            Some(name) => format!("{} ({})", link.0, name.to_ascii_uppercase()),
            None => link.0.to_string(),
        },
    }
}

/// Why a frame of linktype 228 or 229 is not of its link type's IP version
/// (`None` for other link types and for frames of the right version).
pub fn wrong_ip_version(link: LinkType, data: &[u8]) -> Option<String> {
    let want = match link {
        LinkType::IPV4 => 4,
        LinkType::IPV6 => 6,
        _ => return None,
    };
    match data.first().map(|b| b >> 4) {
        Some(v) if v == want => None,
        Some(v) => Some(format!("link type {} carries IPv{want} packets, this one has IP version {v}", describe(link))),
        None => Some(format!("link type {} carries IPv{want} packets, this one is empty", describe(link))),
    }
}

/// Why `command` refuses `link`, met at `frame` (index, pcapng interface).
pub fn unsupported_message(command: &str, link: LinkType, frame: Option<(u64, u32)>) -> String {
    let at = match frame {
        Some((index, iface)) => format!(" (frame {index}, interface {iface})"),
        None => String::new(),
    };
    format!("link type {} is not supported by `{command}`: it reads {SUPPORTED}{at}", describe(link))
}

/// The refusal of a link type `command` does not read.
pub fn unsupported(command: &str, input: &Path, link: LinkType, frame: Option<(u64, u32)>) -> CliError {
    CliError(format!("{}: {}", input.display(), unsupported_message(command, link, frame)))
}

/// Fixes the medium of a run of a stateful command from the capture's link
/// types, refusing unsupported ones and a change of medium, and counts the
/// frames of the wrong IP version for their link type.
#[derive(Debug)]
pub struct MediumGate {
    command: &'static str,
    input: String,
    first: Option<(LinkType, Medium)>,
    /// Frames of linktype 228/229 whose IP version is not the link type's.
    pub wrong_ip_version: u64,
    /// The first such frame and why.
    pub first_wrong: Option<(u64, String)>,
}

/// What [`MediumGate::frame`] says of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameMedium {
    /// Read it as this medium (the run's).
    Read(Medium),
    /// Not of its link type's IP version: counted, not to be read.
    WrongIpVersion,
}

impl MediumGate {
    /// A gate for `command` (e.g. `pcap gro`) reading `input`. A classic pcap
    /// declares its link type in the file header: an unsupported one is
    /// refused here, before any output is created.
    ///
    /// # Errors
    /// The refusal of an unsupported link type.
    pub fn new<R>(command: &'static str, input: &Path, reader: &CaptureReader<R>) -> Result<MediumGate, CliError> {
        let mut gate = MediumGate {
            command,
            input: input.display().to_string(),
            first: None,
            wrong_ip_version: 0,
            first_wrong: None,
        };
        if reader.format() != CaptureFormat::PcapNg
            && let Some(link) = reader.link_type()
        {
            gate.link(link, None)?;
        }
        Ok(gate)
    }

    /// The run's medium, once a link type was seen.
    pub fn medium(&self) -> Option<Medium> {
        self.first.map(|(_, m)| m)
    }

    fn link(&mut self, link: LinkType, at: Option<(u64, u32)>) -> Result<Medium, CliError> {
        let Some(medium) = link.medium() else {
            return Err(unsupported(self.command, Path::new(&self.input), link, at));
        };
        match self.first {
            None => self.first = Some((link, medium)),
            Some((first, m)) if m != medium => {
                let at = at.map(|(i, f)| format!("frame {i} (interface {f})")).unwrap_or_else(|| "a frame".into());
                return Err(CliError(format!(
                    "{}: {at} has link type {} ({medium}) but earlier frames have {} ({m}): `{}` runs with one \
                     medium per capture; split the capture by interface (e.g. `tshark -Y frame.interface_id==N`)",
                    self.input,
                    describe(link),
                    describe(first),
                    self.command
                )));
            }
            Some(_) => {}
        }
        Ok(medium)
    }

    /// Checks a frame: its medium (the run's), or a frame of the wrong IP
    /// version (counted).
    ///
    /// # Errors
    /// An unsupported link type, or a medium other than the run's.
    pub fn frame(&mut self, frame: &CapturedFrame<'_>) -> Result<FrameMedium, CliError> {
        let medium = self.link(frame.link_type, Some((frame.index, frame.interface_id)))?;
        if let Some(why) = wrong_ip_version(frame.link_type, frame.data) {
            self.wrong_ip_version += 1;
            if self.first_wrong.is_none() {
                self.first_wrong = Some((frame.index, why));
            }
            return Ok(FrameMedium::WrongIpVersion);
        }
        Ok(FrameMedium::Read(medium))
    }

    /// The run's medium at the end of the capture: for a capture without
    /// frames, that of its first interface (Ethernet if it has none).
    ///
    /// # Errors
    /// The first interface's link type is not supported.
    pub fn finish<R>(&mut self, reader: &CaptureReader<R>) -> Result<Medium, CliError> {
        match self.medium() {
            Some(m) => Ok(m),
            None => match reader.link_type() {
                Some(link) => self.link(link, None),
                None => Ok(Medium::Ethernet),
            },
        }
    }

    /// The line a human report prints about frames of the wrong IP version.
    pub fn wrong_ip_version_line(&self) -> Option<String> {
        self.first_wrong.as_ref().map(|(index, why)| {
            format!(
                "  dropped {}: IP version not that of the link type (first: frame {index}: {why})",
                self.wrong_ip_version
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_media() {
        assert_eq!(describe(LinkType(113)), "113 (LINUX_SLL)");
        assert_eq!(describe(LinkType(147)), "147 (USER0)");
        assert_eq!(describe(LinkType(162)), "162 (USER15)");
        assert_eq!(describe(LinkType(4000)), "4000");
        assert_eq!(LinkType(228).medium(), Some(Medium::Ip));
        assert_eq!(LinkType(113).medium(), None);
        assert_eq!(LinkType::for_medium(Medium::Ip), LinkType::RAW);
        assert!(wrong_ip_version(LinkType::IPV4, &[0x45]).is_none());
        assert!(wrong_ip_version(LinkType::IPV4, &[0x60]).is_some());
        assert!(wrong_ip_version(LinkType::IPV6, &[]).is_some());
        assert!(wrong_ip_version(LinkType::RAW, &[0x60]).is_none());
    }
}
