//! Turning an answer into a reply message, SkyDNS's post-processing: duplicate
//! removal, TTL clamping, round robin, and fitting the reply to the client's
//! buffer (SkyDNS's `Fit`, `server/msg.go`). [`encode`] treats a message it
//! could not write whole as too big.

use crate::wire::Encoded;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType};
use rand::seq::SliceRandom;
use std::collections::{HashMap, HashSet};

/// Removes duplicate records (same owner, class, type and data, owner
/// compared case-insensitively) and keeps one CNAME per owner: the last,
/// in the place of the first. SkyDNS's `dedup` overwrote the kept CNAME on
/// both of its branches (round robin or not), so the last one won there too.
pub(crate) fn dedup(records: &mut Vec<Record>) {
    let mut seen: HashSet<(String, u16, String)> = HashSet::new();
    let mut cname_at: HashMap<String, usize> = HashMap::new();
    let mut kept: Vec<Record> = Vec::with_capacity(records.len());
    for r in records.drain(..) {
        let owner = r.name.to_string().to_ascii_lowercase();
        if r.record_type() == RecordType::CNAME {
            if let Some(&at) = cname_at.get(&owner) {
                kept[at] = r;
                continue;
            }
            cname_at.insert(owner.clone(), kept.len());
        }
        if seen.insert((owner, u16::from(r.dns_class), r.data.to_string())) {
            kept.push(r);
        }
    }
    *records = kept;
}

/// With more than one answer, every TTL becomes `min(max_ttl, smallest TTL)`.
pub(crate) fn clamp_ttls(answers: &mut [Record], max_ttl: u32) {
    if answers.len() < 2 {
        return;
    }
    let smallest = answers.iter().map(|r| r.ttl).min().unwrap_or(max_ttl);
    let ttl = smallest.min(max_ttl);
    for r in answers {
        r.ttl = ttl;
    }
}

/// Round robin: shuffle unless the list holds more than one CNAME
/// (glibc cannot follow reordered CNAME chains).
pub(crate) fn shuffle(answers: &mut [Record]) {
    let cnames = answers
        .iter()
        .filter(|r| matches!(r.data, RData::CNAME(_)))
        .count();
    if cnames <= 1 {
        answers.shuffle(&mut rand::rng());
    }
}

/// The most a UDP reply can carry (65,535 less the IPv4 and UDP headers),
/// whatever EDNS size the client offers.
pub(crate) const MAX_UDP_PAYLOAD: usize = 65_507;

/// Encodes `message` with every name compressed ([`crate::wire`]), or by
/// hickory for record types that module does not write; `None` when it does
/// not fit in one DNS message (hickory then writes fewer records than the
/// message holds) or cannot be encoded at all.
pub(crate) fn encode(message: &Message) -> Option<Vec<u8>> {
    match crate::wire::encode(message) {
        Encoded::Bytes(bytes) => return Some(bytes),
        Encoded::TooBig => return None,
        Encoded::Unsupported => {}
    }
    let bytes = message.to_vec().ok()?;
    let count = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    };
    let additionals = message.additionals.len()
        + usize::from(message.edns.is_some())
        + usize::from(message.signature.is_some());
    let whole = count(6) == Some(message.answers.len())
        && count(8) == Some(message.authorities.len())
        && count(10) == Some(additionals);
    whole.then_some(bytes)
}

/// Encodes `reply` so it fits in `limit` bytes, following SkyDNS's `Fit`.
/// Returns `None` only if hickory cannot encode the message at all.
#[cfg(test)]
pub(crate) fn fit(reply: Message, limit: usize, tcp: bool) -> Option<Vec<u8>> {
    fit_reporting(reply, limit, tcp).map(|(bytes, _)| bytes)
}

