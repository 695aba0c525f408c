//! Pure diff of desired against actual records into etcd operations.
//!
//! [`diff`] turns "what should be under this scope" and "what is there" into
//! batches of [`Op`]s; each batch becomes one etcd transaction. The default
//! ([`Mode::Reconcile`]) is one batch with the changed puts first and the
//! deletes after, so unchanged keys are never touched and no reader ever sees
//! a missing record during an update (k/k#9355). [`Mode::RemoveThenAdd`]
//! reproduces 1.2: delete everything, then write everything, as two separate
//! batches. Large batches are split by [`chunk`] to respect etcd's txn limit,
//! still puts before deletes.

use crate::records::Records;
use std::collections::BTreeSet;

/// etcd's default `--max-txn-ops`.
pub const MAX_TXN_OPS: usize = 128;

/// One etcd mutation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
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
    pub fn key(&self) -> &str {
        match self {
            Op::Put { key, .. } | Op::Delete { key } => key,
        }
    }
}

/// What a scope's reads found in etcd.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Actual {
    /// The keys kube2sky owns, with their values.
    pub records: Records,
    /// Keys in the scope that hold another writer's value (foreign PTRs):
    /// never written and never deleted.
    pub foreign: BTreeSet<String>,
}

/// Removes from `desired` every key that holds a foreign value in `actual`
/// and returns those keys, so the caller can warn instead of overwriting.
pub fn skip_foreign(desired: &mut Records, actual: &Actual) -> Vec<String> {
    let skipped: Vec<String> = desired
        .keys()
        .filter(|k| actual.foreign.contains(*k))
        .cloned()
        .collect();
    for key in &skipped {
        desired.remove(key);
    }
    skipped
}

/// How a scope's records are replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Put what changed, delete what is gone, in one transaction.
    Reconcile,
    /// 1.2: remove all, then add all, in two transactions.
    RemoveThenAdd,
}

/// The transactions that turn `actual` into `desired`, none over
/// [`MAX_TXN_OPS`]; empty when nothing differs.
pub fn diff(desired: &Records, actual: &Records, mode: Mode) -> Vec<Vec<Op>> {
    batches(desired, actual, mode)
        .into_iter()
        .flat_map(chunk)
        .collect()
}

/// The non-empty batches of [`diff`], before any is split.
fn batches(desired: &Records, actual: &Records, mode: Mode) -> Vec<Vec<Op>> {
    let batches = match mode {
        Mode::Reconcile => {
            let puts = desired
                .iter()
                .filter(|(k, v)| actual.get(*k) != Some(*v))
                .map(|(k, v)| Op::Put {
                    key: k.clone(),
                    value: v.clone(),
                });
            let deletes = actual
                .keys()
                .filter(|k| !desired.contains_key(*k))
                .map(|k| Op::Delete { key: k.clone() });
            vec![puts.chain(deletes).collect::<Vec<_>>()]
        }
        Mode::RemoveThenAdd => {
            let deletes = actual
                .keys()
                .map(|k| Op::Delete { key: k.clone() })
                .collect();
            let puts = desired
                .iter()
                .map(|(k, v)| Op::Put {
                    key: k.clone(),
                    value: v.clone(),
                })
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
pub fn diff_unbounded(desired: &Records, actual: &Records, mode: Mode) -> Vec<Vec<Op>> {
    let ops = batches(desired, actual, mode).concat();
    if ops.is_empty() {
        Vec::new()
    } else {
        vec![ops]
    }
}

/// Splits a batch into transactions of at most [`MAX_TXN_OPS`] ops, keeping order.
pub fn chunk(batch: Vec<Op>) -> Vec<Vec<Op>> {
    if batch.len() <= MAX_TXN_OPS {
        return vec![batch];
    }
    batch.chunks(MAX_TXN_OPS).map(<[Op]>::to_vec).collect()
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

    #[test]
    fn reconcile_touches_only_changes_puts_first() {
        let desired = records(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let actual = records(&[("a", "1"), ("b", "old"), ("z", "9")]);
        assert_eq!(
            diff(&desired, &actual, Mode::Reconcile),
            vec![vec![put("b", "2"), put("c", "3"), del("z")]]
        );
    }

    #[test]
    fn nothing_to_do_gives_no_batches() {
        let same = records(&[("a", "1")]);
        assert!(diff(&same, &same, Mode::Reconcile).is_empty());
        assert!(diff(&Records::new(), &Records::new(), Mode::RemoveThenAdd).is_empty());
    }

    #[test]
    fn remove_then_add_deletes_everything_first_in_its_own_batch() {
        let desired = records(&[("a", "1")]);
        let actual = records(&[("a", "1")]);
        assert_eq!(
            diff(&desired, &actual, Mode::RemoveThenAdd),
            vec![vec![del("a")], vec![put("a", "1")]]
        );
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
            diff(&desired, &actual.records, Mode::Reconcile),
            vec![vec![put("ptr/2", "ours")]]
        );
        assert_eq!(
            diff(&Records::new(), &actual.records, Mode::Reconcile),
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
        let batches = diff(&desired, &Records::new(), Mode::Reconcile);
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
        let batches = diff(&desired, &actual, Mode::Reconcile);
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
    fn unbounded_diffs_are_one_batch_in_the_same_order() {
        let desired = three_hundred_keys();
        let one = diff_unbounded(&desired, &Records::new(), Mode::Reconcile);
        assert_eq!(one.iter().map(Vec::len).collect::<Vec<_>>(), [300]);
        let same = records(&[("a", "1")]);
        assert_eq!(
            diff_unbounded(&same, &same, Mode::RemoveThenAdd),
            vec![vec![del("a"), put("a", "1")]]
        );
        assert!(diff_unbounded(&same, &same, Mode::Reconcile).is_empty());
    }
}
