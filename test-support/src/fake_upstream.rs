//! Fake upstream DNS servers for skydns's forwarding tests: each echoes a query
//! back with the QR bit set, so a relay's reply can be told apart from the
//! query and carries its ID. Plain threads and std sockets, so they serve
//! whatever runtime (or none) the test runs its client on.

use crate::dead::SilentUpstream;
use hickory_proto::op::{Message, MessageType};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{RData, Record};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a fake upstream's thread waits for a query before it ends: far
/// longer than any test's pause between queries on a loaded machine, so an
/// upstream never goes away under a test that still uses it.
const IDLE: Duration = Duration::from_secs(600);

/// A UDP upstream on 127.0.0.1 that counts the queries it receives and
/// echoes each one after `delay`.
pub fn echo_udp(delay: Duration) -> (SocketAddr, Arc<AtomicUsize>) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    // The thread ends once no query came for a while.
    socket.set_read_timeout(Some(IDLE)).unwrap();
    let addr = socket.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((len, peer)) = socket.recv_from(&mut buf) {
            counter.fetch_add(1, Ordering::SeqCst);
            let mut reply = buf[..len].to_vec();
            reply[2] |= 0x80;
            let Ok(socket) = socket.try_clone() else {
                return;
            };
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let _ = socket.send_to(&reply, peer);
            });
        }
    });
    (addr, seen)
}

/// A UDP-only upstream: [`echo_udp`] with its port held over TCP by a
/// listener that never accepts (kept alive by the returned value).
pub fn echo_udp_only() -> (SocketAddr, TcpListener) {
    // The UDP port may be taken over TCP by another test: take another
    // (an unused echo thread ends after IDLE without queries).
    loop {
        let (addr, _) = echo_udp(Duration::ZERO);
        if let Ok(listener) = TcpListener::bind(addr) {
            return (addr, listener);
        }
    }
}

/// A TCP-only upstream on 127.0.0.1 echoing each length-prefixed query.
/// Its port is held over UDP by a socket that never answers (kept alive by
/// the returned value).
pub fn echo_tcp_only() -> (SocketAddr, SilentUpstream) {
    // The TCP port may be taken over UDP by another test: take another.
    let (listener, addr, mute) = loop {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        if let Ok(mute) = SilentUpstream::at(addr) {
            break (listener, addr, mute);
        }
    };
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut len = [0u8; 2];
            let mut msg = Vec::new();
            let read = stream.read_exact(&mut len).and_then(|()| {
                msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
                stream.read_exact(&mut msg)
            });
            if read.is_ok() {
                msg[2] |= 0x80;
                let _ = stream.write_all(&len);
                let _ = stream.write_all(&msg);
            }
        }
    });
    (addr, mute)
}

/// A UDP upstream that answers each query first with a forged reply (the
/// query's ID, QR set, but the question `evil.attacker.net. A` and an
/// answer 6.6.6.6), then with garbage carrying the query's ID, and then,
/// if `honest`, with the echoed query.
pub fn forging_udp(honest: bool) -> SocketAddr {
    use hickory_proto::op::{Message, MessageType, OpCode, Query};
    use hickory_proto::rr::{rdata::A, Name, RData, Record, RecordType};
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(IDLE)).unwrap();
    let addr = socket.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((len, peer)) = socket.recv_from(&mut buf) {
            let id = u16::from_be_bytes([buf[0], buf[1]]);
            let evil = Name::from_ascii("evil.attacker.net.").unwrap();
            let mut forged = Message::new(id, MessageType::Response, OpCode::Query);
            forged
                .queries
                .push(Query::query(evil.clone(), RecordType::A));
            forged
                .answers
                .push(Record::from_rdata(evil, 300, RData::A(A::new(6, 6, 6, 6))));
            let _ = socket.send_to(&forged.to_vec().unwrap(), peer);
            let mut garbage = vec![0xffu8; 40];
            garbage[..2].copy_from_slice(&id.to_be_bytes());
            let _ = socket.send_to(&garbage, peer);
            if honest {
                let mut reply = buf[..len].to_vec();
                reply[2] |= 0x80;
                let _ = socket.send_to(&reply, peer);
            }
        }
    });
    addr
}

