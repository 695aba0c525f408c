//! The etcd v3 [`Store`]: a prefix range read in pages at one revision (so no
//! response passes gRPC's size limit), then a watch from the next revision. It
//! reads through a [`MemberClient`], one member at a time.

use super::{Batch, Changes, KeyValue, Loaded, RawChange, Store, StoreError};
use crate::snapshot::Snapshot;
use etcd_access::prefix_end;
use etcd_client::{EventType, GetOptions, KvClient, WatchOptions};
use futures::StreamExt;

use super::member::unavailable;
pub(crate) use super::member::{EtcdOptions, MemberClient};

/// Keys per page of a load.
pub(crate) const PAGE_KEYS: i64 = 1_000;
/// The largest gRPC message read from etcd (a page, a watch response).
/// etcd's own default request limit is 1.5 MiB, so one value always fits.
pub(crate) const MAX_MESSAGE: usize = 32 * 1024 * 1024;

/// An etcd v3 cluster as a [`Store`].
pub(crate) struct EtcdStore {
    client: MemberClient,
    /// The cluster the last load read: a watch is only resumed on the same
    /// one (an etcd started again on empty data, or restored from a
    /// snapshot, is a new cluster, and its revisions start again).
    cluster: Option<u64>,
}

impl EtcdStore {
    /// A store that connects with `options` when first used.
    pub(crate) fn new(options: EtcdOptions) -> Self {
        EtcdStore {
            client: MemberClient::new(options),
            cluster: None,
        }
    }

    /// The endpoints the client goes round (`-discover` keeps them up to date).
    pub(crate) fn endpoints(&self) -> super::member::Endpoints {
        self.client.endpoints()
    }

    /// Runs `f` on the client, dropping the client after a failure.
    fn forget_on_error<T>(&mut self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if result.is_err() {
            self.client.forget();
        }
        result
    }
}

impl Store for EtcdStore {
    async fn load(&mut self, prefix: &str) -> Result<Loaded, StoreError> {
        let result = async {
            let kv = self.client.get().await?.kv_client();
            load_pages(kv.max_decoding_message_size(MAX_MESSAGE), prefix, PAGE_KEYS).await
        }
        .await;
        self.forget_on_error(result)
    }

    async fn load_snapshot(&mut self, prefix: &str) -> Result<Snapshot, StoreError> {
        let result = async {
            let mut client = self.client.get().await?;
            let status = client.status().await.map_err(unavailable)?;
            self.cluster = status.header().map(|h| h.cluster_id());
            let kv = client.kv_client().max_decoding_message_size(MAX_MESSAGE);
            let mut snapshot = Snapshot::new(0, []);
            let revision = read_pages(kv, prefix, PAGE_KEYS, |page| {
                snapshot.extend_loaded(super::parse_page(page));
            })
            .await?;
            snapshot.set_revision(revision);
            Ok(snapshot)
        }
        .await;
        self.forget_on_error(result)
    }

    async fn watch(&mut self, prefix: &str, after: i64) -> Result<Changes, StoreError> {
        let result = async {
            let client = self.client.get().await?;
            let options = WatchOptions::new()
                .with_prefix()
                .with_start_revision(after + 1)
                .with_progress_notify();
            let mut watch = client.watch_client().max_decoding_message_size(MAX_MESSAGE);
            let stream = watch
                .watch(prefix, Some(options))
                .await
                .map_err(unavailable)?;
            Ok(watch_stream(stream, after + 1))
        }
        .await;
        self.forget_on_error(result)
    }

    async fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let result = async {
            let mut client = self.client.get().await?;
            let resp = client.get(key, None).await.map_err(unavailable)?;
            Ok(resp.kvs().first().map(|kv| kv.value().to_vec()))
        }
        .await;
        self.forget_on_error(result)
    }

    fn forget_connection(&mut self) {
        self.client.forget();
    }

    async fn same_store(&mut self, revision: i64) -> Result<bool, StoreError> {
        // A store whose revision is below one already seen was emptied or
        // restored (an etcd started on empty data keeps its cluster ID when
        // its name and peers are the same). A member that is merely behind
        // catches up within milliseconds, so it is asked a few times.
        for _ in 0..3 {
            let result = async {
                let mut client = self.client.get().await?;
                let status = client.status().await.map_err(unavailable)?;
                Ok(status.header().map(|h| (h.cluster_id(), h.revision())))
            }
            .await;
            let header = self.forget_on_error(result)?;
            match header {
                Some((cluster, _)) if Some(cluster) != self.cluster => return Ok(false),
                Some((_, now)) if now >= revision => return Ok(true),
                _ => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            }
        }
        Ok(false)
    }
}

