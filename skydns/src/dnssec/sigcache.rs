//! The signature cache (`-scache`): RRSIGs kept by what they cover.
//!
//! Signing costs far more than answering, and most replies repeat the same
//! RRsets, so signatures are kept under [`super::sign::Signer::cache_key`]
//! (a SHA-256 of the owner, type, class, TTLs and data of the set): a
//! changed record is a different key, never a stale signature. A cached signature is reused
//! while its expiration is more than two days ahead, as in SkyDNS, so no
//! validator ever holds one about to expire; then it is signed again. At
//! capacity, entries past that point go first, then an arbitrary one (SkyDNS
//! evicted at random too). The clock is an argument.

use hickory_proto::dnssec::rdata::RRSIG;
use std::collections::HashMap;
use std::sync::Mutex;

/// What a signature is kept under: the digest of what it covers.
pub type Key = [u8; 32];

/// How long before its expiration a signature stops being reused.
pub const REUSE_MARGIN: u64 = 2 * 24 * 3600;

/// At most `capacity` signatures by the records they cover.
pub struct SigCache {
    capacity: usize,
    entries: Mutex<HashMap<Key, RRSIG>>,
}

impl SigCache {
    /// A cache of at most `capacity` signatures (at least one).
    pub fn new(capacity: usize) -> Self {
        SigCache {
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, RRSIG>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached signature for `key`, if it may still be sent at `now`.
    pub fn get(&self, key: &Key, now: u64) -> Option<RRSIG> {
        let entries = self.lock();
        entries.get(key).filter(|sig| reusable(sig, now)).cloned()
    }

    /// Keeps `sig` under `key`, making room if the cache is full.
    pub fn insert(&self, key: Key, sig: RRSIG, now: u64) {
        let mut entries = self.lock();
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, s| reusable(s, now));
            if entries.len() >= self.capacity {
                if let Some(victim) = entries.keys().next().copied() {
                    entries.remove(&victim);
                }
            }
        }
        entries.insert(key, sig);
    }

    /// How many signatures are kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no signature is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
