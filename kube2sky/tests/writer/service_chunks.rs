//! The full sync of services in chunks on etcd v3 (`full_sync_chunks` in
//! `kube2sky/src/etcd/chunks.rs`: services by namespace, then the PTRs), as
//! the pods' are: a change made during the pass, outside the chunk in
//! flight, is written beside that chunk instead of after the whole pass;
//! and readiness needs one pass of the services done, not every pass.

use crate::kube2sky_support::sync::*;
use crate::kube2sky_support::*;
use anyhow::{ensure, Context, Result};
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

/// Readiness needs one services pass done, not the one running
/// (`FullSyncs::services_written`). The services' first pass is written
/// while kube-dns's ConfigMap is still listing (held), so kube2sky is not
/// ready yet. The keys of `ns000` and `ns001` (1,500 services each) are
/// then deleted by hand and every watch sent back to list: a second pass
/// writes them again, a chunk per namespace, and etcd is frozen at its
/// first key. The ConfigMap's list comes (the last of the first lists),
/// its configuration reaches the writer, and etcd thaws: kube2sky is ready
/// at that round, beside the first chunk or after it (rounds and chunks
/// take turns), so before the second chunk and the pass are done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_once_the_first_lists_are_done_during_a_second_services_pass() -> Result<()> {
    let etcd = Etcd::start_with(Api::V3)?;
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    let api = apiserver(&[KUBERNETES]).await?;
    for ns in ["ns000", "ns001"] {
        namespace(&api, ns)?;
        for i in 0..1_500 {
            external_service(&api, ns, &format!("e{i}"))?;
        }
    }
    api.hold_lists("configmaps");
    let flags = [
        "--pods=false",
        "--config-map=kube-dns",
        "--full-sync-chunk=300",
        "--etcd-max-txn-ops=2",
        "--etcd-mutation-timeout=60s",
        "--etcd-loss-check-interval=0",
    ];
    let k2s = Kube2sky::start(&etcd, &api, &flags)?;
    let (done, ready) = (
        "full sync of services done",
        "ready: the first lists of services and endpoints are written",
    );
    k2s.wait_for_log_within(done, LONG).await?;
    ensure!(
        !k2s.log().contains(ready),
        "ready with the ConfigMap still listing"
    );
    let both = format!("{SVC}ns00");
    let options = etcd_client::DeleteOptions::new().with_prefix();
    client.delete(both.as_str(), Some(options)).await?;
    let mut written = watch_keys(&mut client, &both).await?;
    api.expire_all_history();
    api.drop_watches();
    freeze_at_first_put(&mut written, &etcd).await?;
    api.release_list("configmaps");
    // Logged as the ConfigMap's configuration is sent to the writer (the
    // count of open watches is no sign of it: a relisted watch may be
    // counted before it closes).
    k2s.wait_for_log("applying ConfigMap kube-system/kube-dns")
        .await?;
    etcd.thaw()?;
    eventually("the second services pass done", LONG, async || {
        let passes = k2s.log().matches(done).count();
        ensure!(passes >= 2, "{passes} services passes done");
        Ok(())
    })
    .await?;
    let log = k2s.log();
    let second_done = log.match_indices(done).nth(1).map(|(at, _)| at);
    let ready_at = log.find(ready);
    ensure!(
        matches!((ready_at, second_done), (Some(r), Some(d)) if r < d),
        "ready at byte {ready_at:?} of the log, the second pass done at {second_done:?}:\n{log}"
    );
    Ok(())
}
