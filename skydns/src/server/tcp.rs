//! DNS over TCP: one task per connection, and the [`Connections`] table that
//! bounds them. When the table is full, a newcomer takes the place of the
//! connection idle longest (RFC 7766 §6.2.3). On stop, a connection in the
//! middle of a query finishes its reply.

use super::TcpLimits;
use crate::handler::{Handler, Transport};
use crate::lifecycle::DRAIN_LIMIT;
use bytes::Buf;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// The open TCP connections across every listener, each idle or busy.
pub(super) struct Connections {
    max: usize,
    epoch: Instant,
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Entry>>>,
}

/// One connection's place in the table.
struct Entry {
    /// Milliseconds since the table's epoch at which it became idle, plus
    /// one; [`BUSY`] while a query is being read, answered or written.
    idle_since: AtomicU64,
    /// Cancelled to close the connection the next time it is idle.
    close: CancellationToken,
}

const BUSY: u64 = 0;

/// What became of a new connection.
pub(super) enum Admission {
    /// It has a free place.
    Admitted(Place),
    /// It has the place of the connection idle longest, which is closed.
    MadeRoom(Place),
    /// Every place is busy: it is closed.
    Full,
}

impl Connections {
    pub(super) fn new(max: usize) -> Arc<Self> {
        Arc::new(Connections {
            max,
            epoch: Instant::now(),
            next_id: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A place for a new connection (idle from now), if one can be had.
    pub(super) fn admit(self: &Arc<Self>) -> Admission {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let entry = Arc::new(Entry {
            idle_since: AtomicU64::new(self.now()),
            close: CancellationToken::new(),
        });
        let mut open = self.lock();
        let made_room = if open.len() < self.max {
            false
        } else {
            let idle = open
                .iter()
                .map(|(id, e)| (*id, e.idle_since.load(Ordering::Acquire)));
            let Some(victim) = longest_idle(idle) else {
                return Admission::Full;
            };
            if let Some(closed) = open.remove(&victim) {
                closed.close.cancel();
            }
            true
        };
        open.insert(id, entry.clone());
        let place = Place {
            id,
            entry,
            table: self.clone(),
        };
        if made_room {
            Admission::MadeRoom(place)
        } else {
            Admission::Admitted(place)
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Entry>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The connection idle longest among `(id, idle_since)` pairs ([`BUSY`]
/// ones are not idle); the lowest id among equals.
fn longest_idle(connections: impl Iterator<Item = (u64, u64)>) -> Option<u64> {
    connections
        .filter(|(_, since)| *since != BUSY)
        .min_by_key(|(id, since)| (*since, *id))
        .map(|(id, _)| id)
}

/// A connection's place; given back when dropped.
pub(super) struct Place {
    id: u64,
    entry: Arc<Entry>,
    table: Arc<Connections>,
}

impl Place {
    fn busy(&self) {
        self.entry.idle_since.store(BUSY, Ordering::Release);
    }

    fn idle(&self) {
        let now = self.table.now();
        self.entry.idle_since.store(now, Ordering::Release);
    }

    /// Cancelled when the table closes this connection to make room.
    fn closed(&self) -> &CancellationToken {
        &self.entry.close
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut open = self.table.lock();
        // Gone already if it was closed to make room.
        if open
            .get(&self.id)
            .is_some_and(|e| Arc::ptr_eq(e, &self.entry))
        {
            open.remove(&self.id);
        }
    }
}

/// Accepts on `listener` until `stop`, then lets the connections finish
/// the queries they are in (at most [`DRAIN_LIMIT`], or until `abort`).
pub(super) async fn serve(
    listener: TcpListener,
    handler: Handler,
    limits: TcpLimits,
    table: Arc<Connections>,
    stop: CancellationToken,
    abort: CancellationToken,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let place = match table.admit() {
                        Admission::Admitted(place) => place,
                        Admission::MadeRoom(place) => {
                            handler.metrics().limit("tcp_idle_closed");
                            tracing::debug!(%peer, "tcp connection limit reached; closed the connection idle longest");
                            place
                        }
                        Admission::Full => {
                            handler.metrics().limit("tcp_connections");
                            tracing::debug!(%peer, "tcp connection limit reached, every connection busy; closing");
                            continue;
                        }
                    };
                    connections.spawn(serve_connection(stream, handler.clone(), limits, place, stop.clone()));
                }
                Err(error) => {
                    tracing::warn!(%error, "tcp accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let drained = async { while connections.join_next().await.is_some() {} };
    tokio::select! {
        _ = drained => {}
        _ = abort.cancelled() => {}
        _ = tokio::time::sleep(DRAIN_LIMIT) => tracing::warn!("tcp replies still in flight after the drain limit; closing"),
    }
    connections.shutdown().await;
}

async fn serve_connection(
    mut stream: TcpStream,
    handler: Handler,
    limits: TcpLimits,
    place: Place,
    stop: CancellationToken,
) {
    let mut buf = Vec::new();
    let client = stream.peer_addr().ok();
    loop {
        place.idle();
        let len = tokio::select! {
            _ = stop.cancelled() => return,
            _ = place.closed().cancelled() => return,
            len = tokio::time::timeout(limits.idle, stream.read_u8()) => match len {
                Ok(Ok(high)) => high,
                _ => return,
            },
        };
        place.busy();
        let len = match tokio::time::timeout(limits.read, stream.read_u8()).await {
            Ok(Ok(low)) => usize::from(u16::from_be_bytes([len, low])),
            _ => return,
        };
        buf.resize(len, 0);
        match tokio::time::timeout(limits.read, stream.read_exact(&mut buf)).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
        let Some(reply) = handler
            .handle_async_from(&buf, Transport::Tcp, client)
            .await
        else {
            continue;
        };
        let Ok(reply_len) = u16::try_from(reply.len()) else {
            return;
        };
        // Length and reply in one vectored write, without copying the reply:
        // a client that never reads holds one copy of it, not two.
        let length = reply_len.to_be_bytes();
        let mut framed = Buf::chain(&length[..], &reply[..]);
        match tokio::time::timeout(limits.write, stream.write_all_buf(&mut framed)).await {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_idle_longest_makes_room_and_busy_ones_never_do() {
        assert_eq!(
            longest_idle([(1, 50), (2, 10), (3, 30)].into_iter()),
            Some(2)
        );
        assert_eq!(longest_idle([(1, BUSY), (2, 10)].into_iter()), Some(2));
        assert_eq!(longest_idle([(1, BUSY), (2, BUSY)].into_iter()), None);
        assert_eq!(longest_idle([(7, 5), (3, 5)].into_iter()), Some(3));
    }

    #[test]
    fn a_full_table_closes_its_oldest_idle_place_and_refuses_when_all_are_busy() {
        let table = Connections::new(2);
        let Admission::Admitted(first) = table.admit() else {
            panic!("room")
        };
        std::thread::sleep(Duration::from_millis(3));
        let Admission::Admitted(second) = table.admit() else {
            panic!("room")
        };
        // Full: the first (idle longest) is closed for the third.
        let Admission::MadeRoom(third) = table.admit() else {
            panic!("made room")
        };
        assert!(first.closed().is_cancelled());
        assert!(!second.closed().is_cancelled());
        drop(first); // its task ends; the third's place stays
        assert_eq!(table.lock().len(), 2);
        second.busy();
        third.busy();
        assert!(matches!(table.admit(), Admission::Full));
        third.idle();
        assert!(matches!(table.admit(), Admission::MadeRoom(_)));
        assert!(third.closed().is_cancelled());
    }

    /// A connection that ends gives its place back: the next client is
    /// admitted without closing anyone.
    #[test]
    fn a_place_is_given_back_when_its_connection_ends() {
        let table = Connections::new(1);
        let Admission::Admitted(first) = table.admit() else {
            panic!("room")
        };
        drop(first);
        assert_eq!(table.lock().len(), 0);
        assert!(matches!(table.admit(), Admission::Admitted(_)));
    }
}
