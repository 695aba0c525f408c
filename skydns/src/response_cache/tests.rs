//! The response cache at chosen instants.

use super::*;
use hickory_proto::op::{MessageType, OpCode};
use hickory_proto::rr::rdata::{A, SOA};
use hickory_proto::rr::{Name, Record};

fn key(name: &str) -> CacheKey {
    CacheKey {
        name: name.into(),
        qtype: RecordType::A,
        qclass: 1,
        dnssec_ok: false,
        tcp: false,
        checking_disabled: false,
    }
}

fn positive(ttl: u32) -> Message {
    let mut m = Message::new(1, MessageType::Response, OpCode::Query);
    m.answers.push(Record::from_rdata(
        Name::from_ascii("x.").unwrap(),
        ttl,
        RData::A(A::new(1, 2, 3, 4)),
    ));
    m
}

fn negative(soa_ttl: u32, minimum: u32) -> Message {
    let mut m = Message::new(1, MessageType::Response, OpCode::Query);
    m.metadata.response_code = ResponseCode::NXDomain;
    let n = Name::from_ascii("example.").unwrap();
    let soa = SOA::new(n.clone(), n.clone(), 1, 2, 3, 4, minimum);
    m.authorities
        .push(Record::from_rdata(n, soa_ttl, RData::SOA(soa)));
    m
}

#[test]
fn hits_count_ttls_down_and_expire() {
    let cache = ResponseCache::new(10, Duration::from_secs(60));
    let t0 = Instant::now();
    assert!(cache.insert(key("x."), positive(30), t0));
    assert_eq!(cache.get(&key("x."), t0).unwrap().answers[0].ttl, 30);
    assert_eq!(
        cache
            .get(&key("x."), t0 + Duration::from_secs(12))
            .unwrap()
            .answers[0]
            .ttl,
        18
    );
    assert!(cache
        .get(&key("x."), t0 + Duration::from_secs(30))
        .is_none());
}

#[test]
fn lifetime_is_capped_by_rcache_ttl() {
    let cache = ResponseCache::new(10, Duration::from_secs(5));
    let t0 = Instant::now();
    cache.insert(key("x."), positive(300), t0);
    assert!(cache.get(&key("x."), t0 + Duration::from_secs(4)).is_some());
    assert!(cache.get(&key("x."), t0 + Duration::from_secs(5)).is_none());
}

#[test]
fn negative_answers_live_for_the_soa_negative_ttl() {
    let cache = ResponseCache::new(10, Duration::from_secs(60));
    let t0 = Instant::now();
    assert!(cache.insert(key("n."), negative(900, 10), t0));
    assert!(cache.get(&key("n."), t0 + Duration::from_secs(9)).is_some());
    assert!(cache
        .get(&key("n."), t0 + Duration::from_secs(10))
        .is_none());
    let mut no_soa = negative(1, 1);
    no_soa.authorities.clear();
    assert!(
        !cache.insert(key("m."), no_soa, t0),
        "no SOA: not cacheable"
    );
}

#[test]
fn servfail_and_truncated_replies_are_not_cached() {
    let cache = ResponseCache::new(10, Duration::from_secs(60));
    let mut fail = positive(30);
    fail.metadata.response_code = ResponseCode::ServFail;
    assert!(!cache.insert(key("a."), fail, Instant::now()));
    let mut tc = positive(30);
    tc.metadata.truncation = true;
    assert!(!cache.insert(key("b."), tc, Instant::now()));
}

#[test]
fn full_cache_evicts_expired_then_oldest() {
    let cache = ResponseCache::new(2, Duration::from_secs(60));
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    // The oldest entry is live; the newest one has expired by t0+10.
    cache.insert(key("old."), positive(50), t0);
    cache.insert(key("short."), positive(5), at(1));
    assert_eq!(cache.len(), 2);
    cache.insert(key("c."), positive(50), at(10));
    assert_eq!(cache.len(), 2, "exactly one entry made room");
    assert!(
        cache.get(&key("old."), at(10)).is_some(),
        "the live oldest entry survives: the expired one went first"
    );
    assert!(cache.get(&key("c."), at(10)).is_some());
    // Nothing expired now: the oldest inserted goes.
    cache.insert(key("d."), positive(50), at(11));
    assert!(cache.get(&key("old."), at(11)).is_none(), "then the oldest");
    assert!(cache.get(&key("c."), at(11)).is_some());
    assert!(cache.get(&key("d."), at(11)).is_some());
    assert_eq!(cache.len(), 2);
}

