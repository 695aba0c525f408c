//! skydns as a resolver for pods: forwarding to upstream servers (dnsmasq
//! and a second skydns on loopback), failover, SERVFAIL for dead upstreams,
//! the response cache, internal lookups, stub zones and /metrics.

mod skydns_support;

use anyhow::ensure;
use skydns_support::{etcd_with_kubernetes as etcd, resolver, SkyDns};
use test_support::dead::silent_upstream;
use test_support::dnsmasq::Dnsmasq;
use test_support::etcd::Etcd;
use test_support::http::metric;
use test_support::wait::{eventually, DEADLINE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwards_over_udp_and_tcp_and_relays_nxdomain() {
    let etcd = etcd();
    let up = Dnsmasq::start(&[
        "--address=/www.example.org/192.0.2.10",
        "--address=/nx.example.org/",
        "--ptr-record=9.9.9.10.in-addr.arpa,host.example.",
    ])
    .await
    .unwrap();
    let dns = resolver(&etcd, &[&format!("-nameservers=127.0.0.1:{}", up.port)]).await;
    let r = dns.dig(&["www.example.org", "A"]).await;
    assert_eq!(r.status, "NOERROR");
    assert_eq!(r.answer, ["www.example.org. 100 IN A 192.0.2.10"]);
    let r = dns.dig(&["+tcp", "www.example.org", "A"]).await;
    assert_eq!(r.answer, ["www.example.org. 100 IN A 192.0.2.10"]);
    assert_eq!(dns.dig(&["a.nx.example.org", "A"]).await.status, "NXDOMAIN");
    // Single-label names are never forwarded (ndots 2).
    let r = dns.dig(&["localhost.", "A"]).await;
    assert_eq!(r.status, "SERVFAIL");
    assert!(r.flags.contains(&"ra".into()));
    // A reverse name skydns has no PTR for goes upstream.
    let r = dns.dig(&["-x", "10.9.9.9"]).await;
    assert_eq!(
        r.answer,
        ["9.9.9.10.in-addr.arpa. 100 IN PTR host.example."],
        "{r:?}"
    );
    dns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_rec_never_forwards() {
    let etcd = etcd();
    let up = Dnsmasq::start(&["--address=/www.example.org/192.0.2.10"])
        .await
        .unwrap();
    let dns = resolver(
        &etcd,
        &[&format!("-nameservers=127.0.0.1:{}", up.port), "-no-rec"],
    )
    .await;
    let r = dns.dig(&["www.example.org", "A"]).await;
    assert_eq!(r.status, "SERVFAIL");
    assert!(!r.flags.contains(&"ra".into()));
    dns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_upstream_gets_a_prompt_servfail_and_the_next_server_is_tried() {
    let etcd = etcd();
    let dead = silent_upstream();
    let dns = resolver(
        &etcd,
        &[&format!("-nameservers={}", dead.addr()), "-rtimeout=300ms"],
    )
    .await;
    // An answer at all (dig gives up after its own timeout with no status)
    // and SERVFAIL, not a hang; how fast is the benchmark's business.
    let r = dns.dig(&["+time=20", "www.example.org", "A"]).await;
    assert_eq!(r.status, "SERVFAIL", "{r:?}");
    dns.shutdown().await;

    let up = Dnsmasq::start(&["--address=/www.example.org/192.0.2.10"])
        .await
        .unwrap();
    let dns = resolver(
        &etcd,
        &[
            &format!("-nameservers={},127.0.0.1:{}", dead.addr(), up.port),
            "-rtimeout=300ms",
        ],
    )
    .await;
    // Asked until answered: the dead server's 300 ms is also all the live
    // one has, which a loaded machine may miss.
    eventually("failover to the second server", DEADLINE, async || {
        let r = dns.dig(&["www.example.org", "A"]).await;
        ensure!(
            r.answer == ["www.example.org. 100 IN A 192.0.2.10"],
            "{r:?}"
        );
        Ok(())
    })
    .await
    .unwrap();
    dns.shutdown().await;
}

/// A second skydns serving `example.org.` from the same etcd: an upstream
/// that gives SOAs with its negative answers.
async fn upstream_skydns(etcd: &Etcd) -> SkyDns {
    etcd.put(
        "/skydns/org/example/www/1",
        r#"{"host":"192.0.2.20","ttl":100}"#,
    )
    .unwrap();
    SkyDns::start_with(
        etcd,
        &["-domain=example.org.", "-no-rec"],
        &[],
        "www.example.org",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_response_cache_counts_ttls_down_and_keeps_negative_answers() {
    let etcd = etcd();
    let up = upstream_skydns(&etcd).await;
    let dns = resolver(
        &etcd,
        &[
            &format!("-nameservers=127.0.0.1:{}", up.port),
            "-rcache=100",
        ],
    )
    .await;
    let first = dns.dig(&["www.example.org", "A"]).await;
    assert_eq!(first.answer, ["www.example.org. 100 IN A 192.0.2.20"]);
    assert_eq!(
        dns.dig(&["nosuch.example.org", "A"]).await.status,
        "NXDOMAIN"
    );
    up.shutdown().await;
    // Once a TTL second has passed, the cached answer counts down.
    dns.wait_for("WWW.Example.org", "A", |r| {
        r.answer.first().and_then(|a| a.split(' ').nth(1)) != Some("100")
    })
    .await;
    let cached = dns.dig(&["WWW.Example.org", "A"]).await;
    assert_eq!(
        cached.status, "NOERROR",
        "served from the cache with the upstream gone: {cached:?}"
    );
    let ttl: u32 = cached.answer[0].split(' ').nth(1).unwrap().parse().unwrap();
    assert!(ttl < 100, "TTL counted down: {cached:?}");
    let negative = dns.dig(&["nosuch.example.org", "A"]).await;
    assert_eq!(
        negative.status, "NXDOMAIN",
        "negative answer cached: {negative:?}"
    );
    let plain = dns
        .dig(&["+noedns", "+norec", "www.example.org", "A"])
        .await;
    assert_eq!(plain.status, "NOERROR");
    assert!(
        !plain.raw.contains("OPT PSEUDOSECTION"),
        "no OPT for a client without EDNS: {}",
        plain.raw
    );
    assert!(
        !plain.flags.contains(&"rd".into()),
        "RD follows the request: {plain:?}"
    );
    dns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cname_and_srv_targets_outside_the_domain_are_looked_up() {
    let etcd = etcd();
    let up = Dnsmasq::start(&["--address=/www.example.org/192.0.2.10"])
        .await
        .unwrap();
    etcd.put(
        "/skydns/local/cluster/svc/default/ext/1",
        r#"{"host":"www.example.org","ttl":30}"#,
    )
    .unwrap();
    // Round robin would shuffle the CNAME behind the A record (as SkyDNS does).
    let dns = resolver(
        &etcd,
        &[
            &format!("-nameservers=127.0.0.1:{}", up.port),
            "-round-robin=false",
        ],
    )
    .await;
    let r = dns.dig(&["ext.default.svc.cluster.local", "A"]).await;
    assert_eq!(
        r.answer,
        [
            "ext.default.svc.cluster.local. 30 IN CNAME www.example.org.",
            "www.example.org. 30 IN A 192.0.2.10"
        ]
    );
    dns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stub_zones_route_to_their_servers_and_loops_are_cut() {
    let etcd = etcd();
    let up = Dnsmasq::start(&["--address=/www.stub.test/192.0.2.30"])
        .await
        .unwrap();
    etcd.put(
        "/skydns/local/cluster/dns/stub/test/stub/ns1",
        &format!(r#"{{"host":"127.0.0.1","port":{}}}"#, up.port),
    )
    .unwrap();
    let dead = silent_upstream();
    let nameservers = format!("-nameservers={}", dead.addr());
    let dns = resolver(&etcd, &["-stubzones", "-rtimeout=300ms", &nameservers]).await;
    // A stub zone pointing back at skydns itself: a loop. Written once
    // skydns has its port (stub zones follow etcd), so the launcher can
    // take another port when one is taken between choosing and binding.
    etcd.put(
        "/skydns/local/cluster/dns/stub/test/loop/ns1",
        &format!(r#"{{"host":"127.0.0.1","port":{}}}"#, dns.port),
    )
    .unwrap();
    // -rtimeout is short for the loop's attempts below; a loaded machine
    // may take longer to relay the stub's answer: asked until it comes.
    eventually("the stub zone's answer", DEADLINE, async || {
        let r = dns.dig(&["www.stub.test", "A"]).await;
        ensure!(r.answer == ["www.stub.test. 100 IN A 192.0.2.30"], "{r:?}");
        Ok(())
    })
    .await
    .unwrap();
    let scrape = || dns.scrape();
    let udp = "skydns_dns_request_count_total{type=\"udp\"}";
    let stub = "skydns_dns_request_external_count_total{type=\"stub\"}";
    // Until skydns has read the loop key, www.loop.test goes to the dead
    // -nameservers (no stub request): wait for the first stub request.
    eventually("the loop stub zone to be routed", DEADLINE, async || {
        let before = count(&scrape().await, stub);
        dns.dig(&["www.loop.test", "A"]).await;
        let after = count(&scrape().await, stub);
        ensure!(after > before, "no stub request yet");
        Ok(())
    })
    .await
    .unwrap();
    let before = scrape().await;
    let r = dns.dig(&["www.loop.test", "A"]).await;
    assert_eq!(
        r.status, "SERVFAIL",
        "the looped request is dropped and the client told: {r:?}"
    );
    // The cut: the client's request is forwarded (one stub request, two
    // attempts at its one server), and both attempts come back marked and
    // are dropped there. Without it every returning request is forwarded
    // again, and the counts grow. An attempt is counted as skydns handles
    // it, which a loaded machine may do after the client's answer: the
    // scrape is taken once the three are in (a loop would also have
    // forwarded more than one stub request by then).
    let after = eventually("the looped attempts counted", DEADLINE, async || {
        let text = scrape().await;
        let n = count(&text, udp) - count(&before, udp);
        ensure!(n >= 3, "{n} requests counted");
        Ok(text)
    })
    .await
    .unwrap();
    assert_eq!(count(&after, udp) - count(&before, udp), 3, "{after}");
    assert_eq!(count(&after, stub) - count(&before, stub), 1, "{after}");
    dns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_errors_and_external_queries() {
    let etcd = etcd();
    let up = Dnsmasq::start(&["--address=/www.example.org/192.0.2.10"])
        .await
        .unwrap();
    let dns = resolver(&etcd, &[&format!("-nameservers=127.0.0.1:{}", up.port)]).await;
    let scrape = || dns.scrape();
    let before = scrape().await;
    dns.dig(&["nosuch.default.svc.cluster.local", "A"]).await;
    dns.dig(&["+tcp", "kubernetes.default.svc.cluster.local", "A"])
        .await;
    dns.dig(&["www.example.org", "A"]).await;
    let after = scrape().await;
    for (needle, delta) in [
        ("skydns_dns_request_count_total{type=\"udp\"}", 2),
        ("skydns_dns_request_count_total{type=\"tcp\"}", 1),
        ("skydns_dns_error_count_total{error=\"nxdomain\"}", 1),
        (
            "skydns_dns_request_external_count_total{type=\"recursive\"}",
            1,
        ),
    ] {
        assert_eq!(
            count(&after, needle) - count(&before, needle),
            delta,
            "{needle}\n{after}"
        );
    }
    dns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_replies_carry_no_opt_for_clients_without_edns() {
    let etcd = etcd();
    let up = Dnsmasq::start(&["--address=/www.example.org/192.0.2.10"])
        .await
        .unwrap();
    let dns = resolver(
        &etcd,
        &[&format!("-nameservers=127.0.0.1:{}", up.port), "-rcache=10"],
    )
    .await;
    let first = dns.dig(&["+edns=0", "www.example.org", "A"]).await;
    assert!(
        first.raw.contains("OPT PSEUDOSECTION"),
        "dnsmasq echoes EDNS: {}",
        first.raw
    );
    let plain = dns.dig(&["+noedns", "www.example.org", "A"]).await;
    assert!(
        plain.answer.len() == 1 && plain.answer[0].ends_with("IN A 192.0.2.10"),
        "{plain:?}"
    );
    assert!(!plain.raw.contains("OPT PSEUDOSECTION"), "{}", plain.raw);
    dns.shutdown().await;
}

/// A counter's value in a scrape (0 when the series is absent).
fn count(text: &str, series: &str) -> u64 {
    metric(text, series).unwrap_or(0.0) as u64
}
