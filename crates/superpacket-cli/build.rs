//! Build script: compiles the DPDK peer of `superpacket bench peers`
//! (`peers/dpdk/dpdk_peer.c`) when libdpdk is installed (Debian: `dpdk-dev`).
//!
//! On success the program's path is exported as `SUPERPACKET_DPDK_PEER`;
//! otherwise `SUPERPACKET_DPDK_PEER_MISSING` says why. This script never fails
//! the build: without DPDK the crate builds and the peer reports itself missing.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = "peers/dpdk/dpdk_peer.c";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=CC");
    match build_dpdk_peer() {
        Ok(path) => println!("cargo:rustc-env=SUPERPACKET_DPDK_PEER={}", path.display()),
        Err(reason) => {
            // Keep the reason on one line: it becomes an environment variable.
            let reason = reason.replace(['\n', '\r'], " ");
            println!("cargo:rustc-env=SUPERPACKET_DPDK_PEER_MISSING={reason}");
            if !reason.starts_with("libdpdk not found") {
                println!("cargo:warning=DPDK peer not built: {reason}");
            }
        }
    }
}

/// How to get libdpdk, for the "not found" reasons.
const INSTALL: &str = "apt-get install dpdk-dev pkg-config, then rebuild (touch build.rs)";

/// Runs `pkg-config ARGS libdpdk`; its stdout on success.
fn pkg_config(args: &[&str]) -> Result<String, String> {
    let out = Command::new("pkg-config")
        .args(args)
        .arg("libdpdk")
        .output()
        .map_err(|e| format!("libdpdk not found: cannot run pkg-config ({e}): {INSTALL}"))?;
    if !out.status.success() {
        return Err(format!("libdpdk not found by pkg-config: {INSTALL}"));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Compiles the peer into OUT_DIR; the reason it was not built otherwise.
fn build_dpdk_peer() -> Result<PathBuf, String> {
    pkg_config(&["--exists"])?;
    let cflags = pkg_config(&["--cflags"])?;
    let libs = pkg_config(&["--libs"])?;
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").ok_or("OUT_DIR not set")?);
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").ok_or("CARGO_MANIFEST_DIR not set")?);
    let source = manifest.join(SOURCE);
    let exe = out_dir.join("dpdk_peer");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    // pkg-config's flags come first so that our -march (native: the peer runs
    // where it is built) overrides the one libdpdk.pc carries.
    let out = Command::new(&cc)
        .args(cflags.split_whitespace())
        .args(["-O3", "-march=native", "-std=gnu11", "-Wall", "-Wextra", "-DALLOW_EXPERIMENTAL_API", "-o"])
        .arg(&exe)
        .arg(&source)
        .args(libs.split_whitespace())
        .output()
        .map_err(|e| format!("cannot run the C compiler `{cc}`: {e}"))?;
    if !out.status.success() {
        return Err(format!("compiling {SOURCE} failed: {}", first_error(&out.stderr)));
    }
    if !Path::new(&exe).is_file() {
        return Err(format!("compiling {SOURCE} produced no {}", exe.display()));
    }
    Ok(exe)
}

/// The compiler's first error line (or its first line of output).
fn first_error(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.clone().next().unwrap_or("(no output)");
    lines.find(|l| l.contains("error")).unwrap_or(first).to_string()
}
