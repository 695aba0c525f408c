//! Talking to upstream nameservers: relaying queries and internal lookups.
//!
//! [`Upstreams::relay`] sends a client's request unchanged to the upstream
//! servers over the client's transport, starting at a chosen server and
//! failing over to the next one (n+1 attempts in all, each bounded by the
//! read timeout), and returns the first reply that answers the request: a
//! response that parses, with the request's ID and question (name compared
//! case-insensitively, type and class). Anything else (a spoofed answer for
//! another name, garbage with a guessed ID) is ignored while the exchange
//! waits for the real one, so it is never relayed or cached.
//! Identical requests in flight at the same time share one upstream
//! exchange ([`Coalescer`]). [`Upstreams::lookup`] is SkyDNS's internal
//! `Lookup`: a fresh UDP query for a CNAME or SRV target outside the domain.

use hickory_proto::op::{Edns, Message, MessageType, Query, ResponseCode};
use hickory_proto::rr::{Name, Record, RecordType};
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::oneshot;

/// The upstream nameservers and how to use them.
#[derive(Clone, Debug)]
pub(crate) struct Upstreams {
    servers: Arc<[SocketAddr]>,
    timeout: Duration,
    coalescer: Coalescer,
    failures: Arc<FailureLog>,
}

impl Upstreams {
    /// Upstreams `servers`, each exchange bounded by `timeout`.
    pub(crate) fn new(servers: Vec<SocketAddr>, timeout: Duration) -> Self {
        Upstreams {
            servers: servers.into(),
            timeout,
            coalescer: Coalescer::default(),
            failures: Arc::default(),
        }
    }

    /// Whether any server is configured.
    pub(crate) fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Number of servers.
    pub(crate) fn len(&self) -> usize {
        self.servers.len()
    }

    /// Relays `packet` (a client request) starting at server `first`,
    /// trying each server in turn, n+1 attempts in all. Identical requests
    /// in flight share the exchange; the reply carries the caller's ID.
    pub(crate) async fn relay(&self, packet: &[u8], first: usize, tcp: bool) -> Option<Vec<u8>> {
        if packet.len() < 12 {
            return None;
        }
        let id = [packet[0], packet[1]];
        let mut key = packet[2..].to_vec();
        key.push(u8::from(tcp));
        let mut reply = match self.coalescer.join(&key) {
            Turn::Follower(rx) => rx.await.ok().flatten()?,
            Turn::Leader => {
                // Followers are released even if this future is dropped.
                let mut leader = Leader {
                    coalescer: &self.coalescer,
                    key: &key,
                    reply: None,
                };
                leader.reply = self.attempts(packet, first, tcp).await;
                leader.reply.clone()?
            }
        };
        reply[..2].copy_from_slice(&id);
        Some(reply)
    }

    async fn attempts(&self, packet: &[u8], first: usize, tcp: bool) -> Option<Vec<u8>> {
        let query = Message::from_vec(packet).ok()?;
        let n = self.servers.len();
        for attempt in 0..=n {
            let server = self.servers[(first + attempt) % n];
            let result = if tcp {
                exchange_tcp(server, packet, &query, self.timeout).await
            } else {
                exchange_udp(server, packet, &query, self.timeout).await
            };
            match result {
                Ok(reply) => return Some(reply),
                Err(error) => tracing::debug!(%server, %error, "upstream exchange failed"),
            }
        }
        self.failures.failed(&self.servers);
        None
    }

    /// SkyDNS `Lookup`: a fresh UDP query for `name`/`qtype` with EDNS0
    /// (`bufsize`, `dnssec_ok`), first server chosen by the message ID.
    /// Only a NOERROR reply counts; its TTLs are set to `ttl`.
    pub(crate) async fn lookup(
        &self,
        name: &Name,
        qtype: RecordType,
        bufsize: u16,
        dnssec_ok: bool,
        ttl: u32,
    ) -> Option<Vec<Record>> {
        if self.servers.is_empty() {
            return None;
        }
        let mut query = Message::query();
        query.metadata.recursion_desired = true;
        query.queries.push(Query::query(name.clone(), qtype));
        let mut edns = Edns::new();
        edns.set_max_payload(bufsize.max(512));
        edns.set_dnssec_ok(dnssec_ok);
        query.edns = Some(edns);
        let packet = query.to_vec().ok()?;
        let first = usize::from(query.metadata.id) % self.servers.len();
        let reply = Message::from_vec(&self.attempts(&packet, first, false).await?).ok()?;
        if reply.metadata.response_code != ResponseCode::NoError {
            return None;
        }
        let mut answers = reply.answers;
        for r in &mut answers {
            r.ttl = ttl;
        }
        Some(answers)
    }
}

