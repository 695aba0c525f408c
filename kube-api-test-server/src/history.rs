//! The bounded event history behind watch replay and consistent paging: every
//! write appends one [`StoredEvent`], the newest `capacity` events are kept,
//! and a version at or below `compacted_rv` gets 410 Expired, as after etcd
//! compaction.

use std::collections::{BTreeMap, VecDeque};

use serde_json::Value;

use super::resource::ResourceKind;

/// The identity of a stored object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// The resource type.
    pub kind: ResourceKind,
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// Object name.
    pub name: String,
}

/// Watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

/// One write, as recorded in the history and broadcast to watchers.
#[derive(Debug, Clone)]
pub(crate) struct StoredEvent {
    /// The resourceVersion this write produced.
    pub rv: u64,
    /// What happened.
    pub event_type: EventType,
    /// Which object.
    pub key: Key,
    /// The object after the write (for DELETED: its last state, carrying `rv`).
    pub object: Value,
    /// The object before the write (None for ADDED).
    pub prev: Option<Value>,
}

/// A ring buffer of the newest events.
#[derive(Debug)]
pub(crate) struct History {
    events: VecDeque<StoredEvent>,
    capacity: usize,
    compacted_rv: u64,
}

impl History {
    /// An empty history holding at most `capacity` events (at least 1).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            events: VecDeque::new(),
            capacity: capacity.max(1),
            compacted_rv: 0,
        }
    }

    /// Appends an event, compacting the oldest one when full.
    pub(crate) fn push(&mut self, event: StoredEvent) {
        self.events.push_back(event);
        while self.events.len() > self.capacity {
            if let Some(old) = self.events.pop_front() {
                self.compacted_rv = old.rv;
            }
        }
    }

    /// Forgets every event up to and including `rv`.
    pub(crate) fn compact_to(&mut self, rv: u64) {
        while self.events.front().is_some_and(|e| e.rv <= rv) {
            self.events.pop_front();
        }
        self.compacted_rv = self.compacted_rv.max(rv);
    }

    /// The newest version that is no longer replayable (0 if none).
    pub(crate) fn compacted_rv(&self) -> u64 {
        self.compacted_rv
    }

    /// Whether events after `rv` can all be replayed.
    pub(crate) fn covers(&self, rv: u64) -> bool {
        rv >= self.compacted_rv
    }

    /// Events with resourceVersion greater than `rv`, oldest first.
    pub(crate) fn since(&self, rv: u64) -> impl Iterator<Item = &StoredEvent> {
        self.events.iter().filter(move |e| e.rv > rv)
    }

    /// What `kind` objects changed after `rv` were at `rv`: their value
    /// then, or `None` where they did not exist. The caller checks
    /// [`History::covers`].
    pub(crate) fn undone_since(&self, kind: ResourceKind, rv: u64) -> BTreeMap<Key, Option<Value>> {
        let mut before = BTreeMap::new();
        // Newest first: the oldest event's `prev` is the state at `rv`.
        for event in self.events.iter().rev().take_while(|e| e.rv > rv) {
            if event.key.kind == kind {
                before.insert(event.key.clone(), event.prev.clone());
            }
        }
        before
    }
}
