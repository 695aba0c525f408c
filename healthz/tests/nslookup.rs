//! The pod's real probe: `exec-healthz` running bind9's `nslookup` against a
//! DNS server (dnsmasq) on a loopback port. `/healthz` is 200 while the name
//! resolves and 503 with nslookup's reason once the server is stopped.
//! Needs `apt-get install -y dnsutils dnsmasq`; fails (never skips) without.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{
    eventually, eventually_503, free_tcp_port, free_udp_tcp_port, get, metric, KillOnDrop,
};

const BIN: &str = env!("CARGO_BIN_EXE_exec-healthz");
const NAME: &str = "kubernetes.default.svc.cluster.local";
const WAIT: Duration = Duration::from_secs(20);

fn require(tool: &str, package: &str) {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "`{tool}` not found: run `apt-get install -y {package}` to run this test"
    );
}

fn start_dnsmasq(port: u16) -> KillOnDrop {
    let child = Command::new("dnsmasq")
        .args([
            "--no-daemon",
            &format!("--port={port}"),
            "--listen-address=127.0.0.1",
            "--bind-interfaces",
            "--no-resolv",
            "--no-hosts",
            "--conf-file=/dev/null",
            "--pid-file=",
            &format!("--address=/{NAME}/10.0.0.1"),
            &format!("--address=/{NAME}/fd00::1"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn dnsmasq");
    KillOnDrop(child)
}

fn nslookup_cmd(port: u16) -> String {
    format!("nslookup -port={port} {NAME} 127.0.0.1")
}

#[tokio::test]
async fn nslookup_probe_is_200_while_dns_answers_and_503_after_it_stops() {
    require("nslookup", "dnsutils");
    require("dnsmasq", "dnsmasq");
    let dns_port = free_udp_tcp_port();
    let mut dnsmasq = start_dnsmasq(dns_port);
    let probe = nslookup_cmd(dns_port);
    eventually(WAIT, "dnsmasq to answer", || {
        let ok = Command::new("sh")
            .arg("-c")
            .arg(format!("{probe} >/dev/null 2>&1"))
            .status()
            .is_ok_and(|s| s.success());
        async move { ok.then_some(()) }
    })
    .await;

    let http_port = free_tcp_port();
    let healthz = Command::new(BIN)
        .args([
            format!("-cmd={probe}"),
            format!("-port={http_port}"),
            "-period=100ms".to_owned(),
            "-latency=5s".to_owned(),
            "-quiet".to_owned(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn exec-healthz");
    let _healthz = KillOnDrop(healthz);
    let base = format!("http://127.0.0.1:{http_port}");

    // 200 because real nslookup runs succeeded, not because of the initial state.
    let metrics_url = format!("{base}/metrics");
    eventually(WAIT, "three nslookup runs", || {
        let url = metrics_url.clone();
        async move {
            let (_, _, text) = get(&url).await.ok()?;
            (metric(&text, "exechealthz_runs_total") >= 3.0).then_some(())
        }
    })
    .await;
    let (_, _, text) = get(&metrics_url).await.expect("metrics");
    assert_eq!(metric(&text, "exechealthz_failures_total"), 0.0, "{text}");
    let (status, _, body) = get(&format!("{base}/healthz")).await.expect("healthz");
    assert_eq!((status, body.as_str()), (200, "ok"));

    // Stop the DNS server: the next run fails and /healthz says why.
    let _ = dnsmasq.0.kill();
    let _ = dnsmasq.0.wait();
    let url = format!("{base}/healthz");
    let body = eventually_503(WAIT, "/healthz to report the DNS failure", &url).await;
    assert!(
        body.starts_with("Healthz probe error: Result of last exec: "),
        "{body}"
    );
    assert!(body.contains("no servers could be reached"), "{body}");
    assert!(body.ends_with(", error exit status 1\n"), "{body}");
}
