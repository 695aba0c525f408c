//! skydns `-dnssec` end to end: a real etcd, skydns signing with a key pair
//! BIND's `dnssec-keygen` makes for the test, and BIND's validator `delv`
//! as the judge. With the zone key as its trust anchor (`-a`, `+root=`),
//! delv must call a positive answer and an NXDOMAIN and a NODATA denial
//! "fully validated", for both algorithms; with another key as anchor it
//! must refuse the same answer, so the test cannot pass by validating
//! nothing. `dig` checks the wire: DO queries get RRSIGs and an OPT, the
//! others do not.

mod skydns_support;

use skydns_support::SkyDns;
use std::process::Command;
use test_support::dead::closed_url;
use test_support::dnssec::keygen;
use test_support::etcd::Etcd;
use test_support::tools::require;

const ZONE: &str = "cluster.local.";

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
        "/skydns/local/cluster/svc/default/web/a1",
        r#"{"host":"10.244.1.6","ttl":30}"#,
    ),
    (
        "/skydns/local/cluster/svc/default/web/a2",
        r#"{"host":"10.244.1.7","ttl":30}"#,
    ),
];

/// A delv trust-anchor file holding the DNSKEY of `<base>.key`.
fn anchor(base: &str) -> String {
    let text = std::fs::read_to_string(format!("{base}.key")).unwrap();
    let record = text.lines().find(|l| !l.starts_with(';')).unwrap();
    // cluster.local. IN DNSKEY <flags> <protocol> <algorithm> <base64...>
    let f: Vec<&str> = record.split_whitespace().collect();
    let file = format!("{base}.anchor");
    let key = f[6..].concat();
    let body = format!(
        "trust-anchors {{ \"{ZONE}\" static-key {} {} {} \"{key}\"; }};\n",
        f[3], f[4], f[5]
    );
    std::fs::write(&file, body).unwrap();
    file
}

/// `delv @127.0.0.1 -p PORT -a ANCHOR +root=ZONE NAME TYPE`: its whole
/// output (stdout and stderr, where it reports failures).
async fn delv(port: u16, anchor: &str, name: &str, qtype: &str) -> String {
    let tool = require("delv", "bind9-dnsutils").unwrap();
    let args: Vec<String> = [
        "@127.0.0.1",
        "-p",
        &port.to_string(),
        "-a",
        anchor,
        &format!("+root={ZONE}"),
        "+nomtrace",
        name,
        qtype,
    ]
    .map(String::from)
    .to_vec();
    let out = tokio::task::spawn_blocking(move || Command::new(tool).args(&args).output())
        .await
        .unwrap()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Asserts that delv's output, spaces and tabs made single spaces, holds `want`.
#[track_caller]
fn assert_validated(text: &str, want: &str) {
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(want),
        "want {want:?} in delv's output:\n{text}"
    );
}

async fn signing_is_validated_by_delv(algorithm: &[&str]) {
    let etcd = Etcd::start().unwrap();
    for (k, v) in RECORDS {
        etcd.put(k, v).unwrap();
    }
    let key = keygen(ZONE, algorithm).unwrap();
    let trusted = anchor(&key.base);
    let other = keygen(ZONE, algorithm).unwrap();
    let stranger = anchor(&other.base);
    let flag = format!("-dnssec={}", key.base);
    let dns = SkyDns::start(&etcd, &[&flag]).await;
    let port = dns.port;

    let text = delv(port, &trusted, "kubernetes.default.svc.cluster.local", "A").await;
    assert_validated(&text, "; fully validated");
    assert_validated(
        &text,
        "kubernetes.default.svc.cluster.local. 30 IN A 10.0.0.1",
    );
    let text = delv(port, &trusted, "web.default.svc.cluster.local", "A").await;
    assert_validated(&text, "; fully validated");
    let text = delv(
        port,
        &trusted,
        "_https._tcp.kubernetes.default.svc.cluster.local",
        "SRV",
    )
    .await;
    assert_validated(&text, "; fully validated");
    // A SkyDNS wildcard: the owner is the `*` name itself.
    let text = delv(port, &trusted, "*.default.svc.cluster.local", "A").await;
    assert_validated(&text, "; fully validated");
    let text = delv(port, &trusted, ZONE, "DNSKEY").await;
    assert_validated(&text, "; fully validated");

    // Denials: a name one label below an existing one, one deeper, NODATA.
    for name in [
        "nosuch.default.svc.cluster.local",
        "a.b.nosuch.default.svc.cluster.local",
        "nosuch.cluster.local",
    ] {
        let text = delv(port, &trusted, name, "A").await;
        assert_validated(&text, "; negative response, fully validated");
        assert_validated(&text, "ncache nxdomain");
    }
    let text = delv(
        port,
        &trusted,
        "kubernetes.default.svc.cluster.local",
        "AAAA",
    )
    .await;
    assert_validated(&text, "; negative response, fully validated");
    assert_validated(&text, "ncache nxrrset");

    // The same answers do not validate against another key.
    for (name, qtype) in [
        ("kubernetes.default.svc.cluster.local", "A"),
        ("nosuch.default.svc.cluster.local", "A"),
    ] {
        let text = delv(port, &stranger, name, qtype).await;
        assert!(!text.contains("fully validated"), "{text}");
        assert!(text.contains("resolution failed"), "{text}");
    }

    // On the wire: RRSIGs and an OPT with DO only when asked.
    let signed = dns
        .dig(&["+dnssec", "kubernetes.default.svc.cluster.local", "A"])
        .await;
    assert!(signed.flags.contains(&"ad".into()), "{signed:?}");
    assert!(
        signed
            .answer
            .iter()
            .any(|a| a.contains(" RRSIG A 13 ") || a.contains(" RRSIG A 8 ")),
        "{signed:?}"
    );
    assert!(
        signed.raw.contains("; EDNS: version: 0, flags: do;"),
        "{}",
        signed.raw
    );
    let plain = dns
        .dig(&["kubernetes.default.svc.cluster.local", "A"])
        .await;
    assert_eq!(plain.answer.len(), 1, "{plain:?}");
    assert!(!plain.raw.contains("OPT PSEUDOSECTION"), "{}", plain.raw);

    let metrics = dns.scrape().await;
    let dnssec_ok = test_support::http::metric(&metrics, "skydns_dns_dnssec_ok_count_total");
    assert!(dnssec_ok.is_some_and(|n| n >= 10.0), "{metrics}");
    let misses = "skydns_dns_cache_miss_count_total{type=\"signature\"}";
    assert!(
        test_support::http::metric(&metrics, misses).is_some_and(|n| n >= 1.0),
        "{metrics}"
    );
    dns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ecdsa_signed_answers_and_denials_validate() {
    signing_is_validated_by_delv(&["-a", "ECDSAP256SHA256"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rsa_signed_answers_and_denials_validate() {
    signing_is_validated_by_delv(&["-a", "RSASHA256", "-b", "2048"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_for_another_domain_stops_start_up() {
    let key = keygen("example.org.", &["-a", "ECDSAP256SHA256"]).unwrap();
    let argv = [
        "skydns".to_string(),
        "-domain=cluster.local.".into(),
        // Nothing listens there (bound and closed): no etcd config key is read.
        format!("-machines={}", closed_url()),
        format!("-dnssec={}", key.base),
    ];
    let flags = skydns::config::parse_args(argv.map(Into::into)).unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let err = skydns::run(flags, stop).await.unwrap_err().to_string();
    assert!(
        err.contains("-dnssec") && err.contains("example.org."),
        "{err}"
    );
}
