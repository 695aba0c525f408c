//! The binaries stop on SIGTERM even when nobody reads their logs any more
//! (a log collector gone, `| head`): a write to a closed stderr must not
//! take down the task that logged it, such as the signal handler.

mod skydns_support;

use skydns_support::wait_for_store_errors;
use std::process::Command;
use test_support::bins::built_binary;
use test_support::dead::closed_url;
use test_support::etcd::Api;
use test_support::http::{get, metric, scrape, start_server};
use test_support::process::Process;
use test_support::skydns::{Launch, Ready};
use test_support::wait::{eventually, DEADLINE};

/// Sends SIGTERM and requires exit status 0.
async fn assert_stops_on_sigterm(mut process: Process, what: &str) {
    process.signal(nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = process
        .wait_exit(DEADLINE)
        .await
        .unwrap_or_else(|e| panic!("{what} ignored SIGTERM with its stderr closed: {e:#}"));
    assert!(status.success(), "{what} exited with {status}");
}

/// The number of failed reads of etcd the skydns on metrics `port` counted.
async fn store_errors(port: u16) -> u64 {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let text = scrape(&url).await.unwrap();
    metric(&text, "skydns_dns_store_error_count_total").unwrap_or(0.0) as u64
}

#[tokio::test]
async fn skydns_stops_on_sigterm_with_stderr_closed() {
    // etcd is unreachable (a port bound and closed), so skydns keeps
    // logging retries and answers SERVFAIL.
    let launch = Launch::new(&closed_url(), Api::V2)
        .stderr_piped()
        .ready(Ready::Health);
    let mut skydns = launch.start().await.unwrap();
    // Closed once skydns is known to have bound its ports (a taken one
    // is read from the pipe and means new ports).
    skydns.close_stderr();
    let before = store_errors(skydns.metrics_port).await;
    // Each failed read of etcd is logged: three of them, three failed writes.
    wait_for_store_errors(skydns.metrics_port, before + 3).await;
    assert_stops_on_sigterm(skydns.process, "skydns").await;
}

#[tokio::test]
async fn exec_healthz_stops_on_sigterm_with_stderr_closed() {
    let command = |port: u16| {
        let mut command = Command::new(built_binary("exec-healthz"));
        command.args([format!("-port={port}"), "-period=50ms".to_string()]);
        command
    };
    let (mut process, base) = start_server("exec-healthz", command, "/healthz")
        .await
        .unwrap();
    let url = format!("{base}/healthz");
    drop(process.child().stderr.take());
    // Every /healthz request is logged: four answered, four failed writes.
    for _ in 0..4 {
        eventually("exec-healthz to answer", DEADLINE, async || get(&url).await)
            .await
            .unwrap();
    }
    assert_stops_on_sigterm(process, "exec-healthz").await;
}
