//! Request → reply tests of the pipeline, over the records kube2sky 1.2 writes for a small cluster,
//! and the helpers the other request → reply tests share: where a request goes (`routing`), the
//! `-local` name (`local_names`), the Kubernetes DNS specification's records (`spec`), reply sizes
//! (`sizes`), limits under a flood (`limits`), odd requests (`hostile`), the encoded-reply cache
//! under churn (`cache_churn`), `-dnssec` (`dnssec_replies`) and the response cache's serve-stale,
//! prefetch and a configuration swapped live (`forwarding`).

use super::*;
use crate::answer::tests::{cluster, zone};
use crate::metrics::Metrics;
use arc_swap::ArcSwapOption;
use hickory_proto::op::MessageType;
use hickory_proto::op::{Edns, Query};
use hickory_proto::rr::rdata::SOA;
use hickory_proto::rr::Name;
use hickory_proto::rr::RData;
use std::time::Duration;

mod autopath;
mod cache_churn;
mod dnssec_replies;
mod error_counters;
mod forwarding;
mod hostile;
mod limits;
mod local_names;
mod pod_names;
mod query_log;
mod routing;
mod sizes;
mod spec;

pub(super) fn handler(snapshot: Option<Snapshot>) -> Handler {
    handler_with(
        snapshot,
        Settings {
            round_robin: false,
            ..Settings::default()
        },
    )
}

pub(crate) fn handler_with(snapshot: Option<Snapshot>, options: Settings) -> Handler {
    handler_sharing(snapshot, options).0
}

/// [`handler_with`], and the snapshot it serves, for a test to replace.
pub(super) fn handler_sharing(
    snapshot: Option<Snapshot>,
    options: Settings,
) -> (Handler, SharedSnapshot) {
    let shared: SharedSnapshot = Arc::new(ArcSwapOption::from(snapshot.map(Arc::new)));
    let h = Handler::new(
        zone(),
        shared.clone(),
        options,
        Arc::new(Metrics::default()),
    );
    (h, shared)
}

pub(super) fn run(h: &Handler, packet: &[u8], t: Transport) -> Option<Vec<u8>> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(h.handle_async(packet, t))
}

pub(super) fn request(name: Name, qtype: RecordType) -> Message {
    let mut m = Message::query();
    m.metadata.recursion_desired = true;
    m.queries.push(Query::query(name, qtype));
    m
}

pub(super) fn ask_msg(h: &Handler, m: &Message, t: Transport) -> Message {
    let bytes = run(h, &m.to_vec().unwrap(), t).expect("a reply");
    let reply = Message::from_vec(&bytes).unwrap();
    assert_eq!(reply.metadata.id, m.metadata.id);
    reply
}

pub(super) fn ask(name: &str, qtype: RecordType) -> Message {
    ask_on(&handler(Some(cluster())), name, qtype, Transport::Udp)
}

/// `name`/`qtype` asked of `h` over `t`.
pub(super) fn ask_on(h: &Handler, name: &str, qtype: RecordType, t: Transport) -> Message {
    ask_msg(h, &request(Name::from_ascii(name).unwrap(), qtype), t)
}

pub(super) fn assert_soa_authority(reply: &Message) {
    assert_eq!(reply.authorities.len(), 1);
    let soa = &reply.authorities[0];
    assert_eq!(soa.ttl, 60);
    assert_eq!(soa.name.to_string(), "cluster.local.");
    let RData::SOA(data) = &soa.data else {
        panic!("not a SOA: {soa:?}")
    };
    assert_eq!(data.mname.to_string(), "ns.dns.cluster.local.");
    assert_eq!(data.rname.to_string(), "hostmaster.skydns.local.");
    assert_eq!(data.serial % 3600, 0);
    assert_eq!(
        (data.refresh, data.retry, data.expire, data.minimum),
        (28800, 7200, 604800, 60)
    );
    let _: &SOA = data;
}

