//! Shared harness for the kube2sky end-to-end tests (`kube2sky/tests/writer`
//! and `integration-tests`' `kube2sky_*`): the real `kube2sky` binary
//! ([`kube2sky_binary`]) against a real etcd and the
//! in-process API test server (`kube_api_test_server`), driven with kubectl
//! (etcd and kubectl from `test_support`), and the records expected
//! in etcd written out literally as kube2sky 1.2 wrote them: the JSON
//! byte for byte, the key labels as numbers computed once with
//! kube2sky.go's `getHash` (FNV-1a 32 of the JSON), never by the code under
//! test.

#![allow(dead_code, unreachable_pub)]

pub mod objects;
pub mod sync;

use anyhow::{ensure, Context, Result};
use kube_api_test_server::{ApiServer, ApiServerHandle, Config, Key, Preconditions, ResourceKind};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::time::Duration;
use tempfile::TempDir;
use test_support::bins::built_binary;
#[allow(unused_imports)]
pub use test_support::control_plane::{ControlPlane, Options as ControlPlaneOptions};
pub use test_support::etcd::{Api, Etcd};
pub use test_support::kubectl::Kubectl;
use test_support::ports::free_port;
use test_support::process::Process;
pub use test_support::wait::{eventually, DEADLINE};

/// The kube2sky binary to run: in kube2sky's own tests (`kube2sky/tests/`)
/// the one Cargo built for them, with the code under test (a mutant's, in
/// the mutation check); in `integration-tests`, the workspace's build.
fn kube2sky_binary() -> PathBuf {
    match option_env!("CARGO_BIN_EXE_kube2sky") {
        Some(path) => PathBuf::from(path),
        None => built_binary("kube2sky"),
    }
}

/// The demo services (docs/architecture.md, "What it writes"): `kubernetes` and `kube-dns`, plus pod 1.2.3.4.
pub const KUBERNETES: &str = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"kubernetes","namespace":"default"},
 "spec":{"clusterIP":"10.0.0.1","ports":[{"name":"https","port":443,"protocol":"TCP","targetPort":443}]}}"#;
pub const KUBE_DNS: &str = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"kube-dns","namespace":"kube-system"},
 "spec":{"clusterIP":"10.0.0.10","selector":{"k8s-app":"kube-dns"},
  "ports":[{"name":"dns","port":53,"protocol":"UDP"},{"name":"dns-tcp","port":53,"protocol":"TCP"}]}}"#;

/// The rest of every A/SRV JSON value.
pub const REST: &str = r#""priority":10,"weight":10,"ttl":30,"targetstrip":0}"#;

/// The exact contents of `/skydns` for the demo objects (docs/architecture.md, "What it writes").
pub fn demo_records() -> Vec<(String, String)> {
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

/// The Kubernetes API a test's kube2sky reads: the project's API test
/// server ([`ApiServerHandle`]) or a real kube-apiserver ([`ControlPlane`]).
/// A suite written against this runs unchanged on either.
pub trait KubeApi {
    /// The flags that point kube2sky at this server.
    fn kube2sky_flags(&self) -> Result<Vec<String>>;
    /// kubectl with full rights on this server.
    fn kubectl(&self) -> Result<Kubectl>;
    /// Creates a running pod `ns/name` with `ips` (the first is `podIP`).
    fn create_pod(&self, ns: &str, name: &str, ips: &[&str]) -> Result<()>;
}

impl KubeApi for ApiServerHandle {
    fn kube2sky_flags(&self) -> Result<Vec<String>> {
        Ok(vec![format!("--kube_master_url={}", self.url())])
    }

    fn kubectl(&self) -> Result<Kubectl> {
        Kubectl::new(&self.url())
    }

    fn create_pod(&self, ns: &str, name: &str, ips: &[&str]) -> Result<()> {
        let ips_json: Vec<Value> = ips.iter().map(|ip| serde_json::json!({"ip": ip})).collect();
        let body = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            "status": {"podIP": ips.first().copied().unwrap_or(""), "podIPs": ips_json,
                       "phase": "Running"},
        });
        self.store()
            .create(ResourceKind::Pod, Some(ns), body, true)?;
        Ok(())
    }
}

/// kube2sky reads the real server with an admin's token (RBAC's own
/// test gives it the manifest's ServiceAccount instead).
impl KubeApi for ControlPlane {
    fn kube2sky_flags(&self) -> Result<Vec<String>> {
        Ok(vec![format!(
            "--kubecfg-file={}",
            self.admin_kubeconfig()?.display()
        )])
    }

