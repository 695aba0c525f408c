//! The HTTP server on `--healthz-port`: `/readiness` (200 `ok` as in 1.2, once
//! the first lists of services and endpoints are in etcd, see
//! [`Metrics::set_ready`]), `/healthz` (watches delivering, etcd writable) and
//! `/metrics`. A serve error after start is fatal, as in 1.2 ([`serve`]).

use crate::metrics::Metrics;
use axum::http::StatusCode;
use axum::routing::{any, get};
use axum::Router;
use std::future::Future;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Binds `[::]:port`, or `0.0.0.0:port` if the host has no IPv6.
pub(crate) async fn bind(port: u16) -> std::io::Result<TcpListener> {
    let any_v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
    bind_either(any_v6, SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))).await
}

/// Binds `primary`, or `fallback` if `primary` cannot be bound.
async fn bind_either(primary: SocketAddr, fallback: SocketAddr) -> std::io::Result<TcpListener> {
    match TcpListener::bind(primary).await {
        Ok(listener) => Ok(listener),
        Err(error) => {
            tracing::debug!(%error, "cannot listen on {primary}; trying {fallback}");
            TcpListener::bind(fallback).await
        }
    }
}

/// Serves [`router`] on `listener` until `shutdown`. Returns the task and a
/// future that resolves only if serving fails, with the reason.
pub(crate) fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> (JoinHandle<()>, impl Future<Output = String>) {
    let (failed_tx, failed_rx) = oneshot::channel();
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, router(metrics))
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(error) = served {
            let _ = failed_tx.send(error.to_string());
        }
    });
    let failed = async move {
        match failed_rx.await {
            Ok(why) => why,
            Err(_) => std::future::pending().await,
        }
    };
    (task, failed)
}

/// What `/readiness` says while the first sync is not written.
pub(crate) const NOT_READY: &str =
    "not ready: the first lists of services and endpoints are not in etcd yet\n";

/// The router of the health port.
pub(crate) fn router(metrics: Arc<Metrics>) -> Router {
    let live = metrics.clone();
    let ready = metrics.clone();
    Router::new()
        .route(
            "/readiness",
            any(move || async move {
                if ready.is_ready() {
                    (StatusCode::OK, "ok\n")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, NOT_READY)
                }
            }),
        )
        .route(
            "/healthz",
            get(move || async move {
                match live.unhealthy() {
                    None => (StatusCode::OK, "ok\n".to_string()),
                    Some(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
                }
            }),
        )
        .route(
            "/metrics",
            get(move || async move {
                match metrics.encode() {
                    Ok(text) => (StatusCode::OK, text),
                    Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
                }
            }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_address_that_cannot_be_bound_falls_back() {
        // 192.0.2.1 (TEST-NET-1) is on no interface here: EADDRNOTAVAIL,
        // as `[::]` is on a host without IPv6.
        let unbindable: SocketAddr = "192.0.2.1:0".parse().unwrap();
        let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let listener = bind_either(unbindable, loopback).await.unwrap();
        assert!(listener.local_addr().unwrap().ip().is_loopback());
        let direct = bind_either(loopback, unbindable).await.unwrap();
        assert!(direct.local_addr().unwrap().ip().is_loopback());
        assert!(bind_either(unbindable, unbindable).await.is_err());
    }
}
