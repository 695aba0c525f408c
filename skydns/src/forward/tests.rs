//! The forwarder against fake upstream servers.

use super::health::FailureLog;
use super::*;
use hickory_proto::rr::RecordType;
use std::sync::atomic::Ordering;
use test_support::fake_upstream::{echo_tcp_only, echo_udp, echo_udp_only, forging_udp};

/// The timeout of a relay a test expects answered: far above any loaded
/// machine's loopback answer, so only a relay that fails misses it.
const ANSWERED: Duration = Duration::from_secs(10);
/// The timeout of a relay a test expects to fail: it fails all the same
/// with any timeout, and this one keeps the test short.
const UNANSWERED: Duration = Duration::from_millis(300);

fn query(id: u16, name: &str) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = id;
    m.queries
        .push(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    m.to_vec().unwrap()
}

#[tokio::test]
async fn identical_requests_in_flight_share_one_exchange() {
    let (addr, seen) = echo_udp(Duration::from_millis(200));
    let upstreams = Upstreams::new(vec![addr], ANSWERED);
    let (q1, q2, q3) = (
        query(7, "a.example.org."),
        query(9, "a.example.org."),
        query(8, "b.example.org."),
    );
    let (a, b, c) = tokio::join!(
        upstreams.relay(&q1, false),
        upstreams.relay(&q2, false),
        upstreams.relay(&q3, false),
    );
    assert_eq!(
        seen.load(Ordering::SeqCst),
        2,
        "same question: one exchange; another question: its own"
    );
    assert_eq!(
        &a.unwrap()[..2],
        &7u16.to_be_bytes(),
        "each caller gets its own ID"
    );
    assert_eq!(&b.unwrap()[..2], &9u16.to_be_bytes());
    assert_eq!(&c.unwrap()[..2], &8u16.to_be_bytes());
}

#[tokio::test]
async fn tcp_clients_are_relayed_over_tcp_only() {
    let (addr, _udp) = echo_tcp_only();
    let upstreams = Upstreams::new(vec![addr], ANSWERED);
    let q = query(0x4242, "tcp.example.org.");
    let reply = upstreams
        .relay(&q, true)
        .await
        .expect("a TCP client's query is answered over TCP");
    assert_eq!(&reply[..2], &0x4242u16.to_be_bytes(), "the caller's ID");
    assert_ne!(reply[2] & 0x80, 0, "a response");
    assert_eq!(reply[3..], q[3..]);
    let unanswered = Upstreams::new(vec![addr], UNANSWERED);
    assert!(
        unanswered.relay(&q, false).await.is_none(),
        "a UDP client's query must not go over TCP"
    );
}

#[tokio::test]
async fn udp_clients_are_relayed_over_udp_only() {
    let (addr, _tcp) = echo_udp_only();
    let upstreams = Upstreams::new(vec![addr], ANSWERED);
    let q = query(0x0707, "udp.example.org.");
    let reply = upstreams
        .relay(&q, false)
        .await
        .expect("a UDP client's query is answered over UDP");
    assert_eq!(&reply[..2], &0x0707u16.to_be_bytes(), "the caller's ID");
    assert_ne!(reply[2] & 0x80, 0, "a response");
    let unanswered = Upstreams::new(vec![addr], UNANSWERED);
    assert!(
        unanswered.relay(&q, true).await.is_none(),
        "a TCP client's query must not go over UDP"
    );
}

#[tokio::test]
async fn forged_and_garbage_replies_are_ignored_for_the_real_one() {
    let upstreams = Upstreams::new(vec![forging_udp(true)], ANSWERED);
    let q = query(0x5151, "www.Example.org.");
    let reply = upstreams.relay(&q, false).await.expect("the real reply");
    let m = Message::from_vec(&reply).unwrap();
    assert_eq!(m.queries[0].name().to_ascii(), "www.Example.org.");
    assert!(m.answers.is_empty(), "not the forged 6.6.6.6: {m:?}");
}

#[tokio::test]
async fn only_forged_replies_are_a_failure() {
    let upstreams = Upstreams::new(vec![forging_udp(false)], UNANSWERED);
    let q = query(0x5252, "www.example.org.");
    assert_eq!(upstreams.relay(&q, false).await, None);
}

