//! kube2sky end to end: the real binary against a real etcd and the API test
//! server, driven through kubectl: the demo records, record lifecycles, start-up
//! order, exit behaviour, health endpoints. Needs `etcd`, `etcdctl` and
//! `kubectl` on PATH (a missing one fails the test with an install hint).

#[path = "../../kube2sky/tests/support/mod.rs"]
mod kube2sky_support;

use anyhow::{ensure, Context, Result};
use kube2sky_support::*;
use test_support::dns::dig;
use test_support::etcd::Api;
use test_support::http::metric;
use test_support::skydns::SkydnsBinary;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_gives_exactly_the_section_9_records() -> Result<()> {
    let (etcd, api, kubectl, _k2s) = cluster(&[
        "--reverse=false",
        "--spec-records=false",
        "--spec-records=false",
    ])
    .await?;
    kubectl.with_manifest("create", KUBE_DNS)?;
    create_pod(&api, "default", "p", "1.2.3.4")?;
    wait_exact(&etcd, "/skydns", &demo_records()).await
}

/// What `ETCDCTL_API=2 etcdctl ls --recursive /skydns` lists after the demo
/// cluster (PTRs on): every directory and visible key. The SRV keys under
/// `_tcp`/`_udp` are hidden nodes, which v2 never lists.
const SECTION_9_V2_LISTING: &str = "\
/skydns/local
/skydns/local/cluster
/skydns/local/cluster/svc
/skydns/local/cluster/svc/default
/skydns/local/cluster/svc/default/kubernetes
/skydns/local/cluster/svc/default/kubernetes/c88f1059
/skydns/local/cluster/svc/kube-system
/skydns/local/cluster/svc/kube-system/kube-dns
/skydns/local/cluster/svc/kube-system/kube-dns/21172049
/skydns/local/cluster/pod
/skydns/local/cluster/pod/default
/skydns/local/cluster/pod/default/1-2-3-4
/skydns/local/cluster/pod/default/1-2-3-4/ad70cf0f
/skydns/arpa
/skydns/arpa/in-addr
/skydns/arpa/in-addr/10
/skydns/arpa/in-addr/10/0
/skydns/arpa/in-addr/10/0/0
/skydns/arpa/in-addr/10/0/0/1
/skydns/arpa/in-addr/10/0/0/10
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_v2_lists_the_section_9_layout() -> Result<()> {
    let etcd = Etcd::start_with(Api::V2)?;
    let api = apiserver(&[KUBERNETES, KUBE_DNS]).await?;
    create_pod(&api, "default", "p", "1.2.3.4")?;
    // The legacy manifest's flags: 1.2's key set.
    let mut k2s = Kube2sky::start(&etcd, &api, &["--spec-records=false"])?;
    k2s.wait_ready().await?;
    eventually("the demo layout in etcdctl ls", DEADLINE, async || {
        let out = etcd.etcdctl_v2(&["ls", "--recursive", "/skydns"])?;
        let listing = String::from_utf8_lossy(&out.stdout).into_owned();
        // etcdctl lists in etcd's (unsorted) order: compare as sets of lines.
        let mut got: Vec<&str> = listing.lines().collect();
        let mut want: Vec<&str> = SECTION_9_V2_LISTING.lines().collect();
        got.sort_unstable();
        want.sort_unstable();
        ensure!(
            got == want,
            "etcdctl ls --recursive /skydns gave:\n{listing}"
        );
        Ok(())
    })
    .await?;
    let out = etcd.etcdctl_v2(&[
        "get",
        "/skydns/local/cluster/svc/default/kubernetes/_tcp/_https/c88f1059",
    ])?;
    ensure!(
        String::from_utf8_lossy(&out.stdout)
            == "{\"host\":\"kubernetes.default.svc.cluster.local.\",\"port\":443,\"priority\":10,\"weight\":10,\"ttl\":30,\"targetstrip\":0}\n",
        "hidden SRV key: {out:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ptr_records_point_cluster_ips_at_service_names() -> Result<()> {
    let (etcd, api, kubectl, _k2s) = cluster(&[]).await?;
    kubectl.with_manifest("create", KUBE_DNS)?;
    create_pod(&api, "default", "p", "1.2.3.4")?;
    let expected = pairs(&[
        (
            "/skydns/arpa/in-addr/10/0/0/1",
            a("kubernetes.default.svc.cluster.local."),
        ),
        (
            "/skydns/arpa/in-addr/10/0/0/10",
            a("kube-dns.kube-system.svc.cluster.local."),
        ),
    ]);
    wait_exact(&etcd, "/skydns/arpa/", &expected).await?;
    // And, by default, the DNS specification's schema version.
    let mut local = demo_records();
    local.push((
        "/skydns/local/cluster/dns-version".to_string(),
        r#"{"text":"1.1.0","ttl":30,"targetstrip":0}"#.to_string(),
    ));
    local.sort();
    wait_exact(&etcd, "/skydns/local/", &local).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_opens_only_after_the_kubernetes_records_exist() -> Result<()> {
    let etcd = Etcd::start()?;
    let api = apiserver(&[]).await?;
    let kubectl = Kubectl::new(&api.url())?;
    let mut k2s = Kube2sky::start(
        &etcd,
        &api,
        &[
            "--reverse=false",
            "--spec-records=false",
            "--spec-records=false",
        ],
    )?;
    k2s.wait_for_log("waiting for service default/kubernetes")
        .await?;
    ensure!(
        k2s.http("/readiness").await.is_none(),
        "readiness must be closed before default/kubernetes exists"
    );
    kubectl.with_manifest("create", KUBERNETES)?;
    k2s.wait_ready().await?;
    let keys = keys_under(&etcd, "/skydns/local/cluster/svc/default/kubernetes/")?;
    ensure!(
        keys == [
            "/skydns/local/cluster/svc/default/kubernetes/_tcp/_https/c88f1059",
            "/skydns/local/cluster/svc/default/kubernetes/c88f1059"
        ],
        "records must exist when readiness opens: {keys:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_ip_and_external_name_lifecycle_through_kubectl() -> Result<()> {
    let (etcd, _api, kubectl, _k2s) = cluster(&[]).await?;
    let dir = "/skydns/local/cluster/svc/default/web/";
    let h = label("10.0.0.50");
    let srv = |port| srv("web.default.svc.cluster.local.", port);
    kubectl.with_manifest(
        "create",
        &svc_manifest("web", "10.0.0.50", &[("http", "TCP", 80)]),
    )?;
    let mut expected = pairs(&[
        (&format!("{dir}{h}"), a("10.0.0.50")),
        (&format!("{dir}_tcp/_http/{h}"), srv(80)),
    ]);
    wait_exact(&etcd, dir, &expected).await?;
    wait_exact(
        &etcd,
        "/skydns/arpa/in-addr/10/0/0/50",
        &pairs(&[(
            "/skydns/arpa/in-addr/10/0/0/50",
            a("web.default.svc.cluster.local."),
        )]),
    )
    .await?;

    kubectl.with_manifest(
        "replace",
        &svc_manifest(
            "web",
            "10.0.0.50",
            &[("http", "TCP", 80), ("dns", "UDP", 53)],
        ),
    )?;
    expected.push((format!("{dir}_udp/_dns/{h}"), srv(53)));
    expected.sort();
    wait_exact(&etcd, dir, &expected).await?;

    kubectl.run(&["delete", "service", "web"])?;
    wait_exact(&etcd, dir, &[]).await?;
    wait_exact(&etcd, "/skydns/arpa/in-addr/10/0/0/50", &[]).await?;

    let ext = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"ext","namespace":"default"},
                  "spec":{"type":"ExternalName","externalName":"example.com"}}"#;
    kubectl.with_manifest("create", ext)?;
    let key = format!(
        "/skydns/local/cluster/svc/default/ext/{}",
        label("example.com.")
    );
    wait_exact(
        &etcd,
        "/skydns/local/cluster/svc/default/ext/",
        &pairs(&[(&key, a("example.com."))]),
    )
    .await?;
    kubectl.run(&["delete", "service", "ext"])?;
    wait_exact(&etcd, "/skydns/local/cluster/svc/default/ext/", &[]).await
}

fn endpoints_manifest(addresses: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Endpoints","metadata":{{"name":"db","namespace":"default",
             "annotations":{{"endpoints.beta.kubernetes.io/hostnames-map":"{{\"10.244.0.2\":{{\"HostName\":\"db-1\"}}}}"}}}},
           "subsets":[{{"addresses":[{addresses}],"ports":[{{"name":"pg","protocol":"TCP","port":5432}}]}}]}}"#
    )
}

