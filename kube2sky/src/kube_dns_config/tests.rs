use super::*;

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    (pairs.iter())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn parse(pairs: &[(&str, &str)]) -> Result<KubeDnsConfig, InvalidConfigMap> {
    KubeDnsConfig::parse(&data(pairs), "cluster.local.")
}

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

#[test]
fn the_formats_kube_dns_accepted_are_read() {
    let config = parse(&[
        (
            "stubDomains",
            r#"{"acme.local": ["1.2.3.4"], "corp.example.com": ["10.0.0.53:5353", "fd00::53", "[fd00::54]:54"], "empty.org": null}"#,
        ),
        ("upstreamNameservers", r#"["8.8.8.8", "8.8.4.4:5353"]"#),
        ("federations", "ignored"),
    ])
    .expect("valid");
    assert_eq!(config.stub_domains["acme.local"], vec![addr("1.2.3.4:53")]);
    assert_eq!(
        config.stub_domains["corp.example.com"],
        vec![
            addr("10.0.0.53:5353"),
            addr("[fd00::53]:53"),
            addr("[fd00::54]:54")
        ]
    );
    assert_eq!(config.stub_domains["empty.org"], vec![]);
    assert_eq!(
        config.upstreams,
        vec![addr("8.8.8.8:53"), addr("8.8.4.4:5353")]
    );
    // Absent and null are both "none".
    assert_eq!(parse(&[]).expect("empty"), KubeDnsConfig::default());
    let nulls = parse(&[("stubDomains", "null"), ("upstreamNameservers", "null")]);
    assert_eq!(nulls.expect("nulls"), KubeDnsConfig::default());
}

#[test]
fn a_malformed_value_is_refused_naming_its_key_and_value() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "stubDomains",
            "{",
            "stubDomains",
            "\"{\" is not a JSON object",
        ),
        ("stubDomains", "", "stubDomains", "is not a JSON object"),
        (
            "stubDomains",
            r#"["1.2.3.4"]"#,
            "stubDomains",
            "not a JSON object",
        ),
        (
            "stubDomains",
            r#"{"Acme.local": ["1.2.3.4"]}"#,
            "stubDomains",
            "\"Acme.local\" is not a domain name",
        ),
        (
            "stubDomains",
            r#"{"acme.local.": ["1.2.3.4"]}"#,
            "stubDomains",
            "\"acme.local.\" is not a domain name",
        ),
        (
            "stubDomains",
            r#"{"acme.local": ["1.2.3.4:0"]}"#,
            "stubDomains",
            "acme.local: nameserver \"1.2.3.4:0\" has port 0",
        ),
        (
            "stubDomains",
            r#"{"acme.local": ["1.2.3.4:70000"]}"#,
            "stubDomains",
            "\"1.2.3.4:70000\" is not an IP or IP:port",
        ),
        (
            "stubDomains",
            r#"{"acme.local": ["ns1.acme.local"]}"#,
            "stubDomains",
            "\"ns1.acme.local\" is a name",
        ),
        (
            "stubDomains",
            r#"{"acme.local": [53]}"#,
            "stubDomains",
            "not a JSON object",
        ),
        (
            "stubDomains",
            r#"{"svc.cluster.local": ["1.2.3.4"]}"#,
            "stubDomains",
            "overlaps the cluster domain",
        ),
        (
            "stubDomains",
            r#"{"cluster.local": ["1.2.3.4"]}"#,
            "stubDomains",
            "overlaps the cluster domain",
        ),
        (
            "stubDomains",
            r#"{"local": ["1.2.3.4"]}"#,
            "stubDomains",
            "overlaps the cluster domain",
        ),
        (
            "upstreamNameservers",
            r#"["1.1.1.1","2.2.2.2","3.3.3.3","4.4.4.4"]"#,
            "upstreamNameservers",
            "4 nameservers; kube-dns takes at most 3",
        ),
        (
            "upstreamNameservers",
            r#"["dns.google"]"#,
            "upstreamNameservers",
            "\"dns.google\" is not an IP or IP:port",
        ),
        (
            "upstreamNameservers",
            r#""8.8.8.8""#,
            "upstreamNameservers",
            "is not a JSON list",
        ),
    ];
    for (key, value, named, says) in cases {
        let error = parse(&[(key, value)]).expect_err(value);
        assert_eq!(error.key, *named, "{value}");
        assert!(
            error.to_string().starts_with(&format!("data.{named}: ")),
            "{error}"
        );
        assert!(error.to_string().contains(says), "{value}: {error}");
    }
    // A domain that merely ends in the same letters is not inside it.
    assert!(parse(&[("stubDomains", r#"{"xcluster.local": ["1.2.3.4"]}"#)]).is_ok());
}

#[test]
fn stub_domains_become_kube2sky_leaves_under_the_stub_zone_directory() {
    let config = parse(&[(
        "stubDomains",
        r#"{"acme.local": ["1.2.3.4", "1.2.3.5:5353"], "corp.example.com": ["[fd00::53]:53"]}"#,
    )])
    .expect("valid");
    let records = config.stub_records(&Names::new("cluster.local"));
    let expected: Records = [
        (
            "/skydns/local/cluster/dns/stub/com/example/corp/kube-dns_0",
            r#"{"host":"fd00::53","port":53}"#,
        ),
        (
            "/skydns/local/cluster/dns/stub/local/acme/kube-dns_0",
            r#"{"host":"1.2.3.4","port":53}"#,
        ),
        (
            "/skydns/local/cluster/dns/stub/local/acme/kube-dns_1",
            r#"{"host":"1.2.3.5","port":5353}"#,
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(records, expected);
}

#[test]
fn upstreams_set_only_the_nameservers_field_and_give_back_what_they_replaced() {
    let wanted = [addr("8.8.8.8:53"), addr("[fd00::1]:5353")];
    let list = r#"["8.8.8.8:53","[fd00::1]:5353"]"#;
    let note = |replaced: &str| format!(r#"{{"wrote":{list},"replaced":{replaced}}}"#);
    // No key yet: one with the nameservers alone; nothing replaced.
    let (config, noted) = merge_upstreams(None, None, &wanted).expect("merge");
    assert_eq!(
        config.as_deref(),
        Some(&*format!(r#"{{"nameservers":{list}}}"#))
    );
    assert_eq!(noted.as_deref(), Some(&*note("null")));
    // An operator's key: its other fields stay, its nameservers are noted.
    let theirs = r#"{"ttl":30,"nameservers":["10.0.0.2:53"],"no_rec":false}"#;
    let (config, noted) = merge_upstreams(Some(theirs), None, &wanted).expect("merge");
    let merged = config.expect("kept");
    assert_eq!(
        merged,
        format!(r#"{{"nameservers":{list},"no_rec":false,"ttl":30}}"#)
    );
    assert_eq!(noted.as_deref(), Some(&*note(r#"["10.0.0.2:53"]"#)));
    // ...and given back when the ConfigMap's upstreams go.
    let (config, noted) = merge_upstreams(Some(&merged), noted.as_deref(), &[]).expect("merge");
    assert_eq!(
        config.as_deref(),
        Some(r#"{"nameservers":["10.0.0.2:53"],"no_rec":false,"ttl":30}"#)
    );
    assert_eq!(noted, None);
    // Another set of upstreams later keeps the first replaced value.
    let other = [addr("9.9.9.9:53")];
    let (config, noted) =
        merge_upstreams(Some(&merged), Some(&note(r#"["10.0.0.2:53"]"#)), &other).expect("merge");
    assert!(config
        .expect("kept")
        .contains(r#""nameservers":["9.9.9.9:53"]"#));
    assert_eq!(
        noted.as_deref(),
        Some(r#"{"wrote":["9.9.9.9:53"],"replaced":["10.0.0.2:53"]}"#)
    );
    // Already so: byte for byte what it was (no reload in skydns), note kept.
    let same = format!(r#"{{ "nameservers": {list}, "ttl": 30 }}"#);
    let (config, noted) =
        merge_upstreams(Some(&same), Some(&note("null")), &wanted).expect("merge");
    assert_eq!(config.as_deref(), Some(&*same));
    assert_eq!(noted.as_deref(), Some(&*note("null")));
    // None wanted: ours removed, and the key with it when nothing is left.
    let ours = format!(r#"{{"nameservers":{list}}}"#);
    assert_eq!(
        merge_upstreams(Some(&ours), Some(&note("null")), &[]),
        Ok((None, None))
    );
    let (config, noted) = merge_upstreams(Some(&same), Some(&note("null")), &[]).expect("merge");
    assert_eq!(config.as_deref(), Some(r#"{"ttl":30}"#));
    assert_eq!(noted, None);
    // A value changed by hand since kube2sky wrote stays, note or not.
    assert_eq!(
        merge_upstreams(Some(theirs), None, &[]),
        Ok((Some(theirs.to_string()), None))
    );
    assert_eq!(
        merge_upstreams(Some(theirs), Some(&note("null")), &[]),
        Ok((Some(theirs.to_string()), None))
    );
    // Changed by hand, then the ConfigMap changes: the hand value is the one noted.
    let (_, noted) = merge_upstreams(Some(theirs), Some(&note("null")), &wanted).expect("merge");
    assert_eq!(noted.as_deref(), Some(&*note(r#"["10.0.0.2:53"]"#)));
    assert_eq!(merge_upstreams(None, None, &[]), Ok((None, None)));
    // Not a JSON object: not ours to rewrite.
    let error = merge_upstreams(Some("[1]"), None, &wanted).expect_err("not an object");
    assert!(error.contains("not a JSON object"), "{error}");
}

#[test]
fn only_kube2sky_stub_leaves_and_an_object_config_key_are_read_as_ours() {
    let names = Names::new("cluster.local");
    let mut actual = Actual::default();
    let stub = "/skydns/local/cluster/dns/stub/local/acme/";
    actual.file(&names, &format!("{stub}kube-dns_0"), "{}", false);
    actual.file(&names, &format!("{stub}ns1"), "{}", false);
    for hand_written in ["kube-dns-0", "kube-dns_", "kube-dns_primary", "kube-dns_1a"] {
        actual.file(&names, &format!("{stub}{hand_written}"), "{}", false);
    }
    actual.file(&names, "/skydns/config", "not json", false);
    assert_eq!(
        actual.records.keys().collect::<Vec<_>>(),
        [&format!("{stub}kube-dns_0")]
    );
    assert!(actual.foreign.contains(&format!("{stub}ns1")));
    assert!(actual.foreign.contains(&format!("{stub}kube-dns_primary")));
    assert_eq!(actual.foreign.len(), 6, "{:?}", actual.foreign);
    assert!(actual.foreign.contains("/skydns/config"));
    // A config key that is not an object is left; the note stays as it was.
    actual.file(
        &names,
        "/kube2sky/cluster.local/upstreams",
        r#"["1.1.1.1:53"]"#,
        false,
    );
    let out = upstream_records(&names, &actual, &[addr("8.8.8.8:53")]);
    let kept: Records = [("/kube2sky/cluster.local/upstreams", r#"["1.1.1.1:53"]"#)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(out, kept);
    let mut actual = Actual::default();
    actual.file(&names, "/skydns/config", r#"{"ttl":5}"#, false);
    let out = upstream_records(&names, &actual, &[addr("8.8.8.8:53")]);
    assert_eq!(
        out["/skydns/config"],
        r#"{"nameservers":["8.8.8.8:53"],"ttl":5}"#
    );
    assert_eq!(
        out["/kube2sky/cluster.local/upstreams"],
        r#"{"wrote":["8.8.8.8:53"],"replaced":null}"#
    );
}
