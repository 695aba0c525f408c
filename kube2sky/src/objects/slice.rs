//! What kube2sky keeps of one EndpointSlice (`discovery.k8s.io/v1`): its
//! ready addresses (`conditions.ready` unset counts as ready, as the API
//! documents) with their hostnames, and its ports, in the v1
//! [`EndpointSubset`] shape the records are built from. FQDN slices
//! contribute nothing. The index merges a service's slices.

use super::ObjectKey;
use crate::name_rules::is_dns1035_label;
use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset, Endpoints};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The label that ties a slice to its service.
pub(crate) const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What kube2sky keeps of one EndpointSlice.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SliceInfo {
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
            let ok = is_dns1035_label(s);
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
    pub(crate) fn as_endpoints(&self) -> Endpoints {
        Endpoints {
            metadata: ObjectMeta {
                namespace: Some(self.key.namespace.clone()),
                name: Some(self.service.clone().unwrap_or_default()),
                ..ObjectMeta::default()
            },
            subsets: Some(vec![self.subset.clone()]),
        }
    }

    pub(crate) fn service_key(&self) -> Option<ObjectKey> {
        Some(ObjectKey {
            namespace: self.key.namespace.clone(),
            name: self.service.clone()?,
        })
    }
}
