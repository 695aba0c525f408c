//! `--leader-elect`: two kube2sky replicas over one etcd and one API server.
//! Only the holder of the Lease writes; when it is killed the standby takes
//! over once the Lease expired (not before) and rewrites nothing that is
//! already right; a leader stopped with SIGTERM releases the Lease, so a
//! standby takes over at its next attempt; a leader that finds the Lease
//! held by another, or cannot renew it for the renew deadline, exits 1 (two
//! writers would otherwise share etcd). Each runs on the API test server
//! and on a real kube-apiserver (`on_the_real_apiserver_*`).

#[path = "../../kube2sky/tests/support/mod.rs"]
mod kube2sky_support;

use anyhow::{ensure, Result};
use kube2sky_support::*;
use std::time::{Duration, Instant};
use test_support::http::metric;
use test_support::relay::TcpRelay;

/// Short timings so the test waits seconds, not the 15 s default.
const LEASE: &str = "--leader-elect-lease-duration=3s";
/// `LEASE` less the renew deadline below: the least time a standby can
/// wait after the leader's death (its last renewal was at most the renew
/// deadline before).
const LEAST_TAKE_OVER: Duration = Duration::from_secs(1);

/// The flags of replica `id`.
fn leader_flags(id: &str) -> Vec<String> {
    [
        "--leader-elect",
        LEASE,
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=200ms",
        "--leader-elect-resource-namespace=default",
    ]
    .iter()
    .map(|f| f.to_string())
    .chain([format!("--leader-elect-identity={id}")])
    .collect()
}

fn replica(etcd: &Etcd, api: &dyn KubeApi, id: &str) -> Result<Kube2sky> {
    let flags = leader_flags(id);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    Kube2sky::start(etcd, api, &flags)
}

fn written(metrics: &str) -> f64 {
    metric(metrics, "kube2sky_records_written_total").unwrap_or(-1.0)
}

