//! kube-rs `watcher` against the API test server and a real kube-apiserver
//! (`apiserver_support::both`): ordering, resuming after a cut connection
//! without losing events, re-listing after 410 Expired, and streaming
//! lists. Connections are cut by a TCP relay between the watcher and the
//! server (`test_support::relay`), while writes go around it; only the
//! recovery from a server answering 503 is the test server's alone (the
//! real one cannot be told to).

mod apiserver_support;

use std::collections::BTreeSet;

use apiserver_support::{client_with, service, start_default, within, Server};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store as ReflectorStore};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::ResourceExt;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The namespace of the watched Services (the real server's `default`
/// holds its own `kubernetes` Service).
const NS: &str = "watched";

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

    /// [`Recorder::expect`] after a cut: the cut connection may show as
    /// transport errors first (a watch body ended mid-stream), never as
    /// anything else.
    async fn expect_after_cut(&mut self, expected: &[Seen]) {
        for want in expected {
            let got = loop {
                match self.next().await {
                    Seen::OtherError(e) => eprintln!("the cut, as the watcher saw it: {e}"),
                    got => break got,
                }
            };
            assert_eq!(&got, want);
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

fn rv(service: &Service) -> String {
    service.resource_version().expect("a resourceVersion")
}

/// The Services of [`NS`] on `server`, with its namespace made.
async fn services(server: &Server) -> Api<Service> {
    server.namespace(NS).await;
    Api::namespaced(server.client().await, NS)
}

/// Labels Service `name` and waits for the watcher to see it: the watch
/// is open once an event came through it.
async fn touch(api: &Api<Service>, rec: &mut Recorder, name: &str) {
    let patch = Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}}));
    let touched = api
        .patch(name, &PatchParams::default(), &patch)
        .await
        .unwrap();
    rec.expect(&[apply(name, &rv(&touched))]).await;
}

#[tokio::test]
async fn watcher_sees_add_modify_delete_in_order() {
    for server in apiserver_support::both().await {
        eprintln!("--- against the {}", server.name());
        add_modify_delete(&server).await;
    }
}

async fn add_modify_delete(server: &Server) {
    let api = services(server).await;
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
        apply("a", &rv(&created)),
        apply("a", &rv(&changed)),
        Seen::Delete("a".into()),
    ])
    .await;
}

#[tokio::test]
async fn watcher_survives_a_cut_watch_without_missing_events() {
    for server in apiserver_support::both().await {
        eprintln!("--- against the {}", server.name());
        survives_a_cut_watch(&server).await;
    }
}

async fn survives_a_cut_watch(server: &Server) {
    let api = services(server).await;
    api.create(&PostParams::default(), &service("a", 80))
        .await
        .unwrap();
    let relay = server.relay().await;
    let watched: Api<Service> = Api::namespaced(server.client_through(&relay).await, NS);
    let mut rec = Recorder::start(watcher::watcher(watched, watcher::Config::default()));
    rec.expect(&[Seen::Init, Seen::InitApply("a".into()), Seen::InitDone])
        .await;
    touch(&api, &mut rec, "a").await;

    // Cut the watch and keep the watcher from reconnecting while we write.
    relay.hold().await;
    let before = relay.admitted();
    let b = api
        .create(&PostParams::default(), &service("b", 80))
        .await
        .unwrap();
    let mut a = api.get("a").await.unwrap();
    a.labels_mut().insert("changed".into(), "yes".into());
    let a = api.replace("a", &PostParams::default(), &a).await.unwrap();
    api.delete("b", &DeleteParams::default()).await.unwrap();
    relay.release();

    // Resumed from its last resourceVersion: every write, in order, no re-list.
    rec.expect_after_cut(&[
        apply("b", &rv(&b)),
        apply("a", &rv(&a)),
        Seen::Delete("b".into()),
    ])
    .await;
    // The old connection was closed before the writes: they came over one
    // admitted since.
    assert!(
        relay.admitted() > before,
        "the watcher came back through the relay"
    );
    let c = api
        .create(&PostParams::default(), &service("c", 80))
        .await
        .unwrap();
    rec.expect(&[apply("c", &rv(&c))]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_relists_after_410_and_ends_with_right_state() {
    for mut server in apiserver_support::both().await {
        eprintln!("--- against the {}", server.name());
        relists_after_410(&mut server).await;
    }
}

async fn relists_after_410(server: &mut Server) {
    let api = services(server).await;
    api.create(&PostParams::default(), &service("a", 80))
        .await
        .unwrap();
    let relay = server.relay().await;
    let watched: Api<Service> = Api::namespaced(server.client_through(&relay).await, NS);
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher::watcher(watched, watcher::Config::default()),
    );
    let mut rec = Recorder::start(stream);
    rec.expect(&[Seen::Init, Seen::InitApply("a".into()), Seen::InitDone])
        .await;
    touch(&api, &mut rec, "a").await;

    relay.hold().await;
    let before = relay.admitted();
    api.create(&PostParams::default(), &service("b", 80))
        .await
        .unwrap();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    server.expire_for_watches().await;
    // A client of the restarted server.
    let api = Api::<Service>::namespaced(server.client().await, NS);
    relay.release();

    // The resumed watch gets 410 Expired; the watcher re-lists from scratch.
    rec.expect_after_cut(&[
        Seen::Error(410),
        Seen::Init,
        Seen::InitApply("b".into()),
        Seen::InitDone,
    ])
    .await;
    assert!(
        relay.admitted() > before,
        "the watcher came back through the relay"
    );
    let c = api
        .create(&PostParams::default(), &service("c", 80))
        .await
        .unwrap();
    rec.expect(&[apply("c", &rv(&c))]).await;
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
    for server in apiserver_support::both().await {
        eprintln!("--- against the {}", server.name());
        streaming_list(&server).await;
    }
}

async fn streaming_list(server: &Server) {
    let api = services(server).await;
    api.create(&PostParams::default(), &service("a", 80))
        .await
        .unwrap();
    let config = watcher::Config::default().streaming_lists();
    let mut rec = Recorder::start(watcher::watcher(api.clone(), config));
    rec.expect(&[Seen::Init]).await;
    // kube-rs asks for the initial events at resourceVersion 0
    // (NotOlderThan: any state): kube-apiserver's watch cache may send
    // them before it has seen `a`, which then comes as the first event
    // after them. `a` either way, once.
    let mut initial = Vec::new();
    loop {
        match rec.next().await {
            Seen::InitApply(name) => initial.push(name),
            Seen::InitDone => break,
            other => panic!("{other:?} among the initial events"),
        }
    }
    if initial.is_empty() {
        let got = rec.next().await;
        assert!(
            matches!(&got, Seen::Apply { name, .. } if name == "a"),
            "{got:?}"
        );
    } else {
        assert_eq!(initial, ["a"]);
    }
    let b = api
        .create(&PostParams::default(), &service("b", 80))
        .await
        .unwrap();
    rec.expect(&[apply("b", &rv(&b))]).await;
}

/// The test server's alone: a real kube-apiserver cannot be told to answer
/// 503 on cue.
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
