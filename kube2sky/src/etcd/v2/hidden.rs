//! The hidden directories kube2sky wrote through the v2 API, remembered across
//! restarts: etcd v2 never lists nodes whose name starts with `_` (the SRV
//! keys), so kube2sky keeps an index of them in etcd, outside `/skydns`, in
//! [`BUCKETS`] keys `/kube2sky/<domain>/hidden/buckets/<xx>`.

use super::{max_of, revision, tolerate, Outcome, ABSENT};
use crate::etcd::attempt::{bounded, EtcdError};
use etcd_access::v2::Client;
use skydns_msg::record::fnv1a32;
use std::collections::BTreeSet;
use std::ops::Bound;
use tokio_util::sync::CancellationToken;

/// How many index entries the services' hidden directories are spread over.
/// Part of the format in etcd: changing it orphans every entry.
pub(super) const BUCKETS: u32 = 256;

/// The hidden directories known to exist, by bucket.
pub(super) struct HiddenDirs {
    /// `/kube2sky/<domain>/hidden`.
    root: String,
    /// `/skydns/local/cluster/svc/`.
    svc_root: String,
    /// `BUCKETS` sets: the known hidden directories of each bucket.
    buckets: Vec<BTreeSet<String>>,
    /// A read of every bucket moved whatever the whole services subtree
    /// held in the per-service layout: reads of one service need not look
    /// for an entry of it any more (a new leader starts with that read).
    legacy_swept: bool,
}

/// The visible directory above a hidden one: its path before the first
/// segment starting with `_`.
pub(super) fn visible_part(dir: &str) -> &str {
    match dir.find("/_") {
        Some(at) => &dir[..at],
        None => dir,
    }
}

/// Which buckets a load or a save covers.
enum Buckets {
    One(usize),
    All,
}

impl HiddenDirs {
    /// An empty record for `domain` (with or without its trailing dot),
    /// whose services live below `svc_root` (`/skydns/local/cluster/svc/`).
    pub(super) fn new(domain: &str, svc_root: &str) -> Self {
        HiddenDirs {
            root: format!("/kube2sky/{}/hidden", domain.trim_end_matches('.')),
            svc_root: svc_root.to_string(),
            buckets: vec![BTreeSet::new(); BUCKETS as usize],
            legacy_swept: false,
        }
    }

