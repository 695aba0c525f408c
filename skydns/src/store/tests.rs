//! The mirror loop against the in-memory store.

use super::memory::MemoryStore;
use super::*;
use crate::lifecycle::NotReady;
use arc_swap::ArcSwapOption;
use std::time::Duration;
use test_support::wait::{eventually, DEADLINE};

const A: &str = r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#;

async fn until(shared: &SharedSnapshot, what: &str, pred: impl Fn(&Snapshot) -> bool) {
    eventually(what, DEADLINE, async || {
        let now = shared.load();
        let records = now.as_deref().map(|s| s.len());
        anyhow::ensure!(now.as_deref().is_some_and(&pred), "records: {records:?}");
        Ok(())
    })
    .await
    .unwrap();
}

/// Takes `store` down: the mirror counts the failure, keeps publishing its
/// last snapshot (one record by then) and turns not ready.
async fn through_an_outage(
    store: &MemoryStore,
    shared: &SharedSnapshot,
    metrics: &Metrics,
    status: &Status,
) {
    store.set_down(true);
    eventually("the outage to be noticed", DEADLINE, async || {
        anyhow::ensure!(metrics.store_errors() > 0, "no store error counted");
        Ok(())
    })
    .await
    .unwrap();
    let last = shared.load_full().expect("a snapshot");
    assert!(
        last.get("/skydns/local/cluster/kept/x").is_some() && last.len() == 1,
        "the last snapshot, records and all, stays while the store is down"
    );
    // Not ready once the outage is older than the 1 ms bound.
    eventually("not ready while the store is down", DEADLINE, async || {
        let now = status.readiness();
        anyhow::ensure!(matches!(now, Err(NotReady::StoreUnreachable(_))), "{now:?}");
        Ok(())
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn mirror_loads_then_follows_changes_and_survives_outages() {
    let store = MemoryStore::default();
    store.put("/skydns/local/cluster/a/x", A);
    store.put("/skydns/local/cluster/bad/x", "{not json");
    store.put("/other/key", A);
    let shared: SharedSnapshot = Arc::new(ArcSwapOption::empty());
    let stop = CancellationToken::new();
    let metrics = Arc::new(Metrics::default());
    // Not ready once the store has been out of reach for a millisecond.
    let status = Arc::new(Status::new(Duration::from_millis(1)));
    assert_eq!(status.readiness(), Err(NotReady::Loading));
    let reports = MirrorReports {
        config: None,
        metrics: metrics.clone(),
        status: status.clone(),
    };
    let task = tokio::spawn(mirror(
        store.clone(),
        "/skydns/".into(),
        shared.clone(),
        paths::PathRequests::default(),
        reports,
        stop.clone(),
    ));

    until(&shared, "first load", |s| {
        s.get("/skydns/local/cluster/a/x").is_some()
    })
    .await;
    let first = shared.load_full().unwrap();
    assert_eq!(status.readiness(), Ok(()), "ready after the first load");
    assert_eq!(
        first.len(),
        1,
        "bad JSON and keys outside the prefix are left out"
    );

    store.put("/skydns/local/cluster/b/x", A);
    until(&shared, "put applied", |s| {
        s.get("/skydns/local/cluster/b/x").is_some()
    })
    .await;
    store.delete("/skydns/local/cluster/a/x");
    until(&shared, "delete applied", |s| {
        s.get("/skydns/local/cluster/a/x").is_none()
    })
    .await;

    // A value turning bad removes the key rather than keeping stale data.
    store.put("/skydns/local/cluster/b/x", "garbage");
    until(&shared, "bad put removes", |s| {
        s.get("/skydns/local/cluster/b/x").is_none()
    })
    .await;

    // A record to keep through the outage (the snapshot is empty by now).
    store.put("/skydns/local/cluster/kept/x", A);
    until(&shared, "kept record loaded", |s| {
        s.get("/skydns/local/cluster/kept/x").is_some()
    })
    .await;
    through_an_outage(&store, &shared, &metrics, &status).await;

    store.set_down(false);
    store.put("/skydns/local/cluster/c/x", A);
    until(&shared, "changes flow after the outage", |s| {
        s.get("/skydns/local/cluster/c/x").is_some()
    })
    .await;
    assert_eq!(status.readiness(), Ok(()), "ready again after a reload");

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("mirror stops")
        .unwrap();
}

fn start_mirror(store: &MemoryStore) -> (SharedSnapshot, CancellationToken) {
    let shared: SharedSnapshot = Arc::new(ArcSwapOption::empty());
    let stop = CancellationToken::new();
    tokio::spawn(mirror(
        store.clone(),
        "/skydns/".into(),
        shared.clone(),
        paths::PathRequests::default(),
        MirrorReports {
            config: None,
            metrics: Arc::new(Metrics::default()),
            status: Arc::new(Status::new(Duration::ZERO)),
        },
        stop.clone(),
    ));
    (shared, stop)
}

/// A store with one record, mirrored, whose watch broke once and was
/// followed by one more put, which the mirror has applied.
async fn mirrored_after_one_break() -> (MemoryStore, SharedSnapshot, CancellationToken) {
    let store = MemoryStore::default();
    store.put("/skydns/local/cluster/a/x", A);
    let (shared, stop) = start_mirror(&store);
    until(&shared, "first load", |s| s.len() == 1).await;
    store.break_watches();
    store.put("/skydns/local/cluster/b/x", A);
    until(&shared, "the put after the break", |s| s.len() == 2).await;
    (store, shared, stop)
}

#[tokio::test]
async fn a_broken_watch_is_resumed_after_its_last_revision_without_a_reload() {
    let (store, _shared, stop) = mirrored_after_one_break().await;
    assert_eq!(store.loads(), 1, "the mirror read everything again");
    stop.cancel();
}

// The paused clock: the second break comes within RESUME_AGAIN_AFTER of the
// first however slow the machine (the polls advance it by their periods only).
#[tokio::test(start_paused = true)]
async fn a_watch_that_breaks_again_at_once_means_a_reload() {
    let (store, shared, stop) = mirrored_after_one_break().await;
    // Within RESUME_AGAIN_AFTER (1 s) of the first break.
    store.break_watches();
    store.put("/skydns/local/cluster/c/x", A);
    until(&shared, "the put after the second break", |s| s.len() == 3).await;
    assert_eq!(store.loads(), 2, "a second break within a second reloads");
    stop.cancel();
}

/// A watch that fell behind (a burst of writes, e.g. kube2sky's initial
/// sync on v2) reloads only after pausing as long as the last load took:
/// back-to-back reloads would take the store's time from the writes.
#[tokio::test(start_paused = true)]
async fn a_watch_that_fell_behind_reloads_after_a_pause_as_long_as_a_load() {
    let load = Duration::from_millis(300);
    let store = MemoryStore::default();
    store.set_load_time(load);
    store.put("/skydns/local/cluster/a/x", A);
    let (shared, stop) = start_mirror(&store);
    until(&shared, "first load", |s| s.len() == 1).await;
    let behind_at = tokio::time::Instant::now();
    store.fall_behind();
    store.put("/skydns/local/cluster/b/x", A);
    until(&shared, "the reload", |s| s.len() == 2).await;
    let starts = store.load_starts();
    assert_eq!(starts.len(), 2, "one reload");
    let pause = starts[1] - behind_at;
    assert!(
        pause >= load && pause < load + Duration::from_millis(10),
        "reloaded {pause:?} after falling behind, the load takes {load:?}"
    );
    stop.cancel();
}
