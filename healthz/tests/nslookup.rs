//! The pod's real probe: `exec-healthz` running bind9's `nslookup` against a
//! DNS server (dnsmasq) on a loopback port. `/healthz` is 200 while the name
//! resolves and 503 with nslookup's reason once the server is stopped.
//! Needs `apt-get install -y dnsutils dnsmasq`; fails (never skips) without.

mod support;

use anyhow::Context;
use std::path::Path;
use std::process::Command;

use support::{eventually_503, metric};
use test_support::dnsmasq::Dnsmasq;
use test_support::http::get;
use test_support::ports::on_free_port;
use test_support::process::Process;
use test_support::wait::{eventually, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_exec-healthz");
const NAME: &str = "kubernetes.default.svc.cluster.local";

fn nslookup_cmd(port: u16) -> String {
    format!("nslookup -port={port} {NAME} 127.0.0.1")
}

/// exec-healthz running `probe` every 100 ms on a free port, logging in
/// `dir`, once it answers (again on another port while one was taken in
/// between).
async fn exec_healthz(probe: &str, dir: &Path) -> (Process, u16) {
    on_free_port(async |port| {
        let log = dir.join(format!("exec-healthz-{port}.log"));
        let mut healthz = Command::new(BIN);
        healthz.args([
            format!("-cmd={probe}"),
            format!("-port={port}"),
            "-period=100ms".to_owned(),
            "-latency=5s".to_owned(),
            "-quiet".to_owned(),
        ]);
        let mut process = Process::spawn_logged("exec-healthz", healthz, &log)?;
        let url = format!("http://127.0.0.1:{port}/metrics");
        let ready = process
            .until_ready(DEADLINE, async || get(&url).await)
            .await;
        ready.with_context(|| std::fs::read_to_string(&log).unwrap_or_default())?;
        Ok((process, port))
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn nslookup_probe_is_200_while_dns_answers_and_503_after_it_stops() {
    test_support::tools::require("nslookup", "dnsutils").unwrap();
    let mut dnsmasq = Dnsmasq::start(&[
        &format!("--address=/{NAME}/10.0.0.1"),
        &format!("--address=/{NAME}/fd00::1"),
    ])
    .await
    .unwrap();
    let probe = nslookup_cmd(dnsmasq.port);

    let dir = tempfile::tempdir().unwrap();
    let (_healthz, http_port) = exec_healthz(&probe, dir.path()).await;
    let base = format!("http://127.0.0.1:{http_port}");

    // 200 because real nslookup runs succeeded, not because of the initial state.
    let metrics_url = format!("{base}/metrics");
    eventually("three nslookup runs", DEADLINE, async || {
        let text = get(&metrics_url).await?.body;
        let runs = metric(&text, "exechealthz_runs_total");
        anyhow::ensure!(runs >= 3.0, "{runs} runs");
        Ok(())
    })
    .await
    .unwrap();
    let text = get(&metrics_url).await.expect("metrics").body;
    assert_eq!(metric(&text, "exechealthz_failures_total"), 0.0, "{text}");
    let reply = get(&format!("{base}/healthz")).await.expect("healthz");
    assert_eq!((reply.status, reply.body.as_str()), (200, "ok"));

    // Stop the DNS server: the next run fails and /healthz says why.
    dnsmasq.stop();
    let url = format!("{base}/healthz");
    let body = eventually_503("/healthz to report the DNS failure", &url).await;
    assert!(
        body.starts_with("Healthz probe error: Result of last exec: "),
        "{body}"
    );
    assert!(body.contains("no servers could be reached"), "{body}");
    assert!(body.ends_with(", error exit status 1\n"), "{body}");
}
