//! The full sync's planned chunk (`kube2sky/src/etcd/chunks.rs`): while etcd
//! applies one chunk, kube2sky diffs the next against etcd. What changes
//! etcd or the state before that chunk is sent makes the diff stale, and the
//! chunk must be read again when its turn comes:
//! - a relist, or the chunk writes records of pods the relist found gone;
//! - a rewrite of the chunk in flight (etcd lost it), or the planned chunk,
//!   diffed against the store that was lost, leaves its keys unwritten.
//!
//! etcd is frozen while the first chunk is in flight, so the change lands
//! between the plan and the send whatever the machine's speed.

use crate::kube2sky_support::sync::*;
use crate::kube2sky_support::*;
use anyhow::{ensure, Context, Result};
use kube_api_test_server::ResourceKind;
use test_support::http::metric;

/// Pod `ns001/p7` (`seed_pods`' numbering): in the second chunk, the one
/// planned while the first is in flight.
const GONE_NS: &str = "ns001";
const GONE_POD: &str = "p7";
const GONE_DIR: &str = "/skydns/local/cluster/pod/ns001/10-100-2-8/";
/// Put after everything: a watch that replays etcd's history ends there.
const SENTINEL: &str = "/skydns/zz-sentinel";

/// Flags of both tests: chunks of about 300 pods (whole namespaces) in
/// transactions of two operations, each chunk in flight for a while.
const SLOW_CHUNKS: [&str; 3] = [
    "--full-sync-chunk=300",
    "--etcd-max-txn-ops=2",
    "--etcd-mutation-timeout=60s",
];

/// etcd (v3) and kube2sky syncing 3,900 pods ([`SLOW_CHUNKS`]; `ns000`
/// holds 3,000, one chunk in flight for seconds, then `ns001`…`ns003`),
/// returned with etcd frozen at the first pod key put.
async fn first_pods_chunk_frozen() -> Result<(Etcd, kube_api_test_server::ApiServerHandle, Kube2sky)>
{
    let etcd = Etcd::start_with(Api::V3)?;
    let api = apiserver(&[KUBERNETES]).await?;
    seed_pods(&api, 4, 300)?;
    crowd_ns000(&api, 2_700)?;
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    let mut written = watch_keys(&mut client, POD_ROOT).await?;
    let k2s = Kube2sky::start(&etcd, &api, &SLOW_CHUNKS)?;
    freeze_at_first_put(&mut written, &etcd).await?;
    Ok((etcd, api, k2s))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_during_a_pass_reads_the_planned_chunk_again() -> Result<()> {
    // Frozen at the first chunk's first key: the second chunk is being
    // planned (or is) with GONE_POD in it.
    let (etcd, api, k2s) = first_pods_chunk_frozen().await?;
    // Now the watches break and every list is held; history is expired
    // (every watch gets 410), so the pod's deletion reaches kube2sky by the
    // pods relist only.
    watches_sent_back_to_held_lists(&api, &k2s).await?;
    store_delete(&api, ResourceKind::Pod, GONE_NS, GONE_POD)?;
    // Only the pods list goes on (a services relist would send the planned
    // chunk first, rightly, while the pod was still known). Its watch
    // opens once the relist is handed to the writer.
    api.release_list("pods");
    tokio::time::timeout(DEADLINE, api.wait_for_open_watches(1))
        .await
        .context("the pods watch after the relist")?;
    etcd.thaw()?;

    // The pass ends, then the one the relist asked for.
    eventually("two passes of the pods' full sync", LONG, async || {
        let passes = k2s.log().matches("full sync of pods done").count();
        ensure!(passes >= 2, "{passes} passes done");
        Ok(())
    })
    .await?;
    let log = k2s.log();
    ensure!(
        log.contains("a relist came meanwhile: once more"),
        "the relist came after the pass:\n{log}"
    );
    let touched = gone_pod_history(&etcd).await?;
    ensure!(
        touched.is_empty(),
        "the relisted-away pod's records were written: {touched:?}"
    );
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    let pods = count(&mut client, POD_ROOT).await?;
    ensure!(pods == 3_899, "{pods} pod keys, not 4 × 300 + 2,700 - 1");
    Ok(())
}

/// Breaks every watch with every list held: history is expired (each
/// watch gets 410 and lists again), and returns once every watch is
/// listing and none is open.
async fn watches_sent_back_to_held_lists(
    api: &kube_api_test_server::ApiServerHandle,
    k2s: &Kube2sky,
) -> Result<()> {
    for plural in ["services", "endpointslices", "pods"] {
        api.hold_lists(plural);
    }
    let restarts = |kind: &str| format!("kube2sky_watch_restarts_total{{kind=\"{kind}\"}}");
    let kinds = ["Services", "EndpointSlices", "Pods"];
    let before = k2s.metrics().await?;
    api.expire_all_history();
    api.drop_watches();
    // Each watch got its 410 and is listing (held): none opens again.
    for kind in kinds {
        let (series, was) = (
            restarts(kind),
            metric(&before, &restarts(kind)).unwrap_or(0.0),
        );
        eventually(
            &format!("the {kind} watch sent back to list"),
            DEADLINE,
            async || {
                let n = metric(&k2s.metrics().await?, &series).unwrap_or(0.0);
                ensure!(n > was, "{series} = {n}");
                Ok(())
            },
        )
        .await?;
    }
    tokio::time::timeout(DEADLINE, api.wait_for_open_watches(0))
        .await
        .context("the watches to close")
}

/// A services relist while a pods pass has a chunk planned: the services
/// pass goes first, and the planned pods chunk is sent and counted to the
/// pods pass before it (`Writer::flush_planned`). 3,900 pods synced into
/// an empty etcd are "3900 keys written, 0 deleted", and the services pass
/// that found its keys right "0 keys written, 0 deleted".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_services_pass_comes_first_and_the_planned_pods_chunk_stays_with_its_pass() -> Result<()>
{
    // Frozen at the first pods chunk's first key (the first services pass,
    // which goes first, is done): the second is being planned (or is).
    let (etcd, api, k2s) = first_pods_chunk_frozen().await?;
    watches_sent_back_to_held_lists(&api, &k2s).await?;
    // Only the services list goes on: its relist asks for a services pass.
    api.release_list("services");
    tokio::time::timeout(DEADLINE, api.wait_for_open_watches(1))
        .await
        .context("the services watch after the relist")?;
    etcd.thaw()?;
    k2s.wait_for_log_within("full sync of pods done", LONG)
        .await?;
    let log = k2s.log();
    let passes: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("full sync of"))
        .collect();
    let figures = |what: &str| -> Vec<&str> {
        let done = format!("full sync of {what} done");
        passes
            .iter()
            .filter(|line| line.contains(&done))
            .filter_map(|line| line.split(": ").last())
            .collect()
    };
    let services = figures("services");
    ensure!(
        services.len() >= 2
            && services.last() == Some(&"0 keys written, 0 deleted")
            && figures("pods") == ["3900 keys written, 0 deleted"],
        "passes:\n{}",
        passes.join("\n")
    );
    Ok(())
}

