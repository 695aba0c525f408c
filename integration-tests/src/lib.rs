//! Integration-test harnesses for the kube-dns workspace.
//!
//! - [`apiserver`]: an in-memory Kubernetes core/v1 API server (services,
//!   endpoints, pods, namespaces) with real list/watch semantics, used by the
//!   kube2sky tests, by kubectl-driven tests and by the local demo.
//! - [`etcd`]: a harness that runs a real etcd for the skydns tests.
//! - [`bins`]: where tests find the workspace's binaries.
//! - [`wait`]: the one way tests wait for a condition, and metric reads.

pub mod apiserver;
pub mod bins;
pub mod etcd;
pub mod wait;
