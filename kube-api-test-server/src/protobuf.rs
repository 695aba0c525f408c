//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`), as
//! kubectl's typed generators and client-go send them, decoded with `k8s-pb`'s
//! prost types into the JSON the store holds. A field the converters do not
//! know is refused with 415, never dropped silently. Responses stay JSON.

use std::collections::BTreeMap;
use std::mem::take;

use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{json, Map, Value};

use super::resource::ResourceKind;
use super::status::ApiError;

/// The protobuf media type.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

const MAGIC: &[u8] = b"k8s\0";

/// Decodes a protobuf request body for `kind` into its JSON form. A body
/// with fields this module does not decode is a 415 naming `accepted`, the
/// media types the caller takes instead.
pub(crate) fn decode(kind: ResourceKind, body: &[u8], accepted: &str) -> Result<Value, ApiError> {
    let bad = |why: String| ApiError::bad_request(format!("error decoding request body: {why}"));
    let envelope = body.strip_prefix(MAGIC).ok_or_else(|| {
        bad("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]".into())
    })?;
    let unknown = Unknown::decode(envelope).map_err(|e| bad(e.to_string()))?;
    if unknown
        .content_encoding
        .as_deref()
        .is_some_and(|e| !e.is_empty())
    {
        return Err(bad("content encodings are not supported".into()));
    }
    let type_meta = unknown.type_meta.unwrap_or_default();
    let raw = unknown.raw.unwrap_or_default();
    let mut obj = Map::new();
    obj.insert(
        "apiVersion".into(),
        json!(type_meta.api_version.unwrap_or_default()),
    );
    obj.insert("kind".into(), json!(type_meta.kind.unwrap_or_default()));
    let residue = match kind {
        ResourceKind::Namespace => {
            let mut m = pb::Namespace::decode(raw.as_slice()).map_err(|e| bad(e.to_string()))?;
            namespace(&mut m, &mut obj);
            m.encode_to_vec()
        }
        ResourceKind::Service => {
            let mut m = pb::Service::decode(raw.as_slice()).map_err(|e| bad(e.to_string()))?;
            service(&mut m, &mut obj);
            m.encode_to_vec()
        }
        ResourceKind::Endpoints => {
            let mut m = pb::Endpoints::decode(raw.as_slice()).map_err(|e| bad(e.to_string()))?;
            put(&mut obj, "metadata", Some(meta(&mut m.metadata)));
            put(&mut obj, "subsets", list(&mut m.subsets, subset));
            m.encode_to_vec()
        }
        ResourceKind::Pod => {
            let mut m = pb::Pod::decode(raw.as_slice()).map_err(|e| bad(e.to_string()))?;
            pod(&mut m, &mut obj);
            m.encode_to_vec()
        }
        ResourceKind::ConfigMap => {
            let mut m = pb::ConfigMap::decode(raw.as_slice()).map_err(|e| bad(e.to_string()))?;
            config_map(&mut m, &mut obj);
            m.encode_to_vec()
        }
        // kubectl sends protobuf for core kinds only.
        ResourceKind::Lease | ResourceKind::EndpointSlice | ResourceKind::Event => raw,
    };
    if !all_zero(&residue) {
        return Err(ApiError::unsupported_media_type(
            &format!("{MEDIA_TYPE} (this {} sets fields the test server does not decode from protobuf; send application/json)", kind.kind()),
            accepted,
        ));
    }
    Ok(Value::Object(obj))
}

fn put(obj: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    match value {
        Some(Value::Object(m)) if m.is_empty() => {}
        Some(v) => {
            obj.insert(key.into(), v);
        }
        None => {}
    }
}

fn text(v: &mut Option<String>) -> Option<Value> {
    v.take().filter(|s| !s.is_empty()).map(Value::String)
}

fn int<T: Into<serde_json::Number> + Default + PartialEq>(v: &mut Option<T>) -> Option<Value> {
    v.take()
        .filter(|n| *n != T::default())
        .map(|n| Value::Number(n.into()))
}

/// A non-pointer Go bool: `false` is its zero value and is omitted.
fn truth(v: &mut Option<bool>) -> Option<Value> {
    v.take().filter(|b| *b).map(Value::Bool)
}

fn strings(v: &mut Vec<String>) -> Option<Value> {
    let v = take(v);
    (!v.is_empty()).then(|| json!(v))
}

