//! The `superpacket` binary: see `superpacket --help`.

fn main() -> std::process::ExitCode {
    superpacket_cli::cli::main()
}
