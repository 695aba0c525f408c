//! kube2sky under faults and hostile input, end to end (the real binary,
//! a real etcd, the API test server): readiness only once the first lists
//! are written, a killed sync leaves every service complete or absent, an
//! API server restored to an older resourceVersion is listed again, an etcd
//! with a smaller `--max-txn-ops` is written in smaller transactions (and
//! in larger ones again once it allows them) and read in smaller requests,
//! one with a larger one (the manifests' 1024) is written in larger ones,
//! and fields that cannot become records are skipped with a warning.

use crate::kube2sky_support::*;
use anyhow::{ensure, Context, Result};
use kube_api_test_server::{ApiServer, ApiServerHandle, Config};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use test_support::etcd::Api;
use test_support::http::metric;

/// `n` services `s0000`… in `default`, cluster IPs from 10.0.16.0 on,
/// each with the named TCP `ports`, as one seed document list.
fn services(n: usize, ports: &[(&str, u16)]) -> Vec<String> {
    (0..n)
        .map(|i| {
            let ports: Vec<String> = ports
                .iter()
                .map(|(name, port)| format!(r#"{{"name":"{name}","protocol":"TCP","port":{port}}}"#))
                .collect();
            let ip = format!("10.0.{}.{}", 16 + i / 250, 1 + i % 250);
            format!(
                r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"s{i:04}","namespace":"default"}},
                   "spec":{{"clusterIP":"{ip}","ports":[{}]}}}}"#,
                ports.join(",")
            )
        })
        .collect()
}

/// The API test server on `listen` (port 0: any), with service CIDR
/// 10.0.0.0/16 and the seed documents.
async fn apiserver_at(listen: std::net::SocketAddr, seed: &[String]) -> Result<ApiServerHandle> {
    let mut config = Config {
        listen,
        service_cidr: "10.0.0.0/16".parse().map_err(anyhow::Error::msg)?,
        bookmark_interval: std::time::Duration::from_millis(500),
        ..Config::default()
    };
    for doc in std::iter::once(KUBERNETES).chain(seed.iter().map(String::as_str)) {
        config = config.with_seed_text(doc)?;
    }
    Ok(ApiServer::start(config).await?)
}

/// The API test server with `n` services of two ports (and
/// `default/kubernetes`), and a ready kube2sky (`--pods=false` and `flags`)
/// that wrote every one of them to `etcd`.
async fn synced_services(
    etcd: &Etcd,
    n: usize,
    flags: &[&str],
) -> Result<(ApiServerHandle, Kube2sky)> {
    let api = apiserver_at(
        "127.0.0.1:0".parse()?,
        &services(n, &[("http", 80), ("dns", 53)]),
    )
    .await?;
    let flags: Vec<&str> = ["--pods=false"].iter().chain(flags).copied().collect();
    let mut k2s = Kube2sky::start(etcd, &api, &flags)?;
    k2s.wait_ready().await?;
    let written = services_in(&keys_under(etcd, "/skydns/")?).len();
    ensure!(
        written == n + 1,
        "every service written: {written}\n{}",
        k2s.log()
    );
    Ok((api, k2s))
}

/// Service `wide` (10.0.0.50) with 100 TCP ports `p0`… from 1000 on:
/// A + 100 SRV + PTR, 102 operations of one service.
fn wide_service() -> String {
    let names: Vec<String> = (0..100).map(|i| format!("p{i}")).collect();
    let ports: Vec<(&str, &str, u16)> = names
        .iter()
        .zip(1000..)
        .map(|(name, port)| (name.as_str(), "TCP", port))
        .collect();
    svc_manifest("wide", "10.0.0.50", &ports)
}

