//! A real etcd (Debian `etcd-server`) for tests, plus `etcdctl`:
//! [`Etcd::start`] runs it on free loopback ports with a temporary data
//! directory, and it can be stopped, restarted or restarted empty. Which API a
//! test's pipeline uses is [`Api::from_env`] (`E2E_ETCD_API=v2|v3`, default
//! v2).

use crate::ports::{free_port, is_conflict, retry_on_conflict};
use crate::process::Process;
use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

mod backup;

/// The demo `default/kubernetes` A record (key, JSON), as kube2sky writes
/// it for cluster IP 10.0.0.1: what most skydns tests seed etcd with.
pub const KUBERNETES_RECORD: (&str, &str) = (
    "/skydns/local/cluster/svc/default/kubernetes/c88f1059",
    r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
);

/// How long to wait for etcd to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Which etcd API the pipeline under test reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// The v2 keys API (kube2sky 1.2, SkyDNS 2.5.2c).
    V2,
    /// The v3 API.
    V3,
}

impl Api {
    /// `E2E_ETCD_API` (`v2` or `v3`); v2 when unset.
    pub fn from_env() -> Api {
        match std::env::var("E2E_ETCD_API").as_deref() {
            Ok("v3") => Api::V3,
            Ok("v2") | Err(_) => Api::V2,
            Ok(other) => panic!("E2E_ETCD_API must be v2 or v3, not {other:?}"),
        }
    }

    /// kube2sky's `--etcd-api` flag for this API.
    pub fn kube2sky_flag(self) -> &'static str {
        match self {
            Api::V2 => "--etcd-api=v2",
            Api::V3 => "--etcd-api=v3",
        }
    }

    /// skydns's flags for this API (`-etcd3` for v3, none for v2).
    pub fn skydns_flags(self) -> &'static [&'static str] {
        match self {
            Api::V2 => &[],
            Api::V3 => &["-etcd3"],
        }
    }
}

/// A running (or stopped) etcd server owned by a test.
pub struct Etcd {
    api: Api,
    /// Whether the v2 keys API is served (`--enable-v2`).
    v2: bool,
    /// CA, client certificate and key when etcd requires client TLS.
    tls: Option<[PathBuf; 3]>,
    /// etcd's own certificate and key, with `tls`.
    server_tls: Option<[PathBuf; 2]>,
    /// More etcd flags (e.g. `--max-txn-ops=64`), kept across restarts.
    flags: Vec<String>,
    process: Option<Process>,
    dir: TempDir,
    data: PathBuf,
    client_port: u16,
    peer_port: u16,
    generation: u32,
    /// `--name`, unique to this server: the readiness probe checks that the
    /// etcd answering on `client_port` is this one.
    name: String,
    /// The etcd binary, when not Debian's (`etcd` on `PATH`).
    binary: Option<PathBuf>,
}

