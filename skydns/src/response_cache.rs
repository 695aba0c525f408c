//! The response cache for forwarded answers (`-rcache`, `-rcache-ttl`), as in
//! SkyDNS: keyed by question, DO bit and transport, kept encoded
//! (`encoded.rs`), TTLs counted down on a hit. Two additions, off unless asked
//! for: serve-stale (RFC 8767, [`ResponseCache::get_stale`]) and prefetch.

mod encoded;
mod flags;
mod settings;

pub use flags::Flags;
pub use settings::{Keys, Settings};

pub(crate) use encoded::Asker;
use encoded::Encoded;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where the cache's time comes from: the monotonic clock, or in tests a
/// clock moved by hand, so a lifetime passes without a sleep. (Not tokio's
/// paused clock: a paused runtime waiting on a real upstream socket jumps
/// to the relay's timeout.)
#[derive(Clone, Default)]
pub(crate) struct Clock {
    #[cfg(test)]
    manual: Option<std::sync::Arc<Mutex<Instant>>>,
}

impl Clock {
    pub(crate) fn now(&self) -> Instant {
        #[cfg(test)]
        if let Some(now) = &self.manual {
            return *now.lock().unwrap();
        }
        Instant::now()
    }

    /// A clock that stands still until [`Clock::advance`].
    #[cfg(test)]
    pub(crate) fn manual() -> Clock {
        Clock {
            manual: Some(std::sync::Arc::new(Mutex::new(Instant::now()))),
        }
    }

    /// Moves a manual clock on by `by`.
    #[cfg(test)]
    pub(crate) fn advance(&self, by: Duration) {
        let now = self.manual.as_ref().expect("a manual clock");
        *now.lock().unwrap() += by;
    }
}

/// How long after a refresh of a stale entry was handed out the next one
/// may be (RFC 8767 §5 suggests 30 s); meanwhile the stale entry is served
/// at once.
pub(crate) const STALE_RECHECK: Duration = Duration::from_secs(30);

/// The cache key of a query name: its labels, lowercased, each prefixed
/// with its length, one char per byte (unambiguous where a label holds a
/// dot or bytes that are not UTF-8).
pub(crate) fn name_key(name: &Name) -> String {
    let mut key = String::with_capacity(name.len() + 2);
    for label in name.iter() {
        key.push(char::from(u8::try_from(label.len()).unwrap_or(u8::MAX)));
        key.extend(label.iter().map(|b| char::from(b.to_ascii_lowercase())));
    }
    key
}

/// What a cached reply answers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey {
    /// The query name, as [`name_key`] spells it.
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
    /// The reply, encoded.
    encoded: Encoded,
    /// NXDOMAIN or NODATA (RFC 2308's negative answers).
    denial: bool,
    stored: Instant,
    expires: Instant,
    /// Hits since it was stored.
    hits: u32,
    /// A refresh was handed out.
    prefetching: bool,
    /// When a refresh of it was last handed out while it was stale.
    refreshed: Option<Instant>,
}

/// A fresh hit, and whether the caller should refresh it now.
pub(crate) struct Hit {
    pub reply: CachedReply,
    pub prefetch: bool,
}

/// An expired reply within the stale window, every TTL the stale TTL, and
/// whether the caller should try to refresh it now.
pub(crate) struct Stale {
    pub reply: Message,
    pub refresh: bool,
}

/// A cached reply, TTLs counted down.
pub(crate) enum CachedReply {
    /// Ready to send: the asker's ID, RD bit and question in place.
    Wire(Vec<u8>),
    /// Decoded, for the caller to shape: the header and question are the
    /// first asker's.
    Message(Message),
}

/// A bounded cache of upstream replies.
pub(crate) struct ResponseCache {
    settings: Settings,
    entries: Mutex<Entries>,
}

/// The entries and their insertion order, under one lock.
#[derive(Default)]
struct Entries {
    entries: HashMap<CacheKey, Entry>,
    order: VecDeque<(CacheKey, Instant)>,
    /// How many of `entries` are denials.
    denials: usize,
}

impl Entries {
    fn remove(&mut self, key: &CacheKey) {
        if let Some(e) = self.entries.remove(key) {
            self.denials -= usize::from(e.denial);
        }
    }

    fn retain(&mut self, mut keep: impl FnMut(&Entry) -> bool) {
        let denials = &mut self.denials;
        self.entries.retain(|_, e| {
            let kept = keep(e);
            if !kept {
                *denials -= usize::from(e.denial);
            }
            kept
        });
    }

    fn insert(&mut self, key: CacheKey, entry: Entry) {
        self.denials += usize::from(entry.denial);
        if let Some(old) = self.entries.insert(key, entry) {
            self.denials -= usize::from(old.denial);
        }
    }
}

