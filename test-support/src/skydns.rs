//! The real `skydns` binary as a child process: on a free port (another one
//! if it was taken meanwhile), for `cluster.local.` without forwarding,
//! with its metrics on a port of their own and its log in a temporary
//! directory; returned once it answers a name, stopped when dropped.

use crate::dns::{query, Transport};
use crate::etcd::Api;
use crate::ports::{free_port, on_free_port};
use crate::process::Process;
use crate::wait::DEADLINE;
use anyhow::{ensure, Context, Result};
use std::path::PathBuf;
use std::process::Command;
use tempfile::TempDir;

/// The ports a skydns binary serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    /// DNS, UDP and TCP.
    pub dns: u16,
    /// `/metrics`, `/health` and `/ready`.
    pub metrics: u16,
}

/// A running skydns binary.
pub struct SkydnsBinary {
    /// The process (stopped on drop).
    pub process: Process,
    /// The DNS port (UDP and TCP).
    pub port: u16,
    /// The port of `/metrics`.
    pub metrics_port: u16,
    dir: TempDir,
}

impl SkydnsBinary {
    /// skydns reading the etcd `machines` over `api`, with `extra` flags;
    /// ready once `ready_name` has an A answer.
    pub async fn start(machines: &str, api: Api, extra: &[&str], ready_name: &str) -> Result<Self> {
        on_free_port(async |port| {
            let ports = Ports {
                dns: port,
                metrics: free_port()?,
            };
            Self::start_on(ports, machines, api, extra, ready_name).await
        })
        .await
    }

    /// [`SkydnsBinary::start`] on given ports (e.g. a replica started
    /// again where it was).
    pub async fn start_on(
        ports: Ports,
        machines: &str,
        api: Api,
        extra: &[&str],
        ready_name: &str,
    ) -> Result<Self> {
        let binary = crate::bins::built_binary("skydns");
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("skydns.log");
        let mut command = Command::new(&binary);
        command
            .arg(format!("-machines={machines}"))
            .args(api.skydns_flags())
            .arg(format!("-addr=127.0.0.1:{}", ports.dns))
            .arg(format!("-metrics-addr=127.0.0.1:{}", ports.metrics))
            .args(["-domain=cluster.local.", "-no-rec"])
            .args(extra)
            .env("RUST_LOG", "skydns=debug,info");
        let mut process = Process::spawn_logged("skydns", command, &log)?;
        let ready = process
            .until_ready(DEADLINE, async || {
                let r = query(ports.dns, ready_name, "A", Transport::Udp).await?;
                ensure!(!r.answer.is_empty(), "{r:?}");
                Ok(())
            })
            .await;
        ready.with_context(|| std::fs::read_to_string(&log).unwrap_or_default())?;
        Ok(SkydnsBinary {
            process,
            port: ports.dns,
            metrics_port: ports.metrics,
            dir,
        })
    }

    /// Its ports.
    pub fn ports(&self) -> Ports {
        Ports {
            dns: self.port,
            metrics: self.metrics_port,
        }
    }

    /// The URL of `path` (`/ready`, `/health`, `/metrics`) on its metrics port.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.metrics_port)
    }

    /// Where it logs.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("skydns.log")
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }
}
