//! The full sync's harness: pods seeded by the thousand, etcd watched for
//! the sync's first keys and frozen there, so a test's change lands in the
//! middle of the sync whatever the machine's speed.

use super::*;
use etcd_client::GetOptions;

pub const POD_ROOT: &str = "/skydns/local/cluster/pod/";
/// For syncs of thousands of small transactions on a loaded machine.
pub const LONG: std::time::Duration = std::time::Duration::from_secs(120);

/// How many keys etcd holds under `prefix` (without fetching them).
pub async fn count(client: &mut etcd_client::Client, prefix: &str) -> Result<i64> {
    let options = GetOptions::new().with_prefix().with_count_only();
    Ok(client.get(prefix, Some(options)).await?.count())
}

/// A watch of the keys under `prefix`, opened before kube2sky writes any.
pub async fn watch_keys(
    client: &mut etcd_client::Client,
    prefix: &str,
) -> Result<etcd_client::WatchStream> {
    let options = etcd_client::WatchOptions::new().with_prefix();
    Ok(client.watch(prefix, Some(options)).await?)
}

/// Waits for the first key put on `watch`, then freezes `etcd` there: the
/// full sync is under way, its first chunk in flight, and stays so until
/// `etcd.thaw()`, whatever the machine's speed.
pub async fn freeze_at_first_put(watch: &mut etcd_client::WatchStream, etcd: &Etcd) -> Result<()> {
    freeze_at_put_under(watch, "", etcd).await
}

/// Waits for a key under `prefix` put on `watch` (those before it are
/// passed over), then freezes `etcd`.
pub async fn freeze_at_put_under(
    watch: &mut etcd_client::WatchStream,
    prefix: &str,
    etcd: &Etcd,
) -> Result<()> {
    let put = async {
        while let Some(message) = watch.message().await? {
            let keys = message.events().iter().filter_map(|e| e.kv());
            if keys
                .map(|kv| kv.key())
                .any(|k| k.starts_with(prefix.as_bytes()))
            {
                return Ok(());
            }
        }
        anyhow::bail!("the watch ended")
    };
    tokio::time::timeout(LONG, put)
        .await
        .with_context(|| format!("no key put under {prefix:?}"))??;
    etcd.freeze()
}

/// That the one key under `late` was put before the last of the
/// `chunk_keys` keys under `chunk` (the chunk in flight when the late
/// change came): a change outside the chunk is written beside it, not
/// after it. Compares the keys' create revisions; `k2s`'s log on failure.
pub async fn put_before_the_chunk_ends(
    client: &mut etcd_client::Client,
    late: &str,
    (chunk, chunk_keys): (&str, usize),
    k2s: &crate::kube2sky_support::Kube2sky,
) -> Result<()> {
    let mut revisions = async |prefix: &str| -> Result<Vec<i64>> {
        let options = etcd_client::GetOptions::new()
            .with_prefix()
            .with_keys_only();
        let reply = client.get(prefix, Some(options)).await?;
        Ok(reply.kvs().iter().map(|kv| kv.create_revision()).collect())
    };
    let late = revisions(late).await?;
    let chunk = revisions(chunk).await?;
    anyhow::ensure!(
        chunk.len() == chunk_keys,
        "{} keys of the chunk",
        chunk.len()
    );
    let chunk_last = chunk.iter().max().copied().unwrap_or(0);
    anyhow::ensure!(
        late.len() == 1 && late[0] < chunk_last,
        "the late change was put at revision {late:?}, after the chunk in flight (last key \
         at {chunk_last}); log:\n{}",
        k2s.log()
    );
    Ok(())
}

/// Waits for kube2sky's `full sync of pods done`, then counts the pod
/// keys in etcd.
pub async fn pods_when_synced(etcd: &Etcd, k2s: &Kube2sky) -> Result<i64> {
    k2s.wait_for_log_within("full sync of pods done", LONG)
        .await?;
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    count(&mut client, POD_ROOT).await
}

/// Creates the namespace `name` in the API server's store.
pub fn namespace(api: &kube_api_test_server::ApiServerHandle, name: &str) -> Result<()> {
    let body = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": name}});
    api.store().create(
        kube_api_test_server::ResourceKind::Namespace,
        None,
        body,
        true,
    )?;
    Ok(())
}