    /// The service directory `path` is, or is below.
    fn service_dir<'a>(&self, path: &'a str) -> Option<&'a str> {
        let rest = path.strip_prefix(self.svc_root.as_str())?;
        let mut segments = rest.splitn(3, '/');
        let namespace = segments.next().filter(|s| !s.is_empty())?;
        let name = segments.next().filter(|s| !s.is_empty())?;
        Some(&path[..self.svc_root.len() + namespace.len() + 1 + name.len()])
    }

    /// The bucket of a hidden directory, or of any path at or below a
    /// service directory: that of the service.
    fn bucket_of(&self, path: &str) -> usize {
        let owner = self.service_dir(path).unwrap_or_else(|| visible_part(path));
        (fnv1a32(owner.as_bytes()) % BUCKETS) as usize
    }

    fn bucket_key(&self, bucket: usize) -> String {
        format!("{}/buckets/{bucket:02x}", self.root)
    }

    /// The buckets that hold every hidden directory below `prefix`: one
    /// for a prefix inside a service directory, all for one above.
    fn covering(&self, prefix: &str) -> Buckets {
        match self.service_dir(prefix) {
            // `<svc>/<ns>/web` alone would also be the start of `webx`.
            Some(dir) if prefix.len() > dir.len() => Buckets::One(self.bucket_of(dir)),
            _ => Buckets::All,
        }
    }

    /// The known hidden directories below `prefix`.
    pub(super) fn below<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a String> + 'a {
        let sets = match self.covering(prefix) {
            Buckets::One(b) => std::slice::from_ref(&self.buckets[b]),
            Buckets::All => self.buckets.as_slice(),
        };
        sets.iter().flat_map(move |set| {
            set.range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
                .take_while(move |d| d.starts_with(prefix))
        })
    }

    /// Forgets a hidden directory found absent.
    pub(super) fn forget(&mut self, dir: &str) {
        let bucket = self.bucket_of(dir);
        self.buckets[bucket].remove(dir);
    }

    /// Loads the entries that cover `prefix`: its bucket (or all), and the
    /// entries of the earlier per-service layout below it, which are then
    /// moved into their buckets.
    pub(super) async fn load(
        &mut self,
        client: &Client,
        shutdown: &CancellationToken,
        prefix: &str,
    ) -> Result<i64, EtcdError> {
        let (current, recursive, all) = match self.covering(prefix) {
            Buckets::One(b) => (self.bucket_key(b), false, false),
            Buckets::All => (format!("{}/buckets", self.root), true, true),
        };
        let legacy = (all || !self.legacy_swept)
            .then(|| format!("{}{}", self.root, prefix.trim_end_matches('/')));
        let read_legacy = async {
            match &legacy {
                Some(path) => bounded(shutdown, tolerate(client.get(path, true), ABSENT))
                    .await
                    .map(Some),
                None => Ok(None),
            }
        };
        let (current, old) = futures::try_join!(
            bounded(shutdown, tolerate(client.get(&current, recursive), ABSENT)),
            read_legacy,
        )?;
        let mut seen = current.revision();
        if let Outcome::Found(resp) = &current {
            for leaf in resp.node.leaves() {
                self.file(&leaf.key, &leaf.value);
            }
        }
        if let (Some(path), Some(old)) = (&legacy, old) {
            seen = seen.max(old.revision());
            if let Outcome::Found(resp) = &old {
                let leaves = resp.node.leaves();
                seen = seen.max(self.move_legacy(client, shutdown, path, leaves).await?);
            }
        }
        if all && prefix.trim_end_matches('/') == self.svc_root.trim_end_matches('/') {
            self.legacy_swept = true;
        }
        Ok(seen)
    }

    /// Moves the entries of the per-service layout found under `path` into
    /// their buckets; deletes them once those are written (all of `path`
    /// when every entry was read, else the entries read).
    async fn move_legacy(
        &mut self,
        client: &Client,
        shutdown: &CancellationToken,
        path: &str,
        leaves: Vec<etcd_access::v2::Leaf>,
    ) -> Result<i64, EtcdError> {
        let (mut buckets, mut moved, mut malformed) = (BTreeSet::new(), Vec::new(), false);
        for leaf in leaves {
            if self.file(&leaf.key, &leaf.value) {
                let visible = leaf.key.strip_prefix(&self.root).unwrap_or(&leaf.key);
                buckets.insert(self.bucket_of(visible));
                moved.push(leaf.key);
            } else {
                malformed = true;
            }
        }
        if moved.is_empty() {
            return Ok(0);
        }
        tracing::info!(
            entries = moved.len(),
            "moving hidden-directory index entries of an earlier kube2sky into their buckets"
        );
        let written = self.save(client, shutdown, buckets).await?;
        let deleted = if malformed {
            let deletes = (moved.iter()).map(|key| async move {
                bounded(shutdown, tolerate(client.delete(key, false), ABSENT))
                    .await
                    .map(|o| o.revision())
            });
            max_of(deletes).await?
        } else {
            let all = tolerate(client.delete(path, true), ABSENT);
            bounded(shutdown, all).await?.revision()
        };
        Ok(written.max(deleted))
    }

    /// Adds the directories an index entry lists; `false` (and a warning)
    /// when its value is not a JSON list of strings.
    fn file(&mut self, key: &str, value: &str) -> bool {
        match serde_json::from_str::<Vec<String>>(value) {
            Ok(dirs) => {
                for dir in dirs {
                    let bucket = self.bucket_of(&dir);
                    self.buckets[bucket].insert(dir);
                }
                true
            }
            Err(error) => {
                tracing::warn!(%key, %error, "ignoring a malformed hidden-directory index entry");
                false
            }
        }
    }

    /// Records `dirs` as written; the buckets of those that are new are
    /// saved first (before keys go into them).
    pub(super) async fn add(
        &mut self,
        client: &Client,
        shutdown: &CancellationToken,
        dirs: impl IntoIterator<Item = String>,
    ) -> Result<i64, EtcdError> {
        let mut changed = BTreeSet::new();
        for dir in dirs {
            let bucket = self.bucket_of(&dir);
            if self.buckets[bucket].insert(dir) {
                changed.insert(bucket);
            }
        }
        self.save(client, shutdown, changed).await
    }

    /// Forgets `removed` directories and saves their buckets.
    pub(super) async fn remove(
        &mut self,
        client: &Client,
        shutdown: &CancellationToken,
        removed: &[String],
    ) -> Result<i64, EtcdError> {
        let mut changed = BTreeSet::new();
        for dir in removed {
            let bucket = self.bucket_of(dir);
            if self.buckets[bucket].remove(dir) {
                changed.insert(bucket);
            }
        }
        self.save(client, shutdown, changed).await
    }

    /// Writes `buckets`: the list of their hidden directories, or no entry
    /// when there are none.
    async fn save(
        &self,
        client: &Client,
        shutdown: &CancellationToken,
        buckets: BTreeSet<usize>,
    ) -> Result<i64, EtcdError> {
        let writes = buckets.iter().map(|&bucket| async move {
            let key = self.bucket_key(bucket);
            let dirs = &self.buckets[bucket];
            if dirs.is_empty() {
                let deleted = tolerate(client.delete(&key, false), ABSENT);
                return Ok::<_, EtcdError>(bounded(shutdown, deleted).await?.revision());
            }
            let value =
                serde_json::to_string(dirs).map_err(|e| EtcdError::Failed(e.to_string()))?;
            Ok(revision(
                bounded(shutdown, client.set(&key, &value)).await?.index,
            ))
        });
        max_of(writes).await
    }

    /// Whether `dir` is in the index.
    pub(super) fn knows(&self, dir: &str) -> bool {
        self.buckets[self.bucket_of(dir)].contains(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SVC: &str = "/skydns/local/cluster/svc/";

    fn index() -> HiddenDirs {
        HiddenDirs::new("cluster.local.", SVC)
    }

    #[test]
    fn the_visible_part_ends_before_the_first_hidden_segment() {
        let svc = "/skydns/local/cluster/svc/default/web";
        assert_eq!(visible_part(&format!("{svc}/_tcp/_http")), svc);
        assert_eq!(visible_part(svc), svc);
    }

    #[test]
    fn a_service_and_everything_below_it_share_one_bucket() {
        let hidden = index();
        let web = "/skydns/local/cluster/svc/default/web";
        assert_eq!(hidden.service_dir(&format!("{web}/_tcp/_http")), Some(web));
        assert_eq!(hidden.service_dir(web), Some(web));
        assert_eq!(
            hidden.service_dir("/skydns/local/cluster/svc/default/"),
            None
        );
        let bucket = hidden.bucket_of(web);
        assert_eq!(hidden.bucket_of(&format!("{web}/_tcp/_http")), bucket);
        assert_eq!(hidden.bucket_of(&format!("{web}/1a2b/_udp/_dns")), bucket);
    }

    #[test]
    fn the_bucket_keys_are_part_of_the_format() {
        // Entries written by one version are read by the next: a changed
        // hash or bucket count would orphan every one of them. (29 is FNV-1a
        // 32 of the service directory, 0x597b1f29, modulo 256.)
        let hidden = index();
        assert_eq!(hidden.root, "/kube2sky/cluster.local/hidden");
        let kubernetes = "/skydns/local/cluster/svc/default/kubernetes/_tcp/_https";
        let key = hidden.bucket_key(hidden.bucket_of(kubernetes));
        assert_eq!(key, "/kube2sky/cluster.local/hidden/buckets/29");
        let used: BTreeSet<usize> = (0..5000)
            .map(|i| hidden.bucket_of(&format!("{SVC}ns{}/s{i}/_tcp/_http", i % 7)))
            .collect();
        assert_eq!(
            used.len(),
            BUCKETS as usize,
            "5,000 services fill every bucket"
        );
    }

    #[test]
    fn a_read_inside_a_service_covers_its_bucket_and_any_other_read_all() {
        let hidden = index();
        let web = "/skydns/local/cluster/svc/default/web";
        assert!(matches!(
            hidden.covering(&format!("{web}/")),
            Buckets::One(b) if b == hidden.bucket_of(web)
        ));
        assert!(
            matches!(hidden.covering(web), Buckets::All),
            "also the start of webx"
        );
        assert!(matches!(
            hidden.covering("/skydns/local/cluster/svc/default/"),
            Buckets::All
        ));
        assert!(matches!(hidden.covering(SVC), Buckets::All));
    }

    #[test]
    fn known_directories_are_listed_by_prefix_across_buckets() {
        let mut hidden = index();
        let dirs = [
            format!("{SVC}a/web/_tcp/_http"),
            format!("{SVC}a/webx/_tcp/_http"),
            format!("{SVC}b/db/_tcp/_pg"),
        ];
        for dir in &dirs {
            assert!(hidden.file("k", &serde_json::to_string(&[dir]).unwrap()));
        }
        let below = |h: &HiddenDirs, p: &str| {
            let mut found: Vec<String> = h.below(p).cloned().collect();
            found.sort();
            found
        };
        assert_eq!(below(&hidden, &format!("{SVC}a/web/")), [dirs[0].clone()]);
        assert_eq!(below(&hidden, &format!("{SVC}a/")), dirs[..2]);
        assert_eq!(below(&hidden, SVC), dirs);
        hidden.forget(&dirs[0]);
        assert_eq!(below(&hidden, SVC).len(), 2);
        assert!(
            !hidden.file("k", "{not a list"),
            "a malformed entry is refused"
        );
    }
}