#[test]
fn failed_forwards_are_logged_once_per_ten_seconds_with_the_count() {
    let log = FailureLog::default();
    let start = std::time::Instant::now();
    let at = |ms: u64| start + Duration::from_millis(ms);
    assert_eq!(log.count(at(0)), Some(1), "the first failure is logged");
    for ms in 1..=1_000 {
        assert_eq!(log.count(at(ms * 9)), None, "within 10 s of the last line");
    }
    assert_eq!(
        log.count(at(10_000)),
        Some(1_001),
        "10 s after the last line: one line counting every failure since"
    );
    assert_eq!(log.count(at(10_001)), None);
    assert_eq!(log.count(at(25_000)), Some(2));
}

/// Waits until server `i` is marked up again (a probe it answered).
async fn marked_up(health: &Health, i: usize) {
    test_support::wait::eventually(
        &format!("server {i} marked up"),
        test_support::wait::DEADLINE,
        async || {
            anyhow::ensure!(health.is_up(i), "still down");
            Ok(())
        },
    )
    .await
    .unwrap();
}

/// Forwarding settings of these tests: sequential, health on.
fn settings(timeout_ms: u64, threshold: u32, probe: Duration) -> Relay {
    Relay {
        timeout: Duration::from_millis(timeout_ms),
        policy: NsPolicy::Sequential,
        transport: NsTransport::Client,
        fail_threshold: threshold,
        probe_interval: probe,
        probe_name: Name::root(),
    }
}

const AN_HOUR: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn a_dead_first_upstream_is_asked_only_until_the_threshold() {
    for (threshold, dead_asked) in [(2, 2), (0, 6)] {
        let dead = test_support::fake_upstream::switchable(false);
        let (live, live_seen) = echo_udp(Duration::ZERO);
        let upstreams = Upstreams::with(
            vec![dead.addr, live],
            settings(1_000, threshold, AN_HOUR),
            None,
        );
        for id in 0..6 {
            let q = query(id, "www.example.org.");
            assert!(
                upstreams.relay(&q, false).await.is_some(),
                "the live one answers"
            );
        }
        assert_eq!(
            dead.seen.load(Ordering::SeqCst),
            dead_asked,
            "threshold {threshold}: the dead first server is asked this often in 6 queries"
        );
        assert_eq!(live_seen.load(Ordering::SeqCst), 6);
    }
}

