//! A real Kubernetes control plane without nodes, the way envtest runs one: its
//! own etcd 3.6, the real `kube-apiserver` and, when asked,
//! `kube-controller-manager` with the controllers DNS depends on. A test plays
//! the kubelet ([`ControlPlane::set_pod_status`]); everything stops when the
//! [`ControlPlane`] is dropped.

use crate::etcd::Etcd;
use crate::kubectl::Kubectl;
use crate::ports::{free_port, retry_on_conflict};
use crate::process::Process;
use crate::tls::Certificates;
use crate::wait::eventually_blocking;
use anyhow::{ensure, Context, Result};
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;
use tempfile::TempDir;

mod seed;

/// How long the API server may take to serve `/readyz` and the
/// `kubernetes` Service: a few seconds idle, more on a loaded 2-core CI.
pub const START_TIMEOUT: Duration = Duration::from_secs(120);

/// The Service IP ranges: IPv4 (the tests' `10.0.0.x` cluster IPs, the
/// `kubernetes` Service at 10.0.0.1) and IPv6, so dual-stack Services work.
pub const SERVICE_CIDRS: &str = "10.0.0.0/16,fd00:10::/112";

/// The node the tests' pods are bound to (a Node object, no kubelet): the
/// EndpointSlice controller leaves out a pod whose node does not exist.
pub const NODE: &str = "node-1";

/// What to start besides etcd and kube-apiserver, and how.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Start kube-controller-manager with the endpoints controllers.
    pub controllers: bool,
    /// `--etcd-compaction-interval` (the server's default is 5 minutes):
    /// short, to make a watch from an old resourceVersion get `410 Gone`.
    pub compaction_interval: Option<Duration>,
    /// More kube-apiserver flags.
    pub apiserver_flags: Vec<String>,
    /// Objects written straight into etcd before kube-apiserver starts
    /// ([`seed`]): a benchmark's cluster, in seconds.
    pub etcd_seed: Option<PathBuf>,
}

/// The running control plane; stopped on drop.
pub struct ControlPlane {
    // Field order is drop order: the controllers before the API server
    // before its etcd, and the files last.
    controller_manager: Option<Process>,
    apiserver: Option<Process>,
    etcd: Etcd,
    port: u16,
    options: Options,
    admin_token: String,
    certs: Certificates,
    dir: TempDir,
}

/// The directory holding `kube-apiserver` and `kube-controller-manager`,
/// built by `scripts/kube-tools.sh` on the first call.
pub fn binaries() -> Result<PathBuf> {
    static DIR: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/kube-tools.sh");
        let out = Command::new(&script)
            .output()
            .map_err(|e| format!("running {}: {e}", script.display()))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!("scripts/kube-tools.sh failed:\n{stderr}"));
        }
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok(PathBuf::from(dir))
    })
    .clone()
    .map_err(anyhow::Error::msg)
}

