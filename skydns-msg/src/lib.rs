//! What the writer (kube2sky) and the server (skydns) agree on, and nothing
//! else: the SkyDNS record JSON stored under every etcd key ([`record`]) and
//! the mapping between DNS names and those keys ([`path`]). Named after
//! SkyDNS's `msg` package. Pure: no DNS server, no etcd client, no tokio.

pub mod path;
pub mod record;
