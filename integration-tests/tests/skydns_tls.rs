//! skydns against an etcd that requires TLS client certificates
//! (`-machines=https://… -tls-pem -tls-key -ca-cert`), with certificates
//! made by `openssl` for the test: records are served with the right
//! certificate, and without it skydns never syncs (SERVFAIL, not stale data).

mod skydns_support;

use skydns_support::SkyDns;
use test_support::etcd::{Api, Etcd};
use test_support::tls::Certificates;

const RECORD: (&str, &str) = (
    "/skydns/local/cluster/svc/default/kubernetes/c88f1059",
    r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skydns_reads_an_etcd_that_requires_client_certificates() {
    let certs = Certificates::make().unwrap();
    let etcd = Etcd::start_tls(&certs).unwrap();
    etcd.put(RECORD.0, RECORD.1).unwrap();

    let api = etcd.api().skydns_flags().iter().map(|f| f.to_string());
    let tls = [
        format!("-machines={}", etcd.endpoint()),
        format!("-tls-pem={}", certs.cert("client").display()),
        format!("-tls-key={}", certs.key("client").display()),
        format!("-ca-cert={}", certs.ca().display()),
    ];
    let tls: Vec<String> = tls.into_iter().chain(api.clone()).collect();
    let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
    let dns = SkyDns::start_with_etcd_url(&tls, "kubernetes.default.svc.cluster.local").await;
    dns.assert_kubernetes_resolves().await;
    dns.shutdown().await;

    // Without the client certificate etcd refuses us: no snapshot, SERVFAIL.
    let no_cert = [
        format!("-machines={}", etcd.endpoint()),
        format!("-ca-cert={}", certs.ca().display()),
    ];
    let no_cert: Vec<String> = no_cert.into_iter().chain(api).collect();
    let no_cert: Vec<&str> = no_cert.iter().map(String::as_str).collect();
    let dns = SkyDns::start_unsynced(&no_cert).await;
    // Refused, then refused again on the retry: it never syncs.
    dns.wait_for_store_errors(2).await;
    for _ in 0..3 {
        let r = dns
            .dig(&["kubernetes.default.svc.cluster.local", "A"])
            .await;
        assert_eq!(r.status, "SERVFAIL", "{r:?}");
    }
    dns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skydns_authenticates_to_etcd_with_user_and_password() {
    let etcd = Etcd::start().unwrap();
    etcd.put(RECORD.0, RECORD.1).unwrap();
    match etcd.api() {
        Api::V3 => enable_v3_auth(&etcd),
        Api::V2 => enable_v2_auth(&etcd),
    }
    let machines = format!("-machines={}", etcd.endpoint());
    let api = etcd.api().skydns_flags();
    let dns = SkyDns::start_with_etcd_url(
        &[
            &[machines.as_str(), "-username=skydns", "-password=dnspw"],
            api,
        ]
        .concat(),
        "kubernetes.default.svc.cluster.local",
    )
    .await;
    dns.assert_kubernetes_resolves().await;
    dns.shutdown().await;

    let wrong = [
        &[machines.as_str(), "-username=skydns", "-password=wrong"],
        api,
    ]
    .concat();
    let dns = SkyDns::start_unsynced(&wrong).await;
    // Refused, then refused again on the retry: it never syncs.
    dns.wait_for_store_errors(2).await;
    let r = dns
        .dig(&["kubernetes.default.svc.cluster.local", "A"])
        .await;
    assert_eq!(r.status, "SERVFAIL", "wrong password: never synced: {r:?}");
    dns.shutdown().await;
}

/// v3 auth: user `skydns` may read `/skydns/`, nobody else anything.
fn enable_v3_auth(etcd: &Etcd) {
    for args in [
        &["user", "add", "root:s3cret"][..],
        &["user", "add", "skydns:dnspw"],
        &["role", "add", "dns-reader"],
        &[
            "role",
            "grant-permission",
            "dns-reader",
            "--prefix=true",
            "read",
            "/skydns/",
        ],
        &["user", "grant-role", "skydns", "dns-reader"],
        &["auth", "enable"],
    ] {
        let out = etcd.etcdctl(args).unwrap();
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// v2 auth (a separate store in etcd 3.x): user `skydns` may read
/// `/skydns*` (the `*` form is what allows recursive reads), and the `guest` role, which may do anything by default,
/// may do nothing.
fn enable_v2_auth(etcd: &Etcd) {
    let base = format!("{}/v2/auth", etcd.endpoint());
    for (path, body, user) in [
        (
            "/users/root",
            r#"{"user":"root","password":"s3cret"}"#,
            None,
        ),
        (
            "/roles/dns-reader",
            r#"{"role":"dns-reader","permissions":{"kv":{"read":["/skydns*"],"write":[]}}}"#,
            None,
        ),
        (
            "/users/skydns",
            r#"{"user":"skydns","password":"dnspw","roles":["dns-reader"]}"#,
            None,
        ),
        ("/enable", "", None),
        (
            "/roles/guest",
            r#"{"role":"guest","revoke":{"kv":{"read":["/*"],"write":["/*"]}}}"#,
            Some("root:s3cret"),
        ),
    ] {
        let mut curl = test_support::tools::command("curl", "curl").unwrap();
        curl.args(["-sS", "-f", "-X", "PUT", "--max-time", "10"])
            .args(["-H", "Content-Type: application/json", "-d", body])
            .arg(format!("{base}{path}"));
        if let Some(user) = user {
            curl.args(["-u", user]);
        }
        let out = curl.output().expect("running curl");
        assert!(
            out.status.success(),
            "PUT {path}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
