//! The repository's manifests as the tests render them, the three ways an
//! operator does: `kubectl kustomize` of a directory, `deploy/render.sh`
//! with its settings, and Helm (the one `scripts/kube-tools.sh` builds) on
//! `charts/kube-dns-rs`.

use crate::tools::stdout_of;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The variables `deploy/render.sh` reads; a caller's own are removed.
const RENDER_VARS: [&str; 4] = [
    "DNS_DOMAIN",
    "DNS_SERVER_IP",
    "DNS_REPLICAS",
    "IMAGE_PREFIX",
];

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("test-support lives in the workspace")
        .to_path_buf()
}

/// What `kubectl kustomize DIR` prints (DIR relative to the repository).
pub fn kustomize(dir: &str) -> Result<String> {
    let out = crate::tools::command("kubectl", "kubectl")?
        .arg("kustomize")
        .arg(repo_root().join(dir))
        .output()
        .context("running kubectl kustomize")?;
    stdout_of(out, &format!("kubectl kustomize {dir}"))
}

/// Runs `deploy/render.sh FLAVOUR` with exactly the settings of `env`,
/// whatever it prints or exits with.
pub fn render_sh(flavour: &str, env: &[(&str, &str)]) -> Result<Output> {
    let mut command = Command::new("bash");
    command
        .arg(repo_root().join("deploy/render.sh"))
        .arg(flavour);
    for var in RENDER_VARS {
        command.env_remove(var);
    }
    command
        .envs(env.iter().copied())
        .output()
        .context("running bash deploy/render.sh")
}

/// What `deploy/render.sh FLAVOUR` prints with the settings of `env`; an
/// error with its message when it refuses them.
pub fn render(flavour: &str, env: &[(&str, &str)]) -> Result<String> {
    stdout_of(
        render_sh(flavour, env)?,
        &format!("render.sh {flavour} {env:?}"),
    )
}

/// Runs Helm with `args` in the repository, with caches and configuration
/// of its own (nothing of the machine's Helm is read or written).
pub fn helm(args: &[&str]) -> Result<Output> {
    let home = std::env::temp_dir().join("kube-dns-rs-helm");
    Command::new(crate::control_plane::binaries()?.join("helm"))
        .args(args)
        .current_dir(repo_root())
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .context("running helm")
}

/// What `helm template kube-dns charts/kube-dns-rs --set S...` prints for
/// each S of `set`; an error with Helm's message when it refuses them.
pub fn helm_template(set: &[&str]) -> Result<String> {
    let mut args = vec!["template", "kube-dns", "charts/kube-dns-rs"];
    for s in set {
        args.extend(["--set", s]);
    }
    stdout_of(helm(&args)?, &format!("helm template {set:?}"))
}
