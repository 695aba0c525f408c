//! `-dnssec` through the pipeline: queries without DO get today's bytes and
//! cost no signature; DO queries get signed answers, NSEC3 denials built
//! from the snapshot, the apex DNSKEY, and the signature-cache metric.

use super::{handler_with, request};
use crate::answer::tests::cluster;
use crate::dnssec::tests::{ecdsa, TestKey};
use crate::dnssec::{nsec3, Dnssec, Settings as SigningSettings};
use crate::handler::*;
use hickory_proto::dnssec::rdata::DNSSECRData;
use hickory_proto::dnssec::Verifier;
use hickory_proto::op::Edns;
use hickory_proto::rr::{DNSClass, Name};
use hickory_proto::rr::{RData, Record};

fn signing() -> (TestKey, Arc<Dnssec>) {
    let key = ecdsa();
    let settings = SigningSettings {
        ttl: 3600,
        min_ttl: 60,
        scache: 100,
    };
    let d = Dnssec::load(&key.base, "cluster.local.", settings).unwrap();
    (key, Arc::new(d))
}

fn handlers() -> (TestKey, Arc<Dnssec>, Handler, Handler) {
    let (key, d) = signing();
    let plain = Settings {
        round_robin: false,
        ..Settings::default()
    };
    let signed = Settings {
        dnssec: Some(d.clone()),
        ..plain.clone()
    };
    let without = handler_with(Some(cluster()), plain);
    let with = handler_with(Some(cluster()), signed);
    (key, d, without, with)
}

fn query(name: &str, qtype: RecordType, dnssec_ok: bool) -> Vec<u8> {
    let mut m = request(Name::from_ascii(name).unwrap(), qtype);
    m.metadata.id = 4242;
    let mut edns = Edns::new();
    edns.set_max_payload(4096);
    edns.set_dnssec_ok(dnssec_ok);
    m.edns = Some(edns);
    m.to_vec().unwrap()
}

fn bytes(h: &Handler, packet: &[u8], t: Transport) -> Vec<u8> {
    super::tests::run(h, packet, t).expect("a reply")
}

fn ask(h: &Handler, name: &str, qtype: RecordType, t: Transport) -> Message {
    Message::from_vec(&bytes(h, &query(name, qtype, true), t)).unwrap()
}

const QUESTIONS: [(&str, RecordType); 7] = [
    ("kubernetes.default.svc.cluster.local.", RecordType::A),
    ("kubernetes.default.svc.cluster.local.", RecordType::AAAA),
    ("nosuch.default.svc.cluster.local.", RecordType::A),
    (
        "_https._tcp.kubernetes.default.svc.cluster.local.",
        RecordType::SRV,
    ),
    ("cluster.local.", RecordType::SOA),
    ("web.default.svc.cluster.local.", RecordType::A),
    ("bad_label.cluster.local.", RecordType::A),
];

#[test]
fn without_do_replies_are_unchanged_and_nothing_is_signed() {
    let (_key, d, without, with) = handlers();
    for (name, qtype) in QUESTIONS {
        let packet = query(name, qtype, false);
        for t in [Transport::Udp, Transport::Tcp] {
            let today = bytes(&without, &packet, t);
            assert_eq!(bytes(&with, &packet, t), today, "{name} {qtype} {t:?}");
            // And without a key, DO changes nothing either.
            assert_eq!(bytes(&without, &query(name, qtype, true), t), today);
        }
    }
    assert_eq!(
        d.signatures_made(),
        0,
        "no signer ran for a query without DO"
    );
    assert!(with
        .metrics()
        .render()
        .contains("cache_miss_count_total{type=\"signature\"} 0"));
}

/// Verifies every RRSIG of `section` with the zone's key; returns the count.
fn verified(d: &Dnssec, section: &[Record]) -> usize {
    let key = d.dnskey_data().unwrap();
    let mut n = 0;
    for sig in section {
        let RData::DNSSEC(DNSSECRData::RRSIG(rrsig)) = &sig.data else {
            continue;
        };
        let covered = section
            .iter()
            .filter(|r| r.name == sig.name && r.record_type() == rrsig.input().type_covered);
        key.verify_rrsig(&sig.name, DNSClass::IN, rrsig, covered)
            .unwrap_or_else(|e| panic!("{}: {e}", sig.name));
        n += 1;
    }
    n
}

