//! Hidden paths of an etcd v2 store: read when a query first names them, then
//! kept fresh. etcd v2 never lists or watches nodes whose name starts with `_`,
//! so, as SkyDNS found them by name, the handler sends such a path through a
//! [`PathReader`] and the mirror reads it.

use super::{Batch, Loaded, RawChange, Store, StoreError};
use crate::snapshot::{Change, Snapshot};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Which part of a key is hidden: shared with kube2sky, so it lives with the
/// key paths in skydns-msg.
pub(crate) use skydns_msg::path::hidden_part;

/// How often etcd's index is checked for changes the watch could not see.
pub(crate) const REFRESH_PERIOD: Duration = Duration::from_secs(1);
/// Most hidden paths remembered; past it, new ones are not read.
pub(crate) const MAX_READ_PATHS: usize = 10_000;
/// Requests waiting for the mirror; past it, queries get SERVFAIL.
const QUEUE: usize = 1024;

/// What the mirror did with a requested path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathRead {
    /// The current snapshot holds what is at the path.
    Read,
    /// Nothing is there.
    Absent,
    /// The store could not be read (or too many paths are remembered).
    Failed,
}

type Request = (String, oneshot::Sender<PathRead>);

/// The handler's side: asks the mirror to read a hidden path.
#[derive(Clone, Debug, Default)]
pub struct PathReader {
    tx: Option<mpsc::Sender<Request>>,
}

/// The mirror's side of a [`PathReader`].
#[derive(Debug, Default)]
pub(crate) struct PathRequests {
    rx: Option<mpsc::Receiver<Request>>,
}

/// A connected reader and request queue.
pub(crate) fn channel() -> (PathReader, PathRequests) {
    let (tx, rx) = mpsc::channel(QUEUE);
    (PathReader { tx: Some(tx) }, PathRequests { rx: Some(rx) })
}

impl PathReader {
    /// Whether hidden paths must be read on demand (a v2 store).
    pub fn is_enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Asks for `path` and waits up to `timeout` for the mirror.
    pub async fn read(&self, path: String, timeout: Duration) -> PathRead {
        let Some(tx) = &self.tx else {
            return PathRead::Absent;
        };
        let (done, answer) = oneshot::channel();
        if tx.try_send((path, done)).is_err() {
            return PathRead::Failed;
        }
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(read)) => read,
            _ => PathRead::Failed,
        }
    }
}

impl PathRequests {
    /// The next request; never resolves once every reader is gone.
    pub(super) async fn next(&mut self) -> Option<Request> {
        match &mut self.rx {
            Some(rx) => match rx.recv().await {
                Some(request) => Some(request),
                None => {
                    self.rx = None;
                    std::future::pending().await
                }
            },
            None => std::future::pending().await,
        }
    }
}

/// What the mirror knows about its hidden paths' freshness.
#[derive(Debug, Default)]
pub(super) struct ReadPaths {
    /// The highest revision the watch reported.
    seen: i64,
    /// The store's revision at the last refresh.
    refreshed_at: i64,
    /// A directory above some path was deleted: read them all again.
    stale: bool,
}

impl ReadPaths {
    /// Notes what a watch batch tells about hidden paths.
    pub(super) fn note_batch(&mut self, batch: &Batch) {
        self.seen = self.seen.max(batch.revision);
        if batch
            .changes
            .iter()
            .any(|c| matches!(c, RawChange::DeleteDir(_)))
        {
            self.stale = true;
        }
    }

    /// Reads one requested path: the answer for the asker, and the new
    /// snapshot (`None`: unchanged), which the caller publishes before it
    /// tells the asker.
    pub(super) async fn read<S: Store>(
        &mut self,
        store: &mut S,
        current: &Snapshot,
        path: String,
    ) -> (PathRead, Option<Snapshot>) {
        if current.has_read(&path) {
            return (PathRead::Read, None);
        }
        match store.read_path(&path).await {
            Ok(None) => (PathRead::Absent, None),
            Ok(Some(_)) if current.read_path_count() >= MAX_READ_PATHS => {
                tracing::warn!(%path, limit = MAX_READ_PATHS, "not reading another hidden path: too many");
                (PathRead::Failed, None)
            }
            Ok(Some(loaded)) => {
                tracing::debug!(%path, keys = loaded.kvs.len(), "read a hidden path");
                let change = read_change(path, loaded);
                let next = current.with_changes(current.revision(), [change]);
                (PathRead::Read, Some(next))
            }
            Err(error) => {
                tracing::warn!(%path, %error, "cannot read a hidden path");
                (PathRead::Failed, None)
            }
        }
    }

