//! How a [`Translation`] is printed: [`text`] for people (the args as YAML
//! list items to paste into a manifest, the ConfigMap as YAML, the config
//! key as JSON, then notes and the lines left out), [`json`] one document
//! with the same content for scripts.

use crate::translate::{KubeDnsConfigMap, Translation};
use serde_json::{json, Value};
use std::fmt::Write;

/// The text report.
pub fn text(t: &Translation) -> String {
    let mut out = String::new();
    section(
        &mut out,
        "skydns args (the skydns container's args)",
        &list(&t.skydns),
    );
    section(
        &mut out,
        "kube2sky args (the kube2sky container's args)",
        &list(&t.kube2sky),
    );
    if let Some(cm) = &t.config_map {
        section(
            &mut out,
            "kube-dns ConfigMap (kubectl apply -f -)",
            &config_map_yaml(cm),
        );
    }
    if let Some(key) = &t.config_key {
        let body = format!(
            "{}\n# etcdctl put /skydns/config '<the JSON above>' (in every pod's etcd in the single-pod layouts)\n",
            Value::Object(key.clone())
        );
        section(&mut out, "/skydns/config (etcd key)", &body);
    }
    let notes: String = t.notes.iter().map(|n| format!("- {n}\n")).collect();
    section(&mut out, "notes", &notes);
    let mut left = String::new();
    for l in &t.left_out {
        let _ = writeln!(
            left,
            "- [{}] {}:{}: {}\n  why: {}",
            l.block, l.file, l.line, l.text, l.reason
        );
    }
    if left.is_empty() {
        left = "(nothing: every plugin and option was carried over)\n".to_owned();
    }
    section(&mut out, "left out", &left);
    out
}

/// The JSON report: flags, configmap, config_key, left_out, notes.
pub fn json(t: &Translation) -> String {
    let doc = json!({
        "flags": {"skydns": t.skydns, "kube2sky": t.kube2sky},
        "configmap": t.config_map.as_ref().map(config_map_object),
        "config_key": t.config_key,
        "left_out": t.left_out,
        "notes": t.notes,
    });
    format!(
        "{}\n",
        serde_json::to_string_pretty(&doc).unwrap_or_default()
    )
}

fn section(out: &mut String, title: &str, body: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    let _ = writeln!(out, "# {title}");
    out.push_str(body);
}

/// Args as YAML list items, quoted (as JSON) where YAML would misread them.
fn list(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if a.contains(": ") || a.contains(" #") || a.ends_with(':') {
                format!("- {}\n", Value::String(a.clone()))
            } else {
                format!("- {a}\n")
            }
        })
        .collect()
}

/// The ConfigMap's data: each key a JSON string, as kube-dns reads it.
fn data(cm: &KubeDnsConfigMap) -> Vec<(&'static str, String)> {
    let mut data = Vec::new();
    if !cm.stub_domains.is_empty() {
        data.push(("stubDomains", json!(cm.stub_domains).to_string()));
    }
    if !cm.upstream_nameservers.is_empty() {
        data.push((
            "upstreamNameservers",
            json!(cm.upstream_nameservers).to_string(),
        ));
    }
    data
}

fn config_map_yaml(cm: &KubeDnsConfigMap) -> String {
    let mut out = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-dns\n  namespace: kube-system\ndata:\n",
    );
    for (key, value) in data(cm) {
        let _ = write!(out, "  {key}: |\n    {value}\n");
    }
    out
}

fn config_map_object(cm: &KubeDnsConfigMap) -> Value {
    let data: serde_json::Map<String, Value> = (data(cm).into_iter())
        .map(|(k, v)| (k.to_owned(), Value::String(v)))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kube-dns", "namespace": "kube-system"},
        "data": data,
    })
}

#[cfg(test)]
mod tests;
