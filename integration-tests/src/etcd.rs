//! A real etcd (Debian `etcd-server`) for tests, plus `etcdctl` and `dig`.
//!
//! [`Etcd::start`] runs `etcd` on free loopback ports with a temporary data
//! directory and waits until it answers a read. The server can be stopped
//! ([`Etcd::stop`]), started again on the same data and ports
//! ([`Etcd::restart`]), or started empty on the same ports
//! ([`Etcd::restart_empty`]), which is what happens when the kube-dns pod's
//! etcd container restarts on a fresh emptyDir. The process is killed when
//! the value is dropped. [`etcdctl`] and [`dig`] run the real command-line
//! clients. A missing binary is a test failure that says what to install,
//! never a silent pass.

use anyhow::{bail, Context, Result};
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// How long to wait for etcd to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A running (or stopped) etcd server owned by a test.
pub struct Etcd {
    child: Option<Child>,
    dir: TempDir,
    data: PathBuf,
    client_port: u16,
    peer_port: u16,
    generation: u32,
}

impl Etcd {
    /// Starts etcd on free loopback ports and waits until it serves reads.
    pub fn start() -> Result<Self> {
        require_binary("etcd", "etcd-server")?;
        let dir = tempfile::tempdir().context("creating a temporary etcd directory")?;
        let mut etcd = Etcd {
            child: None,
            data: dir.path().join("data-0"),
            dir,
            client_port: free_port()?,
            peer_port: free_port()?,
            generation: 0,
        };
        etcd.spawn()?;
        Ok(etcd)
    }

    /// The client URL, e.g. `http://127.0.0.1:23791`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// Kills the server (data is kept).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same data and ports.
    pub fn restart(&mut self) -> Result<()> {
        self.stop();
        self.spawn()
    }

    /// Starts the server again on the same ports with an empty data directory.
    pub fn restart_empty(&mut self) -> Result<()> {
        self.stop();
        self.generation += 1;
        self.data = self.dir.path().join(format!("data-{}", self.generation));
        self.spawn()
    }

    /// Runs `etcdctl` (v3 API) against this server.
    pub fn etcdctl(&self, args: &[&str]) -> Result<Output> {
        etcdctl(&self.endpoint(), args)
    }

    /// `etcdctl put key value`, failing the test on error.
    pub fn put(&self, key: &str, value: &str) -> Result<()> {
        check(self.etcdctl(&["put", key, value])?, "etcdctl put")
    }

    /// `etcdctl del key`, failing the test on error.
    pub fn del(&self, key: &str) -> Result<()> {
        check(self.etcdctl(&["del", key])?, "etcdctl del")
    }

    /// Every key and value under `prefix`, in key order.
    pub fn get_prefix(&self, prefix: &str) -> Result<Vec<(String, String)>> {
        let out = self.etcdctl(&["get", prefix, "--prefix"])?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        check(out, "etcdctl get --prefix")?;
        let lines: Vec<&str> = text.lines().collect();
        Ok(lines
            .chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| (c[0].to_string(), c[1].to_string()))
            .collect())
    }

    fn log_path(&self) -> PathBuf {
        self.dir
            .path()
            .join(format!("etcd-{}.log", self.generation))
    }

    fn spawn(&mut self) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())?;
        let client = self.endpoint();
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let child = Command::new("etcd")
            .args(["--name", "test", "--data-dir"])
            .arg(&self.data)
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("test={peer}")])
            .env("ETCD_UNSUPPORTED_ARCH", std::env::consts::ARCH)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting etcd")?;
        self.child = Some(child);
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    bail!("etcd exited with {status}; log:\n{}", self.log());
                }
            }
            let probe = etcdctl(&self.endpoint(), &["get", "/", "--command-timeout=1s"])?;
            if probe.status.success() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "etcd not ready after {READY_TIMEOUT:?}; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs `etcdctl` with the v3 API against `endpoint`.
pub fn etcdctl(endpoint: &str, args: &[&str]) -> Result<Output> {
    require_binary("etcdctl", "etcd-client")?;
    Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoint}"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running etcdctl")
}

/// Runs `dig @127.0.0.1 -p PORT +time=2 +tries=1 ARGS...`.
pub fn dig(port: u16, args: &[&str]) -> Result<String> {
    require_binary("dig", "dnsutils")?;
    let out = Command::new("dig")
        .args(["@127.0.0.1", "-p", &port.to_string(), "+time=2", "+tries=1"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running dig")?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A loopback port that is free for TCP and UDP at the moment of the call.
pub fn free_port() -> Result<u16> {
    for _ in 0..100 {
        let tcp = TcpListener::bind("127.0.0.1:0")?;
        let port = tcp.local_addr()?.port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no free loopback port found")
}

fn check(out: Output, what: &str) -> Result<()> {
    if !out.status.success() {
        bail!("{what} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// Fails with an install hint when `binary` is not on PATH.
pub fn require_binary(binary: &str, debian_package: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(binary))
        .find(|p| is_executable(p))
        .with_context(|| {
            format!("`{binary}` is not installed: run `apt-get install -y {debian_package}` (or scripts/test.sh, which installs it)")
        })
}

fn is_executable(p: &Path) -> bool {
    p.is_file()
}