/// A UDP upstream that answers every query with `n` A records for the
/// asked name (10.0.x.y), however small the asker's buffer.
pub fn oversized_udp(n: u16) -> SocketAddr {
    use hickory_proto::op::Message;
    use hickory_proto::rr::{rdata::A, RData, Record};
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(IDLE)).unwrap();
    let addr = socket.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok((len, peer)) = socket.recv_from(&mut buf) {
            let Ok(query) = Message::from_vec(&buf[..len]) else {
                continue;
            };
            let mut reply = query.clone();
            reply.metadata.message_type = hickory_proto::op::MessageType::Response;
            let name = query.queries[0].name().clone();
            reply.answers = (0..n)
                .map(|i| {
                    let [hi, lo] = i.to_be_bytes();
                    Record::from_rdata(name.clone(), 60, RData::A(A::new(10, 0, hi, lo)))
                })
                .collect();
            let _ = socket.send_to(&reply.to_vec().unwrap(), peer);
        }
    });
    addr
}

/// A UDP upstream that echoes every query back with rcode NXDOMAIN.
pub fn nxdomain_udp() -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(IDLE)).unwrap();
    let addr = socket.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((len, peer)) = socket.recv_from(&mut buf) {
            let mut reply = buf[..len].to_vec();
            reply[2] |= 0x80;
            reply[3] = (reply[3] & 0xf0) | 3;
            let _ = socket.send_to(&reply, peer);
        }
    });
    addr
}

/// A query turned into an answer: QR set, the header and question kept,
/// EDNS and additionals dropped, and `A 1.2.3.4` with TTL 60 for the
/// question name.
fn answer_a(query: &[u8]) -> Option<Vec<u8>> {
    let mut reply = Message::from_vec(query).ok()?;
    reply.metadata.message_type = MessageType::Response;
    reply.edns = None;
    reply.additionals.clear();
    let name = reply.queries.first()?.name().clone();
    let a = Record::from_rdata(name, 60, RData::A(A::new(1, 2, 3, 4)));
    reply.answers.push(a);
    reply.to_vec().ok()
}

/// A UDP socket and a TCP listener on one free port of 127.0.0.1 (another
/// port when the UDP one is taken over TCP).
fn udp_and_tcp_port() -> (UdpSocket, TcpListener) {
    loop {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        if let Ok(listener) = TcpListener::bind(udp.local_addr().unwrap()) {
            return (udp, listener);
        }
    }
}

/// Answers every length-prefixed query on `listener` with `A 1.2.3.4`,
/// counting connections in `counter`.
fn answer_a_over_tcp(listener: TcpListener, counter: Arc<AtomicUsize>) {
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            counter.fetch_add(1, Ordering::SeqCst);
            let mut len = [0u8; 2];
            if stream.read_exact(&mut len).is_err() {
                continue;
            }
            let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
            if stream.read_exact(&mut query).is_err() {
                continue;
            }
            if let Some(reply) = answer_a(&query) {
                let mut framed = u16::try_from(reply.len()).unwrap().to_be_bytes().to_vec();
                framed.extend_from_slice(&reply);
                let _ = stream.write_all(&framed);
            }
        }
    });
}

/// An upstream on one port of 127.0.0.1, UDP and TCP, that answers every
/// query with `A 1.2.3.4` (TTL 60, cacheable) and counts the queries.
pub fn answering() -> (SocketAddr, Arc<AtomicUsize>) {
    let (udp, listener) = udp_and_tcp_port();
    let addr = udp.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    udp.set_read_timeout(Some(IDLE)).unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((len, peer)) = udp.recv_from(&mut buf) {
            counter.fetch_add(1, Ordering::SeqCst);
            if let Some(reply) = answer_a(&buf[..len]) {
                let _ = udp.send_to(&reply, peer);
            }
        }
    });
    let counter = seen.clone();
    answer_a_over_tcp(listener, counter);
    (addr, seen)
}

