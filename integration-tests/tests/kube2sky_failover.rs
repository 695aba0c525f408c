//! Past one etcd per pod: a shared etcd cluster of three members, two
//! kube2sky replicas with `--leader-elect`, and skydns, each given every
//! member. Under a steady dnsperf load of in-domain names, the etcd member
//! skydns watches (on v3; on v2, the raft leader, listed first) is killed
//! and then the kube2sky leader: no query may fail, a Service created after
//! each death must answer, the standby must take over (and not before the
//! Lease it last saw renewed could have expired), and skydns must follow
//! the failover on its watch without reading every record again. How long
//! the take-over took is printed, not asserted: a loaded machine only
//! makes it slower, and the safety property is the lower bound.

#[path = "../../kube2sky/tests/support/mod.rs"]
mod kube2sky_support;

use anyhow::{ensure, Context, Result};
use kube2sky_support::*;
use std::time::{Duration, Instant};
use test_support::dns::{query, Transport};
use test_support::dnsperf::{self, Dnsperf};
use test_support::etcd_cluster::EtcdCluster;
use test_support::skydns::SkydnsBinary;

/// The Lease's duration: short, so the test waits seconds.
const LEASE: Duration = Duration::from_secs(3);
/// How often a standby retries the Lease.
const RETRY: Duration = Duration::from_millis(200);
/// How long a leader may go without renewing before it gives up.
const RENEW_DEADLINE: Duration = Duration::from_secs(2);

/// The names the load asks for; every one exists all along.
const QUESTIONS: &[(&str, &str)] = &[
    ("kubernetes.default.svc.cluster.local", "A"),
    ("web.default.svc.cluster.local", "A"),
    ("_http._tcp.web.default.svc.cluster.local", "SRV"),
    ("web.default.svc.cluster.local", "SRV"),
];

fn replica(
    endpoints: &str,
    etcd: &EtcdCluster,
    api: &kube_api_test_server::ApiServerHandle,
    id: &str,
) -> Result<Kube2sky> {
    let lease = format!("--leader-elect-lease-duration={}s", LEASE.as_secs());
    let retry = format!("--leader-elect-retry-period={}ms", RETRY.as_millis());
    let renew = format!(
        "--leader-elect-renew-deadline={}s",
        RENEW_DEADLINE.as_secs()
    );
    let identity = format!("--leader-elect-identity={id}");
    Kube2sky::start_on(
        endpoints,
        etcd.api(),
        api,
        &[
            "--leader-elect",
            &lease,
            &renew,
            &retry,
            "--leader-elect-resource-namespace=default",
            &identity,
        ],
    )
}

/// The skydns binary on a free port, reading `endpoints`; returned once it
/// answers `kubernetes.default`.
async fn skydns(endpoints: &str, etcd: &EtcdCluster) -> Result<SkydnsBinary> {
    skydns_binary(endpoints, etcd.api(), &[], QUESTIONS[0].0).await
}

