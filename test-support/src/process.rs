//! Child processes a test starts, and making sure none outlives the test:
//! [`Process`] spawns a command as the leader of a new process group, and
//! dropping it stops the whole group (SIGTERM, then SIGKILL after [`GRACE`]);
//! should the test process die first, `crate::reaper` kills the group.
//! [`processes_with`] and [`Process::group_left`] check that nothing is left.

use crate::wait::{eventually, eventually_blocking};
use anyhow::{bail, Context, Result};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long a stopped process may take to exit after SIGTERM.
pub const GRACE: Duration = Duration::from_secs(10);

/// A child process leading its own process group, stopped when dropped.
pub struct Process {
    name: String,
    child: Child,
    exited: Option<ExitStatus>,
}

impl Process {
    /// Spawns `command` (named `name` in errors) in a new process group.
    pub fn spawn(name: &str, mut command: Command) -> Result<Process> {
        let child = command
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        crate::reaper::started(child.id());
        Ok(Process {
            name: name.to_string(),
            child,
            exited: None,
        })
    }

    /// [`Process::spawn`] with stdin closed and stdout and stderr appended
    /// to the file `log`.
    pub fn spawn_logged(name: &str, mut command: Command, log: &Path) -> Result<Process> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        command
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        Self::spawn(name, command)
    }

    /// [`Process::spawn`] with stdin closed and every line of stdout and
    /// stderr echoed to the test's output as `name: line` and sent to the
    /// returned channel, which disconnects once both pipes are closed.
    pub fn spawn_with_lines(
        name: &str,
        mut command: Command,
    ) -> Result<(Process, mpsc::Receiver<String>)> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut process = Self::spawn(name, command)?;
        let (tx, rx) = mpsc::channel();
        let stdout = process.child.stdout.take().expect("piped stdout");
        let stderr = process.child.stderr.take().expect("piped stderr");
        for stream in [Box::new(stdout) as Box<dyn Read + Send>, Box::new(stderr)] {
            let (tx, name) = (tx.clone(), name.to_string());
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    eprintln!("{name}: {line}");
                    let _ = tx.send(line);
                }
            });
        }
        Ok((process, rx))
    }

    /// What the child wrote to a piped stderr, once it has exited (why it
    /// could not start); empty while it runs, or when stderr is not piped.
    pub fn stderr_after_exit(&mut self) -> String {
        let mut text = String::new();
        if self.try_wait().ok().flatten().is_some() {
            if let Some(stderr) = self.child.stderr.as_mut() {
                let _ = stderr.read_to_string(&mut text);
            }
        }
        text
    }

    /// The [`Child`], e.g. to take its pipes.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).expect("a pid fits in i32"))
    }

    /// Sends `signal` to the leader only.
    pub fn signal(&self, signal: Signal) -> Result<()> {
        kill(self.pid(), signal).with_context(|| format!("sending {signal} to {}", self.name))
    }

    /// The exit status, if the leader has exited.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait()?;
        }
        Ok(self.exited)
    }

    /// Whether the leader has exited, read without reaping it (a zombie
    /// or gone from `/proc`): for checks that hold only `&self`.
    pub fn has_exited(&self) -> bool {
        if self.exited.is_some() {
            return true;
        }
        match std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())) {
            // pid (comm) state ...
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z')),
            Err(_) => true,
        }
    }

    /// Waits until the leader exits, at most `within`.
    pub async fn wait_exit(&mut self, within: Duration) -> Result<ExitStatus> {
        let what = format!("{} to exit", self.name);
        eventually(&what, within, async || self.exited_now()).await
    }

    fn exited_now(&mut self) -> Result<ExitStatus> {
        match self.try_wait()? {
            Some(status) => Ok(status),
            None => bail!("{} is still running", self.name),
        }
    }

    /// Polls `probe` until it succeeds, at most `within`; fails at once if
    /// the process exits first (a server that could not start).
    pub async fn until_ready<T>(
        &mut self,
        within: Duration,
        mut probe: impl AsyncFnMut() -> Result<T>,
    ) -> Result<T> {
        let what = format!("{} to be ready", self.name);
        eventually(&what, within, async || match self.exit_error()? {
            Some(exited) => Ok(Err(exited)),
            None => probe().await.map(Ok),
        })
        .await?
    }

    /// [`Process::until_ready`] for code that cannot await.
    pub fn until_ready_blocking<T>(
        &mut self,
        within: Duration,
        mut probe: impl FnMut() -> Result<T>,
    ) -> Result<T> {
        let what = format!("{} to be ready", self.name);
        eventually_blocking(&what, within, || match self.exit_error()? {
            Some(exited) => Ok(Err(exited)),
            None => probe().map(Ok),
        })?
    }

    /// "exited with <status>" once the leader has exited.
    fn exit_error(&mut self) -> Result<Option<anyhow::Error>> {
        let status = self.try_wait()?;
        Ok(status.map(|status| anyhow::anyhow!("{} exited with {status}", self.name)))
    }

    /// SIGTERM, then SIGKILL to the group after [`GRACE`]; reaps the
    /// leader and kills anything left in its group.
    pub fn stop(&mut self) {
        if self.try_wait().ok().flatten().is_none() {
            let _ = self.signal(Signal::SIGTERM);
            let what = format!("{} to exit after SIGTERM", self.name);
            let _ = eventually_blocking(&what, GRACE, || self.exited_now());
        }
        self.kill();
    }

    /// SIGKILL to the whole group at once; reaps the leader.
    pub fn kill(&mut self) {
        let _ = killpg(self.pid(), Signal::SIGKILL);
        if self.exited.is_none() {
            self.exited = self.child.wait().ok();
        }
        crate::reaper::stopped(self.child.id());
    }

    /// The live (non-zombie) members of the leader's process group, as
    /// `pid command` lines.
    pub fn group_left(&self) -> Vec<String> {
        let group = self.child.id().to_string();
        proc_stats()
            .filter_map(|(_, stat)| {
                // pid (comm) state ppid pgrp ...
                let (head, rest) = stat.rsplit_once(") ")?;
                let fields: Vec<&str> = rest.split(' ').collect();
                (fields.get(2) == Some(&group.as_str()) && fields.first() != Some(&"Z"))
                    .then(|| head.replace(" (", " "))
            })
            .collect()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Live (non-zombie) processes whose command line (arguments joined by
/// spaces) contains `token`.
pub fn processes_with(token: &str) -> Vec<u32> {
    proc_stats()
        .filter(|(pid, stat)| {
            let zombie = stat
                .rsplit(") ")
                .next()
                .is_none_or(|rest| rest.starts_with('Z'));
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            !zombie && cmdline.contains(token)
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// The process groups of the live processes whose command line contains
/// `token` (field 5 of `/proc/<pid>/stat`).
pub fn process_groups_with(token: &str) -> std::collections::BTreeSet<u32> {
    processes_with(token)
        .into_iter()
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // pid (comm) state ppid pgrp ...
            let (_, rest) = stat.rsplit_once(") ")?;
            rest.split(' ').nth(2)?.parse().ok()
        })
        .collect()
}

/// `(pid, /proc/<pid>/stat)` of every process that can be read.
fn proc_stats() -> impl Iterator<Item = (u32, String)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            Some((pid, stat))
        })
}

