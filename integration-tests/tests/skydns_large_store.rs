//! A store larger than one gRPC message (4 MiB by default): skydns reads
//! etcd v3 in pages at one revision, so it starts, and reloads after etcd
//! restarts, however many records there are.

mod skydns_support;

use etcd_client::{Client, GetOptions, Txn, TxnOp};
use skydns_support::SkyDns;
use test_support::etcd::{Api, Etcd};

/// 5,000 records of ~1 KiB: ~5.3 MB in one range response.
const RECORDS: usize = 5_000;

fn key(i: usize) -> String {
    format!("/skydns/local/cluster/svc/bulk/svc-{i}/{i:08x}")
}

/// A record with an ignored padding field, as any unknown field is.
fn value(i: usize) -> String {
    let pad = "x".repeat(1_000);
    format!(
        r#"{{"host":"10.{}.{}.{}","ttl":30,"pad":"{pad}"}}"#,
        i >> 16,
        (i >> 8) & 0xff,
        i & 0xff
    )
}

async fn client(etcd: &Etcd) -> Client {
    Client::connect([etcd.endpoint()], None).await.unwrap()
}

async fn put_records(etcd: &Etcd, range: std::ops::Range<usize>) {
    let mut client = client(etcd).await;
    let ops: Vec<TxnOp> = range.map(|i| TxnOp::put(key(i), value(i), None)).collect();
    for chunk in ops.chunks(100) {
        client
            .txn(Txn::new().and_then(chunk.to_vec()))
            .await
            .unwrap();
    }
}

fn a_answer(i: usize) -> Vec<String> {
    vec![format!(
        "svc-{i}.bulk.svc.cluster.local. 30 IN A 10.{}.{}.{}",
        i >> 16,
        (i >> 8) & 0xff,
        i & 0xff
    )]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_over_one_grpc_message_loads_and_reloads_in_pages() {
    let mut etcd = Etcd::start_with(Api::V3).unwrap();
    put_records(&etcd, 0..RECORDS).await;
    // The fixture is what it claims: one range read of it is refused.
    let whole = client(&etcd)
        .await
        .get("/skydns", Some(GetOptions::new().with_prefix()))
        .await;
    let err = whole.expect_err("one response over 4 MiB").to_string();
    assert!(err.contains("message length too large"), "{err}");

    let dns = SkyDns::start_with(
        &etcd,
        &["-domain=cluster.local.", "-no-rec"],
        &[],
        "svc-0.bulk.svc.cluster.local",
    )
    .await;
    let last = RECORDS - 1;
    let r = dns
        .dig(&[&format!("svc-{last}.bulk.svc.cluster.local"), "A"])
        .await;
    assert_eq!(r.answer, a_answer(last), "{r:?}");

    // After an etcd restart skydns loads everything again, and sees what
    // was written meanwhile.
    etcd.stop();
    dns.wait_for_store_errors(1).await;
    etcd.restart().unwrap();
    put_records(&etcd, RECORDS..RECORDS + 1).await;
    let name = format!("svc-{RECORDS}.bulk.svc.cluster.local");
    let r = dns.wait_for(&name, "A", |r| r.status == "NOERROR").await;
    assert_eq!(r.answer, a_answer(RECORDS));
    dns.shutdown().await;
}

#[tokio::test]
async fn a_page_over_the_message_limit_is_read_again_in_halves() {
    let etcd = Etcd::start_with(Api::V3).unwrap();
    put_records(&etcd, 0..5).await;
    let mut client = client(&etcd).await;
    let big = "y".repeat(1_000_000);
    for i in 0..3 {
        client
            .put(format!("/skydns/big/{i}"), big.as_str(), None)
            .await
            .unwrap();
    }
    // 3 MB in one page against a 2 MiB limit: halved until each page fits.
    let kv = client
        .kv_client()
        .max_decoding_message_size(2 * 1024 * 1024);
    let loaded = skydns::load_pages(kv, "/skydns/", 1_000).await.unwrap();
    let keys: Vec<&str> = loaded.kvs.iter().map(|kv| kv.key.as_str()).collect();
    let mut want = vec!["/skydns/big/0", "/skydns/big/1", "/skydns/big/2"];
    let bulk: Vec<String> = (0..5).map(key).collect();
    want.extend(bulk.iter().map(String::as_str));
    assert_eq!(keys, want);
    assert!(loaded.kvs[..3].iter().all(|kv| kv.value.len() == 1_000_000));

    // Pages of two keys: every key once, in order, at one revision.
    let kv = client.kv_client();
    let paged = skydns::load_pages(kv, "/skydns/local/", 2).await.unwrap();
    let keys: Vec<String> = paged.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(keys, bulk);
    let header = client.get("/", None).await.unwrap();
    assert_eq!(paged.revision, header.header().unwrap().revision());
}
