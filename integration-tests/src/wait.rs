//! Waiting for a condition, the one way every test of the workspace waits.
//!
//! A test never sleeps for a fixed time to let something happen: it polls a
//! probe until the probe succeeds or a generous deadline passes. The probe
//! says what it saw when it fails (`ensure!(.., "saw {x:?}")`), and the
//! timeout error carries the last of those observations, so a red test
//! tells what the system was doing instead of just "timed out".

use anyhow::{anyhow, Result};
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
    let deadline = Instant::now() + within;
    loop {
        match probe().await {
            Ok(value) => return Ok(value),
            Err(last) if Instant::now() >= deadline => {
                return Err(anyhow!(
                    "timed out after {within:?} waiting for {what}; last: {last:#}"
                ));
            }
            Err(_) => tokio::time::sleep(PERIOD).await,
        }
    }
}

/// A plain HTTP/1.1 GET of `url` (`http://host:port/path`): the status and
/// the body (no client library: the servers under test speak plain HTTP).
pub async fn http_get(url: &str) -> Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("not an http:// URL: {url}"))?;
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut stream = tokio::net::TcpStream::connect(host).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await?;
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("GET {url}: no end of headers in {reply:?}"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("GET {url}: no status in {head:?}"))?;
    Ok((status, body.to_string()))
}

/// The text of the metrics at `url`: an error unless it answers 200.
pub async fn scrape(url: &str) -> Result<String> {
    match http_get(url).await? {
        (200, body) => Ok(body),
        (status, body) => Err(anyhow!("GET {url}: {status} {body}")),
    }
}

/// The value of the Prometheus/OpenMetrics sample `name` (the whole series
/// name with labels, e.g. `x_total{type="udp"}`) in `text`, if present.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            (series == name).then(|| value.parse().ok()).flatten()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_matches_whole_series_names_only() {
        let text = "# TYPE a counter\na_total 3\na_total{type=\"udp\"} 5\nab_total 7\n";
        assert_eq!(metric(text, "a_total"), Some(3.0));
        assert_eq!(metric(text, "a_total{type=\"udp\"}"), Some(5.0));
        assert_eq!(metric(text, "a"), None);
    }

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
}
