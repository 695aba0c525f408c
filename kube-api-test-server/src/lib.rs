//! An in-memory Kubernetes API server for the tests, the local demo and the
//! benchmarks, with kube-apiserver's observable semantics (resourceVersions,
//! paging, selectors, watch, discovery and Tables for kubectl).
//! [`ApiServer::start`] runs it on a loopback port and returns an
//! [`ApiServerHandle`] with the fault switches; dropping it stops the server.
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use kube_api_test_server::{ApiServer, Config};
//! let server = ApiServer::start(Config::default()).await?;
//! let url = server.url(); // e.g. "http://127.0.0.1:41234"
//! server.drop_watches();
//! server.expire_history();
//! # Ok(()) }
//! ```

mod clock;
mod configmap;
mod discovery;
mod dualstack;
mod endpointslice;
mod event;
mod faults;
mod handlers;
mod history;
mod ipalloc;
mod list;
mod mirror;
mod mirrored;
mod names;
mod patch;
mod podips;
mod protobuf;
mod resource;
mod seed;
mod selector;
mod state;
mod status;
mod store;
mod table;
mod watch;
mod writes;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::response::IntoResponse;
use axum::routing::any;
use axum::Router;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use faults::PauseMode;
pub use history::Key;
pub use ipalloc::Ipv4Cidr;
pub use resource::ResourceKind;
pub use seed::{load_file, parse_documents, SeedError};
pub use status::{ApiError, StatusCause};
pub use store::{Preconditions, Store};

/// How to run the server.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to bind; port 0 picks a free one. Default `127.0.0.1:0`.
    pub listen: SocketAddr,
    /// Range Service cluster IPs come from. Default `10.0.0.0/24`.
    pub service_cidr: Ipv4Cidr,
    /// When set, every API request needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// A second address, served without the token check: kube-apiserver's
    /// "insecure port" (127.0.0.1:8080 in 1.2). kubectl sends no token over
    /// plain HTTP, so a token-protected server reachable from a container
    /// gives the host's kubectl this one, on loopback.
    pub insecure_listen: Option<SocketAddr>,
    /// How many events the watch history keeps. Default 1000.
    pub history: usize,
    /// How often watches with `allowWatchBookmarks` get a BOOKMARK. Default 5s.
    pub bookmark_interval: Duration,
    /// Objects to create before serving (see [`load_file`]).
    pub seed: Vec<Value>,
    /// Whether `discovery.k8s.io/v1` EndpointSlices are served. Off, the
    /// API is one from before them (Kubernetes 1.2's): `/apis` does not
    /// list the group and its URLs are 404, as for any unknown group; seed
    /// EndpointSlices are refused. The same goes for `events.k8s.io/v1`
    /// Events, which 1.2 did not have either (a kube-rs event `Recorder`
    /// gets 404s there, as on a 1.2 cluster). Default true.
    pub endpoint_slices: bool,
    /// Whether every v1 Endpoints is mirrored into EndpointSlices (named
    /// `<name>-mirror-ipv4-<n>` and `<name>-mirror-ipv6-<n>`) in the same
    /// write, as kube-controller-manager's EndpointSliceMirroring controller
    /// does; Endpoints labelled `endpointslice.kubernetes.io/skip-mirror:
    /// "true"` are not. Only with [`Config::endpoint_slices`]. Default true.
    pub mirror_endpoints: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            service_cidr: Ipv4Cidr::default_service_cidr(),
            token: None,
            insecure_listen: None,
            history: 1000,
            bookmark_interval: Duration::from_secs(5),
            seed: Vec::new(),
            endpoint_slices: true,
            mirror_endpoints: true,
        }
    }
}

impl Config {
    /// Adds the objects of a YAML/JSON seed file.
    pub fn with_seed_file(mut self, path: impl AsRef<Path>) -> Result<Self, SeedError> {
        self.seed.extend(load_file(path.as_ref())?);
        Ok(self)
    }

    /// Adds seed objects from YAML/JSON text.
    pub fn with_seed_text(mut self, text: &str) -> Result<Self, SeedError> {
        self.seed.extend(parse_documents(text)?);
        Ok(self)
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Binding the listen address failed.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The seed objects were rejected.
    #[error(transparent)]
    Seed(#[from] SeedError),
}

/// State shared by every request handler.
pub(crate) struct AppState {
    pub(crate) store: Store,
    pub(crate) faults: Arc<faults::Faults>,
    pub(crate) token: Option<String>,
    pub(crate) shutdown: CancellationToken,
    pub(crate) bookmark_interval: Duration,
    pub(crate) addr: SocketAddr,
    pub(crate) insecure_addr: Option<SocketAddr>,
    pub(crate) served: resource::Served,
}

/// Marks a request that came in on [`Config::insecure_listen`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct InsecurePort;

/// Entry point: see [`ApiServer::start`].
#[derive(Debug)]
pub struct ApiServer;

impl ApiServer {
    /// Seeds a store, binds `config.listen` and serves until the returned
    /// handle is dropped or [`ApiServerHandle::shutdown`] is called.
    pub async fn start(config: Config) -> Result<ApiServerHandle, StartError> {
        let mut store = Store::new(config.service_cidr, config.history);
        store.set_endpoints_mirroring(config.endpoint_slices && config.mirror_endpoints);
        let served = resource::Served {
            endpoint_slices: config.endpoint_slices,
        };
        seed::apply(&store, &config.seed, served)?;
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| StartError::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: config.listen,
            source,
        })?;
        let insecure = match config.insecure_listen {
            Some(at) => {
                let bind = |source| StartError::Bind { addr: at, source };
                let listener = tokio::net::TcpListener::bind(at).await.map_err(bind)?;
                let addr = listener.local_addr().map_err(bind)?;
                Some((listener, addr))
            }
            None => None,
        };
        let state = Arc::new(AppState {
            store,
            faults: Arc::new(faults::Faults::default()),
            token: config.token,
            shutdown: CancellationToken::new(),
            bookmark_interval: config.bookmark_interval.max(Duration::from_millis(10)),
            addr,
            insecure_addr: insecure.as_ref().map(|(_, a)| *a),
            served,
        });
        let secure = serve(listener, router(state.clone()), state.shutdown.clone());
        let insecure = insecure.map(|(listener, addr)| {
            tracing::info!(%addr, "kube-api-test-server insecure port (no token)");
            let app = router(state.clone()).layer(axum::Extension(InsecurePort));
            serve(listener, app, state.shutdown.clone())
        });
        let task = tokio::spawn(async move {
            match insecure {
                Some(insecure) => drop(tokio::join!(secure, insecure)),
                None => secure.await,
            }
        });
        tracing::info!(%addr, "kube-api-test-server listening");
        Ok(ApiServerHandle {
            state,
            task: Some(task),
        })
    }
}

