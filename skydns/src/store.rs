//! Where records come from: the [`Store`] trait and [`mirror`], the task that
//! turns a store into [`Snapshot`]s published through a [`SharedSnapshot`].
//! Stores: [`etcd::EtcdStore`] (etcd v3), [`v2::EtcdV2Store`] (etcd v2 keys
//! API) and [`memory::MemoryStore`] (tests); [`paths`] reads v2's hidden paths.

pub(crate) mod discover;
pub(crate) mod etcd;
mod flags;
pub(crate) mod member;
#[cfg(test)]
pub(crate) mod memory;
pub(crate) mod paths;
pub(crate) mod v2;

use crate::lifecycle::Status;
use crate::metrics::Metrics;
use crate::snapshot::SharedSnapshot;
use crate::snapshot::{Change, Snapshot};
use futures::stream::BoxStream;
use futures::StreamExt;
use paths::{PathRequests, ReadPaths};
use skydns_msg::record::Record;

pub use flags::Flags;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A raw key/value pair as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    /// The key, e.g. `/skydns/local/cluster/svc/default/kubernetes/c88f1059`.
    pub key: String,
    /// The raw value (JSON for records).
    pub value: Vec<u8>,
    /// Seconds before the key expires, when it has a TTL (etcd v2).
    pub ttl: Option<u32>,
}

impl KeyValue {
    /// A key without a TTL.
    pub fn new(key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        KeyValue {
            key: key.into(),
            value: value.into(),
            ttl: None,
        }
    }
}

/// One change as the store reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RawChange {
    /// A key was written.
    Put(KeyValue),
    /// A key was deleted.
    Delete(String),
    /// A directory was created (etcd v2).
    Dir(String),
    /// A directory was deleted with everything below it (etcd v2).
    DeleteDir(String),
}

/// Everything under a prefix (or one path) at one revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// The revision (etcd v2: `X-Etcd-Index`) of the read.
    pub revision: i64,
    /// The keys.
    pub kvs: Vec<KeyValue>,
    /// Directory nodes, empty ones included; `None` for stores without
    /// directory nodes (etcd v3).
    pub dirs: Option<Vec<String>>,
}

/// Every change of one store revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Batch {
    /// The revision after these changes.
    pub revision: i64,
    /// The changes.
    pub changes: Vec<RawChange>,
}

/// Why the store could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store answers but lacks the API in use; retrying cannot help.
    #[error("{0}")]
    WrongApi(String),
    /// The store could not be reached or answered with an error.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The watch is so far behind the store that reading everything again
    /// is cheaper than catching up one event at a time (etcd v2).
    #[error("the watch is {by} events behind")]
    Behind {
        /// How many events.
        by: i64,
    },
    /// The store is not the one loaded (emptied, restored): its revisions
    /// start again, so everything must be read again.
    #[error("the store was replaced (a new etcd cluster, or its revision went back); reading everything again")]
    Replaced,
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
pub(crate) type Changes = BoxStream<'static, Result<Batch, StoreError>>;

/// A key/value store holding SkyDNS records.
pub(crate) trait Store: Send + 'static {
    /// Every key under `prefix`, and the revision they were read at.
    fn load(&mut self, prefix: &str) -> impl Future<Output = Result<Loaded, StoreError>> + Send;
    /// Every record under `prefix` as a first snapshot. By default a
    /// [`Store::load`] parsed at once; a store that reads in pages parses
    /// each page as it arrives, so the raw values of the whole store are
    /// never held at once.
    fn load_snapshot(
        &mut self,
        prefix: &str,
    ) -> impl Future<Output = Result<Snapshot, StoreError>> + Send {
        async move { Ok(snapshot_of(self.load(prefix).await?)) }
    }
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
    /// Whether listings and watches leave out hidden (`_`) nodes, which
    /// must then be read with [`Store::read_path`] (etcd v2).
    fn hides_underscore(&self) -> bool {
        false
    }
    /// One path and what is visible below it; `None` when it is absent.
    fn read_path(
        &mut self,
        _path: &str,
    ) -> impl Future<Output = Result<Option<Loaded>, StoreError>> + Send {
        async { Ok(None) }
    }
    /// Several paths, as [`Store::read_path`] reads each.
    fn read_paths(
        &mut self,
        paths: &[String],
    ) -> impl Future<Output = Result<Vec<Option<Loaded>>, StoreError>> + Send {
        async move {
            let mut out = Vec::with_capacity(paths.len());
            for path in paths {
                out.push(self.read_path(path).await?);
            }
            Ok(out)
        }
    }
    /// Drops the connection after a watch broke, so the next request
    /// reconnects (to the next member of a cluster).
    fn forget_connection(&mut self) {}
    /// Whether the store is still the one the last load read (etcd v3: the
    /// same cluster ID, at `revision` or later), so a broken watch can go on
    /// from `revision`.
    fn same_store(
        &mut self,
        _revision: i64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        async { Ok(true) }
    }
    /// The store's current revision, without reading any key.
    fn current_revision(&mut self) -> impl Future<Output = Result<i64, StoreError>> + Send {
        async { Ok(0) }
    }
}

