//! Answers from upstream that an authoritative answer may need: CNAME and
//! SRV/MX targets outside the domain (SkyDNS's internal `Lookup`,
//! `server/forwarding.go`). The answer functions read them from a [`Lookups`]
//! table, so they stay pure; the handler fetches the names it lacks.

use hickory_proto::rr::{Name, Record, RecordType};
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

/// Upstream results by (name, type); `None` is a failed lookup.
#[derive(Debug, Default)]
pub(crate) struct Lookups {
    enabled: bool,
    settled: bool,
    known: HashMap<(Name, RecordType), Option<Vec<Record>>>,
    missing: RefCell<BTreeSet<(Name, RecordType)>>,
}

impl Lookups {
    /// An empty table that records what is missing.
    pub(crate) fn new() -> Self {
        Lookups {
            enabled: true,
            ..Lookups::default()
        }
    }

    /// A table where every lookup fails (no forwarding).
    pub(crate) fn disabled() -> Self {
        Lookups::default()
    }

    /// The upstream answer records for `name`/`qtype`, if known and successful.
    pub(crate) fn external(&self, name: &Name, qtype: RecordType) -> Option<Vec<Record>> {
        if !self.enabled {
            return None;
        }
        let key = (name.to_lowercase(), qtype);
        match self.known.get(&key) {
            Some(result) => result.clone(),
            None if self.settled => None,
            None => {
                self.missing.borrow_mut().insert(key);
                None
            }
        }
    }

    /// The lookups asked for but not known, and forgets them.
    pub(crate) fn take_missing(&self) -> Vec<(Name, RecordType)> {
        std::mem::take(&mut *self.missing.borrow_mut())
            .into_iter()
            .collect()
    }

    /// From now on, lookups not known are failures, not missing.
    pub(crate) fn settle(&mut self) {
        self.settled = true;
    }

    /// Records the result of one lookup.
    pub(crate) fn insert(&mut self, name: Name, qtype: RecordType, result: Option<Vec<Record>>) {
        self.known.insert((name.to_lowercase(), qtype), result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_lookups_are_missing_until_settled_then_failures() {
        let name = Name::from_ascii("www.example.org.").unwrap();
        let mut lookups = Lookups::new();
        assert_eq!(lookups.external(&name, RecordType::A), None);
        assert_eq!(lookups.take_missing(), [(name.clone(), RecordType::A)]);
        lookups.settle();
        assert_eq!(lookups.external(&name, RecordType::A), None);
        assert!(
            lookups.take_missing().is_empty(),
            "settled: a lookup not known is a failure, not asked for again"
        );
        assert_eq!(Lookups::disabled().external(&name, RecordType::A), None);
        assert!(Lookups::disabled().take_missing().is_empty());
    }
}
