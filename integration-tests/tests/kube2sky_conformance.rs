//! The Kubernetes DNS specification (schema 1.1.0) end to end, in the style
//! of the DNS conformance test of Kubernetes (`test/e2e/network/dns.go`):
//! objects created with kubectl in the API test server, kube2sky and skydns
//! over a real etcd, and the questions asked by the real `dig` and
//! `nslookup` through a pod's resolver configuration (`search
//! conf.svc.cluster.local svc.cluster.local cluster.local`, `ndots:5`, set
//! up in a private mount namespace). Every answer is compared with the
//! record the specification prescribes, written out literally. Run once
//! with each endpoints source (v1 Endpoints, EndpointSlices), and once as
//! the 1.2 pod on a 1.2-era API: exactly 1.2's keys. The `§` numbers are
//! the sections of that specification (kubernetes/dns,
//! `docs/specification.md`).

#[path = "../../kube2sky/tests/support/mod.rs"]
mod kube2sky_support;

use anyhow::{bail, ensure, Context, Result};
use kube2sky_support::objects::*;
use kube2sky_support::*;
use kube_api_test_server::{ApiServer, Config};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// The headless SRV answer; an endpoint without a hostname is named by
/// its label, FNV-1a 32 of
/// `{"host":"10.1.0.3","priority":10,"weight":10,"ttl":30,"targetstrip":0}`.
const HEADLESS_SRV: &[&str] = &[
    "80 pet-0.headless.conf.svc.cluster.local.",
    "80 pet-1.headless.conf.svc.cluster.local.",
    "80 2fb13a7e.headless.conf.svc.cluster.local.",
];

/// Questions and the answers the specification prescribes: `dig +short`
/// lines, in any order. Relative names go through the search list.
const EXPECTED: &[(&str, &str, &[&str])] = &[
    // §2.2 schema version.
    ("dns-version.cluster.local.", "TXT", &["\"1.1.0\""]),
    // §2.3.1 A/AAAA of a ClusterIP service, by the conformance test's names.
    ("kubernetes.default", "A", &["10.0.0.1"]),
    ("kubernetes.default.svc", "A", &["10.0.0.1"]),
    ("kubernetes.default.svc.cluster.local.", "A", &["10.0.0.1"]),
    ("dual", "A", &["10.0.0.20"]),
    ("dual.conf.svc.cluster.local.", "AAAA", &["fd00:10::20"]),
    // §2.3.2 SRV of a named port.
    (
        "_http._tcp.dual.conf.svc",
        "SRV",
        &["80 dual.conf.svc.cluster.local."],
    ),
    (
        "_https._tcp.kubernetes.default.svc.cluster.local.",
        "SRV",
        &["443 kubernetes.default.svc.cluster.local."],
    ),
    // §2.4.1 a headless service: every ready endpoint, and per hostname.
    ("headless", "A", &["10.1.0.1", "10.1.0.2", "10.1.0.3"]),
    ("headless.conf.svc.cluster.local.", "AAAA", &["fd00::1"]),
    ("pet-0.headless", "A", &["10.1.0.1"]),
    (
        "pet-0.headless.conf.svc.cluster.local.",
        "AAAA",
        &["fd00::1"],
    ),
    ("pet-1.headless.conf.svc", "A", &["10.1.0.2"]),
    // §2.4.2 SRV per ready endpoint and named port.
    ("_http._tcp.headless.conf.svc", "SRV", HEADLESS_SRV),
    // §2.5 ExternalName: the CNAME, asked for as CNAME and as A.
    (
        "ext.conf.svc.cluster.local.",
        "CNAME",
        &["www.example.com."],
    ),
    ("ext", "A", &["www.example.com."]),
    // §2.6 (deprecated) pod records, IPv6 with dashes.
    ("10-1-0-50.conf.pod.cluster.local.", "A", &["10.1.0.50"]),
    ("fd00--50.conf.pod.cluster.local.", "AAAA", &["fd00::50"]),
];

/// §2.3.3 and §2.4.3: `dig -x` of each IP.
const REVERSE: &[(&str, &[&str])] = &[
    ("10.0.0.1", &["kubernetes.default.svc.cluster.local."]),
    ("10.0.0.20", &["dual.conf.svc.cluster.local."]),
    ("fd00:10::20", &["dual.conf.svc.cluster.local."]),
    ("10.1.0.1", &["pet-0.headless.conf.svc.cluster.local."]),
    ("fd00::1", &["pet-0.headless.conf.svc.cluster.local."]),
    ("10.1.0.2", &["pet-1.headless.conf.svc.cluster.local."]),
    // An endpoint without a hostname gets no PTR (the miss is not ours to answer).
    ("10.1.0.3", &[]),
];