/// Reads every key under `prefix`, `page` keys at a time, all at the
/// revision of the first page. A page over the message limit is read again
/// as two halves (down to one key).
pub async fn load_pages(kv: KvClient, prefix: &str, page: i64) -> Result<Loaded, StoreError> {
    let mut kvs = Vec::new();
    let revision = read_pages(kv, prefix, page, |page| kvs.extend(page)).await?;
    Ok(Loaded {
        revision,
        kvs,
        dirs: None,
    })
}

/// [`load_pages`] handing each page to `on_page` as it arrives, so no more
/// than one page of raw values is held at a time; returns the revision.
pub(crate) async fn read_pages(
    mut kv: KvClient,
    prefix: &str,
    page: i64,
    mut on_page: impl FnMut(Vec<KeyValue>) + Send,
) -> Result<i64, StoreError> {
    let end = prefix_end(prefix.as_bytes());
    let mut from = prefix.as_bytes().to_vec();
    let (mut revision, mut limit) = (0, page);
    loop {
        let mut options = GetOptions::new().with_range(end.clone()).with_limit(limit);
        if revision > 0 {
            options = options.with_revision(revision);
        }
        let mut resp = match kv.get(from.clone(), Some(options)).await {
            Err(etcd_client::Error::GRpcStatus(status))
                if status.code() == tonic::Code::OutOfRange && limit > 1 =>
            {
                limit /= 2;
                continue;
            }
            other => other.map_err(unavailable)?,
        };
        if revision == 0 {
            revision = resp.header().map_or(0, |h| h.revision());
        }
        let more = resp.more();
        let next = resp.kvs().last().map(|last| {
            let mut next = last.key().to_vec();
            next.push(0);
            next
        });
        on_page(
            resp.take_kvs()
                .into_iter()
                .map(|kv| {
                    let (key, value) = kv.into_key_value();
                    KeyValue::new(String::from_utf8_lossy(&key), value)
                })
                .collect(),
        );
        match next {
            Some(next) if more => {
                from = next;
                limit = page;
            }
            _ => return Ok(revision),
        }
    }
}

/// Turns an etcd watch into batches; compaction and cancellation are errors.
fn watch_stream(stream: etcd_client::WatchStream, start: i64) -> Changes {
    futures::stream::unfold(Some(stream), move |state| async move {
        let mut stream = state?;
        loop {
            let resp = match stream.message().await {
                Ok(Some(resp)) => resp,
                Ok(None) => return None,
                Err(e) => return Some((Err(unavailable(e)), None)),
            };
            if resp.compact_revision() > 0 {
                let err = StoreError::Compacted {
                    requested: start,
                    compacted: resp.compact_revision(),
                };
                return Some((Err(err), None));
            }
            if resp.canceled() {
                let err =
                    StoreError::Unavailable(format!("watch canceled: {}", resp.cancel_reason()));
                return Some((Err(err), None));
            }
            if resp.events().is_empty() {
                if resp.created() {
                    continue;
                }
                // A progress notification (etcd sends them only to a watch
                // that has caught up): every change up to its revision has
                // been sent, so a resume can start there.
                let revision = resp.header().map_or(0, |h| h.revision());
                let progress = Batch {
                    revision,
                    changes: Vec::new(),
                };
                return Some((Ok(progress), Some(stream)));
            }
            // The last event's revision, not the header's: a watch catching
            // up sends events in chunks, each with the store's current
            // revision in its header, and a resume must start after the
            // last event received.
            let header = resp.header().map_or(0, |h| h.revision());
            let revision = resp
                .events()
                .iter()
                .filter_map(|e| e.kv().map(|kv| kv.mod_revision()))
                .max()
                .unwrap_or(header);
            let changes = resp.events().iter().filter_map(to_change).collect();
            return Some((Ok(Batch { revision, changes }), Some(stream)));
        }
    })
    .boxed()
}

fn to_change(event: &etcd_client::Event) -> Option<RawChange> {
    let kv = event.kv()?;
    let key = String::from_utf8_lossy(kv.key()).into_owned();
    Some(match event.event_type() {
        EventType::Put => RawChange::Put(KeyValue::new(key, kv.value().to_vec())),
        EventType::Delete => RawChange::Delete(key),
    })
}
