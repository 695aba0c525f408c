//! API semantics of the test server through kube-rs: paging, optimistic
//! concurrency, selectors, validation errors, raw watch behaviour (410 as an
//! ERROR event, timeouts, selector transitions), auth and faults.
//! The paging and 410 tests run against a real kube-apiserver too
//! (`apiserver_support::both`); bookmarks: `apiserver_watches`.

mod apiserver_support;

use std::time::Duration;

use apiserver_support::{
    both, client, client_with, client_with_token, service, start, start_default, within, Server,
};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Pod, Service};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Client, ResourceExt};
use kube_api_test_server::Config;
use serde_json::{json, Value};
use test_support::wait::eventually;

fn api_code(err: kube::Error) -> u16 {
    match err {
        kube::Error::Api(status) => status.code,
        other => panic!("expected an API error, got {other}"),
    }
}

async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Result<String, kube::Error> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())
        .unwrap();
    client.request_text(req).await
}

#[tokio::test]
async fn list_pages_with_limit_and_continue_are_consistent() {
    for server in both().await {
        eprintln!("--- against the {}", server.name());
        list_pages(&server).await;
    }
}

async fn list_pages(server: &Server) {
    server.namespace("paging").await;
    let api: Api<Service> = Api::namespaced(server.client().await, "paging");
    for i in 0..5 {
        api.create(&PostParams::default(), &service(&format!("svc-{i}"), 80))
            .await
            .unwrap();
    }
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    let names = |l: &kube::api::ObjectList<Service>| {
        l.items
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&first), ["svc-0", "svc-1"]);
    assert_eq!(first.metadata.remaining_item_count, Some(3));
    let token = first.metadata.continue_.clone().unwrap();
    // A write between pages is not visible: pages come from the first page's version.
    api.create(&PostParams::default(), &service("svc-2a", 80))
        .await
        .unwrap();
    api.delete("svc-4", &DeleteParams::default()).await.unwrap();
    let second = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(&second), ["svc-2", "svc-3"]);
    assert_eq!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    let token = second.metadata.continue_.clone().unwrap();
    let third = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(&third), ["svc-4"]);
    assert_eq!(third.metadata.continue_.as_deref().unwrap_or(""), "");
    // Once history is compacted, the token is too old (the real server
    // answers so once its watch cache has learnt of the compaction).
    server.compact().await;
    let within = server.compaction_seen_within();
    eventually("the continue token to be refused", within, async || {
        let page = api
            .list(&ListParams::default().limit(2).continue_token(&token))
            .await;
        anyhow::ensure!(
            matches!(&page, Err(kube::Error::Api(s)) if s.code == 410),
            "{page:?}"
        );
        Ok(())
    })
    .await
    .unwrap();
    // A fresh list sees the current state.
    let all = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(names(&all), ["svc-0", "svc-1", "svc-2", "svc-2a", "svc-3"]);
    if let Server::Test(handle) = server {
        // At the current version (the real server's moves on with writes
        // of its own, its Leases: nothing to compare with).
        assert_eq!(
            all.metadata.resource_version,
            Some(handle.resource_version().to_string())
        );
    }
}

#[tokio::test]
async fn stale_update_gets_409_and_unconditional_update_succeeds() {
    let server = start_default().await;
    let api: Api<Service> = Api::namespaced(client(&server).await, "default");
    let original = api
        .create(&PostParams::default(), &service("web", 80))
        .await
        .unwrap();
    let mut first = original.clone();
    first.labels_mut().insert("v".into(), "1".into());
    let updated = api
        .replace("web", &PostParams::default(), &first)
        .await
        .unwrap();
    assert_ne!(updated.resource_version(), original.resource_version());
    // The cluster IP is kept, and is immutable.
    assert_eq!(
        updated.spec.as_ref().unwrap().cluster_ip,
        original.spec.as_ref().unwrap().cluster_ip
    );

    let mut stale = original.clone();
    stale.labels_mut().insert("v".into(), "2".into());
    let err = api
        .replace("web", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(api_code(err), 409);

    stale.metadata.resource_version = None;
    let forced = api
        .replace("web", &PostParams::default(), &stale)
        .await
        .unwrap();
    assert_eq!(forced.labels()["v"], "2");

    let mut moved = forced.clone();
    moved.spec.as_mut().unwrap().cluster_ip = Some("10.0.0.200".into());
    assert_eq!(
        api_code(
            api.replace("web", &PostParams::default(), &moved)
                .await
                .unwrap_err()
        ),
        422
    );

    let patched = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"v": "3"}}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.labels()["v"], "3");
    let stale_patch = Patch::Merge(
        json!({"metadata": {"resourceVersion": original.resource_version(), "labels": {"v": "4"}}}),
    );
    assert_eq!(
        api_code(
            api.patch("web", &PatchParams::default(), &stale_patch)
                .await
                .unwrap_err()
        ),
        409
    );
}

