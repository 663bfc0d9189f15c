//! The virtio-net control virtqueue (virtio 1.2, 5.1.6.5) for a frontend
//! that hands it to the backend: queue `2N` of a device with `N` queue
//! pairs.
//!
//! The frontends that exist keep it to themselves: DPDK 22.11's
//! virtio-user answers the guest's commands in the frontend and strips
//! `VIRTIO_NET_F_CTRL_VQ` before `SET_FEATURES`; QEMU serves it in
//! `virtio_net_handle_ctrl` (its vhost-user net client starts no control
//! queue in the backend: only vhost-vdpa with a shadow control queue
//! does); cloud-hypervisor serves it in a thread of the VMM. DPDK and QEMU
//! turn `VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET` into `SET_VRING_ENABLE` of each
//! pair (cloud-hypervisor only acks it). A frontend may still hand it
//! over (the vhost-user protocol does
//! not forbid it); the port then answers here:
//! `VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET` with `1..=N` pairs is taken
//! ([`Command::PairsSet`]), everything else is refused with
//! `VIRTIO_NET_ERR` (the port offers no other feature that brings
//! commands: no `CTRL_RX`, `CTRL_VLAN`, `CTRL_MAC_ADDR`, `GUEST_ANNOUNCE`,
//! `CTRL_GUEST_OFFLOADS`).
//!
//! Like [`super::virtq`], nothing a guest writes makes this panic: a
//! broken chain is a [`QueueFault`] and the caller stops the queue.

use super::virtq::{QueueFault, next_head};
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestMemory};

/// `VIRTIO_NET_CTRL_MQ`.
pub const CLASS_MQ: u8 = 4;
/// `VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET`.
pub const MQ_VQ_PAIRS_SET: u8 = 0;
/// `VIRTIO_NET_OK`.
pub const ACK_OK: u8 = 0;
/// `VIRTIO_NET_ERR`.
pub const ACK_ERR: u8 = 1;

/// Command bytes (class, command, data) read from one chain; longer
/// commands are refused.
const MAX_COMMAND: usize = 64;

/// What one command asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Use the first `n` queue pairs (acked `VIRTIO_NET_OK`).
    PairsSet(u16),
    /// Refused (acked `VIRTIO_NET_ERR`): class and command as read (0 for
    /// bytes that were missing).
    Refused {
        /// `class` of `struct virtio_net_ctrl`.
        class: u8,
        /// `command`.
        command: u8,
    },
}

/// Decodes the device-readable bytes of one command for a device of
/// `max_pairs` queue pairs.
pub fn decode(bytes: &[u8], max_pairs: u16) -> Command {
    let (class, command) = (bytes.first().copied().unwrap_or(0), bytes.get(1).copied().unwrap_or(0));
    if class == CLASS_MQ && command == MQ_VQ_PAIRS_SET && bytes.len() == 4 {
        let n = u16::from_le_bytes([bytes[2], bytes[3]]);
        if (1..=max_pairs).contains(&n) {
            return Command::PairsSet(n);
        }
    }
    Command::Refused { class, command }
}

/// Answers the next command of control queue `q`: reads it, writes the
/// ack byte (the first byte of the first device-writable buffer) and puts
/// the chain in the used ring. `Ok(None)` when the guest made none
/// available. The caller notifies the guest.
///
/// # Errors
/// A [`QueueFault`]: a broken chain, a buffer outside guest memory, a
/// chain without a writable buffer or with a readable one after it.
pub fn serve_one<M: GuestMemory>(q: &mut Queue, mem: &M, max_pairs: u16) -> Result<Option<Command>, QueueFault> {
    let Some(chain) = next_head(q, mem)? else { return Ok(None) };
    let head = chain.head_index();
    let mut cmd = [0u8; MAX_COMMAND];
    let (mut len, mut too_long, mut ack_at, mut descs, mut last_next) = (0usize, false, None, 0usize, true);
    for d in chain {
        descs += 1;
        last_next = d.has_next();
        let n = d.len() as usize;
        let perm = if d.is_write_only() { vm_memory::Permissions::Write } else { vm_memory::Permissions::Read };
        if n > 0 && !mem.check_range(d.addr(), n, perm) {
            return Err(QueueFault::Address);
        }
        if d.is_write_only() {
            if ack_at.is_none() && n > 0 {
                ack_at = Some(d.addr());
            }
            continue;
        }
        // Readable after writable: not a `struct virtio_net_ctrl`.
        if ack_at.is_some() {
            return Err(QueueFault::Direction);
        }
        let take = n.min(MAX_COMMAND - len);
        too_long |= take < n;
        if take > 0 {
            mem.read_slice(&mut cmd[len..len + take], d.addr()).map_err(|_| QueueFault::Address)?;
            len += take;
        }
    }
    if descs == 0 || last_next {
        return Err(QueueFault::Chain);
    }
    let ack_at = ack_at.ok_or(QueueFault::Direction)?;
    let command =
        if too_long { Command::Refused { class: cmd[0], command: cmd[1] } } else { decode(&cmd[..len], max_pairs) };
    let ack = if matches!(command, Command::PairsSet(_)) { ACK_OK } else { ACK_ERR };
    mem.write_slice(&[ack], ack_at).map_err(|_| QueueFault::Address)?;
    q.add_used(mem, head, 1).map_err(|_| QueueFault::Address)?;
    Ok(Some(command))
}
