//! skydns's query log (`-log-queries`, `-log-queries-sample`) and the JSON
//! log format of the three binaries (`-log-format=json`), end to end: the
//! real binaries, a real etcd, `dig` over UDP and TCP. Each class of reply
//! is asked for and its line read back from skydns's stderr: which
//! classes are written, every field, where the reply came from (the
//! records, the hot path's cache, an upstream), the sampled share, and no
//! line at all without the flag. Run on v2 and v3 by the test command.

#[path = "../../kube2sky/tests/support/mod.rs"]
mod kube2sky_support;

use anyhow::{ensure, Context, Result};
use kube2sky_support::{apiserver, Kube2sky, KUBERNETES as KUBERNETES_SERVICE};
use serde_json::Value;
use std::process::Command;
use test_support::bins::built_binary;
use test_support::dead::SilentUpstream;
use test_support::dns::{dig_reply, Reply};
use test_support::etcd::{Etcd, KUBERNETES_RECORD};
use test_support::http::{get, start_server};
use test_support::ports::free_port;
use test_support::skydns::{Launch, SkydnsBinary};
use test_support::wait::{eventually, DEADLINE};

const KUBERNETES: &str = "kubernetes.default.svc.cluster.local.";

fn etcd_with_kubernetes() -> Result<Etcd> {
    let etcd = Etcd::start()?;
    etcd.put(KUBERNETES_RECORD.0, KUBERNETES_RECORD.1)?;
    Ok(etcd)
}

async fn skydns(etcd: &Etcd, args: &[&str]) -> Result<SkydnsBinary> {
    let launch = Launch::new(&etcd.endpoint(), etcd.api()).args(args);
    launch.start().await
}

/// The JSON objects of a log; every whole line must be one (the last may
/// be still being written).
fn json_lines(log: &str) -> Result<Vec<Value>> {
    let whole = &log[..log.rfind('\n').map_or(0, |end| end + 1)];
    whole
        .lines()
        .map(|line| serde_json::from_str(line).with_context(|| format!("not JSON: {line}")))
        .collect()
}

/// The query lines for `name`, in the order written.
fn query_lines(log: &str, name: &str) -> Result<Vec<Value>> {
    Ok(json_lines(log)?
        .into_iter()
        .filter(|l| l["target"] == "skydns::query" && l["name"] == name)
        .collect())
}

/// dig's "MSG SIZE  rcvd: N".
fn reply_size(reply: &Reply) -> Result<u64> {
    let line = (reply.raw.lines())
        .find_map(|l| l.split_once("MSG SIZE  rcvd: "))
        .context("dig printed no size")?;
    Ok(line.1.trim().parse()?)
}

