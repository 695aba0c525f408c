//! `deploy/systemd/`: the socket unit passes UDP and TCP on one address, and
//! the service's `ExecStart` is a skydns command line the real parser
//! accepts, with `-systemd` on (so skydns takes the sockets, never binds).

use super::repo_root;
use std::collections::BTreeMap;

/// `key=value` lines of a unit file's section (comments skipped; a key may repeat).
fn section(text: &str, name: &str) -> Vec<(String, String)> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == format!("[{name}]");
        } else if inside && !line.starts_with('#') {
            if let Some((k, v)) = line.split_once('=') {
                out.push((k.trim().to_owned(), v.trim().to_owned()));
            }
        }
    }
    out
}

fn unit(name: &str) -> String {
    let path = repo_root().join("deploy/systemd").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_socket_unit_passes_udp_and_tcp_to_the_service() {
    let socket: BTreeMap<String, String> = section(&unit("skydns.socket"), "Socket")
        .into_iter()
        .collect();
    assert_eq!(socket.get("ListenDatagram"), socket.get("ListenStream"));
    assert!(socket.contains_key("ListenDatagram"));
    assert_eq!(
        socket.get("Service").map(String::as_str),
        Some("skydns.service")
    );
}

#[test]
fn the_service_runs_skydns_with_systemd_sockets() {
    let service = section(&unit("skydns.service"), "Service");
    let exec = &service
        .iter()
        .find(|(k, _)| k == "ExecStart")
        .expect("ExecStart")
        .1;
    let args: Vec<&str> = exec
        .split_whitespace()
        .filter(|a| !a.starts_with('$'))
        .collect();
    assert!(args[0].ends_with("/skydns"), "{exec}");
    let argv = std::iter::once("skydns").chain(args[1..].iter().copied());
    let flags = skydns::config::parse_args(argv.map(Into::into)).expect("flags parse");
    let config = skydns::config::Settings::from_flags(&flags)
        .finish(&flags, || Ok(vec!["192.0.2.1:53".parse().unwrap()]))
        .expect("a valid configuration");
    assert!(config.systemd, "{exec}: -systemd");
    let requires: Vec<String> = section(&unit("skydns.service"), "Unit")
        .into_iter()
        .filter(|(k, _)| k == "Requires")
        .map(|(_, v)| v)
        .collect();
    assert_eq!(requires, ["skydns.socket"]);
}
