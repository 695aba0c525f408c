//! The slim API objects the index holds: what records are made of, and no more
//! (k/k#22290: never keep whole objects). They are [`ObjectKey`],
//! [`ServiceInfo`] with its [`PortInfo`]s, [`PodInfo`] (made from a
//! [`WatchedPod`]) and [`SliceInfo`]. Nothing here knows etcd or DNS names.

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
