//! Fuzz targets for skydns and the properties every input must keep.
//!
//! [`packet`] feeds any bytes to skydns's request handler as a UDP and as a
//! TCP request, over one snapshot holding records of every shape the store
//! can carry (A, AAAA, CNAME chains and loops, SRV with odd ports, TXT with
//! escapes, MX, groups, PTRs, 400 records under one name (past hickory's
//! 120 compressed names), two 40 KB TXT (together past a message), a 70 KB
//! TXT (alone past a message); sizes kept just past each limit so that an
//! execution stays cheap). [`etcd_value`] takes any bytes as an etcd value: the record
//! parser, then (if it parses) a snapshot holding it, asked for every type.
//! On every input: no panic, and each reply parses to its last byte, is a
//! response with the request's ID, echoes the question when the request had
//! one, and fits the transport (65,535 over TCP; the client's EDNS size,
//! 512 without EDNS, at most 65,507 over UDP).
//!
//! The handler runs without upstream servers, so every request is answered
//! from memory: the packet path, not the network, is under test. It signs
//! (`-dnssec`, a key made in memory), so requests with the DO bit take the
//! signing and NSEC3 paths too.
//! `fuzz/run.sh` runs these under libFuzzer; the unit tests below run them
//! over seeds and seeded random mutations on every `cargo test`.

use arc_swap::ArcSwapOption;
use hickory_proto::dnssec::crypto::EcdsaSigningKey;
use hickory_proto::dnssec::rdata::DNSKEY;
use hickory_proto::dnssec::{Algorithm, SigningKey};
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::Name;
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};
use skydns::{Dnssec, DnssecSettings as Settings, KeyPair, Zone};
use skydns::{Handler, HandlerSettings, Metrics, Outcome, SharedSnapshot, Snapshot, Transport};
use skydns_msg::path::PathPrefix;
use skydns_msg::record::Record;
use std::sync::{Arc, OnceLock};

/// The zone every target serves: `cluster.local.` as in the 1.2 pod.
pub fn zone() -> Zone {
    Zone {
        domain: "cluster.local.".into(),
        prefix: PathPrefix::default(),
        ttl: 3600,
        min_ttl: 60,
        priority: 10,
        hostmaster: "hostmaster.skydns.local.".into(),
    }
}

