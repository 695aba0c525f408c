//! Prometheus metrics with SkyDNS's names (SkyDNS `metrics/metrics.go`): one
//! [`Metrics`] value shared by every listener, and [`serve`], the endpoint that
//! serves them with the `/health` and `/ready` probes.

use crate::lifecycle::Status;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

mod conventional;
mod coredns;
mod flags;
mod sharded;
pub use coredns::Asked;
pub use flags::{Flags, Settings};
use sharded::{ShardedCounter, ShardedHistogram};

type Labels = Vec<(&'static str, &'static str)>;

/// The `error` label's values of `skydns_dns_error_count_total`.
const ERROR_CLASSES: [&str; 6] = [
    "nxdomain",
    "nodata",
    "servfail",
    "refused",
    "truncated",
    "overflow",
];
/// Labels naming an upstream server (bounded by the configured list).
type UpstreamLabels = Vec<(&'static str, String)>;

/// SkyDNS's metrics.
pub struct Metrics {
    registry: Registry,
    /// Per-transport handles, index 0 = udp, 1 = tcp (no lookup per query).
    requests: [ShardedCounter; 2],
    duration: [ShardedHistogram; 2],
    size: [ShardedHistogram; 2],
    dnssec_ok: ShardedCounter,
    /// By class, in the order of [`ERROR_CLASSES`] (no lookup per reply).
    errors: [ShardedCounter; 6],
    cache_misses: Counter,
    signature_misses: Counter,
    external: Family<Labels, Counter>,
    store_errors: Counter,
    limits: Family<Labels, Counter>,
    upstream: UpstreamMetrics,
    stale: Family<Labels, Counter>,
    prefetches: Counter,
    config_reloads: Family<Labels, Counter>,
    /// `/ready` as a series (set when scraped), for alerts.
    ready: Gauge,
    /// Autopath walks by result: `hit` (answered through a CNAME), `miss`.
    autopath: Family<Labels, Counter>,
    /// Forwarded queries answered by the response cache.
    cache_hits: Counter,
    /// Records in the snapshot answers come from.
    records: Gauge,
    /// Loop checks (`-loop`) by result: clear, loop, unanswered.
    loop_checks: Family<Labels, Counter>,
    /// The configuration whose upstream health the `upstream_up` gauge shows.
    upstream_generation: AtomicU64,
    /// The same events under CoreDNS's names and labels.
    coredns: coredns::Coredns,
}

/// Per upstream server: requests, failures by reason, reply latency, up/down.
struct UpstreamMetrics {
    requests: Family<UpstreamLabels, Counter>,
    failures: Family<UpstreamLabels, Counter>,
    duration: Family<UpstreamLabels, Histogram>,
    up: Family<UpstreamLabels, Gauge>,
}

/// The request duration buckets, in seconds.
const DURATION_BUCKETS: [f64; 13] = [
    0.001, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn upstream_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// Observed on every query: atomics, no lock.
fn duration_histogram() -> ShardedHistogram {
    ShardedHistogram::seconds(DURATION_BUCKETS)
}

fn size_histogram() -> ShardedHistogram {
    let mut buckets = vec![0.0, 512.0, 1024.0, 1500.0, 2048.0, 4096.0];
    buckets.extend((2..=16).map(|i| f64::from(i * 4096)));
    ShardedHistogram::bytes(buckets)
}

impl Default for Metrics {
    /// The metrics of a server on `0.0.0.0:53`.
    fn default() -> Self {
        Self::serving(std::net::SocketAddr::from(([0, 0, 0, 0], 53)))
    }
}

impl Metrics {
    /// The metrics of a server listening on `addr` (CoreDNS's `server`
    /// label names it).
    pub fn serving(addr: std::net::SocketAddr) -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("skydns_dns");
        let requests: Family<Labels, ShardedCounter> = Family::default();
        let duration: Family<Labels, ShardedHistogram> =
            Family::new_with_constructor(duration_histogram);
        let size: Family<Labels, ShardedHistogram> = Family::new_with_constructor(size_histogram);
        let cache_misses: Family<Labels, Counter> = Family::default();
        let errors: Family<Labels, ShardedCounter> = Family::default();
        let external: Family<Labels, Counter> = Family::default();
        let dnssec_ok = ShardedCounter::default();
        let store_errors = Counter::default();
        let limits: Family<Labels, Counter> = Family::default();
        let ready = Gauge::default();
        let autopath: Family<Labels, Counter> = Family::default();
        let cache_hits = Counter::default();
        registry.register(
            "cache_hits",
            "Forwarded queries answered by the response cache (-rcache); with cache_miss_count{type=\"response\"}, the hit ratio",
            cache_hits.clone(),
        );
        let records = Gauge::default();
        registry.register(
            "records",
            "Records (etcd keys) in the snapshot answers come from",
            records.clone(),
        );
        registry.register(
            "autopath",
            "Autopath walks (-autopath) by result: hit (a later search domain or the bare name answered, through a CNAME), miss (the asked name's NXDOMAIN sent)",
            autopath.clone(),
        );
        registry.register(
            "limit_count",
            "Counter of requests and connections refused or closed because a limit was reached (pending_forwards; tcp_connections: a new connection closed, every place busy; tcp_idle_closed: the connection idle longest closed to make room).",
            limits.clone(),
        );
        registry.register(
            "store_error_count",
            "Counter of failed reads of the store (etcd); answers come from the last snapshot until a reload succeeds.",
            store_errors.clone(),
        );
        registry.register(
            "request_count",
            "Counter of DNS requests made.",
            requests.clone(),
        );
        registry.register(
            "dnssec_ok_count",
            "Counter of DNSSEC requests.",
            dnssec_ok.clone(),
        );
        registry.register(
            "error_count",
            "Counter of DNS requests resulting in an error.",
            errors.clone(),
        );
        registry.register(
            "cache_miss_count",
            "Counter of DNS requests that result in a cache miss.",
            cache_misses.clone(),
        );
        registry.register(
            "request_duration",
            "Histogram of the time (in seconds) each request took to resolve.",
            duration.clone(),
        );
        registry.register(
            "response_size",
            "Size of the returns response in bytes.",
            size.clone(),
        );
        registry.register(
            "request_external_count",
            "Counter of external DNS requests.",
            external.clone(),
        );
        conventional::register(
            registry,
            conventional::Legacy {
                requests: &requests,
                duration: &duration,
                size: &size,
                errors: &errors,
                cache_misses: &cache_misses,
                external: &external,
                dnssec_ok: &dnssec_ok,
                store_errors: &store_errors,
                limits: &limits,
            },
        );
        let upstream = UpstreamMetrics {
            requests: Family::default(),
            failures: Family::default(),
            duration: Family::new_with_constructor(upstream_histogram),
            up: Family::default(),
        };
        registry.register(
            "upstream_requests",
            "Exchanges with each upstream nameserver (forwards, internal lookups; a TCP retry of a truncated reply is part of its exchange).",
            upstream.requests.clone(),
        );
        registry.register(
            "upstream_failures",
            "Failed exchanges with each upstream nameserver, by reason (timeout, refused, bad_reply, servfail, error).",
            upstream.failures.clone(),
        );
        registry.register(
            "upstream_request_duration_seconds",
            "Time each upstream nameserver took to reply.",
            upstream.duration.clone(),
        );
        registry.register(
            "upstream_up",
            "1 while the upstream nameserver is in use, 0 while it is marked down (-ns-fail-threshold) and probed.",
            upstream.up.clone(),
        );
        let stale: Family<Labels, Counter> = Family::default();
        registry.register(
            "cache_stale_replies",
            "Expired response-cache entries served (RFC 8767), by reason: failed (the upstreams failed, or the one that answered said SERVFAIL), timeout (no upstream reply within -rcache-stale-timeout) or recheck (a refresh of the name was tried within the last 30 s: served at once).",
            stale.clone(),
        );
        let prefetches = Counter::default();
        registry.register(
            "cache_prefetches",
            "Response-cache entries refreshed in the background before they expired (-rcache-prefetch).",
            prefetches.clone(),
        );
        let config_reloads: Family<Labels, Counter> = Family::default();
        let loop_checks: Family<Labels, Counter> = Family::default();
        registry.register(
            "loop_checks",
            "Forwarding loop checks (-loop) of each upstream, by result: clear (it answered the probe without sending it back), loop (it sent the probe back to skydns), unanswered (no reply within 30 s)",
            loop_checks.clone(),
        );
        registry.register(
            "ready",
            "1 while /ready answers 200 (records loaded, etcd in reach, not in the lameduck)",
            ready.clone(),
        );
        registry.register(
            "config_reloads",
            "Changes of the etcd config key, by result: applied, or invalid (the running configuration kept).",
            config_reloads.clone(),
        );
        // Series that exist from the start at 0, so that a ratio or an
        // increase() over them is 0 rather than empty until the first event.
        for result in ["applied", "invalid"] {
            let _ = config_reloads.get_or_create(&vec![("result", result)]);
        }
        let by = |t: &'static str| vec![("type", t)];
        let coredns = coredns::Coredns::register(root.sub_registry_with_prefix("coredns"), addr);
        Metrics {
            coredns,
            upstream,
            stale,
            prefetches,
            config_reloads,
            ready,
            autopath,
            cache_hits,
            records,
            loop_checks,
            upstream_generation: AtomicU64::new(0),
            registry: root,
            requests: [
                requests.get_or_create_owned(&by("udp")),
                requests.get_or_create_owned(&by("tcp")),
            ],
            duration: [
                duration.get_or_create_owned(&by("udp")),
                duration.get_or_create_owned(&by("tcp")),
            ],
            size: [
                size.get_or_create_owned(&by("udp")),
                size.get_or_create_owned(&by("tcp")),
            ],
            dnssec_ok,
            // Every class exists from the start at 0.
            errors: ERROR_CLASSES.map(|e| errors.get_or_create_owned(&vec![("error", e)])),
            cache_misses: cache_misses.get_or_create_owned(&by("response")),
            signature_misses: cache_misses.get_or_create_owned(&by("signature")),
            external,
            store_errors,
            limits,
        }
    }
}

impl Metrics {
    /// A request arrived.
    pub fn request(&self, asked: &Asked) {
        self.requests[usize::from(asked.tcp)].inc();
        if asked.dnssec_ok {
            self.dnssec_ok.inc();
        }
        self.coredns.request(asked);
    }

    /// A reply of `bytes` was sent after `elapsed`; counts its error class.
    pub fn reply(&self, tcp: bool, bytes: &[u8], elapsed: Duration, overflow: bool) {
        self.duration[usize::from(tcp)].observe_duration(elapsed);
        self.size[usize::from(tcp)].observe_bytes(bytes.len());
        self.coredns.reply(tcp, bytes, elapsed);
        if bytes.len() < 12 {
            return;
        }
        let rcode = bytes[3] & 0x0f;
        let answers = u16::from_be_bytes([bytes[6], bytes[7]]);
        // The index of the class in ERROR_CLASSES.
        let error = match rcode {
            _ if overflow => Some(5),
            2 => Some(2),
            3 => Some(0),
            5 => Some(3),
            0 if bytes[2] & 0x02 != 0 => Some(4),
            0 if answers == 0 => Some(1),
            _ => None,
        };
        if let Some(i) = error {
            self.errors[i].inc();
        }
    }

    /// A failed read of the store (a lost watch, a failed reload).
    pub fn store_error(&self) {
        self.store_errors.inc();
    }

    /// How many reads of the store failed so far.
    #[cfg(test)]
    pub fn store_errors(&self) -> u64 {
        self.store_errors.get()
    }

    /// A request or connection refused at `limit`.
    pub fn limit(&self, limit: &'static str) {
        self.limits.get_or_create(&vec![("limit", limit)]).inc();
        if limit == "pending_forwards" {
            self.coredns.max_concurrent_reject();
        }
    }

    /// A response-cache miss.
    pub fn cache_miss(&self) {
        self.cache_misses.inc();
        self.coredns.cache_miss();
    }

    /// `n` RRSIGs were not in the signature cache and had to be made.
    pub fn signature_misses(&self, n: u64) {
        if n > 0 {
            self.signature_misses.inc_by(n);
        }
    }

    /// An upstream request of `kind` (`recursive`, `stub` or `lookup`).
    pub fn external(&self, kind: &'static str) {
        self.external.get_or_create(&vec![("type", kind)]).inc();
    }

    /// The upstream servers now configured: each up, the others forgotten.
    /// Returns the generation their health reports under; reports of an
    /// earlier one (a configuration replaced since) are ignored.
    pub(crate) fn upstreams_configured(&self, servers: &[std::net::SocketAddr]) -> u64 {
        let generation = self.upstream_generation.fetch_add(1, Ordering::AcqRel) + 1;
        self.upstream.up.clear();
        for &server in servers {
            self.upstream_up(generation, server, true);
        }
        generation
    }

    /// An exchange with `server` began.
    pub(crate) fn upstream_request(&self, server: std::net::SocketAddr) {
        self.upstream
            .requests
            .get_or_create(&upstream(server))
            .inc();
        self.coredns.upstream_request(server);
    }

    /// An exchange with `server` failed for `reason`.
    pub(crate) fn upstream_failure(&self, server: std::net::SocketAddr, reason: &'static str) {
        let mut labels = upstream(server);
        labels.push(("reason", reason.to_string()));
        self.upstream.failures.get_or_create(&labels).inc();
    }

    /// `server` replied `reply` after `elapsed`.
    pub(crate) fn upstream_reply(
        &self,
        server: std::net::SocketAddr,
        reply: &[u8],
        elapsed: Duration,
    ) {
        (self.upstream.duration.get_or_create(&upstream(server))).observe(elapsed.as_secs_f64());
        self.coredns.upstream_reply(server, reply, elapsed);
    }

    /// A health probe of `server` (marked down) failed.
    pub(crate) fn health_check_failed(&self, server: std::net::SocketAddr) {
        self.coredns.health_check_failed(server);
    }

    /// Every upstream was marked down when a query came.
    pub(crate) fn all_upstreams_down(&self) {
        self.coredns.all_upstreams_down();
    }

    /// `server` is in use (`true`) or marked down, says the health of
    /// configuration `generation`.
    pub(crate) fn upstream_up(&self, generation: u64, server: std::net::SocketAddr, up: bool) {
        if generation == self.upstream_generation.load(Ordering::Acquire) {
            (self.upstream.up.get_or_create(&upstream(server))).set(i64::from(up));
        }
    }

    /// An expired cache entry was served because of `reason`.
    pub(crate) fn stale_reply(&self, reason: &'static str) {
        self.stale.get_or_create(&vec![("reason", reason)]).inc();
        self.coredns.stale_reply();
    }

    /// A cache entry was refreshed ahead of its expiry.
    pub(crate) fn prefetch(&self) {
        self.prefetches.inc();
        self.coredns.prefetch();
    }

    /// A forwarded query was answered by the response cache, with a denial
    /// (NXDOMAIN or NODATA) or not.
    pub(crate) fn cache_hit(&self, denial: bool) {
        self.cache_hits.inc();
        self.coredns.cache_hit(denial);
    }

    /// The response cache holds `success` answers and `denial` ones.
    pub(crate) fn cache_entries(&self, success: usize, denial: usize) {
        self.coredns.cache_entries(success, denial);
    }

    /// The features in use, named as the CoreDNS plugins that do the same
    /// (`coredns_plugin_enabled`).
    pub fn plugins_enabled(&self, names: &[&str]) {
        self.coredns.plugins_enabled(names);
    }

    /// A panic happened (`coredns_panics_total`).
    pub fn panicked(&self) {
        self.coredns.panics.inc();
    }

    /// The snapshot answers now come from holds `n` records.
    pub(crate) fn records(&self, n: usize) {
        self.records.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// An autopath walk ended with `result` (`hit` or `miss`).
    pub(crate) fn autopath(&self, result: &'static str) {
        self.autopath.get_or_create(&vec![("result", result)]).inc();
    }

    /// A loop check of one upstream ended with `result`.
    pub(crate) fn loop_check(&self, result: &'static str) {
        self.loop_checks
            .get_or_create(&vec![("result", result)])
            .inc();
    }

    /// Whether `/ready` answers 200 right now (set when scraped).
    pub(crate) fn set_ready(&self, ready: bool) {
        self.ready.set(i64::from(ready));
    }

    /// A change of the etcd config key was `applied` or `invalid`.
    pub(crate) fn config_reload(&self, result: &'static str) {
        self.config_reloads
            .get_or_create(&vec![("result", result)])
            .inc();
        if result == "invalid" {
            self.coredns.reload_failed();
        }
    }

    /// The OpenMetrics text of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Err(error) = encode(&mut out, &self.registry) {
            tracing::error!(%error, "cannot encode metrics");
        }
        out
    }
}

