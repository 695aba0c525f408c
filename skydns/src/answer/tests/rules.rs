//! The finer answer rules: CNAME chains, weights, targetstrip, TXT/MX,
//! de-duplication, groups, CHAOS, PTR, upstream lookups, odd labels.

use super::*;

/// A snapshot of `records`, keys below the domain's `/skydns/local/cluster`.
fn with(records: &[(&str, SkyRecord)]) -> Snapshot {
    below("/skydns/local/cluster", records)
}

#[test]
fn cname_chains_follow_names_and_stop_at_loops() {
    let snap = with(&[
        ("a/x", host("b.cluster.local")),
        ("b/x", host("10.1.1.1")),
        ("loop1/x", host("loop2.cluster.local.")),
        ("loop2/x", host("loop1.cluster.local.")),
        ("dangling/x", host("nowhere.cluster.local.")),
    ]);
    let (ans, _) = sections(ask_in(&snap, "a.cluster.local.", RecordType::A));
    assert_eq!(
        ans,
        [
            "a.cluster.local. 3600 CNAME b.cluster.local.",
            "b.cluster.local. 3600 A 10.1.1.1"
        ]
    );
    let (ans, _) = sections(ask_in(&snap, "loop1.cluster.local.", RecordType::A));
    assert!(ans.is_empty(), "{ans:?}");
    // A target that does not exist keeps the CNAME (SkyDNS dropped it).
    let (ans, _) = sections(ask_in(&snap, "dangling.cluster.local.", RecordType::A));
    assert_eq!(
        ans,
        ["dangling.cluster.local. 3600 CNAME nowhere.cluster.local."]
    );
}

#[test]
fn cname_chain_is_limited_to_eight_links() {
    let mut recs: Vec<(String, SkyRecord)> = (0..12)
        .map(|i| {
            (
                format!("c{i}/x"),
                host(&format!("c{}.cluster.local.", i + 1)),
            )
        })
        .collect();
    recs.push(("c12/x".into(), host("10.9.9.9")));
    let refs: Vec<(&str, SkyRecord)> = recs.iter().map(|(k, r)| (k.as_str(), r.clone())).collect();
    let (ans, _) = sections(ask_in(&with(&refs), "c0.cluster.local.", RecordType::A));
    assert!(ans.is_empty(), "a 12-link chain must be cut: {ans:?}");
    let (ans, _) = sections(ask_in(&with(&refs), "c6.cluster.local.", RecordType::A));
    assert_eq!(ans.len(), 7, "6 CNAMEs and the A record: {ans:?}");
    // The limit itself: 8 CNAMEs are followed, a 9th is not.
    let (ans, _) = sections(ask_in(&with(&refs), "c4.cluster.local.", RecordType::A));
    assert_eq!(ans.len(), 9, "8 CNAMEs and the A record: {ans:?}");
    let (ans, _) = sections(ask_in(&with(&refs), "c3.cluster.local.", RecordType::A));
    assert!(ans.is_empty(), "a 9-link chain must be cut: {ans:?}");
}

#[test]
fn a_cname_to_an_absent_name_in_the_domain_is_not_asked_upstream() {
    let snap = with(&[("dangling/x", host("nowhere.cluster.local."))]);
    let q = Question::new(
        Name::from_ascii("dangling.cluster.local.").unwrap(),
        RecordType::A,
        DNSClass::IN,
    );
    let lookups = Lookups::new();
    let (ans, _) = sections(authoritative(&zone(), &snap, &q, NOW, &lookups));
    assert_eq!(
        ans,
        ["dangling.cluster.local. 3600 CNAME nowhere.cluster.local."]
    );
    assert!(
        lookups.take_missing().is_empty(),
        "the domain's own names are never forwarded"
    );
}

#[test]
fn cname_query_looks_at_the_key_and_one_level_below() {
    let snap = with(&[
        ("alias", host("target.example.com")),
        ("dir/x", host("y.example.com.")),
        ("deep/a/x", host("z.example.com.")),
    ]);
    let (ans, _) = sections(ask_in(&snap, "alias.cluster.local.", RecordType::CNAME));
    assert_eq!(ans, ["alias.cluster.local. 3600 CNAME target.example.com."]);
    let (ans, _) = sections(ask_in(&snap, "dir.cluster.local.", RecordType::CNAME));
    assert_eq!(ans, ["dir.cluster.local. 3600 CNAME y.example.com."]);
    // Two levels below is another name's CNAME, not this one's.
    let (ans, _) = sections(ask_in(&snap, "deep.cluster.local.", RecordType::CNAME));
    assert!(ans.is_empty(), "{ans:?}");
    let (ans, _) = sections(ask_in(&snap, "a.deep.cluster.local.", RecordType::CNAME));
    assert_eq!(ans, ["a.deep.cluster.local. 3600 CNAME z.example.com."]);
}

