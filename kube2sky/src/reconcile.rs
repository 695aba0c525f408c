//! Pure diff of desired against actual records into etcd operations: [`diff`]
//! makes batches of [`Op`]s, each one etcd transaction, with puts before
//! deletes ([`Mode::Reconcile`]) or 1.2's delete-then-write
//! ([`Mode::RemoveThenAdd`]). [`pack`] cuts batches to etcd's limit without
//! splitting a service or a pod IP.

use crate::records::{Names, Records};
use std::collections::BTreeSet;

/// Names the unit an op belongs to: ops of one unit share a transaction.
pub(crate) type UnitOf<'a> = &'a dyn Fn(&Op) -> String;

/// One etcd mutation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Write `value` at `key`.
    Put {
        /// The key.
        key: String,
        /// The JSON value.
        value: String,
    },
    /// Remove `key`.
    Delete {
        /// The key.
        key: String,
    },
}

impl Op {
    /// The key this op touches.
    pub(crate) fn key(&self) -> &str {
        match self {
            Op::Put { key, .. } | Op::Delete { key } => key,
        }
    }
}

/// What a scope's reads found in etcd.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Actual {
    /// The keys kube2sky owns, with their values.
    pub records: Records,
    /// Keys in the scope that hold another writer's value (foreign PTRs):
    /// never written and never deleted.
    pub foreign: BTreeSet<String>,
}

impl Actual {
    /// Files one key-value read from etcd as ours or foreign. Under the PTR
    /// subtree (`ptr`) only values naming one of our services are ours;
    /// under the stub zones only leaves named `kube-dns_<n>`; the config key
    /// only when it holds a JSON object.
    pub(crate) fn file(&mut self, names: &Names, key: &str, value: &str, ptr: bool) {
        let ours = if key == names.dns_version_key() {
            // A hand-written `dns-version` is not ours to delete (or overwrite).
            names.owns_version_value(value)
        } else if let Some(stub) = key.strip_prefix(&names.stub_root()) {
            // Stub servers written by hand sit beside ours.
            crate::records::is_stub_leaf(stub.rsplit('/').next().unwrap_or_default())
        } else if key == names.config_key() {
            // Only a JSON object can have its `nameservers` merged.
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(value).is_ok()
        } else {
            !ptr || names.owns_ptr_value(value)
        };
        if ours {
            self.records.insert(key.to_string(), value.to_string());
        } else {
            self.foreign.insert(key.to_string());
        }
    }
}

/// Removes from `desired` every key that holds a foreign value in `actual`,
/// or lies below or above one (a PTR that would turn another writer's leaf
/// into a directory, or write into its directory: v2 refuses the one, and
/// neither is ours to do), and returns those keys, so the caller can warn
/// instead of overwriting.
pub(crate) fn skip_foreign(desired: &mut Records, actual: &Actual) -> Vec<String> {
    let clashes = |key: &str| {
        actual.foreign.contains(key)
            || key
                .match_indices('/')
                .any(|(at, _)| actual.foreign.contains(&key[..at]))
            || {
                let dir = format!("{key}/");
                (actual.foreign.range::<String, _>(dir.clone()..).next())
                    .is_some_and(|f| f.starts_with(&dir))
            }
    };
    let skipped: Vec<String> = desired.keys().filter(|k| clashes(k)).cloned().collect();
    for key in &skipped {
        desired.remove(key);
    }
    skipped
}

/// How a scope's records are replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Put what changed, delete what is gone, in one transaction.
    Reconcile,
    /// 1.2: remove all, then add all, in two transactions.
    RemoveThenAdd,
}

/// The transactions that turn `actual` into `desired`, none over `max_ops`
/// and none splitting a unit that fits in one (see [`pack`]); empty when
/// nothing differs.
pub(crate) fn diff(
    desired: Records,
    actual: &Records,
    mode: Mode,
    max_ops: usize,
    unit: UnitOf<'_>,
) -> Vec<Vec<Op>> {
    batches(desired, actual, mode)
        .into_iter()
        .flat_map(|batch| pack(batch, max_ops, unit))
        .collect()
}

