//! The hot path: encoded authoritative replies reused until the records change.
//! [`ReplyCache`] keys them by everything a reply depends on (the exact
//! question, the client's size limit, the DO bit, the hour), so a hit copies
//! bytes and patches the ID and RD bit. `replies` drops only the replies a
//! change touched.

use crate::snapshot::Read;
use rand::seq::SliceRandom;
use replies::{Entry, Replies};
use std::ops::Range;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

mod replies;

/// What identifies a reply: the question bytes, the size limit, the
/// transport, and the DO bit (a signed reply is not the plain one).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct QuestionKey {
    question: Vec<u8>,
    limit: u16,
    tcp: bool,
    dnssec_ok: bool,
}

/// A plain query as the hot path sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlainQuery {
    /// The cache key.
    pub key: QuestionKey,
    /// Request ID.
    pub id: u16,
    /// Recursion desired.
    pub rd: bool,
    /// EDNS0 DO bit.
    pub dnssec_ok: bool,
}

impl QuestionKey {
    /// The question section's bytes (name, type, class) as asked.
    pub(crate) fn question(&self) -> &[u8] {
        &self.question
    }

    /// Parses a plain query (QUERY opcode, one question, no answer or
    /// authority records, at most one OPT record); `None` for anything else.
    pub(crate) fn parse(packet: &[u8], tcp: bool) -> Option<PlainQuery> {
        let header = packet.get(..12)?;
        let count = |i: usize| u16::from_be_bytes([header[i], header[i + 1]]);
        // QR=0, opcode 0; qd=1, an=0, ns=0, ar<=1.
        if header[2] & 0xf8 != 0 || count(4) != 1 || count(6) != 0 || count(8) != 0 || count(10) > 1
        {
            return None;
        }
        let mut pos = 12;
        loop {
            let len = usize::from(*packet.get(pos)?);
            if len == 0 {
                pos += 1;
                break;
            }
            // A label of at most 63 bytes (a longer length is a pointer or
            // reserved), and room left for the root label: a name is at
            // most 255 bytes (RFC 1035, 2.3.4), as the decoder holds.
            if len > 63 {
                return None;
            }
            pos += 1 + len;
            if pos - 12 > 254 {
                return None;
            }
        }
        let question_end = pos + 4;
        let question = packet.get(12..question_end)?;
        let (limit, dnssec_ok) = if count(10) == 1 {
            parse_opt(packet.get(question_end..)?)?
        } else if packet.len() == question_end {
            (512, false)
        } else {
            return None;
        };
        Some(PlainQuery {
            key: QuestionKey {
                question: question.to_vec(),
                limit: if tcp { u16::MAX } else { limit.max(512) },
                tcp,
                dnssec_ok,
            },
            id: count(0),
            rd: header[2] & 0x01 != 0,
            dnssec_ok,
        })
    }
}

/// An OPT record filling the rest of the packet: (payload size, DO bit).
fn parse_opt(rest: &[u8]) -> Option<(u16, bool)> {
    // root name, TYPE 41, CLASS = payload, TTL = ext-rcode, version, flags.
    if rest.len() < 11 || rest[0] != 0 || rest[1..3] != [0, 41] || rest[6] != 0 {
        return None;
    }
    let rdlen = usize::from(u16::from_be_bytes([rest[9], rest[10]]));
    if rest.len() != 11 + rdlen || !plain_options(&rest[11..]) {
        return None;
    }
    Some((u16::from_be_bytes([rest[3], rest[4]]), rest[7] & 0x80 != 0))
}

/// Whether the OPT data is a sequence of whole options that the full path
/// would read without error, so a packet the full path answers FORMERR is
/// never served from the cache. Client subnet (8) and NSID (3), which the
/// full path parses, take the full path.
fn plain_options(mut data: &[u8]) -> bool {
    while !data.is_empty() {
        let Some(header) = data.get(..4) else {
            return false;
        };
        let code = u16::from_be_bytes([header[0], header[1]]);
        let len = usize::from(u16::from_be_bytes([header[2], header[3]]));
        if matches!(code, 3 | 8) || data.len() < 4 + len {
            return false;
        }
        data = &data[4 + len..];
    }
    true
}

