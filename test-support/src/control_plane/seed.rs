//! Objects written straight into the control plane's etcd before kube-apiserver
//! starts, in the JSON its storage reads: a benchmark's 200,000 objects in
//! seconds, where POSTs would take most of an hour. Nothing is validated or
//! defaulted beyond what kube2sky reads.

use anyhow::{bail, ensure, Context, Result};
use base64::Engine;
use serde_json::{json, Value};
use std::path::Path;

/// Objects per etcd transaction (the control plane's etcd takes 1024).
const BATCH: usize = 1000;

/// Bytes of keys and values per transaction: under etcd's default request
/// limit of 1.5 MiB, with room for the base64 of the gateway.
const BATCH_BYTES: usize = 1 << 20;

/// Writes the objects of `file` (JSON documents, one after another or
/// between `---` lines) into the etcd at `endpoint`; returns how many.
pub(crate) fn load(endpoint: &str, file: &Path) -> Result<usize> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let now = now()?;
    let mut puts = Vec::new();
    for (n, doc) in documents(&text)?.into_iter().enumerate() {
        let what = || format!("{}, object {}", file.display(), n + 1);
        let (key, value) = stored(doc, n, &now).with_context(what)?;
        if let Some(ip) = ip_address_of(&key, &value, &now)? {
            puts.push(ip);
        }
        puts.push((key, value));
    }
    let count = puts.len();
    let endpoint = endpoint.to_string();
    // A runtime of its own, on a thread of its own: the caller may be in
    // a test's runtime already.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(put_all(&endpoint, puts))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the seed loader panicked"))??;
    Ok(count)
}

/// The JSON documents of a seed file.
fn documents(text: &str) -> Result<Vec<Value>> {
    let mut docs = Vec::new();
    for chunk in text.split("\n---\n") {
        let chunk = chunk.strip_prefix("---\n").unwrap_or(chunk);
        for doc in serde_json::Deserializer::from_str(chunk).into_iter::<Value>() {
            docs.push(doc.context("a seed document is not JSON")?);
        }
    }
    Ok(docs)
}

/// `obj`'s etcd key and stored JSON: metadata as the API server writes it
/// (uid, creationTimestamp, no resourceVersion), and the fields kube2sky
/// relies on that defaulting would add.
fn stored(mut obj: Value, n: usize, now: &str) -> Result<(String, String)> {
    let kind = obj["kind"].as_str().unwrap_or_default().to_string();
    let name = obj["metadata"]["name"]
        .as_str()
        .context("no metadata.name")?
        .to_string();
    let ns = obj["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let key = match kind.as_str() {
        "Namespace" => format!("/registry/namespaces/{name}"),
        "Service" => format!("/registry/services/specs/{ns}/{name}"),
        "Endpoints" => format!("/registry/services/endpoints/{ns}/{name}"),
        "Pod" => format!("/registry/pods/{ns}/{name}"),
        "EndpointSlice" => format!("/registry/endpointslices/{ns}/{name}"),
        "ConfigMap" => format!("/registry/configmaps/{ns}/{name}"),
        other => bail!("kind {other:?} cannot be seeded (Namespace, Service, Endpoints, Pod, EndpointSlice, ConfigMap)"),
    };
    let meta = obj["metadata"]
        .as_object_mut()
        .context("metadata is not an object")?;
    meta.remove("resourceVersion");
    meta.insert(
        "uid".into(),
        json!(format!("00000000-0000-4000-8000-{n:012x}")),
    );
    meta.insert("creationTimestamp".into(), json!(now));
    if kind != "Namespace" {
        meta.insert("namespace".into(), json!(ns));
    }
    match kind.as_str() {
        "Namespace" if obj["status"]["phase"].is_null() => {
            obj["status"] = json!({"phase": "Active"});
        }
        "Service" => {
            let spec = &mut obj["spec"];
            if spec["type"].is_null() {
                spec["type"] = json!("ClusterIP");
            }
            if let Some(ip) = spec["clusterIP"].as_str().filter(|ip| *ip != "None") {
                if spec["clusterIPs"].is_null() {
                    spec["clusterIPs"] = json!([ip]);
                }
            }
        }
        _ => {}
    }
    Ok((key, obj.to_string()))
}

