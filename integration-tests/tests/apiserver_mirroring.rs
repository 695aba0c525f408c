//! v1 Endpoints mirrored into `discovery.k8s.io/v1` EndpointSlices by the
//! API test server, as kube-controller-manager's EndpointSliceMirroring
//! controller does: what kubectl sees after creating, replacing, labelling
//! and deleting an Endpoints; the watch events of the mirrored slices (each
//! after its Endpoints write, none for a change that leaves them as they
//! are); big Endpoints cut into slices of 100; the skip-mirror label;
//! servers without EndpointSlices or without mirroring; seeds (the
//! library's and the binary's `--seed`, `--no-endpoints-mirroring`); and a
//! namespace deletion taking the slices with it, once.
//!
//! kubectl must be installed (see `apiserver_kubectl`); kubectl blocks, so
//! those tests run on a multi-threaded runtime.

mod apiserver_support;

use std::path::Path;

use apiserver_support::{binary_server, client, start, start_default, within};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Endpoints, Namespace};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::ResourceExt;
use kube_api_test_server::{ApiServerHandle, Config, ResourceKind};
use serde_json::{json, Value};
use test_support::kubectl::Kubectl;

const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const MIRRORING: &str = "endpointslicemirroring-controller.k8s.io";
const SKIP: &str = "endpointslice.kubernetes.io/skip-mirror";

/// Endpoints `web` with ready and not-ready IPv4 addresses, an IPv6 one
/// and two named ports.
const WEB: &str = r#"apiVersion: v1
kind: Endpoints
metadata:
  name: web
  labels: {app: web}
subsets:
- addresses:
  - {ip: 10.244.1.6, hostname: web-0, nodeName: node-1, targetRef: {kind: Pod, name: web-0, namespace: default}}
  - {ip: "fd00:10:244::7", hostname: web-1}
  notReadyAddresses:
  - {ip: 10.244.2.8, hostname: web-2}
  ports:
  - {name: http, port: 80, protocol: TCP}
  - {name: dns, port: 53, protocol: UDP, appProtocol: dns}
"#;

/// [`WEB`] without its IPv6 address and with `http` on 8080.
const WEB_CHANGED: &str = r#"apiVersion: v1
kind: Endpoints
metadata:
  name: web
  labels: {app: web}
subsets:
- addresses:
  - {ip: 10.244.1.6, hostname: web-0, nodeName: node-1, targetRef: {kind: Pod, name: web-0, namespace: default}}
  notReadyAddresses:
  - {ip: 10.244.2.8, hostname: web-2}
  ports:
  - {name: http, port: 8080, protocol: TCP}
  - {name: dns, port: 53, protocol: UDP, appProtocol: dns}
"#;

/// The mirrored slices of `web`, by name.
fn mirrored(k: &Kubectl) -> Vec<Value> {
    let list = k
        .json(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=web",
        ])
        .unwrap();
    list["items"].as_array().unwrap().clone()
}

