//! `skydns -discover`: `-machines` names one member of a three-member etcd
//! cluster; skydns learns the others from the cluster (v3 MemberList, or
//! `/v2/members` on the v2 keys API) and, when that member is stopped,
//! keeps reading through them: a record written afterwards is answered. A
//! second skydns without `-discover`, given the same one member, is the
//! control: once its store errors show it lost etcd, the new record is not
//! there for it.

use anyhow::{ensure, Context, Result};
use std::process::Command;
use test_support::dns::{query, Transport};
use test_support::etcd_cluster::EtcdCluster;
use test_support::http::metric;
use test_support::ports::{free_port, on_free_port};
use test_support::process::Process;
use test_support::wait::{eventually, DEADLINE};

const KUBERNETES: &str = "kubernetes.default.svc.cluster.local";
const RECORD: &str = r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#;

/// A skydns binary reading `machine` (and `extra` flags), ready once it
/// answers `kubernetes.default`; with its metrics port and log file.
async fn skydns(
    machine: &str,
    etcd: &EtcdCluster,
    extra: &[&str],
) -> Result<(Process, u16, u16, tempfile::TempDir)> {
    let binary = test_support::bins::built_binary("skydns");
    on_free_port(async |port| {
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("skydns.log");
        let metrics = free_port()?;
        let mut command = Command::new(&binary);
        command
            .arg(format!("-machines={machine}"))
            .args(etcd.api().skydns_flags())
            .arg(format!("-addr=127.0.0.1:{port}"))
            .arg(format!("-metrics-addr=127.0.0.1:{metrics}"))
            .args(["-domain=cluster.local.", "-no-rec"])
            .args(extra)
            .env("RUST_LOG", "skydns=debug,info");
        let mut process = Process::spawn_logged("skydns", command, &log)?;
        let ready = process
            .until_ready(DEADLINE, async || {
                let r = query(port, KUBERNETES, "A", Transport::Udp).await?;
                ensure!(!r.answer.is_empty(), "{r:?}");
                Ok(())
            })
            .await;
        ready.with_context(|| std::fs::read_to_string(&log).unwrap_or_default())?;
        Ok((process, port, metrics, dir))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_follows_the_cluster_when_the_named_member_stops() -> Result<()> {
    let mut etcd = EtcdCluster::start(3)?;
    etcd.put(
        "/skydns/local/cluster/svc/default/kubernetes/c88f1059",
        RECORD,
    )?;
    let first = etcd.endpoints()[0].clone();
    let (_found, port, _, dir) = skydns(&first, &etcd, &["-discover"]).await?;
    let (_control, control_port, control_metrics, _control_dir) =
        skydns(&first, &etcd, &[]).await?;
    // The discovering one has learned the three members before member 0 goes.
    let log = dir.path().join("skydns.log");
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
