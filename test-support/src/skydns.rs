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
        let binary = crate::bins::built_binary("skydns");
        on_free_port(async |port| {
            let dir = tempfile::tempdir()?;
            let log = dir.path().join("skydns.log");
            let metrics_port = free_port()?;
            let mut command = Command::new(&binary);
            command
                .arg(format!("-machines={machines}"))
                .args(api.skydns_flags())
                .arg(format!("-addr=127.0.0.1:{port}"))
                .arg(format!("-metrics-addr=127.0.0.1:{metrics_port}"))
                .args(["-domain=cluster.local.", "-no-rec"])
                .args(extra)
                .env("RUST_LOG", "skydns=debug,info");
            let mut process = Process::spawn_logged("skydns", command, &log)?;
            let ready = process
                .until_ready(DEADLINE, async || {
                    let r = query(port, ready_name, "A", Transport::Udp).await?;
                    ensure!(!r.answer.is_empty(), "{r:?}");
                    Ok(())
                })
                .await;
            ready.with_context(|| std::fs::read_to_string(&log).unwrap_or_default())?;
            Ok(SkydnsBinary {
                process,
                port,
                metrics_port,
                dir,
            })
        })
        .await
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
