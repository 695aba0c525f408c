//! `skydns -discover`: `-machines` names one member of a three-member etcd
//! cluster; skydns learns the others from the cluster (v3 MemberList, or
//! `/v2/members` on the v2 keys API) and, when that member is stopped,
//! keeps reading through them: a record written afterwards is answered. A
//! second skydns without `-discover`, given the same one member, is the
//! control: once its store errors show it lost etcd, the new record is not
//! there for it.

use anyhow::{ensure, Context, Result};
use test_support::dns::{query, Transport};
use test_support::etcd_cluster::EtcdCluster;
use test_support::http::metric;
use test_support::skydns::SkydnsBinary;
use test_support::wait::{eventually, DEADLINE};

const KUBERNETES: &str = "kubernetes.default.svc.cluster.local";
const RECORD: &str = r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#;

/// A skydns binary reading `machine` (and `extra` flags), ready once it
/// answers `kubernetes.default`.
async fn skydns(machine: &str, etcd: &EtcdCluster, extra: &[&str]) -> Result<SkydnsBinary> {
    SkydnsBinary::start(machine, etcd.api(), extra, KUBERNETES).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_follows_the_cluster_when_the_named_member_stops() -> Result<()> {
    let mut etcd = EtcdCluster::start(3)?;
    etcd.put(
        "/skydns/local/cluster/svc/default/kubernetes/c88f1059",
        RECORD,
    )?;
    let first = etcd.endpoints()[0].clone();
    let found = skydns(&first, &etcd, &["-discover"]).await?;
    let control = skydns(&first, &etcd, &[]).await?;
    let (port, control_port) = (found.port, control.port);
    let control_metrics = control.metrics_port;
    // The discovering one has learned the three members before member 0 goes.
    let log = found.log_path();
    eventually("skydns to learn the members", DEADLINE, async || {
        let text = std::fs::read_to_string(&log)?;
        let learned = etcd.endpoints().iter().all(|e| {
            text.lines()
                .any(|l| l.contains("etcd members changed") && l.contains(e.as_str()))
        });
        ensure!(learned, "{text}");
        Ok(())
    })
    .await?;
    etcd.kill_member(0);
    // Member 0 may have been the raft leader: writes wait for an election.
    eventually("a write after member 0 stopped", DEADLINE, async || {
        etcd.put("/skydns/local/cluster/svc/default/late/c88f1059", RECORD)
    })
    .await?;
    let late = "late.default.svc.cluster.local";
    eventually(
        "the record written after member 0 stopped",
        DEADLINE,
        async || {
            let r = query(port, late, "A", Transport::Udp).await?;
            ensure!(r.answer.iter().any(|a| a.ends_with("10.0.0.1")), "{r:?}");
            Ok(())
        },
    )
    .await
    .with_context(|| std::fs::read_to_string(&log).unwrap_or_default())?;
    // The control knows member 0 only: once it has noticed etcd is gone,
    // the record is not there for it.
    eventually("the control to lose etcd", DEADLINE, async || {
        let text =
            test_support::http::scrape(&format!("http://127.0.0.1:{control_metrics}/metrics"))
                .await?;
        let errors = metric(&text, "skydns_dns_store_error_count_total").unwrap_or(0.0);
        ensure!(errors >= 1.0, "{text}");
        Ok(())
    })
    .await?;
    let r = query(control_port, late, "A", Transport::Udp).await?;
    ensure!(r.answer.is_empty(), "without -discover: {r:?}");
    Ok(())
}
