//! What the writer (kube2sky) and the server (skydns) agree on, and nothing
//! else: the SkyDNS record JSON stored under every etcd key ([`record`]) and
//! the mapping between DNS names and those keys ([`path`]), including which
//! part of a key etcd v2 hides ([`path::hidden_part`]).
//!
//! The name follows SkyDNS's own `msg` package (CoreDNS keeps it as
//! `plugin/etcd/msg`), which the original kube2sky imported from SkyDNS for
//! the same reason. It is not called `records` because kube2sky already has
//! a `records` module: the functions that turn API objects into these
//! records. Everything here is pure: no DNS server, no etcd client, no
//! tokio, so the writer does not pull the server in.

pub mod path;
pub mod record;