#[test]
fn a_reply_is_authoritative_with_recursion_available() {
    let r = ask("kubernetes.default.svc.cluster.local.", RecordType::A);
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(
        r.metadata.authoritative && r.metadata.recursion_available && r.metadata.recursion_desired
    );
    assert_eq!(r.answers.len(), 1);
    assert_eq!(r.answers[0].data.to_string(), "10.0.0.1");
    assert_eq!(r.answers[0].ttl, 30);
}

#[test]
fn nxdomain_carries_the_soa() {
    // NODATA: see `nodata_is_noerror_with_the_soa_and_no_answer`, below.
    let r = ask("nosuch.default.svc.cluster.local.", RecordType::A);
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    assert!(r.metadata.authoritative);
    assert_soa_authority(&r);
}

#[test]
fn nodata_is_noerror_with_the_soa_and_no_answer() {
    let kubernetes = "kubernetes.default.svc.cluster.local.";
    for (qname, qtype) in [
        (kubernetes, RecordType::AAAA),
        (kubernetes, RecordType::SOA),
        (kubernetes, RecordType::TXT),
        (kubernetes, RecordType::MX),
        (kubernetes, RecordType::CNAME),
        (kubernetes, RecordType::HINFO),
        ("1-2-3-4.default.pod.cluster.local.", RecordType::AAAA),
        ("default.svc.cluster.local.", RecordType::NS),
    ] {
        let r = ask(qname, qtype);
        assert_eq!(
            r.metadata.response_code,
            ResponseCode::NoError,
            "{qname} {qtype}"
        );
        assert!(r.metadata.authoritative, "{qname} {qtype}");
        assert!(r.answers.is_empty(), "{qname} {qtype}: {:?}", r.answers);
        assert_soa_authority(&r);
    }
}

#[test]
fn any_is_refused_without_flags() {
    let r = ask("kubernetes.default.svc.cluster.local.", RecordType::ANY);
    assert_eq!(r.metadata.response_code, ResponseCode::Refused);
    assert!(
        !r.metadata.authoritative
            && !r.metadata.recursion_available
            && !r.metadata.recursion_desired
    );
}

#[test]
fn names_outside_the_domain_get_servfail_without_forwarders() {
    // (the test zone's handler has no nameservers)
    for name in ["foo.", "www.example.com.", "xcluster.local."] {
        let r = ask(name, RecordType::A);
        assert_eq!(r.metadata.response_code, ResponseCode::ServFail, "{name}");
        assert!(!r.metadata.authoritative && r.metadata.recursion_available);
    }
}

#[test]
fn servfail_until_the_first_snapshot() {
    let h = handler(None);
    let r = ask_msg(
        &h,
        &request(
            Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap(),
            RecordType::A,
        ),
        Transport::Udp,
    );
    assert_eq!(r.metadata.response_code, ResponseCode::ServFail);
}

#[test]
fn a_label_with_a_slash_cannot_reach_another_key() {
    let name = Name::from_labels(vec![
        b"kubernetes/c88f1059" as &[u8],
        b"default",
        b"svc",
        b"cluster",
        b"local",
    ])
    .unwrap();
    let r = ask_msg(
        &handler(Some(cluster())),
        &request(name, RecordType::A),
        Transport::Udp,
    );
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    assert!(r.answers.is_empty());
}

#[test]
fn ptr_from_the_reverse_tree_is_not_authoritative() {
    let snap = cluster().with_changes(
        2,
        [crate::snapshot::Change::Put(
            "/skydns/arpa/in-addr/10/0/0/1".into(),
            skydns_msg::record::Record::kube2sky_address("kubernetes.default.svc.cluster.local."),
        )],
    );
    let h = handler(Some(snap));
    let r = ask_msg(
        &h,
        &request(
            Name::from_ascii("1.0.0.10.in-addr.arpa.").unwrap(),
            RecordType::PTR,
        ),
        Transport::Udp,
    );
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(!r.metadata.authoritative);
    assert_eq!(
        r.answers[0].data.to_string(),
        "kubernetes.default.svc.cluster.local."
    );
    let miss = ask_msg(
        &h,
        &request(
            Name::from_ascii("9.0.0.10.in-addr.arpa.").unwrap(),
            RecordType::PTR,
        ),
        Transport::Udp,
    );
    assert_eq!(miss.metadata.response_code, ResponseCode::ServFail);
}

