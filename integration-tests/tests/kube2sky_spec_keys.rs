//! The DNS specification's records in etcd as objects change: EndpointSlice
//! updates that turn a hostname's leaf into a directory of one record per
//! IP and back (v2 cannot hold both at once), an IP shared by a cluster IP
//! and an endpoint (a PTR per name), a Service that becomes ExternalName,
//! and changes made while kube2sky is down, caught by the restart's
//! reconcile. Keys and values are written out literally; labels are FNV-1a
//! 32 of the JSON (kube2sky.go's `getHash`), computed apart from the code:
//! `10.0.0.30` → 9ca14183, `10.1.0.2` → 1b985e67,
//! `pet-0.headless.conf.svc.cluster.local.` → 8088fce9,
//! `web.conf.svc.cluster.local.` → 3ca9b568, `www.example.com.` → 37ae7a37.

#[path = "../../kube2sky/tests/support/mod.rs"]
mod kube2sky_support;

use anyhow::Result;
use kube2sky_support::*;

const NAMESPACE: &str = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"conf"}}"#;
const HEADLESS: &str = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"headless","namespace":"conf"},
 "spec":{"clusterIP":"None","ports":[{"name":"http","port":80,"protocol":"TCP"}]}}"#;
const WEB: &str = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"conf"},
 "spec":{"clusterIP":"10.0.0.30","ports":[{"name":"http","port":80,"protocol":"TCP"}]}}"#;

/// The headless service's slice with `endpoints` as `(ip, hostname)`.
fn slice(endpoints: &[(&str, &str)]) -> String {
    let endpoints: Vec<serde_json::Value> = endpoints
        .iter()
        .map(|(ip, host)| serde_json::json!({"addresses": [ip], "hostname": host}))
        .collect();
    serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "headless-a", "namespace": "conf",
                     "labels": {"kubernetes.io/service-name": "headless"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
        "endpoints": endpoints,
    })
    .to_string()
}

const SVC: &str = "/skydns/local/cluster/svc/conf/";

fn srv(target: &str) -> String {
    format!(r#"{{"host":"{target}","port":80,{REST}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_records_follow_slices_type_changes_and_the_restart_reconcile() -> Result<()> {
    let api = apiserver(&[KUBERNETES]).await?;
    spec_records_on(&api).await
}

/// The same against a real kube-apiserver: its validation, defaults and
/// watch cache between kubectl and kube2sky.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_real_apiserver_spec_records_follow_slices_type_changes_and_the_restart_reconcile(
) -> Result<()> {
    let plane = ControlPlane::start()?;
    plane.with_logs(spec_records_on(&plane).await)
}

async fn spec_records_on(api: &dyn KubeApi) -> Result<()> {
    let etcd = Etcd::start()?;
    let kubectl = api.kubectl()?;
    for manifest in [NAMESPACE, HEADLESS, WEB] {
        kubectl.with_manifest("create", manifest)?;
    }
    kubectl.with_manifest(
        "create",
        &slice(&[("10.0.0.30", "pet-0"), ("10.1.0.2", "pet-0")]),
    )?;
    let flags = ["--endpoints-source=endpointslices"];
    let mut k2s = Kube2sky::start(&etcd, api, &flags)?;
    k2s.wait_ready().await?;

    // pet-0 has two IPs: a directory with a record each; 10.0.0.30 is
    // web's cluster IP and pet-0's: a PTR each.
    let pet0 = a("pet-0.headless.conf.svc.cluster.local.");
    let web_a = [
        (format!("{SVC}web/9ca14183"), a("10.0.0.30")),
        (
            format!("{SVC}web/_tcp/_http/9ca14183"),
            srv("web.conf.svc.cluster.local."),
        ),
    ];
    let pet0_srv = (
        format!("{SVC}headless/_tcp/_http/pet-0"),
        srv("pet-0.headless.conf.svc.cluster.local."),
    );
    let mut want = vec![
        (format!("{SVC}headless/pet-0/9ca14183"), a("10.0.0.30")),
        (format!("{SVC}headless/pet-0/1b985e67"), a("10.1.0.2")),
        pet0_srv.clone(),
    ];
    want.extend(web_a.clone());
    wait_exact(&etcd, SVC, &sorted(want)).await?;
    let kubernetes_ptr = (
        "/skydns/arpa/in-addr/10/0/0/1".to_string(),
        a("kubernetes.default.svc.cluster.local."),
    );
    let shared = "/skydns/arpa/in-addr/10/0/0/30";
    wait_exact(
        &etcd,
        "/skydns/arpa/",
        &sorted(vec![
            kubernetes_ptr.clone(),
            (format!("{shared}/8088fce9"), pet0.clone()),
            (
                format!("{shared}/3ca9b568"),
                a("web.conf.svc.cluster.local."),
            ),
            ("/skydns/arpa/in-addr/10/1/0/2".to_string(), pet0.clone()),
        ]),
    )
    .await?;

    // One IP left: the directory is a leaf again; 10.1.0.2's PTR goes.
    kubectl.with_manifest("apply", &slice(&[("10.0.0.30", "pet-0")]))?;
    let mut want = vec![
        (format!("{SVC}headless/pet-0"), a("10.0.0.30")),
        pet0_srv.clone(),
    ];
    want.extend(web_a.clone());
    wait_exact(&etcd, SVC, &sorted(want)).await?;

    // web becomes ExternalName: a CNAME record, and its PTR leaves the
    // shared IP, which is pet-0's alone again (a leaf).
    kubectl.run(&[
        "patch", "service", "web", "-n", "conf", "--type=merge", "-p",
        r#"{"spec":{"type":"ExternalName","externalName":"www.example.com","clusterIP":"","clusterIPs":null,"ports":null}}"#,
    ])?;
    let cname = (format!("{SVC}web/37ae7a37"), a("www.example.com."));
    wait_exact(
        &etcd,
        SVC,
        &sorted(vec![
            (format!("{SVC}headless/pet-0"), a("10.0.0.30")),
            pet0_srv.clone(),
            cname.clone(),
        ]),
    )
    .await?;
    wait_exact(
        &etcd,
        "/skydns/arpa/",
        &sorted(vec![
            kubernetes_ptr.clone(),
            (shared.to_string(), pet0.clone()),
        ]),
    )
    .await?;

    // While kube2sky is down the slice is replaced: the restart reconciles.
    k2s.kill();
    kubectl.run(&["delete", "endpointslice", "headless-a", "-n", "conf"])?;
    kubectl.with_manifest("create", &slice(&[("10.1.0.5", "pet-1")]))?;
    let mut k2s = Kube2sky::start(&etcd, api, &flags)?;
    k2s.wait_ready().await?;
    wait_exact(
        &etcd,
        SVC,
        &sorted(vec![
            (format!("{SVC}headless/pet-1"), a("10.1.0.5")),
            (
                format!("{SVC}headless/_tcp/_http/pet-1"),
                srv("pet-1.headless.conf.svc.cluster.local."),
            ),
            cname,
        ]),
    )
    .await?;
    wait_exact(
        &etcd,
        "/skydns/arpa/",
        &sorted(vec![
            kubernetes_ptr,
            (
                "/skydns/arpa/in-addr/10/1/0/5".to_string(),
                a("pet-1.headless.conf.svc.cluster.local."),
            ),
        ]),
    )
    .await
}

fn sorted(mut v: Vec<(String, String)>) -> Vec<(String, String)> {
    v.sort();
    v
}
