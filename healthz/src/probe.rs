//! The probe worker and the last result it stored: every period the worker runs
//! `sh -c <cmd>` in its own process group, with its output captured (bounded).
//! A run that outlives the timeout, or is dropped, has its whole group killed.
//! Runs never overlap: missed ticks are skipped, as with Go's ticker.

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::metrics::Metrics;
use gocompat::duration::format as format_duration;

/// How long to wait for a killed command to be reaped.
const REAP_GRACE: Duration = Duration::from_secs(2);

/// The stored outcome of the latest completed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecResult {
    /// Combined stdout and stderr, raw bytes, at most the configured cap
    /// (plus a one-line truncation note).
    pub output: Vec<u8>,
    /// `None` on exit status 0, else Go's error text (`exit status 1`,
    /// `signal: killed`, a start failure or the timeout message).
    pub err: Option<String>,
    /// Wall-clock completion time, for display.
    pub ts: SystemTime,
    /// Monotonic completion time, for the staleness check.
    pub at: Instant,
}

impl ExecResult {
    /// The startup value: empty, successful, now (so `/healthz` is 200 at once).
    pub fn initial() -> Self {
        Self {
            output: Vec::new(),
            err: None,
            ts: SystemTime::now(),
            at: Instant::now(),
        }
    }
}

/// One finished run with its duration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// What to store.
    pub result: ExecResult,
    /// How long the run took.
    pub duration: Duration,
    /// Whether the timeout fired and the process group was killed.
    pub timed_out: bool,
}

/// Shared handle to the last result; cheap to clone.
#[derive(Debug, Clone)]
pub struct LastResult(Arc<watch::Sender<Arc<ExecResult>>>);

impl LastResult {
    /// Starts with [`ExecResult::initial`].
    pub fn new() -> Self {
        Self(Arc::new(watch::Sender::new(
            Arc::new(ExecResult::initial()),
        )))
    }

    /// The current result.
    pub fn get(&self) -> Arc<ExecResult> {
        self.0.borrow().clone()
    }

    fn set(&self, result: ExecResult) {
        self.0.send_replace(Arc::new(result));
    }
}

impl Default for LastResult {
    fn default() -> Self {
        Self::new()
    }
}

/// What the worker runs and how.
#[derive(Debug, Clone)]
pub struct ProbeSpec {
    /// The shell command.
    pub cmd: String,
    /// Interval between runs.
    pub period: Duration,
    /// Per-run limit.
    pub timeout: Duration,
    /// Output cap in bytes.
    pub max_output: usize,
}

/// Runs the command every period forever, storing each result. Cancel by
/// dropping or aborting the task; a run in progress is then killed.
pub async fn worker(spec: ProbeSpec, last: LastResult, metrics: Arc<Metrics>) {
    let start = tokio::time::Instant::now() + spec.period;
    let mut ticker = tokio::time::interval_at(start, spec.period);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        ticker.tick().await;
        tracing::info!("Worker running {}", spec.cmd);
        let outcome = run_command(&spec.cmd, spec.timeout, spec.max_output).await;
        let failed = outcome.result.err.is_some();
        metrics.record(failed, outcome.timed_out, outcome.duration);
        if let Some(err) = &outcome.result.err {
            tracing::debug!("run failed: {err}");
        }
        last.set(outcome.result);
    }
}

/// Kills a process group when dropped, unless disarmed.
struct GroupKiller(Option<Pid>);

impl GroupKiller {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // ESRCH (group already gone) is fine.
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }

    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `sh -c <cmd>` once, as described in the module docs.
pub async fn run_command(cmd: &str, timeout: Duration, max_output: usize) -> RunOutcome {
    let started = Instant::now();
    let (result, timed_out) = match spawn(cmd) {
        Ok((child, reader)) => supervise(child, reader, timeout, max_output).await,
        Err(err) => (
            (Vec::new(), Some(format!("failed to start sh: {err}"))),
            false,
        ),
    };
    let (output, err) = result;
    RunOutcome {
        result: ExecResult {
            output,
            err,
            ts: SystemTime::now(),
            at: Instant::now(),
        },
        duration: started.elapsed(),
        timed_out,
    }
}

/// Starts the shell in a new process group, stdout and stderr on one pipe.
fn spawn(cmd: &str) -> std::io::Result<(Child, pipe::Receiver)> {
    let (writer, reader) = pipe::pipe()?;
    let out: OwnedFd = writer.into_blocking_fd()?;
    let err = out.try_clone()?;
    // The Command owns the write ends; it is dropped at the end of this
    // function so that only the child holds them and EOF can arrive.
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .process_group(0);
    let child = command.spawn()?;
    Ok((child, reader))
}

