//! `discovery.k8s.io/v1` EndpointSlices and the dual-stack fields on the
//! API test server: kubectl creates and prints them (`kubectl get
//! endpointslices` as a Table), label selection on
//! `kubernetes.io/service-name`, invalid slices get 422, Services default
//! `clusterIPs`/`ipFamilies` and Pods `podIPs` as the real server does,
//! and a server without EndpointSlices (`Config::endpoint_slices` off,
//! `--no-endpointslices`) has no `discovery.k8s.io` group at all. The label
//! selector, 422 and single/dual-stack tests run against a real
//! kube-apiserver too (`apiserver_support::both`); watches of slices:
//! `apiserver_watches`.
//!
//! kubectl must be installed (see `apiserver_kubectl`); kubectl blocks, so
//! those tests run on a multi-threaded runtime.

mod apiserver_support;

use apiserver_support::{
    api_status, binary_server, both, client, slice, start, start_default, Server, WEB_SLICE,
};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kube_api_test_server::Config;
use serde_json::{json, Value};
use test_support::kubectl::Kubectl;

/// The namespace of the tests that run on both servers.
const NS: &str = "sliced";

/// The EndpointSlices of [`NS`] on `server`, with its namespace made.
async fn slices(server: &Server) -> Api<EndpointSlice> {
    server.namespace(NS).await;
    Api::namespaced(server.client().await, NS)
}

async fn raw_get(client: &Client, path: &str) -> Result<Value, (u16, String, String)> {
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    match client.request_text(req).await {
        Ok(text) => Ok(serde_json::from_str(&text).unwrap()),
        Err(e) => Err(api_status(e)),
    }
}

/// [`WEB_SLICE`] and three Services.
const SERVICES: &str = r#"---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ipFamilyPolicy: PreferDualStack
  selector: {app: web}
  ports: [{name: http, port: 80}]
---
apiVersion: v1
kind: Service
metadata:
  name: v6
spec:
  clusterIP: "2001:db8::10"
  ports: [{name: dns, port: 53, protocol: UDP}]
---
apiVersion: v1
kind: Service
metadata:
  name: headless
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 80}]
"#;

/// The Services of [`SERVICES`], as the real server defaults them.
fn check_dual_stack_services(k: &Kubectl) {
    let web = k.json(&["get", "service", "web"]).unwrap();
    let spec = &web["spec"];
    assert_eq!(spec["clusterIPs"], json!(["10.0.0.1", "fd00:10:96::1"]));
    assert_eq!(spec["clusterIP"], "10.0.0.1");
    assert_eq!(spec["ipFamilies"], json!(["IPv4", "IPv6"]));
    assert_eq!(spec["ipFamilyPolicy"], "PreferDualStack");
    let v6 = k.json(&["get", "service", "v6"]).unwrap();
    assert_eq!(v6["spec"]["clusterIPs"], json!(["2001:db8::10"]));
    assert_eq!(v6["spec"]["ipFamilies"], json!(["IPv6"]));
    assert_eq!(v6["spec"]["ipFamilyPolicy"], "SingleStack");
    let headless = k.json(&["get", "service", "headless"]).unwrap();
    assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
    assert_eq!(headless["spec"]["ipFamilies"], json!(["IPv4"]));
    let services = k.run(&["get", "services"]).unwrap();
    assert!(
        services
            .lines()
            .any(|l| l.starts_with("v6 ") && l.contains("2001:db8::10")),
        "{services}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_and_prints_endpoint_slices_and_dual_stack_services() {
    let server = start_default().await;
    let k = Kubectl::new(&server.url()).unwrap();
    let out = k
        .with_manifest("create", &format!("{WEB_SLICE}{SERVICES}"))
        .unwrap();
    assert!(
        out.contains("endpointslice.discovery.k8s.io/web-abc12 created"),
        "{out}"
    );

    let table = k.run(&["get", "endpointslices", "-A"]).unwrap();
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAMESPACE",
            "NAME",
            "ADDRESSTYPE",
            "PORTS",
            "ENDPOINTS",
            "AGE"
        ],
        "{table}"
    );
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        row[..5],
        [
            "default",
            "web-abc12",
            "IPv4",
            "80",
            "10.244.1.6,10.244.2.7"
        ],
        "{table}"
    );
    let got = k.json(&["get", "endpointslice", "web-abc12"]).unwrap();
    assert_eq!(got["apiVersion"], "discovery.k8s.io/v1");
    // The real server's port defaults, and a first generation.
    assert_eq!(
        got["ports"][0],
        json!({ "name": "http", "port": 80, "protocol": "TCP" })
    );
    assert_eq!(got["metadata"]["generation"], 1);
    assert_eq!(got["endpoints"][0]["nodeName"], "node-1");
    let selected = k
        .json(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=web",
        ])
        .unwrap();
    assert_eq!(selected["items"].as_array().unwrap().len(), 1);

    check_dual_stack_services(&k);

    let out = k.run(&["delete", "endpointslice", "web-abc12"]).unwrap();
    assert!(out.contains("deleted"), "{out}");
    let left = k.json(&["get", "endpointslices", "-A"]).unwrap();
    assert_eq!(left["items"], json!([]), "{left}");
}

