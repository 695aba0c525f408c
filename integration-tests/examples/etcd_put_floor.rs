//! The floor of any etcd v3 writer: etcd alone taking `KEYS` PUTs of a
//! record-sized value in transactions of `OPS` operations, `IN_FLIGHT` at
//! a time (kube2sky's shape: 128 and 8), optionally with one watcher on
//! the prefix reading every event (as skydns does). Keys are
//! `<FLOOR_PREFIX>s<i>/c88f1059` (default prefix `/floor/`). Prints milliseconds.
//!
//!   cargo run --release --example etcd_put_floor -- http://127.0.0.1:2379 300000 128 8 watch

use etcd_client::{Client, Txn, TxnOp, WatchOptions};
use futures::StreamExt;
use std::time::Instant;

const VALUE: &str = r#"{"host":"10.1.2.3","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: etcd_put_floor ENDPOINT KEYS OPS IN_FLIGHT [watch]";
    let endpoint = args.get(1).ok_or(usage)?;
    let number = |i: usize| -> Result<usize, Box<dyn std::error::Error>> {
        Ok(args.get(i).ok_or(usage)?.parse()?)
    };
    let (keys, ops, in_flight) = (number(2)?, number(3)?, number(4)?);
    let prefix = std::env::var("FLOOR_PREFIX").unwrap_or_else(|_| "/floor/".to_string());
    let client = Client::connect([endpoint.as_str()], None).await?;
    let watcher = if args.get(5).map(String::as_str) == Some("watch") {
        let mut events = client
            .clone()
            .watch(prefix.as_str(), Some(WatchOptions::new().with_prefix()))
            .await?;
        Some(tokio::spawn(async move {
            let mut seen = 0;
            while let Some(Ok(resp)) = events.next().await {
                seen += resp.events().len();
                if seen >= keys {
                    break;
                }
            }
        }))
    } else {
        None
    };
    let start = Instant::now();
    let batches: Vec<Vec<usize>> = (0..keys)
        .collect::<Vec<_>>()
        .chunks(ops)
        .map(<[usize]>::to_vec)
        .collect();
    let mut results = futures::stream::iter(batches)
        .map(|batch| {
            let mut client = client.clone();
            let prefix = &prefix;
            async move {
                let puts: Vec<TxnOp> = (batch.iter())
                    .map(|i| TxnOp::put(format!("{prefix}s{i}/c88f1059"), VALUE, None))
                    .collect();
                client.txn(Txn::new().and_then(puts)).await
            }
        })
        .buffer_unordered(in_flight);
    while let Some(result) = results.next().await {
        result?;
    }
    let written = start.elapsed();
    if let Some(watcher) = watcher {
        watcher.await?;
    }
    println!(
        "{} puts: written in {} ms, seen by the watcher after {} ms",
        keys,
        written.as_millis(),
        start.elapsed().as_millis()
    );
    Ok(())
}
