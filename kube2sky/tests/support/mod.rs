//! Shared harness for the kube2sky end-to-end tests: a real etcd, the
//! in-process API test server, kubectl with a throw-away kubeconfig, and the
//! real `kube2sky` binary on free ports (killed on drop). Waiting is always
//! "poll with a deadline"; missing tools fail with an install hint.

#![allow(dead_code, unreachable_pub)]

use anyhow::{bail, Context, Result};
use integration_tests::apiserver::{
    ApiServer, ApiServerHandle, Config, Key, Preconditions, ResourceKind,
};
use integration_tests::etcd::{free_port, require_binary, Etcd};
use serde_json::Value;
use skydns::record::Record;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// How long any "eventually" condition may take.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The §9 services: `kubernetes` and `kube-dns`, plus pod 1.2.3.4.
pub const KUBERNETES: &str = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"kubernetes","namespace":"default"},
 "spec":{"clusterIP":"10.0.0.1","ports":[{"name":"https","port":443,"protocol":"TCP","targetPort":443}]}}"#;
pub const KUBE_DNS: &str = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"kube-dns","namespace":"kube-system"},
 "spec":{"clusterIP":"10.0.0.10","selector":{"k8s-app":"kube-dns"},
  "ports":[{"name":"dns","port":53,"protocol":"UDP"},{"name":"dns-tcp","port":53,"protocol":"TCP"}]}}"#;

/// The rest of every A/SRV JSON value.
pub const REST: &str = r#""priority":10,"weight":10,"ttl":30,"targetstrip":0}"#;

/// The exact §9 contents of `/skydns`.
pub fn section9() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = [
        (
            "/skydns/local/cluster/pod/default/1-2-3-4/ad70cf0f",
            r#"{"host":"1.2.3.4","#.to_string(),
        ),
        (
            "/skydns/local/cluster/svc/default/kubernetes/_tcp/_https/c88f1059",
            r#"{"host":"kubernetes.default.svc.cluster.local.","port":443,"#.to_string(),
        ),
        (
            "/skydns/local/cluster/svc/default/kubernetes/c88f1059",
            r#"{"host":"10.0.0.1","#.to_string(),
        ),
        (
            "/skydns/local/cluster/svc/kube-system/kube-dns/21172049",
            r#"{"host":"10.0.0.10","#.to_string(),
        ),
        (
            "/skydns/local/cluster/svc/kube-system/kube-dns/_tcp/_dns-tcp/21172049",
            r#"{"host":"kube-dns.kube-system.svc.cluster.local.","port":53,"#.to_string(),
        ),
        (
            "/skydns/local/cluster/svc/kube-system/kube-dns/_udp/_dns/21172049",
            r#"{"host":"kube-dns.kube-system.svc.cluster.local.","port":53,"#.to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), format!("{v}{REST}")))
    .collect();
    v.sort();
    v
}

/// Starts the API server with the given JSON/YAML seed documents.
pub async fn apiserver(seed: &[&str]) -> Result<ApiServerHandle> {
    let mut config = Config {
        bookmark_interval: Duration::from_millis(500),
        ..Config::default()
    };
    for doc in seed {
        config = config.with_seed_text(doc)?;
    }
    Ok(ApiServer::start(config).await?)
}

/// Creates a pod with a `status.podIP` directly in the store (kubectl cannot set status).
pub fn create_pod(api: &ApiServerHandle, ns: &str, name: &str, ip: &str) -> Result<()> {
    let body = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"podIP": ip, "phase": "Running"},
    });
    api.store()
        .create(ResourceKind::Pod, Some(ns), body, true)?;
    Ok(())
}

/// Deletes an object directly in the store (works while the server is paused).
pub fn store_delete(
    api: &ApiServerHandle,
    kind: ResourceKind,
    ns: &str,
    name: &str,
) -> Result<Value> {
    let key = Key {
        kind,
        namespace: ns.into(),
        name: name.into(),
    };
    Ok(api.store().delete(&key, &Preconditions::default())?)
}

/// kubectl bound to one server through an isolated, empty kubeconfig.
pub struct Kubectl {
    dir: TempDir,
    server: String,
}

impl Kubectl {
    /// A kubectl for `api`; fails with an install hint if kubectl is missing.
    pub fn new(api: &ApiServerHandle) -> Result<Self> {
        require_binary("kubectl", "kubectl")?;
        let dir = tempfile::tempdir()?;
        std::fs::write(
            dir.path().join("kubeconfig"),
            "apiVersion: v1\nkind: Config\n",
        )?;
        Ok(Kubectl {
            dir,
            server: api.url(),
        })
    }

