//! The encoded replies of the hot path, and the snapshot reads each one made
//! (see [`crate::snapshot::record_reads`]), so that a change drops only the
//! entries whose reads it touched (`Read::is_touched_by`).

use super::QuestionKey;
use crate::snapshot::Read;
use std::collections::{BTreeMap, HashMap};
use std::ops::{Bound, Range};
use std::sync::Arc;

/// Most cached replies before the cache is emptied and refilled.
pub(super) const MAX_ENTRIES: usize = 20_000;

pub(super) struct Entry {
    pub(super) reply: Vec<u8>,
    pub(super) hour: u64,
    /// Byte ranges of the answer records, when they may be shuffled.
    pub(super) shuffle: Option<Arc<[Range<usize>]>>,
}

/// The replies valid for one snapshot generation, indexed by the paths
/// they read.
#[derive(Default)]
pub(super) struct Replies {
    /// The generation every entry is valid for.
    pub(super) generation: i64,
    /// Hashed with foldhash, seeded at random: siphash took about 6% of
    /// skydns's own time at full load.
    pub(super) entries: HashMap<QuestionKey, Entry, foldhash::quality::RandomState>,
    /// Key read → the questions whose replies read it. Both maps may
    /// point at entries already gone (or replaced): dropping those again is
    /// harmless.
    by_key: BTreeMap<Arc<str>, Vec<QuestionKey>>,
    /// Prefix read → the questions whose replies read it.
    by_prefix: BTreeMap<Arc<str>, Vec<QuestionKey>>,
    /// Questions listed in the maps, to rebuild them when they outgrow the entries.
    indexed: usize,
}

impl Replies {
    pub(super) fn clear(&mut self, generation: i64) {
        self.generation = generation;
        self.entries.clear();
        self.by_key.clear();
        self.by_prefix.clear();
        self.indexed = 0;
    }

    /// Keeps `entry` for `key`, computed by `reads`.
    pub(super) fn insert(&mut self, key: QuestionKey, entry: Entry, reads: &[Read]) {
        if self.entries.len() >= MAX_ENTRIES {
            self.clear(self.generation);
        }
        for read in reads {
            let (index, path) = match read {
                Read::Key(path) => (&mut self.by_key, path),
                Read::Prefix(path) => (&mut self.by_prefix, path),
            };
            index.entry(path.clone()).or_default().push(key.clone());
        }
        self.indexed += reads.len();
        self.entries.insert(key, entry);
        if self.indexed > 4 * MAX_ENTRIES {
            let entries = &self.entries;
            for index in [&mut self.by_key, &mut self.by_prefix] {
                index.retain(|_, keys| {
                    keys.retain(|k| entries.contains_key(k));
                    !keys.is_empty()
                });
            }
            self.indexed = self
                .by_key
                .values()
                .chain(self.by_prefix.values())
                .map(Vec::len)
                .sum();
        }
    }

    /// Drops every entry with a read that one of `touched` touched
    /// (`Read::is_touched_by`, which the lookups below follow); the
    /// others are valid for `generation`.
    pub(super) fn invalidate(&mut self, touched: &[Arc<str>], generation: i64) {
        self.generation = generation;
        for path in touched {
            let below = format!("{path}/");
            // Keys: the path itself, and keys below it.
            let mut keys: Vec<Arc<str>> = self
                .by_key
                .get_key_value(&**path)
                .map(|(k, _)| k.clone())
                .into_iter()
                .collect();
            keys.extend(paths_below(&self.by_key, &below));
            // Prefixes: every byte prefix of the path, and prefixes below it.
            let mut prefixes: Vec<Arc<str>> = (1..=path.len())
                .filter(|&end| path.is_char_boundary(end))
                .filter_map(|end| self.by_prefix.get_key_value(&path[..end]))
                .map(|(prefix, _)| prefix.clone())
                .collect();
            prefixes.extend(paths_below(&self.by_prefix, &below));
            for (index, doomed) in [(&mut self.by_key, keys), (&mut self.by_prefix, prefixes)] {
                for read in doomed {
                    for question in index.remove(&read).unwrap_or_default() {
                        self.indexed -= 1;
                        self.entries.remove(&question);
                    }
                }
            }
        }
    }
}

