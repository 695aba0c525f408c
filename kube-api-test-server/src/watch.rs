//! Watch requests: a chunked stream of newline-delimited watch events. A watch
//! replays the history after its resourceVersion (or sends the current objects
//! first), then follows live writes, filtered by namespace and selectors, with
//! bookmarks. A compacted version gets one ERROR event carrying a 410.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::channel::mpsc;
use futures::SinkExt;
use http::{HeaderMap, StatusCode};
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use super::faults::PauseMode;
use super::history::{EventType, StoredEvent};
use super::list::{flag, param, parse_rv, validate_options, Params};
use super::resource::ResourceKind;
use super::selector::Selector;
use super::status::ApiError;
use super::store::WatchStart;
use super::table;
use super::AppState;

/// Default stream lifetime when `timeoutSeconds` is not given.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

struct WatchCtx {
    app: Arc<AppState>,
    kind: ResourceKind,
    namespace: Option<String>,
    selector: Selector,
    bookmarks: bool,
    initial_end_bookmark: bool,
    as_table: bool,
    timeout: Duration,
}

/// Handles a `watch=true` GET.
pub(crate) fn watch(
    app: Arc<AppState>,
    kind: ResourceKind,
    namespace: Option<String>,
    q: &Params,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    validate_options(q, true)?;
    let selector = Selector::parse(kind, param(q, "labelSelector"), param(q, "fieldSelector"))?;
    let send_initial = flag(q, "sendInitialEvents");
    let from = match param(q, "resourceVersion") {
        _ if send_initial => None,
        None | Some("0") => None,
        Some(rv) => Some(parse_rv(rv)?),
    };
    // 0, like unset, leaves the server's default (as `*int64` zero does).
    let timeout = match param(q, "timeoutSeconds") {
        Some(t) => match t
            .parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {t:?}")))?
        {
            0 => DEFAULT_TIMEOUT,
            secs => Duration::from_secs(secs),
        },
        None => DEFAULT_TIMEOUT,
    };
    let bookmarks = flag(q, "allowWatchBookmarks");
    let ctx = WatchCtx {
        kind,
        namespace,
        selector,
        bookmarks,
        initial_end_bookmark: send_initial && bookmarks,
        as_table: table::wants_table(headers),
        timeout,
        app: app.clone(),
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(64);
    match app.store.watch(kind, from) {
        Ok(start) => {
            let guard = app.faults.watch_opened();
            tokio::spawn(async move {
                run(ctx, start, tx).await;
                drop(guard);
            });
        }
        Err(err) => {
            let line = encode(&json!({ "type": "ERROR", "object": err.to_status() }));
            let mut tx = tx;
            // The buffer has room for one line; a full or closed channel only
            // means the client is already gone.
            let _ = tx.try_send(Ok(line));
        }
    }
    let response = Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(rx))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(response)
}

fn encode(event: &Value) -> Bytes {
    let mut line = serde_json::to_vec(event).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

impl WatchCtx {
    /// Maps a store event to what this watcher sees, if anything.
    fn translate(&self, ev: &StoredEvent) -> Option<(&'static str, Value)> {
        if ev.key.kind != self.kind
            || self
                .namespace
                .as_ref()
                .is_some_and(|ns| *ns != ev.key.namespace)
        {
            return None;
        }
        let now = self.selector.matches(&ev.object);
        let before = ev.prev.as_ref().is_some_and(|p| self.selector.matches(p));
        let ty = match ev.event_type {
            EventType::Added => now.then_some("ADDED"),
            EventType::Deleted => before.then_some("DELETED"),
            EventType::Modified => match (before, now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => {
                    // The real cache watcher sends the last state the watcher
                    // could see (the one that matched), at the event's version.
                    let mut prev = ev.prev.clone()?;
                    prev["metadata"]["resourceVersion"] = json!(ev.rv.to_string());
                    return Some(("DELETED", prev));
                }
                (false, false) => None,
            },
        }?;
        Some((ty, ev.object.clone()))
    }

    fn event_line(&self, ty: &str, object: Value) -> Bytes {
        let object = if self.as_table {
            let rv = object["metadata"]["resourceVersion"].clone();
            table::table(self.kind, &[object], json!({ "resourceVersion": rv }), None)
        } else {
            object
        };
        encode(&json!({ "type": ty, "object": object }))
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut metadata = json!({ "resourceVersion": rv.to_string() });
        if initial_end {
            metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        encode(&json!({
            "type": "BOOKMARK",
            "object": {
                "kind": self.kind.kind(),
                "apiVersion": self.kind.api_version(),
                "metadata": metadata,
            },
        }))
    }
}

type Tx = mpsc::Sender<Result<Bytes, Infallible>>;

/// Sends one line, first waiting out a Hang pause; false when the stream
/// should end (client gone or server shutting down).
async fn send(ctx: &WatchCtx, tx: &mut Tx, line: Bytes) -> bool {
    if ctx.app.faults.pause_mode() == PauseMode::Hang
        && ctx
            .app
            .faults
            .wait_unpaused(&ctx.app.shutdown)
            .await
            .is_none()
    {
        return false;
    }
    tx.send(Ok(line)).await.is_ok()
}

async fn run(ctx: WatchCtx, start: WatchStart, mut tx: Tx) {
    let WatchStart {
        rv,
        initial,
        mut live,
    } = start;
    for ev in &initial {
        if let Some((ty, obj)) = ctx.translate(ev) {
            if !send(&ctx, &mut tx, ctx.event_line(ty, obj)).await {
                return;
            }
        }
    }
    if ctx.initial_end_bookmark && !send(&ctx, &mut tx, ctx.bookmark(rv, true)).await {
        return;
    }
    let mut seen_rv = rv;
    let mut drops = ctx.app.faults.drop_signal();
    drops.mark_unchanged();
    let deadline = tokio::time::sleep(ctx.timeout);
    tokio::pin!(deadline);
    let mut ticker = tokio::time::interval(ctx.app.bookmark_interval);
    ticker.tick().await;
    loop {
        let line = tokio::select! {
            () = &mut deadline => return,
            () = ctx.app.shutdown.cancelled() => return,
            _ = drops.changed() => return,
            _ = ticker.tick(), if ctx.bookmarks => ctx.bookmark(seen_rv, false),
            ev = live.recv() => match ev {
                Ok(ev) if ev.rv > seen_rv => {
                    seen_rv = ev.rv;
                    match ctx.translate(&ev) {
                        Some((ty, obj)) => ctx.event_line(ty, obj),
                        None => continue,
                    }
                }
                Ok(_) => continue,
                // Too slow to keep up, or the store is gone: end the stream so
                // the client resumes from its last version via history.
                Err(RecvError::Lagged(_) | RecvError::Closed) => return,
            },
        };
        if !send(&ctx, &mut tx, line).await {
            return;
        }
    }
}
