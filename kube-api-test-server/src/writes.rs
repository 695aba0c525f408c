//! The rules of create and update: the metadata the server manages, namespace
//! and name checks, the per-kind validation of [`ResourceKind::validate`],
//! immutable fields, the status/spec split, and Services handed to
//! [`super::dualstack`] for their cluster IPs.

use std::hash::{BuildHasher, RandomState};

use serde_json::{json, Value};

use super::history::Key;
use super::resource::{set_status, status_of, ResourceKind};
use super::state::State;
use super::status::ApiError;
use super::{clock, dualstack, endpointslice};

/// Fills in and checks a new object; returns its key. Nothing is stored yet.
pub(crate) fn prepare_create(
    state: &mut State,
    kind: ResourceKind,
    namespace: Option<&str>,
    obj: &mut Value,
    keep_status: bool,
) -> Result<Key, ApiError> {
    let meta = &mut obj["metadata"];
    if !meta.is_object() {
        *meta = json!({});
    }
    let namespace = resolve_namespace(kind, namespace, meta)?;
    let name = resolve_name(kind, meta)?;
    if kind.namespaced() {
        let ns_key = Key {
            kind: ResourceKind::Namespace,
            namespace: String::new(),
            name: namespace.clone(),
        };
        if !state.objects.contains_key(&ns_key) {
            return Err(ApiError::not_found("namespaces", &namespace));
        }
    }
    let key = Key {
        kind,
        namespace,
        name,
    };
    if state.objects.contains_key(&key) {
        return Err(ApiError::already_exists(kind.plural(), &key.name));
    }
    if let Some(meta) = obj["metadata"].as_object_mut() {
        meta.insert("uid".into(), json!(new_uid()));
        meta.insert("creationTimestamp".into(), clock::now());
        for field in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(field);
        }
    }
    if !keep_status {
        kind.reset_status_on_create(obj);
    }
    kind.apply_create_defaults(obj);
    if kind == ResourceKind::EndpointSlice {
        endpointslice::set_generation(obj, None);
    }
    kind.validate(obj, None)?;
    if kind == ResourceKind::Service {
        dualstack::create_service(&mut state.ips, &key.name, obj)?;
    }
    Ok(key)
}

fn resolve_namespace(
    kind: ResourceKind,
    url_ns: Option<&str>,
    meta: &mut Value,
) -> Result<String, ApiError> {
    if !kind.namespaced() {
        if let Some(m) = meta.as_object_mut() {
            m.remove("namespace");
        }
        return Ok(String::new());
    }
    let body_ns = meta["namespace"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let ns = match (url_ns, body_ns) {
        (Some(url), Some(body)) if url != body => return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        (Some(url), _) => url.to_string(),
        (None, Some(body)) => body,
        (None, None) => "default".to_string(),
    };
    meta["namespace"] = json!(ns);
    Ok(ns)
}

fn resolve_name(kind: ResourceKind, meta: &mut Value) -> Result<String, ApiError> {
    let mut name = meta["name"].as_str().unwrap_or_default().to_string();
    if name.is_empty() {
        let prefix = meta["generateName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if prefix.is_empty() {
            return Err(ApiError::invalid(
                &kind.qualified_kind(),
                kind.plural(),
                "",
                "metadata.name: Required value: name or generateName is required",
            ));
        }
        name = format!("{prefix}{}", random_suffix());
        meta["name"] = json!(name);
    }
    kind.validate_name(&name)
        .map_err(|e| ApiError::invalid(&kind.qualified_kind(), kind.plural(), &name, &e))?;
    Ok(name)
}

/// A random RFC 4122-shaped UID.
fn new_uid() -> String {
    let a = RandomState::new().hash_one(0u8);
    let b = RandomState::new().hash_one(1u8);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        b >> 52,
        b & 0xffff_ffff_ffff
    )
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = RandomState::new().hash_one(0u8);
    (0..5)
        .map(|_| {
            let c = ALPHABET[(n % ALPHABET.len() as u64) as usize];
            n /= ALPHABET.len() as u64;
            char::from(c)
        })
        .collect()
}

/// Frees what a deleted object held (its cluster IPs).
pub(crate) fn release(state: &mut State, key: &Key, obj: &Value) {
    if key.kind == ResourceKind::Service {
        dualstack::release_service(&mut state.ips, obj);
    }
}

/// Checks that an update body names the object in the URL.
pub(crate) fn check_identity(key: &Key, obj: &mut Value) -> Result<(), ApiError> {
    let meta = &mut obj["metadata"];
    if !meta.is_object() {
        *meta = json!({});
    }
    let name = meta["name"].as_str().unwrap_or_default();
    if name != key.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            key.name
        )));
    }
    if key.kind.namespaced() {
        match meta["namespace"].as_str() {
            None | Some("") => meta["namespace"] = json!(key.namespace),
            Some(ns) if ns != key.namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Builds the new state for a main-resource PUT of an existing object.
pub(crate) fn prepare_update(
    state: &mut State,
    key: &Key,
    old: &Value,
    mut obj: Value,
) -> Result<Value, ApiError> {
    for field in [
        "uid",
        "creationTimestamp",
        "resourceVersion",
        "generateName",
        "generation",
    ] {
        match old["metadata"].get(field) {
            Some(v) => obj["metadata"][field] = v.clone(),
            None => {
                if let Some(m) = obj["metadata"].as_object_mut() {
                    m.remove(field);
                }
            }
        }
    }
    if key.kind.has_status() {
        set_status(&mut obj, status_of(old));
    }
    match key.kind {
        ResourceKind::Service => key.kind.apply_create_defaults(&mut obj),
        ResourceKind::Namespace => {
            obj["spec"] = old["spec"].clone();
            let name = key.name.clone();
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
        }
        ResourceKind::EndpointSlice => endpointslice::set_generation(&mut obj, Some(old)),
        ResourceKind::Pod
        | ResourceKind::Endpoints
        | ResourceKind::ConfigMap
        | ResourceKind::Lease
        | ResourceKind::Event => {}
    }
    key.kind.validate(&obj, Some(old))?;
    if key.kind == ResourceKind::Service {
        dualstack::update_service(&mut state.ips, &key.name, old, &mut obj)?;
    }
    Ok(obj)
}