#[test]
fn do_queries_get_signed_answers_and_the_miss_is_counted() {
    let (_key, d, _, with) = handlers();
    let name = "kubernetes.default.svc.cluster.local.";
    let r = ask(&with, name, RecordType::A, Transport::Udp);
    assert_eq!(r.answers.len(), 2, "{r:#?}");
    assert_eq!(verified(&d, &r.answers), 1);
    assert!(r.edns.as_ref().is_some_and(|e| e.flags().dnssec_ok));
    assert!(r.metadata.authentic_data && r.metadata.authoritative);
    assert_eq!(d.signatures_made(), 1);
    // Over TCP (another hot-path entry) the signature comes from the cache.
    assert_eq!(
        ask(&with, name, RecordType::A, Transport::Tcp).answers,
        r.answers
    );
    assert_eq!(d.signatures_made(), 1);
    let text = with.metrics().render();
    assert!(
        text.contains("cache_miss_count_total{type=\"signature\"} 1"),
        "{text}"
    );
    assert!(text.contains("dnssec_ok_count_total 2"), "{text}");

    let srv = ask(
        &with,
        "_https._tcp.kubernetes.default.svc.cluster.local.",
        RecordType::SRV,
        Transport::Udp,
    );
    assert_eq!(
        (verified(&d, &srv.answers), verified(&d, &srv.additionals)),
        (1, 1)
    );
}

#[test]
fn the_apex_answers_its_dnskey() {
    let (_key, d, without, with) = handlers();
    let apex = "cluster.local.";
    let plain = Message::from_vec(&bytes(
        &with,
        &query(apex, RecordType::DNSKEY, false),
        Transport::Udp,
    ))
    .unwrap();
    assert_eq!(plain.answers, [d.dnskey()]);
    assert!(plain.edns.is_none(), "no DO, no signature, no OPT");
    let signed = ask(&with, apex, RecordType::DNSKEY, Transport::Udp);
    assert_eq!(verified(&d, &signed.answers), 1);
    assert_eq!(signed.answers[0].ttl, 3600);
    // Without a key, DNSKEY is NODATA as before.
    let r = ask(&without, apex, RecordType::DNSKEY, Transport::Udp);
    assert!(r.answers.is_empty() && r.metadata.response_code == ResponseCode::NoError);
}

fn owner_hash(r: &Record) -> Vec<u8> {
    data_encoding::BASE32_DNSSEC
        .decode(r.name.iter().next().unwrap())
        .unwrap()
}

#[test]
fn denials_name_the_closest_encloser_the_snapshot_holds() {
    let (_key, d, _, with) = handlers();
    let r = ask(
        &with,
        "a.nosuch.default.svc.cluster.local.",
        RecordType::A,
        Transport::Udp,
    );
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(verified(&d, &r.authorities), 4, "{r:#?}");
    let encloser = Name::from_ascii("default.svc.cluster.local.").unwrap();
    assert_eq!(owner_hash(&r.authorities[1]), nsec3::hash(&encloser));

    let r = ask(
        &with,
        "kubernetes.default.svc.cluster.local.",
        RecordType::TXT,
        Transport::Udp,
    );
    assert_eq!(
        (r.metadata.response_code, r.answers.len()),
        (ResponseCode::NoError, 0)
    );
    assert_eq!(verified(&d, &r.authorities), 2, "SOA and NSEC3");
    let qname = Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap();
    assert_eq!(owner_hash(&r.authorities[1]), nsec3::hash(&qname));
}

#[test]
fn chaos_and_failures_are_not_signed() {
    let (_key, d, _, with) = handlers();
    let mut m = request(Name::from_ascii("version.bind.").unwrap(), RecordType::TXT);
    m.queries[0].set_query_class(DNSClass::CH);
    let mut edns = Edns::new();
    edns.set_dnssec_ok(true);
    m.edns = Some(edns);
    let r = Message::from_vec(&bytes(&with, &m.to_vec().unwrap(), Transport::Udp)).unwrap();
    assert_eq!(r.answers.len(), 1);
    assert!(r.edns.is_none());
    let unsynced = handler_with(
        None,
        Settings {
            dnssec: Some(d.clone()),
            ..Settings::default()
        },
    );
    let r = ask(
        &unsynced,
        "kubernetes.default.svc.cluster.local.",
        RecordType::A,
        Transport::Udp,
    );
    assert_eq!(r.metadata.response_code, ResponseCode::ServFail);
    assert_eq!(d.signatures_made(), 0);
}
