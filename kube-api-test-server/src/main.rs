//! `kube-api-test-server`: runs the in-memory Kubernetes API test server. It
//! prints `listening on http://ADDR` as its first stdout line (so scripts and
//! tests can read the port), then serves until interrupted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use kube_api_test_server::{ApiServer, Config, Ipv4Cidr};

/// An in-memory Kubernetes API server (core/v1, leases, endpoint slices,
/// events.k8s.io events) for tests and demos.
#[derive(Debug, Parser)]
#[command(name = "kube-api-test-server", version)]
struct Args {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Multi-document YAML/JSON file of objects to start with.
    #[arg(long)]
    seed: Option<PathBuf>,
    /// Service cluster IP range.
    #[arg(long, default_value = "10.0.0.0/24")]
    service_cidr: Ipv4Cidr,
    /// Require `Authorization: Bearer TOKEN` on every request.
    #[arg(long, env = "KUBE_API_TEST_SERVER_TOKEN")]
    token: Option<String>,
    /// Also serve on this address without the token check, as
    /// kube-apiserver's insecure port (kubectl sends no token over plain
    /// HTTP); keep it on loopback. Printed as the second stdout line,
    /// `insecure port on http://ADDR`.
    #[arg(long)]
    insecure_listen: Option<SocketAddr>,
    /// Number of watch events kept for replay.
    #[arg(long, default_value_t = 1000)]
    history: usize,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 5)]
    bookmark_interval: u64,
    /// Serve an API without discovery.k8s.io/v1 EndpointSlices (and
    /// without events.k8s.io/v1 Events), as Kubernetes 1.2's: the groups are
    /// not listed and their URLs are 404.
    #[arg(long)]
    no_endpointslices: bool,
    /// Do not mirror v1 Endpoints into EndpointSlices (by default every
    /// Endpoints not labelled `endpointslice.kubernetes.io/skip-mirror=true`
    /// is, as kube-controller-manager's EndpointSliceMirroring controller
    /// does, into slices named `<name>-mirror-ipv4-<n>`/`-ipv6-<n>`).
    #[arg(long)]
    no_endpoints_mirroring: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let mut config = Config {
        listen: args.listen,
        service_cidr: args.service_cidr,
        token: args.token,
        insecure_listen: args.insecure_listen,
        history: args.history,
        bookmark_interval: Duration::from_secs(args.bookmark_interval),
        endpoint_slices: !args.no_endpointslices,
        mirror_endpoints: !args.no_endpoints_mirroring,
        ..Config::default()
    };
    if let Some(seed) = &args.seed {
        config = config
            .with_seed_file(seed)
            .with_context(|| format!("loading seed {}", seed.display()))?;
    }
    let server = ApiServer::start(config).await?;
    println!("listening on {}", server.url());
    if let Some(url) = server.insecure_url() {
        println!("insecure port on {url}");
    }
    tokio::select! {
        res = tokio::signal::ctrl_c() => res.context("waiting for ctrl-c")?,
        () = terminate() => {}
    }
    server.shutdown().await;
    Ok(())
}

/// Resolves on SIGTERM (so `kill PID` stops the server cleanly).
async fn terminate() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut sig) => {
            sig.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}
