use super::wire::{decode_question, name_text, rcode_name, type_text, ReplySummary};
use super::*;
use hickory_proto::op::{Edns, Message, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, NS, SOA};
use hickory_proto::rr::{RData, Record};

fn reply(rcode: ResponseCode, answers: usize, soa: bool) -> Vec<u8> {
    let mut m = Message::response(7, OpCode::Query);
    m.metadata.response_code = rcode;
    let name = Name::from_ascii("a.example.").unwrap();
    m.queries.push(Query::query(name.clone(), RecordType::A));
    for _ in 0..answers {
        m.answers.push(Record::from_rdata(
            name.clone(),
            30,
            RData::A(A::new(10, 0, 0, 1)),
        ));
    }
    if soa {
        let soa = SOA::new(name.clone(), name.clone(), 1, 2, 3, 4, 5);
        m.authorities
            .push(Record::from_rdata(name, 5, RData::SOA(soa)));
    }
    m.to_vec().unwrap()
}

#[test]
fn replies_are_classed_as_coredns_does() {
    assert_eq!(
        Class::of(&reply(ResponseCode::NoError, 1, false)),
        Some(Class::Success)
    );
    assert_eq!(
        Class::of(&reply(ResponseCode::NXDomain, 0, true)),
        Some(Class::Denial)
    );
    assert_eq!(
        Class::of(&reply(ResponseCode::NoError, 0, true)),
        Some(Class::Denial),
        "NODATA"
    );
    for rcode in [
        ResponseCode::ServFail,
        ResponseCode::Refused,
        ResponseCode::FormErr,
        ResponseCode::NotImp,
    ] {
        assert_eq!(
            Class::of(&reply(rcode, 0, false)),
            Some(Class::Error),
            "{rcode:?}"
        );
    }
    assert_eq!(Class::of(&[0; 11]), None);
}

#[test]
fn a_referral_is_a_success_a_truncated_nodata_a_denial_and_badvers_an_error() {
    let name = Name::from_ascii("stub.example.").unwrap();
    let mut referral = Message::response(1, OpCode::Query);
    let ns = RData::NS(NS(Name::from_ascii("ns.stub.example.").unwrap()));
    referral
        .authorities
        .push(Record::from_rdata(name.clone(), 30, ns));
    assert_eq!(Class::of(&referral.to_vec().unwrap()), Some(Class::Success));
    let mut truncated = Message::response(2, OpCode::Query);
    truncated.metadata.truncation = true;
    let soa = SOA::new(name.clone(), name.clone(), 1, 2, 3, 4, 5);
    truncated
        .authorities
        .push(Record::from_rdata(name, 5, RData::SOA(soa)));
    assert_eq!(
        Class::of(&truncated.to_vec().unwrap()),
        Some(Class::Denial),
        "TC does not count (CoreDNS's Typify)"
    );
    truncated.authorities.clear();
    assert_eq!(
        Class::of(&truncated.to_vec().unwrap()),
        Some(Class::Success)
    );
    // BADVERS (16): the header says 0, the OPT record the high bits.
    let mut badvers = Message::response(3, OpCode::Query);
    badvers.metadata.response_code = ResponseCode::BADVERS;
    badvers.edns = Some(Edns::new());
    let bytes = badvers.to_vec().unwrap();
    assert_eq!(bytes[3] & 0x0f, 0, "the header alone reads NOERROR");
    assert_eq!(Class::of(&bytes), Some(Class::Error));
    assert_eq!(ReplySummary::read(&bytes).unwrap().rcode, 16);
    assert_eq!(rcode_name(16), "BADVERS");
    assert_eq!(rcode_name(99), "RCODE99");
}

#[test]
fn a_reply_cut_short_is_read_as_far_as_it_goes() {
    let full = reply(ResponseCode::NoError, 0, true);
    assert!(ReplySummary::read(&full).unwrap().soa_in_authority);
    for len in 12..full.len() {
        let summary = ReplySummary::read(&full[..len]).unwrap();
        assert_eq!(summary.rcode, 0);
        assert!(!summary.soa_in_authority, "an SOA cut short at {len}");
    }
    let mut hostile = full[..12].to_vec();
    hostile[9] = 0xff; // 255 authority records that are not there
    hostile.extend_from_slice(&[0x80, 1, 2]); // a reserved label type
    assert!(ReplySummary::read(&hostile).is_some());
}

