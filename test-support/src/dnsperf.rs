//! dnsperf (Debian `dnsperf`) as a steady stream of queries during a test:
//! [`Dnsperf::start`] sends the questions in a loop at a fixed rate, and
//! [`Dnsperf::finish`] stops it and reads its statistics. A query is lost when
//! no answer came within [`TIMEOUT`].

use crate::process::Process;
use anyhow::{ensure, Result};
use nix::sys::signal::Signal;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use tempfile::TempDir;

/// How long dnsperf waits for an answer before it counts a query lost: a
/// query is lost when nothing answers it, not when a loaded machine answers
/// it late, so the bound is far above any answer's time (milliseconds).
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// A running dnsperf, interrupted when dropped.
pub struct Dnsperf {
    process: Process,
    dir: TempDir,
}

/// What dnsperf counted.
#[derive(Debug, Default)]
pub struct Report {
    pub sent: u64,
    pub completed: u64,
    pub lost: u64,
    pub interrupted: u64,
    /// Responses per code, e.g. `NOERROR` → 1234.
    pub codes: BTreeMap<String, u64>,
    /// dnsperf's whole output, for messages.
    pub text: String,
}

impl Dnsperf {
    /// Starts sending `questions` (`(name, type)`) to `127.0.0.1:port` at
    /// `qps` queries per second, round after round, for at most `limit`.
    pub fn start(port: u16, questions: &[(&str, &str)], qps: u32, limit: Duration) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let data: String = questions
            .iter()
            .map(|(name, qtype)| format!("{name} {qtype}\n"))
            .collect();
        std::fs::write(dir.path().join("queries"), data)?;
        let mut command = crate::tools::command("dnsperf", "dnsperf")?;
        command
            .args(["-s", "127.0.0.1", "-p", &port.to_string()])
            .arg("-d")
            .arg(dir.path().join("queries"))
            .args(["-Q", &qps.to_string()])
            .args(["-l", &limit.as_secs().to_string()])
            .args(["-t", &TIMEOUT.as_secs().to_string()]);
        let process = Process::spawn_logged("dnsperf", command, &log(&dir))?;
        Ok(Dnsperf { process, dir })
    }

    /// Interrupts dnsperf (unless it already ended) and reads its report.
    pub async fn finish(mut self) -> Result<Report> {
        if self.process.try_wait()?.is_none() {
            self.process.signal(Signal::SIGINT)?;
        }
        self.process.wait_exit(Duration::from_secs(10)).await?;
        let text = std::fs::read_to_string(log(&self.dir))?;
        let report = parse(&text);
        ensure!(report.sent > 0, "dnsperf sent nothing:\n{text}");
        Ok(report)
    }
}

fn log(dir: &TempDir) -> PathBuf {
    dir.path().join("dnsperf.log")
}

/// Reads dnsperf's statistics (`Queries sent:  100`, `Response codes:
/// NOERROR 98 (98.00%), SERVFAIL 2 (2.00%)`).
pub fn parse(text: &str) -> Report {
    let count = |label: &str| -> u64 {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(label))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let codes = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Response codes:"))
        .map(|rest| {
            rest.split(',')
                .filter_map(|part| {
                    let mut words = part.split_whitespace();
                    Some((words.next()?.to_string(), words.next()?.parse().ok()?))
                })
                .collect()
        })
        .unwrap_or_default();
    Report {
        sent: count("Queries sent:"),
        completed: count("Queries completed:"),
        lost: count("Queries lost:"),
        interrupted: count("Queries interrupted:"),
        codes,
        text: text.to_string(),
    }
}

impl Report {
    /// Responses with a code other than `expected`.
    pub fn other_codes(&self, expected: &str) -> u64 {
        self.codes
            .iter()
            .filter(|(code, _)| code.as_str() != expected)
            .map(|(_, n)| n)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_dnsperf_statistics() {
        let text = "Statistics:\n\n  Queries sent:         120\n  Queries completed:    \
                    117 (97.50%)\n  Queries lost:         2 (1.67%)\n  Queries interrupted:  \
                    1 (0.83%)\n\n  Response codes:       NOERROR 115 (98.29%), SERVFAIL 2 \
                    (1.71%)\n";
        let report = parse(text);
        assert_eq!(
            (
                report.sent,
                report.completed,
                report.lost,
                report.interrupted
            ),
            (120, 117, 2, 1)
        );
        assert_eq!(report.codes["NOERROR"], 115);
        assert_eq!(report.other_codes("NOERROR"), 2);
    }

    #[test]
    fn no_response_codes_is_an_empty_map() {
        let report = parse("  Queries sent:  5\n  Response codes:       \n");
        assert_eq!(report.sent, 5);
        assert!(report.codes.is_empty());
    }
}
