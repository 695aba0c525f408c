//! Server-side printing: `meta.k8s.io/v1` Table responses for `kubectl get`,
//! with the columns kube-apiserver prints for each kind, when a GET's `Accept`
//! header asks for `as=Table`.

use http::HeaderMap;
use serde_json::{json, Value};

use super::resource::ResourceKind;

/// Whether the client asked for a Table (`Accept: ...;as=Table;...`).
pub(crate) fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .next()
        .is_some_and(|first| first.split(';').any(|p| p.trim() == "as=Table"))
}

fn column(name: &str, ty: &str, format: &str, priority: u8) -> Value {
    json!({ "name": name, "type": ty, "format": format, "description": name, "priority": priority })
}

fn columns(kind: ResourceKind) -> Vec<Value> {
    let name = column("Name", "string", "name", 0);
    let age = column("Age", "string", "", 0);
    match kind {
        ResourceKind::Service => vec![
            name,
            column("Type", "string", "", 0),
            column("Cluster-IP", "string", "", 0),
            column("External-IP", "string", "", 0),
            column("Port(s)", "string", "", 0),
            age,
            column("Selector", "string", "", 1),
        ],
        ResourceKind::Endpoints => vec![name, column("Endpoints", "string", "", 0), age],
        ResourceKind::Pod => vec![
            name,
            column("Ready", "string", "", 0),
            column("Status", "string", "", 0),
            column("Restarts", "string", "", 0),
            age,
            column("IP", "string", "", 1),
            column("Node", "string", "", 1),
        ],
        ResourceKind::Namespace => vec![name, column("Status", "string", "", 0), age],
        ResourceKind::ConfigMap => vec![name, column("Data", "string", "", 0), age],
        ResourceKind::Lease => vec![name, column("Holder", "string", "", 0), age],
        ResourceKind::Event => vec![
            column("Last Seen", "string", "", 0),
            column("Type", "string", "", 0),
            column("Reason", "string", "", 0),
            column("Object", "string", "", 0),
            column("Subobject", "string", "", 1),
            column("Source", "string", "", 1),
            column("Message", "string", "", 0),
            column("First Seen", "string", "", 1),
            column("Count", "string", "", 1),
            column("Name", "string", "name", 1),
        ],
        ResourceKind::EndpointSlice => vec![
            name,
            column("AddressType", "string", "", 0),
            column("Ports", "string", "", 0),
            column("Endpoints", "string", "", 0),
            age,
        ],
    }
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn or_none(v: String) -> String {
    if v.is_empty() {
        "<none>".into()
    } else {
        v
    }
}

fn cells(kind: ResourceKind, obj: &Value) -> Vec<Value> {
    let name = json!(s(&obj["metadata"]["name"]));
    let age = json!(age(&obj["metadata"]["creationTimestamp"]));
    let spec = &obj["spec"];
    match kind {
        ResourceKind::Service => {
            let ports: Vec<String> = spec["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| format!("{}/{}", p["port"], s(&p["protocol"])))
                .collect();
            let selector: Vec<String> = spec["selector"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| format!("{k}={}", s(v)))
                .collect();
            let external: Vec<String> = spec["externalIPs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(s)
                .collect();
            vec![
                name,
                json!(s(&spec["type"])),
                json!(or_none(s(&spec["clusterIP"]))),
                json!(or_none(external.join(","))),
                json!(or_none(ports.join(","))),
                age,
                json!(or_none(selector.join(","))),
            ]
        }
        ResourceKind::Endpoints => vec![name, json!(or_none(endpoint_list(obj))), age],
        ResourceKind::Pod => {
            let status = &obj["status"];
            let statuses = status["containerStatuses"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let total = spec["containers"].as_array().map_or(0, Vec::len);
            let ready = statuses
                .iter()
                .filter(|c| c["ready"] == json!(true))
                .count();
            let restarts: u64 = statuses
                .iter()
                .filter_map(|c| c["restartCount"].as_u64())
                .sum();
            vec![
                name,
                json!(format!("{ready}/{total}")),
                json!(s(&status["phase"])),
                json!(restarts.to_string()),
                age,
                json!(or_none(s(&status["podIP"]))),
                json!(or_none(s(&spec["nodeName"]))),
            ]
        }
        ResourceKind::Namespace => vec![name, json!(s(&obj["status"]["phase"])), age],
        ResourceKind::ConfigMap => {
            let count = |f: &str| obj[f].as_object().map_or(0, serde_json::Map::len);
            vec![name, json!(count("data") + count("binaryData")), age]
        }
        ResourceKind::Lease => vec![name, json!(s(&spec["holderIdentity"])), age],
        ResourceKind::EndpointSlice => slice_cells(obj, name, age),
        ResourceKind::Event => event_cells(obj, name),
    }
}

/// An events.k8s.io Event's row, as kube-apiserver's `printEvent` renders
/// the v1 fields: last seen (the series' last observation, else the
/// deprecated last timestamp, else the first seen), type, reason, object
/// (`kind/name` of `regarding`), subobject, source, message (`note`),
/// first seen (the deprecated first timestamp, else `eventTime`), count
/// (the series', else 1 for a singleton) and name.
fn event_cells(obj: &Value, name: Value) -> Vec<Value> {
    let first = match &obj["deprecatedFirstTimestamp"] {
        Value::Null => age(&obj["eventTime"]),
        t => age(t),
    };
    let series = &obj["series"];
    let last = match (&series["lastObservedTime"], &obj["deprecatedLastTimestamp"]) {
        (Value::Null, Value::Null) => first.clone(),
        (Value::Null, t) | (t, _) => age(t),
    };
    let count = series["count"]
        .as_i64()
        .or_else(|| obj["deprecatedCount"].as_i64().filter(|n| *n != 0))
        .unwrap_or(1);
    let regarding = &obj["regarding"];
    let kind = s(&regarding["kind"]).to_lowercase();
    let target = match s(&regarding["name"]) {
        n if n.is_empty() => kind,
        n => format!("{kind}/{n}"),
    };
    let source = &obj["deprecatedSource"];
    let component = or_else(s(&source["component"]), s(&obj["reportingController"]));
    let source = match or_else(s(&source["host"]), s(&obj["reportingInstance"])) {
        i if i.is_empty() => component,
        i => format!("{component}, {i}"),
    };
    vec![
        json!(last),
        json!(s(&obj["type"])),
        json!(s(&obj["reason"])),
        json!(target),
        json!(s(&regarding["fieldPath"])),
        json!(source),
        json!(s(&obj["note"]).trim()),
        json!(first),
        json!(count),
        name,
    ]
}

fn or_else(v: String, other: String) -> String {
    if v.is_empty() {
        other
    } else {
        v
    }
}

/// An EndpointSlice's row: name, address type, ports, addresses, age.
fn slice_cells(obj: &Value, name: Value, age: Value) -> Vec<Value> {
    let ports = obj["ports"].as_array().into_iter().flatten().map(|p| {
        p["port"]
            .as_i64()
            .map_or_else(|| or_star(s(&p["name"])), |n| n.to_string())
    });
    let addresses = obj["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|e| e["addresses"].as_array().into_iter().flatten().map(s));
    vec![
        name,
        json!(s(&obj["addressType"])),
        json!(first_three(ports)),
        json!(first_three(addresses)),
        age,
    ]
}

fn or_star(v: String) -> String {
    if v.is_empty() {
        "*".into()
    } else {
        v
    }
}

/// kubectl's `listWithMoreString`: up to three items, then `+ N more...`;
/// `<unset>` for none.
fn first_three(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    match items.len() {
        0 => "<unset>".into(),
        1..=3 => items.join(","),
        n => format!("{} + {} more...", items[..3].join(","), n - 3),
    }
}

fn endpoint_list(obj: &Value) -> String {
    let mut out = Vec::new();
    for subset in obj["subsets"].as_array().into_iter().flatten() {
        let ports: Vec<u64> = subset["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["port"].as_u64())
            .collect();
        for addr in subset["addresses"].as_array().into_iter().flatten() {
            let ip = s(&addr["ip"]);
            if ports.is_empty() {
                out.push(ip);
            } else {
                out.extend(ports.iter().map(|p| format!("{ip}:{p}")));
            }
        }
    }
    out.join(",")
}

/// kubectl-style age (`45s`, `12m`, `3h`, `5d`) of an RFC 3339 timestamp.
fn age(ts: &Value) -> String {
    let Some(then) = ts
        .as_str()
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
    else {
        return "<unknown>".into();
    };
    let secs = (super::clock::now_timestamp().as_second() - then.as_second()).max(0);
    match secs {
        0..120 => format!("{secs}s"),
        120..7200 => format!("{}m", secs / 60),
        7200..172_800 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

fn row_object(obj: &Value, include: &str) -> Option<Value> {
    match include {
        "None" => None,
        "Object" => Some(obj.clone()),
        _ => Some(json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"],
        })),
    }
}

/// Renders `items` as a Table; `list_meta` becomes the Table's metadata.
pub(crate) fn table(
    kind: ResourceKind,
    items: &[Value],
    list_meta: Value,
    include_object: Option<&str>,
) -> Value {
    let include = include_object.unwrap_or("Metadata");
    let rows: Vec<Value> = items
        .iter()
        .map(|obj| {
            let mut row = json!({ "cells": cells(kind, obj) });
            if let Some(o) = row_object(obj, include) {
                row["object"] = o;
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns(kind),
        "rows": rows,
    })
}
