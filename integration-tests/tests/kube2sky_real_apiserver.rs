//! kube2sky against a real kube-apiserver (and, where named, the real
//! kube-controller-manager), in what only a real control plane does:
//! EndpointSlices written and mirrored by the real controllers from pods a
//! test marks ready as a kubelet would; a watch cut by an API server
//! restart after etcd's history was compacted, resumed with `410 Gone` and
//! a relist; a list of more than one page (`limit`/`continue`); and RBAC,
//! with the modern manifest's roles and with one verb taken away. The
//! suites shared with the API test server (conformance, spec keys, leader
//! election, the ConfigMap) run their `on_the_real_apiserver_*` variants
//! in their own files. Run on v2 and v3 by the test command.

mod kube2sky_support;

use anyhow::{ensure, Context, Result};
use kube2sky_support::*;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

const WEB: &str = "/skydns/local/cluster/svc/default/web/";

/// The records of headless Service `web` for the endpoint named `name`
/// (a hostname, or the label of a nameless one) at `ip`.
fn web_records(name: &str, ip: &str) -> [(String, String); 2] {
    [
        (format!("{WEB}{name}"), a(ip)),
        (
            format!("{WEB}_tcp/_http/{name}"),
            srv(&format!("{name}.web.default.svc.cluster.local."), 80),
        ),
    ]
}

fn sorted(records: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut v: Vec<_> = records.into_iter().collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpointslices_of_the_real_controllers_follow_the_pods_readiness() -> Result<()> {
    let plane = ControlPlane::start_with(ControlPlaneOptions {
        controllers: true,
        ..Default::default()
    })?;
    let kubectl = plane.kubectl()?;
    kubectl.with_manifest(
        "create",
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"default"},
            "spec":{"clusterIP":"None","selector":{"app":"web"},
             "ports":[{"name":"http","port":80,"protocol":"TCP"}]}}"#,
    )?;
    let web = json!({"app": "web"});
    for (name, ip, ready) in [("web-0", "10.244.0.1", true), ("web-1", "10.244.0.2", true)] {
        let spec = json!({"hostname": name, "subdomain": "web"});
        plane.create_pod("default", name, web.clone(), spec, &[ip], ready)?;
    }
    // No hostname, not ready yet: no record.
    plane.create_pod("default", "web-2", web, json!({}), &["10.244.0.3"], false)?;
    let etcd = Etcd::start()?;
    let mut k2s = Kube2sky::start(&etcd, &plane, &[])?;
    k2s.wait_ready().await?;
    let mut want: Vec<_> = web_records("web-0", "10.244.0.1").into();
    want.extend(web_records("web-1", "10.244.0.2"));
    wait_exact(&etcd, WEB, &sorted(want.clone())).await?;
    // The records came from the controller's slice, not a test's.
    let slices = kubectl.json(&[
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=web",
    ])?;
    let managed_by =
        &slices["items"][0]["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"];
    ensure!(
        managed_by == "endpointslice-controller.k8s.io",
        "the slice of web: {slices}"
    );

    // web-2 becomes ready: named by its label (FNV-1a 32 of its A value);
    // web-1 stops being ready: its records go.
    plane.set_pod_status("default", "web-2", &["10.244.0.3"], true)?;
    want.extend(web_records(label("10.244.0.3"), "10.244.0.3"));
    wait_exact(&etcd, WEB, &sorted(want.clone())).await?;
    plane.set_pod_status("default", "web-1", &["10.244.0.2"], false)?;
    want.retain(|(key, _)| !key.ends_with("/web-1"));
    wait_exact(&etcd, WEB, &sorted(want)).await?;

    // A Service without a selector: its hand-written v1 Endpoints are
    // mirrored into a slice by the mirroring controller, which kube2sky reads.
    kubectl.with_manifest(
        "create",
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"legacy","namespace":"default"},
            "spec":{"clusterIP":"None","ports":[{"name":"http","port":80,"protocol":"TCP"}]}}"#,
    )?;
    kubectl.with_manifest(
        "create",
        r#"{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"legacy","namespace":"default"},
            "subsets":[{"addresses":[{"ip":"10.244.0.9","hostname":"m-0"}],
             "ports":[{"name":"http","port":80,"protocol":"TCP"}]}]}"#,
    )?;
    let legacy = "/skydns/local/cluster/svc/default/legacy/";
    let want = [
        (format!("{legacy}m-0"), a("10.244.0.9")),
        (
            format!("{legacy}_tcp/_http/m-0"),
            srv("m-0.legacy.default.svc.cluster.local.", 80),
        ),
    ];
    wait_exact(&etcd, legacy, &sorted(want)).await?;
    let mirrored = kubectl.json(&[
        "get",
        "endpointslices",
        "-l",
        "endpointslice.kubernetes.io/managed-by=endpointslicemirroring-controller.k8s.io",
    ])?;
    ensure!(
        mirrored["items"][0]["metadata"]["labels"]["kubernetes.io/service-name"] == "legacy",
        "no mirrored slice of legacy: {mirrored}"
    );
    Ok(())
}