/// Waits until `name` has an A answer of `ip`; returns when it did.
async fn wait_answer(port: u16, name: &str, ip: &str) -> Result<Instant> {
    eventually(&format!("{name} to answer {ip}"), DEADLINE, async || {
        let r = query(port, name, "A", Transport::Udp).await?;
        ensure!(r.answer.iter().any(|a| a.ends_with(ip)), "{r:?}");
        Ok(Instant::now())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_query_fails_when_an_etcd_member_and_the_kube2sky_leader_die() -> Result<()> {
    let mut etcd = EtcdCluster::start(3)?;
    // The raft leader first in every list: on v2 the member each client
    // talks to first is the one that dies (v3 clients start at random).
    let leader = etcd.leader()?;
    let mut members = etcd.endpoints();
    members.swap(0, leader);
    let endpoints = members.join(",");

    let api = apiserver(&[KUBERNETES]).await?;
    let kubectl = Kubectl::new(&api.url())?;
    kubectl.with_manifest(
        "create",
        &svc_manifest("web", "10.0.0.40", &[("http", "TCP", 80)]),
    )?;
    let mut a = replica(&endpoints, &etcd, &api, "a")?;
    a.wait_for_log("became the leader").await?;
    a.wait_ready().await?;
    let b = replica(&endpoints, &etcd, &api, "b")?;
    b.wait_for_log("standing by").await?;
    let sky = skydns(&endpoints, &etcd).await?;
    let port = sky.port;
    wait_answer(port, "web.default.svc.cluster.local", "10.0.0.40").await?;
    let skydns_log = sky.log_path();
    let doomed = match etcd.api() {
        Api::V3 => watched_member(&etcd, &std::fs::read_to_string(&skydns_log)?)?,
        Api::V2 => leader,
    };

    let load = Dnsperf::start(port, QUESTIONS, 300, Duration::from_secs(300))?;

    // 1. The etcd leader dies: the other two elect a new one; kube2sky
    // writes and skydns reads through them.
    etcd.kill_member(doomed);
    kubectl.with_manifest(
        "create",
        &svc_manifest("after-member", "10.0.0.41", &[("http", "TCP", 80)]),
    )?;
    wait_answer(port, "after-member.default.svc.cluster.local", "10.0.0.41").await?;

    // 2. The kube2sky leader dies: B takes the Lease once it has seen it
    // unrenewed for the lease duration, and writes what A did not.
    // Timed from before the kill: a slow kill and reap cannot shorten it.
    let killed = Instant::now();
    a.kill();
    kubectl.with_manifest(
        "create",
        &svc_manifest("after-leader", "10.0.0.42", &[("http", "TCP", 80)]),
    )?;
    b.wait_for_log("became the leader").await?;
    let took_over = killed.elapsed();
    // A's last renewal was at most the renew deadline before its death (a
    // leader that cannot renew for that long exits), and B waits a whole
    // lease duration after it saw that renewal: two writers otherwise.
    ensure!(
        took_over >= LEASE - RENEW_DEADLINE,
        "the standby took over {took_over:?} after the leader died, before its Lease could expire:\n{}",
        b.log()
    );
    ensure!(
        b.log()
            .contains("taking over lease default/kube2sky from \"a\""),
        "B became the leader without taking the Lease over from A:\n{}",
        b.log()
    );
    let answered = wait_answer(port, "after-leader.default.svc.cluster.local", "10.0.0.42").await?;
    let took = answered - killed;

    // Queries sent up to now have had their answer or been counted lost
    // once dnsperf's timeout has passed: that window, not a signal, is what
    // this wait is for.
    tokio::time::sleep(dnsperf::TIMEOUT + Duration::from_millis(500)).await;
    let report = load.finish().await?;
    ensure!(
        report.lost == 0 && report.other_codes("NOERROR") == 0 && report.completed > 500,
        "queries failed during the failover:\n{}",
        report.text
    );
    // skydns followed the failover on its watch, without reading every
    // record again (a whole reload per member death costs seconds of CPU
    // per replica in a large cluster).
    let log = std::fs::read_to_string(&skydns_log)?;
    ensure!(
        log.matches("loaded records from the store").count() == 1,
        "skydns reloaded everything:\n{log}"
    );
    if etcd.api() == Api::V3 {
        ensure!(
            log.contains("store watch broke"),
            "the watch never broke:\n{log}"
        );
    }
    eprintln!(
        "failover: {} queries, 0 lost; take-over in {took_over:?}, the Service after the leader's death answered in {took:?}",
        report.completed
    );
    Ok(())
}

/// The member skydns (v3) last connected to, from its log line
/// `connected to etcd member endpoint=...`.
fn watched_member(etcd: &EtcdCluster, log: &str) -> Result<usize> {
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("connected to etcd member"))
        .with_context(|| format!("skydns named no member:\n{log}"))?;
    let endpoint = line
        .split_once("endpoint=")
        .map(|(_, rest)| rest.split_whitespace().next().unwrap_or(""))
        .unwrap_or("")
        .trim_matches('"');
    etcd.member_at(endpoint)
        .with_context(|| format!("{endpoint:?} is not a member: {line}"))
}

/// A counter's value in a metrics text.
fn counter(metrics: &str, name: &str) -> f64 {
    test_support::http::metric(metrics, name).unwrap_or(-1.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_started_while_a_member_is_down_fail_no_request() -> Result<()> {
    let mut etcd = EtcdCluster::start(3)?;
    etcd.kill_member(0);
    // The dead member first (v2 clients start there, v3 ones at random):
    // each client must find a live one and stay there, not spread requests
    // over all three (etcd-client's balancer fails those that land on the
    // dead one).
    let endpoints = etcd.endpoints().join(",");
    let api = apiserver(&[KUBERNETES]).await?;
    let kubectl = Kubectl::new(&api.url())?;
    let mut kube2sky = Kube2sky::start_on(&endpoints, etcd.api(), &api, &[])?;
    kube2sky.wait_ready().await?;
    let sky = skydns(&endpoints, &etcd).await?;
    let (port, metrics_port) = (sky.port, sky.metrics_port);

    for i in 0..6 {
        let (name, ip) = (format!("s{i}"), format!("10.0.0.{}", i + 50));
        kubectl.with_manifest("create", &svc_manifest(&name, &ip, &[("http", "TCP", 80)]))?;
        wait_answer(port, &format!("{name}.default.svc.cluster.local"), &ip).await?;
    }
    let k2s = kube2sky.metrics().await?;
    ensure!(
        counter(&k2s, "kube2sky_etcd_errors_total") == 0.0,
        "kube2sky's etcd requests failed:\n{k2s}\n{}",
        kube2sky.log()
    );
    let sky =
        test_support::http::scrape(&format!("http://127.0.0.1:{metrics_port}/metrics")).await?;
    ensure!(
        counter(&sky, "skydns_dns_store_error_count_total") == 0.0,
        "skydns's etcd requests failed:\n{sky}"
    );
    Ok(())
}
