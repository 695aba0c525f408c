//! The real `skydns` binary as a child process, the one way every test starts
//! it: on a free port, for `cluster.local.` without forwarding, returned once
//! ready and stopped when dropped. [`SkydnsBinary::start`] is the common case;
//! [`Launch`] says the rest (flags, environment, readiness, socket activation).

use crate::dns::{query, Transport};
use crate::etcd::Api;
use crate::ports::{free_port, on_free_port};
use crate::process::Process;
use crate::wait::DEADLINE;
use anyhow::{ensure, Context, Result};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tempfile::TempDir;

/// The ports a skydns binary serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    /// DNS, UDP and TCP.
    pub dns: u16,
    /// `/metrics`, `/health` and `/ready`.
    pub metrics: u16,
}

/// How a launch knows that skydns is ready.
#[derive(Clone, Debug)]
pub enum Ready {
    /// `name A` has an answer.
    Answer(String),
    /// `name A` gets a reply, whatever its status (SERVFAIL while etcd is
    /// out of reach).
    Reply(String),
    /// `/health` on the metrics port answers 200 `ok` (the metrics are
    /// served after the DNS sockets are bound).
    Health,
    /// The log holds this text (e.g. a launcher's "Listening on").
    Logged(String),
}

/// Where skydns serves its metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Metrics {
    /// `-metrics-addr=127.0.0.1:<port>`.
    Flag,
    /// `PROMETHEUS_PORT=<port>`: every interface.
    Env,
    /// Nowhere.
    Off,
}

/// Builds the command of a socket-activation launcher that binds DNS port
/// `port` and runs the command line appended to it (skydns's).
pub type Launcher = fn(port: u16) -> Result<Command>;

/// How to start skydns: see the module documentation.
pub struct Launch {
    machines: String,
    api: Api,
    args: Vec<String>,
    env: Vec<(String, Option<String>)>,
    metrics: Metrics,
    ready: Ready,
    stderr_piped: bool,
    launcher: Option<Launcher>,
}

/// A running skydns binary.
pub struct SkydnsBinary {
    /// The process (stopped on drop).
    pub process: Process,
    /// The DNS port (UDP and TCP).
    pub port: u16,
    /// The port of `/metrics` (0 with [`Launch::no_metrics`]).
    pub metrics_port: u16,
    dir: TempDir,
    /// With socket activation, the port `-addr` names, held.
    _held: Option<UdpSocket>,
}

impl Launch {
    /// skydns reading the etcd `machines` over `api`, ready once
    /// `kubernetes.default.svc.cluster.local A` has an answer.
    pub fn new(machines: &str, api: Api) -> Self {
        Launch {
            machines: machines.to_string(),
            api,
            args: Vec::new(),
            env: Vec::new(),
            metrics: Metrics::Flag,
            ready: Ready::Answer("kubernetes.default.svc.cluster.local".into()),
            stderr_piped: false,
            launcher: None,
        }
    }