    /// Runs kubectl; fails on a non-zero exit.
    pub fn run(&self, args: &[&str]) -> Result<String> {
        let out = Command::new("kubectl")
            .arg(format!(
                "--kubeconfig={}",
                self.dir.path().join("kubeconfig").display()
            ))
            .arg(format!(
                "--cache-dir={}",
                self.dir.path().join("cache").display()
            ))
            .arg(format!("--server={}", self.server))
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()
            .context("running kubectl")?;
        if !out.status.success() {
            bail!(
                "kubectl {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `kubectl <verb> -f <manifest>` with the manifest written to a file.
    pub fn with_manifest(&self, verb: &str, manifest: &str) -> Result<String> {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let path = self
            .dir
            .path()
            .join(format!("m-{}.json", COUNT.fetch_add(1, Ordering::Relaxed)));
        std::fs::write(&path, manifest)?;
        let path = path.display().to_string();
        self.run(&[verb, "--validate=false", "-f", &path])
    }
}

/// The real kube2sky binary, killed on drop.
pub struct Kube2sky {
    child: Option<Child>,
    log: PathBuf,
    _dir: TempDir,
    /// The `--healthz-port`.
    pub port: u16,
}

impl Kube2sky {
    /// Starts kube2sky against `etcd` and `api` with extra flags.
    pub fn start(etcd: &Etcd, api: &ApiServerHandle, extra: &[&str]) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("kube2sky.log");
        let port = free_port()?;
        let file = std::fs::File::create(&log)?;
        let child = Command::new(env!("CARGO_BIN_EXE_kube2sky"))
            .arg(format!("--etcd-server={}", etcd.endpoint()))
            .arg(etcd.api().kube2sky_flag())
            .arg(format!("--kube_master_url={}", api.url()))
            .arg(format!("--healthz-port={port}"))
            .arg("--etcd-loss-check-interval=200ms")
            .arg("--v=2")
            .args(extra)
            .env("RUST_LOG", "kube2sky=debug,info")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .context("starting kube2sky")?;
        Ok(Kube2sky {
            child: Some(child),
            log,
            _dir: dir,
            port,
        })
    }

    /// What kube2sky logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// GET `path` on the health port: `Some((status, body))`, `None` if refused.
    pub async fn http(&self, path: &str) -> Option<(u16, String)> {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        let resp = reqwest::get(url).await.ok()?;
        let status = resp.status().as_u16();
        Some((status, resp.text().await.unwrap_or_default()))
    }

    /// The text of `/metrics` (an error unless it answers 200).
    pub async fn metrics(&self) -> Result<String> {
        match self.http("/metrics").await {
            Some((200, text)) => Ok(text),
            other => bail!("/metrics: {other:?}"),
        }
    }

    /// Waits until `/readiness` answers 200.
    pub async fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some((200, body)) = self.http("/readiness").await {
                assert_eq!(body, "ok\n");
                return Ok(());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                bail!("kube2sky exited with {status}; log:\n{}", self.log());
            }
            if Instant::now() > deadline {
                bail!(
                    "kube2sky not ready after {DEADLINE:?}; log:\n{}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: nix::sys::signal::Signal) -> Result<()> {
        let child = self.child.as_ref().context("kube2sky not running")?;
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id())?);
        nix::sys::signal::kill(pid, signal)?;
        Ok(())
    }

    /// Waits for the process to exit and returns its status.
    pub async fn wait_exit(&mut self, within: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + within;
        let child = self.child.as_mut().context("kube2sky not running")?;
        loop {
            if let Some(status) = child.try_wait()? {
                self.child = None;
                return Ok(status);
            }
            if Instant::now() > deadline {
                bail!(
                    "kube2sky still running after {within:?}; log:\n{}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Kube2sky {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn a(ip: &str) -> String {
    Record::kube2sky_address(ip).to_json()
}

pub fn label(ip: &str) -> String {
    Record::kube2sky_address(ip).key_label()
}

pub fn svc_manifest(name: &str, ip: &str, ports: &[(&str, &str, u16)]) -> String {
    let ports: Vec<String> = ports
        .iter()
        .map(|(n, p, port)| format!(r#"{{"name":"{n}","protocol":"{p}","port":{port}}}"#))
        .collect();
    format!(
        r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"{name}","namespace":"default"}},
           "spec":{{"clusterIP":"{ip}","ports":[{}]}}}}"#,
        ports.join(",")
    )
}

pub fn pairs(list: &[(&str, String)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = list
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    v.sort();
    v
}

/// etcd, the API server seeded with `default/kubernetes`, kubectl, and a ready kube2sky.
pub async fn cluster(
    flags: &[&str],
) -> Result<(
    Etcd,
    integration_tests::apiserver::ApiServerHandle,
    Kubectl,
    Kube2sky,
)> {
    let etcd = Etcd::start()?;
    let api = apiserver(&[KUBERNETES]).await?;
    let kubectl = Kubectl::new(&api)?;
    let mut k2s = Kube2sky::start(&etcd, &api, flags)?;
    k2s.wait_ready().await?;
    Ok((etcd, api, kubectl, k2s))
}

/// Everything under `/skydns`, sorted.
pub fn skydns(etcd: &Etcd) -> Result<Vec<(String, String)>> {
    under(etcd, "/skydns")
}

/// The named ports of the services these tests create. etcd v2 never lists
/// keys below a `_` segment, so on v2 the SRV keys are read by these names.
const PORT_DIRS: &[&str] = &[
    "_tcp/_http",
    "_tcp/_https",
    "_tcp/_pg",
    "_udp/_dns",
    "_tcp/_dns-tcp",
];

/// Service directories are `/skydns/local/cluster/svc/<ns>/<name>`.
const SERVICE_DIR_DEPTH: usize = 6;

/// Keys and values under `prefix`, sorted; on v2 the SRV keys of every
/// service directory in sight are read through [`PORT_DIRS`].
pub fn under(etcd: &Etcd, prefix: &str) -> Result<Vec<(String, String)>> {
    under_expecting(etcd, prefix, &[])
}

/// [`under`], plus (v2) each of `expected` keys read by name.
fn under_expecting(etcd: &Etcd, prefix: &str, expected: &[&str]) -> Result<Vec<(String, String)>> {
    let visible = etcd.get_prefix(prefix)?;
    if etcd.api() == integration_tests::etcd::Api::V3 {
        return Ok(visible);
    }
    let service_dir = |path: &str| -> Option<String> {
        let segments: Vec<&str> = path.split('/').skip(1).collect();
        let is_svc = segments.len() >= SERVICE_DIR_DEPTH && segments[3] == "svc";
        is_svc.then(|| format!("/{}", segments[..SERVICE_DIR_DEPTH].join("/")))
    };
    let mut dirs: std::collections::BTreeSet<String> =
        visible.iter().filter_map(|(k, _)| service_dir(k)).collect();
    dirs.extend(service_dir(prefix.trim_end_matches('/')));
    let hidden: Vec<String> = dirs
        .iter()
        .flat_map(|d| PORT_DIRS.iter().map(move |p| format!("{d}/{p}")))
        .collect();
    let mut names: Vec<&str> = hidden.iter().map(String::as_str).collect();
    names.extend_from_slice(expected);
    etcd.get_prefix_expecting(prefix, &names)
}

/// Polls `check` until it returns `Ok(true)` or the deadline passes.
pub async fn eventually(what: &str, mut check: impl FnMut() -> Result<bool>) -> Result<()> {
    let deadline = Instant::now() + DEADLINE;
    let mut last = None;
    loop {
        match check() {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => last = Some(e),
        }
        if Instant::now() > deadline {
            bail!("timed out waiting for {what} (last error: {last:?})");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the keys under `prefix` are exactly `expected` (sorted
/// pairs). On etcd v2, hidden (`_`) keys cannot be listed: those of
/// `expected` and those under [`PORT_DIRS`] are read by name, others
/// cannot be seen.
pub async fn wait_exact(etcd: &Etcd, prefix: &str, expected: &[(String, String)]) -> Result<()> {
    let mut seen = Vec::new();
    let names: Vec<&str> = expected.iter().map(|(k, _)| k.as_str()).collect();
    let result = eventually(&format!("exact contents of {prefix}"), || {
        seen = under_expecting(etcd, prefix, &names)?;
        Ok(seen == expected)
    })
    .await;
    result.with_context(|| format!("expected:\n{}\nactual:\n{}", show(expected), show(&seen)))
}

/// One `key value` line per pair.
pub fn show(pairs: &[(String, String)]) -> String {
    pairs.iter().map(|(k, v)| format!("{k} {v}\n")).collect()
}

/// The keys of `pairs` under `prefix`.
pub fn keys_under(etcd: &Etcd, prefix: &str) -> Result<Vec<String>> {
    Ok(under(etcd, prefix)?.into_iter().map(|(k, _)| k).collect())
}