/// etcd, kubectl, leader "a" (ready) and standby "b" on `api`.
async fn two_replicas(api: &dyn KubeApi) -> Result<(Etcd, Kubectl, Kube2sky, Kube2sky)> {
    let (etcd, kubectl, a) = one_leader(api).await?;
    let b = replica(&etcd, api, "b")?;
    b.wait_for_log("standing by").await?;
    Ok((etcd, kubectl, a, b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_takes_over_a_killed_leader_without_rewriting() -> Result<()> {
    standby_takes_over(&apiserver(&[KUBERNETES]).await?).await
}

/// The same with a real kube-apiserver's Leases (its validation of
/// holder, durations and times, and its optimistic concurrency).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_real_apiserver_standby_takes_over_a_killed_leader_without_rewriting() -> Result<()>
{
    let plane = ControlPlane::start()?;
    plane.with_logs(standby_takes_over(&plane).await)
}

async fn standby_takes_over(api: &dyn KubeApi) -> Result<()> {
    let (etcd, kubectl, mut a, b) = two_replicas(api).await?;
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
    // On v2 a PTR is put after its service's records, in a write of its own.
    wait_for_keys(&etcd, "/skydns/arpa/in-addr/10/0/0/31", 1).await?;
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
    // Timed from before the kill: a slow kill and reap cannot shorten it.
    let killed = Instant::now();
    a.kill();
    b.wait_for_log("became the leader").await?;
    // B waits the lease duration after the last renewal it saw: how long
    // that takes on a loaded machine is printed, the floor is asserted.
    let took = killed.elapsed();
    eprintln!("the standby took over {took:?} after the leader died");
    ensure!(
        took >= LEAST_TAKE_OVER,
        "took over {took:?} after the kill, before the Lease expired:\n{}",
        b.log()
    );
    ensure!(
        b.log()
            .contains("taking over lease default/kube2sky from \"a\""),
        "{}",
        b.log()
    );
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
    hands_over(&apiserver(&[KUBERNETES]).await?).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_real_apiserver_a_leader_stopped_with_sigterm_hands_over_at_once() -> Result<()> {
    let plane = ControlPlane::start()?;
    plane.with_logs(hands_over(&plane).await)
}

async fn hands_over(api: &dyn KubeApi) -> Result<()> {
    let (etcd, kubectl, mut a, b) = two_replicas(api).await?;

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

/// etcd, kubectl and leader "a" alone, ready, on `api`.
async fn one_leader(api: &dyn KubeApi) -> Result<(Etcd, Kubectl, Kube2sky)> {
    let etcd = Etcd::start()?;
    let kubectl = api.kubectl()?;
    let mut a = replica(&etcd, api, "a")?;
    a.wait_ready().await?;
    a.wait_for_log("became the leader").await?;
    Ok((etcd, kubectl, a))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_finds_the_lease_held_by_another_exits_1() -> Result<()> {
    lease_held_by_another(&apiserver(&[KUBERNETES]).await?).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_real_apiserver_a_leader_that_finds_the_lease_held_by_another_exits_1() -> Result<()>
{
    let plane = ControlPlane::start()?;
    plane.with_logs(lease_held_by_another(&plane).await)
}

async fn lease_held_by_another(api: &dyn KubeApi) -> Result<()> {
    let (_etcd, kubectl, mut a) = one_leader(api).await?;
    // Another replica wrote the Lease (say A was paused past the lease
    // duration and B took over): A must stop writing at its next renewal.
    let now = format!("{:.6}", k8s_openapi::jiff::Timestamp::now());
    let patch = format!(r#"{{"spec":{{"holderIdentity":"intruder","renewTime":"{now}"}}}}"#);
    kubectl.run(&[
        "patch",
        "leases.coordination.k8s.io",
        "kube2sky",
        "--type=merge",
        "-p",
        &patch,
    ])?;
    // The limit only stops a hung test; the exit comes at the next renewal.
    let status = a.wait_exit(DEADLINE).await?;
    ensure!(
        status.code() == Some(1),
        "exit status {status}: {}",
        a.log()
    );
    ensure!(
        a.log()
            .contains("leadership lost: lease default/kube2sky is held by another replica"),
        "{}",
        a.log()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_for_the_renew_deadline_exits_1() -> Result<()> {
    let api = apiserver(&[KUBERNETES]).await?;
    let (_etcd, _kubectl, mut a) = one_leader(&api).await?;
    // The API server stops answering: renewals hang.
    api.pause();
    let status = a.wait_exit(DEADLINE).await;
    api.resume();
    not_renewed(&a, status?)
}

/// The same with the real one cut off from kube2sky by a relay that holds
/// every connection: renewals fail, then hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_real_apiserver_a_leader_that_cannot_renew_for_the_renew_deadline_exits_1(
) -> Result<()> {
    let plane = ControlPlane::start()?;
    let cut_off = async {
        let relayed = Relayed::start(&plane).await?;
        let (_etcd, _kubectl, mut a) = one_leader(&relayed).await?;
        relayed.relay.hold().await;
        let status = a.wait_exit(DEADLINE).await?;
        not_renewed(&a, status)
    };
    plane.with_logs(cut_off.await)
}

/// `a` exited 1 for want of a renewal within the renew deadline.
fn not_renewed(a: &Kube2sky, status: std::process::ExitStatus) -> Result<()> {
    ensure!(
        status.code() == Some(1),
        "exit status {status}: {}",
        a.log()
    );
    ensure!(
        a.log().contains(
            "leadership lost: lease default/kube2sky not renewed for --leader-elect-renew-deadline=2s"
        ),
        "{}",
        a.log()
    );
    Ok(())
}

/// A real kube-apiserver that kube2sky reaches through a [`TcpRelay`]
/// (kubectl goes straight to it).
struct Relayed<'a> {
    plane: &'a ControlPlane,
    relay: TcpRelay,
    kubeconfig: std::path::PathBuf,
}

impl<'a> Relayed<'a> {
    async fn start(plane: &'a ControlPlane) -> Result<Self> {
        let relay = TcpRelay::start(plane.addr()).await?;
        let kubeconfig = plane.admin_kubeconfig_via(relay.addr())?;
        Ok(Relayed {
            plane,
            relay,
            kubeconfig,
        })
    }
}

impl KubeApi for Relayed<'_> {
    fn kube2sky_flags(&self) -> Result<Vec<String>> {
        let path = self.kubeconfig.display();
        Ok(vec![format!("--kubecfg-file={path}")])
    }

    fn kubectl(&self) -> Result<Kubectl> {
        self.plane.kubectl()
    }

    fn create_pod(&self, ns: &str, name: &str, ips: &[&str]) -> Result<()> {
        KubeApi::create_pod(self.plane, ns, name, ips)
    }
}
