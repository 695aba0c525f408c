//! Forwarded names through the response cache: serve-stale (RFC 8767),
//! prefetch, and a configuration swapped while the handler runs. Cache
//! lifetimes here are capped at 1 s (`rcache_ttl`) and pass on a clock
//! moved by hand ([`Clock::manual`]); the upstreams' timeouts are real.

use super::*;
use crate::query_log::{QueryLog, Source};
use crate::response_cache::Clock;
use hickory_proto::rr::Name;
use std::sync::atomic::Ordering;
use test_support::fake_upstream::{switchable, Switchable};
use test_support::wait::{eventually, DEADLINE};

const ONE_LIFETIME: Duration = Duration::from_millis(1_100);

fn caching(upstream: &Switchable) -> Settings {
    let mut s = Settings::default();
    s.forward.nameservers = vec![upstream.addr];
    s.forward.relay.timeout = Duration::from_secs(1);
    s.forward.relay.fail_threshold = 0;
    s.cache.capacity = 100;
    s.cache.max_ttl = Duration::from_secs(1);
    s
}

async fn ask(h: &Handler, name: &str) -> Message {
    let m = request(Name::from_ascii(name).unwrap(), RecordType::A);
    let bytes = h.handle_async(&m.to_vec().unwrap(), Transport::Udp).await;
    Message::from_vec(&bytes.expect("a reply")).unwrap()
}

fn ttls(m: &Message) -> Vec<u32> {
    m.answers.iter().map(|r| r.ttl).collect()
}

/// A query log of every reply.
fn logging_all() -> Option<Arc<QueryLog>> {
    Some(Arc::new(QueryLog::new("all", 1.0).unwrap().unwrap()))
}

/// The sources of the query log's lines so far.
fn sources(h: &Handler) -> Vec<Source> {
    let log = h.settings().query_log.expect("a query log");
    let written = log.written.lock().unwrap();
    written.iter().map(|(source, ..)| *source).collect()
}

