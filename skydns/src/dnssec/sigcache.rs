//! The signature cache (`-scache`): RRSIGs kept under
//! [`super::sign::Signer::cache_key`], reused while their expiration is more
//! than two days ahead (as in SkyDNS), the oldest dropped first at capacity.
//! The clock is an argument.

use hickory_proto::dnssec::rdata::RRSIG;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// What a signature is kept under: the digest of what it covers.
pub(crate) type Key = [u8; 32];

/// How long before its expiration a signature stops being reused.
pub(crate) const REUSE_MARGIN: u64 = 2 * 24 * 3600;

/// At most `capacity` signatures by the records they cover.
pub(crate) struct SigCache {
    capacity: usize,
    entries: Mutex<Entries>,
}

/// The signatures, and their keys in the order they were made.
#[derive(Default)]
struct Entries {
    by_key: HashMap<Key, RRSIG>,
    made: VecDeque<Key>,
}

impl SigCache {
    /// A cache of at most `capacity` signatures (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        SigCache {
            capacity: capacity.max(1),
            entries: Mutex::new(Entries::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached signature for `key`, if it may still be sent at `now`.
    pub(crate) fn get(&self, key: &Key, now: u64) -> Option<RRSIG> {
        let entries = self.lock();
        (entries.by_key.get(key))
            .filter(|sig| reusable(sig, now))
            .cloned()
    }

    /// Keeps `sig` under `key`, making room if the cache is full.
    pub(crate) fn insert(&self, key: Key, sig: RRSIG, _now: u64) {
        let mut entries = self.lock();
        let Entries { by_key, made } = &mut *entries;
        if by_key.insert(key, sig).is_some() {
            // Signed again (the old one stopped being reusable): it is
            // now the newest.
            if let Some(at) = made.iter().position(|k| *k == key) {
                made.remove(at);
            }
        }
        made.push_back(key);
        while by_key.len() > self.capacity {
            match made.pop_front() {
                Some(oldest) => {
                    by_key.remove(&oldest);
                }
                None => break,
            }
        }
    }

    /// How many signatures are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().by_key.len()
    }
}

/// Whether `sig` started before `now` and expires more than
/// [`REUSE_MARGIN`] after it (serial number arithmetic, RFC 1982).
fn reusable(sig: &RRSIG, now: u64) -> bool {
    let now = now as u32;
    let ahead = sig.input().sig_expiration.get().wrapping_sub(now) as i32;
    let since = now.wrapping_sub(sig.input().sig_inception.get()) as i32;
    since >= 0 && i64::from(ahead) > REUSE_MARGIN as i64
}
