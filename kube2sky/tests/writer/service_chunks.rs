//! The full sync of services in chunks on etcd v3 (`full_sync_chunks` in
//! `kube2sky/src/etcd/chunks.rs`: services by namespace, then the PTRs), as
//! the pods' are: a change made during the pass, outside the chunk in
//! flight, is written beside that chunk instead of after the whole pass.

use crate::kube2sky_support::sync::*;
use crate::kube2sky_support::*;
use anyhow::{Context, Result};
use kube_api_test_server::{ApiServerHandle, ResourceKind};

const SVC: &str = "/skydns/local/cluster/svc/";

/// An ExternalName service `ns/name`: one key, no cluster IP (the test
/// server's service range holds 254 addresses).
fn external_service(api: &ApiServerHandle, ns: &str, name: &str) -> Result<()> {
    let body = serde_json::json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"type": "ExternalName", "externalName": format!("{name}.example.com")}});
    api.store()
        .create(ResourceKind::Service, Some(ns), body, true)?;
    Ok(())
}

/// etcd is frozen at the first key of `ns000`'s chunk (3,000 services in
/// transactions of two), until kube2sky has seen a service made in a
/// namespace after it; that service's key is then put before the chunk's
/// last key. The list of services is held until the endpoints' watch is
/// open, so the services' first list is a pass of its own (listed before
/// the endpoints, services are written one by one, not in a pass).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_change_outside_the_chunk_in_flight_is_written_beside_it() -> Result<()> {
    let etcd = Etcd::start_with(Api::V3)?;
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    let api = apiserver(&[KUBERNETES]).await?;
    for (ns, n) in [("ns000", 3_000), ("ns001", 10)] {
        namespace(&api, ns)?;
        for i in 0..n {
            external_service(&api, ns, &format!("e{i}"))?;
        }
    }
    api.hold_lists("services");
    let mut written = watch_keys(&mut client, &format!("{SVC}ns000/")).await?;
    // No data-loss check: one due waits for the chunk in flight first.
    let flags = [
        "--pods=false",
        "--full-sync-chunk=300",
        "--etcd-max-txn-ops=2",
        "--etcd-mutation-timeout=60s",
        "--etcd-loss-check-interval=0",
    ];
    let k2s = Kube2sky::start(&etcd, &api, &flags)?;
    tokio::time::timeout(DEADLINE, api.wait_for_open_watches(1))
        .await
        .context("the endpoint slices' watch")?;
    api.release_list("services");
    freeze_at_first_put(&mut written, &etcd).await?;
    namespace(&api, "zz-new")?;
    external_service(&api, "zz-new", "late")?;
    // Its watch event (kube2sky::timing, at debug).
    k2s.wait_for_log("namespace=zz-new name=late").await?;
    etcd.thaw()?;
    k2s.wait_for_log_within("full sync of services done", LONG)
        .await?;
    put_before_the_chunk_ends(
        &mut client,
        &format!("{SVC}zz-new/late/"),
        (&format!("{SVC}ns000/"), 3_000),
        &k2s,
    )
    .await
}