/// Serves `app` on `listener` until `shutdown`. Sockets get TCP_NODELAY, as
/// Go's net package (so kube-apiserver) sets by default: with Nagle on, a
/// watch event written while the previous one is unacknowledged waits for
/// the client's delayed ACK, up to 40 ms.
async fn serve(listener: tokio::net::TcpListener, app: Router, shutdown: CancellationToken) {
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!("cannot set TCP_NODELAY: {e}");
        }
    });
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await;
    if let Err(e) = served {
        tracing::error!("kube-api-test-server stopped: {e}");
    }
}

fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .merge(discovery::routes())
        .merge(faults::admin_routes())
        .route("/api/v1/{*rest}", any(handlers::api_v1))
        .route("/apis/{group}/{version}/{*rest}", any(handlers::apis))
        .fallback(|| async { ApiError::no_such_resource().into_response() })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            faults::gate,
        ))
        .with_state(state)
}

/// A running server. Dropping it stops the server.
pub struct ApiServerHandle {
    state: Arc<AppState>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ApiServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServerHandle")
            .field("addr", &self.state.addr)
            .finish()
    }
}

impl ApiServerHandle {
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://{}", self.state.addr)
    }

    /// The bound socket address.
    pub fn addr(&self) -> SocketAddr {
        self.state.addr
    }

    /// Base URL of [`Config::insecure_listen`], when set.
    pub fn insecure_url(&self) -> Option<String> {
        self.state.insecure_addr.map(|a| format!("http://{a}"))
    }

    /// Direct access to the store (create/update/delete without HTTP; it
    /// takes every kind, served over HTTP or not).
    pub fn store(&self) -> &Store {
        &self.state.store
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.state.store.current_rv()
    }

    /// Ends every open watch stream; clients must re-watch.
    pub fn drop_watches(&self) {
        self.state.faults.drop_watches();
    }

    /// Forgets all history: watches from any older version get 410.
    pub fn expire_history(&self) {
        self.state.store.expire_history();
    }

    /// Forgets all history and moves the version on by one: every watch
    /// request from then on, from any version, gets 410 and its client
    /// lists again. Open watches go on: [`Self::drop_watches`] ends them.
    pub fn expire_all_history(&self) {
        self.state.store.expire_all_history();
    }

    /// Number of watch streams currently open.
    pub fn open_watches(&self) -> usize {
        self.state.faults.open_watches()
    }

    /// Waits until exactly `n` watch streams are open (wrap in a timeout).
    pub async fn wait_for_open_watches(&self, n: usize) {
        self.state.faults.wait_open_watches(n).await;
    }

    /// Makes requests (and watch event delivery) hang until [`Self::resume`].
    pub fn pause(&self) {
        self.state.faults.set_pause(PauseMode::Hang);
    }

    /// Makes requests fail with 503 until [`Self::resume`].
    pub fn pause_unavailable(&self) {
        self.state.faults.set_pause(PauseMode::Unavailable);
    }

    /// Makes lists of `plural` (`services`, `endpoints`, `pods`) wait until
    /// [`Self::release_lists`]; watches and other requests go on.
    pub fn hold_lists(&self, plural: &str) {
        self.state.faults.hold_lists(plural);
    }

    /// Lets held lists of `plural` go on; the others stay held.
    pub fn release_list(&self, plural: &str) {
        self.state.faults.release_list(plural);
    }

    /// Lets held lists go on.
    pub fn release_lists(&self) {
        self.state.faults.release_lists();
    }

    /// Serves normally again.
    pub fn resume(&self) {
        self.state.faults.set_pause(PauseMode::Running);
    }

    /// Stops serving and waits until the server task has finished.
    pub async fn shutdown(mut self) {
        self.state.shutdown.cancel();
        if let Some(task) = self.task.take() {
            // A panicked or cancelled server task has stopped all the same.
            let _ = task.await;
        }
    }

    /// Waits until the server stops (for the binary: after `shutdown`).
    pub async fn stopped(&self) {
        self.state.shutdown.cancelled().await;
    }

    /// Asks the server to stop without waiting.
    pub fn stop(&self) {
        self.state.shutdown.cancel();
    }
}

impl Drop for ApiServerHandle {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