/// Namespaces `ns000`… (up to 1000) with pods `p0`… (up to 500) each,
/// IPs from 10.100.0.1 on.
pub fn seed_pods(
    api: &kube_api_test_server::ApiServerHandle,
    namespaces: usize,
    each: usize,
) -> Result<()> {
    for n in 0..namespaces {
        namespace(api, &format!("ns{n:03}"))?;
        for p in 0..each {
            let (second, third) = (100 + n / 100, (n % 100) * 2 + p / 250);
            let ip = format!("10.{second}.{third}.{}", p % 250 + 1);
            create_pod(api, &format!("ns{n:03}"), &format!("p{p}"), &ip)?;
        }
    }
    Ok(())
}

/// etcd (v3), the API test server seeded with `seed_pods(namespaces,
/// each)` and kube2sky syncing them in chunks of 300 pods in transactions
/// of two operations (each chunk in flight for a while) with `extra`
/// flags. Returns with etcd frozen once more than `written` pod keys were
/// put, and the sync not done: the test's change to etcd comes in the
/// middle of the sync, whatever the machine's speed.
pub async fn slow_sync_frozen(
    namespaces: usize,
    each: usize,
    extra: &[&str],
    written: usize,
) -> Result<(Etcd, kube_api_test_server::ApiServerHandle, Kube2sky)> {
    let etcd = Etcd::start_with(test_support::etcd::Api::V3)?;
    let api = apiserver(&[KUBERNETES]).await?;
    seed_pods(&api, namespaces, each)?;
    let mut flags = vec![
        "--full-sync-chunk=300",
        "--etcd-max-txn-ops=2",
        "--etcd-mutation-timeout=60s",
    ];
    flags.extend_from_slice(extra);
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    let mut watch = watch_keys(&mut client, POD_ROOT).await?;
    let k2s = Kube2sky::start(&etcd, &api, &flags)?;
    let mut seen = 0;
    let more_than_written = async {
        while let Some(message) = watch.message().await? {
            seen += message.events().len();
            if seen > written {
                return Ok(());
            }
        }
        anyhow::bail!("the watch ended after {seen} keys")
    };
    tokio::time::timeout(LONG, more_than_written)
        .await
        .with_context(|| format!("not more than {written} pod keys written"))??;
    etcd.freeze()?;
    ensure!(
        !k2s.log().contains("full sync of pods done"),
        "the sync of {} pods in transactions of two finished before etcd was frozen, \
         at its key {seen}; log:\n{}",
        namespaces * each,
        k2s.log()
    );
    Ok((etcd, api, k2s))
}

/// `n` pods `q0`… in `ns000`, IPs from 10.200.0.1 on: one namespace, so
/// one chunk however many; in transactions of two, thousands of pods hold
/// it in flight for seconds.
pub fn crowd_ns000(api: &kube_api_test_server::ApiServerHandle, n: usize) -> Result<()> {
    for i in 0..n {
        let ip = format!("10.200.{}.{}", i / 250, i % 250 + 1);
        create_pod(api, "ns000", &format!("q{i}"), &ip)?;
    }
    Ok(())
}

/// Waits until etcd (`client`) holds `total` pod keys.
pub async fn wait_for_pod_keys(client: &mut etcd_client::Client, total: i64) -> Result<()> {
    eventually(&format!("{total} pod keys"), LONG, async || {
        let n = count(client, POD_ROOT).await?;
        ensure!(n == total, "{n} of {total} pod keys");
        Ok(())
    })
    .await
}

/// kube2sky's count of data losses (`kube2sky_etcd_data_losses_total`).
pub async fn data_losses(k2s: &Kube2sky) -> Result<f64> {
    let name = "kube2sky_etcd_data_losses_total";
    test_support::http::metric(&k2s.metrics().await?, name).with_context(|| format!("no {name}"))
}

/// Waits until kube2sky has run ten more data-loss checks than it had
/// when called (counted, `kube2sky_etcd_data_loss_checks_total`).
pub async fn ten_more_loss_checks(k2s: &Kube2sky) -> Result<()> {
    let name = "kube2sky_etcd_data_loss_checks_total";
    let checks = async || -> Result<f64> {
        test_support::http::metric(&k2s.metrics().await?, name)
            .with_context(|| format!("no {name}"))
    };
    let before = checks().await?;
    eventually("ten more loss checks", LONG, async || {
        let now = checks().await?;
        ensure!(now >= before + 10.0, "{now} checks, {before} before");
        Ok(())
    })
    .await
}
