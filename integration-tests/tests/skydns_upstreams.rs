//! skydns surviving its upstreams, with real dnsmasq upstreams, a real etcd
//! and dig: a dead first nameserver skipped after the threshold, stale
//! answers served when every upstream is gone (RFC 8767), a truncated reply
//! asked again over TCP, and the etcd config key followed without a restart
//! (run on v2 and v3 by the test command, `E2E_ETCD_API`).

mod skydns_support;

use skydns_support::{etcd_with_kubernetes as etcd, resolver};
use test_support::dead::silent_upstream;
use test_support::dnsmasq::Dnsmasq;
use test_support::http::metric;
use test_support::wait::{eventually, DEADLINE};

async fn upstream(ip: &str) -> Dnsmasq {
    Dnsmasq::start(&[&format!("--address=/www.example.org/{ip}")])
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_first_nameserver_is_asked_only_until_it_is_marked_down() {
    let etcd = etcd();
    let dead = silent_upstream();
    let live = upstream("192.0.2.10").await;
    let nameservers = format!("-nameservers={},127.0.0.1:{}", dead.addr(), live.port);
    let dns = resolver(
        &etcd,
        // 2 s: a slow reply of the live upstream must not count as a failure.
        &[&nameservers, "-rtimeout=2s", "-ns-probe-interval=1h"],
    )
    .await;
    for _ in 0..6 {
        let r = dns.dig(&["www.example.org", "A"]).await;
        assert_eq!(r.answer, ["www.example.org. 100 IN A 192.0.2.10"], "{r:?}");
    }
    let text = dns.scrape().await;
    let of = |series: &str| metric(&text, &series.replace("DEAD", &dead.addr().to_string()));
    assert_eq!(
        of("skydns_dns_upstream_requests_total{upstream=\"DEAD\"}"),
        Some(2.0),
        "two timeouts, then skipped: {text}"
    );
    assert_eq!(
        of("skydns_dns_upstream_failures_total{upstream=\"DEAD\",reason=\"timeout\"}"),
        Some(2.0)
    );
    assert_eq!(of("skydns_dns_upstream_up{upstream=\"DEAD\"}"), Some(0.0));
    let live_up = format!(
        "skydns_dns_upstream_up{{upstream=\"127.0.0.1:{}\"}}",
        live.port
    );
    assert_eq!(metric(&text, &live_up), Some(1.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_upstream_gone_known_names_are_served_stale_for_the_window() {
    let etcd = etcd();
    let mut up = upstream("192.0.2.20").await;
    let nameservers = format!("-nameservers=127.0.0.1:{}", up.port);
    let flags = [
        &nameservers[..],
        "-rcache=100",
        "-rcache-ttl=1",
        // The one bound on time here: the stale answer is seen within 10 s
        // of its expiry (a refused upstream fails at once; the window's
        // exact end is held by the handler's unit tests, on a clock moved by hand).
        "-rcache-stale=10s",
    ];
    let dns = resolver(&etcd, &flags).await;
    let r = dns.dig(&["www.example.org", "A"]).await;
    assert_eq!(r.answer, ["www.example.org. 100 IN A 192.0.2.20"]);
    up.stop();
    // Once its 1 s in the cache is over, the answer is stale: TTL 30.
    let stale = dns
        .wait_for("www.example.org", "A", |r| {
            r.answer == ["www.example.org. 30 IN A 192.0.2.20"]
        })
        .await;
    assert_eq!(stale.status, "NOERROR");
    let r = dns.dig(&["never.example.org", "A"]).await;
    assert_eq!(r.status, "SERVFAIL", "a name never seen: {r:?}");
    let text = dns.scrape().await;
    let served = metric(
        &text,
        "skydns_dns_cache_stale_replies_total{reason=\"failed\"}",
    );
    assert!(served >= Some(1.0), "{text}");
    // Past the window, nothing is left to serve.
    dns.wait_for("www.example.org", "A", |r| r.status == "SERVFAIL")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_upstream_reply_is_asked_again_over_tcp() {
    let etcd = etcd();
    // dnsmasq truncates its UDP replies at 512 bytes, whatever the client offers.
    let records: Vec<String> = (1..=40)
        .map(|i| format!("--host-record=big.example.org,192.0.2.{i}"))
        .collect();
    let mut args: Vec<&str> = records.iter().map(String::as_str).collect();
    args.push("--edns-packet-max=512");
    let up = Dnsmasq::start(&args).await.unwrap();
    let dns = resolver(&etcd, &[&format!("-nameservers=127.0.0.1:{}", up.port)]).await;
    // +ignore: dig shows the UDP reply as it is, without asking over TCP.
    let r = dns
        .dig(&["+ignore", "+bufsize=1232", "big.example.org", "A"])
        .await;
    assert!(!r.flags.contains(&"tc".to_string()), "{r:?}");
    assert_eq!(r.answer.len(), 40, "the whole answer over UDP: {r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_key_is_followed_without_a_restart() {
    let etcd = etcd();
    let (a, b) = (upstream("192.0.2.1").await, upstream("192.0.2.2").await);
    let dns = resolver(&etcd, &[&format!("-nameservers=127.0.0.1:{}", a.port)]).await;
    let from = |ip: &str| format!("www.example.org. 100 IN A {ip}");
    assert_eq!(
        dns.dig(&["www.example.org", "A"]).await.answer,
        [from("192.0.2.1")]
    );
    let config = format!(r#"{{"nameservers":["127.0.0.1:{}"]}}"#, b.port);
    etcd.put("/skydns/config", &config).unwrap();
    dns.wait_for("www.example.org", "A", |r| r.answer == [from("192.0.2.2")])
        .await;
    etcd.put("/skydns/config", "{not json").unwrap();
    let url = format!("http://127.0.0.1:{}/metrics", dns.metrics_port);
    eventually("the bad value counted", DEADLINE, async || {
        let text = test_support::http::scrape(&url).await?;
        let invalid = metric(&text, "skydns_dns_config_reloads_total{result=\"invalid\"}");
        anyhow::ensure!(invalid == Some(1.0), "{invalid:?}");
        Ok(())
    })
    .await
    .unwrap();
    let r = dns.dig(&["www.example.org", "A"]).await;
    assert_eq!(
        r.answer,
        [from("192.0.2.2")],
        "the last good configuration stays"
    );
    etcd.del("/skydns/config").unwrap();
    dns.wait_for("www.example.org", "A", |r| r.answer == [from("192.0.2.1")])
        .await;
}
