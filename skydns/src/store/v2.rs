//! The etcd v2 [`Store`], as SkyDNS 2.5.2c read etcd 2.x: a recursive read of
//! `/skydns` at `X-Etcd-Index` N, then long polls from N+1. Hidden (`_`) paths
//! are read one at a time ([`Store::read_path`]).

use super::{Batch, Changes, KeyValue, Loaded, RawChange, Store, StoreError};
use etcd_access::v2::{Client, Response};
use etcd_access::EtcdOptions;
use futures::StreamExt;
use std::time::Duration;

/// How long one long poll waits before it is asked again.
pub(crate) const WATCH_TIMEOUT: Duration = Duration::from_secs(60);
/// Events a long poll may be behind etcd before the mirror reloads instead
/// of catching up one event (one round trip) at a time.
pub(crate) const MAX_BACKLOG: u64 = 200;
/// Hidden paths read at once.
const READS_IN_FLIGHT: usize = 16;

/// An etcd v2 keys API as a [`Store`].
#[derive(Clone, Debug)]
pub(crate) struct EtcdV2Store {
    client: Client,
    /// The directory loaded last; its index is the store's current one
    /// (reading `/` would need more permission than reading the records).
    root: String,
}

impl EtcdV2Store {
    /// A store reaching etcd with `options` (nothing is sent yet).
    pub(crate) fn new(options: &EtcdOptions) -> Result<Self, StoreError> {
        let client = Client::new(options).map_err(store_error)?;
        Ok(EtcdV2Store {
            client,
            root: "/".into(),
        })
    }
}

impl EtcdV2Store {
    /// The client (clones share its endpoints; `-discover` updates them).
    pub(crate) fn client(&self) -> Client {
        self.client.clone()
    }
}

impl Store for EtcdV2Store {
    async fn load(&mut self, prefix: &str) -> Result<Loaded, StoreError> {
        let root = dir_key(prefix);
        self.root = root.clone();
        match self.client.get(&root, true).await {
            Ok(resp) => Ok(loaded(&resp)),
            Err(etcd_access::v2::Error::Etcd {
                code: etcd_access::v2::KEY_NOT_FOUND,
                index,
                ..
            }) => Ok(Loaded {
                revision: to_revision(index),
                kvs: Vec::new(),
                dirs: Some(Vec::new()),
            }),
            Err(e) => Err(store_error(e)),
        }
    }

    async fn watch(&mut self, prefix: &str, after: i64) -> Result<Changes, StoreError> {
        let client = self.client.clone();
        let root = dir_key(prefix);
        let start = u64::try_from(after + 1).unwrap_or(1);
        let stream = futures::stream::unfold(Some(start), move |next| {
            let (client, root) = (client.clone(), root.clone());
            async move {
                let wait_index = next?;
                loop {
                    match client.watch(&root, wait_index, WATCH_TIMEOUT).await {
                        Ok(None) => continue,
                        Ok(Some(resp)) if resp.index > resp.node.modified_index + MAX_BACKLOG => {
                            let by = resp.index - resp.node.modified_index;
                            let err = StoreError::Behind {
                                by: to_revision(by),
                            };
                            return Some((Err(err), None));
                        }
                        Ok(Some(resp)) => {
                            let index = resp.node.modified_index;
                            let batch = Batch {
                                revision: to_revision(index),
                                changes: vec![change(&resp)],
                            };
                            return Some((Ok(batch), Some(index + 1)));
                        }
                        Err(e) if e.is_event_index_cleared() => {
                            let compacted = match &e {
                                etcd_access::v2::Error::Etcd { index, .. } => to_revision(*index),
                                _ => 0,
                            };
                            let err = StoreError::Compacted {
                                requested: to_revision(wait_index),
                                compacted,
                            };
                            return Some((Err(err), None));
                        }
                        Err(e) => return Some((Err(store_error(e)), None)),
                    }
                }
            }
        });
        Ok(stream.boxed())
    }

