//! SkyDNS 2.5.2c, re-implemented: an authoritative DNS server for the
//! Kubernetes cluster domain that serves SkyDNS records kept in etcd v3.
//!
//! Crate map:
//! - [`record`]: the JSON record (shared with kube2sky) and its key hash;
//! - [`path`]: DNS name ⇄ etcd key;
//! - [`snapshot`]: the immutable in-memory copy of the records queries read;
//! - [`answer`]: pure "question + snapshot → answer" functions.

pub mod answer;
pub mod handler;
pub mod path;
pub mod record;
pub mod response;
pub mod snapshot;