#[test]
fn the_flag_names_the_classes_and_off_is_none() {
    assert!(QueryLog::new("", 1.0).unwrap().is_none());
    let log = QueryLog::new("denial, error", 1.0).unwrap().unwrap();
    assert!(!log.admits(&reply(ResponseCode::NoError, 1, false)));
    assert!(log.admits(&reply(ResponseCode::NXDomain, 0, true)));
    assert!(log.admits(&reply(ResponseCode::ServFail, 0, false)));
    let all = QueryLog::new("all", 1.0).unwrap().unwrap();
    assert!(all.admits(&reply(ResponseCode::NoError, 1, false)));
    let success = QueryLog::new("success", 1.0).unwrap().unwrap();
    assert!(!success.admits(&reply(ResponseCode::NoError, 0, true)));
    let err = QueryLog::new("denial,errors", 1.0).unwrap_err();
    assert!(
        err.contains("-log-queries") && err.contains("\"errors\""),
        "{err}"
    );
    for bad in [0.0, -0.5, 1.5, f64::NAN, 1e-7] {
        let err = QueryLog::new("all", bad).unwrap_err();
        assert!(err.contains("-log-queries-sample"), "{err}");
    }
}

#[test]
fn sampling_takes_exactly_the_rate_of_the_logged_class() {
    let log = QueryLog::new("denial", 0.25).unwrap().unwrap();
    let nx = reply(ResponseCode::NXDomain, 0, true);
    let ok = reply(ResponseCode::NoError, 1, false);
    let mut taken = Vec::new();
    for i in 0..16 {
        // Replies of other classes neither count nor are taken.
        assert!(!log.admits(&ok));
        if log.admits(&nx) {
            taken.push(i);
        }
    }
    assert_eq!(taken, [3, 7, 11, 15], "every fourth denial");
    let tenth = QueryLog::new("all", 0.1).unwrap().unwrap();
    let n = (0..3000).filter(|_| tenth.admits(&ok)).count();
    assert_eq!(n, 300);
}

#[test]
fn a_wire_question_reads_back_as_dig_prints_it() {
    let mut q = Vec::new();
    for label in [&b"My"[..], b"a.b", b"x\x01"] {
        q.push(label.len() as u8);
        q.extend_from_slice(label);
    }
    q.extend_from_slice(&[0, 0, 28, 0, 1]);
    let (name, qtype, qclass) = decode_question(&q).unwrap();
    assert_eq!(name, "My.a\\.b.x\\001.");
    assert_eq!((qtype, qclass), (RecordType::AAAA, DNSClass::IN));
    assert_eq!(decode_question(&[0, 0, 2, 0, 3]).unwrap().0, ".");
    assert_eq!(decode_question(&[5, b'a']), None, "cut short");
    let (_, qtype, _) = decode_question(&[0, 0xff, 0x00, 0, 1]).unwrap();
    assert_eq!(type_text(qtype), "TYPE65280");
}

#[test]
fn a_name_reads_the_same_from_the_wire_and_decoded() {
    let labels: [&[u8]; 3] = [b"Sp ace", b"a.b", b"\xff\x00"];
    let name = Name::from_labels(labels.iter().copied()).unwrap();
    let mut wire = Vec::new();
    for label in labels {
        wire.push(label.len() as u8);
        wire.extend_from_slice(label);
    }
    wire.extend_from_slice(&[0, 0, 1, 0, 1]);
    let from_wire = decode_question(&wire).unwrap().0;
    assert_eq!(from_wire, name_text(name.iter()));
    let special: &[u8] = b"x\"(y);@$";
    assert_eq!(name_text([special].into_iter()), "x\\\"\\(y\\)\\;\\@\\$.");
    assert_eq!(from_wire, "Sp\\032ace.a\\.b.\\255\\000.");
}

#[test]
fn a_written_line_has_every_field() {
    let log = QueryLog::new("all", 1.0).unwrap().unwrap();
    let bytes = reply(ResponseCode::NXDomain, 0, true);
    let name = Name::from_ascii("Nope.default.svc.cluster.local.").unwrap();
    let text = logging::Captured::plain_lines_of(|| {
        log.note(&Entry {
            client: Some("10.1.2.3:40000".parse().unwrap()),
            tcp: true,
            asked: Asked::Decoded(&name, RecordType::AAAA, DNSClass::IN),
            reply: &bytes,
            elapsed: Duration::from_micros(1500),
            source: Source::Local,
        });
    });
    for field in [
        "skydns::query: query",
        "client=\"10.1.2.3:40000\"",
        "proto=\"tcp\"",
        "name=\"Nope.default.svc.cluster.local.\"",
        "qtype=\"AAAA\"",
        "qclass=\"IN\"",
        "rcode=\"NXDOMAIN\"",
        "answers=0",
        "truncated=false",
        &format!("size={}", bytes.len()),
        "duration_seconds=0.0015",
        "source=\"local\"",
    ] {
        assert!(text.contains(field), "{field} missing from {text}");
    }
}
