//! The data-loss check against a chunk still in flight: the writer settles
//! the chunk before it reads the marker (`write_loop.rs`, `CheckLoss`), so
//! revisions of the old store, reported after a loss was seen on the new
//! one, cannot make the new store look gone back in time.
use crate::kube2sky_support::sync::*;
use crate::kube2sky_support::*;
use anyhow::{ensure, Context, Result};
use test_support::relay::TcpRelay;

/// How far the old store's revision is ahead of any the new one reaches
/// in this test (its whole rewrite is some 700 transactions).
const AHEAD: usize = 5_000;

/// etcd replaced by an empty store while a chunk is in flight to the old
/// one, and a loss check due meanwhile: one data loss, not two. kube2sky
/// reaches etcd through a relay. The old store, 5,000 revisions ahead, is
/// frozen in the middle of the pods' sync, and the relay sends new
/// connections to an empty store. The chunk's transactions and the check
/// on the old connection time out (3 s); the check's next try reaches the
/// empty store on a new connection. Without the settle first, that check
/// sees the loss while the chunk is unsettled, and the chunk's old
/// revisions, settled after it, make every later check see a store gone
/// back in time: a second loss (and a second rewrite of everything).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loss_check_settles_the_chunk_of_the_old_store_first() -> Result<()> {
    const NAMESPACES: usize = 4;
    const PODS_EACH: usize = 300;
    let total = (NAMESPACES * PODS_EACH) as i64;
    let old = Etcd::start_with(Api::V3)?;
    let new = Etcd::start_with(Api::V3)?;
    let mut client = etcd_client::Client::connect([old.endpoint()], None).await?;
    put_revisions_ahead(&client).await?;
    let relay = TcpRelay::start(old.client_addr()).await?;
    let api = apiserver(&[KUBERNETES]).await?;
    seed_pods(&api, NAMESPACES, PODS_EACH)?;
    let mut watch = watch_keys(&mut client, POD_ROOT).await?;
    let flags = [
        "--full-sync-chunk=300",
        "--etcd-max-txn-ops=2",
        "--etcd-mutation-timeout=60s",
        "--etcd-loss-check-interval=10ms",
    ];
    let endpoint = format!("http://{}", relay.addr());
    let k2s = Kube2sky::start_on(&endpoint, Api::V3, &api, &flags)?;
    // Half of the first chunk's transactions answered, the rest in flight.
    let mut seen = 0;
    let half_a_chunk = async {
        while let Some(message) = watch.message().await? {
            seen += message.events().len();
            if seen > PODS_EACH / 2 {
                return Ok(());
            }
        }
        anyhow::bail!("the watch ended after {seen} keys")
    };
    tokio::time::timeout(LONG, half_a_chunk)
        .await
        .context("no pod keys written")??;
    old.freeze()?;
    relay.redirect(new.client_addr());
    ensure!(
        !k2s.log().contains("full sync of pods done"),
        "the pods' sync finished before etcd was frozen; log:\n{}",
        k2s.log()
    );
    let mut client = etcd_client::Client::connect([new.endpoint()], None).await?;
    wait_for_pod_keys(&mut client, total).await?;
    // Ten more loss checks over the rewritten store, counted: the second
    // loss, if any, is seen at the first check after the chunk settles.
    ten_more_loss_checks(&k2s).await?;
    let seen = data_losses(&k2s).await?;
    ensure!(
        seen == 1.0,
        "{seen} data losses counted, not 1; log:\n{}",
        k2s.log()
    );
    Ok(())
}

/// Puts a key outside kube2sky's tree [`AHEAD`] times, 20 writers at once.
async fn put_revisions_ahead(client: &etcd_client::Client) -> Result<()> {
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..20 {
        let mut client = client.clone();
        writers.spawn(async move {
            for i in 0..AHEAD / 20 {
                client
                    .put(format!("/ahead/{writer}"), i.to_string(), None)
                    .await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = writers.join_next().await {
        done??;
    }
    Ok(())
}
