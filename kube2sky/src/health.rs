//! The HTTP server on `--healthz-port`: `/readiness` (1.2: 200 `ok\n` for
//! any method, served only once start-up is complete), `/healthz` (liveness
//! of kube2sky itself: watches delivering, etcd writable) and `/metrics`.

use crate::metrics::Metrics;
use axum::http::StatusCode;
use axum::routing::{any, get};
use axum::Router;
use std::sync::Arc;

/// The router; it is only served after start-up, so readiness is constant.
pub fn router(metrics: Arc<Metrics>) -> Router {
    let live = metrics.clone();
    Router::new()
        .route("/readiness", any(|| async { "ok\n" }))
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
