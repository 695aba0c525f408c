//! kube-rs `watcher` against the API test server: ordering, resuming after a
//! dropped watch without losing events, re-listing after 410 Expired, and
//! streaming lists.

mod apiserver_support;

use std::collections::BTreeSet;

use apiserver_support::{client, client_with, service, start_default, within};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::reflector::{self, Store as ReflectorStore};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::ResourceExt;
use kube_api_test_server::{ApiServerHandle, Key, ResourceKind};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// What the watcher yielded, reduced to what the tests compare.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Init,
    InitApply(String),
    InitDone,
    Apply { name: String, rv: String },
    Delete(String),
    Error(u16),
    OtherError(String),
}

fn seen(ev: Result<Event<Service>, watcher::Error>) -> Seen {
    match ev {
        Ok(Event::Init) => Seen::Init,
        Ok(Event::InitApply(s)) => Seen::InitApply(s.name_any()),
        Ok(Event::InitDone) => Seen::InitDone,
        Ok(Event::Apply(s)) => Seen::Apply {
            rv: s.resource_version().unwrap_or_default(),
            name: s.name_any(),
        },
        Ok(Event::Delete(s)) => Seen::Delete(s.name_any()),
        Err(watcher::Error::WatchError(status)) => Seen::Error(status.code),
        Err(e) => Seen::OtherError(e.to_string()),
    }
}

/// Drives a watcher stream in the background and hands its events over.
struct Recorder {
    rx: mpsc::UnboundedReceiver<Seen>,
    task: JoinHandle<()>,
}