/// A service with more keys than one page of a read (v3: kube2sky reads a
/// round's keys in one transaction, their first pages sharing one page):
/// the rest is read page by page at the same revision, so every stale key
/// is found and deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headless_service_of_many_pages_shrinks_to_exactly_its_endpoints() -> Result<()> {
    let etcd = Etcd::start_with_flags(Api::V3, &["--max-txn-ops=1024"])?;
    let api = apiserver(&[KUBERNETES]).await?;
    let kubectl = api.kubectl()?;
    let flags = ["--endpoints-source=endpoints", "--etcd-api=v3"];
    let mut k2s = Kube2sky::start(&etcd, &api, &flags)?;
    k2s.wait_ready().await?;
    let dir = "/skydns/local/cluster/svc/default/db/";
    let headless = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"db","namespace":"default"},
                       "spec":{"clusterIP":"None","ports":[{"name":"pg","protocol":"TCP","port":5432}]}}"#;
    kubectl.with_manifest("create", headless)?;
    let addresses = |n: usize| {
        (0..n)
            .map(|i| format!(r#"{{"ip":"10.244.{}.{}"}}"#, i / 200, i % 200 + 1))
            .collect::<Vec<_>>()
            .join(",")
    };
    // An A and an SRV key per endpoint: 600 keys, over one page (500).
    kubectl.with_manifest("create", &endpoints_manifest(&addresses(300)))?;
    wait_for_keys(&etcd, dir, 600).await?;
    kubectl.with_manifest("replace", &endpoints_manifest(&addresses(100)))?;
    wait_for_keys(&etcd, dir, 200).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_service_endpoints_lifecycle_through_kubectl() -> Result<()> {
    // v1 Endpoints: the hostnames-map annotation (1.2) exists only there;
    // the EndpointSlices mirrored from them carry no hostname from it.
    let (etcd, _api, kubectl, _k2s) = cluster(&["--endpoints-source=endpoints"]).await?;
    let dir = "/skydns/local/cluster/svc/default/db/";
    let headless = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"db","namespace":"default"},
                       "spec":{"clusterIP":"None","ports":[{"name":"pg","protocol":"TCP","port":5432}]}}"#;
    kubectl.with_manifest("create", headless)?;
    let three = r#"{"ip":"10.244.0.1","hostname":"db-0"},{"ip":"10.244.0.2"},{"ip":"10.244.0.3"}"#;
    kubectl.with_manifest("create", &endpoints_manifest(three))?;
    let srv = |label: &str| srv(&format!("{label}.db.default.svc.cluster.local."), 5432);
    let h3 = label("10.244.0.3");
    let mut expected = pairs(&[
        (&format!("{dir}db-0"), a("10.244.0.1")),
        (&format!("{dir}_tcp/_pg/db-0"), srv("db-0")),
        (&format!("{dir}db-1"), a("10.244.0.2")),
        (&format!("{dir}_tcp/_pg/db-1"), srv("db-1")),
        (&format!("{dir}{h3}"), a("10.244.0.3")),
        (&format!("{dir}_tcp/_pg/{h3}"), srv(h3)),
    ]);
    wait_exact(&etcd, dir, &expected).await?;

    kubectl.with_manifest(
        "replace",
        &endpoints_manifest(r#"{"ip":"10.244.0.1","hostname":"db-0"},{"ip":"10.244.0.2"}"#),
    )?;
    expected.retain(|(k, _)| !k.ends_with(&h3));
    wait_exact(&etcd, dir, &expected).await?;

    kubectl.run(&["delete", "endpoints", "db"])?;
    wait_exact(&etcd, dir, &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_records_follow_pods_and_can_be_turned_off() -> Result<()> {
    let (etcd, api, kubectl, k2s) = cluster(&[]).await?;
    create_pod(&api, "default", "p", "10.244.9.9")?;
    let key = format!(
        "/skydns/local/cluster/pod/default/10-244-9-9/{}",
        label("10.244.9.9")
    );
    wait_exact(
        &etcd,
        "/skydns/local/cluster/pod/",
        &pairs(&[(&key, a("10.244.9.9"))]),
    )
    .await?;
    kubectl.run(&["delete", "pod", "p", "--wait=false"])?;
    wait_exact(&etcd, "/skydns/local/cluster/pod/", &[]).await?;
    drop(k2s);

    let _off = {
        let mut k = Kube2sky::start(&etcd, &api, &["--pods=false"])?;
        k.wait_ready().await?;
        k
    };
    create_pod(&api, "default", "q", "10.244.9.10")?;
    // With pods off there is no pods watch to wait on: the probe orders
    // the services watch only, so it gives a pods write that should not
    // be there time to land, not a proof that none will.
    probe_handled(&etcd, &kubectl, "10.0.0.99").await?;
    ensure!(
        keys_under(&etcd, "/skydns/local/cluster/pod/")?.is_empty(),
        "--pods=false must write no pod records"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutation_timeout_exits_non_zero_naming_the_key() -> Result<()> {
    // Readiness opens once the first lists are written; without pods and
    // PTRs nothing else is queued then, so `t`'s is the first scope that
    // can time out (with pods, a pod directory's sync could be named).
    let (mut etcd, _api, kubectl, mut k2s) = cluster(&[
        "--etcd-mutation-timeout=1s",
        "--reverse=false",
        "--spec-records=false",
        "--pods=false",
    ])
    .await?;
    etcd.stop();
    kubectl.with_manifest(
        "create",
        &svc_manifest("t", "10.0.0.90", &[("http", "TCP", 80)]),
    )?;
    // The limit only stops a hung test; the exit comes after one
    // --etcd-mutation-timeout.
    let status = k2s.wait_exit(DEADLINE).await?;
    ensure!(status.code() == Some(1), "a fatal error exits 1: {status}");
    let log = k2s.log();
    let fatal = log
        .lines()
        .find(|l| l.contains("Failed to mutate etcd for"))
        .unwrap_or_default();
    ensure!(
        fatal.contains("using mutator: sync /skydns/local/cluster/svc/default/t/ due to"),
        "the fatal line must name the key:\n{log}"
    );
    Ok(())
}

#[test]
fn a_bad_flag_exits_2_naming_the_flag() -> Result<()> {
    let out = std::process::Command::new(test_support::bins::built_binary("kube2sky"))
        .arg("--etcd-api=v4")
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.code() == Some(2), "exit status {}", out.status);
    ensure!(
        stderr.contains("--etcd-api") && stderr.contains("v4"),
        "{stderr}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_zero() -> Result<()> {
    let (_etcd, _api, _kubectl, mut k2s) = cluster(&[]).await?;
    k2s.signal(nix::sys::signal::Signal::SIGTERM)?;
    // The limit only stops a hung test.
    let status = k2s.wait_exit(DEADLINE).await?;
    ensure!(status.success(), "SIGTERM must exit 0: {status}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_and_metrics_report_etcd_and_writes() -> Result<()> {
    let (mut etcd, _api, _kubectl, k2s) = cluster(&[]).await?;
    ensure!(
        k2s.http("/healthz").await == Some((200, "ok\n".into())),
        "healthy at start"
    );
    // Literal expectations: the default `kubernetes` service alone makes an
    // A, an SRV (port 443) and a PTR key.
    let metrics = eventually("a complete sync in /metrics", DEADLINE, async || {
        let metrics = k2s.metrics().await?;
        let age = metric(&metrics, "kube2sky_last_sync_age_seconds");
        ensure!(age.is_some_and(|a| a >= 0.0), "age {age:?} in:\n{metrics}");
        Ok(metrics)
    })
    .await?;
    let written = metric(&metrics, "kube2sky_records_written_total");
    ensure!(
        written.is_some_and(|n| n >= 3.0),
        "A, SRV and PTR of kubernetes written ({written:?}):\n{metrics}"
    );
    etcd.stop();
    eventually("/healthz failing for etcd", DEADLINE, async || {
        let status = k2s.http("/healthz").await;
        ensure!(
            matches!(&status, Some((503, body)) if body.contains("etcd")),
            "/healthz: {status:?}"
        );
        Ok(())
    })
    .await?;
    let errors = metric(&k2s.metrics().await?, "kube2sky_etcd_errors_total");
    ensure!(
        errors.is_some_and(|n| n >= 1.0),
        "failed etcd requests counted: {errors:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_zero_promptly_while_a_write_is_retried() -> Result<()> {
    let (mut etcd, api, kubectl, mut k2s) = cluster(&["--etcd-mutation-timeout=60s"]).await?;
    tokio::time::timeout(DEADLINE, api.wait_for_open_watches(3))
        .await
        .context("3 watches")?;
    etcd.stop();
    kubectl.with_manifest(
        "create",
        &svc_manifest("t", "10.0.0.91", &[("http", "TCP", 80)]),
    )?;
    k2s.wait_for_log("Failed to mutate etcd using mutator: sync")
        .await?;
    k2s.signal(nix::sys::signal::Signal::SIGTERM)?;
    // Well before the 60 s the write would be retried for (exit 1 then).
    let status = k2s.wait_exit(DEADLINE).await?;
    ensure!(
        status.success(),
        "SIGTERM must exit 0: {status}; log:\n{}",
        k2s.log()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_port_answers_on_ipv4_and_ipv6() -> Result<()> {
    let (_etcd, _api, _kubectl, k2s) = cluster(&[]).await?;
    ensure!(k2s.http("/readiness").await == Some((200, "ok\n".into())));
    ensure!(
        std::net::TcpListener::bind("[::1]:0").is_ok(),
        "this machine has no IPv6 loopback (::1), which this test needs"
    );
    let v6 = test_support::http::get(&format!("http://[::1]:{}/readiness", k2s.port)).await;
    ensure!(
        matches!(&v6, Ok(reply) if reply.status == 200),
        "[::1] must reach the health port like Go's :port: {v6:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ttl_flag_reaches_dig_and_a_new_ttl_rewrites_the_values_in_place() -> Result<()> {
    let flags = ["--reverse=false", "--spec-records=false"];
    let (etcd, api, _kubectl, mut k2s) = cluster(&[flags[0], flags[1], "--ttl=7"]).await?;
    // default/kubernetes's A and SRV records, with TTL `ttl`; the keys are
    // 1.2's (labels of the TTL-30 record) whatever the TTL.
    let kubernetes = |ttl: u32| -> Vec<(String, String)> {
        (demo_records().into_iter())
            .filter(|(k, _)| k.contains("/default/kubernetes/"))
            .map(|(k, v)| (k, v.replace(r#""ttl":30,"#, &format!(r#""ttl":{ttl},"#))))
            .collect()
    };
    let dir = "/skydns/local/cluster/svc/default/kubernetes/";
    wait_exact(&etcd, dir, &kubernetes(7)).await?;
    let name = "kubernetes.default.svc.cluster.local.";
    let skydns = SkydnsBinary::start(&etcd.endpoint(), etcd.api(), &[], name).await?;
    let answer_ttl = || -> Result<String> {
        let out = dig(skydns.ports().dns, &["+noall", "+answer", name, "A"])?;
        let ttl = out.split_whitespace().nth(1).context("an answer")?;
        Ok(ttl.to_string())
    };
    ensure!(answer_ttl()? == "7", "{}", answer_ttl()?);

    k2s.kill();
    let mut k2s = Kube2sky::start(&etcd, &api, &flags)?;
    k2s.wait_ready().await?;
    wait_exact(&etcd, dir, &kubernetes(30)).await?;
    eventually("skydns to answer with TTL 30", DEADLINE, async || {
        let ttl = answer_ttl()?;
        ensure!(ttl == "30", "TTL {ttl}");
        Ok(())
    })
    .await
}