#[tokio::test]
async fn create_assigns_metadata_and_validates() {
    let server = start(Config {
        service_cidr: "10.96.0.0/28".parse().unwrap(),
        ..Config::default()
    })
    .await;
    let c = client(&server).await;
    let api: Api<Service> = Api::namespaced(c.clone(), "default");
    let svc = api
        .create(&PostParams::default(), &service("web", 80))
        .await
        .unwrap();
    assert!(svc.uid().is_some() && svc.creation_timestamp().is_some());
    assert_eq!(
        svc.spec.as_ref().unwrap().cluster_ip.as_deref(),
        Some("10.96.0.1")
    );
    let port = &svc.spec.as_ref().unwrap().ports.as_ref().unwrap()[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));

    let mut headless = service("headless", 80);
    headless.spec.as_mut().unwrap().cluster_ip = Some("None".into());
    let headless = api.create(&PostParams::default(), &headless).await.unwrap();
    assert_eq!(headless.spec.unwrap().cluster_ip.as_deref(), Some("None"));

    let mut taken = service("taken", 80);
    taken.spec.as_mut().unwrap().cluster_ip = Some("10.96.0.1".into());
    assert_eq!(
        api_code(
            api.create(&PostParams::default(), &taken)
                .await
                .unwrap_err()
        ),
        422
    );
    assert_eq!(
        api_code(
            api.create(&PostParams::default(), &service("web", 80))
                .await
                .unwrap_err()
        ),
        409
    );
    assert_eq!(
        api_code(
            api.create(&PostParams::default(), &service("Bad_Name", 80))
                .await
                .unwrap_err()
        ),
        422
    );
    let missing_ns: Api<Service> = Api::namespaced(c.clone(), "nope");
    assert_eq!(
        api_code(
            missing_ns
                .create(&PostParams::default(), &service("x", 80))
                .await
                .unwrap_err()
        ),
        404
    );
    let bad = json!({"metadata": {"name": "bad"}, "spec": {"ports": "not-a-list"}});
    let err = raw(&c, "POST", "/api/v1/namespaces/default/services", Some(bad))
        .await
        .unwrap_err();
    assert_eq!(api_code(err), 400);
    assert_eq!(api_code(api.get("absent").await.unwrap_err()), 404);

    // Delete returns the object; the IP goes back to the pool.
    let deleted = api.delete("web", &DeleteParams::default()).await.unwrap();
    assert_eq!(deleted.left().unwrap().name_any(), "web");
    let again = api
        .create(&PostParams::default(), &service("web2", 80))
        .await
        .unwrap();
    assert_eq!(again.spec.unwrap().cluster_ip.as_deref(), Some("10.96.0.1"));
}

