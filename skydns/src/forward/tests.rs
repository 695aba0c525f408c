//! The forwarder against fake upstream servers.

use super::health::FailureLog;
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
        upstreams.relay(&q1, false),
        upstreams.relay(&q2, false),
        upstreams.relay(&q3, false),
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
        .relay(&q, true)
        .await
        .expect("a TCP client's query is answered over TCP");
    assert_eq!(&reply[..2], &0x4242u16.to_be_bytes(), "the caller's ID");
    assert_ne!(reply[2] & 0x80, 0, "a response");
    assert_eq!(reply[3..], q[3..]);
    assert!(
        upstreams.relay(&q, false).await.is_none(),
        "a UDP client's query must not go over TCP"
    );
}

#[tokio::test]
async fn udp_clients_are_relayed_over_udp_only() {
    let (addr, _tcp) = echo_udp_only();
    let upstreams = Upstreams::new(vec![addr], Duration::from_millis(300));
    let q = query(0x0707, "udp.example.org.");
    let reply = upstreams
        .relay(&q, false)
        .await
        .expect("a UDP client's query is answered over UDP");
    assert_eq!(&reply[..2], &0x0707u16.to_be_bytes(), "the caller's ID");
    assert_ne!(reply[2] & 0x80, 0, "a response");
    assert!(
        upstreams.relay(&q, true).await.is_none(),
        "a TCP client's query must not go over UDP"
    );
}

#[tokio::test]
async fn forged_and_garbage_replies_are_ignored_for_the_real_one() {
    let upstreams = Upstreams::new(vec![forging_udp(true)], Duration::from_secs(2));
    let q = query(0x5151, "www.Example.org.");
    let reply = upstreams.relay(&q, false).await.expect("the real reply");
    let m = Message::from_vec(&reply).unwrap();
    assert_eq!(m.queries[0].name().to_ascii(), "www.Example.org.");
    assert!(m.answers.is_empty(), "not the forged 6.6.6.6: {m:?}");
}

#[tokio::test]
async fn only_forged_replies_are_a_failure() {
    let upstreams = Upstreams::new(vec![forging_udp(false)], Duration::from_millis(200));
    let q = query(0x5252, "www.example.org.");
    assert_eq!(upstreams.relay(&q, false).await, None);
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
