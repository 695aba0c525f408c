//! The etcd writer: the only code that talks to etcd.
//!
//! [`Writer::connect`] waits for etcd the way 1.2 did (12 attempts, 5 s
//! apart, logged). [`Writer::sync`] reconciles [`Scope`]s: read the scope's
//! actual keys, diff against the index's desired records, apply each batch
//! as one v3 transaction. A failed scope is retried as a whole every 50 ms;
//! after `--etcd-mutation-timeout` it becomes a [`WriteError::Timeout`]
//! naming the key, and the process exits (1.2 behaviour, so the kubelet
//! restarts it). [`Writer::data_lost`] detects an etcd that came back empty
//! or older: kube2sky keeps a marker key outside `/skydns` and remembers the
//! highest revision it saw; a missing marker or a lower revision means every
//! record must be rewritten.

use crate::index::{Index, Read, Scope};
use crate::metrics::Metrics;
use crate::reconcile::{diff, Mode, Op};
use crate::records::{Names, Records};
use etcd_client::{Client, GetOptions, Txn, TxnOp};
use skydns::store::etcd::EtcdOptions;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Pause between two attempts of one mutation (1.2: 50 ms).
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// Upper bound on one attempt, so a hung request cannot stall the retry loop.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);

/// Why the writer gave up.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
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
pub struct WriterOptions {
    /// Connection settings.
    pub etcd: EtcdOptions,
    /// `--etcd-mutation-timeout`.
    pub mutation_timeout: Duration,
    /// Reconcile (default) or 1.2's remove-then-add.
    pub mode: Mode,
    /// Whether PTR keys are ours to read and write.
    pub reverse: bool,
    /// Start-up connection attempts and the pause between them (1.2: 12 × 5 s).
    pub connect_attempts: (u32, Duration),
}

/// Owns the etcd connection; see the module docs.
pub struct Writer {
    options: WriterOptions,
    client: Option<Client>,
    names: Names,
    metrics: Arc<Metrics>,
    marker: String,
    last_revision: i64,
}

