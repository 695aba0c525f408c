//! HTTP GETs of the servers under test (health, readiness, metrics), and
//! reading one value out of a Prometheus/OpenMetrics text. The client ignores
//! proxy settings and gives up after 5 s. [`start_server`] starts a server that
//! takes its port as a flag, on a free one.

use anyhow::{anyhow, Context, Result};
use std::time::Duration;

/// A reply: status, `Content-Type` (empty if none) and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

/// GET `url` (any status is a reply; only no reply is an error).
pub async fn get(url: &str) -> Result<Response> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .context("building an HTTP client")?;
    let reply = client
        .get(url)
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    let status = reply.status().as_u16();
    let content_type = reply
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = reply
        .text()
        .await
        .with_context(|| format!("GET {url}: body"))?;
    Ok(Response {
        status,
        content_type,
        body,
    })
}

/// An HTTP server that takes its port as a flag (exec-healthz), started
/// with `command(port)` on a free loopback port: stdin closed, stdout to
/// nowhere, stderr on a pipe the caller may read or close. Ready once a
/// GET of `path` is answered; started again on another port while it
/// exits saying its port was taken. Returns it and `http://127.0.0.1:<port>`.
pub async fn start_server(
    name: &str,
    mut command: impl FnMut(u16) -> std::process::Command,
    path: &str,
) -> Result<(crate::process::Process, String)> {
    use std::process::Stdio;
    crate::ports::on_free_port(async |port| {
        let mut command = command(port);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut process = crate::process::Process::spawn(name, command)?;
        let base = format!("http://127.0.0.1:{port}");
        let url = format!("{base}{path}");
        let ready = process.until_ready(crate::wait::DEADLINE, async || get(&url).await);
        ready.await.with_context(|| process.stderr_after_exit())?;
        Ok((process, base))
    })
    .await
}

/// The text of the metrics at `url`: an error unless it answers 200.
pub async fn scrape(url: &str) -> Result<String> {
    match get(url).await? {
        Response {
            status: 200, body, ..
        } => Ok(body),
        Response { status, body, .. } => Err(anyhow!("GET {url}: {status} {body}")),
    }
}

/// The value of the sample `name` (the whole series name with labels,
/// e.g. `x_total{type="udp"}`) in `text`, if present.
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
}
