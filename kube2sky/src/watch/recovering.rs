//! One watch with the recovery every kube2sky watch shares (`crate::watch` says
//! what it does on each error): [`Recovering::next`] hands out events only,
//! starts over or retries on errors, and keeps the watch's health flag and
//! restart counter up to date.

use super::{backoff, is_gone, is_too_large_resource_version, relist_pause};
use crate::metrics::{Kind, Metrics};
use futures::stream::BoxStream;
use futures::StreamExt;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

type Events<K> = BoxStream<'static, Result<Event<K>, watcher::Error>>;

/// A watch of `K` that recovers on its own; see the module docs.
pub(crate) struct Recovering<K: Resource> {
    api: Api<K>,
    config: watcher::Config,
    stream: Events<K>,
    /// Re-lists started in a row without an event in between.
    relists: u32,
    kind: Kind,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
}

impl<K> Recovering<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    /// Starts watching `api` with `config`, counted as `kind`.
    pub(crate) fn new(
        api: Api<K>,
        config: watcher::Config,
        (kind, metrics, shutdown): (Kind, Arc<Metrics>, CancellationToken),
    ) -> Self {
        let stream = start(&api, &config);
        Recovering {
            api,
            config,
            stream,
            relists: 0,
            kind,
            metrics,
            shutdown,
        }
    }

    /// The next event; `None` at shutdown (or if the watcher ends).
    pub(crate) async fn next(&mut self) -> Option<Event<K>> {
        loop {
            let item = tokio::select! {
                _ = self.shutdown.cancelled() => return None,
                item = self.stream.next() => item,
            };
            match item? {
                Ok(event) => {
                    self.metrics.set_watch_ok(self.kind, true);
                    self.relists = 0;
                    return Some(event);
                }
                Err(error) if is_too_large_resource_version(&error) => {
                    tracing::warn!(%error, "the API server is behind this watch's resourceVersion (restored or replaced?); listing again");
                    self.relist().await;
                }
                Err(error) if is_gone(&error) => {
                    // kube-rs would re-list too, but only after its backoff,
                    // which grew while the server was away: the server answers
                    // now, so list at once with a fresh backoff.
                    tracing::warn!(%error, "the API server no longer has this watch's resourceVersion (410 Gone); listing again");
                    self.relist().await;
                }
                Err(error) => {
                    tracing::warn!(%error, "watch failed; retrying with backoff");
                    self.metrics.set_watch_ok(self.kind, false);
                }
            }
        }
    }

    /// Counts a failed watch, pauses ([`relist_pause`]: growing while the
    /// server keeps sending the watch back to list), then lists anew.
    async fn relist(&mut self) {
        self.metrics.set_watch_ok(self.kind, false);
        tokio::select! {
            _ = self.shutdown.cancelled() => {}
            _ = tokio::time::sleep(relist_pause(self.relists)) => {}
        }
        self.relists += 1;
        self.stream = start(&self.api, &self.config);
    }
}

fn start<K>(api: &Api<K>, config: &watcher::Config) -> Events<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    watcher::watcher(api.clone(), config.clone())
        .backoff(backoff())
        .boxed()
}
