//! The binaries stop on SIGTERM even when nobody reads their logs any more
//! (a log collector gone, `| head`): a write to a closed stderr must not
//! take down the task that logged it, such as the signal handler.

mod skydns_support;

use skydns_support::wait_for_store_errors;
use std::process::{Command, Stdio};
use test_support::bins::built_binary;
use test_support::http::get;
use test_support::ports::free_port;
use test_support::process::Process;
use test_support::wait::{eventually, DEADLINE};

/// Starts `bin` with stderr on a pipe that is closed at once.
fn spawn_with_closed_stderr(bin: &str, args: &[String]) -> Process {
    let mut command = Command::new(built_binary(bin));
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut process = Process::spawn(bin, command).unwrap();
    drop(process.child().stderr.take());
    process
}

/// Sends SIGTERM and requires exit status 0.
async fn assert_stops_on_sigterm(mut process: Process, what: &str) {
    process.signal(nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = process
        .wait_exit(DEADLINE)
        .await
        .unwrap_or_else(|e| panic!("{what} ignored SIGTERM with its stderr closed: {e:#}"));
    assert!(status.success(), "{what} exited with {status}");
}

#[tokio::test]
async fn skydns_stops_on_sigterm_with_stderr_closed() {
    let port = free_port().unwrap();
    let mport = free_port().unwrap();
    // etcd is unreachable, so skydns keeps logging retries and answers SERVFAIL.
    let args = [
        format!("-addr=127.0.0.1:{port}"),
        format!("-metrics-addr=127.0.0.1:{mport}"),
        "-machines=http://127.0.0.1:1".to_string(),
        "-domain=cluster.local.".to_string(),
        "-no-rec".to_string(),
    ];
    let process = spawn_with_closed_stderr("skydns", &args);
    // Each failed read of etcd is logged: three of them, three failed writes.
    wait_for_store_errors(mport, 3).await;
    assert_stops_on_sigterm(process, "skydns").await;
}

#[tokio::test]
async fn exec_healthz_stops_on_sigterm_with_stderr_closed() {
    let port = free_port().unwrap();
    let args = [format!("-port={port}"), "-period=50ms".to_string()];
    let process = spawn_with_closed_stderr("exec-healthz", &args);
    let url = format!("http://127.0.0.1:{port}/healthz");
    // Every /healthz request is logged: four answered, four failed writes.
    for _ in 0..4 {
        eventually("exec-healthz to answer", DEADLINE, async || get(&url).await)
            .await
            .unwrap();
    }
    assert_stops_on_sigterm(process, "exec-healthz").await;
}