/// Whether etcd no longer has revision `rev` of the API server's objects.
fn compacted(plane: &ControlPlane, rev: u64) -> Result<()> {
    let rev = format!("--rev={rev}");
    let out =
        plane
            .etcd()
            .etcdctl(&["get", "/registry/services", "--prefix", "--keys-only", &rev])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        stderr.contains("compacted"),
        "revision {rev} still readable: {stderr}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumed_after_compaction_gets_410_gone_and_loses_nothing() -> Result<()> {
    let mut plane = ControlPlane::start_with(ControlPlaneOptions {
        compaction_interval: Some(Duration::from_secs(1)),
        ..Default::default()
    })?;
    let kubectl = plane.kubectl()?;
    // A real API server requires a port of a ClusterIP Service (the API
    // test server does not).
    let http = [("http", "TCP", 80)];
    for (name, ip) in [("keep", "10.0.0.50"), ("gone", "10.0.0.65")] {
        kubectl.with_manifest("create", &svc_manifest(name, ip, &http))?;
    }
    let etcd = Etcd::start()?;
    let mut k2s = Kube2sky::start(&etcd, &plane, &["--pods=false"])?;
    k2s.wait_ready().await?;
    let svc = "/skydns/local/cluster/svc/default/";
    // A Service's A record and its port's SRV record.
    let records = |name: &str, ip: &str, port: (&str, u16)| {
        let l = label(ip);
        let target = format!("{name}.default.svc.cluster.local.");
        [
            (format!("{svc}{name}/{l}"), a(ip)),
            (
                format!("{svc}{name}/_tcp/_{}/{l}", port.0),
                srv(&target, port.1),
            ),
        ]
    };
    let kubernetes = records("kubernetes", "10.0.0.1", ("https", 443));
    let keep = records("keep", "10.0.0.50", ("http", 80));
    let gone = records("gone", "10.0.0.65", ("http", 80));
    let before = [kubernetes.clone(), keep.clone(), gone].concat();
    wait_exact(&etcd, svc, &sorted(before)).await?;

    // kube2sky frozen: its watches stay at their resourceVersion while a
    // Service goes and one comes, etcd's history of both is compacted, and
    // the API server restarts (its watch cache begins at the new revision).
    k2s.signal(nix::sys::signal::Signal::SIGSTOP)?;
    let rev = plane.etcd().revision()?;
    kubectl.run(&["delete", "service", "gone"])?;
    kubectl.with_manifest("create", &svc_manifest("new", "10.0.0.80", &http))?;
    eventually("etcd to compact the deletion", DEADLINE, async || {
        compacted(&plane, rev + 1)
    })
    .await?;
    plane.restart_apiserver()?;
    k2s.signal(nix::sys::signal::Signal::SIGCONT)?;

    k2s.wait_for_log("(410 Gone); listing again").await?;
    let after = [kubernetes, keep, records("new", "10.0.0.80", ("http", 80))].concat();
    wait_exact(&etcd, svc, &sorted(after)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_list_of_several_pages_misses_nothing() -> Result<()> {
    // --v=3: the API server logs each request, so the pages can be seen.
    let plane = ControlPlane::start_with(ControlPlaneOptions {
        apiserver_flags: vec!["--v=3".into()],
        ..Default::default()
    })?;
    let kubectl = plane.kubectl()?;
    // kube2sky lists 500 objects a page: 1,100 Services are three pages.
    const COUNT: usize = 1100;
    let items: Vec<_> = (0..COUNT)
        .map(|n| {
            json!({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": format!("s{n:04}"), "namespace": "many"},
                   "spec": {"type": "ExternalName", "externalName": "example.com"}})
        })
        .collect();
    kubectl.run(&["create", "namespace", "many"])?;
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    kubectl.with_manifest("create", &list.to_string())?;
    let etcd = Etcd::start()?;
    let mut k2s = Kube2sky::start(&etcd, &plane, &["--pods=false"])?;
    k2s.wait_ready().await?;
    let prefix = "/skydns/local/cluster/svc/many/";
    wait_for_keys(&etcd, prefix, COUNT).await?;
    let cname = a("example.com.");
    let keys = under(&etcd, prefix)?;
    let wrong: Vec<_> = keys
        .iter()
        .filter(|(k, v)| *v != cname || !k.ends_with(label("example.com.")))
        .collect();
    ensure!(wrong.is_empty(), "records not as written: {wrong:?}");
    let log = plane.apiserver_log();
    let pages = log
        .lines()
        .filter(|l| l.contains("verb=\"LIST\"") && l.contains("/api/v1/services?"))
        .filter(|l| l.contains("continue="))
        .count();
    ensure!(
        pages >= 2,
        "kube2sky's list of Services was not paged (LIST requests with continue=: {pages})"
    );
    Ok(())
}

/// kube2sky with the kubeconfig of a ServiceAccount's token.
struct AsServiceAccount<'a> {
    plane: &'a ControlPlane,
    kubeconfig: PathBuf,
}

impl KubeApi for AsServiceAccount<'_> {
    fn kube2sky_flags(&self) -> Result<Vec<String>> {
        Ok(vec![format!(
            "--kubecfg-file={}",
            self.kubeconfig.display()
        )])
    }

    fn kubectl(&self) -> Result<Kubectl> {
        self.plane.kubectl()
    }

    fn create_pod(&self, ns: &str, name: &str, ips: &[&str]) -> Result<()> {
        KubeApi::create_pod(self.plane, ns, name, ips)
    }
}

