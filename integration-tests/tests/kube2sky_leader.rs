//! `--leader-elect`: two kube2sky replicas over one etcd and one API server.
//! Only the holder of the Lease writes; when it is killed the standby takes
//! over within the lease duration and rewrites nothing that is already
//! right; a leader stopped with SIGTERM releases the Lease, so a standby
//! takes over at its next attempt.

mod kube2sky_support;

use anyhow::{ensure, Result};
use kube2sky_support::*;
use std::time::{Duration, Instant};

/// Short timings so the test waits seconds, not the 15 s default.
const LEASE: &str = "--leader-elect-lease-duration=3s";

fn replica(etcd: &Etcd, api: &kube_api_test_server::ApiServerHandle, id: &str) -> Result<Kube2sky> {
    let identity = format!("--leader-elect-identity={id}");
    Kube2sky::start(
        etcd,
        api,
        &[
            "--leader-elect",
            LEASE,
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=200ms",
            "--leader-elect-resource-namespace=default",
            &identity,
        ],
    )
}

fn written(metrics: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("kube2sky_records_written_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1.0)
}

/// etcd, the API server, kubectl, leader "a" (ready) and standby "b".
async fn two_replicas() -> Result<(
    Etcd,
    kube_api_test_server::ApiServerHandle,
    Kubectl,
    Kube2sky,
    Kube2sky,
)> {
    let etcd = Etcd::start()?;
    let api = apiserver(&[KUBERNETES]).await?;
    let kubectl = Kubectl::new(&api.url())?;
    let mut a = replica(&etcd, &api, "a")?;
    a.wait_for_log("became the leader").await?;
    a.wait_ready().await?;
    let b = replica(&etcd, &api, "b")?;
    b.wait_for_log("standing by").await?;
    Ok((etcd, api, kubectl, a, b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_takes_over_a_killed_leader_without_rewriting() -> Result<()> {
    let (etcd, _api, kubectl, mut a, b) = two_replicas().await?;
    // The standby serves /healthz while it waits, and is not ready.
    ensure!(
        b.http("/healthz").await == Some((200, "ok\n".into())),
        "standby /healthz"
    );
    ensure!(
        b.http("/readiness").await.map(|r| r.0) == Some(503),
        "standby /readiness"
    );

    kubectl.with_manifest(
        "create",
        &svc_manifest("one", "10.0.0.31", &[("http", "TCP", 80)]),
    )?;
    wait_for_keys(&etcd, "/skydns/local/cluster/svc/default/one/", 2).await?;
    ensure!(
        written(&b.metrics().await?) == 0.0,
        "the standby wrote:\n{}",
        b.log()
    );
    let lease = kubectl.run(&[
        "get",
        "leases.coordination.k8s.io",
        "kube2sky",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ])?;
    ensure!(lease.trim() == "a", "holder {lease:?}");

    let before = etcd.revision()?;
    a.kill();
    let killed = Instant::now();
    b.wait_for_log("became the leader").await?;
    // The lease duration after the last renewal B saw, plus one retry
    // period; twice the lease duration leaves room for a loaded machine.
    let took = killed.elapsed();
    ensure!(took < Duration::from_secs(6), "took over after {took:?}");
    b.wait_for_log("full sync of services done").await?;
    b.wait_for_log("full sync of pods done").await?;
    ensure!(
        etcd.revision()? == before,
        "the new leader rewrote keys:\n{}",
        b.log()
    );

    kubectl.with_manifest(
        "create",
        &svc_manifest("two", "10.0.0.32", &[("http", "TCP", 80)]),
    )?;
    wait_for_keys(&etcd, "/skydns/local/cluster/svc/default/two/", 2).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopped_with_sigterm_hands_over_at_once() -> Result<()> {
    let (etcd, _api, kubectl, mut a, b) = two_replicas().await?;

    a.signal(nix::sys::signal::Signal::SIGTERM)?;
    let status = a.wait_exit(DEADLINE).await?;
    ensure!(status.success(), "{status}: {}", a.log());
    ensure!(
        a.log().contains("released lease default/kube2sky"),
        "{}",
        a.log()
    );
    b.wait_for_log("became the leader").await?;
    ensure!(
        !b.log()
            .contains("taking over lease default/kube2sky from \"a\""),
        "took the lease from a holder instead of after its release:\n{}",
        b.log()
    );
    kubectl.with_manifest(
        "create",
        &svc_manifest("three", "10.0.0.33", &[("http", "TCP", 80)]),
    )?;
    wait_for_keys(&etcd, "/skydns/local/cluster/svc/default/three/", 2).await?;
    Ok(())
}
