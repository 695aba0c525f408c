//! The etcd writer, the only code that talks to etcd: [`Writer::connect`] waits
//! for etcd as 1.2 did, [`Writer::sync`] reconciles [`Scope`]s (read the actual
//! keys, diff, apply in transactions of bounded size), and
//! [`Writer::data_lost`] detects an etcd that came back empty or older. A
//! mutation that times out ends the process, as in 1.2.

use crate::config::EtcdApi;
use crate::kube_dns_config::upstream_records;
use crate::metrics::Metrics;
use crate::reconcile::{diff, diff_unbounded, skip_foreign, Mode, Op};
use crate::records::{Names, Records};
use crate::scope::{DesiredState, Scope};
pub(crate) use attempt::EtcdError;
use backend::Backend;
use chunks::{PendingChunk, PlannedChunk};
use etcd_access::EtcdOptions;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use txn_limit::TxnLimit;

mod attempt;
mod backend;
mod chunks;
mod txn_limit;
mod v2;
mod v3;

/// Pause between two attempts of one mutation (1.2: 50 ms).
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Why the writer gave up.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The connection settings cannot be used (e.g. an unreadable certificate).
    #[error("{0}")]
    Config(String),
    /// etcd answers, but not with the API `--etcd-api` chose.
    #[error("{0}")]
    WrongApi(String),
    /// etcd never answered at start-up.
    #[error("Failed to create etcd client - failed to connect to etcd server: {endpoints}, error: {error}")]
    Connect {
        /// The `--etcd-server` endpoints.
        endpoints: String,
        /// The last error.
        error: String,
    },
    /// A mutation kept failing for `--etcd-mutation-timeout`.
    #[error("Failed to mutate etcd for {timeout:?} using mutator: sync {key} due to: {error}")]
    Timeout {
        /// The mutation timeout.
        timeout: Duration,
        /// The key or key prefix being written.
        key: String,
        /// The last error.
        error: String,
    },
}

/// How the writer behaves.
#[derive(Clone, Debug)]
pub(crate) struct WriterOptions {
    /// Connection settings.
    pub etcd: EtcdOptions,
    /// Which API to write through.
    pub api: EtcdApi,
    /// `--etcd-mutation-timeout`.
    pub mutation_timeout: Duration,
    /// Reconcile (default) or 1.2's remove-then-add.
    pub mode: Mode,
    /// Whether PTR keys are ours to read and write.
    pub reverse: bool,
    /// Start-up connection attempts and the pause between them (1.2: 12 × 5 s).
    pub connect_attempts: (u32, Duration),
    /// Operations per v3 transaction at most (`--etcd-max-txn-ops`).
    pub max_txn_ops: usize,
    /// How long a lowered transaction size is kept (`--etcd-max-txn-ops-retry`).
    pub txn_limit_retry: Duration,
    /// Pods or services per chunk of a full sync on etcd v3 (`--full-sync-chunk`).
    pub sync_chunk: usize,
}

/// Owns the etcd connection; see the module docs.
pub(crate) struct Writer {
    options: WriterOptions,
    backend: Backend,
    names: Names,
    metrics: Arc<Metrics>,
    marker: String,
    last_revision: i64,
    /// When a transaction last succeeded; a scope's mutation timeout counts
    /// from here or from the scope's first attempt, whichever is later.
    last_progress: Instant,
    /// Operations per transaction: `--etcd-max-txn-ops`, halved each time
    /// etcd refuses a transaction as too large, for a while.
    txn_limit: TxnLimit,
    /// The full sync's chunk whose transactions etcd is applying while
    /// the writer plans the next one (`chunks`).
    pending: Option<PendingChunk>,
    /// The full sync's next chunk, planned while `pending` is applied.
    planned: Option<PlannedChunk>,
    shutdown: CancellationToken,
}

