//! CoreDNS's series: the names, labels and meaning of CoreDNS 1.15's
//! `prometheus`, `cache`, `forward`, `health` and `reload` plugins (and the
//! `coredns_forward_*` names of earlier releases that coredns-mixin's alerts
//! read), counted beside skydns's own so that CoreDNS's dashboards and
//! alerts read skydns unchanged. docs/monitoring.md#coredns-series.

use super::sharded::{ShardedCounter, ShardedHistogram};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

type Labels = Vec<(&'static str, String)>;

/// The query types CoreDNS names in `type` (`plugin/metrics/vars/monitor.go`);
/// any other is `other`.
const TYPES: [(u16, &str); 19] = [
    (28, "AAAA"),
    (1, "A"),
    (5, "CNAME"),
    (48, "DNSKEY"),
    (43, "DS"),
    (15, "MX"),
    (50, "NSEC3"),
    (47, "NSEC"),
    (2, "NS"),
    (12, "PTR"),
    (46, "RRSIG"),
    (6, "SOA"),
    (33, "SRV"),
    (16, "TXT"),
    (65, "HTTPS"),
    (64, "SVCB"),
    (251, "IXFR"),
    (252, "AXFR"),
    (255, "ANY"),
];
const OTHER: usize = TYPES.len();

/// The index of `qtype` in [`TYPES`], or [`OTHER`]: A and AAAA first.
fn type_index(qtype: u16) -> usize {
    match qtype {
        1 => 1,
        28 => 0,
        _ => TYPES.iter().position(|(t, _)| *t == qtype).unwrap_or(OTHER),
    }
}

/// The header's rcode as CoreDNS writes it (miekg/dns `RcodeToString`).
fn rcode_name(rcode: u8) -> String {
    const NAMES: [&str; 11] = [
        "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "YXDOMAIN", "YXRRSET",
        "NXRRSET", "NOTAUTH", "NOTZONE",
    ];
    NAMES
        .get(usize::from(rcode))
        .map_or_else(|| rcode.to_string(), |n| (*n).to_string())
}

/// CoreDNS's `plugin.TimeBuckets`: 0.25 ms to 8 s, doubling.
fn time_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.00025, 2.0, 16))
}

/// [`time_histogram`] of atomics (observed on every query).
fn sharded_time_histogram() -> ShardedHistogram {
    ShardedHistogram::seconds(exponential_buckets(0.00025, 2.0, 16))
}

/// CoreDNS's request and response size buckets.
fn size_histogram() -> ShardedHistogram {
    ShardedHistogram::bytes([
        0.0, 100.0, 200.0, 300.0, 400.0, 511.0, 1023.0, 2047.0, 4095.0, 8291.0, 16e3, 32e3, 48e3,
        64e3,
    ])
}

/// What the metrics count of one request.
#[derive(Clone, Copy, Debug)]
pub struct Asked {
    /// Over TCP (else UDP).
    pub tcp: bool,
    /// From an IPv6 client (CoreDNS's `family="2"`).
    pub ipv6: bool,
    /// The EDNS0 DO bit.
    pub dnssec_ok: bool,
    /// The question's type (0 when there is none).
    pub qtype: u16,
    /// The request's length in bytes.
    pub len: usize,
}

/// The handles of the CoreDNS series; the per-query ones made once per
/// label set and kept, so a query pays a few atomic adds.
pub(super) struct Coredns {
    server: String,
    requests: Family<Labels, ShardedCounter>,
    /// By transport, family and type: `(tcp * 2 + ipv6) * (OTHER + 1) + type`.
    request_handles: Box<[OnceLock<ShardedCounter>]>,
    duration: ShardedHistogram,
    request_size: [ShardedHistogram; 2],
    response_size: [ShardedHistogram; 2],
    dnssec_ok: ShardedCounter,
    responses: Family<Labels, ShardedCounter>,
    response_handles: [OnceLock<ShardedCounter>; 16],
    cache: Cache,
    forward: Forward,
    pub(super) panics: Counter,
    health_duration: Histogram,
    reload_failures: Counter,
    plugins: Family<Labels, Gauge>,
}

/// `coredns_cache_*`: the response cache (forwarded names).
struct Cache {
    entries: [Gauge; 2],
    hits: [Counter; 2],
    misses: Counter,
    requests: Counter,
    prefetches: Counter,
    stale: Counter,
}

