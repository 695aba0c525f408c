//! SkyDNS 2.5.2c, re-implemented: an authoritative DNS server for the
//! Kubernetes cluster domain that serves SkyDNS records kept in etcd (the v2
//! keys API by default, the v3 API with `-etcd3`). A query never waits on
//! etcd: it is answered from an in-memory snapshot of the records. Crate map:
//! - [`snapshot`]: the in-memory copy of the records queries read;
//! - [`answer`]: pure "question + snapshot → answer" functions;
//! - [`handler`], [`response`]: request → reply, rcodes, `Fit`;
//! - [`reply_cache`]: authoritative replies kept encoded until the records
//!   they read change;
//! - [`forward`]: the upstream resolvers, their health and policy;
//!   [`response_cache`]: their answers (`-rcache`), serve-stale, prefetch;
//! - [`stub`]: stub zones; [`autopath`]: the pods' search paths walked at
//!   the server; [`pods`]: pod names in the `-pods` mode;
//! - [`store`]: the store trait, the etcd v2 and v3 stores and the mirror task;
//! - [`config`]: flags, environment, the etcd config key, defaults; each
//!   feature's own flags, keys and settings are in its module, `values`
//!   holds the parsers they share;
//! - [`dnssec`]: online signing of DO replies with `-dnssec`;
//! - [`server`], [`wire`]: UDP and TCP sockets, batched reads and writes;
//! - [`metrics`], [`query_log`]: Prometheus series and the query log;
//! - [`lifecycle`]: start-up wait, readiness, lameduck and drain.

pub mod config;
pub mod lifecycle;
pub mod loop_check;
pub mod query_log;

mod answer;
pub mod autopath;
pub mod dnssec;
pub mod forward;
pub mod handler;
pub mod metrics;
pub mod pods;
mod reply_cache;
mod response;
pub mod response_cache;
pub mod server;
mod snapshot;
pub mod store;
pub mod stub;
mod values;
mod wire;

// The feature modules are public so that the settings `config::Config`
// holds can be named. Besides `run`: what the fuzz targets drive (a handler
// over a snapshot, with DNSSEC) and what the end-to-end tests read (the v3
// store's paged load).
pub use answer::Zone;
pub use dnssec::keyfile::KeyPair;
pub use dnssec::{Dnssec, Settings as DnssecSettings};
pub use forward::{NsPolicy, NsTransport};
pub use handler::{Handler, Outcome, Settings as HandlerSettings, Transport};
pub use metrics::Metrics;
pub use server::TcpLimits;
pub use snapshot::{SharedSnapshot, Snapshot};
pub use store::etcd::load_pages;

use crate::config::{nameservers_from_resolv_conf, Config, ConfigError, Flags, Settings};

use crate::lifecycle::{Shutdown, Status};
use crate::store::etcd::EtcdStore;
use crate::store::paths::{self, PathReader, PathRequests};
use crate::store::v2::EtcdV2Store;
use crate::store::{Store, StoreError};
use arc_swap::ArcSwapOption;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long start-up waits for etcd to return the config key.
const CONFIG_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Reads the configuration, binds the sockets and serves until `shutdown`
/// (see [`lifecycle`]: lameduck on `terminate`, at once on `abort`),
/// reading etcd through the v2 keys API, or the v3 API with `-etcd3`.
pub async fn run(flags: Flags, shutdown: impl Into<Shutdown>) -> anyhow::Result<()> {
    let shutdown = shutdown.into();
    let options = flags.store.etcd_options();
    if flags.store.etcd3 {
        refuse_etcd2(&options).await?;
        let store = EtcdStore::new(options.clone());
        if flags.store.discover {
            let follow =
                store::discover::follow_v3(options, store.endpoints(), shutdown.terminate.clone());
            tokio::spawn(follow);
        }
        serve(flags, store, shutdown).await
    } else {
        let store = EtcdV2Store::new(&options).map_err(|e| ConfigError(e.to_string()))?;
        if flags.store.discover {
            tokio::spawn(store::discover::follow_v2(
                store.client(),
                shutdown.terminate.clone(),
            ));
        }
        serve(flags, store, shutdown).await
    }
}

