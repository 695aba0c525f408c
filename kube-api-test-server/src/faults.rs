//! Fault injection and request gating: [`Faults`] holds the switches tests flip
//! (drop every watch, pause and resume the server, hold a resource's lists),
//! also reachable under `/admin/`, and this module owns the middleware that
//! applies them and the bearer token check.

use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::status::{json_response, ApiError};
use super::AppState;

/// How a paused server treats requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PauseMode {
    /// Serving normally.
    #[default]
    Running,
    /// Requests (and event delivery on open watches) wait until resumed.
    Hang,
    /// Requests fail at once with 503 ServiceUnavailable.
    Unavailable,
}

/// The fault switches shared by the handlers.
#[derive(Debug)]
pub(crate) struct Faults {
    pause: watch::Sender<PauseMode>,
    drops: watch::Sender<u64>,
    open_watches: watch::Sender<usize>,
    /// Resources (plural) whose lists (GETs of the collection without
    /// `watch=true`) wait until released.
    held_lists: watch::Sender<Vec<String>>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            held_lists: watch::Sender::new(Vec::new()),
            pause: watch::Sender::new(PauseMode::Running),
            drops: watch::Sender::new(0),
            open_watches: watch::Sender::new(0),
        }
    }
}

impl Faults {
    /// Ends every open watch stream (clients see a clean end of stream).
    pub(crate) fn drop_watches(&self) {
        self.drops.send_modify(|n| *n += 1);
    }

    /// A receiver that changes whenever watches are to be dropped.
    pub(crate) fn drop_signal(&self) -> watch::Receiver<u64> {
        self.drops.subscribe()
    }

    /// Counts an open watch stream until the guard is dropped.
    pub(crate) fn watch_opened(self: &Arc<Self>) -> OpenWatchGuard {
        self.open_watches.send_modify(|n| *n += 1);
        OpenWatchGuard(self.clone())
    }

    /// Number of watch streams currently open.
    pub(crate) fn open_watches(&self) -> usize {
        *self.open_watches.borrow()
    }

    /// Waits until exactly `n` watch streams are open.
    pub(crate) async fn wait_open_watches(&self, n: usize) {
        let mut rx = self.open_watches.subscribe();
        // The sender lives as long as `self`, so this cannot fail.
        let _ = rx.wait_for(|open| *open == n).await;
    }

    /// Sets the pause mode.
    pub(crate) fn set_pause(&self, mode: PauseMode) {
        self.pause.send_replace(mode);
    }

    /// The current pause mode.
    pub(crate) fn pause_mode(&self) -> PauseMode {
        *self.pause.borrow()
    }

    /// Makes lists of `plural` (e.g. `endpoints`) wait until [`Self::release_lists`].
    pub(crate) fn hold_lists(&self, plural: &str) {
        self.held_lists
            .send_modify(|held| held.push(plural.to_string()));
    }

    /// Lets the held lists of `plural` go on; others stay held.
    pub(crate) fn release_list(&self, plural: &str) {
        self.held_lists
            .send_modify(|held| held.retain(|p| p != plural));
    }

    /// Lets every held list go on.
    pub(crate) fn release_lists(&self) {
        self.held_lists.send_replace(Vec::new());
    }

    /// Waits while lists of `plural` are held.
    async fn wait_list_released(&self, plural: &str, shutdown: &CancellationToken) {
        let mut rx = self.held_lists.subscribe();
        tokio::select! {
            _ = rx.wait_for(|held| !held.iter().any(|p| p == plural)) => {}
            () = shutdown.cancelled() => {}
        }
    }

    /// Waits while the server is paused in [`PauseMode::Hang`]; returns the
    /// mode in force afterwards, or None if `shutdown` fired first.
    pub(crate) async fn wait_unpaused(&self, shutdown: &CancellationToken) -> Option<PauseMode> {
        let mut rx = self.pause.subscribe();
        tokio::select! {
            res = rx.wait_for(|m| *m != PauseMode::Hang) => res.ok().map(|m| *m),
            () = shutdown.cancelled() => None,
        }
    }
}

/// Keeps a watch counted as open while alive.
pub(crate) struct OpenWatchGuard(Arc<Faults>);

impl Drop for OpenWatchGuard {
    fn drop(&mut self) {
        self.0
            .open_watches
            .send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Middleware: bearer token check, then the pause gate.
pub(crate) async fn gate(State(app): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if !authorized(&app, &req) {
        return ApiError::unauthorized().into_response();
    }
    if req.uri().path().starts_with("/admin/") {
        return next.run(req).await;
    }
    if let Some(plural) = listed(&req) {
        app.faults.wait_list_released(&plural, &app.shutdown).await;
    }
    match app.faults.wait_unpaused(&app.shutdown).await {
        Some(PauseMode::Running) => next.run(req).await,
        _ => ApiError::unavailable().into_response(),
    }
}

/// The resource (plural) a request lists: the last path segment of a GET
/// without `watch=true` (`/api/v1/endpoints`, `.../namespaces/x/endpoints`).
fn listed(req: &Request) -> Option<String> {
    let is_watch = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    if req.method() != http::Method::GET || is_watch {
        return None;
    }
    req.uri().path().rsplit('/').next().map(str::to_string)
}

fn authorized(app: &AppState, req: &Request) -> bool {
    let Some(token) = app.token.as_deref() else {
        return true;
    };
    if req.extensions().get::<super::InsecurePort>().is_some() {
        return true;
    }
    if matches!(req.uri().path(), "/healthz" | "/livez" | "/readyz") {
        return true;
    }
    req.headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| t.trim() == token)
}

#[derive(Debug, Deserialize)]
struct PauseQuery {
    mode: Option<String>,
}

/// The `/admin/*` routes: `drop-watches`, `expire-history`,
/// `pause?mode=hang|unavailable`, `resume` (all POST).
pub(crate) fn admin_routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/admin/drop-watches", post(drop_watches))
        .route("/admin/expire-history", post(expire_history))
        .route("/admin/pause", post(pause))
        .route("/admin/resume", post(resume))
}

fn ok(action: &str) -> Response {
    json_response(http::StatusCode::OK, &json!({ "ok": action }))
}

async fn drop_watches(State(app): State<Arc<AppState>>) -> Response {
    app.faults.drop_watches();
    ok("drop-watches")
}

async fn expire_history(State(app): State<Arc<AppState>>) -> Response {
    app.store.expire_history();
    ok("expire-history")
}

async fn pause(State(app): State<Arc<AppState>>, Query(q): Query<PauseQuery>) -> Response {
    let mode = match q.mode.as_deref() {
        None | Some("hang") => PauseMode::Hang,
        Some("unavailable") => PauseMode::Unavailable,
        Some(other) => {
            return ApiError::bad_request(format!("unknown pause mode {other:?}")).into_response()
        }
    };
    app.faults.set_pause(mode);
    ok("pause")
}

async fn resume(State(app): State<Arc<AppState>>) -> Response {
    app.faults.set_pause(PauseMode::Running);
    ok("resume")
}
