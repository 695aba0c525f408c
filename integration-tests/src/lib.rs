//! The Kubernetes API test server: an in-memory API server (core/v1
//! services, endpoints, pods, namespaces; leases; endpoint slices, which can
//! be switched off) with the real API's list/watch semantics, used by the kube2sky tests, by kubectl-driven tests and by
//! the local demo (`kube-api-test-server`). What the tests share besides
//! it (etcd, DNS queries, process guards, waiting) is the `test-support`
//! crate. `podman` turns the deploy manifests into what `podman kube play`
//! runs (`podman-manifest`, used by deploy/podman/run.sh).

pub mod apiserver;
pub mod podman;
