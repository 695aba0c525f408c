//! The dashboard and the recording rules of `deploy/monitoring/` against a
//! real Prometheus (Debian's `prometheus`) scraping a local pod: etcd,
//! kube2sky, skydns (one upstream that answers, one that never does) and
//! exec-healthz probing it. After a little traffic of every kind (answers,
//! NXDOMAIN, SERVFAIL, forwards, cache hits), every panel's query of
//! `kube-dns-rs.dashboard.json` and every recording rule's expression
//! parses and returns series through Prometheus's HTTP API.

#[path = "../../kube2sky/tests/support/mod.rs"]
mod kube2sky_support;

use anyhow::{ensure, Context, Result};
use kube2sky_support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use test_support::dead::silent_upstream;
use test_support::dns::dig;
use test_support::dnsmasq::Dnsmasq;
use test_support::http::{get, start_server};
use test_support::skydns::SkydnsBinary;
use test_support::wait::{eventually, DEADLINE};

fn monitoring(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/monitoring")
        .join(name)
}

/// Every panel target's expression in the dashboard.
fn dashboard_queries() -> Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(monitoring("kube-dns-rs.dashboard.json"))?;
    let dashboard: Value = serde_json::from_str(&text)?;
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().context("panels")? {
        let title = panel["title"].as_str().context("title")?;
        for target in panel["targets"].as_array().context("targets")? {
            let expr = target["expr"].as_str().context("expr")?;
            out.push((title.to_string(), expr.to_string()));
        }
    }
    Ok(out)
}

/// Every recording rule, as (name, expression).
fn recording_rules() -> Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(monitoring("kube-dns-rs.rules.yaml"))?;
    let rules: serde_yaml::Value = serde_yaml::from_str(&text)?;
    let mut out = Vec::new();
    for group in rules["groups"].as_sequence().context("groups")? {
        for rule in group["rules"].as_sequence().context("rules")? {
            if let (Some(name), Some(expr)) = (rule["record"].as_str(), rule["expr"].as_str()) {
                out.push((name.to_string(), expr.to_string()));
            }
        }
    }
    Ok(out)
}

/// `query` through Prometheus's API: its result vector.
async fn instant(base: &str, query: &str) -> Result<Vec<Value>> {
    let r = get(&query_url(base, query)).await?;
    ensure!(r.status == 200, "{query}: HTTP {} {}", r.status, r.body);
    let body: Value = serde_json::from_str(&r.body)?;
    ensure!(body["status"] == "success", "{query}: {body}");
    Ok(body["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

/// `<base>/api/v1/query?query=<query, percent-encoded>`.
fn query_url(base: &str, query: &str) -> String {
    let mut encoded = String::new();
    for byte in query.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                encoded.push(byte as char)
            }
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    format!("{base}/api/v1/query?query={encoded}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_panel_and_recording_rule_returns_series_from_a_real_prometheus(
) -> Result<()> {
    let (etcd, _api, _kubectl, k2s) = cluster(&[]).await?;
    let answering = Dnsmasq::start(&["--address=/www.example.org/192.0.2.1"]).await?;
    let dead = silent_upstream();
    let upstreams = format!("-nameservers={},127.0.0.1:{}", dead.addr(), answering.port);
    let flags = [
        "-no-rec=false",
        "-rcache=100",
        "-rtimeout=200ms",
        "-ns-rotate=false",
        &upstreams,
    ];
    let skydns = SkydnsBinary::start(
        &etcd.endpoint(),
        etcd.api(),
        &flags,
        "kubernetes.default.svc.cluster.local.",
    )
    .await?;
    let dns = skydns.ports().dns;
    let probe = format!("-cmd=nslookup -port={dns} kubernetes.default.svc.cluster.local 127.0.0.1");
    let (_healthz, healthz) = start_server(
        "exec-healthz",
        |port| {
            let mut command = Command::new(test_support::bins::built_binary("exec-healthz"));
            command.args([
                format!("-port={port}"),
                "-period=200ms".into(),
                probe.clone(),
            ]);
            command
        },
        "/healthz",
    )
    .await?;

    // Prometheus scraping the three, every second, with the rules loaded.
    let dir = tempfile::tempdir()?;
    let targets: Vec<String> = [
        format!("127.0.0.1:{}", skydns.metrics_port),
        format!("127.0.0.1:{}", k2s.port),
        healthz.trim_start_matches("http://").to_string(),
    ]
    .into_iter()
    .map(|t| format!("'{t}'"))
    .collect();
    let config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nrule_files: ['{}']\n\
         scrape_configs:\n- job_name: kube-dns-rs\n  static_configs:\n  - targets: [{}]\n",
        monitoring("kube-dns-rs.rules.yaml").display(),
        targets.join(", ")
    );
    let config_path = dir.path().join("prometheus.yml");
    std::fs::write(&config_path, config)?;
    let data = dir.path().join("data");
    let (_prometheus, base) = start_server(
        "prometheus",
        |port| {
            let mut command = Command::new(
                test_support::tools::require("prometheus", "prometheus").expect("prometheus"),
            );
            command.args([
                format!("--config.file={}", config_path.display()),
                format!("--storage.tsdb.path={}", data.display()),
                format!("--web.listen-address=127.0.0.1:{port}"),
                "--log.level=error".into(),
            ]);
            command
        },
        "/-/ready",
    )
    .await?;

    // Traffic of every kind, then the same again so every rate has two samples.
    for _ in 0..2 {
        for args in [
            &["kubernetes.default.svc.cluster.local", "A"][..],
            &["nosuch.default.svc.cluster.local", "A"],
            &["www.example.org", "A"],
            &["www.example.org", "A"],
            &["single", "A"],
        ] {
            dig(dns, args)?;
        }
        eventually("every target scraped", DEADLINE, async || {
            let up = instant(&base, "up{job=\"kube-dns-rs\"} == 1").await?;
            ensure!(up.len() == 3, "{up:?}");
            Ok(())
        })
        .await?;
    }
    let mut queries = dashboard_queries()?;
    ensure!(queries.len() >= 15, "{queries:?}");
    queries.extend(recording_rules()?);
    for (what, query) in &queries {
        eventually(&format!("{what}: {query}"), DEADLINE, async || {
            let result = instant(&base, query).await?;
            ensure!(!result.is_empty(), "no series");
            Ok(())
        })
        .await?;
    }
    Ok(())
}