/// `coredns_proxy_*` and `coredns_forward_*`, per upstream.
struct Forward {
    proxy_duration: Family<Labels, Histogram>,
    proxy_health_failures: Family<Labels, Counter>,
    duration: Family<Labels, Histogram>,
    requests: Family<Labels, Counter>,
    responses: Family<Labels, Counter>,
    health_failures: Family<Labels, Counter>,
    rejects: Counter,
    broken: Counter,
}

impl Coredns {
    /// The series of a server listening on `addr`, registered in `registry`
    /// (its prefix is `coredns`).
    pub(super) fn register(registry: &mut Registry, addr: SocketAddr) -> Self {
        let server = server_label(addr);
        let fixed = |extra: &[(&'static str, &str)]| labels(&server, "zone", extra);
        let requests = Family::<Labels, ShardedCounter>::default();
        registry.register(
            "dns_requests",
            "Counter of DNS requests made per zone, protocol and family.",
            requests.clone(),
        );
        let duration =
            Family::<Labels, ShardedHistogram>::new_with_constructor(sharded_time_histogram);
        registry.register(
            "dns_request_duration_seconds",
            "Histogram of the time (in seconds) each request took per zone.",
            duration.clone(),
        );
        let request_size = Family::<Labels, ShardedHistogram>::new_with_constructor(size_histogram);
        registry.register(
            "dns_request_size_bytes",
            "Size of the EDNS0 UDP buffer in bytes (64K for TCP) per zone and protocol.",
            request_size.clone(),
        );
        let response_size =
            Family::<Labels, ShardedHistogram>::new_with_constructor(size_histogram);
        registry.register(
            "dns_response_size_bytes",
            "Size of the returned response in bytes.",
            response_size.clone(),
        );
        let dnssec_ok = Family::<Labels, ShardedCounter>::default();
        registry.register(
            "dns_do_requests",
            "Counter of DNS requests with DO bit set per zone.",
            dnssec_ok.clone(),
        );
        let responses = Family::<Labels, ShardedCounter>::default();
        registry.register(
            "dns_responses",
            "Counter of response status codes.",
            responses.clone(),
        );
        let by_proto = |f: &Family<Labels, ShardedHistogram>| {
            ["udp", "tcp"].map(|p| f.get_or_create_owned(&fixed(&[("proto", p)])))
        };
        let panics = Counter::default();
        registry.register(
            "panics",
            "A metrics that counts the number of panics.",
            panics.clone(),
        );
        let health_duration = time_histogram();
        registry.register(
            "health_request_duration_seconds",
            "Histogram of the time (in seconds) each request took.",
            health_duration.clone(),
        );
        let health_failures: Counter = Counter::default();
        registry.register(
            "health_request_failures",
            "The number of times the health check failed.",
            health_failures,
        );
        let reload_failures = Counter::default();
        registry.register(
            "reload_failed",
            "Counter of the number of failed reload attempts.",
            reload_failures.clone(),
        );
        let build_info = Family::<Labels, Gauge>::default();
        registry.register(
            "build_info",
            "A metric with a constant '1' value labeled by version, revision, and goversion from which CoreDNS was built.",
            build_info.clone(),
        );
        build_info
            .get_or_create(&vec![
                ("version", env!("CARGO_PKG_VERSION").to_string()),
                ("revision", String::new()),
                ("goversion", String::new()),
            ])
            .set(1);
        let plugins = Family::<Labels, Gauge>::default();
        registry.register(
            "plugin_enabled",
            "A metric that indicates whether a plugin is enabled on per server and zone basis.",
            plugins.clone(),
        );
        let cache = Cache::register(registry, &server);
        let forward = Forward::register(registry);
        Coredns {
            request_handles: (0..4 * (OTHER + 1)).map(|_| OnceLock::new()).collect(),
            duration: duration.get_or_create_owned(&fixed(&[])),
            request_size: by_proto(&request_size),
            response_size: by_proto(&response_size),
            dnssec_ok: dnssec_ok.get_or_create_owned(&fixed(&[])),
            response_handles: Default::default(),
            server,
            requests,
            responses,
            cache,
            forward,
            panics,
            health_duration,
            reload_failures,
            plugins,
        }
    }

    fn labels(&self, extra: &[(&'static str, &str)]) -> Labels {
        labels(&self.server, "zone", extra)
    }

    /// A request arrived.
    pub(super) fn request(&self, asked: &Asked) {
        let kind = type_index(asked.qtype);
        let (tcp, ipv6) = (usize::from(asked.tcp), usize::from(asked.ipv6));
        let slot = &self.request_handles[(tcp * 2 + ipv6) * (OTHER + 1) + kind];
        slot.get_or_init(|| {
            let proto = if asked.tcp { "tcp" } else { "udp" };
            let family = if asked.ipv6 { "2" } else { "1" };
            let name = TYPES.get(kind).map_or("other", |(_, n)| n);
            let labels = self.labels(&[("proto", proto), ("family", family), ("type", name)]);
            self.requests.get_or_create_owned(&labels)
        })
        .inc();
        self.request_size[tcp].observe_bytes(asked.len);
        if asked.dnssec_ok {
            self.dnssec_ok.inc();
        }
    }

    /// A reply of `bytes` was sent `elapsed` after its request came.
    pub(super) fn reply(&self, tcp: bool, bytes: &[u8], elapsed: Duration) {
        self.duration.observe_duration(elapsed);
        self.response_size[usize::from(tcp)].observe_bytes(bytes.len());
        let rcode = bytes.get(3).map_or(2, |b| b & 0x0f);
        self.response_handles[usize::from(rcode)]
            .get_or_init(|| {
                // CoreDNS 1.15 names the plugin after `prometheus` in the
                // chain: `errors` in kubeadm's Corefile.
                let labels = self.labels(&[("rcode", &rcode_name(rcode)), ("plugin", "errors")]);
                self.responses.get_or_create_owned(&labels)
            })
            .inc();
    }

    /// The features in use, as the CoreDNS plugins that do the same.
    pub(super) fn plugins_enabled(&self, names: &[&str]) {
        self.plugins.clear();
        for name in names {
            self.plugins
                .get_or_create(&self.labels(&[("name", name)]))
                .set(1);
        }
    }

    pub(super) fn health_request(&self, elapsed: Duration) {
        self.health_duration.observe(elapsed.as_secs_f64());
    }

    pub(super) fn reload_failed(&self) {
        self.reload_failures.inc();
    }

    pub(super) fn cache_hit(&self, denial: bool) {
        self.cache.hits[usize::from(denial)].inc();
        self.cache.requests.inc();
    }

    pub(super) fn cache_miss(&self) {
        self.cache.misses.inc();
        self.cache.requests.inc();
    }

    pub(super) fn cache_entries(&self, success: usize, denial: usize) {
        let set = |g: &Gauge, n: usize| g.set(i64::try_from(n).unwrap_or(i64::MAX));
        set(&self.cache.entries[0], success);
        set(&self.cache.entries[1], denial);
    }

    pub(super) fn prefetch(&self) {
        self.cache.prefetches.inc();
    }

    pub(super) fn stale_reply(&self) {
        self.cache.stale.inc();
    }

    /// `server` replied with `reply` after `elapsed`.
    pub(super) fn upstream_reply(&self, server: SocketAddr, reply: &[u8], elapsed: Duration) {
        let to = server.to_string();
        let rcode = rcode_name(reply.get(3).map_or(2, |b| b & 0x0f));
        let f = &self.forward;
        let seconds = elapsed.as_secs_f64();
        let proxy = vec![
            ("proxy_name", "forward".to_string()),
            ("to", to.clone()),
            ("rcode", rcode.clone()),
        ];
        f.proxy_duration.get_or_create(&proxy).observe(seconds);
        let with_rcode = vec![("to", to.clone()), ("rcode", rcode)];
        f.duration.get_or_create(&with_rcode).observe(seconds);
        f.responses.get_or_create(&with_rcode).inc();
    }

    /// An exchange with `server` began.
    pub(super) fn upstream_request(&self, server: SocketAddr) {
        let to = vec![("to", server.to_string())];
        self.forward.requests.get_or_create(&to).inc();
    }

    /// A health probe of `server` failed.
    pub(super) fn health_check_failed(&self, server: SocketAddr) {
        let f = &self.forward;
        let to = server.to_string();
        let proxy = vec![("proxy_name", "forward".to_string()), ("to", to.clone())];
        f.proxy_health_failures.get_or_create(&proxy).inc();
        f.health_failures.get_or_create(&vec![("to", to)]).inc();
    }

    /// Every upstream was down when a query came.
    pub(super) fn all_upstreams_down(&self) {
        self.forward.broken.inc();
    }

    /// A query refused at `-max-pending-forwards`.
    pub(super) fn max_concurrent_reject(&self) {
        self.forward.rejects.inc();
    }
}

impl Cache {
    fn register(registry: &mut Registry, server: &str) -> Self {
        // The cache names its zones `zones`, not `zone`.
        let cache_labels = |extra: &[(&'static str, &str)]| labels(server, "zones", extra);
        let entries = Family::<Labels, Gauge>::default();
        registry.register(
            "cache_entries",
            "The number of elements in the cache.",
            entries.clone(),
        );
        let hits = Family::<Labels, Counter>::default();
        registry.register("cache_hits", "The count of cache hits.", hits.clone());
        let counter = |registry: &mut Registry, name: &str, help: &str| {
            let family = Family::<Labels, Counter>::default();
            registry.register(name, help, family.clone());
            family.get_or_create_owned(&cache_labels(&[]))
        };
        let by_type = ["success", "denial"].map(|t| cache_labels(&[("type", t)]));
        Cache {
            entries: by_type.clone().map(|l| entries.get_or_create_owned(&l)),
            hits: by_type.map(|l| hits.get_or_create_owned(&l)),
            misses: counter(registry, "cache_misses", "The count of cache misses. Deprecated, derive misses from cache hits/requests counters."),
            requests: counter(registry, "cache_requests", "The count of cache requests."),
            prefetches: counter(registry, "cache_prefetch", "The number of times the cache has prefetched a cached item."),
            stale: counter(registry, "cache_served_stale", "The number of requests served from stale cache entries."),
        }
    }
}

impl Forward {
    fn register(registry: &mut Registry) -> Self {
        let f = Forward {
            proxy_duration: Family::new_with_constructor(time_histogram),
            proxy_health_failures: Family::default(),
            duration: Family::new_with_constructor(time_histogram),
            requests: Family::default(),
            responses: Family::default(),
            health_failures: Family::default(),
            rejects: Counter::default(),
            broken: Counter::default(),
        };
        registry.register(
            "proxy_request_duration_seconds",
            "Histogram of the time each request took.",
            f.proxy_duration.clone(),
        );
        registry.register(
            "proxy_healthcheck_failures",
            "Counter of the number of failed healthchecks.",
            f.proxy_health_failures.clone(),
        );
        registry.register(
            "forward_healthcheck_broken",
            "Counter of the number of complete failures of the healthchecks.",
            f.broken.clone(),
        );
        registry.register(
            "forward_max_concurrent_rejects",
            "Counter of the number of queries rejected because the concurrent queries were at maximum.",
            f.rejects.clone(),
        );
        // Gone from CoreDNS 1.15 (the proxy_* series replace them), still
        // read by coredns-mixin's alerts and dashboards.
        registry.register(
            "forward_requests",
            "Counter of requests made per upstream (the name before coredns_proxy_*).",
            f.requests.clone(),
        );
        registry.register(
            "forward_responses",
            "Counter of responses received per upstream (the name before coredns_proxy_*).",
            f.responses.clone(),
        );
        registry.register(
            "forward_request_duration_seconds",
            "Histogram of the time each request took (the name before coredns_proxy_*).",
            f.duration.clone(),
        );
        registry.register(
            "forward_healthcheck_failures",
            "Counter of the number of failed healthchecks (the name before coredns_proxy_*).",
            f.health_failures.clone(),
        );
        f
    }
}

/// `server`, the zone (`.`) under `zone_key`, `view` (empty), then `extra`.
fn labels(server: &str, zone_key: &'static str, extra: &[(&'static str, &str)]) -> Labels {
    let mut labels = vec![
        ("server", server.to_string()),
        (zone_key, ".".to_string()),
        ("view", String::new()),
    ];
    labels.extend(extra.iter().map(|(k, v)| (*k, (*v).to_string())));
    labels
}

/// CoreDNS's `server` label: `dns://` and the address listened on, the
/// host left out when it is the unspecified address (`dns://:53`).
fn server_label(addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("dns://:{}", addr.port())
    } else {
        format!("dns://{addr}")
    }
}
