//! The response cache's command-line flags, flattened into skydns's own.

use gocompat::flag::duration;
use std::time::Duration;

/// The flags of the cache of forwarded replies, serve-stale and prefetch.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
#[command(next_help_heading = "Response cache")]
pub struct Flags {
    /// Response cache capacity (0 disables it).
    #[arg(long, default_value_t = 0)]
    pub rcache: i64,
    /// Response cache TTL in seconds.
    #[arg(long = "rcache-ttl", default_value_t = 60)]
    pub rcache_ttl: i64,
    /// Serve-stale (RFC 8767): how long after it expired a cached reply may still be served,
    /// when the upstreams fail or say SERVFAIL, or none answers within -rcache-stale-timeout (Go duration;
    /// 0s: never). Needs -rcache.
    #[arg(long = "rcache-stale", value_parser = duration, default_value = "0s")]
    pub rcache_stale: Duration,
    /// How long a client waits for the upstreams before a stale reply is served; the refresh
    /// goes on in the background (RFC 8767 suggests 1.8s; 0s: serve the stale reply at once).
    #[arg(long = "rcache-stale-timeout", value_parser = duration, default_value = "1800ms")]
    pub rcache_stale_timeout: Duration,
    /// TTL of the records of a stale reply, in seconds (RFC 8767: 30).
    #[arg(long = "rcache-stale-ttl", default_value_t = 30)]
    pub rcache_stale_ttl: u32,
    /// Prefetch: a cached reply asked this many times since it was stored is refreshed in the
    /// background when -rcache-prefetch-percent of its lifetime is left (0: never). Needs -rcache.
    #[arg(long = "rcache-prefetch", default_value_t = 0)]
    pub rcache_prefetch: u32,
    /// Share of a cached reply's lifetime left, in percent (1-100), when its prefetch is due.
    #[arg(long = "rcache-prefetch-percent", default_value_t = 10, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub rcache_prefetch_percent: u8,
}