fn string_map(v: &mut BTreeMap<String, String>) -> Option<Value> {
    let v = take(v);
    (!v.is_empty()).then(|| json!(v))
}

fn quantities(v: &mut BTreeMap<String, Quantity>) -> Option<Value> {
    let v = take(v);
    let m: Map<String, Value> = v
        .into_iter()
        .map(|(k, q)| (k, json!(q.string.unwrap_or_default())))
        .collect();
    (!m.is_empty()).then_some(Value::Object(m))
}

fn list<T>(v: &mut [T], f: fn(&mut T) -> Value) -> Option<Value> {
    let items: Vec<Value> = v.iter_mut().map(f).collect();
    // The emptied items stay behind for the residue check.
    (!items.is_empty()).then_some(Value::Array(items))
}

fn object(fields: Vec<(&str, Option<Value>)>) -> Value {
    let mut m = Map::new();
    for (k, v) in fields {
        put(&mut m, k, v);
    }
    Value::Object(m)
}

fn meta(m: &mut Option<ObjectMeta>) -> Value {
    let Some(m) = m.as_mut() else {
        return json!({});
    };
    // Server-managed fields: the store sets or keeps its own values.
    m.self_link.take();
    m.generation.take();
    m.creation_timestamp.take();
    m.deletion_timestamp.take();
    m.deletion_grace_period_seconds.take();
    m.managed_fields.clear();
    object(vec![
        ("name", text(&mut m.name)),
        ("generateName", text(&mut m.generate_name)),
        ("namespace", text(&mut m.namespace)),
        ("uid", text(&mut m.uid)),
        ("resourceVersion", text(&mut m.resource_version)),
        ("labels", string_map(&mut m.labels)),
        ("annotations", string_map(&mut m.annotations)),
        ("finalizers", strings(&mut m.finalizers)),
    ])
}

fn namespace(m: &mut pb::Namespace, obj: &mut Map<String, Value>) {
    put(obj, "metadata", Some(meta(&mut m.metadata)));
    if let Some(spec) = m.spec.as_mut() {
        put(
            obj,
            "spec",
            Some(object(vec![("finalizers", strings(&mut spec.finalizers))])),
        );
    }
    if let Some(status) = m.status.as_mut() {
        put(
            obj,
            "status",
            Some(object(vec![("phase", text(&mut status.phase))])),
        );
    }
}

/// A ConfigMap (`kubectl create configmap`): `immutable` is a pointer in Go,
/// so an explicit `false` is kept; `binaryData` becomes base64 text.
fn config_map(m: &mut pb::ConfigMap, obj: &mut Map<String, Value>) {
    put(obj, "metadata", Some(meta(&mut m.metadata)));
    put(obj, "data", string_map(&mut m.data));
    let binary: Map<String, Value> = take(&mut m.binary_data)
        .into_iter()
        .map(|(k, v)| (k, json!(k8s_openapi::ByteString(v))))
        .collect();
    if !binary.is_empty() {
        obj.insert("binaryData".into(), Value::Object(binary));
    }
    if let Some(immutable) = m.immutable.take() {
        obj.insert("immutable".into(), Value::Bool(immutable));
    }
}

