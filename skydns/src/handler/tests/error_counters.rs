//! The handler counts each reply's error class in
//! `skydns_dns_error_count_total{error=...}`: NODATA, NXDOMAIN, SERVFAIL,
//! REFUSED, a truncated UDP reply and a TCP reply too large for DNS, each
//! driven by a real request and read back as a value from the exposition
//! (every label is there at 0 from the start).

use super::{ask_on, handler, request, run};
use crate::answer::tests::{cluster, zone};
use crate::handler::*;
use hickory_proto::rr::Name;
use skydns_msg::record::Record as SkyRecord;
use test_support::http::metric;

fn errors(h: &Handler, error: &str) -> Option<f64> {
    let text = h.metrics().render();
    metric(
        &text,
        &format!("skydns_dns_error_count_total{{error=\"{error}\"}}"),
    )
}

#[test]
fn each_reply_class_is_counted_once_under_its_label() {
    let h = handler(Some(cluster()));
    let kubernetes = "kubernetes.default.svc.cluster.local.";
    // An answer counts nowhere.
    assert_eq!(
        ask_on(&h, kubernetes, RecordType::A, Transport::Udp)
            .answers
            .len(),
        1
    );
    for error in [
        "nodata",
        "nxdomain",
        "servfail",
        "refused",
        "truncated",
        "overflow",
    ] {
        assert_eq!(errors(&h, error), Some(0.0), "{error} before any error");
    }
    let r = ask_on(&h, kubernetes, RecordType::AAAA, Transport::Udp);
    assert!(r.answers.is_empty() && r.metadata.response_code == ResponseCode::NoError);
    assert_eq!(errors(&h, "nodata"), Some(1.0));
    let r = ask_on(
        &h,
        "nosuch.default.svc.cluster.local.",
        RecordType::A,
        Transport::Udp,
    );
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(errors(&h, "nxdomain"), Some(1.0));
    // Outside the domain with no upstream: SERVFAIL.
    let r = ask_on(&h, "www.example.org.", RecordType::A, Transport::Udp);
    assert_eq!(r.metadata.response_code, ResponseCode::ServFail);
    assert_eq!(errors(&h, "servfail"), Some(1.0));
    let r = ask_on(&h, kubernetes, RecordType::ANY, Transport::Udp);
    assert_eq!(r.metadata.response_code, ResponseCode::Refused);
    assert_eq!(errors(&h, "refused"), Some(1.0));
    // Asked again: served from the reply cache, counted again.
    ask_on(&h, kubernetes, RecordType::AAAA, Transport::Udp);
    assert_eq!(errors(&h, "nodata"), Some(2.0));
}

/// `n` A records for `many.default.svc.cluster.local.`.
fn many(n: u32) -> Snapshot {
    Snapshot::new(
        1,
        (0..n).map(|i| {
            let [_, a, b, c] = i.to_be_bytes();
            let json = format!(r#"{{"host":"10.{a}.{b}.{c}","ttl":30}}"#);
            let key = format!("/skydns/local/cluster/svc/default/many/{i}");
            (key, SkyRecord::from_json(json.as_bytes()).unwrap())
        }),
    )
}

#[test]
fn truncated_udp_and_overflowing_tcp_replies_are_counted() {
    let options = Settings {
        round_robin: false,
        ..Settings::default()
    };
    // 100 A records do not fit 512 bytes: truncated over UDP.
    let h = Handler::new(
        zone(),
        shared(many(100)),
        options.clone(),
        Default::default(),
    );
    let m = request(
        Name::from_ascii("many.default.svc.cluster.local.").unwrap(),
        RecordType::A,
    );
    let bytes = run(&h, &m.to_vec().unwrap(), Transport::Udp).expect("a reply");
    assert_ne!(bytes[2] & 0x02, 0, "TC set");
    assert_eq!(errors(&h, "truncated"), Some(1.0));
    // 5,000 A records (~80 KB) are no DNS message at all: SERVFAIL over TCP.
    let h = Handler::new(zone(), shared(many(5_000)), options, Default::default());
    let bytes = run(&h, &m.to_vec().unwrap(), Transport::Tcp).expect("a reply");
    assert_eq!(bytes[3] & 0x0f, 2, "SERVFAIL");
    assert_eq!(errors(&h, "overflow"), Some(1.0));
    assert_eq!(
        errors(&h, "servfail"),
        Some(0.0),
        "counted as overflow only"
    );
}

fn shared(snapshot: Snapshot) -> SharedSnapshot {
    Arc::new(arc_swap::ArcSwapOption::from_pointee(snapshot))
}
