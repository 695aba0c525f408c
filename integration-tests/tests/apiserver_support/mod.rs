//! Shared helpers for the `apiserver_*` tests: starting a server, building
//! kube clients for it, and awaiting with a deadline instead of sleeping;
//! [`both`] gives the API test server and a real kube-apiserver, for the
//! tests that hold the first to the second.

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use kube_api_test_server::{ApiServer, ApiServerHandle, Config};
use serde_json::json;
use test_support::control_plane::{ControlPlane, Options as ControlPlaneOptions};
use test_support::relay::TcpRelay;

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
    let kubeconfig = kubeconfig_for(&server.url(), token);
    let kubeconfig = Kubeconfig::from_yaml(&kubeconfig.to_string()).expect("kubeconfig");
    client_from(kubeconfig, retry).await
}

/// A kubeconfig document for the API test server at `url`.
fn kubeconfig_for(url: &str, token: Option<&str>) -> serde_json::Value {
    let user = match token {
        Some(t) => json!({ "name": "test", "user": { "token": t } }),
        None => json!({ "name": "test", "user": {} }),
    };
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "test", "cluster": { "server": url } }],
        "users": [user],
        "contexts": [{ "name": "test", "context": { "cluster": "test", "user": "test", "namespace": "default" } }],
        "current-context": "test",
    })
}

/// A kube client from `kubeconfig`, retrying 429/503/504 if `retry`.
async fn client_from(kubeconfig: Kubeconfig, retry: bool) -> Client {
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

/// One IPv4 slice of `web` in `default`: an endpoint ready on `node-1`,
/// one with no conditions.
pub const WEB_SLICE: &str = r#"apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc12
  namespace: default
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
ports:
- name: http
  port: 80
endpoints:
- addresses: ["10.244.1.6"]
  conditions: {ready: true}
  nodeName: node-1
- addresses: ["10.244.2.7"]
"#;

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

/// A server the semantics suites hold to each other: the API test server
/// and a real kube-apiserver answer the same requests in the same test,
/// so a difference is a failure naming the server (or an asserted,
/// explained deviation where the test says so).
pub enum Server {
    /// The project's API test server, in process.
    Test(ApiServerHandle),
    /// kube-apiserver over its own etcd (`test_support::control_plane`).
    Real(Box<ControlPlane>),
}

/// How often the real server compacts etcd's history in these tests.
pub const REAL_COMPACTION: Duration = Duration::from_secs(2);

/// How long a list page from before a compaction (a continue token) may
/// still be served by the real server: its watch cache drops the list
/// snapshots a compaction removed once it learns of it, polling etcd every
/// 15 s, after [`REAL_COMPACTION`]. (Watches are another matter: the cache
/// serves one from any version still in its window of events.)
pub const REAL_COMPACTION_SEEN: Duration = Duration::from_secs(60);

/// Both servers, the test server first (fast bookmarks), the real one
/// compacting every [`REAL_COMPACTION`].
pub async fn both() -> [Server; 2] {
    let real = tokio::task::spawn_blocking(|| {
        ControlPlane::start_with(ControlPlaneOptions {
            compaction_interval: Some(REAL_COMPACTION),
            ..Default::default()
        })
    })
    .await
    .expect("the start did not panic")
    .expect("a real kube-apiserver starts");
    [
        Server::Test(start_default().await),
        Server::Real(Box::new(real)),
    ]
}

impl Server {
    /// A kube client with full rights (an admin's token on the real one).
    pub async fn client(&self) -> Client {
        self.client_retrying(true).await
    }

    /// [`Server::client`]; `retry: false` turns off kube's retries of
    /// 429/503/504 so that the codes can be observed.
    pub async fn client_retrying(&self, retry: bool) -> Client {
        match self {
            Server::Test(server) => client_with(server, None, retry).await,
            Server::Real(plane) => {
                let path = plane.admin_kubeconfig().expect("an admin kubeconfig");
                client_from(Kubeconfig::read_from(path).expect("kubeconfig"), retry).await
            }
        }
    }

    /// The server's current resourceVersion, as a list at it reports.
    pub async fn resource_version(&self) -> u64 {
        match self {
            Server::Test(server) => server.resource_version(),
            Server::Real(_) => {
                let api: kube::Api<k8s_openapi::api::core::v1::Namespace> =
                    kube::Api::all(self.client().await);
                let list = api
                    .list_metadata(&Default::default())
                    .await
                    .expect("a list");
                let rv = list.metadata.resource_version.expect("a resourceVersion");
                rv.parse().expect("a number")
            }
        }
    }

    /// Compacts the history up to now: the test server at once; on the
    /// real one, waits until etcd has compacted a revision written after
    /// this call (the API server's own compaction, every
    /// [`REAL_COMPACTION`]). Its watch cache may serve older versions for
    /// up to 15 s more: wait for a 410 within [`REAL_COMPACTION_SEEN`].
    pub async fn compact(&self) {
        match self {
            Server::Test(server) => server.expire_history(),
            Server::Real(plane) => {
                let rev = plane.etcd().revision().expect("etcd's revision");
                test_support::wait::eventually(
                    "etcd to compact the current revision",
                    REAL_COMPACTION_SEEN,
                    async || plane.compacted(rev),
                )
                .await
                .unwrap();
            }
        }
    }

    /// Makes every version written before the call too old for a watch
    /// (410 Expired): the test server forgets its history; the real one
    /// compacts it and restarts kube-apiserver, whose watch cache would
    /// still serve a compacted version in its window of recent events (see
    /// `watch_from_compacted_version` in apiserver_api). The real one needs
    /// a multi-threaded runtime.
    pub async fn expire_for_watches(&mut self) {
        self.compact().await;
        if let Server::Real(plane) = self {
            tokio::task::block_in_place(|| plane.restart_apiserver())
                .expect("kube-apiserver restarts");
        }
    }

    /// How long a request may take to see a compaction ([`Server::compact`]).
    pub fn compaction_seen_within(&self) -> Duration {
        match self {
            Server::Test(_) => test_support::wait::DEADLINE,
            Server::Real(_) => REAL_COMPACTION_SEEN,
        }
    }

    /// "API test server" or "kube-apiserver", for failure messages.
    pub fn name(&self) -> &'static str {
        match self {
            Server::Test(_) => "API test server",
            Server::Real(_) => "kube-apiserver",
        }
    }
}

