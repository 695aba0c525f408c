//! The reply cache under churn: a change drops the cached replies that
//! read what changed (the name itself, a directory listing above it, a
//! negative answer for a name that now exists) and keeps every other.

use super::{ask_msg, handler_sharing, request};
use crate::answer::tests::cluster;
use crate::handler::*;
use crate::snapshot::Change;
use hickory_proto::rr::Name;
use skydns_msg::record::Record;

const BASE: &str = "/skydns/local/cluster/svc";

/// The answers (rdata) to `name` `qtype`, and whether they came from the cache.
fn ask(h: &Handler, name: &str, qtype: RecordType) -> (Vec<String>, ResponseCode, bool) {
    let before = h.engine().replies.hits();
    let r = ask_msg(
        h,
        &request(Name::from_ascii(name).unwrap(), qtype),
        Transport::Udp,
    );
    let mut answers: Vec<String> = r.answers.iter().map(|a| a.data.to_string()).collect();
    answers.sort();
    (
        answers,
        r.metadata.response_code,
        h.engine().replies.hits() > before,
    )
}

/// Whether a reply must come from the cache.
#[derive(Debug, PartialEq)]
enum Cached {
    Yes,
    No,
}

/// `name` A answers exactly `ip`, NOERROR, from the cache or not.
#[track_caller]
fn answers(h: &Handler, name: &str, ip: &str, cached: Cached) {
    let (answers, rcode, hit) = ask(h, name, RecordType::A);
    assert_eq!(
        (answers, rcode, hit),
        (
            vec![ip.to_string()],
            ResponseCode::NoError,
            cached == Cached::Yes
        ),
        "{name}"
    );
}

fn put(key: &str, ip: &str) -> Change {
    Change::Put(format!("{BASE}/{key}"), Record::kube2sky_address(ip))
}

fn options() -> Settings {
    Settings {
        round_robin: false,
        ..Settings::default()
    }
}

#[test]
fn a_change_drops_only_the_replies_that_read_it() {
    let (h, shared) = handler_sharing(Some(cluster()), options());
    let kubernetes = "kubernetes.default.svc.cluster.local.";
    let dns = "kube-dns.kube-system.svc.cluster.local.";
    for name in [kubernetes, dns] {
        assert!(!ask(&h, name, RecordType::A).2, "first ask: full path");
        assert!(ask(&h, name, RecordType::A).2, "then cached");
    }

    // kube-dns changes: its reply is recomputed, kubernetes's is kept.
    let served = shared.load_full().unwrap();
    let first =
        Arc::new(served.with_changes(2, [put("kube-system/kube-dns/21172049", "10.0.0.11")]));
    shared.store(Some(first.clone()));
    answers(&h, dns, "10.0.0.11", Cached::No);
    answers(&h, kubernetes, "10.0.0.1", Cached::Yes);

    // Two batches before the next question: both are seen.
    let second = first.with_changes(3, [put("default/other/1", "10.0.0.20")]);
    let third = Arc::new(second.with_changes(4, [put("default/kubernetes/c88f1059", "10.0.0.2")]));
    shared.store(Some(third.clone()));
    answers(&h, kubernetes, "10.0.0.2", Cached::No);
    answers(&h, dns, "10.0.0.11", Cached::Yes);

    // A reload (no history) drops everything.
    shared.store(Some(Arc::new(cluster())));
    answers(&h, dns, "10.0.0.10", Cached::No);
}

#[test]
fn negative_and_listing_replies_follow_keys_below_them() {
    let (h, shared) = handler_sharing(Some(cluster()), options());
    let new = "new.default.svc.cluster.local.";
    let listing = "default.svc.cluster.local.";
    let (_, rcode, _) = ask(&h, new, RecordType::A);
    assert_eq!(rcode, ResponseCode::NXDomain);
    assert!(ask(&h, new, RecordType::A).2, "NXDOMAIN is cached");
    let (before, _, _) = ask(&h, listing, RecordType::A);
    assert!(ask(&h, listing, RecordType::A).2);

    let served = shared.load_full().unwrap();
    let added = served.with_changes(2, [put("default/new/ab", "10.0.0.30")]);
    shared.store(Some(Arc::new(added)));
    answers(&h, new, "10.0.0.30", Cached::No);
    let (after, _, cached) = ask(&h, listing, RecordType::A);
    assert!(!cached, "the listing of default/ read below it");
    assert_eq!(after.len(), before.len() + 1, "{after:?}");
    assert!(after.contains(&"10.0.0.30".to_string()));
}

#[test]
fn deleting_a_directory_drops_the_replies_below_it() {
    let (h, shared) = handler_sharing(Some(cluster()), options());
    let srv = "_https._tcp.kubernetes.default.svc.cluster.local.";
    assert_eq!(ask(&h, srv, RecordType::SRV).0.len(), 1);
    assert!(ask(&h, srv, RecordType::SRV).2);
    let served = shared.load_full().unwrap();
    let gone = served.with_changes(2, [Change::DeleteDir(format!("{BASE}/default/kubernetes"))]);
    shared.store(Some(Arc::new(gone)));
    let (answers, rcode, cached) = ask(&h, srv, RecordType::SRV);
    assert!(
        !cached && answers.is_empty() && rcode == ResponseCode::NXDomain,
        "{answers:?} {rcode:?}"
    );
}