/// The non-empty batches of [`diff`], before any is split.
/// `desired` is consumed: its strings move into the puts (a full sync of a
/// large cluster would otherwise hold every record twice).
fn batches(desired: Records, actual: &Records, mode: Mode) -> Vec<Vec<Op>> {
    let batches = match mode {
        Mode::Reconcile => {
            let deletes: Vec<Op> = actual
                .keys()
                .filter(|k| !desired.contains_key(*k))
                .map(|k| Op::Delete { key: k.clone() })
                .collect();
            let mut ops: Vec<Op> = desired
                .into_iter()
                .filter(|(k, v)| actual.get(k) != Some(v))
                .map(|(key, value)| Op::Put { key, value })
                .collect();
            ops.extend(deletes);
            vec![ops]
        }
        Mode::RemoveThenAdd => {
            let deletes = actual
                .keys()
                .map(|k| Op::Delete { key: k.clone() })
                .collect();
            let puts = desired
                .into_iter()
                .map(|(key, value)| Op::Put { key, value })
                .collect();
            vec![deletes, puts]
        }
    };
    batches
        .into_iter()
        .filter(|b: &Vec<Op>| !b.is_empty())
        .collect()
}

/// [`diff`] for a store without transactions (etcd v2): every op in one
/// batch, in the same order; empty when nothing differs.
pub(crate) fn diff_unbounded(desired: Records, actual: &Records, mode: Mode) -> Vec<Vec<Op>> {
    let ops = batches(desired, actual, mode).concat();
    if ops.is_empty() {
        Vec::new()
    } else {
        vec![ops]
    }
}

