//! exec-healthz: the liveness sidecar of the kube-dns pod, compatible with
//! `gcr.io/google_containers/exechealthz:1.0`/`1.1`. It runs a shell command
//! every period and serves the last result on HTTP `/healthz`, with a per-run
//! timeout, `/metrics` and an optional `/quit`. This module wires the worker
//! and the HTTP server together.

pub mod flags;
mod http;
mod metrics;
pub mod probe;

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::Notify;

pub use flags::Config;

/// Why [`run`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// `/quit` was requested.
    Quit,
    /// The `shutdown` future completed (SIGTERM/SIGINT in the binary).
    Shutdown,
}

/// Runs the worker and serves HTTP on `listener` until `/quit` or
/// `shutdown`. On return the worker is stopped and any command still
/// running has had its process group killed.
pub async fn run<F>(config: Config, listener: TcpListener, shutdown: F) -> anyhow::Result<Exit>
where
    F: Future<Output = ()> + Send,
{
    let last = probe::LastResult::new();
    let metrics = Arc::new(metrics::Metrics::new());
    let quit = Arc::new(Notify::new());
    let spec = probe::ProbeSpec {
        cmd: config.cmd.clone(),
        period: config.period,
        timeout: config.timeout,
        max_output: config.max_output,
    };
    let worker = tokio::spawn(probe::worker(spec, last.clone(), metrics.clone()));
    let app = http::router(http::AppState {
        cmd: config.cmd.as_str().into(),
        latency: config.latency,
        last,
        metrics,
        quit_enabled: config.quit_enabled,
        quit: quit.clone(),
    });
    let server = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    );
    let outcome = tokio::select! {
        res = server => res.context("HTTP server failed").map(|()| Exit::Shutdown),
        () = quit.notified() => Ok(Exit::Quit),
        () = shutdown => Ok(Exit::Shutdown),
    };
    // Dropping the worker's future kills the process group of a running command.
    worker.abort();
    let _ = worker.await;
    outcome
}

/// Binds `0.0.0.0:<port>` as 1.0 does.
pub async fn bind(port: u16) -> anyhow::Result<TcpListener> {
    let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("listen tcp {addr}"))
}

/// Completes on SIGTERM or SIGINT. Handlers are installed on first poll.
pub async fn termination_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(err) => {
            tracing::error!("cannot install SIGTERM handler: {err}");
            return std::future::pending().await;
        }
    };
    let mut int = match signal(SignalKind::interrupt()) {
        Ok(int) => int,
        Err(err) => {
            tracing::error!("cannot install SIGINT handler: {err}");
            return std::future::pending().await;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received, exiting"),
        _ = int.recv() => tracing::info!("SIGINT received, exiting"),
    }
}