/// Backoff between reload attempts: 100 ms doubling up to 5 s.
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// The longest pause before a reload after the watch fell behind.
const RELOAD_PAUSE_MAX: Duration = Duration::from_secs(1);

/// Where the mirror reports how reading the store goes: failures are
/// counted in `metrics`; loads and failures move `status` (readiness).
#[derive(Clone)]
pub(crate) struct MirrorReports {
    /// Counts failed reads.
    pub metrics: Arc<Metrics>,
    /// Loaded at the first snapshot; out of reach from a failure to the
    /// next load.
    pub status: Arc<Status>,
    /// Where the value of the config key goes, read at every load and
    /// followed in the watch (`None`: not followed).
    pub config: Option<ConfigFeed>,
}

/// The value of the etcd config key (`None`: absent), as the mirror sees it.
#[derive(Clone, Debug)]
pub(crate) struct ConfigFeed {
    /// The key, `/<prefix>/config`.
    pub key: String,
    /// The latest value; only changes wake the receivers.
    pub value: tokio::sync::watch::Sender<Option<Vec<u8>>>,
}

impl ConfigFeed {
    fn publish(&self, value: Option<Vec<u8>>) {
        self.value.send_if_modified(|current| {
            let changed = *current != value;
            *current = value;
            changed
        });
    }

    /// What `changes` do to the key, if they touch it.
    fn note(&self, changes: &[RawChange]) {
        for change in changes {
            match change {
                RawChange::Put(kv) if kv.key == self.key => self.publish(Some(kv.value.clone())),
                RawChange::Delete(key) if *key == self.key => self.publish(None),
                RawChange::DeleteDir(dir)
                    if self
                        .key
                        .strip_prefix(dir.trim_end_matches('/'))
                        .is_some_and(|rest| rest.starts_with('/')) =>
                {
                    self.publish(None);
                }
                _ => {}
            }
        }
    }
}