impl Writer {
    /// Waits for etcd, then writes the data-loss marker.
    pub(crate) async fn connect(
        options: WriterOptions,
        names: Names,
        metrics: Arc<Metrics>,
        shutdown: CancellationToken,
    ) -> Result<Self, WriteError> {
        let marker = format!("/kube2sky/{}/marker", names.domain().trim_end_matches('.'));
        let backend = match options.api {
            EtcdApi::V3 => Backend::V3(Box::new(v3::V3::new(
                options.etcd.clone(),
                names.clone(),
                shutdown.clone(),
            ))),
            EtcdApi::V2 => {
                let client = etcd_access::v2::Client::new(&options.etcd)
                    .map_err(|e| WriteError::Config(e.to_string()))?;
                Backend::V2(Box::new(v2::V2::new(
                    client,
                    names.clone(),
                    shutdown.clone(),
                )))
            }
        };
        let txn_limit = TxnLimit::new(options.max_txn_ops, options.txn_limit_retry);
        let mut writer = Writer {
            txn_limit,
            options,
            backend,
            names,
            metrics,
            marker,
            last_revision: 0,
            last_progress: Instant::now(),
            pending: None,
            planned: None,
            shutdown,
        };
        let endpoints = writer.options.etcd.endpoints.join(",");
        let (attempts, pause) = writer.options.connect_attempts;
        let mut last_error = String::new();
        for attempt in 1..=attempts.max(1) {
            match writer.put_marker().await {
                Ok(()) => {
                    tracing::info!("Etcd server found: {endpoints}");
                    writer.probe_txn_limit().await;
                    return Ok(writer);
                }
                Err(e) if e.is_wrong_api() => {
                    return Err(WriteError::WrongApi(format!(
                        "{e}; or start kube2sky with --etcd-api=v3"
                    )))
                }
                Err(e) => {
                    // 1.2 said why only after the last attempt, a minute
                    // later; an operator fixing a password or a certificate
                    // needs the reason at once.
                    tracing::warn!("cannot write to etcd at {endpoints}: {e}");
                    last_error = e.to_string();
                }
            }
            writer.backend.reset();
            if attempt < attempts {
                tracing::info!(
                    "[Attempt: {attempt}] Attempting access to etcd after {} second sleep",
                    pause.as_secs()
                );
                tokio::time::sleep(pause).await;
            }
        }
        Err(WriteError::Connect {
            endpoints,
            error: last_error,
        })
    }

    /// Finds how many operations etcd takes in a transaction before they
    /// are written: read-only transactions of the size in force, halved
    /// while etcd refuses them (a default etcd's 128 against the default
    /// 1024: three refused requests of reads, no chunk written twice). At
    /// start, and when `--etcd-max-txn-ops-retry` has passed since a
    /// refusal. An error other than a refusal ends it: the writes meet it.
    async fn probe_txn_limit(&mut self) {
        if !self.backend.has_transactions() {
            return;
        }
        let (mut size, mut refused) = (self.txn_limit.at(Instant::now()), Vec::new());
        while let Ok(false) = self.backend.allows(size, &self.marker).await {
            refused.push(size.to_string());
            match self.txn_limit.lower(size, Instant::now()) {
                Some(smaller) => size = smaller,
                None => break,
            }
        }
        if !refused.is_empty() {
            tracing::warn!(
                "etcd refused read-only transactions of {} \
                 operations: its --max-txn-ops is lower than --etcd-max-txn-ops={}; using {size} {}",
                refused.join(", "),
                self.txn_limit.configured(),
                self.txn_limit.kept_for()
            );
        }
    }

    /// The highest store revision a write or read reported.
    pub(crate) fn last_revision(&self) -> i64 {
        self.last_revision
    }

    fn saw(&mut self, revision: i64) {
        self.last_revision = self.last_revision.max(revision);
    }

    async fn put_marker(&mut self) -> Result<(), EtcdError> {
        let revision = self.backend.put_marker(&self.marker).await?;
        self.saw(revision);
        Ok(())
    }