#[tokio::test]
async fn label_selectors_pick_a_services_slices() {
    for server in both().await {
        eprintln!("--- against the {}", server.name());
        label_selectors(&server).await;
    }
}

async fn label_selectors(server: &Server) {
    let api = slices(server).await;
    let pp = PostParams::default();
    for (name, service) in [("web-1", "web"), ("web-2", "web"), ("db-1", "db")] {
        api.create(&pp, &slice(name, service, &["10.244.1.1"]))
            .await
            .unwrap();
    }
    let names = |list: kube::core::ObjectList<EndpointSlice>| -> Vec<String> {
        list.items.iter().map(ResourceExt::name_any).collect()
    };
    let lp = |s: &str| ListParams::default().labels(s);
    let web = api
        .list(&lp("kubernetes.io/service-name=web"))
        .await
        .unwrap();
    assert_eq!(names(web), ["web-1", "web-2"]);
    let not_web = api
        .list(&lp("kubernetes.io/service-name!=web"))
        .await
        .unwrap();
    assert_eq!(names(not_web), ["db-1"]);
    let both = api
        .list(&lp("kubernetes.io/service-name in (db,web)"))
        .await
        .unwrap();
    assert_eq!(both.items.len(), 3);
    let one = api
        .list(&ListParams::default().fields("metadata.name=db-1"))
        .await
        .unwrap();
    assert_eq!(names(one), ["db-1"]);
}

#[tokio::test]
async fn invalid_slices_and_cluster_ips_are_422() {
    for server in both().await {
        eprintln!("--- against the {}", server.name());
        invalid_slices_and_cluster_ips(&server).await;
    }
}

