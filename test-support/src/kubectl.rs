//! The real `kubectl` bound to one API server: each [`Kubectl`] has its own
//! empty kubeconfig and cache directory and ignores `KUBECONFIG`, so nothing on
//! the machine is read or touched. A non-zero exit is an error carrying
//! kubectl's own message.

use anyhow::{bail, Context, Result};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use tempfile::TempDir;

/// kubectl for the API server at `server` (e.g. `http://127.0.0.1:8080`).
pub struct Kubectl {
    /// Holds `kubeconfig`, kubectl's cache and manifests written for it.
    dir: TempDir,
    server: String,
}

impl Kubectl {
    /// kubectl with an empty kubeconfig of its own; fails with an install
    /// hint if kubectl is missing.
    pub fn new(server: &str) -> Result<Self> {
        Self::with_token(server, None)
    }

    /// kubectl whose kubeconfig presents `token` (a bearer token), if any.
    pub fn with_token(server: &str, token: Option<&str>) -> Result<Self> {
        Self::for_cluster(server, None, token)
    }

    /// kubectl for an `https` server whose certificate `ca` signed (if
    /// given), presenting `token` (if any).
    pub fn for_cluster(server: &str, ca: Option<&Path>, token: Option<&str>) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        let user = token.map_or_else(|| json!({}), |t| json!({ "token": t }));
        let mut cluster = json!({ "server": server });
        if let Some(ca) = ca {
            cluster["certificate-authority"] = json!(ca.display().to_string());
        }
        let config = json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{ "name": "t", "cluster": cluster }],
            "users": [{ "name": "t", "user": user }],
            "contexts": [{ "name": "t", "context": { "cluster": "t", "user": "t" } }],
            "current-context": "t",
        });
        std::fs::write(&kubeconfig, config.to_string())?;
        crate::tools::require("kubectl", "kubectl")?;
        Ok(Kubectl {
            dir,
            server: server.to_string(),
        })
    }

    /// Runs kubectl with `args` (each request limited to 20 s); whatever
    /// it did. It blocks: an API server in the test's own process needs
    /// a multi-threaded runtime to answer meanwhile.
    pub fn output(&self, args: &[&str]) -> Result<Output> {
        crate::tools::command("kubectl", "kubectl")?
            .arg(format!(
                "--kubeconfig={}",
                self.dir.path().join("kubeconfig").display()
            ))
            .arg(format!(
                "--cache-dir={}",
                self.dir.path().join("cache").display()
            ))
            .arg(format!("--server={}", self.server))
            .arg("--request-timeout=20s")
            .args(args)
            .env("HOME", self.dir.path())
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()
            .context("running kubectl")
    }

    /// Runs kubectl with `args`; its stdout, or an error with its stderr.
    pub fn run(&self, args: &[&str]) -> Result<String> {
        let out = self.output(args)?;
        if !out.status.success() {
            bail!(
                "kubectl {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `kubectl ARGS -o json`, parsed.
    pub fn json(&self, args: &[&str]) -> Result<serde_json::Value> {
        let out = self.run(&[args, &["-o", "json"]].concat())?;
        serde_json::from_str(&out).with_context(|| format!("kubectl {args:?}: {out}"))
    }

    /// Writes `contents` to the file `name` in this kubectl's directory.
    pub fn file(&self, name: &str, contents: &str) -> Result<PathBuf> {
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents)?;
        Ok(path)
    }

    /// `kubectl <verb> -f <file>` with `manifest` (JSON or YAML) in the file.
    pub fn with_manifest(&self, verb: &str, manifest: &str) -> Result<String> {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        // kubectl takes a stream that begins with `{` for one JSON
        // document and fails at a `---` after it; one that begins with
        // `---` is read as YAML, a document at a time (JSON is YAML).
        let stream = if manifest.trim_start().starts_with('{') && manifest.contains("\n---") {
            format!("---\n{manifest}")
        } else {
            manifest.to_string()
        };
        let path = self.file(&format!("m-{n}.yaml"), &stream)?;
        let path = path.display().to_string();
        self.run(&[verb, "--validate=false", "-f", &path])
    }
}
