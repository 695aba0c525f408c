//! Where records come from: a store trait and the task that mirrors it.
//!
//! A [`Store`] can do two things: read every key under a prefix at one
//! revision ([`Store::load`]) and stream the changes after a revision
//! ([`Store::watch`]). [`mirror`] turns that into a sequence of immutable
//! [`Snapshot`]s published through a [`SharedSnapshot`]: load, publish, watch
//! and publish one new snapshot per batch of changes; on compaction, a broken
//! watch or a lost connection, load again with backoff. While the store is
//! unreachable the last snapshot stays published, so DNS keeps answering.
//! Values that are not valid records are logged and left out.
//! Implementations: [`etcd::EtcdStore`] (etcd v3) and [`memory::MemoryStore`]
//! (tests).

pub mod etcd;
pub mod memory;

use crate::handler::SharedSnapshot;
use crate::record::Record;
use crate::snapshot::{Change, Snapshot};
use futures::stream::BoxStream;
use futures::StreamExt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A raw key/value pair as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    /// The key, e.g. `/skydns/local/cluster/svc/default/kubernetes/c88f1059`.
    pub key: String,
    /// The raw value (JSON for records).
    pub value: Vec<u8>,
}

/// One change as the store reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawChange {
    /// A key was written.
    Put(KeyValue),
    /// A key was deleted.
    Delete(String),
}

/// Every change of one store revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The revision after these changes.
    pub revision: i64,
    /// The changes.
    pub changes: Vec<RawChange>,
}

/// Why the store could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached or answered with an error.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The revision to watch from has been compacted away.
    #[error("revision {requested} is compacted (oldest kept: {compacted})")]
    Compacted {
        /// The revision asked for.
        requested: i64,
        /// The compaction revision reported by the store.
        compacted: i64,
    },
}

/// Changes after a revision, until the stream ends or fails.
pub type Changes = BoxStream<'static, Result<Batch, StoreError>>;

/// A key/value store holding SkyDNS records.
pub trait Store: Send + 'static {
    /// Every key under `prefix`, and the revision they were read at.
    fn load(
        &mut self,
        prefix: &str,
    ) -> impl Future<Output = Result<(i64, Vec<KeyValue>), StoreError>> + Send;
    /// The changes under `prefix` with revisions above `after`.
    fn watch(
        &mut self,
        prefix: &str,
        after: i64,
    ) -> impl Future<Output = Result<Changes, StoreError>> + Send;
    /// One key's value, if present.
    fn get(
        &mut self,
        key: &str,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, StoreError>> + Send;
}

/// Backoff between reload attempts: 100 ms doubling up to 5 s.
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Mirrors everything under `prefix` into `shared` until `shutdown`.
pub async fn mirror<S: Store>(
    mut store: S,
    prefix: String,
    shared: SharedSnapshot,
    shutdown: CancellationToken,
) {
    let mut backoff = BACKOFF_START;
    loop {
        let result = tokio::select! {
            _ = shutdown.cancelled() => return,
            result = sync_once(&mut store, &prefix, &shared) => result,
        };
        match result {
            Ok(()) => {
                tracing::warn!("store watch ended; reloading");
                backoff = BACKOFF_START;
            }
            Err(error) => {
                tracing::warn!(%error, retry_in = ?backoff, "store sync failed; answering from the last snapshot");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// One load followed by a watch until it ends (`Ok`) or fails.
async fn sync_once<S: Store>(
    store: &mut S,
    prefix: &str,
    shared: &SharedSnapshot,
) -> Result<(), StoreError> {
    let (revision, kvs) = store.load(prefix).await?;
    let records = kvs
        .into_iter()
        .filter_map(|kv| parse(&kv.key, &kv.value).map(|r| (kv.key, r)));
    let snapshot = Snapshot::new(revision, records);
    tracing::info!(
        revision,
        records = snapshot.len(),
        "loaded records from the store"
    );
    let mut current = Arc::new(snapshot);
    shared.store(Some(current.clone()));
    let mut changes = store.watch(prefix, revision).await?;
    while let Some(batch) = changes.next().await {
        let batch = batch?;
        let changes = batch.changes.into_iter().map(|c| match c {
            RawChange::Put(kv) => match parse(&kv.key, &kv.value) {
                Some(record) => Change::Put(kv.key, record),
                None => Change::Delete(kv.key),
            },
            RawChange::Delete(key) => Change::Delete(key),
        });
        current = Arc::new(current.with_changes(batch.revision, changes));
        tracing::debug!(
            revision = batch.revision,
            records = current.len(),
            "applied store changes"
        );
        shared.store(Some(current.clone()));
    }
    Ok(())
}

/// Parses one value; a bad one is logged and left out (the rest still serve).
fn parse(key: &str, value: &[u8]) -> Option<Record> {
    match Record::from_json(value) {
        Ok(record) => Some(record),
        Err(error) => {
            tracing::warn!(key, %error, "skipping a value that is not a SkyDNS record");
            None
        }
    }
}

#[cfg(test)]
mod tests;
