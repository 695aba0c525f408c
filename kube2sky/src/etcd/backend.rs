//! The two etcd APIs kube2sky can write through, behind one small enum.
//!
//! [`Backend`] does the raw work of the writer: put and read the data-loss
//! marker, read a scope's actual keys, apply a batch of [`Op`]s. Every call
//! reports the store revision it saw (v3: the header revision; v2:
//! `X-Etcd-Index`) so the writer can tell an etcd that went back in time.
//! Retries, timeouts of the whole mutation and metrics stay in the writer.
//! [`bounded`] is the per-request deadline both backends use.

use super::v2::V2;
use super::v3::V3;
use crate::index::Read;
use crate::reconcile::{Actual, Op};
use crate::records::{Names, Records};
use std::future::Future;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Upper bound on one etcd request, so a hung request cannot stall the retry loop.
pub(super) const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a request in flight may still take once shutdown is requested.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);
/// The error that ends a scope early on shutdown.
pub(super) const SHUTTING_DOWN: &str = "shutting down";

/// Which etcd API the records are written through.
pub(super) enum Backend {
    /// The v3 API: transactions of up to 128 operations.
    V3(Box<V3>),
    /// The v2 keys API: one request per key, many in flight.
    V2(V2),
}

/// Why the marker could not be written.
#[derive(Debug, thiserror::Error)]
pub(super) enum MarkerError {
    /// etcd answers without the chosen API: retrying cannot help.
    #[error("{0}")]
    WrongApi(String),
    /// Anything else (unreachable, timed out, ...): worth another try.
    #[error("{0}")]
    Retry(String),
}

impl Backend {
    /// Whether batches are transactions, limited to `--etcd-max-txn-ops`
    /// operations (v3); v2 has no transactions, so a scope's whole diff is
    /// one batch.
    pub(super) fn has_transactions(&self) -> bool {
        matches!(self, Backend::V3(_))
    }

    /// Writes the marker key; returns the revision seen.
    pub(super) async fn put_marker(&mut self, marker: &str) -> Result<i64, MarkerError> {
        match self {
            Backend::V3(b) => b.put_marker(marker).await,
            Backend::V2(b) => b.put_marker(marker).await,
        }
    }

    /// Whether the marker is present, and the revision seen.
    pub(super) async fn marker(&mut self, marker: &str) -> Result<(bool, i64), String> {
        match self {
            Backend::V3(b) => b.marker(marker).await,
            Backend::V2(b) => b.marker(marker).await,
        }
    }

    /// The actual records of `reads`; `desired` tells the v2 backend which
    /// hidden directories to read (v2 never lists them).
    pub(super) async fn read(
        &mut self,
        reads: &[Read],
        desired: &Records,
    ) -> Result<(Actual, i64), String> {
        match self {
            Backend::V3(b) => b.read(reads).await,
            Backend::V2(b) => b.read(reads, desired).await,
        }
    }

    /// Applies `batches` in order (v3: several transactions in flight),
    /// calling `applied(i, revision)` as each is done; stops at the first
    /// error.
    pub(super) async fn apply_all(
        &mut self,
        batches: &[Vec<Op>],
        mut applied: impl FnMut(usize, i64),
    ) -> Result<(), String> {
        match self {
            Backend::V3(b) => b.apply_all(batches, applied).await,
            Backend::V2(b) => {
                for (i, batch) in batches.iter().enumerate() {
                    applied(i, b.apply(batch).await?);
                }
                Ok(())
            }
        }
    }

    /// Forgets the connection after an error, so the next call reconnects.
    pub(super) fn reset(&mut self) {
        if let Backend::V3(b) = self {
            b.reset();
        }
    }
}

/// Runs `work` under [`ATTEMPT_TIMEOUT`]. Once shutdown is requested it
/// gets [`SHUTDOWN_GRACE`] more to finish.
pub(super) async fn bounded<T, E: std::fmt::Display>(
    shutdown: &CancellationToken,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    bounded_for(ATTEMPT_TIMEOUT, shutdown, work).await
}

/// [`bounded`] with a time limit of `within`.
pub(super) async fn bounded_for<T, E: std::fmt::Display>(
    within: Duration,
    shutdown: &CancellationToken,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    let work = tokio::time::timeout(within, work);
    tokio::pin!(work);
    let outcome = tokio::select! {
        outcome = &mut work => outcome,
        _ = shutdown.cancelled() => {
            match tokio::time::timeout(SHUTDOWN_GRACE, &mut work).await {
                Ok(outcome) => outcome,
                Err(_) => return Err(SHUTTING_DOWN.into()),
            }
        }
    };
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("timed out after {within:?}")),
    }
}

/// Files one key-value read from etcd as ours or foreign. Under the PTR
/// subtree only values naming one of our services are ours.
pub(super) fn file_key(names: &Names, key: &str, value: &str, ptr: bool, out: &mut Actual) {
    let ours = if key == names.dns_version_key() {
        // A hand-written `dns-version` is not ours to delete (or overwrite).
        names.owns_version_value(value)
    } else {
        !ptr || names.owns_ptr_value(value)
    };
    if ours {
        out.records.insert(key.to_string(), value.to_string());
    } else {
        out.foreign.insert(key.to_string());
    }
}
