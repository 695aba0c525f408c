//! Builds the Kubernetes client in the order of 1.2's `newKubeClient`
//! (`kube2sky.go`): an
//! explicit `--kube-master-url` alone gives a plain unauthenticated client;
//! a kubeconfig file (server optionally overridden by the URL) comes next;
//! with neither, the in-cluster service account.

use crate::config::KubeSource;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A client that cannot be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the Kubernetes client: {0}")]
pub struct ClientError(String);

/// Creates the client for `source`.
pub(crate) async fn build(source: &KubeSource) -> Result<kube::Client, ClientError> {
    let err = |e: &dyn std::fmt::Display| ClientError(e.to_string());
    let config = match source {
        KubeSource::Url(url) => kube::Config::new(parse(url)?),
        KubeSource::Kubeconfig { path, url } => {
            let file = Kubeconfig::read_from(path)
                .map_err(|e| ClientError(format!("--kubecfg-file {}: {e}", path.display())))?;
            let mut config =
                kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                    .await
                    .map_err(|e| err(&e))?;
            if let Some(url) = url {
                config.cluster_url = parse(url)?;
            }
            config
        }
        KubeSource::InCluster => kube::Config::incluster().map_err(|e| err(&e))?,
    };
    tracing::info!("Using {} for kubernetes master", config.cluster_url);
    tracing::info!("Using kubernetes API v1");
    kube::Client::try_from(config).map_err(|e| err(&e))
}

fn parse(url: &str) -> Result<axum::http::Uri, ClientError> {
    url.parse()
        .map_err(|e| ClientError(format!("invalid --kube-master-url {url:?}: {e}")))
}
