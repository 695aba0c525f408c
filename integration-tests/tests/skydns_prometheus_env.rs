//! skydns's metrics endpoint set the SkyDNS way, by environment:
//! `PROMETHEUS_PORT` serves on that port of every interface and
//! `PROMETHEUS_PATH` moves `/metrics`; the probes keep their paths.

use anyhow::{ensure, Result};
use test_support::etcd::{Etcd, KUBERNETES_RECORD};
use test_support::http::{get, metric};
use test_support::skydns::Launch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_port_and_path_come_from_the_environment() -> Result<()> {
    let etcd = Etcd::start()?;
    etcd.put(KUBERNETES_RECORD.0, KUBERNETES_RECORD.1)?;
    let skydns = Launch::new(&etcd.endpoint(), etcd.api())
        .metrics_from_env()
        .env("PROMETHEUS_PATH", "/skymetrics")
        .start()
        .await?;
    let metrics_port = skydns.metrics_port;
    let logged = skydns.log();
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