type Captured = (Vec<u8>, Option<String>);

/// Waits for exit and end of output within `timeout`, killing the group otherwise.
async fn supervise(
    mut child: Child,
    mut reader: pipe::Receiver,
    timeout: Duration,
    max_output: usize,
) -> (Captured, bool) {
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let mut killer = GroupKiller(pgid);
    let mut output = Vec::new();
    let mut dropped: u64 = 0;
    let finished = tokio::time::timeout(timeout, async {
        let (status, _) = tokio::join!(
            child.wait(),
            read_bounded(&mut reader, &mut output, &mut dropped, max_output)
        );
        status
    })
    .await;
    drop(reader);
    let (err, timed_out) = match finished {
        Ok(Ok(status)) => {
            killer.disarm();
            (exit_error(status), false)
        }
        Ok(Err(wait_err)) => (Some(format!("wait: {wait_err}")), false),
        Err(_elapsed) => {
            killer.kill();
            let _ = tokio::time::timeout(REAP_GRACE, child.wait()).await;
            let msg = format!(
                "timed out after {}, process group killed (signal: killed)",
                format_duration(timeout)
            );
            (Some(msg), true)
        }
    };
    if dropped > 0 {
        output.extend_from_slice(
            format!("\n[exec-healthz: {dropped} more bytes of output dropped]").as_bytes(),
        );
    }
    ((output, err), timed_out)
}

/// Reads to EOF, keeping at most `max` bytes and counting the rest.
async fn read_bounded(
    reader: &mut pipe::Receiver,
    out: &mut Vec<u8>,
    dropped: &mut u64,
    max: usize,
) {
    let mut chunk = [0u8; 8192];
    loop {
        let n = match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let room = max.saturating_sub(out.len()).min(n);
        out.extend_from_slice(&chunk[..room]);
        *dropped += (n - room) as u64;
    }
}

/// Go's `*exec.ExitError` text for a non-zero status, `None` for success.
pub fn exit_error(status: ExitStatus) -> Option<String> {
    if status.success() {
        return None;
    }
    if let Some(code) = status.code() {
        return Some(format!("exit status {code}"));
    }
    let Some(sig) = status.signal() else {
        return Some(format!("unknown exit status {status}"));
    };
    let core = if status.core_dumped() {
        " (core dumped)"
    } else {
        ""
    };
    Some(format!("signal: {}{core}", signal_name(sig)))
}

/// Go's `syscall.Signal.String()` for the common Linux signals.
fn signal_name(sig: i32) -> String {
    let name = match Signal::try_from(sig) {
        Ok(Signal::SIGHUP) => "hangup",
        Ok(Signal::SIGINT) => "interrupt",
        Ok(Signal::SIGQUIT) => "quit",
        Ok(Signal::SIGILL) => "illegal instruction",
        Ok(Signal::SIGTRAP) => "trace/breakpoint trap",
        Ok(Signal::SIGABRT) => "aborted",
        Ok(Signal::SIGBUS) => "bus error",
        Ok(Signal::SIGFPE) => "floating point exception",
        Ok(Signal::SIGKILL) => "killed",
        Ok(Signal::SIGUSR1) => "user defined signal 1",
        Ok(Signal::SIGSEGV) => "segmentation fault",
        Ok(Signal::SIGUSR2) => "user defined signal 2",
        Ok(Signal::SIGPIPE) => "broken pipe",
        Ok(Signal::SIGALRM) => "alarm clock",
        Ok(Signal::SIGTERM) => "terminated",
        _ => return format!("signal {sig}"),
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_named_as_go_names_them() {
        // Go's syscall.Signal.String() on Linux (zerrors_linux_amd64.go).
        let names = [
            (1, "hangup"),
            (2, "interrupt"),
            (3, "quit"),
            (4, "illegal instruction"),
            (5, "trace/breakpoint trap"),
            (6, "aborted"),
            (7, "bus error"),
            (8, "floating point exception"),
            (9, "killed"),
            (10, "user defined signal 1"),
            (11, "segmentation fault"),
            (12, "user defined signal 2"),
            (13, "broken pipe"),
            (14, "alarm clock"),
            (15, "terminated"),
            (64, "signal 64"),
        ];
        for (number, name) in names {
            assert_eq!(signal_name(number), name, "signal {number}");
        }
    }
}
