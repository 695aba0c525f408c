//! Writing through the etcd v2 keys API, as kube2sky 1.2 did (`PUT
//! /v2/keys<key>` with form `value=<json>`, and `DELETE`). v2 has no
//! transactions: a batch is all its puts, then all its deletes, then the
//! removal of directories left empty. Hidden (`_`) directories are found
//! through an index kept in etcd (`hidden`).

use super::attempt::{bounded, EtcdError};
use crate::reconcile::{Actual, Op};
use crate::records::{Names, Records};
use crate::scope::Read;
use etcd_access::v2::{Client, DIRECTORY_NOT_EMPTY, KEY_EXISTS, KEY_NOT_FOUND, NOT_A_DIRECTORY};
use futures::{StreamExt, TryStreamExt};
use hidden::{visible_part, HiddenDirs};
use skydns_msg::path::hidden_part;
use std::collections::BTreeSet;
use std::ops::Bound;
use tokio_util::sync::CancellationToken;

mod hidden;

/// Requests in flight at once.
pub(in crate::etcd) const IN_FLIGHT: usize = 64;

/// The v2 backend.
pub(in crate::etcd) struct V2 {
    client: Client,
    names: Names,
    shutdown: CancellationToken,
    /// Hidden directories kube2sky wrote keys into.
    hidden: HiddenDirs,
}

/// `batch` reordered within each run of puts or deletes: PTR puts after
/// the other puts, PTR deletes before the other deletes.
fn ptrs_around_their_targets(names: &Names, batch: &[Op]) -> Vec<Op> {
    let mut out = Vec::with_capacity(batch.len());
    for run in batch.chunk_by(|a, b| std::mem::discriminant(a) == std::mem::discriminant(b)) {
        let (ptrs, others): (Vec<&Op>, Vec<&Op>) =
            run.iter().partition(|op| names.is_ptr_key(op.key()));
        match run.first() {
            Some(Op::Put { .. }) => out.extend(others.into_iter().chain(ptrs).cloned()),
            _ => out.extend(ptrs.into_iter().chain(others).cloned()),
        }
    }
    out
}

/// Splits off the deletes that must go before `batch`'s puts: in v2 a key
/// is a leaf or a directory, never both, so a leaf that becomes a directory
/// (a hostname or IP that gets a second record) is deleted before the
/// leaves below it are put, and the leaves of a directory that becomes a
/// leaf again before the leaf is put (the directory, then empty, is pruned).
fn leaf_dir_swaps(batch: Vec<Op>) -> (Vec<Op>, Vec<Op>) {
    let puts: BTreeSet<&str> = batch
        .iter()
        .filter_map(|op| match op {
            Op::Put { key, .. } => Some(key.as_str()),
            Op::Delete { .. } => None,
        })
        .collect();
    let conflicts = |key: &str| {
        let dir = format!("{key}/");
        let becomes_dir = puts
            .range::<&str, _>(dir.as_str()..)
            .next()
            .is_some_and(|p| p.starts_with(&dir));
        let becomes_leaf = key
            .match_indices('/')
            .any(|(at, _)| puts.contains(&key[..at]));
        becomes_dir || becomes_leaf
    };
    let swapped: BTreeSet<String> = batch
        .iter()
        .filter_map(|op| match op {
            Op::Delete { key } if conflicts(key) => Some(key.clone()),
            _ => None,
        })
        .collect();
    batch
        .into_iter()
        .partition(|op| matches!(op, Op::Delete { key } if swapped.contains(key)))
}

/// A response's `X-Etcd-Index` as a revision.
fn revision(index: u64) -> i64 {
    i64::try_from(index).unwrap_or(i64::MAX)
}

impl V2 {
    pub(in crate::etcd) fn new(client: Client, names: Names, shutdown: CancellationToken) -> Self {
        V2 {
            client,
            hidden: HiddenDirs::new(names.domain(), &names.svc_root()),
            names,
            shutdown,
        }
    }

    pub(in crate::etcd) async fn put_marker(&mut self, marker: &str) -> Result<i64, EtcdError> {
        // Keep etcd's error to tell "the key exists" apart. Created only
        // when absent, so a restart over a store that is already right
        // changes nothing (etcd's index stays put).
        let create = async { Ok::<_, EtcdError>(self.client.create(marker, "kube2sky").await) };
        match bounded(&self.shutdown, create).await? {
            Ok(resp) => Ok(revision(resp.index)),
            Err(etcd_access::v2::Error::Etcd {
                code: KEY_EXISTS,
                index,
                ..
            }) => Ok(revision(index)),
            // A missing keys API is EtcdError::WrongApi.
            Err(e) => Err(e.into()),
        }
    }

