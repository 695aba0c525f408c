//! EndpointSlices (`discovery.k8s.io/v1`) as the endpoints of services.
//!
//! A service's endpoints may be spread over many slices (the label
//! `kubernetes.io/service-name` names the service; at most 100 endpoints
//! and one address family per slice). [`SliceInfo`] keeps what records use
//! of one slice: its ready addresses (`conditions.ready` unset counts as
//! ready, as the API documents) with their hostnames, and its ports; FQDN
//! slices contribute nothing. [`Slices`] keeps every slice and, after each
//! change, merges the slices of the services it touched into the v1
//! [`Endpoints`] shape the records are built from: one subset per distinct
//! port list, each address once. A slice that moves to another service
//! changes both; a deleted slice takes only its own addresses away.

use super::ObjectKey;
use super::Update;
use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset, Endpoints};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// The label that ties a slice to its service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What kube2sky keeps of one EndpointSlice.
#[derive(Clone, Debug, PartialEq)]
pub struct SliceInfo {
    /// The slice's namespace and name.
    pub key: ObjectKey,
    /// The service it belongs to (its `kubernetes.io/service-name` label).
    pub service: Option<String>,
    /// Ready addresses (IP and hostname) and ports.
    pub subset: EndpointSubset,
}

impl From<EndpointSlice> for SliceInfo {
    fn from(slice: EndpointSlice) -> Self {
        let key = ObjectKey::of(&slice.metadata);
        let service = slice
            .metadata
            .labels
            .and_then(|mut labels| labels.remove(SERVICE_NAME_LABEL))
            .filter(|s| !s.is_empty());
        // A label that cannot name a Service makes the slice nobody's (so
        // a slice relabelled so leaves its old service), with a warning.
        let service = service.filter(|s| {
            let ok = crate::name_rules::is_dns1035_label(s);
            if !ok {
                tracing::warn!(slice = ?key, label = %s, "EndpointSlice {SERVICE_NAME_LABEL} is not a Service name; ignoring its endpoints");
            }
            ok
        });
        let addresses: Vec<EndpointAddress> = if slice.address_type == "FQDN" {
            Vec::new()
        } else {
            slice
                .endpoints
                .into_iter()
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
                .flat_map(|e| {
                    let hostname = e.hostname;
                    e.addresses.into_iter().map(move |ip| EndpointAddress {
                        ip,
                        hostname: hostname.clone(),
                        ..EndpointAddress::default()
                    })
                })
                .collect()
        };
        let ports: Vec<EndpointPort> = slice
            .ports
            .unwrap_or_default()
            .into_iter()
            .filter_map(|p| {
                Some(EndpointPort {
                    name: p.name,
                    protocol: p.protocol,
                    port: p.port?,
                    ..EndpointPort::default()
                })
            })
            .collect();
        SliceInfo {
            key,
            service,
            subset: EndpointSubset {
                addresses: Some(addresses),
                ports: Some(ports),
                not_ready_addresses: None,
            },
        }
    }
}

impl SliceInfo {
    /// The slice as the Endpoints of its service (for [`crate::validate`]).
    pub fn as_endpoints(&self) -> Endpoints {
        Endpoints {
            metadata: ObjectMeta {
                namespace: Some(self.key.namespace.clone()),
                name: Some(self.service.clone().unwrap_or_default()),
                ..ObjectMeta::default()
            },
            subsets: Some(vec![self.subset.clone()]),
        }
    }

    fn service_key(&self) -> Option<ObjectKey> {
        Some(ObjectKey {
            namespace: self.key.namespace.clone(),
            name: self.service.clone()?,
        })
    }
}

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
