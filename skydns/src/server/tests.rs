//! UDP queries queued together, answered each to its own sender; TCP
//! clients that hold connections: the connection limit (idle
//! connections make room, busy ones do not), the read and write timeouts
//! that free a place held by a stalled client, and the drain on stop.

use super::*;
use crate::answer::tests::zone;
use crate::handler::Settings;
use crate::metrics::Metrics;
use crate::snapshot::SharedSnapshot;
use crate::snapshot::Snapshot;
use anyhow::Context;
use arc_swap::ArcSwapOption;
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use skydns_msg::record::Record;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use test_support::http::metric;
use test_support::wait::{eventually, DEADLINE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// 3,500 A records for `many.default.svc.cluster.local.`: a ~56 KB reply.
fn many() -> Snapshot {
    Snapshot::new(
        1,
        (0..3_500u32).map(|i| {
            let [_, _, hi, lo] = i.to_be_bytes();
            let json = format!(r#"{{"host":"10.1.{hi}.{lo}","ttl":30}}"#);
            let key = format!("/skydns/local/cluster/svc/default/many/{i}");
            (key, Record::from_json(json.as_bytes()).unwrap())
        }),
    )
}

/// skydns's TCP side on a free port with `limits`; its handler's metrics.
async fn start(limits: TcpLimits) -> (SocketAddr, Arc<Metrics>, CancellationToken) {
    let shared: SharedSnapshot = Arc::new(ArcSwapOption::from_pointee(many()));
    let metrics = Arc::new(Metrics::default());
    let options = Settings {
        round_robin: false,
        ..Settings::default()
    };
    let handler = Handler::new(zone(), shared, options, metrics.clone());
    let listeners = Listeners::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listeners.local_addr().unwrap();
    let stop = CancellationToken::new();
    let abort = CancellationToken::new();
    tokio::spawn(serve(listeners, handler, limits, stop.clone(), abort));
    (addr, metrics, stop)
}

fn framed_query(name: &str) -> Vec<u8> {
    let mut m = Message::query();
    m.queries
        .push(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    let bytes = m.to_vec().unwrap();
    let mut framed = u16::try_from(bytes.len()).unwrap().to_be_bytes().to_vec();
    framed.extend_from_slice(&bytes);
    framed
}

/// One query over a new connection; `None` if the server closed it unanswered.
async fn ask(addr: SocketAddr) -> Option<Message> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    let query = framed_query("kubernetes.default.svc.cluster.local.");
    stream.write_all(&query).await.ok()?;
    let len = stream.read_u16().await.ok()?;
    let mut reply = vec![0u8; usize::from(len)];
    stream.read_exact(&mut reply).await.ok()?;
    Message::from_vec(&reply).ok()
}

/// Asks on new connections until one is answered.
async fn answered_eventually(addr: SocketAddr) {
    eventually(
        "a new connection to be served again",
        DEADLINE,
        async || ask(addr).await.map(drop).context("closed unanswered"),
    )
    .await
    .unwrap();
}

fn limits(max_connections: usize) -> TcpLimits {
    TcpLimits {
        max_connections,
        idle: Duration::from_secs(3_600),
        read: Duration::from_millis(200),
        write: Duration::from_millis(200),
    }
}

const IDLE_CLOSED: &str = "skydns_dns_limit_count_total{limit=\"tcp_idle_closed\"}";
const REFUSED: &str = "skydns_dns_limit_count_total{limit=\"tcp_connections\"}";

/// Whether the server closed `stream` (EOF or reset) within a bound.
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut byte)).await;
    matches!(read, Ok(Ok(0)) | Ok(Err(_)))
}

#[tokio::test]
async fn a_full_table_closes_the_connection_idle_longest_for_a_new_client() {
    let (addr, metrics, stop) = start(limits(2)).await;
    // Two idle connections hold both places (the idle timeout is an hour).
    let mut oldest = TcpStream::connect(addr).await.unwrap();
    // The oldest is known to be in the table once it has been answered.
    let query = framed_query("kubernetes.default.svc.cluster.local.");
    oldest.write_all(&query).await.unwrap();
    let len = oldest.read_u16().await.unwrap();
    let mut reply = vec![0u8; usize::from(len)];
    oldest.read_exact(&mut reply).await.unwrap();
    let mut newer = TcpStream::connect(addr).await.unwrap();
    // A third client is answered: the oldest idle connection made room.
    let answered = ask(addr).await;
    assert!(answered.is_some(), "a new client was locked out");
    assert!(
        closed_by_server(&mut oldest).await,
        "the oldest idle connection stays open"
    );
    let text = metrics.render();
    // One connection closed to make room, none refused.
    assert_eq!(metric(&text, IDLE_CLOSED), Some(1.0), "{text}");
    assert_eq!(metric(&text, REFUSED), None, "{text}");
    // The newer one still works.
    newer.write_all(&query).await.unwrap();
    assert!(newer.read_u16().await.unwrap() > 0);
    stop.cancel();
}