fn metric(h: &Handler, line_start: &str) -> String {
    let text = h.metrics().render();
    text.lines()
        .find(|l| l.starts_with(line_start))
        .map_or_else(|| "absent".into(), str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_answer_is_served_stale_when_every_upstream_fails() {
    let up = switchable(true);
    let clock = Clock::manual();
    let h = handler_with(Some(cluster()), {
        let mut s = caching(&up);
        s.cache.stale = Duration::from_secs(6);
        // Longer than both timeouts of the silent upstream.
        s.cache.stale_timeout = Duration::from_secs(10);
        s.query_log = logging_all();
        s
    })
    .on_clock(clock.clone());
    assert_eq!(ttls(&ask(&h, "www.example.org.").await), [60]);
    up.on.store(false, Ordering::SeqCst);
    clock.advance(ONE_LIFETIME);
    let stale = ask(&h, "www.example.org.").await;
    assert_eq!(stale.metadata.response_code, ResponseCode::NoError);
    assert_eq!(ttls(&stale), [30], "RFC 8767: the stale TTL");
    assert_eq!(
        metric(
            &h,
            "skydns_dns_cache_stale_replies_total{reason=\"failed\"}"
        ),
        "skydns_dns_cache_stale_replies_total{reason=\"failed\"} 1"
    );
    assert_eq!(sources(&h), [Source::Forwarded, Source::Stale]);
    let seen = up.seen.load(Ordering::SeqCst);
    assert_eq!(ttls(&ask(&h, "www.example.org.").await), [30]);
    assert_eq!(
        metric(
            &h,
            "skydns_dns_cache_stale_replies_total{reason=\"recheck\"}"
        ),
        "skydns_dns_cache_stale_replies_total{reason=\"recheck\"} 1",
        "within 30 s of the failed refresh: served at once"
    );
    assert_eq!(
        up.seen.load(Ordering::SeqCst),
        seen,
        "without asking upstream"
    );
    let unseen = ask(&h, "new.example.org.").await;
    assert_eq!(unseen.metadata.response_code, ResponseCode::ServFail);
    // Past the stale window (1 s lifetime + 6 s): gone.
    clock.advance(Duration::from_secs(6));
    let gone = ask(&h, "www.example.org.").await;
    assert_eq!(gone.metadata.response_code, ResponseCode::ServFail);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_stale_window_an_expired_answer_is_not_served() {
    let up = switchable(true);
    let clock = Clock::manual();
    let h = handler_with(Some(cluster()), caching(&up)).on_clock(clock.clone());
    ask(&h, "www.example.org.").await;
    up.on.store(false, Ordering::SeqCst);
    clock.advance(ONE_LIFETIME);
    let reply = ask(&h, "www.example.org.").await;
    assert_eq!(reply.metadata.response_code, ResponseCode::ServFail);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upstream_gets_the_client_the_stale_answer_and_refreshes_the_cache() {
    let up = switchable(true);
    let clock = Clock::manual();
    let h = handler_with(Some(cluster()), {
        let mut s = caching(&up);
        s.cache.stale = Duration::from_secs(3600);
        s.cache.stale_timeout = Duration::from_millis(50);
        s.forward.relay.timeout = Duration::from_secs(10);
        s
    })
    .on_clock(clock.clone());
    ask(&h, "slow.example.org.").await;
    clock.advance(ONE_LIFETIME);
    // 80 times the client's timer: only a machine stalled for seconds
    // would see the upstream first.
    up.delay_ms.store(4_000, Ordering::SeqCst);
    let stale = ask(&h, "slow.example.org.").await;
    assert_eq!(ttls(&stale), [30], "the client timer fired first");
    assert_eq!(
        metric(
            &h,
            "skydns_dns_cache_stale_replies_total{reason=\"timeout\"}"
        ),
        "skydns_dns_cache_stale_replies_total{reason=\"timeout\"} 1"
    );
    // Still slow: a fresh answer now can only come from the cache, put
    // there by the fetch that went on without the client.
    eventually(
        "the cache refreshed by the fetch that went on",
        DEADLINE,
        async || {
            let reply = ask(&h, "slow.example.org.").await;
            anyhow::ensure!(ttls(&reply) != [30], "still stale: {:?}", ttls(&reply));
            Ok(())
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_popular_answer_is_refreshed_before_it_expires() {
    let up = switchable(true);
    let clock = Clock::manual();
    let h = handler_with(Some(cluster()), {
        let mut s = caching(&up);
        s.cache.prefetch_hits = 2;
        s.cache.prefetch_percent = 50;
        s.cache.max_ttl = Duration::from_secs(2);
        s
    })
    .on_clock(clock.clone());
    ask(&h, "hot.example.org.").await;
    ask(&h, "hot.example.org.").await;
    assert_eq!(up.seen.load(Ordering::SeqCst), 1, "one miss, one hit");
    // Less than half the 2 s lifetime left: the second hit is due for a refresh.
    clock.advance(Duration::from_millis(1_200));
    let misses = metric(&h, "skydns_dns_cache_miss_count_total{type=\"response\"}");
    let hit = ask(&h, "hot.example.org.").await;
    assert_eq!(
        ttls(&hit),
        [59],
        "answered from the cache, TTL counted down"
    );
    // The refreshed entry answers (TTL 60 again), not only the upstream
    // asked: its answer is stored after it comes back. The old entry,
    // being refreshed, starts no second refresh meanwhile.
    eventually("the refreshed answer in the cache", DEADLINE, async || {
        let reply = ask(&h, "hot.example.org.").await;
        anyhow::ensure!(ttls(&reply) == [60], "TTLs {:?}", ttls(&reply));
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(up.seen.load(Ordering::SeqCst), 2, "one refresh");
    assert_eq!(
        metric(&h, "skydns_dns_cache_prefetches_total"),
        "skydns_dns_cache_prefetches_total 1"
    );
    // Past the first entry's expiry (2 s), the refreshed one answers, with
    // more than half its lifetime left (no refresh due): no miss.
    clock.advance(Duration::from_millis(900));
    ask(&h, "hot.example.org.").await;
    assert_eq!(up.seen.load(Ordering::SeqCst), 2, "no new upstream query");
    assert_eq!(
        metric(&h, "skydns_dns_cache_miss_count_total{type=\"response\"}"),
        misses,
        "no miss"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_configuration_sends_the_next_query_to_the_new_nameservers() {
    let (a, b) = (switchable(true), switchable(true));
    let options = {
        let mut s = caching(&a);
        s.cache.max_ttl = Duration::from_secs(60);
        s
    };
    let h = handler_with(Some(cluster()), options.clone());
    ask(&h, "one.example.org.").await;
    h.reconfigure(zone(), {
        let mut s = options.clone();
        s.forward.nameservers = vec![b.addr];
        s
    });
    ask(&h, "two.example.org.").await;
    assert_eq!(b.seen.load(Ordering::SeqCst), 1, "the new server");
    assert_eq!(a.seen.load(Ordering::SeqCst), 1, "the old one no more");
    ask(&h, "one.example.org.").await;
    assert_eq!(
        b.seen.load(Ordering::SeqCst),
        2,
        "new nameservers: an empty cache, so the new one is asked"
    );
    h.reconfigure(zone(), {
        let mut s = options;
        s.forward.nameservers = vec![b.addr];
        s.round_robin = false;
        s
    });
    ask(&h, "one.example.org.").await;
    assert_eq!(
        b.seen.load(Ordering::SeqCst),
        2,
        "the same nameservers: the cache was kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_forward_is_answered_without_waiting() {
    let up = switchable(true);
    let h = handler_with(Some(cluster()), {
        let mut s = caching(&up);
        s.cache.max_ttl = Duration::from_secs(60);
        s.forward.max_pending = 1;
        s.query_log = logging_all();
        s
    })
    .on_clock(Clock::manual());
    ask(&h, "cached.example.org.").await;
    let m = request(
        Name::from_ascii("cached.example.org.").unwrap(),
        RecordType::A,
    );
    let packet = m.to_vec().unwrap();
    // Every place among the pending forwards taken: a miss would get REFUSED.
    let held = h.handle(
        &request(
            Name::from_ascii("other.example.org.").unwrap(),
            RecordType::A,
        )
        .to_vec()
        .unwrap(),
        Transport::Udp,
    );
    assert!(
        matches!(held, Outcome::Pending(_)),
        "a miss waits on the upstream"
    );
    let Outcome::Done(Some(bytes)) = h.handle(&packet, Transport::Udp) else {
        panic!("a hit is answered at once, not pending");
    };
    let reply = Message::from_vec(&bytes).unwrap();
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert_eq!(ttls(&reply), [60]);
    // A miss while every place is taken: SERVFAIL decided here.
    let refused = request(
        Name::from_ascii("third.example.org.").unwrap(),
        RecordType::A,
    );
    let refused = h.handle(&refused.to_vec().unwrap(), Transport::Udp);
    assert!(matches!(refused, Outcome::Done(Some(_))));
    assert_eq!(
        sources(&h),
        [Source::Forwarded, Source::Cached, Source::Local],
        "the first relayed, the hit cached, the refusal local"
    );
    drop(held);
}
