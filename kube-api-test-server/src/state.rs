//! What the store's one lock guards: the objects, the global
//! resourceVersion, the watch history, the cluster IP pool and the index of
//! mirrored slices. `store.rs` owns the lock and the order of a write; the
//! write rules (`writes.rs`) and the mirroring (`mirror.rs`) work on this
//! state while it is held, so neither needs the store itself.

use std::collections::BTreeMap;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::Value;

use super::history::{History, Key};
use super::ipalloc::IpAllocator;
use super::mirrored::MirrorIndex;

/// The store's state, read and changed only under its lock.
pub(crate) struct State {
    /// The global resourceVersion: that of the latest write.
    pub(crate) rv: u64,
    /// Every object, in its stored JSON form.
    pub(crate) objects: BTreeMap<Key, Stored>,
    /// The recent writes, for watch replay and lists at an older version.
    pub(crate) history: History,
    /// The Service cluster IPs in use.
    pub(crate) ips: IpAllocator,
    /// Which slices mirror which Endpoints.
    pub(crate) mirrored: MirrorIndex,
    /// The last `remainingItemCount` counted per kind, namespace and
    /// version (see [`RemainingCount`]): lists of several kinds page at the
    /// same time (kube2sky lists Services, Endpoints and Pods at once),
    /// each at the version it started at.
    pub(crate) remaining: Vec<RemainingCount>,
}

/// How many objects of `kind` (in `namespace`, or all) follow the key
/// `after` at version `rv`. The next page of the same list counts from a
/// key one page further on: it subtracts the objects between the two keys
/// instead of counting the rest of the list again, so paging through N
/// objects costs O(N) in all, not O(N) per page.
pub(crate) struct RemainingCount {
    pub(crate) kind: super::resource::ResourceKind,
    pub(crate) namespace: Option<String>,
    pub(crate) rv: u64,
    pub(crate) after: Key,
    pub(crate) count: usize,
}

/// An object as stored: its JSON value, and its bytes as a list item
/// (without `apiVersion` and `kind`), written once when the object is. A
/// list copies the bytes instead of serializing every object again: at
/// 150,000 pods, serializing was two thirds of the server's CPU over a
/// kube2sky start (CPU the real API server spends on other machines than
/// the DNS pod's, and this stand-in on the benchmark's two cores).
pub(crate) struct Stored {
    pub(crate) value: Value,
    pub(crate) list_item: Box<[u8]>,
}

impl Stored {
    pub(crate) fn new(value: Value) -> Self {
        let list_item = list_item_bytes(&value).into_boxed_slice();
        Stored { value, list_item }
    }
}

/// An object as a list item: without `apiVersion` and `kind`, which the
/// list states once.
struct ListItem<'a>(&'a Value);

impl Serialize for ListItem<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Some(object) = self.0.as_object() else {
            return self.0.serialize(serializer);
        };
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in object {
            if key != "apiVersion" && key != "kind" {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// An object's bytes as a list item: its JSON without `apiVersion` and
/// `kind` ([`ListItem`]), as [`Stored`] keeps them.
pub(crate) fn list_item_bytes(value: &Value) -> Vec<u8> {
    // Writing a `Value` into a Vec cannot fail (no I/O, string keys).
    serde_json::to_vec(&ListItem(value)).expect("a JSON value serializes")
}
