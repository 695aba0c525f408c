//! kube-dns's ConfigMap end to end (`kube2sky --config-map=kube-dns`):
//! `kubectl` creates, changes, breaks and deletes `kube-system/kube-dns`,
//! and dig through a real skydns (`-stubzones`) follows each change without
//! a restart, on the API test server and on a real kube-apiserver: `stubDomains` become stub zones answered by a dnsmasq stub
//! server, `upstreamNameservers` the upstreams skydns forwards to. A
//! malformed version changes nothing (and is counted and reported as an
//! Event); hand-written stub servers and the operator's other config
//! fields are left alone; a change made while kube2sky is down is applied
//! when it starts. Run on v2 and v3 by the test command (`E2E_ETCD_API`).

#[path = "../../kube2sky/tests/support/mod.rs"]
mod kube2sky_support;

use anyhow::{ensure, Result};
use kube2sky_support::*;
use test_support::dns::dig;
use test_support::dnsmasq::Dnsmasq;
use test_support::etcd::Etcd;
use test_support::http::metric;
use test_support::skydns::SkydnsBinary;
use test_support::wait::{eventually, DEADLINE};

const STUB_ROOT: &str = "/skydns/local/cluster/dns/stub/";
/// A stub server written by hand, for a zone of its own: never touched.
const HAND_WRITTEN: (&str, &str) = (
    "/skydns/local/cluster/dns/stub/org/hand/ns1",
    r#"{"host":"127.0.0.1","port":9}"#,
);

async fn answering(name: &str, ip: &str) -> Result<Dnsmasq> {
    Dnsmasq::start(&[&format!("--address=/{name}/{ip}")]).await
}

/// The kube-dns ConfigMap with these two data values.
fn config_map(stub_domains: &str, upstreams: &str) -> String {
    let quote = |v: &str| serde_json::to_string(v).expect("a string");
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-dns\n  namespace: kube-system\n\
         data:\n  stubDomains: {}\n  upstreamNameservers: {}\n",
        quote(stub_domains),
        quote(upstreams)
    )
}

/// Waits until dig of `name` A through skydns answers exactly `ips`.
async fn wait_answer(port: u16, name: &str, ips: &[&str]) -> Result<()> {
    eventually(&format!("{name} to answer {ips:?}"), DEADLINE, async || {
        let out = dig(port, &["+short", name, "A"])?;
        let got: Vec<&str> = out.lines().collect();
        ensure!(got == ips, "{got:?}");
        Ok(())
    })
    .await
}

fn config_key(etcd: &Etcd) -> Result<Option<String>> {
    let got = etcd.get_prefix("/skydns/config")?;
    Ok(got
        .into_iter()
        .find(|(k, _)| k == "/skydns/config")
        .map(|(_, v)| v))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_changes_to_the_config_map_reach_dig_without_a_restart() -> Result<()> {
    config_map_changes(&apiserver(&[KUBERNETES]).await?).await
}

/// The same against a real kube-apiserver: its validation of the Events
/// kube2sky reports (events.k8s.io/v1 requires the reporting controller,
/// instance, action and time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_real_apiserver_kubectl_changes_to_the_config_map_reach_dig_without_a_restart(
) -> Result<()> {
    let plane = ControlPlane::start()?;
    plane.with_logs(config_map_changes(&plane).await)
}

