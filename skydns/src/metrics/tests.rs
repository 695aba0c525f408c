use super::*;

#[test]
fn counters_render_with_skydns_names_and_labels() {
    let m = Metrics::default();
    let asked = |tcp: bool, dnssec_ok: bool| Asked {
        tcp,
        ipv6: false,
        dnssec_ok,
        qtype: 1,
        len: 40,
    };
    m.request(&asked(false, false));
    m.request(&asked(true, true));
    // NXDOMAIN header: rcode 3.
    let nx = [0, 1, 0x81, 0x83, 0, 1, 0, 0, 0, 0, 0, 0];
    m.reply(false, &nx, Duration::from_millis(2), false);
    m.external("recursive");
    m.cache_miss();
    m.signature_misses(3);
    m.store_error();
    m.limit("pending_forwards");
    let text = m.render();
    for needle in [
        "skydns_dns_request_count_total{type=\"udp\"} 1",
        "skydns_dns_request_count_total{type=\"tcp\"} 1",
        "skydns_dns_dnssec_ok_count_total 1",
        "skydns_dns_error_count_total{error=\"nxdomain\"} 1",
        "skydns_dns_request_external_count_total{type=\"recursive\"} 1",
        "skydns_dns_cache_miss_count_total{type=\"response\"} 1",
        "skydns_dns_cache_miss_count_total{type=\"signature\"} 3",
        "skydns_dns_request_duration_bucket{le=\"0.003\",type=\"udp\"} 1",
        "skydns_dns_response_size_bucket{le=\"512.0\",type=\"udp\"} 1",
        "skydns_dns_ready 0",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
    // Every SkyDNS-named series is served under its conventional name too.
    for (new, old) in conventional::RENAMED {
        let lines = |name: &str| -> Vec<String> {
            let tails = ["{", " ", "_bucket{", "_sum{", "_count{", "_sum ", "_count "];
            (text.lines())
                .filter_map(|l| l.strip_prefix(name))
                .filter(|rest| tails.iter().any(|t| rest.starts_with(t)))
                .map(str::to_string)
                .collect()
        };
        assert!(!lines(old).is_empty(), "{old} in\n{text}");
        assert_eq!(lines(new), lines(old), "{new} and {old}");
    }
    m.set_ready(true);
    m.cache_hit(false);
    m.records(42);
    let text = m.render();
    assert!(text.contains("skydns_dns_ready 1"), "{text}");
    assert!(text.contains("skydns_dns_cache_hits_total 1"), "{text}");
    assert!(text.contains("skydns_dns_records 42"), "{text}");
}

/// The `skydns_dns_error_count_total` lines of the exposition.
/// The error series that counted something (every label exists at 0).
fn error_lines(m: &Metrics) -> Vec<String> {
    m.render()
        .lines()
        .filter(|l| l.starts_with("skydns_dns_error_count_total"))
        .filter(|l| !l.ends_with(" 0"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_error_label_and_config_result_exists_at_zero() {
    let text = Metrics::default().render();
    for error in [
        "nxdomain",
        "nodata",
        "servfail",
        "refused",
        "truncated",
        "overflow",
    ] {
        let line = format!("skydns_dns_error_count_total{{error=\"{error}\"}} 0");
        assert!(text.contains(&line), "{line}");
    }
    for result in ["applied", "invalid"] {
        let line = format!("skydns_dns_config_reloads_total{{result=\"{result}\"}} 0");
        assert!(text.contains(&line), "{line}");
    }
}

/// A reply header: flags byte 2, rcode, answer count.
fn header(flags: u8, rcode: u8, answers: u16) -> [u8; 12] {
    let [an_hi, an_lo] = answers.to_be_bytes();
    [
        0,
        1,
        0x80 | flags,
        0x80 | rcode,
        0,
        1,
        an_hi,
        an_lo,
        0,
        0,
        0,
        0,
    ]
}

#[test]
fn each_error_kind_is_counted_exactly_once_under_its_label() {
    let cases: [(&str, [u8; 12], bool); 5] = [
        ("servfail", header(0, 2, 0), false),
        ("refused", header(0, 5, 0), false),
        ("truncated", header(0x02, 0, 3), false),
        ("nodata", header(0, 0, 0), false),
        // A TCP reply too big to send: SERVFAIL bytes, but counted as overflow.
        ("overflow", header(0, 2, 0), true),
    ];
    for (label, bytes, overflow) in cases {
        let m = Metrics::default();
        m.reply(true, &bytes, Duration::from_millis(1), overflow);
        assert_eq!(
            error_lines(&m),
            [format!(
                "skydns_dns_error_count_total{{error=\"{label}\"}} 1"
            )],
            "{label}"
        );
    }
    let m = Metrics::default();
    m.reply(false, &header(0, 0, 1), Duration::from_millis(1), false);
    assert_eq!(
        error_lines(&m),
        Vec::<String>::new(),
        "NOERROR with answers"
    );
}

#[test]
fn coredns_series_carry_coredns_names_labels_and_values() {
    let m = Metrics::serving("0.0.0.0:53".parse().unwrap());
    let asked = |tcp, ipv6, qtype| Asked {
        tcp,
        ipv6,
        dnssec_ok: tcp,
        qtype,
        len: 33,
    };
    m.request(&asked(false, false, 1));
    m.request(&asked(false, true, 28));
    m.request(&asked(true, false, 13)); // HINFO: not a type CoreDNS names
    let nx = [0, 1, 0x81, 0x83, 0, 1, 0, 0, 0, 0, 0, 0];
    let refused = [0, 1, 0x81, 0x85, 0, 1, 0, 0, 0, 0, 0, 0];
    m.reply(false, &nx, Duration::from_millis(2), false);
    m.reply(true, &refused, Duration::from_millis(2), false);
    m.cache_hit(true);
    m.cache_miss();
    m.cache_entries(5, 2);
    let upstream = "10.0.0.10:53".parse().unwrap();
    m.upstream_request(upstream);
    m.upstream_reply(upstream, &nx, Duration::from_millis(3));
    m.health_check_failed(upstream);
    m.limit("pending_forwards");
    m.config_reload("invalid");
    m.plugins_enabled(&["errors", "forward"]);
    let text = m.render();
    let s = r#"server="dns://:53",zone=".",view="""#;
    let c = r#"server="dns://:53",zones=".",view="""#;
    for needle in [
        format!(r#"coredns_dns_requests_total{{{s},proto="udp",family="1",type="A"}} 1"#),
        format!(r#"coredns_dns_requests_total{{{s},proto="udp",family="2",type="AAAA"}} 1"#),
        format!(r#"coredns_dns_requests_total{{{s},proto="tcp",family="1",type="other"}} 1"#),
        format!(r#"coredns_dns_responses_total{{{s},rcode="NXDOMAIN",plugin="errors"}} 1"#),
        format!(r#"coredns_dns_responses_total{{{s},rcode="REFUSED",plugin="errors"}} 1"#),
        format!(r#"coredns_dns_request_duration_seconds_count{{{s}}} 2"#),
        format!(r#"coredns_dns_request_duration_seconds_bucket{{le="0.001",{s}}} 0"#),
        format!(r#"coredns_dns_request_duration_seconds_bucket{{le="0.002",{s}}} 2"#),
        format!(r#"coredns_dns_request_size_bytes_count{{{s},proto="udp"}} 2"#),
        format!(r#"coredns_dns_response_size_bytes_bucket{{le="100.0",{s},proto="tcp"}} 1"#),
        format!(r#"coredns_dns_do_requests_total{{{s}}} 1"#),
        format!(r#"coredns_cache_hits_total{{{c},type="denial"}} 1"#),
        format!(r#"coredns_cache_hits_total{{{c},type="success"}} 0"#),
        format!(r#"coredns_cache_misses_total{{{c}}} 1"#),
        format!(r#"coredns_cache_requests_total{{{c}}} 2"#),
        format!(r#"coredns_cache_entries{{{c},type="success"}} 5"#),
        format!(r#"coredns_cache_entries{{{c},type="denial"}} 2"#),
        r#"coredns_forward_requests_total{to="10.0.0.10:53"} 1"#.into(),
        r#"coredns_forward_responses_total{to="10.0.0.10:53",rcode="NXDOMAIN"} 1"#.into(),
        r#"coredns_proxy_request_duration_seconds_count{proxy_name="forward",to="10.0.0.10:53",rcode="NXDOMAIN"} 1"#.into(),
        r#"coredns_forward_request_duration_seconds_count{to="10.0.0.10:53",rcode="NXDOMAIN"} 1"#.into(),
        r#"coredns_proxy_healthcheck_failures_total{proxy_name="forward",to="10.0.0.10:53"} 1"#.into(),
        r#"coredns_forward_healthcheck_failures_total{to="10.0.0.10:53"} 1"#.into(),
        "coredns_forward_max_concurrent_rejects_total 1".into(),
        "coredns_reload_failed_total 1".into(),
        "coredns_panics_total 0".into(),
        format!(r#"coredns_plugin_enabled{{{s},name="forward"}} 1"#),
        format!(
            r#"coredns_build_info{{version="{}",revision="",goversion=""}} 1"#,
            env!("CARGO_PKG_VERSION")
        ),
    ] {
        assert!(text.contains(&needle), "missing {needle} in\n{text}");
    }
    // skydns's own series are still there, unprefixed by CoreDNS's.
    assert!(
        text.contains("skydns_dns_request_count_total{type=\"udp\"} 2"),
        "{text}"
    );
    let bound = Metrics::serving("127.0.0.1:5353".parse().unwrap());
    bound.request(&asked(false, false, 1));
    let text = bound.render();
    assert!(text.contains(r#"server="dns://127.0.0.1:5353""#), "{text}");
}