#[tokio::test]
async fn a_new_client_is_closed_when_every_connection_is_mid_query() {
    let limits = TcpLimits {
        read: Duration::from_secs(3_600),
        ..limits(2)
    };
    let (addr, metrics, stop) = start(limits).await;
    eventually("a newcomer to be refused", DEADLINE, async || {
        // Two clients in the middle of a message: 3 of 40 bytes sent.
        let mut busy = Vec::new();
        for _ in 0..2 {
            let mut s = TcpStream::connect(addr).await?;
            s.write_all(&[0, 40, 1, 2, 3]).await?;
            busy.push(s);
        }
        // Until the server has read their first bytes they count as idle
        // and one would be closed for the newcomer: then try again.
        let answered = ask(addr).await;
        anyhow::ensure!(answered.is_none(), "answered: {answered:?}");
        Ok(())
    })
    .await
    .unwrap();
    // Refused at least once (rounds where a connection was still idle
    // made room instead and were tried again).
    let text = metrics.render();
    let refused = metric(&text, REFUSED).unwrap_or(0.0);
    assert!(refused >= 1.0, "{text}");
    stop.cancel();
}

#[tokio::test]
async fn a_client_that_never_reads_its_replies_loses_its_place() {
    let (addr, _, stop) = start(limits(1)).await;
    // Pipelined queries for a 56 KB answer, never read: the replies fill
    // the socket buffers and the server's write blocks.
    // 2,000 replies (~110 MB) are more than loopback socket buffers hold.
    let mut hog = TcpStream::connect(addr).await.unwrap();
    let query = framed_query("many.default.svc.cluster.local.");
    let writer = tokio::spawn(async move {
        for _ in 0..2_000 {
            if hog.write_all(&query).await.is_err() {
                break;
            }
        }
        hog // kept open, never read
    });
    // Without a write timeout the hog would keep the only place for ever.
    answered_eventually(addr).await;
    writer.abort();
    stop.cancel();
}

#[tokio::test]
async fn a_client_that_stops_mid_message_loses_its_place() {
    let (addr, _, stop) = start(limits(1)).await;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    // The length says 40 bytes; three arrive, then nothing.
    slow.write_all(&[0, 40, 1, 2, 3]).await.unwrap();
    answered_eventually(addr).await;
    drop(slow);
    stop.cancel();
}

#[tokio::test]
async fn the_big_reply_is_what_the_tests_above_assume() {
    let (addr, _, stop) = start(limits(1)).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    let query = framed_query("many.default.svc.cluster.local.");
    s.write_all(&query).await.unwrap();
    let len = s.read_u16().await.unwrap();
    let mut reply = vec![0u8; usize::from(len)];
    s.read_exact(&mut reply).await.unwrap();
    assert_eq!(Message::from_vec(&reply).unwrap().answers.len(), 3_500);
    assert!(len > 40_000, "{len}");
    stop.cancel();
}

/// A query for `name` with `id`, padded (EDNS option 12) to `padding` more
/// bytes when `padding` is set.
fn udp_query(id: u16, name: &str, padding: Option<u16>) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = id;
    m.queries
        .push(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    let mut bytes = m.to_vec().unwrap();
    if let Some(len) = padding {
        bytes[11] = 1; // ARCOUNT: the OPT record below.
        bytes.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0]);
        bytes.extend_from_slice(&(len + 4).to_be_bytes());
        bytes.extend_from_slice(&[0, 12]);
        bytes.extend_from_slice(&len.to_be_bytes());
        bytes.resize(bytes.len() + usize::from(len), 0);
    }
    bytes
}

