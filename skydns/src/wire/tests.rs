//! The compressing encoder against hickory's: the same message when read
//! back, and smaller once a message holds more than 120 names.

use super::*;
use hickory_proto::op::{Edns, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, MX, NS, PTR, SOA, SRV, TXT};
use hickory_proto::rr::RecordType;
use std::net::{Ipv4Addr, Ipv6Addr};

fn name(text: &str) -> Name {
    Name::from_ascii(text).unwrap()
}

fn reply_with(answers: Vec<Record>) -> Message {
    let mut m = Message::new(0x1234, MessageType::Response, OpCode::Query);
    m.metadata.authoritative = true;
    m.metadata.recursion_desired = true;
    m.metadata.recursion_available = true;
    m.queries.push(Query::query(
        name("Web.default.svc.cluster.local."),
        RecordType::A,
    ));
    m.answers = answers;
    m
}

fn every_type() -> Message {
    let owner = name("Web.default.svc.cluster.local.");
    let r = |data: RData| Record::from_rdata(owner.clone(), 30, data);
    let mut m = reply_with(vec![
        r(RData::A(A(Ipv4Addr::new(10, 0, 0, 1)))),
        r(RData::AAAA(AAAA(Ipv6Addr::LOCALHOST))),
        r(RData::CNAME(CNAME(name(
            "kubernetes.default.svc.cluster.local.",
        )))),
        r(RData::TXT(TXT::new(vec!["a".into(), "b c".into()]))),
        r(RData::MX(MX::new(10, name("mail.example.org.")))),
        r(RData::SRV(SRV::new(
            10,
            100,
            443,
            name("web.default.svc.cluster.local."),
        ))),
        r(RData::PTR(PTR(name("x.default.svc.cluster.local.")))),
        r(RData::NS(NS(name("ns.dns.cluster.local.")))),
    ]);
    m.authorities.push(Record::from_rdata(
        name("cluster.local."),
        60,
        RData::SOA(SOA::new(
            name("ns.dns.cluster.local."),
            name("hostmaster.skydns.local."),
            1_700_000_000,
            28_800,
            7_200,
            604_800,
            60,
        )),
    ));
    m.additionals.push(Record::from_rdata(
        name("x.default.svc.cluster.local."),
        30,
        RData::A(A(Ipv4Addr::new(1, 2, 3, 4))),
    ));
    m
}

fn bytes(e: Encoded) -> Vec<u8> {
    match e {
        Encoded::Bytes(b) => b,
        other => panic!("not encoded: {other:?}"),
    }
}

#[test]
fn every_record_type_reads_back_as_hickory_writes_it() {
    let mut m = every_type();
    let ours = Message::from_vec(&bytes(encode(&m))).unwrap();
    let theirs = Message::from_vec(&m.to_vec().unwrap()).unwrap();
    assert_eq!(ours, theirs);
    // With an OPT, a truncation bit and an extended rcode too.
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    m.edns = Some(edns);
    m.metadata.truncation = true;
    m.metadata.response_code = ResponseCode::NXDomain;
    let ours = Message::from_vec(&bytes(encode(&m))).unwrap();
    assert_eq!(ours, Message::from_vec(&m.to_vec().unwrap()).unwrap());
}

#[test]
fn every_name_is_compressed_not_only_the_first_120() {
    let owner = name("Web.default.svc.cluster.local.");
    let answers: Vec<Record> = (0..500u32)
        .map(|i| {
            Record::from_rdata(
                owner.clone(),
                30,
                RData::A(A(Ipv4Addr::from(0x0a00_0000 + i))),
            )
        })
        .collect();
    let m = reply_with(answers);
    let ours = bytes(encode(&m));
    let theirs = m.to_vec().unwrap();
    // 12 + question 35 + 500 × (2 + 10 + 4): every owner a pointer.
    assert_eq!(ours.len(), 12 + 35 + 500 * 16);
    assert!(theirs.len() > 17_000, "hickory: {}", theirs.len());
    assert_eq!(
        Message::from_vec(&ours).unwrap(),
        Message::from_vec(&theirs).unwrap()
    );
}

#[test]
fn a_message_over_65535_bytes_is_too_big() {
    let big = |i: usize| {
        let text = vec![format!("{i}{}", "t".repeat(250)); 160];
        Record::from_rdata(name("big."), 30, RData::TXT(TXT::new(text)))
    };
    assert_eq!(encode(&reply_with(vec![big(0), big(1)])), Encoded::TooBig);
    let huge = vec!["x".repeat(255); 300];
    let huge = Record::from_rdata(name("huge."), 30, RData::TXT(TXT::new(huge)));
    assert_eq!(encode(&reply_with(vec![huge])), Encoded::TooBig);
}

#[test]
fn other_types_are_left_to_hickory() {
    let caa = RData::Unknown {
        code: RecordType::Unknown(65_000),
        rdata: hickory_proto::rr::rdata::NULL::with(vec![1, 2, 3]),
    };
    let m = reply_with(vec![Record::from_rdata(name("x."), 30, caa)]);
    assert_eq!(encode(&m), Encoded::Unsupported);
}

#[test]
fn dnssec_records_are_written_with_their_names_uncompressed() {
    use hickory_proto::dnssec::rdata::{DNSSECRData, SigInput, DNSKEY, NSEC3, RRSIG};
    use hickory_proto::dnssec::{Algorithm, Nsec3HashAlgorithm, PublicKeyBuf};
    use hickory_proto::rr::SerialNumber;
    let owner = name("Web.default.svc.cluster.local.");
    let input = SigInput {
        type_covered: RecordType::A,
        algorithm: Algorithm::ECDSAP256SHA256,
        num_labels: 5,
        original_ttl: 30,
        sig_expiration: SerialNumber::new(2),
        sig_inception: SerialNumber::new(1),
        key_tag: 4711,
        signer_name: name("cluster.local."),
    };
    let dnssec = |data: DNSSECRData| Record::from_rdata(owner.clone(), 30, RData::DNSSEC(data));
    let key = PublicKeyBuf::new(vec![1; 64], Algorithm::ECDSAP256SHA256);
    let nsec3 = NSEC3::new(
        Nsec3HashAlgorithm::SHA1,
        false,
        0,
        vec![],
        vec![7; 20],
        [RecordType::A],
    );
    let m = reply_with(vec![
        Record::from_rdata(owner.clone(), 30, RData::A(A(Ipv4Addr::new(10, 0, 0, 1)))),
        dnssec(DNSSECRData::RRSIG(RRSIG::from_sig(input, vec![9; 64]))),
        dnssec(DNSSECRData::DNSKEY(DNSKEY::with_flags(256, key))),
        dnssec(DNSSECRData::NSEC3(nsec3)),
    ]);
    let ours = bytes(encode(&m));
    assert_eq!(
        Message::from_vec(&ours).unwrap(),
        Message::from_vec(&m.to_vec().unwrap()).unwrap()
    );
    // In the question, and again whole as the RRSIG's signer.
    let signer = b"\x07cluster\x05local\x00";
    let count = ours.windows(signer.len()).filter(|w| w == signer).count();
    assert_eq!(count, 2, "{ours:?}");
}
