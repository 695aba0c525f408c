//! Snapshot lookups: directory listings and hidden (`_`) segments, exact
//! and leaf lookups, wildcard filters, and changes that make a new snapshot
//! and leave the old one alone; the v2 API's directory nodes in
//! `v2_directories`.

use super::*;

mod v2_directories;

fn snap(keys: &[&str]) -> Snapshot {
    Snapshot::new(
        1,
        keys.iter()
            .map(|k| (k.to_string(), Record::kube2sky_address("10.0.0.1"))),
    )
}

fn keys(leaves: Option<Vec<Leaf>>) -> Option<Vec<String>> {
    leaves.map(|l| l.iter().map(|l| l.key.to_string()).collect())
}

const K: &str = "/skydns/local/cluster/svc/default/kubernetes";

fn kube() -> Snapshot {
    snap(&[
        "/skydns/local/cluster/svc/default/kubernetes/c88f1059",
        "/skydns/local/cluster/svc/default/kubernetes/_tcp/_https/c88f1059",
        "/skydns/local/cluster/svc/default/kubernetesx/1",
    ])
}

#[test]
fn directory_listing_hides_underscore_segments() {
    assert_eq!(
        keys(kube().lookup(K, None, false)),
        Some(vec![format!("{K}/c88f1059")])
    );
}

#[test]
fn hidden_directory_can_be_addressed_directly() {
    assert_eq!(
        keys(kube().lookup(&format!("{K}/_tcp/_https"), None, false)),
        Some(vec![format!("{K}/_tcp/_https/c88f1059")])
    );
}

#[test]
fn directory_with_only_hidden_children_exists_but_is_empty() {
    assert_eq!(
        keys(kube().lookup(&format!("{K}/_tcp"), None, false)),
        Some(vec![])
    );
}

#[test]
fn missing_path_is_not_found_and_prefixes_respect_segments() {
    assert_eq!(
        keys(kube().lookup(&format!("{K}/nosuch"), None, false)),
        None
    );
    assert_eq!(
        keys(kube().lookup("/skydns/local/cluster/svc/default/kube", None, false)),
        None
    );
}

#[test]
fn exact_lookup_of_a_directory_is_empty() {
    assert_eq!(keys(kube().lookup(K, None, true)), Some(vec![]));
}

#[test]
fn leaf_lookup_returns_the_leaf() {
    let leaf = format!("{K}/c88f1059");
    assert_eq!(keys(kube().lookup(&leaf, None, true)), Some(vec![leaf]));
}

#[test]
fn wildcard_filter_matches_segment_by_segment() {
    let s = snap(&[
        "/skydns/local/cluster/svc/a/x/1",
        "/skydns/local/cluster/svc/b/x/2",
        "/skydns/local/cluster/svc/b/y/3",
        "/skydns/local/cluster/svc/c/4",
    ]);
    let got = keys(s.lookup(
        "/skydns/local/cluster/svc",
        Some("/skydns/local/cluster/svc/*/x"),
        false,
    ));
    assert_eq!(
        got,
        Some(vec![
            "/skydns/local/cluster/svc/a/x/1".to_string(),
            "/skydns/local/cluster/svc/b/x/2".to_string()
        ])
    );
}

#[test]
fn changes_produce_a_new_snapshot_and_leave_the_old_one_alone() {
    let old = kube();
    let new = old.with_changes(
        7,
        [
            Change::Delete(format!("{K}/c88f1059")),
            Change::Put("/skydns/x".into(), Record::default()),
        ],
    );
    assert_eq!(new.revision(), 7);
    assert!(new.get(&format!("{K}/c88f1059")).is_none());
    assert!(old.get(&format!("{K}/c88f1059")).is_some());
    assert!(new.get("/skydns/x").is_some());
}

#[test]
fn touched_since_follows_the_batches_back_to_a_generation() {
    let base = snap(&["/skydns/a/1"]);
    let one = base.with_changes(2, [Change::Put("/skydns/b/1".into(), Record::default())]);
    let two = one.with_changes(
        3,
        [
            Change::Delete("/skydns/a/1".into()),
            Change::DeleteDir("/skydns/c".into()),
        ],
    );
    let names = |t: Option<Vec<Arc<str>>>| {
        let mut t: Vec<String> = t.unwrap().iter().map(|p| p.to_string()).collect();
        t.sort();
        t
    };
    assert_eq!(
        names(two.touched_since(one.generation())),
        ["/skydns/a/1", "/skydns/c"]
    );
    assert_eq!(
        names(two.touched_since(base.generation())),
        ["/skydns/a/1", "/skydns/b/1", "/skydns/c"]
    );
    assert!(
        two.touched_since(snap(&[]).generation()).is_none(),
        "not an ancestor"
    );
    assert!(base.touched_since(0).is_none(), "a load has no history");

    let mut far = base.clone();
    for r in 0..(HISTORY_DEPTH as i64 + 2) {
        far = far.with_changes(
            r,
            [Change::Put(format!("/skydns/d/{r}"), Record::default())],
        );
    }
    assert!(
        far.touched_since(base.generation()).is_none(),
        "cut after HISTORY_DEPTH"
    );
}
