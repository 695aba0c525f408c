//! The two etcd APIs kube2sky can write through, behind one small enum:
//! [`Backend`] does the raw work of the writer (the data-loss marker, a scope's
//! actual keys, batches of [`Op`]s) and reports the store revision each call
//! saw. Retries, mutation timeouts and metrics stay in the writer.

use super::attempt::EtcdError;
use super::v2::V2;
use super::v3::{Applied, V3};
use crate::reconcile::{Actual, Op};
use crate::records::Records;
use crate::scope::Read;
use tokio::task::JoinHandle;

/// Which etcd API the records are written through.
pub(super) enum Backend {
    /// The v3 API: transactions of up to 128 operations.
    V3(Box<V3>),
    /// The v2 keys API: one request per key, many in flight.
    V2(Box<V2>),
}

impl Backend {
    /// Whether batches are transactions, limited to `--etcd-max-txn-ops`
    /// operations (v3); v2 has no transactions, so a scope's whole diff is
    /// one batch.
    pub(super) fn has_transactions(&self) -> bool {
        matches!(self, Backend::V3(_))
    }

    /// Writes the marker key; returns the revision seen.
    pub(super) async fn put_marker(&mut self, marker: &str) -> Result<i64, EtcdError> {
        match self {
            Backend::V3(b) => b.put_marker(marker).await,
            Backend::V2(b) => b.put_marker(marker).await,
        }
    }

    /// Whether etcd takes a transaction of `ops` operations (v3; v2 has
    /// none, and no limit).
    pub(super) async fn allows(&mut self, ops: usize, key: &str) -> Result<bool, EtcdError> {
        match self {
            Backend::V3(b) => b.allows(ops, key).await,
            Backend::V2(_) => Ok(true),
        }
    }

    /// Whether the marker is present, and the revision seen.
    pub(super) async fn marker(&mut self, marker: &str) -> Result<(bool, i64), EtcdError> {
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
    ) -> Result<(Actual, i64), EtcdError> {
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
    ) -> Result<(), EtcdError> {
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

    /// Starts applying `batches` on a task of its own (v3; `None` on v2,
    /// whose writes the caller then makes in place with
    /// [`Backend::apply_all`]).
    pub(super) async fn start_apply(
        &mut self,
        batches: Vec<Vec<Op>>,
    ) -> Result<Option<JoinHandle<Applied>>, EtcdError> {
        match self {
            Backend::V3(b) => b.start_apply(batches).await.map(Some),
            Backend::V2(_) => Ok(None),
        }
    }

    /// Forgets the connection after an error, so the next call reconnects.
    pub(super) fn reset(&mut self) {
        if let Backend::V3(b) = self {
            b.reset();
        }
    }
}