/// Names that must not exist: a not-ready endpoint's.
const ABSENT: &[(&str, &str)] = &[("pet-3.headless.conf.svc.cluster.local.", "A")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_queries_answer_as_specified_from_endpoints() -> Result<()> {
    conformance("endpoints", ENDPOINTS).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_queries_answer_as_specified_from_endpointslices() -> Result<()> {
    conformance("endpointslices", SLICES).await
}

/// `auto` on an API that serves EndpointSlices watches them: the endpoints
/// exist only as slices here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_queries_answer_as_specified_with_auto_on_a_modern_api() -> Result<()> {
    conformance("auto", SLICES).await
}

/// The same three against a real kube-apiserver, configured dual-stack:
/// objects through its validation and defaults, kube2sky through its
/// watch cache, and the `kubernetes` Service its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_real_apiserver_conformance_queries_answer_as_specified_from_endpoints() -> Result<()>
{
    let plane = ControlPlane::start()?;
    plane.with_logs(conformance_on(&plane, "endpoints", ENDPOINTS).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_real_apiserver_conformance_queries_answer_as_specified_from_endpointslices(
) -> Result<()> {
    let plane = ControlPlane::start()?;
    plane.with_logs(conformance_on(&plane, "endpointslices", SLICES).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_real_apiserver_conformance_queries_answer_as_specified_with_auto() -> Result<()> {
    let plane = ControlPlane::start()?;
    plane.with_logs(conformance_on(&plane, "auto", SLICES).await)
}

async fn conformance(source: &str, endpoints: &str) -> Result<()> {
    conformance_on(&apiserver(&[KUBERNETES]).await?, source, endpoints).await
}

async fn conformance_on(api: &dyn KubeApi, source: &str, endpoints: &str) -> Result<()> {
    let etcd = Etcd::start()?;
    let kubectl = api.kubectl()?;
    for manifest in [NAMESPACE, DUAL, HEADLESS, EXTERNAL] {
        kubectl.with_manifest("create", manifest)?;
    }
    kubectl.with_manifest("create", endpoints)?;
    // `conf/pod-a` with `podIPs` of both families.
    api.create_pod(NS, "pod-a", &["10.1.0.50", "fd00::50"])?;
    let flag = format!("--endpoints-source={source}");
    let mut k2s = Kube2sky::start(&etcd, api, &[&flag])?;
    k2s.wait_ready().await?;
    // Readiness covers services and endpoints; pod records (asked below)
    // are the pods pass's.
    k2s.wait_for_log("full sync of pods done").await?;
    let sky = skydns_binary(
        &etcd.endpoint(),
        etcd.api(),
        &[],
        "kubernetes.default.svc.cluster.local.",
    )
    .await?;
    let port = sky.port;
    let pod = PodResolver::new(port)?;
    // Everything is written once the last one answers; then all at once.
    pod.wait_for("_http._tcp.headless.conf.svc", "SRV", HEADLESS_SRV)
        .await?;
    for (name, qtype, want) in EXPECTED {
        let got = pod.dig(&["+search", "+short", name, qtype])?;
        same_lines(&format!("dig +search {name} {qtype}"), &got, want)?;
    }
    for (ip, want) in REVERSE {
        let got = pod.dig(&["+short", "-x", ip])?;
        same_lines(&format!("dig -x {ip}"), &got, want)?;
    }
    for (name, qtype) in ABSENT {
        let got = pod.dig(&[name, qtype])?;
        ensure!(got.contains("status: NXDOMAIN"), "{name} {qtype}:\n{got}");
    }
    // nslookup, as the conformance test's pods run it, with the search list.
    let got = pod.run(&["nslookup", &format!("-port={port}"), "kubernetes.default"])?;
    ensure!(
        got.contains("Name:\tkubernetes.default.svc.cluster.local") && got.contains("10.0.0.1"),
        "nslookup kubernetes.default:\n{got}"
    );
    Ok(())
}

/// The 1.2 pod (the legacy manifest's `--spec-records=false`, the default
/// `--endpoints-source=auto`) on a 1.2-era API (no EndpointSlices), with
/// 1.2-era objects: exactly the keys of 1.2, PTRs of cluster IPs included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_legacy_pod_on_a_1_2_api_writes_exactly_1_2s_keys() -> Result<()> {
    let etcd = Etcd::start()?;
    let config = Config {
        endpoint_slices: false,
        bookmark_interval: Duration::from_millis(500),
        ..Config::default()
    }
    .with_seed_text(KUBERNETES)?;
    let api = ApiServer::start(config).await?;
    let kubectl = Kubectl::new(&api.url())?;
    kubectl.with_manifest("create", NAMESPACE)?;
    kubectl.with_manifest("create", HEADLESS)?;
    kubectl.with_manifest(
        "create",
        r#"{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"headless","namespace":"conf",
          "annotations":{"endpoints.beta.kubernetes.io/hostnames-map":"{\"10.1.0.1\":{\"HostName\":\"pet-0\"}}"}},
         "subsets":[{"addresses":[{"ip":"10.1.0.1"},{"ip":"10.1.0.3"}],
           "ports":[{"name":"http","port":80,"protocol":"TCP"}]}]}"#,
    )?;
    let mut k2s = Kube2sky::start(&etcd, &api, &["--spec-records=false"])?;
    k2s.wait_ready().await?;
    let srv = |target: &str| format!(r#"{{"host":"{target}","port":80,{REST}"#);
    let expected = pairs(&[
        (
            "/skydns/arpa/in-addr/10/0/0/1",
            a("kubernetes.default.svc.cluster.local."),
        ),
        (
            "/skydns/local/cluster/svc/conf/headless/2fb13a7e",
            a("10.1.0.3"),
        ),
        (
            "/skydns/local/cluster/svc/conf/headless/_tcp/_http/2fb13a7e",
            srv("2fb13a7e.headless.conf.svc.cluster.local."),
        ),
        (
            "/skydns/local/cluster/svc/conf/headless/pet-0",
            a("10.1.0.1"),
        ),
        (
            "/skydns/local/cluster/svc/conf/headless/_tcp/_http/pet-0",
            srv("pet-0.headless.conf.svc.cluster.local."),
        ),
        (
            "/skydns/local/cluster/svc/default/kubernetes/_tcp/_https/c88f1059",
            format!(r#"{{"host":"kubernetes.default.svc.cluster.local.","port":443,{REST}"#),
        ),
        (
            "/skydns/local/cluster/svc/default/kubernetes/c88f1059",
            a("10.0.0.1"),
        ),
    ]);
    wait_exact(&etcd, "/skydns", &expected).await?;
    ensure!(
        k2s.log().contains("watching v1 Endpoints"),
        "auto chose Endpoints on a 1.2-era API:\n{}",
        k2s.log()
    );
    Ok(())
}

/// Compares `dig +short` output with the expected lines, as sets. SRV lines
/// are compared without priority and weight, which the specification
/// leaves to the implementation.
fn same_lines(what: &str, got: &str, want: &[&str]) -> Result<()> {
    let mut lines: Vec<String> = got
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            match fields[..] {
                [_priority, _weight, port, target] => format!("{port} {target}"),
                _ => l.trim().to_string(),
            }
        })
        .collect();
    lines.sort();
    let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    want.sort();
    ensure!(lines == want, "{what}: got {lines:?}, want {want:?}\n{got}");
    Ok(())
}

/// Runs DNS clients as a pod would: `/etc/resolv.conf` replaced, in a
/// private mount namespace, by a pod's (`nameserver 127.0.0.1`, the search
/// list of namespace `conf`, `ndots:5`); skydns's port is passed to the
/// client.
struct PodResolver {
    port: u16,
    dir: tempfile::TempDir,
}

impl PodResolver {
    fn new(port: u16) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::write(
            dir.path().join("resolv.conf"),
            format!(
                "nameserver 127.0.0.1\nsearch {NS}.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"
            ),
        )?;
        Ok(PodResolver { port, dir })
    }

    /// `dig -p <port> <args>` (two tries of 2 s: a datagram lost on a loaded machine is sent again).
    fn dig(&self, args: &[&str]) -> Result<String> {
        let port = format!("-p{}", self.port);
        let mut all = vec!["dig", port.as_str(), "+tries=2", "+time=2"];
        all.extend_from_slice(args);
        self.run(&all)
    }

    /// Runs `args` with the pod's resolv.conf.
    fn run(&self, args: &[&str]) -> Result<String> {
        let output = in_pod_namespace(&self.dir.path().join("resolv.conf"), args)?;
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Waits until `dig +search +short name qtype` gives `want`.
    async fn wait_for(&self, name: &str, qtype: &str, want: &[&str]) -> Result<()> {
        eventually(&format!("{name} {qtype}"), DEADLINE, async || {
            let got = self.dig(&["+search", "+short", name, qtype])?;
            same_lines(name, &got, want)
        })
        .await
    }
}

/// `args` run with `resolv_conf` bind-mounted over `/etc/resolv.conf` in a
/// new mount namespace (as root, or in a user namespace otherwise).
fn in_pod_namespace(resolv_conf: &Path, args: &[&str]) -> Result<Output> {
    test_support::tools::require("dig", "dnsutils")?;
    let script = r#"mount --bind "$0" /etc/resolv.conf && exec "$@""#;
    let root = nix::unistd::geteuid().is_root();
    let mut command = Command::new("unshare");
    if !root {
        command.arg("--map-root-user");
    }
    command
        .args(["--mount", "--propagation", "private", "sh", "-c", script])
        .arg(resolv_conf)
        .args(args);
    let output = command.output().context("unshare (util-linux)")?;
    if !output.status.success() && output.stdout.is_empty() {
        bail!(
            "{args:?} in a mount namespace failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(output)
}
