//! `skydns -systemd`: socket activation. A launcher (a few lines of Python,
//! doing what systemd does for `deploy/systemd/skydns.socket`) binds a UDP
//! socket and a TCP listener, puts them at fds 3 and 4, sets `LISTEN_FDS=2`
//! and `LISTEN_PID` to its own pid and execs the real skydns binary, which
//! must serve DNS on those sockets over both transports without binding
//! `-addr` (held by the test, so a bind would fail). Without sockets,
//! `-systemd` stops skydns at start-up with a message saying so.

use anyhow::{ensure, Result};
use std::process::Command;
use test_support::dead::closed_url;
use test_support::dns::{query, Transport};
use test_support::etcd::{Api, Etcd, KUBERNETES_RECORD};
use test_support::skydns::{Launch, Ready};
use test_support::wait::DEADLINE;

/// What systemd does before it starts the service of a socket unit.
const LAUNCHER: &str = r#"
import os, socket, sys
port, argv = int(sys.argv[1]), sys.argv[2:]
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", port))
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind(("127.0.0.1", port))
tcp.listen(128)
# Out of the way first, so that placing one cannot close the other.
high = [os.dup2(udp.fileno(), 20), os.dup2(tcp.fileno(), 21)]
for fd, at in zip(high, (3, 4)):
    os.dup2(fd, at)
    os.set_inheritable(at, True)
os.environ["LISTEN_FDS"] = "2"
os.environ["LISTEN_PID"] = str(os.getpid())
os.execv(argv[0], argv)
"#;

const KUBERNETES: &str = "kubernetes.default.svc.cluster.local";

/// The Python launcher binding `port`.
fn launcher(port: u16) -> Result<Command> {
    let mut command = Command::new("python3");
    command.args(["-c", LAUNCHER, &port.to_string()]);
    Ok(command)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skydns_serves_the_sockets_systemd_passes_over_udp_and_tcp() -> Result<()> {
    let etcd = Etcd::start()?;
    etcd.put(KUBERNETES_RECORD.0, KUBERNETES_RECORD.1)?;
    // -addr names a port the test holds: skydns must not bind it.
    let skydns = Launch::new(&etcd.endpoint(), etcd.api())
        .socket_activation(launcher)
        .ready(Ready::Answer(KUBERNETES.into()))
        .start()
        .await?;
    let port = skydns.port;
    for transport in [Transport::Udp, Transport::Tcp] {
        let r = query(port, KUBERNETES, "A", transport).await?;
        ensure!(
            r.answer.iter().any(|a| a.ends_with("10.0.0.1")),
            "{transport:?}: {r:?}"
        );
    }
    let logged = skydns.log();
    ensure!(
        logged.contains(&format!("udp://127.0.0.1:{port}"))
            && logged.contains(&format!("tcp://127.0.0.1:{port}")),
        "the passed sockets are named in the start-up line:\n{logged}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_without_sockets_stops_with_a_message() -> Result<()> {
    // etcd is not there (a port bound and closed): start-up stops before.
    let mut skydns = Launch::new(&closed_url(), Api::V2)
        .args(&["-systemd"])
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .spawn()?;
    // The limit only stops a hung test.
    let status = skydns.process.wait_exit(DEADLINE).await?;
    let logged = skydns.log();
    ensure!(!status.success(), "{status}: {logged}");
    ensure!(
        logged.contains("-systemd") && logged.contains("no UDP or TCP sockets supplied by systemd"),
        "{logged}"
    );
    Ok(())
}
