//! kube2sky's full sync (the whole-subtree reconcile when it starts), end
//! to end: it reads more than 4 MiB of owned keys in pages and removes the
//! stale ones, leaves a foreign PTR record alone (as live writes do),
//! writes nothing over a store that is already right, and in chunks
//! (`--full-sync-chunk`) leaves exactly the live pods, with pods deleted
//! during the sync deleted.
use crate::kube2sky_support::sync::*;
use crate::kube2sky_support::*;
use anyhow::{ensure, Context, Result};
use etcd_client::{Txn, TxnOp};
use test_support::http::metric;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_than_4_mib_of_stale_owned_keys_are_read_in_pages_and_removed() -> Result<()> {
    // The 4 MiB limit is gRPC's: this is about the v3 API whatever E2E_ETCD_API says.
    let etcd = Etcd::start_with(Api::V3)?;
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    // 5000 × ~1 KiB = ~5 MiB: more than one gRPC message may carry.
    let value = format!(r#"{{"host":"10.9.9.9","text":"{}"}}"#, "x".repeat(1000));
    for batch in 0..50 {
        let ops: Vec<TxnOp> = (0..100)
            .map(|i| {
                let key = format!("{POD_ROOT}stale/10-9-{batch}-{i}/k");
                TxnOp::put(key, value.as_str(), None)
            })
            .collect();
        client.txn(Txn::new().and_then(ops)).await?;
    }
    ensure!(count(&mut client, POD_ROOT).await? == 5000);

    let api = apiserver(&[KUBERNETES]).await?;
    create_pod(&api, "default", "p", "1.2.3.4")?;
    let mut k2s = Kube2sky::start(&etcd, &api, &[])?;
    k2s.wait_ready().await?;
    eventually("stale pod keys removed", DEADLINE, async || {
        let n = count(&mut client, POD_ROOT).await?;
        ensure!(n == 1, "{n} pod keys");
        Ok(())
    })
    .await
    .with_context(|| format!("log:\n{}", k2s.log()))?;
    let pod = format!("{POD_ROOT}default/1-2-3-4/{}", label("1.2.3.4"));
    wait_exact(&etcd, POD_ROOT, &[(pod, a("1.2.3.4"))]).await?;
    ensure!(
        k2s.http("/healthz").await == Some((200, "ok\n".into())),
        "kube2sky must still be running and healthy; log:\n{}",
        k2s.log()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_ptr_is_never_overwritten_or_deleted_on_v2() -> Result<()> {
    foreign_ptr(Api::V2).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_ptr_is_never_overwritten_or_deleted_on_v3() -> Result<()> {
    foreign_ptr(Api::V3).await
}

async fn foreign_ptr(etcd_api: Api) -> Result<()> {
    let (etcd, api, kubectl, mut k2s) = cluster_with(etcd_api, &[]).await?;
    let ptr = "/skydns/arpa/in-addr/10/0/0/77";
    let foreign = vec![(ptr.to_string(), a("router.example.org."))];
    etcd.put(ptr, &foreign[0].1)?;
    kubectl.with_manifest(
        "create",
        &svc_manifest("f", "10.0.0.77", &[("http", "TCP", 80)]),
    )?;
    let warning = format!("Not writing {ptr}");
    k2s.wait_for_log(&warning).await?;
    ensure!(
        under(&etcd, ptr)? == foreign,
        "the foreign PTR was overwritten"
    );

    // A restart reconciles everything at once (stale removal): still untouched.
    k2s.kill();
    let mut k2s = Kube2sky::start(&etcd, &api, &[])?;
    k2s.wait_ready().await?;
    k2s.wait_for_log(&warning).await?;
    ensure!(under(&etcd, ptr)? == foreign, "overwritten after restart");

    kubectl.run(&["delete", "service", "f"])?;
    probe_handled(&etcd, &kubectl, "10.0.0.78").await?;
    wait_exact(&etcd, "/skydns/local/cluster/svc/default/f/", &[]).await?;
    ensure!(under(&etcd, ptr)? == foreign, "the foreign PTR was deleted");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_over_a_store_that_is_right_writes_nothing_on_v2() -> Result<()> {
    restart_writes_nothing(Api::V2).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_over_a_store_that_is_right_writes_nothing_on_v3() -> Result<()> {
    restart_writes_nothing(Api::V3).await
}

async fn restart_writes_nothing(etcd_api: Api) -> Result<()> {
    let (etcd, api, kubectl, mut k2s) = cluster_with(etcd_api, &[]).await?;
    kubectl.with_manifest(
        "create",
        &svc_manifest("r", "10.0.0.81", &[("http", "TCP", 80)]),
    )?;
    create_pod(&api, "default", "p", "1.2.3.5")?;
    // A and SRV; on v2 a PTR is put after its service's records, in a
    // write of its own.
    wait_for_keys(&etcd, "/skydns/local/cluster/svc/default/r/", 2).await?;
    wait_for_keys(&etcd, "/skydns/arpa/in-addr/10/0/0/81", 1).await?;
    wait_for_keys(&etcd, POD_ROOT, 1).await?;
    let before = etcd.revision()?;

    k2s.kill();
    let k2s = Kube2sky::start(&etcd, &api, &[])?;
    // Both whole-subtree reconciles have run when these are logged.
    k2s.wait_for_log("full sync of services done").await?;
    k2s.wait_for_log("full sync of pods done").await?;
    let after = etcd.revision()?;
    ensure!(
        after == before,
        "the restart wrote to etcd (revision {before} -> {after}); log:\n{}",
        k2s.log()
    );
    ensure!(
        k2s.log().contains("0 keys written, 0 deleted"),
        "log:\n{}",
        k2s.log()
    );
    Ok(())
}

/// A full sync in chunks of one object (`--full-sync-chunk=1`, v3) writes
/// every pod, keeps what is right and deletes stale keys in every chunk,
/// including those of namespaces with no pods left, which fall between or
/// after the chunks of live namespaces; services and PTRs the same. On v2,
/// which reads the subtree whole whatever the chunk, the end is the same.
/// Both APIs in every run (not from `E2E_ETCD_API`): the mutation check runs
/// this suite once per mutant, of either backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_sync_of_pods_in_chunks_leaves_exactly_the_pods_on_v2() -> Result<()> {
    pods_in_chunks(Api::V2).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_sync_of_pods_in_chunks_leaves_exactly_the_pods_on_v3() -> Result<()> {
    pods_in_chunks(Api::V3).await
}

async fn pods_in_chunks(etcd_api: Api) -> Result<()> {
    let etcd = Etcd::start_with(etcd_api)?;
    let api = apiserver(&[KUBERNETES]).await?;
    for (ns, name, ip) in [
        ("default", "p1", "10.244.0.1"),
        ("default", "p2", "10.244.0.2"),
        ("kube-system", "p3", "10.244.0.3"),
        ("kube-public", "p4", "10.244.9.9"),
    ] {
        create_pod(&api, ns, name, ip)?;
    }
    let key_as = |ns: &str, ip: &str, label: &str| {
        format!("{POD_ROOT}{ns}/{}/{label}", ip.replace('.', "-"))
    };
    let key = |ns: &str, ip: &str| key_as(ns, ip, label(ip));
    // Stale: a pod gone from a live namespace, and three namespaces gone
    // (before the first, between two, after the last live one).
    let stale = [
        key_as("default", "10.244.1.9", "0badf00d"),
        key_as("aaa", "10.244.2.1", "0badf00d"),
        key_as("kube-remote", "10.244.2.2", "0badf00d"),
        key_as("zzz", "10.244.2.3", "0badf00d"),
    ];
    for k in &stale {
        etcd.put(k, &a("10.244.0.0"))?;
    }
    let right = key("default", "10.244.0.1");
    etcd.put(&right, &a("10.244.0.1"))?;
    let svc_stale = [
        "/skydns/local/cluster/svc/aaa/gone/0badf00d",
        "/skydns/local/cluster/svc/zzz/gone/0badf00d",
        "/skydns/arpa/in-addr/10/0/0/99",
    ];
    for k in svc_stale {
        etcd.put(k, &a("gone.aaa.svc.cluster.local."))?;
    }
    let k2s = Kube2sky::start(&etcd, &api, &["--full-sync-chunk=1"])?;
    k2s.wait_for_log("full sync of pods done").await?;
    let mut expected: Vec<(String, String)> = [
        ("default", "10.244.0.1"),
        ("default", "10.244.0.2"),
        ("kube-system", "10.244.0.3"),
        ("kube-public", "10.244.9.9"),
    ]
    .iter()
    .map(|(ns, ip)| (key(ns, ip), a(ip)))
    .collect();
    expected.sort();
    wait_exact(&etcd, POD_ROOT, &expected).await?;
    k2s.wait_for_log("full sync of services done").await?;
    let svc_keys = keys_under(&etcd, "/skydns/")?;
    for k in svc_stale {
        ensure!(
            !svc_keys.iter().any(|have| have == k),
            "{k} is left:\n{svc_keys:?}"
        );
    }
    let kubernetes = format!(
        "/skydns/local/cluster/svc/default/kubernetes/{}",
        label("10.0.0.1")
    );
    ensure!(svc_keys.contains(&kubernetes), "{svc_keys:?}");
    ensure!(
        svc_keys
            .iter()
            .any(|k| k == "/skydns/arpa/in-addr/10/0/0/1"),
        "{svc_keys:?}"
    );
    // Four pod chunks and one whole-service sync; the pod that was right
    // was not written again: 3 pods written, 4 stale keys deleted; and the
    // services' 3 stale keys. Each pass counts its own, whichever goes
    // first (on v2 each is written in place).
    let log = k2s.log();
    for (pass, figures) in [
        ("pods", "3 keys written, 4 deleted"),
        ("services", "0 keys written, 3 deleted"),
    ] {
        let done = format!("full sync of {pass} done");
        ensure!(
            log.lines()
                .any(|l| l.contains(&done) && l.contains(figures)),
            "no {done:?} with {figures:?}; log:\n{log}"
        );
    }
    Ok(())
}

/// A change made while a full sync runs is written between two of its
/// chunks, not after the whole sync, and the chunks after it keep it: a
/// pod in a namespace that did not exist when the sync was planned (and
/// whose keys fall in the range of a chunk still to come) is not deleted as
/// stale. In the end etcd holds what a full sync of the final state would
/// write: a restart writes nothing. v3 only: v2 reads a subtree whole, in
/// one chunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_during_a_full_sync_is_written_between_chunks_and_kept() -> Result<()> {
    const NAMESPACES: usize = 400;
    const PODS_EACH: usize = 10;
    let total = (NAMESPACES * PODS_EACH) as i64;
    let etcd = Etcd::start_with(Api::V3)?;
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    let api = apiserver(&[KUBERNETES]).await?;
    seed_pods(&api, NAMESPACES, PODS_EACH)?;
    // A chunk a namespace: 400 chunks of pods.
    let mut written = watch_keys(&mut client, POD_ROOT).await?;
    let mut k2s = Kube2sky::start(&etcd, &api, &["--full-sync-chunk=10"])?;
    // etcd frozen at the sync's first pod key until kube2sky has seen the
    // late pod: the change comes during the sync on any machine.
    freeze_at_first_put(&mut written, &etcd).await?;
    // `zz-new/` sorts after every seeded namespace: in the last chunk's range.
    namespace(&api, "zz-new")?;
    create_pod(&api, "zz-new", "late", "10.245.0.1")?;
    // Its watch event (kube2sky::timing, at debug).
    k2s.wait_for_log("namespace=zz-new name=late").await?;
    etcd.thaw()?;
    let late = format!("{POD_ROOT}zz-new/10-245-0-1/");
    let seeded_then = eventually("the late pod's key", DEADLINE, async || {
        let keys = keys_under(&etcd, &late)?;
        ensure!(keys.len() == 1, "{keys:?}");
        count(&mut client, POD_ROOT).await
    })
    .await?;
    ensure!(
        seeded_then - 1 < total,
        "the late pod was written only after all {total} seeded pods, by the end \
         of the full sync; log:\n{}",
        k2s.log()
    );
    k2s.wait_for_log("full sync of pods done").await?;
    ensure!(
        count(&mut client, POD_ROOT).await? == total + 1,
        "after the sync: {} pod keys, not {}; the late pod: {:?}",
        count(&mut client, POD_ROOT).await?,
        total + 1,
        keys_under(&etcd, &late)?
    );
    println!(
        "the late pod was written when {} of {total} seeded pods were",
        seeded_then - 1
    );

    let before = etcd.revision()?;
    k2s.kill();
    let k2s = Kube2sky::start(&etcd, &api, &["--full-sync-chunk=10"])?;
    k2s.wait_for_log("full sync of services done").await?;
    k2s.wait_for_log("full sync of pods done").await?;
    ensure!(
        etcd.revision()? == before,
        "a full sync of the same state wrote to etcd; log:\n{}",
        k2s.log()
    );
    Ok(())
}

/// A change to keys outside the chunk in flight is written beside it, not
/// after it: only a change that could touch the chunk's keys waits for it
/// (`write_loop.rs`). etcd is frozen at the sync's first pod key, the first
/// chunk's 3,010 pods in transactions of two still to come, until kube2sky
/// has seen a pod made in a namespace of the second chunk's range; that
/// pod's key is then put before the first chunk's last key (with 1,500
/// transactions of the chunk to go, against the one that writes the pod).
/// So is the next change: etcd is frozen again at the first pod's key,
/// when the chunk's turn has come (a round was just written) but etcd is
/// still applying it: the turn waits for the chunk in flight
/// (`Writer::in_flight_finished`), and a second pod's round goes first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_outside_the_chunk_in_flight_is_written_beside_it() -> Result<()> {
    let etcd = Etcd::start_with(Api::V3)?;
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    let api = apiserver(&[KUBERNETES]).await?;
    // Two chunks: `ns000`, 3,010 pods, and `ns001` to the end, 10 pods and
    // (once made) `zz-new`.
    seed_pods(&api, 2, 10)?;
    crowd_ns000(&api, 3_000)?;
    let mut written = watch_keys(&mut client, POD_ROOT).await?;
    // No data-loss check: one due waits for the chunk in flight first.
    let flags = [
        "--full-sync-chunk=300",
        "--etcd-max-txn-ops=2",
        "--etcd-mutation-timeout=60s",
        "--etcd-loss-check-interval=0",
    ];
    let k2s = Kube2sky::start(&etcd, &api, &flags)?;
    freeze_at_first_put(&mut written, &etcd).await?;
    namespace(&api, "zz-new")?;
    create_pod(&api, "zz-new", "late", "10.245.0.1")?;
    // Its watch event (kube2sky::timing, at debug).
    k2s.wait_for_log("namespace=zz-new name=late").await?;
    etcd.thaw()?;
    freeze_at_put_under(&mut written, &format!("{POD_ROOT}zz-new/"), &etcd).await?;
    namespace(&api, "zz-next")?;
    create_pod(&api, "zz-next", "later", "10.245.0.2")?;
    k2s.wait_for_log("namespace=zz-next name=later").await?;
    etcd.thaw()?;
    k2s.wait_for_log_within("full sync of pods done", LONG)
        .await?;
    for late in ["zz-new", "zz-next"] {
        put_before_the_chunk_ends(
            &mut client,
            &format!("{POD_ROOT}{late}/"),
            (&format!("{POD_ROOT}ns000/"), 3_010),
            &k2s,
        )
        .await
        .with_context(|| format!("the pod made in {late}"))?;
    }
    Ok(())
}

/// Pods deleted while a full sync runs stay deleted. The writer plans each
/// chunk while etcd applies the one before (`kube2sky/src/etcd/chunks.rs`);
/// a round of deletes must wait for the chunk in flight, or that chunk,
/// planned with the pods still there, can land after the deletes and put
/// them back for good (no later chunk covers its namespace). Pods are
/// deleted in a scattered order all through the sync, so rounds of deletes
/// meet chunks in flight in their namespaces. v3 only: v2 writes in one
/// chunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_deleted_during_a_full_sync_stay_deleted() -> Result<()> {
    const NAMESPACES: usize = 12;
    const PODS_EACH: usize = 300;
    let etcd = Etcd::start_with(Api::V3)?;
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    let api = apiserver(&[KUBERNETES]).await?;
    seed_pods(&api, NAMESPACES, PODS_EACH)?;
    // A chunk a namespace: 12 chunks of 300 pods, in transactions of two
    // operations, so a chunk in flight is still being sent (8 transactions
    // at a time) when the next round of deletes reads etcd.
    let flags = ["--full-sync-chunk=300", "--etcd-max-txn-ops=2"];
    let mut written = watch_keys(&mut client, POD_ROOT).await?;
    let k2s = Kube2sky::start(&etcd, &api, &flags)?;
    // etcd frozen at the sync's first pod key: the first deletes come
    // during the sync.
    freeze_at_first_put(&mut written, &etcd).await?;
    ensure!(
        !k2s.log().contains("full sync of pods done"),
        "the sync of 3,600 pods in transactions of two finished before etcd was frozen, \
         at its first key; log:\n{}",
        k2s.log()
    );
    // Every pod once, in a scattered order (a step coprime to the count),
    // paced (a load, not a wait) so the deletes span the sync.
    let total = NAMESPACES * PODS_EACH;
    let mut during = 0;
    for i in 0..total {
        let k = (i * 7919) % total;
        let (ns, name) = (
            format!("ns{:03}", k / PODS_EACH),
            format!("p{}", k % PODS_EACH),
        );
        store_delete(&api, kube_api_test_server::ResourceKind::Pod, &ns, &name)?;
        if i % 20 == 19 {
            if !k2s.log().contains("full sync of pods done") {
                during = i + 1;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if i == 19 {
            etcd.thaw()?;
        }
    }
    // Events are written in order, a round of them at a time, but the
    // transactions of one round are in flight together (puts first): the
    // probe's key may be in while deletes of its own round are not. A
    // second probe, created once the first is in etcd, is in a later round,
    // so once its key is in every delete before the first probe is too.
    namespace(&api, "zz-probe")?;
    let probe = format!("{POD_ROOT}zz-probe/");
    for (name, ip, keys) in [("probe", "10.245.0.9", 1), ("probe2", "10.245.0.10", 2)] {
        create_pod(&api, "zz-probe", name, ip)?;
        eventually("the probe pods' keys", LONG, async || {
            ensure!(keys_under(&etcd, &probe)?.len() == keys);
            Ok(())
        })
        .await?;
    }
    k2s.wait_for_log_within("full sync of pods done", LONG)
        .await?;
    let left: Vec<String> = (keys_under(&etcd, POD_ROOT)?.into_iter())
        .filter(|k| !k.starts_with(&probe))
        .collect();
    ensure!(
        left.is_empty(),
        "{} pod keys left besides the probes ({during} of {total} deleted during the sync): {:?}\nlog:\n{}",
        left.len(),
        &left[..left.len().min(20)],
        k2s.log()
    );
    ensure!(
        during >= 20,
        "{during} deletes counted during the sync: at least the 20 made while etcd was frozen"
    );
    println!("{during} of {total} pods deleted while the full sync ran");
    Ok(())
}

/// A chunk in flight when etcd goes away is written again once it is
/// back: etcd is restarted in the middle of a full sync whose chunks go in
/// transactions of two operations (each chunk is in flight for a while),
/// and every pod is in etcd when the sync is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_sync_goes_on_through_an_etcd_restart() -> Result<()> {
    const NAMESPACES: usize = 12;
    const PODS_EACH: usize = 300;
    let (mut etcd, _api, k2s) = slow_sync_frozen(NAMESPACES, PODS_EACH, &[], 0).await?;
    // Killed where it was frozen, and started again.
    etcd.restart()?;
    let n = pods_when_synced(&etcd, &k2s).await?;
    ensure!(
        n == (NAMESPACES * PODS_EACH) as i64,
        "{n} pod keys after the sync, not {}; log:\n{}",
        NAMESPACES * PODS_EACH,
        k2s.log()
    );
    Ok(())
}

/// etcd wiped (restarted empty) in the middle of a full sync whose chunks
/// are in flight for a while: every pod is written again and it counts as
/// one data loss, not one per check (revisions the old store reported must
/// not be taken for the new store's, or every check would see a store
/// gone back in time). The rarer order, a check that reaches the new store
/// while a chunk of the old one is unsettled, is forced in `loss_check.rs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_wiped_during_a_full_sync_is_one_data_loss() -> Result<()> {
    const NAMESPACES: usize = 12;
    const PODS_EACH: usize = 300;
    let loss_check = ["--etcd-loss-check-interval=100ms"];
    let (mut etcd, _api, k2s) = slow_sync_frozen(NAMESPACES, PODS_EACH, &loss_check, 300).await?;
    etcd.restart_empty()?;
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    wait_for_pod_keys(&mut client, (NAMESPACES * PODS_EACH) as i64).await?;
    // Ten more loss checks over the rewritten store, counted.
    let seen = data_losses(&k2s).await?;
    ten_more_loss_checks(&k2s).await?;
    let later = data_losses(&k2s).await?;
    ensure!(
        seen == 1.0 && later == 1.0,
        "{seen} then {later} data losses counted, not 1; log:\n{}",
        k2s.log()
    );
    Ok(())
}

/// A pass's figures count every chunk, also one settled when something
/// else waited for it (`FullSyncs::count`): here the data-loss check, due
/// every 10 ms, waits for the chunk in flight (300 pods in transactions of
/// two) before it reads the marker. 3,600 pods synced into an etcd holding
/// one stale pod key in each of their 12 namespaces are "3600 keys
/// written, 12 deleted".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_counts_the_chunks_a_loss_check_waited_for() -> Result<()> {
    const NAMESPACES: usize = 12;
    const PODS_EACH: usize = 300;
    let total = NAMESPACES * PODS_EACH;
    let etcd = Etcd::start_with(Api::V3)?;
    for n in 0..NAMESPACES {
        let stale = format!("{POD_ROOT}ns{n:03}/10-250-0-{}/0badf00d", n + 1);
        etcd.put(&stale, &a(&format!("10.250.0.{}", n + 1)))?;
    }
    let api = apiserver(&[KUBERNETES]).await?;
    seed_pods(&api, NAMESPACES, PODS_EACH)?;
    let flags = [
        "--full-sync-chunk=300",
        "--etcd-max-txn-ops=2",
        "--etcd-mutation-timeout=60s",
        "--etcd-loss-check-interval=10ms",
    ];
    let k2s = Kube2sky::start(&etcd, &api, &flags)?;
    let n = pods_when_synced(&etcd, &k2s).await?;
    ensure!(n == total as i64, "{n} pod keys, not {total}");
    let text = k2s.metrics().await?;
    let checks = metric(&text, "kube2sky_etcd_data_loss_checks_total").context("no checks")?;
    ensure!(checks >= 1.0, "no data-loss check ran");
    let figures = format!("{total} keys written, {NAMESPACES} deleted");
    ensure!(
        k2s.log().contains(&figures),
        "no `{figures}` in the log:\n{}",
        k2s.log()
    );
    Ok(())
}
