//! The output format of the pcap commands: `pcap gro`, `pcap gso` and
//! `pcap defrag` write the format OUT's extension names, whatever the input's.
//!
//! `.pcap` (any case) is classic pcap; anything else (`.pcapng`, no extension,
//! `.out`...) is pcapng. Classic pcap keeps the input's timestamp resolution
//! when the input is classic pcap (microseconds, magic `0xA1B2C3D4`, or
//! nanoseconds, `0xA1B23C4D`) and is written with nanoseconds (the
//! resolution the reader hands over) when the input is pcapng, so no
//! timestamp is rounded. Only pcapng carries offload annotations (packet
//! comments): a frame written to classic pcap loses its annotation, and the
//! command says so once on stderr at the end (the exit status is unchanged).

use super::CliError;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use superpacket::pcap::{CaptureFormat, CaptureWriter, LinkType, WriterOptions};
use superpacket::wire::Medium;

/// The format OUT's name asks for: classic pcap for a `.pcap` extension (any
/// case), in the input's resolution if the input is classic pcap, in
/// nanoseconds otherwise; pcapng for anything else.
pub fn format_for(output: &Path, input: CaptureFormat) -> CaptureFormat {
    let classic = output.extension().is_some_and(|e| e.eq_ignore_ascii_case("pcap"));
    match (classic, input) {
        (false, _) => CaptureFormat::PcapNg,
        (true, CaptureFormat::PcapMicros) => CaptureFormat::PcapMicros,
        (true, CaptureFormat::PcapNanos | CaptureFormat::PcapNg) => CaptureFormat::PcapNanos,
    }
}

/// Creates OUT in the format its name asks for ([`format_for`]) and the
/// link type of `medium` (1, or 101 for raw IP). Annotations a classic pcap
/// cannot carry are dropped and counted, never refused; see [`warn_dropped`].
///
/// # Errors
/// OUT cannot be created.
pub fn create(output: &Path, input: CaptureFormat, medium: Medium) -> Result<CaptureWriter<BufWriter<File>>, CliError> {
    let opts = WriterOptions { strip_annotations: true, ..WriterOptions::default() };
    CaptureWriter::create_with_options(output, format_for(output, input), LinkType::for_medium(medium), opts)
        .map_err(|e| CliError::context(output.display(), e))
}

/// The warning of a run that wrote `dropped` annotated frames to classic
/// pcap, if it did.
pub fn dropped_warning(command: &str, output: &Path, dropped: u64) -> Option<String> {
    (dropped > 0).then(|| {
        format!(
            "superpacket: warning: {}: classic pcap cannot carry offload annotations: {dropped} frame(s) written by \
             `{command}` lost theirs (gso_type/gso_size/gso_segs, csum=partial); name the output .pcapng to keep them",
            output.display()
        )
    })
}

/// Says once on stderr that annotations were dropped, if the writer dropped
/// any (call it once, before finishing the writer).
pub fn warn_dropped<W: std::io::Write>(command: &str, output: &Path, writer: &CaptureWriter<W>) {
    if let Some(line) = dropped_warning(command, output, writer.stripped_annotations()) {
        eprintln!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extension_decides() {
        let ng = CaptureFormat::PcapNg;
        for (name, input, want) in [
            ("out.pcap", ng, CaptureFormat::PcapNanos),
            ("OUT.PCAP", CaptureFormat::PcapMicros, CaptureFormat::PcapMicros),
            ("a/b.Pcap", CaptureFormat::PcapNanos, CaptureFormat::PcapNanos),
            ("out.pcapng", CaptureFormat::PcapMicros, ng),
            ("out.PcapNG", CaptureFormat::PcapNanos, ng),
            ("out", CaptureFormat::PcapMicros, ng),
            ("out.pcap.gz", CaptureFormat::PcapMicros, ng),
            ("pcap", CaptureFormat::PcapMicros, ng),
            (".pcap", CaptureFormat::PcapMicros, ng),
            ("out.cap", CaptureFormat::PcapMicros, ng),
        ] {
            assert_eq!(format_for(Path::new(name), input), want, "{name} from {input}");
        }
        assert!(dropped_warning("pcap gro", Path::new("x.pcap"), 0).is_none());
        assert!(dropped_warning("pcap gro", Path::new("x.pcap"), 3).is_some_and(|w| w.contains("3 frame")));
    }
}