    /// Reconciles `scopes` (deduplicated) in one round: diffed together,
    /// so a service and its PTR land in one transaction (see
    /// `reconcile::pack`). A whole subtree ([`Scope::AllServices`],
    /// [`Scope::AllPods`]) is written a chunk at a time instead, by
    /// `crate::full_sync` with [`Writer::full_sync_chunks`].
    /// Returns `Ok` early, after the request in flight, once shutdown is
    /// requested.
    pub(crate) async fn sync(
        &mut self,
        state: &impl DesiredState,
        scopes: impl IntoIterator<Item = Scope>,
    ) -> Result<(), WriteError> {
        let scopes: BTreeSet<Scope> = scopes.into_iter().collect();
        if scopes.is_empty() || self.shutdown.is_cancelled() {
            return Ok(());
        }
        // The ConfigMap's keys are replaced in place whatever the mode: a
        // removal first would leave skydns without its config key a moment.
        let (config, records): (Vec<Scope>, Vec<Scope>) =
            scopes.into_iter().partition(Scope::is_kube_dns_config);
        for scopes in [records, config] {
            if !scopes.is_empty() {
                self.sync_with_retry(state, &scopes).await?;
            }
        }
        Ok(())
    }

    /// Whether shutdown was requested: nothing new is written.
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// Retries `scopes` every 50 ms until they are written, shutdown is
    /// requested (`Ok`), or etcd made no progress for the mutation timeout.
    async fn sync_with_retry(
        &mut self,
        state: &impl DesiredState,
        scopes: &[Scope],
    ) -> Result<(), WriteError> {
        let start = Instant::now();
        loop {
            let error = match self.sync_scopes(state, scopes).await {
                Ok(()) => {
                    self.metrics.set_etcd_ok(true);
                    return Ok(());
                }
                Err(e) => e,
            };
            if self.shutdown.is_cancelled() {
                return Ok(());
            }
            self.metrics.set_etcd_ok(false);
            self.backend.reset();
            let key = match scopes {
                [one] => one.describe(&self.names),
                [first, rest @ ..] => {
                    format!(
                        "{} (and {} more scopes)",
                        first.describe(&self.names),
                        rest.len()
                    )
                }
                [] => String::new(),
            };
            if start.max(self.last_progress).elapsed() >= self.options.mutation_timeout {
                return Err(WriteError::Timeout {
                    timeout: self.options.mutation_timeout,
                    key,
                    error: error.to_string(),
                });
            }
            tracing::debug!("Failed to mutate etcd using mutator: sync {key} due to: {error}. Will retry in: 50ms");
            tokio::select! {
                _ = self.shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(RETRY_PAUSE) => {}
            }
        }
    }

    async fn sync_scopes(
        &mut self,
        state: &impl DesiredState,
        scopes: &[Scope],
    ) -> Result<(), EtcdError> {
        let (batches, limit) = self.plan(state, scopes).await?;
        if let Err(error) = self.apply(&batches).await {
            self.refused(&error, limit);
            return Err(error);
        }
        Ok(())
    }

    /// Notes a transaction etcd refused as too large, of batches cut at
    /// `limit` operations ([`TxnLimit`]).
    fn refused(&mut self, error: &EtcdError, limit: usize) {
        if error.is_too_many_ops() {
            self.txn_limit.refused(limit, Instant::now(), error);
        }
    }

    /// The batches that make `scopes` in etcd what `state` desires (the
    /// desired records, the scopes' keys read from etcd, the diff), and
    /// the transaction size they were cut at.
    async fn plan(
        &mut self,
        state: &impl DesiredState,
        scopes: &[Scope],
    ) -> Result<(Vec<Vec<Op>>, usize), EtcdError> {
        if self.txn_limit.retry_due(Instant::now()) {
            self.probe_txn_limit().await;
        }
        let mut desired = Records::new();
        for scope in scopes {
            desired.extend(state.desired(scope));
        }
        let reads: Vec<_> = scopes
            .iter()
            .flat_map(|s| s.reads(&self.names, self.options.reverse))
            .collect();
        let read_start = Instant::now();
        let (actual, revision) = self.backend.read(&reads, &desired).await?;
        tracing::trace!(
            reads = reads.len(),
            keys = actual.records.len(),
            "read the scopes' keys in {:?}",
            read_start.elapsed()
        );
        self.saw(revision);
        if scopes.contains(&Scope::Upstreams) {
            let wanted = state.upstreams();
            desired.extend(upstream_records(&self.names, &actual, wanted));
        }
        for key in skip_foreign(&mut desired, &actual) {
            tracing::warn!("Not writing {key}: it holds a record kube2sky did not write");
        }
        let names = &self.names;
        let mode = match scopes.iter().all(Scope::is_kube_dns_config) {
            true => Mode::Reconcile,
            false => self.options.mode,
        };
        let limit = self.txn_limit.at(Instant::now());
        let batches = if self.backend.has_transactions() {
            let units = names.units();
            let unit = |op: &Op| match op {
                Op::Put { key, value } => units.of(key, Some(value)),
                Op::Delete { key } => units.of(key, actual.records.get(key).map(String::as_str)),
            };
            diff(desired, &actual.records, mode, limit, &unit)
        } else {
            diff_unbounded(desired, &actual.records, mode)
        };
        if self.shutdown.is_cancelled() {
            return Err(EtcdError::ShuttingDown);
        }
        Ok((batches, limit))
    }

