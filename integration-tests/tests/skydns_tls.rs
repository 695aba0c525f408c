//! skydns against an etcd that requires TLS client certificates
//! (`-machines=https://… -tls-pem -tls-key -ca-cert`), with certificates
//! made by `openssl` for the test: records are served with the right
//! certificate, and without it skydns never syncs (SERVFAIL, not stale data).

mod skydns_support;

use integration_tests::etcd::{free_port, require_binary, Api, Etcd};
use skydns_support::{wait_for_store_errors, SkyDns};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RECORD: (&str, &str) = (
    "/skydns/local/cluster/svc/default/kubernetes/c88f1059",
    r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
);

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate.
fn make_certificates(dir: &Path) {
    let days = ["-days", "2"];
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            "/CN=test-ca",
            days[0],
            days[1],
        ],
    );
    for (name, ext) in [
        (
            "server",
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
        ),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ] {
        std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
                "-subj",
                &format!("/CN={name}"),
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &format!("{name}.crt"),
                "-extfile",
                &format!("{name}.ext"),
                days[0],
                days[1],
            ],
        );
    }
}

struct TlsEtcd {
    child: Child,
    url: String,
}

impl Drop for TlsEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `key` through the pipeline's API, with the client certificate.
fn put_tls(etcd: &TlsEtcd, dir: &Path, key: &str, value: &str) -> std::process::Output {
    match Api::from_env() {
        Api::V3 => etcdctl(etcd, dir, &["put", key, value]),
        Api::V2 => Command::new("etcdctl")
            .env("ETCDCTL_API", "2")
            .arg(format!("--endpoints={}", etcd.url))
            .args([
                "--ca-file=ca.crt",
                "--cert-file=client.crt",
                "--key-file=client.key",
            ])
            .args(["set", "--", key, value])
            .current_dir(dir)
            .output()
            .expect("running etcdctl (v2)"),
    }
}

fn etcdctl(etcd: &TlsEtcd, dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", etcd.url))
        .args([
            "--cacert=ca.crt",
            "--cert=client.crt",
            "--key=client.key",
            "--command-timeout=2s",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running etcdctl")
}

fn start_tls_etcd(dir: &Path) -> TlsEtcd {
    require_binary("etcd", "etcd-server").unwrap();
    let (client, peer) = (free_port().unwrap(), free_port().unwrap());
    let url = format!("https://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let child = Command::new("etcd")
        .args(["--name", "tls", "--data-dir", "data"])
        .args([
            "--listen-client-urls",
            &url,
            "--advertise-client-urls",
            &url,
        ])
        .args([
            "--listen-peer-urls",
            &peer_url,
            "--initial-advertise-peer-urls",
            &peer_url,
        ])
        .args(["--initial-cluster", &format!("tls={peer_url}")])
        .args([
            "--cert-file=server.crt",
            "--key-file=server.key",
            "--trusted-ca-file=ca.crt",
            "--client-cert-auth",
            "--enable-v2=true",
        ])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting etcd");
    let etcd = TlsEtcd { child, url };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !etcdctl(&etcd, dir, &["get", "/"]).status.success() {
        assert!(Instant::now() < deadline, "TLS etcd did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    etcd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skydns_reads_an_etcd_that_requires_client_certificates() {
    require_binary("openssl", "openssl").unwrap();
    let dir = tempfile::tempdir().unwrap();
    make_certificates(dir.path());
    let etcd = start_tls_etcd(dir.path());
    let put = put_tls(&etcd, dir.path(), RECORD.0, RECORD.1);
    assert!(
        put.status.success(),
        "{}",
        String::from_utf8_lossy(&put.stderr)
    );

    let file = |name: &str| dir.path().join(name).display().to_string();
    let api = Api::from_env().skydns_flags().iter().map(|f| f.to_string());
    let tls = [
        format!("-machines={}", etcd.url),
        format!("-tls-pem={}", file("client.crt")),
        format!("-tls-key={}", file("client.key")),
        format!("-ca-cert={}", file("ca.crt")),
    ];
    let tls: Vec<String> = tls.into_iter().chain(api.clone()).collect();
    let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
    let dns = SkyDns::start_with_etcd_url(&tls, "kubernetes.default.svc.cluster.local").await;
    dns.assert_kubernetes_resolves().await;
    dns.shutdown().await;

    // Without the client certificate etcd refuses us: no snapshot, SERVFAIL.
    let no_cert = [
        format!("-machines={}", etcd.url),
        format!("-ca-cert={}", file("ca.crt")),
    ];
    let mport = free_port().unwrap();
    let no_cert: Vec<String> = no_cert
        .into_iter()
        .chain(api)
        .chain([format!("-metrics-addr=127.0.0.1:{mport}")])
        .collect();
    let no_cert: Vec<&str> = no_cert.iter().map(String::as_str).collect();
    let dns = SkyDns::start_unsynced(&no_cert).await;
    // Refused, then refused again on the retry: it never syncs.
    wait_for_store_errors(mport, 2).await;
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

    let mport = free_port().unwrap();
    let metrics = format!("-metrics-addr=127.0.0.1:{mport}");
    let wrong = [
        &[machines.as_str(), "-username=skydns", "-password=wrong"],
        api,
        &[metrics.as_str()],
    ]
    .concat();
    let dns = SkyDns::start_unsynced(&wrong).await;
    // Refused, then refused again on the retry: it never syncs.
    wait_for_store_errors(mport, 2).await;
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
        let mut curl = Command::new("curl");
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
