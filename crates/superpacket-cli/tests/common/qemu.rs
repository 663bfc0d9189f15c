//! A QEMU guest for the tests: a Debian kernel and an initramfs of
//! busybox, the virtio-net modules and the test's own programs, booted
//! under TCG with its serial console in a file.
//!
//! `scripts/qemu-guest.sh` installs QEMU and busybox and extracts the
//! kernel package into `target/qemu-guest` (or `$SUPERPACKET_QEMU_GUEST_DIR`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The virtio-net modules of the Debian kernel, in the order `insmod`
/// needs them (each depends only on those before it).
pub const VIRTIO_NET_MODULES: [&str; 8] = [
    "drivers/virtio/virtio_ring",
    "drivers/virtio/virtio",
    "drivers/virtio/virtio_pci_legacy_dev",
    "drivers/virtio/virtio_pci_modern_dev",
    "drivers/virtio/virtio_pci",
    "net/core/failover",
    "drivers/net/net_failover",
    "drivers/net/virtio_net",
];

/// Where `scripts/qemu-guest.sh` put the extracted kernel package.
pub fn guest_dir() -> PathBuf {
    std::env::var_os("SUPERPACKET_QEMU_GUEST_DIR")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/qemu-guest"), PathBuf::from)
}

/// An extracted Debian kernel package: the kernel image and its modules.
#[derive(Debug)]
pub struct GuestKernel {
    pub vmlinuz: PathBuf,
    /// `lib/modules/VERSION/kernel`.
    pub modules: PathBuf,
}

impl GuestKernel {
    /// The kernel under [`guest_dir`]; `Err` says what is missing.
    pub fn find() -> Result<GuestKernel, String> {
        let root = guest_dir().join("k");
        let first = |dir: &Path, prefix: &str| -> Option<PathBuf> {
            let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
                .ok()?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(prefix)))
                .collect();
            found.sort();
            found.pop()
        };
        let vmlinuz = first(&root.join("boot"), "vmlinuz-")
            .ok_or_else(|| format!("no kernel in {}", root.join("boot").display()))?;
        let version =
            first(&root.join("lib/modules"), "").ok_or_else(|| format!("no modules in {}", root.display()))?;
        Ok(GuestKernel { vmlinuz, modules: version.join("kernel") })
    }
}

/// An initramfs in the kernel's `newc` cpio format (uncompressed, which
/// the kernel takes as it is).
#[derive(Default)]
pub struct Initramfs {
    bytes: Vec<u8>,
    inode: u32,
}

impl Initramfs {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.inode += 1;
        let fields = [self.inode, mode, 0, 0, 1, 0, data.len() as u32, 0, 0, 0, 0, name.len() as u32 + 1, 0];
        let mut header = String::from("070701");
        for f in fields {
            header.push_str(&format!("{f:08x}"));
        }
        self.bytes.extend_from_slice(header.as_bytes());
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    /// Header and name, then data, each start on a 4-byte boundary.
    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }

    /// A directory (its parents must have been added before).
    pub fn dir(&mut self, name: &str) {
        self.entry(name, 0o040_755, &[]);
    }

    /// A regular file with permission bits `perm`.
    pub fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.entry(name, 0o100_000 | perm, data);
    }

    /// A host file, read now.
    pub fn copy(&mut self, name: &str, perm: u32, from: &Path) {
        let data = std::fs::read(from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        self.file(name, perm, &data);
    }

    /// The archive with its trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[]);
        self.bytes
    }
}

/// Compiles a C test program statically (`gcc -static -O2`); the guest
/// has no C library of its own.
pub fn compile_static(source: &Path, out: &Path) {
    let o = Command::new("gcc")
        .args(["-static", "-O2", "-Wall", "-Werror", "-o"])
        .arg(out)
        .arg(source)
        .output()
        .unwrap_or_else(|e| panic!("gcc: {e} (the guest helper needs gcc and the static C library)"));
    assert!(o.status.success(), "gcc {}: {}", source.display(), String::from_utf8_lossy(&o.stderr));
}

/// A running `qemu-system-x86_64` whose serial console goes to a file;
/// killed (by PID) on drop if it still runs.
pub struct Qemu {
    child: Option<Child>,
    console: PathBuf,
}

impl Qemu {
    /// Starts QEMU with `args`, its standard output and error (the serial
    /// console with `-serial stdio`) into `console`.
    pub fn start(args: &[String], console: &Path) -> Qemu {
        let out = std::fs::File::create(console).unwrap();
        let child = Command::new("qemu-system-x86_64")
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("qemu-system-x86_64: {e}"));
        Qemu { child: Some(child), console: console.to_path_buf() }
    }

    /// What the console showed so far.
    pub fn console(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.console).unwrap_or_default()).into_owned()
    }

    /// Waits until `needle` is on the console; `Err` with the console if
    /// QEMU exited first or `timeout` passed (QEMU is then killed).
    pub fn wait_for(&mut self, needle: &str, timeout: Duration) -> Result<String, String> {
        let t0 = Instant::now();
        loop {
            let out = self.console();
            if out.contains(needle) {
                return Ok(out);
            }
            if let Some(Ok(Some(st))) = self.child.as_mut().map(Child::try_wait) {
                return Err(format!("QEMU exited ({st}) before `{needle}`:\n{out}"));
            }
            if t0.elapsed() > timeout {
                self.kill();
                return Err(format!("no `{needle}` after {timeout:?} (QEMU killed):\n{out}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits up to `timeout` for QEMU to exit (the guest powers off), then
    /// kills it; its exit status if it exited by itself.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let t0 = Instant::now();
        while t0.elapsed() < timeout {
            if let Some(Ok(Some(st))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.kill();
        None
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            // Child::kill sends SIGKILL to this child's PID only.
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Qemu {
    fn drop(&mut self) {
        self.kill();
    }
}
