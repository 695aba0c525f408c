//! CoreDNS, the peer the tests and benchmarks compare with: the binary
//! `scripts/kube-tools.sh` builds from the pin in `tools/coredns`, run on a
//! free loopback port with a Corefile the caller gives, ready once a name
//! answers.

use crate::dns::{query, Transport};
use crate::ports::on_free_port;
use crate::process::Process;
use crate::wait::DEADLINE;
use anyhow::{ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The CoreDNS binary, built on the first call.
pub fn binary() -> Result<PathBuf> {
    Ok(crate::control_plane::binaries()?.join("coredns"))
}

/// What the built CoreDNS reports, e.g. `CoreDNS-1.15.0`.
pub fn version() -> Result<String> {
    let path = crate::control_plane::binaries()?.join("coredns-version");
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    Ok(text.lines().next().unwrap_or_default().trim().to_string())
}

/// The server block of kubeadm's Corefile (`kubeadm init`, Kubernetes
/// 1.36) for `port`, its kubernetes plugin reading the API server of
/// `kubeconfig`, with the pod mode `pods` (`insecure` in kubeadm's) and
/// without the plugins that need a node or add nothing to an answer:
/// health, ready, prometheus (ports), forward, loop (no upstream here),
/// cache (its TTLs count down) and reload.
pub fn kubeadm_corefile(port: u16, kubeconfig: &Path, pods: &str) -> String {
    format!(
        ".:{port} {{
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods {pods}
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
    loadbalance
}}
",
        kubeconfig = kubeconfig.display()
    )
}

/// A running CoreDNS, stopped when dropped.
pub struct Coredns {
    /// Its DNS port on 127.0.0.1, UDP and TCP.
    pub port: u16,
    log: PathBuf,
    _process: Process,
    _dir: tempfile::TempDir,
}

impl Coredns {
    /// Starts CoreDNS with the Corefile `corefile(port)` on a free port;
    /// returned once `ready_name` has an A answer.
    pub async fn start(corefile: impl Fn(u16) -> String, ready_name: &str) -> Result<Self> {
        let binary = binary()?;
        on_free_port(async |port| {
            let dir = tempfile::tempdir()?;
            let conf = dir.path().join("Corefile");
            std::fs::write(&conf, corefile(port))?;
            let log = dir.path().join("coredns.log");
            let mut command = Command::new(&binary);
            command.arg("-conf").arg(&conf);
            let mut process = Process::spawn_logged("coredns", command, &log)?;
            let ready = process
                .until_ready(DEADLINE, async || {
                    let reply = query(port, ready_name, "A", Transport::Udp).await?;
                    ensure!(!reply.answer.is_empty(), "{}", reply.status);
                    Ok(())
                })
                .await;
            if let Err(e) = ready {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                anyhow::bail!("{e:#}\ncoredns's log:\n{text}");
            }
            Ok(Coredns {
                port,
                log,
                _process: process,
                _dir: dir,
            })
        })
        .await
    }

    /// Everything CoreDNS logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