    async fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match self.client.get(key, false).await {
            Ok(resp) if !resp.node.dir => Ok(Some(resp.node.value.unwrap_or_default().into())),
            Ok(_) => Ok(None),
            Err(e) if e.is_key_not_found() => Ok(None),
            Err(e) => Err(store_error(e)),
        }
    }

    fn hides_underscore(&self) -> bool {
        true
    }

    async fn read_path(&mut self, path: &str) -> Result<Option<Loaded>, StoreError> {
        read_one(&self.client, path).await
    }

    async fn read_paths(&mut self, paths: &[String]) -> Result<Vec<Option<Loaded>>, StoreError> {
        let client = self.client.clone();
        futures::stream::iter(paths.to_vec())
            .map(move |path| {
                let client = client.clone();
                async move { read_one(&client, &path).await }
            })
            .buffered(READS_IN_FLIGHT)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect()
    }

    async fn current_revision(&mut self) -> Result<i64, StoreError> {
        match self.client.get(&self.root, false).await {
            Ok(resp) => Ok(to_revision(resp.index)),
            Err(etcd_access::v2::Error::Etcd { index, .. }) => Ok(to_revision(index)),
            Err(e) => Err(store_error(e)),
        }
    }
}

async fn read_one(client: &Client, path: &str) -> Result<Option<Loaded>, StoreError> {
    match client.get(path, true).await {
        Ok(resp) => Ok(Some(loaded(&resp))),
        Err(e)
            if matches!(
                e.code(),
                Some(etcd_access::v2::KEY_NOT_FOUND | etcd_access::v2::NOT_A_DIRECTORY)
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(store_error(e)),
    }
}

/// A recursive read as keys and directories.
fn loaded(resp: &Response) -> Loaded {
    Loaded {
        revision: to_revision(resp.index),
        kvs: resp
            .node
            .leaves()
            .into_iter()
            .map(|leaf| KeyValue {
                key: leaf.key,
                value: leaf.value.into_bytes(),
                ttl: leaf.ttl,
            })
            .collect(),
        dirs: Some(resp.node.dirs()),
    }
}

/// One watch event as a change.
fn change(resp: &Response) -> RawChange {
    let node = &resp.node;
    let was_dir = node.dir || resp.prev_node.as_ref().is_some_and(|p| p.dir);
    match (resp.is_removal(), was_dir) {
        (true, true) => RawChange::DeleteDir(node.key.clone()),
        (true, false) => RawChange::Delete(node.key.clone()),
        (false, true) => RawChange::Dir(node.key.clone()),
        (false, false) => RawChange::Put(KeyValue {
            key: node.key.clone(),
            value: node.value.clone().unwrap_or_default().into_bytes(),
            ttl: node
                .ttl
                .map(|t| u32::try_from(t.max(0)).unwrap_or(u32::MAX)),
        }),
    }
}

/// `/skydns/` (the v3 prefix form) as the v2 directory key `/skydns`.
fn dir_key(prefix: &str) -> String {
    match prefix.trim_end_matches('/') {
        "" => "/".to_string(),
        key => key.to_string(),
    }
}

fn to_revision(index: u64) -> i64 {
    i64::try_from(index).unwrap_or(i64::MAX)
}

fn store_error(e: etcd_access::v2::Error) -> StoreError {
    if e.is_permanent() {
        StoreError::WrongApi(format!("{e}; or start skydns with -etcd3"))
    } else {
        StoreError::Unavailable(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(json: &str) -> RawChange {
        change(&serde_json::from_str(json).expect("event"))
    }

    #[test]
    fn watch_events_become_changes() {
        assert_eq!(
            event(r#"{"action":"set","node":{"key":"/skydns/a","value":"v","ttl":5}}"#),
            RawChange::Put(KeyValue {
                key: "/skydns/a".into(),
                value: b"v".to_vec(),
                ttl: Some(5)
            })
        );
        assert_eq!(
            event(
                r#"{"action":"expire","node":{"key":"/skydns/a"},"prevNode":{"key":"/skydns/a","value":"v"}}"#
            ),
            RawChange::Delete("/skydns/a".into())
        );
        assert_eq!(
            event(
                r#"{"action":"delete","node":{"key":"/skydns/d","dir":true},"prevNode":{"key":"/skydns/d","dir":true}}"#
            ),
            RawChange::DeleteDir("/skydns/d".into())
        );
        assert_eq!(
            event(r#"{"action":"set","node":{"key":"/skydns/d","dir":true}}"#),
            RawChange::Dir("/skydns/d".into())
        );
    }

    #[test]
    fn prefixes_become_directory_keys() {
        assert_eq!(dir_key("/skydns/"), "/skydns");
        assert_eq!(dir_key("/"), "/");
    }
}