/// Mirrors everything under `prefix` into `shared` until `shutdown`.
/// `requests` carries the hidden paths queries ask for (v2 stores only).
pub(crate) async fn mirror<S: Store>(
    mut store: S,
    prefix: String,
    shared: SharedSnapshot,
    mut requests: PathRequests,
    reports: MirrorReports,
    shutdown: CancellationToken,
) {
    let mut backoff = BACKOFF_START;
    loop {
        let sync = sync_once(
            &mut store,
            &prefix,
            &shared,
            &mut requests,
            &mut backoff,
            &reports,
        );
        let result = tokio::select! {
            _ = shutdown.cancelled() => return,
            result = sync => result,
        };
        match result {
            Ok(never) => match never {},
            Err(StoreError::Behind { by }) => {
                tracing::debug!(by, "the watch fell behind; reloading");
                backoff = BACKOFF_START;
            }
            Err(error) => {
                reports.metrics.store_error();
                reports.status.store_failed();
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

/// One load followed by a watch (made again when it breaks) until it fails
/// in a way that needs a new load; a load that succeeds resets `backoff`.
/// A watch that fell behind ends it only after a pause as long as the load
/// took (at most [`RELOAD_PAUSE_MAX`]), during which hidden paths are
/// still read: in a burst of writes (kube2sky's initial sync on v2)
/// reloads back to back would keep etcd answering them instead of taking
/// the writes. The burst's last write is then read within the pause and
/// two loads.
async fn sync_once<S: Store>(
    store: &mut S,
    prefix: &str,
    shared: &SharedSnapshot,
    requests: &mut PathRequests,
    backoff: &mut Duration,
    reports: &MirrorReports,
) -> Result<std::convert::Infallible, StoreError> {
    let status = &reports.status;
    let started = tokio::time::Instant::now();
    let mut loaded = store.load_snapshot(prefix).await?;
    let load_time = started.elapsed();
    *backoff = BACKOFF_START;
    if let Some(feed) = &reports.config {
        // Read after the records: a change in between is in the watch too
        // (replayed from the load's revision, so the value may step back
        // and forward again before the watch catches up). A failed read
        // leaves the value in force; the watch reports later changes.
        match store.get(&feed.key).await {
            Ok(value) => feed.publish(value),
            Err(error) => {
                tracing::warn!(key = %feed.key, %error, "cannot read the config key; keeping the configuration in force")
            }
        }
    }
    let revision = loaded.revision();
    let mut read_paths = ReadPaths::default();
    if let Some(previous) = shared.load_full() {
        // Hidden paths read before the reload are read again.
        let paths: Vec<String> = previous.read_paths().map(str::to_string).collect();
        loaded = read_paths.refresh(store, loaded, paths).await?;
    }
    let mut current = Arc::new(loaded);
    tracing::info!(
        revision,
        records = current.len(),
        "loaded records from the store"
    );
    shared.store(Some(current.clone()));
    reports.metrics.records(current.len());
    status.store_loaded();
    let mut changes = store.watch(prefix, revision).await?;
    let mut revision = revision;
    let mut resumed: Option<Instant> = None;
    let mut ticker = tokio::time::interval(paths::REFRESH_PERIOD);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let hides = store.hides_underscore();
    // Set when the watch fell behind: by how much, and when to reload.
    let mut behind: Option<(i64, tokio::time::Instant)> = None;
    loop {
        let reload_at = behind.map_or_else(tokio::time::Instant::now, |(_, at)| at);
        tokio::select! {
            biased;
            _ = tokio::time::sleep_until(reload_at), if behind.is_some() => {
                let by = behind.map_or(0, |(by, _)| by);
                return Err(StoreError::Behind { by });
            }
            batch = changes.next(), if behind.is_none() => {
                let batch = match batch {
                    Some(Ok(batch)) => batch,
                    Some(Err(StoreError::Behind { by })) => {
                        let pause = load_time.min(RELOAD_PAUSE_MAX);
                        tracing::debug!(by, ?pause, "the watch fell behind; pausing before the reload");
                        behind = Some((by, tokio::time::Instant::now() + pause));
                        continue;
                    }
                    Some(Err(StoreError::Unavailable(error))) => {
                        changes = resume(store, prefix, revision, &error, &mut resumed).await?;
                        continue;
                    }
                    Some(Err(error)) => return Err(error),
                    None => {
                        changes = resume(store, prefix, revision, "the watch ended", &mut resumed).await?;
                        continue;
                    }
                };
                revision = batch.revision;
                if batch.changes.is_empty() {
                    continue; // progress: every change up to `revision` was seen
                }
                // The breakdown of propagation (docs/testing.md) reads these two.
                tracing::debug!(target: "skydns::timing", revision, changes = batch.changes.len(), "watch batch received");
                read_paths.note_batch(&batch);
                if let Some(feed) = &reports.config {
                    feed.note(&batch.changes);
                }
                current = Arc::new(current.with_changes(batch.revision, to_changes(batch.changes)));
                tracing::debug!(revision = batch.revision, records = current.len(), "applied store changes");
            }
            request = requests.next(), if hides => {
                let Some((path, done)) = request else { continue };
                let (outcome, next) = read_paths.read(store, &current, path).await;
                if let Some(next) = next {
                    current = Arc::new(next);
                    shared.store(Some(current.clone()));
                    reports.metrics.records(current.len());
                }
                // Only now: the asker reads the snapshot as soon as it hears.
                let _ = done.send(outcome);
                continue;
            }
            _ = ticker.tick(), if hides && current.read_paths().next().is_some() => {
                match read_paths.refresh_if_changed(store, &current).await? {
                    Some(next) => current = Arc::new(next),
                    None => continue,
                }
            }
        }
        shared.store(Some(current.clone()));
        tracing::debug!(target: "skydns::timing", revision = current.revision(), "snapshot swapped");
        reports.metrics.records(current.len());
    }
}

/// How soon after one resume of a broken watch another is refused (the
/// mirror reloads everything instead, with its backoff).
const RESUME_AGAIN_AFTER: Duration = Duration::from_secs(1);
/// Pauses between attempts to make the watch again while the store is
/// unavailable (an election in progress): 0.1 s doubling, 3.1 s in all.
const RESUME_ATTEMPTS: u32 = 6;

/// A new watch after `revision`, once a watch broke with `error` (a member
/// died, a connection dropped): the changes since are not lost, so nothing
/// needs reading again. The store is asked again while it is unavailable
/// (the other members may be electing a leader), [`RESUME_ATTEMPTS`] times;
/// a watch that breaks again within [`RESUME_AGAIN_AFTER`], or cannot be
/// made, is the error.
async fn resume<S: Store>(
    store: &mut S,
    prefix: &str,
    revision: i64,
    error: &str,
    resumed: &mut Option<Instant>,
) -> Result<Changes, StoreError> {
    if resumed.is_some_and(|at| at.elapsed() < RESUME_AGAIN_AFTER) {
        return Err(StoreError::Unavailable(error.to_string()));
    }
    tracing::warn!(%error, revision, "store watch broke; watching again after its last revision");
    let mut pause = BACKOFF_START;
    let mut attempt = 1;
    loop {
        store.forget_connection();
        let watch = async {
            if !store.same_store(revision).await? {
                return Err(StoreError::Replaced);
            }
            store.watch(prefix, revision).await
        };
        match watch.await {
            Err(StoreError::Unavailable(e)) if attempt < RESUME_ATTEMPTS => {
                tracing::debug!(error = %e, attempt, "the watch cannot be made yet");
                tokio::time::sleep(pause).await;
                pause *= 2;
                attempt += 1;
            }
            other => {
                *resumed = Some(Instant::now());
                return other;
            }
        }
    }
}

/// The first snapshot of a load: v3 without, v2 with directory nodes.
fn snapshot_of(loaded: Loaded) -> Snapshot {
    let records = parse_page(loaded.kvs);
    match loaded.dirs {
        Some(dirs) => Snapshot::with_dirs(loaded.revision, records, dirs),
        None => Snapshot::new(loaded.revision, records),
    }
}

/// Store changes as snapshot changes; an unparsable value deletes the key.
fn to_changes(changes: Vec<RawChange>) -> impl Iterator<Item = Change> {
    changes.into_iter().map(|c| match c {
        RawChange::Put(kv) => match parse_kv(&kv) {
            Some(record) => Change::Put(kv.key, record),
            None => Change::Delete(kv.key),
        },
        RawChange::Delete(key) => Change::Delete(key),
        RawChange::Dir(dir) => Change::Dir(dir),
        RawChange::DeleteDir(dir) => Change::DeleteDir(dir),
    })
}

/// The records of a page of keys; values that are not records are left out
/// (and logged).
fn parse_page(kvs: Vec<KeyValue>) -> impl Iterator<Item = (String, Record)> {
    kvs.into_iter()
        .filter_map(|kv| parse_kv(&kv).map(|r| (kv.key, r)))
}

/// Parses a stored key: the record, its TTL lowered to the node's TTL when
/// the key has one (SkyDNS: the smaller of the two, ignoring zeros).
fn parse_kv(kv: &KeyValue) -> Option<Record> {
    let mut record = parse(&kv.key, &kv.value)?;
    if let Some(ttl) = kv.ttl.filter(|t| *t > 0) {
        record.ttl = match record.ttl {
            0 => ttl,
            own => own.min(ttl),
        };
    }
    Some(record)
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