#[test]
fn nodata_answers_live_for_the_soa_negative_ttl_too() {
    // RFC 2308 §5: NOERROR with no answer (NODATA) is cached like NXDOMAIN.
    let cache = ResponseCache::new(10, Duration::from_secs(60));
    let t0 = Instant::now();
    let mut nodata = negative(900, 10);
    nodata.metadata.response_code = ResponseCode::NoError;
    assert!(cache.insert(key("nodata."), nodata, t0));
    assert!(cache
        .get(&key("nodata."), t0 + Duration::from_secs(9))
        .is_some());
    assert!(cache
        .get(&key("nodata."), t0 + Duration::from_secs(10))
        .is_none());
}

#[test]
fn replacing_an_entry_of_a_full_cache_evicts_nothing() {
    let cache = ResponseCache::new(2, Duration::from_secs(60));
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    cache.insert(key("a."), positive(50), t0);
    cache.insert(key("b."), positive(50), at(1));
    cache.insert(key("b."), positive(50), at(2));
    assert!(cache.get(&key("a."), at(2)).is_some(), "a made room for b");
    assert_eq!(cache.len(), 2);
}

/// With a stale window or without: an entry expired exactly now goes, not
/// the oldest, which is live.
#[test]
fn an_entry_expiring_at_the_insert_makes_room_before_a_live_one() {
    for stale in [Duration::ZERO, Duration::from_secs(5)] {
        let cache = ResponseCache::with(Settings {
            stale,
            ..Settings::plain(2, Duration::from_secs(60))
        });
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        cache.insert(key("live."), positive(50), t0);
        cache.insert(key("short."), positive(9), at(1));
        // short. expires at t0+10: exactly now, so it is the one to go.
        cache.insert(key("c."), positive(50), at(10));
        assert!(cache.get(&key("live."), at(10)).is_some(), "{stale:?}");
        assert!(cache.get(&key("c."), at(10)).is_some(), "{stale:?}");
    }
}

#[test]
fn eviction_stays_in_insertion_order_after_replacements() {
    // Replacing b. again and again leaves stale order records, which
    // are compacted away past four per entry: the live ones must stay,
    // or eviction could no longer find the oldest entry.
    let cache = ResponseCache::new(2, Duration::from_secs(600));
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    cache.insert(key("a."), positive(500), t0);
    for s in 1..=20 {
        cache.insert(key("b."), positive(500), at(s));
    }
    cache.insert(key("c."), positive(500), at(30));
    assert_eq!(cache.len(), 2, "never more than the capacity");
    assert!(cache.get(&key("a."), at(30)).is_none(), "a. was the oldest");
    assert!(cache.get(&key("b."), at(30)).is_some());
    assert!(cache.get(&key("c."), at(30)).is_some());
}

#[test]
fn an_expired_entry_is_stale_for_the_window_with_the_stale_ttl() {
    let cache = ResponseCache::with(Settings {
        stale: Duration::from_secs(100),
        ..Settings::plain(10, Duration::from_secs(60))
    });
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    cache.insert(key("s."), positive(20), t0);
    assert!(
        cache.get_stale(&key("s."), at(19)).is_none(),
        "fresh: not stale"
    );
    assert!(cache.get(&key("s."), at(20)).is_none(), "expired: no hit");
    let stale = cache
        .get_stale(&key("s."), at(20))
        .expect("kept for the window");
    assert_eq!(stale.reply.answers[0].ttl, 30);
    assert!(stale.refresh, "the first stale asker refreshes it");
    let again = cache.get_stale(&key("s."), at(49)).unwrap();
    assert!(!again.refresh, "RFC 8767 recheck: not again within 30 s");
    assert!(
        cache.get_stale(&key("s."), at(50)).unwrap().refresh,
        "30 s on: again"
    );
    assert!(cache.get_stale(&key("s."), at(119)).is_some());
    assert!(
        cache.get_stale(&key("s."), at(120)).is_none(),
        "window over"
    );
    let plain = ResponseCache::new(10, Duration::from_secs(60));
    plain.insert(key("p."), positive(20), t0);
    assert!(
        plain.get_stale(&key("p."), at(20)).is_none(),
        "no window: never"
    );
}

#[test]
fn a_popular_entry_is_due_for_prefetch_once_near_its_expiry() {
    let cache = ResponseCache::with(Settings {
        prefetch_hits: 3,
        prefetch_percent: 10,
        ..Settings::plain(10, Duration::from_secs(600))
    });
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    cache.insert(key("p."), positive(100), t0);
    let due = |s| cache.hit(&key("p."), at(s), None).unwrap().prefetch;
    assert!(!due(1) && !due(2), "two hits: not popular yet");
    assert!(!due(89), "popular, but 11% left");
    assert!(due(90), "10% left: due");
    assert!(!due(91), "said once");
    cache.insert(key("p."), positive(100), at(95));
    assert!(!due(96), "a new entry counts its hits again");
}

