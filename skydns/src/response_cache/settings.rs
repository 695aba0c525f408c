//! The response cache's settings: the SkyDNS keys it reads from
//! `/skydns/config` ([`Keys`]), and what the flags and those keys make of
//! it ([`Settings`]).

use super::Flags;
use crate::values::non_negative;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The keys of the etcd config key the cache owns, in SkyDNS's units.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Keys {
    /// `rcache`: capacity.
    pub rcache: i64,
    /// `rcache_ttl`: lifetime cap in seconds.
    pub rcache_ttl: i64,
}

impl Keys {
    /// The keys as the flags set them, before the etcd key overrides any.
    pub fn from_flags(f: &Flags) -> Self {
        Keys {
            rcache: f.rcache,
            rcache_ttl: f.rcache_ttl,
        }
    }
}

/// What the cache keeps and for how long. It is built even when the cache
/// is off, since internal lookups' answers live `max_ttl` too.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Most replies kept (`-rcache`; 0: no cache).
    pub capacity: usize,
    /// Longest lifetime (`-rcache-ttl`).
    pub max_ttl: Duration,
    /// How long an expired reply may still be served when upstreams fail
    /// (`-rcache-stale`; zero: not at all).
    pub stale: Duration,
    /// How long a client waits for upstreams before a stale reply is
    /// served (`-rcache-stale-timeout`).
    pub stale_timeout: Duration,
    /// The TTL of a stale reply's records (`-rcache-stale-ttl`).
    pub stale_ttl: u32,
    /// Hits after which an entry is refreshed before it expires
    /// (`-rcache-prefetch`; 0: never).
    pub prefetch_hits: u32,
    /// The share of its lifetime left, in percent, when the refresh is due.
    pub prefetch_percent: u8,
}

impl Default for Settings {
    /// What the flags' defaults build: no cache.
    fn default() -> Self {
        Settings::plain(0, Duration::from_secs(60))
    }
}

impl Settings {
    /// SkyDNS's cache: `capacity` replies living at most `max_ttl`.
    pub fn plain(capacity: usize, max_ttl: Duration) -> Self {
        Settings {
            capacity,
            max_ttl,
            stale: Duration::ZERO,
            stale_timeout: Duration::from_millis(1_800),
            stale_ttl: 30,
            prefetch_hits: 0,
            prefetch_percent: 10,
        }
    }

    /// SkyDNS's defaults over `keys`, with the flags only the cache has.
    pub fn build(flags: &Flags, keys: &Keys) -> Self {
        let ttl = if keys.rcache_ttl <= 0 {
            60
        } else {
            u64::try_from(keys.rcache_ttl).unwrap_or(u64::from(u32::MAX))
        };
        Settings {
            capacity: non_negative(keys.rcache),
            max_ttl: Duration::from_secs(ttl.min(u64::from(u32::MAX))),
            stale: flags.rcache_stale,
            stale_timeout: flags.rcache_stale_timeout,
            stale_ttl: flags.rcache_stale_ttl,
            prefetch_hits: flags.rcache_prefetch,
            prefetch_percent: flags.rcache_prefetch_percent.min(100),
        }
    }

    /// The TTL cap in seconds (internal lookups' answers).
    pub fn max_ttl_secs(&self) -> u32 {
        u32::try_from(self.max_ttl.as_secs()).unwrap_or(u32::MAX)
    }
}