/// Encoded replies by question, each valid while what it read is unchanged.
#[derive(Default)]
pub(crate) struct ReplyCache {
    replies: RwLock<Replies>,
    /// `replies`'s generation, readable without the lock: on the hot path
    /// the snapshot has almost always not moved.
    generation: AtomicI64,
    /// Hits, for tests (a shared counter would bounce between the readers).
    #[cfg(test)]
    hits: std::sync::atomic::AtomicU64,
}

impl ReplyCache {
    /// Brings the cache to snapshot `generation`: nothing to do when it is
    /// there, or past it (an older snapshot only misses); otherwise drops the
    /// replies that read what changed since, as `touched_since(generation
    /// of the cache)` lists it, or all of them when that is `None`.
    pub(crate) fn advance(
        &self,
        generation: i64,
        touched_since: impl FnOnce(i64) -> Option<Vec<Arc<str>>>,
    ) {
        if self.generation.load(Ordering::Acquire) >= generation {
            return;
        }
        let mut replies = self.replies.write().unwrap_or_else(|e| e.into_inner());
        if replies.generation >= generation {
            return;
        }
        match touched_since(replies.generation) {
            Some(touched) => replies.invalidate(&touched, generation),
            None => replies.clear(generation),
        }
        self.generation.store(generation, Ordering::Release);
    }

    /// The cached reply to `q`, ready to send, if valid for `generation`/`hour`.
    pub(crate) fn get(&self, q: &PlainQuery, generation: i64, hour: u64) -> Option<Vec<u8>> {
        let (mut out, shuffle) = {
            let replies = self.replies.read().unwrap_or_else(|e| e.into_inner());
            if replies.generation != generation {
                return None;
            }
            let entry = replies.entries.get(&q.key).filter(|e| e.hour == hour)?;
            (entry.reply.clone(), entry.shuffle.clone())
        };
        #[cfg(test)]
        self.hits.fetch_add(1, Ordering::Relaxed);
        out[..2].copy_from_slice(&q.id.to_be_bytes());
        out[2] = (out[2] & !0x01) | u8::from(q.rd);
        if let Some(ranges) = shuffle {
            shuffle_ranges(&mut out, &ranges);
        }
        Some(out)
    }

    /// How many questions were answered from the cache.
    #[cfg(test)]
    pub(crate) fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Remembers `reply` (as sent to `q`), computed from snapshot
    /// `generation` by making `reads`, for `hour`; `shufflable` says
    /// whether round robin applies to its answers. Kept only when the cache
    /// is at that generation (see [`ReplyCache::advance`]).
    pub(crate) fn insert(&self, q: &PlainQuery, reply: &[u8], at: Computed<'_>, shufflable: bool) {
        let shuffle = if shufflable {
            let truncated = reply.get(2).is_some_and(|b| b & 0x02 != 0);
            let answers = reply
                .get(6..8)
                .map_or(0, |c| u16::from_be_bytes([c[0], c[1]]));
            match answer_ranges(reply) {
                // A truncated prefix differs per shuffle; other shapes
                // (e.g. a CNAME among the addresses) cannot be re-shuffled
                // as byte ranges: both stay on the full path.
                _ if truncated => return,
                None if answers >= 2 => return,
                ranges => ranges.map(Arc::from),
            }
        } else {
            None
        };
        let mut replies = self.replies.write().unwrap_or_else(|e| e.into_inner());
        if replies.generation != at.generation {
            return;
        }
        let entry = Entry {
            reply: reply.to_vec(),
            hour: at.hour,
            shuffle,
        };
        replies.insert(q.key.clone(), entry, at.reads);
    }
}

/// What a reply was computed from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Computed<'a> {
    /// The snapshot's generation.
    pub generation: i64,
    /// The hour (the SOA serial changes with it).
    pub hour: u64,
    /// The snapshot reads the answer made.
    pub reads: &'a [Read],
}

/// Byte ranges of the answer records when each is an A/AAAA record whose
/// owner is a pointer to the question name (so records can be reordered).
fn answer_ranges(reply: &[u8]) -> Option<Vec<Range<usize>>> {
    let answers = usize::from(u16::from_be_bytes([*reply.get(6)?, *reply.get(7)?]));
    if answers < 2 {
        return None;
    }
    let mut pos = 12;
    while *reply.get(pos)? != 0 {
        pos += 1 + usize::from(reply[pos]);
    }
    pos += 5;
    let mut ranges = Vec::with_capacity(answers);
    for _ in 0..answers {
        let rr = reply.get(pos..pos + 12)?;
        let rtype = u16::from_be_bytes([rr[2], rr[3]]);
        if rr[..2] != [0xc0, 0x0c] || !(rtype == 1 || rtype == 28) {
            return None;
        }
        let end = pos + 12 + usize::from(u16::from_be_bytes([rr[10], rr[11]]));
        reply.get(pos..end)?;
        ranges.push(pos..end);
        pos = end;
    }
    Some(ranges)
}

