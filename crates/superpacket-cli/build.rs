//! Build script: compiles the DPDK peer of `superpacket bench peers`
//! (`peers/dpdk/dpdk_peer.c`) when libdpdk is installed (Debian: `dpdk-dev`).
//!
//! On success the program's path is exported as `SUPERPACKET_DPDK_PEER`;
//! otherwise `SUPERPACKET_DPDK_PEER_MISSING` says why. This script never fails
//! the build: without DPDK the crate builds, and `bench peers` builds the
//! peer itself at run time once libdpdk is there (same code:
//! `src/bench/peers/dpdk_build.rs`), or says why it is missing.

use std::env;
use std::path::PathBuf;

#[path = "src/bench/peers/dpdk_build.rs"]
mod dpdk_build;

const SOURCE: &str = "peers/dpdk/dpdk_peer.c";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/bench/peers/dpdk_build.rs");
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=SUPERPACKET_PKG_CONFIG");
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

/// Compiles the peer into OUT_DIR; the reason it was not built otherwise.
fn build_dpdk_peer() -> Result<PathBuf, String> {
    let flags = dpdk_build::dpdk_flags(&dpdk_build::pkg_config_program())?;
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").ok_or("OUT_DIR not set")?);
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").ok_or("CARGO_MANIFEST_DIR not set")?);
    let exe = out_dir.join("dpdk_peer");
    dpdk_build::compile(&dpdk_build::cc_program(), &flags, &manifest.join(SOURCE), &exe)?;
    Ok(exe)
}
