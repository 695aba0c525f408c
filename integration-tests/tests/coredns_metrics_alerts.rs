//! CoreDNS's alerts, as kube-prometheus ships them (coredns-mixin, copied
//! into `fixtures/coredns-mixin.rules.yaml` with their source), read
//! skydns's series: Debian's `promtool` runs their unit tests
//! (`fixtures/coredns-mixin.rules.test.yaml`: each alert fires on bad
//! series and stays quiet on good ones), and every input series of those
//! tests has the name and label names of a series a real skydns serves
//! after traffic that makes each (forwards answered, SERVFAIL relayed, an
//! upstream that never answers, marked down and probed in vain).

use anyhow::{ensure, Context, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use test_support::dead::silent_upstream;
use test_support::dnsmasq::Dnsmasq;
use test_support::etcd::Etcd;
use test_support::http::scrape;
use test_support::skydns::SkydnsBinary;
use test_support::wait::{eventually, DEADLINE};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn promtool(args: &[&str]) -> Result<String> {
    test_support::tools::promtool(&fixtures(), args)
}

/// A series as its name and label names (Prometheus's `job` and
/// `instance` left out).
fn shape(series: &str) -> (String, BTreeSet<String>) {
    let (name, labels) = series.split_once('{').unwrap_or((series, ""));
    let names = labels
        .trim_end_matches('}')
        .split(',')
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k.trim().to_string())
        .filter(|k| k != "job" && k != "instance")
        .collect();
    (name.trim().to_string(), names)
}

/// The input series of the unit tests, but `up` (Prometheus's own).
fn input_series() -> Result<BTreeSet<(String, BTreeSet<String>)>> {
    let path = fixtures().join("coredns-mixin.rules.test.yaml");
    let text = std::fs::read_to_string(&path)?;
    let tests: serde_yaml::Value = serde_yaml::from_str(&text)?;
    let mut out = BTreeSet::new();
    for test in tests["tests"].as_sequence().context("tests")? {
        for input in test["input_series"].as_sequence().context("input_series")? {
            let series = input["series"].as_str().context("series")?;
            let shape = shape(series);
            if shape.0 != "up" {
                out.insert(shape);
            }
        }
    }
    Ok(out)
}

#[test]
fn the_mixin_rules_check_and_their_unit_tests_pass() -> Result<()> {
    promtool(&["check", "rules", "coredns-mixin.rules.yaml"])?;
    let text = promtool(&["test", "rules", "coredns-mixin.rules.test.yaml"])?;
    ensure!(text.contains("SUCCESS"), "{text}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_series_the_mixin_tests_feed_is_one_skydns_serves() -> Result<()> {
    let etcd = Etcd::start()?;
    let (key, value) = test_support::etcd::KUBERNETES_RECORD;
    etcd.put(key, value)?;
    let dead = silent_upstream();
    let (servfail, _) = test_support::fake_upstream::servfail_udp();
    let answering = Dnsmasq::start(&["--address=/www.example.org/192.0.2.1"]).await?;
    let nameservers = format!(
        "-nameservers={},{},127.0.0.1:{}",
        dead.addr(),
        servfail,
        answering.port
    );
    let flags = [
        "-no-rec=false",
        "-rtimeout=200ms",
        "-ns-policy=sequential",
        &nameservers,
    ];
    let skydns = SkydnsBinary::start(
        &etcd.endpoint(),
        etcd.api(),
        &flags,
        "kubernetes.default.svc.cluster.local.",
    )
    .await?;
    let url = skydns.url("/metrics");
    let wanted = input_series()?;
    // Forwards: the dead upstream fails twice (then is marked down and
    // probed), the next relays SERVFAIL. Asked until every shape is served.
    let served = eventually("every series the mixin tests feed", DEADLINE, async || {
        test_support::dns::dig(skydns.port, &["www.example.org", "A"])?;
        let text = scrape(&url).await?;
        let served: BTreeSet<_> = (text.lines())
            .filter(|l| l.starts_with("coredns_"))
            .map(|l| shape(l.rsplit_once(' ').map_or(l, |(series, _)| series)))
            .collect();
        let missing: Vec<_> = wanted.difference(&served).collect();
        ensure!(missing.is_empty(), "not served yet: {missing:?}");
        Ok(served)
    })
    .await?;
    ensure!(wanted.len() >= 6 && wanted.is_subset(&served));
    Ok(())
}
