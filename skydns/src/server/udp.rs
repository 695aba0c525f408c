//! DNS over UDP: reader threads, each with its own single-threaded runtime. A
//! reader takes queries in batches ([`batch`]), answers from memory inline and
//! spawns a task for each request that waits on upstreams. On stop it lets its
//! forwards finish (within [`DRAIN_LIMIT`]).

use crate::handler::{Handler, Outcome, Transport};
use crate::lifecycle::DRAIN_LIMIT;
#[cfg(test)]
pub(super) use batch::BATCH;
use batch::{Outgoing, Received};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod batch;

/// How long a batch's replies may wait for the rest of it to be answered:
/// once the first is this old, the replies so far are sent before the next
/// query is answered (so a reply also waits for the query being answered
/// when the limit passes).
const HOLD_LIMIT: Duration = Duration::from_micros(200);

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
    let fd = socket.as_raw_fd();
    let mut received = Received::new();
    let mut replies = Outgoing::new();
    loop {
        let read = tokio::select! {
            _ = stop.cancelled() => break,
            read = socket.async_io(Interest::READABLE, || received.read(fd)) => read,
        };
        if let Err(error) = read {
            // e.g. ICMP port unreachable reported on a later receive.
            tracing::debug!(%error, "udp receive failed");
            continue;
        }
        // One clock read per query: the end of one is the start of the next.
        let mut now = Instant::now();
        let mut first_reply: Option<Instant> = None;
        for (packet, peer) in received.iter() {
            let outcome = handler.handle_at(packet, Transport::Udp, Some(peer), now);
            now = Instant::now();
            match outcome {
                Outcome::Done(Some(reply)) => {
                    first_reply.get_or_insert(now);
                    replies.push(reply, peer);
                }
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
            if first_reply.is_some_and(|t| now - t >= HOLD_LIMIT) {
                // A slow answer (a signature to compute, say) in the batch
                // must not hold up the replies before it.
                send_all(&socket, &mut replies).await;
                first_reply = None;
            }
        }
        send_all(&socket, &mut replies).await;
        if !forwards.is_empty() {
            // A batch spends tokio's cooperative budget once, not once per
            // query: let the forwards waiting for their turn run.
            tokio::task::yield_now().await;
        }
    }
    forwards.close();
    tokio::select! {
        _ = forwards.wait() => {}
        _ = abort.cancelled() => {}
        _ = tokio::time::sleep(DRAIN_LIMIT) => {}
    }
}

/// Writes `replies` in as few calls as the socket allows, then empties it.
/// A reply the kernel refuses (its error is logged) does not hold up the rest.
async fn send_all(socket: &UdpSocket, replies: &mut Outgoing) {
    let fd = socket.as_fd();
    let mut from = 0;
    while from < replies.len() {
        match socket
            .async_io(Interest::WRITABLE, || replies.write(fd, from))
            .await
        {
            Ok(sent) => from += sent.max(1),
            Err(error) => {
                tracing::debug!(%error, peer = %replies.peer(from), "udp send failed");
                from += 1;
            }
        }
    }
    replies.clear();
}

async fn send(socket: &UdpSocket, reply: &[u8], peer: SocketAddr) {
    if let Err(error) = socket.send_to(reply, peer).await {
        tracing::debug!(%error, %peer, "udp send failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply the kernel refuses is stepped over, and the replies after it
    /// in the same batch are still written. Here the refused one goes to
    /// the broadcast address, which a socket without `SO_BROADCAST` may not
    /// send to (EACCES): `sendmmsg` writes the first reply and stops, the
    /// next call fails on the refused one, the third writes the last.
    #[tokio::test]
    async fn a_reply_the_kernel_refuses_does_not_hold_up_the_rest() {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let to = client.local_addr().unwrap();
        let mut replies = Outgoing::new();
        replies.push(b"first".to_vec(), to);
        replies.push(b"refused".to_vec(), "255.255.255.255:53".parse().unwrap());
        replies.push(b"last".to_vec(), to);
        let within = Duration::from_secs(10);
        tokio::time::timeout(within, send_all(&socket, &mut replies))
            .await
            .expect("send_all ends");
        assert_eq!(replies.len(), 0, "emptied");
        let mut got = Vec::new();
        let mut buf = [0; 16];
        for _ in 0..2 {
            let n = tokio::time::timeout(within, client.recv(&mut buf))
                .await
                .expect("a reply")
                .unwrap();
            got.push(buf[..n].to_vec());
        }
        assert_eq!(got, [b"first".to_vec(), b"last".to_vec()]);
        // Nothing more: the first reply was not written twice.
        let more = client.try_recv(&mut buf);
        assert!(more.is_err(), "one more datagram: {more:?}");
    }
}
