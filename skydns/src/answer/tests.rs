//! Table tests of the authoritative answers: SkyDNS 2.5.2c's answers over
//! the demo records of docs/architecture.md (What it writes) here, the finer rules in `rules`, the records of the
//! Kubernetes DNS specification 1.1.0 in `spec`.

use super::*;
use hickory_proto::rr::rdata::{A, CNAME, SRV};
use skydns_msg::record::Record as SkyRecord;

mod edges;
mod rules;
pub(crate) mod spec;

pub(super) const D: &str = "cluster.local.";
pub(super) const NOW: u64 = 1_700_003_599;

pub(crate) fn zone() -> Zone {
    Zone {
        domain: D.into(),
        prefix: PathPrefix::default(),
        ttl: 3600,
        min_ttl: 60,
        priority: 10,
        hostmaster: "hostmaster.skydns.local.".into(),
    }
}

/// A record with only a host.
pub(super) fn host(h: &str) -> SkyRecord {
    SkyRecord {
        host: h.into(),
        ..SkyRecord::default()
    }
}

/// A snapshot of `records`, each key below `base` (e.g. `/skydns`).
pub(super) fn below(base: &str, records: &[(&str, SkyRecord)]) -> Snapshot {
    Snapshot::new(
        1,
        records
            .iter()
            .map(|(k, r)| (format!("{base}/{k}"), r.clone())),
    )
}

/// The demo records of docs/architecture.md (What it writes), plus a headless service.
pub(crate) fn cluster() -> Snapshot {
    let a = SkyRecord::kube2sky_address;
    let s = SkyRecord::kube2sky_service;
    let base = "/skydns/local/cluster";
    Snapshot::new(
        1,
        [
            ("svc/default/kubernetes/c88f1059", a("10.0.0.1")),
            (
                "svc/default/kubernetes/_tcp/_https/c88f1059",
                s("kubernetes.default.svc.cluster.local.", 443),
            ),
            ("svc/kube-system/kube-dns/21172049", a("10.0.0.10")),
            (
                "svc/kube-system/kube-dns/_udp/_dns/21172049",
                s("kube-dns.kube-system.svc.cluster.local.", 53),
            ),
            (
                "svc/kube-system/kube-dns/_tcp/_dns-tcp/21172049",
                s("kube-dns.kube-system.svc.cluster.local.", 53),
            ),
            ("pod/default/1-2-3-4/ad70cf0f", a("1.2.3.4")),
            ("svc/default/web/ad649af9", a("10.244.1.6")),
            ("svc/default/web/h7", a("10.244.1.7")),
            (
                "svc/default/web/_tcp/_http/ad649af9",
                s("ad649af9.web.default.svc.cluster.local.", 80),
            ),
            (
                "svc/default/web/_tcp/_http/h7",
                s("h7.web.default.svc.cluster.local.", 80),
            ),
        ]
        .into_iter()
        .map(|(k, r)| (format!("{base}/{k}"), r)),
    )
}

pub(super) fn ask(name_text: &str, qtype: RecordType) -> Answer {
    ask_in(&cluster(), name_text, qtype)
}

pub(super) fn ask_in(snap: &Snapshot, name_text: &str, qtype: RecordType) -> Answer {
    let q = Question::new(Name::from_ascii(name_text).unwrap(), qtype, DNSClass::IN);
    authoritative(&zone(), snap, &q, NOW, &Lookups::disabled())
}

/// Renders a section as `owner ttl TYPE rdata` lines for readable asserts.
pub(super) fn lines(records: &[hickory_proto::rr::Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| format!("{} {} {} {}", r.name, r.ttl, r.record_type(), r.data))
        .collect()
}

pub(super) fn sections(answer: Answer) -> (Vec<String>, Vec<String>) {
    match answer {
        Answer::Records {
            answers,
            additionals,
        } => (lines(&answers), lines(&additionals)),
        other => panic!("expected records, got {other:?}"),
    }
}

#[test]
fn a_for_a_service_returns_only_its_address() {
    let (ans, add) = sections(ask("kubernetes.default.svc.cluster.local.", RecordType::A));
    assert_eq!(ans, ["kubernetes.default.svc.cluster.local. 30 A 10.0.0.1"]);
    assert!(add.is_empty());
}

#[test]
fn srv_for_a_named_port() {
    let (ans, add) = sections(ask(
        "_https._tcp.kubernetes.default.svc.cluster.local.",
        RecordType::SRV,
    ));
    assert_eq!(
        ans,
        ["_https._tcp.kubernetes.default.svc.cluster.local. 30 SRV 10 100 443 kubernetes.default.svc.cluster.local."]
    );
    assert_eq!(add, ["kubernetes.default.svc.cluster.local. 30 A 10.0.0.1"]);
}

