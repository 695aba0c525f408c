//! The end-to-end suites of the kube-dns pipeline live in `tests/` and share
//! the `test-support` crate. The library itself is `podman`: the deploy
//! manifests turned into what `podman kube play` runs (the `podman-manifest`
//! binary, used by deploy/podman/run.sh), and `kubelet_env`, the kubelet's
//! expansion of ConfigMap settings that both podman and the manifest tests
//! apply.

pub mod kubelet_env;
pub mod podman;