/// The smallest receive buffer of a UDP exchange; larger when the request
/// offers a larger EDNS size. (A 64 KiB buffer per waiting exchange was most
/// of the memory of a pile-up of forwards.)
const MIN_UDP_BUFFER: usize = 4_096;

/// One UDP exchange: waits for a reply to `query`, up to `timeout`.
async fn exchange_udp(
    server: SocketAddr,
    packet: &[u8],
    query: &Message,
    timeout: Duration,
) -> io::Result<Vec<u8>> {
    let local: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()
    .map_err(io::Error::other)?;
    let socket = UdpSocket::bind(local).await?;
    socket.connect(server).await?;
    socket.send(packet).await?;
    let offered = query
        .edns
        .as_ref()
        .map_or(0, |e| usize::from(e.max_payload()));
    let mut buf = vec![0u8; offered.max(MIN_UDP_BUFFER)];
    tokio::time::timeout(timeout, async {
        loop {
            let len = socket.recv(&mut buf).await?;
            if is_reply_to(&buf[..len], query) {
                return Ok(buf[..len].to_vec());
            }
        }
    })
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "upstream timed out"))?
}

/// One TCP exchange (length-prefixed), bounded by `timeout` overall.
async fn exchange_tcp(
    server: SocketAddr,
    packet: &[u8],
    query: &Message,
    timeout: Duration,
) -> io::Result<Vec<u8>> {
    tokio::time::timeout(timeout, async {
        let mut stream = TcpStream::connect(server).await?;
        let len = u16::try_from(packet.len()).map_err(io::Error::other)?;
        let mut framed = len.to_be_bytes().to_vec();
        framed.extend_from_slice(packet);
        stream.write_all(&framed).await?;
        let len = usize::from(stream.read_u16().await?);
        let mut reply = vec![0u8; len];
        stream.read_exact(&mut reply).await?;
        if !is_reply_to(&reply, query) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "reply does not match the query",
            ));
        }
        Ok(reply)
    })
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "upstream timed out"))?
}

/// Whether `reply` answers `query`: it parses, is a response, and carries
/// the query's ID and question (hickory compares names case-insensitively).
fn is_reply_to(reply: &[u8], query: &Message) -> bool {
    Message::from_vec(reply).is_ok_and(|r| {
        r.metadata.message_type == MessageType::Response
            && r.metadata.id == query.metadata.id
            && r.queries == query.queries
    })
}

/// How often failed forwards are logged: a dead upstream under load would
/// otherwise write one line per query (hundreds of thousands a minute).
const FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Logs failed forwards at most once per [`FAILURE_LOG_INTERVAL`], with
/// how many failed since the last line.
#[derive(Debug, Default)]
struct FailureLog {
    /// When the last line was written, and failures since.
    state: Mutex<(Option<std::time::Instant>, u64)>,
}

impl FailureLog {
    fn failed(&self, servers: &[SocketAddr]) {
        if let Some(failed) = self.count(std::time::Instant::now()) {
            tracing::warn!(
                ?servers,
                failed,
                "failure to forward request (count since the last such line, at most one per 10s)"
            );
        }
    }

    /// Counts one failure at `now`; `Some(failures since the last line)`
    /// when a line is due.
    fn count(&self, now: std::time::Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.1 += 1;
        let due = state
            .0
            .is_none_or(|last| now.duration_since(last) >= FAILURE_LOG_INTERVAL);
        due.then(|| {
            state.0 = Some(now);
            std::mem::take(&mut state.1)
        })
    }
}

/// Where a follower's reply goes.
type ReplySender = oneshot::Sender<Option<Vec<u8>>>;

/// Shares one upstream exchange among identical concurrent requests.
#[derive(Clone, Debug, Default)]
pub(crate) struct Coalescer {
    waiting: Arc<Mutex<HashMap<Vec<u8>, Vec<ReplySender>>>>,
}

/// Who does the exchange.
enum Turn {
    Leader,
    Follower(oneshot::Receiver<Option<Vec<u8>>>),
}

impl Coalescer {
    fn join(&self, key: &[u8]) -> Turn {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        match waiting.get_mut(key) {
            Some(followers) => {
                let (tx, rx) = oneshot::channel();
                followers.push(tx);
                Turn::Follower(rx)
            }
            None => {
                waiting.insert(key.to_vec(), Vec::new());
                Turn::Leader
            }
        }
    }

    fn finish(&self, key: &[u8], reply: Option<Vec<u8>>) {
        let followers = self
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key)
            .unwrap_or_default();
        for tx in followers {
            let _ = tx.send(reply.clone());
        }
    }
}