async fn ask(port: u16, name: &str, qtype: &str, extra: &[&str]) -> Result<Reply> {
    let mut args = vec![name, qtype];
    args.extend_from_slice(extra);
    dig_reply(port, &args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_class_of_reply_is_written_with_its_fields_and_its_source() -> Result<()> {
    let etcd = etcd_with_kubernetes()?;
    // A pod of namespace `web` at 127.0.0.9, for an autopath walk.
    etcd.put(
        "/skydns/local/cluster/pod/web/127-0-0-9/1",
        r#"{"host":"127.0.0.9"}"#,
    )?;
    let upstream = SilentUpstream::bind()?;
    let nameservers = format!("-nameservers={}", upstream.addr());
    let dns = skydns(
        &etcd,
        &[
            "-log-queries=denial,error",
            "-log-format=json",
            &nameservers,
            "-no-rec=false",
            "-rtimeout=300ms",
            "-autopath",
        ],
    )
    .await?;
    let port = dns.port;
    // Success: not among the classes asked for.
    let found = ask(port, KUBERNETES, "A", &[]).await?;
    ensure!(
        found.status == "NOERROR" && !found.answer.is_empty(),
        "{found:?}"
    );
    // NXDOMAIN twice: the second comes from the hot path's cache.
    let missing = "Nope.default.svc.cluster.local.";
    let first = ask(port, missing, "A", &[]).await?;
    ensure!(first.status == "NXDOMAIN", "{first:?}");
    ask(port, missing, "A", &[]).await?;
    let nodata = ask(port, KUBERNETES, "TXT", &["+tcp"]).await?;
    ensure!(
        nodata.status == "NOERROR" && nodata.answer.is_empty(),
        "{nodata:?}"
    );
    let refused = ask(port, KUBERNETES, "ANY", &[]).await?;
    ensure!(refused.status == "REFUSED", "{refused:?}");
    let failed = ask(port, "example.com.", "AAAA", &[]).await?;
    ensure!(failed.status == "SERVFAIL", "{failed:?}");
    let badvers = ask(port, KUBERNETES, "A", &["+edns=1", "+noednsnegotiation"]).await?;
    ensure!(badvers.status == "BADVERS", "{badvers:?}");
    // The pod's walk tries three more names; only its own query is written.
    let walked = ask(
        port,
        "missing.web.svc.cluster.local.",
        "A",
        &["-b", "127.0.0.9"],
    )
    .await?;
    ensure!(walked.status == "NXDOMAIN", "{walked:?}");

    let log = dns.log();
    let lines = json_lines(&log)?;
    ensure!(
        !lines.iter().any(|l| l["target"] == "skydns::query"
            && l["rcode"] == "NOERROR"
            && l["answers"] != 0),
        "a success was written although only denial,error were asked for:\n{log}"
    );
    let nx = query_lines(&log, missing)?;
    ensure!(nx.len() == 2, "two NXDOMAIN lines expected:\n{log}");
    let line = &nx[0];
    let client = line["client"].as_str().context("client")?;
    ensure!(
        client.starts_with("127.0.0.1:") && client.len() > 10,
        "{line}"
    );
    for (field, want) in [
        ("level", Value::from("INFO")),
        ("message", "query".into()),
        ("proto", "udp".into()),
        ("qtype", "A".into()),
        ("qclass", "IN".into()),
        ("rcode", "NXDOMAIN".into()),
        ("answers", 0.into()),
        ("truncated", false.into()),
        ("size", reply_size(&first)?.into()),
        ("source", "local".into()),
    ] {
        ensure!(line[field] == want, "{field}: want {want} in {line}");
    }
    let duration = line["duration_seconds"].as_f64().context("duration")?;
    ensure!(duration > 0.0, "{line}");
    ensure!(
        line["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{line}"
    );
    ensure!(
        nx[1]["source"] == "cached",
        "the repeat comes from the hot path: {}",
        nx[1]
    );

    let by_type = |qtype: &str| -> Result<Value> {
        let lines = query_lines(&log, KUBERNETES)?;
        lines
            .into_iter()
            .find(|l| l["qtype"] == qtype)
            .with_context(|| format!("no {qtype} line in\n{log}"))
    };
    let nodata = by_type("TXT")?;
    ensure!(
        nodata["rcode"] == "NOERROR" && nodata["proto"] == "tcp",
        "{nodata}"
    );
    let refused = by_type("ANY")?;
    ensure!(
        refused["rcode"] == "REFUSED" && refused["source"] == "local",
        "{refused}"
    );
    let failed = query_lines(&log, "example.com.")?;
    ensure!(
        failed.len() == 1 && failed[0]["rcode"] == "SERVFAIL" && failed[0]["source"] == "forwarded",
        "{failed:?}"
    );
    // (Its A lines may include a SERVFAIL of the readiness probe's, on a
    // machine slow to load the records.)
    let a_lines = query_lines(&log, KUBERNETES)?;
    ensure!(
        a_lines
            .iter()
            .any(|l| l["qtype"] == "A" && l["rcode"] == "BADVERS"),
        "{a_lines:?}"
    );
    let walked = query_lines(&log, "missing.web.svc.cluster.local.")?;
    ensure!(
        walked.len() == 1
            && walked[0]["source"] == "autopath"
            && walked[0]["client"]
                .as_str()
                .is_some_and(|c| c.starts_with("127.0.0.9:")),
        "{walked:?}"
    );
    for step in [
        "missing.svc.cluster.local.",
        "missing.cluster.local.",
        "missing.",
    ] {
        let written = query_lines(&log, step)?;
        ensure!(
            written.is_empty(),
            "the walk's step {step} was written:\n{log}"
        );
    }
    // The rest of skydns's log is JSON too (every line parsed above).
    ensure!(
        lines.iter().any(|l| l["target"] != "skydns::query"),
        "{log}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sampled_share_of_a_class_is_written_and_nothing_without_the_flag() -> Result<()> {
    let etcd = etcd_with_kubernetes()?;
    // The readiness probe's answers are successes: not counted in the sample.
    let sampled = skydns(&etcd, &["-log-queries=denial", "-log-queries-sample=0.25"]).await?;
    let off = skydns(&etcd, &[]).await?;
    for dns in [&sampled, &off] {
        for i in 0..8 {
            let name = format!("gone-{}.default.svc.cluster.local.", i % 3);
            let reply = ask(dns.port, &name, "A", &[]).await?;
            ensure!(reply.status == "NXDOMAIN", "{reply:?}");
            ask(dns.port, KUBERNETES, "A", &[]).await?;
        }
    }
    // A line is written before its reply is sent: all are there now.
    let log = sampled.log();
    let written: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("skydns::query"))
        .collect();
    ensure!(
        written.len() == 2,
        "every fourth of 8 denials, no success:\n{log}"
    );
    ensure!(
        written[0].contains("name=\"gone-0.default.svc.cluster.local.\"")
            && written[1].contains("name=\"gone-1.default.svc.cluster.local.\""),
        "the 4th and the 8th: {written:?}"
    );
    let silent = off.log();
    ensure!(
        !silent.contains("skydns::query"),
        "logging is off by default:\n{silent}"
    );
    Ok(())
}

#[tokio::test]
async fn a_bad_class_or_rate_is_refused_naming_the_flag() -> Result<()> {
    for (args, flag) in [
        (&["-log-queries=denial,nxdomain"][..], "-log-queries"),
        (
            &["-log-queries=all", "-log-queries-sample=0"][..],
            "-log-queries-sample",
        ),
        (&["-log-format=yaml"][..], "log-format"),
    ] {
        let addr = format!("-addr=127.0.0.1:{}", free_port()?);
        let out = Command::new(built_binary("skydns"))
            .args(["-machines=http://127.0.0.1:1", &addr])
            .args(args)
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(!out.status.success(), "{args:?} was accepted");
        ensure!(stderr.contains(flag), "{args:?}: {stderr}");
    }
    Ok(())
}

#[test]
fn kube2sky_says_pflags_warnings_even_when_its_flags_do_not_parse() -> Result<()> {
    let out = Command::new(built_binary("kube2sky"))
        .args(["--kube_master_url=http://127.0.0.1:1", "--log-format=yaml"])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.code() == Some(2), "{stderr}");
    ensure!(
        stderr.contains("WARNING: kube_master_url is deprecated, use kube-master-url instead")
            && stderr.contains("--log-format"),
        "{stderr}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_healthz_and_kube2sky_log_json_lines() -> Result<()> {
    let command = |port: u16| {
        let mut command = Command::new(built_binary("exec-healthz"));
        command.args([
            format!("-port={port}"),
            "-period=50ms".into(),
            "-log-format=json".into(),
        ]);
        command
    };
    let (mut healthz, base) = start_server("exec-healthz", command, "/healthz").await?;
    let url = format!("{base}/healthz");
    eventually("exec-healthz to answer", DEADLINE, async || get(&url).await).await?;
    healthz.stop();
    let lines = json_lines(&healthz.stderr_after_exit())?;
    ensure!(!lines.is_empty(), "exec-healthz logged nothing");
    for line in &lines {
        for field in ["level", "message", "target", "timestamp"] {
            ensure!(line[field].is_string(), "{field} in {line}");
        }
    }

    // kube2sky against the API test server, through its first sync.
    let etcd = Etcd::start()?;
    let api = apiserver(&[KUBERNETES_SERVICE]).await?;
    // `--kube_master_url`, as 1.2's manifests spell it: pflag's warning is a JSON line too.
    let mut kube2sky = Kube2sky::start(&etcd, &api, &["--log-format=json"])?;
    kube2sky.wait_ready().await?;
    let lines = json_lines(&kube2sky.log())?;
    ensure!(
        lines.iter().any(|l| l["level"] == "INFO"
            && l["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("kube2sky"))),
        "{lines:?}"
    );
    ensure!(
        lines.iter().any(|l| l["level"] == "WARN"
            && l["message"]
                .as_str()
                .is_some_and(|m| m.contains("kube_master_url is deprecated"))),
        "{lines:?}"
    );
    Ok(())
}
