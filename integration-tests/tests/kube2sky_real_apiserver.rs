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

#[path = "../../kube2sky/tests/support/mod.rs"]
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

/// Headless Service `name` in `default` with port `http` and no selector:
/// its endpoints are whatever slices (or Endpoints) say.
fn headless_without_selector(name: &str) -> String {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
           "spec": {"clusterIP": "None", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}})
    .to_string()
}

fn sorted(records: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut v: Vec<_> = records.into_iter().collect();
    v.sort();
    v
}

/// How long kube-controller-manager may take to start and write its first
/// slice, on a loaded 2-core machine.
const CONTROLLERS_START: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpointslices_of_the_real_controllers_follow_the_pods_readiness() -> Result<()> {
    let plane = ControlPlane::start_with(ControlPlaneOptions {
        controllers: true,
        ..Default::default()
    })?;
    plane.with_logs(slices_follow_readiness(&plane).await)
}

/// web's EndpointSlices, as kubectl lists them.
fn web_slices(kubectl: &Kubectl) -> Result<serde_json::Value> {
    kubectl.json(&[
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=web",
    ])
}

/// The endpoints of web's slices, as `ip ready` pairs, sorted.
fn web_slice_endpoints(kubectl: &Kubectl) -> Result<Vec<String>> {
    let slices = web_slices(kubectl)?;
    let mut got: Vec<String> = slices["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .map(|e| {
            format!(
                "{} {}",
                e["addresses"][0].as_str().unwrap_or("?"),
                e["conditions"]["ready"]
            )
        })
        .collect();
    got.sort();
    Ok(got)
}

async fn slices_follow_readiness(plane: &ControlPlane) -> Result<()> {
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
    // The controller has seen all three (web-2 not ready) before kube2sky
    // starts: the records below are its slice's, not a slice in between.
    let all = ["10.244.0.1 true", "10.244.0.2 true", "10.244.0.3 false"];
    eventually(
        "the controller's slice of web",
        CONTROLLERS_START,
        async || {
            let got = web_slice_endpoints(&kubectl)?;
            ensure!(got == all, "{got:?}");
            Ok(())
        },
    )
    .await?;
    let etcd = Etcd::start()?;
    let mut k2s = Kube2sky::start(&etcd, plane, &[])?;
    k2s.wait_ready().await?;
    let mut want: Vec<_> = web_records("web-0", "10.244.0.1").into();
    want.extend(web_records("web-1", "10.244.0.2"));
    wait_exact(&etcd, WEB, &sorted(want.clone())).await?;
    // The records came from the controller's slice, not a test's.
    let slices = web_slices(&kubectl)?;
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
    kubectl.with_manifest("create", &headless_without_selector("legacy"))?;
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

/// kube2sky's watches cut by an API server restart, their versions gone
/// from the new watch cache (a restart alone does that) and from etcd
/// (compacted meanwhile, so no path of the server could serve them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_cut_by_a_restart_after_compaction_gets_410_gone_and_loses_nothing() -> Result<()> {
    let mut plane = ControlPlane::start_with(ControlPlaneOptions {
        compaction_interval: Some(Duration::from_secs(1)),
        ..Default::default()
    })?;
    let result = resumed_after_410(&mut plane).await;
    plane.with_logs(result)
}

async fn resumed_after_410(plane: &mut ControlPlane) -> Result<()> {
    let kubectl = plane.kubectl()?;
    // A real API server requires a port of a ClusterIP Service (the API
    // test server does not).
    let http = [("http", "TCP", 80)];
    for (name, ip) in [("keep", "10.0.0.50"), ("gone", "10.0.0.65")] {
        kubectl.with_manifest("create", &svc_manifest(name, ip, &http))?;
    }
    let etcd = Etcd::start()?;
    let mut k2s = Kube2sky::start(&etcd, &*plane, &["--pods=false"])?;
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
        plane.compacted(rev + 1)
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
    plane.with_logs(paged_first_list(&plane).await)
}

async fn paged_first_list(plane: &ControlPlane) -> Result<()> {
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
    let mut k2s = Kube2sky::start(&etcd, plane, &["--pods=false"])?;
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
    // kube2sky's requests: not kubectl's, nor the server's own loopback
    // clients' (its Service IP repair lists Services too).
    let pages: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("verb=\"LIST\"") && l.contains("/api/v1/services?"))
        .filter(|l| l.contains("continue="))
        .filter(|l| !l.contains("userAgent=\"kubectl") && !l.contains("userAgent=\"kube-apiserver"))
        .collect();
    ensure!(
        pages.len() >= 2,
        "kube2sky's list of Services was not paged (its LISTs with continue=: {pages:?})"
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
        "/../deploy/kubernetes/kube-dns.yaml"
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
    plane.with_logs(rbac(&plane).await)
}

/// Waits until RBAC answers `want` (`yes` or `no`) for kube-dns's
/// ServiceAccount listing EndpointSlices: the authorizer follows roles
/// through a watch of its own, a moment after a change.
async fn can_list_slices(kubectl: &Kubectl, want: &str) -> Result<()> {
    eventually(&format!("RBAC to say {want}"), DEADLINE, async || {
        let out = kubectl.output(&[
            "auth",
            "can-i",
            "list",
            "endpointslices.discovery.k8s.io",
            "--as=system:serviceaccount:kube-system:kube-dns",
        ])?;
        let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
        ensure!(said == want, "{said}");
        Ok(())
    })
    .await
}

async fn rbac(plane: &ControlPlane) -> Result<()> {
    let kubectl = plane.kubectl()?;
    kubectl.with_manifest("apply", &manifest_rbac()?)?;
    can_list_slices(&kubectl, "yes").await?;
    let api = AsServiceAccount {
        plane,
        kubeconfig: plane.service_account_kubeconfig("kube-system", "kube-dns")?,
    };
    kubectl.with_manifest("create", &headless_without_selector("web"))?;
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
    can_list_slices(&kubectl, "no").await?;
    kubectl.run(&["delete", "endpointslice", "web-a"])?;
    let before = skydns(&etcd)?;
    let k2s = Kube2sky::start(&etcd, &api, &flags)?;
    k2s.wait_for_log("cannot list resource").await?;
    // Its pods are allowed, and synced (a later signal than the refusal).
    k2s.wait_for_log("full sync of pods done").await?;
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