impl Server {
    /// Creates namespace `name` (the real server refuses objects in a
    /// namespace that does not exist; the test server makes it on demand).
    pub async fn namespace(&self, name: &str) {
        let api: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(self.client().await);
        let ns = serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace");
        api.create(&Default::default(), &ns)
            .await
            .expect("namespace created");
    }
}

impl Server {
    /// A kube client with full rights that reaches this server through
    /// `relay` (started with [`Server::relay`]): the test cuts its
    /// connections, the server runs on.
    pub async fn client_through(&self, relay: &TcpRelay) -> Client {
        let kubeconfig = match self {
            Server::Test(_) => {
                let url = format!("http://{}", relay.addr());
                Kubeconfig::from_yaml(&kubeconfig_for(&url, None).to_string())
            }
            Server::Real(plane) => {
                let path = plane.admin_kubeconfig_via(relay.addr());
                Kubeconfig::read_from(path.expect("a relayed kubeconfig"))
            }
        };
        client_from(kubeconfig.expect("kubeconfig"), true).await
    }

    /// A TCP relay in front of this server, for [`Server::client_through`].
    pub async fn relay(&self) -> TcpRelay {
        let addr = match self {
            Server::Test(server) => server.addr(),
            Server::Real(plane) => plane.addr(),
        };
        TcpRelay::start(addr).await.expect("a relay starts")
    }

    /// kubectl with full rights on this server.
    pub fn kubectl(&self) -> test_support::kubectl::Kubectl {
        match self {
            Server::Test(server) => test_support::kubectl::Kubectl::new(&server.url()),
            Server::Real(plane) => plane.kubectl(),
        }
        .expect("kubectl")
    }
}

/// An IPv4 slice of Service `service` with one endpoint per address.
pub fn slice(name: &str, service: &str, addresses: &[&str]) -> EndpointSlice {
    let endpoints: Vec<serde_json::Value> = addresses
        .iter()
        .map(|a| json!({ "addresses": [a], "conditions": { "ready": true } }))
        .collect();
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "kubernetes.io/service-name": service } },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{ "name": "http", "port": 80 }],
    }))
    .expect("endpoint slice")
}

pub fn api_status(err: kube::Error) -> (u16, String, String) {
    match err {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other}"),
    }
}
