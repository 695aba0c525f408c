//! The SkyDNS record, re-exported from skydns-msg (the crate kube2sky and
//! skydns share) so that `crate::record` keeps naming it inside skydns.

pub(crate) use skydns_msg::record::*;
