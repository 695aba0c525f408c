//! Running `deploy/podman/run.sh` and looking at its pod with podman.

use anyhow::{ensure, Context, Result};
use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::Duration;
use test_support::bins::{bin_dir, built_binary};
use test_support::process::Process;
use test_support::wait::{eventually_blocking, DEADLINE};

/// How long run.sh may take from start to "==> ready" (images are built
/// before; the legacy pod's kube2sky waits for etcd).
const READY_WITHIN: Duration = Duration::from_secs(180);

pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Why these tests cannot run here, if they cannot: podman's bridge
/// network, which the host reaches the pod through, needs root.
pub(crate) fn missing_privilege() -> Option<String> {
    (!nix::unistd::geteuid().is_root()).then(|| {
        "cannot run: needs root (uid 0): deploy/podman/run.sh runs the pod on podman's \
         bridge network; run scripts/test.sh as root"
            .to_string()
    })
}

/// `podman ARGS` with the project's containers.conf; its stdout, or an
/// error carrying its stderr.
pub(crate) fn podman(args: &[&str]) -> Result<String> {
    let out = podman_command()?.args(args).stdin(Stdio::null()).output()?;
    ensure!(
        out.status.success(),
        "podman {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn podman_command() -> Result<Command> {
    let mut command = test_support::tools::command("podman", "podman runc busybox-static")?;
    command.env(
        "CONTAINERS_CONF",
        repo_root().join("deploy/podman/containers.conf"),
    );
    Ok(command)
}

/// The host PID of a container's entrypoint, 0 when it is not running.
pub(crate) fn container_pid(container: &str) -> Result<i32> {
    let pid = podman(&["inspect", "--format", "{{.State.Pid}}", container])?;
    pid.trim().parse().context("podman inspect .State.Pid")
}

/// Names of every pod, container, volume and network podman has.
pub(crate) fn podman_objects() -> Result<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for (kind, args) in [
        ("pod", &["pod", "ps", "--format", "{{.Name}}"][..]),
        ("container", &["ps", "-a", "--format", "{{.Names}}"]),
        ("volume", &["volume", "ls", "--format", "{{.Name}}"]),
        ("network", &["network", "ls", "--format", "{{.Name}}"]),
    ] {
        for name in podman(args)?.lines().filter(|l| !l.is_empty()) {
            all.insert(format!("{kind} {name}"));
        }
    }
    Ok(all)
}

