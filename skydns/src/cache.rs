//! The response cache for forwarded answers (`-rcache`, `-rcache-ttl`).
//!
//! Keys are the question (name compared case-insensitively, type, class)
//! plus the DO bit and the transport, as in SkyDNS. Positive answers live for
//! the smallest answer TTL, negative ones (NXDOMAIN, NODATA) for the SOA's
//! negative TTL (RFC 2308: the smaller of its TTL and MINIMUM), both capped at
//! `-rcache-ttl`. Unlike SkyDNS, a hit returns TTLs counted down by the time
//! spent in the cache. When full, expired entries go first, then the oldest
//! inserted one (FIFO). The clock is an argument, so tests control time.
//!
//! Two additions beyond SkyDNS, both off unless asked for. Serve-stale
//! (RFC 8767, `-rcache-stale`): an expired entry is kept for the stale
//! window and [`ResponseCache::get_stale`] hands it out, every TTL set to
//! `-rcache-stale-ttl` (RFC 8767 §4 suggests 30 s), when no upstream can
//! refresh it. Prefetch (`-rcache-prefetch`, as CoreDNS `cache { prefetch }`):
//! a hit on an entry asked at least that many times since it was stored,
//! with at most `-rcache-prefetch-percent` of its lifetime left, says the
//! entry is due for a refresh (once), so a popular name never expires.

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a cached reply answers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey {
    /// Lowercased query name.
    pub name: String,
    /// Query type.
    pub qtype: RecordType,
    /// Query class, as a number.
    pub qclass: u16,
    /// The DO bit of the query.
    pub dnssec_ok: bool,
    /// Whether the query came over TCP.
    pub tcp: bool,
    /// The CD bit: a reply fetched without validation must not serve
    /// clients that want it validated.
    pub checking_disabled: bool,
}

struct Entry {
    reply: Message,
    stored: Instant,
    expires: Instant,
    /// Hits since it was stored.
    hits: u32,
    /// A refresh was handed out.
    prefetching: bool,
}

/// What the cache keeps and for how long.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CacheSettings {
    /// Most replies kept (`-rcache`).
    pub capacity: usize,
    /// Longest lifetime (`-rcache-ttl`).
    pub max_ttl: Duration,
    /// How long an expired reply may still be served when upstreams fail
    /// (`-rcache-stale`; zero: not at all).
    pub stale: Duration,
    /// The TTL of a stale reply's records (`-rcache-stale-ttl`).
    pub stale_ttl: u32,
    /// Hits after which an entry is refreshed before it expires
    /// (`-rcache-prefetch`; 0: never).
    pub prefetch_hits: u32,
    /// The share of its lifetime left, in percent, when the refresh is due.
    pub prefetch_percent: u8,
}

impl CacheSettings {
    /// SkyDNS's cache: `capacity` replies living at most `max_ttl`.
    #[cfg(test)]
    pub(crate) fn plain(capacity: usize, max_ttl: Duration) -> Self {
        CacheSettings {
            capacity,
            max_ttl,
            stale: Duration::ZERO,
            stale_ttl: 30,
            prefetch_hits: 0,
            prefetch_percent: 10,
        }
    }
}

/// A fresh hit, and whether the caller should refresh it now.
pub(crate) struct Hit {
    pub reply: Message,
    pub prefetch: bool,
}

/// A bounded cache of upstream replies.
pub(crate) struct ResponseCache {
    settings: CacheSettings,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<CacheKey, Entry>,
    order: VecDeque<(CacheKey, Instant)>,
}

impl ResponseCache {
    /// A cache of at most `capacity` replies, each kept at most `max_ttl`.
    #[cfg(test)]
    pub(crate) fn new(capacity: usize, max_ttl: Duration) -> Self {
        Self::with(CacheSettings::plain(capacity, max_ttl))
    }