    pub(in crate::etcd) async fn marker(&mut self, marker: &str) -> Result<(bool, i64), EtcdError> {
        let got = bounded(
            &self.shutdown,
            tolerate(self.client.get(marker, false), ABSENT),
        )
        .await?;
        Ok((matches!(got, Outcome::Found(_)), got.revision()))
    }

    pub(in crate::etcd) async fn read(
        &mut self,
        reads: &[Read],
        desired: &Records,
    ) -> Result<(Actual, i64), EtcdError> {
        let mut out = Actual::default();
        let mut seen = 0;
        for read in reads {
            let (path, ptr) = match read {
                Read::Prefix(p) => (p.trim_end_matches('/'), false),
                Read::OwnedPtrs(p) => (p.trim_end_matches('/'), true),
                Read::OwnedPtr(key) => (key.as_str(), true),
                Read::Key(key) => {
                    seen = seen.max(self.read_key(key, &mut out).await?);
                    continue;
                }
                Read::Range { from, to } => {
                    let why = format!("a range read ({from}..{to}) needs etcd v3");
                    return Err(EtcdError::Unsupported(why));
                }
                Read::OwnedRange { from, to } => {
                    let why = format!("a range read ({from}..{to}) needs etcd v3");
                    return Err(EtcdError::Unsupported(why));
                }
            };
            let mut dirs = BTreeSet::new();
            seen = seen.max(self.read_into(path, ptr, &mut out, &mut dirs).await?);
            if let Read::Prefix(p) = read {
                seen = seen.max(self.read_hidden(p, desired, &dirs, &mut out).await?);
            }
        }
        Ok((out, seen))
    }

    /// Reads `path` recursively into `out` (absent is empty), and the
    /// directories found into `dirs`.
    async fn read_into(
        &self,
        path: &str,
        ptr: bool,
        out: &mut Actual,
        dirs: &mut BTreeSet<String>,
    ) -> Result<i64, EtcdError> {
        let read = tolerate(self.client.get(path, true), ABSENT);
        let outcome = bounded(&self.shutdown, read).await?;
        if let Outcome::Found(resp) = &outcome {
            for leaf in resp.node.leaves() {
                out.file(&self.names, &leaf.key, &leaf.value, ptr);
            }
            dirs.extend(resp.node.dirs());
        }
        Ok(outcome.revision())
    }

    /// Reads `key` alone (a leaf; a directory there is not ours).
    async fn read_key(&self, key: &str, out: &mut Actual) -> Result<i64, EtcdError> {
        let read = tolerate(self.client.get(key, false), ABSENT);
        let outcome = bounded(&self.shutdown, read).await?;
        if let Outcome::Found(resp) = &outcome {
            for leaf in resp.node.leaves().into_iter().filter(|l| l.key == key) {
                out.file(&self.names, &leaf.key, &leaf.value, false);
            }
        }
        Ok(outcome.revision())
    }

