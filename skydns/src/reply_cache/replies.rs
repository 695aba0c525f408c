//! The encoded replies of the hot path, and the snapshot paths each one read
//! (see [`crate::snapshot::record_reads`]), so that a change drops only the
//! entries that read a touched path.

use super::QuestionKey;
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
    pub(super) entries: HashMap<QuestionKey, Entry>,
    /// Path read → the questions whose replies read it. May point at
    /// entries already gone (or replaced): dropping those again is harmless.
    by_path: BTreeMap<Arc<str>, Vec<QuestionKey>>,
    /// Questions listed in `by_path`, to rebuild it when it outgrows the entries.
    indexed: usize,
}

impl Replies {
    pub(super) fn clear(&mut self, generation: i64) {
        self.generation = generation;
        self.entries.clear();
        self.by_path.clear();
        self.indexed = 0;
    }

    /// Keeps `entry` for `key`, read from `paths`.
    pub(super) fn insert(&mut self, key: QuestionKey, entry: Entry, paths: &[Arc<str>]) {
        if self.entries.len() >= MAX_ENTRIES {
            self.clear(self.generation);
        }
        for path in paths {
            self.by_path
                .entry(path.clone())
                .or_default()
                .push(key.clone());
        }
        self.indexed += paths.len();
        self.entries.insert(key, entry);
        if self.indexed > 4 * MAX_ENTRIES {
            self.by_path.retain(|_, keys| {
                keys.retain(|k| self.entries.contains_key(k));
                !keys.is_empty()
            });
            self.indexed = self.by_path.values().map(Vec::len).sum();
        }
    }

    /// Drops every entry that read a path at, above (a raw string prefix
    /// of) or below one of `touched`; the others are valid for `generation`.
    pub(super) fn invalidate(&mut self, touched: &[Arc<str>], generation: i64) {
        self.generation = generation;
        for key in touched {
            let mut doomed: Vec<Arc<str>> = (1..=key.len())
                .filter(|&end| key.is_char_boundary(end))
                .filter_map(|end| self.by_path.get_key_value(&key[..end]))
                .map(|(path, _)| path.clone())
                .collect();
            let below = format!("{key}/");
            doomed.extend(
                self.by_path
                    .range::<str, _>((Bound::Included(below.as_str()), Bound::Unbounded))
                    .take_while(|(path, _)| path.starts_with(&below))
                    .map(|(path, _)| path.clone()),
            );
            for path in doomed {
                for question in self.by_path.remove(&path).unwrap_or_default() {
                    self.indexed -= 1;
                    self.entries.remove(&question);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> QuestionKey {
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

    #[test]
    fn a_touched_key_drops_what_read_at_above_or_below_it() {
        let mut replies = Replies::default();
        let reads = [
            ("exact", "/s/a/web/1"),
            ("listing", "/s/a/web"),   // the directory above the key
            ("raw", "/s/a/we"),        // a raw prefix (scan_prefix)
            ("below", "/s/a/web/1/x"), // under a key that becomes a directory
            ("sibling", "/s/a/web2"),  // shares characters, not the path
            ("other", "/s/b/web/1"),
        ];
        for (name, path) in reads {
            replies.insert(key(name), entry(), &[Arc::from(path)]);
        }
        replies.invalidate(&[Arc::from("/s/a/web/1")], 5);
        let mut left: Vec<String> = replies
            .entries
            .keys()
            .map(|k| String::from_utf8(k.question.clone()).unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["other", "sibling"]);
        assert_eq!(replies.generation, 5);
        assert_eq!(replies.indexed, 2, "dropped paths leave the index");
    }
}
