//! Datagrams in batches: up to [`BATCH`] queries read with one `recvmmsg(2)`
//! (nix) and their replies written with one `sendmmsg(2)` (rustix), so the
//! system calls are paid once per batch.

use nix::sys::socket::{recvmmsg, MsgFlags, MultiHeaders, SockaddrStorage};
use rustix::net::addr::SocketAddrArg;
use rustix::net::{sendmmsg, MMsgHdr, SendAncillaryBuffer, SendFlags, SocketAddrAny};
use std::io::{self, IoSlice, IoSliceMut};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{BorrowedFd, RawFd};

/// Datagrams read or written per system call.
pub(in crate::server) const BATCH: usize = 32;
/// The largest UDP payload.
const SLOT: usize = 65_535;

/// The datagrams of one `recvmmsg`, in slots reused from call to call
/// (allocated once per reader thread: 2 MiB of address space, touched
/// only as far as datagrams fill it).
pub(super) struct Received {
    /// Kernel-facing headers. Each points at its own address slot for good
    /// (`recvmmsg` sets only the buffers), and the address length the
    /// kernel leaves in it is the socket family's, the same on every call.
    /// Only the slots of received datagrams are read back, and the kernel
    /// wrote each of those (family included).
    headers: MultiHeaders<SockaddrStorage>,
    slots: Vec<u8>,
    /// (slot, length, sender) of each datagram read by the last call.
    datagrams: Vec<(usize, usize, SocketAddr)>,
}

impl Received {
    pub(super) fn new() -> Self {
        Received {
            headers: MultiHeaders::preallocate(BATCH, None),
            slots: vec![0; BATCH * SLOT],
            datagrams: Vec::with_capacity(BATCH),
        }
    }

    /// Reads the datagrams queued on `fd`, up to [`BATCH`], without waiting:
    /// `WouldBlock` when there are none. Returns how many were read.
    pub(super) fn read(&mut self, fd: RawFd) -> io::Result<usize> {
        self.datagrams.clear();
        let mut buffers: Vec<[IoSliceMut<'_>; 1]> = self
            .slots
            .chunks_exact_mut(SLOT)
            .map(|slot| [IoSliceMut::new(slot)])
            .collect();
        let read = recvmmsg(
            fd,
            &mut self.headers,
            buffers.iter_mut(),
            MsgFlags::MSG_DONTWAIT,
            None,
        )?;
        for (slot, message) in read.enumerate() {
            // A datagram always has a sender; one without (never seen) is dropped.
            if let Some(peer) = message.address.as_ref().and_then(socket_addr) {
                self.datagrams.push((slot, message.bytes, peer));
            }
        }
        Ok(self.datagrams.len())
    }

    /// The datagrams of the last [`Received::read`]: (bytes, sender).
    pub(super) fn iter(&self) -> impl Iterator<Item = (&[u8], SocketAddr)> + '_ {
        self.datagrams.iter().map(|&(slot, len, peer)| {
            let start = slot * SLOT;
            (&self.slots[start..start + len], peer)
        })
    }
}

/// Replies waiting to be written with one `sendmmsg`.
pub(super) struct Outgoing {
    replies: Vec<(Vec<u8>, SocketAddr)>,
}

impl Outgoing {
    pub(super) fn new() -> Self {
        Outgoing {
            replies: Vec::with_capacity(BATCH),
        }
    }

    pub(super) fn push(&mut self, reply: Vec<u8>, peer: SocketAddr) {
        self.replies.push((reply, peer));
    }

    pub(super) fn len(&self) -> usize {
        self.replies.len()
    }

    pub(super) fn clear(&mut self) {
        self.replies.clear();
    }

    /// The address of the reply at `i` (for logging a failed send).
    pub(super) fn peer(&self, i: usize) -> SocketAddr {
        self.replies[i].1
    }

    /// Writes the replies from `from` on with one call: how many the kernel
    /// took (from `from`). An error means the one at `from` was not sent
    /// (`WouldBlock`: the socket buffer is full, try again when writable).
    pub(super) fn write(&self, fd: BorrowedFd<'_>, from: usize) -> io::Result<usize> {
        let rest = &self.replies[from..];
        let peers: Vec<SocketAddrAny> = rest.iter().map(|(_, peer)| peer.as_any()).collect();
        let buffers: Vec<[IoSlice<'_>; 1]> = rest
            .iter()
            .map(|(reply, _)| [IoSlice::new(reply)])
            .collect();
        let mut no_control: Vec<SendAncillaryBuffer<'_, '_, '_>> = rest
            .iter()
            .map(|_| SendAncillaryBuffer::default())
            .collect();
        let mut messages: Vec<MMsgHdr<'_>> = peers
            .iter()
            .zip(&buffers)
            .zip(&mut no_control)
            .map(|((peer, buffer), control)| MMsgHdr::new_with_addr(peer, buffer, control))
            .collect();
        Ok(sendmmsg(fd, &mut messages, SendFlags::DONTWAIT)?)
    }
}

fn socket_addr(address: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = address.as_sockaddr_in() {
        return Some(SocketAddr::V4(SocketAddrV4::from(*v4)));
    }
    address
        .as_sockaddr_in6()
        .map(|v6| SocketAddr::V6(SocketAddrV6::from(*v6)))
}
