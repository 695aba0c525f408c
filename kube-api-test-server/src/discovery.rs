//! Discovery and health endpoints, what kubectl reads before it does anything:
//! `/version`, `/api`, `/api/v1`, `/apis` and `/apis/<group>/<version>` for the
//! served kinds of [`ResourceKind::ALL`], and the `/healthz`, `/livez` and
//! `/readyz` probes, as plain `application/json`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use http::StatusCode;
use serde_json::{json, Value};

use super::resource::{ResourceKind, Served};
use super::status::{json_response, ApiError};
use super::AppState;

/// The routes owned by this module.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/version", get(version))
        .route("/api", get(api_versions))
        .route("/api/v1", get(api_v1))
        .route("/apis", get(apis))
        .route("/apis/{group}/{version}", get(group_version))
        .route("/healthz", get(health))
        .route("/livez", get(health))
        .route("/readyz", get(health))
}

async fn version() -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "major": "1",
            "minor": "33",
            "gitVersion": "v1.33.0-kube-api-test-server",
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2025-01-01T00:00:00Z",
            "goVersion": "go1.24.0",
            "compiler": "gc",
            "platform": "linux/amd64"
        }),
    )
}

async fn api_versions(State(app): State<Arc<AppState>>) -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                { "clientCIDR": "0.0.0.0/0", "serverAddress": app.addr.to_string() }
            ]
        }),
    )
}

async fn api_v1(State(app): State<Arc<AppState>>) -> Response {
    json_response(StatusCode::OK, &api_resource_list(app.served, "v1"))
}

/// The named groups (every served `api_version` but core's `v1`), each with
/// its one version.
async fn apis(State(app): State<Arc<AppState>>) -> Response {
    let versions: std::collections::BTreeSet<&str> = app
        .served
        .kinds()
        .map(ResourceKind::api_version)
        .filter(|v| v.contains('/'))
        .collect();
    let groups: Vec<Value> = versions
        .into_iter()
        .map(|gv| {
            let (group, version) = gv.split_once('/').unwrap_or((gv, ""));
            let v = json!({ "groupVersion": gv, "version": version });
            json!({ "name": group, "versions": [v.clone()], "preferredVersion": v })
        })
        .collect();
    json_response(
        StatusCode::OK,
        &json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups }),
    )
}

async fn group_version(
    State(app): State<Arc<AppState>>,
    Path((group, version)): Path<(String, String)>,
) -> Response {
    let gv = format!("{group}/{version}");
    if app.served.of_version(&gv).next().is_none() {
        return ApiError::no_such_resource().into_response();
    }
    json_response(StatusCode::OK, &api_resource_list(app.served, &gv))
}

async fn health() -> &'static str {
    "ok"
}

/// The APIResourceList of `api_version` (`v1`: `/api/v1`).
pub(crate) fn api_resource_list(served: Served, api_version: &str) -> Value {
    let verbs = [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ];
    let mut resources = Vec::new();
    for kind in served.of_version(api_version) {
        let mut entry = json!({
            "name": kind.plural(),
            "singularName": kind.singular(),
            "namespaced": kind.namespaced(),
            "kind": kind.kind(),
            "verbs": verbs,
            "shortNames": kind.short_names(),
        });
        if !kind.categories().is_empty() {
            entry["categories"] = json!(kind.categories());
        }
        resources.push(entry);
        if kind.has_status() {
            resources.push(json!({
                "name": format!("{}/status", kind.plural()),
                "singularName": "",
                "namespaced": kind.namespaced(),
                "kind": kind.kind(),
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    json!({
        "kind": "APIResourceList",
        "groupVersion": api_version,
        "resources": resources,
    })
}