/// Queries from several clients queued together, more than one batch
/// (`recvmmsg`) of them, one larger than any reply: each client gets one
/// reply per query, under its ID and to its question.
#[tokio::test]
async fn udp_queries_queued_together_each_get_their_own_reply() {
    let (addr, _, stop) = start(TcpLimits::default()).await;
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
    }
    let name = |id: u16| match id % 2 {
        0 => "many.default.svc.cluster.local.".to_string(),
        _ => format!("n{id}.default.svc.cluster.local."),
    };
    let per_client = 2 * u16::try_from(udp::BATCH).unwrap();
    for (c, client) in (0u16..).zip(&clients) {
        for id in c * 1000..c * 1000 + per_client {
            let padding = (id % 25 == 0).then_some(3_000);
            let query = udp_query(id, &name(id), padding);
            client.send_to(&query, addr).await.unwrap();
        }
    }
    for (c, client) in (0u16..).zip(&clients) {
        let mut seen = std::collections::BTreeSet::new();
        let mut buf = vec![0u8; 65_535];
        while seen.len() < usize::from(per_client) {
            let len = tokio::time::timeout(DEADLINE, client.recv(&mut buf))
                .await
                .expect("a reply for every query")
                .unwrap();
            let reply = Message::from_vec(&buf[..len]).unwrap();
            let id = reply.metadata.id;
            assert_eq!(id / 1000, c, "reply {id} went to client {c}");
            assert_eq!(reply.queries[0].name().to_ascii(), name(id), "reply {id}");
            let rcode = reply.metadata.response_code;
            let want = match id % 2 {
                0 => hickory_proto::op::ResponseCode::NoError,
                _ => hickory_proto::op::ResponseCode::NXDomain,
            };
            assert_eq!(rcode, want, "reply {id}");
            assert!(seen.insert(id), "reply {id} twice");
        }
    }
    stop.cancel();
}

/// A TCP bind's future.
type Binding = std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<TcpListener>>>>;

/// A TCP bind that fails with `kind` for its first `failures` calls, then
/// binds; and how many calls it had.
fn failing_tcp(
    failures: usize,
    kind: io::ErrorKind,
) -> (impl Fn(SocketAddr) -> Binding, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let bind = move |addr: SocketAddr| -> Binding {
        let call = counted.fetch_add(1, SeqCst);
        Box::pin(async move {
            if call < failures {
                return Err(io::Error::from(kind));
            }
            TcpListener::bind(addr).await
        })
    };
    (bind, calls)
}

/// Port 0: UDP and TCP on the one port the system chose for UDP, or, when
/// that port is taken over TCP, another (up to 20 tries); a port given is
/// tried once; any other error is not tried again.
#[tokio::test]
async fn listeners_share_a_port_and_only_a_chosen_port_is_chosen_again() {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let listeners = Listeners::bind(any).await.unwrap();
    let port = listeners.local_addr().unwrap().port();
    assert_eq!(
        listeners.addresses(),
        [
            format!("udp://127.0.0.1:{port}"),
            format!("tcp://127.0.0.1:{port}")
        ]
    );
    let (bind, calls) = failing_tcp(3, io::ErrorKind::AddrInUse);
    assert!(Listeners::bind_with(any, bind).await.is_ok());
    assert_eq!(calls.load(SeqCst), 4, "taken three times, then bound");
    let (bind, calls) = failing_tcp(100, io::ErrorKind::AddrInUse);
    let error = Listeners::bind_with(any, bind).await.err().unwrap();
    assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
    assert_eq!(calls.load(SeqCst), 20, "20 tries");
    let (bind, calls) = failing_tcp(1, io::ErrorKind::PermissionDenied);
    assert!(Listeners::bind_with(any, bind).await.is_err());
    assert_eq!(calls.load(SeqCst), 1, "another error: not again");
    // A port given, free for UDP (another one if a test took it since).
    drop(listeners);
    let mut given = SocketAddr::new(any.ip(), port);
    loop {
        let (bind, calls) = failing_tcp(1, io::ErrorKind::AddrInUse);
        let error = Listeners::bind_with(given, bind).await.err().unwrap();
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
        match calls.load(SeqCst) {
            0 => given = Listeners::bind(any).await.unwrap().local_addr().unwrap(),
            n => break assert_eq!(n, 1, "a port given: once"),
        }
    }
}

/// Sockets passed by systemd: UDP alone or TCP alone is served; none at
/// all is an error that says so.
#[tokio::test]
async fn passed_sockets_of_one_kind_are_enough_and_none_is_an_error() {
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let at = udp.local_addr().unwrap();
    let listeners = Listeners::from_sockets(vec![udp], vec![]).unwrap();
    assert_eq!(listeners.addresses(), [format!("udp://{at}")]);
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = tcp.local_addr().unwrap();
    let listeners = Listeners::from_sockets(vec![], vec![tcp]).unwrap();
    assert_eq!(listeners.addresses(), [format!("tcp://{at}")]);
    let error = Listeners::from_sockets(vec![], vec![]).err().unwrap();
    assert_eq!(error.kind(), io::ErrorKind::NotFound);
    assert!(error
        .to_string()
        .contains("no UDP or TCP sockets supplied by systemd"));
}
