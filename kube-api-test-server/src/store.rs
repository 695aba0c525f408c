//! The in-memory object store: objects, the global resourceVersion and writes,
//! behind one mutex. Every write bumps the version, records a [`StoredEvent`]
//! and broadcasts it under the lock, so watchers see writes in order with no
//! gaps. The state itself is [`State`].

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};
use tokio::sync::broadcast;

use super::history::{EventType, History, Key, StoredEvent};
use super::ipalloc::{IpAllocator, Ipv4Cidr};
use super::mirror;
use super::mirrored::MirrorIndex;
use super::resource::{set_status, status_of, ResourceKind};
use super::state::{RemainingCount, State, Stored};
use super::status::ApiError;
use super::writes;

/// Namespaces the real API server always creates.
pub(crate) const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Capacity of the live event broadcast; a watcher lagging further than this
/// is disconnected and resumes from history, as with a real server.
const BROADCAST_CAPACITY: usize = 4096;

/// The store shared by all request handlers.
pub struct Store {
    inner: Mutex<State>,
    events: broadcast::Sender<Arc<StoredEvent>>,
    /// Whether Endpoints are mirrored into EndpointSlices.
    mirror: bool,
}

/// Where a watch starts: the events to send first, then the live feed.
pub(crate) struct WatchStart {
    /// The store version the replay/initial state corresponds to.
    pub rv: u64,
    /// Events to send before live ones (replay, or synthetic ADDED).
    pub initial: Vec<StoredEvent>,
    /// Live events after `rv`.
    pub live: broadcast::Receiver<Arc<StoredEvent>>,
}

/// Preconditions a DELETE may carry.
#[derive(Debug, Default, Clone)]
pub struct Preconditions {
    /// Required `metadata.uid`.
    pub uid: Option<String>,
    /// Required `metadata.resourceVersion`.
    pub resource_version: Option<String>,
}

impl Store {
    /// An empty store (plus the system namespaces), mirroring nothing.
    pub fn new(cidr: Ipv4Cidr, history: usize) -> Self {
        let (events, _) = broadcast::channel(BROADCAST_CAPACITY);
        let store = Self {
            inner: Mutex::new(State {
                rv: 0,
                objects: BTreeMap::new(),
                history: History::new(history),
                ips: IpAllocator::new(cidr),
                mirrored: MirrorIndex::default(),
                remaining: Vec::new(),
            }),
            events,
            mirror: false,
        };
        for ns in SYSTEM_NAMESPACES {
            // Cannot fail on an empty store; ignore to keep construction infallible.
            let _ = store.create(
                ResourceKind::Namespace,
                None,
                json!({"metadata": {"name": ns}}),
                false,
            );
        }
        store
    }

