//! `podman-manifest`: reads the rendered kube-dns manifests
//! (`deploy/render.sh legacy|kubernetes`) on stdin and prints the workload
//! `podman kube play` runs (see `integration_tests::podman`).

use std::io::Read;
use std::process::ExitCode;

use clap::Parser;
use integration_tests::podman::{podman_workload, PodmanOptions};

/// The kube-dns manifests as podman runs them (deploy/podman/run.sh).
#[derive(Debug, Parser)]
#[command(name = "podman-manifest", version)]
struct Args {
    /// Host directory with the `kubeconfig` kube2sky reads (mounted read-only
    /// at /etc/kube2sky).
    #[arg(long)]
    kubeconfig_dir: String,
    /// The local image that replaces registry.k8s.io/etcd.
    #[arg(long)]
    etcd_image: String,
    /// Name of the Pod (legacy) or Deployment (podman calls its pod
    /// NAME-pod-0); default: the manifest's.
    #[arg(long)]
    name: Option<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut stream = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut stream) {
        eprintln!("podman-manifest: reading stdin: {e}");
        return ExitCode::FAILURE;
    }
    let options = PodmanOptions {
        kubeconfig_dir: args.kubeconfig_dir,
        etcd_image: args.etcd_image,
        name: args.name,
    };
    match podman_workload(&stream, &options) {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("podman-manifest: {e:#}");
            ExitCode::FAILURE
        }
    }
}