/// The version the built kube-apiserver reports, e.g. `Kubernetes v1.36.3`.
pub fn version() -> Result<String> {
    let path = binaries()?.join("version");
    Ok(std::fs::read_to_string(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .to_string())
}

impl ControlPlane {
    /// etcd and kube-apiserver, ready (`/readyz`, and the `kubernetes`
    /// Service in `default` exists).
    pub fn start() -> Result<Self> {
        Self::start_with(Options::default())
    }

    /// The control plane `options` describe, ready.
    pub fn start_with(options: Options) -> Result<Self> {
        let bin = binaries()?;
        let etcd = Etcd::start_binary(&bin.join("etcd"), &["--max-txn-ops=1024"])?;
        if let Some(file) = &options.etcd_seed {
            seed::load(&etcd.endpoint(), file)?;
        }
        let dir = tempfile::tempdir()?;
        let certs = Certificates::make()?;
        // sa.key and sa.pub: what signs and checks service-account tokens.
        crate::tls::key_pair(dir.path(), "sa")?;
        let admin_token = random_token()?;
        let kcm_token = random_token()?;
        std::fs::write(
            dir.path().join("tokens.csv"),
            format!(
                "{admin_token},admin,admin,\"system:masters\"\n\
                 {kcm_token},system:kube-controller-manager,kcm,\"system:masters\"\n"
            ),
        )?;
        let mut plane = ControlPlane {
            controller_manager: None,
            apiserver: None,
            etcd,
            port: 0,
            options: options.clone(),
            admin_token,
            certs,
            dir,
        };
        retry_on_conflict(|| {
            plane.port = free_port()?;
            let admin = plane.dir.path().join("admin.kubeconfig");
            plane.write_kubeconfig(&admin, &plane.url(), &plane.admin_token)?;
            plane.spawn_apiserver(&bin)
        })?;
        let ready = plane.wait_ready();
        ready.map_err(|e| e.context(tail(&plane.apiserver_log(), 40)))?;
        if options.controllers {
            let kubeconfig = plane.dir.path().join("kcm.kubeconfig");
            plane.write_kubeconfig(&kubeconfig, &plane.url(), &kcm_token)?;
            plane.spawn_controller_manager(&bin, &kubeconfig)?;
        }
        Ok(plane)
    }

    /// Stops kube-apiserver (SIGTERM, as a rolling update of the control
    /// plane does) and starts it again on the same port and etcd, ready:
    /// watches are cut, and its watch cache starts anew at etcd's revision.
    pub fn restart_apiserver(&mut self) -> Result<()> {
        if let Some(mut old) = self.apiserver.take() {
            old.stop();
        }
        let bin = binaries()?;
        eventually_blocking(
            "kube-apiserver's port to be free again",
            START_TIMEOUT,
            || match self.spawn_apiserver(&bin) {
                Err(e) if crate::ports::is_conflict(&format!("{e:#}")) => Err(e),
                other => Ok(other),
            },
        )??;
        self.wait_ready()
    }

    fn spawn_apiserver(&mut self, bin: &Path) -> Result<()> {
        let options = self.options.clone();
        let d = self.dir.path();
        let path = |name: &str| d.join(name).display().to_string();
        let mut command = Command::new(bin.join("kube-apiserver"));
        command
            .arg(format!("--etcd-servers={}", self.etcd.endpoint()))
            .arg("--bind-address=127.0.0.1")
            .arg("--advertise-address=127.0.0.1")
            .arg(format!("--secure-port={}", self.port))
            .arg(format!(
                "--tls-cert-file={}",
                self.certs.cert("server").display()
            ))
            .arg(format!(
                "--tls-private-key-file={}",
                self.certs.key("server").display()
            ))
            .arg(format!("--client-ca-file={}", self.certs.ca().display()))
            .arg(format!("--token-auth-file={}", path("tokens.csv")))
            .arg(format!("--service-account-key-file={}", path("sa.pub")))
            .arg(format!(
                "--service-account-signing-key-file={}",
                path("sa.key")
            ))
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg("--api-audiences=https://kubernetes.default.svc.cluster.local")
            .arg("--authorization-mode=RBAC")
            // The `kubernetes` Service's Endpoints would hold the advertised
            // 127.0.0.1, which Endpoints validation refuses (loopback): the
            // server would log the failure every few seconds.
            .arg("--endpoint-reconciler-type=none")
            // No controller makes each namespace's `default` ServiceAccount,
            // which this admission plugin would require of every pod.
            .arg("--disable-admission-plugins=ServiceAccount")
            .arg(format!("--cert-dir={}", path("cert-dir")))
            .arg("--profiling=false")
            .args(&options.apiserver_flags);
        let own_range = options
            .apiserver_flags
            .iter()
            .any(|f| f.starts_with("--service-cluster-ip-range"));
        if !own_range {
            command.arg(format!("--service-cluster-ip-range={SERVICE_CIDRS}"));
        }
        if let Some(every) = options.compaction_interval {
            command.arg(format!(
                "--etcd-compaction-interval={}ms",
                every.as_millis()
            ));
        }
        let log = d.join("kube-apiserver.log");
        // The log of this start: after what earlier starts wrote.
        let from = std::fs::metadata(&log).map_or(0, |m| m.len() as usize);
        let this_start = || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            text.get(from..).unwrap_or_default().to_string()
        };
        let mut process = Process::spawn_logged("kube-apiserver", command, &log)?;
        // A taken port shows in the log within the first second or so; the
        // launcher then tries another one.
        let early = eventually_blocking("kube-apiserver to listen", START_TIMEOUT, || {
            let text = this_start();
            if crate::ports::is_conflict(&text) {
                return Ok(Err(anyhow::anyhow!("kube-apiserver: {text}")));
            }
            if let Some(status) = process.try_wait()? {
                // At once, not retried until the deadline.
                let exited =
                    anyhow::anyhow!("kube-apiserver exited with {status}: {}", tail(&text, 40));
                return Ok(Err(exited));
            }
            ensure!(text.contains("Serving securely"), "not serving yet");
            Ok(Ok(()))
        });
        match early {
            Ok(Ok(())) => {
                self.apiserver = Some(process);
                Ok(())
            }
            Ok(Err(conflict)) => Err(conflict),
            Err(e) => Err(e.context(tail(&this_start(), 40))),
        }
    }

    /// Waits for `/readyz` and the `kubernetes` Service (made by the
    /// server's own controller a moment after it starts).
    fn wait_ready(&mut self) -> Result<()> {
        let kubectl = self.kubectl()?;
        let process = self
            .apiserver
            .as_mut()
            .context("kube-apiserver not running")?;
        process.until_ready_blocking(START_TIMEOUT, || {
            let ready = kubectl.run(&["get", "--raw", "/readyz"])?;
            ensure!(ready.trim() == "ok", "/readyz: {ready}");
            kubectl.run(&["get", "service", "kubernetes", "-n", "default"])?;
            Ok(())
        })
    }

    fn spawn_controller_manager(&mut self, bin: &Path, kubeconfig: &Path) -> Result<()> {
        let mut command = Command::new(bin.join("kube-controller-manager"));
        command
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--controllers=endpointslice-controller,endpointslice-mirroring-controller,endpoints-controller")
            .arg("--leader-elect=false")
            .arg("--secure-port=0")
            .arg("--use-service-account-credentials=false");
        let log = self.dir.path().join("kube-controller-manager.log");
        self.controller_manager = Some(Process::spawn_logged(
            "kube-controller-manager",
            command,
            &log,
        )?);
        Ok(())
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr())
    }

    /// kube-apiserver's address: loopback, its port.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The CA that signed the server's certificate.
    pub fn ca(&self) -> PathBuf {
        self.certs.ca()
    }

    /// The etcd the API server stores its objects in.
    pub fn etcd(&self) -> &Etcd {
        &self.etcd
    }

    /// kubectl as a cluster admin (group `system:masters`).
    pub fn kubectl(&self) -> Result<Kubectl> {
        Kubectl::for_cluster(&self.url(), Some(&self.ca()), Some(&self.admin_token))
    }

    /// A kubeconfig file for a cluster admin (written once, at start:
    /// processes may be reading it).
    pub fn admin_kubeconfig(&self) -> Result<PathBuf> {
        Ok(self.dir.path().join("admin.kubeconfig"))
    }

    /// An admin kubeconfig whose server is `addr` (a relay in front of
    /// kube-apiserver, `crate::relay`: the serving certificate names
    /// 127.0.0.1, so a loopback port of the relay verifies).
    pub fn admin_kubeconfig_via(&self, addr: SocketAddr) -> Result<PathBuf> {
        let path = self
            .dir
            .path()
            .join(format!("admin-via-{}.kubeconfig", addr.port()));
        self.write_kubeconfig(&path, &format!("https://{addr}"), &self.admin_token)?;
        Ok(path)
    }

    /// A kubeconfig with a token of the ServiceAccount `ns/name` (made if
    /// missing), as a pod of that ServiceAccount gets: the identity RBAC
    /// checks. The token is valid one hour.
    pub fn service_account_kubeconfig(&self, ns: &str, name: &str) -> Result<PathBuf> {
        let kubectl = self.kubectl()?;
        let got = kubectl.output(&["get", "serviceaccount", name, "-n", ns])?;
        if !got.status.success() {
            kubectl.run(&["create", "serviceaccount", name, "-n", ns])?;
        }
        let token = kubectl.run(&["create", "token", name, "-n", ns, "--duration=1h"])?;
        let path = self.dir.path().join(format!("sa-{ns}-{name}.kubeconfig"));
        self.write_kubeconfig(&path, &self.url(), token.trim())?;
        Ok(path)
    }

    fn write_kubeconfig(&self, path: &Path, server: &str, token: &str) -> Result<()> {
        let config = kubeconfig(server, &self.ca(), token);
        std::fs::write(path, config.to_string())
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Creates the Node [`NODE`] (once), which pods are bound to.
    pub fn ensure_node(&self) -> Result<()> {
        let kubectl = self.kubectl()?;
        if kubectl.output(&["get", "node", NODE])?.status.success() {
            return Ok(());
        }
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}});
        kubectl.with_manifest("create", &node.to_string())?;
        Ok(())
    }

    /// Creates pod `ns/name` bound to [`NODE`] with `spec` merged into a
    /// one-container spec (e.g. `hostname`, `subdomain`), then plays the
    /// kubelet: phase Running, `ips` (the first is `podIP`) and Ready as
    /// `ready` says.
    pub fn create_pod(
        &self,
        ns: &str,
        name: &str,
        labels: serde_json::Value,
        spec: serde_json::Value,
        ips: &[&str],
        ready: bool,
    ) -> Result<()> {
        self.ensure_node()?;
        let mut pod_spec = json!({
            "nodeName": NODE,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        });
        if let (Some(base), Some(more)) = (pod_spec.as_object_mut(), spec.as_object()) {
            base.extend(more.clone());
        }
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": pod_spec,
        });
        self.kubectl()?.with_manifest("create", &pod.to_string())?;
        self.set_pod_status(ns, name, ips, ready)
    }

    /// Writes pod `ns/name`'s status as a kubelet would: Running, `ips`,
    /// and the Ready condition.
    pub fn set_pod_status(&self, ns: &str, name: &str, ips: &[&str], ready: bool) -> Result<()> {
        let ready = if ready { "True" } else { "False" };
        let ips_json: Vec<_> = ips.iter().map(|ip| json!({"ip": ip})).collect();
        let status = json!({"status": {
            "phase": "Running",
            "podIP": ips.first().copied().unwrap_or(""),
            "podIPs": ips_json,
            "hostIP": "127.0.0.1",
            "conditions": [{"type": "Ready", "status": ready}],
        }});
        self.kubectl()?.run(&[
            "patch",
            "pod",
            name,
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ])?;
        Ok(())
    }

    /// kube-apiserver's process id (for a benchmark's CPU and memory readings).
    pub fn apiserver_pid(&mut self) -> Option<u32> {
        self.apiserver.as_mut().map(|p| p.child().id())
    }

    /// `result`, with the tail of each log added to an error: a test that
    /// returns its failure (rather than panicking) shows what the control
    /// plane said.
    pub fn with_logs<T>(&self, result: Result<T>) -> Result<T> {
        result.map_err(|e| {
            let mut logs = format!(
                "--- kube-apiserver log (tail) ---\n{}",
                tail(&self.apiserver_log(), 60)
            );
            if self.controller_manager.is_some() {
                let log = self.controller_manager_log();
                logs += &format!(
                    "\n--- kube-controller-manager log (tail) ---\n{}",
                    tail(&log, 60)
                );
            }
            e.context(logs)
        })
    }

    /// Whether etcd has compacted revision `rev` (the API server's own
    /// compaction, `Options::compaction_interval`): an error until then.
    pub fn compacted(&self, rev: u64) -> Result<()> {
        let at = format!("--rev={rev}");
        let out = self
            .etcd
            .etcdctl(&["get", "/registry", "--prefix", "--keys-only", &at])?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(
            stderr.contains("compacted"),
            "revision {rev} still readable: {stderr}"
        );
        Ok(())
    }

    /// What kube-apiserver logged so far.
    pub fn apiserver_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("kube-apiserver.log")).unwrap_or_default()
    }

    /// What kube-controller-manager logged so far.
    pub fn controller_manager_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("kube-controller-manager.log"))
            .unwrap_or_default()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- kube-apiserver log (tail) ---\n{}",
                tail(&self.apiserver_log(), 60)
            );
            if self.controller_manager.is_some() {
                let log = self.controller_manager_log();
                eprintln!(
                    "--- kube-controller-manager log (tail) ---\n{}",
                    tail(&log, 60)
                );
            }
        }
    }
}

/// A kubeconfig for `server` (CA `ca`) presenting bearer `token`.
pub fn kubeconfig(server: &str, ca: &Path, token: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "t", "cluster": {
            "server": server, "certificate-authority": ca.display().to_string()}}],
        "users": [{"name": "t", "user": {"token": token}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
        "current-context": "t",
    })
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// 32 random hex digits from `/dev/urandom`.
fn random_token() -> Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