/// [`fit`], also telling whether a TCP reply overflowed into SERVFAIL.
pub(crate) fn fit_reporting(
    mut reply: Message,
    limit: usize,
    tcp: bool,
) -> Option<(Vec<u8>, bool)> {
    let limit = if tcp {
        limit
    } else {
        limit.min(MAX_UDP_PAYLOAD)
    };
    let fits = |bytes: &Option<Vec<u8>>| bytes.as_ref().is_some_and(|b| b.len() < limit);
    let mut bytes = encode(&reply);
    // SkyDNS: "greater than" drops the additionals, "less than" sends.
    if bytes.as_ref().is_none_or(|b| b.len() > limit) && !reply.additionals.is_empty() {
        reply.additionals.clear();
        bytes = encode(&reply);
    }
    if let Some(bytes) = bytes.filter(|b| b.len() < limit) {
        return Some((bytes, false));
    }
    if tcp {
        let mut failure = Message::response(reply.metadata.id, reply.metadata.op_code);
        failure.metadata.response_code = ResponseCode::ServFail;
        failure.metadata.recursion_desired = reply.metadata.recursion_desired;
        failure.queries = reply.queries;
        return encode(&failure).map(|b| (b, true));
    }
    reply.metadata.truncation = true;
    let answers = std::mem::take(&mut reply.answers);
    // Binary search for the longest prefix that packs below the limit; none
    // at all when not even the first answer fits.
    let (mut lo, mut hi) = (0usize, answers.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        reply.answers = answers[..mid].to_vec();
        if fits(&encode(&reply)) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    reply.answers = answers.into_iter().take(lo).collect();
    if let Some(bytes) = encode(&reply).filter(|b| b.len() < limit) {
        return Some((bytes, false));
    }
    // Even the question and the authority section are too big: the bare
    // header and question with TC, which always fit 512 bytes.
    reply.authorities.clear();
    encode(&reply).map(|b| (b, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{MessageType, OpCode, Query};
    use hickory_proto::rr::rdata::{A, CNAME};
    use hickory_proto::rr::Name;
    use std::net::Ipv4Addr;

    fn a(owner: &str, ip: u8, ttl: u32) -> Record {
        Record::from_rdata(
            Name::from_ascii(owner).unwrap(),
            ttl,
            RData::A(A(Ipv4Addr::new(10, 0, 0, ip))),
        )
    }

    fn cname(owner: &str, target: &str) -> Record {
        Record::from_rdata(
            Name::from_ascii(owner).unwrap(),
            30,
            RData::CNAME(CNAME(Name::from_ascii(target).unwrap())),
        )
    }

    #[test]
    fn dedup_removes_identical_records_and_extra_cnames() {
        let mut rs = vec![
            a("x.", 1, 30),
            a("X.", 1, 60),
            a("x.", 2, 30),
            cname("y.", "a."),
            cname("y.", "b."),
        ];
        dedup(&mut rs);
        assert_eq!(rs.len(), 3);
        assert_eq!(rs[2].data.to_string(), "b.", "the last CNAME, as SkyDNS");
    }

    #[test]
    fn the_last_cname_of_an_owner_survives() {
        let mut rs = vec![cname("y.", "a."), cname("y.", "b."), cname("y.", "c.")];
        dedup(&mut rs);
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0].data.to_string(), "c.");
    }

    #[test]
    fn ttl_clamp_only_for_several_answers() {
        let mut one = vec![a("x.", 1, 7200)];
        clamp_ttls(&mut one, 3600);
        assert_eq!(one[0].ttl, 7200);
        let mut two = vec![a("x.", 1, 30), a("x.", 2, 60)];
        clamp_ttls(&mut two, 3600);
        assert!(two.iter().all(|r| r.ttl == 30));
        let mut big = vec![a("x.", 1, 7200), a("x.", 2, 9000)];
        clamp_ttls(&mut big, 3600);
        assert!(big.iter().all(|r| r.ttl == 3600));
    }

    #[test]
    fn shuffle_leaves_cname_chains_alone() {
        let chain = vec![
            cname("a.", "b."),
            cname("b.", "c."),
            a("c.", 1, 1),
            a("c.", 2, 1),
        ];
        for _ in 0..20 {
            let mut rs = chain.clone();
            shuffle(&mut rs);
            assert_eq!(rs, chain);
        }
    }

    fn reply(n: u8) -> Message {
        let mut m = Message::new(7, MessageType::Response, OpCode::Query);
        m.queries
            .push(Query::query(Name::from_ascii("x.").unwrap(), RecordType::A));
        m.answers = (0..n).map(|i| a("x.", i, 30)).collect();
        m.additionals = (0..n).map(|i| a("y.", i, 30)).collect();
        m
    }

    #[test]
    fn fit_drops_additionals_first_then_truncates_over_udp() {
        let full = reply(40).to_vec().unwrap().len();
        let bytes = fit(reply(40), full + 1, false).unwrap();
        assert_eq!(bytes.len(), full, "fits as is when strictly smaller");

        let bytes = fit(reply(40), full, false).unwrap();
        let m = Message::from_vec(&bytes).unwrap();
        // Exactly equal is not "greater": the additionals stay, answers are cut.
        assert!(!m.additionals.is_empty());
        assert!(m.metadata.truncation);
        assert!(m.answers.len() < 40);

        let bytes = fit(reply(40), 200, false).unwrap();
        let m = Message::from_vec(&bytes).unwrap();
        assert!(m.metadata.truncation);
        assert!(bytes.len() < 200);
        assert!(!m.answers.is_empty() && m.answers.len() < 40);
        let one_more = {
            let mut r = reply(0);
            r.answers = (0..=m.answers.len() as u8)
                .map(|i| a("x.", i, 30))
                .collect();
            r.to_vec().unwrap().len()
        };
        assert!(one_more >= 200, "longest prefix kept");
    }

    #[test]
    fn fit_sends_no_answer_rather_than_one_too_big() {
        // SkyDNS kept one answer even when it overflowed the client's buffer.
        let bytes = fit(reply(3), 20, false).unwrap();
        let m = Message::from_vec(&bytes).unwrap();
        assert_eq!(m.answers.len(), 0);
        assert!(m.metadata.truncation);
        assert_eq!(m.queries.len(), 1);
    }

    fn txt(owner: &str, len: usize) -> Record {
        let text = vec!["x".repeat(255); len / 256];
        Record::from_rdata(
            Name::from_ascii(owner).unwrap(),
            30,
            RData::TXT(hickory_proto::rr::rdata::TXT::new(text)),
        )
    }

    fn with_answers(answers: Vec<Record>) -> Message {
        let mut m = reply(0);
        m.answers = answers;
        m
    }

    #[test]
    fn a_message_over_65535_bytes_is_too_big_not_garbage() {
        let two = with_answers(vec![txt("x.", 40_000), txt("x.", 40_000)]);
        assert_eq!(encode(&two), None, "hickory cut it short");
        let bytes = fit(two.clone(), 65_535, true).unwrap();
        let m = Message::from_vec(&bytes).unwrap();
        assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
        assert_eq!(m.to_vec().unwrap(), bytes, "no bytes after the message");

        // Over UDP with the largest EDNS size: one TXT, TC, nothing after it.
        let bytes = fit(two, 65_535, false).unwrap();
        assert!(bytes.len() <= MAX_UDP_PAYLOAD);
        let m = Message::from_vec(&bytes).unwrap();
        assert_eq!(m.answers.len(), 1);
        assert!(m.metadata.truncation);
        assert_eq!(m.to_vec().unwrap(), bytes);
    }

    #[test]
    fn a_record_larger_than_any_message_leaves_only_the_question() {
        let huge = with_answers(vec![txt("x.", 1_000_000)]);
        for (limit, tcp) in [(512, false), (65_535, false), (65_535, true)] {
            let bytes = fit(huge.clone(), limit, tcp).unwrap();
            assert!(bytes.len() < limit.min(MAX_UDP_PAYLOAD));
            let m = Message::from_vec(&bytes).unwrap();
            assert!(m.answers.is_empty());
            assert_eq!(m.to_vec().unwrap(), bytes, "{limit} {tcp}");
        }
    }

    #[test]
    fn udp_replies_never_exceed_the_datagram_limit() {
        let many = with_answers(
            (0..5_000u32)
                .map(|i| {
                    let ip = Ipv4Addr::from(0x0a00_0000 + i);
                    Record::from_rdata(Name::from_ascii("x.").unwrap(), 30, RData::A(A(ip)))
                })
                .collect(),
        );
        // 5,000 A records need ~80 KB: the client's 65,535 cannot be met.
        let bytes = fit(many, 65_535, false).unwrap();
        assert!(bytes.len() < MAX_UDP_PAYLOAD, "{}", bytes.len());
        let m = Message::from_vec(&bytes).unwrap();
        assert!(m.metadata.truncation);
        assert!(m.answers.len() > 3_000, "{}", m.answers.len());
        assert_eq!(Message::from_vec(&encode(&m).unwrap()).unwrap(), m, "whole");
    }

    #[test]
    fn fit_reporting_flags_only_the_tcp_overflow() {
        let full = reply(40).to_vec().unwrap().len();
        let (bytes, overflow) = fit_reporting(reply(40), full + 1, true).unwrap();
        assert!(!overflow, "fits: nothing dropped");
        assert_eq!(Message::from_vec(&bytes).unwrap().answers.len(), 40);

        let (bytes, overflow) = fit_reporting(reply(40), 100, true).unwrap();
        assert!(overflow, "TCP reply dropped its records for SERVFAIL");
        let m = Message::from_vec(&bytes).unwrap();
        assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
        assert!(m.answers.is_empty());

        // Over UDP the dropped records show as TC (the "truncated" label).
        let (bytes, overflow) = fit_reporting(reply(40), 200, false).unwrap();
        assert!(!overflow);
        assert!(Message::from_vec(&bytes).unwrap().metadata.truncation);
    }

    #[test]
    fn fit_over_tcp_sends_servfail_when_too_big() {
        let bytes = fit(reply(40), 100, true).unwrap();
        let m = Message::from_vec(&bytes).unwrap();
        assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
        assert!(m.answers.is_empty());
    }
}
