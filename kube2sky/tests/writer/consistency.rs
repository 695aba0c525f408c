//! etcd kept consistent with the API end to end, where kube2sky 1.2 let it
//! drift: stale-key removal after downtime and after a 410 re-list,
//! replayed deletes after a dropped watch, rewrite after etcd data loss,
//! single-transaction updates, a hostname turning from a v2 leaf into a
//! directory. Each fix beyond 1.2 has a `control_*` test
//! run with the fix's flag off, showing the failure the fix prevents.

use crate::kube2sky_support::*;
use anyhow::{ensure, Result};
use kube_api_test_server::{ApiServerHandle, ResourceKind};
use test_support::wait::within;

/// Hand-written keys kube2sky must never touch.
fn foreign_keys() -> Vec<(String, String)> {
    pairs(&[
        (
            "/skydns/config",
            r#"{"domain":"cluster.local."}"#.to_string(),
        ),
        ("/skydns/local/cluster/dns/ns/ns1", a("10.0.0.10")),
        ("/skydns/local/cluster/custom/x", a("192.168.0.9")),
        ("/skydns/arpa/in-addr/192/168/0/1", a("router.example.org.")),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_deleted_while_kube2sky_was_down_is_removed_at_start() -> Result<()> {
    let (etcd, api, kubectl, mut k2s) = cluster(&[]).await?;
    for (k, v) in foreign_keys() {
        etcd.put(&k, &v)?;
    }
    kubectl.with_manifest(
        "create",
        &svc_manifest("gone", "10.0.0.60", &[("http", "TCP", 80)]),
    )?;
    let dir = "/skydns/local/cluster/svc/default/gone/";
    wait_for_keys(&etcd, dir, 2).await?;
    k2s.kill();
    kubectl.run(&["delete", "service", "gone"])?;

    // Control: 1.2 behaviour (no stale removal) leaves the records behind.
    let mut old = Kube2sky::start(&etcd, &api, &["--remove-stale=false"])?;
    old.wait_ready().await?;
    probe_handled(&etcd, &kubectl, "10.0.0.61").await?;
    ensure!(
        keys_under(&etcd, dir)?.len() == 2,
        "control: without stale removal the records stay"
    );
    old.kill();

    let mut new = Kube2sky::start(&etcd, &api, &[])?;
    new.wait_ready().await?;
    wait_exact(&etcd, dir, &[]).await?;
    wait_exact(&etcd, "/skydns/arpa/in-addr/10/0/0/60", &[]).await?;
    for (k, v) in foreign_keys() {
        ensure!(
            under(&etcd, &k)? == vec![(k.clone(), v.clone())],
            "foreign key {k} was touched"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_removed_while_kube2sky_was_down_loses_its_srv_key() -> Result<()> {
    // On etcd v2 the SRV keys are hidden nodes no listing shows: the new
    // kube2sky finds the old one only through the index the first one kept.
    let (etcd, api, kubectl, mut k2s) = cluster(&[]).await?;
    kubectl.with_manifest(
        "create",
        &svc_manifest("pr", "10.0.0.65", &[("http", "TCP", 80)]),
    )?;
    let dir = "/skydns/local/cluster/svc/default/pr/";
    let http = format!("{dir}_tcp/_http/");
    wait_for_keys(&etcd, &http, 1).await?;
    k2s.kill();
    kubectl.with_manifest(
        "replace",
        &svc_manifest("pr", "10.0.0.65", &[("dns", "UDP", 53)]),
    )?;
    let mut new = Kube2sky::start(&etcd, &api, &[])?;
    new.wait_ready().await?;
    let label = label("10.0.0.65");
    let expected = pairs(&[
        (&format!("{dir}{label}"), a("10.0.0.65")),
        (
            &format!("{dir}_udp/_dns/{label}"),
            format!(r#"{{"host":"pr.default.svc.cluster.local.","port":53,{REST}"#),
        ),
    ]);
    wait_exact(&etcd, dir, &expected).await?;
    ensure!(under(&etcd, &http)?.is_empty(), "the http SRV key stayed");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_removed_while_down_is_seen_when_another_service_shares_its_index_bucket(
) -> Result<()> {
    // On etcd v2, `s15` and `s60` share one index entry (FNV-1a 32 of their
    // directories: 0xc8af7830, 0xc39e2730): writing it for `s60` must keep
    // `s15`'s hidden directory in it.
    let (etcd, api, kubectl, mut k2s) = cluster(&[]).await?;
    let dir = "/skydns/local/cluster/svc/default/s15/";
    let http = format!("{dir}_tcp/_http/");
    kubectl.with_manifest(
        "create",
        &svc_manifest("s15", "10.0.0.66", &[("http", "TCP", 80)]),
    )?;
    wait_for_keys(&etcd, &http, 1).await?;
    kubectl.with_manifest(
        "create",
        &svc_manifest("s60", "10.0.0.67", &[("http", "TCP", 80)]),
    )?;
    wait_for_keys(
        &etcd,
        "/skydns/local/cluster/svc/default/s60/_tcp/_http/",
        1,
    )
    .await?;
    k2s.kill();
    kubectl.with_manifest(
        "replace",
        &svc_manifest("s15", "10.0.0.66", &[("dns", "UDP", 53)]),
    )?;
    let mut new = Kube2sky::start(&etcd, &api, &[])?;
    new.wait_ready().await?;
    wait_for_keys(&etcd, &format!("{dir}_udp/_dns/"), 1).await?;
    wait_exact(&etcd, &http, &[]).await
}

/// Deletes service `w` while kube2sky's watches cannot see it, then lets them
/// recover until a later service (`probe`) has been written and deleted.
/// Returns the cluster pieces (kept alive by the caller) and `w`'s record
/// directory.
async fn delete_w_during_watch_gap(
    flags: &[&str],
    expire_history: bool,
) -> Result<(Etcd, ApiServerHandle, Kube2sky, &'static str)> {
    let (etcd, api, kubectl, k2s) = cluster(flags).await?;
    kubectl.with_manifest(
        "create",
        &svc_manifest("w", "10.0.0.70", &[("http", "TCP", 80)]),
    )?;
    let dir = "/skydns/local/cluster/svc/default/w/";
    wait_for_keys(&etcd, dir, 2).await?;
    within("3 watches", DEADLINE, api.wait_for_open_watches(3)).await?;
    // Watches end first (the re-watch hangs at the paused gate), so the delete
    // can only be learned from a replay or, after a 410, from a relist.
    api.pause();
    api.drop_watches();
    within(
        "the watches to close",
        DEADLINE,
        api.wait_for_open_watches(0),
    )
    .await?;
    store_delete(&api, ResourceKind::Service, "default", "w")?;
    if expire_history {
        api.expire_history();
    }
    api.resume();
    probe_handled(&etcd, &kubectl, "10.0.0.71").await?;
    Ok((etcd, api, k2s, dir))
}

/// Whether `w`'s records are eventually gone after the gap.
async fn delete_during_watch_gap(flags: &[&str], expire_history: bool) -> Result<bool> {
    let (etcd, _api, _k2s, dir) = delete_w_during_watch_gap(flags, expire_history).await?;
    let gone = wait_for_keys(&etcd, dir, 0).await;
    Ok(gone.is_ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_missed_behind_a_410_is_removed_after_the_relist() -> Result<()> {
    ensure!(
        delete_during_watch_gap(&[], true).await?,
        "records of a service deleted behind a 410 must go"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_delete_missed_behind_a_410_stays_without_stale_removal() -> Result<()> {
    // The watch relists, but 1.2 ignored the deletion tombstone.
    let (etcd, _api, k2s, dir) = delete_w_during_watch_gap(&["--remove-stale=false"], true).await?;
    ensure!(
        keys_under(&etcd, dir)?.len() == 2,
        "control: the stale records must remain without stale removal; log:\n{}",
        k2s.log()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_during_a_dropped_watch_is_replayed() -> Result<()> {
    ensure!(
        delete_during_watch_gap(&["--remove-stale=false"], false).await?,
        "the re-watch must replay the delete"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_come_back_after_etcd_is_wiped() -> Result<()> {
    let (mut etcd, api, kubectl, _k2s) = cluster(&[
        "--reverse=false",
        "--spec-records=false",
        "--spec-records=false",
    ])
    .await?;
    kubectl.with_manifest("create", KUBE_DNS)?;
    create_pod(&api, "default", "p", "1.2.3.4")?;
    wait_exact(&etcd, "/skydns", &demo_records()).await?;
    etcd.restart_empty()?;
    wait_exact(&etcd, "/skydns", &demo_records()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_records_stay_lost_without_the_data_loss_check() -> Result<()> {
    let (mut etcd, _api, kubectl, k2s) = cluster(&[
        "--reverse=false",
        "--spec-records=false",
        "--etcd-loss-check-interval=0s",
    ])
    .await?;
    wait_for_keys(&etcd, "/skydns", 2).await?;
    etcd.restart_empty()?;
    // A negative control, waited on a signal rather than a time: kube2sky
    // writes a Service created after the wipe into the new etcd, so it is
    // connected and working, and still the records it wrote before stay
    // lost (with the check on, they come back: the test above).
    kubectl.with_manifest(
        "create",
        &svc_manifest("after", "10.0.0.77", &[("http", "TCP", 80)]),
    )?;
    let after = "/skydns/local/cluster/svc/default/after/";
    wait_for_keys(&etcd, after, 2).await?;
    let lost: Vec<String> = keys_under(&etcd, "/skydns")?
        .into_iter()
        .filter(|k| !k.starts_with(after))
        .collect();
    ensure!(
        lost.is_empty(),
        "control: without the check nothing rewrites the records, yet: {lost:?}\n{}",
        k2s.log()
    );
    Ok(())
}

/// Where service `u`'s records live.
const U: &str = "/skydns/local/cluster/svc/default/u/";

/// Creates service `u` (10.0.0.80, port http 80) and waits for its records.
async fn create_u(etcd: &Etcd, kubectl: &Kubectl) -> Result<()> {
    kubectl.with_manifest(
        "create",
        &svc_manifest("u", "10.0.0.80", &[("http", "TCP", 80)]),
    )?;
    wait_for_keys(etcd, U, 2).await
}

/// `kubectl replace` of service `u` with `ports`.
fn replace_u(kubectl: &Kubectl, ports: &[(&str, &str, u16)]) -> Result<String> {
    kubectl.with_manifest("replace", &svc_manifest("u", "10.0.0.80", ports))
}

/// Adds port dns to service `u` and returns the etcd writes on its
/// directory through the API under test, every one of them (both APIs
/// read up to a probe service's deletion).
async fn events_during_update(flags: &[&str]) -> Result<Vec<Write>> {
    let (etcd, _api, kubectl, _k2s) = cluster(flags).await?;
    create_u(&etcd, &kubectl).await?;
    let replace = || replace_u(&kubectl, &[("http", "TCP", 80), ("dns", "UDP", 53)]);
    match etcd.api() {
        test_support::etcd::Api::V3 => {
            let writes = v3_default_writes(&etcd, &kubectl, replace).await?;
            Ok(writes.into_iter().map(|(write, _)| write).collect())
        }
        test_support::etcd::Api::V2 => {
            let before = etcd.v2_index()?;
            replace()?;
            // Every write of the replace is in once a probe service created
            // after it is gone again (see probe_handled); the events are
            // read from etcd's history up to the probe's deletion.
            probe_handled(&etcd, &kubectl, "10.0.0.62").await?;
            let root = "/skydns/local/cluster/svc/default";
            let probe_gone =
                |action: &str, key: &str| action == "delete" && key.starts_with(PROBE_DIR);
            let events = etcd.v2_events_until(root, before + 1, DEADLINE, probe_gone)?;
            let writes = events
                .into_iter()
                .filter(|(_, key)| key.starts_with(U))
                .map(|(action, key)| match action.as_str() {
                    "delete" | "expire" | "compareAndDelete" => Write::Delete(key),
                    _ => Write::Put(key),
                })
                .collect();
            Ok(writes)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_update_never_removes_unchanged_records() -> Result<()> {
    let events = events_during_update(&[]).await?;
    ensure!(
        events.iter().all(|w| matches!(w, Write::Put(_))),
        "no delete expected: {events:?}"
    );
    ensure!(
        events.len() == 1,
        "only the new SRV key is written: {events:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_remove_then_add_deletes_the_a_record_during_updates() -> Result<()> {
    let events = events_during_update(&["--atomic-updates=false"]).await?;
    let a_key = format!("{U}{}", label("10.0.0.80"));
    ensure!(
        events.contains(&Write::Delete(a_key)),
        "1.2 mode removes the A record first: {events:?}"
    );
    Ok(())
}

/// The etcd v3 writes on the services of `default` while `change` runs,
/// up to a probe service's deletion (so every write of the change is in).
async fn v3_default_writes(
    etcd: &Etcd,
    kubectl: &Kubectl,
    change: impl FnOnce() -> Result<String>,
) -> Result<Vec<(Write, i64)>> {
    let root = "/skydns/local/cluster/svc/default/";
    v3_writes_until_probed(etcd, kubectl, root, "10.0.0.62", change).await
}

/// Service `u` with one port, then its ports changed (http moved to 8080,
/// dns added): the writes on etcd v3 and their revisions.
async fn port_change_writes(flags: &[&str]) -> Result<Vec<(Write, i64)>> {
    // Transactions are a v3 notion: this runs on v3 whatever E2E_ETCD_API says.
    let etcd = Etcd::start_with(test_support::etcd::Api::V3)?;
    let api = apiserver(&[KUBERNETES]).await?;
    let kubectl = Kubectl::new(&api.url())?;
    let mut k2s = Kube2sky::start(&etcd, &api, flags)?;
    k2s.wait_ready().await?;
    create_u(&etcd, &kubectl).await?;
    v3_default_writes(&etcd, &kubectl, || {
        replace_u(&kubectl, &[("http", "TCP", 8080), ("dns", "UDP", 53)])
    })
    .await
}

/// The distinct revisions of `writes`.
fn revisions(writes: &[(Write, i64)]) -> std::collections::BTreeSet<i64> {
    writes.iter().map(|(_, revision)| *revision).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_update_is_written_at_one_revision() -> Result<()> {
    let writes = port_change_writes(&[]).await?;
    let h = label("10.0.0.80");
    let mut keys: Vec<&Write> = writes.iter().map(|(w, _)| w).collect();
    keys.sort_by_key(|w| format!("{w:?}"));
    ensure!(
        keys == [
            &Write::Put(format!("{U}_tcp/_http/{h}")),
            &Write::Put(format!("{U}_udp/_dns/{h}")),
        ],
        "only the two SRV records change: {writes:?}"
    );
    ensure!(
        revisions(&writes).len() == 1,
        "one transaction, one revision: {writes:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_without_atomic_updates_an_update_spans_revisions() -> Result<()> {
    let writes = port_change_writes(&["--atomic-updates=false"]).await?;
    ensure!(
        revisions(&writes).len() > 1,
        "1.2 mode removes, then adds, in separate writes: {writes:?}"
    );
    Ok(())
}

/// Headless endpoints of hostname `pet-0` with these addresses.
fn pet_endpoints(addresses: &[&str]) -> String {
    let addresses: Vec<String> = addresses
        .iter()
        .map(|ip| format!(r#"{{"ip":"{ip}","hostname":"pet-0"}}"#))
        .collect();
    format!(
        r#"{{"apiVersion":"v1","kind":"Endpoints","metadata":{{"name":"pets","namespace":"default"}},
 "subsets":[{{"addresses":[{}],"ports":[{{"name":"http","port":80,"protocol":"TCP"}}]}}]}}"#,
        addresses.join(",")
    )
}

/// A hostname that gets a second address: on v2 its key turns from a leaf
/// into a directory, which etcd refuses to do in place, so the leaf is
/// deleted first. Both records must then be there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostname_that_gets_a_second_address_has_both_records() -> Result<()> {
    let (etcd, _api, kubectl, _k2s) = cluster(&["--endpoints-source=endpoints"]).await?;
    kubectl.with_manifest(
        "create",
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"pets","namespace":"default"},
 "spec":{"clusterIP":"None","ports":[{"name":"http","port":80,"protocol":"TCP"}]}}"#,
    )?;
    kubectl.with_manifest("create", &pet_endpoints(&["10.1.0.1"]))?;
    let pet = "/skydns/local/cluster/svc/default/pets/pet-0";
    wait_exact(&etcd, pet, &[(pet.to_string(), a("10.1.0.1"))]).await?;
    kubectl.with_manifest("replace", &pet_endpoints(&["10.1.0.1", "10.1.0.2"]))?;
    wait_for_keys(&etcd, &format!("{pet}/"), 2).await
}
