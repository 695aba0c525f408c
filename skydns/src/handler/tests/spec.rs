//! Request → reply tests of the Kubernetes DNS specification 1.1.0 records:
//! PTR directories in both reverse trees, ExternalName CNAMEs whose target
//! fails upstream, and the `dns-version` TXT leaf.

use super::{ask_msg, assert_soa_authority, handler, handler_with, request};
use crate::answer::tests::spec::{spec, FD00_10_1};
use crate::handler::*;
use hickory_proto::rr::Name;
use std::time::Duration;
use test_support::fake_upstream::nxdomain_udp;

fn ask(h: &Handler, name: &str, qtype: RecordType) -> Message {
    let name = Name::from_ascii(name).unwrap();
    ask_msg(h, &request(name, qtype), Transport::Udp)
}

fn data(r: &Message) -> Vec<String> {
    r.answers
        .iter()
        .map(|a| format!("{} {}", a.record_type(), a.data))
        .collect()
}

#[test]
fn ptr_directories_answer_every_name_in_both_trees_not_authoritatively() {
    let h = handler(Some(spec()));
    let r = ask(&h, "7.0.0.10.in-addr.arpa.", RecordType::PTR);
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(!r.metadata.authoritative);
    assert_eq!(
        data(&r),
        ["PTR y.a.svc.cluster.local.", "PTR x.a.svc.cluster.local."]
    );
    let r = ask(&h, FD00_10_1, RecordType::PTR);
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(!r.metadata.authoritative);
    assert_eq!(
        data(&r),
        [
            "PTR web.default.svc.cluster.local.",
            "PTR w-0.web.default.svc.cluster.local."
        ]
    );
}

#[test]
fn other_types_under_ip6_arpa_are_forwarded_as_under_in_addr_arpa() {
    // No upstreams in the test handler: forwarding ends in SERVFAIL, AA=0
    // (SkyDNS answered an AAAA question here with a PTR record).
    let h = handler(Some(spec()));
    for (name, qtype) in [
        (FD00_10_1, RecordType::AAAA),
        (FD00_10_1, RecordType::TXT),
        ("7.0.0.10.in-addr.arpa.", RecordType::A),
    ] {
        let r = ask(&h, name, qtype);
        assert_eq!(r.metadata.response_code, ResponseCode::ServFail, "{qtype}");
        assert!(r.answers.is_empty() && !r.metadata.authoritative, "{qtype}");
    }
}

#[test]
fn an_external_name_keeps_its_cname_when_upstream_fails_or_says_nxdomain() {
    let dead = test_support::dead::silent_upstream();
    for upstream in [nxdomain_udp(), dead.addr()] {
        let h = handler_with(Some(spec()), {
            let mut s = Settings {
                round_robin: false,
                ..Settings::default()
            };
            s.forward.nameservers = vec![upstream];
            s.forward.relay.timeout = Duration::from_millis(300);
            s
        });
        for qtype in [RecordType::A, RecordType::AAAA] {
            let r = ask(&h, "ext.default.svc.cluster.local.", qtype);
            assert_eq!(r.metadata.response_code, ResponseCode::NoError, "{qtype}");
            assert!(r.metadata.authoritative);
            assert_eq!(data(&r), ["CNAME example.com."], "{qtype} via {upstream}");
        }
        let r = ask(&h, "ext.default.svc.cluster.local.", RecordType::CNAME);
        assert_eq!(data(&r), ["CNAME example.com."]);
    }
}

#[test]
fn dns_version_answers_txt_and_nodata_for_addresses() {
    let h = handler(Some(spec()));
    let r = ask(&h, "dns-version.cluster.local.", RecordType::TXT);
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert_eq!(data(&r), ["TXT 1.1.0"]);
    for qtype in [RecordType::A, RecordType::AAAA] {
        let r = ask(&h, "dns-version.cluster.local.", qtype);
        assert_eq!(r.metadata.response_code, ResponseCode::NoError, "{qtype}");
        assert!(r.answers.is_empty(), "{qtype}: {:?}", r.answers);
        assert_soa_authority(&r);
    }
}
