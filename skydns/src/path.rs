//! DNS name ⇄ etcd key, re-exported from skydns-msg (the crate kube2sky and
//! skydns share) so that `crate::path` keeps naming it inside skydns.

pub(crate) use skydns_msg::path::*;
