//! EndpointSlices (`discovery.k8s.io/v1`) as the endpoints of services:
//! [`Slices`] keeps every slice and, after each change, merges the slices of
//! the services it touched into the v1 [`Endpoints`] shape the records are
//! built from.

use super::Update;
use crate::objects::{ObjectKey, SliceInfo};
use k8s_openapi::api::core::v1::{EndpointSubset, Endpoints};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// Every slice, and the slices of each service.
#[derive(Debug, Default)]
pub(super) struct Slices {
    by_key: BTreeMap<ObjectKey, SliceInfo>,
    by_service: BTreeMap<ObjectKey, BTreeSet<String>>,
}

impl Slices {
    /// Applies one slice's change; returns the merged endpoints of each
    /// service it touched (`None`: the service has no slice left).
    pub(super) fn apply(
        &mut self,
        update: Update<SliceInfo>,
    ) -> Vec<(ObjectKey, Option<Endpoints>)> {
        let mut touched = BTreeSet::new();
        let (key, new) = match update {
            Update::Apply(slice) => (slice.key.clone(), Some(slice)),
            Update::Delete(slice) => (slice.key.clone(), None),
            Update::Relisted(_) => unreachable!("relists go through Slices::relisted"),
        };
        if let Some(old) = self.by_key.remove(&key) {
            touched.extend(self.unlink(&old));
        }
        if let Some(slice) = new {
            if let Some(service) = slice.service_key() {
                (self.by_service.entry(service.clone()).or_default()).insert(key.name.clone());
                touched.insert(service);
            }
            self.by_key.insert(key, slice);
        }
        touched
            .into_iter()
            .map(|service| {
                let merged = self.merged(&service);
                (service, merged)
            })
            .collect()
    }

    /// Replaces every slice; returns the merged endpoints of every service.
    pub(super) fn relisted(&mut self, all: Vec<SliceInfo>) -> BTreeMap<ObjectKey, Box<Endpoints>> {
        *self = Slices::default();
        for slice in all {
            if let Some(service) = slice.service_key() {
                (self.by_service.entry(service).or_default()).insert(slice.key.name.clone());
            }
            self.by_key.insert(slice.key.clone(), slice);
        }
        // Each service merged once.
        self.by_service
            .keys()
            .filter_map(|service| Some((service.clone(), Box::new(self.merged(service)?))))
            .collect()
    }

    fn unlink(&mut self, slice: &SliceInfo) -> Option<ObjectKey> {
        let service = slice.service_key()?;
        if let Some(names) = self.by_service.get_mut(&service) {
            names.remove(&slice.key.name);
            if names.is_empty() {
                self.by_service.remove(&service);
            }
        }
        Some(service)
    }

    /// The slices of `service` as one Endpoints: a subset per distinct
    /// port list (in slice name order), each IP once per subset.
    fn merged(&self, service: &ObjectKey) -> Option<Endpoints> {
        let names = self.by_service.get(service)?;
        let mut subsets: Vec<EndpointSubset> = Vec::new();
        let mut seen: Vec<HashSet<&str>> = Vec::new();
        for name in names {
            let key = ObjectKey {
                namespace: service.namespace.clone(),
                name: name.clone(),
            };
            let Some(slice) = self.by_key.get(&key) else {
                continue;
            };
            let ports = sorted_ports(&slice.subset);
            let at = match subsets.iter().position(|s| sorted_ports(s) == ports) {
                Some(at) => at,
                None => {
                    subsets.push(EndpointSubset {
                        addresses: Some(Vec::new()),
                        ports: slice.subset.ports.clone(),
                        not_ready_addresses: None,
                    });
                    seen.push(HashSet::new());
                    subsets.len() - 1
                }
            };
            let addresses = subsets[at].addresses.get_or_insert_with(Vec::new);
            for address in slice.subset.addresses.iter().flatten() {
                if seen[at].insert(&address.ip) {
                    addresses.push(address.clone());
                }
            }
        }
        Some(Endpoints {
            metadata: ObjectMeta {
                namespace: Some(service.namespace.clone()),
                name: Some(service.name.clone()),
                ..ObjectMeta::default()
            },
            subsets: Some(subsets),
        })
    }
}

fn sorted_ports(subset: &EndpointSubset) -> Vec<(Option<&str>, Option<&str>, i32)> {
    let mut ports: Vec<_> = subset
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.as_deref(), p.protocol.as_deref(), p.port))
        .collect();
    ports.sort();
    ports
}