    fn kubectl(&self) -> Result<Kubectl> {
        ControlPlane::kubectl(self)
    }

    fn create_pod(&self, ns: &str, name: &str, ips: &[&str]) -> Result<()> {
        let none = serde_json::json!({});
        ControlPlane::create_pod(self, ns, name, none.clone(), none, ips, true)
    }
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
    KubeApi::create_pod(api, ns, name, &[ip])
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

/// The real kube2sky binary, stopped on drop.
pub struct Kube2sky {
    process: Option<Process>,
    log: PathBuf,
    _dir: TempDir,
    /// The `--healthz-port`.
    pub port: u16,
}

impl Kube2sky {
    /// Starts kube2sky against `etcd` and `api` with extra flags.
    pub fn start(etcd: &Etcd, api: &dyn KubeApi, extra: &[&str]) -> Result<Self> {
        Self::start_on(&etcd.endpoint(), etcd.api(), api, extra)
    }

    /// Starts kube2sky against the etcd `endpoints` (comma-separated) on
    /// `etcd_api`, and `api`, with extra flags.
    pub fn start_on(
        endpoints: &str,
        etcd_api: Api,
        api: &dyn KubeApi,
        extra: &[&str],
    ) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("kube2sky.log");
        let port = free_port()?;
        let mut command = Command::new(kube2sky_binary());
        command
            .arg(format!("--etcd-server={endpoints}"))
            .arg(etcd_api.kube2sky_flag())
            .args(api.kube2sky_flags()?)
            .arg(format!("--healthz-port={port}"))
            .arg("--etcd-loss-check-interval=200ms")
            .arg("--v=2")
            .args(extra)
            .env("RUST_LOG", "kube2sky=debug,info");
        let process = Process::spawn_logged("kube2sky", command, &log)?;
        Ok(Kube2sky {
            process: Some(process),
            log,
            _dir: dir,
            port,
        })
    }

    /// What kube2sky logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until kube2sky has logged `text`.
    pub async fn wait_for_log(&self, text: &str) -> Result<()> {
        self.wait_for_log_within(text, DEADLINE).await
    }

    /// [`Kube2sky::wait_for_log`] for work that takes longer than
    /// [`DEADLINE`] on a loaded machine.
    /// A kube2sky that panicked or exited fails the wait at once: it never
    /// logs the line (a mutant of the mutation check that overflows or
    /// returns an error would otherwise hold each wait to its deadline).
    pub async fn wait_for_log_within(&self, text: &str, within: Duration) -> Result<()> {
        eventually(&format!("kube2sky to log {text:?}"), within, async || {
            // Read before the log: a process that has exited wrote it all.
            let exited = self.process.as_ref().is_none_or(Process::has_exited);
            let log = self.log();
            if log.contains(text) {
                return Ok(Ok(()));
            }
            if log.contains("panicked at") || exited {
                return Ok(Err(anyhow::anyhow!(
                    "kube2sky panicked or exited before it logged {text:?}:\n{log}"
                )));
            }
            anyhow::bail!("log so far:\n{log}")
        })
        .await?
    }

    /// GET `path` on the health port: `Some((status, body))`, `None` if refused.
    pub async fn http(&self, path: &str) -> Option<(u16, String)> {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        let reply = test_support::http::get(&url).await.ok()?;
        Some((reply.status, reply.body))
    }

    /// The text of `/metrics` (an error unless it answers 200).
    pub async fn metrics(&self) -> Result<String> {
        test_support::http::scrape(&format!("http://127.0.0.1:{}/metrics", self.port)).await
    }

    /// Waits until `/readiness` answers 200 (`ok`).
    pub async fn wait_ready(&mut self) -> Result<()> {
        let process = self.process.as_mut().context("kube2sky not running")?;
        let url = format!("http://127.0.0.1:{}/readiness", self.port);
        let ready = process
            .until_ready(DEADLINE, async || {
                let reply = test_support::http::get(&url).await?;
                ensure!(reply.status == 200, "/readiness: {reply:?}");
                ensure!(reply.body == "ok\n", "/readiness: {reply:?}");
                Ok(())
            })
            .await;
        ready.with_context(|| format!("log:\n{}", self.log()))
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: nix::sys::signal::Signal) -> Result<()> {
        self.process
            .as_ref()
            .context("kube2sky not running")?
            .signal(signal)
    }