#[test]
fn srv_for_the_service_name_hides_the_port_entries() {
    let (ans, add) = sections(ask(
        "kubernetes.default.svc.cluster.local.",
        RecordType::SRV,
    ));
    assert_eq!(
        ans,
        ["kubernetes.default.svc.cluster.local. 30 SRV 10 100 0 c88f1059.kubernetes.default.svc.cluster.local."]
    );
    assert_eq!(
        add,
        ["c88f1059.kubernetes.default.svc.cluster.local. 30 A 10.0.0.1"]
    );
}

#[test]
fn missing_name_is_a_name_error() {
    assert_eq!(
        ask("nosuch.default.svc.cluster.local.", RecordType::A),
        Answer::NameError
    );
    assert_eq!(
        ask("kube.default.svc.cluster.local.", RecordType::A),
        Answer::NameError
    );
    assert_eq!(
        ask("nosuch.default.svc.cluster.local.", RecordType::TXT),
        Answer::NameError
    );
    assert_eq!(
        ask("nosuch.default.svc.cluster.local.", RecordType::HINFO),
        Answer::NameError
    );
}

#[test]
fn pod_name_returns_its_address() {
    let (ans, _) = sections(ask("1-2-3-4.default.pod.cluster.local.", RecordType::A));
    assert_eq!(ans, ["1-2-3-4.default.pod.cluster.local. 30 A 1.2.3.4"]);
}

#[test]
fn soa_at_the_apex() {
    let (ans, _) = sections(ask(D, RecordType::SOA));
    assert_eq!(
        ans,
        ["cluster.local. 3600 SOA ns.dns.cluster.local. hostmaster.skydns.local. 1700002800 28800 7200 604800 60"]
    );
}

#[test]
fn ns_without_ns_dns_records_is_a_name_error() {
    assert_eq!(ask(D, RecordType::NS), Answer::NameError);
    let (ans, _) = sections(ask("default.svc.cluster.local.", RecordType::NS));
    assert!(ans.is_empty());
}

#[test]
fn ns_from_ns_dns_records() {
    let snap = cluster().with_changes(
        2,
        [crate::snapshot::Change::Put(
            "/skydns/local/cluster/dns/ns/ns1".into(),
            SkyRecord::kube2sky_address("10.0.0.10"),
        )],
    );
    let (ans, add) = sections(ask_in(&snap, D, RecordType::NS));
    assert_eq!(ans, ["cluster.local. 30 NS ns1.ns.dns.cluster.local."]);
    assert_eq!(add, ["ns1.ns.dns.cluster.local. 30 A 10.0.0.10"]);
}

#[test]
fn directory_names_return_every_address_below() {
    let (ans, _) = sections(ask("default.svc.cluster.local.", RecordType::A));
    assert_eq!(
        ans,
        [
            "default.svc.cluster.local. 30 A 10.0.0.1",
            "default.svc.cluster.local. 30 A 10.244.1.6",
            "default.svc.cluster.local. 30 A 10.244.1.7",
        ]
    );
    let (apex, _) = sections(ask(D, RecordType::A));
    assert_eq!(apex.len(), 5, "{apex:?}");
}

#[test]
fn wildcards_match_one_label_each() {
    let (star, _) = sections(ask("*.default.svc.cluster.local.", RecordType::A));
    assert_eq!(star.len(), 3, "{star:?}");
    assert!(star
        .iter()
        .all(|l| l.starts_with("*.default.svc.cluster.local. 30 A ")));
    let (any, _) = sections(ask("kube-dns.any.svc.cluster.local.", RecordType::A));
    assert_eq!(any, ["kube-dns.any.svc.cluster.local. 30 A 10.0.0.10"]);
}

#[test]
fn mixed_case_query_keeps_its_case_and_gets_a_cname_to_the_service() {
    let (ans, _) = sections(ask("Kubernetes.Default.svc.cluster.local.", RecordType::A));
    assert_eq!(
        ans,
        ["Kubernetes.Default.svc.cluster.local. 30 A 10.0.0.1",]
    );
}

#[test]
fn headless_srv_lists_every_endpoint() {
    let (ans, add) = sections(ask(
        "_http._tcp.web.default.svc.cluster.local.",
        RecordType::SRV,
    ));
    assert_eq!(
        ans,
        [
            "_http._tcp.web.default.svc.cluster.local. 30 SRV 10 50 80 ad649af9.web.default.svc.cluster.local.",
            "_http._tcp.web.default.svc.cluster.local. 30 SRV 10 50 80 h7.web.default.svc.cluster.local.",
        ]
    );
    assert_eq!(
        add,
        [
            "ad649af9.web.default.svc.cluster.local. 30 A 10.244.1.6",
            "h7.web.default.svc.cluster.local. 30 A 10.244.1.7",
        ]
    );
}
