//! Reply sizes at the edges: records that do not fit a UDP client's buffer,
//! a datagram, or a DNS message at all. Every reply must parse with nothing
//! after it and stay within what the transport and the client allow.

use super::{handler, request, run};
use crate::handler::*;
use hickory_proto::rr::Name;
use skydns_msg::record::Record as SkyRecord;

/// A snapshot holding `texts` as TXT records of `big.default.svc.cluster.local.`.
fn with_texts(texts: &[usize]) -> Snapshot {
    Snapshot::new(
        1,
        texts.iter().enumerate().map(|(i, &len)| {
            // Distinct texts, or de-duplication would keep one.
            let json = format!(r#"{{"text":"{i}{}","ttl":30}}"#, "t".repeat(len));
            let key = format!("/skydns/local/cluster/svc/default/big/{i}");
            (key, SkyRecord::from_json(json.as_bytes()).unwrap())
        }),
    )
}

/// The reply to `TXT big.default.svc.cluster.local.`, checked to be one
/// whole message no larger than `max`.
fn ask_txt(snapshot: Snapshot, edns: Option<u16>, t: Transport, max: usize) -> Message {
    let mut m = request(
        Name::from_ascii("big.default.svc.cluster.local.").unwrap(),
        RecordType::TXT,
    );
    if let Some(size) = edns {
        let mut e = hickory_proto::op::Edns::new();
        e.set_max_payload(size);
        m.edns = Some(e);
    }
    let bytes = run(&handler(Some(snapshot)), &m.to_vec().unwrap(), t).expect("a reply");
    assert!(bytes.len() <= max, "{} bytes > {max}", bytes.len());
    let reply = Message::from_vec(&bytes).unwrap();
    assert_eq!(reply.to_vec().unwrap(), bytes, "bytes after the message");
    assert_eq!(reply.metadata.id, m.metadata.id);
    assert_eq!(reply.queries, m.queries);
    reply
}

#[test]
fn two_40k_texts_over_tcp_are_servfail_not_garbage() {
    let reply = ask_txt(with_texts(&[40_000, 40_000]), None, Transport::Tcp, 65_535);
    assert_eq!(reply.metadata.response_code, ResponseCode::ServFail);
    assert!(reply.answers.is_empty());
}

#[test]
fn two_40k_texts_over_udp_fit_the_client() {
    // No EDNS: 512 bytes, and not even one record fits.
    let reply = ask_txt(with_texts(&[40_000, 40_000]), None, Transport::Udp, 512);
    assert!(reply.metadata.truncation);
    assert!(reply.answers.is_empty());
    // EDNS 65535: one fits a datagram, TC says there is more.
    let reply = ask_txt(
        with_texts(&[40_000, 40_000]),
        Some(65_535),
        Transport::Udp,
        65_507,
    );
    assert!(reply.metadata.truncation);
    assert_eq!(reply.answers.len(), 1);
}

#[test]
fn a_record_larger_than_any_message_gets_an_empty_reply() {
    for (edns, t, max) in [
        (None, Transport::Udp, 512),
        (Some(65_535), Transport::Udp, 65_507),
        (None, Transport::Tcp, 65_535),
    ] {
        let reply = ask_txt(with_texts(&[1_000_000]), edns, t, max);
        assert!(reply.answers.is_empty(), "{t:?}");
    }
}