    /// More flags.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// An environment variable.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), Some(value.into())));
        self
    }

    /// An environment variable the test process may have, removed.
    pub fn env_remove(mut self, key: &str) -> Self {
        self.env.push((key.into(), None));
        self
    }

    /// The metrics port given by `PROMETHEUS_PORT`, not `-metrics-addr`.
    pub fn metrics_from_env(mut self) -> Self {
        self.metrics = Metrics::Env;
        self
    }

    /// No metrics port (nothing bound after the start, as when a launcher
    /// starts skydns on the first query).
    pub fn no_metrics(mut self) -> Self {
        self.metrics = Metrics::Off;
        self
    }

    /// Ready when `ready` says, not when the default name has an answer.
    pub fn ready(mut self, ready: Ready) -> Self {
        self.ready = ready;
        self
    }

    /// stdout to nowhere and stderr on a pipe (see [`SkydnsBinary::close_stderr`]).
    pub fn stderr_piped(mut self) -> Self {
        self.stderr_piped = true;
        self
    }

    /// Started by `launcher` with `-systemd`, `-addr` naming a UDP port
    /// the test holds.
    pub fn socket_activation(mut self, launcher: Launcher) -> Self {
        self.launcher = Some(launcher);
        self
    }

    /// Starts skydns on free ports, on others while one was taken in
    /// between; returns once it is ready.
    pub async fn start(&self) -> Result<SkydnsBinary> {
        on_free_port(async |dns| {
            let ports = Ports {
                dns,
                metrics: free_port()?,
            };
            self.start_on(ports).await
        })
        .await
    }

    /// [`Launch::start`] on given ports (e.g. a replica started again
    /// where it was).
    pub async fn start_on(&self, ports: Ports) -> Result<SkydnsBinary> {
        let mut skydns = self.spawn_on(ports)?;
        let log = skydns.log_path();
        let ready = skydns
            .process
            .until_ready(DEADLINE, async || self.probe(ports, &log).await)
            .await;
        ready.with_context(|| skydns.output())?;
        Ok(skydns)
    }

    /// Starts skydns on free ports without waiting for anything (a start
    /// that must fail).
    pub fn spawn(&self) -> Result<SkydnsBinary> {
        self.spawn_on(Ports {
            dns: free_port()?,
            metrics: free_port()?,
        })
    }

    /// [`Launch::spawn`] on given ports (a port another server must name
    /// before skydns starts).
    pub fn spawn_on(&self, ports: Ports) -> Result<SkydnsBinary> {
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("skydns.log");
        let held = match self.launcher {
            Some(_) => Some(UdpSocket::bind("127.0.0.1:0")?),
            None => None,
        };
        let command = self.command(ports, held.as_ref())?;
        let process = if self.stderr_piped {
            Process::spawn("skydns", command)?
        } else {
            Process::spawn_logged("skydns", command, &log)?
        };
        Ok(SkydnsBinary {
            process,
            port: ports.dns,
            metrics_port: match self.metrics {
                Metrics::Off => 0,
                Metrics::Flag | Metrics::Env => ports.metrics,
            },
            dir,
            _held: held,
        })
    }

    /// The command line: the launcher's, if any, then skydns's.
    fn command(&self, ports: Ports, held: Option<&UdpSocket>) -> Result<Command> {
        let binary = crate::bins::built_binary("skydns");
        let mut command = match self.launcher {
            Some(launcher) => {
                let mut command = launcher(ports.dns)?;
                command.arg(&binary);
                command
            }
            None => Command::new(&binary),
        };
        command
            .arg(format!("-machines={}", self.machines))
            .args(self.api.skydns_flags());
        match held {
            Some(held) => command
                .arg("-systemd")
                .arg(format!("-addr={}", held.local_addr()?)),
            None => command.arg(format!("-addr=127.0.0.1:{}", ports.dns)),
        };
        match self.metrics {
            Metrics::Flag => command.arg(format!("-metrics-addr=127.0.0.1:{}", ports.metrics)),
            Metrics::Env => command.env("PROMETHEUS_PORT", ports.metrics.to_string()),
            Metrics::Off => &mut command,
        };
        command
            .args(["-domain=cluster.local.", "-no-rec"])
            .args(&self.args)
            .env("RUST_LOG", "skydns=debug,info");
        for (key, value) in &self.env {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        if self.stderr_piped {
            command
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
        }
        Ok(command)
    }

    /// `Ok` once skydns on `ports` (logging to `log`) is ready.
    async fn probe(&self, ports: Ports, log: &Path) -> Result<()> {
        match &self.ready {
            Ready::Answer(name) => {
                let r = query(ports.dns, name, "A", Transport::Udp).await?;
                ensure!(!r.answer.is_empty(), "{r:?}");
            }
            Ready::Reply(name) => {
                query(ports.dns, name, "A", Transport::Udp).await?;
            }
            Ready::Health => {
                let url = format!("http://127.0.0.1:{}/health", ports.metrics);
                let r = crate::http::get(&url).await?;
                ensure!(r.status == 200 && r.body == "ok", "{r:?}");
            }
            Ready::Logged(text) => {
                let logged = std::fs::read_to_string(log).unwrap_or_default();
                ensure!(logged.contains(text.as_str()), "not logged yet: {text:?}");
            }
        }
        Ok(())
    }
}

impl SkydnsBinary {
    /// skydns reading the etcd `machines` over `api`, with `extra` flags;
    /// ready once `ready_name` has an A answer.
    pub async fn start(machines: &str, api: Api, extra: &[&str], ready_name: &str) -> Result<Self> {
        Self::launch(machines, api, extra, ready_name).start().await
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
        let launch = Self::launch(machines, api, extra, ready_name);
        launch.start_on(ports).await
    }

    fn launch(machines: &str, api: Api, extra: &[&str], ready_name: &str) -> Launch {
        Launch::new(machines, api)
            .args(extra)
            .ready(Ready::Answer(ready_name.into()))
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

    /// Where it logs (with a launcher, the launcher's output and skydns's).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("skydns.log")
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Closes the read end of a piped stderr ([`Launch::stderr_piped`]):
    /// from now on every line skydns logs is a failed write.
    pub fn close_stderr(&mut self) {
        drop(self.process.child().stderr.take());
    }

    /// Its log, or what it wrote on a piped stderr once it has exited.
    fn output(&mut self) -> String {
        if self.process.child().stderr.is_some() {
            self.process.stderr_after_exit()
        } else {
            self.log()
        }
    }
}
