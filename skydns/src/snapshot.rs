//! An immutable, in-memory copy of the records under the etcd prefix: a
//! [`Snapshot`] maps etcd keys to parsed [`Record`]s at one revision, and every
//! query reads one. [`Snapshot::lookup`] gives the etcd v2 view SkyDNS was
//! written against; [`Snapshot::with_dirs`] keeps v2's directories.

use imbl::{OrdMap, OrdSet};
use skydns_msg::record::Record;
use std::cell::RefCell;
use std::ops::Bound;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// The current snapshot, shared between the store task and the listeners.
/// `None` until the first complete read of etcd.
pub type SharedSnapshot = Arc<arc_swap::ArcSwapOption<Snapshot>>;

/// Source of [`Snapshot::generation`]: every snapshot gets a new number.
static GENERATION: AtomicI64 = AtomicI64::new(0);

fn next_generation() -> i64 {
    GENERATION.fetch_add(1, Ordering::Relaxed) + 1
}

thread_local! {
    /// The reads from snapshots on this thread while [`record_reads`] runs
    /// (`None` otherwise).
    static READS: RefCell<Option<Vec<Read>>> = const { RefCell::new(None) };
}

/// One read an answer made of a snapshot: what a change must touch to make
/// the answer wrong.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Read {
    /// The key at this path, or its absence ([`Snapshot::get`],
    /// [`Snapshot::has_read`]).
    Key(Arc<str>),
    /// Every key starting with these bytes ([`Snapshot::scan_prefix`]; a
    /// directory listing is the prefix `dir/`).
    Prefix(Arc<str>),
}

impl Read {
    /// Whether a change at `touched` (a key, or a directory with everything
    /// below it) can change what this read saw:
    /// - a key read: the key itself, or a directory above it;
    /// - a prefix read: a key or directory starting with the prefix, or a
    ///   directory above the prefix.
    ///
    /// The reply cache's index (`reply_cache/replies.rs`) follows this rule
    /// by lookups; its tests hold it to this form.
    #[cfg(test)]
    pub(crate) fn is_touched_by(&self, touched: &str) -> bool {
        let (Read::Key(path) | Read::Prefix(path)) = self;
        let below = |t: &str| {
            path.len() > t.len() && path.starts_with(t) && path.as_bytes()[t.len()] == b'/'
        };
        match self {
            Read::Key(key) => **key == *touched || below(touched),
            Read::Prefix(prefix) => touched.starts_with(&**prefix) || below(touched),
        }
    }
}

/// Runs `f` and returns what it read from any snapshot, in any order,
/// possibly repeated. An answer computed by `f` stays right while no change
/// touches one of these reads (`Read::is_touched_by`), which is what the
/// reply cache relies on. `f` must not await (the record is per thread).
pub(crate) fn record_reads<T>(f: impl FnOnce() -> T) -> (T, Vec<Read>) {
    let outer = READS.with(|r| r.borrow_mut().replace(Vec::new()));
    let value = f();
    let reads = READS.with(|r| std::mem::replace(&mut *r.borrow_mut(), outer));
    (value, reads.unwrap_or_default())
}

/// Notes `read` for the answer [`record_reads`] is recording, for what an
/// answer depends on without reading it right now (e.g. the stub zones,
/// kept per snapshot).
pub(crate) fn note_read(read: impl FnOnce() -> Read) {
    READS.with(|r| {
        if let Some(reads) = r.borrow_mut().as_mut() {
            reads.push(read());
        }
    });
}

/// How many batches back [`Snapshot::touched_since`] can see.
const HISTORY_DEPTH: usize = 32;

/// The keys and directories one batch of changes touched, and the batches
/// before it: how a snapshot came from earlier ones.
#[derive(Debug)]
struct History {
    /// The generation the batch was applied to.
    from: i64,
    touched: Vec<Arc<str>>,
    before: Option<Arc<History>>,
    depth: usize,
}

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
    generation: i64,
    entries: OrdMap<Arc<str>, Arc<Record>>,
    /// Directory nodes (etcd v2 only; `None` for v3, where directories
    /// are implied by the keys below them).
    dirs: Option<OrdSet<Arc<str>>>,
    /// Hidden paths read one by one from an etcd v2 store.
    read_paths: OrdSet<String>,
    /// How this snapshot came from earlier ones; `None` after a load.
    history: Option<Arc<History>>,
}