/// Counts every panic in `metrics` (`coredns_panics_total`), then reports
/// it as before; the hook is the process's, so the first caller's metrics
/// count them all.
pub fn count_panics(metrics: &Arc<Metrics>) {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    let metrics = Arc::downgrade(metrics);
    INSTALLED.call_once(move || {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(m) = metrics.upgrade() {
                m.panicked();
            }
            previous(info);
        }));
    });
}

fn upstream(server: std::net::SocketAddr) -> UpstreamLabels {
    vec![("upstream", server.to_string())]
}

/// Serves `metrics` at `path` on `listener` until `shutdown`, beside the
/// probes: `/health` (200 `ok` while the process serves; the liveness
/// probe) and `/ready` (200 `ok` when [`Status::readiness`] holds, else
/// 503 with the reason; the readiness probe).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    path: String,
    metrics: Arc<Metrics>,
    status: Arc<Status>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    tracing::info!(addr = %listener.local_addr()?, %path, "serving metrics, /health and /ready");
    let ready_status = status.clone();
    let health_metrics = metrics.clone();
    let app = axum::Router::new()
        .route(
            &path,
            axum::routing::get(move || {
                let metrics = metrics.clone();
                let ready = status.readiness().is_ok();
                async move {
                    metrics.set_ready(ready);
                    (
                        [(
                            CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        metrics.render(),
                    )
                        .into_response()
                }
            }),
        )
        .route(
            "/health",
            axum::routing::get(move || {
                let metrics = health_metrics.clone();
                let start = std::time::Instant::now();
                async move {
                    metrics.coredns.health_request(start.elapsed());
                    "ok"
                }
            }),
        )
        .route(
            "/ready",
            axum::routing::get(move || {
                let status = ready_status.clone();
                async move {
                    match status.readiness() {
                        Ok(()) => (StatusCode::OK, "ok".to_string()),
                        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why.to_string()),
                    }
                }
            }),
        );
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

#[cfg(test)]
mod tests;