/// Rewrites the records at `ranges` (contiguous) in a random order.
fn shuffle_ranges(out: &mut [u8], ranges: &[Range<usize>]) {
    let (Some(first), Some(last)) = (ranges.first(), ranges.last()) else {
        return;
    };
    let mut order: Vec<&Range<usize>> = ranges.iter().collect();
    order.shuffle(&mut rand::rng());
    let mut shuffled = Vec::with_capacity(last.end - first.start);
    for r in order {
        shuffled.extend_from_slice(&out[r.clone()]);
    }
    out[first.start..last.end].copy_from_slice(&shuffled);
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
    use hickory_proto::rr::rdata::A;
    use hickory_proto::rr::{Name, RData, Record, RecordType};

    fn query(name: &str, edns: Option<u16>) -> Vec<u8> {
        let mut m = Message::query();
        m.metadata.recursion_desired = true;
        m.queries
            .push(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
        if let Some(size) = edns {
            let mut e = Edns::new();
            e.set_max_payload(size);
            e.set_dnssec_ok(true);
            m.edns = Some(e);
        }
        m.to_vec().unwrap()
    }

    #[test]
    fn plain_queries_parse_and_others_do_not() {
        let q = QuestionKey::parse(&query("Kube.default.", None), false).unwrap();
        assert!(q.rd && !q.dnssec_ok);
        assert_eq!(q.key.limit, 512);
        let e = QuestionKey::parse(&query("kube.default.", Some(4096)), false).unwrap();
        assert!(e.dnssec_ok);
        assert_eq!(e.key.limit, 4096);
        assert_ne!(
            q.key,
            QuestionKey::parse(&query("kube.default.", None), false)
                .unwrap()
                .key,
            "case matters"
        );
        let mut reply = query("a.", None);
        reply[2] |= 0x80;
        assert!(QuestionKey::parse(&reply, false).is_none());
        let mut trailing = query("a.", None);
        trailing.push(0);
        assert!(QuestionKey::parse(&trailing, false).is_none());
        assert!(QuestionKey::parse(&[0; 11], false).is_none());
        assert!(QuestionKey::parse(&query("a.", None)[..14], false).is_none());
        // Each count of the header but one question and at most one
        // additional (the OPT) is another kind of request, as is another
        // opcode, whatever follows.
        for (at, count) in [(5, 0), (5, 2), (7, 1), (9, 1), (11, 2)] {
            let mut odd = query("a.", None);
            odd[at] = count;
            assert!(
                QuestionKey::parse(&odd, false).is_none(),
                "count {at}: {count}"
            );
        }
        // Labels of 63 bytes and names of 255 bytes, not one more.
        let label = |n: usize| "x".repeat(n);
        let longest = format!("{0}.{0}.{0}.{1}.", label(63), label(61));
        assert!(QuestionKey::parse(&query(&longest, None), false).is_some());
        let mut longer = query(&longest, None);
        longer[12 + 192] = 62; // the last label one byte longer
        longer.insert(12 + 193, b'x');
        assert!(QuestionKey::parse(&longer, false).is_none(), "256 bytes");
        let mut wide = query(&format!("{}.", label(63)), None);
        wide[12] = 64;
        wide.insert(13, b'x');
        assert!(QuestionKey::parse(&wide, false).is_none(), "a label of 64");
        // Recursion desired is read from the header.
        let mut no_rd = query("a.", None);
        no_rd[2] &= !0x01;
        assert!(!QuestionKey::parse(&no_rd, false).unwrap().rd);
        // The one additional must be an OPT (TYPE 41) of the root.
        let opt = query("a.", Some(1232));
        let at = opt.len() - 11;
        assert!(QuestionKey::parse(&opt, false).is_some());
        // An option that fills the OPT's data exactly (a client cookie,
        // code 10, of 8 bytes) is plain; one that claims a byte more is not.
        let with_option = |claimed: u8| {
            let mut packet = opt.clone();
            packet[at + 10] = 12; // RDLENGTH
            packet.extend_from_slice(&[0, 10, 0, claimed, 1, 2, 3, 4, 5, 6, 7, 8]);
            QuestionKey::parse(&packet, false)
        };
        assert!(with_option(8).is_some());
        assert!(with_option(9).is_none());
        let mut not_opt = opt.clone();
        not_opt[at + 2] = 1; // TYPE A
        assert!(QuestionKey::parse(&not_opt, false).is_none());
        let mut notify = query("a.", None);
        notify[2] |= 4 << 3;
        assert!(QuestionKey::parse(&notify, false).is_none());
    }

    /// Computed at `generation` (which the cache is brought to) and `hour`,
    /// reading nothing.
    fn at(cache: &ReplyCache, generation: i64, hour: u64) -> Computed<'static> {
        cache.advance(generation, |_| None);
        Computed {
            generation,
            hour,
            reads: &[],
        }
    }

    fn reply(n: u8) -> Vec<u8> {
        let mut m = Message::new(0, MessageType::Response, OpCode::Query);
        let name = Name::from_ascii("svc.cluster.local.").unwrap();
        m.queries.push(Query::query(name.clone(), RecordType::A));
        for i in 0..n {
            m.answers.push(Record::from_rdata(
                name.clone(),
                30,
                RData::A(A::new(10, 0, 0, i)),
            ));
        }
        m.to_vec().unwrap()
    }

    #[test]
    fn hits_patch_id_and_rd_and_expire_with_the_revision_or_hour() {
        let cache = ReplyCache::default();
        let q = QuestionKey::parse(&query("svc.cluster.local.", None), false).unwrap();
        cache.insert(&q, &reply(1), at(&cache, 7, 100), false);
        let hit = cache.get(&q, 7, 100).unwrap();
        assert_eq!(u16::from_be_bytes([hit[0], hit[1]]), q.id);
        assert_eq!(hit[2] & 1, 1);
        assert!(cache.get(&q, 8, 100).is_none());
        assert!(cache.get(&q, 7, 101).is_none());
    }

    #[test]
    fn shufflable_answers_are_reordered_but_stay_valid() {
        let cache = ReplyCache::default();
        let q = QuestionKey::parse(&query("svc.cluster.local.", None), false).unwrap();
        let original = reply(6);
        assert_eq!(answer_ranges(&original).map(|r| r.len()), Some(6));
        // Two records are reordered too; one has no order to change.
        assert_eq!(answer_ranges(&reply(2)).map(|r| r.len()), Some(2));
        assert_eq!(answer_ranges(&reply(1)), None);
        cache.insert(&q, &original, at(&cache, 1, 1), true);
        let mut orders = std::collections::HashSet::new();
        for _ in 0..50 {
            let hit = cache.get(&q, 1, 1).unwrap();
            let m = Message::from_vec(&hit).unwrap();
            let mut ips: Vec<String> = m.answers.iter().map(|r| r.data.to_string()).collect();
            orders.insert(ips.join(","));
            ips.sort();
            assert_eq!(ips.len(), 6);
            assert_eq!(ips[0], "10.0.0.0");
        }
        assert!(orders.len() > 1, "round robin on cached replies");
    }

    #[test]
    fn replies_that_cannot_be_reshuffled_are_not_kept() {
        let cache = ReplyCache::default();
        let q = QuestionKey::parse(&query("svc.cluster.local.", None), false).unwrap();
        let mut truncated = reply(6);
        truncated[2] |= 0x02;
        cache.insert(&q, &truncated, at(&cache, 1, 1), true);
        assert!(
            cache.get(&q, 1, 1).is_none(),
            "a truncated prefix would freeze"
        );
        let mut m = Message::from_vec(&reply(2)).unwrap();
        let owner = m.answers[0].name.clone();
        m.answers.insert(
            0,
            Record::from_rdata(
                owner,
                30,
                RData::CNAME(hickory_proto::rr::rdata::CNAME(
                    Name::from_ascii("x.").unwrap(),
                )),
            ),
        );
        cache.insert(&q, &m.to_vec().unwrap(), at(&cache, 1, 1), true);
        assert!(cache.get(&q, 1, 1).is_none(), "a CNAME among the addresses");
        cache.insert(&q, &reply(1), at(&cache, 1, 1), true);
        assert!(cache.get(&q, 1, 1).is_some(), "a single record is fine");
    }
}