    /// Applies `batches`, counting what each wrote as it is done.
    async fn apply(&mut self, batches: &[Vec<Op>]) -> Result<(), EtcdError> {
        let counts = counts_of(batches);
        let (metrics, last_revision, last_progress, txn_limit) = (
            &self.metrics,
            &mut self.last_revision,
            &mut self.last_progress,
            &mut self.txn_limit,
        );
        self.backend
            .apply_all(batches, |i, revision| {
                *last_revision = (*last_revision).max(revision);
                *last_progress = Instant::now();
                txn_limit.accepted(batches[i].len());
                metrics.records_written.inc_by(counts[i].0);
                metrics.records_deleted.inc_by(counts[i].1);
            })
            .await
    }

    /// Whether etcd lost our data since the last check (marker gone or
    /// revision lower than seen). Rewrites the marker when it did. Errors
    /// count as "not lost": the next mutation will retry or exit.
    pub(crate) async fn data_lost(&mut self) -> bool {
        self.metrics.etcd_data_loss_checks.inc();
        let seen = self.last_revision;
        let (missing, revision) = match self.backend.marker(&self.marker).await {
            Ok((present, revision)) => (!present, revision),
            Err(error) => {
                tracing::warn!(%error, "etcd data-loss check failed");
                self.metrics.set_etcd_ok(false);
                self.backend.reset();
                return false;
            }
        };
        self.metrics.set_etcd_ok(true);
        if !lost(missing, revision, seen) {
            self.last_revision = revision;
            return false;
        }
        tracing::warn!(
            missing_marker = missing,
            revision,
            seen,
            "etcd lost kube2sky's records; rewriting all of them"
        );
        self.metrics.etcd_data_losses.inc();
        self.last_revision = 0;
        if let Err(error) = self.put_marker().await {
            tracing::warn!(%error, "cannot rewrite the etcd marker key");
        }
        true
    }
}

/// Whether etcd lost kube2sky's data: the marker key is gone (a wiped
/// store, or the key deleted by hand), or the store's revision is lower
/// than one already seen (a store restored from an older backup, marker
/// included).
fn lost(marker_missing: bool, revision: i64, seen: i64) -> bool {
    marker_missing || revision < seen
}

/// The puts and deletes of each batch, each logged at debug level as 1.2
/// logged them.
fn counts_of(batches: &[Vec<Op>]) -> Vec<(u64, u64)> {
    let mut counts = Vec::with_capacity(batches.len());
    for batch in batches {
        let (mut puts, mut deletes) = (0u64, 0u64);
        for op in batch {
            match op {
                Op::Put { key, value } => {
                    tracing::debug!("Setting DNS record: {key} -> {value:?}");
                    puts += 1;
                }
                Op::Delete { key } => {
                    tracing::debug!("Removing {key} from DNS");
                    deletes += 1;
                }
            }
        }
        counts.push((puts, deletes));
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::lost;

    #[test]
    fn data_loss_is_a_missing_marker_or_a_revision_gone_back() {
        assert!(!lost(false, 10, 10), "nothing happened");
        assert!(!lost(false, 20, 10), "writes happened");
        assert!(lost(true, 20, 10), "marker gone, revision forward");
        assert!(lost(false, 5, 10), "marker there, revision back");
        assert!(lost(true, 5, 10));
    }
}