    /// Waits for the process to exit and returns its status.
    pub async fn wait_exit(&mut self, within: Duration) -> Result<ExitStatus> {
        let process = self.process.as_mut().context("kube2sky not running")?;
        let status = process.wait_exit(within).await;
        let log = self.log();
        let status = status.with_context(|| format!("log:\n{log}"))?;
        self.process = None;
        Ok(status)
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }
}

/// The A-record value kube2sky writes for `host` (1.2's bytes, byte for byte).
pub fn a(host: &str) -> String {
    format!(r#"{{"host":"{host}",{REST}"#)
}

/// The SRV-record value kube2sky writes for `host` and `port`.
pub fn srv(host: &str, port: u16) -> String {
    format!(r#"{{"host":"{host}","port":{port},{REST}"#)
}

/// The key label of [`a`]`(host)`: FNV-1a 32 of that JSON, in lower-case
/// hex, computed once outside this code (10.0.0.1 → c88f1059, as 1.2 wrote it).
pub fn label(host: &str) -> &'static str {
    match host {
        "10.0.0.1" => "c88f1059",
        "10.0.0.10" => "21172049",
        "1.2.3.4" => "ad70cf0f",
        "10.0.0.50" => "70c920fd",
        "10.0.0.65" => "17c71349",
        "10.0.0.80" => "c13c4a66",
        "10.244.0.1" => "a79cc987",
        "10.244.0.2" => "bc9d5fd0",
        "10.244.0.3" => "3e131999",
        "10.244.9.9" => "a53aadfa",
        "192.168.0.9" => "d7e2cccd",
        "example.com." => "5502a00a",
        other => {
            panic!("no literal label for {other}: compute FNV-1a 32 of a({other:?}) and add it")
        }
    }
}

/// Where the probe service of [`probe_handled`] has its records.
pub const PROBE_DIR: &str = "/skydns/local/cluster/svc/default/probe/";

/// Creates service `probe` with `ip`, waits for its records, then deletes
/// it and waits for them to go: once they are gone, every event of the
/// services watch sent before the create has been written. The create's
/// records alone prove less: a round of events can be several writes (on
/// v2 a request per key; on v3 a round over `--etcd-max-txn-ops`), so they
/// can be in etcd before another write of their round; the delete, sent
/// once they are there, is in a later round, which kube2sky begins only
/// when that one is written. It proves nothing of other watches (pods,
/// endpoints: streams of their own), nor of a full sync still running,
/// whose chunks take turns with rounds: wait for its `full sync of ...
/// done` first.
pub async fn probe_handled(etcd: &Etcd, kubectl: &Kubectl, ip: &str) -> Result<()> {
    kubectl.with_manifest("create", &svc_manifest("probe", ip, &[]))?;
    wait_for_keys(etcd, PROBE_DIR, 1).await?;
    kubectl.run(&["delete", "service", "probe"])?;
    wait_for_keys(etcd, PROBE_DIR, 0).await
}

/// A write to a key, as an etcd watch (v3) or its history (v2) reports it.
#[derive(Debug, PartialEq, Eq)]
pub enum Write {
    Put(String),
    Delete(String),
}

/// The etcd v3 writes under `prefix`, with their revisions, from the moment
/// `change` runs until every API event sent before it has been written: a
/// service `probe` with `ip` is created after `change` and deleted once its
/// records are in, and the writes are taken up to that delete (see
/// [`probe_handled`] for why the records alone are not enough). The
/// probe's own writes (its records and PTR) are left out.
pub async fn v3_writes_until_probed(
    etcd: &Etcd,
    kubectl: &Kubectl,
    prefix: &str,
    ip: &str,
    change: impl FnOnce() -> Result<String>,
) -> Result<Vec<(Write, i64)>> {
    ensure!(
        PROBE_DIR.starts_with(prefix),
        "{prefix} must cover the probe's records ({PROBE_DIR})"
    );
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    let options = etcd_client::WatchOptions::new().with_prefix();
    let mut stream = client.watch(prefix, Some(options)).await?;
    change()?;
    kubectl.with_manifest("create", &svc_manifest("probe", ip, &[]))?;
    let probe_ptr = format!("/skydns/arpa/in-addr/{}", ip.replace('.', "/"));
    let mut writes = Vec::new();
    let mut deleting = false;
    let watch = async {
        while let Some(resp) = stream.message().await? {
            for e in resp.events() {
                let Some(kv) = e.kv() else { continue };
                let key = kv.key_str()?.to_string();
                let put = e.event_type() == etcd_client::EventType::Put;
                if key.starts_with(PROBE_DIR) {
                    if !put {
                        return Ok(());
                    }
                    if !deleting {
                        kubectl.run(&["delete", "service", "probe"])?;
                        deleting = true;
                    }
                } else if key != probe_ptr {
                    let write = if put {
                        Write::Put(key)
                    } else {
                        Write::Delete(key)
                    };
                    writes.push((write, kv.mod_revision()));
                }
            }
        }
        anyhow::bail!("the watch ended")
    };
    tokio::time::timeout(DEADLINE, watch)
        .await
        .context("waiting for the probe service's deletion")??;
    Ok(writes)
}

/// Waits until exactly `n` keys are listed under `prefix`.
pub async fn wait_for_keys(etcd: &Etcd, prefix: &str, n: usize) -> Result<()> {
    eventually(&format!("{n} keys under {prefix}"), DEADLINE, async || {
        let keys = keys_under(etcd, prefix)?;
        ensure!(keys.len() == n, "{keys:?}");
        Ok(())
    })
    .await
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
    kube_api_test_server::ApiServerHandle,
    Kubectl,
    Kube2sky,
)> {
    cluster_with(Api::from_env(), flags).await
}

/// [`cluster`] on the etcd API given, whatever `E2E_ETCD_API` says.
pub async fn cluster_with(
    etcd_api: Api,
    flags: &[&str],
) -> Result<(
    Etcd,
    kube_api_test_server::ApiServerHandle,
    Kubectl,
    Kube2sky,
)> {
    let api = apiserver(&[KUBERNETES]).await?;
    let etcd = Etcd::start_with(etcd_api)?;
    let (kubectl, k2s) = ready_over(&etcd, &api, flags).await?;
    Ok((etcd, api, kubectl, k2s))
}

/// etcd, kubectl and a ready kube2sky on `api`.
pub async fn cluster_on(api: &dyn KubeApi, flags: &[&str]) -> Result<(Etcd, Kubectl, Kube2sky)> {
    let etcd = Etcd::start()?;
    let (kubectl, k2s) = ready_over(&etcd, api, flags).await?;
    Ok((etcd, kubectl, k2s))
}

/// kubectl, and kube2sky on `api` and `etcd` once it is ready.
async fn ready_over(etcd: &Etcd, api: &dyn KubeApi, flags: &[&str]) -> Result<(Kubectl, Kube2sky)> {
    let kubectl = api.kubectl()?;
    let mut k2s = Kube2sky::start(etcd, api, flags)?;
    k2s.wait_ready().await?;
    Ok((kubectl, k2s))
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
    if etcd.api() == test_support::etcd::Api::V3 {
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

/// Waits until the keys under `prefix` are exactly `expected` (sorted
/// pairs). On etcd v2, hidden (`_`) keys cannot be listed: those of
/// `expected` and those under [`PORT_DIRS`] are read by name, others
/// cannot be seen.
pub async fn wait_exact(etcd: &Etcd, prefix: &str, expected: &[(String, String)]) -> Result<()> {
    let names: Vec<&str> = expected.iter().map(|(k, _)| k.as_str()).collect();
    eventually(
        &format!("exact contents of {prefix}"),
        DEADLINE,
        async || {
            let seen = under_expecting(etcd, prefix, &names)?;
            ensure!(
                seen == expected,
                "expected:\n{}\nactual:\n{}",
                show(expected),
                show(&seen)
            );
            Ok(())
        },
    )
    .await
}

/// One `key value` line per pair.
pub fn show(pairs: &[(String, String)]) -> String {
    pairs.iter().map(|(k, v)| format!("{k} {v}\n")).collect()
}

/// The keys of `pairs` under `prefix`.
pub fn keys_under(etcd: &Etcd, prefix: &str) -> Result<Vec<String>> {
    Ok(under(etcd, prefix)?.into_iter().map(|(k, _)| k).collect())
}

/// The skydns binary on a free port, reading the etcd `endpoints` over
/// `etcd_api` (domain `cluster.local.`, `-no-rec`, plus `extra`); returned
/// once `ready_name` has an A answer.
pub async fn skydns_binary(
    endpoints: &str,
    etcd_api: Api,
    extra: &[&str],
    ready_name: &str,
) -> Result<test_support::skydns::SkydnsBinary> {
    test_support::skydns::SkydnsBinary::start(endpoints, etcd_api, extra, ready_name).await
}
