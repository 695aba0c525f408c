//! skydns's metrics endpoint set the SkyDNS way, by environment:
//! `PROMETHEUS_PORT` serves on that port of every interface and
//! `PROMETHEUS_PATH` moves `/metrics`; the probes keep their paths.

use anyhow::{ensure, Context, Result};
use std::process::Command;
use test_support::dns::{query, Transport};
use test_support::etcd::Etcd;
use test_support::http::{get, metric};
use test_support::ports::{free_port, on_free_port};
use test_support::process::Process;
use test_support::wait::DEADLINE;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_port_and_path_come_from_the_environment() -> Result<()> {
    let etcd = Etcd::start()?;
    etcd.put(
        "/skydns/local/cluster/svc/default/kubernetes/c88f1059",
        r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    )?;
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("skydns.log");
    let (_skydns, metrics_port) = on_free_port(async |port| {
        let metrics_port = free_port()?;
        let mut command = Command::new(test_support::bins::built_binary("skydns"));
        command
            .arg(format!("-machines={}", etcd.endpoint()))
            .args(etcd.api().skydns_flags())
            .arg(format!("-addr=127.0.0.1:{port}"))
            .args(["-domain=cluster.local.", "-no-rec"])
            .env("PROMETHEUS_PORT", metrics_port.to_string())
            .env("PROMETHEUS_PATH", "/skymetrics");
        let mut skydns = Process::spawn_logged("skydns", command, &log)?;
        let ready = skydns
            .until_ready(DEADLINE, async || {
                let r = query(
                    port,
                    "kubernetes.default.svc.cluster.local",
                    "A",
                    Transport::Udp,
                )
                .await?;
                ensure!(!r.answer.is_empty(), "{r:?}");
                Ok(())
            })
            .await;
        ready.with_context(|| std::fs::read_to_string(&log).unwrap_or_default())?;
        Ok((skydns, metrics_port))
    })
    .await?;
    let logged = std::fs::read_to_string(&log)?;
    ensure!(
        logged.contains(&format!("addr=0.0.0.0:{metrics_port} path=/skymetrics")),
        "served on every interface at the path given:\n{logged}"
    );
    let base = format!("http://127.0.0.1:{metrics_port}");
    let r = get(&format!("{base}/skymetrics")).await?;
    ensure!(r.status == 200, "{r:?}");
    let requests = metric(&r.body, "skydns_dns_request_count_total{type=\"udp\"}");
    ensure!(requests.is_some_and(|n| n >= 1.0), "{}", r.body);
    let r = get(&format!("{base}/metrics")).await?;
    ensure!(r.status == 404, "/metrics moved: {r:?}");
    for probe in ["/ready", "/health"] {
        let r = get(&format!("{base}{probe}")).await?;
        ensure!(r.status == 200 && r.body == "ok", "{probe}: {r:?}");
    }
    Ok(())
}
