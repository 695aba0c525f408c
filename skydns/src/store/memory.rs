//! An in-memory [`Store`] for tests: a map with a revision counter, its
//! history, and broadcast watches that can start at any past revision, plus
//! switches to make it fail like a lost etcd or a dead member.

use super::{Batch, Changes, KeyValue, Loaded, RawChange, Store, StoreError};
use futures::StreamExt;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// The revision of the marker that ends every watch stream.
const ENDED: i64 = -1;
/// The revision of the marker that ends every watch stream as behind.
const BEHIND: i64 = -2;

#[derive(Debug)]
struct State {
    revision: i64,
    data: BTreeMap<String, Vec<u8>>,
    down: bool,
    loads: usize,
    /// How long a load takes, and when each load started.
    load_time: std::time::Duration,
    load_starts: Vec<tokio::time::Instant>,
    /// Every change so far, so a watch can start at any past revision.
    history: Vec<Batch>,
}

/// A shared in-memory store; clones see the same data.
#[derive(Clone, Debug)]
pub(crate) struct MemoryStore {
    state: Arc<Mutex<State>>,
    events: broadcast::Sender<Batch>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore {
            state: Arc::new(Mutex::new(State {
                revision: 1,
                data: BTreeMap::new(),
                down: false,
                loads: 0,
                load_time: std::time::Duration::ZERO,
                load_starts: Vec::new(),
                history: Vec::new(),
            })),
            events: broadcast::channel(1024).0,
        }
    }
}

impl MemoryStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `key`, notifying watchers.
    pub(crate) fn put(&self, key: &str, value: &str) {
        let mut s = self.lock();
        s.revision += 1;
        s.data.insert(key.into(), value.as_bytes().to_vec());
        let kv = KeyValue::new(key, value.as_bytes().to_vec());
        let batch = Batch {
            revision: s.revision,
            changes: vec![RawChange::Put(kv)],
        };
        s.history.push(batch.clone());
        let _ = self.events.send(batch);
    }

    /// Deletes `key`, notifying watchers.
    pub(crate) fn delete(&self, key: &str) {
        let mut s = self.lock();
        s.revision += 1;
        s.data.remove(key);
        let batch = Batch {
            revision: s.revision,
            changes: vec![RawChange::Delete(key.into())],
        };
        s.history.push(batch.clone());
        let _ = self.events.send(batch);
    }

    /// Makes every call fail (and ends watches) until [`MemoryStore::set_down`] with false.
    pub(crate) fn set_down(&self, down: bool) {
        self.lock().down = down;
        if down {
            // Closing the channel ends every open watch stream.
            let _ = self.events.send(Batch {
                revision: ENDED,
                changes: Vec::new(),
            });
        }
    }

    /// Ends every open watch stream, as when the member serving them dies,
    /// while the store stays up.
    pub(crate) fn break_watches(&self) {
        let _ = self.events.send(Batch {
            revision: ENDED,
            changes: Vec::new(),
        });
    }

    /// Ends every open watch stream with [`StoreError::Behind`], as a v2
    /// watch that finds itself too many events behind etcd.
    pub(crate) fn fall_behind(&self) {
        let _ = self.events.send(Batch {
            revision: BEHIND,
            changes: Vec::new(),
        });
    }

    /// Makes every load take `time` from now on.
    pub(crate) fn set_load_time(&self, time: std::time::Duration) {
        self.lock().load_time = time;
    }

    /// When each load started.
    pub(crate) fn load_starts(&self) -> Vec<tokio::time::Instant> {
        self.lock().load_starts.clone()
    }

    /// How many loads succeeded so far.
    pub(crate) fn loads(&self) -> usize {
        self.lock().loads
    }

    fn check_up(&self) -> Result<(), StoreError> {
        if self.lock().down {
            Err(StoreError::Unavailable("memory store is down".into()))
        } else {
            Ok(())
        }
    }
}

impl Store for MemoryStore {
    async fn load(&mut self, prefix: &str) -> Result<Loaded, StoreError> {
        self.check_up()?;
        let time = {
            let mut s = self.lock();
            s.load_starts.push(tokio::time::Instant::now());
            s.load_time
        };
        tokio::time::sleep(time).await;
        let mut s = self.lock();
        s.loads += 1;
        let kvs = s
            .data
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
            .collect();
        Ok(Loaded {
            revision: s.revision,
            kvs,
            dirs: None,
        })
    }

    async fn watch(&mut self, prefix: &str, after: i64) -> Result<Changes, StoreError> {
        self.check_up()?;
        let prefix = prefix.to_string();
        let rx = {
            // Under the lock: no change can slip between the replay and
            // the subscription.
            let s = self.lock();
            let past: Vec<Batch> = s
                .history
                .iter()
                .filter(|b| b.revision > after)
                .cloned()
                .collect();
            futures::stream::iter(past).chain(tokio_stream_from(self.events.subscribe()))
        };
        Ok(rx
            .take_while(|b| futures::future::ready(b.revision != ENDED))
            .map(move |mut b| {
                if b.revision == BEHIND {
                    return Err(StoreError::Behind { by: 300 });
                }
                b.changes.retain(|c| match c {
                    RawChange::Put(kv) => kv.key.starts_with(&prefix),
                    RawChange::Delete(k) | RawChange::Dir(k) | RawChange::DeleteDir(k) => {
                        k.starts_with(&prefix)
                    }
                });
                Ok(b)
            })
            .boxed())
    }

    async fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.check_up()?;
        Ok(self.lock().data.get(key).cloned())
    }
}

fn tokio_stream_from(rx: broadcast::Receiver<Batch>) -> impl futures::Stream<Item = Batch> {
    futures::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(b) => return Some((b, rx)),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}