async fn invalid_slices_and_cluster_ips(server: &Server) {
    let api = slices(server).await;
    let c = server.client().await;
    let pp = PostParams::default();
    let invalid = |err: kube::Error, want: &str| {
        let (code, reason, message) = api_status(err);
        assert_eq!((code, reason.as_str()), (422, "Invalid"), "{message}");
        assert!(message.contains(want), "{message} lacks {want}");
    };
    let mut bad = slice("bad", "web", &["10.244.1.1"]);
    bad.address_type = "IPv5".into();
    let want = "addressType: Unsupported value: \"IPv5\"";
    invalid(api.create(&pp, &bad).await.unwrap_err(), want);
    bad.address_type = String::new();
    invalid(
        api.create(&pp, &bad).await.unwrap_err(),
        "addressType: Required value",
    );
    let v6_in_v4 = slice("bad", "web", &["fd00::1"]);
    let want = "endpoints[0].addresses: Invalid value: \"fd00::1\": must be an IPv4 address";
    invalid(api.create(&pp, &v6_in_v4).await.unwrap_err(), want);
    let mapped = slice("bad", "web", &["::ffff:10.1.0.1"]);
    let want = "endpoints[0].addresses[0]: Invalid value: \"::ffff:10.1.0.1\": must not be an IPv4-mapped IPv6 address";
    invalid(api.create(&pp, &mapped).await.unwrap_err(), want);
    // The other family is checked for special ranges all the same.
    let loopback_v6 = slice("bad", "web", &["::1"]);
    let err = api.create(&pp, &loopback_v6).await.unwrap_err();
    let (_, _, message) = api_status(err);
    for want in [
        "endpoints[0].addresses: Invalid value: \"::1\": must be an IPv4 address",
        "endpoints[0].addresses[0]: Invalid value: \"::1\": may not be in the loopback range",
    ] {
        assert!(message.contains(want), "{message} lacks {want}");
    }
    let zeros = slice("bad", "web", &["010.1.0.1"]);
    let want = "endpoints[0].addresses[0]: Invalid value: \"010.1.0.1\": must not have leading 0s";
    invalid(api.create(&pp, &zeros).await.unwrap_err(), want);
    let mut upper = slice("bad", "web", &["FD00::1"]);
    upper.address_type = "IPv6".into();
    let want = "endpoints[0].addresses[0]: Invalid value: \"FD00::1\": must be in canonical form (\"fd00::1\")";
    invalid(api.create(&pp, &upper).await.unwrap_err(), want);
    let not_an_ip = slice("bad", "web", &["10.1.2"]);
    let want = "endpoints[0].addresses[0]: Invalid value: \"10.1.2\": must be a valid IP address";
    invalid(api.create(&pp, &not_an_ip).await.unwrap_err(), want);
    let mut empty = slice("bad", "web", &["10.244.1.1"]);
    empty.endpoints[0].addresses.clear();
    invalid(
        api.create(&pp, &empty).await.unwrap_err(),
        "must contain at least 1 address",
    );
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        0
    );

    // Valid IPv6 and FQDN slices; the address type may not change.
    let mut v6 = slice("v6", "web", &["fd00::1"]);
    v6.address_type = "IPv6".into();
    let v6 = api.create(&pp, &v6).await.unwrap();
    let mut fqdn = slice("fqdn", "web", &["web.example.com"]);
    fqdn.address_type = "FQDN".into();
    api.create(&pp, &fqdn).await.unwrap();
    let retype = Patch::Merge(
        json!({ "addressType": "IPv4", "endpoints": [{ "addresses": ["10.244.1.1"] }] }),
    );
    let err = api
        .patch("v6", &PatchParams::default(), &retype)
        .await
        .unwrap_err();
    invalid(
        err,
        "addressType: Invalid value: \"IPv4\": field is immutable",
    );
    assert_eq!(api.get("v6").await.unwrap(), v6);

    let services: Api<Service> = Api::namespaced(c, NS);
    let svc = |spec: Value| -> Service {
        serde_json::from_value(json!({ "metadata": { "name": "s" }, "spec": spec })).unwrap()
    };
    let plural_only = svc(json!({ "clusterIPs": ["10.0.0.5"], "ports": [{ "port": 80 }] }));
    let err = services.create(&pp, &plural_only).await.unwrap_err();
    invalid(err, "must be empty when `clusterIP` is not specified");
    let two_v4 = svc(
        json!({ "clusterIP": "10.0.0.5", "clusterIPs": ["10.0.0.5", "10.0.0.6"],
        "ipFamilyPolicy": "RequireDualStack", "ports": [{ "port": 80 }] }),
    );
    let err = services.create(&pp, &two_v4).await.unwrap_err();
    invalid(err, "may specify no more than one IP for each IP family");
}

#[tokio::test]
async fn services_move_between_single_and_dual_stack_and_pods_get_pod_ips() {
    for server in both().await {
        eprintln!("--- against the {}", server.name());
        single_and_dual_stack(&server).await;
    }
}