/// One change to apply to a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The key now holds this record.
    Put(String, Record),
    /// The key is gone (or now holds a value that is not a record).
    Delete(String),
    /// A directory node exists (etcd v2).
    Dir(String),
    /// A directory and everything below it are gone (etcd v2).
    DeleteDir(String),
    /// A hidden path was read on its own: what is visible from it replaces
    /// what was known there (etcd v2).
    ReadPath {
        /// The path read.
        path: String,
        /// Its keys (empty when absent).
        entries: Vec<(String, Record)>,
        /// Its directories, itself included when it is one.
        dirs: Vec<String>,
    },
}

impl Change {
    /// The key or directory the change is about.
    fn path(&self) -> &str {
        match self {
            Change::Put(path, _)
            | Change::Delete(path)
            | Change::Dir(path)
            | Change::DeleteDir(path)
            | Change::ReadPath { path, .. } => path,
        }
    }
}

impl Snapshot {
    /// A snapshot holding `entries` at `revision`.
    pub fn new(revision: i64, entries: impl IntoIterator<Item = (String, Record)>) -> Self {
        Snapshot {
            revision,
            generation: next_generation(),
            entries: entries
                .into_iter()
                .map(|(k, r)| (Arc::from(k), Arc::new(r)))
                .collect(),
            dirs: None,
            read_paths: OrdSet::new(),
            history: None,
        }
    }

    /// Adds `entries` read by a load in progress (not yet shared, no
    /// history to keep).
    pub fn extend_loaded(&mut self, entries: impl IntoIterator<Item = (String, Record)>) {
        for (key, record) in entries {
            self.entries.insert(Arc::from(key), Arc::new(record));
        }
    }

    /// Sets the revision of a snapshot being loaded.
    pub fn set_revision(&mut self, revision: i64) {
        self.revision = revision;
    }

    /// A snapshot of an etcd v2 store, whose directories are nodes of their
    /// own: `dirs` lists them all, empty ones included.
    pub fn with_dirs(
        revision: i64,
        entries: impl IntoIterator<Item = (String, Record)>,
        dirs: impl IntoIterator<Item = String>,
    ) -> Self {
        let mut snapshot = Snapshot::new(revision, entries);
        snapshot.dirs = Some(OrdSet::new());
        for dir in dirs {
            snapshot.apply(Change::Dir(dir));
        }
        let keys: Vec<Arc<str>> = snapshot.entries.keys().cloned().collect();
        for key in keys {
            snapshot.add_parents(&key);
        }
        snapshot
    }

    /// The etcd revision this snapshot reflects.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// A number no other snapshot of this process has: caches of answers
    /// are valid for one generation.
    pub fn generation(&self) -> i64 {
        self.generation
    }

    /// Whether this hidden path was read from the v2 store on its own.
    pub fn has_read(&self, path: &str) -> bool {
        note_read(|| Read::Key(Arc::from(path)));
        self.read_paths.contains(path)
    }

    /// The hidden paths read on their own.
    pub fn read_paths(&self) -> impl Iterator<Item = &str> {
        self.read_paths.iter().map(String::as_str)
    }

    /// How many hidden paths were read on their own.
    pub fn read_path_count(&self) -> usize {
        self.read_paths.len()
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
        let mut next = self.clone();
        // The chain is cut when it gets too long to be worth walking (and
        // starts again from this step).
        let before = self.history.clone().filter(|h| h.depth + 1 < HISTORY_DEPTH);
        next.history = Some(Arc::new(History {
            from: self.generation,
            touched: Vec::new(),
            depth: before.as_ref().map_or(0, |h| h.depth + 1),
            before,
        }));
        next.apply_changes(revision, changes);
        next
    }

    /// Applies `changes` in place (to a snapshot not yet shared), at `revision`.
    pub fn apply_changes(&mut self, revision: i64, changes: impl IntoIterator<Item = Change>) {
        self.revision = revision;
        self.generation = next_generation();
        let mut touched = Vec::new();
        for change in changes {
            touched.push(Arc::from(change.path()));
            self.apply(change);
        }
        // The batch joins this snapshot's own step; a history shared with
        // another snapshot cannot say what this one did: forgotten.
        match self.history.as_mut().map(Arc::get_mut) {
            Some(Some(history)) => history.touched.extend(touched),
            Some(None) => self.history = None,
            None => {}
        }
    }

