//! The records of the Kubernetes DNS specification 1.1.0 as kube2sky writes
//! them: PTR directories for addresses with several names (IPv4 and IPv6),
//! ExternalName CNAMEs one level below the service name, the
//! `dns-version` TXT leaf, and dual-stack and headless hostname directories.

use super::*;
use crate::response::dedup;

const REV4: &str = "/skydns/arpa/in-addr";
const REV6: &str =
    "/skydns/arpa/ip6/f/d/0/0/0/0/1/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/1";
/// `fd00:10::1` in the ip6.arpa tree.
pub(crate) const FD00_10_1: &str =
    "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.0.0.0.d.f.ip6.arpa.";

fn addr(host: &str) -> SkyRecord {
    SkyRecord::kube2sky_address(host)
}

fn dns_version() -> SkyRecord {
    SkyRecord::from_json(br#"{"text":"1.1.0","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#)
        .unwrap()
}

/// The demo records of docs/architecture.md plus what specification 1.1.0 adds.
pub(crate) fn spec() -> Snapshot {
    let svc = "/skydns/local/cluster/svc";
    let added = [
        // 10.0.0.7 is shared by two names (one written twice), 10.0.0.8 by one.
        (
            format!("{REV4}/10/0/0/7/1a"),
            addr("y.a.svc.cluster.local."),
        ),
        (
            format!("{REV4}/10/0/0/7/2b"),
            addr("x.a.svc.cluster.local."),
        ),
        (
            format!("{REV4}/10/0/0/7/3c"),
            addr("y.a.svc.cluster.local."),
        ),
        (format!("{REV4}/10/0/0/8"), addr("z.a.svc.cluster.local.")),
        (format!("{REV6}/5e"), addr("web.default.svc.cluster.local.")),
        (
            format!("{REV6}/6f"),
            addr("w-0.web.default.svc.cluster.local."),
        ),
        // ExternalName services.
        (format!("{svc}/default/ext/9a1"), addr("example.com.")),
        (
            format!("{svc}/default/inner/9a2"),
            addr("kubernetes.default.svc.cluster.local."),
        ),
        (
            format!("{svc}/default/gone/9a3"),
            addr("nosuch.default.svc.cluster.local."),
        ),
        (format!("{svc}/default/two/1"), addr("first.example.com.")),
        (format!("{svc}/default/two/2"), addr("second.example.com.")),
        ("/skydns/local/cluster/dns-version".into(), dns_version()),
        // A dual-stack service, a headless one with a shared hostname.
        (format!("{svc}/ds/both/a1"), addr("10.0.1.1")),
        (format!("{svc}/ds/both/a2"), addr("fd00:10::1")),
        (format!("{svc}/ds/both/a3"), addr("10.0.1.2")),
        (format!("{svc}/ds/hl/w-0/b1"), addr("10.0.2.1")),
        (format!("{svc}/ds/hl/w-0/b2"), addr("10.0.2.2")),
        (format!("{svc}/ds/hl/w-0/b3"), addr("fd00:10::2")),
        (format!("{svc}/ds/hl/w-1"), addr("10.0.2.3")),
        (
            "/skydns/local/cluster/pod/ds/2001-db8--1/c1".into(),
            addr("2001:db8::1"),
        ),
    ];
    cluster().with_changes(
        2,
        added
            .into_iter()
            .map(|(k, r)| crate::snapshot::Change::Put(k, r)),
    )
}

fn answers(name: &str, qtype: RecordType) -> Vec<String> {
    sections(ask_in(&spec(), name, qtype)).0
}

fn ptr(name: &str) -> Option<Vec<String>> {
    let q = Question::new(
        Name::from_ascii(name).unwrap(),
        RecordType::PTR,
        DNSClass::IN,
    );
    reverse(&zone(), &spec(), &q).map(|records| lines(&records))
}

#[test]
fn a_ptr_directory_answers_every_name_once_in_key_order() {
    assert_eq!(
        ptr("7.0.0.10.in-addr.arpa.").unwrap(),
        [
            "7.0.0.10.in-addr.arpa. 30 PTR y.a.svc.cluster.local.",
            "7.0.0.10.in-addr.arpa. 30 PTR x.a.svc.cluster.local.",
        ]
    );
    assert_eq!(
        ptr("8.0.0.10.in-addr.arpa.").unwrap(),
        ["8.0.0.10.in-addr.arpa. 30 PTR z.a.svc.cluster.local."]
    );
}

#[test]
fn a_partial_reverse_name_is_not_answered_from_the_addresses_below_it() {
    // 10.0.0.* are leaves one level below `0.0.10.in-addr.arpa.`.
    assert_eq!(ptr("0.0.10.in-addr.arpa."), None);
    assert_eq!(ptr("9.0.0.10.in-addr.arpa."), None);
    assert_eq!(ptr("*.0.0.10.in-addr.arpa."), None);
}

#[test]
fn ip6_ptr_directories_answer_every_name() {
    assert_eq!(
        ptr(FD00_10_1).unwrap(),
        [
            format!("{FD00_10_1} 30 PTR web.default.svc.cluster.local."),
            format!("{FD00_10_1} 30 PTR w-0.web.default.svc.cluster.local."),
        ]
    );
    // Upper-case nibbles are the same name.
    let upper = FD00_10_1.replace("d.f.ip6", "D.F.ip6");
    assert_eq!(ptr(&upper).map(|p| p.len()), Some(2));
    // 31 nibbles: the directory of 16 addresses, not an address.
    assert_eq!(ptr(&FD00_10_1[2..]), None);
}

#[test]
fn a_ptr_leaf_without_host_gives_no_ptr() {
    let snap = Snapshot::new(
        1,
        [
            (format!("{REV4}/10/0/0/5/1"), SkyRecord::default()),
            (format!("{REV4}/10/0/0/6"), SkyRecord::default()),
        ],
    );
    for name in ["5.0.0.10.in-addr.arpa.", "6.0.0.10.in-addr.arpa."] {
        let q = Question::new(
            Name::from_ascii(name).unwrap(),
            RecordType::PTR,
            DNSClass::IN,
        );
        assert_eq!(reverse(&zone(), &snap, &q), None, "{name}");
    }
}

#[test]
fn cname_query_for_an_external_name_service() {
    assert_eq!(
        answers("ext.default.svc.cluster.local.", RecordType::CNAME),
        ["ext.default.svc.cluster.local. 30 CNAME example.com."]
    );
    assert_eq!(
        answers("Ext.Default.svc.cluster.local.", RecordType::CNAME),
        ["Ext.Default.svc.cluster.local. 30 CNAME example.com."]
    );
    // Services with addresses, a namespace, the apex: no CNAME.
    for name in [
        "kubernetes.default.svc.cluster.local.",
        "web.default.svc.cluster.local.",
        "default.svc.cluster.local.",
        D,
    ] {
        assert!(answers(name, RecordType::CNAME).is_empty(), "{name}");
    }
}

#[test]
fn cname_query_picks_the_cname_the_a_answer_keeps() {
    let name = "two.default.svc.cluster.local.";
    let Answer::Records { answers: mut a, .. } = ask_in(&spec(), name, RecordType::A) else {
        panic!("records");
    };
    dedup(&mut a);
    let kept: Vec<String> = lines(&a)
        .into_iter()
        .filter(|l| l.contains(" CNAME "))
        .collect();
    assert_eq!(
        kept,
        ["two.default.svc.cluster.local. 30 CNAME second.example.com."]
    );
    assert_eq!(answers(name, RecordType::CNAME), kept);
}

#[test]
fn an_external_name_keeps_its_cname_when_the_target_does_not_resolve() {
    let name = "ext.default.svc.cluster.local.";
    let cname = ["ext.default.svc.cluster.local. 30 CNAME example.com."];
    // Forwarding off, a failed lookup, an NXDOMAIN (also a failed lookup).
    assert_eq!(answers(name, RecordType::A), cname);
    assert_eq!(answers(name, RecordType::AAAA), cname);
    let q = Question::new(Name::from_ascii(name).unwrap(), RecordType::A, DNSClass::IN);
    let mut lookups = Lookups::new();
    lookups.insert(
        Name::from_ascii("example.com.").unwrap(),
        RecordType::A,
        None,
    );
    let (ans, _) = sections(authoritative(&zone(), &spec(), &q, NOW, &lookups));
    assert_eq!(ans, cname);
    assert!(lookups.take_missing().is_empty());
    // And the target's addresses when it resolves.
    let upstream = hickory_proto::rr::Record::from_rdata(
        Name::from_ascii("example.com.").unwrap(),
        60,
        RData::A(A::new(192, 0, 2, 1)),
    );
    lookups.insert(
        Name::from_ascii("example.com.").unwrap(),
        RecordType::A,
        Some(vec![upstream]),
    );
    let (ans, _) = sections(authoritative(&zone(), &spec(), &q, NOW, &lookups));
    assert_eq!(
        ans,
        [
            "ext.default.svc.cluster.local. 30 CNAME example.com.",
            "example.com. 60 A 192.0.2.1"
        ]
    );
}

#[test]
fn an_internal_target_is_followed_and_kept_when_absent_or_of_the_other_family() {
    assert_eq!(
        answers("inner.default.svc.cluster.local.", RecordType::A),
        [
            "inner.default.svc.cluster.local. 30 CNAME kubernetes.default.svc.cluster.local.",
            "kubernetes.default.svc.cluster.local. 30 A 10.0.0.1",
        ]
    );
    assert_eq!(
        answers("inner.default.svc.cluster.local.", RecordType::AAAA),
        ["inner.default.svc.cluster.local. 30 CNAME kubernetes.default.svc.cluster.local."]
    );
    assert_eq!(
        answers("gone.default.svc.cluster.local.", RecordType::A),
        ["gone.default.svc.cluster.local. 30 CNAME nosuch.default.svc.cluster.local."]
    );
}

#[test]
fn dns_version_is_a_txt_record_and_nodata_for_addresses() {
    let name = "dns-version.cluster.local.";
    assert_eq!(
        answers(name, RecordType::TXT),
        ["dns-version.cluster.local. 30 TXT 1.1.0"]
    );
    for qtype in [
        RecordType::A,
        RecordType::AAAA,
        RecordType::CNAME,
        RecordType::SRV,
        RecordType::MX,
        RecordType::HINFO,
    ] {
        assert_eq!(
            ask_in(&spec(), name, qtype),
            Answer::records(Vec::new()),
            "{qtype}"
        );
    }
    // Listed below the apex, it adds nothing to an address answer.
    let apex = answers(D, RecordType::A);
    assert!(apex.iter().all(|l| !l.contains(" CNAME . ")), "{apex:?}");
    assert!(answers(D, RecordType::SRV)
        .iter()
        .all(|l| !l.ends_with(" .")));
}

#[test]
fn a_dual_stack_service_answers_each_family_with_its_own_addresses() {
    let name = "both.ds.svc.cluster.local.";
    assert_eq!(
        answers(name, RecordType::A),
        [
            "both.ds.svc.cluster.local. 30 A 10.0.1.1",
            "both.ds.svc.cluster.local. 30 A 10.0.1.2",
        ]
    );
    assert_eq!(
        answers(name, RecordType::AAAA),
        ["both.ds.svc.cluster.local. 30 AAAA fd00:10::1"]
    );
}

#[test]
fn a_shared_hostname_directory_answers_every_address_of_the_family() {
    assert_eq!(
        answers("w-0.hl.ds.svc.cluster.local.", RecordType::A),
        [
            "w-0.hl.ds.svc.cluster.local. 30 A 10.0.2.1",
            "w-0.hl.ds.svc.cluster.local. 30 A 10.0.2.2",
        ]
    );
    assert_eq!(
        answers("w-0.hl.ds.svc.cluster.local.", RecordType::AAAA),
        ["w-0.hl.ds.svc.cluster.local. 30 AAAA fd00:10::2"]
    );
    assert_eq!(
        answers("w-1.hl.ds.svc.cluster.local.", RecordType::A),
        ["w-1.hl.ds.svc.cluster.local. 30 A 10.0.2.3"]
    );
    // The service name still lists every endpoint, at any depth.
    assert_eq!(
        answers("hl.ds.svc.cluster.local.", RecordType::A),
        [
            "hl.ds.svc.cluster.local. 30 A 10.0.2.1",
            "hl.ds.svc.cluster.local. 30 A 10.0.2.2",
            "hl.ds.svc.cluster.local. 30 A 10.0.2.3",
        ]
    );
    assert_eq!(
        answers("hl.ds.svc.cluster.local.", RecordType::AAAA),
        ["hl.ds.svc.cluster.local. 30 AAAA fd00:10::2"]
    );
}

#[test]
fn an_ipv6_pod_name_answers_aaaa() {
    let name = "2001-db8--1.ds.pod.cluster.local.";
    assert_eq!(
        answers(name, RecordType::AAAA),
        ["2001-db8--1.ds.pod.cluster.local. 30 AAAA 2001:db8::1"]
    );
    assert!(answers(name, RecordType::A).is_empty());
}
