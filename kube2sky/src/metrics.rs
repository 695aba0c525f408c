//! Counters for `/metrics` and the liveness flags behind `/healthz`:
//! [`Metrics`] is shared (`Arc`) by the writer, the watch tasks and the HTTP
//! server. The last-sync age is computed when scraped.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Consecutive watch errors (about 15 s of backoff) after which `/healthz` fails.
const UNHEALTHY_WATCH_ERRORS: u32 = 5;

/// Which watch.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub(crate) enum Kind {
    /// Services.
    Services,
    /// Endpoints.
    Endpoints,
    /// Pods.
    Pods,
    /// EndpointSlices.
    EndpointSlices,
    /// kube-dns's ConfigMap (`--config-map`): counted, but not part of
    /// `/healthz` (restarting kube2sky does not mend a missing permission).
    ConfigMap,
}

/// The `kind` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabel {
    /// Which watch.
    pub kind: Kind,
}

/// The `kind` and `field` labels of `kube2sky_skipped_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SkippedLabels {
    /// Which watch received the object.
    pub kind: Kind,
    /// Which field could not become records.
    pub field: crate::validate::Field,
}

/// What became of a version of kube-dns's ConfigMap (label values
/// `applied`, `invalid`, as skydns's `config_reloads_total`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum ConfigMapResult {
    /// Valid and handed to the writer (also its deletion).
    Applied,
    /// Malformed: the last good configuration stays.
    Invalid,
}

impl EncodeLabelValue for ConfigMapResult {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        encoder.write_str(match self {
            ConfigMapResult::Applied => "applied",
            ConfigMapResult::Invalid => "invalid",
        })
    }
}

/// The `result` label of `kube2sky_config_map_updates_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ConfigMapLabel {
    /// What became of it.
    pub result: ConfigMapResult,
}

/// Everything kube2sky counts, plus health and readiness state.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    /// Keys put into etcd.
    pub records_written: Counter,
    /// Keys deleted from etcd.
    pub records_deleted: Counter,
    /// Failed etcd requests (each retry counts).
    pub etcd_errors: Counter,
    /// Times etcd was found to have lost our records.
    pub etcd_data_losses: Counter,
    /// Data-loss checks made (`--etcd-loss-check-interval`), whatever they found.
    pub etcd_data_loss_checks: Counter,
    /// Watch errors after which the watcher re-watched or re-listed.
    pub watch_restarts: Family<KindLabel, Counter>,
    /// Objects or parts of objects that could not become records.
    pub skipped: Family<SkippedLabels, Counter>,
    /// Versions of kube-dns's ConfigMap applied or refused.
    pub config_map_updates: Family<ConfigMapLabel, Counter>,
    ready: AtomicBool,
    /// `/readiness` as a series, for alerts.
    ready_gauge: Gauge,
    /// 1 while this replica watches and writes (always, without
    /// `--leader-elect`), 0 while it stands by.
    leader: Gauge,
    last_sync_age: Gauge<f64, AtomicU64>,
    last_full_sync: Mutex<Option<Instant>>,
    watch_errors: [AtomicU32; 5],
    etcd_ok: AtomicBool,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("kube2sky");
        let m = Metrics {
            records_written: Counter::default(),
            records_deleted: Counter::default(),
            etcd_errors: Counter::default(),
            etcd_data_losses: Counter::default(),
            etcd_data_loss_checks: Counter::default(),
            watch_restarts: Family::default(),
            skipped: Family::default(),
            config_map_updates: Family::default(),
            ready: AtomicBool::new(false),
            ready_gauge: Gauge::default(),
            leader: Gauge::default(),
            last_sync_age: Gauge::default(),
            last_full_sync: Mutex::new(None),
            watch_errors: [const { AtomicU32::new(0) }; 5],
            etcd_ok: AtomicBool::new(true),
            registry: Registry::default(),
        };
        registry.register(
            "records_written",
            "etcd keys written",
            m.records_written.clone(),
        );
        registry.register(
            "records_deleted",
            "etcd keys deleted",
            m.records_deleted.clone(),
        );
        registry.register("etcd_errors", "failed etcd requests", m.etcd_errors.clone());
        registry.register(
            "etcd_data_losses",
            "times etcd lost kube2sky's records",
            m.etcd_data_losses.clone(),
        );
        registry.register(
            "etcd_data_loss_checks",
            "data-loss checks of etcd made, whatever they found",
            m.etcd_data_loss_checks.clone(),
        );
        registry.register(
            "watch_restarts",
            "watch errors followed by a re-watch or re-list",
            m.watch_restarts.clone(),
        );
        registry.register(
            "skipped",
            "objects (field name or namespace) or parts of objects (other fields) that could not become records",
            m.skipped.clone(),
        );
        registry.register(
            "config_map_updates",
            "versions of --config-map applied (its deletion too) or refused as malformed",
            m.config_map_updates.clone(),
        );
        registry.register(
            "ready",
            "1 once /readiness is open: the first services and endpoints are written",
            m.ready_gauge.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica watches and writes (always without --leader-elect), 0 while it stands by",
            m.leader.clone(),
        );
        registry.register(
            "last_sync_age_seconds",
            "seconds since the last complete reconcile (-1: none yet)",
            m.last_sync_age.clone(),
        );
        // At 0 from the start: an increase() over them sees the first one.
        for result in [ConfigMapResult::Applied, ConfigMapResult::Invalid] {
            let _ = m
                .config_map_updates
                .get_or_create(&ConfigMapLabel { result });
        }
        Metrics { registry, ..m }
    }
}

