//! Compiling the DPDK peer (`peers/dpdk/dpdk_peer.c`): one piece of code
//! shared by `build.rs` (which includes this file with `#[path]`) and by
//! `superpacket bench peers` at run time ([`super::dpdk::locate`]), so the
//! program is built the same way whichever builds it. Only `std` here.

#![allow(dead_code)] // build.rs uses part of it

use std::path::Path;
use std::process::Command;

/// How to get libdpdk, for the "not found" reasons.
pub const INSTALL: &str = "apt-get install dpdk-dev pkg-config";

/// The `pkg-config` program: `$SUPERPACKET_PKG_CONFIG` if set, else `pkg-config`.
pub fn pkg_config_program() -> String {
    std::env::var("SUPERPACKET_PKG_CONFIG").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "pkg-config".to_string())
}

/// The C compiler: `$CC` if set, else `cc`.
pub fn cc_program() -> String {
    std::env::var("CC").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "cc".to_string())
}

/// What compiling the peer needs from libdpdk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpdkFlags {
    /// `pkg-config --modversion libdpdk`.
    pub version: String,
    /// `pkg-config --cflags libdpdk`.
    pub cflags: String,
    /// `pkg-config --libs libdpdk`.
    pub libs: String,
}

/// Runs `PKG_CONFIG ARGS libdpdk`; its stdout on success, else why libdpdk
/// was not found (starting with "libdpdk not found").
fn pkg_config(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .arg("libdpdk")
        .output()
        .map_err(|e| format!("libdpdk not found: cannot run `{program}` ({e}): {INSTALL}"))?;
    if !out.status.success() {
        return Err(format!("libdpdk not found by {program}: {INSTALL}"));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// libdpdk's version and flags, from `pkg_config_program`.
pub fn dpdk_flags(pkg_config_program: &str) -> Result<DpdkFlags, String> {
    pkg_config(pkg_config_program, &["--exists"])?;
    Ok(DpdkFlags {
        version: pkg_config(pkg_config_program, &["--modversion"])?,
        cflags: pkg_config(pkg_config_program, &["--cflags"])?,
        libs: pkg_config(pkg_config_program, &["--libs"])?,
    })
}

/// Compiles `source` into `exe` with `cc` and libdpdk's `flags`; the reason
/// on failure (the compiler's first error line).
pub fn compile(cc: &str, flags: &DpdkFlags, source: &Path, exe: &Path) -> Result<(), String> {
    // pkg-config's flags come first so that our -march (native: the peer runs
    // where it is built) overrides the one libdpdk.pc carries.
    let out = Command::new(cc)
        .args(flags.cflags.split_whitespace())
        .args(["-O3", "-march=native", "-std=gnu11", "-Wall", "-Wextra", "-DALLOW_EXPERIMENTAL_API", "-o"])
        .arg(exe)
        .arg(source)
        .args(flags.libs.split_whitespace())
        .output()
        .map_err(|e| format!("cannot run the C compiler `{cc}`: {e}"))?;
    if !out.status.success() {
        return Err(format!("compiling {} failed: {}", source.display(), first_error(&out.stderr)));
    }
    if !exe.is_file() {
        return Err(format!("compiling {} produced no {}", source.display(), exe.display()));
    }
    Ok(())
}

/// The compiler's first error line (or its first line of output).
fn first_error(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.clone().next().unwrap_or("(no output)");
    lines.find(|l| l.contains("error")).unwrap_or(first).to_string()
}

/// FNV-1a 64 of `parts` (stable across Rust versions, unlike `DefaultHasher`):
/// names the cached program after what it was built from.
pub fn fnv64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in part.iter().chain(&[0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}
