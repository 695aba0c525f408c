//! The one place that starts an `etcd` process: a member's flags (name,
//! data directory, client and peer URLs, the initial cluster), for
//! [`crate::etcd`]'s single server and [`crate::etcd_cluster`]'s members.

use crate::process::Process;
use anyhow::Result;
use std::path::Path;

/// One etcd server process, alone or a member of a cluster: the one
/// place that starts `etcd`.
pub(crate) struct MemberSpec<'a> {
    /// `--name`, as `cluster` names it.
    pub(crate) name: &'a str,
    /// `--data-dir`.
    pub(crate) data: &'a Path,
    /// The client URL, listened on and advertised.
    pub(crate) client: &'a str,
    /// The peer URL, listened on and advertised.
    pub(crate) peer: &'a str,
    /// `--initial-cluster`: `name=peer` of every member.
    pub(crate) cluster: &'a str,
}

impl MemberSpec<'_> {
    /// Starts `etcd` for this member with more flags, its output to `log`.
    pub(crate) fn spawn(&self, extra: &[String], log: &Path) -> Result<Process> {
        self.spawn_binary(&crate::tools::require("etcd", "etcd-server")?, extra, log)
    }

    /// [`MemberSpec::spawn`] with the etcd binary at `binary`.
    pub(crate) fn spawn_binary(
        &self,
        binary: &Path,
        extra: &[String],
        log: &Path,
    ) -> Result<Process> {
        let mut command = std::process::Command::new(binary);
        command
            .args(["--name", self.name, "--data-dir"])
            .arg(self.data)
            .args(["--listen-client-urls", self.client])
            .args(["--advertise-client-urls", self.client])
            .args(["--listen-peer-urls", self.peer])
            .args(["--initial-advertise-peer-urls", self.peer])
            .args(["--initial-cluster", self.cluster])
            .args(extra)
            .env("ETCD_UNSUPPORTED_ARCH", std::env::consts::ARCH);
        Process::spawn_logged("etcd", command, log)
    }
}
