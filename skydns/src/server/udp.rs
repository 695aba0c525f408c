//! DNS over UDP: reader threads, each with its own single-threaded runtime.
//!
//! A reader answers what memory can inline and spawns a task for each
//! request that waits on upstream servers, so a forward never holds up the
//! receive loop. On stop it reads no more and lets its forwards in flight
//! finish (within [`DRAIN_LIMIT`], or until abort) so that their replies
//! are still sent.

use crate::handler::{Handler, Outcome, Transport};
use crate::lifecycle::DRAIN_LIMIT;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Starts UDP reader `i`: a thread with its own runtime reading a clone of
/// `socket` until `stop`.
pub(super) fn reader(
    i: usize,
    socket: &std::net::UdpSocket,
    handler: Handler,
    stop: CancellationToken,
    abort: CancellationToken,
) -> io::Result<std::thread::JoinHandle<()>> {
    let socket = socket.try_clone()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(format!("udp-{i}"))
        .spawn(move || {
            runtime.block_on(async move {
                match UdpSocket::from_std(socket) {
                    Ok(socket) => serve(Arc::new(socket), handler, stop, abort).await,
                    Err(error) => tracing::error!(%error, "UDP reader cannot use its socket"),
                }
            });
            // Forwards still waiting past the drain are dropped with the runtime.
        })
}

async fn serve(
    socket: Arc<UdpSocket>,
    handler: Handler,
    stop: CancellationToken,
    abort: CancellationToken,
) {
    let forwards = TaskTracker::new();
    let mut buf = vec![0u8; 65535];
    loop {
        let (len, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            received = socket.recv_from(&mut buf) => match received {
                Ok(r) => r,
                Err(error) => {
                    // e.g. ICMP port unreachable reported on a later recv.
                    tracing::debug!(%error, "udp receive failed");
                    continue;
                }
            },
        };
        match handler.handle(&buf[..len], Transport::Udp) {
            Outcome::Done(Some(reply)) => send(&socket, &reply, peer).await,
            Outcome::Done(None) => {}
            Outcome::Pending(pending) => {
                // Upstream work must not hold up the receive loop.
                let (socket, handler) = (socket.clone(), handler.clone());
                forwards.spawn(async move {
                    if let Some(reply) = handler.resolve(*pending).await {
                        send(&socket, &reply, peer).await;
                    }
                });
            }
        }
    }
    forwards.close();
    tokio::select! {
        _ = forwards.wait() => {}
        _ = abort.cancelled() => {}
        _ = tokio::time::sleep(DRAIN_LIMIT) => {}
    }
}

async fn send(socket: &UdpSocket, reply: &[u8], peer: SocketAddr) {
    if let Err(error) = socket.send_to(reply, peer).await {
        tracing::debug!(%error, %peer, "udp send failed");
    }
}