fn service(m: &mut pb::Service, obj: &mut Map<String, Value>) {
    put(obj, "metadata", Some(meta(&mut m.metadata)));
    if let Some(s) = m.spec.as_mut() {
        let spec = object(vec![
            ("ports", list(&mut s.ports, service_port)),
            ("selector", string_map(&mut s.selector)),
            ("clusterIP", text(&mut s.cluster_ip)),
            ("clusterIPs", strings(&mut s.cluster_ips)),
            ("type", text(&mut s.r#type)),
            ("externalIPs", strings(&mut s.external_ips)),
            ("sessionAffinity", text(&mut s.session_affinity)),
            ("loadBalancerIP", text(&mut s.load_balancer_ip)),
            ("externalName", text(&mut s.external_name)),
            (
                "externalTrafficPolicy",
                text(&mut s.external_traffic_policy),
            ),
            (
                "internalTrafficPolicy",
                text(&mut s.internal_traffic_policy),
            ),
            (
                "publishNotReadyAddresses",
                truth(&mut s.publish_not_ready_addresses),
            ),
            ("ipFamilies", strings(&mut s.ip_families)),
            ("ipFamilyPolicy", text(&mut s.ip_family_policy)),
        ]);
        put(obj, "spec", Some(spec));
    }
    if let Some(status) = m.status.as_mut() {
        let ingress = status.load_balancer.as_mut().and_then(|lb| {
            list(&mut lb.ingress, |i| {
                object(vec![
                    ("ip", text(&mut i.ip)),
                    ("hostname", text(&mut i.hostname)),
                ])
            })
        });
        if let Some(ingress) = ingress {
            put(
                obj,
                "status",
                Some(json!({ "loadBalancer": { "ingress": ingress } })),
            );
        }
    }
}

fn service_port(p: &mut pb::ServicePort) -> Value {
    object(vec![
        ("name", text(&mut p.name)),
        ("protocol", text(&mut p.protocol)),
        ("appProtocol", text(&mut p.app_protocol)),
        ("port", int(&mut p.port)),
        ("targetPort", p.target_port.take().and_then(int_or_string)),
        ("nodePort", int(&mut p.node_port)),
    ])
}

fn int_or_string(v: IntOrString) -> Option<Value> {
    match v.r#type {
        Some(1) => v.str_val.filter(|s| !s.is_empty()).map(Value::String),
        _ => v.int_val.filter(|n| *n != 0).map(Value::from),
    }
}

fn subset(s: &mut pb::EndpointSubset) -> Value {
    object(vec![
        ("addresses", list(&mut s.addresses, address)),
        (
            "notReadyAddresses",
            list(&mut s.not_ready_addresses, address),
        ),
        (
            "ports",
            list(&mut s.ports, |p| {
                object(vec![
                    ("name", text(&mut p.name)),
                    ("port", int(&mut p.port)),
                    ("protocol", text(&mut p.protocol)),
                    ("appProtocol", text(&mut p.app_protocol)),
                ])
            }),
        ),
    ])
}

fn address(a: &mut pb::EndpointAddress) -> Value {
    let target = a.target_ref.as_mut().map(|r| {
        object(vec![
            ("kind", text(&mut r.kind)),
            ("namespace", text(&mut r.namespace)),
            ("name", text(&mut r.name)),
            ("uid", text(&mut r.uid)),
            ("apiVersion", text(&mut r.api_version)),
            ("resourceVersion", text(&mut r.resource_version)),
            ("fieldPath", text(&mut r.field_path)),
        ])
    });
    object(vec![
        ("ip", text(&mut a.ip)),
        ("hostname", text(&mut a.hostname)),
        ("nodeName", text(&mut a.node_name)),
        ("targetRef", target),
    ])
}

fn pod(m: &mut pb::Pod, obj: &mut Map<String, Value>) {
    put(obj, "metadata", Some(meta(&mut m.metadata)));
    if let Some(s) = m.spec.as_mut() {
        let spec = object(vec![
            ("containers", list(&mut s.containers, container)),
            ("restartPolicy", text(&mut s.restart_policy)),
            (
                "terminationGracePeriodSeconds",
                int(&mut s.termination_grace_period_seconds),
            ),
            ("dnsPolicy", text(&mut s.dns_policy)),
            ("nodeSelector", string_map(&mut s.node_selector)),
            ("serviceAccountName", text(&mut s.service_account_name)),
            ("serviceAccount", text(&mut s.service_account)),
            ("nodeName", text(&mut s.node_name)),
            ("hostNetwork", truth(&mut s.host_network)),
            ("hostname", text(&mut s.hostname)),
            ("subdomain", text(&mut s.subdomain)),
            ("schedulerName", text(&mut s.scheduler_name)),
            ("priority", int(&mut s.priority)),
        ]);
        put(obj, "spec", Some(spec));
    }
    if let Some(s) = m.status.as_mut() {
        let ips = list(&mut s.pod_ips, |p| object(vec![("ip", text(&mut p.ip))]));
        let status = object(vec![
            ("phase", text(&mut s.phase)),
            ("hostIP", text(&mut s.host_ip)),
            ("podIP", text(&mut s.pod_ip)),
            ("podIPs", ips),
            ("nominatedNodeName", text(&mut s.nominated_node_name)),
            ("qosClass", text(&mut s.qos_class)),
        ]);
        put(obj, "status", Some(status));
    }
}

fn container(c: &mut pb::Container) -> Value {
    let resources = c.resources.as_mut().map(|r| {
        object(vec![
            ("limits", quantities(&mut r.limits)),
            ("requests", quantities(&mut r.requests)),
        ])
    });
    object(vec![
        ("name", text(&mut c.name)),
        ("image", text(&mut c.image)),
        ("command", strings(&mut c.command)),
        ("args", strings(&mut c.args)),
        ("workingDir", text(&mut c.working_dir)),
        (
            "ports",
            list(&mut c.ports, |p| {
                object(vec![
                    ("name", text(&mut p.name)),
                    ("containerPort", int(&mut p.container_port)),
                    ("protocol", text(&mut p.protocol)),
                    ("hostPort", int(&mut p.host_port)),
                    ("hostIP", text(&mut p.host_ip)),
                ])
            }),
        ),
        (
            "env",
            list(&mut c.env, |e| {
                object(vec![
                    ("name", text(&mut e.name)),
                    ("value", text(&mut e.value)),
                ])
            }),
        ),
        ("resources", resources.or(Some(json!({})))),
        ("imagePullPolicy", text(&mut c.image_pull_policy)),
        (
            "terminationMessagePath",
            text(&mut c.termination_message_path),
        ),
        (
            "terminationMessagePolicy",
            text(&mut c.termination_message_policy),
        ),
        ("stdin", truth(&mut c.stdin)),
        ("stdinOnce", truth(&mut c.stdin_once)),
        ("tty", truth(&mut c.tty)),
    ])
}

/// Whether an encoded message holds nothing but zero values (recursively).
fn all_zero(mut buf: &[u8]) -> bool {
    while !buf.is_empty() {
        let Some((tag, rest)) = varint(buf) else {
            return false;
        };
        buf = rest;
        match tag & 7 {
            0 => match varint(buf) {
                Some((0, rest)) => buf = rest,
                _ => return false,
            },
            1 | 5 => {
                let n = if tag & 7 == 1 { 8 } else { 4 };
                match buf.split_at_checked(n) {
                    Some((v, rest)) if v.iter().all(|b| *b == 0) => buf = rest,
                    _ => return false,
                }
            }
            2 => {
                let Some((len, rest)) = varint(buf) else {
                    return false;
                };
                let Some((inner, rest)) = usize::try_from(len)
                    .ok()
                    .and_then(|len| rest.split_at_checked(len))
                else {
                    return false;
                };
                if !all_zero(inner) {
                    return false;
                }
                buf = rest;
            }
            _ => return false,
        }
    }
    true
}

fn varint(buf: &[u8]) -> Option<(u64, &[u8])> {
    let mut value = 0u64;
    for (i, b) in buf.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, &buf[i + 1..]));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_detection() {
        assert!(all_zero(&[]));
        // field 1 varint 0, field 2 empty bytes, field 3 message {field 1: 0}
        assert!(all_zero(&[0x08, 0x00, 0x12, 0x00, 0x1a, 0x02, 0x08, 0x00]));
        assert!(!all_zero(&[0x08, 0x01]));
        // field 2 = "x"
        assert!(!all_zero(&[0x12, 0x01, b'x']));
    }

    /// What `kubectl create configmap --from-literal` sends decodes into
    /// the JSON form, `binaryData` as base64 and an explicit
    /// `immutable: false` kept.
    #[test]
    fn config_map_from_protobuf() {
        let cm = pb::ConfigMap {
            metadata: Some(ObjectMeta {
                name: Some("kube-dns".into()),
                namespace: Some("kube-system".into()),
                ..ObjectMeta::default()
            }),
            data: BTreeMap::from([("stubDomains".into(), r#"{"acme.local":["1.2.3.4"]}"#.into())]),
            binary_data: BTreeMap::from([("bin".into(), vec![0, 1])]),
            immutable: Some(false),
        };
        let unknown = Unknown {
            type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
                api_version: Some("v1".into()),
                kind: Some("ConfigMap".into()),
            }),
            raw: Some(cm.encode_to_vec()),
            ..Unknown::default()
        };
        let body = [MAGIC, &unknown.encode_to_vec()].concat();
        let obj = decode(ResourceKind::ConfigMap, &body, "application/json").unwrap();
        assert_eq!(
            obj,
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kube-dns", "namespace": "kube-system"},
                "data": {"stubDomains": r#"{"acme.local":["1.2.3.4"]}"#},
                "binaryData": {"bin": "AAE="},
                "immutable": false,
            })
        );
        // An Event is not decoded from protobuf: 415, send JSON.
        let err = decode(ResourceKind::Event, &body, "application/json").unwrap_err();
        assert_eq!(err.code, 415);
    }
}