/// With `-etcd3`, an etcd 2.x (which has no v3 API) stops start-up with a
/// message naming the flag; an etcd that cannot be asked is not an error.
async fn refuse_etcd2(options: &store::etcd::EtcdOptions) -> Result<(), ConfigError> {
    let Ok(client) = etcd_access::v2::Client::new(options) else {
        return Ok(());
    };
    match client.version().await {
        Ok(v) if v.major() == Some(2) => Err(ConfigError(format!(
            "etcd {} has no v3 API: drop -etcd3 to use the v2 keys API",
            v.server
        ))),
        _ => Ok(()),
    }
}

async fn serve<S: Store>(flags: Flags, mut store: S, shutdown: Shutdown) -> anyhow::Result<()> {
    // Hidden paths are read on demand only from a store that hides them (v2).
    let (reader, requests) = if store.hides_underscore() {
        paths::channel()
    } else {
        (PathReader::default(), PathRequests::default())
    };
    let Started {
        config,
        settings,
        config_key,
        config_value,
    } = load_config(&flags, &mut store).await?;
    let listeners = listen(&config).await?;
    let (config_feed, config_values) = tokio::sync::watch::channel(config_value.clone());
    let shared: SharedSnapshot = Arc::new(ArcSwapOption::empty());
    let status = Arc::new(Status::new(config.lifecycle.ready_store_timeout));
    // Listeners close at `stop`: at the end of the lameduck after
    // `terminate`; the store and metrics tasks stop after them.
    let stop = CancellationToken::new();
    let tasks_stop = CancellationToken::new();
    let metrics = Arc::new(metrics::Metrics::serving(config.addr));
    metrics.plugins_enabled(&coredns_plugins(&config, flags.loop_check.mode));
    metrics::count_panics(&metrics);
    let mirror = tokio::spawn(store::mirror(
        store,
        config.zone.prefix.root(),
        shared.clone(),
        requests,
        store::MirrorReports {
            metrics: metrics.clone(),
            status: status.clone(),
            config: Some(store::ConfigFeed {
                key: config_key.clone(),
                value: config_feed,
            }),
        },
        tasks_stop.clone(),
    ));
    let metrics_task = match config.metrics.addr {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| ConfigError(format!("cannot serve metrics on {addr}: {e}")))?;
            let (path, metrics, status) =
                (config.metrics.path.clone(), metrics.clone(), status.clone());
            Some(tokio::spawn(metrics::serve(
                listener,
                path,
                metrics,
                status,
                tasks_stop.clone(),
            )))
        }
        None => None,
    };
    let lameduck = {
        let (status, shutdown, stop) = (status.clone(), shutdown.clone(), stop.clone());
        let duration = config.lifecycle.lameduck;
        tokio::spawn(async move { lifecycle::lameduck(&status, duration, &shutdown, &stop).await })
    };
    // Queries that came before the first load wait in the sockets' queues.
    if lifecycle::wait_for_first_load(&status, config.lifecycle.startup_wait, &shutdown.terminate)
        .await
    {
        tracing::info!(
            domain = %config.zone.domain,
            addr = ?listeners.addresses(),
            etcd = ?config.etcd.endpoints,
            api = if flags.store.etcd3 { "v3" } else { "v2" },
            lameduck = ?config.lifecycle.lameduck,
            "ready for queries"
        );
    }
    let handler = Handler::reading_paths(
        config.zone.clone(),
        shared,
        config.handler.clone(),
        metrics.clone(),
        reader,
    );
    let loop_check = start_loop_check(flags.loop_check.mode, &handler, metrics, &shutdown);
    let follower = config::live::Follower::new(flags, config_key, settings, config_value);
    let following = tokio::spawn(config::live::follow(
        follower,
        config_values,
        handler.clone(),
        tasks_stop.clone(),
    ));
    server::serve(
        listeners,
        handler,
        config.tcp,
        stop.clone(),
        shutdown.abort.clone(),
    )
    .await;
    stop.cancel();
    tasks_stop.cancel();
    lameduck.await?;
    mirror.await?;
    following.await?;
    if let Some(task) = metrics_task {
        task.await??;
    }
    if let Some(upstream) = loop_check.and_then(|c| c.fatal()) {
        anyhow::bail!("forwarding loop detected through upstream {upstream} (-loop=exit)");
    }
    tracing::info!("stopped");
    Ok(())
}

