//! The worker's single run (`run_command`) against real commands: exit
//! statuses, combined output, the output cap, and the timeout that kills the
//! whole process group.

mod support;

use std::time::{Duration, Instant};

use healthz::probe::run_command;
use support::{assert_no_process_with, unique_sleep};
use test_support::process::processes_with;

const LONG: Duration = Duration::from_secs(10);
const CAP: usize = 64 * 1024;

#[tokio::test]
async fn true_succeeds_with_no_output() {
    let out = run_command("true", LONG, CAP).await;
    assert_eq!(out.result.err, None);
    assert!(out.result.output.is_empty());
    assert!(!out.timed_out);
}

#[tokio::test]
async fn false_reports_go_exit_error_text() {
    let out = run_command("false", LONG, CAP).await;
    assert_eq!(out.result.err.as_deref(), Some("exit status 1"));
}

#[tokio::test]
async fn stdout_and_stderr_are_combined_in_order() {
    let out = run_command("echo out; echo err >&2; echo more; exit 3", LONG, CAP).await;
    assert_eq!(
        String::from_utf8_lossy(&out.result.output),
        "out\nerr\nmore\n"
    );
    assert_eq!(out.result.err.as_deref(), Some("exit status 3"));
}

#[tokio::test]
async fn killed_by_signal_reads_like_go() {
    let out = run_command("kill -TERM $$", LONG, CAP).await;
    assert_eq!(out.result.err.as_deref(), Some("signal: terminated"));
}

#[tokio::test]
async fn missing_command_is_a_failure() {
    let out = run_command("definitely-not-a-command-xyz", LONG, CAP).await;
    assert_eq!(out.result.err.as_deref(), Some("exit status 127"));
    assert!(String::from_utf8_lossy(&out.result.output).contains("not found"));
}

#[tokio::test]
async fn output_is_capped() {
    let out = run_command("head -c 200000 /dev/zero | tr '\\0' x", LONG, 1000).await;
    assert_eq!(out.result.err, None);
    let text = String::from_utf8_lossy(&out.result.output);
    assert!(text.starts_with(&"x".repeat(1000)));
    assert!(!text.starts_with(&"x".repeat(1001)));
    assert!(
        text.ends_with("[exec-healthz: 199000 more bytes of output dropped]"),
        "{text:.1100}"
    );
}

#[tokio::test]
async fn hung_command_is_killed_with_its_whole_group() {
    let token = unique_sleep();
    // A background grandchild that keeps the output pipe open, plus a hung foreground.
    let cmd = format!("echo started; sleep {token} & sleep {token}");
    let started = Instant::now();
    // 3 s: time for a loaded machine to start `sh` and let it print.
    let out = run_command(&cmd, Duration::from_secs(3), CAP).await;
    let took = started.elapsed();
    assert!(out.timed_out);
    // Killed at the timeout, not after the hour the sleeps would take (a
    // lower bound, and an upper one no load can reach).
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(600),
        "{took:?}"
    );
    assert_eq!(
        out.result.err.as_deref(),
        Some("timed out after 3s, process group killed (signal: killed)")
    );
    assert_eq!(String::from_utf8_lossy(&out.result.output), "started\n");
    assert_no_process_with(&token).await;
}

#[tokio::test]
async fn background_child_holding_the_pipe_times_out_too() {
    let token = unique_sleep();
    // sh exits at once, but the orphan keeps stdout open: Go would wait forever.
    let cmd = format!("sleep {token} &");
    let out = run_command(&cmd, Duration::from_millis(300), CAP).await;
    assert!(out.timed_out, "{out:?}");
    assert_no_process_with(&token).await;
}

#[tokio::test]
async fn dropping_a_run_kills_its_process_group() {
    let token = unique_sleep();
    let cmd = format!("sleep {token} & sleep {token}");
    let task = tokio::spawn(async move { run_command(&cmd, Duration::from_secs(3600), CAP).await });
    test_support::wait::eventually(
        "the command to start",
        test_support::wait::DEADLINE,
        async || {
            let running = processes_with(&token);
            anyhow::ensure!(running.len() >= 2, "{running:?}");
            Ok(())
        },
    )
    .await
    .unwrap();
    task.abort();
    assert!(task.await.is_err_and(|e| e.is_cancelled()));
    assert_no_process_with(&token).await;
}

#[tokio::test]
async fn a_background_child_that_lets_go_of_the_output_outlives_a_successful_run() {
    // The child closes the pipe, so the run ends with `sh`; it is left
    // alone, as Go's exec leaves it, and touches its file two seconds on.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("touched");
    let cmd = format!("(sleep 2; touch {}) >/dev/null 2>&1 &", file.display());
    let out = run_command(&cmd, Duration::from_secs(30), CAP).await;
    assert!(!out.timed_out && out.result.err.is_none(), "{out:?}");
    test_support::wait::eventually(
        "the background child to touch its file",
        test_support::wait::DEADLINE,
        async || {
            anyhow::ensure!(file.exists(), "not touched: the child was killed");
            Ok(())
        },
    )
    .await
    .unwrap();
}
