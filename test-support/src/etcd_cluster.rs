//! A real etcd cluster of several members (Debian `etcd-server`) on loopback,
//! for the failover tests of a shared etcd: [`EtcdCluster::start`] runs `n`
//! members; a test finds the raft leader, kills a member, and reads and writes
//! through the others. Every member is killed when the value is dropped.

use crate::etcd::Api;
use crate::ports::{free_port, retry_on_conflict};
use crate::process::Process;
use anyhow::{bail, ensure, Context, Result};
use std::process::Output;
use std::time::Duration;
use tempfile::TempDir;

/// How long to wait for every member to serve reads.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// One member of an [`EtcdCluster`].
struct Member {
    /// Data directory and log, new for every attempt to start the cluster.
    dir: std::path::PathBuf,
    client_port: u16,
    peer_port: u16,
    process: Option<Process>,
}

impl Member {
    fn client_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }
}

/// A running etcd cluster owned by a test.
pub struct EtcdCluster {
    api: Api,
    dir: TempDir,
    members: Vec<Member>,
}

impl EtcdCluster {
    /// Starts `size` members on free loopback ports and waits until each
    /// serves reads; the pipeline's API is [`Api::from_env`].
    pub fn start(size: usize) -> Result<Self> {
        crate::tools::require("etcd", "etcd-server")?;
        let dir = tempfile::tempdir().context("creating a temporary etcd directory")?;
        let mut cluster = EtcdCluster {
            api: Api::from_env(),
            dir,
            members: Vec::new(),
        };
        let mut attempt = 0;
        retry_on_conflict(|| {
            cluster.kill_all();
            attempt += 1;
            let base = cluster.dir.path().join(format!("attempt-{attempt}"));
            cluster.members = (0..size)
                .map(|i| {
                    Ok(Member {
                        dir: base.join(format!("m{i}")),
                        client_port: free_port()?,
                        peer_port: free_port()?,
                        process: None,
                    })
                })
                .collect::<Result<_>>()?;
            let mut ports: Vec<u16> = cluster
                .members
                .iter()
                .flat_map(|m| [m.client_port, m.peer_port])
                .collect();
            ports.sort();
            ports.dedup();
            if ports.len() < 2 * size {
                bail!("address already in use: the same free port was chosen twice");
            }
            cluster.spawn_all()
        })?;
        Ok(cluster)
    }

    /// The API the pipeline under test uses.
    pub fn api(&self) -> Api {
        self.api
    }

    /// Every member's client URL, in member order.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(Member::client_url).collect()
    }

    /// The client URLs of the members still running.
    pub fn live_endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|m| m.process.is_some())
            .map(Member::client_url)
            .collect()
    }

    /// The index of the member that is the raft leader, as the members
    /// still running report it.
    pub fn leader(&self) -> Result<usize> {
        let out = self.etcdctl(&["endpoint", "status", "-w", "json"])?;
        let statuses: serde_json::Value = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("endpoint status: {out:?}"))?;
        let leader = statuses
            .as_array()
            .and_then(|all| all.iter().find_map(|s| s["Status"]["leader"].as_u64()))
            .context("no member names a leader")?;
        for status in statuses.as_array().into_iter().flatten() {
            if status["Status"]["header"]["member_id"].as_u64() == Some(leader) {
                let endpoint = status["Endpoint"].as_str().unwrap_or_default();
                if let Some(i) = self.endpoints().iter().position(|e| e == endpoint) {
                    return Ok(i);
                }
            }
        }
        bail!("the leader {leader:x} is not among the running members: {statuses}")
    }

    /// The index of the member whose client URL is `endpoint`.
    pub fn member_at(&self, endpoint: &str) -> Option<usize> {
        self.endpoints().iter().position(|e| e == endpoint)
    }

    /// Kills member `i` (SIGKILL, as a crashed machine); its data is kept.
    pub fn kill_member(&mut self, i: usize) {
        if let Some(mut process) = self.members[i].process.take() {
            process.kill();
        }
    }

    /// Runs `etcdctl` (v3 API) against the members still running.
    pub fn etcdctl(&self, args: &[&str]) -> Result<Output> {
        let out = crate::etcd::etcdctl(&self.live_endpoints().join(","), args)?;
        ensure!(out.status.success(), "etcdctl {args:?}: {out:?}");
        Ok(out)
    }

    /// Writes `key` on the pipeline's API through the members still running.
    pub fn put(&self, key: &str, value: &str) -> Result<()> {
        let endpoints = self.live_endpoints().join(",");
        let out = match self.api {
            Api::V3 => crate::etcd::etcdctl(&endpoints, &["put", key, value])?,
            Api::V2 => crate::etcd::etcdctl_v2(&endpoints, &["set", key, value])?,
        };
        ensure!(out.status.success(), "writing {key}: {out:?}");
        Ok(())
    }

    /// The keys under `prefix` on the v3 API (v2 keys are in the same
    /// store but not visible to v3 reads), through the members still up.
    pub fn keys_v3(&self, prefix: &str) -> Result<Vec<String>> {
        let out = self.etcdctl(&["get", prefix, "--prefix", "--keys-only"])?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect())
    }

    fn spawn_all(&mut self) -> Result<()> {
        let initial: Vec<String> = self
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| format!("m{i}={}", m.peer_url()))
            .collect();
        let initial = initial.join(",");
        for i in 0..self.members.len() {
            let member = &self.members[i];
            let (client, peer) = (member.client_url(), member.peer_url());
            let data = member.dir.join("data");
            let spawn = crate::etcd_member::MemberSpec {
                name: &format!("m{i}"),
                data: &data,
                client: &client,
                peer: &peer,
                cluster: &initial,
            };
            let extra = ["--initial-cluster-state=new", "--enable-v2=true"].map(String::from);
            std::fs::create_dir_all(&member.dir)?;
            let process = spawn.spawn(&extra, &member.dir.join("etcd.log"))?;
            self.members[i].process = Some(process);
        }
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<()> {
        let endpoints = self.endpoints().join(",");
        crate::wait::eventually_blocking("every etcd member to serve", READY_TIMEOUT, || {
            if let Some((i, status)) = self.exited_member()? {
                return Ok(Err(anyhow::anyhow!(
                    "etcd member m{i} exited ({status}): {}",
                    self.log(i)
                )));
            }
            let probe = crate::etcd::etcdctl(&endpoints, &["endpoint", "health"])?;
            ensure!(probe.status.success(), "{probe:?}");
            Ok(Ok(()))
        })?
    }

    /// The first member that was started and has exited, with its status.
    fn exited_member(&mut self) -> Result<Option<(usize, std::process::ExitStatus)>> {
        for (i, member) in self.members.iter_mut().enumerate() {
            if let Some(process) = member.process.as_mut() {
                if let Some(status) = process.try_wait()? {
                    return Ok(Some((i, status)));
                }
            }
        }
        Ok(None)
    }

    fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.members[i].dir.join("etcd.log")).unwrap_or_default()
    }

    fn kill_all(&mut self) {
        for i in 0..self.members.len() {
            self.kill_member(i);
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        self.kill_all();
    }
}
