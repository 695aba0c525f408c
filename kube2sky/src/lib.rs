//! kube2sky: watches Kubernetes Services, Endpoints and Pods and keeps the
//! SkyDNS records kube2sky 1.2 wrote in etcd (v2 keys API by default,
//! `--etcd-api=v3` for v3). The [`watch`] tasks send changes to the single
//! writer ([`write_loop`]), which updates the pure [`index::Index`] and has the
//! [`etcd`] writer reconcile each changed scope with the [`records`] it wants.

mod client;
pub mod config;
mod config_map;
mod etcd;
mod full_sync;
mod health;
mod index;
mod kube_dns_config;
mod leader;
mod metrics;
mod name_rules;
mod objects;
mod reconcile;
mod records;
mod scope;
mod validate;
mod watch;
mod write_loop;

#[cfg(test)]
mod fixtures;

use crate::config::Config;
use crate::etcd::{WriteError, Writer, WriterOptions};
use crate::index::{Change, Index, Update};
use crate::metrics::Metrics;
use crate::reconcile::Mode;
use crate::records::Names;
use crate::write_loop::WriteLoop;
use k8s_openapi::api::core::v1::Service;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// 1.2 tried etcd 12 times, 5 s apart, before giving up.
const ETCD_CONNECT_ATTEMPTS: (u32, Duration) = (12, Duration::from_secs(5));

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
    /// The health server failed after it started (1.2: fatal).
    #[error("health server on --healthz-port failed: {0}")]
    Serve(String),
    /// `--leader-elect`: this replica lost the lease; it exits so that it
    /// never writes beside the new leader (restarted, it stands by).
    #[error("leadership lost: {0}")]
    Leadership(String),
}

/// Runs kube2sky until `shutdown` is cancelled (then returns `Ok` after the
/// write in flight) or a fatal error. Start-up follows 1.2's `main`
/// (`kube2sky.go`; the order is in docs/kube2sky.md): etcd, client,
/// `default/kubernetes` written first, watches, then the HTTP server.
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), Error> {
    let Config {
        domain,
        etcd,
        etcd_api,
        mutation_timeout,
        kube,
        healthz_port,
        features,
        loss_check,
        max_txn_ops,
        max_txn_ops_retry,
        full_sync_chunk,
        initial_sync_timeout,
        leader_election,
        endpoints_source,
        config_map,
    } = config;
    let metrics = Arc::new(Metrics::default());
    let names = Names::new(&domain).with_ttl(features.ttl);
    let mode = if features.atomic_updates {
        Mode::Reconcile
    } else {
        Mode::RemoveThenAdd
    };
    let options = WriterOptions {
        etcd,
        api: etcd_api,
        mutation_timeout,
        mode,
        reverse: features.reverse,
        connect_attempts: ETCD_CONNECT_ATTEMPTS,
        max_txn_ops,
        txn_limit_retry: max_txn_ops_retry,
        sync_chunk: full_sync_chunk,
    };
    let mut writer = tokio::select! {
        _ = shutdown.cancelled() => return Ok(()),
        w = Writer::connect(options, names.clone(), metrics.clone(), shutdown.clone()) => w?,
    };
    let client = client::build(&kube).await?;
    // With --leader-elect, /healthz answers while this replica stands by.
    let mut early_http = None;
    let mut leadership = None;
    let mut lease = None;
    if let Some(election) = leader_election {
        early_http = Some(start_health(healthz_port, &metrics, &shutdown).await?);
        let api = kube::Api::namespaced(client.clone(), &election.namespace);
        if !leader::acquire(&api, &election, &shutdown).await {
            return Ok(());
        }
        lease = Some((api.clone(), election.clone()));
        let shutdown = shutdown.clone();
        leadership = Some(tokio::spawn(async move {
            leader::keep(&api, &election, &shutdown).await
        }));
    }
    // The writer from here on: the Lease holder, or the only replica.
    metrics.set_leader(true);
    let mut index = Index::new(names, features);
    let Some(kubernetes) = wait_for_kubernetes(&client, &shutdown).await else {
        return Ok(());
    };
    let mut scopes = index.apply(Change::Service(Update::Apply(kubernetes.into())));
    scopes.push(scope::Scope::DnsVersion);
    writer.sync(&index, scopes).await?;
    tracing::info!("Successfully added DNS record for Kubernetes service.");

    if shutdown.is_cancelled() {
        return Ok(());
    }

    let Some(source) = watch::decide_source(&client, endpoints_source, &shutdown).await else {
        return Ok(());
    };
    let (tx, rx) = mpsc::channel(1024);
    let watched = (source, features.pods, features.spec_records);
    let mut watches = watch::spawn_all(&client, watched, &tx, &metrics, &shutdown);
    if let Some(config_map) = config_map {
        index.follow_kube_dns();
        let watch = config_map::ConfigMapWatch {
            config_map,
            domain: domain.clone(),
            tx: tx.clone(),
            metrics: metrics.clone(),
            shutdown: shutdown.clone(),
        };
        watches.spawn(watch.run(client.clone()));
    }
    drop(tx);
    let (http, http_failed) = match early_http {
        Some(started) => started,
        None => start_health(healthz_port, &metrics, &shutdown).await?,
    };
    let ready_anyway = tokio::spawn(open_readiness_after(initial_sync_timeout, metrics.clone()));

    let loop_ = WriteLoop {
        writer: &mut writer,
        index: &mut index,
        metrics: &metrics,
        loss_check,
        shutdown: &shutdown,
    };
    let result = tokio::select! {
        result = loop_.run(rx) => result.map_err(Error::from),
        why = http_failed => Err(Error::Serve(why)),
        why = lost(leadership) => Err(Error::Leadership(why)),
    };
    writer.abandon_in_flight();
    ready_anyway.abort();
    shutdown.cancel();
    watches.abort_all();
    while watches.join_next().await.is_some() {}
    if let (Ok(()), Some((api, election))) = (&result, lease) {
        // Stopped with the last write done: a standby may take over now
        // rather than after the lease duration.
        leader::release(&api, &election).await;
    }
    let _ = http.await;
    result
}

/// Binds `--healthz-port` and serves `/readiness`, `/healthz` and `/metrics`.
async fn start_health(
    port: u16,
    metrics: &Arc<Metrics>,
    shutdown: &CancellationToken,
) -> Result<
    (
        tokio::task::JoinHandle<()>,
        impl std::future::Future<Output = String>,
    ),
    Error,
> {
    let listener = health::bind(port)
        .await
        .map_err(|source| Error::Listen { port, source })?;
    let served = health::serve(listener, metrics.clone(), shutdown.clone());
    tracing::info!(port, "serving /readiness, /healthz and /metrics");
    Ok(served)
}

/// Resolves with the reason when the lease renewal task gives up; never
/// without `--leader-elect` (or once shutdown ended the task).
async fn lost(leadership: Option<tokio::task::JoinHandle<Option<String>>>) -> String {
    if let Some(task) = leadership {
        if let Ok(Some(why)) = task.await {
            return why;
        }
    }
    std::future::pending().await
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

/// Opens `/readiness` after `timeout` if the first sync has not (0: at once, as 1.2).
async fn open_readiness_after(timeout: Duration, metrics: Arc<Metrics>) {
    tokio::time::sleep(timeout).await;
    if metrics.set_ready() && !timeout.is_zero() {
        tracing::warn!(
            "ready after --initial-sync-timeout={timeout:?} although services and endpoints \
             are not all written yet"
        );
    }
}