    /// Turns the mirroring of Endpoints into EndpointSlices on or off (for
    /// the writes that follow).
    pub(crate) fn set_endpoints_mirroring(&mut self, on: bool) {
        self.mirror = on;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current global resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Records one write, then (for an Endpoints, with mirroring on) the
    /// slice writes that mirror it; returns the stored object.
    fn commit(
        &self,
        inner: &mut State,
        event_type: EventType,
        key: Key,
        object: Value,
        prev: Option<Value>,
    ) -> Value {
        let mirrored = (self.mirror && key.kind == ResourceKind::Endpoints).then(|| key.clone());
        let stored = self.record(inner, event_type, key, object, prev);
        if let Some(key) = mirrored {
            let live = (event_type != EventType::Deleted).then_some(&stored);
            for w in mirror::reconcile(inner, &key, live) {
                self.record(inner, w.event_type, w.key, w.object, w.prev);
            }
        }
        stored
    }

    /// Stores one write, gives it the next version and tells the watchers.
    fn record(
        &self,
        inner: &mut State,
        event_type: EventType,
        key: Key,
        mut object: Value,
        prev: Option<Value>,
    ) -> Value {
        inner.rv += 1;
        let rv = inner.rv;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        if event_type == EventType::Deleted {
            inner.objects.remove(&key);
        } else {
            inner
                .objects
                .insert(key.clone(), Stored::new(object.clone()));
        }
        inner
            .mirrored
            .track(&key, event_type, &object, prev.as_ref());
        let event = StoredEvent {
            rv,
            event_type,
            key,
            object: object.clone(),
            prev,
        };
        inner.history.push(event.clone());
        // No receivers is fine: nobody is watching.
        let _ = self.events.send(Arc::new(event));
        object
    }

    /// Reads one object.
    pub fn get(&self, key: &Key) -> Result<Value, ApiError> {
        self.lock()
            .objects
            .get(key)
            .map(|s| s.value.clone())
            .ok_or_else(|| ApiError::not_found(key.kind.plural(), &key.name))
    }

    /// Creates an object from a client body. `keep_status` keeps the body's
    /// status (used by seeding; API creates reset it like the real server).
    pub fn create(
        &self,
        kind: ResourceKind,
        namespace: Option<&str>,
        body: Value,
        keep_status: bool,
    ) -> Result<Value, ApiError> {
        let mut obj = kind.decode(body)?;
        let mut inner = self.lock();
        let key = writes::prepare_create(&mut inner, kind, namespace, &mut obj, keep_status)?;
        Ok(self.commit(&mut inner, EventType::Added, key, obj, None))
    }

    /// Replaces an object (PUT). With `status_only`, only `status` changes.
    /// Returns the stored object and whether it was created.
    pub fn update(
        &self,
        key: &Key,
        body: Value,
        status_only: bool,
    ) -> Result<(Value, bool), ApiError> {
        let mut obj = key.kind.decode(body)?;
        writes::check_identity(key, &mut obj)?;
        let mut inner = self.lock();
        let Some(old) = inner.objects.get(key).map(|s| s.value.clone()) else {
            if key.kind.create_on_update() && !status_only {
                let ns = key.kind.namespaced().then_some(key.namespace.as_str());
                let key = writes::prepare_create(&mut inner, key.kind, ns, &mut obj, false)?;
                return Ok((
                    self.commit(&mut inner, EventType::Added, key, obj, None),
                    true,
                ));
            }
            return Err(ApiError::not_found(key.kind.plural(), &key.name));
        };
        let sent_rv = obj["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        if !sent_rv.is_empty() && Some(sent_rv) != old["metadata"]["resourceVersion"].as_str() {
            return Err(ApiError::stale(key.kind.plural(), &key.name));
        }
        let new = if status_only {
            let mut new = old.clone();
            set_status(&mut new, status_of(&obj));
            key.kind.validate(&new, Some(&old))?;
            new
        } else {
            writes::prepare_update(&mut inner, key, &old, obj)?
        };
        if new == old {
            return Ok((old, false));
        }
        Ok((
            self.commit(&mut inner, EventType::Modified, key.clone(), new, Some(old)),
            false,
        ))
    }

    /// Deletes an object (cascading through a namespace's contents) and
    /// returns its final state.
    pub fn delete(&self, key: &Key, pre: &Preconditions) -> Result<Value, ApiError> {
        let mut inner = self.lock();
        let old = inner
            .objects
            .get(key)
            .map(|s| s.value.clone())
            .ok_or_else(|| ApiError::not_found(key.kind.plural(), &key.name))?;
        let (plural, name) = (key.kind.plural(), key.name.as_str());
        if let Some(uid) = pre
            .uid
            .as_deref()
            .filter(|u| Some(*u) != old["metadata"]["uid"].as_str())
        {
            let why = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                old["metadata"]["uid"].as_str().unwrap_or_default()
            );
            return Err(ApiError::conflict(plural, name, &why));
        }
        if let Some(rv) = pre
            .resource_version
            .as_deref()
            .filter(|rv| Some(*rv) != old["metadata"]["resourceVersion"].as_str())
        {
            let why = format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                old["metadata"]["resourceVersion"].as_str().unwrap_or_default()
            );
            return Err(ApiError::conflict(plural, name, &why));
        }
        if key.kind == ResourceKind::Namespace {
            if SYSTEM_NAMESPACES[..3].contains(&name) {
                return Err(ApiError::forbidden(
                    plural,
                    name,
                    "this namespace may not be deleted",
                ));
            }
            let contents: Vec<(Key, Value)> = inner
                .objects
                .iter()
                .filter(|(k, _)| k.kind.namespaced() && k.namespace == key.name)
                .map(|(k, v)| (k.clone(), v.value.clone()))
                .collect();
            for (k, v) in contents {
                if !inner.objects.contains_key(&k) {
                    continue; // a mirrored slice, gone with its Endpoints
                }
                writes::release(&mut inner, &k, &v);
                self.commit(&mut inner, EventType::Deleted, k, v.clone(), Some(v));
            }
        }
        writes::release(&mut inner, key, &old);
        Ok(self.commit(
            &mut inner,
            EventType::Deleted,
            key.clone(),
            old.clone(),
            Some(old),
        ))
    }

    /// Calls `visit` with the objects of `kind` (optionally in one
    /// namespace) in key order, as of `at` (None: now), from the first key
    /// after `after` (`(namespace, name)`), until it returns false; returns
    /// the version they reflect. Nothing is copied, so a page of a large
    /// list costs its own objects, not all of them. Each object comes with
    /// its bytes as a list item ([`Stored`]) when it is the current version,
    /// `None` when it is an older one rebuilt from history.
    pub fn visit(
        &self,
        kind: ResourceKind,
        namespace: Option<&str>,
        at: Option<u64>,
        after: Option<(&str, &str)>,
        mut visit: impl FnMut(&Key, &Value, Option<&[u8]>) -> bool,
    ) -> Result<u64, ApiError> {
        let inner = self.lock();
        let (rv, undone) = match at {
            Some(at) if at > inner.rv => {
                return Err(ApiError::too_large_resource_version(at, inner.rv));
            }
            Some(at) if at < inner.rv => {
                if !inner.history.covers(at) {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {at} ({})",
                        inner.history.compacted_rv()
                    )));
                }
                (at, inner.history.undone_since(kind, at))
            }
            _ => (inner.rv, BTreeMap::new()),
        };
        let start = match after {
            Some((ns, name)) => Bound::Excluded(Key {
                kind,
                namespace: ns.to_string(),
                name: name.to_string(),
            }),
            None => Bound::Included(Key {
                kind,
                namespace: String::new(),
                name: String::new(),
            }),
        };
        let range = (start, Bound::Unbounded);
        let now = (inner.objects.range(range.clone()))
            .map(|(k, v)| (k, Some((&v.value, Some(&*v.list_item)))));
        let then = (undone.range(range)).map(|(k, v)| (k, v.as_ref().map(|v| (v, None))));
        for (key, value) in merge_preferring_right(now, then) {
            if key.kind != kind {
                break;
            }
            let Some((value, list_item)) = value else {
                continue;
            };
            if namespace.is_some_and(|ns| key.namespace != ns) {
                continue;
            }
            if !visit(key, value, list_item) {
                break;
            }
        }
        Ok(rv)
    }

    /// How many objects of `kind` (optionally in one namespace) follow `after`
    /// as of version `at`: [`Store::visit`]'s count, without looking at the
    /// objects (a list page's `remainingItemCount`). The next page of the
    /// same list subtracts the objects it passed from the last page's count
    /// (see [`RemainingCount`]), so paging through N objects costs O(N) in
    /// all (plus, per page, the writes made since the list's version, which
    /// are undone over the range counted as [`Store::visit`] does) instead
    /// of a count of every remaining object per page.
    pub fn count_after(
        &self,
        kind: ResourceKind,
        namespace: Option<&str>,
        at: u64,
        after: (&str, &str),
    ) -> Result<usize, ApiError> {
        let start = Key {
            kind,
            namespace: after.0.to_string(),
            name: after.1.to_string(),
        };
        let mut inner = self.lock();
        if at > inner.rv || (at < inner.rv && !inner.history.covers(at)) {
            drop(inner);
            // The errors (410, too large) are visit's.
            let mut n = 0;
            self.visit(kind, namespace, Some(at), Some(after), |_, _, _| {
                n += 1;
                true
            })?;
            return Ok(n);
        }
        let undone = match at < inner.rv {
            true => inner.history.undone_since(kind, at),
            false => BTreeMap::new(),
        };
        let same_list = inner
            .remaining
            .iter()
            .position(|r| r.kind == kind && r.namespace.as_deref() == namespace && r.rv == at);
        let earlier = same_list
            .map(|i| inner.remaining.remove(i))
            .filter(|r| r.after <= start);
        let objects = &inner.objects;
        // The objects of the list in `range` as of version `at`.
        let count_in = |range: (Bound<&Key>, Bound<&Key>)| {
            let now = (objects.range::<Key, _>(range)).map(|(k, v)| (k, Some(&v.value)));
            let then = undone.range::<Key, _>(range).map(|(k, v)| (k, v.as_ref()));
            merge_preferring_right(now, then)
                .take_while(|(k, _)| k.kind == kind)
                .filter(|(k, v)| v.is_some() && namespace.is_none_or(|ns| k.namespace == ns))
                .count()
        };
        let count = match earlier {
            // The same list a page further on.
            Some(r) => {
                let passed = count_in((Bound::Excluded(&r.after), Bound::Included(&start)));
                // A version's objects never change: the page passed is
                // part of what was counted after the page before.
                debug_assert!(passed <= r.count, "{passed} > {}", r.count);
                r.count.saturating_sub(passed)
            }
            None => count_in((Bound::Excluded(&start), Bound::Unbounded)),
        };
        // Lists of several kinds and versions page at once; a few suffice.
        if inner.remaining.len() >= REMAINING_COUNTS_KEPT {
            inner.remaining.remove(0);
        }
        inner.remaining.push(RemainingCount {
            kind,
            namespace: namespace.map(str::to_string),
            rv: at,
            after: start,
            count,
        });
        Ok(count)
    }

    /// Starts a watch of `kind`. With `from = Some(rv)`, replays newer events
    /// from history (410 Expired if compacted away); with `None`, starts with
    /// synthetic ADDED events for every current object.
    pub(crate) fn watch(
        &self,
        kind: ResourceKind,
        from: Option<u64>,
    ) -> Result<WatchStart, ApiError> {
        let inner = self.lock();
        let initial = match from {
            Some(from) if from > inner.rv => {
                return Err(ApiError::too_large_resource_version(from, inner.rv));
            }
            Some(from) => {
                if !inner.history.covers(from) {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {from} ({})",
                        inner.history.compacted_rv()
                    )));
                }
                inner
                    .history
                    .since(from)
                    .filter(|e| e.key.kind == kind)
                    .cloned()
                    .collect()
            }
            None => inner
                .objects
                .iter()
                .filter(|(k, _)| k.kind == kind)
                .map(|(k, v)| StoredEvent {
                    rv: inner.rv,
                    event_type: EventType::Added,
                    key: k.clone(),
                    object: v.value.clone(),
                    prev: None,
                })
                .collect(),
        };
        Ok(WatchStart {
            rv: inner.rv,
            initial,
            live: self.events.subscribe(),
        })
    }

    /// Compacts the whole history: any watch or continue token from an older
    /// version now gets 410 Expired.
    pub fn expire_history(&self) {
        let mut inner = self.lock();
        let rv = inner.rv;
        inner.history.compact_to(rv);
    }

    /// [`Store::expire_history`] with the version moved on by one, no object
    /// changed: every new watch and continue token gets 410 Expired, even
    /// one from the newest version (a client that was up to date must list
    /// again too). Watches already open go on; end them with the faults'
    /// `drop_watches`.
    pub fn expire_all_history(&self) {
        let mut inner = self.lock();
        inner.rv += 1;
        let rv = inner.rv;
        inner.history.compact_to(rv);
    }
}

/// How many lists' last counts [`Store::count_after`] keeps.
const REMAINING_COUNTS_KEPT: usize = 16;

/// Two key-sorted sequences as one, key-sorted; where both hold a key, the
/// right one's item.
fn merge_preferring_right<'a, K: Ord + 'a, V: 'a>(
    left: impl Iterator<Item = (&'a K, V)>,
    right: impl Iterator<Item = (&'a K, V)>,
) -> impl Iterator<Item = (&'a K, V)> {
    let (mut left, mut right) = (left.peekable(), right.peekable());
    std::iter::from_fn(move || match (left.peek(), right.peek()) {
        (Some((l, _)), Some((r, _))) => match l.cmp(r) {
            std::cmp::Ordering::Less => left.next(),
            std::cmp::Ordering::Greater => right.next(),
            std::cmp::Ordering::Equal => {
                left.next();
                right.next()
            }
        },
        (Some(_), None) => left.next(),
        (None, _) => right.next(),
    })
}
