//! How the handler is configured: [`Options`], from the flags and the etcd
//! config key (`crate::config`), one set per configuration the handler runs.

use crate::forward::{NsPolicy, NsTransport};
use crate::query_log::QueryLog;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How names outside the domain are handled.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Shuffle A/AAAA answers.
    pub round_robin: bool,
    /// Upstream nameservers.
    pub nameservers: Vec<SocketAddr>,
    /// Never forward.
    pub no_rec: bool,
    /// First upstream chosen by request ID (when `ns_policy` is not set).
    pub ns_rotate: bool,
    /// Which upstream goes first (`-ns-policy`); `None`: `ns_rotate` says.
    pub ns_policy: Option<NsPolicy>,
    /// The transport of forwarded queries (`-ns-transport`).
    pub ns_transport: NsTransport,
    /// Consecutive failures that mark an upstream down (0: never).
    pub ns_fail_threshold: u32,
    /// Pause between probes of a down upstream.
    pub ns_probe_interval: Duration,
    /// Labels a name needs before it is forwarded.
    pub ndots: usize,
    /// Upstream timeout per attempt.
    pub read_timeout: Duration,
    /// Response cache capacity (0 = off).
    pub rcache: usize,
    /// Response cache lifetime cap and TTL of internal lookup answers.
    pub rcache_ttl: u32,
    /// How long expired cache entries may be served when upstreams fail
    /// (RFC 8767; zero: never).
    pub rcache_stale: Duration,
    /// How long a client waits for upstreams before a stale entry is served.
    pub rcache_stale_timeout: Duration,
    /// TTL of the records of a stale reply.
    pub rcache_stale_ttl: u32,
    /// Hits after which a cache entry is refreshed before it expires (0: never).
    pub rcache_prefetch: u32,
    /// Percent of an entry's lifetime left when its prefetch is due.
    pub rcache_prefetch_percent: u8,
    /// Forward names in stub zones to their servers.
    pub stubzones: bool,
    /// Requests that may wait on upstream servers at once (0: no limit);
    /// past it they get SERVFAIL at once, counted as
    /// `skydns_dns_limit_count{limit="pending_forwards"}`.
    pub max_pending_forwards: usize,
    /// `-local`: the name `local.dns.<domain>` is looked up as.
    pub local: Option<String>,
    /// Online DNSSEC signing of DO replies (`-dnssec`), if on.
    pub dnssec: Option<Arc<crate::dnssec::Dnssec>>,
    /// The server-side search path (`-autopath`), if on.
    pub autopath: Option<Arc<crate::autopath::Autopath>>,
    /// The query log (`-log-queries`), if on.
    pub query_log: Option<Arc<QueryLog>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            round_robin: true,
            nameservers: Vec::new(),
            no_rec: false,
            ns_rotate: true,
            ns_policy: None,
            ns_transport: NsTransport::Client,
            ns_fail_threshold: 2,
            ns_probe_interval: Duration::from_millis(500),
            ndots: 2,
            read_timeout: Duration::from_secs(2),
            rcache: 0,
            rcache_ttl: 60,
            rcache_stale: Duration::ZERO,
            rcache_stale_timeout: Duration::from_millis(1_800),
            rcache_stale_ttl: 30,
            rcache_prefetch: 0,
            rcache_prefetch_percent: 10,
            stubzones: false,
            max_pending_forwards: 1_000,
            local: None,
            dnssec: None,
            autopath: None,
            query_log: None,
        }
    }
}