#[tokio::test]
async fn selectors_filter_lists_and_watch_transitions() {
    let server = start_default().await;
    let c = client(&server).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pod = |name: &str, app: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
        .unwrap()
    };
    pods.create(&PostParams::default(), &pod("p1", "web"))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("p2", "db"))
        .await
        .unwrap();
    let web = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(web.items.len(), 1);
    let by_name = pods
        .list(&ListParams::default().fields("metadata.name=p2"))
        .await
        .unwrap();
    assert_eq!(by_name.items[0].name_any(), "p2");
    let all: Api<Pod> = Api::all(c.clone());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );

    let rv = web.metadata.resource_version.unwrap();
    let mut stream = pods
        .watch(&WatchParams::default().labels("app=web"), &rv)
        .await
        .unwrap()
        .boxed();
    let relabel = |app: &str| Patch::Merge(json!({"metadata": {"labels": {"app": app}}}));
    pods.patch("p2", &PatchParams::default(), &relabel("web"))
        .await
        .unwrap();
    pods.patch("p2", &PatchParams::default(), &relabel("db"))
        .await
        .unwrap();
    let mut kinds = Vec::new();
    for _ in 0..2 {
        match within("a watch event", stream.try_next())
            .await
            .unwrap()
            .unwrap()
        {
            WatchEvent::Added(p) => kinds.push(format!("ADDED {}", p.name_any())),
            WatchEvent::Deleted(p) => kinds.push(format!("DELETED {}", p.name_any())),
            other => kinds.push(format!("{other:?}")),
        }
    }
    assert_eq!(kinds, ["ADDED p2", "DELETED p2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_compacted_version_gets_410_error_event() {
    for mut server in both().await {
        eprintln!("--- against the {}", server.name());
        watch_from_compacted_version(&mut server).await;
    }
}

async fn watch_from_compacted_version(server: &mut Server) {
    let api: Api<Service> = Api::namespaced(server.client().await, "default");
    let svc = api
        .create(&PostParams::default(), &service("a", 80))
        .await
        .unwrap();
    api.create(&PostParams::default(), &service("b", 80))
        .await
        .unwrap();
    match server {
        // Through the admin endpoint this time (tests use the handle's method).
        Server::Test(handle) => {
            raw(&client(handle).await, "POST", "/admin/expire-history", None)
                .await
                .unwrap();
        }
        Server::Real(_) => server.compact().await,
    }
    let old = svc.resource_version().unwrap();
    // A watch that is refused ends at its ERROR event; the timeout only
    // bounds one that would not.
    let params = WatchParams::default().timeout(10);
    let watch_old = async || -> Vec<_> { api.watch(&params, &old).await.unwrap().collect().await };
    if let Server::Real(plane) = server {
        // Deviation: kube-apiserver's watch cache serves a watch from a
        // version etcd has compacted while the version is in its window
        // of recent events (b's creation comes); a version older than the
        // window is 410, such as any version from before a restart.
        let mut served = api.watch(&params, &old).await.unwrap().boxed();
        let first = within("the old version's first event", served.next()).await;
        assert!(
            matches!(&first, Some(Ok(WatchEvent::Added(s))) if s.name_any() == "b"),
            "{first:?}"
        );
        drop(served);
        tokio::task::block_in_place(|| plane.restart_apiserver()).unwrap();
    }
    let events = watch_old().await;
    let [Ok(WatchEvent::Error(status))] = &events[..] else {
        panic!("expected one 410 ERROR event, got {events:?}");
    };
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    assert!(
        status.message.starts_with("too old resource version"),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn bearer_token_is_required_when_configured() {
    let server = start(Config {
        token: Some("s3cret".into()),
        ..Config::default()
    })
    .await;
    let anonymous: Api<Service> = Api::all(client(&server).await);
    assert_eq!(
        api_code(anonymous.list(&ListParams::default()).await.unwrap_err()),
        401
    );
    let wrong: Api<Service> = Api::all(client_with_token(&server, Some("nope")).await);
    assert_eq!(
        api_code(wrong.list(&ListParams::default()).await.unwrap_err()),
        401
    );
    let right: Api<Namespace> = Api::all(client_with_token(&server, Some("s3cret")).await);
    let names: Vec<String> = right
        .list(&ListParams::default())
        .await
        .unwrap()
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert!(names.contains(&"kube-system".to_string()), "{names:?}");
}

#[tokio::test]
async fn pause_hangs_or_rejects_requests_until_resume() {
    let server = start_default().await;
    let c = client_with(&server, None, false).await;
    let api: Api<Endpoints> = Api::namespaced(c.clone(), "default");
    server.pause_unavailable();
    assert_eq!(
        api_code(api.list(&ListParams::default()).await.unwrap_err()),
        503
    );
    server.pause();
    let mut pending = tokio::spawn({
        let api = api.clone();
        async move { api.list(&ListParams::default()).await }
    });
    // While hung, the request must not complete.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut pending)
            .await
            .is_err()
    );
    server.resume();
    within("the hung request", pending).await.unwrap().unwrap();
    // The admin endpoint drives the same switches.
    raw(&c, "POST", "/admin/pause?mode=unavailable", None)
        .await
        .unwrap();
    assert_eq!(
        api_code(api.list(&ListParams::default()).await.unwrap_err()),
        503
    );
    raw(&c, "POST", "/admin/resume", None).await.unwrap();
    api.list(&ListParams::default()).await.unwrap();
}

#[tokio::test]
async fn discovery_documents_and_status_errors() {
    let server = start_default().await;
    let c = client(&server).await;
    let v1: Value = serde_json::from_str(&raw(&c, "GET", "/api/v1", None).await.unwrap()).unwrap();
    let names: Vec<&str> = v1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for want in ["services", "endpoints", "pods", "namespaces", "pods/status"] {
        assert!(names.contains(&want), "{names:?}");
    }
    let version = c.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");
    let err = raw(&c, "GET", "/api/v1/nodes", None).await.unwrap_err();
    assert_eq!(api_code(err), 404);
    let err = raw(&c, "GET", "/apis/apps/v1/deployments", None)
        .await
        .unwrap_err();
    assert_eq!(api_code(err), 404);
}

#[tokio::test]
async fn pod_status_is_a_subresource() {
    let server = start_default().await;
    let pods: Api<Pod> = Api::namespaced(client(&server).await, "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"podIP": "9.9.9.9"}}))
    .unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    let status = created.status.unwrap();
    assert_eq!(
        (status.phase.as_deref(), status.pod_ip),
        (Some("Pending"), None)
    );
    let patch = Patch::Merge(json!({"status": {"phase": "Running", "podIP": "1.2.3.4"}}));
    let running = pods
        .patch_status("p", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(running.status.unwrap().pod_ip.as_deref(), Some("1.2.3.4"));
}

#[tokio::test]
async fn leases_are_served_in_their_group_with_optimistic_concurrency() {
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    let server = start_default().await;
    let client = client(&server).await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    let mut lease = Lease::default();
    lease.metadata.name = Some("k".into());
    lease.spec = Some(LeaseSpec {
        holder_identity: Some("a".into()),
        lease_duration_seconds: Some(15),
        ..LeaseSpec::default()
    });
    let created = api.create(&PostParams::default(), &lease).await.unwrap();
    let raw_lease = raw(
        &client,
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases/k",
        None,
    )
    .await
    .unwrap();
    assert!(
        raw_lease.contains(r#""apiVersion":"coordination.k8s.io/v1""#),
        "{raw_lease}"
    );
    assert_eq!(
        api_code(
            api.create(&PostParams::default(), &lease)
                .await
                .unwrap_err()
        ),
        409
    );

    // Two replicas replacing from the same read: the second gets 409.
    let mut mine = created.clone();
    mine.spec.as_mut().unwrap().holder_identity = Some("b".into());
    api.replace("k", &PostParams::default(), &mine)
        .await
        .unwrap();
    let mut theirs = created;
    theirs.spec.as_mut().unwrap().holder_identity = Some("c".into());
    assert_eq!(
        api_code(
            api.replace("k", &PostParams::default(), &theirs)
                .await
                .unwrap_err()
        ),
        409
    );
    let got = api.get("k").await.unwrap();
    assert_eq!(got.spec.unwrap().holder_identity.as_deref(), Some("b"));

    // Discovery names the group; the core paths do not serve leases.
    let groups = raw(&client, "GET", "/apis", None).await.unwrap();
    assert!(
        groups.contains(r#""name":"coordination.k8s.io""#),
        "{groups}"
    );
    let resources = raw(&client, "GET", "/apis/coordination.k8s.io/v1", None)
        .await
        .unwrap();
    assert!(resources.contains(r#""name":"leases""#), "{resources}");
    let core = raw(&client, "GET", "/api/v1", None).await.unwrap();
    assert!(!core.contains("leases"), "{core}");
    let err = raw(&client, "GET", "/api/v1/namespaces/default/leases/k", None)
        .await
        .unwrap_err();
    assert_eq!(api_code(err), 404);
    assert_eq!(
        api_code(
            raw(&client, "GET", "/apis/nosuch.io/v1", None)
                .await
                .unwrap_err()
        ),
        404
    );
}
