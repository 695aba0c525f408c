//! The etcd v3 [`Store`]: a prefix range read, then a watch from the next
//! revision.
//!
//! Connection settings come from [`EtcdOptions`] (several endpoints, TLS
//! client certificates, user and password). The client is created lazily and
//! dropped after an error, so a restarted or replaced etcd is reconnected to
//! on the next attempt. A watch that reports compaction or cancellation ends
//! with an error, which makes the mirror reload everything.

use super::{Batch, Changes, KeyValue, Loaded, RawChange, Store, StoreError};
use etcd_client::{
    Certificate, Client, ConnectOptions, EventType, GetOptions, Identity, TlsOptions, WatchOptions,
};
use futures::StreamExt;
use std::path::PathBuf;
use std::time::Duration;

/// How to reach etcd: the connection settings both APIs share.
pub use etcd2::Connection as EtcdOptions;

/// Connects a v3 client once with `options`.
pub async fn connect(options: &EtcdOptions) -> Result<Client, StoreError> {
    let mut connect = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(3))
        .with_keep_alive(Duration::from_secs(5), Duration::from_secs(3))
        .with_keep_alive_while_idle(true);
    if let Some((user, password)) = &options.user {
        connect = connect.with_user(user, password);
    }
    if let Some(tls) = tls(options)? {
        connect = connect.with_tls(tls);
    }
    let endpoints: Vec<String> = options
        .endpoints
        .iter()
        .map(|e| {
            e.trim_start_matches("https://")
                .trim_start_matches("http://")
                .to_string()
        })
        .collect();
    Client::connect(endpoints, Some(connect))
        .await
        .map_err(unavailable)
}

fn tls(options: &EtcdOptions) -> Result<Option<TlsOptions>, StoreError> {
    let https = options.endpoints.iter().any(|e| e.starts_with("https://"));
    if !https && options.ca_cert.is_none() && options.tls_cert.is_none() {
        return Ok(None);
    }
    let read = |p: &PathBuf| {
        std::fs::read(p)
            .map_err(|e| StoreError::Unavailable(format!("cannot read {}: {e}", p.display())))
    };
    let mut tls = TlsOptions::new();
    if let Some(ca) = &options.ca_cert {
        tls = tls.ca_certificate(Certificate::from_pem(read(ca)?));
    }
    if let (Some(cert), Some(key)) = (&options.tls_cert, &options.tls_key) {
        tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
    }
    Ok(Some(tls))
}

/// An etcd v3 cluster as a [`Store`].
pub struct EtcdStore {
    options: EtcdOptions,
    client: Option<Client>,
}

impl EtcdStore {
    /// A store that connects with `options` when first used.
    pub fn new(options: EtcdOptions) -> Self {
        EtcdStore {
            options,
            client: None,
        }
    }

    async fn client(&mut self) -> Result<&mut Client, StoreError> {
        if self.client.is_none() {
            self.client = Some(connect(&self.options).await?);
        }
        self.client
            .as_mut()
            .ok_or_else(|| StoreError::Unavailable("no etcd client".into()))
    }

    /// Runs `f` on the client, dropping the client after a failure.
    fn forget_on_error<T>(&mut self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if result.is_err() {
            self.client = None;
        }
        result
    }
}

impl Store for EtcdStore {
    async fn load(&mut self, prefix: &str) -> Result<Loaded, StoreError> {
        let result = async {
            let client = self.client().await?;
            let resp = client
                .get(prefix, Some(GetOptions::new().with_prefix()))
                .await
                .map_err(unavailable)?;
            let revision = resp.header().map_or(0, |h| h.revision());
            let kvs = resp
                .kvs()
                .iter()
                .map(|kv| KeyValue::new(String::from_utf8_lossy(kv.key()), kv.value().to_vec()))
                .collect();
            Ok(Loaded {
                revision,
                kvs,
                dirs: None,
            })
        }
        .await;
        self.forget_on_error(result)
    }

    async fn watch(&mut self, prefix: &str, after: i64) -> Result<Changes, StoreError> {
        let result = async {
            let client = self.client().await?;
            let options = WatchOptions::new()
                .with_prefix()
                .with_start_revision(after + 1)
                .with_progress_notify();
            let stream = client
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
            let client = self.client().await?;
            let resp = client.get(key, None).await.map_err(unavailable)?;
            Ok(resp.kvs().first().map(|kv| kv.value().to_vec()))
        }
        .await;
        self.forget_on_error(result)
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
                continue; // created / progress notification
            }
            let revision = resp.header().map_or(0, |h| h.revision());
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

fn unavailable(e: etcd_client::Error) -> StoreError {
    StoreError::Unavailable(e.to_string())
}