/// Numbers the servers this process starts, for unique member names.
static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Etcd {
    /// Starts etcd on free loopback ports and waits until it serves reads;
    /// the pipeline's API is [`Api::from_env`].
    pub fn start() -> Result<Self> {
        Self::start_with(Api::from_env())
    }

    /// Starts etcd for a pipeline on `api`.
    pub fn start_with(api: Api) -> Result<Self> {
        Self::spawn_new(api, true)
    }

    /// Starts an etcd that serves only the v3 API, as etcd ≥ 3.4 does by default.
    pub fn start_without_v2() -> Result<Self> {
        Self::spawn_new(Api::V3, false)
    }

    /// Starts etcd serving `https` only to clients with a certificate
    /// signed by `certs`' CA (`--client-cert-auth`); [`Etcd::etcdctl`],
    /// [`Etcd::put`] and the rest present `certs`' client certificate.
    pub fn start_tls(certs: &crate::tls::Certificates) -> Result<Self> {
        Self::spawn_with(Api::from_env(), true, Some(certs), &[])
    }

    /// Starts etcd for a pipeline on `api` with more etcd `flags`.
    pub fn start_with_flags(api: Api, flags: &[&str]) -> Result<Self> {
        Self::spawn_with(api, true, None, flags)
    }

    /// Starts the etcd at `binary` with more `flags` (v3 API only; etcd
    /// 3.6 serves no v2), as the real control plane's store
    /// ([`crate::control_plane`]).
    pub fn start_binary(binary: &Path, flags: &[&str]) -> Result<Self> {
        Self::spawn_from(Some(binary), Api::V3, false, None, flags)
    }

    fn spawn_new(api: Api, v2: bool) -> Result<Self> {
        Self::spawn_with(api, v2, None, &[])
    }

    fn spawn_with(
        api: Api,
        v2: bool,
        certs: Option<&crate::tls::Certificates>,
        flags: &[&str],
    ) -> Result<Self> {
        crate::tools::require("etcd", "etcd-server")?;
        Self::spawn_from(None, api, v2, certs, flags)
    }

    fn spawn_from(
        binary: Option<&Path>,
        api: Api,
        v2: bool,
        certs: Option<&crate::tls::Certificates>,
        flags: &[&str],
    ) -> Result<Self> {
        let dir = tempfile::tempdir().context("creating a temporary etcd directory")?;
        let mut etcd = Etcd {
            api,
            v2,
            tls: certs.map(|c| [c.ca(), c.cert("client"), c.key("client")]),
            server_tls: certs.map(|c| [c.cert("server"), c.key("server")]),
            flags: flags.iter().map(|f| f.to_string()).collect(),
            process: None,
            data: dir.path().join("data-0"),
            dir,
            client_port: 0,
            peer_port: 0,
            generation: 0,
            name: format!(
                "test-{}-{}",
                std::process::id(),
                STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ),
            binary: binary.map(Path::to_path_buf),
        };
        retry_on_conflict(|| {
            etcd.client_port = free_port()?;
            etcd.peer_port = free_port()?;
            etcd.spawn()
        })?;
        Ok(etcd)
    }

    /// The client port's address, for a relay in front of it.
    pub fn client_addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.client_port))
    }

    /// The client URL, e.g. `http://127.0.0.1:23791`.
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.client_addr())
    }

    /// Kills the server (data is kept).
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Stops the server's process where it is (SIGSTOP): requests wait,
    /// none fail, until [`Etcd::thaw`]. A test uses it to hold a writer
    /// mid-way while it makes changes, whatever the machine's speed.
    pub fn freeze(&self) -> Result<()> {
        self.signal(nix::sys::signal::Signal::SIGSTOP)
    }

    /// Lets a frozen server go on (SIGCONT).
    pub fn thaw(&self) -> Result<()> {
        self.signal(nix::sys::signal::Signal::SIGCONT)
    }

    fn signal(&self, signal: nix::sys::signal::Signal) -> Result<()> {
        let process = self.process.as_ref().context("etcd is not running")?;
        process.signal(signal)
    }

    /// Starts the server again on the same data and ports.
    pub fn restart(&mut self) -> Result<()> {
        self.stop();
        self.respawn_on_same_ports()
    }

    /// Starts the server again on the same data and ports with `flags` in
    /// place of the ones it was started with (an operator's rolling change).
    pub fn restart_with_flags(&mut self, flags: &[&str]) -> Result<()> {
        self.stop();
        self.flags = flags.iter().map(|f| f.to_string()).collect();
        self.respawn_on_same_ports()
    }

    /// Starts the server again on the same ports with an empty data directory.
    pub fn restart_empty(&mut self) -> Result<()> {
        self.stop();
        self.generation += 1;
        self.data = self.dir.path().join(format!("data-{}", self.generation));
        self.respawn_on_same_ports()
    }

    /// Starts etcd again on its ports, waiting while another process holds
    /// one of them (clients were told this endpoint; it cannot move).
    fn respawn_on_same_ports(&mut self) -> Result<()> {
        crate::wait::eventually_blocking("etcd's ports to be free again", READY_TIMEOUT, || {
            match self.spawn() {
                Err(e) if is_conflict(&format!("{e:#}")) => Err(e),
                other => Ok(other),
            }
        })?
    }

    /// The API the pipeline under test uses.
    pub fn api(&self) -> Api {
        self.api
    }

    /// Runs `etcdctl` (v3 API) against this server.
    pub fn etcdctl(&self, args: &[&str]) -> Result<Output> {
        let mut tls = Vec::new();
        if let Some([ca, cert, key]) = &self.tls {
            tls.push(format!("--cacert={}", ca.display()));
            tls.push(format!("--cert={}", cert.display()));
            tls.push(format!("--key={}", key.display()));
        }
        let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
        etcdctl(&self.endpoint(), &[&tls[..], args].concat())
    }

    /// Runs `ETCDCTL_API=2 etcdctl` against this server.
    pub fn etcdctl_v2(&self, args: &[&str]) -> Result<Output> {
        let tls: Vec<String> = self
            .tls
            .iter()
            .flat_map(|[ca, cert, key]| {
                [
                    format!("--ca-file={}", ca.display()),
                    format!("--cert-file={}", cert.display()),
                    format!("--key-file={}", key.display()),
                ]
            })
            .collect();
        let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
        etcdctl_v2(&self.endpoint(), &[&tls[..], args].concat())
    }

    /// Writes `key` through the pipeline's API (`etcdctl put`, or v2 `etcdctl set`).
    pub fn put(&self, key: &str, value: &str) -> Result<()> {
        match self.api {
            Api::V3 => check(self.etcdctl(&["put", key, value])?, "etcdctl put"),
            Api::V2 => check(self.etcdctl_v2(&["set", "--", key, value])?, "etcdctl set"),
        }
    }

    /// Deletes `key` through the pipeline's API; a missing key is fine.
    pub fn del(&self, key: &str) -> Result<()> {
        match self.api {
            Api::V3 => check(self.etcdctl(&["del", key])?, "etcdctl del"),
            Api::V2 => {
                let out = self.etcdctl_v2(&["rm", key])?;
                if String::from_utf8_lossy(&out.stderr).contains("Key not found") {
                    return Ok(());
                }
                check(out, "etcdctl rm")
            }
        }
    }

    /// Every key and value under `prefix`, in key order, through the
    /// pipeline's API. v2 never lists hidden (`_`) keys: use
    /// [`Etcd::get_prefix_expecting`] where they matter.
    pub fn get_prefix(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        self.get_prefix_expecting(prefix, &[])
    }

    /// [`Etcd::get_prefix`], plus (v2) each of `expected` keys read by
    /// name, since v2 cannot list those under a hidden segment.
    pub fn get_prefix_expecting(
        &self,
        prefix: &str,
        expected: &[&str],
    ) -> Result<Vec<(String, String)>> {
        match self.api {
            Api::V3 => self.get_prefix_v3(prefix),
            Api::V2 => {
                let mut found: std::collections::BTreeMap<String, String> = self
                    .get_v2(prefix.trim_end_matches('/'))?
                    .into_iter()
                    .collect();
                for key in expected.iter().filter(|k| k.starts_with(prefix)) {
                    found.extend(self.get_v2(key)?);
                }
                Ok(found.into_iter().collect())
            }
        }
    }

    /// `curl` of `path` on this server, the body parsed as JSON.
    fn get_json(&self, path: &str) -> Result<serde_json::Value> {
        self.get_json_within(path, Duration::from_secs(10))?
            .with_context(|| format!("GET {path}: no reply within 10s"))
    }

    /// `curl` of `path`, waiting at most `limit` for the whole reply:
    /// `None` when the time ran out (a v2 long poll with no event yet).
    fn get_json_within(&self, path: &str, limit: Duration) -> Result<Option<serde_json::Value>> {
        let url = format!("{}{path}", self.endpoint());
        let out = self
            .curl()?
            .args([
                "-s",
                "--max-time",
                &format!("{:.3}", limit.as_secs_f64()),
                &url,
            ])
            .stdin(Stdio::null())
            .output()
            .context("running curl")?;
        const CURL_TIMED_OUT: i32 = 28;
        if out.status.code() == Some(CURL_TIMED_OUT) {
            return Ok(None);
        }
        serde_json::from_slice(&out.stdout)
            .map(Some)
            .with_context(|| format!("GET {url}: {}", String::from_utf8_lossy(&out.stdout)))
    }

    /// `curl`, presenting the client certificate when etcd requires one.
    fn curl(&self) -> Result<Command> {
        let mut curl = crate::tools::command("curl", "curl")?;
        if let Some([ca, cert, key]) = &self.tls {
            curl.arg("--cacert")
                .arg(ca)
                .arg("--cert")
                .arg(cert)
                .arg("--key")
                .arg(key);
        }
        Ok(curl)
    }

    /// The store's current version through the pipeline's API: the v3
    /// revision, or the v2 index. It moves on every write.
    pub fn revision(&self) -> Result<u64> {
        match self.api {
            Api::V2 => self.v2_index(),
            Api::V3 => {
                let out = self.etcdctl(&["get", "/", "--limit=1", "-w", "json"])?;
                let json: serde_json::Value = serde_json::from_slice(&out.stdout)
                    .with_context(|| format!("etcdctl get -w json: {out:?}"))?;
                json["header"]["revision"]
                    .as_u64()
                    .with_context(|| format!("no header.revision in {json}"))
            }
        }
    }

    /// etcd's current index through the v2 keys API (`X-Etcd-Index`).
    pub fn v2_index(&self) -> Result<u64> {
        let out = self
            .curl()?
            .args(["-s", "-o", "/dev/null", "-D", "-", "--max-time", "10"])
            .arg(format!("{}/v2/keys/", self.endpoint()))
            .stdin(Stdio::null())
            .output()
            .context("running curl")?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("X-Etcd-Index: "))
            .and_then(|v| v.trim().parse().ok())
            .context("no X-Etcd-Index header")
    }

    /// The v2 events at or below `path` from index `from` on, as
    /// `(action, key)`, up to and including the first one `last` accepts
    /// (which must come within `within`). They come
    /// from etcd's event history, which (unlike a live watch) also holds
    /// keys under hidden `_` segments.
    pub fn v2_events_until(
        &self,
        path: &str,
        from: u64,
        within: Duration,
        last: impl Fn(&str, &str) -> bool,
    ) -> Result<Vec<(String, String)>> {
        let mut events = Vec::new();
        let mut next = from;
        let deadline = Instant::now() + within;
        loop {
            let poll = format!("/v2/keys{path}?wait=true&recursive=true&waitIndex={next}");
            // Short polls, re-sent at the same index. A poll that reaches
            // etcd before the event is a live watch, and etcd's live watches
            // skip keys under hidden `_` segments (watcher_hub.go); the
            // re-sent poll then finds the event in the history.
            let Some(event) = self.get_json_within(&poll, Duration::from_secs(1))? else {
                if Instant::now() >= deadline {
                    bail!(
                        "no accepted v2 event under {path} within {within:?}; \
                         events from index {from}: {events:?}"
                    );
                }
                continue;
            };
            let index = event["node"]["modifiedIndex"]
                .as_u64()
                .context("no index")?;
            let action = event["action"].as_str().unwrap_or_default().to_string();
            let key = event["node"]["key"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let done = last(&action, &key);
            events.push((action, key));
            if done {
                return Ok(events);
            }
            next = index + 1;
        }
    }

    /// The keys at or below `path` through the v2 keys API (a missing path is empty).
    fn get_v2(&self, path: &str) -> Result<Vec<(String, String)>> {
        let body = self.get_json(&format!("/v2/keys{path}?recursive=true"))?;
        if body.get("errorCode").and_then(|c| c.as_u64()) == Some(100) {
            return Ok(Vec::new());
        }
        let mut pairs = Vec::new();
        collect_leaves(&body["node"], &mut pairs);
        Ok(pairs)
    }

    fn get_prefix_v3(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let out = self.etcdctl(&["get", prefix, "--prefix"])?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        check(out, "etcdctl get --prefix")?;
        let lines: Vec<&str> = text.lines().collect();
        Ok(lines
            .chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| (c[0].to_string(), c[1].to_string()))
            .collect())
    }

    fn log_path(&self) -> PathBuf {
        self.dir
            .path()
            .join(format!("etcd-{}.log", self.generation))
    }

    fn spawn(&mut self) -> Result<()> {
        let client = self.endpoint();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        // etcd 3.6 (a `binary` of the control plane's) has no v2 flags.
        let mut extra = Vec::new();
        if self.binary.is_none() {
            extra.push(format!("--enable-v2={}", self.v2));
        }
        if let Some([cert, key]) = &self.server_tls {
            extra.push(format!("--cert-file={}", cert.display()));
            extra.push(format!("--key-file={}", key.display()));
        }
        if let Some([ca, _, _]) = &self.tls {
            extra.push(format!("--trusted-ca-file={}", ca.display()));
            extra.push("--client-cert-auth".to_string());
        }
        extra.extend(self.flags.iter().cloned());
        let member = crate::etcd_member::MemberSpec {
            name: &self.name,
            data: &self.data,
            client: &client,
            peer: &peer,
            cluster: &format!("{}={peer}", self.name),
        };
        self.process = Some(match &self.binary {
            Some(binary) => member.spawn_binary(binary, &extra, &self.log_path())?,
            None => member.spawn(&extra, &self.log_path())?,
        });
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<()> {
        let mut process = self.process.take().context("etcd not started")?;
        // A port found free may be taken before etcd binds it: another
        // test's etcd could answer the probe while this one is failing
        // with "address already in use". Only this member's name counts.
        let ready = process.until_ready_blocking(READY_TIMEOUT, || {
            let probe = self.etcdctl(&["member", "list", "--command-timeout=1s"])?;
            ensure!(probe.status.success(), "{probe:?}");
            let members = String::from_utf8_lossy(&probe.stdout);
            ensure!(
                members.contains(&format!(", {}, ", self.name)),
                "another etcd answers on port {}: {members}",
                self.client_port
            );
            Ok(())
        });
        if ready.is_ok() {
            self.process = Some(process);
        }
        ready.with_context(|| format!("log:\n{}", self.log()))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs `etcdctl` with the v2 API against `endpoint` (as the 1.2 docs do).
pub fn etcdctl_v2(endpoint: &str, args: &[&str]) -> Result<Output> {
    crate::tools::command("etcdctl", "etcd-client")?
        .env("ETCDCTL_API", "2")
        .arg(format!("--endpoints={endpoint}"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running etcdctl (v2)")
}

/// Runs `etcdctl` with the v3 API against `endpoint`.
pub fn etcdctl(endpoint: &str, args: &[&str]) -> Result<Output> {
    crate::tools::command("etcdctl", "etcd-client")?
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoint}"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running etcdctl")
}

/// Every key (with its value) in a v2 node tree.
fn collect_leaves(node: &serde_json::Value, out: &mut Vec<(String, String)>) {
    if node.get("dir").and_then(|d| d.as_bool()) == Some(true) {
        for child in node["nodes"].as_array().into_iter().flatten() {
            collect_leaves(child, out);
        }
    } else if let (Some(k), Some(v)) = (node["key"].as_str(), node["value"].as_str()) {
        out.push((k.to_string(), v.to_string()));
    }
}

fn check(out: Output, what: &str) -> Result<()> {
    if !out.status.success() {
        bail!("{what} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}
