//! Writing through the etcd v2 keys API, as kube2sky 1.2 did: `PUT
//! /v2/keys<key>` with form `value=<json>` (no TTL) and `DELETE`.
//!
//! v2 has no multi-key transaction, so a batch is applied as all its puts
//! (up to [`IN_FLIGHT`] requests at once on keep-alive connections), then,
//! once every put succeeded, all its deletes: a reader sees the new records
//! before the stale ones go, never a name with none. Batches are not cut
//! at v3's 128-operation limit (the writer joins them). Directories are nodes
//! in v2 and stay when their last key goes; after the deletes, directories
//! left empty are removed up to the namespace (`.../svc/<ns>`,
//! `.../pod/<ns>`) or the PTR root, as 1.2's recursive deletes did, so a
//! deleted service is NXDOMAIN again. v2 never lists nodes whose name
//! starts with `_` (the SRV keys under `_tcp/_<port>`), so reads add the
//! hidden directories the desired records use and those this process wrote
//! before; a hidden directory written by an earlier kube2sky for a port
//! that no longer exists is not seen until its service's directory goes.

use super::backend::{bounded, file_key};
use crate::index::Read;
use crate::reconcile::{Actual, Op};
use crate::records::{Names, Records};
use etcd2::{Client, DIRECTORY_NOT_EMPTY, KEY_NOT_FOUND, NOT_A_DIRECTORY};
use futures::{StreamExt, TryStreamExt};
use skydns::store::paths::hidden_part;
use std::collections::BTreeSet;
use std::ops::Bound;
use tokio_util::sync::CancellationToken;

/// Requests in flight at once.
pub(in crate::etcd) const IN_FLIGHT: usize = 64;

/// The v2 backend.
pub(in crate::etcd) struct V2 {
    client: Client,
    names: Names,
    shutdown: CancellationToken,
    /// Hidden directories this process wrote keys into.
    written_hidden: BTreeSet<String>,
}

/// A response's `X-Etcd-Index` as a revision.
fn revision(index: u64) -> i64 {
    i64::try_from(index).unwrap_or(i64::MAX)
}

impl V2 {
    pub(in crate::etcd) fn new(client: Client, names: Names, shutdown: CancellationToken) -> Self {
        V2 {
            client,
            names,
            shutdown,
            written_hidden: BTreeSet::new(),
        }
    }

    pub(in crate::etcd) async fn put_marker(&mut self, marker: &str) -> Result<i64, String> {
        let resp = bounded(&self.shutdown, self.client.set(marker, "kube2sky")).await?;
        Ok(revision(resp.index))
    }

    pub(in crate::etcd) async fn marker(&mut self, marker: &str) -> Result<(bool, i64), String> {
        match tokio::time::timeout(
            super::backend::ATTEMPT_TIMEOUT,
            self.client.get(marker, false),
        )
        .await
        {
            Ok(Ok(resp)) => Ok((true, revision(resp.index))),
            Ok(Err(etcd2::Error::Etcd {
                code: KEY_NOT_FOUND,
                index,
                ..
            })) => Ok((false, revision(index))),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("timed out".into()),
        }
    }