#[tokio::test]
async fn servfail_counts_as_a_failure_of_that_upstream() {
    let (failing, failing_seen) = test_support::fake_upstream::servfail_udp();
    let (live, live_seen) = echo_udp(Duration::ZERO);
    let upstreams = Upstreams::with(vec![failing, live], settings(1_000, 2, AN_HOUR), None);
    for id in 0..5 {
        let reply = upstreams
            .relay(&query(id, "sf.example.org."), false)
            .await
            .unwrap();
        let rcode = reply[3] & 0x0f;
        assert_eq!(rcode, if id < 2 { 2 } else { 0 }, "query {id}");
    }
    assert_eq!(failing_seen.load(Ordering::SeqCst), 2, "then skipped");
    assert_eq!(live_seen.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_down_upstream_is_probed_and_back_in_use_once_a_probe_is_answered() {
    let first = test_support::fake_upstream::switchable(false);
    let (live, _) = echo_udp(Duration::ZERO);
    let metrics = Arc::new(Metrics::default());
    let upstreams = Upstreams::with(
        vec![first.addr, live],
        settings(1_000, 1, Duration::from_millis(50)),
        Some(metrics.clone()),
    );
    upstreams
        .relay(&query(1, "a.example.org."), false)
        .await
        .unwrap();
    let health = upstreams.health.clone().unwrap();
    assert!(!health.is_up(0), "one failure at threshold 1: down");
    let shown = format!("{health:?}");
    assert_eq!(shown, format!("Health {{ down: [{}] }}", first.addr));
    // A probe it leaves unanswered counts as a failed health check.
    let failed = format!(
        "coredns_forward_healthcheck_failures_total{{to=\"{}\"}}",
        first.addr
    );
    test_support::wait::eventually(
        "a failed probe counted",
        test_support::wait::DEADLINE,
        async || {
            let text = metrics.render();
            anyhow::ensure!(text.lines().any(|l| l.starts_with(&failed)), "{text}");
            Ok(())
        },
    )
    .await
    .unwrap();
    first.on.store(true, Ordering::SeqCst);
    marked_up(&health, 0).await;
    assert_eq!(
        first.probes_answered.load(Ordering::SeqCst),
        1,
        "the first probe it answered brought it back"
    );
    assert_eq!(*first.probe_names.lock().unwrap(), ["."], "probes ask . NS");
    let before = first.seen.load(Ordering::SeqCst);
    upstreams
        .relay(&query(2, "b.example.org."), false)
        .await
        .unwrap();
    assert_eq!(
        first.seen.load(Ordering::SeqCst),
        before + 1,
        "asked first again"
    );
}

#[tokio::test]
async fn when_every_upstream_is_down_all_are_tried_again() {
    let a = test_support::fake_upstream::switchable(false);
    let b = test_support::fake_upstream::switchable(false);
    let upstreams = Upstreams::with(vec![a.addr, b.addr], settings(1_000, 1, AN_HOUR), None);
    assert!(upstreams
        .relay(&query(1, "x.example.org."), false)
        .await
        .is_none());
    let health = upstreams.health.clone().unwrap();
    assert!(!health.is_up(0) && !health.is_up(1));
    b.on.store(true, Ordering::SeqCst);
    assert!(
        upstreams
            .relay(&query(2, "y.example.org."), false)
            .await
            .is_some(),
        "all down: every server is asked, and b answers"
    );
    assert!(health.is_up(1), "its answer marks it up");
}

#[tokio::test]
async fn a_truncated_udp_reply_is_asked_again_over_tcp() {
    let (addr, tcp_seen) = test_support::fake_upstream::truncating();
    let upstreams = Upstreams::new(vec![addr], ANSWERED);
    let reply = upstreams
        .relay(&query(7, "big.example.org."), false)
        .await
        .unwrap();
    let m = Message::from_vec(&reply).unwrap();
    assert!(!m.metadata.truncation, "the whole answer: {m:?}");
    assert_eq!(m.answers.len(), 1);
    assert_eq!(tcp_seen.load(Ordering::SeqCst), 1);
    // A client with no room beyond the truncated reply (here, its very
    // size: the echoed query) gets it as it is; one more byte of room,
    // and the whole answer is asked over TCP.
    let q = query(8, "fits.example.org.");
    let reply = upstreams.relay_within(&q, false, q.len()).await.unwrap();
    assert!(Message::from_vec(&reply).unwrap().metadata.truncation);
    assert_eq!(
        tcp_seen.load(Ordering::SeqCst),
        1,
        "no room: not asked over TCP"
    );
    let reply = upstreams
        .relay_within(&q, false, q.len() + 1)
        .await
        .unwrap();
    assert!(!Message::from_vec(&reply).unwrap().metadata.truncation);
    assert_eq!(tcp_seen.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn the_transport_flag_overrides_the_clients() {
    let (tcp_only, _mute) = echo_tcp_only();
    let mut s = settings(1_000, 0, AN_HOUR);
    s.transport = NsTransport::Tcp;
    let upstreams = Upstreams::with(vec![tcp_only], s.clone(), None);
    assert!(
        upstreams
            .relay(&query(3, "t.example.org."), false)
            .await
            .is_some(),
        "a UDP client's query goes over TCP"
    );
    let (udp_only, _listener) = echo_udp_only();
    s.transport = NsTransport::Udp;
    let upstreams = Upstreams::with(vec![udp_only], s, None);
    assert!(
        upstreams
            .relay(&query(4, "u.example.org."), true)
            .await
            .is_some(),
        "a TCP client's query goes over UDP"
    );
}

#[tokio::test]
async fn round_robin_and_random_spread_the_first_server() {
    let servers: Vec<_> = (0..3).map(|_| echo_udp(Duration::ZERO)).collect();
    let addrs: Vec<_> = servers.iter().map(|s| s.0).collect();
    let mut s = settings(1_000, 2, AN_HOUR);
    s.policy = NsPolicy::RoundRobin;
    let upstreams = Upstreams::with(addrs.clone(), s.clone(), None);
    for id in 0..6 {
        // The same ID each time: the policy, not the ID, chooses.
        let q = query(100, &format!("rr{id}.example.org."));
        upstreams.relay(&q, false).await.unwrap();
    }
    let seen: Vec<_> = servers.iter().map(|s| s.1.load(Ordering::SeqCst)).collect();
    assert_eq!(seen, [2, 2, 2], "round robin: each server first in turn");
    s.policy = NsPolicy::Random;
    let upstreams = Upstreams::with(addrs, s, None);
    for id in 0..60 {
        let q = query(100, &format!("rnd{id}.example.org."));
        upstreams.relay(&q, false).await.unwrap();
    }
    for (i, (_, seen)) in servers.iter().enumerate() {
        let seen = seen.load(Ordering::SeqCst) - 2;
        assert!(seen > 0, "random: server {i} was never first in 60 queries");
    }
}

#[test]
fn policies_and_transports_parse_from_their_flag_values() {
    assert_eq!("round_robin".parse(), Ok(NsPolicy::RoundRobin));
    assert_eq!("sequential".parse(), Ok(NsPolicy::Sequential));
    assert_eq!("random".parse(), Ok(NsPolicy::Random));
    let bad = "fastest".parse::<NsPolicy>().unwrap_err();
    assert!(
        bad.contains("fastest") && bad.contains("round_robin"),
        "{bad}"
    );
    assert_eq!("tcp".parse(), Ok(NsTransport::Tcp));
    assert_eq!("udp".parse(), Ok(NsTransport::Udp));
    assert_eq!("client".parse(), Ok(NsTransport::Client));
    assert!("quic".parse::<NsTransport>().unwrap_err().contains("quic"));
}

#[tokio::test]
async fn a_refusing_upstream_is_marked_down_and_its_failures_counted_by_reason() {
    let refusing: SocketAddr = ([127, 0, 0, 1], test_support::dead::closed_port()).into();
    let (live, _) = echo_udp(Duration::ZERO);
    let metrics = Arc::new(Metrics::default());
    let upstreams = Upstreams::with(
        vec![refusing, live],
        settings(2_000, 2, AN_HOUR),
        Some(metrics.clone()),
    );
    for id in 0..4 {
        assert!(upstreams
            .relay(&query(id, "r.example.org."), false)
            .await
            .is_some());
    }
    let text = metrics.render();
    let line = |l: &str| text.lines().any(|x| x == l);
    let at = |s: &str| s.replace("ADDR", &refusing.to_string());
    assert!(
        line(&at(
            "skydns_dns_upstream_requests_total{upstream=\"ADDR\"} 2"
        )),
        "{text}"
    );
    assert!(
        line(&at(
            "skydns_dns_upstream_failures_total{upstream=\"ADDR\",reason=\"refused\"} 2"
        )),
        "{text}"
    );
    assert!(
        line(&at("skydns_dns_upstream_up{upstream=\"ADDR\"} 0")),
        "{text}"
    );
    let live_up = format!("skydns_dns_upstream_up{{upstream=\"{live}\"}} 1");
    assert!(line(&live_up), "{text}");
    let live_requests = format!("skydns_dns_upstream_requests_total{{upstream=\"{live}\"}} 4");
    assert!(line(&live_requests), "{text}");
    assert!(
        line("coredns_forward_healthcheck_broken_total 0"),
        "one is up: {text}"
    );
}

/// A query that finds every upstream marked down counts in CoreDNS's
/// `healthcheck_broken` (and they are all asked all the same).
#[tokio::test]
async fn every_upstream_down_when_a_query_comes_is_counted_as_broken() {
    let refusing: Vec<SocketAddr> = (0..2)
        .map(|_| ([127, 0, 0, 1], test_support::dead::closed_port()).into())
        .collect();
    let metrics = Arc::new(Metrics::default());
    let upstreams = Upstreams::with(refusing, settings(2_000, 1, AN_HOUR), Some(metrics.clone()));
    let broken = |n: u32| format!("coredns_forward_healthcheck_broken_total {n}");
    let q = query(1, "down.example.org.");
    assert_eq!(upstreams.relay(&q, false).await, None);
    let text = metrics.render();
    assert!(text.lines().any(|l| l == broken(0)), "both were up: {text}");
    assert_eq!(upstreams.relay(&q, false).await, None);
    let text = metrics.render();
    assert!(text.lines().any(|l| l == broken(1)), "{text}");
}

/// SkyDNS's `Lookup` of a target outside the domain: the answers of a
/// NOERROR reply, with the TTL given; nothing from an NXDOMAIN.
#[tokio::test]
async fn a_lookup_takes_the_answers_of_a_noerror_reply_with_the_ttl_given() {
    let name = Name::from_ascii("target.example.org.").unwrap();
    let (answering, _) = test_support::fake_upstream::answering();
    let upstreams = Upstreams::new(vec![answering], ANSWERED);
    let records = upstreams
        .lookup(&name, RecordType::A, 1232, false, 42)
        .await
        .expect("answers");
    let got: Vec<String> = (records.iter())
        .map(|r| format!("{} {} {}", r.name, r.ttl, r.data))
        .collect();
    assert_eq!(got, ["target.example.org. 42 1.2.3.4"]);
    let nxdomain = test_support::fake_upstream::nxdomain_udp();
    let upstreams = Upstreams::new(vec![nxdomain], ANSWERED);
    let none = upstreams.lookup(&name, RecordType::A, 1232, false, 42);
    assert_eq!(none.await, None);
}

#[tokio::test]
async fn a_probe_asks_the_ns_of_ns_probe_name() {
    let first = test_support::fake_upstream::switchable(false);
    let (live, _) = echo_udp(Duration::ZERO);
    let relay = Relay {
        probe_name: Name::from_ascii("example.org.").unwrap(),
        ..settings(1_000, 1, Duration::from_millis(50))
    };
    let upstreams = Upstreams::with(vec![first.addr, live], relay, None);
    upstreams
        .relay(&query(1, "a.example.org."), false)
        .await
        .unwrap();
    first.on.store(true, Ordering::SeqCst);
    let health = upstreams.health.clone().unwrap();
    marked_up(&health, 0).await;
    assert_eq!(*first.probe_names.lock().unwrap(), ["example.org."]);
}

/// Forwarding's settings from the command line `args`.
fn built(args: &[&str]) -> Result<Settings, String> {
    let argv = ["skydns"].iter().chain(args).map(std::ffi::OsString::from);
    let flags = crate::config::parse_args(argv).map_err(|e| e.to_string())?;
    let keys = Keys::from_flags(&flags.forward);
    Settings::build(&flags.forward, &keys, || Ok(Vec::new()))
}

#[test]
fn ns_probe_name_is_a_domain_name_made_fully_qualified() {
    let probe_name = |args: &[&str]| built(args).map(|s| s.relay.probe_name.to_ascii());
    assert_eq!(
        probe_name(&["-ns-probe-name=Example.ORG"]).unwrap(),
        "example.org."
    );
    assert_eq!(probe_name(&[]).unwrap(), ".");
    for bad in ["", "a..b"] {
        let err = probe_name(&[&format!("-ns-probe-name={bad}")]).unwrap_err();
        assert_eq!(err, format!("ns-probe-name is not a domain name: {bad:?}"));
    }
}

/// No server configured (forwarding off): nothing is relayed, whatever the
/// policy; a packet shorter than a header neither.
#[tokio::test]
async fn without_servers_or_a_header_nothing_is_relayed() {
    for policy in [
        NsPolicy::RequestId,
        NsPolicy::Sequential,
        NsPolicy::RoundRobin,
        NsPolicy::Random,
    ] {
        let relay = Relay {
            policy,
            ..settings(1_000, 2, AN_HOUR)
        };
        let upstreams = Upstreams::with(vec![], relay, None);
        assert!(upstreams.is_empty());
        let q = query(7, "www.example.org.");
        assert_eq!(upstreams.relay(&q, false).await, None, "{policy:?}");
    }
    let (live, seen) = echo_udp(Duration::ZERO);
    let upstreams = Upstreams::with(vec![live], settings(1_000, 2, AN_HOUR), None);
    let q = query(7, "www.example.org.");
    assert_eq!(upstreams.relay(&q[..11], false).await, None);
    assert_eq!(seen.load(Ordering::SeqCst), 0);
    assert!(upstreams.relay(&q, false).await.is_some());
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

/// The `reason` label of a failed exchange, by the error's kind.
#[test]
fn exchange_failures_are_labelled_by_their_kind() {
    use std::io::{Error, ErrorKind};
    for (kind, reason) in [
        (ErrorKind::TimedOut, "timeout"),
        (ErrorKind::ConnectionRefused, "refused"),
        (ErrorKind::ConnectionReset, "refused"),
        (ErrorKind::InvalidData, "bad_reply"),
        (ErrorKind::UnexpectedEof, "bad_reply"),
        (ErrorKind::PermissionDenied, "error"),
    ] {
        assert_eq!(
            exchange::failure_reason(&Error::from(kind)),
            reason,
            "{kind:?}"
        );
    }
}

/// `read_timeout` (`-rtimeout`, or the etcd config key) of zero or less is
/// SkyDNS's default, 2 s.
#[test]
fn a_read_timeout_of_zero_or_less_is_two_seconds() {
    let timeout = |args: &[&str]| built(args).unwrap().relay.timeout;
    assert_eq!(timeout(&["-rtimeout=3s"]), Duration::from_secs(3));
    assert_eq!(timeout(&["-rtimeout=0s"]), Duration::from_secs(2));
    let flags = crate::config::parse_args(["skydns".into()]).unwrap();
    let mut keys = Keys::from_flags(&flags.forward);
    keys.read_timeout = -1;
    let settings = Settings::build(&flags.forward, &keys, || Ok(Vec::new())).unwrap();
    assert_eq!(settings.relay.timeout, Duration::from_secs(2));
}
