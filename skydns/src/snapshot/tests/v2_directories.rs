//! The v2 keys API's directory nodes: an emptied directory exists until it
//! is deleted, loaded empty directories exist and names below keys do not,
//! v3 snapshots have none, and a read path replaces only what is visible
//! from it.

use crate::snapshot::*;

const SVC: &str = "/skydns/local/cluster/svc/default/web";

fn v2(keys: &[&str], dirs: &[&str]) -> Snapshot {
    Snapshot::with_dirs(
        1,
        keys.iter()
            .map(|k| (k.to_string(), Record::kube2sky_address("10.0.0.1"))),
        dirs.iter().map(|d| d.to_string()),
    )
}

fn found(s: &Snapshot, path: &str) -> Option<usize> {
    s.lookup(path, None, false).map(|l| l.len())
}

#[test]
fn an_emptied_directory_still_exists_until_it_is_deleted() {
    let s = v2(&[&format!("{SVC}/1")], &[]);
    let emptied = s.with_changes(2, [Change::Delete(format!("{SVC}/1"))]);
    assert_eq!(found(&emptied, SVC), Some(0), "empty dir: NODATA");
    assert_eq!(
        found(&emptied, "/skydns/local/cluster/svc/default"),
        Some(0)
    );
    let gone = emptied.with_changes(3, [Change::DeleteDir(SVC.into())]);
    assert_eq!(found(&gone, SVC), None, "deleted dir: NXDOMAIN");
    assert_eq!(found(&gone, "/skydns/local/cluster/svc/default"), Some(0));
}

#[test]
fn v3_snapshots_have_no_directory_nodes() {
    let s = Snapshot::new(
        1,
        [(format!("{SVC}/1"), Record::kube2sky_address("10.0.0.1"))],
    );
    let emptied = s.with_changes(2, [Change::Delete(format!("{SVC}/1"))]);
    assert_eq!(found(&emptied, SVC), None);
}

#[test]
fn loaded_empty_directories_exist_and_names_below_keys_do_not() {
    let s = v2(&[&format!("{SVC}/1")], &["/skydns/local/cluster/pod/ns"]);
    assert_eq!(found(&s, "/skydns/local/cluster/pod/ns"), Some(0));
    assert_eq!(found(&s, "/skydns/local/cluster/pod"), Some(0));
    assert_eq!(found(&s, &format!("{SVC}/1/below")), None, "error 104");
}

#[test]
fn a_read_path_replaces_only_what_is_visible_from_it() {
    let hidden = format!("{SVC}/_tcp/_http");
    let nested = format!("{hidden}/x/_deeper/k");
    let s = v2(
        &[&format!("{SVC}/1"), &format!("{hidden}/old"), &nested],
        &[],
    );
    let record = Record::kube2sky_address("10.0.0.2");
    let read = s.with_changes(
        1,
        [Change::ReadPath {
            path: hidden.clone(),
            entries: vec![(format!("{hidden}/new"), record)],
            dirs: vec![hidden.clone()],
        }],
    );
    assert!(read.has_read(&hidden));
    assert!(read.get(&format!("{hidden}/old")).is_none());
    assert!(read.get(&format!("{hidden}/new")).is_some());
    assert!(read.get(&nested).is_some(), "hidden below the path is kept");
    assert!(read.get(&format!("{SVC}/1")).is_some());
    assert_ne!(read.generation(), s.generation());
}
