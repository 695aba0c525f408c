//! Helpers shared by the integration tests: free ports, polling with a
//! deadline, HTTP without proxies, finding processes by a unique token in
//! their command line, and children that are killed when dropped.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::net::{TcpListener, UdpSocket};
use std::process::Child;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A TCP port that was free a moment ago on 127.0.0.1.
pub fn free_tcp_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

/// A port free for both UDP and TCP on 127.0.0.1 (for a DNS server).
pub fn free_udp_tcp_port() -> u16 {
    for _ in 0..50 {
        let udp = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        let port = udp.local_addr().expect("local addr").port();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no port free for both UDP and TCP");
}

/// Polls `check` every 20 ms until it yields `Some`, panicking with `what`
/// after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `url` until it answers 503, and returns that body.
pub async fn eventually_503(timeout: Duration, what: &str, url: &str) -> String {
    eventually(timeout, what, || async move {
        get(url)
            .await
            .ok()
            .and_then(|(s, _, b)| (s == 503).then_some(b))
    })
    .await
}

/// An HTTP client that ignores proxy settings and gives up after 5 s.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("reqwest client")
}

/// Status, content type and body of a GET.
pub async fn get(url: &str) -> reqwest::Result<(u16, String, String)> {
    let resp = client().get(url).send().await?;
    let status = resp.status().as_u16();
    let ctype = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = resp.text().await?;
    Ok((status, ctype, body))
}

/// Value of an OpenMetrics sample line such as `exechealthz_runs_total`.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("metric {name} missing from:\n{text}"))
        .trim()
        .parse()
        .expect("metric value")
}

/// A `sleep` argument unique to this call, e.g. `3600.123400017`, so the
/// processes a test starts can be found in /proc and nothing else matches.
pub fn unique_sleep() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "3600.{}{:04}7",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Live (non-zombie) processes whose command line contains `token`.
pub fn processes_with(token: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if !zombie && String::from_utf8_lossy(&cmdline).contains(token) {
            found.push(pid);
        }
    }
    found
}

/// Waits until no live process carries `token`.
pub async fn assert_no_process_with(token: &str) {
    eventually(
        Duration::from_secs(5),
        &format!("processes with {token} to be gone"),
        || async { processes_with(token).is_empty().then_some(()) },
    )
    .await;
}

/// A child process that is killed and reaped when dropped.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    /// SIGTERM first: exec-healthz then kills the process group of a run in
    /// flight (a SIGKILL would leave the run's `sleep` behind); SIGKILL if
    /// it is still there after 10 s.
    fn drop(&mut self) {
        use nix::sys::signal::{kill, Signal};
        use nix::unistd::Pid;
        if let Ok(pid) = i32::try_from(self.0.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits up to `timeout` for the child to exit.
pub async fn wait_exit(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    eventually(timeout, "the process to exit", || {
        let status = child.try_wait().expect("try_wait");
        async move { status }
    })
    .await
}