async fn config_map_changes(api: &dyn KubeApi) -> Result<()> {
    let flags = ["--config-map=kube-dns"];
    let (etcd, kubectl, mut k2s) = cluster_on(api, &flags).await?;
    let (node, chosen) = (
        answering("www.example.org", "192.0.2.1").await?,
        answering("www.example.org", "192.0.2.2").await?,
    );
    let (stub, stub2) = (
        answering("host.acme.local", "192.0.2.53").await?,
        answering("host.acme.local", "192.0.2.54").await?,
    );
    etcd.put(HAND_WRITTEN.0, HAND_WRITTEN.1)?;
    // The operator's own upstream in the config key: given back at the end.
    let theirs = format!(
        r#"{{"ttl":3600,"nameservers":["127.0.0.1:{}"]}}"#,
        node.port
    );
    etcd.put("/skydns/config", &theirs)?;
    let node_flag = format!("-nameservers=127.0.0.1:{}", node.port);
    let ready_name = "kubernetes.default.svc.cluster.local.";
    let skydns = SkydnsBinary::start(
        &etcd.endpoint(),
        etcd.api(),
        &["-no-rec=false", "-stubzones", &node_flag],
        ready_name,
    )
    .await?;
    let dns = skydns.ports().dns;
    wait_answer(dns, "www.example.org", &["192.0.2.1"]).await?;
    wait_answer(dns, "host.acme.local", &[]).await?;

    // Created: the stub zone and the upstream, live.
    let stub_at = |d: &Dnsmasq| format!(r#"{{"acme.local": ["127.0.0.1:{}"]}}"#, d.port);
    let upstream = format!(r#"["127.0.0.1:{}"]"#, chosen.port);
    kubectl.with_manifest("apply", &config_map(&stub_at(&stub), &upstream))?;
    wait_answer(dns, "host.acme.local", &["192.0.2.53"]).await?;
    wait_answer(dns, "www.example.org", &["192.0.2.2"]).await?;
    let leaf = |d: &Dnsmasq| {
        let value = format!(r#"{{"host":"127.0.0.1","port":{}}}"#, d.port);
        (
            "/skydns/local/cluster/dns/stub/local/acme/kube-dns_0".to_string(),
            value,
        )
    };
    let hand = (HAND_WRITTEN.0.to_string(), HAND_WRITTEN.1.to_string());
    let mut stubs = vec![hand.clone(), leaf(&stub)];
    stubs.sort();
    wait_exact(&etcd, STUB_ROOT, &stubs).await?;
    let merged = format!(
        r#"{{"nameservers":["127.0.0.1:{}"],"ttl":3600}}"#,
        chosen.port
    );
    ensure!(
        config_key(&etcd)?.as_deref() == Some(&*merged),
        "{:?}",
        config_key(&etcd)?
    );

    // Malformed, twice: refused, counted, each reported with its reason;
    // nothing changes.
    let before = under(&etcd, "/skydns")?;
    let bad_stub = r#"{"Acme.local": ["127.0.0.1"]}"#;
    for (n, (stubs, upstreams, reason)) in [
        (stub_at(&stub2), r#"["not-an-ip"]"#.to_string(), "not-an-ip"),
        (bad_stub.to_string(), upstream.clone(), "Acme.local"),
    ]
    .into_iter()
    .enumerate()
    {
        kubectl.with_manifest("apply", &config_map(&stubs, &upstreams))?;
        eventually(
            "the refused version counted and reported",
            DEADLINE,
            async || {
                let text = k2s.metrics().await?;
                let refused = metric(
                    &text,
                    r#"kube2sky_config_map_updates_total{result="invalid"}"#,
                );
                ensure!(refused == Some((n + 1) as f64), "{refused:?}");
                let events = kubectl.run(&[
                    "get",
                    "events.events.k8s.io",
                    "-n",
                    "kube-system",
                    "-o",
                    "json",
                ])?;
                ensure!(
                    events.contains("InvalidConfiguration") && events.contains(reason),
                    "{events}"
                );
                Ok(())
            },
        )
        .await?;
    }
    ensure!(
        under(&etcd, "/skydns")? == before,
        "a malformed version changed etcd"
    );
    wait_answer(dns, "host.acme.local", &["192.0.2.53"]).await?;

    // Changed to a valid version: the new stub server.
    kubectl.with_manifest("apply", &config_map(&stub_at(&stub2), &upstream))?;
    wait_answer(dns, "host.acme.local", &["192.0.2.54"]).await?;

    // Deleted: no stub zone of ours, the operator's nameservers given back.
    kubectl.run(&["delete", "configmap", "kube-dns", "-n", "kube-system"])?;
    wait_answer(dns, "www.example.org", &["192.0.2.1"]).await?;
    wait_exact(&etcd, STUB_ROOT, std::slice::from_ref(&hand)).await?;
    let given_back = format!(
        r#"{{"nameservers":["127.0.0.1:{}"],"ttl":3600}}"#,
        node.port
    );
    ensure!(
        config_key(&etcd)?.as_deref() == Some(&*given_back),
        "{:?}",
        config_key(&etcd)?
    );

    // Created while kube2sky is down: applied by its first list.
    k2s.kill();
    kubectl.with_manifest("apply", &config_map(&stub_at(&stub), &upstream))?;
    let mut k2s = Kube2sky::start(&etcd, api, &flags)?;
    k2s.wait_ready().await?;
    wait_answer(dns, "host.acme.local", &["192.0.2.53"]).await?;
    wait_answer(dns, "www.example.org", &["192.0.2.2"]).await
}