    /// A cache as `settings` say.
    pub(crate) fn with(settings: CacheSettings) -> Self {
        ResponseCache {
            settings,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// What this cache keeps and for how long.
    pub(crate) fn settings(&self) -> &CacheSettings {
        &self.settings
    }

    /// Number of cached replies (expired ones included until purged).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached reply for `key` with TTLs counted down, if still fresh.
    #[cfg(test)]
    pub(crate) fn get(&self, key: &CacheKey, now: Instant) -> Option<Message> {
        self.hit(key, now).map(|hit| hit.reply)
    }

    /// The cached reply for `key` with TTLs counted down, if still fresh,
    /// and whether it is due for a prefetch (said once per entry).
    pub(crate) fn hit(&self, key: &CacheKey, now: Instant) -> Option<Hit> {
        let mut inner = self.lock();
        let entry = inner.entries.get_mut(key)?;
        if now >= entry.expires {
            if now >= entry.expires + self.settings.stale {
                inner.entries.remove(key);
            }
            return None;
        }
        entry.hits = entry.hits.saturating_add(1);
        let prefetch = self.prefetch_due(entry, now);
        entry.prefetching |= prefetch;
        let elapsed = u32::try_from(now.duration_since(entry.stored).as_secs()).unwrap_or(u32::MAX);
        let mut reply = entry.reply.clone();
        for r in records_mut(&mut reply) {
            r.ttl = r.ttl.saturating_sub(elapsed);
        }
        Some(Hit { reply, prefetch })
    }

    fn prefetch_due(&self, entry: &Entry, now: Instant) -> bool {
        let s = &self.settings;
        if s.prefetch_hits == 0 || entry.prefetching || entry.hits < s.prefetch_hits {
            return false;
        }
        let lifetime = entry.expires.duration_since(entry.stored);
        let left = entry.expires.duration_since(now);
        left <= lifetime * u32::from(s.prefetch_percent) / 100
    }

    /// The expired reply for `key` if it is within the stale window, every
    /// TTL set to the stale TTL (RFC 8767 §4).
    pub(crate) fn get_stale(&self, key: &CacheKey, now: Instant) -> Option<Message> {
        let inner = self.lock();
        let entry = inner.entries.get(key)?;
        if now < entry.expires || now >= entry.expires + self.settings.stale {
            return None;
        }
        let mut reply = entry.reply.clone();
        for r in records_mut(&mut reply) {
            r.ttl = self.settings.stale_ttl;
        }
        Some(reply)
    }

    /// Stores `reply` if it is cacheable; returns whether it was stored.
    pub(crate) fn insert(&self, key: CacheKey, reply: Message, now: Instant) -> bool {
        let Some(lifetime) = self.lifetime(&reply) else {
            return false;
        };
        let capacity = self.settings.capacity;
        if capacity == 0 {
            return false;
        }
        let stale = self.settings.stale;
        let mut inner = self.lock();
        if !inner.entries.contains_key(&key) && inner.entries.len() >= capacity {
            inner.entries.retain(|_, e| e.expires + stale > now);
            while inner.entries.len() >= capacity {
                let Some((oldest, stored)) = inner.order.pop_front() else {
                    break;
                };
                // Skip order records of entries replaced since.
                if inner
                    .entries
                    .get(&oldest)
                    .is_some_and(|e| e.stored == stored)
                {
                    inner.entries.remove(&oldest);
                }
            }
        }
        inner.order.push_back((key.clone(), now));
        let expires = now + lifetime;
        inner.entries.insert(
            key,
            Entry {
                reply,
                stored: now,
                expires,
                hits: 0,
                prefetching: false,
            },
        );
        if inner.order.len() > capacity.saturating_mul(4) {
            let Inner { entries, order } = &mut *inner;
            order.retain(|(k, s)| entries.get(k).is_some_and(|e| e.stored == *s));
        }
        true
    }

    /// How long `reply` may be served from the cache, if at all.
    fn lifetime(&self, reply: &Message) -> Option<Duration> {
        if reply.metadata.truncation {
            return None;
        }
        let seconds = match reply.metadata.response_code {
            ResponseCode::NoError if !reply.answers.is_empty() => {
                reply.answers.iter().map(|r| r.ttl).min()?
            }
            ResponseCode::NoError | ResponseCode::NXDomain => negative_ttl(reply)?,
            _ => return None,
        };
        let lifetime = Duration::from_secs(u64::from(seconds)).min(self.settings.max_ttl);
        (!lifetime.is_zero()).then_some(lifetime)
    }
}

/// Every record of a reply but the OPT.
fn records_mut(reply: &mut Message) -> impl Iterator<Item = &mut hickory_proto::rr::Record> {
    (reply.answers.iter_mut())
        .chain(reply.authorities.iter_mut())
        .chain(reply.additionals.iter_mut())
}

/// RFC 2308 §5: the negative TTL is min(SOA TTL, SOA MINIMUM).
fn negative_ttl(reply: &Message) -> Option<u32> {
    reply.authorities.iter().find_map(|r| match &r.data {
        RData::SOA(soa) => Some(r.ttl.min(soa.minimum)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{MessageType, OpCode};
    use hickory_proto::rr::rdata::{A, SOA};
    use hickory_proto::rr::{Name, Record};

    fn key(name: &str) -> CacheKey {
        CacheKey {
            name: name.into(),
            qtype: RecordType::A,
            qclass: 1,
            dnssec_ok: false,
            tcp: false,
            checking_disabled: false,
        }
    }

    fn positive(ttl: u32) -> Message {
        let mut m = Message::new(1, MessageType::Response, OpCode::Query);
        m.answers.push(Record::from_rdata(
            Name::from_ascii("x.").unwrap(),
            ttl,
            RData::A(A::new(1, 2, 3, 4)),
        ));
        m
    }

    fn negative(soa_ttl: u32, minimum: u32) -> Message {
        let mut m = Message::new(1, MessageType::Response, OpCode::Query);
        m.metadata.response_code = ResponseCode::NXDomain;
        let n = Name::from_ascii("example.").unwrap();
        let soa = SOA::new(n.clone(), n.clone(), 1, 2, 3, 4, minimum);
        m.authorities
            .push(Record::from_rdata(n, soa_ttl, RData::SOA(soa)));
        m
    }

    #[test]
    fn hits_count_ttls_down_and_expire() {
        let cache = ResponseCache::new(10, Duration::from_secs(60));
        let t0 = Instant::now();
        assert!(cache.insert(key("x."), positive(30), t0));
        assert_eq!(cache.get(&key("x."), t0).unwrap().answers[0].ttl, 30);
        assert_eq!(
            cache
                .get(&key("x."), t0 + Duration::from_secs(12))
                .unwrap()
                .answers[0]
                .ttl,
            18
        );
        assert!(cache
            .get(&key("x."), t0 + Duration::from_secs(30))
            .is_none());
    }

    #[test]
    fn lifetime_is_capped_by_rcache_ttl() {
        let cache = ResponseCache::new(10, Duration::from_secs(5));
        let t0 = Instant::now();
        cache.insert(key("x."), positive(300), t0);
        assert!(cache.get(&key("x."), t0 + Duration::from_secs(4)).is_some());
        assert!(cache.get(&key("x."), t0 + Duration::from_secs(5)).is_none());
    }

    #[test]
    fn negative_answers_live_for_the_soa_negative_ttl() {
        let cache = ResponseCache::new(10, Duration::from_secs(60));
        let t0 = Instant::now();
        assert!(cache.insert(key("n."), negative(900, 10), t0));
        assert!(cache.get(&key("n."), t0 + Duration::from_secs(9)).is_some());
        assert!(cache
            .get(&key("n."), t0 + Duration::from_secs(10))
            .is_none());
        let mut no_soa = negative(1, 1);
        no_soa.authorities.clear();
        assert!(
            !cache.insert(key("m."), no_soa, t0),
            "no SOA: not cacheable"
        );
    }

    #[test]
    fn servfail_and_truncated_replies_are_not_cached() {
        let cache = ResponseCache::new(10, Duration::from_secs(60));
        let mut fail = positive(30);
        fail.metadata.response_code = ResponseCode::ServFail;
        assert!(!cache.insert(key("a."), fail, Instant::now()));
        let mut tc = positive(30);
        tc.metadata.truncation = true;
        assert!(!cache.insert(key("b."), tc, Instant::now()));
    }

    #[test]
    fn full_cache_evicts_expired_then_oldest() {
        let cache = ResponseCache::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        // The oldest entry is live; the newest one has expired by t0+10.
        cache.insert(key("old."), positive(50), t0);
        cache.insert(key("short."), positive(5), at(1));
        assert_eq!(cache.len(), 2);
        cache.insert(key("c."), positive(50), at(10));
        assert_eq!(cache.len(), 2, "exactly one entry made room");
        assert!(
            cache.get(&key("old."), at(10)).is_some(),
            "the live oldest entry survives: the expired one went first"
        );
        assert!(cache.get(&key("c."), at(10)).is_some());
        // Nothing expired now: the oldest inserted goes.
        cache.insert(key("d."), positive(50), at(11));
        assert!(cache.get(&key("old."), at(11)).is_none(), "then the oldest");
        assert!(cache.get(&key("c."), at(11)).is_some());
        assert!(cache.get(&key("d."), at(11)).is_some());
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn nodata_answers_live_for_the_soa_negative_ttl_too() {
        // RFC 2308 §5: NOERROR with no answer (NODATA) is cached like NXDOMAIN.
        let cache = ResponseCache::new(10, Duration::from_secs(60));
        let t0 = Instant::now();
        let mut nodata = negative(900, 10);
        nodata.metadata.response_code = ResponseCode::NoError;
        assert!(cache.insert(key("nodata."), nodata, t0));
        assert!(cache
            .get(&key("nodata."), t0 + Duration::from_secs(9))
            .is_some());
        assert!(cache
            .get(&key("nodata."), t0 + Duration::from_secs(10))
            .is_none());
    }

    #[test]
    fn replacing_an_entry_of_a_full_cache_evicts_nothing() {
        let cache = ResponseCache::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        cache.insert(key("a."), positive(50), t0);
        cache.insert(key("b."), positive(50), at(1));
        cache.insert(key("b."), positive(50), at(2));
        assert!(cache.get(&key("a."), at(2)).is_some(), "a made room for b");
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn an_entry_expiring_at_the_insert_makes_room_before_a_live_one() {
        let cache = ResponseCache::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        cache.insert(key("live."), positive(50), t0);
        cache.insert(key("short."), positive(9), at(1));
        // short. expires at t0+10: exactly now, so it is the one to go.
        cache.insert(key("c."), positive(50), at(10));
        assert!(cache.get(&key("live."), at(10)).is_some());
        assert!(cache.get(&key("c."), at(10)).is_some());
    }

    #[test]
    fn eviction_stays_in_insertion_order_after_replacements() {
        // Replacing b. again and again leaves stale order records, which
        // are compacted away past four per entry: the live ones must stay,
        // or eviction could no longer find the oldest entry.
        let cache = ResponseCache::new(2, Duration::from_secs(600));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        cache.insert(key("a."), positive(500), t0);
        for s in 1..=20 {
            cache.insert(key("b."), positive(500), at(s));
        }
        cache.insert(key("c."), positive(500), at(30));
        assert_eq!(cache.len(), 2, "never more than the capacity");
        assert!(cache.get(&key("a."), at(30)).is_none(), "a. was the oldest");
        assert!(cache.get(&key("b."), at(30)).is_some());
        assert!(cache.get(&key("c."), at(30)).is_some());
    }

    #[test]
    fn an_expired_entry_is_stale_for_the_window_with_the_stale_ttl() {
        let cache = ResponseCache::with(CacheSettings {
            stale: Duration::from_secs(100),
            ..CacheSettings::plain(10, Duration::from_secs(60))
        });
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        cache.insert(key("s."), positive(20), t0);
        assert!(
            cache.get_stale(&key("s."), at(19)).is_none(),
            "fresh: not stale"
        );
        assert!(cache.get(&key("s."), at(20)).is_none(), "expired: no hit");
        let stale = cache
            .get_stale(&key("s."), at(20))
            .expect("kept for the window");
        assert_eq!(stale.answers[0].ttl, 30);
        assert!(cache.get_stale(&key("s."), at(119)).is_some());
        assert!(
            cache.get_stale(&key("s."), at(120)).is_none(),
            "window over"
        );
        let plain = ResponseCache::new(10, Duration::from_secs(60));
        plain.insert(key("p."), positive(20), t0);
        assert!(
            plain.get_stale(&key("p."), at(20)).is_none(),
            "no window: never"
        );
    }

    #[test]
    fn a_popular_entry_is_due_for_prefetch_once_near_its_expiry() {
        let cache = ResponseCache::with(CacheSettings {
            prefetch_hits: 3,
            prefetch_percent: 10,
            ..CacheSettings::plain(10, Duration::from_secs(600))
        });
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        cache.insert(key("p."), positive(100), t0);
        let due = |s| cache.hit(&key("p."), at(s)).unwrap().prefetch;
        assert!(!due(1) && !due(2), "two hits: not popular yet");
        assert!(!due(89), "popular, but 11% left");
        assert!(due(90), "10% left: due");
        assert!(!due(91), "said once");
        cache.insert(key("p."), positive(100), at(95));
        assert!(!due(96), "a new entry counts its hits again");
    }
}