    /// Reads every remembered path again when the store changed in a way
    /// the watch could not report (`None`: nothing to do).
    pub(super) async fn refresh_if_changed<S: Store>(
        &mut self,
        store: &mut S,
        current: &Snapshot,
    ) -> Result<Option<Snapshot>, StoreError> {
        let now = store.current_revision().await?;
        if !self.stale && now <= self.seen.max(self.refreshed_at) {
            return Ok(None);
        }
        let paths: Vec<String> = current.read_paths().map(str::to_string).collect();
        let next = self.refresh(store, current.clone(), paths).await?;
        self.refreshed_at = now;
        Ok(Some(next))
    }

    /// Reads `paths` again into `snapshot`.
    pub(super) async fn refresh<S: Store>(
        &mut self,
        store: &mut S,
        mut snapshot: Snapshot,
        paths: Vec<String>,
    ) -> Result<Snapshot, StoreError> {
        self.stale = false;
        let mut changes = Vec::with_capacity(paths.len());
        for (path, read) in paths.iter().zip(store.read_paths(&paths).await?) {
            changes.push(read_change(path.clone(), read.unwrap_or_default()));
        }
        if !changes.is_empty() {
            tracing::debug!(paths = changes.len(), "read hidden paths again");
        }
        let revision = snapshot.revision();
        snapshot.apply_changes(revision, changes);
        Ok(snapshot)
    }
}

fn read_change(path: String, loaded: Loaded) -> Change {
    Change::ReadPath {
        path,
        entries: loaded
            .kvs
            .iter()
            .filter_map(|kv| super::parse_kv(kv).map(|r| (kv.key.clone(), r)))
            .collect(),
        dirs: loaded.dirs.unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Changes;
    use futures::StreamExt;

    /// A v2-like store in which every hidden path exists (and is empty).
    struct EveryPathExists;

    impl Store for EveryPathExists {
        async fn load(&mut self, _prefix: &str) -> Result<Loaded, StoreError> {
            Ok(Loaded::default())
        }
        async fn watch(&mut self, _prefix: &str, _after: i64) -> Result<Changes, StoreError> {
            Ok(futures::stream::pending().boxed())
        }
        async fn get(&mut self, _key: &str) -> Result<Option<Vec<u8>>, StoreError> {
            Ok(None)
        }
        fn hides_underscore(&self) -> bool {
            true
        }
        async fn read_path(&mut self, _path: &str) -> Result<Option<Loaded>, StoreError> {
            Ok(Some(Loaded::default()))
        }
    }

    fn path(i: usize) -> String {
        format!("/skydns/local/cluster/svc/default/s{i}/_tcp")
    }

    /// A snapshot that remembers `n` read hidden paths.
    fn remembering(n: usize) -> Snapshot {
        let reads = (0..n).map(|i| read_change(path(i), Loaded::default()));
        Snapshot::new(1, []).with_changes(1, reads)
    }

    #[tokio::test]
    async fn at_most_ten_thousand_hidden_paths_are_remembered() {
        let mut store = EveryPathExists;
        let mut paths = ReadPaths::default();
        // One below the cap: a new path is read and remembered.
        let below = remembering(9_999);
        let (read, next) = paths.read(&mut store, &below, path(20_000)).await;
        assert_eq!(read, PathRead::Read);
        assert_eq!(next.map(|s| s.read_path_count()), Some(10_000));
        // At the cap: a new path is refused, the snapshot stays as it is,
        // and the paths already remembered still answer.
        let full = remembering(10_000);
        assert_eq!(full.read_path_count(), 10_000);
        let (read, next) = paths.read(&mut store, &full, path(20_000)).await;
        assert_eq!(read, PathRead::Failed);
        assert!(next.is_none(), "nothing new is remembered past the cap");
        let (read, next) = paths.read(&mut store, &full, path(42)).await;
        assert_eq!(read, PathRead::Read);
        assert!(next.is_none());
    }
}
