//! Watches held to a real kube-apiserver (`apiserver_support::both`):
//! bookmarks, a kube-rs watcher following one Service's EndpointSlices
//! with history replayed, and a slice watch and continue token refused
//! with 410 after compaction.

mod apiserver_support;

use apiserver_support::{both, service, slice, within, Server};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event};
use kube::ResourceExt;
use test_support::wait::eventually;

/// The namespace of the tests that run on both servers.
const NS: &str = "sliced";

/// The EndpointSlices of [`NS`] on `server`, with its namespace made.
async fn slices(server: &Server) -> Api<EndpointSlice> {
    server.namespace(NS).await;
    slices_of(server).await
}

/// The EndpointSlices of [`NS`] on `server` (a new client: the real one
/// may have been restarted).
async fn slices_of(server: &Server) -> Api<EndpointSlice> {
    Api::namespaced(server.client().await, NS)
}

#[tokio::test]
async fn watch_sends_bookmarks_and_honours_timeout() {
    for server in both().await {
        eprintln!("--- against the {}", server.name());
        bookmarks_and_timeout(&server).await;
    }
}

async fn bookmarks_and_timeout(server: &Server) {
    server.namespace("marked").await;
    let api: Api<Service> = Api::namespaced(server.client().await, "marked");
    let a = api
        .create(&PostParams::default(), &service("a", 80))
        .await
        .unwrap();
    let a_rv: u64 = a.resource_version().unwrap().parse().unwrap();
    // A watch from "0" starts from kube-apiserver's watch cache, which may
    // not hold `a` yet on a loaded machine (then a bookmark comes first and
    // `a` after it): wait until a list served from that cache has it.
    eventually(
        "the watch cache to hold a",
        test_support::wait::DEADLINE,
        async || {
            let listed = api.list(&ListParams::default().match_any()).await?;
            anyhow::ensure!(listed.items.iter().any(|s| s.name_any() == "a"));
            Ok(())
        },
    )
    .await
    .unwrap();
    // kube-apiserver sends its bookmark 2 s before the watch's timeout, at
    // the version its cache of Services has reached; from "0" it sends it
    // even when nothing moved since the initial events (annotated
    // k8s.io/initial-events-end). The test server sends one every 200 ms.
    let params = WatchParams::default().timeout(4);
    let opened = std::time::Instant::now();
    let events: Vec<_> = within(
        "the watch to time out",
        api.watch(&params, "0").await.unwrap().collect(),
    )
    .await;
    // Held open until its timeout (less a second of rounding: the real
    // server times watches out on its own clock).
    let held = opened.elapsed();
    assert!(
        held >= std::time::Duration::from_secs(3),
        "closed after {held:?}"
    );
    assert!(
        matches!(&events[0], Ok(WatchEvent::Added(s)) if s.name_any() == "a"),
        "{events:?}"
    );
    let bookmarks: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Ok(WatchEvent::Bookmark(b)) => b.metadata.resource_version.parse().ok(),
            _ => None,
        })
        .collect();
    assert!(!bookmarks.is_empty(), "no bookmark in {events:?}");
    match server {
        // At the server's current version: nothing was written since `a`.
        Server::Test(handle) => assert!(
            bookmarks.contains(&handle.resource_version()),
            "{bookmarks:?}"
        ),
        // Deviation: at the version its cache of Services has reached, which
        // may have moved on through etcd's progress notifications: not
        // before `a`'s.
        Server::Real(_) => assert!(bookmarks.iter().all(|rv| *rv >= a_rv), "{bookmarks:?}"),
    }
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
    for server in both().await {
        eprintln!("--- against the {}", server.name());
        follows_the_slices_of_one_service(&server).await;
    }
}

async fn follows_the_slices_of_one_service(server: &Server) {
    let api = slices(server).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slice_watches_get_bookmarks_and_410_after_compaction() {
    for mut server in both().await {
        eprintln!("--- against the {}", server.name());
        bookmarks_and_410(&mut server).await;
    }
}

async fn bookmarks_and_410(server: &mut Server) {
    let api = slices(server).await;
    let created = api
        .create(
            &PostParams::default(),
            &slice("web-1", "web", &["10.244.1.1"]),
        )
        .await
        .unwrap();
    slice_bookmarks(server, &api, &created).await;
    slices_410(server, &api, &created).await;
}

/// A watch of [`NS`]'s slices from `created` gets bookmarks, and nothing
/// else, once the version moved past `created` (a slice written in another
/// namespace): the test server's every 200 ms at its current version;
/// kube-apiserver's 2 s before the watch's timeout at the version its
/// cache of slices has reached, sent only when that is past what the
/// watch has seen (its cacher's `process`: a watch from a given version on
/// which nothing moved gets none).
async fn slice_bookmarks(server: &Server, api: &Api<EndpointSlice>, created: &EndpointSlice) {
    let params = WatchParams::default().timeout(8);
    let from = created.resource_version().unwrap();
    let mut stream = api.watch(&params, &from).await.unwrap().boxed();
    server.namespace("elsewhere").await;
    let elsewhere = Api::<EndpointSlice>::namespaced(server.client().await, "elsewhere")
        .create(
            &PostParams::default(),
            &slice("db-1", "db", &["10.244.9.9"]),
        )
        .await
        .unwrap();
    let past: u64 = elsewhere.resource_version().unwrap().parse().unwrap();
    loop {
        let event = within("a bookmark", stream.next())
            .await
            .expect("the watch ended without a bookmark at the write elsewhere");
        let Ok(WatchEvent::Bookmark(bookmark)) = event else {
            panic!("expected only bookmarks, got {event:?}");
        };
        assert_eq!(bookmark.types.api_version, "discovery.k8s.io/v1");
        let marked: u64 = bookmark.metadata.resource_version.parse().unwrap();
        if marked >= past {
            if let Server::Test(_) = server {
                assert_eq!(marked, past, "the current version");
            }
            break;
        }
    }
}

/// After compaction a continue token of [`NS`]'s slices and a watch from
/// `created` get 410.
async fn slices_410(server: &mut Server, api: &Api<EndpointSlice>, created: &EndpointSlice) {
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
    // A write, then compaction up to it: the page's version is gone (the
    // real server says so once its watch cache has learnt of it).
    api.delete("web-2", &DeleteParams::default()).await.unwrap();
    server.compact().await;
    let refused = async || {
        let page = api
            .list(&ListParams::default().limit(1).continue_token(&token))
            .await;
        anyhow::ensure!(
            matches!(&page, Err(kube::Error::Api(s)) if s.code == 410),
            "{page:?}"
        );
        Ok(())
    };
    match server {
        Server::Test(_) => refused().await.unwrap(),
        // Once its watch cache has learnt of the compaction.
        Server::Real(_) => {
            let within_seen = server.compaction_seen_within();
            eventually("the continue token to be refused", within_seen, refused)
                .await
                .unwrap();
        }
    }
    server.expire_for_watches().await;
    let api = slices_of(server).await;
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