async fn single_and_dual_stack(server: &Server) {
    server.namespace("stacked").await;
    let c = server.client().await;
    let services: Api<Service> = Api::namespaced(c.clone(), "stacked");
    let svc: Service = serde_json::from_value(json!({ "metadata": { "name": "web" },
        "spec": { "clusterIP": "10.0.0.20", "ports": [{ "port": 80 }] } }))
    .unwrap();
    let created = services.create(&PostParams::default(), &svc).await.unwrap();
    let spec = created.spec.unwrap();
    assert_eq!(spec.cluster_ips, Some(vec!["10.0.0.20".into()]));
    assert_eq!(spec.ip_families, Some(vec!["IPv4".into()]));
    let pp = PatchParams::default();
    let policy = |p: &str| Patch::Merge(json!({ "spec": { "ipFamilyPolicy": p } }));
    let dual = services
        .patch("web", &pp, &policy("PreferDualStack"))
        .await
        .unwrap();
    let spec = dual.spec.unwrap();
    // An IPv6 address from the second range: the first free of
    // fd00:10:96::/112 on the test server, any of fd00:10::/112 on the real.
    let ips = spec.cluster_ips.clone().unwrap_or_default();
    let v6_ok = |v6: &str| match server {
        Server::Test(_) => v6 == "fd00:10:96::1",
        Server::Real(_) => v6.starts_with("fd00:10::"),
    };
    assert!(
        matches!(&ips[..], [v4, v6] if v4 == "10.0.0.20" && v6_ok(v6)),
        "{ips:?}"
    );
    assert_eq!(spec.ip_families, Some(vec!["IPv4".into(), "IPv6".into()]));
    let single = services
        .patch("web", &pp, &policy("SingleStack"))
        .await
        .unwrap();
    assert_eq!(
        single.spec.unwrap().cluster_ips,
        Some(vec!["10.0.0.20".into()])
    );

    let pods: Api<Pod> = Api::namespaced(c, "stacked");
    let pod: Pod = serde_json::from_value(json!({ "metadata": { "name": "p" },
        "spec": { "containers": [{ "name": "c", "image": "busybox" }] } }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let ips = |p: Pod| {
        let status = p.status.unwrap();
        let all: Vec<String> = status
            .pod_ips
            .unwrap_or_default()
            .into_iter()
            .map(|i| i.ip)
            .collect();
        (status.pod_ip.unwrap_or_default(), all)
    };
    let status = |s: Value| Patch::Merge(json!({ "status": s }));
    let one = pods
        .patch_status("p", &pp, &status(json!({ "podIP": "10.244.1.5" })))
        .await
        .unwrap();
    assert_eq!(ips(one), ("10.244.1.5".into(), vec!["10.244.1.5".into()]));
    let both = json!({ "podIP": null, "podIPs": [{ "ip": "fd00::5" }, { "ip": "10.244.1.5" }] });
    let both = pods.patch_status("p", &pp, &status(both)).await.unwrap();
    assert_eq!(
        ips(both),
        (
            "fd00::5".into(),
            vec!["fd00::5".into(), "10.244.1.5".into()]
        )
    );
    let two_v4 =
        json!({ "podIP": null, "podIPs": [{ "ip": "10.244.1.5" }, { "ip": "10.244.1.6" }] });
    let err = pods
        .patch_status("p", &pp, &status(two_v4))
        .await
        .unwrap_err();
    assert_eq!(api_status(err).0, 422);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_endpoint_slices_the_group_does_not_exist() {
    let server = start(Config {
        endpoint_slices: false,
        ..Config::default()
    })
    .await;
    let c = client(&server).await;
    let groups = raw_get(&c, "/apis").await.unwrap();
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert_eq!(names, ["coordination.k8s.io"], "{groups}");
    for path in [
        "/apis/discovery.k8s.io/v1",
        "/apis/discovery.k8s.io/v1/endpointslices",
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web",
    ] {
        let (code, reason, _) = raw_get(&c, path).await.unwrap_err();
        assert_eq!((code, reason.as_str()), (404, "NotFound"), "{path}");
    }
    let api: Api<EndpointSlice> = Api::namespaced(c, "default");
    let err = api
        .create(
            &PostParams::default(),
            &slice("web-1", "web", &["10.244.1.1"]),
        )
        .await
        .unwrap_err();
    assert_eq!(api_status(err).0, 404);
    let k = Kubectl::new(&server.url()).unwrap();
    let out = k.output(&["get", "endpointslices"]).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("doesn't have a resource type"),
        "{err}"
    );
    // Seeding one is refused rather than hidden.
    let seeded = Config {
        endpoint_slices: false,
        ..Config::default()
    }
    .with_seed_text("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: x}\naddressType: IPv4\n")
    .unwrap();
    let refused = kube_api_test_server::ApiServer::start(seeded)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("unsupported kind"),
        "{refused}"
    );
}

/// `kubectl api-versions` of a `kube-api-test-server` run with `args`.
async fn binary_api_versions(args: &[&str]) -> String {
    let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    let (mut child, url) = binary_server(&args).await;
    let versions = Kubectl::new(&url).unwrap().run(&["api-versions"]).unwrap();
    child.kill().await.unwrap();
    versions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_endpoint_slices_unless_told_not_to() {
    let with = binary_api_versions(&[]).await;
    assert!(with.lines().any(|l| l == "discovery.k8s.io/v1"), "{with}");
    let without = binary_api_versions(&["--no-endpointslices"]).await;
    assert!(!without.contains("discovery.k8s.io"), "{without}");
    assert!(
        without.lines().any(|l| l == "coordination.k8s.io/v1"),
        "{without}"
    );
}
