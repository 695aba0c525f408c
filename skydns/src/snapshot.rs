//! An immutable, in-memory copy of the records under the etcd prefix.
//!
//! The DNS server answers every query from a [`Snapshot`]: a sorted map from
//! etcd key to parsed [`Record`], tagged with the etcd revision it reflects.
//! The store task builds a new snapshot for every batch of etcd changes and
//! swaps it in whole, so a query never waits on etcd and never sees half an
//! update. [`Snapshot::lookup`] gives the etcd **v2** view the original SkyDNS
//! was written against: a key is a leaf, a key prefix is a directory, a
//! directory listing returns every leaf below it except those under a *hidden*
//! segment (one starting with `_`), and a missing name is "key not found".

use crate::record::Record;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

/// One record and the etcd key it was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// The full etcd key, e.g. `/skydns/local/cluster/svc/default/kubernetes/c88f1059`.
    pub key: Arc<str>,
    /// The parsed value.
    pub record: Arc<Record>,
}

/// All records under the prefix at one etcd revision.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    revision: i64,
    entries: BTreeMap<Arc<str>, Arc<Record>>,
}

/// One change to apply to a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The key now holds this record.
    Put(String, Record),
    /// The key is gone (or now holds a value that is not a record).
    Delete(String),
}

impl Snapshot {
    /// A snapshot holding `entries` at `revision`.
    pub fn new(revision: i64, entries: impl IntoIterator<Item = (String, Record)>) -> Self {
        Snapshot {
            revision,
            entries: entries
                .into_iter()
                .map(|(k, r)| (Arc::from(k), Arc::new(r)))
                .collect(),
        }
    }

    /// The etcd revision this snapshot reflects.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no records at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A new snapshot with `changes` applied, at `revision`.
    pub fn with_changes(&self, revision: i64, changes: impl IntoIterator<Item = Change>) -> Self {
        let mut entries = self.entries.clone();
        for change in changes {
            match change {
                Change::Put(key, record) => {
                    entries.insert(Arc::from(key), Arc::new(record));
                }
                Change::Delete(key) => {
                    entries.remove(key.as_str());
                }
            }
        }
        Snapshot { revision, entries }
    }

    /// The record stored exactly at `key`, if any.
    pub fn get(&self, key: &str) -> Option<Leaf> {
        self.entries.get_key_value(key).map(|(k, r)| Leaf {
            key: k.clone(),
            record: r.clone(),
        })
    }

    /// Every leaf whose key starts with `prefix` (a raw string prefix).
    pub fn scan_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = Leaf> + 'a {
        self.entries
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |(k, _)| k.starts_with(prefix))
            .map(|(k, r)| Leaf {
                key: k.clone(),
                record: r.clone(),
            })
    }

    /// The etcd v2 recursive GET of `path`.
    ///
    /// Returns `None` when the path is neither a key nor a directory ("key not
    /// found", error 100). A leaf returns itself. A directory returns every
    /// visible leaf below it — none at all when `exact` is set. With
    /// `wildcard` (the full query path holding `*`/`any` segments), a listed
    /// leaf is kept only when it matches that pattern segment by segment.
    pub fn lookup(&self, path: &str, wildcard: Option<&str>, exact: bool) -> Option<Vec<Leaf>> {
        if let Some(leaf) = self.get(path) {
            return Some(vec![leaf]);
        }
        let dir = format!("{}/", path.trim_end_matches('/'));
        let mut below = self.scan_prefix(&dir).peekable();
        below.peek()?;
        if exact {
            return Some(Vec::new());
        }
        let pattern: Option<Vec<&str>> = wildcard.map(|w| w.split('/').collect());
        Some(
            below
                .filter(|leaf| !is_hidden_below(&leaf.key[dir.len()..]))
                .filter(|leaf| {
                    pattern
                        .as_ref()
                        .is_none_or(|p| matches_wildcard(p, &leaf.key))
                })
                .collect(),
        )
    }
}

/// Whether a key path relative to a listed directory passes through a hidden
/// (underscore) segment, which etcd v2 leaves out of directory listings.
fn is_hidden_below(relative: &str) -> bool {
    relative.split('/').any(|segment| segment.starts_with('_'))
}

/// SkyDNS's wildcard filter: every segment of the pattern must be `*`/`any`
/// or equal to the key's segment at the same index; the key may be longer.
fn matches_wildcard(pattern: &[&str], key: &str) -> bool {
    let key: Vec<&str> = key.split('/').collect();
    if pattern.len() > key.len() {
        return false;
    }
    pattern
        .iter()
        .enumerate()
        .all(|(i, p)| *p == "*" || *p == "any" || key.get(i).is_some_and(|k| k == p))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
