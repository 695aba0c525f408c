//! Tests of the real `exec-healthz` binary: Go-style flags, usage and exit
//! codes, `/quit`, SIGTERM, a busy port and `-quiet`.

mod support;

use std::process::{Command, Output};

use nix::sys::signal::Signal;
use support::{assert_no_process_with, eventually_503, unique_sleep};
use test_support::http::{get, start_server};
use test_support::process::{processes_with, Process};
use test_support::wait::{eventually, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_exec-healthz");

fn run_to_end(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run exec-healthz")
}

/// Starts the binary on a free port and waits until it answers HTTP
/// (again on another port while one was taken in between).
async fn start(args: &[&str]) -> (Process, String) {
    let command = |port: u16| {
        let mut command = Command::new(BIN);
        command.args(["-port", &port.to_string()]).args(args);
        command
    };
    start_server("exec-healthz", command, "/").await.unwrap()
}

fn stderr_of(mut process: Process) -> String {
    process.kill();
    let mut text = String::new();
    if let Some(mut err) = process.child().stderr.take() {
        let _ = std::io::Read::read_to_string(&mut err, &mut text);
    }
    text
}

#[test]
fn unknown_flag_prints_usage_and_exits_2() {
    let out = run_to_end(&["-bogus=1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("flag provided but not defined: -bogus\nUsage of exec-healthz:\n"),
        "{err}"
    );
}

#[test]
fn bad_value_names_the_flag_and_exits_2() {
    let out = run_to_end(&["-period=abc"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or("");
    assert_eq!(
        first,
        "invalid value \"abc\" for flag -period: invalid duration \"abc\""
    );
}

#[test]
fn help_explains_every_flag_and_exits_0() {
    for flag in ["-h", "--help", "-help"] {
        let out = run_to_end(&[flag]);
        assert_eq!(out.status.code(), Some(0), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        for name in [
            "-cmd string",
            "-period duration",
            "-latency duration",
            "-port int",
            "-quiet",
            "-timeout duration",
            "-quit-enabled",
        ] {
            assert!(
                err.contains(&format!("  {name}\n")),
                "{flag}: {name} missing from\n{err}"
            );
        }
        assert!(err.contains("(default \"echo healthz\")"), "{err}");
    }
}

#[test]
fn version_flags_print_the_version_on_stdout_and_exit_0() {
    let want = format!("exec-healthz {}\n", env!("CARGO_PKG_VERSION"));
    for flag in ["-V", "-version", "--version"] {
        let out = run_to_end(&[flag]);
        assert_eq!(out.status.code(), Some(0), "{flag}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{flag}");
        assert!(out.stderr.is_empty(), "{flag}");
    }
}

#[tokio::test]
async fn go_style_flags_503_then_quit_exits_0_without_answering() {
    let (mut child, base) =
        start(&["--cmd=echo nope; false", "-period", "100ms", "-latency=5s"]).await;
    let url = format!("{base}/healthz");
    let body = eventually_503("a 503", &url).await;
    assert!(
        body.starts_with("Healthz probe error: Result of last exec: nope\n, at "),
        "{body:?}"
    );
    assert!(body.ends_with(", error exit status 1\n"), "{body:?}");
    let answered = get(&format!("{base}/quit")).await;
    assert!(
        answered.is_err(),
        "/quit must close the connection without a response: {answered:?}"
    );
    let status = child.wait_exit(DEADLINE).await.unwrap();
    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn sigterm_exits_0_and_kills_the_running_command() {
    let token = unique_sleep();
    let cmd = format!("-cmd=sleep {token} & sleep {token}");
    let (mut child, _base) = start(&[cmd.as_str(), "-period=50ms", "-latency=1h"]).await;
    eventually("the command to be running", DEADLINE, async || {
        let running = processes_with(&token);
        anyhow::ensure!(running.len() >= 2, "{running:?}");
        Ok(())
    })
    .await
    .unwrap();
    child.signal(Signal::SIGTERM).unwrap();
    let status = child.wait_exit(DEADLINE).await.unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_no_process_with(&token).await;
}

#[tokio::test]
async fn busy_port_exits_1() {
    let busy = std::net::TcpListener::bind("0.0.0.0:0").expect("bind");
    let port = busy.local_addr().expect("addr").port().to_string();
    let out = run_to_end(&["-port", &port, "-quiet"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("listen tcp 0.0.0.0:{port}")), "{err}");
}

#[tokio::test]
async fn quiet_drops_info_logs_but_keeps_errors() {
    for (quiet, expect_info) in [(true, false), (false, true)] {
        let mut args = vec!["-cmd=false", "-period=50ms"];
        if quiet {
            args.push("-quiet");
        }
        let (child, base) = start(&args).await;
        let url = format!("{base}/healthz");
        eventually_503("a 503", &url).await;
        let err = stderr_of(child);
        assert_eq!(
            err.contains("Worker running false"),
            expect_info,
            "quiet={quiet}: {err}"
        );
        assert_eq!(
            err.contains("Client ip 127.0.0.1:"),
            expect_info,
            "quiet={quiet}: {err}"
        );
        assert!(
            err.contains("Healthz probe error: Result of last exec"),
            "quiet={quiet}: {err}"
        );
    }
}