/// An upstream on UDP and TCP of one port: over UDP every reply is
/// truncated (TC set, no answer, as a server with a small buffer), over
/// TCP it answers `A 1.2.3.4`. Counts the TCP queries.
pub fn truncating() -> (SocketAddr, Arc<AtomicUsize>) {
    let (udp, listener) = udp_and_tcp_port();
    let addr = udp.local_addr().unwrap();
    udp.set_read_timeout(Some(IDLE)).unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((len, peer)) = udp.recv_from(&mut buf) {
            let mut reply = buf[..len].to_vec();
            reply[2] |= 0x82;
            let _ = udp.send_to(&reply, peer);
        }
    });
    let tcp_seen = Arc::new(AtomicUsize::new(0));
    let counter = tcp_seen.clone();
    answer_a_over_tcp(listener, counter);
    (addr, tcp_seen)
}

/// A UDP upstream that is silent while `on` is false and answers
/// `A 1.2.3.4` (TTL 60) while it is true, after `delay_ms`; counts what it
/// receives, and apart the NS queries (probes) it answers, with their names.
pub struct Switchable {
    pub addr: SocketAddr,
    pub on: Arc<std::sync::atomic::AtomicBool>,
    pub delay_ms: Arc<std::sync::atomic::AtomicU64>,
    pub seen: Arc<AtomicUsize>,
    pub probes_answered: Arc<AtomicUsize>,
    /// The names of the probes answered, in order.
    pub probe_names: Arc<std::sync::Mutex<Vec<String>>>,
}

pub fn switchable(on: bool) -> Switchable {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(IDLE)).unwrap();
    let s = Switchable {
        addr: socket.local_addr().unwrap(),
        on: Arc::new(on.into()),
        delay_ms: Arc::default(),
        seen: Arc::default(),
        probes_answered: Arc::default(),
        probe_names: Arc::default(),
    };
    let (on, seen, probes) = (s.on.clone(), s.seen.clone(), s.probes_answered.clone());
    let probe_names = s.probe_names.clone();
    let delay = s.delay_ms.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((len, peer)) = socket.recv_from(&mut buf) {
            seen.fetch_add(1, Ordering::SeqCst);
            if !on.load(Ordering::SeqCst) {
                continue;
            }
            let Ok(query) = Message::from_vec(&buf[..len]) else {
                continue;
            };
            let probe = query
                .queries
                .first()
                .filter(|q| q.query_type() == hickory_proto::rr::RecordType::NS);
            if let Some(q) = probe {
                probes.fetch_add(1, Ordering::SeqCst);
                let mut names = probe_names.lock().unwrap_or_else(|e| e.into_inner());
                names.push(q.name().to_ascii());
            }
            let (Some(reply), Ok(socket)) = (answer_a(&buf[..len]), socket.try_clone()) else {
                continue;
            };
            let delay = Duration::from_millis(delay.load(Ordering::SeqCst));
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let _ = socket.send_to(&reply, peer);
            });
        }
    });
    s
}

/// A UDP upstream that echoes every query back with rcode SERVFAIL and
/// counts them.
pub fn servfail_udp() -> (SocketAddr, Arc<AtomicUsize>) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(IDLE)).unwrap();
    let addr = socket.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((len, peer)) = socket.recv_from(&mut buf) {
            counter.fetch_add(1, Ordering::SeqCst);
            let mut reply = buf[..len].to_vec();
            reply[2] |= 0x80;
            reply[3] = (reply[3] & 0xf0) | 2;
            let _ = socket.send_to(&reply, peer);
        }
    });
    (addr, seen)
}
