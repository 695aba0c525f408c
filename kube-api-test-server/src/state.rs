//! What the store's one lock guards: the objects, the global
//! resourceVersion, the watch history, the cluster IP pool and the index of
//! mirrored slices. `store.rs` owns the lock and the order of a write; the
//! write rules (`writes.rs`) and the mirroring (`mirror.rs`) work on this
//! state while it is held, so neither needs the store itself.

use std::collections::BTreeMap;

use serde_json::Value;

use super::history::{History, Key};
use super::ipalloc::IpAllocator;
use super::mirrored::MirrorIndex;

/// The store's state, read and changed only under its lock.
pub(crate) struct State {
    /// The global resourceVersion: that of the latest write.
    pub(crate) rv: u64,
    /// Every object, in its stored JSON form.
    pub(crate) objects: BTreeMap<Key, Value>,
    /// The recent writes, for watch replay and lists at an older version.
    pub(crate) history: History,
    /// The Service cluster IPs in use.
    pub(crate) ips: IpAllocator,
    /// Which slices mirror which Endpoints.
    pub(crate) mirrored: MirrorIndex,
}