/// The paths of `index` that start with `below` (a directory and `/`).
fn paths_below(index: &BTreeMap<Arc<str>, Vec<QuestionKey>>, below: &str) -> Vec<Arc<str>> {
    index
        .range::<str, _>((Bound::Included(below), Bound::Unbounded))
        .take_while(|(path, _)| path.starts_with(below))
        .map(|(path, _)| path.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_of(name: &str) -> QuestionKey {
        QuestionKey {
            question: name.as_bytes().to_vec(),
            limit: 512,
            tcp: false,
            dnssec_ok: false,
        }
    }

    fn entry() -> Entry {
        Entry {
            reply: vec![0; 12],
            hour: 0,
            shuffle: None,
        }
    }

    fn left(replies: &Replies) -> Vec<String> {
        let mut left: Vec<String> = replies
            .entries
            .keys()
            .map(|k| String::from_utf8(k.question.clone()).unwrap())
            .collect();
        left.sort();
        left
    }

    #[test]
    fn a_touched_key_drops_what_read_it_or_listed_above_or_below_it() {
        let mut replies = Replies::default();
        let key = |p: &str| Read::Key(Arc::from(p));
        let prefix = |p: &str| Read::Prefix(Arc::from(p));
        let reads = [
            ("exact", key("/s/a/web/1")),
            ("listing", prefix("/s/a/web/")), // the directory above the key
            ("raw", prefix("/s/a/we")),       // a raw prefix (scan_prefix)
            ("below", key("/s/a/web/1/x")),   // under a key that becomes a directory
            ("listing below", prefix("/s/a/web/1/")),
            ("key above", key("/s/a/web")), // a key is not a listing
            ("key sharing characters", key("/s/a/web/")),
            ("sibling", key("/s/a/web/10")), // shares characters, not the path
            ("sibling listing", prefix("/s/a/web/10/")),
            ("other", key("/s/b/web/1")),
        ];
        for (name, read) in &reads {
            replies.insert(key_of(name), entry(), std::slice::from_ref(read));
        }
        replies.invalidate(&[Arc::from("/s/a/web/1")], 5);
        assert_eq!(
            left(&replies),
            [
                "key above",
                "key sharing characters",
                "other",
                "sibling",
                "sibling listing"
            ]
        );
        assert_eq!(replies.generation, 5);
        assert_eq!(replies.indexed, 5, "dropped reads leave the index");
    }

    /// Reads left behind by dropped entries are compacted away once the
    /// index holds more than four per entry the cache can keep; the reads
    /// of live entries stay, so a change still drops what read it.
    #[test]
    fn compacting_the_index_keeps_the_reads_of_live_entries() {
        let mut replies = Replies::default();
        let key = |p: &str| Read::Key(Arc::from(p));
        replies.insert(key_of("live"), entry(), &[key("/live")]);
        let mut i = 0;
        while replies.indexed + 1_000 <= 4 * MAX_ENTRIES {
            // An entry dropped by a change of one of its reads leaves its
            // other 999 reads in the index.
            let mut reads = vec![key(&format!("/churn/{i}"))];
            reads.extend((0..999).map(|j| key(&format!("/other/{i}/{j}"))));
            replies.insert(key_of(&format!("churn {i}")), entry(), &reads);
            replies.invalidate(&[Arc::from(format!("/churn/{i}"))], 1);
            i += 1;
        }
        assert_eq!(left(&replies), ["live"]);
        // One read more than four per entry: compacted.
        let n = 4 * MAX_ENTRIES + 1 - replies.indexed;
        let reads: Vec<Read> = (0..n).map(|j| key(&format!("/last/{j}"))).collect();
        replies.insert(key_of("last"), entry(), &reads);
        assert_eq!(
            replies.indexed,
            1 + n,
            "compacted: the reads of live entries"
        );
        replies.invalidate(&[Arc::from("/live")], 2);
        assert_eq!(left(&replies), ["last"]);
    }

    /// The index drops exactly the entries whose reads `Read::is_touched_by`
    /// says a change touched, for reads and changes over a small tree.
    #[test]
    fn invalidation_follows_the_rule_for_every_read_and_change() {
        let paths = [
            "/s",
            "/s/",
            "/s/a",
            "/s/a/",
            "/s/a/b",
            "/s/a/b/",
            "/s/a/b/c",
            "/s/a/bc",
            "/s/a/b/c/",
            "/s/ab",
            "/s/a/b/c/d",
            "/t/a",
            "/s/a/b",
        ];
        let reads: Vec<Read> = paths
            .iter()
            .flat_map(|p| [Read::Key(Arc::from(*p)), Read::Prefix(Arc::from(*p))])
            .collect();
        for touched in paths.iter().filter(|p| !p.ends_with('/')) {
            let mut replies = Replies::default();
            for (i, read) in reads.iter().enumerate() {
                replies.insert(key_of(&i.to_string()), entry(), std::slice::from_ref(read));
            }
            replies.invalidate(&[Arc::from(*touched)], 1);
            for (i, read) in reads.iter().enumerate() {
                assert_eq!(
                    replies.entries.contains_key(&key_of(&i.to_string())),
                    !read.is_touched_by(touched),
                    "{read:?} after a change at {touched}"
                );
            }
        }
    }
}
