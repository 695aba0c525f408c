//! kube2sky and its etcd: a store that requires TLS client certificates
//! (`--etcd-certfile`, `--etcd-keyfile`, `--etcd-cafile`), and data loss
//! told by the marker key alone (the revision only moves forward), and the
//! v2 index of hidden directories written again after a wipe.

mod kube2sky_support;

use anyhow::Result;
use kube2sky_support::*;
use test_support::tls::Certificates;

/// `default/kubernetes`'s A and SRV records among the demo records.
fn kubernetes_records() -> Vec<(String, String)> {
    demo_records()
        .into_iter()
        .filter(|(k, _)| k.contains("/default/kubernetes/"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube2sky_writes_to_an_etcd_that_requires_client_certificates() -> Result<()> {
    let certs = Certificates::make()?;
    let etcd = Etcd::start_tls(&certs)?;
    let api = apiserver(&[KUBERNETES]).await?;
    let flag = |name: &str, path: std::path::PathBuf| format!("--{name}={}", path.display());
    let tls = [
        flag("etcd-certfile", certs.cert("client")),
        flag("etcd-keyfile", certs.key("client")),
        flag("etcd-cafile", certs.ca()),
        "--reverse=false".to_string(),
        "--spec-records=false".to_string(),
    ];
    let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
    let mut k2s = Kube2sky::start(&etcd, &api, &tls)?;
    k2s.wait_ready().await?;
    wait_exact(&etcd, "/skydns", &kubernetes_records()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_come_back_when_only_the_marker_key_is_lost() -> Result<()> {
    let (etcd, _api, _kubectl, _k2s) = cluster(&[
        "--reverse=false",
        "--spec-records=false",
        "--spec-records=false",
    ])
    .await?;
    wait_exact(&etcd, "/skydns", &kubernetes_records()).await?;
    // The record first, then the marker: both deletes move the revision
    // forward, so only the missing marker can tell kube2sky.
    etcd.del("/skydns/local/cluster/svc/default/kubernetes/c88f1059")?;
    etcd.del("/kube2sky/cluster.local/marker")?;
    wait_exact(&etcd, "/skydns", &kubernetes_records()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v2_hidden_directory_index_is_rewritten_after_etcd_is_wiped() -> Result<()> {
    // The index of hidden (`_tcp`, `_udp`) directories exists on v2 only.
    let etcd = &mut Etcd::start_with(test_support::etcd::Api::V2)?;
    let api = apiserver(&[KUBERNETES]).await?;
    let mut k2s = Kube2sky::start(
        etcd,
        &api,
        &[
            "--reverse=false",
            "--spec-records=false",
            "--spec-records=false",
        ],
    )?;
    k2s.wait_ready().await?;
    let index = (
        "/kube2sky/cluster.local/hidden/skydns/local/cluster/svc/default/kubernetes".to_string(),
        r#"["/skydns/local/cluster/svc/default/kubernetes/_tcp/_https"]"#.to_string(),
    );
    wait_exact(
        etcd,
        "/kube2sky/cluster.local/hidden/",
        std::slice::from_ref(&index),
    )
    .await?;
    etcd.restart_empty()?;
    wait_exact(etcd, "/skydns", &kubernetes_records()).await?;
    wait_exact(etcd, "/kube2sky/cluster.local/hidden/", &[index]).await
}