/// A reply as an upstream sends it: two A records, a SOA, an OPT.
fn upstream_reply() -> Message {
    let name = Name::from_ascii("WwW.Example.org.").unwrap();
    let mut m = Message::new(1, MessageType::Response, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.metadata.recursion_available = true;
    m.queries
        .push(hickory_proto::op::Query::query(name.clone(), RecordType::A));
    for (ttl, last) in [(30, 1), (20, 2)] {
        m.answers.push(Record::from_rdata(
            name.clone(),
            ttl,
            RData::A(A::new(192, 0, 2, last)),
        ));
    }
    let zone = Name::from_ascii("example.org.").unwrap();
    let soa = SOA::new(zone.clone(), zone.clone(), 1, 2, 3, 4, 50);
    m.authorities
        .push(Record::from_rdata(zone, 40, RData::SOA(soa)));
    m.edns = Some(hickory_proto::op::Edns::new());
    m
}

/// The request: another ID, RD clear, the name in another case.
fn request_packet(edns: bool) -> Vec<u8> {
    let mut q = Message::query();
    q.metadata.id = 0xbeef;
    q.metadata.recursion_desired = false;
    q.queries.push(hickory_proto::op::Query::query(
        Name::from_ascii("www.EXAMPLE.org.").unwrap(),
        RecordType::A,
    ));
    if edns {
        q.edns = Some(hickory_proto::op::Edns::new());
    }
    q.to_vec().unwrap()
}

#[test]
fn an_encoded_hit_is_the_decoded_reply_reshaped_for_the_asker() {
    let cache = ResponseCache::new(10, Duration::from_secs(60));
    let t0 = Instant::now();
    let key = key("www.example.org.");
    cache.insert(key.clone(), upstream_reply(), t0);
    let packet = request_packet(true);
    let asker = Asker {
        packet: &packet,
        edns: true,
        limit: 1232,
    };
    let later = t0 + Duration::from_secs(7);
    let Some(Hit {
        reply: CachedReply::Wire(bytes),
        ..
    }) = cache.hit(&key, later, Some(asker))
    else {
        panic!("an encoded hit");
    };
    let got = Message::from_vec(&bytes).unwrap();
    let mut want = cache.get(&key, later).unwrap();
    let request = Message::from_vec(&packet).unwrap();
    want.metadata.id = 0xbeef;
    want.metadata.recursion_desired = false;
    want.queries = request.queries.clone();
    assert_eq!(got, Message::from_vec(&want.to_vec().unwrap()).unwrap());
    assert_eq!(got.queries[0].name().to_ascii(), "www.EXAMPLE.org.");
    let ttls: Vec<u32> = (got.answers.iter().chain(&got.authorities))
        .map(|r| r.ttl)
        .collect();
    assert_eq!(ttls, [23, 13, 33], "counted down by 7 s");
    assert!(got.edns.is_some());
}

#[test]
fn a_hit_the_encoded_reply_cannot_serve_is_decoded() {
    let cache = ResponseCache::new(10, Duration::from_secs(60));
    let t0 = Instant::now();
    let key = key("www.example.org.");
    cache.insert(key.clone(), upstream_reply(), t0);
    let no_edns = request_packet(false);
    let with_edns = request_packet(true);
    let decoded = |asker| {
        matches!(
            cache.hit(&key, t0, Some(asker)).unwrap().reply,
            CachedReply::Message(_)
        )
    };
    let asker = |packet, edns, limit| Asker {
        packet,
        edns,
        limit,
    };
    assert!(
        decoded(asker(&no_edns, false, 512)),
        "no EDNS: the OPT must go"
    );
    assert!(
        decoded(asker(&with_edns, true, 40)),
        "too small a buffer: fitted"
    );
    let mut other_length = request_packet(true);
    other_length[12] = 0xc0; // a pointer instead of the name
    assert!(decoded(asker(&other_length, true, 1232)));
    assert!(!decoded(asker(&with_edns, true, 1232)));
}

#[test]
fn a_label_holding_a_dot_is_not_two_labels_of_the_key() {
    let dotted = Name::from_labels(vec![&b"www.bank"[..], b"com"]).unwrap();
    let plain = Name::from_ascii("WWW.bank.com.").unwrap();
    assert_ne!(name_key(&dotted), name_key(&plain));
    assert_eq!(
        name_key(&plain),
        name_key(&Name::from_ascii("www.BANK.com.").unwrap()),
        "case does not count"
    );
}

#[test]
fn the_encoded_reply_decodes_to_the_decoded_path_s_with_every_name_s_case() {
    let cache = ResponseCache::new(10, Duration::from_secs(60));
    let t0 = Instant::now();
    let key = key("www.example.org.");
    let mut reply = upstream_reply();
    // Owners spelled as the second asker spells the question.
    for r in &mut reply.answers {
        r.name = Name::from_ascii("www.EXAMPLE.org.").unwrap();
    }
    cache.insert(key.clone(), reply, t0);
    let packet = request_packet(true);
    let asker = Asker {
        packet: &packet,
        edns: true,
        limit: 1232,
    };
    let later = t0 + Duration::from_secs(3);
    let Some(Hit {
        reply: CachedReply::Wire(bytes),
        ..
    }) = cache.hit(&key, later, Some(asker))
    else {
        panic!("an encoded hit");
    };
    let mut want = cache.get(&key, later).unwrap();
    want.metadata.id = 0xbeef;
    want.metadata.recursion_desired = false;
    want.queries = Message::from_vec(&packet).unwrap().queries;
    // Equal but for name compression (the cached reply compressed against
    // the first asker's spelling): decoded, names compared with their case.
    let got = Message::from_vec(&bytes).unwrap();
    let want = Message::from_vec(&want.to_vec().unwrap()).unwrap();
    assert_eq!(format!("{got:?}"), format!("{want:?}"));
    let exact = Asker {
        limit: bytes.len(),
        ..asker
    };
    assert!(
        matches!(
            cache.hit(&key, later, Some(exact)).unwrap().reply,
            CachedReply::Wire(_)
        ),
        "a reply of exactly the client's size is sent as it is"
    );
}

/// The counts of cached answers and denials (the `coredns_cache_entries`
/// gauge) follow every way an entry goes: replaced, dropped on a hit past
/// its life, purged to make room.
#[test]
fn the_counts_of_answers_and_denials_follow_replacement_expiry_and_purge() {
    let cache = ResponseCache::new(3, Duration::from_secs(60));
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    cache.insert(key("a."), positive(50), t0);
    cache.insert(key("n1."), negative(900, 10), t0);
    assert_eq!(cache.counts(), (1, 1));
    cache.insert(key("n1."), positive(50), t0);
    assert_eq!(cache.counts(), (2, 0), "a denial replaced by an answer");
    cache.insert(key("n2."), negative(900, 10), t0);
    assert_eq!(cache.counts(), (2, 1));
    assert!(cache.get(&key("n2."), at(10)).is_none());
    assert_eq!(cache.counts(), (2, 0), "dropped on a hit past its life");
    cache.insert(key("n3."), negative(900, 10), t0);
    assert_eq!(cache.counts(), (2, 1));
    cache.insert(key("b."), positive(50), at(20));
    assert_eq!(cache.counts(), (3, 0), "purged to make room");
    // An NXDOMAIN after a CNAME and a NODATA are denials too.
    let cache = ResponseCache::new(3, Duration::from_secs(60));
    let mut nxdomain_after_cname = negative(900, 10);
    nxdomain_after_cname.answers = positive(50).answers;
    let mut nodata = negative(900, 10);
    nodata.metadata.response_code = ResponseCode::NoError;
    cache.insert(key("x."), nxdomain_after_cname, t0);
    cache.insert(key("y."), nodata, t0);
    cache.insert(key("z."), positive(50), t0);
    assert_eq!(cache.counts(), (1, 2));
}

/// A full cache with a stale window makes room first from entries whose
/// window is over (exactly now included), and keeps those still in it
/// (then the expired go, exactly now included: the test above).
#[test]
fn a_full_cache_with_a_stale_window_drops_the_entries_past_it_first() {
    let cache = ResponseCache::with(Settings {
        stale: Duration::from_secs(5),
        ..Settings::plain(2, Duration::from_secs(60))
    });
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    // `over.`'s window ends at t0+15, exactly when `c.` comes; `stale.`
    // is still in its window then, and stays.
    cache.insert(key("over."), positive(10), t0);
    cache.insert(key("stale."), positive(12), t0);
    cache.insert(key("c."), positive(50), at(15));
    assert!(cache.get_stale(&key("stale."), at(15)).is_some());
    assert!(cache.get_stale(&key("over."), at(15)).is_none());
}

/// `-rcache` and `-rcache-ttl` (or their etcd config keys) size the cache
/// and cap its lifetimes; a cap of zero or less is SkyDNS's 60 s.
#[test]
fn the_capacity_and_the_ttl_cap_come_from_rcache_and_rcache_ttl() {
    let flags = crate::config::parse_args(
        ["skydns", "-rcache=100", "-rcache-ttl=30"].map(std::ffi::OsString::from),
    )
    .unwrap();
    let keys = Keys::from_flags(&flags.cache);
    let settings = Settings::build(&flags.cache, &keys);
    assert_eq!(settings.capacity, 100);
    assert_eq!(settings.max_ttl, Duration::from_secs(30));
    assert_eq!(settings.max_ttl_secs(), 30);
    for cap in [0, -5] {
        let keys = Keys {
            rcache_ttl: cap,
            ..keys.clone()
        };
        assert_eq!(Settings::build(&flags.cache, &keys).max_ttl_secs(), 60);
    }
}
