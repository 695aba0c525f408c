//! The rules of create and update: what the server fills in, checks, keeps.
//!
//! Owns the metadata the server manages (`uid`, `creationTimestamp`,
//! `generateName`), namespace existence checks, name validation, immutable
//! fields on update (identity, Service `clusterIP`), the status/spec split of
//! a main-resource update, and cluster IP allocation/release for Services.

use std::hash::{BuildHasher, RandomState};

use serde_json::{json, Value};

use super::history::Key;
use super::resource::{set_status, status_of, ResourceKind};
use super::status::ApiError;
use super::store::{Inner, Store};

/// Fills in and checks a new object; returns its key. Nothing is stored yet.
pub(crate) fn prepare_create(
    inner: &mut Inner,
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
        if !inner.objects.contains_key(&ns_key) {
            return Err(ApiError::not_found("namespaces", &namespace));
        }
    }
    let key = Key {
        kind,
        namespace,
        name,
    };
    if inner.objects.contains_key(&key) {
        return Err(ApiError::already_exists(kind.plural(), &key.name));
    }
    if let Some(meta) = obj["metadata"].as_object_mut() {
        meta.insert("uid".into(), json!(Store::new_uid()));
        meta.insert("creationTimestamp".into(), Store::now());
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
    if kind == ResourceKind::Service {
        allocate_cluster_ip(inner, &key, obj)?;
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
                kind.kind(),
                kind.plural(),
                "",
                "metadata.name: Required value: name or generateName is required",
            ));
        }
        name = format!("{prefix}{}", random_suffix());
        meta["name"] = json!(name);
    }
    kind.validate_name(&name)
        .map_err(|e| ApiError::invalid(kind.kind(), kind.plural(), &name, &e))?;
    Ok(name)
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

fn needs_cluster_ip(svc: &Value) -> bool {
    svc["spec"]["type"].as_str() != Some("ExternalName")
}

/// An ExternalName Service has no cluster IP and no IP families.
fn clear_cluster_ip(spec: &mut Value) {
    if let Some(spec) = spec.as_object_mut() {
        for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            spec.remove(field);
        }
    }
}

fn allocate_cluster_ip(inner: &mut Inner, key: &Key, obj: &mut Value) -> Result<(), ApiError> {
    if !needs_cluster_ip(obj) {
        clear_cluster_ip(&mut obj["spec"]);
        return Ok(());
    }
    let spec = &mut obj["spec"];
    let requested = spec["clusterIP"]
        .as_str()
        .or_else(|| spec["clusterIPs"][0].as_str())
        .unwrap_or_default()
        .to_string();
    let ip = match requested.as_str() {
        "None" => requested,
        "" => inner.ips.allocate().ok_or_else(|| {
            ApiError::invalid(
                "Service",
                "services",
                &key.name,
                "spec.clusterIPs: Internal error: failed to allocate a serviceIP: range is full",
            )
        })?,
        ip => {
            inner
                .ips
                .reserve(ip)
                .map_err(|e| ApiError::invalid("Service", "services", &key.name, &e))?;
            requested
        }
    };
    spec["clusterIP"] = json!(ip);
    spec["clusterIPs"] = json!([ip]);
    Ok(())
}

/// Frees what a deleted object held (its cluster IP).
pub(crate) fn release(inner: &mut Inner, key: &Key, obj: &Value) {
    if key.kind == ResourceKind::Service {
        if let Some(ip) = obj["spec"]["clusterIP"].as_str() {
            inner.ips.release(ip);
        }
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
    inner: &mut Inner,
    key: &Key,
    old: &Value,
    mut obj: Value,
) -> Result<Value, ApiError> {
    for field in [
        "uid",
        "creationTimestamp",
        "resourceVersion",
        "generateName",
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
        ResourceKind::Service => {
            key.kind.apply_create_defaults(&mut obj);
            keep_cluster_ip(inner, key, old, &mut obj)?;
        }
        ResourceKind::Namespace => {
            obj["spec"] = old["spec"].clone();
            let name = key.name.clone();
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
        }
        ResourceKind::Pod | ResourceKind::Endpoints | ResourceKind::Lease => {}
    }
    Ok(obj)
}

/// Cluster IP handling on update, as kube-apiserver's Service REST does:
/// the IP is immutable while the type needs one; a change to ExternalName
/// drops it (unless a different one was asked for) and frees it; a change
/// from ExternalName allocates one (or reserves the requested one).
fn keep_cluster_ip(
    inner: &mut Inner,
    key: &Key,
    old: &Value,
    obj: &mut Value,
) -> Result<(), ApiError> {
    let ip_of = |v: &Value| {
        v["spec"]["clusterIP"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let (old_ip, new_ip) = (ip_of(old), ip_of(obj));
    match (needs_cluster_ip(old), needs_cluster_ip(obj)) {
        (false, _) => allocate_cluster_ip(inner, key, obj),
        (true, false) => {
            if !new_ip.is_empty() && new_ip != old_ip {
                return Err(ApiError::invalid(
                    "Service",
                    "services",
                    &key.name,
                    "spec.clusterIPs: Invalid value: must be empty for type ExternalName",
                ));
            }
            clear_cluster_ip(&mut obj["spec"]);
            if old_ip != "None" {
                inner.ips.release(&old_ip);
            }
            Ok(())
        }
        (true, true) if new_ip.is_empty() || new_ip == old_ip => {
            obj["spec"]["clusterIP"] = old["spec"]["clusterIP"].clone();
            obj["spec"]["clusterIPs"] = old["spec"]["clusterIPs"].clone();
            Ok(())
        }
        (true, true) => Err(ApiError::invalid(
            "Service",
            "services",
            &key.name,
            &format!(
                "spec.clusterIPs[0]: Invalid value: []string{{\"{new_ip}\"}}: may not change once set"
            ),
        )),
    }
}
