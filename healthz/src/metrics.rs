//! Prometheus metrics of the probe worker, served on `/metrics` in the
//! OpenMetrics text format: runs, failed runs, timed-out runs and the
//! duration of the last run. Not part of exec-healthz 1.0.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::probe::RunOutcome;

/// Content type of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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

    /// Accounts for one finished run.
    pub fn record(&self, outcome: &RunOutcome) {
        self.runs.inc();
        if outcome.result.err.is_some() {
            self.failures.inc();
        }
        if outcome.timed_out {
            self.timeouts.inc();
        }
        self.last_duration.set(outcome.duration.as_secs_f64());
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