/// Services (`ns/name`) with at least one key under the service root.
fn services_in(keys: &[String]) -> BTreeSet<String> {
    keys.iter()
        .filter_map(|k| k.strip_prefix("/skydns/local/cluster/svc/"))
        .filter_map(|rest| {
            let mut parts = rest.split('/');
            Some(format!("{}/{}", parts.next()?, parts.next()?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_waits_for_the_first_lists_of_services_and_endpoints() -> Result<()> {
    let etcd = Etcd::start()?;
    let api = apiserver_at("127.0.0.1:0".parse()?, &services(20, &[])).await?;
    // `--endpoints-source=auto` lists EndpointSlices on this API.
    api.hold_lists("endpointslices");
    let mut k2s = Kube2sky::start(
        &etcd,
        &api,
        &["--reverse=false", "--spec-records=false", "--pods=false"],
    )?;
    // The services list arrives and every cluster-IP service is written...
    // 20 A records, and kubernetes's A and SRV.
    wait_for_keys(&etcd, "/skydns/local/cluster/svc/default/", 22).await?;
    // ...but endpoints are not listed yet: headless services are unknown.
    let closed = k2s.http("/readiness").await;
    ensure!(
        matches!(&closed, Some((503, body)) if body.starts_with("not ready")),
        "/readiness must stay closed until endpoints are listed and written: {closed:?}"
    );
    api.release_lists();
    k2s.wait_ready().await?;
    // Readiness opens just before the line is logged.
    k2s.wait_for_log("ready: the first lists of services and endpoints are written")
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_opens_after_the_initial_sync_timeout_without_endpoints() -> Result<()> {
    let etcd = Etcd::start()?;
    let api = apiserver_at("127.0.0.1:0".parse()?, &[]).await?;
    // `--endpoints-source=auto` lists EndpointSlices on this API.
    api.hold_lists("endpointslices");
    let mut k2s = Kube2sky::start(&etcd, &api, &["--initial-sync-timeout=1s"])?;
    k2s.wait_ready().await?;
    k2s.wait_for_log("ready after --initial-sync-timeout=1s")
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_sync_leaves_every_service_complete_or_absent() -> Result<()> {
    // v3: transactions make a service all-or-nothing (v2 has none).
    let etcd = Etcd::start_with(Api::V3)?;
    let total = 3000;
    let api = apiserver_at(
        "127.0.0.1:0".parse()?,
        &services(total, &[("http", 80), ("dns", 53)]),
    )
    .await?;
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    let options = etcd_client::WatchOptions::new().with_prefix();
    let mut events = client.watch("/skydns/", Some(options)).await?;
    let mut k2s = Kube2sky::start(&etcd, &api, &["--pods=false"])?;
    // Kill at the first write of a seeded service.
    loop {
        let resp = events.message().await?.context("watch ended")?;
        let seeded = |e: &etcd_client::Event| {
            e.kv()
                .and_then(|kv| kv.key_str().ok())
                .is_some_and(|k| k.contains("/default/s"))
        };
        if resp.events().iter().any(seeded) {
            break;
        }
    }
    // etcd frozen there, so the sync cannot finish before the kill lands,
    // however fast the machine; the writes kube2sky sent meanwhile are
    // whole transactions, applied or not once etcd goes on.
    etcd.freeze()?;
    k2s.kill();
    etcd.thaw()?;
    let records = etcd.get_prefix("/skydns/")?;
    let keys: Vec<String> = records.iter().map(|(k, _)| k.clone()).collect();
    let mut per_service: BTreeMap<String, usize> = BTreeMap::new();
    for service in services_in(&keys) {
        let dir = format!("/skydns/local/cluster/svc/{service}/");
        per_service.insert(service, keys.iter().filter(|k| k.starts_with(&dir)).count());
    }
    let seeded = per_service
        .keys()
        .filter(|s| s.starts_with("default/s"))
        .count();
    ensure!(
        seeded > 0 && seeded < total,
        "the kill must land during the sync: {seeded} of {total} services written"
    );
    // A and two SRVs each; `kubernetes` has one port.
    let whole = |service: &str| {
        if service == "default/kubernetes" {
            2
        } else {
            3
        }
    };
    let partial: Vec<_> = per_service
        .iter()
        .filter(|(s, n)| **n != whole(s))
        .collect();
    ensure!(partial.is_empty(), "services not complete: {partial:?}");
    // PTRs are written in chunks of their own after the services' (key
    // order of the PTR subtree): from an empty store a PTR may lag its
    // service, but never names one that is not written.
    let ptrs: Vec<&(String, String)> = records
        .iter()
        .filter(|(k, _)| k.starts_with("/skydns/arpa/"))
        .collect();
    for (key, value) in &ptrs {
        let host: serde_json::Value = serde_json::from_str(value)?;
        let host = host["host"].as_str().unwrap_or_default();
        let mut labels = host.split('.');
        let (name, ns) = (labels.next().unwrap_or(""), labels.next().unwrap_or(""));
        ensure!(
            per_service.contains_key(&format!("{ns}/{name}")),
            "{key} names {host}, which is not written"
        );
    }
    ensure!(
        !ptrs.is_empty(),
        "the kubernetes service's PTR is written at start"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_restored_to_an_older_resource_version_is_listed_again() -> Result<()> {
    let etcd = Etcd::start()?;
    let api = apiserver_at("127.0.0.1:0".parse()?, &services(3, &[])).await?;
    let kubectl = Kubectl::new(&api.url())?;
    let mut k2s = Kube2sky::start(
        &etcd,
        &api,
        &["--reverse=false", "--spec-records=false", "--pods=false"],
    )?;
    k2s.wait_ready().await?;
    for name in ["late-a", "late-b", "late-c", "late-d"] {
        kubectl.with_manifest("create", &svc_manifest(name, "", &[]))?;
    }
    wait_for_keys(&etcd, "/skydns/local/cluster/svc/default/", 9).await?;
    let (addr, old_rv) = (api.addr(), api.resource_version());
    api.shutdown().await;
    // The "backup": s0000 only, so a much lower resourceVersion.
    let restored = apiserver_at(addr, &services(1, &[])).await?;
    ensure!(restored.resource_version() < old_rv, "precondition");
    eventually(
        "etcd to follow the restored API server",
        DEADLINE,
        async || {
            let keys = keys_under(&etcd, "/skydns/local/cluster/svc/")?;
            let left = services_in(&keys);
            let want = BTreeSet::from(["default/kubernetes".to_string(), "default/s0000".into()]);
            ensure!(left == want, "{left:?}");
            Ok(())
        },
    )
    .await?;
    ensure!(
        k2s.log().contains("(restored or replaced?); listing again"),
        "the re-list must be logged:\n{}",
        k2s.log()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_with_a_smaller_max_txn_ops_gets_smaller_transactions() -> Result<()> {
    let etcd = Etcd::start_with_flags(Api::V3, &["--max-txn-ops=64"])?;
    // 40 services × (A + 2 SRV + PTR) = 160 operations in the first sync.
    let (_api, k2s) = synced_services(&etcd, 40, &[]).await?;
    ensure!(
        k2s.log().contains("using 64 for 10m0s"),
        "the smaller limit must be logged:\n{}",
        k2s.log()
    );
    Ok(())
}

/// kube2sky's default (1024) against an etcd at its own (128): the limit
/// is found with read-only transactions before anything is written, so no
/// write is refused and no chunk written twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_etcd_limit_is_found_before_the_first_write() -> Result<()> {
    let etcd = Etcd::start_with_flags(Api::V3, &[])?;
    // 1,202 operations of services, then 401 PTRs: over 128 either way.
    let (_api, k2s) = synced_services(&etcd, 400, &[]).await?;
    let log = k2s.log();
    ensure!(
        log.contains(
            "etcd refused read-only transactions of 1024, 512, 256 operations: its --max-txn-ops \
             is lower than --etcd-max-txn-ops=1024; using 128 for 10m0s"
        ),
        "the probe must find 128 and say so once:\n{log}"
    );
    ensure!(
        !log.contains("etcd refused a transaction of up to"),
        "no write may be refused:\n{log}"
    );
    Ok(())
}

/// Only etcd's refusal (`too many operations`) lowers the size the probe
/// tries; any other error ends the probe, and the writes meet it. Here the
/// probe's 32,768 reads (some 1.1 MB) are over the gRPC message limit of an
/// etcd with `--max-request-bytes=16384` (16 KiB and 512 KiB of overhead):
/// an error, not a refusal. The sync of two services is written at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_error_other_than_a_refusal_lowers_nothing() -> Result<()> {
    let etcd = Etcd::start_with_flags(Api::V3, &["--max-request-bytes=16384"])?;
    let (_api, k2s) = synced_services(&etcd, 2, &["--etcd-max-txn-ops=32768"]).await?;
    let log = k2s.log();
    ensure!(
        !log.contains("etcd refused read-only transactions"),
        "an error of the probe was taken for a refusal:\n{log}"
    );
    Ok(())
}

/// A round of many changes reads their keys in one request; an etcd that
/// allows fewer operations per transaction than that gets the reads one
/// by one. 60 pods created while kube2sky is stopped arrive together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_allowing_fewer_operations_than_a_round_reads_gets_them_one_by_one() -> Result<()> {
    let etcd = Etcd::start_with_flags(Api::V3, &["--max-txn-ops=4"])?;
    let api = apiserver(&[KUBERNETES]).await?;
    let mut k2s = Kube2sky::start(&etcd, &api, &[])?;
    k2s.wait_ready().await?;
    // Its watches of services, slices and pods open: the pods come as
    // watch events in one round, not in a list.
    tokio::time::timeout(DEADLINE, api.wait_for_open_watches(3))
        .await
        .context("3 watches")?;
    k2s.signal(nix::sys::signal::Signal::SIGSTOP)?;
    for i in 0..60 {
        create_pod(&api, "default", &format!("p{i}"), &format!("10.244.3.{i}"))?;
    }
    k2s.signal(nix::sys::signal::Signal::SIGCONT)?;
    // A pod is its directory's one key: 60 keys.
    wait_for_keys(&etcd, "/skydns/local/cluster/pod/default/", 60).await?;
    // Each refusal halves the reads sent together from then on.
    let log = k2s.log();
    let refusals: Vec<(usize, usize)> = log.lines().filter_map(refused_reads).collect();
    ensure!(
        !refusals.is_empty(),
        "the reads must have been refused together:\n{log}"
    );
    for (refused, at_most) in refusals {
        ensure!(
            at_most == (refused / 2).max(1),
            "{refused} reads refused, then {at_most} at most:\n{log}"
        );
    }
    Ok(())
}

/// From kube2sky's line "etcd refused N reads in one transaction (…);
/// reading them one by one, and at most M at once from now on": (N, M).
fn refused_reads(line: &str) -> Option<(usize, usize)> {
    let (_, rest) = line.split_once("etcd refused ")?;
    let (refused, rest) = rest.split_once(" reads in one transaction")?;
    let (_, rest) = rest.split_once("reading them one by one, and at most ")?;
    let (at_most, _) = rest.split_once(" at once")?;
    Some((refused.parse().ok()?, at_most.parse().ok()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_with_the_manifests_max_txn_ops_takes_the_sync_in_fewer_transactions() -> Result<()>
{
    // deploy/: etcd -max-txn-ops=1024 and kube2sky --etcd-max-txn-ops=1024.
    let etcd = Etcd::start_with_flags(Api::V3, &["--max-txn-ops=1024"])?;
    // One chunk of 400 services × (A + 2 SRV) and `kubernetes` (A + 1 SRV):
    // 1,202 operations, then one of 401 PTRs: 3 transactions at 1024,
    // 10 + 4 at etcd's default 128.
    let before = etcd.revision()?;
    let (_api, k2s) = synced_services(&etcd, 400, &["--etcd-max-txn-ops=1024"]).await?;
    let used = etcd.revision()? - before;
    // The 3 transactions, the data-loss marker and dns-version: no more.
    ensure!(
        used <= 6,
        "{used} etcd revisions for the first sync: transactions of 128?\n{}",
        k2s.log()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lowered_transaction_size_is_raised_again_once_etcd_allows_it() -> Result<()> {
    // docs/install.md's upgrade of a shared etcd: kube2sky met a member still
    // at a smaller --max-txn-ops, and the member restarts with the larger one.
    let mut etcd = Etcd::start_with_flags(Api::V3, &["--max-txn-ops=64"])?;
    // One chunk of 40 services × (A + 2 SRV) = 120 operations: refused at 64.
    let api = apiserver_at(
        "127.0.0.1:0".parse()?,
        &services(40, &[("http", 80), ("dns", 53)]),
    )
    .await?;
    let kubectl = Kubectl::new(&api.url())?;
    let retry = Duration::from_secs(1);
    let flags = [
        "--pods=false",
        "--etcd-max-txn-ops=128",
        "--etcd-max-txn-ops-retry=1s",
    ];
    let mut k2s = Kube2sky::start(&etcd, &api, &flags)?;
    k2s.wait_ready().await?;
    let lowered = Instant::now();
    ensure!(k2s.log().contains("using 64 for 1s"), "{}", k2s.log());
    etcd.restart_with_flags(&["--max-txn-ops=128"])?;
    // The period kube2sky keeps the smaller size is what is under test.
    tokio::time::sleep_until((lowered + retry).into()).await;
    // A + 100 SRV + PTR: 102 operations of one service, two transactions at 64.
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    let options = etcd_client::WatchOptions::new().with_prefix();
    let mut events = client.watch("/skydns/", Some(options)).await?;
    kubectl.with_manifest("create", &wide_service())?;
    let mut puts: BTreeMap<String, i64> = BTreeMap::new();
    let all_written = async {
        while puts.len() < 102 {
            let resp = events.message().await?.context("watch ended")?;
            for e in resp.events() {
                let Some(kv) = e.kv() else { continue };
                let key = kv.key_str()?.to_string();
                if key.contains("/default/wide/") || key == "/skydns/arpa/in-addr/10/0/0/50" {
                    puts.insert(key, kv.mod_revision());
                }
            }
        }
        anyhow::Ok(())
    };
    tokio::time::timeout(DEADLINE, all_written)
        .await
        .context("wide's 102 records were not all written")??;
    let revisions: BTreeSet<i64> = puts.values().copied().collect();
    ensure!(
        revisions.len() == 1,
        "wide's 102 records in {} transactions: still at 64?\n{}",
        revisions.len(),
        k2s.log()
    );
    ensure!(
        k2s.log()
            .contains("trying etcd transactions of 128 operations again"),
        "{}",
        k2s.log()
    );
    Ok(())
}

/// A write etcd refuses as too large (its `--max-txn-ops` lowered after
/// kube2sky found it) lowers the size, and goes through in smaller
/// transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_refused_as_too_large_goes_through_in_smaller_transactions() -> Result<()> {
    let mut etcd = Etcd::start_with_flags(Api::V3, &["--max-txn-ops=128"])?;
    let (api, k2s) = synced_services(&etcd, 1, &["--etcd-max-txn-ops=128"]).await?;
    etcd.restart_with_flags(&["--max-txn-ops=64"])?;
    // A + 100 SRV + PTR: 102 operations of one service, over 64.
    let kubectl = Kubectl::new(&api.url())?;
    kubectl.with_manifest("create", &wide_service())?;
    wait_for_keys(&etcd, "/skydns/local/cluster/svc/default/wide/", 101).await?;
    ensure!(
        k2s.log()
            .contains("etcd refused a transaction of up to 128 operations"),
        "{}",
        k2s.log()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_that_cannot_be_records_are_skipped_with_a_warning() -> Result<()> {
    let etcd = Etcd::start()?;
    let hostile = [
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"default"},
            "spec":{"clusterIP":"10.0.0.77","ports":[
              {"name":"a.b","protocol":"TCP","port":80},
              {"name":"http","protocol":"TCP","port":81}]}}"#
            .to_string(),
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"ext","namespace":"default"},
            "spec":{"type":"ExternalName","externalName":"bad name..com."}}"#
            .to_string(),
    ];
    let api = apiserver_at("127.0.0.1:0".parse()?, &hostile).await?;
    let kubectl = Kubectl::new(&api.url())?;
    let k2s = {
        let mut k2s = Kube2sky::start(
            &etcd,
            &api,
            &["--reverse=false", "--spec-records=false", "--pods=false"],
        )?;
        k2s.wait_ready().await?;
        k2s
    };
    probe_handled(&etcd, &kubectl, "10.0.0.78").await?;
    // 10.0.0.77's A-record label, FNV-1a computed outside this code.
    let label = "9f462f1c";
    let web = keys_under(&etcd, "/skydns/local/cluster/svc/default/web/")?;
    let mut want = vec![
        format!("/skydns/local/cluster/svc/default/web/{label}"),
        format!("/skydns/local/cluster/svc/default/web/_tcp/_http/{label}"),
    ];
    want.sort();
    ensure!(web == want, "only the valid port gets an SRV: {web:?}");
    let ext = keys_under(&etcd, "/skydns/local/cluster/svc/default/ext/")?;
    ensure!(
        ext.is_empty(),
        "an invalid ExternalName makes no record: {ext:?}"
    );
    let log = k2s.log();
    for warning in [
        r#"Services "default"/"web": PortName "a.b" is not a DNS-1123 label"#,
        r#"Services "default"/"ext": ExternalName "bad name..com." is not a DNS-1123 subdomain"#,
    ] {
        ensure!(log.contains(warning), "missing warning {warning:?}:\n{log}");
    }
    let text = k2s.metrics().await?;
    for (field, n) in [("PortName", 1.0), ("ExternalName", 1.0)] {
        let series = format!(r#"kube2sky_skipped_total{{kind="Services",field="{field}"}}"#);
        ensure!(metric(&text, &series) == Some(n), "{series}:\n{text}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_service_and_its_ptr_go_in_one_transaction() -> Result<()> {
    // v3: one revision per transaction.
    let etcd = Etcd::start_with(Api::V3)?;
    let api = apiserver_at("127.0.0.1:0".parse()?, &[]).await?;
    let kubectl = Kubectl::new(&api.url())?;
    let mut k2s = Kube2sky::start(&etcd, &api, &["--pods=false"])?;
    k2s.wait_ready().await?;
    kubectl.with_manifest(
        "create",
        &svc_manifest("w", "10.0.0.40", &[("http", "TCP", 80)]),
    )?;
    wait_for_keys(&etcd, "/skydns/arpa/in-addr/10/0/0/40", 1).await?;
    let delete_w = || kubectl.run(&["delete", "service", "w"]);
    let writes = v3_writes_until_probed(&etcd, &kubectl, "/skydns/", "10.0.0.41", delete_w).await?;
    let deletes: Vec<(String, i64)> = writes
        .into_iter()
        .filter_map(|(write, revision)| match write {
            Write::Delete(key) => Some((key, revision)),
            Write::Put(_) => None,
        })
        .collect();
    let keys: BTreeSet<&str> = deletes.iter().map(|(k, _)| k.as_str()).collect();
    ensure!(
        keys.len() == 3 && keys.contains("/skydns/arpa/in-addr/10/0/0/40"),
        "w's A, SRV and PTR are deleted: {deletes:?}"
    );
    let revisions: BTreeSet<i64> = deletes.iter().map(|(_, r)| *r).collect();
    ensure!(revisions.len() == 1, "in one transaction: {deletes:?}");
    Ok(())
}

/// The harness's wait for a log line gives up as soon as kube2sky has
/// exited (here on an unknown flag), with a message that says so, instead
/// of holding the test to its deadline: a mutant of the mutation check that
/// makes kube2sky return an error is then caught in seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_a_log_line_ends_when_kube2sky_exits() -> Result<()> {
    let api = apiserver_at(([127, 0, 0, 1], 0).into(), &[]).await?;
    let etcd = Etcd::start()?;
    let k2s = Kube2sky::start(&etcd, &api, &["--no-such-flag"])?;
    let error = k2s
        .wait_for_log_within("a line kube2sky never logs", Duration::from_secs(3600))
        .await
        .expect_err("kube2sky never logs the line");
    let message = format!("{error:#}");
    ensure!(message.contains("exited before"), "{message}");
    ensure!(message.contains("--no-such-flag"), "{message}");
    Ok(())
}
