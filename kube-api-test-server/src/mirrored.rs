//! Which EndpointSlices are mirrored from which Endpoints: the labels that
//! say so, and the index of them the store keeps up to date on every write
//! (so `mirror.rs` finds an Endpoints' slices without a scan). A leaf: the
//! store's state holds the index, the mirroring reads and labels with it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::history::{EventType, Key};
use super::resource::ResourceKind;

/// The label naming the controller that manages a slice.
pub(crate) const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// [`MANAGED_BY`]'s value on mirrored slices.
pub(crate) const CONTROLLER: &str = "endpointslicemirroring-controller.k8s.io";
/// The label naming a slice's Service (for mirrored ones: the Endpoints).
pub(crate) const SERVICE_NAME: &str = "kubernetes.io/service-name";

/// The mirrored slices in the store, by the Endpoints (namespace, name)
/// their labels name, so a reconcile finds them without a scan.
#[derive(Debug, Default)]
pub(crate) struct MirrorIndex {
    slices: BTreeMap<(String, String), BTreeSet<String>>,
}

impl MirrorIndex {
    /// Follows one write (of any kind; only EndpointSlices count).
    pub(crate) fn track(
        &mut self,
        key: &Key,
        event: EventType,
        object: &Value,
        prev: Option<&Value>,
    ) {
        if key.kind != ResourceKind::EndpointSlice {
            return;
        }
        if let Some(service) = prev.and_then(mirrored_for) {
            let owner = (key.namespace.clone(), service.to_string());
            if let Some(names) = self.slices.get_mut(&owner) {
                names.remove(&key.name);
                if names.is_empty() {
                    self.slices.remove(&owner);
                }
            }
        }
        if let Some(service) = mirrored_for(object).filter(|_| event != EventType::Deleted) {
            self.slices
                .entry((key.namespace.clone(), service.to_string()))
                .or_default()
                .insert(key.name.clone());
        }
    }

    /// The names of the slices mirroring Endpoints `namespace/endpoints`.
    pub(crate) fn names(&self, namespace: &str, endpoints: &str) -> BTreeSet<String> {
        self.slices
            .get(&(namespace.to_string(), endpoints.to_string()))
            .cloned()
            .unwrap_or_default()
    }
}

/// The Endpoints name a slice's labels say it mirrors, if it is mirrored.
fn mirrored_for(slice: &Value) -> Option<&str> {
    let labels = &slice["metadata"]["labels"];
    (labels[MANAGED_BY] == CONTROLLER)
        .then(|| labels[SERVICE_NAME].as_str())
        .flatten()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_index_follows_mirrored_slices_only() {
        let key = |name: &str| Key {
            kind: ResourceKind::EndpointSlice,
            namespace: "ns".into(),
            name: name.into(),
        };
        let slice = |managed: &str, service: &str| json!({ "metadata": { "labels": { MANAGED_BY: managed, SERVICE_NAME: service } } });
        let mut index = MirrorIndex::default();
        let mirrored = slice(CONTROLLER, "web");
        index.track(&key("a"), EventType::Added, &mirrored, None);
        let other = slice("someone-else", "web");
        index.track(&key("b"), EventType::Added, &other, None);
        assert_eq!(index.names("ns", "web"), BTreeSet::from(["a".to_string()]));
        let moved = slice(CONTROLLER, "db");
        index.track(&key("a"), EventType::Modified, &moved, Some(&mirrored));
        assert!(index.names("ns", "web").is_empty());
        index.track(&key("a"), EventType::Deleted, &moved, Some(&moved));
        assert!(index.slices.is_empty());
    }
}