    /// Reads the hidden directories below `prefix` that the desired records
    /// use or that kube2sky wrote, where the visible directory above them
    /// exists (`visible`: the directories the prefix read found).
    async fn read_hidden(
        &mut self,
        prefix: &str,
        desired: &Records,
        visible: &BTreeSet<String>,
        out: &mut Actual,
    ) -> Result<i64, EtcdError> {
        if !prefix.starts_with(&self.names.svc_root()) {
            return Ok(0); // only service records have hidden (port) directories
        }
        let root = prefix.trim_end_matches('/');
        let mut seen = (self.hidden)
            .load(&self.client, &self.shutdown, prefix)
            .await?;
        let mut dirs: BTreeSet<String> = desired
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter_map(|(k, _)| hidden_part(k, root))
            .collect();
        dirs.extend(self.hidden.below(prefix).cloned());
        // A hidden directory can only be below a visible one that exists:
        // the others are gone (e.g. etcd was wiped), and forgotten, so that
        // writing them again records them in the index again.
        let (dirs, gone): (BTreeSet<String>, BTreeSet<String>) = dirs
            .into_iter()
            .partition(|dir| visible.contains(visible_part(dir)));
        for dir in &gone {
            self.hidden.forget(dir);
        }
        let (client, shutdown) = (&self.client, &self.shutdown);
        let reads = futures::stream::iter(dirs.iter().map(|dir| async move {
            bounded(shutdown, tolerate(client.get(dir, true), ABSENT)).await
        }))
        .buffered(IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await?;
        let mut unindexed = Vec::new();
        for (dir, read) in dirs.iter().zip(reads) {
            seen = seen.max(read.revision());
            match read {
                Outcome::Found(resp) => {
                    for leaf in resp.node.leaves() {
                        out.file(&self.names, &leaf.key, &leaf.value, false);
                    }
                    if !self.hidden.knows(dir) {
                        unindexed.push(dir.clone());
                    }
                }
                Outcome::Expected(_) => self.hidden.forget(dir),
            }
        }
        if !unindexed.is_empty() {
            // The index lost them (a hand edit, a bad value, a wipe of
            // /kube2sky alone): put back, so that their removal is seen
            // even after a restart.
            tracing::info!(
                dirs = unindexed.len(),
                "indexing hidden directories found in etcd but missing from the index"
            );
            let added = (self.hidden).add(&self.client, &self.shutdown, unindexed);
            seen = seen.max(added.await?);
        }
        Ok(seen)
    }

    /// Applies `batch` in runs of puts or deletes, in its order (a
    /// reconcile is all puts, then all deletes; 1.2's remove-then-add the
    /// reverse), each run [`IN_FLIGHT`] requests at a time and finished
    /// before the next starts; then removes the directories left empty.
    /// PTR keys get runs of their own: puts after the records they point
    /// at, deletes before them, so no PTR ever names a service that does
    /// not resolve (v2 has no transactions to make a service all-or-nothing).
    /// The hidden directories it writes into are recorded first, those it
    /// removes forgotten last.
    pub(in crate::etcd) async fn apply(&mut self, batch: &[Op]) -> Result<i64, EtcdError> {
        let batch = ptrs_around_their_targets(&self.names, batch);
        let (swaps, batch) = leaf_dir_swaps(batch);
        let batch = batch.as_slice();
        let new_hidden = batch.iter().filter_map(|op| match op {
            Op::Put { key, .. } => hidden_part(key, ""),
            Op::Delete { .. } => None,
        });
        let mut seen = (self.hidden)
            .add(&self.client, &self.shutdown, new_hidden)
            .await?;
        let mut deleted: Vec<&str> = Vec::new();
        if !swaps.is_empty() {
            // The only moment a name may briefly have no record in v2.
            seen = seen.max(self.apply_run(&swaps).await?);
            let keys: Vec<&str> = swaps.iter().map(Op::key).collect();
            seen = seen.max(self.prune(&keys).await?.0);
        }
        let ptr = |op: &Op| self.names.is_ptr_key(op.key());
        for run in batch.chunk_by(|a, b| {
            let same_kind = matches!(
                (a, b),
                (Op::Put { .. }, Op::Put { .. }) | (Op::Delete { .. }, Op::Delete { .. })
            );
            same_kind && ptr(a) == ptr(b)
        }) {
            seen = seen.max(self.apply_run(run).await?);
            deleted.extend(run.iter().filter_map(|op| match op {
                Op::Delete { key } => Some(key.as_str()),
                Op::Put { .. } => None,
            }));
        }
        let (pruned, removed) = self.prune(&deleted).await?;
        let forgotten = (self.hidden)
            .remove(&self.client, &self.shutdown, &removed)
            .await?;
        Ok(seen.max(pruned).max(forgotten))
    }

    /// Sends every op of `run` (all puts or all deletes) concurrently.
    async fn apply_run(&self, run: &[Op]) -> Result<i64, EtcdError> {
        let (client, shutdown) = (&self.client, &self.shutdown);
        let requests = run.iter().map(|op| async move {
            match op {
                Op::Put { key, value } => {
                    let resp = bounded(shutdown, client.set(key, value)).await?;
                    Ok::<_, EtcdError>(revision(resp.index))
                }
                Op::Delete { key } => {
                    let deleted = tolerate(client.delete(key, false), ABSENT);
                    Ok(bounded(shutdown, deleted).await?.revision())
                }
            }
        });
        max_of(requests).await
    }

    /// Removes the directories above `deleted` keys that are now empty,
    /// deepest first, never at or above the keys' floor; returns the
    /// revision and the directories removed.
    async fn prune(&self, deleted: &[&str]) -> Result<(i64, Vec<String>), EtcdError> {
        let mut by_depth: Vec<BTreeSet<String>> = Vec::new();
        for key in deleted {
            let Some(floor) = self.names.dir_floor(key) else {
                continue;
            };
            let mut dir = *key;
            while let Some(at) = dir.rfind('/') {
                dir = &dir[..at];
                if dir.len() <= floor.len() {
                    break;
                }
                let depth = dir.matches('/').count();
                if by_depth.len() <= depth {
                    by_depth.resize_with(depth + 1, BTreeSet::new);
                }
                by_depth[depth].insert(dir.to_string());
            }
        }
        let mut seen = 0;
        let mut removed = Vec::new();
        for level in by_depth.iter().rev() {
            let removals = futures::stream::iter(level.iter().map(|dir| async move {
                let removal = tolerate(self.client.delete_empty_dir(dir), NOT_EMPTY_OR_ABSENT);
                let outcome = bounded(&self.shutdown, removal).await?;
                Ok::<_, EtcdError>((dir, outcome))
            }))
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<Vec<_>>()
            .await?;
            for (dir, outcome) in removals {
                seen = seen.max(outcome.revision());
                if matches!(outcome, Outcome::Found(_)) {
                    removed.push(dir.clone());
                }
            }
        }
        Ok((seen, removed))
    }
}

/// A request's answer, or one of the etcd errors the caller expects (the
/// key is absent, the directory is not empty) with etcd's index then.
enum Outcome {
    Found(Box<etcd_access::v2::Response>),
    Expected(u64),
}

impl Outcome {
    /// The store revision the answer was given at.
    fn revision(&self) -> i64 {
        match self {
            Outcome::Found(resp) => revision(resp.index),
            Outcome::Expected(index) => revision(*index),
        }
    }
}

/// "Key not found", and "Not a directory" (a path below a key): nothing there.
const ABSENT: &[u32] = &[KEY_NOT_FOUND, NOT_A_DIRECTORY];
/// An empty-directory delete that finds it not empty or not there: not ours
/// to remove.
const NOT_EMPTY_OR_ABSENT: &[u32] = &[DIRECTORY_NOT_EMPTY, KEY_NOT_FOUND, NOT_A_DIRECTORY];

/// Turns the etcd error codes in `expected` into [`Outcome::Expected`].
async fn tolerate(
    request: impl std::future::Future<
        Output = Result<etcd_access::v2::Response, etcd_access::v2::Error>,
    >,
    expected: &[u32],
) -> Result<Outcome, etcd_access::v2::Error> {
    match request.await {
        Ok(resp) => Ok(Outcome::Found(Box::new(resp))),
        Err(etcd_access::v2::Error::Etcd { code, index, .. }) if expected.contains(&code) => {
            Ok(Outcome::Expected(index))
        }
        Err(e) => Err(e),
    }
}

/// Runs `requests` [`IN_FLIGHT`] at a time; the highest revision, or the
/// first error.
async fn max_of<F>(requests: impl Iterator<Item = F>) -> Result<i64, EtcdError>
where
    F: std::future::Future<Output = Result<i64, EtcdError>>,
{
    futures::stream::iter(requests)
        .buffer_unordered(IN_FLIGHT)
        .try_fold(0, |max, r| async move { Ok(max.max(r)) })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_that_becomes_a_directory_or_back_is_deleted_first() {
        let put = |key: &str| Op::Put {
            key: key.into(),
            value: "v".into(),
        };
        let del = |key: &str| Op::Delete { key: key.into() };
        let dir = "/skydns/local/cluster/svc/ns/h/web";
        let other = "/skydns/local/cluster/svc/ns/h/webx";
        let batch = vec![
            put(&format!("{dir}/a1")),
            put(&format!("{dir}/b2")),
            del(dir),
            del(other),
        ];
        let (first, rest) = leaf_dir_swaps(batch);
        assert_eq!(first, [del(dir)]);
        assert_eq!(rest.len(), 3);
        let batch = vec![put(dir), del(&format!("{dir}/a1")), del(other)];
        let (first, rest) = leaf_dir_swaps(batch);
        assert_eq!(first, [del(&format!("{dir}/a1"))]);
        assert_eq!(rest, [put(dir), del(other)]);
    }

    #[test]
    fn ptr_puts_go_last_and_ptr_deletes_first() {
        let names = Names::new("cluster.local");
        let put = |key: &str| Op::Put {
            key: key.into(),
            value: "v".into(),
        };
        let del = |key: &str| Op::Delete { key: key.into() };
        let ptr = "/skydns/arpa/in-addr/10/0/0/1";
        let a = "/skydns/local/cluster/svc/ns/web/c88f1059";
        let old = "/skydns/local/cluster/svc/ns/old/c88f1059";
        let batch = [put(ptr), put(a), del(ptr), del(old)];
        assert_eq!(
            ptrs_around_their_targets(&names, &batch),
            [put(a), put(ptr), del(ptr), del(old)]
        );
        let batch = [del(old), del(ptr), put(ptr), put(a)];
        assert_eq!(
            ptrs_around_their_targets(&names, &batch),
            [del(ptr), del(old), put(a), put(ptr)]
        );
    }
}
