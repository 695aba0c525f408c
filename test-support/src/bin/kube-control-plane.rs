//! Runs the tests' real control plane ([`test_support::control_plane`]) on its
//! own, for `deploy/local/run.sh --real-apiserver` and the benchmarks: etcd,
//! kube-apiserver (and kube-controller-manager with `--controllers`), seeded
//! from `--seed` files. It prints "ready" once up, and stops everything it
//! started on SIGINT or SIGTERM.

use anyhow::{Context, Result};
use clap::Parser;
use nix::sys::signal::{SigSet, Signal};
use std::path::PathBuf;
use test_support::control_plane::{ControlPlane, Options};

/// A real kube-apiserver over its own etcd, without nodes, as the tests run it.
#[derive(Parser)]
#[command(name = "kube-control-plane")]
struct Flags {
    /// Where to write the admin kubeconfig (token of group system:masters).
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Also run kube-controller-manager's endpoints controllers
    /// (EndpointSlices from pods, their mirroring, v1 Endpoints).
    #[arg(long)]
    controllers: bool,
    /// Objects to create with kubectl once the API server is ready (YAML or
    /// JSON, as `kubectl apply -f` reads; applied server-side over what exists).
    #[arg(long)]
    seed: Vec<PathBuf>,
    /// Objects written straight into etcd before kube-apiserver starts (JSON
    /// documents between `---` lines; no validation, no IP allocation): a
    /// benchmark's cluster of 200,000 objects in seconds.
    #[arg(long)]
    etcd_seed: Option<PathBuf>,
    /// More kube-apiserver flags, e.g. `--apiserver-flag=--service-cluster-ip-range=10.0.0.0/8`.
    #[arg(long = "apiserver-flag", allow_hyphen_values = true)]
    apiserver_flags: Vec<String>,
}

fn main() -> Result<()> {
    let flags = Flags::parse();
    // Blocked before any thread starts, so only sigwait below takes them.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals.thread_block()?;
    let mut plane = ControlPlane::start_with(Options {
        controllers: flags.controllers,
        apiserver_flags: flags.apiserver_flags.clone(),
        etcd_seed: flags.etcd_seed.clone(),
        ..Options::default()
    })?;
    let kubectl = plane.kubectl()?;
    for seed in &flags.seed {
        let path = seed.display().to_string();
        // Server-side apply: objects the API server made itself (the
        // namespaces, default/kubernetes) are merged with, not refused.
        kubectl
            .run(&["apply", "--server-side", "--force-conflicts", "-f", &path])
            .with_context(|| format!("creating the objects of {path}"))?;
        set_pod_statuses(&plane, &kubectl, &path)?;
    }
    std::fs::copy(plane.admin_kubeconfig()?, &flags.kubeconfig)
        .with_context(|| format!("writing {}", flags.kubeconfig.display()))?;
    println!(
        "kube-apiserver {} ready at {}",
        test_support::control_plane::version()?,
        plane.url()
    );
    if let Some(pid) = plane.apiserver_pid() {
        println!("kube-apiserver pid {pid}");
    }
    println!("ready");
    let signal = signals.wait()?;
    eprintln!("{signal:?}: stopping the control plane");
    drop(plane);
    Ok(())
}

/// Plays the kubelet for the seed's pods: the status each one is written
/// with (dropped by a create) is set through the status subresource, Ready.
fn set_pod_statuses(
    plane: &ControlPlane,
    kubectl: &test_support::kubectl::Kubectl,
    path: &str,
) -> Result<()> {
    let args = [
        "create",
        "--dry-run=client",
        "--validate=false",
        "-f",
        path,
        "-o",
        "json",
    ];
    // One JSON document per object, one after the other.
    let text = kubectl.run(&args)?;
    let items = serde_json::Deserializer::from_str(&text)
        .into_iter::<serde_json::Value>()
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("reading the objects of {path}"))?;
    for pod in items.iter().filter(|o| o["kind"] == "Pod") {
        let ips: Vec<&str> = match pod["status"]["podIPs"].as_array() {
            Some(ips) => ips.iter().filter_map(|ip| ip["ip"].as_str()).collect(),
            None => pod["status"]["podIP"].as_str().into_iter().collect(),
        };
        if ips.is_empty() {
            continue;
        }
        let ns = pod["metadata"]["namespace"].as_str().unwrap_or("default");
        let name = pod["metadata"]["name"]
            .as_str()
            .context("a pod without a name")?;
        plane.set_pod_status(ns, name, &ips, true)?;
    }
    Ok(())
}