/// Every put and delete etcd's history holds under [`GONE_DIR`]: a watch
/// from revision 1 replays the history up to a sentinel key put now.
async fn gone_pod_history(etcd: &Etcd) -> Result<Vec<String>> {
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    client.put(SENTINEL, "end", None).await?;
    let options = etcd_client::WatchOptions::new()
        .with_prefix()
        .with_start_revision(1);
    let mut history = client.watch("/skydns/", Some(options)).await?;
    let mut touched = Vec::new();
    let replay = async {
        while let Some(message) = history.message().await? {
            for event in message.events() {
                let key = event.kv().map(|kv| kv.key_str().unwrap_or("?").to_string());
                let key = key.unwrap_or_default();
                if key == SENTINEL {
                    return Ok(());
                }
                if key.starts_with(GONE_DIR) {
                    touched.push(format!("{:?} {key}", event.event_type()));
                }
            }
        }
        anyhow::bail!("the watch ended before the sentinel")
    };
    tokio::time::timeout(LONG, replay)
        .await
        .context("replaying etcd's history")??;
    Ok(touched)
}

/// etcd restarted empty while a resync's first chunk is in flight and the
/// second, already right in etcd, was planned as nothing to write: the
/// first chunk is written again, and the second is read again from the new
/// store and written whole. Without the re-read, its 300 pods stay missing
/// until a data-loss check (an hour here) notices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_chunk_in_flight_has_the_planned_chunk_read_again() -> Result<()> {
    let mut etcd = Etcd::start_with(Api::V3)?;
    let api = apiserver(&[KUBERNETES]).await?;
    seed_pods(&api, 4, 300)?;
    let flags = [&SLOW_CHUNKS[..], &["--etcd-loss-check-interval=1h"]].concat();
    let mut first = Kube2sky::start(&etcd, &api, &flags)?;
    first
        .wait_for_log_within("full sync of pods done", LONG)
        .await?;
    first.kill();
    // 3,000 pods more in ns000: the resync's first chunk has 3,000 keys to
    // write; the other three chunks are right.
    crowd_ns000(&api, 3_000)?;
    let k2s = Kube2sky::start(&etcd, &api, &flags)?;
    // The second chunk diffed against etcd (nothing to write) while the
    // first is in flight.
    k2s.wait_for_log_within(
        "next chunk planned: /skydns/local/cluster/pod/ns001/../skydns/local/cluster/pod/ns002/: 0 operations",
        LONG,
    )
    .await?;
    etcd.freeze()?;
    etcd.restart_empty()?;
    let pods = pods_when_synced(&etcd, &k2s).await?;
    ensure!(
        pods == 4_200,
        "{pods} pod keys when the sync was done, not 4 × 300 + 3,000; log:\n{}",
        k2s.log()
    );
    Ok(())
}
