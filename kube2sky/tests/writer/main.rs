//! kube2sky's writes end to end: the real `kube2sky` binary against a real
//! etcd and the in-process API test server. The full sync in chunks and the
//! chunk planned beside the one in flight; the data-loss check over a
//! chunk in flight; consistency with the API where
//! kube2sky 1.2 let etcd drift; etcd's faults, transaction limits and
//! access (credentials, client certificates, the v2 index); 1.2's log
//! lines about a service's ports. These suites
//! live in kube2sky's own package so that the mutation check
//! (`scripts/mutants.sh`, which runs a package's tests for each mutant of
//! its code) runs them against every mutant of the writer: Cargo builds
//! the binary they start (`CARGO_BIN_EXE_kube2sky`) with the mutant in it.
//! The harness, `support/`, is shared with `integration-tests`' `kube2sky_*`
//! suites.

#[path = "../support/mod.rs"]
mod kube2sky_support;

mod consistency;
mod etcd;
mod faults;
mod full_sync;
mod loss_check;
mod planned_chunks;
mod port_logs;
mod service_chunks;
