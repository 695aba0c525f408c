//! The end-to-end suites of the kube-dns pipeline live in `tests/`: skydns
//! (`skydns_*`), kube2sky (`kube2sky_*`), the Kubernetes API test server
//! (`apiserver_*`, against the `kube-api-test-server` crate), the deploy
//! scripts and manifests (`local_pipeline`, `deploy_manifests`,
//! `podman_pod`). They run the workspace's binaries as built by `cargo build
//! --workspace --bins` and share the `test-support` crate (etcd, DNS
//! queries, process guards, waiting).
//!
//! The library itself is `podman`: it turns the deploy manifests into what
//! `podman kube play` runs (`podman-manifest`, used by
//! deploy/podman/run.sh).

pub mod podman;