fn names(slices: &[Value]) -> Vec<&str> {
    slices
        .iter()
        .map(|s| s["metadata"]["name"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_endpoints_mirrored_into_slices() {
    let server = start_default().await;
    let k = Kubectl::new(&server.url()).unwrap();
    k.with_manifest("create", WEB).unwrap();
    let uid = k.json(&["get", "endpoints", "web"]).unwrap()["metadata"]["uid"].clone();
    let slices = mirrored(&k);
    assert_eq!(names(&slices), ["web-mirror-ipv4-1", "web-mirror-ipv6-1"]);
    let (v4, v6) = (&slices[0], &slices[1]);
    assert_eq!(v4["addressType"], "IPv4");
    assert_eq!(
        v4["endpoints"],
        json!([
            {
                "addresses": ["10.244.1.6"], "conditions": { "ready": true },
                "hostname": "web-0", "nodeName": "node-1",
                "targetRef": { "kind": "Pod", "name": "web-0", "namespace": "default" },
            },
            { "addresses": ["10.244.2.8"], "conditions": { "ready": false }, "hostname": "web-2" },
        ]),
        "{v4}"
    );
    let ports = json!([
        { "name": "http", "port": 80, "protocol": "TCP" },
        { "name": "dns", "port": 53, "protocol": "UDP", "appProtocol": "dns" },
    ]);
    assert_eq!(v4["ports"], ports);
    assert_eq!(v6["addressType"], "IPv6");
    assert_eq!(
        v6["endpoints"],
        json!([{ "addresses": ["fd00:10:244::7"], "conditions": { "ready": true }, "hostname": "web-1" }])
    );
    assert_eq!(v6["ports"], ports);
    let meta = &v4["metadata"];
    assert_eq!(meta["labels"][MANAGED_BY], MIRRORING);
    assert_eq!(meta["labels"]["app"], "web");
    assert_eq!(meta["ownerReferences"][0]["kind"], "Endpoints");
    assert_eq!(meta["ownerReferences"][0]["uid"], uid);

    // A PUT: the IPv6 slice goes, the IPv4 one changes in place.
    k.with_manifest("replace", WEB_CHANGED).unwrap();
    let slices = mirrored(&k);
    assert_eq!(names(&slices), ["web-mirror-ipv4-1"]);
    assert_eq!(slices[0]["ports"][0]["port"], 8080);
    assert_eq!(slices[0]["metadata"]["uid"], v4["metadata"]["uid"]);
    assert_eq!(slices[0]["metadata"]["generation"], 2);

    // Patches: skip-mirror takes the slices away, its removal brings them back.
    k.run(&["label", "endpoints", "web", &format!("{SKIP}=true")])
        .unwrap();
    assert_eq!(mirrored(&k), Vec::<Value>::new());
    k.run(&["label", "endpoints", "web", &format!("{SKIP}-")])
        .unwrap();
    assert_eq!(names(&mirrored(&k)), ["web-mirror-ipv4-1"]);

    k.run(&["delete", "endpoints", "web"]).unwrap();
    let left = k.json(&["get", "endpointslices", "-A"]).unwrap();
    assert_eq!(left["items"], json!([]), "{left}");
}

fn endpoints(name: &str, subsets: Value) -> Endpoints {
    serde_json::from_value(json!({ "metadata": { "name": name }, "subsets": subsets }))
        .expect("endpoints")
}

/// The next event of a raw watch, as `TYPE name rv`.
async fn next(
    events: &mut (impl Stream<Item = kube::Result<WatchEvent<EndpointSlice>>> + Unpin),
) -> String {
    let event = within("the next slice event", events.next())
        .await
        .expect("watch ended")
        .expect("watch error");
    let (what, s) = match event {
        WatchEvent::Added(s) => ("ADDED", s),
        WatchEvent::Modified(s) => ("MODIFIED", s),
        WatchEvent::Deleted(s) => ("DELETED", s),
        other => panic!("unexpected {other:?}"),
    };
    format!("{what} {} {}", s.name_any(), s.resource_version().unwrap())
}

fn rv(endpoints: &Endpoints) -> u64 {
    endpoints.resource_version().unwrap().parse().unwrap()
}

#[tokio::test]
async fn slice_events_follow_their_endpoints_writes() {
    let server = start_default().await;
    let c = client(&server).await;
    let eps: Api<Endpoints> = Api::namespaced(c.clone(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(c, "default");
    let params = WatchParams::default().labels("kubernetes.io/service-name=db");
    let from = server.resource_version().to_string();
    let mut events = slices.watch(&params, &from).await.unwrap().boxed();
    let pp = PostParams::default();
    let ports = json!([{ "name": "pg", "port": 5432 }]);
    let two = json!([{ "addresses": [{ "ip": "10.1.0.1" }, { "ip": "fd00::1" }], "ports": ports }]);
    let created = eps.create(&pp, &endpoints("db", two)).await.unwrap();
    // Each slice write is an event of its own, right after the Endpoints'.
    let e = rv(&created);
    assert_eq!(
        next(&mut events).await,
        format!("ADDED db-mirror-ipv4-1 {}", e + 1)
    );
    assert_eq!(
        next(&mut events).await,
        format!("ADDED db-mirror-ipv6-1 {}", e + 2)
    );

    // A change the slices do not show (an uncopied annotation): no event.
    let mut same = created.clone();
    same.annotations_mut().insert(
        "kubectl.kubernetes.io/last-applied-configuration".into(),
        "{}".into(),
    );
    let same = eps.replace("db", &pp, &same).await.unwrap();
    assert!(rv(&same) > e + 2);
    let one = json!([{ "addresses": [{ "ip": "10.1.0.2" }], "ports": ports }]);
    let mut changed = same.clone();
    changed.subsets = endpoints("db", one).subsets;
    let e = rv(&eps.replace("db", &pp, &changed).await.unwrap());
    assert_eq!(
        next(&mut events).await,
        format!("MODIFIED db-mirror-ipv4-1 {}", e + 1)
    );
    assert_eq!(
        next(&mut events).await,
        format!("DELETED db-mirror-ipv6-1 {}", e + 2)
    );

    eps.delete("db", &DeleteParams::default()).await.unwrap();
    let last = next(&mut events).await;
    assert!(last.starts_with("DELETED db-mirror-ipv4-1 "), "{last}");
    let left = slices.list(&ListParams::default()).await.unwrap();
    assert!(left.items.is_empty());
}

/// 250 ready addresses in one subset.
fn many(n: usize) -> Value {
    let addresses: Vec<Value> = (0..n)
        .map(|i| json!({ "ip": format!("10.2.{}.{}", i / 250, i % 250 + 1) }))
        .collect();
    json!([{ "addresses": addresses, "ports": [{ "port": 80 }] }])
}

fn sizes(server: &ApiServerHandle) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let store = server.store();
    store
        .visit(ResourceKind::EndpointSlice, None, None, None, |k, v, _| {
            out.push((k.name.clone(), v["endpoints"].as_array().unwrap().len()));
            true
        })
        .unwrap();
    out
}

#[tokio::test]
async fn big_endpoints_are_cut_into_slices_of_100() {
    let server = start_default().await;
    let store = server.store();
    let body = serde_json::to_value(endpoints("big", many(250))).unwrap();
    store
        .create(ResourceKind::Endpoints, Some("default"), body, false)
        .unwrap();
    let want = |n: &[usize]| -> Vec<(String, usize)> {
        n.iter()
            .enumerate()
            .map(|(i, n)| (format!("big-mirror-ipv4-{}", i + 1), *n))
            .collect()
    };
    assert_eq!(sizes(&server), want(&[100, 100, 50]));
    let key = kube_api_test_server::Key {
        kind: ResourceKind::Endpoints,
        namespace: "default".into(),
        name: "big".into(),
    };
    let mut smaller = store.get(&key).unwrap();
    smaller["subsets"] = many(150);
    store.update(&key, smaller, false).unwrap();
    assert_eq!(sizes(&server), want(&[100, 50]));
}

#[tokio::test]
async fn skip_mirror_and_servers_that_do_not_mirror() {
    let ep = || endpoints("web", many(1));
    let mut skipped = ep();
    skipped.labels_mut().insert(SKIP.into(), "true".into());
    let server = start_default().await;
    let api: Api<Endpoints> = Api::namespaced(client(&server).await, "default");
    api.create(&PostParams::default(), &skipped).await.unwrap();
    assert_eq!(sizes(&server), []);
    let mut other = ep();
    other.metadata.name = Some("other".into());
    api.create(&PostParams::default(), &other).await.unwrap();
    assert_eq!(sizes(&server), [("other-mirror-ipv4-1".to_string(), 1)]);

    for config in [
        Config {
            endpoint_slices: false,
            ..Config::default()
        },
        Config {
            mirror_endpoints: false,
            ..Config::default()
        },
    ] {
        let server = start(config).await;
        let api: Api<Endpoints> = Api::namespaced(client(&server).await, "default");
        api.create(&PostParams::default(), &ep()).await.unwrap();
        api.delete("web", &DeleteParams::default()).await.unwrap();
        api.create(&PostParams::default(), &ep()).await.unwrap();
        assert_eq!(sizes(&server), []);
    }
}

#[tokio::test]
async fn seeded_endpoints_are_mirrored_and_go_with_their_namespace() {
    let seed = "apiVersion: v1\nkind: Endpoints\nmetadata: {name: api, namespace: team}\nsubsets:\n- addresses: [{ip: 10.3.0.1}]\n  ports: [{name: https, port: 443}]\n";
    let config = Config::default().with_seed_text(seed).unwrap();
    let server = start(config).await;
    let c = client(&server).await;
    let all: Api<EndpointSlice> = Api::all(c.clone());
    let list = all.list(&ListParams::default()).await.unwrap();
    let got: Vec<(String, String)> = list
        .items
        .iter()
        .map(|s| (s.namespace().unwrap(), s.name_any()))
        .collect();
    assert_eq!(got, [("team".into(), "api-mirror-ipv4-1".into())]);
    assert_eq!(list.items[0].ports.as_ref().unwrap()[0].port, Some(443));

    // Deleting the namespace deletes the Endpoints, which takes its slice,
    // once: the next event is the marker's.
    let from = server.resource_version().to_string();
    let mut events = all
        .watch(&WatchParams::default(), &from)
        .await
        .unwrap()
        .boxed();
    let namespaces: Api<Namespace> = Api::all(c.clone());
    namespaces
        .delete("team", &DeleteParams::default())
        .await
        .unwrap();
    let marker = endpoints("marker", many(1));
    Api::<Endpoints>::namespaced(c, "default")
        .create(&PostParams::default(), &marker)
        .await
        .unwrap();
    let deleted = next(&mut events).await;
    assert!(
        deleted.starts_with("DELETED api-mirror-ipv4-1 "),
        "{deleted}"
    );
    let added = next(&mut events).await;
    assert!(added.starts_with("ADDED marker-mirror-ipv4-1 "), "{added}");
}

/// The mirrored slices `kubectl get endpointslices` lists for a
/// `kube-api-test-server --seed demo.yaml` run with `args`.
async fn binary_demo_slices(args: &[&str]) -> Vec<String> {
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("seed/demo.yaml");
    let mut all: Vec<std::ffi::OsString> = vec!["--seed".into(), seed.into()];
    all.extend(args.iter().map(Into::into));
    let (mut child, url) = binary_server(&all).await;
    let list = Kubectl::new(&url)
        .unwrap()
        .json(&[
            "get",
            "endpointslices",
            "-A",
            "-l",
            &format!("{MANAGED_BY}={MIRRORING}"),
        ])
        .unwrap();
    child.kill().await.unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_mirrors_its_seed_unless_told_not_to() {
    assert_eq!(binary_demo_slices(&[]).await, ["web-mirror-ipv4-1"]);
    assert_eq!(
        binary_demo_slices(&["--no-endpoints-mirroring"]).await,
        Vec::<String>::new()
    );
}