#[test]
fn replies_carry_no_opt_record_even_for_edns_queries() {
    let mut m = request(
        Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap(),
        RecordType::A,
    );
    let mut edns = Edns::new();
    edns.set_max_payload(4096);
    m.edns = Some(edns);
    let r = ask_msg(&handler(Some(cluster())), &m, Transport::Udp);
    assert!(r.edns.is_none());
    assert_eq!(r.answers.len(), 1);
}

#[test]
fn large_answers_are_truncated_over_udp_but_not_tcp() {
    let many = (0..60).map(|i| {
        (
            format!("/skydns/local/cluster/svc/default/big/{i}"),
            skydns_msg::record::Record::kube2sky_address(&format!("10.1.0.{i}")),
        )
    });
    let h = handler(Some(Snapshot::new(1, many)));
    let m = request(
        Name::from_ascii("big.default.svc.cluster.local.").unwrap(),
        RecordType::A,
    );
    let udp = ask_msg(&h, &m, Transport::Udp);
    assert!(udp.metadata.truncation);
    assert!(udp.answers.len() < 60);
    let tcp = ask_msg(&h, &m, Transport::Tcp);
    assert!(!tcp.metadata.truncation);
    assert_eq!(tcp.answers.len(), 60);
    let mut big = m.clone();
    let mut edns = Edns::new();
    edns.set_max_payload(4096);
    big.edns = Some(edns);
    assert_eq!(ask_msg(&h, &big, Transport::Udp).answers.len(), 60);
}

#[test]
fn malformed_packets_get_formerr_or_nothing() {
    let h = handler(Some(cluster()));
    assert!(run(&h, &[], Transport::Udp).is_none());
    assert!(run(&h, &[1, 2, 3], Transport::Udp).is_none());
    let mut garbage = vec![0xab, 0xcd, 0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0];
    garbage.extend_from_slice(&[0x3f, b'x']);
    let reply = Message::from_vec(&run(&h, &garbage, Transport::Udp).expect("formerr")).unwrap();
    assert_eq!(reply.metadata.id, 0xabcd);
    assert_eq!(reply.metadata.response_code, ResponseCode::FormErr);
    let no_question = Message::query();
    let r = ask_msg(&h, &no_question, Transport::Udp);
    assert_eq!(r.metadata.response_code, ResponseCode::FormErr);
}

#[test]
fn responses_are_never_answered() {
    let mut m = request(
        Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap(),
        RecordType::A,
    );
    m.metadata.message_type = MessageType::Response;
    assert!(run(
        &handler(Some(cluster())),
        &m.to_vec().unwrap(),
        Transport::Udp
    )
    .is_none());
}

#[test]
fn random_packets_never_panic() {
    let h = handler(Some(cluster()));
    let seed = request(
        Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap(),
        RecordType::SRV,
    )
    .to_vec()
    .unwrap();
    let mut state = 0x2545_f491_u32;
    for round in 0..20_000 {
        let mut p = seed.clone();
        for _ in 0..(round % 7 + 1) {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let i = state as usize % p.len();
            p[i] = (state >> 8) as u8;
        }
        p.truncate(p.len() - (state as usize % 5));
        let _ = h.handle(&p, Transport::Udp);
    }
}