impl Recorder {
    fn start<S>(stream: S) -> Self
    where
        S: Stream<Item = Result<Event<Service>, watcher::Error>> + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                if tx.send(seen(ev)).is_err() {
                    return;
                }
            }
        });
        Self { rx, task }
    }

    async fn next(&mut self) -> Seen {
        within("the next watcher event", self.rx.recv())
            .await
            .expect("watcher stream ended")
    }

    async fn expect(&mut self, expected: &[Seen]) {
        for want in expected {
            assert_eq!(&self.next().await, want);
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn apply(name: &str, rv: &str) -> Seen {
    Seen::Apply {
        name: name.into(),
        rv: rv.into(),
    }
}

fn key(name: &str) -> Key {
    Key {
        kind: ResourceKind::Service,
        namespace: "default".into(),
        name: name.into(),
    }
}

/// Ends every open watch and keeps clients from reconnecting until `resume`.
async fn cut_watches(server: &ApiServerHandle) {
    server.pause();
    server.drop_watches();
    within("the watch to close", server.wait_for_open_watches(0)).await;
}

#[tokio::test]
async fn watcher_sees_add_modify_delete_in_order() {
    let server = start_default().await;
    let api: Api<Service> = Api::namespaced(client(&server).await, "default");
    let mut rec = Recorder::start(watcher::watcher(api.clone(), watcher::Config::default()));
    rec.expect(&[Seen::Init, Seen::InitDone]).await;

    let created = api
        .create(&PostParams::default(), &service("a", 80))
        .await
        .unwrap();
    let mut changed = created.clone();
    changed.labels_mut().insert("app".into(), "a".into());
    let changed = api
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    api.delete("a", &DeleteParams::default()).await.unwrap();

    rec.expect(&[
        apply("a", &created.resource_version().unwrap()),
        apply("a", &changed.resource_version().unwrap()),
        Seen::Delete("a".into()),
    ])
    .await;
}

#[tokio::test]
async fn watcher_survives_dropped_watch_without_missing_events() {
    let server = start_default().await;
    let api: Api<Service> = Api::namespaced(client(&server).await, "default");
    api.create(&PostParams::default(), &service("a", 80))
        .await
        .unwrap();
    let mut rec = Recorder::start(watcher::watcher(api.clone(), watcher::Config::default()));
    rec.expect(&[Seen::Init, Seen::InitApply("a".into()), Seen::InitDone])
        .await;
    within("the watch to open", server.wait_for_open_watches(1)).await;

    // Cut the watch and keep the client from reconnecting while we write.
    cut_watches(&server).await;
    let store = server.store();
    let b = store
        .create(
            ResourceKind::Service,
            Some("default"),
            json!({"metadata": {"name": "b"}}),
            false,
        )
        .unwrap();
    let mut a = store.get(&key("a")).unwrap();
    a["metadata"]["labels"] = json!({"changed": "yes"});
    let (a, _) = store.update(&key("a"), a, false).unwrap();
    let deleted = store.delete(&key("b"), &Default::default()).unwrap();
    server.resume();

    // Resumed from its last resourceVersion: every write, in order, no re-list.
    rec.expect(&[
        apply("b", b["metadata"]["resourceVersion"].as_str().unwrap()),
        apply("a", a["metadata"]["resourceVersion"].as_str().unwrap()),
        Seen::Delete("b".into()),
    ])
    .await;
    assert!(deleted["metadata"]["resourceVersion"].is_string());
    within("the watch to reopen", server.wait_for_open_watches(1)).await;
    api.create(&PostParams::default(), &service("c", 80))
        .await
        .unwrap();
    assert!(matches!(rec.next().await, Seen::Apply { name, .. } if name == "c"));
}

#[tokio::test]
async fn watcher_relists_after_forced_410_and_ends_with_right_state() {
    let server = start_default().await;
    let api: Api<Service> = Api::namespaced(client(&server).await, "default");
    api.create(&PostParams::default(), &service("a", 80))
        .await
        .unwrap();
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher::watcher(api.clone(), watcher::Config::default()),
    );
    let mut rec = Recorder::start(stream);
    rec.expect(&[Seen::Init, Seen::InitApply("a".into()), Seen::InitDone])
        .await;
    within("the watch to open", server.wait_for_open_watches(1)).await;

    cut_watches(&server).await;
    let store = server.store();
    store
        .create(
            ResourceKind::Service,
            Some("default"),
            json!({"metadata": {"name": "b"}}),
            false,
        )
        .unwrap();
    store.delete(&key("a"), &Default::default()).unwrap();
    server.expire_history();
    server.resume();

    // The resumed watch gets 410 Expired; the watcher re-lists from scratch.
    rec.expect(&[
        Seen::Error(410),
        Seen::Init,
        Seen::InitApply("b".into()),
        Seen::InitDone,
    ])
    .await;
    api.create(&PostParams::default(), &service("c", 80))
        .await
        .unwrap();
    assert!(matches!(rec.next().await, Seen::Apply { name, .. } if name == "c"));
    assert_eq!(
        names(&reader),
        BTreeSet::from(["b".to_string(), "c".to_string()])
    );
    let listed: BTreeSet<String> = api
        .list(&Default::default())
        .await
        .unwrap()
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(names(&reader), listed);
}

fn names(reader: &ReflectorStore<Service>) -> BTreeSet<String> {
    reader.state().iter().map(|s| s.name_any()).collect()
}

#[tokio::test]
async fn watcher_streaming_list_uses_initial_events_end_bookmark() {
    let server = start_default().await;
    let api: Api<Service> = Api::namespaced(client(&server).await, "default");
    api.create(&PostParams::default(), &service("a", 80))
        .await
        .unwrap();
    let config = watcher::Config::default().streaming_lists();
    let mut rec = Recorder::start(watcher::watcher(api.clone(), config));
    rec.expect(&[Seen::Init, Seen::InitApply("a".into()), Seen::InitDone])
        .await;
    let b = api
        .create(&PostParams::default(), &service("b", 80))
        .await
        .unwrap();
    rec.expect(&[apply("b", &b.resource_version().unwrap())])
        .await;
}

#[tokio::test]
async fn watcher_with_backoff_recovers_from_unavailable_server() {
    let server = start_default().await;
    let api: Api<Service> = Api::namespaced(client_with(&server, None, false).await, "default");
    server.pause_unavailable();
    let stream = watcher::watcher(api.clone(), watcher::Config::default()).default_backoff();
    let mut rec = Recorder::start(stream);
    // The initial list fails with 503 while paused.
    assert!(matches!(rec.next().await, Seen::Init));
    assert!(
        matches!(rec.next().await, Seen::OtherError(e) if e.contains("503") || e.contains("unable to handle"))
    );
    server.resume();
    loop {
        match rec.next().await {
            Seen::InitDone => break,
            Seen::Init | Seen::OtherError(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    api.create(&PostParams::default(), &service("a", 80))
        .await
        .unwrap();
    assert!(matches!(rec.next().await, Seen::Apply { name, .. } if name == "a"));
}
