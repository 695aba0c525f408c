//! The hidden directories kube2sky wrote through the v2 API, remembered
//! across restarts.
//!
//! etcd v2 never lists a node whose name starts with `_`, so the SRV keys
//! under `<service>/_tcp/_<port>/` cannot be found by reading the service's
//! directory. Without a record of them, a port removed (or a service
//! deleted) while kube2sky was down would leave its SRV keys behind. So
//! kube2sky keeps an index in etcd, outside `/skydns`: for each visible
//! directory with hidden ones below it, the key
//! `/kube2sky/<domain>/hidden<visible directory>` holds the JSON list of
//! those hidden directories. An entry is written before keys go into a new
//! hidden directory (so a crash cannot lose one) and rewritten, or deleted,
//! once hidden directories are removed. Reads load the entries under the
//! prefix they read; a hidden directory found absent is forgotten.

use super::{max_of, revision, tolerate, Outcome, ABSENT};
use crate::etcd::attempt::{bounded, EtcdError};
use etcd_access::v2::Client;
use std::collections::BTreeSet;
use std::ops::Bound;
use tokio_util::sync::CancellationToken;

/// The hidden directories known to exist, by their visible parent.
pub(super) struct HiddenDirs {
    /// `/kube2sky/<domain>/hidden`.
    root: String,
    dirs: BTreeSet<String>,
}

/// The visible directory above a hidden one: its path before the first
/// segment starting with `_`.
pub(super) fn visible_part(dir: &str) -> &str {
    match dir.find("/_") {
        Some(at) => &dir[..at],
        None => dir,
    }
}

impl HiddenDirs {
    /// An empty record for `domain` (with or without its trailing dot).
    pub(super) fn new(domain: &str) -> Self {
        HiddenDirs {
            root: format!("/kube2sky/{}/hidden", domain.trim_end_matches('.')),
            dirs: BTreeSet::new(),
        }
    }

    /// The known hidden directories below `prefix`.
    pub(super) fn below<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a String> + 'a {
        self.dirs
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |d| d.starts_with(prefix))
    }

    /// Forgets a hidden directory found absent.
    pub(super) fn forget(&mut self, dir: &str) {
        self.dirs.remove(dir);
    }

    /// Loads the index entries of the visible directories under `prefix`.
    pub(super) async fn load(
        &mut self,
        client: &Client,
        shutdown: &CancellationToken,
        prefix: &str,
    ) -> Result<i64, EtcdError> {
        let key = format!("{}{}", self.root, prefix.trim_end_matches('/'));
        let outcome = bounded(shutdown, tolerate(client.get(&key, true), ABSENT)).await?;
        if let Outcome::Found(resp) = &outcome {
            for leaf in resp.node.leaves() {
                match serde_json::from_str::<Vec<String>>(&leaf.value) {
                    Ok(dirs) => self.dirs.extend(dirs),
                    Err(error) => {
                        tracing::warn!(key = %leaf.key, %error, "ignoring a malformed hidden-directory index entry")
                    }
                }
            }
        }
        Ok(outcome.revision())
    }

    /// Records `dirs` as written; entries of those that are new are saved
    /// first (before keys go into them).
    pub(super) async fn add(
        &mut self,
        client: &Client,
        shutdown: &CancellationToken,
        dirs: impl IntoIterator<Item = String>,
    ) -> Result<i64, EtcdError> {
        let mut parents = BTreeSet::new();
        for dir in dirs {
            if !self.dirs.contains(&dir) {
                parents.insert(visible_part(&dir).to_string());
                self.dirs.insert(dir);
            }
        }
        self.save(client, shutdown, parents).await
    }

    /// Forgets `removed` directories and saves their parents' entries.
    pub(super) async fn remove(
        &mut self,
        client: &Client,
        shutdown: &CancellationToken,
        removed: &[String],
    ) -> Result<i64, EtcdError> {
        let mut parents = BTreeSet::new();
        for dir in removed {
            if self.dirs.remove(dir) {
                parents.insert(visible_part(dir).to_string());
            }
        }
        self.save(client, shutdown, parents).await
    }

    /// Writes the entries of `parents`: the list of their hidden
    /// directories, or no entry when there are none.
    async fn save(
        &self,
        client: &Client,
        shutdown: &CancellationToken,
        parents: BTreeSet<String>,
    ) -> Result<i64, EtcdError> {
        let writes = parents.iter().map(|parent| async move {
            let below = format!("{parent}/_");
            let dirs: Vec<&String> = self.below(&below).collect();
            let key = format!("{}{parent}", self.root);
            if dirs.is_empty() {
                let deleted = tolerate(client.delete(&key, false), ABSENT);
                return Ok::<_, EtcdError>(bounded(shutdown, deleted).await?.revision());
            }
            let value =
                serde_json::to_string(&dirs).map_err(|e| EtcdError::Failed(e.to_string()))?;
            let resp = bounded(shutdown, client.set(&key, &value)).await?;
            Ok(revision(resp.index))
        });
        max_of(writes).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_visible_part_ends_before_the_first_hidden_segment() {
        let svc = "/skydns/local/cluster/svc/default/web";
        assert_eq!(visible_part(&format!("{svc}/_tcp/_http")), svc);
        assert_eq!(visible_part(svc), svc);
    }

    #[test]
    fn known_directories_are_listed_by_prefix() {
        let mut hidden = HiddenDirs::new("cluster.local.");
        assert_eq!(hidden.root, "/kube2sky/cluster.local/hidden");
        hidden.dirs.insert("/s/svc/a/web/_tcp/_http".into());
        hidden.dirs.insert("/s/svc/a/webx/_tcp/_http".into());
        let below: Vec<&String> = hidden.below("/s/svc/a/web/_").collect();
        assert_eq!(below, ["/s/svc/a/web/_tcp/_http"]);
        hidden.forget("/s/svc/a/web/_tcp/_http");
        assert_eq!(hidden.below("/s/").count(), 1);
    }
}