/// Makes sure this process may hold `files` open files: raises its soft
/// limit as far as needed (up to the hard limit), or says what it needs.
pub fn allow_open_files(files: u64) -> Result<()> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft >= files {
        return Ok(());
    }
    anyhow::ensure!(
        hard >= files,
        "this test holds {files} open files; the hard limit is {hard}: raise it (ulimit -Hn {files}, as root)"
    );
    setrlimit(Resource::RLIMIT_NOFILE, files, hard)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", script]).stdin(Stdio::null());
        command
    }

    #[test]
    fn dropping_the_guard_kills_the_whole_group() {
        let token = format!("3600.{}1", std::process::id());
        // SIGTERM ends the shell and leaves its two sleeps: the group kill
        // must get them.
        let process =
            Process::spawn("sh", shell(&format!("sleep {token} & sleep {token}; wait"))).unwrap();
        eventually_blocking("the shell and two sleeps", Duration::from_secs(10), || {
            let n = processes_with(&format!("sleep {token}")).len();
            anyhow::ensure!(n == 3, "{n} processes");
            Ok(())
        })
        .unwrap();
        assert_eq!(process.group_left().len(), 3, "{:?}", process.group_left());
        drop(process);
        eventually_blocking("no sleep left", Duration::from_secs(10), || {
            let left = processes_with(&format!("sleep {token}"));
            anyhow::ensure!(left.is_empty(), "{left:?}");
            Ok(())
        })
        .unwrap();
    }

    #[tokio::test]
    async fn wait_exit_gives_the_status() {
        let mut process = Process::spawn("sh", shell("exit 3")).unwrap();
        let status = process.wait_exit(crate::wait::DEADLINE).await.unwrap();
        assert_eq!(status.code(), Some(3));
        assert_eq!(process.try_wait().unwrap(), Some(status));
    }
}