impl ResponseCache {
    /// A cache of at most `capacity` replies, each kept at most `max_ttl`.
    #[cfg(test)]
    pub(crate) fn new(capacity: usize, max_ttl: Duration) -> Self {
        Self::with(Settings::plain(capacity, max_ttl))
    }

    /// A cache as `settings` say.
    pub(crate) fn with(settings: Settings) -> Self {
        ResponseCache {
            settings,
            entries: Mutex::new(Entries::default()),
        }
    }

    /// What this cache keeps and for how long.
    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Number of cached replies (expired ones included until purged).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Cached answers and cached denials (NXDOMAIN, NODATA), expired ones
    /// included until purged.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let locked = self.lock();
        (locked.entries.len() - locked.denials, locked.denials)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached reply for `key` with TTLs counted down, if still fresh.
    #[cfg(test)]
    pub(crate) fn get(&self, key: &CacheKey, now: Instant) -> Option<Message> {
        match self.hit(key, now, None)?.reply {
            CachedReply::Message(reply) => Some(reply),
            CachedReply::Wire(_) => unreachable!("no asker, no encoded reply"),
        }
    }

    /// The cached reply for `key` with TTLs counted down, if still fresh,
    /// and whether it is due for a prefetch (said once per entry). Encoded
    /// for `asker` when it can be; decoded otherwise.
    pub(crate) fn hit(
        &self,
        key: &CacheKey,
        now: Instant,
        asker: Option<Asker<'_>>,
    ) -> Option<Hit> {
        let mut locked = self.lock();
        let entry = locked.entries.get_mut(key)?;
        if now >= entry.expires {
            if now >= entry.expires + self.settings.stale {
                locked.remove(key);
            }
            return None;
        }
        entry.hits = entry.hits.saturating_add(1);
        let prefetch = self.prefetch_due(entry, now);
        entry.prefetching |= prefetch;
        let elapsed = u32::try_from(now.duration_since(entry.stored).as_secs()).unwrap_or(u32::MAX);
        if let Some(bytes) = asker.and_then(|asker| entry.encoded.answer(asker, elapsed)) {
            return Some(Hit {
                reply: CachedReply::Wire(bytes),
                prefetch,
            });
        }
        let mut reply = entry.encoded.decode()?;
        for r in records_mut(&mut reply) {
            r.ttl = r.ttl.saturating_sub(elapsed);
        }
        Some(Hit {
            reply: CachedReply::Message(reply),
            prefetch,
        })
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
    /// TTL set to the stale TTL (RFC 8767 §4), and whether a refresh is due
    /// (none handed out for it in the last [`STALE_RECHECK`]).
    pub(crate) fn get_stale(&self, key: &CacheKey, now: Instant) -> Option<Stale> {
        let mut locked = self.lock();
        let entry = locked.entries.get_mut(key)?;
        if now < entry.expires || now >= entry.expires + self.settings.stale {
            return None;
        }
        let refresh = entry
            .refreshed
            .is_none_or(|at| now.duration_since(at) >= STALE_RECHECK);
        if refresh {
            entry.refreshed = Some(now);
        }
        let mut reply = entry.encoded.decode()?;
        for r in records_mut(&mut reply) {
            r.ttl = self.settings.stale_ttl;
        }
        Some(Stale { reply, refresh })
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
        // Encoded before the lock: other hits need not wait for it.
        let Some(encoded) = Encoded::of(&reply) else {
            return false;
        };
        let mut locked = self.lock();
        if !locked.entries.contains_key(&key) && locked.entries.len() >= capacity {
            locked.retain(|e| e.expires + stale > now);
            if locked.entries.len() >= capacity {
                // Stale entries make room before fresh ones.
                locked.retain(|e| e.expires > now);
            }
            while locked.entries.len() >= capacity {
                let Some((oldest, stored)) = locked.order.pop_front() else {
                    break;
                };
                // Skip order records of entries replaced since.
                if locked
                    .entries
                    .get(&oldest)
                    .is_some_and(|e| e.stored == stored)
                {
                    locked.remove(&oldest);
                }
            }
        }
        locked.order.push_back((key.clone(), now));
        let expires = now + lifetime;
        // As the hit counts it (`handler/forwarding.rs`, `is_denial`).
        let denial =
            reply.metadata.response_code == ResponseCode::NXDomain || reply.answers.is_empty();
        locked.insert(
            key,
            Entry {
                encoded,
                denial,
                stored: now,
                expires,
                hits: 0,
                prefetching: false,
                refreshed: None,
            },
        );
        if locked.order.len() > capacity.saturating_mul(4) {
            let Entries { entries, order, .. } = &mut *locked;
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
mod tests;