/// The modern manifest's ServiceAccount and RBAC documents: everything
/// before its Deployment.
fn manifest_rbac() -> Result<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/kubernetes/kube-dns.yaml.in"
    );
    let text = std::fs::read_to_string(path).with_context(|| path.to_string())?;
    let end = text
        .find("kind: Deployment")
        .context("no Deployment in the manifest")?;
    let docs = &text[..text[..end].rfind("\n---\n").context("no document before")?];
    ensure!(!docs.contains('$'), "placeholders in the RBAC documents");
    Ok(docs.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_manifests_rbac_kube2sky_works_and_without_a_verb_it_says_which() -> Result<()> {
    let plane = ControlPlane::start()?;
    let kubectl = plane.kubectl()?;
    kubectl.with_manifest("apply", &manifest_rbac()?)?;
    let api = AsServiceAccount {
        plane: &plane,
        kubeconfig: plane.service_account_kubeconfig("kube-system", "kube-dns")?,
    };
    kubectl.with_manifest(
        "create",
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"default"},
            "spec":{"clusterIP":"None","ports":[{"name":"http","port":80,"protocol":"TCP"}]}}"#,
    )?;
    kubectl.with_manifest(
        "create",
        r#"{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",
            "metadata":{"name":"web-a","namespace":"default","labels":{"kubernetes.io/service-name":"web"}},
            "addressType":"IPv4","ports":[{"name":"http","port":80,"protocol":"TCP"}],
            "endpoints":[{"addresses":["10.244.0.1"],"hostname":"web-0"}]}"#,
    )?;
    api.create_pod("default", "p", &["10.244.9.9"])?;
    // As the manifest runs it: the pods' records and the ConfigMap too.
    let flags = ["--config-map=kube-dns"];
    let etcd = Etcd::start()?;
    let mut k2s = Kube2sky::start(&etcd, &api, &flags)?;
    k2s.wait_ready().await?;
    k2s.wait_for_log("full sync of pods done").await?;
    let web = sorted(web_records("web-0", "10.244.0.1"));
    wait_exact(&etcd, WEB, &web).await?;
    let pod = "/skydns/local/cluster/pod/default/10-244-9-9/";
    wait_exact(
        &etcd,
        pod,
        &[(format!("{pod}{}", label("10.244.9.9")), a("10.244.9.9"))],
    )
    .await?;
    ensure!(
        !k2s.log().contains("forbidden"),
        "refused with the manifest's roles:\n{}",
        k2s.log()
    );

    // Without `list` of EndpointSlices, and the slice emptied meanwhile:
    // kube2sky says what it may not do, is not ready, and removes nothing
    // it could not read.
    k2s.kill();
    let rules = r#"[{"op":"replace","path":"/rules/1/verbs","value":["watch"]}]"#;
    kubectl.run(&[
        "patch",
        "clusterrole",
        "kube-dns-rs",
        "--type=json",
        "-p",
        rules,
    ])?;
    kubectl.run(&["delete", "endpointslice", "web-a"])?;
    let before = skydns(&etcd)?;
    let k2s = Kube2sky::start(&etcd, &api, &flags)?;
    k2s.wait_for_log("cannot list resource").await?;
    let log = k2s.log();
    ensure!(
        log.contains("endpointslices") && log.contains("discovery.k8s.io"),
        "the refusal does not name the resource:\n{log}"
    );
    ensure!(
        k2s.http("/readiness").await.map(|r| r.0) == Some(503),
        "ready without its endpoints:\n{}",
        k2s.log()
    );
    ensure!(skydns(&etcd)? == before, "etcd changed:\n{}", k2s.log());
    Ok(())
}
