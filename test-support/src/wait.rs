//! Waiting for a condition, the one way every test of the workspace waits: poll
//! a probe until it succeeds or a generous deadline passes, never a fixed
//! sleep. The timeout error carries the probe's last observation. A process's
//! output is waited for the same way, line by line ([`line`]).

use anyhow::{anyhow, Result};
use std::future::Future;
use std::time::{Duration, Instant};

/// The deadline for anything a healthy pipeline does in well under a
/// second: generous, because CI runs on a loaded 2-core machine.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// How often a probe is retried.
const PERIOD: Duration = Duration::from_millis(50);

/// Runs `probe` until it returns `Ok`, at most `within`; the error names
/// `what` and carries the probe's last error.
pub async fn eventually<T>(
    what: &str,
    within: Duration,
    mut probe: impl AsyncFnMut() -> Result<T>,
) -> Result<T> {
    let deadline = Deadline::new(what, within);
    loop {
        match probe().await {
            Ok(value) => return Ok(value),
            Err(last) => deadline.check(last)?,
        }
        tokio::time::sleep(PERIOD).await;
    }
}

/// [`eventually`] for code that cannot await (a `Drop`, a blocking
/// launcher): the same deadline, period and error.
pub fn eventually_blocking<T>(
    what: &str,
    within: Duration,
    mut probe: impl FnMut() -> Result<T>,
) -> Result<T> {
    let deadline = Deadline::new(what, within);
    loop {
        match probe() {
            Ok(value) => return Ok(value),
            Err(last) => deadline.check(last)?,
        }
        std::thread::sleep(PERIOD);
    }
}

/// When the polling of `what` gives up, and the error it gives up with.
struct Deadline<'a> {
    what: &'a str,
    within: Duration,
    at: Instant,
}

impl<'a> Deadline<'a> {
    fn new(what: &'a str, within: Duration) -> Self {
        Deadline {
            what,
            within,
            at: Instant::now() + within,
        }
    }

    /// `Ok` while there is time for another try; else the timeout error
    /// carrying the probe's `last` failure.
    fn check(&self, last: anyhow::Error) -> Result<()> {
        if Instant::now() < self.at {
            return Ok(());
        }
        Err(anyhow!(
            "timed out after {:?} waiting for {}; last: {last:#}",
            self.within,
            self.what
        ))
    }
}

/// The first of `lines` (a process's output, as
/// [`crate::process::Process::spawn_with_lines`] sends it) that `wanted`
/// accepts, waiting at most `within`. The error says whether the time ran
/// out or the sender hung up (the process closed its output: it exited),
/// with every line seen before.
pub fn line(
    what: &str,
    lines: &std::sync::mpsc::Receiver<String>,
    within: Duration,
    wanted: impl Fn(&str) -> bool,
) -> Result<String> {
    use std::sync::mpsc::RecvTimeoutError;
    let at = Instant::now() + within;
    let mut seen = Vec::new();
    loop {
        match lines.recv_timeout(at.saturating_duration_since(Instant::now())) {
            Ok(line) if wanted(&line) => return Ok(line),
            Ok(line) => seen.push(line),
            Err(RecvTimeoutError::Disconnected) => {
                return Err(anyhow!("output closed before {what}:\n{}", seen.join("\n")))
            }
            Err(RecvTimeoutError::Timeout) => {
                return Err(anyhow!(
                    "timed out after {within:?} waiting for {what}; output:\n{}",
                    seen.join("\n")
                ))
            }
        }
    }
}

/// Awaits `future`, failing with `what` if it takes longer than `within`.
pub async fn within<T>(what: &str, within: Duration, future: impl Future<Output = T>) -> Result<T> {
    tokio::time::timeout(within, future)
        .await
        .map_err(|_| anyhow!("timed out after {within:?} waiting for {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn eventually_reports_the_last_observation() {
        let mut n = 0;
        let err = eventually("n to reach 1000", Duration::from_millis(120), async || {
            n += 1;
            anyhow::ensure!(n >= 1000, "n is {n}");
            Ok(n)
        })
        .await
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("waiting for n to reach 1000; last: n is "),
            "{err}"
        );
        let found = eventually("n to reach 3", DEADLINE, async || {
            n += 1;
            anyhow::ensure!(n >= 3, "n is {n}");
            Ok(n)
        })
        .await
        .unwrap();
        assert!(found >= 3);
    }

    #[test]
    fn line_gives_the_wanted_line_or_what_came_before() {
        let (tx, rx) = std::sync::mpsc::channel();
        for l in ["starting", "==> ready on 53", "later"] {
            tx.send(l.to_string()).unwrap();
        }
        let ready = |l: &str| l.starts_with("==> ready");
        assert_eq!(
            line("ready", &rx, DEADLINE, ready).unwrap(),
            "==> ready on 53"
        );
        drop(tx);
        let err = line("ready", &rx, DEADLINE, ready).unwrap_err().to_string();
        assert_eq!(err, "output closed before ready:\nlater");
    }

    #[test]
    fn eventually_blocking_gives_the_same_error() {
        let err = eventually_blocking("never", Duration::from_millis(60), || -> Result<()> {
            anyhow::bail!("still no")
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("waiting for never; last: still no"), "{err}");
    }
}
