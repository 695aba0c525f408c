//! kube2sky: watches Kubernetes Services, Endpoints and Pods and keeps the
//! SkyDNS records kube2sky 1.2 wrote in etcd (now through the v3 API).
//!
//! Data flow: three [`watch`] tasks reduce API objects and send
//! [`index::Change`]s down one channel to the single writer task ([`run`]),
//! which updates the pure [`index::Index`], asks it which [`index::Scope`]s
//! changed, and hands them to the [`etcd`] writer: read the scope's actual
//! keys, [`reconcile::diff`] against [`index::Index::desired`] (built by the
//! pure [`records`] functions), apply the result in one transaction. One
//! writer means no races between handlers. [`health`] serves `/readiness`,
//! `/healthz` and `/metrics`.

pub mod client;
pub mod config;
pub mod etcd;
pub mod health;
pub mod index;
pub mod metrics;
pub mod reconcile;
pub mod records;
pub mod watch;

#[cfg(test)]
mod fixtures;

use crate::config::Config;
use crate::etcd::{WriteError, Writer, WriterOptions};
use crate::index::{Change, Index, Update};
use crate::metrics::Metrics;
use crate::reconcile::Mode;
use crate::records::Names;
use k8s_openapi::api::core::v1::Service;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// 1.2 tried etcd 12 times, 5 s apart, before giving up.
const ETCD_CONNECT_ATTEMPTS: (u32, Duration) = (12, Duration::from_secs(5));
/// How many queued events are folded into one round of writes.
const MAX_EVENTS_PER_ROUND: usize = 256;

/// Why kube2sky stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// etcd unreachable at start-up or a mutation timed out.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// The Kubernetes client could not be built.
    #[error(transparent)]
    Client(#[from] client::ClientError),
    /// The health port could not be opened.
    #[error("cannot listen on --healthz-port {port}: {source}")]
    Listen {
        /// The port.
        port: u16,
        /// Why.
        source: std::io::Error,
    },
}

/// Runs kube2sky until `shutdown` is cancelled (then returns `Ok` after the
/// write in flight) or a fatal error. Start-up follows reference §3: etcd,
/// client, `default/kubernetes` written first, watches, then the HTTP server.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), Error> {
    let Config {
        domain,
        etcd,
        mutation_timeout,
        kube,
        healthz_port,
        features,
        loss_check,
    } = config;
    let metrics = Arc::new(Metrics::default());
    let names = Names::new(&domain);
    let mode = if features.atomic_updates {
        Mode::Reconcile
    } else {
        Mode::RemoveThenAdd
    };
    let options = WriterOptions {
        etcd,
        mutation_timeout,
        mode,
        reverse: features.reverse,
        connect_attempts: ETCD_CONNECT_ATTEMPTS,
    };
    let mut writer = tokio::select! {
        _ = shutdown.cancelled() => return Ok(()),
        w = Writer::connect(options, names.clone(), metrics.clone()) => w?,
    };
    let client = client::build(&kube).await?;
    let mut index = Index::new(names, features);
    let Some(kubernetes) = wait_for_kubernetes(&client, &shutdown).await else {
        return Ok(());
    };
    let scopes = index.apply(Change::Service(Update::Apply(watch::slim_service(
        kubernetes,
    ))));
    writer.sync(&index, scopes).await?;
    tracing::info!("Successfully added DNS record for Kubernetes service.");

    let (tx, rx) = mpsc::channel(1024);
    let mut watches = watch::spawn_all(&client, features.pods, &tx, &metrics, &shutdown);
    drop(tx);
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", healthz_port))
        .await
        .map_err(|source| Error::Listen {
            port: healthz_port,
            source,
        })?;
    let http_shutdown = shutdown.clone();
    let http = tokio::spawn(async move {
        let served = axum::serve(listener, health::router(metrics))
            .with_graceful_shutdown(http_shutdown.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "health server failed");
        }
    });
    tracing::info!(port = healthz_port, "ready");

    let result = write_loop(&mut writer, &mut index, rx, loss_check, &shutdown).await;
    shutdown.cancel();
    watches.abort_all();
    while watches.join_next().await.is_some() {}
    let _ = http.await;
    result.map_err(Error::from)
}

async fn wait_for_kubernetes(
    client: &kube::Client,
    shutdown: &CancellationToken,
) -> Option<Service> {
    let api = kube::Api::<Service>::namespaced(client.clone(), "default");
    loop {
        let error = tokio::select! {
            _ = shutdown.cancelled() => return None,
            got = api.get("kubernetes") => match got {
                Ok(svc) => return Some(svc),
                Err(e) => e,
            },
        };
        tracing::info!("Ignoring error while waiting for service default/kubernetes: {error}. Sleeping 1s before retrying.");
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// The single writer: applies queued changes to the index, reconciles the
/// touched scopes, and periodically checks etcd for data loss.
async fn write_loop(
    writer: &mut Writer,
    index: &mut Index,
    mut rx: mpsc::Receiver<Change>,
    loss_check: Option<Duration>,
    shutdown: &CancellationToken,
) -> Result<(), WriteError> {
    let mut ticker = tokio::time::interval(loss_check.unwrap_or(Duration::from_secs(3600)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return Ok(()),
            change = rx.recv() => {
                let Some(change) = change else { return Ok(()) };
                let mut scopes = index.apply(change);
                for _ in 1..MAX_EVENTS_PER_ROUND {
                    match rx.try_recv() {
                        Ok(change) => scopes.extend(index.apply(change)),
                        Err(_) => break,
                    }
                }
                writer.sync(index, scopes).await?;
            }
            _ = ticker.tick(), if loss_check.is_some() => {
                if writer.data_lost().await {
                    writer.sync(index, index.all_scopes()).await?;
                }
            }
        }
    }
}
