//! `discovery.k8s.io/v1` EndpointSlices and the dual-stack fields on the
//! API test server: kubectl creates and prints them (`kubectl get
//! endpointslices` as a Table), a kube-rs watcher follows them (events,
//! label selection on `kubernetes.io/service-name`, bookmarks, history
//! replay and 410 after compaction), invalid slices get 422, Services
//! default `clusterIPs`/`ipFamilies` and Pods `podIPs` as the real server
//! does, and a server without EndpointSlices (`Config::endpoint_slices`
//! off, `--no-endpointslices`) has no `discovery.k8s.io` group at all.
//!
//! kubectl must be installed (see `apiserver_kubectl`); kubectl blocks, so
//! those tests run on a multi-threaded runtime.

mod apiserver_support;

use apiserver_support::{binary_server, client, start, start_default, within, WEB_SLICE};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::WatchParams;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use kube_api_test_server::Config;
use serde_json::{json, Value};
use test_support::kubectl::Kubectl;

const SERVICE_NAME: &str = "kubernetes.io/service-name";

/// An IPv4 slice of Service `service` with one endpoint per address.
fn slice(name: &str, service: &str, addresses: &[&str]) -> EndpointSlice {
    let endpoints: Vec<Value> = addresses
        .iter()
        .map(|a| json!({ "addresses": [a], "conditions": { "ready": true } }))
        .collect();
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { SERVICE_NAME: service } },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{ "name": "http", "port": 80 }],
    }))
    .expect("endpoint slice")
}

fn api_status(err: kube::Error) -> (u16, String, String) {
    match err {
        kube::Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other}"),
    }
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

/// The next watcher event, as `kind name` (`apply web-2`).
async fn next_event(
    events: &mut (impl Stream<Item = Result<Event<EndpointSlice>, watcher::Error>> + Unpin),
) -> String {
    let event = within("the next watcher event", events.next())
        .await
        .expect("watcher stream ended")
        .expect("watcher error");
    match event {
        Event::Init => "init".into(),
        Event::InitApply(s) => format!("init-apply {}", s.name_any()),
        Event::InitDone => "init-done".into(),
        Event::Apply(s) => format!("apply {}", s.name_any()),
        Event::Delete(s) => format!("delete {}", s.name_any()),
    }
}

#[tokio::test]
async fn a_watcher_follows_the_slices_of_one_service() {
    let server = start_default().await;
    let api: Api<EndpointSlice> = Api::namespaced(client(&server).await, "default");
    let pp = PostParams::default();
    let first = api
        .create(&pp, &slice("web-1", "web", &["10.244.1.1"]))
        .await
        .unwrap();
    let config = watcher::Config::default().labels("kubernetes.io/service-name=web");
    let mut events = watcher::watcher(api.clone(), config).boxed();
    for want in ["init", "init-apply web-1", "init-done"] {
        assert_eq!(next_event(&mut events).await, want);
    }
    // Another Service's slice is filtered out: web-2's event comes first.
    api.create(&pp, &slice("other-1", "other", &["10.244.9.9"]))
        .await
        .unwrap();
    api.create(&pp, &slice("web-2", "web", &["10.244.1.2"]))
        .await
        .unwrap();
    assert_eq!(next_event(&mut events).await, "apply web-2");
    let mut changed = api.get("web-1").await.unwrap();
    changed.endpoints[0].addresses = vec!["10.244.1.9".into()];
    let changed = api.replace("web-1", &pp, &changed).await.unwrap();
    assert_eq!(changed.metadata.generation, Some(2));
    assert_eq!(next_event(&mut events).await, "apply web-1");
    api.delete("web-1", &DeleteParams::default()).await.unwrap();
    assert_eq!(next_event(&mut events).await, "delete web-1");

    // History replay from the first create, still filtered.
    let from = first.resource_version().unwrap();
    let params = WatchParams::default().labels("kubernetes.io/service-name=web");
    let replay: Vec<String> = within(
        "the replay",
        api.watch(&params, &from)
            .await
            .unwrap()
            .take(3)
            .collect::<Vec<_>>(),
    )
    .await
    .into_iter()
    .map(|e| match e.unwrap() {
        WatchEvent::Added(s) => format!("ADDED {}", s.name_any()),
        WatchEvent::Modified(s) => format!("MODIFIED {}", s.name_any()),
        WatchEvent::Deleted(s) => format!("DELETED {}", s.name_any()),
        other => format!("{other:?}"),
    })
    .collect();
    assert_eq!(replay, ["ADDED web-2", "MODIFIED web-1", "DELETED web-1"]);
}

#[tokio::test]
async fn slice_watches_get_bookmarks_and_410_after_compaction() {
    let server = start_default().await;
    let api: Api<EndpointSlice> = Api::namespaced(client(&server).await, "default");
    let created = api
        .create(
            &PostParams::default(),
            &slice("web-1", "web", &["10.244.1.1"]),
        )
        .await
        .unwrap();
    let current = server.resource_version().to_string();
    let params = WatchParams::default().timeout(60);
    let mut stream = api.watch(&params, &current).await.unwrap().boxed();
    // Nothing changes after `current`, so the first event is a bookmark.
    let first = within("a bookmark", stream.next())
        .await
        .expect("watch ended");
    let Ok(WatchEvent::Bookmark(bookmark)) = first else {
        panic!("expected a bookmark, got {first:?}");
    };
    assert_eq!(bookmark.metadata.resource_version, current);
    assert_eq!(bookmark.types.api_version, "discovery.k8s.io/v1");

    // Paging, then compaction: the continue token and the old version are gone.
    api.create(
        &PostParams::default(),
        &slice("web-2", "web", &["10.244.1.2"]),
    )
    .await
    .unwrap();
    let page = api.list(&ListParams::default().limit(1)).await.unwrap();
    assert_eq!(page.items.len(), 1);
    let token = page.metadata.continue_.clone().expect("a continue token");
    // A write, then compaction up to it: the page's version is gone.
    api.delete("web-2", &DeleteParams::default()).await.unwrap();
    server.expire_history();
    let err = api
        .list(&ListParams::default().limit(1).continue_token(&token))
        .await
        .unwrap_err();
    assert_eq!(api_status(err).0, 410);
    let old = created.resource_version().unwrap();
    let events: Vec<_> = within(
        "the 410 stream",
        api.watch(&WatchParams::default(), &old)
            .await
            .unwrap()
            .collect(),
    )
    .await;
    match &events[..] {
        [Ok(WatchEvent::Error(status))] => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
        }
        other => panic!("expected one 410 ERROR event, got {other:?}"),
    }
}

#[tokio::test]
async fn label_selectors_pick_a_services_slices() {
    let server = start_default().await;
    let api: Api<EndpointSlice> = Api::namespaced(client(&server).await, "default");
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
    let server = start_default().await;
    let c = client(&server).await;
    let api: Api<EndpointSlice> = Api::namespaced(c.clone(), "default");
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
    let want =
        "endpoints[0].addresses[0]: Invalid value: \"fd00::1\": must be a valid IPv4 address";
    invalid(api.create(&pp, &v6_in_v4).await.unwrap_err(), want);
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

    let services: Api<Service> = Api::namespaced(c, "default");
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
    let server = start_default().await;
    let c = client(&server).await;
    let services: Api<Service> = Api::namespaced(c.clone(), "default");
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
    assert_eq!(
        spec.cluster_ips,
        Some(vec!["10.0.0.20".into(), "fd00:10:96::1".into()])
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

    let pods: Api<Pod> = Api::namespaced(c, "default");
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
