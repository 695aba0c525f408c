//! TCP clients that hold connections: the connection limit, and the read
//! and write timeouts that free a place held by a stalled client.

use super::*;
use crate::answer::tests::zone;
use crate::handler::{Options, SharedSnapshot};
use crate::metrics::Metrics;
use crate::record::Record;
use crate::snapshot::Snapshot;
use arc_swap::ArcSwapOption;
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};

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
    let options = Options {
        round_robin: false,
        ..Options::default()
    };
    let handler = Handler::new(zone(), shared, options, metrics.clone());
    let listeners = Listeners::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listeners.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(serve(listeners, handler, limits, stop.clone()));
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

/// Asks on new connections until one is answered (bounded by the test's patience).
async fn answered_eventually(addr: SocketAddr) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while ask(addr).await.is_none() {
        assert!(tokio::time::Instant::now() < deadline, "never served again");
        tokio::task::yield_now().await;
    }
}

fn limits(max_connections: usize) -> TcpLimits {
    TcpLimits {
        max_connections,
        idle: Duration::from_secs(3_600),
        read: Duration::from_millis(200),
        write: Duration::from_millis(200),
    }
}

#[tokio::test]
async fn connections_past_the_limit_are_closed_and_counted() {
    let (addr, metrics, stop) = start(limits(2)).await;
    // Two idle connections hold both places (the idle timeout is an hour).
    let held = [
        TcpStream::connect(addr).await.unwrap(),
        TcpStream::connect(addr).await.unwrap(),
    ];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    // The third is closed unanswered (retry until both are accepted).
    while ask(addr).await.is_some() {
        assert!(tokio::time::Instant::now() < deadline, "no limit");
    }
    assert!(metrics
        .render()
        .contains("skydns_dns_limit_count_total{limit=\"tcp_connections\"}"));
    drop(held);
    answered_eventually(addr).await;
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