/// The exchange of a leader; on drop, hands its reply (or `None`) to the followers.
struct Leader<'a> {
    coalescer: &'a Coalescer,
    key: &'a [u8],
    reply: Option<Vec<u8>>,
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        self.coalescer.finish(self.key, self.reply.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_upstream::{echo_tcp_only, echo_udp, echo_udp_only, forging_udp};
    use hickory_proto::rr::RecordType;
    use std::sync::atomic::Ordering;

    fn query(id: u16, name: &str) -> Vec<u8> {
        let mut m = Message::query();
        m.metadata.id = id;
        m.queries
            .push(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
        m.to_vec().unwrap()
    }

    #[tokio::test]
    async fn identical_requests_in_flight_share_one_exchange() {
        let (addr, seen) = echo_udp(Duration::from_millis(200));
        let upstreams = Upstreams::new(vec![addr], Duration::from_secs(2));
        let (q1, q2, q3) = (
            query(7, "a.example.org."),
            query(9, "a.example.org."),
            query(8, "b.example.org."),
        );
        let (a, b, c) = tokio::join!(
            upstreams.relay(&q1, 0, false),
            upstreams.relay(&q2, 0, false),
            upstreams.relay(&q3, 0, false),
        );
        assert_eq!(
            seen.load(Ordering::SeqCst),
            2,
            "same question: one exchange; another question: its own"
        );
        assert_eq!(
            &a.unwrap()[..2],
            &7u16.to_be_bytes(),
            "each caller gets its own ID"
        );
        assert_eq!(&b.unwrap()[..2], &9u16.to_be_bytes());
        assert_eq!(&c.unwrap()[..2], &8u16.to_be_bytes());
    }

    #[tokio::test]
    async fn tcp_clients_are_relayed_over_tcp_only() {
        let (addr, _udp) = echo_tcp_only();
        let upstreams = Upstreams::new(vec![addr], Duration::from_millis(300));
        let q = query(0x4242, "tcp.example.org.");
        let reply = upstreams
            .relay(&q, 0, true)
            .await
            .expect("a TCP client's query is answered over TCP");
        assert_eq!(&reply[..2], &0x4242u16.to_be_bytes(), "the caller's ID");
        assert_ne!(reply[2] & 0x80, 0, "a response");
        assert_eq!(reply[3..], q[3..]);
        assert!(
            upstreams.relay(&q, 0, false).await.is_none(),
            "a UDP client's query must not go over TCP"
        );
    }

    #[tokio::test]
    async fn udp_clients_are_relayed_over_udp_only() {
        let (addr, _tcp) = echo_udp_only();
        let upstreams = Upstreams::new(vec![addr], Duration::from_millis(300));
        let q = query(0x0707, "udp.example.org.");
        let reply = upstreams
            .relay(&q, 0, false)
            .await
            .expect("a UDP client's query is answered over UDP");
        assert_eq!(&reply[..2], &0x0707u16.to_be_bytes(), "the caller's ID");
        assert_ne!(reply[2] & 0x80, 0, "a response");
        assert!(
            upstreams.relay(&q, 0, true).await.is_none(),
            "a TCP client's query must not go over UDP"
        );
    }

    #[tokio::test]
    async fn forged_and_garbage_replies_are_ignored_for_the_real_one() {
        let upstreams = Upstreams::new(vec![forging_udp(true)], Duration::from_secs(2));
        let q = query(0x5151, "www.Example.org.");
        let reply = upstreams.relay(&q, 0, false).await.expect("the real reply");
        let m = Message::from_vec(&reply).unwrap();
        assert_eq!(m.queries[0].name().to_ascii(), "www.Example.org.");
        assert!(m.answers.is_empty(), "not the forged 6.6.6.6: {m:?}");
    }

    #[tokio::test]
    async fn only_forged_replies_are_a_failure() {
        let upstreams = Upstreams::new(vec![forging_udp(false)], Duration::from_millis(200));
        let q = query(0x5252, "www.example.org.");
        assert_eq!(upstreams.relay(&q, 0, false).await, None);
    }

    #[test]
    fn failed_forwards_are_logged_once_per_ten_seconds_with_the_count() {
        let log = FailureLog::default();
        let start = std::time::Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        assert_eq!(log.count(at(0)), Some(1), "the first failure is logged");
        for ms in 1..=1_000 {
            assert_eq!(log.count(at(ms * 9)), None, "within 10 s of the last line");
        }
        assert_eq!(
            log.count(at(10_000)),
            Some(1_001),
            "10 s after the last line: one line counting every failure since"
        );
        assert_eq!(log.count(at(10_001)), None);
        assert_eq!(log.count(at(25_000)), Some(2));
    }
}