impl Writer {
    /// Waits for etcd, then writes the data-loss marker.
    pub async fn connect(
        options: WriterOptions,
        names: Names,
        metrics: Arc<Metrics>,
    ) -> Result<Self, WriteError> {
        let marker = format!("/kube2sky/{}/marker", names.domain().trim_end_matches('.'));
        let mut writer = Writer {
            options,
            client: None,
            names,
            metrics,
            marker,
            last_revision: 0,
        };
        let endpoints = writer.options.etcd.endpoints.join(",");
        let (attempts, pause) = writer.options.connect_attempts;
        let mut last_error = String::new();
        for attempt in 1..=attempts.max(1) {
            match tokio::time::timeout(ATTEMPT_TIMEOUT, writer.put_marker()).await {
                Ok(Ok(())) => {
                    tracing::info!("Etcd server found: {endpoints}");
                    return Ok(writer);
                }
                Ok(Err(e)) => last_error = e,
                Err(_) => last_error = format!("timed out after {ATTEMPT_TIMEOUT:?}"),
            }
            writer.client = None;
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

    async fn client(&mut self) -> Result<&mut Client, String> {
        if self.client.is_none() {
            self.client = Some(
                self.options
                    .etcd
                    .connect()
                    .await
                    .map_err(|e| e.to_string())?,
            );
        }
        self.client
            .as_mut()
            .ok_or_else(|| "no etcd client".to_string())
    }

    fn saw(&mut self, header: Option<&etcd_client::ResponseHeader>) {
        if let Some(h) = header {
            self.last_revision = self.last_revision.max(h.revision());
        }
    }

    async fn put_marker(&mut self) -> Result<(), String> {
        let marker = self.marker.clone();
        let resp = self
            .client()
            .await?
            .put(marker, "kube2sky", None)
            .await
            .map_err(|e| e.to_string())?;
        self.saw(resp.header());
        Ok(())
    }

    /// Reconciles `scopes` (deduplicated; full scopes absorb their parts).
    pub async fn sync(
        &mut self,
        index: &Index,
        scopes: impl IntoIterator<Item = Scope>,
    ) -> Result<(), WriteError> {
        let mut scopes: BTreeSet<Scope> = scopes.into_iter().collect();
        if scopes.contains(&Scope::AllServices) {
            scopes.retain(|s| !matches!(s, Scope::Service(_) | Scope::Ptr(_)));
        }
        if scopes.contains(&Scope::AllPods) {
            scopes.retain(|s| !matches!(s, Scope::PodDir { .. }));
        }
        for scope in &scopes {
            self.sync_with_retry(index, scope).await?;
            if *scope == Scope::AllServices {
                self.metrics.full_sync_done();
            }
        }
        Ok(())
    }

    async fn sync_with_retry(&mut self, index: &Index, scope: &Scope) -> Result<(), WriteError> {
        let start = Instant::now();
        loop {
            let error =
                match tokio::time::timeout(ATTEMPT_TIMEOUT, self.sync_scope(index, scope)).await {
                    Ok(Ok(())) => {
                        self.metrics.set_etcd_ok(true);
                        return Ok(());
                    }
                    Ok(Err(e)) => e,
                    Err(_) => format!("timed out after {ATTEMPT_TIMEOUT:?}"),
                };
            self.metrics.set_etcd_ok(false);
            self.client = None;
            let key = scope.describe(&self.names);
            if start.elapsed() >= self.options.mutation_timeout {
                return Err(WriteError::Timeout {
                    timeout: self.options.mutation_timeout,
                    key,
                    error,
                });
            }
            tracing::debug!("Failed to mutate etcd using mutator: sync {key} due to: {error}. Will retry in: 50ms");
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    async fn sync_scope(&mut self, index: &Index, scope: &Scope) -> Result<(), String> {
        let actual = self
            .read(&scope.reads(&self.names, self.options.reverse))
            .await?;
        let desired = index.desired(scope);
        for batch in diff(&desired, &actual, self.options.mode) {
            self.apply(batch).await?;
        }
        Ok(())
    }

    async fn read(&mut self, reads: &[Read]) -> Result<Records, String> {
        let mut out = Records::new();
        for read in reads {
            let (key, options, ptr) = match read {
                Read::Prefix(p) => (p, Some(GetOptions::new().with_prefix()), false),
                Read::OwnedPtrs(p) => (p, Some(GetOptions::new().with_prefix()), true),
                Read::OwnedPtr(k) => (k, None, true),
            };
            let resp = self
                .client()
                .await?
                .get(key.as_str(), options)
                .await
                .map_err(|e| e.to_string())?;
            self.saw(resp.header());
            for kv in resp.kvs() {
                let (Ok(k), Ok(v)) = (kv.key_str(), kv.value_str()) else {
                    continue;
                };
                if !ptr || self.names.owns_ptr_value(v) {
                    out.insert(k.to_string(), v.to_string());
                }
            }
        }
        Ok(out)
    }

    async fn apply(&mut self, batch: Vec<Op>) -> Result<(), String> {
        let (mut puts, mut deletes) = (0u64, 0u64);
        let ops: Vec<TxnOp> = batch
            .iter()
            .map(|op| match op {
                Op::Put { key, value } => {
                    tracing::debug!("Setting DNS record: {key} -> {value:?}");
                    puts += 1;
                    TxnOp::put(key.as_str(), value.as_str(), None)
                }
                Op::Delete { key } => {
                    tracing::debug!("Removing {key} from DNS");
                    deletes += 1;
                    TxnOp::delete(key.as_str(), None)
                }
            })
            .collect();
        let resp = self
            .client()
            .await?
            .txn(Txn::new().and_then(ops))
            .await
            .map_err(|e| e.to_string())?;
        self.saw(resp.header());
        self.metrics.records_written.inc_by(puts);
        self.metrics.records_deleted.inc_by(deletes);
        Ok(())
    }

    /// Whether etcd lost our data since the last check (marker gone or
    /// revision lower than seen). Rewrites the marker when it did. Errors
    /// count as "not lost": the next mutation will retry or exit.
    pub async fn data_lost(&mut self) -> bool {
        let seen = self.last_revision;
        let marker = self.marker.clone();
        let check = async {
            let resp = self
                .client()
                .await?
                .get(marker, None)
                .await
                .map_err(|e| e.to_string())?;
            let revision = resp.header().map_or(0, |h| h.revision());
            Ok::<_, String>((resp.kvs().is_empty(), revision))
        };
        let (missing, revision) = match tokio::time::timeout(ATTEMPT_TIMEOUT, check).await {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => {
                tracing::warn!(%error, "etcd data-loss check failed");
                self.metrics.set_etcd_ok(false);
                self.client = None;
                return false;
            }
            Err(_) => {
                self.client = None;
                return false;
            }
        };
        self.metrics.set_etcd_ok(true);
        if !missing && revision >= seen {
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