/// The images, built once per test binary from the binaries under test.
pub(crate) fn build_images() {
    static BUILT: Mutex<bool> = Mutex::new(false);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if *built {
        return;
    }
    for bin in [
        "skydns",
        "kube2sky",
        "exec-healthz",
        "kube-api-test-server",
        "podman-manifest",
    ] {
        built_binary(bin);
    }
    let out = Command::new("bash")
        .arg(repo_root().join("deploy/podman/images.sh"))
        .arg(bin_dir())
        .env(
            "CONTAINERS_CONF",
            repo_root().join("deploy/podman/containers.conf"),
        )
        .output()
        .expect("running deploy/podman/images.sh");
    assert!(
        out.status.success(),
        "deploy/podman/images.sh failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    *built = true;
}

/// A pod run by `deploy/podman/run.sh`, up to its "==> ready" line.
pub(crate) struct RunningPod {
    run: Process,
    /// The pod's name: containers are `<pod>-<container>`.
    pub(crate) pod: String,
    pub(crate) ip: IpAddr,
    /// The API test server's loopback port, for kubectl.
    pub(crate) api: String,
    /// Every line run.sh printed.
    lines: mpsc::Receiver<String>,
}

impl RunningPod {
    /// Starts run.sh with `args` (the images must be built) and waits for
    /// its ready line. On a failure, removes any pod whose name starts
    /// with `name` (run.sh's `--name`) that it left.
    pub(crate) fn start(args: &[&str], name: &str) -> Result<RunningPod> {
        Self::run(args).inspect_err(|_| remove_pods(name))
    }

    fn run(args: &[&str]) -> Result<RunningPod> {
        let mut command = Command::new("bash");
        command
            .arg(repo_root().join("deploy/podman/run.sh"))
            .args(args)
            .current_dir(repo_root())
            .env("SKIP_BUILD", "1")
            .env("SKIP_IMAGES", "1")
            .env("BIN_DIR", bin_dir())
            .env_remove("CONTAINERS_CONF");
        let (run, rx) = Process::spawn_with_lines("run.sh", command)?;
        let ready = wait_for_line(&rx, "==> ready ", READY_WITHIN)?;
        let field = |name: &str| -> Result<String> {
            ready
                .split_whitespace()
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
                .map(String::from)
                .with_context(|| format!("no {name}= in {ready:?}"))
        };
        Ok(RunningPod {
            pod: field("pod")?,
            ip: field("ip")?.parse().context("ip=")?,
            api: field("api")?,
            run,
            lines: rx,
        })
    }

    /// The pod's port 53.
    pub(crate) fn dns(&self) -> SocketAddr {
        SocketAddr::new(self.ip, 53)
    }

    /// `<pod>-<container>`.
    pub(crate) fn container(&self, name: &str) -> String {
        format!("{}-{name}", self.pod)
    }

    /// SIGTERM to run.sh, as Ctrl-C: it removes the pod and stops the API
    /// server; fails unless it says so and exits 0.
    pub(crate) fn stop(mut self) -> Result<()> {
        use nix::sys::signal::Signal;
        self.run.signal(Signal::SIGTERM)?;
        wait_for_line(&self.lines, "==> stopped", Duration::from_secs(60))?;
        let status = eventually_blocking("run.sh to exit after it stopped", DEADLINE, || {
            self.run.try_wait()?.context("still running")
        })?;
        // `trap 'exit 143' TERM`: the script's own exit, not a kill.
        ensure!(status.code() == Some(143), "run.sh exited with {status}");
        Ok(())
    }
}

impl Drop for RunningPod {
    /// On a failed test: print each container's log (the pod's logs go
    /// with it), stop run.sh (its group too), then remove the pod and its
    /// volumes in case run.sh could not.
    fn drop(&mut self) {
        if std::thread::panicking() {
            print_container_logs(&self.pod);
        }
        self.run.stop();
        remove_pods(&self.pod);
    }
}

/// What container `name` wrote on stdout and stderr (podman keeps them
/// apart), its last `tail` lines with `Some`.
pub(crate) fn container_log(name: &str, tail: Option<usize>) -> Result<String> {
    let mut command = podman_command()?;
    command.args(["logs", "--timestamps"]);
    if let Some(tail) = tail {
        command.args(["--tail", &tail.to_string()]);
    }
    let out = command.arg(name).stdin(Stdio::null()).output()?;
    ensure!(
        out.status.success(),
        "podman logs {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// The last lines of the log of every container of `pod`, on stderr
/// (with `writeln!`: this runs while a test panics, and a failed write
/// must not panic again).
fn print_container_logs(pod: &str) {
    use std::io::Write as _;
    let filter = format!("pod={pod}");
    let names = podman(&["ps", "--all", "--filter", &filter, "--format", "{{.Names}}"]);
    let mut stderr = std::io::stderr();
    for name in names.unwrap_or_default().lines() {
        let _ = match container_log(name, Some(300)) {
            Ok(log) => writeln!(
                stderr,
                "---- podman logs {name} (last 300 lines) ----\n{log}"
            ),
            Err(error) => writeln!(stderr, "---- podman logs {name}: {error:#}"),
        };
    }
}

/// Removes the pods, and volumes, whose names start with `name`.
fn remove_pods(name: &str) {
    if let Ok(pods) = podman(&["pod", "ps", "--format", "{{.Name}}"]) {
        for pod in pods.lines().filter(|p| p.starts_with(name)) {
            let _ = podman(&["pod", "rm", "--force", "--time", "0", pod]);
        }
    }
    if let Ok(volumes) = podman(&["volume", "ls", "--format", "{{.Name}}"]) {
        for v in volumes.lines().filter(|v| v.starts_with(name)) {
            let _ = podman(&["volume", "rm", "--force", v]);
        }
    }
}

/// The first line of `lines` starting with `prefix`.
fn wait_for_line(lines: &mpsc::Receiver<String>, prefix: &str, within: Duration) -> Result<String> {
    test_support::wait::line(&format!("run.sh's {prefix:?}"), lines, within, |l| {
        l.starts_with(prefix)
    })
}
