//! kube2sky and its etcd: a store that requires TLS client certificates
//! (`--etcd-certfile`, `--etcd-keyfile`, `--etcd-cafile`) or a user and
//! password (`--etcd-username`, `--etcd-password`), and refuses kube2sky
//! without them, which then says why at once; an etcd without the v2 API
//! (start-up stops at once, naming the flags) and one that answers late
//! (found at the next attempt); data loss
//! told by the marker key alone (the revision only moves forward) or by the
//! revision alone (a store restored from an older backup), and the
//! v2 index of hidden directories written again after a wipe, and read
//! in the layout of earlier versions; writes that go on through the next
//! member once the one in use is cut; values that are not text (v3); the
//! revision a written round names in its timing line.

use crate::kube2sky_support::*;
use anyhow::{ensure, Result};
use kube_api_test_server::ApiServerHandle;
use test_support::relay::TcpRelay;
use test_support::tls::Certificates;

/// `default/kubernetes`'s A and SRV records among the demo records.
fn kubernetes_records() -> Vec<(String, String)> {
    demo_records()
        .into_iter()
        .filter(|(k, _)| k.contains("/default/kubernetes/"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube2sky_writes_to_an_etcd_that_requires_client_certificates() -> Result<()> {
    let certs = Certificates::make()?;
    let etcd = Etcd::start_tls(&certs)?;
    let api = apiserver(&[KUBERNETES]).await?;
    let flag = |name: &str, path: std::path::PathBuf| format!("--{name}={}", path.display());
    let tls = [
        flag("etcd-certfile", certs.cert("client")),
        flag("etcd-keyfile", certs.key("client")),
        flag("etcd-cafile", certs.ca()),
        "--reverse=false".to_string(),
        "--spec-records=false".to_string(),
    ];
    let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
    let mut k2s = Kube2sky::start(&etcd, &api, &tls)?;
    k2s.wait_ready().await?;
    wait_exact(&etcd, "/skydns", &kubernetes_records()).await
}

/// Two endpoints of one etcd (two relays in front of it): kube2sky uses
/// one. Once that one is cut, and its new connections held, kube2sky must
/// forget the connection and go to the next endpoint, and write through
/// it (on v3; the v2 client goes round its endpoints on each request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_go_on_through_the_next_member_once_the_one_in_use_is_cut() -> Result<()> {
    let etcd = Etcd::start_with(Api::V3)?;
    let relays = [
        TcpRelay::start(etcd.client_addr()).await?,
        TcpRelay::start(etcd.client_addr()).await?,
    ];
    let endpoints: Vec<String> = relays
        .iter()
        .map(|r| format!("http://{}", r.addr()))
        .collect();
    let api = apiserver(&[KUBERNETES]).await?;
    let kubectl = Kubectl::new(&api.url())?;
    let mut k2s = Kube2sky::start_on(&endpoints.join(","), Api::V3, &api, &[])?;
    k2s.wait_ready().await?;
    let in_use: Vec<usize> = (0..2).filter(|&i| relays[i].admitted() > 0).collect();
    ensure!(
        in_use.len() == 1,
        "kube2sky connected through relays {in_use:?}"
    );
    relays[in_use[0]].hold().await;
    kubectl.with_manifest(
        "create",
        &svc_manifest("after", "10.0.0.70", &[("http", "TCP", 80)]),
    )?;
    wait_for_keys(&etcd, "/skydns/local/cluster/svc/default/after/", 2).await
}

/// Values that are not UTF-8 text (v3 keeps bytes): on a PTR or the
/// config key, another writer's, never overwritten; on a key of kube2sky's
/// own tree, garbage that the record replaces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_that_are_not_text_are_foreign_on_ptrs_and_replaced_in_the_service_tree(
) -> Result<()> {
    let (etcd, _api, kubectl, k2s) = cluster_with(Api::V3, &["--config-map=kube-dns"]).await?;
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    let garbage = vec![0xff_u8, 0xfe, 0x00];
    let (ptr, config) = ("/skydns/arpa/in-addr/10/0/0/50", "/skydns/config");
    let record = format!(
        "/skydns/local/cluster/svc/default/bin/{}",
        label("10.0.0.50")
    );
    for key in [ptr, config, &record] {
        client.put(key, garbage.clone(), None).await?;
    }
    kubectl.with_manifest("create", &svc_manifest("bin", "10.0.0.50", &[]))?;
    kubectl.with_manifest(
        "create",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-dns\n  namespace: kube-system\n\
         data:\n  upstreamNameservers: '[\"192.0.2.53\"]'\n",
    )?;
    wait_exact(
        &etcd,
        "/skydns/local/cluster/svc/default/bin/",
        &[(record, a("10.0.0.50"))],
    )
    .await?;
    let warned = [
        (ptr, format!("Not writing {ptr}")),
        (
            config,
            format!("not setting the nameservers of kube-dns's ConfigMap in {config}"),
        ),
    ];
    for (key, warning) in warned {
        k2s.wait_for_log(&warning).await?;
        let kept = client.get(key, None).await?;
        ensure!(
            kept.kvs()
                .iter()
                .map(|kv| kv.value())
                .eq([garbage.as_slice()]),
            "{key}, not text, was overwritten: {:?}",
            kept.kvs()
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_without_the_v2_api_stops_start_up_naming_the_flag() -> Result<()> {
    let etcd = Etcd::start_without_v2()?;
    let api = apiserver(&[KUBERNETES]).await?;
    let mut k2s = Kube2sky::start(&etcd, &api, &["--etcd-api=v2"])?;
    // The limit only stops a hung test (12 attempts 5 s apart would take
    // a minute); what is asserted is that no second attempt was made: the
    // answer says retrying cannot help.
    let status = k2s.wait_exit(DEADLINE).await?;
    ensure!(status.code() == Some(1), "exit status {status}");
    let log = k2s.log();
    ensure!(
        !log.contains("[Attempt: 1]"),
        "retried an etcd that cannot serve the v2 API:\n{log}"
    );
    ensure!(
        log.contains("--enable-v2") && log.contains("--etcd-api=v3"),
        "the error must name both fixes:\n{log}"
    );
    Ok(())
}

/// etcd not answering at start: kube2sky says so, pauses (1.2's 5 s)
/// before its next attempt, and goes on once etcd answers. It reaches etcd
/// through a relay whose server closes each connection at first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_that_answers_late_is_found_at_the_next_attempt() -> Result<()> {
    let etcd = Etcd::start()?;
    let closer = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let relay = TcpRelay::start(closer.local_addr()?).await?;
    let closing = tokio::spawn(async move {
        while let Ok((connection, _)) = closer.accept().await {
            drop(connection);
        }
    });
    let api = apiserver(&[KUBERNETES]).await?;
    let endpoint = format!("http://{}", relay.addr());
    let mut k2s = Kube2sky::start_on(&endpoint, etcd.api(), &api, &[])?;
    k2s.wait_for_log("[Attempt: 1] Attempting access to etcd after 5 second sleep")
        .await?;
    relay.redirect(etcd.client_addr());
    closing.abort();
    k2s.wait_ready().await?;
    wait_exact(
        &etcd,
        "/skydns/local/cluster/svc/default/kubernetes/",
        &kubernetes_records(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_come_back_when_only_the_marker_key_is_lost() -> Result<()> {
    let (etcd, _api, _kubectl, _k2s) = cluster(&[
        "--reverse=false",
        "--spec-records=false",
        "--spec-records=false",
    ])
    .await?;
    wait_exact(&etcd, "/skydns", &kubernetes_records()).await?;
    // The record first, then the marker: both deletes move the revision
    // forward, so only the missing marker can tell kube2sky.
    etcd.del("/skydns/local/cluster/svc/default/kubernetes/c88f1059")?;
    etcd.del("/kube2sky/cluster.local/marker")?;
    wait_exact(&etcd, "/skydns", &kubernetes_records()).await
}

/// A store restored from an older backup, marker included: its revision
/// is back below one kube2sky saw, which is a data loss, so kube2sky writes
/// everything again, and the service created after the backup is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_come_back_when_etcd_is_restored_from_an_older_backup() -> Result<()> {
    let (mut etcd, _api, kubectl, k2s) = cluster(&[]).await?;
    let backup = etcd.back_up()?;
    kubectl.with_manifest(
        "create",
        &svc_manifest("late", "10.0.0.60", &[("http", "TCP", 80)]),
    )?;
    let dir = "/skydns/local/cluster/svc/default/late/";
    wait_for_keys(&etcd, dir, 2).await?;
    etcd.restore(&backup)?;
    wait_for_keys(&etcd, dir, 2).await?;
    let losses = sync::data_losses(&k2s).await?;
    ensure!(losses == 1.0, "{losses} data losses counted, not 1");
    Ok(())
}

/// The "round written" line (`kube2sky::timing`, at debug) names the
/// store's revision after the round's writes: the benchmark's breakdown of
/// propagation (docs/testing.md, "Where propagation time goes") pairs it
/// with the revision skydns applies. For a round of puts, one with nothing
/// to write (the revision its reads saw: a key written by hand meanwhile,
/// with no data-loss check to read the store's revision in between) and
/// one of deletes (on v2 a delete reports its index as a put does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_written_round_names_the_revision_of_its_writes() -> Result<()> {
    let flags = ["--reverse=false", "--etcd-loss-check-interval=0"];
    let (etcd, _api, kubectl, k2s) = cluster(&flags).await?;
    let dir = "/skydns/local/cluster/svc/default/late/";
    let late = svc_manifest("late", "10.0.0.60", &[("http", "TCP", 80)]);
    let before = revisions_of_rounds_written(&k2s).len();
    kubectl.with_manifest("create", &late)?;
    wait_for_keys(&etcd, dir, 2).await?;
    wait_for_a_round_at_the_store_revision(&k2s, &etcd, before).await?;
    etcd.put("/skydns/local/cluster/custom/x", &a("192.168.0.9"))?;
    let before = revisions_of_rounds_written(&k2s).len();
    let labelled = late.replace(
        r#""namespace":"default""#,
        r#""namespace":"default","labels":{"x":"y"}"#,
    );
    kubectl.with_manifest("replace", &labelled)?;
    wait_for_a_round_at_the_store_revision(&k2s, &etcd, before).await?;
    let before = revisions_of_rounds_written(&k2s).len();
    kubectl.run(&["delete", "service", "late"])?;
    wait_exact(&etcd, dir, &[]).await?;
    wait_for_a_round_at_the_store_revision(&k2s, &etcd, before).await
}

/// The revisions of kube2sky's "round written" lines so far.
fn revisions_of_rounds_written(k2s: &Kube2sky) -> Vec<i64> {
    let log = k2s.log();
    let round_lines = log.lines().filter(|l| l.contains("round written"));
    round_lines
        .filter_map(|l| {
            l.split("revision=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

/// Waits until a round written after the `before`th names the store's
/// revision (read again each time: on v2 the index entries and empty
/// directories go after the records). Nothing else writes meanwhile.
async fn wait_for_a_round_at_the_store_revision(
    k2s: &Kube2sky,
    etcd: &Etcd,
    before: usize,
) -> Result<()> {
    eventually("a round at the store's revision", DEADLINE, async || {
        let store = i64::try_from(etcd.revision()?)?;
        let mut rounds = revisions_of_rounds_written(k2s);
        let rounds = rounds.split_off(before.min(rounds.len()));
        ensure!(
            rounds.contains(&store),
            "rounds written at revisions {rounds:?}, the store is at {store}"
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v2_hidden_directory_index_is_rewritten_after_etcd_is_wiped() -> Result<()> {
    // The index of hidden (`_tcp`, `_udp`) directories exists on v2 only.
    let etcd = &mut Etcd::start_with(test_support::etcd::Api::V2)?;
    let (_api, _k2s, index) = kubernetes_indexed(etcd).await?;
    etcd.restart_empty()?;
    wait_exact(etcd, "/skydns", &kubernetes_records()).await?;
    wait_exact(etcd, HIDDEN_INDEX, &[index]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_index_entries_of_an_earlier_version_are_read_and_moved_into_their_buckets() -> Result<()>
{
    // Before the buckets, kube2sky kept one index entry per service. An
    // upgrade over such a store must still find, through that entry, the
    // SRV keys of a port removed meanwhile, and move every entry into its
    // bucket, that of a service with nothing to change too. The write of
    // `default/kubernetes` at start, before any list, already reads its
    // entry: the services' list is held until that write is done.
    let etcd = &mut Etcd::start_with(test_support::etcd::Api::V2)?;
    let svc = "/skydns/local/cluster/svc/default/kubernetes";
    etcd.put(KUBERNETES_A_KEY, KUBERNETES_A_VALUE)?;
    let gone = format!("{svc}/_udp/_gone/c88f1059");
    let srv = format!(r#"{{"host":"kubernetes.default.svc.cluster.local.","port":53,{REST}"#);
    etcd.put(&gone, &srv)?;
    let legacy = |dir: &str, ports: &[&str]| -> Result<()> {
        let dirs: Vec<String> = ports.iter().map(|p| format!("{dir}/{p}")).collect();
        let key = format!("/kube2sky/cluster.local/hidden{dir}");
        etcd.put(&key, &serde_json::to_string(&dirs)?)
    };
    legacy(svc, &["_tcp/_https", "_udp/_gone"])?;
    let dns = "/skydns/local/cluster/svc/kube-system/kube-dns";
    legacy(dns, &["_tcp/_dns-tcp", "_udp/_dns"])?;
    let found = etcd.get_prefix(&format!("{svc}/_udp/_gone/"))?;
    anyhow::ensure!(found == [(gone.clone(), srv)], "set-up: {found:?}");

    let api = apiserver(&[KUBERNETES, KUBE_DNS]).await?;
    api.hold_lists("services");
    let mut k2s = Kube2sky::start(etcd, &api, &INDEX_FLAGS)?;
    k2s.wait_for_log("Successfully added DNS record for Kubernetes service.")
        .await?;
    let left = etcd.get_prefix(&format!("{svc}/_udp/_gone/"))?;
    ensure!(left.is_empty(), "the start-up write left {left:?}");
    api.release_list("services");
    k2s.wait_ready().await?;
    let buckets = [
        (
            KUBERNETES_INDEX_BUCKET.to_string(),
            format!(r#"["{svc}/_tcp/_https"]"#),
        ),
        (
            // FNV-1a 32 of kube-dns's directory is 0x5f1bf82a.
            "/kube2sky/cluster.local/hidden/buckets/2a".to_string(),
            format!(r#"["{dns}/_tcp/_dns-tcp","{dns}/_udp/_dns"]"#),
        ),
    ];
    wait_exact(etcd, HIDDEN_INDEX, &buckets).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v2_index_entry_lost_while_kube2sky_was_down_is_written_again() -> Result<()> {
    // The records are all there, so nothing is written: only reading the
    // hidden directory and finding it unindexed brings the entry back.
    let etcd = &mut Etcd::start_with(test_support::etcd::Api::V2)?;
    let (api, mut k2s, index) = kubernetes_indexed(etcd).await?;
    k2s.kill();
    etcd.del(KUBERNETES_INDEX_BUCKET)?;
    let mut k2s = Kube2sky::start(etcd, &api, &INDEX_FLAGS)?;
    k2s.wait_ready().await?;
    wait_exact(etcd, HIDDEN_INDEX, &[index]).await?;
    wait_exact(etcd, "/skydns", &kubernetes_records()).await
}

/// A kube2sky restarted over its own records and index finds every hidden
/// directory in the index: it says nothing of unindexed directories.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v2_index_kept_across_a_restart_is_found_whole() -> Result<()> {
    let etcd = &mut Etcd::start_with(test_support::etcd::Api::V2)?;
    let (api, mut k2s, index) = kubernetes_indexed(etcd).await?;
    k2s.kill();
    let mut k2s = Kube2sky::start(etcd, &api, &INDEX_FLAGS)?;
    // Ready once the services' first pass is written, which read the
    // hidden directories first.
    k2s.wait_ready().await?;
    let log = k2s.log();
    ensure!(
        !log.contains("missing from the index"),
        "a known directory taken for unindexed:\n{log}"
    );
    wait_exact(etcd, HIDDEN_INDEX, &[index]).await
}

/// kube2sky on the v2 `etcd` with `default/kubernetes` alone, once its
/// hidden `_tcp/_https` directory is in the index: the API server, kube2sky
/// and the index entry (key, value).
async fn kubernetes_indexed(etcd: &Etcd) -> Result<(ApiServerHandle, Kube2sky, (String, String))> {
    let api = apiserver(&[KUBERNETES]).await?;
    let mut k2s = Kube2sky::start(etcd, &api, &INDEX_FLAGS)?;
    k2s.wait_ready().await?;
    let index = (
        KUBERNETES_INDEX_BUCKET.to_string(),
        r#"["/skydns/local/cluster/svc/default/kubernetes/_tcp/_https"]"#.to_string(),
    );
    wait_exact(etcd, HIDDEN_INDEX, std::slice::from_ref(&index)).await?;
    Ok((api, k2s, index))
}

/// The index tests' kube2sky: no PTRs, 1.2's key set.
const INDEX_FLAGS: [&str; 2] = ["--reverse=false", "--spec-records=false"];

/// Where kube2sky keeps its v2 index of hidden directories.
const HIDDEN_INDEX: &str = "/kube2sky/cluster.local/hidden/";

/// The v2 index entry (bucket) of `default/kubernetes`'s hidden
/// directories: FNV-1a 32 of the service directory is 0x597b1f29.
const KUBERNETES_INDEX_BUCKET: &str = "/kube2sky/cluster.local/hidden/buckets/29";

/// The demo `default/kubernetes` A record, as kube2sky writes it.
const KUBERNETES_A_KEY: &str = "/skydns/local/cluster/svc/default/kubernetes/c88f1059";
const KUBERNETES_A_VALUE: &str =
    r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#;

/// Checks that a command run for set-up succeeded.
fn succeeded(what: &str, out: std::process::Output) -> Result<String> {
    anyhow::ensure!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `curl` with `args` (etcd v2's auth API has no non-interactive etcdctl).
fn curl(args: &[&str]) -> Result<String> {
    let out = std::process::Command::new("curl")
        .args(["-fsS", "-X", "PUT"])
        .args(args)
        .output()?;
    succeeded(&format!("curl {args:?}"), out)
}

/// Turns etcd's authentication on: only `root` (password `secret`) may
/// read or write. On v2 the guest role, which may do anything by default,
/// loses its rights.
fn require_root(etcd: &Etcd) -> Result<()> {
    let url = etcd.endpoint();
    match etcd.api() {
        test_support::etcd::Api::V3 => {
            let add = ["user", "add", "root:secret", "--interactive=false"];
            succeeded("user add", etcd.etcdctl(&add)?)?;
            succeeded("auth enable", etcd.etcdctl(&["auth", "enable"])?)?;
        }
        test_support::etcd::Api::V2 => {
            let user = r#"{"user":"root","password":"secret"}"#;
            curl(&[&format!("{url}/v2/auth/users/root"), "-d", user])?;
            curl(&[&format!("{url}/v2/auth/enable")])?;
            let revoke = r#"{"role":"guest","revoke":{"kv":{"read":["/*"],"write":["/*"]}}}"#;
            let guest = format!("{url}/v2/auth/roles/guest");
            curl(&["-u", "root:secret", &guest, "-d", revoke])?;
        }
    }
    Ok(())
}

/// `key`'s value read as `root` (empty when absent).
fn get_as_root(etcd: &Etcd, key: &str) -> Result<String> {
    let out = match etcd.api() {
        test_support::etcd::Api::V3 => {
            etcd.etcdctl(&["--user=root:secret", "get", key, "--print-value-only"])?
        }
        test_support::etcd::Api::V2 => etcd.etcdctl_v2(&["--username=root:secret", "get", key])?,
    };
    // v2's etcdctl fails on an absent key; either way nothing was read.
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Waits until kube2sky logs why it cannot write to `etcd`, naming the
/// endpoint and `why`, and checks it is not ready. Every attempt logs its
/// reason; an attempt may also fail before TLS can say why (hyper's
/// "connection was not ready" when the server closes mid-handshake), so
/// the reason is awaited among the attempts, not read from the first.
async fn refused_with(k2s: &Kube2sky, etcd: &Etcd, why: &str) -> Result<()> {
    let prefix = format!("cannot write to etcd at {}: ", etcd.endpoint());
    k2s.wait_for_log(&prefix).await?;
    eventually("the reason among the attempts", DEADLINE, async || {
        let log = k2s.log();
        let said = log.lines().any(|l| l.contains(&prefix) && l.contains(why));
        anyhow::ensure!(said, "the reason must be {why:?}:\n{log}");
        Ok(())
    })
    .await?;
    anyhow::ensure!(
        k2s.http("/readiness").await.map(|r| r.0) != Some(200),
        "ready without etcd"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube2sky_writes_with_etcd_username_and_password() -> Result<()> {
    let etcd = Etcd::start()?;
    require_root(&etcd)?;
    let api = apiserver(&[KUBERNETES]).await?;
    let flags = ["--etcd-username=root", "--etcd-password=secret"];
    let mut k2s = Kube2sky::start(&etcd, &api, &[&flags[..], &["--reverse=false"]].concat())?;
    k2s.wait_ready().await?;
    eventually("the record, read as root", DEADLINE, async || {
        let value = get_as_root(&etcd, KUBERNETES_A_KEY)?;
        anyhow::ensure!(value == KUBERNETES_A_VALUE, "{value:?}\n{}", k2s.log());
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_credentials_kube2sky_writes_nothing_and_says_why() -> Result<()> {
    let etcd = Etcd::start()?;
    require_root(&etcd)?;
    let api = apiserver(&[KUBERNETES]).await?;
    let k2s = Kube2sky::start(&etcd, &api, &["--reverse=false"])?;
    // etcd's own words for a request without a user.
    let why = match etcd.api() {
        test_support::etcd::Api::V3 => "etcdserver: user name is empty",
        test_support::etcd::Api::V2 => "The request requires user authentication",
    };
    refused_with(&k2s, &etcd, why).await?;
    anyhow::ensure!(get_as_root(&etcd, KUBERNETES_A_KEY)?.is_empty());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_client_certificate_kube2sky_writes_nothing_and_says_why() -> Result<()> {
    let certs = Certificates::make()?;
    let etcd = Etcd::start_tls(&certs)?;
    let api = apiserver(&[KUBERNETES]).await?;
    // It trusts etcd's CA, but has no certificate of its own to show.
    let ca = format!("--etcd-cafile={}", certs.ca().display());
    let k2s = Kube2sky::start(&etcd, &api, &[&ca, "--reverse=false"])?;
    // What the TLS layer says: etcd's alert (v2, over HTTPS), or the
    // connection it closed (v3: gRPC names only its transport, with a text
    // that varies with the moment the handshake failed).
    let why = match etcd.api() {
        test_support::etcd::Api::V3 => "tonic::transport::Error(Transport",
        test_support::etcd::Api::V2 => "received fatal alert: BadCertificate",
    };
    refused_with(&k2s, &etcd, why).await?;
    let records = etcd.get_prefix("/skydns")?;
    anyhow::ensure!(records.is_empty(), "{records:?}");
    Ok(())
}
