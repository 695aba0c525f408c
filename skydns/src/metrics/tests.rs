use super::*;

#[test]
fn counters_render_with_skydns_names_and_labels() {
    let m = Metrics::default();
    m.request(false, false);
    m.request(true, true);
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
    m.cache_hit();
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
