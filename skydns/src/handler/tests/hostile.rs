//! Odd but parseable requests: several questions, an EDNS version we do not
//! speak, classes without data, and a malformed OPT that must get the same
//! reply whether or not the question is in the encoded-reply cache.

use super::{ask_msg, handler, request, run};
use crate::answer::tests::cluster;
use crate::handler::*;
use hickory_proto::op::{Edns, Query};
use hickory_proto::rr::{DNSClass, Name};

fn kubernetes() -> Message {
    request(
        Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap(),
        RecordType::A,
    )
}

#[test]
fn two_questions_are_a_format_error() {
    let mut m = kubernetes();
    m.queries.push(m.queries[0].clone());
    for t in [Transport::Udp, Transport::Tcp] {
        let r = ask_msg(&handler(Some(cluster())), &m, t);
        assert_eq!(r.metadata.response_code, ResponseCode::FormErr);
        assert!(r.answers.is_empty());
    }
}

#[test]
fn an_edns_version_above_zero_gets_badvers_with_an_opt() {
    let h = handler(Some(cluster()));
    let mut m = kubernetes();
    let mut edns = Edns::new();
    edns.set_version(1);
    m.edns = Some(edns);
    let r = ask_msg(&h, &m, Transport::Udp);
    // 16 is BADVERS in an OPT context (hickory names the number BADSIG).
    assert_eq!(u16::from(r.metadata.response_code), 16);
    assert_eq!(r.edns.as_ref().map(Edns::version), Some(0));
    assert!(r.answers.is_empty());
    // Version 0 is answered (and without an OPT, as SkyDNS).
    m.edns = Some(Edns::new());
    let r = ask_msg(&h, &m, Transport::Udp);
    assert_eq!(r.answers.len(), 1);
    assert!(r.edns.is_none());
}

/// `kubernetes A` with an OPT of `version` carrying `options` (raw bytes).
fn with_opt(version: u8, options: &[u8]) -> Vec<u8> {
    let mut packet = kubernetes().to_vec().unwrap();
    packet[11] = 1; // ARCOUNT
    packet.push(0); // root owner
    packet.extend_from_slice(&41u16.to_be_bytes());
    packet.extend_from_slice(&1232u16.to_be_bytes());
    packet.extend_from_slice(&[0, version, 0, 0]);
    packet.extend_from_slice(&u16::try_from(options.len()).unwrap().to_be_bytes());
    packet.extend_from_slice(options);
    packet
}

#[test]
fn every_version_above_zero_gets_badvers_cold_and_warm_on_both_transports() {
    let cookie = [0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];
    for t in [Transport::Udp, Transport::Tcp] {
        let cold = handler(Some(cluster()));
        let warm = handler(Some(cluster()));
        for options in [&[][..], &cookie[..]] {
            // The same question with version 0, twice: in the reply cache.
            for _ in 0..2 {
                let r = run(&warm, &with_opt(0, options), t).expect("a reply");
                assert_eq!(Message::from_vec(&r).unwrap().answers.len(), 1);
            }
            for version in [1, 2, 255] {
                for h in [&cold, &warm] {
                    let bytes = run(h, &with_opt(version, options), t).expect("a reply");
                    let r = Message::from_vec(&bytes).unwrap();
                    let what = format!("{t:?} version {version} options {options:?}");
                    assert_eq!(u16::from(r.metadata.response_code), 16, "{what}");
                    assert_eq!(r.edns.as_ref().map(Edns::version), Some(0), "{what}");
                    assert_eq!(r.queries, kubernetes().queries, "{what}: question echoed");
                    assert!(r.answers.is_empty(), "{what}");
                }
            }
        }
    }
}

#[test]
fn classes_without_data_are_refused_not_answered_with_in_records() {
    let h = handler(Some(cluster()));
    for class in [
        DNSClass::HS,
        DNSClass::NONE,
        DNSClass::ANY,
        DNSClass::Unknown(77),
    ] {
        let mut m = kubernetes();
        let name = m.queries[0].name().clone();
        let mut q = Query::query(name, RecordType::A);
        q.set_query_class(class);
        m.queries = vec![q];
        let r = ask_msg(&h, &m, Transport::Udp);
        assert_eq!(r.metadata.response_code, ResponseCode::Refused, "{class:?}");
        assert!(
            r.answers.is_empty() && !r.metadata.authoritative,
            "{class:?}"
        );
    }
}

#[test]
fn a_malformed_opt_gets_the_same_reply_cold_and_warm() {
    let mut m = kubernetes();
    m.edns = Some(Edns::new());
    let good = m.to_vec().unwrap();
    // The OPT's data (6 bytes): a COOKIE option claiming 8 bytes, carrying 2.
    let mut bad = good.clone();
    let rdlen_at = bad.len() - 2;
    bad[rdlen_at..].copy_from_slice(&6u16.to_be_bytes());
    bad.extend_from_slice(&[0, 10, 0, 8, 1, 2]);
    let cold = run(&handler(Some(cluster())), &bad, Transport::Udp);
    let h = handler(Some(cluster()));
    for _ in 0..2 {
        run(&h, &good, Transport::Udp).expect("warm the cache");
    }
    let warm = run(&h, &bad, Transport::Udp);
    let rcode = |b: &Option<Vec<u8>>| b.as_ref().map(|b| b[3] & 0x0f);
    assert_eq!(rcode(&cold), rcode(&warm), "cold {cold:?} warm {warm:?}");
    assert_ne!(rcode(&cold), Some(0), "the full path rejects it");
}
