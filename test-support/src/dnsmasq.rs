//! dnsmasq (Debian `dnsmasq-base`) as a DNS server the tests control: an
//! upstream for skydns's forwarding, or the server exec-healthz's `nslookup`
//! probe asks. It answers only what its arguments say, on a free loopback port.
//! [`Dnsmasq::start`] returns once it answers; dropping it stops it.

use crate::dns::{query, Transport};
use crate::ports::on_free_port;
use crate::process::Process;
use crate::wait::DEADLINE;
use anyhow::{Context, Result};

/// A running dnsmasq on `127.0.0.1:port` (UDP and TCP).
pub struct Dnsmasq {
    pub port: u16,
    process: Option<Process>,
    _dir: tempfile::TempDir,
}

impl Dnsmasq {
    /// Starts dnsmasq answering only from `args` (e.g. `--address=/x/1.2.3.4`).
    pub async fn start(args: &[&str]) -> Result<Dnsmasq> {
        on_free_port(async |port| {
            let dir = tempfile::tempdir()?;
            let log = dir.path().join("dnsmasq.log");
            let mut command = crate::tools::command("dnsmasq", "dnsmasq-base")?;
            command
                .args(["--no-daemon", "--log-facility=-"])
                .args(["--listen-address=127.0.0.1", "--bind-interfaces"])
                .args(["--no-resolv", "--no-hosts", "--conf-file=/dev/null"])
                .args(["--pid-file=", "--user=root", "--local-ttl=100"])
                .arg(format!("--port={port}"))
                .args(args);
            let mut process = Process::spawn_logged("dnsmasq", command, &log)?;
            // It answers, or it exits (a taken port among the reasons).
            process
                .until_ready(DEADLINE, async || {
                    query(port, "ready.invalid.", "A", Transport::Udp).await
                })
                .await
                .with_context(|| std::fs::read_to_string(&log).unwrap_or_default())?;
            Ok(Dnsmasq {
                port,
                process: Some(process),
                _dir: dir,
            })
        })
        .await
    }

    /// Stops it now (queries to its port get no answer from then on).
    pub fn stop(&mut self) {
        drop(self.process.take());
    }
}
