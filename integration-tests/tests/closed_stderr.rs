//! The binaries stop on SIGTERM even when nobody reads their logs any more
//! (a log collector gone, `| head`): a write to a closed stderr must not
//! take down the task that logged it, such as the signal handler.

use integration_tests::bins::built_binary;
use integration_tests::etcd::{dig, free_port};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed when the test ends, passed or not.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bin` with stderr on a pipe that is closed at once.
fn spawn_with_closed_stderr(bin: &str, args: &[String]) -> Running {
    let mut child = Command::new(built_binary(bin))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the binary");
    drop(child.stderr.take());
    Running(child)
}

fn wait_until(what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends SIGTERM and requires exit status 0 within 10 s (killing it otherwise).
fn assert_stops_on_sigterm(mut running: Running, what: &str) {
    let child = &mut running.0;
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{what} exited with {status}");
            return;
        }
        if Instant::now() > deadline {
            panic!("{what} ignored SIGTERM with its stderr closed");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn skydns_stops_on_sigterm_with_stderr_closed() {
    let port = free_port().unwrap();
    // etcd is unreachable, so skydns keeps logging retries and answers SERVFAIL.
    let args = [
        format!("-addr=127.0.0.1:{port}"),
        "-machines=http://127.0.0.1:1".to_string(),
        "-domain=cluster.local.".to_string(),
        "-no-rec".to_string(),
    ];
    let child = spawn_with_closed_stderr("skydns", &args);
    wait_until("skydns to answer", || {
        dig(port, &["kubernetes.default.svc.cluster.local"])
            .unwrap()
            .contains("status: SERVFAIL")
    });
    std::thread::sleep(Duration::from_millis(300)); // a few failed log writes
    assert_stops_on_sigterm(child, "skydns");
}

#[test]
fn exec_healthz_stops_on_sigterm_with_stderr_closed() {
    let port = free_port().unwrap();
    let args = [format!("-port={port}"), "-period=50ms".to_string()];
    let child = spawn_with_closed_stderr("exec-healthz", &args);
    let url = format!("http://127.0.0.1:{port}/healthz");
    wait_until("exec-healthz to answer", || {
        Command::new("curl")
            .args(["-sf", &url])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    std::thread::sleep(Duration::from_millis(300)); // a few runs logged
    assert_stops_on_sigterm(child, "exec-healthz");
}