/// The CoreDNS plugins that do what this configuration does, for
/// `coredns_plugin_enabled` (kubeadm's Corefile gives the same list; CoreDNS
/// lists no `health`, `ready` or `reload`, which answer no query).
fn coredns_plugins(config: &Config, loop_mode: loop_check::Mode) -> Vec<&'static str> {
    let h = &config.handler;
    let forwarding = !h.forward.no_rec && !h.forward.nameservers.is_empty();
    let mut names = vec!["errors", "kubernetes"];
    let optional = [
        ("prometheus", config.metrics.addr.is_some()),
        ("forward", forwarding),
        ("cache", h.cache.capacity > 0),
        ("loop", loop_mode != loop_check::Mode::Off),
        ("loadbalance", h.round_robin),
        ("autopath", h.autopath.is_some()),
    ];
    names.extend(optional.iter().filter(|(_, on)| *on).map(|(n, _)| *n));
    names
}

/// The loop check (`-loop`), started now that the listeners are open; in
/// exit mode a loop stops the server at once.
fn start_loop_check(
    mode: loop_check::Mode,
    handler: &Handler,
    metrics: Arc<metrics::Metrics>,
    shutdown: &Shutdown,
) -> Option<Arc<loop_check::LoopCheck>> {
    if mode == loop_check::Mode::Off {
        return None;
    }
    let exit = CancellationToken::new();
    let check = Arc::new(loop_check::LoopCheck::new(mode, exit.clone(), metrics));
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        exit.cancelled().await;
        shutdown.terminate.cancel();
        shutdown.abort.cancel();
    });
    handler.check_loops(check.clone());
    Some(check)
}

/// The sockets systemd passed with `-systemd`, else `addr` bound.
async fn listen(config: &Config) -> Result<server::Listeners, ConfigError> {
    if config.systemd {
        server::Listeners::from_systemd()
            .map_err(|e| ConfigError(format!("-systemd: cannot take the sockets: {e}")))
    } else {
        server::Listeners::bind(config.addr)
            .await
            .map_err(|e| ConfigError(format!("cannot listen on {}: {e}", config.addr)))
    }
}

/// The configuration start-up read, and where it came from.
struct Started {
    config: Config,
    /// The settings merged from the flags and the config key.
    settings: Settings,
    /// `/<prefix>/config`.
    config_key: String,
    /// Its value at start, if it was read and present.
    config_value: Option<Vec<u8>>,
}

/// Flags, overridden by `/<prefix>/config` in etcd if it can be read.
async fn load_config<S: Store>(flags: &Flags, store: &mut S) -> Result<Started, ConfigError> {
    let mut settings = Settings::from_flags(flags);
    let key = format!(
        "/{}/config",
        skydns_msg::path::PathPrefix::new(&flags.path_prefix).as_str()
    );
    let mut value = None;
    match tokio::time::timeout(CONFIG_READ_TIMEOUT, store.get(&key)).await {
        Ok(Ok(Some(json))) => {
            settings.merge_json(&json)?;
            tracing::info!(%key, "merged configuration from etcd");
            value = Some(json);
        }
        Ok(Ok(None)) => tracing::info!(%key, "no configuration in etcd; using flags"),
        Ok(Err(StoreError::WrongApi(why))) => return Err(ConfigError(why)),
        Ok(Err(error)) => {
            tracing::warn!(%error, "falling back to default configuration, could not read from etcd")
        }
        Err(_) => tracing::warn!(
            "falling back to default configuration, could not read from etcd: timed out"
        ),
    }
    let config = settings.clone().finish(flags, || {
        nameservers_from_resolv_conf(Path::new("/etc/resolv.conf"))
    })?;
    Ok(Started {
        config,
        settings,
        config_key: key,
        config_value: value,
    })
}
