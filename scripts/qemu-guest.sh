#!/usr/bin/env bash
# What the QEMU guest test (crates/superpacket-cli/tests/vhost_user_qemu.rs,
# run by scripts/test.sh) and docs/topology.md's QEMU example need, on
# Debian 12 as root or with sudo: QEMU, busybox-static, gcc (the guest helper
# is a static C program) and a Debian kernel package extracted into
# target/qemu-guest/k (or $SUPERPACKET_QEMU_GUEST_DIR/k). The kernel is
# fetched once; a later run finds it and does nothing.
# Usage: scripts/qemu-guest.sh
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

need=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
# The static build: /bin/busybox is copied into the guest, which has no C library.
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
if [ ${#need[@]} -gt 0 ]; then
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

dir=${SUPERPACKET_QEMU_GUEST_DIR:-target/qemu-guest}
if ls "$dir"/k/boot/vmlinuz-* >/dev/null 2>&1; then
    echo "guest kernel: $(ls "$dir"/k/boot/vmlinuz-*)"
    exit 0
fi
mkdir -p "$dir"
# linux-image-amd64 depends on the current linux-image-6.1.0-N-amd64.
kernel_package() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }'; }
pkg=$(kernel_package)
# A machine whose packages were all there may have no apt lists yet.
[ -n "$pkg" ] || { as_root apt-get update -qq && pkg=$(kernel_package); }
[ -n "$pkg" ] || { echo "no linux-image-amd64 in the apt lists (apt-get update?)" >&2; exit 2; }
(cd "$dir" && rm -f linux-image-*.deb && apt-get download "$pkg" 2>/dev/null)
# Only the kernel and the virtio-net modules are kept (the package is 400 MB
# extracted); the list is VIRTIO_NET_MODULES of tests/common/qemu.rs.
rm -rf "$dir/x" && dpkg -x "$dir"/linux-image-*.deb "$dir/x"
rm -f "$dir"/linux-image-*.deb
mkdir -p "$dir/k/boot"
cp "$dir"/x/boot/vmlinuz-* "$dir/k/boot/"
for m in drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_legacy_dev \
    drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci net/core/failover \
    drivers/net/net_failover drivers/net/virtio_net; do
    src=$(ls "$dir"/x/lib/modules/*/kernel/"$m".ko)
    dst="$dir/k/${src#"$dir"/x/}"
    mkdir -p "$(dirname "$dst")" && cp "$src" "$dst"
done
rm -rf "$dir/x"
echo "guest kernel: $(ls "$dir"/k/boot/vmlinuz-*)"