    pub(in crate::etcd) async fn read(
        &mut self,
        reads: &[Read],
        desired: &Records,
    ) -> Result<(Actual, i64), String> {
        let mut out = Actual::default();
        let mut seen = 0;
        for read in reads {
            let (path, ptr) = match read {
                Read::Prefix(p) => (p.trim_end_matches('/'), false),
                Read::OwnedPtrs(p) => (p.trim_end_matches('/'), true),
                Read::OwnedPtr(key) => (key.as_str(), true),
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
    ) -> Result<i64, String> {
        match bounded(&self.shutdown, absent_is_none(self.client.get(path, true))).await? {
            Outcome::Found(resp) => {
                for leaf in resp.node.leaves() {
                    file_key(&self.names, &leaf.key, &leaf.value, ptr, out);
                }
                dirs.extend(resp.node.dirs());
                Ok(revision(resp.index))
            }
            Outcome::Absent(index) => Ok(revision(index)),
        }
    }

    /// Reads the hidden directories below `prefix` that the desired records
    /// use or that this process wrote, where the visible directory above
    /// them exists (`visible`: the directories the prefix read found).
    async fn read_hidden(
        &mut self,
        prefix: &str,
        desired: &Records,
        visible: &BTreeSet<String>,
        out: &mut Actual,
    ) -> Result<i64, String> {
        let root = prefix.trim_end_matches('/');
        let mut dirs: BTreeSet<String> = desired
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter_map(|(k, _)| hidden_part(k, root))
            .collect();
        dirs.extend(
            self.written_hidden
                .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
                .take_while(|d| d.starts_with(prefix))
                .cloned(),
        );
        // A hidden directory can only be below a visible one that exists.
        dirs.retain(|dir| {
            let visible_part = match dir.find("/_") {
                Some(at) => &dir[..at],
                None => dir.as_str(),
            };
            visible.contains(visible_part)
        });
        let (client, shutdown) = (&self.client, &self.shutdown);
        let reads = futures::stream::iter(dirs.iter().map(|dir| async move {
            bounded(shutdown, absent_is_none(client.get(dir, true))).await
        }))
        .buffered(IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await?;
        let mut seen = 0;
        for (dir, read) in dirs.iter().zip(reads) {
            match read {
                Outcome::Found(resp) => {
                    for leaf in resp.node.leaves() {
                        file_key(&self.names, &leaf.key, &leaf.value, false, out);
                    }
                    seen = seen.max(revision(resp.index));
                }
                Outcome::Absent(index) => {
                    self.written_hidden.remove(dir);
                    seen = seen.max(revision(index));
                }
            }
        }
        Ok(seen)
    }

    /// Applies `batch` in runs of puts or deletes, in its order (a
    /// reconcile is all puts, then all deletes; 1.2's remove-then-add the
    /// reverse), each run [`IN_FLIGHT`] requests at a time and finished
    /// before the next starts; then removes the directories left empty.
    pub(in crate::etcd) async fn apply(&mut self, batch: &[Op]) -> Result<i64, String> {
        let mut seen = 0;
        let mut deleted: Vec<&str> = Vec::new();
        for run in batch.chunk_by(|a, b| {
            matches!(
                (a, b),
                (Op::Put { .. }, Op::Put { .. }) | (Op::Delete { .. }, Op::Delete { .. })
            )
        }) {
            seen = seen.max(self.apply_run(run).await?);
            for op in run {
                match op {
                    Op::Put { key, .. } => {
                        if let Some(dir) = hidden_part(key, "") {
                            self.written_hidden.insert(dir);
                        }
                    }
                    Op::Delete { key } => deleted.push(key),
                }
            }
        }
        seen = seen.max(self.prune(&deleted).await?);
        Ok(seen)
    }

    /// Sends every op of `run` (all puts or all deletes) concurrently.
    async fn apply_run(&self, run: &[Op]) -> Result<i64, String> {
        let (client, shutdown) = (&self.client, &self.shutdown);
        let requests = run.iter().map(|op| async move {
            match op {
                Op::Put { key, value } => {
                    let resp = bounded(shutdown, client.set(key, value)).await?;
                    Ok::<_, String>(revision(resp.index))
                }
                Op::Delete { key } => {
                    match bounded(shutdown, absent_is_none(client.delete(key, false))).await? {
                        Outcome::Found(resp) => Ok(revision(resp.index)),
                        Outcome::Absent(index) => Ok(revision(index)),
                    }
                }
            }
        });
        max_of(requests).await
    }

    /// Removes the directories above `deleted` keys that are now empty,
    /// deepest first, never at or above the keys' floor.
    async fn prune(&self, deleted: &[&str]) -> Result<i64, String> {
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
        for level in by_depth.iter().rev() {
            let removals = level.iter().map(|dir| {
                bounded(
                    &self.shutdown,
                    not_empty_is_none(self.client.delete_empty_dir(dir)),
                )
            });
            seen = seen.max(max_of(removals).await?);
        }
        Ok(seen)
    }
}

/// A request's answer, or the index at which its key was found absent.
enum Outcome {
    Found(Box<etcd2::Response>),
    Absent(u64),
}

/// "Key not found" and "Not a directory" as [`Outcome::Absent`].
async fn absent_is_none(
    request: impl std::future::Future<Output = Result<etcd2::Response, etcd2::Error>>,
) -> Result<Outcome, etcd2::Error> {
    match request.await {
        Ok(resp) => Ok(Outcome::Found(Box::new(resp))),
        Err(etcd2::Error::Etcd {
            code: KEY_NOT_FOUND | NOT_A_DIRECTORY,
            index,
            ..
        }) => Ok(Outcome::Absent(index)),
        Err(e) => Err(e),
    }
}

/// An empty-directory delete: "not empty", "not found" and "not a
/// directory" are fine (the directory is not ours to remove).
async fn not_empty_is_none(
    request: impl std::future::Future<Output = Result<etcd2::Response, etcd2::Error>>,
) -> Result<i64, etcd2::Error> {
    match request.await {
        Ok(resp) => Ok(revision(resp.index)),
        Err(etcd2::Error::Etcd {
            code: DIRECTORY_NOT_EMPTY | KEY_NOT_FOUND | NOT_A_DIRECTORY,
            index,
            ..
        }) => Ok(revision(index)),
        Err(e) => Err(e),
    }
}

/// Runs `requests` [`IN_FLIGHT`] at a time; the highest revision, or the
/// first error.
async fn max_of<F>(requests: impl Iterator<Item = F>) -> Result<i64, String>
where
    F: std::future::Future<Output = Result<i64, String>>,
{
    futures::stream::iter(requests)
        .buffer_unordered(IN_FLIGHT)
        .try_fold(0, |max, r| async move { Ok(max.max(r)) })
        .await
}
