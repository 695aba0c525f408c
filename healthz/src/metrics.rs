//! Prometheus metrics of the probe worker, served on `/metrics` in the
//! OpenMetrics text format: runs, failed runs, timed-out runs and the
//! duration of the last run. Not part of exec-healthz 1.0.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Content type of [`Metrics::encode`]'s output.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The worker's counters and their registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    runs: Counter,
    failures: Counter,
    timeouts: Counter,
    last_duration: Gauge<f64, AtomicU64>,
}

impl Metrics {
    /// Registers all metrics under the `exechealthz_` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("exechealthz");
        let runs = Counter::default();
        let failures = Counter::default();
        let timeouts = Counter::default();
        let last_duration = Gauge::<f64, AtomicU64>::default();
        registry.register("runs", "Completed runs of the probe command", runs.clone());
        registry.register(
            "failures",
            "Runs that exited non-zero, were killed, timed out or failed to start",
            failures.clone(),
        );
        registry.register(
            "timeouts",
            "Runs killed because they exceeded -timeout",
            timeouts.clone(),
        );
        registry.register(
            "last_run_duration_seconds",
            "Wall-clock duration of the last completed run",
            last_duration.clone(),
        );
        Self {
            registry,
            runs,
            failures,
            timeouts,
            last_duration,
        }
    }

    /// Accounts for one finished run: whether it failed (exited non-zero,
    /// was killed, timed out or did not start), whether it timed out, and
    /// how long it took.
    pub fn record(&self, failed: bool, timed_out: bool, duration: Duration) {
        self.runs.inc();
        if failed {
            self.failures.inc();
        }
        if timed_out {
            self.timeouts.inc();
        }
        self.last_duration.set(duration.as_secs_f64());
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(err) = encode(&mut out, &self.registry) {
            tracing::error!("encoding metrics: {err}");
        }
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
