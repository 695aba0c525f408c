//! The slim API objects the index holds: what records are made of, and no
//! more, so tens of thousands of services and pods fit in a few megabytes
//! (k/k#22290: never keep whole objects). The watches reduce what the API
//! server sends to these; the index, the records and the object checks read
//! them. Nothing here knows about etcd or DNS names.
//!
//! They are [`ObjectKey`] (`namespace/name`), [`ServiceInfo`] with its
//! [`PortInfo`]s (a Service's type, IPs and ports), [`PodInfo`] (a pod's
//! IPs, made from a [`WatchedPod`], which decodes nothing else) and
//! [`SliceInfo`] (an EndpointSlice's ready addresses and ports).

mod pod;
mod service;
mod slice;

pub(crate) use pod::{PodInfo, WatchedPod};
pub(crate) use service::ServiceInfo;
pub(crate) use slice::SliceInfo;
#[cfg(test)]
pub(crate) use slice::SERVICE_NAME_LABEL;

/// `namespace/name` of an object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ObjectKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// The key of an object's metadata.
    pub(crate) fn of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Self {
        ObjectKey {
            namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}
