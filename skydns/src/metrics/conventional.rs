//! The series SkyDNS 2.5 named against today's Prometheus conventions, served a
//! second time under a conventional name that reads the same metric.
//! [`RENAMED`] is the table docs/monitoring.md shows.

use super::sharded::{ShardedCounter, ShardedHistogram};
use super::Labels;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// (conventional name, first name), as exposed (with `_total`): SkyDNS
/// 2.5's names, and the last two skydns's own in their style.
pub(super) const RENAMED: [(&str, &str); 9] = [
    (
        "skydns_dns_requests_total",
        "skydns_dns_request_count_total",
    ),
    (
        "skydns_dns_request_duration_seconds",
        "skydns_dns_request_duration",
    ),
    ("skydns_dns_response_size_bytes", "skydns_dns_response_size"),
    ("skydns_dns_errors_total", "skydns_dns_error_count_total"),
    (
        "skydns_dns_cache_misses_total",
        "skydns_dns_cache_miss_count_total",
    ),
    (
        "skydns_dns_external_requests_total",
        "skydns_dns_request_external_count_total",
    ),
    (
        "skydns_dns_dnssec_ok_requests_total",
        "skydns_dns_dnssec_ok_count_total",
    ),
    (
        "skydns_dns_store_errors_total",
        "skydns_dns_store_error_count_total",
    ),
    ("skydns_dns_limits_total", "skydns_dns_limit_count_total"),
];

/// The SkyDNS-named metrics to serve again.
pub(super) struct Legacy<'a> {
    pub requests: &'a Family<Labels, ShardedCounter>,
    pub duration: &'a Family<Labels, ShardedHistogram>,
    pub size: &'a Family<Labels, ShardedHistogram>,
    pub errors: &'a Family<Labels, ShardedCounter>,
    pub cache_misses: &'a Family<Labels, Counter>,
    pub external: &'a Family<Labels, Counter>,
    pub dnssec_ok: &'a ShardedCounter,
    pub store_errors: &'a Counter,
    pub limits: &'a Family<Labels, Counter>,
}

/// Registers each of `legacy` under its conventional name (the registry's
/// prefix is `skydns_dns`; prometheus-client adds `_total` to counters).
pub(super) fn register(registry: &mut Registry, legacy: Legacy<'_>) {
    let same = |old: &str| format!("The same series as {old} (its first name).");
    registry.register("requests", same(RENAMED[0].1), legacy.requests.clone());
    registry.register(
        "request_duration_seconds",
        same(RENAMED[1].1),
        legacy.duration.clone(),
    );
    registry.register(
        "response_size_bytes",
        same(RENAMED[2].1),
        legacy.size.clone(),
    );
    registry.register("errors", same(RENAMED[3].1), legacy.errors.clone());
    registry.register(
        "cache_misses",
        same(RENAMED[4].1),
        legacy.cache_misses.clone(),
    );
    registry.register(
        "external_requests",
        same(RENAMED[5].1),
        legacy.external.clone(),
    );
    registry.register(
        "dnssec_ok_requests",
        same(RENAMED[6].1),
        legacy.dnssec_ok.clone(),
    );
    registry.register(
        "store_errors",
        same(RENAMED[7].1),
        legacy.store_errors.clone(),
    );
    registry.register("limits", same(RENAMED[8].1), legacy.limits.clone());
}
