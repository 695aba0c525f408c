//! Forwarding loop detection (`-loop`) against dnsmasq as the node resolver:
//! one that forwards everything back to skydns (the 127.0.0.53 trap) is
//! caught at start, skydns exiting 1 (`exit`) or leaving it out (`refuse`);
//! one that sends only cluster names to two skydns replicas behind one
//! Service is no loop.

use anyhow::{ensure, Result};
use std::time::Duration;
use test_support::dns::{dig_reply, query, Transport};
use test_support::dnsmasq::Dnsmasq;
use test_support::etcd::Etcd;
use test_support::front::{Replica, ServiceFront};
use test_support::http::{metric, scrape};
use test_support::ports::free_port;
use test_support::skydns::{Launch, Ports, Ready, SkydnsBinary};
use test_support::wait::{eventually, DEADLINE};

const KUBERNETES: &str = "kubernetes.default.svc.cluster.local";

fn etcd() -> Etcd {
    let etcd = Etcd::start().unwrap();
    let (key, value) = test_support::etcd::KUBERNETES_RECORD;
    etcd.put(key, value).unwrap();
    etcd
}

/// A node resolver that forwards every name to `port` (skydns): it
/// answers only its own readiness probe.
async fn forwarding_back_to(port: u16) -> Dnsmasq {
    Dnsmasq::start(&[
        "--address=/ready.invalid/",
        &format!("--server=127.0.0.1#{port}"),
    ])
    .await
    .unwrap()
}

fn launch(etcd: &Etcd, extra: &[&str]) -> Launch {
    Launch::new(&etcd.endpoint(), etcd.api())
        .args(&["-no-rec=false", "-ns-rotate=false", "-rtimeout=1s"])
        .args(extra)
}

/// Waits until skydns's loop checks counted `n` of `result`.
async fn loop_checks(skydns: &SkydnsBinary, result: &str, n: f64) -> Result<()> {
    let url = skydns.url("/metrics");
    let series = format!("skydns_dns_loop_checks_total{{result=\"{result}\"}}");
    eventually(&series, DEADLINE, async || {
        let text = scrape(&url).await?;
        let seen = metric(&text, &series);
        ensure!(seen == Some(n), "{series} is {seen:?}");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_resolver_forwarding_back_is_caught_at_start_and_skydns_exits_1() {
    let etcd = etcd();
    let ports = Ports {
        dns: free_port().unwrap(),
        metrics: free_port().unwrap(),
    };
    let resolver = forwarding_back_to(ports.dns).await;
    let upstream = format!("127.0.0.1:{}", resolver.port);
    let mut skydns = launch(&etcd, &[&format!("-nameservers={upstream}"), "-loop=exit"])
        .spawn_on(ports)
        .unwrap();
    let status = skydns.process.wait_exit(DEADLINE).await.unwrap();
    assert_eq!(status.code(), Some(1), "{}", skydns.log());
    let log = skydns.log();
    let detected = log
        .lines()
        .find(|l| l.contains("forwarding loop detected"))
        .unwrap_or_else(|| panic!("no detection logged:\n{log}"));
    assert!(
        detected.contains(&format!("upstream={upstream}")),
        "{detected}"
    );
    let last = log.lines().last().unwrap_or_default();
    assert!(
        last.contains(&format!(
            "forwarding loop detected through upstream {upstream} (-loop=exit)"
        )),
        "the fatal line names the upstream and the flag: {last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuse_leaves_the_looping_upstream_out_and_forwards_to_the_other() {
    let etcd = etcd();
    let ports = Ports {
        dns: free_port().unwrap(),
        metrics: free_port().unwrap(),
    };
    let looping = forwarding_back_to(ports.dns).await;
    let good = Dnsmasq::start(&["--address=/www.example.org/192.0.2.10"])
        .await
        .unwrap();
    // The looping resolver listed first, asked first (-ns-rotate=false).
    let nameservers = format!(
        "-nameservers=127.0.0.1:{},127.0.0.1:{}",
        looping.port, good.port
    );
    let skydns = launch(&etcd, &[&nameservers, "-loop=refuse"])
        .ready(Ready::Answer(KUBERNETES.into()))
        .start_on(ports)
        .await
        .unwrap();
    loop_checks(&skydns, "loop", 1.0).await.unwrap();
    loop_checks(&skydns, "clear", 1.0).await.unwrap();
    let r = dig_reply(skydns.port, &["www.example.org", "A"])
        .await
        .unwrap();
    assert_eq!(r.answer, ["www.example.org. 100 IN A 192.0.2.10"], "{r:?}");
    let text = scrape(&skydns.url("/metrics")).await.unwrap();
    let asked = |port: u16| {
        let series = format!("skydns_dns_upstream_requests_total{{upstream=\"127.0.0.1:{port}\"}}");
        metric(&text, &series)
    };
    assert_eq!(asked(looping.port), None, "never forwarded to: {text}");
    assert_eq!(asked(good.port), Some(1.0), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_behind_one_service_see_no_loop_through_a_node_resolver_that_sends_them_cluster_names(
) {
    let etcd = etcd();
    let ports = [0, 1].map(|_| Ports {
        dns: free_port().unwrap(),
        metrics: free_port().unwrap(),
    });
    let replicas = ports.map(|p| Replica {
        dns: format!("127.0.0.1:{}", p.dns).parse().unwrap(),
        ready_url: format!("http://127.0.0.1:{}/ready", p.metrics),
    });
    let service = ServiceFront::start(&replicas, Duration::from_secs(1))
        .await
        .unwrap();
    // The node resolver of a cluster: cluster names to the Service, the
    // rest answered itself (NXDOMAIN here, as the Internet would).
    let node = Dnsmasq::start(&[
        "--address=/#/",
        &format!("--server=/cluster.local/127.0.0.1#{}", service.port),
    ])
    .await
    .unwrap();
    let nameservers = format!("-nameservers=127.0.0.1:{}", node.port);
    let mut running = Vec::new();
    for p in ports {
        let skydns = launch(&etcd, &[&nameservers, "-loop=exit"])
            .ready(Ready::Answer(KUBERNETES.into()))
            .start_on(p)
            .await
            .unwrap();
        running.push(skydns);
    }
    for skydns in &mut running {
        loop_checks(skydns, "clear", 1.0).await.unwrap();
        assert_eq!(skydns.process.try_wait().unwrap(), None, "{}", skydns.log());
        assert!(!skydns.log().contains("forwarding loop detected"));
    }
    // The node resolver does reach the replicas through the Service.
    let r = query(node.port, KUBERNETES, "A", Transport::Udp)
        .await
        .unwrap();
    assert_eq!(r.answer.len(), 1, "{r:?}");
}
