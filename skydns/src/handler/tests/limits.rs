//! Limits on what a flood can hold: requests waiting on upstream servers,
//! and forwarded replies larger than the asking client allows.

use super::{ask_msg, handler_with, request};
use crate::answer::tests::cluster;
use crate::handler::*;
use hickory_proto::rr::Name;
use test_support::fake_upstream::oversized_udp;

fn external(n: u16) -> Vec<u8> {
    let name = Name::from_ascii(format!("host{n}.example.org.")).unwrap();
    let mut m = request(name, RecordType::A);
    m.metadata.id = n;
    m.to_vec().unwrap()
}

#[test]
fn past_the_pending_forward_limit_requests_get_refused_at_once() {
    // An upstream that never answers: every forward stays pending.
    let silent = test_support::dead::silent_upstream();
    let options = {
        let mut s = Settings::default();
        s.forward.nameservers = vec![silent.addr()];
        s.forward.max_pending = 2;
        s
    };
    let h = handler_with(Some(cluster()), options);
    let first = h.handle(&external(1), Transport::Udp);
    let second = h.handle(&external(2), Transport::Tcp);
    assert!(matches!(first, Outcome::Pending(_)));
    assert!(matches!(second, Outcome::Pending(_)));
    let Outcome::Done(Some(bytes)) = h.handle(&external(3), Transport::Udp) else {
        panic!("the third request must be answered at once");
    };
    let reply = Message::from_vec(&bytes).unwrap();
    assert_eq!(reply.metadata.id, 3);
    // CoreDNS's max_concurrent answers REFUSED (plugin/forward/README.md).
    assert_eq!(reply.metadata.response_code, ResponseCode::Refused);
    let metrics = h.engine().metrics.render();
    assert!(
        metrics.contains("skydns_dns_limit_count_total{limit=\"pending_forwards\"} 1"),
        "{metrics}"
    );
    // Names in the domain never wait on upstreams: still answered.
    let local = request(
        Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap(),
        RecordType::A,
    );
    assert_eq!(ask_msg(&h, &local, Transport::Udp).answers.len(), 1);
    // A finished (here: abandoned) forward frees its place.
    drop(first);
    assert!(matches!(
        h.handle(&external(4), Transport::Udp),
        Outcome::Pending(_)
    ));
}

#[test]
fn a_forwarded_reply_larger_than_the_client_allows_is_truncated() {
    let options = {
        let mut s = Settings::default();
        s.forward.nameservers = vec![oversized_udp(100)];
        s
    };
    let h = handler_with(Some(cluster()), options);
    // No EDNS: 512 bytes. The upstream sends 100 A records (~1.6 KB).
    let reply = ask_msg(
        &h,
        &Message::from_vec(&external(5)).unwrap(),
        Transport::Udp,
    );
    assert!(reply.metadata.truncation);
    assert!(reply.to_vec().unwrap().len() <= 512);
    assert!(!reply.answers.is_empty() && reply.answers.len() < 100);
    assert_eq!(reply.queries[0].name().to_ascii(), "host5.example.org.");
    // With EDNS 4096 all of it fits and is relayed as it came.
    let mut big = Message::from_vec(&external(6)).unwrap();
    let mut edns = hickory_proto::op::Edns::new();
    edns.set_max_payload(4096);
    big.edns = Some(edns);
    let reply = ask_msg(&h, &big, Transport::Udp);
    assert!(!reply.metadata.truncation);
    assert_eq!(reply.answers.len(), 100);
}

#[test]
fn a_reloaded_store_at_the_same_revision_is_not_answered_from_the_old_one() {
    // etcd wiped and written again up to the same revision number: the
    // snapshot differs although its revision does not.
    let (h, shared) = super::tests::handler_sharing(Some(cluster()), Settings::default());
    let name = Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap();
    let query = request(name, RecordType::A);
    for t in [Transport::Udp, Transport::Udp, Transport::Tcp] {
        assert_eq!(ask_msg(&h, &query, t).answers.len(), 1, "warm the caches");
    }
    let same_revision = crate::snapshot::Snapshot::new(cluster().revision(), []);
    shared.store(Some(Arc::new(same_revision)));
    for t in [Transport::Udp, Transport::Tcp] {
        let r = ask_msg(&h, &query, t);
        assert_eq!(r.metadata.response_code, ResponseCode::NXDomain, "{t:?}");
    }
}