/// Records of every shape, as `(key below /skydns/local/cluster/, JSON)`.
fn shapes() -> Vec<(String, String)> {
    let mut records: Vec<(String, String)> = [
        ("svc/default/kubernetes/c88f1059", r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#),
        ("svc/default/kubernetes/_tcp/_https/c88f1059", r#"{"host":"kubernetes.default.svc.cluster.local.","port":443,"priority":10,"weight":10,"ttl":30,"targetstrip":0}"#),
        ("svc/default/v6/a", r#"{"host":"2001:db8::1","ttl":30}"#),
        ("svc/default/mapped/a", r#"{"host":"::ffff:10.5.2.1"}"#),
        ("svc/default/alias/a", r#"{"host":"kubernetes.default.svc.cluster.local."}"#),
        ("svc/default/ext/a", r#"{"host":"www.example.org."}"#),
        ("svc/default/loop/a", r#"{"host":"loop.default.svc.cluster.local."}"#),
        ("svc/default/txt/a", r#"{"text":"a\\065\\\"b\\255","ttl":5}"#),
        ("svc/default/mx/a", r#"{"host":"mail.example.org.","mail":true,"priority":70000}"#),
        ("svc/default/odd/a", r#"{"host":"10.9.9.9","port":70000,"priority":-1,"weight":0,"targetstrip":3,"ttl":0}"#),
        ("svc/default/group/a", r#"{"host":"10.1.0.1","group":"g1"}"#),
        ("svc/default/group/b", r#"{"host":"10.1.0.2","group":"g2"}"#),
        ("svc/default/web/_tcp/_http/h7", r#"{"host":"h7.web.default.svc.cluster.local.","port":80}"#),
        ("svc/default/web/h7", r#"{"host":"10.244.1.7"}"#),
        ("pod/default/1-2-3-4/ad70cf0f", r#"{"host":"1.2.3.4"}"#),
        ("dns/ns/a", r#"{"host":"10.0.0.10"}"#),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    for i in 0..400u32 {
        let [_, _, hi, lo] = i.to_be_bytes();
        records.push((
            format!("svc/default/many/{i}"),
            format!(r#"{{"host":"10.2.{hi}.{lo}"}}"#),
        ));
    }
    for (i, len) in [40_000, 40_000, 70_000].into_iter().enumerate() {
        let owner = if i < 2 { "big" } else { "huge" };
        let text = format!("{i}{}", "t".repeat(len));
        records.push((
            format!("svc/default/{owner}/{i}"),
            format!(r#"{{"text":"{text}"}}"#),
        ));
    }
    records
}

/// A snapshot of `records` (relative keys) plus a PTR for 10.0.0.1.
fn snapshot_of(records: &[(String, String)]) -> Snapshot {
    let mut entries: Vec<(String, Record)> = records
        .iter()
        .filter_map(|(k, v)| {
            let record = Record::from_json(v.as_bytes()).ok()?;
            Some((format!("/skydns/local/cluster/{k}"), record))
        })
        .collect();
    let ptr = r#"{"host":"kubernetes.default.svc.cluster.local.","ttl":30}"#;
    if let Ok(record) = Record::from_json(ptr.as_bytes()) {
        entries.push(("/skydns/arpa/in-addr/10/0/0/1".into(), record));
    }
    Snapshot::new(1, entries)
}

/// A handler without upstream servers over `snapshot`, signing DO replies
/// when given `dnssec`.
fn handler_over(snapshot: Snapshot, dnssec: Option<Arc<Dnssec>>) -> Handler {
    let shared: SharedSnapshot = Arc::new(ArcSwapOption::from_pointee(snapshot));
    let settings = HandlerSettings {
        round_robin: true,
        dnssec,
        ..HandlerSettings::default()
    };
    Handler::new(zone(), shared, settings, Arc::new(Metrics::default()))
}

/// `-dnssec` with an ECDSA key made in memory, so that every request with
/// the DO bit goes through signing and the NSEC3 denials too.
fn signing() -> Arc<Dnssec> {
    let algorithm = Algorithm::ECDSAP256SHA256;
    let pkcs8 = EcdsaSigningKey::generate_pkcs8(algorithm).expect("a new key");
    let key = EcdsaSigningKey::from_pkcs8(&pkcs8, algorithm).expect("the key reads back");
    let public = key.to_public_key().expect("its public half");
    let pair = KeyPair {
        owner: Name::from_ascii("cluster.local.").expect("a name"),
        dnskey: DNSKEY::with_flags(256, public),
        key: Box::new(key),
    };
    let settings = Settings {
        ttl: 3600,
        min_ttl: 60,
        scache: 1000,
    };
    Arc::new(Dnssec::new(pair, "cluster.local.", settings).expect("signing"))
}

/// The handler of [`packet`], built once.
fn packet_handler() -> &'static Handler {
    static HANDLER: OnceLock<Handler> = OnceLock::new();
    HANDLER.get_or_init(|| handler_over(snapshot_of(&shapes()), Some(signing())))
}

/// Target: `input` as a DNS request over UDP and over TCP.
pub fn packet(input: &[u8]) {
    for transport in [Transport::Udp, Transport::Tcp] {
        ask(packet_handler(), input, transport);
    }
}

/// Target: `input` as the value of an etcd key; when it parses, a snapshot
/// holding it (and the kubernetes record) is asked for it by every type.
pub fn etcd_value(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        // The parser takes bytes; non-UTF-8 must be refused, not panic.
        let _ = Record::from_json(input);
        return;
    };
    if Record::from_json(input).is_err() {
        return;
    }
    let records = [
        ("svc/default/fuzz/a".to_owned(), text.to_owned()),
        (
            "svc/default/kubernetes/c88f1059".to_owned(),
            r#"{"host":"10.0.0.1"}"#.to_owned(),
        ),
    ];
    let h = handler_over(snapshot_of(&records), None);
    for qtype in [1u16, 28, 5, 33, 16, 15, 12, 2, 6] {
        for name in [
            "fuzz.default.svc.cluster.local.",
            "a.fuzz.default.svc.cluster.local.",
            "*.default.svc.cluster.local.",
        ] {
            let request = query(name, qtype);
            ask(&h, &request, Transport::Udp);
            ask(&h, &request, Transport::Tcp);
        }
    }
}

/// A plain query for `name`/`qtype` without EDNS.
pub fn query(name: &str, qtype: u16) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = 0x4242;
    m.metadata.recursion_desired = true;
    let name = hickory_proto::rr::Name::from_ascii(name).expect("a valid name");
    m.queries.push(hickory_proto::op::Query::query(
        name,
        hickory_proto::rr::RecordType::from(qtype),
    ));
    m.to_vec().expect("a query encodes")
}

/// Requests that reach every part of the packet path: each shape of record
/// by several types, with and without EDNS (and DO), odd classes and
/// opcodes, two questions, and names outside the domain. The seed corpus of
/// [`packet`], and the start of the unit tests' mutations.
pub fn seeds() -> Vec<Vec<u8>> {
    let names = [
        "kubernetes.default.svc.cluster.local.",
        "_https._tcp.kubernetes.default.svc.cluster.local.",
        "v6.default.svc.cluster.local.",
        "mapped.default.svc.cluster.local.",
        "alias.default.svc.cluster.local.",
        "ext.default.svc.cluster.local.",
        "loop.default.svc.cluster.local.",
        "txt.default.svc.cluster.local.",
        "mx.default.svc.cluster.local.",
        "odd.default.svc.cluster.local.",
        "group.default.svc.cluster.local.",
        "web.default.svc.cluster.local.",
        "*.default.svc.cluster.local.",
        "many.default.svc.cluster.local.",
        "big.default.svc.cluster.local.",
        "huge.default.svc.cluster.local.",
        "1-2-3-4.default.pod.cluster.local.",
        "1.0.0.10.in-addr.arpa.",
        "cluster.local.",
        "ns.dns.cluster.local.",
        "version.bind.",
        "www.example.org.",
    ];
    let mut seeds = Vec::new();
    for name in names {
        for qtype in [1u16, 28, 5, 33, 16, 15, 12, 2, 6, 255] {
            let plain = query(name, qtype);
            let mut m = Message::from_vec(&plain).expect("a query parses");
            seeds.push(plain);
            for (size, dnssec_ok) in [(1232, false), (4096, true), (65535, false)] {
                let mut edns = hickory_proto::op::Edns::new();
                edns.set_max_payload(size);
                edns.set_dnssec_ok(dnssec_ok);
                m.edns = Some(edns);
                seeds.push(m.to_vec().expect("encodes"));
            }
        }
    }
    let mut odd = Message::from_vec(&query(names[0], 1)).expect("parses");
    odd.queries.push(odd.queries[0].clone());
    seeds.push(odd.to_vec().expect("encodes"));
    let mut chaos = Message::from_vec(&query("version.bind.", 16)).expect("parses");
    chaos.queries[0].set_query_class(hickory_proto::rr::DNSClass::CH);
    seeds.push(chaos.to_vec().expect("encodes"));
    seeds
}

/// Asks `h` and checks the reply's properties.
fn ask(h: &Handler, request: &[u8], transport: Transport) {
    match h.handle(request, transport) {
        Outcome::Done(Some(reply)) => check_reply(request, &reply, transport),
        Outcome::Done(None) => {}
        Outcome::Pending(_) => panic!("no upstreams: nothing may wait"),
    }
}

/// The properties of a reply to `request` (see the module doc).
pub fn check_reply(request: &[u8], reply: &[u8], transport: Transport) {
    let parsed_request = Message::from_vec(request).ok();
    let limit = match transport {
        Transport::Tcp => 65_535,
        Transport::Udp => parsed_request
            .as_ref()
            .and_then(|m| m.edns.as_ref())
            .map_or(512, |e| usize::from(e.max_payload()).max(512))
            .min(65_507),
    };
    assert!(
        reply.len() <= limit,
        "{} bytes over {transport:?}, limit {limit}",
        reply.len()
    );
    let mut decoder = BinDecoder::new(reply);
    let m = Message::read(&mut decoder).unwrap_or_else(|e| panic!("reply does not parse: {e}"));
    assert!(
        decoder.is_empty(),
        "{} bytes after the reply",
        decoder.len()
    );
    assert_eq!(m.metadata.message_type, MessageType::Response);
    assert_eq!(&reply[..2], &request[..2], "the request's ID");
    let Some(req) = parsed_request else { return };
    let echoes = matches!(
        m.metadata.response_code,
        ResponseCode::NoError
            | ResponseCode::NXDomain
            | ResponseCode::ServFail
            | ResponseCode::Refused
    );
    if echoes && req.queries.len() == 1 {
        assert_eq!(m.queries, req.queries, "the question");
    }
}

#[cfg(test)]
mod tests;
