//! Shared helpers for the `apiserver_*` tests: starting a server, building
//! kube clients for it, and awaiting with a deadline instead of sleeping.

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use kube_api_test_server::{ApiServer, ApiServerHandle, Config};
use serde_json::json;

/// Starts a server with the given config (port 0 unless set).
pub async fn start(config: Config) -> ApiServerHandle {
    ApiServer::start(config).await.expect("start api server")
}

/// Starts a server with default settings and fast bookmarks.
pub async fn start_default() -> ApiServerHandle {
    start(Config {
        bookmark_interval: Duration::from_millis(200),
        ..Config::default()
    })
    .await
}

/// A kube client for `server`, optionally with a bearer token, built from a
/// kubeconfig document so nothing on the machine is read.
pub async fn client_with_token(server: &ApiServerHandle, token: Option<&str>) -> Client {
    client_with(server, token, true).await
}

/// A kube client for `server`; `retry: false` turns off kube's default
/// retrying of 429/503/504 so tests can observe those codes directly.
pub async fn client_with(server: &ApiServerHandle, token: Option<&str>, retry: bool) -> Client {
    let user = match token {
        Some(t) => json!({ "name": "test", "user": { "token": t } }),
        None => json!({ "name": "test", "user": {} }),
    };
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "test", "cluster": { "server": server.url() } }],
        "users": [user],
        "contexts": [{ "name": "test", "context": { "cluster": "test", "user": "test", "namespace": "default" } }],
        "current-context": "test",
    });
    let kubeconfig = Kubeconfig::from_yaml(&kubeconfig.to_string()).expect("kubeconfig");
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("kube config");
    config.default_retry = retry;
    Client::try_from(config).expect("kube client")
}

/// A kube client for `server` without credentials.
pub async fn client(server: &ApiServerHandle) -> Client {
    client_with_token(server, None).await
}

/// Awaits `fut`, failing the test with `what` if it takes longer than
/// `test_support`'s deadline.
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    test_support::wait::within(what, test_support::wait::DEADLINE, fut)
        .await
        .unwrap()
}

/// A ClusterIP Service named `name` with one TCP port.
pub fn service(name: &str, port: i32) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": name },
        "spec": { "ports": [{ "name": "http", "port": port }] },
    }))
    .expect("service")
}

/// The `kube-api-test-server` binary (built by `cargo build --workspace
/// --bins`) on a free loopback port with `args`, and the URL its first line
/// announces (`listening on <url>`); killed when the child is dropped.
pub async fn binary_server(args: &[std::ffi::OsString]) -> (tokio::process::Child, String) {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut child =
        tokio::process::Command::new(test_support::bins::built_binary("kube-api-test-server"))
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("kube-api-test-server starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let first = within("the listening line", lines.next_line())
        .await
        .expect("stdout readable")
        .expect("a first line");
    let url = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    (child, url)
}