    /// Every key or directory touched since the snapshot of generation
    /// `since`, when this one was made from it by at most
    /// [`HISTORY_DEPTH`] batches; `None` when that is not known (a reload,
    /// or too far back).
    pub fn touched_since(&self, since: i64) -> Option<Vec<Arc<str>>> {
        let mut touched = Vec::new();
        let mut step = self.history.as_ref();
        while let Some(history) = step {
            touched.extend(history.touched.iter().cloned());
            if history.from == since {
                return Some(touched);
            }
            step = history.before.as_ref();
        }
        None
    }

    fn apply(&mut self, change: Change) {
        match change {
            Change::Put(key, record) => {
                let key: Arc<str> = Arc::from(key);
                self.add_parents(&key);
                self.entries.insert(key, Arc::new(record));
            }
            Change::Delete(key) => {
                self.entries.remove(key.as_str());
            }
            Change::Dir(dir) => {
                self.add_parents(&dir);
                if let Some(dirs) = &mut self.dirs {
                    dirs.insert(Arc::from(dir));
                }
            }
            Change::DeleteDir(dir) => {
                self.remove_below(&dir, |_| true);
                self.entries.remove(dir.as_str());
                if let Some(dirs) = &mut self.dirs {
                    dirs.remove(dir.as_str());
                }
            }
            Change::ReadPath {
                path,
                entries,
                dirs,
            } => {
                self.remove_below(&path, |relative| !is_hidden_below(relative));
                self.entries.remove(path.as_str());
                if let Some(known) = &mut self.dirs {
                    known.remove(path.as_str());
                }
                for dir in dirs {
                    self.apply(Change::Dir(dir));
                }
                for (key, record) in entries {
                    self.apply(Change::Put(key, record));
                }
                self.read_paths.insert(path);
            }
        }
    }

    /// Removes the keys and directories strictly below `dir` whose path
    /// relative to it is selected by `select`.
    fn remove_below(&mut self, dir: &str, select: impl Fn(&str) -> bool) {
        let prefix = format!("{}/", dir.trim_end_matches('/'));
        let doomed: Vec<Arc<str>> = self
            .entries
            .range::<_, str>((Bound::Included(prefix.as_str()), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(k, _)| select(&k[prefix.len()..]))
            .map(|(k, _)| k.clone())
            .collect();
        for key in doomed {
            self.entries.remove(&key);
        }
        if let Some(dirs) = &mut self.dirs {
            let doomed: Vec<Arc<str>> = dirs
                .range::<_, str>((Bound::Included(prefix.as_str()), Bound::Unbounded))
                .take_while(|d| d.starts_with(&prefix))
                .filter(|d| select(&d[prefix.len()..]))
                .cloned()
                .collect();
            for dir in doomed {
                dirs.remove(&dir);
            }
        }
    }

    /// In v2 mode, records every directory above `key` (etcd creates them
    /// implicitly and keeps them after the key goes).
    fn add_parents(&mut self, key: &str) {
        let Some(dirs) = &mut self.dirs else { return };
        let mut end = key.len();
        while let Some(at) = key[..end].rfind('/') {
            if at == 0 {
                break;
            }
            if dirs.contains(&key[..at]) {
                break; // its parents are known too
            }
            dirs.insert(Arc::from(&key[..at]));
            end = at;
        }
    }

    /// The record stored exactly at `key`, if any.
    pub fn get(&self, key: &str) -> Option<Leaf> {
        note_read(|| Read::Key(Arc::from(key)));
        self.entries.get_key_value(key).map(|(k, r)| Leaf {
            key: k.clone(),
            record: r.clone(),
        })
    }

    /// Every leaf whose key starts with `prefix` (a raw string prefix).
    pub fn scan_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = Leaf> + 'a {
        note_read(|| Read::Prefix(Arc::from(prefix)));
        self.entries
            .range::<_, str>((Bound::Included(prefix), Bound::Unbounded))
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
        if below.peek().is_none() {
            // An empty directory exists in v2; in v3 nothing is there.
            let is_dir = self.dirs.as_ref().is_some_and(|d| d.contains(path));
            return is_dir.then(Vec::new);
        }
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
mod tests;
