//! The v3 client skydns reads through: etcd-access's [`MemberClient`] (one
//! member at a time, the next after a failure), and how its errors and
//! etcd-client's become [`StoreError`]s.

use super::StoreError;

pub(crate) use etcd_access::member::{Endpoints, MemberClient, Unavailable};
pub(crate) use etcd_access::EtcdOptions;

impl From<Unavailable> for StoreError {
    fn from(Unavailable(why): Unavailable) -> Self {
        StoreError::Unavailable(why)
    }
}

/// An etcd-client error as a [`StoreError`].
pub(super) fn unavailable(e: etcd_client::Error) -> StoreError {
    StoreError::Unavailable(e.to_string())
}
