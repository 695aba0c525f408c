//! The axum router: `/healthz` (200 `ok` or 503 with exec-healthz 1.0's
//! exact bodies), `/quit` (asks the server to exit; never answers), the
//! `/metrics` addition, and the HTML index page for every other path. Every
//! route accepts any method, like Go's default mux.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use tokio::sync::Notify;

use crate::metrics::{self, Metrics};
use crate::probe::{ExecResult, LastResult};
use gocompat::time::format as format_time;

const TEXT_PLAIN: &str = "text/plain; charset=utf-8";
const TEXT_HTML: &str = "text/html; charset=utf-8";

/// What the handlers share.
#[derive(Debug, Clone)]
pub(crate) struct AppState {
    /// The command, for logs.
    pub cmd: Arc<str>,
    /// Maximum result age.
    pub latency: Duration,
    /// The worker's last result.
    pub last: LastResult,
    /// Worker metrics.
    pub metrics: Arc<Metrics>,
    /// Whether `/quit` may exit the process.
    pub quit_enabled: bool,
    /// Notified once when `/quit` is requested.
    pub quit: Arc<Notify>,
}

/// Builds the router; serve it with `ConnectInfo<SocketAddr>`.
pub(crate) fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", any(healthz))
        .route("/quit", any(quit))
        .route("/metrics", any(metrics_page))
        .fallback(index)
        .with_state(state)
}

/// The 1.0 `execResult.String()`: raw output bytes, Go timestamp, error.
fn describe(result: &ExecResult) -> Vec<u8> {
    let mut text = b"Result of last exec: ".to_vec();
    text.extend_from_slice(&result.output);
    let err = result.err.as_deref().unwrap_or("None");
    text.extend_from_slice(format!(", at {}, error {err}", format_time(result.ts)).as_bytes());
    text
}

/// The `/healthz` verdict: `None` for healthy, else the 503 message.
pub(crate) fn verdict(result: &ExecResult, latency: Duration) -> Option<Vec<u8>> {
    if result.err.is_some() {
        let mut msg = b"Healthz probe error: ".to_vec();
        msg.extend_from_slice(&describe(result));
        return Some(msg);
    }
    if result.at.elapsed() > latency {
        let mut msg = b"Latest result too old to be useful: ".to_vec();
        msg.extend_from_slice(&describe(result));
        msg.push(b'.');
        return Some(msg);
    }
    None
}

async fn healthz(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Response {
    tracing::info!(
        "Client ip {peer} requesting /healthz probe servicing cmd {}",
        state.cmd
    );
    match verdict(&state.last.get(), state.latency) {
        None => ([(header::CONTENT_TYPE, TEXT_PLAIN)], "ok").into_response(),
        Some(mut msg) => {
            tracing::warn!("{}", String::from_utf8_lossy(&msg));
            // Go's http.Error appends a newline.
            msg.push(b'\n');
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::CONTENT_TYPE, TEXT_PLAIN)],
                msg,
            )
                .into_response()
        }
    }
}

async fn quit(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Response {
    if !state.quit_enabled {
        tracing::warn!("Refused /quit from {peer}: -quit-enabled=false");
        return (
            StatusCode::FORBIDDEN,
            [(header::CONTENT_TYPE, TEXT_PLAIN)],
            "/quit is disabled (-quit-enabled=false)\n",
        )
            .into_response();
    }
    tracing::info!("Shutdown requested via /quit by {peer}");
    state.quit.notify_one();
    // 1.0 calls exit(0) without answering: never respond, the process
    // exits under this request and the connection just closes.
    std::future::pending::<Response>().await
}

async fn metrics_page(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        state.metrics.encode(),
    )
        .into_response()
}

/// The 1.0 index page (without the `/quit` line when it is disabled).
pub(crate) fn index_html(quit_enabled: bool) -> String {
    let mut page = String::from("<b> Kubernetes healthz sidecar container </b><br/><br/>");
    let mut links = vec![(
        "/healthz",
        "healthz probe. Returns \"ok\" if the command given through -cmd exits with 0.",
    )];
    if quit_enabled {
        links.push(("/quit", "Cause this container to exit."));
    }
    for (path, desc) in links {
        page.push_str(&format!("<a href=\"{path}\">{path}: {desc}</a><br/>"));
    }
    page
}

async fn index(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, TEXT_HTML)],
        index_html(state.quit_enabled),
    )
        .into_response()
}