#[test]
fn srv_weights_follow_the_reference_examples() {
    let svc = |w: i64| Service {
        key: "/k".into(),
        record: SkyRecord {
            weight: w,
            priority: 10,
            ..SkyRecord::default()
        },
        ttl: 1,
    };
    let w = |ws: &[i64]| weights(&ws.iter().map(|&x| svc(x)).collect::<Vec<_>>());
    assert_eq!(w(&[100, 100, 100]), [33, 33, 33]);
    assert_eq!(w(&[120, 100, 130]), [34, 28, 37]);
    assert_eq!(w(&[130, 80, 150]), [36, 22, 41]);
    assert_eq!(w(&[0]), [100]);
    assert_eq!(w(&[10, 10]), [50, 50]);
    // Go ints: summed unwrapped, the share wrapped (amd64 float→uint16).
    assert_eq!(w(&[65636, 100]), [99, 0]);
    assert_eq!(w(&[-100, 200]), [65436, 200]);
    assert_eq!(
        w(&[100, -100]),
        [0, 0],
        "a zero sum: +/-Inf, which Go makes 0"
    );
}

#[test]
fn out_of_range_ints_wrap_into_16_bits_as_go_did() {
    let snap = with(&[(
        "svc/ns/x/abc",
        SkyRecord {
            host: "x.example.org.".into(),
            port: -1,
            priority: 65546,
            weight: 0,
            ..SkyRecord::default()
        },
    )]);
    let (ans, _) = sections(ask_in(&snap, "x.ns.svc.cluster.local.", RecordType::SRV));
    assert_eq!(
        ans,
        ["x.ns.svc.cluster.local. 3600 SRV 10 100 65535 x.example.org."]
    );
    let parsed = SkyRecord::from_json(br#"{"host":"a.","port":70000,"priority":-5}"#)
        .expect("Go ints are valid however large");
    assert_eq!((parsed.port, parsed.priority), (70000, -5));
    assert!(
        SkyRecord::from_json(br#"{"host":"a.","port":1.5}"#).is_err(),
        "Go's int refuses fractions"
    );
}

#[test]
fn targetstrip_shortens_synthesised_targets() {
    let snap = with(&[(
        "svc/ns/x/abc",
        SkyRecord {
            host: "10.0.0.5".into(),
            port: 80,
            targetstrip: 1,
            ..SkyRecord::default()
        },
    )]);
    let (ans, add) = sections(ask_in(&snap, "x.ns.svc.cluster.local.", RecordType::SRV));
    assert_eq!(
        ans,
        ["x.ns.svc.cluster.local. 3600 SRV 10 100 80 x.ns.svc.cluster.local."]
    );
    assert_eq!(add, ["x.ns.svc.cluster.local. 3600 A 10.0.0.5"]);
}

#[test]
fn txt_and_mx_records() {
    let long = "y".repeat(255);
    let snap = with(&[
        (
            "t/1",
            SkyRecord {
                text: "hello".into(),
                ..SkyRecord::default()
            },
        ),
        (
            "t/2",
            SkyRecord {
                text: long.clone().into(),
                ..SkyRecord::default()
            },
        ),
        (
            "m/1",
            SkyRecord {
                host: "mail.example.org".into(),
                mail: true,
                priority: 5,
                ..SkyRecord::default()
            },
        ),
        (
            "m/2",
            SkyRecord {
                host: "10.0.0.9".into(),
                ..SkyRecord::default()
            },
        ),
    ]);
    let (ans, _) = sections(ask_in(&snap, "t.cluster.local.", RecordType::TXT));
    assert_eq!(ans[0], "t.cluster.local. 3600 TXT hello");
    match ask_in(&snap, "t.cluster.local.", RecordType::TXT) {
        Answer::Records { answers, .. } => match &answers[1].data {
            RData::TXT(t) => assert_eq!(t.txt_data.len(), 2, "255 bytes → chunk + empty"),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    let (ans, _) = sections(ask_in(&snap, "m.cluster.local.", RecordType::MX));
    assert_eq!(ans, ["m.cluster.local. 3600 MX 5 mail.example.org."]);
}

#[test]
fn duplicate_records_are_collapsed() {
    let snap = with(&[("d/1", host("10.0.0.1")), ("d/2", host("10.0.0.1"))]);
    let (ans, _) = sections(ask_in(&snap, "d.cluster.local.", RecordType::A));
    assert_eq!(ans.len(), 1);
}

#[test]
fn groups_filter_address_answers() {
    let g = |h: &str, group: &str| SkyRecord {
        host: h.into(),
        group: group.into(),
        ..SkyRecord::default()
    };
    let snap = with(&[
        ("g/a/1", g("10.0.0.1", "blue")),
        ("g/b/2", g("10.0.0.2", "red")),
        ("g/3", g("10.0.0.3", "blue")),
    ]);
    let (ans, _) = sections(ask_in(&snap, "g.cluster.local.", RecordType::A));
    // g/3 (listed first) is shallowest with group "blue": the red record goes.
    assert_eq!(
        ans,
        [
            "g.cluster.local. 3600 A 10.0.0.3",
            "g.cluster.local. 3600 A 10.0.0.1"
        ]
    );
}

#[test]
fn chaos_names() {
    let q = |n: &str, t| Question::new(Name::from_ascii(n).unwrap(), t, DNSClass::CH);
    let (ans, _) = sections(authoritative(
        &zone(),
        &cluster(),
        &q("version.bind.", RecordType::TXT),
        NOW,
        &Lookups::disabled(),
    ));
    assert_eq!(ans, ["version.bind. 0 TXT 2.5.2c"]);
    let (ans, _) = sections(authoritative(
        &zone(),
        &cluster(),
        &q("authors.bind.", RecordType::TXT),
        NOW,
        &Lookups::disabled(),
    ));
    assert_eq!(ans.len(), 4);
    assert_eq!(
        authoritative(
            &zone(),
            &cluster(),
            &q("other.bind.", RecordType::TXT),
            NOW,
            &Lookups::disabled()
        ),
        Answer::ServerFailure
    );
}

#[test]
fn reverse_reads_one_leaf() {
    let snap = Snapshot::new(
        1,
        [(
            "/skydns/arpa/in-addr/10/0/0/1".to_string(),
            host("kubernetes.default.svc.cluster.local."),
        )],
    );
    let q = Question::new(
        Name::from_ascii("1.0.0.10.in-addr.arpa.").unwrap(),
        RecordType::PTR,
        DNSClass::IN,
    );
    let ptr = reverse(&zone(), &snap, &q).expect("a PTR");
    assert_eq!(
        lines(&ptr),
        ["1.0.0.10.in-addr.arpa. 3600 PTR kubernetes.default.svc.cluster.local."]
    );
    let dir = Question::new(
        Name::from_ascii("0.0.10.in-addr.arpa.").unwrap(),
        RecordType::PTR,
        DNSClass::IN,
    );
    assert!(reverse(&zone(), &snap, &dir).is_none());
}

#[allow(dead_code)]
fn _types_used(_: A, _: CNAME, _: SRV) {}

#[test]
fn targets_outside_the_domain_come_from_lookups() {
    let snap = with(&[
        ("ext/x", host("www.example.org")),
        (
            "srv/x",
            SkyRecord {
                host: "mail.example.org.".into(),
                port: 25,
                ..SkyRecord::default()
            },
        ),
    ]);
    let q = Question::new(
        Name::from_ascii("ext.cluster.local.").unwrap(),
        RecordType::A,
        DNSClass::IN,
    );
    let mut lookups = Lookups::new();
    // Computed again once the lookup is in: this first answer is dropped.
    let first = authoritative(&zone(), &snap, &q, NOW, &lookups);
    assert_eq!(
        sections(first).0,
        ["ext.cluster.local. 3600 CNAME www.example.org."]
    );
    let missing = lookups.take_missing();
    assert_eq!(
        missing,
        [(Name::from_ascii("www.example.org.").unwrap(), RecordType::A)]
    );
    let upstream = hickory_proto::rr::Record::from_rdata(
        Name::from_ascii("www.example.org.").unwrap(),
        60,
        RData::A(A::new(192, 0, 2, 7)),
    );
    lookups.insert(missing[0].0.clone(), RecordType::A, Some(vec![upstream]));
    let (ans, _) = sections(authoritative(&zone(), &snap, &q, NOW, &lookups));
    assert_eq!(
        ans,
        [
            "ext.cluster.local. 3600 CNAME www.example.org.",
            "www.example.org. 60 A 192.0.2.7"
        ]
    );

    let srv = Question::new(
        Name::from_ascii("srv.cluster.local.").unwrap(),
        RecordType::SRV,
        DNSClass::IN,
    );
    let mut lookups = Lookups::new();
    let _ = authoritative(&zone(), &snap, &srv, NOW, &lookups);
    let missing = lookups.take_missing();
    assert_eq!(missing.len(), 2, "A and AAAA of the target: {missing:?}");
    lookups.insert(
        Name::from_ascii("mail.example.org.").unwrap(),
        RecordType::A,
        None,
    );
    lookups.insert(
        Name::from_ascii("mail.example.org.").unwrap(),
        RecordType::AAAA,
        None,
    );
    let (ans, add) = sections(authoritative(&zone(), &snap, &srv, NOW, &lookups));
    assert_eq!(
        ans,
        ["srv.cluster.local. 3600 SRV 10 100 25 mail.example.org."]
    );
    assert!(add.is_empty());
    assert!(lookups.take_missing().is_empty());
}

#[test]
fn wildcard_patterns_longer_than_the_key_match_nothing() {
    let snap = with(&[("svc/b/x", host("10.0.0.5"))]);
    let (ans, _) = sections(ask_in(&snap, "*.x.*.svc.cluster.local.", RecordType::A));
    assert!(ans.is_empty(), "{ans:?}");
}

#[test]
fn punycode_and_escaped_labels_reach_their_keys() {
    let snap = with(&[
        ("svc/default/xn--bcher-kva/1", host("10.0.0.6")),
        ("svc/default/a+b/1", host("10.0.0.7")),
    ]);
    let (ans, _) = sections(ask_in(
        &snap,
        "xn--bcher-kva.default.svc.cluster.local.",
        RecordType::A,
    ));
    assert_eq!(ans.len(), 1, "{ans:?}");
    let odd = Name::from_labels(vec![
        b"a+b" as &[u8],
        b"default",
        b"svc",
        b"cluster",
        b"local",
    ])
    .unwrap();
    let q = Question::new(odd, RecordType::A, DNSClass::IN);
    let (ans, _) = sections(authoritative(&zone(), &snap, &q, NOW, &Lookups::disabled()));
    assert_eq!(ans.len(), 1, "{ans:?}");
}

#[test]
fn a_successful_empty_lookup_keeps_the_cname() {
    let snap = with(&[("ext/x", host("www.example.org."))]);
    let q = Question::new(
        Name::from_ascii("ext.cluster.local.").unwrap(),
        RecordType::A,
        DNSClass::IN,
    );
    let mut lookups = Lookups::new();
    lookups.insert(
        Name::from_ascii("www.example.org.").unwrap(),
        RecordType::A,
        Some(vec![]),
    );
    let (ans, _) = sections(authoritative(&zone(), &snap, &q, NOW, &lookups));
    assert_eq!(ans, ["ext.cluster.local. 3600 CNAME www.example.org."]);
}

#[test]
fn soa_at_the_apex_wins_over_chaos() {
    let q = Question::new(Name::from_ascii(D).unwrap(), RecordType::SOA, DNSClass::CH);
    let (ans, _) = sections(authoritative(
        &zone(),
        &cluster(),
        &q,
        NOW,
        &Lookups::disabled(),
    ));
    assert_eq!(ans.len(), 1);
}

#[test]
fn txt_escapes_are_packed_as_miekg_dns_did() {
    let snap = with(&[(
        "e/1",
        SkyRecord {
            text: r#"a\"b\\c\065\999\"#.into(),
            ..SkyRecord::default()
        },
    )]);
    let Answer::Records { answers, .. } = ask_in(&snap, "e.cluster.local.", RecordType::TXT) else {
        panic!("expected records");
    };
    let RData::TXT(txt) = &answers[0].data else {
        panic!("expected TXT");
    };
    // \" → ", \\ → \, \065 → A, \999 → 999 mod 256 = 231, the lone \ dropped.
    let wire: Vec<&[u8]> = txt.txt_data.iter().map(|s| &s[..]).collect();
    assert_eq!(wire, [&b"a\"b\\cA\xe7"[..]]);
}