/// `puts` in transactions of at most [`BATCH`] pairs and [`BATCH_BYTES`].
fn batches(puts: &[(String, String)]) -> Vec<&[(String, String)]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, (k, v)) in puts.iter().enumerate() {
        let size = k.len() + v.len();
        if i > start && (i - start == BATCH || bytes + size > BATCH_BYTES) {
            out.push(&puts[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < puts.len() {
        out.push(&puts[start..]);
    }
    out
}

/// The IPAddress object that allocates a seeded Service's cluster IP, as
/// kube-apiserver's allocator writes it: without it, the API server's
/// repair check at start finds 50,000 IPs not allocated, repairs them one
/// by one and gives up (its post-start hook fails, the server exits).
fn ip_address_of(key: &str, value: &str, now: &str) -> Result<Option<(String, String)>> {
    if !key.starts_with("/registry/services/specs/") {
        return Ok(None);
    }
    let service: Value = serde_json::from_str(value)?;
    let Some(ip) = service["spec"]["clusterIP"]
        .as_str()
        .filter(|ip| !ip.is_empty() && *ip != "None")
    else {
        return Ok(None);
    };
    let family = if ip.contains(':') { "IPv6" } else { "IPv4" };
    let object = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
        "metadata": {"name": ip, "creationTimestamp": now,
                     "uid": format!("{}-ip", service["metadata"]["uid"].as_str().unwrap_or_default()),
                     "labels": {"ipaddress.kubernetes.io/ip-family": family,
                                "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}},
        "spec": {"parentRef": {"group": "", "resource": "services",
                               "namespace": service["metadata"]["namespace"],
                               "name": service["metadata"]["name"]}},
    });
    Ok(Some((
        format!("/registry/ipaddresses/{ip}"),
        object.to_string(),
    )))
}

/// Puts every pair, in [`batches`], through etcd's JSON gateway.
async fn put_all(endpoint: &str, puts: Vec<(String, String)>) -> Result<()> {
    let client = reqwest::Client::builder().no_proxy().build()?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    for batch in batches(&puts) {
        let success: Vec<Value> = batch
            .iter()
            .map(|(k, v)| json!({"requestPut": {"key": b64(k), "value": b64(v)}}))
            .collect();
        let reply = client
            .post(format!("{endpoint}/v3/kv/txn"))
            .json(&json!({"success": success}))
            .send()
            .await
            .context("etcd's /v3/kv/txn")?;
        let status = reply.status();
        let body = reply.text().await?;
        ensure!(
            status.is_success(),
            "etcd refused a seed transaction ({status}): {body}"
        );
    }
    Ok(())
}

/// The current UTC time as RFC 3339, as `date` prints it.
fn now() -> Result<String> {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .context("running date")?;
    ensure!(out.status.success(), "date failed");
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactions_are_cut_by_count_and_by_bytes() {
        let small: Vec<_> = (0..2500)
            .map(|n| (format!("k{n}"), "v".to_string()))
            .collect();
        let sizes: Vec<usize> = batches(&small).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [1000, 1000, 500]);
        let big = "x".repeat(400 << 10);
        let large: Vec<_> = (0..5).map(|n| (format!("k{n}"), big.clone())).collect();
        let sizes: Vec<usize> = batches(&large).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [2, 2, 1]);
        assert!(batches(&[]).is_empty());
    }

    #[test]
    fn a_stream_may_begin_with_a_separator() {
        let docs = documents("---\n{\"kind\":\"Namespace\"}\n---\n{\"kind\":\"Pod\"}").unwrap();
        assert_eq!(docs.len(), 2);
    }

    #[test]
    fn each_kind_goes_under_the_api_servers_key_with_its_metadata() {
        let docs = documents(
            r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","namespace":"ns1","resourceVersion":"9"},"spec":{"clusterIP":"10.1.0.1"}}
---
{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ns1"}}"#,
        )
        .unwrap();
        let (key, value) = stored(docs[0].clone(), 1, "2026-11-29T00:00:00Z").unwrap();
        assert_eq!(key, "/registry/services/specs/ns1/s");
        let value: Value = serde_json::from_str(&value).unwrap();
        assert_eq!(
            value["metadata"]["uid"],
            "00000000-0000-4000-8000-000000000001"
        );
        assert_eq!(
            value["metadata"]["creationTimestamp"],
            "2026-11-29T00:00:00Z"
        );
        assert!(value["metadata"]["resourceVersion"].is_null());
        assert_eq!(value["spec"]["type"], "ClusterIP");
        assert_eq!(value["spec"]["clusterIPs"], json!(["10.1.0.1"]));
        let (ip_key, ip) = ip_address_of(&key, &value.to_string(), "t")
            .unwrap()
            .unwrap();
        assert_eq!(ip_key, "/registry/ipaddresses/10.1.0.1");
        let ip: Value = serde_json::from_str(&ip).unwrap();
        let parent = json!({"group": "", "resource": "services", "namespace": "ns1", "name": "s"});
        assert_eq!(ip["spec"]["parentRef"], parent);
        assert_eq!(
            ip["metadata"]["labels"]["ipaddress.kubernetes.io/ip-family"],
            "IPv4"
        );
        let (key, value) = stored(docs[1].clone(), 2, "t").unwrap();
        assert!(ip_address_of(&key, &value, "t").unwrap().is_none());
        assert_eq!(key, "/registry/namespaces/ns1");
        assert!(value.contains(r#""phase":"Active""#), "{value}");
        let lease = json!({"kind": "Lease", "metadata": {"name": "l"}});
        let err = stored(lease, 3, "t").unwrap_err();
        assert!(
            err.to_string().contains("kind \"Lease\" cannot be seeded"),
            "{err}"
        );
    }
}