#[test]
fn no_rec_servfail_has_no_recursion_available() {
    let silent = test_support::dead::silent_upstream();
    let h = handler_with(Some(cluster()), {
        let mut s = Settings::default();
        s.forward.no_rec = true;
        s.forward.nameservers = vec![silent.addr()];
        s
    });
    let r = ask_msg(
        &h,
        &request(Name::from_ascii("www.example.com.").unwrap(), RecordType::A),
        Transport::Udp,
    );
    assert_eq!(r.metadata.response_code, ResponseCode::ServFail);
    assert!(!r.metadata.recursion_available && !r.metadata.authoritative);
}

#[test]
fn single_label_names_are_never_forwarded() {
    let silent = test_support::dead::silent_upstream();
    let h = handler_with(Some(cluster()), {
        let mut s = Settings::default();
        s.forward.nameservers = vec![silent.addr()];
        s
    });
    let out = h.handle(
        &request(Name::from_ascii("foo.").unwrap(), RecordType::A)
            .to_vec()
            .unwrap(),
        Transport::Udp,
    );
    let Outcome::Done(Some(bytes)) = out else {
        panic!("answered without upstream work")
    };
    let r = Message::from_vec(&bytes).unwrap();
    assert_eq!(r.metadata.response_code, ResponseCode::ServFail);
    assert!(r.metadata.recursion_available);
}

#[test]
fn cached_replies_follow_snapshot_changes() {
    let (h, shared) = handler_sharing(
        Some(cluster()),
        Settings {
            round_robin: false,
            ..Settings::default()
        },
    );
    let m = request(
        Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap(),
        RecordType::A,
    );
    for _ in 0..3 {
        assert_eq!(
            ask_msg(&h, &m, Transport::Udp).answers[0].data.to_string(),
            "10.0.0.1"
        );
    }
    let changed = cluster().with_changes(
        99,
        [crate::snapshot::Change::Put(
            "/skydns/local/cluster/svc/default/kubernetes/c88f1059".into(),
            skydns_msg::record::Record::kube2sky_address("10.0.0.2"),
        )],
    );
    shared.store(Some(Arc::new(changed)));
    let mut again = m.clone();
    again.metadata.id = m.metadata.id.wrapping_add(1);
    again.metadata.recursion_desired = false;
    let r = ask_msg(&h, &again, Transport::Udp);
    assert_eq!(r.answers[0].data.to_string(), "10.0.0.2");
    assert!(
        !r.metadata.recursion_desired,
        "RD follows the request on cached replies too"
    );
}

#[test]
fn repeated_any_queries_keep_rd_clear() {
    let h = handler(Some(cluster()));
    let m = request(
        Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap(),
        RecordType::ANY,
    );
    for _ in 0..3 {
        let r = ask_msg(&h, &m, Transport::Udp);
        assert_eq!(r.metadata.response_code, ResponseCode::Refused);
        assert!(!r.metadata.recursion_desired);
    }
}

#[test]
fn a_leading_star_counts_as_a_label_for_ndots() {
    let silent = test_support::dead::silent_upstream();
    let h = handler_with(Some(cluster()), {
        let mut s = Settings::default();
        s.forward.nameservers = vec![silent.addr()];
        s
    });
    let packet = request(Name::from_ascii("*.example.").unwrap(), RecordType::A)
        .to_vec()
        .unwrap();
    assert!(
        matches!(h.handle(&packet, Transport::Udp), Outcome::Pending(_)),
        "two labels: forwarded"
    );
}

#[test]
fn the_hour_of_cached_replies_follows_the_wall_clock() {
    let now = Instant::now();
    let before = unix_now() / 3600;
    let hour = hour_at(now);
    let after = unix_now() / 3600;
    assert!(
        (before..=after).contains(&hour),
        "{before} <= {hour} <= {after}"
    );
    // Kept within the second after a read; read again after it.
    assert_eq!(hour_at(now + Duration::from_millis(999)), hour);
    let later = hour_at(now + Duration::from_secs(1));
    assert!((before..=unix_now() / 3600).contains(&later));
}
