//! skydns end to end: a real etcd, the demo records of docs/architecture.md ("What it writes")
//! (and those the Kubernetes DNS specification 1.1.0 adds)
//! written with `etcdctl`, skydns running in-process on a free port, and
//! `dig` as the client.

mod skydns_support;

use skydns_support::{SkyDns, KUBERNETES_A};
use test_support::dead::silent_upstream;
use test_support::etcd::{Api, Etcd};
use test_support::ports::{is_conflict, on_free_port};

const RECORDS: &[(&str, &str)] = &[
    (
        "/skydns/local/cluster/svc/default/kubernetes/c88f1059",
        r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
    (
        "/skydns/local/cluster/svc/default/kubernetes/_tcp/_https/c88f1059",
        r#"{"host":"kubernetes.default.svc.cluster.local.","port":443,"priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
    (
        "/skydns/local/cluster/svc/kube-system/kube-dns/21172049",
        r#"{"host":"10.0.0.10","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
    (
        "/skydns/local/cluster/svc/kube-system/kube-dns/_udp/_dns/21172049",
        r#"{"host":"kube-dns.kube-system.svc.cluster.local.","port":53,"priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
    (
        "/skydns/local/cluster/svc/kube-system/kube-dns/_tcp/_dns-tcp/21172049",
        r#"{"host":"kube-dns.kube-system.svc.cluster.local.","port":53,"priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
    (
        "/skydns/local/cluster/pod/default/1-2-3-4/ad70cf0f",
        r#"{"host":"1.2.3.4","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
    (
        "/skydns/arpa/in-addr/10/0/0/1",
        r#"{"host":"kubernetes.default.svc.cluster.local.","ttl":30}"#,
    ),
];

fn seeded_etcd() -> Etcd {
    let etcd = Etcd::start().unwrap();
    for (k, v) in RECORDS {
        etcd.put(k, v).unwrap();
    }
    etcd
}

const SOA: &str = "cluster.local. 60 IN SOA ns.dns.cluster.local. hostmaster.skydns.local.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dig_gets_the_reference_answers() {
    let etcd = seeded_etcd();
    let dns = SkyDns::start(&etcd, &[]).await;

    let r = dns
        .dig(&["kubernetes.default.svc.cluster.local", "A"])
        .await;
    assert_eq!(r.status, "NOERROR");
    assert!(
        r.flags.contains(&"aa".into()) && r.flags.contains(&"ra".into()),
        "{r:?}"
    );
    assert_eq!(r.answer, [KUBERNETES_A]);

    let r = dns
        .dig(&["_https._tcp.kubernetes.default.svc.cluster.local", "SRV"])
        .await;
    assert_eq!(r.answer, ["_https._tcp.kubernetes.default.svc.cluster.local. 30 IN SRV 10 100 443 kubernetes.default.svc.cluster.local."], "{r:?}");
    assert_eq!(r.additional, [KUBERNETES_A]);

    let r = dns
        .dig(&["kubernetes.default.svc.cluster.local", "SRV"])
        .await;
    assert_eq!(r.answer, ["kubernetes.default.svc.cluster.local. 30 IN SRV 10 100 0 c88f1059.kubernetes.default.svc.cluster.local."]);
    assert_eq!(
        r.additional,
        ["c88f1059.kubernetes.default.svc.cluster.local. 30 IN A 10.0.0.1"]
    );

    for (name, qtype) in [
        ("kubernetes.default.svc.cluster.local", "AAAA"),
        ("kubernetes.default.svc.cluster.local", "TXT"),
    ] {
        let r = dns.dig(&[name, qtype]).await;
        assert_eq!(r.status, "NOERROR", "{qtype}");
        assert!(r.answer.is_empty(), "{qtype}: {r:?}");
        assert!(r.authority[0].starts_with(SOA), "{qtype}: {r:?}");
    }

    let r = dns.dig(&["nosuch.default.svc.cluster.local", "A"]).await;
    assert_eq!(r.status, "NXDOMAIN");
    assert!(r.flags.contains(&"aa".into()));
    assert!(
        r.authority[0].starts_with(SOA) && r.authority[0].ends_with("28800 7200 604800 60"),
        "{r:?}"
    );

    let r = dns.dig(&["1-2-3-4.default.pod.cluster.local", "A"]).await;
    assert_eq!(
        r.answer,
        ["1-2-3-4.default.pod.cluster.local. 30 IN A 1.2.3.4"]
    );

    let r = dns.dig(&["cluster.local", "SOA"]).await;
    assert!(
        r.answer[0].starts_with(
            "cluster.local. 3600 IN SOA ns.dns.cluster.local. hostmaster.skydns.local."
        ),
        "{r:?}"
    );

    assert_eq!(dns.dig(&["cluster.local", "NS"]).await.status, "NXDOMAIN");

    let r = dns.dig(&["default.svc.cluster.local", "A"]).await;
    assert_eq!(r.answer, ["default.svc.cluster.local. 30 IN A 10.0.0.1"]);
    let r = dns.dig(&["*.kube-system.svc.cluster.local", "A"]).await;
    assert_eq!(
        r.answer,
        ["*.kube-system.svc.cluster.local. 30 IN A 10.0.0.10"]
    );

    let r = dns.dig(&["-x", "10.0.0.1"]).await;
    assert_eq!(
        r.answer,
        ["1.0.0.10.in-addr.arpa. 30 IN PTR kubernetes.default.svc.cluster.local."]
    );
    assert!(
        !r.flags.contains(&"aa".into()),
        "PTR is not authoritative: {r:?}"
    );

    let r = dns.dig(&["foo.", "A"]).await;
    assert_eq!(r.status, "SERVFAIL");
    assert_eq!(
        dns.dig(&["kubernetes.default.svc.cluster.local", "ANY"])
            .await
            .status,
        "REFUSED"
    );

    let r = dns
        .dig(&["+tcp", "kubernetes.default.svc.cluster.local", "A"])
        .await;
    assert_eq!(r.answer, [KUBERNETES_A]);
    let r = dns
        .dig(&[
            "+edns=0",
            "+bufsize=4096",
            "kubernetes.default.svc.cluster.local",
            "A",
        ])
        .await;
    assert_eq!(r.answer.len(), 1);
    dns.shutdown().await;
}

/// What kube2sky writes for the Kubernetes DNS specification 1.1.0:
/// an address with two names (both reverse trees), an ExternalName
/// service, the `dns-version` TXT, a dual-stack service and a headless
/// hostname shared by two addresses.
const SPEC_RECORDS: &[(&str, &str)] = &[
    (
        "/skydns/arpa/in-addr/10/0/0/7/1a",
        r#"{"host":"y.a.svc.cluster.local.","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
    (
        "/skydns/arpa/in-addr/10/0/0/7/2b",
        r#"{"host":"x.a.svc.cluster.local.","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
    (
        "/skydns/arpa/ip6/f/d/0/0/0/0/1/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/1/3c",
        r#"{"host":"both.ds.svc.cluster.local.","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
    (
        "/skydns/local/cluster/svc/default/ext/5d1e2f3a",
        r#"{"host":"example.com.","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
    (
        "/skydns/local/cluster/dns-version",
        r#"{"text":"1.1.0","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
    (
        "/skydns/local/cluster/svc/ds/both/a1",
        r#"{"host":"10.0.1.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
    (
        "/skydns/local/cluster/svc/ds/both/a2",
        r#"{"host":"fd00:10::1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
    (
        "/skydns/local/cluster/svc/ds/hl/w-0/b1",
        r#"{"host":"10.0.2.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
    (
        "/skydns/local/cluster/svc/ds/hl/w-0/b2",
        r#"{"host":"10.0.2.2","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    ),
];

fn sorted(mut lines: Vec<String>) -> Vec<String> {
    lines.sort();
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dig_gets_the_specification_1_1_0_records() {
    let etcd = seeded_etcd();
    for (k, v) in SPEC_RECORDS {
        etcd.put(k, v).unwrap();
    }
    // A forwarder that never answers: the ExternalName target cannot resolve.
    let dead = silent_upstream();
    let upstream = format!("-nameservers={}", dead.addr());
    let dns = SkyDns::start(&etcd, &[&upstream, "-rtimeout=300ms"]).await;

    let r = dns.dig(&["-x", "10.0.0.7"]).await;
    assert_eq!(
        r.answer,
        [
            "7.0.0.10.in-addr.arpa. 30 IN PTR y.a.svc.cluster.local.",
            "7.0.0.10.in-addr.arpa. 30 IN PTR x.a.svc.cluster.local.",
        ],
        "{r:?}"
    );
    let r = dns.dig(&["-x", "fd00:10::1"]).await;
    assert_eq!(
        r.answer,
        ["1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.0.0.0.d.f.ip6.arpa. 30 IN PTR both.ds.svc.cluster.local."],
        "{r:?}"
    );

    let ext = "ext.default.svc.cluster.local";
    let cname = "ext.default.svc.cluster.local. 30 IN CNAME example.com.";
    for qtype in ["CNAME", "A", "AAAA"] {
        let r = dns.dig(&["+time=20", ext, qtype]).await;
        assert_eq!(r.status, "NOERROR", "{qtype}: {r:?}");
        assert_eq!(r.answer, [cname], "{qtype}: {r:?}");
    }

    let r = dns.dig(&["dns-version.cluster.local", "TXT"]).await;
    assert_eq!(r.answer, ["dns-version.cluster.local. 30 IN TXT \"1.1.0\""]);
    for qtype in ["A", "AAAA"] {
        let r = dns.dig(&["dns-version.cluster.local", qtype]).await;
        assert_eq!(r.status, "NOERROR", "{qtype}: {r:?}");
        assert!(r.answer.is_empty(), "{qtype}: {r:?}");
        assert!(r.authority[0].starts_with(SOA), "{qtype}: {r:?}");
    }

    let r = dns.dig(&["both.ds.svc.cluster.local", "A"]).await;
    assert_eq!(r.answer, ["both.ds.svc.cluster.local. 30 IN A 10.0.1.1"]);
    let r = dns.dig(&["both.ds.svc.cluster.local", "AAAA"]).await;
    assert_eq!(
        r.answer,
        ["both.ds.svc.cluster.local. 30 IN AAAA fd00:10::1"]
    );
    let w0 = dns.dig(&["w-0.hl.ds.svc.cluster.local", "A"]).await;
    assert_eq!(
        sorted(w0.answer),
        [
            "w-0.hl.ds.svc.cluster.local. 30 IN A 10.0.2.1",
            "w-0.hl.ds.svc.cluster.local. 30 IN A 10.0.2.2",
        ]
    );
    let hl = dns.dig(&["hl.ds.svc.cluster.local", "A"]).await;
    assert_eq!(
        sorted(hl.answer),
        [
            "hl.ds.svc.cluster.local. 30 IN A 10.0.2.1",
            "hl.ds.svc.cluster.local. 30 IN A 10.0.2.2",
        ]
    );
    dns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_changes_are_followed() {
    let etcd = seeded_etcd();
    let dns = SkyDns::start(&etcd, &[]).await;
    let key = "/skydns/local/cluster/svc/default/web/0a000005";
    etcd.put(
        key,
        r#"{"host":"10.0.0.5","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
    )
    .unwrap();
    dns.wait_for("web.default.svc.cluster.local", "A", |r| {
        r.answer == ["web.default.svc.cluster.local. 30 IN A 10.0.0.5"]
    })
    .await;

    etcd.del(key).unwrap();
    let emptied = emptied_dir_status(etcd.api());
    dns.wait_for("web.default.svc.cluster.local", "A", |r| {
        r.status == emptied && r.answer.is_empty()
    })
    .await;
    dns.shutdown().await;
}

/// What a name whose last key was deleted answers: in etcd v2 its
/// directory stays, a name that exists (NODATA); v3 has no directories.
fn emptied_dir_status(api: Api) -> &'static str {
    match api {
        Api::V2 => "NOERROR",
        Api::V3 => "NXDOMAIN",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_value_is_skipped_and_the_rest_still_answers() {
    let etcd = seeded_etcd();
    etcd.put("/skydns/local/cluster/svc/default/broken/1", "{not json")
        .unwrap();
    etcd.put(
        "/skydns/local/cluster/svc/default/half/1",
        r#"{"host":"10.0.0.7"}"#,
    )
    .unwrap();
    etcd.put(
        "/skydns/local/cluster/svc/default/half/2",
        r#"{"host":"10.0.0.8","port":"x"}"#,
    )
    .unwrap();
    let dns = SkyDns::start(&etcd, &[]).await;
    assert_eq!(
        dns.dig(&["kubernetes.default.svc.cluster.local", "A"])
            .await
            .answer
            .len(),
        1
    );
    // Only the malformed key is below `broken`: a directory with no
    // usable record in v2 (NODATA), nothing at all in v3.
    let broken = dns.dig(&["broken.default.svc.cluster.local", "A"]).await;
    assert_eq!(broken.status, emptied_dir_status(etcd.api()), "{broken:?}");
    assert!(broken.answer.is_empty(), "{broken:?}");
    let r = dns.dig(&["half.default.svc.cluster.local", "A"]).await;
    assert_eq!(
        r.answer,
        ["half.default.svc.cluster.local. 3600 IN A 10.0.0.7"]
    );
    dns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_continue_while_etcd_is_down_and_changes_flow_when_it_is_back() {
    let mut etcd = seeded_etcd();
    let dns = SkyDns::start(&etcd, &[]).await;
    etcd.stop();
    // Answers after skydns has seen the store fail, not before it noticed.
    dns.wait_for_store_errors(1).await;
    for _ in 0..5 {
        dns.assert_kubernetes_resolves().await;
    }
    etcd.restart().unwrap();
    etcd.put(
        "/skydns/local/cluster/svc/default/after/1",
        r#"{"host":"10.0.0.9","ttl":30}"#,
    )
    .unwrap();
    dns.wait_for("after.default.svc.cluster.local", "A", |r| {
        r.answer.len() == 1
    })
    .await;

    // The pod's etcd restarting on an empty emptyDir: skydns follows it.
    etcd.restart_empty().unwrap();
    dns.wait_for("kubernetes.default.svc.cluster.local", "A", |r| {
        r.status == "NXDOMAIN"
    })
    .await;
    etcd.put(RECORDS[0].0, RECORDS[0].1).unwrap();
    dns.wait_for("kubernetes.default.svc.cluster.local", "A", |r| {
        r.answer.len() == 1
    })
    .await;
    dns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_etcd_config_key_overrides_flags() {
    let etcd = seeded_etcd();
    etcd.put(
        "/skydns/config",
        r#"{"min_ttl":5,"hostmaster":"dns-admin@example.org"}"#,
    )
    .unwrap();
    let dns = SkyDns::start(&etcd, &[]).await;
    let r = dns.dig(&["nosuch.default.svc.cluster.local", "A"]).await;
    assert!(
        r.authority[0]
            .starts_with("cluster.local. 5 IN SOA ns.dns.cluster.local. dns-admin.example.org."),
        "{r:?}"
    );
    dns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_without_the_v2_api_stops_start_up_naming_the_flag() {
    let etcd = Etcd::start_without_v2().unwrap();
    // Its start-up error; a port taken in between means another port.
    let text = on_free_port(async |port| {
        let argv = [
            "skydns".to_string(),
            "-domain=cluster.local.".into(),
            format!("-addr=127.0.0.1:{port}"),
            format!("-machines={}", etcd.endpoint()),
        ];
        let flags = skydns::config::parse_args(argv.map(std::ffi::OsString::from))?;
        let run = skydns::run(flags, tokio_util::sync::CancellationToken::new());
        let error = tokio::time::timeout(std::time::Duration::from_secs(20), run)
            .await
            .expect("start-up must stop, not retry forever")
            .expect_err("no v2 API: an error");
        match error.to_string() {
            text if is_conflict(&text) => Err(error),
            text => Ok(text),
        }
    })
    .await
    .unwrap();
    assert!(
        text.contains("--enable-v2") && text.contains("-etcd3"),
        "{text}"
    );
}

/// `-path-prefix` moves the whole tree: the records and the `config` key
/// are read under `/<prefix>/`, and nothing under the default `/skydns/`
/// answers or configures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_default_path_prefix_is_the_only_tree_read() {
    let etcd = Etcd::start().unwrap();
    for (key, value) in [
        (
            "/kubedns/local/cluster/svc/default/kubernetes/c88f1059",
            r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
        ),
        // No ttl of its own: it gets the configured one.
        (
            "/kubedns/local/cluster/svc/default/plain/3e8f4a4b",
            r#"{"host":"10.0.0.3"}"#,
        ),
        ("/kubedns/config", r#"{"ttl":77}"#),
        (
            "/skydns/local/cluster/svc/default/other/5e0c2f3a",
            r#"{"host":"10.0.0.2","ttl":30}"#,
        ),
        ("/skydns/config", r#"{"ttl":99}"#),
    ] {
        etcd.put(key, value).unwrap();
    }
    let dns = SkyDns::start(&etcd, &["-path-prefix=kubedns"]).await;
    dns.assert_kubernetes_resolves().await;
    let r = dns.dig(&["plain.default.svc.cluster.local", "A"]).await;
    assert_eq!(
        r.answer,
        ["plain.default.svc.cluster.local. 77 IN A 10.0.0.3"],
        "{}",
        r.raw
    );
    let r = dns.dig(&["other.default.svc.cluster.local", "A"]).await;
    assert_eq!(r.status, "NXDOMAIN", "read outside the prefix: {}", r.raw);
    dns.shutdown().await;
}
