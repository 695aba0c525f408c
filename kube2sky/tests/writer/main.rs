//! The writer's end-to-end tests: the real `kube2sky` binary against a real
//! etcd and the in-process API test server, for the full sync in chunks and
//! the chunk planned beside the one in flight. They live in kube2sky's own
//! package so that the mutation check (`scripts/mutants.sh`, which runs a
//! package's tests for each mutant of its code) runs them against every
//! mutant of the writer; Cargo builds the binary they start
//! (`CARGO_BIN_EXE_kube2sky`) with the mutant in it. The harness,
//! `support/`, is shared with the `kube2sky_*` suites of `integration-tests`.

#[path = "../support/mod.rs"]
mod kube2sky_support;

mod full_sync;
mod planned_chunks;
