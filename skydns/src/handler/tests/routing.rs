//! Where a request goes: other opcodes get NOTIMP (even for a name whose
//! reply is cached), stub zones follow etcd, and `-ns-rotate` picks the
//! upstream tried first; the reply cache keeps DO, TCP and CD replies apart.

use super::{ask_msg, handler, handler_sharing, handler_with, request};
use crate::answer::tests::cluster;
use crate::forward::NsPolicy;
use crate::handler::pending;
use crate::handler::*;
use crate::snapshot::Change;
use hickory_proto::op::OpCode;
use hickory_proto::rr::Name;
use std::sync::atomic::Ordering;
use std::time::Duration;
use test_support::fake_upstream::echo_udp;

fn name(text: &str) -> Name {
    Name::from_ascii(text).unwrap()
}

#[test]
fn other_opcodes_get_notimp_even_after_the_same_name_was_queried() {
    let h = handler(Some(cluster()));
    let query = request(name("kubernetes.default.svc.cluster.local."), RecordType::A);
    let mut status = query.clone();
    status.metadata.op_code = OpCode::Status;
    let r = ask_msg(&h, &status, Transport::Udp);
    assert_eq!(r.metadata.response_code, ResponseCode::NotImp, "fresh");
    // A normal QUERY twice: the second is served by the hot reply cache.
    for _ in 0..2 {
        let r = ask_msg(&h, &query, Transport::Udp);
        assert_eq!(r.metadata.response_code, ResponseCode::NoError);
        assert_eq!(r.answers.len(), 1);
    }
    for opcode in [OpCode::Status, OpCode::Notify, OpCode::Update] {
        let mut other = query.clone();
        other.metadata.op_code = opcode;
        for t in [Transport::Udp, Transport::Tcp] {
            let r = ask_msg(&h, &other, t);
            assert_eq!(
                r.metadata.response_code,
                ResponseCode::NotImp,
                "{opcode:?} over {t:?}, after a cached QUERY"
            );
            assert!(r.answers.is_empty());
        }
    }
}

/// The stub servers `handle` routes the packet to; `None` if it answered.
fn stub_route(h: &Handler, packet: &[u8]) -> Option<Vec<SocketAddr>> {
    match h.handle(packet, Transport::Udp) {
        Outcome::Done(_) => None,
        Outcome::Pending(p) => match p.route {
            pending::Route::Stub(servers) => Some(servers),
            _ => panic!("pending, but not on the stub route"),
        },
    }
}

#[test]
fn stub_zones_follow_etcd_changes() {
    // Stub zone example.com. for domain cluster.local.: the key is under
    // stub.dns.cluster.local., with the stub zone's labels reversed.
    const NS1: &str = "/skydns/local/cluster/dns/stub/com/example/ns1";
    let server = |json: &str| {
        Change::Put(
            NS1.into(),
            skydns_msg::record::Record::from_json(json.as_bytes()).unwrap(),
        )
    };
    let (h, shared) = handler_sharing(
        Some(cluster()),
        Settings {
            stubzones: true,
            ..Settings::default()
        },
    );
    let packet = request(name("www.example.com."), RecordType::A)
        .to_vec()
        .unwrap();

    assert_eq!(stub_route(&h, &packet), None, "no stub zone yet");
    let r = ask_msg(&h, &Message::from_vec(&packet).unwrap(), Transport::Udp);
    assert_eq!(
        r.metadata.response_code,
        ResponseCode::ServFail,
        "not forwarded"
    );

    let with_stub = cluster().with_changes(2, [server(r#"{"host":"10.0.0.53","port":53}"#)]);
    shared.store(Some(Arc::new(with_stub.clone())));
    assert_eq!(
        stub_route(&h, &packet),
        Some(vec!["10.0.0.53:53".parse().unwrap()])
    );

    let moved = with_stub.with_changes(3, [server(r#"{"host":"10.0.0.54","port":53}"#)]);
    shared.store(Some(Arc::new(moved.clone())));
    assert_eq!(
        stub_route(&h, &packet),
        Some(vec!["10.0.0.54:53".parse().unwrap()])
    );

    shared.store(Some(Arc::new(
        moved.with_changes(4, [Change::Delete(NS1.into())]),
    )));
    assert_eq!(stub_route(&h, &packet), None, "stub zone removed");
}

/// Forwards one query with `id` and returns how many queries each of two
/// fresh upstreams received.
fn forward_counts(ns_rotate: bool, ids: &[u16]) -> Vec<[usize; 2]> {
    let (a0, seen0) = echo_udp(Duration::ZERO);
    let (a1, seen1) = echo_udp(Duration::ZERO);
    let h = handler_with(Some(cluster()), {
        let mut s = Settings::default();
        s.forward.nameservers = vec![a0, a1];
        s.forward.relay.policy = if ns_rotate {
            NsPolicy::RequestId
        } else {
            NsPolicy::Sequential
        };
        s.forward.relay.timeout = Duration::from_secs(2);
        s
    });
    ids.iter()
        .map(|&id| {
            let mut m = request(name(&format!("q{id}.example.org.")), RecordType::A);
            m.metadata.id = id;
            let r = ask_msg(&h, &m, Transport::Udp);
            assert_eq!(r.metadata.response_code, ResponseCode::NoError);
            [seen0.load(Ordering::SeqCst), seen1.load(Ordering::SeqCst)]
        })
        .collect()
}

#[test]
fn ns_rotate_picks_the_first_upstream_by_request_id() {
    // id % 2: 1 → second server, 4 → first, 7 → second.
    assert_eq!(
        forward_counts(true, &[1, 4, 7]),
        [[0, 1], [1, 1], [1, 2]],
        "cumulative queries seen by [first, second]"
    );
}

#[test]
fn without_ns_rotate_the_first_upstream_is_always_tried_first() {
    assert_eq!(forward_counts(false, &[1, 4, 7]), [[1, 0], [2, 0], [3, 0]]);
}

#[test]
fn the_reply_cache_keeps_do_tcp_and_cd_replies_apart() {
    let (upstream, seen) = test_support::fake_upstream::answering();
    let h = handler_with(Some(cluster()), {
        let mut s = Settings::default();
        s.forward.nameservers = vec![upstream];
        s.cache.capacity = 100;
        s
    });
    let plain = request(name("www.example.org."), RecordType::A);
    let mut dnssec_ok = plain.clone();
    let mut edns = hickory_proto::op::Edns::new();
    edns.set_dnssec_ok(true);
    dnssec_ok.edns = Some(edns);
    let mut checking_disabled = plain.clone();
    checking_disabled.metadata.checking_disabled = true;
    // Each variant is asked twice: the first goes upstream, the second is
    // served from the cache. A variant that shared another's entry would
    // never reach the upstream (a DNSSEC client served an unsigned reply).
    let cases = [
        (&plain, Transport::Udp, "plain"),
        (&dnssec_ok, Transport::Udp, "DO"),
        (&checking_disabled, Transport::Udp, "CD"),
        (&plain, Transport::Tcp, "TCP"),
    ];
    for (i, (query, transport, what)) in cases.into_iter().enumerate() {
        for _ in 0..2 {
            let r = ask_msg(&h, query, transport);
            assert_eq!(r.answers.len(), 1, "{what}: {r:?}");
        }
        assert_eq!(
            seen.load(Ordering::SeqCst),
            i + 1,
            "{what}: upstream queries"
        );
    }
}