/// Cuts a batch into transactions of at most `max_ops` ops. A batch that
/// fits stays whole. Otherwise ops are grouped by `unit` (keeping their
/// order within a unit, so puts stay before deletes) and whole units are
/// packed into transactions: units with a put first, in unit order, then
/// units that only delete. A unit larger than `max_ops` alone (a headless
/// service with hundreds of endpoints) is the only thing ever split: it
/// fills the current transaction and the next ones, in order.
pub(crate) fn pack(batch: Vec<Op>, max_ops: usize, unit: UnitOf<'_>) -> Vec<Vec<Op>> {
    let max_ops = max_ops.max(1);
    if batch.len() <= max_ops {
        return vec![batch];
    }
    // Sorted by unit (a stable sort: each unit keeps its order): a map of
    // per-unit Vecs cost ~330 bytes per unit, and a full sync of 150k pods
    // has 150k one-key units.
    let mut tagged: Vec<(String, Option<Op>)> =
        batch.into_iter().map(|op| (unit(&op), Some(op))).collect();
    tagged.sort_by(|a, b| a.0.cmp(&b.0));
    let mut runs = Vec::new(); // (start, end, whether the unit puts)
    let mut start = 0;
    for end in 1..=tagged.len() {
        if end == tagged.len() || tagged[end].0 != tagged[start].0 {
            let puts = tagged[start..end]
                .iter()
                .any(|(_, op)| matches!(op, Some(Op::Put { .. })));
            runs.push((start, end, puts));
            start = end;
        }
    }
    let putting = runs.iter().filter(|r| r.2);
    let deleting = runs.iter().filter(|r| !r.2);
    let mut out = Vec::new();
    let mut current: Vec<Op> = Vec::new();
    for &(start, end, _) in putting.chain(deleting) {
        let len = end - start;
        if len <= max_ops && current.len() + len > max_ops {
            out.push(std::mem::take(&mut current));
        }
        current.extend(
            tagged[start..end]
                .iter_mut()
                .filter_map(|(_, op)| op.take()),
        );
        while current.len() > max_ops {
            out.push(current.drain(..max_ops).collect());
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(pairs: &[(&str, &str)]) -> Records {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn put(k: &str, v: &str) -> Op {
        Op::Put {
            key: k.into(),
            value: v.into(),
        }
    }

    fn del(k: &str) -> Op {
        Op::Delete { key: k.into() }
    }

    /// Every key its own unit.
    fn by_key(op: &Op) -> String {
        op.key().to_string()
    }

    /// The unit is the key up to its last `/`.
    fn by_dir(op: &Op) -> String {
        let key = op.key();
        key[..key.rfind('/').unwrap_or(0)].to_string()
    }

    #[test]
    fn keys_read_from_etcd_are_filed_as_ours_or_foreign() {
        let names = Names::new("cluster.local");
        let mut actual = Actual::default();
        let a = r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#;
        // Outside the PTR subtree every key is ours, whatever its value.
        actual.file(&names, "/skydns/local/cluster/svc/d/x/c88f1059", a, false);
        actual.file(
            &names,
            "/skydns/local/cluster/svc/d/y/0badf00d",
            "junk",
            false,
        );
        // A PTR is ours only when it names a service of ours.
        let ours = r#"{"host":"kubernetes.default.svc.cluster.local.","ttl":30}"#;
        actual.file(&names, "/skydns/arpa/in-addr/10/0/0/1", ours, true);
        let theirs = r#"{"host":"db.example.org.","ttl":30}"#;
        actual.file(&names, "/skydns/arpa/in-addr/10/0/0/2", theirs, true);
        // dns-version is ours only with the value kube2sky writes.
        let version = r#"{"text":"1.1.0","ttl":30,"targetstrip":0}"#;
        actual.file(&names, "/skydns/local/cluster/dns-version", version, false);
        assert_eq!(
            actual.records,
            records(&[
                ("/skydns/arpa/in-addr/10/0/0/1", ours),
                ("/skydns/local/cluster/dns-version", version),
                ("/skydns/local/cluster/svc/d/x/c88f1059", a),
                ("/skydns/local/cluster/svc/d/y/0badf00d", "junk"),
            ])
        );
        assert_eq!(
            actual.foreign,
            BTreeSet::from(["/skydns/arpa/in-addr/10/0/0/2".to_string()])
        );
        // A hand-written dns-version is foreign, not to be overwritten.
        let mut hand = Actual::default();
        let written = r#"{"text":"hello","ttl":30}"#;
        hand.file(&names, "/skydns/local/cluster/dns-version", written, false);
        assert!(hand.records.is_empty());
        assert_eq!(hand.foreign.len(), 1);
    }

    fn diff(desired: Records, actual: &Records, mode: Mode) -> Vec<Vec<Op>> {
        super::diff(
            desired,
            actual,
            mode,
            crate::config::ETCD_MAX_TXN_OPS,
            &by_key,
        )
    }

    #[test]
    fn reconcile_touches_only_changes_puts_first() {
        let desired = records(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let actual = records(&[("a", "1"), ("b", "old"), ("z", "9")]);
        assert_eq!(
            diff(desired.clone(), &actual, Mode::Reconcile),
            vec![vec![put("b", "2"), put("c", "3"), del("z")]]
        );
    }

    #[test]
    fn nothing_to_do_gives_no_batches() {
        let same = records(&[("a", "1")]);
        assert!(diff(same.clone(), &same, Mode::Reconcile).is_empty());
        assert!(diff(Records::new(), &Records::new(), Mode::RemoveThenAdd).is_empty());
    }

    #[test]
    fn remove_then_add_deletes_everything_first_in_its_own_batch() {
        let desired = records(&[("a", "1")]);
        let actual = records(&[("a", "1")]);
        assert_eq!(
            diff(desired.clone(), &actual, Mode::RemoveThenAdd),
            vec![vec![del("a")], vec![put("a", "1")]]
        );
    }

    #[test]
    fn keys_above_or_below_a_foreign_key_are_not_written() {
        let mut desired: Records = [
            ("ptr/1/a".to_string(), "v".to_string()),
            ("ptr/2".to_string(), "v".to_string()),
            ("ptr/3".to_string(), "v".to_string()),
        ]
        .into();
        let actual = Actual {
            records: Records::new(),
            foreign: ["ptr/1".to_string(), "ptr/2/x".to_string()].into(),
        };
        assert_eq!(
            skip_foreign(&mut desired, &actual),
            vec!["ptr/1/a", "ptr/2"]
        );
        assert_eq!(desired.keys().collect::<Vec<_>>(), ["ptr/3"]);
    }

    #[test]
    fn foreign_keys_are_neither_written_nor_deleted() {
        let mut desired = records(&[("ptr/1", "ours"), ("ptr/2", "ours")]);
        let actual = Actual {
            records: records(&[("ptr/2", "old")]),
            foreign: ["ptr/1".to_string()].into(),
        };
        assert_eq!(skip_foreign(&mut desired, &actual), vec!["ptr/1"]);
        assert_eq!(
            diff(desired.clone(), &actual.records, Mode::Reconcile),
            vec![vec![put("ptr/2", "ours")]]
        );
        assert_eq!(
            diff(Records::new(), &actual.records, Mode::Reconcile),
            vec![vec![del("ptr/2")]],
            "a foreign key is not in the actual records, so it is never deleted"
        );
    }

    /// `k000` … `k299`, each holding `v`.
    fn three_hundred_keys() -> Records {
        (0..300)
            .map(|i| (format!("k{i:03}"), "v".to_string()))
            .collect()
    }

    #[test]
    fn big_batches_are_chunked_in_order() {
        let desired = three_hundred_keys();
        let batches = diff(desired.clone(), &Records::new(), Mode::Reconcile);
        assert_eq!(
            batches.iter().map(Vec::len).collect::<Vec<_>>(),
            [128, 128, 44]
        );
        assert_eq!(batches[0][0].key(), "k000");
        assert_eq!(batches[2][43].key(), "k299");
    }

    #[test]
    fn an_update_over_128_ops_writes_every_put_before_any_delete() {
        // 200 new keys, 100 gone: 300 ops in three transactions, and the
        // deletes only after the last put (a crash between transactions
        // leaves extra records, never missing ones).
        let desired: Records = (0..200).map(|i| (format!("k{i:03}"), "v".into())).collect();
        let actual: Records = (0..100).map(|i| (format!("z{i:03}"), "v".into())).collect();
        let batches = diff(desired.clone(), &actual, Mode::Reconcile);
        assert_eq!(
            batches.iter().map(Vec::len).collect::<Vec<_>>(),
            [128, 128, 44]
        );
        assert_eq!(batches[1][71], put("k199", "v"));
        assert_eq!(batches[1][72], del("z000"));
        let ops = batches.concat();
        let last_put = ops.iter().rposition(|op| matches!(op, Op::Put { .. }));
        let first_delete = ops.iter().position(|op| matches!(op, Op::Delete { .. }));
        assert_eq!((last_put, first_delete), (Some(199), Some(200)));
    }

    #[test]
    fn transactions_never_split_a_unit_that_fits() {
        // 50 services of 3 keys: 150 puts. Cut at 128 by key, service 42
        // would be split (A written, SRVs not); by unit, a transaction
        // holds 42 whole services (126 ops) and the next the other 8.
        let desired: Records = (0..50)
            .flat_map(|s| (0..3).map(move |k| (format!("svc/s{s:02}/k{k}"), "v".to_string())))
            .collect();
        let by_key = super::diff(
            desired.clone(),
            &Records::new(),
            Mode::Reconcile,
            128,
            &by_key,
        );
        assert_eq!(by_key.iter().map(Vec::len).collect::<Vec<_>>(), [128, 22]);
        let batches = super::diff(
            desired.clone(),
            &Records::new(),
            Mode::Reconcile,
            128,
            &by_dir,
        );
        assert_eq!(batches.iter().map(Vec::len).collect::<Vec<_>>(), [126, 24]);
        assert_eq!(batches[1][0].key(), "svc/s42/k0");
        for batch in &batches {
            let units: BTreeSet<String> = batch.iter().map(by_dir).collect();
            for unit in units {
                let in_batch = batch.iter().filter(|op| by_dir(op) == unit).count();
                assert_eq!(in_batch, 3, "{unit} split across transactions");
            }
        }
    }

    #[test]
    fn units_that_put_go_before_units_that_only_delete() {
        // `a/` only deletes, `b/` puts and deletes: b's transaction first,
        // its put before its delete.
        let desired = records(&[("b/new", "1")]);
        let actual: Records = (0..100)
            .map(|i| (format!("a/{i:03}"), "v".to_string()))
            .chain([("b/old".to_string(), "v".to_string())])
            .collect();
        let batches = super::diff(desired.clone(), &actual, Mode::Reconcile, 64, &by_dir);
        assert_eq!(batches[0][..2], [put("b/new", "1"), del("b/old")]);
        assert_eq!(
            batches.iter().map(Vec::len).collect::<Vec<_>>(),
            [64, 38],
            "units that alone exceed the limit are split in order"
        );
        assert_eq!(batches[0][2], del("a/000"));
    }

    #[test]
    fn a_smaller_limit_gives_smaller_transactions() {
        let desired = three_hundred_keys();
        let batches = super::diff(
            desired.clone(),
            &Records::new(),
            Mode::Reconcile,
            64,
            &by_key,
        );
        assert_eq!(
            batches.iter().map(Vec::len).collect::<Vec<_>>(),
            [64, 64, 64, 64, 44]
        );
    }

    #[test]
    fn unbounded_diffs_are_one_batch_in_the_same_order() {
        let desired = three_hundred_keys();
        let one = diff_unbounded(desired.clone(), &Records::new(), Mode::Reconcile);
        assert_eq!(one.iter().map(Vec::len).collect::<Vec<_>>(), [300]);
        let same = records(&[("a", "1")]);
        assert_eq!(
            diff_unbounded(same.clone(), &same, Mode::RemoveThenAdd),
            vec![vec![del("a"), put("a", "1")]]
        );
        assert!(diff_unbounded(same.clone(), &same, Mode::Reconcile).is_empty());
    }
}
