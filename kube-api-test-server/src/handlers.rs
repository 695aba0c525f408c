//! The resource routes (`/api/v1/...`, `/apis/<group>/<version>/...`): a path
//! parsed into a [`Target`] and the HTTP method mapped onto a verb, leaving the
//! semantics to the store, [`super::list`] and [`super::watch`].

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use serde_json::{json, Value};

use super::history::Key;
use super::list::{self, flag, Params};
use super::resource::ResourceKind;
use super::status::{json_response, ApiError};
use super::store::Preconditions;
use super::{patch, protobuf};
use super::{table, watch, AppState};

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The resource type.
    pub kind: ResourceKind,
    /// Namespace from the path (None: all namespaces / cluster scoped).
    pub namespace: Option<String>,
    /// Object name, for single-object requests.
    pub name: Option<String>,
    /// Subresource (`status`).
    pub subresource: Option<String>,
}

impl Target {
    /// Parses the part of the path after `/api/v1/` (`api_version` `v1`) or
    /// `/apis/<group>/<version>/`.
    pub(crate) fn parse(api_version: &str, rest: &str) -> Result<Self, ApiError> {
        let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        let known = |p: &str| {
            ResourceKind::from_plural(api_version, p).ok_or_else(ApiError::no_such_resource)
        };
        let target = |kind, namespace: Option<&str>, name: Option<&str>, sub: Option<&str>| Self {
            kind,
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
            subresource: sub.map(str::to_string),
        };
        let namespaced = |p: &str| {
            known(p).and_then(|k| {
                if k.namespaced() {
                    Ok(k)
                } else {
                    Err(ApiError::no_such_resource())
                }
            })
        };
        match segs.as_slice() {
            [plural] => Ok(target(known(plural)?, None, None, None)),
            ["namespaces", ns, plural]
                if ResourceKind::from_plural(api_version, plural).is_some() =>
            {
                Ok(target(namespaced(plural)?, Some(ns), None, None))
            }
            ["namespaces", ns, plural, name] => {
                Ok(target(namespaced(plural)?, Some(ns), Some(name), None))
            }
            ["namespaces", ns, plural, name, sub] => {
                Ok(target(namespaced(plural)?, Some(ns), Some(name), Some(sub)))
            }
            [plural, name] if !known(plural)?.namespaced() => {
                Ok(target(known(plural)?, None, Some(name), None))
            }
            [plural, name, sub] if !known(plural)?.namespaced() => {
                Ok(target(known(plural)?, None, Some(name), Some(sub)))
            }
            _ => Err(ApiError::no_such_resource()),
        }
    }

    fn key(&self, name: &str) -> Key {
        Key {
            kind: self.kind,
            namespace: self.namespace.clone().unwrap_or_default(),
            name: name.to_string(),
        }
    }
}

/// The handler behind `/api/v1/{*rest}`.
pub(crate) async fn api_v1(
    State(app): State<Arc<AppState>>,
    method: Method,
    Path(rest): Path<String>,
    Query(q): Query<Params>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    respond(app, "v1", &rest, &method, &q, &headers, &body)
}

/// The handler behind `/apis/{group}/{version}/{*rest}`.
pub(crate) async fn apis(
    State(app): State<Arc<AppState>>,
    method: Method,
    Path((group, version, rest)): Path<(String, String, String)>,
    Query(q): Query<Params>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let api_version = format!("{group}/{version}");
    respond(app, &api_version, &rest, &method, &q, &headers, &body)
}

fn respond(
    app: Arc<AppState>,
    api_version: &str,
    rest: &str,
    method: &Method,
    q: &Params,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let request = Request {
        method,
        q,
        headers,
        body,
    };
    match dispatch(app, api_version, rest, request) {
        Ok(resp) => resp,
        Err(err) => err.into_response(),
    }
}

/// The parts of a request that [`dispatch`] reads besides its path.
struct Request<'a> {
    method: &'a Method,
    q: &'a Params,
    headers: &'a HeaderMap,
    body: &'a Bytes,
}

fn dispatch(
    app: Arc<AppState>,
    api_version: &str,
    rest: &str,
    request: Request<'_>,
) -> Result<Response, ApiError> {
    let Request {
        method,
        q,
        headers,
        body,
    } = request;
    let target = Target::parse(api_version, rest)?;
    if !app.served.serves(target.kind) {
        return Err(ApiError::no_such_resource());
    }
    match &target.subresource {
        Some(sub) if sub == "status" && target.kind.has_status() => {}
        Some(_) => return Err(ApiError::no_such_resource()),
        None => {}
    }
    let status_only = target.subresource.is_some();
    let ns = target.namespace.as_deref();
    match (method.clone(), target.name.clone()) {
        (Method::GET, None) if flag(q, "watch") => {
            watch::watch(app, target.kind, target.namespace.clone(), q, headers)
        }
        (Method::GET, None) => list::list(&app.store, target.kind, ns, q, headers),
        (Method::GET, Some(name)) => get(&app, &target, &name, q, headers),
        (Method::POST, None) if !status_only => {
            let obj = app.store.create(
                target.kind,
                ns,
                object_body(target.kind, headers, body)?,
                false,
            )?;
            Ok(json_response(StatusCode::CREATED, &obj))
        }
        (Method::PUT, Some(name)) => {
            let obj = object_body(target.kind, headers, body)?;
            let (obj, created) = app.store.update(&target.key(&name), obj, status_only)?;
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(json_response(code, &obj))
        }
        (Method::PATCH, Some(name)) => {
            let content_type = headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let obj = patch::patch(
                &app.store,
                &target.key(&name),
                content_type,
                body,
                status_only,
            )?;
            Ok(json_response(StatusCode::OK, &obj))
        }
        (Method::DELETE, Some(name)) if !status_only => {
            let obj = app
                .store
                .delete(&target.key(&name), &preconditions(body)?)?;
            Ok(json_response(StatusCode::OK, &obj))
        }
        (Method::DELETE, None) => delete_collection(&app, &target, q),
        (m, _) => Err(ApiError::method_not_allowed(m.as_str())),
    }
}