impl Metrics {
    /// Opens `/readiness`: the first lists of services and endpoints are
    /// written (or `--initial-sync-timeout` passed). Returns whether it was
    /// closed before.
    pub(crate) fn set_ready(&self) -> bool {
        self.ready_gauge.set(1);
        !self.ready.swap(true, Ordering::Relaxed)
    }

    /// Marks this replica the writer (`true`) or a standby.
    pub(crate) fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// Whether `/readiness` is open.
    pub(crate) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Notes a complete reconcile of everything owned.
    pub(crate) fn full_sync_done(&self) {
        if let Ok(mut last) = self.last_full_sync.lock() {
            *last = Some(Instant::now());
        }
    }

    /// Marks a watch healthy (it delivered an event) or failing once more.
    pub(crate) fn set_watch_ok(&self, kind: Kind, ok: bool) {
        let errors = &self.watch_errors[kind as usize];
        if ok {
            errors.store(0, Ordering::Relaxed);
        } else {
            errors.fetch_add(1, Ordering::Relaxed);
            self.watch_restarts.get_or_create(&KindLabel { kind }).inc();
        }
    }

    /// Marks etcd writable or not.
    pub(crate) fn set_etcd_ok(&self, ok: bool) {
        self.etcd_ok.store(ok, Ordering::Relaxed);
        if !ok {
            self.etcd_errors.inc();
        }
    }

    /// `None` when alive, otherwise why not.
    pub(crate) fn unhealthy(&self) -> Option<String> {
        let mut problems = Vec::new();
        for kind in [
            Kind::Services,
            Kind::Endpoints,
            Kind::Pods,
            Kind::EndpointSlices,
        ] {
            let errors = self.watch_errors[kind as usize].load(Ordering::Relaxed);
            if errors >= UNHEALTHY_WATCH_ERRORS {
                problems.push(format!("{kind:?} watch failing ({errors} errors in a row)"));
            }
        }
        if !self.etcd_ok.load(Ordering::Relaxed) {
            problems.push("etcd not writable".to_string());
        }
        (!problems.is_empty()).then(|| problems.join(", "))
    }

    /// The Prometheus text exposition.
    pub(crate) fn encode(&self) -> Result<String, std::fmt::Error> {
        let age = match self.last_full_sync.lock().ok().and_then(|l| *l) {
            Some(at) => at.elapsed().as_secs_f64(),
            None => -1.0,
        };
        self.last_sync_age.set(age);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_text_has_every_series() {
        let m = Metrics::default();
        m.records_written.inc();
        for _ in 0..UNHEALTHY_WATCH_ERRORS {
            m.set_watch_ok(Kind::Pods, false);
        }
        m.full_sync_done();
        let text = m.encode().expect("encode");
        assert!(text.contains("kube2sky_records_written_total 1"), "{text}");
        assert!(
            text.contains(r#"kube2sky_watch_restarts_total{kind="Pods"} 5"#),
            "{text}"
        );
        assert!(text.contains("kube2sky_last_sync_age_seconds "), "{text}");
        assert!(
            !text.contains("kube2sky_last_sync_age_seconds -1"),
            "{text}"
        );
        assert!(text.contains("kube2sky_etcd_errors_total 0"), "{text}");
        assert!(text.contains("kube2sky_ready 0"), "{text}");
        for result in ["applied", "invalid"] {
            let line = format!("kube2sky_config_map_updates_total{{result=\"{result}\"}} 0");
            assert!(text.contains(&line), "{line} in {text}");
        }
        m.set_ready();
        m.set_leader(true);
        let text = m.encode().expect("encode");
        assert!(text.contains("kube2sky_ready 1"), "{text}");
        assert!(text.contains("kube2sky_leader 1"), "{text}");
        let refused = ConfigMapLabel {
            result: ConfigMapResult::Invalid,
        };
        m.config_map_updates.get_or_create(&refused).inc();
        let text = m.encode().expect("encode");
        assert!(
            text.contains(r#"kube2sky_config_map_updates_total{result="invalid"} 1"#),
            "{text}"
        );
        assert_eq!(
            m.unhealthy().as_deref(),
            Some("Pods watch failing (5 errors in a row)")
        );
        m.set_watch_ok(Kind::Pods, true);
        assert_eq!(m.unhealthy(), None);
    }
}
