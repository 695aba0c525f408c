//! In-process tests of `healthz::run` on 127.0.0.1:0 with real commands and
//! the real clock: every `/healthz` outcome with the 1.0 bodies and content
//! types, the index page, `/metrics`, `/quit` and shutdown.

mod support;

use std::time::Duration;

use healthz::{Config, Exit};
use support::{assert_no_process_with, metric, unique_sleep};
use test_support::http::get;
use test_support::process::process_groups_with;
use test_support::wait::{eventually, within, DEADLINE};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const PLAIN: &str = "text/plain; charset=utf-8";

/// A running `healthz::run`; shut down when dropped.
struct Server {
    base: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<anyhow::Result<Exit>>>,
}

impl Server {
    async fn start(config: Config) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(healthz::run(config, listener, async move {
            let _ = stopped.await;
        }));
        Self {
            base,
            stop: Some(stop),
            task: Some(task),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn metrics(&self) -> String {
        get(&self.url("/metrics")).await.expect("GET /metrics").body
    }

    /// Waits for a `/healthz` answer with this status; returns its body.
    async fn healthz_until(&self, status: u16) -> (String, String) {
        let url = self.url("/healthz");
        eventually(
            &format!("/healthz to answer {status}"),
            DEADLINE,
            async || {
                let reply = get(&url).await?;
                anyhow::ensure!(reply.status == status, "{reply:?}");
                Ok((reply.content_type, reply.body))
            },
        )
        .await
        .unwrap()
    }

    async fn shutdown(mut self) -> Exit {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = self.task.take().expect("task");
        within("run to return after shutdown", DEADLINE, task)
            .await
            .unwrap()
            .expect("join")
            .expect("run ok")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Waits until the counter `series` reaches `n`; the metrics text then.
async fn runs_at_least(server: &Server, series: &str, n: f64) -> String {
    eventually(&format!("{series} >= {n}"), DEADLINE, async || {
        let text = server.metrics().await;
        let value = metric(&text, series);
        anyhow::ensure!(value >= n, "{series} {value}");
        Ok(text)
    })
    .await
    .unwrap()
}

fn config(cmd: &str, period_ms: u64, latency_ms: u64) -> Config {
    Config {
        cmd: cmd.to_owned(),
        period: Duration::from_millis(period_ms),
        latency: Duration::from_millis(latency_ms),
        timeout: Duration::from_millis(latency_ms),
        ..Config::default()
    }
}

/// Checks `<ts>` looks like Go's `time.Time.String()` in UTC.
fn assert_go_timestamp(ts: &str) {
    let (date_time, zone) = ts.split_at(ts.len() - " +0000 UTC".len());
    assert_eq!(zone, " +0000 UTC", "{ts}");
    let bytes = date_time.as_bytes();
    assert!(bytes.len() >= 19, "{ts}");
    for (i, b) in bytes.iter().enumerate() {
        let ok = match i {
            4 | 7 => *b == b'-',
            10 => *b == b' ',
            13 | 16 => *b == b':',
            19 => *b == b'.',
            _ => b.is_ascii_digit(),
        };
        assert!(ok, "bad timestamp {ts:?} at {i}");
    }
}

#[tokio::test]
async fn healthy_before_the_first_run() {
    // A period of a minute: the first run cannot come before the GET, even
    // on a loaded machine.
    let server = Server::start(config("true", 60_000, 60_000)).await;
    let reply = get(&server.url("/healthz")).await.expect("GET");
    assert_eq!(
        (
            reply.status,
            reply.content_type.as_str(),
            reply.body.as_str()
        ),
        (200, PLAIN, "ok")
    );
    assert_eq!(
        metric(&server.metrics().await, "exechealthz_runs_total"),
        0.0
    );
    assert_eq!(server.shutdown().await, Exit::Shutdown);
}

#[tokio::test]
async fn healthy_after_successful_runs() {
    let server = Server::start(config("true", 100, 5_000)).await;
    runs_at_least(&server, "exechealthz_runs_total", 2.0).await;
    let reply = get(&server.url("/healthz")).await.expect("GET");
    assert_eq!((reply.status, reply.body.as_str()), (200, "ok"));
    assert_eq!(server.shutdown().await, Exit::Shutdown);
}

#[tokio::test]
async fn first_run_is_one_period_after_start() {
    // The run writes when it ran; a loaded machine can only make the gap
    // longer, so the check is a lower bound and cannot flake.
    let dir = tempfile::tempdir().expect("tempdir");
    let runs = dir.path().join("runs");
    let cmd = format!("date +%s.%N >> '{}'", runs.display());
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs_f64();
    let _server = Server::start(config(&cmd, 1_000, 5_000)).await;
    let first: f64 = eventually("the first run", DEADLINE, async || {
        let text = std::fs::read_to_string(&runs)?;
        let first = text.lines().next().unwrap_or_default();
        Ok(first.parse()?)
    })
    .await
    .unwrap();
    let gap = first - before;
    assert!(
        gap >= 1.0,
        "the first run came {gap:.3}s after start, not a period (1s)"
    );
}

#[tokio::test]
async fn failed_run_gives_503_with_the_reference_body() {
    let server = Server::start(config("echo boom; echo line2 >&2; exit 3", 50, 5_000)).await;
    let (ctype, body) = server.healthz_until(503).await;
    assert_eq!(ctype, PLAIN);
    let rest = body
        .strip_prefix("Healthz probe error: Result of last exec: boom\nline2\n, at ")
        .unwrap_or_else(|| panic!("unexpected body {body:?}"));
    let ts = rest
        .strip_suffix(", error exit status 3\n")
        .unwrap_or_else(|| panic!("unexpected body {body:?}"));
    assert_go_timestamp(ts);
    let metrics = server.metrics().await;
    assert!(metric(&metrics, "exechealthz_failures_total") >= 1.0);
    assert_eq!(metric(&metrics, "exechealthz_timeouts_total"), 0.0);
}

#[tokio::test]
async fn result_follows_the_latest_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flag = dir.path().join("healthy");
    let server = Server::start(config(&format!("test -e '{}'", flag.display()), 50, 5_000)).await;
    let (_, body) = server.healthz_until(503).await;
    assert!(body.ends_with(", error exit status 1\n"), "{body:?}");
    std::fs::write(&flag, b"").expect("create flag");
    let (_, body) = server.healthz_until(200).await;
    assert_eq!(body, "ok");
    std::fs::remove_file(&flag).expect("remove flag");
    server.healthz_until(503).await;
}

#[tokio::test]
async fn stale_result_gives_503_too_old() {
    // Runs take 3 s but the timeout is long: the initial result goes stale.
    let mut cfg = config("sleep 3", 50, 300);
    cfg.timeout = Duration::from_secs(60);
    let server = Server::start(cfg).await;
    let (ctype, body) = server.healthz_until(503).await;
    assert_eq!(ctype, PLAIN);
    let ts = body
        .strip_prefix("Latest result too old to be useful: Result of last exec: , at ")
        .and_then(|r| r.strip_suffix(", error None.\n"))
        .unwrap_or_else(|| panic!("unexpected body {body:?}"));
    assert_go_timestamp(ts);
}

#[tokio::test]
async fn hung_command_gives_503_after_the_latency_and_leaves_no_process() {
    let token = unique_sleep();
    let cmd = format!("sleep {token} & sleep {token}");
    let server = Server::start(config(&cmd, 50, 500)).await;
    // The initial result goes stale first (503 too old), then the first run
    // times out and is stored as a failure.
    let url = server.url("/healthz");
    let body = eventually("a 503 naming the timeout", DEADLINE, async || {
        let reply = get(&url).await?;
        anyhow::ensure!(
            reply.status == 503 && reply.body.contains("timed out"),
            "{reply:?}"
        );
        Ok(reply.body)
    })
    .await
    .unwrap();
    assert!(
        body.starts_with("Healthz probe error: Result of last exec: , at "),
        "{body:?}"
    );
    assert!(
        body.ends_with(", error timed out after 500ms, process group killed (signal: killed)\n"),
        "{body:?}"
    );
    // Runs never overlap, so the processes never pile up. Each run is a
    // process group: the one running, and at most the one just killed,
    // whose members the kernel may not have reaped yet. Overlapping runs
    // (one every 50 ms, each hung for 500 ms) would be ten.
    for _ in 0..20 {
        let groups = process_groups_with(&token);
        assert!(
            groups.len() <= 2,
            "{} runs of the hung command alive at once: {groups:?}",
            groups.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let metrics = server.metrics().await;
    assert!(metric(&metrics, "exechealthz_timeouts_total") >= 1.0);
    assert_eq!(server.shutdown().await, Exit::Shutdown);
    assert_no_process_with(&token).await;
}

#[tokio::test]
async fn runs_never_overlap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("log");
    let cmd = format!(
        "echo start >> '{0}'; sleep 0.2; echo end >> '{0}'",
        log.display()
    );
    let server = Server::start(config(&cmd, 20, 5_000)).await;
    runs_at_least(&server, "exechealthz_runs_total", 4.0).await;
    assert_eq!(server.shutdown().await, Exit::Shutdown);
    let text = std::fs::read_to_string(&log).expect("log");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 8, "{lines:?}");
    for (i, line) in lines.iter().enumerate() {
        let expected = if i % 2 == 0 { "start" } else { "end" };
        assert_eq!(*line, expected, "overlapping runs: {lines:?}");
    }
}

#[tokio::test]
async fn every_other_path_serves_the_index_page() {
    let server = Server::start(config("true", 60_000, 60_000)).await;
    let expected = "<b> Kubernetes healthz sidecar container </b><br/><br/>\
        <a href=\"/healthz\">/healthz: healthz probe. Returns \"ok\" if the command given through -cmd exits with 0.</a><br/>\
        <a href=\"/quit\">/quit: Cause this container to exit.</a><br/>";
    for path in ["/", "/foo", "/healthz/", "/quit/x"] {
        let reply = get(&server.url(path)).await.expect("GET");
        assert_eq!(reply.status, 200, "{path}");
        assert_eq!(reply.content_type, "text/html; charset=utf-8", "{path}");
        assert_eq!(reply.body, expected, "{path}");
    }
    let resp = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
        .post(server.url("/healthz"))
        .send()
        .await
        .expect("POST");
    assert_eq!(resp.status().as_u16(), 200, "any method is served");
}

#[tokio::test]
async fn metrics_count_runs_and_failures() {
    let server = Server::start(config("false", 50, 5_000)).await;
    let text = runs_at_least(&server, "exechealthz_failures_total", 2.0).await;
    assert!(metric(&text, "exechealthz_runs_total") >= 2.0);
    assert!(metric(&text, "exechealthz_last_run_duration_seconds") > 0.0);
    let ctype = get(&server.url("/metrics"))
        .await
        .expect("GET")
        .content_type;
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
}

#[tokio::test]
async fn quit_makes_run_return_without_answering() {
    let server = Server::start(config("true", 60_000, 60_000)).await;
    let url = server.url("/quit");
    let request = tokio::spawn(async move { get(&url).await });
    let mut server = server;
    let task = server.task.take().expect("task");
    let exit = within("run to return", DEADLINE, task)
        .await
        .unwrap()
        .expect("join");
    assert_eq!(exit.expect("run ok"), Exit::Quit);
    let answered = within("the /quit request to end", DEADLINE, request)
        .await
        .unwrap()
        .expect("join");
    assert!(
        answered.is_err(),
        "/quit must not write a response: {answered:?}"
    );
}

#[tokio::test]
async fn quit_can_be_disabled() {
    let mut cfg = config("true", 60_000, 60_000);
    cfg.quit_enabled = false;
    let server = Server::start(cfg).await;
    let reply = get(&server.url("/quit")).await.expect("GET /quit");
    assert_eq!(reply.status, 403);
    assert!(reply.body.contains("-quit-enabled=false"), "{reply:?}");
    let reply = get(&server.url("/healthz")).await.expect("still serving");
    assert_eq!((reply.status, reply.body.as_str()), (200, "ok"));
    let index = get(&server.url("/")).await.expect("index").body;
    assert!(!index.contains("/quit"), "{index}");
    assert_eq!(server.shutdown().await, Exit::Shutdown);
}