fn get(
    app: &AppState,
    target: &Target,
    name: &str,
    q: &Params,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let obj = app.store.get(&target.key(name))?;
    if table::wants_table(headers) {
        let meta = json!({ "resourceVersion": obj["metadata"]["resourceVersion"] });
        let t = table::table(target.kind, &[obj], meta, list::param(q, "includeObject"));
        return Ok(json_response(StatusCode::OK, &t));
    }
    Ok(json_response(StatusCode::OK, &obj))
}

/// The media types a create or update body may use.
const BODY_MEDIA_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// Decodes a create/update body by its `Content-Type`, as the real server
/// does: JSON (also when the header is absent), YAML or protobuf; anything
/// else is a 415.
fn object_body(kind: ResourceKind, headers: &HeaderMap, body: &Bytes) -> Result<Value, ApiError> {
    let content_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let media = content_type.split(';').next().unwrap_or_default().trim();
    match media.to_ascii_lowercase().as_str() {
        "" | "application/json" => parse_body(body),
        "application/yaml" => serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}"))),
        protobuf::MEDIA_TYPE => protobuf::decode(kind, body, BODY_MEDIA_TYPES),
        _ => Err(ApiError::unsupported_media_type(
            content_type,
            BODY_MEDIA_TYPES,
        )),
    }
}

fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))
}

/// Reads DeleteOptions preconditions from a DELETE body, if any.
fn preconditions(body: &Bytes) -> Result<Preconditions, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Preconditions::default());
    }
    let opts = parse_body(body)?;
    let pre = &opts["preconditions"];
    Ok(Preconditions {
        uid: pre["uid"].as_str().map(str::to_string),
        resource_version: pre["resourceVersion"].as_str().map(str::to_string),
    })
}

fn delete_collection(app: &AppState, target: &Target, q: &Params) -> Result<Response, ApiError> {
    let mut q = q.clone();
    q.remove("limit");
    q.remove("continue");
    let page = list::read_page(&app.store, target.kind, target.namespace.as_deref(), &q)?;
    let mut deleted = Vec::new();
    for item in page.items {
        let key = Key {
            kind: target.kind,
            namespace: item["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            name: item["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        };
        match app.store.delete(&key, &Preconditions::default()) {
            Ok(obj) => deleted.push(obj),
            // Already gone (e.g. removed with its namespace): nothing to do.
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({
        "kind": format!("{}List", target.kind.kind()),
        "apiVersion": target.kind.api_version(),
        "metadata": { "resourceVersion": app.store.current_rv().to_string() },
        "items": deleted,
    });
    Ok(json_response(StatusCode::OK, &list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_paths() {
        let t = Target::parse("v1", "namespaces/default/services/web/status").unwrap();
        assert_eq!(t.kind, ResourceKind::Service);
        assert_eq!(t.namespace.as_deref(), Some("default"));
        assert_eq!(t.name.as_deref(), Some("web"));
        assert_eq!(t.subresource.as_deref(), Some("status"));
        let t = Target::parse("v1", "namespaces/kube-system").unwrap();
        assert_eq!(
            (t.kind, t.name.as_deref()),
            (ResourceKind::Namespace, Some("kube-system"))
        );
        let t = Target::parse("v1", "namespaces/kube-system/status").unwrap();
        assert_eq!(t.subresource.as_deref(), Some("status"));
        let t = Target::parse("v1", "pods").unwrap();
        assert_eq!((t.kind, t.namespace), (ResourceKind::Pod, None));
        assert_eq!(Target::parse("v1", "nodes").unwrap_err().code, 404);
        assert_eq!(Target::parse("v1", "services/x").unwrap_err().code, 404);
        // Each kind only under its own group and version.
        let t = Target::parse(
            "coordination.k8s.io/v1",
            "namespaces/kube-system/leases/kube2sky",
        )
        .unwrap();
        assert_eq!(
            (t.kind, t.name.as_deref()),
            (ResourceKind::Lease, Some("kube2sky"))
        );
        assert_eq!(Target::parse("v1", "leases").unwrap_err().code, 404);
        let t = Target::parse("v1", "namespaces/kube-system/configmaps/kube-dns").unwrap();
        assert_eq!(
            (t.kind, t.name.as_deref()),
            (ResourceKind::ConfigMap, Some("kube-dns"))
        );
        let t = Target::parse("events.k8s.io/v1", "namespaces/kube-system/events").unwrap();
        assert_eq!((t.kind, t.name), (ResourceKind::Event, None));
        // Only events.k8s.io's events are served, not core/v1's.
        assert_eq!(Target::parse("v1", "events").unwrap_err().code, 404);
        assert_eq!(
            Target::parse("coordination.k8s.io/v1", "services")
                .unwrap_err()
                .code,
            404
        );
    }
}
