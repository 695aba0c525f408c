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

/// A reply as a client sees it, without its ID.
fn seen(r: &Message) -> String {
    let records = |rs: &[hickory_proto::rr::Record]| {
        rs.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" | ")
    };
    format!(
        "{:?} aa={} answers [{}] authority [{}] additional [{}]",
        r.metadata.response_code,
        r.metadata.authoritative,
        records(&r.answers),
        records(&r.authorities),
        records(&r.additionals)
    )
}

fn record(json: &str) -> Record {
    Record::from_json(json.as_bytes()).unwrap()
}

/// Every kind of change, on a cache that holds a reply to every question:
/// each reply after it, cached or not, is the reply of a handler that has
/// cached nothing. Narrowing the index (`reply_cache/replies.rs`) by the
/// key itself, by the keys below a directory, or to the whole path among
/// the prefixes fails here. Its two other rules (prefixes below a deleted
/// directory, prefixes that are not a directory) matter to no answer today:
/// every directory an answer lists it also reads as a key, and every prefix
/// read is a directory. The index's own test holds those.
#[test]
fn no_change_of_any_kind_leaves_a_stale_reply() {
    use RecordType::{A, PTR, SRV};
    let questions = [
        ("kubernetes.default.svc.cluster.local.", A),
        ("_https._tcp.kubernetes.default.svc.cluster.local.", SRV),
        ("web.default.svc.cluster.local.", A),
        ("web.default.svc.cluster.local.", SRV),
        ("ad649af9.web.default.svc.cluster.local.", A),
        ("h7.web.default.svc.cluster.local.", A),
        ("x.h7.web.default.svc.cluster.local.", A),
        ("*.default.svc.cluster.local.", A),
        ("web.*.svc.cluster.local.", A),
        ("any.web.default.svc.cluster.local.", A),
        ("default.svc.cluster.local.", A),
        ("new.default.svc.cluster.local.", A),
        ("we.default.svc.cluster.local.", A),
        ("1-2-3-4.default.pod.cluster.local.", A),
        ("10.0.0.10.in-addr.arpa.", PTR),
        ("11.0.0.10.in-addr.arpa.", PTR),
    ];
    let ptr = "/skydns/arpa/in-addr/10/0/0";
    let changes: Vec<(&str, Vec<Change>)> = vec![
        ("a leaf changes", vec![put("default/web/h7", "10.244.1.8")]),
        (
            "a leaf is added beside others",
            vec![put("default/web/h9", "10.244.1.9")],
        ),
        (
            "a leaf is deleted",
            vec![Change::Delete(format!("{BASE}/default/web/h7"))],
        ),
        ("a new service", vec![put("default/new/ab", "10.0.0.30")]),
        (
            "a name sharing characters",
            vec![put("default/we/ab", "10.0.0.31")],
        ),
        (
            "a directory is deleted",
            vec![Change::DeleteDir(format!("{BASE}/default/web"))],
        ),
        (
            "a directory becomes a leaf",
            vec![
                Change::DeleteDir(format!("{BASE}/default/web")),
                put("default/web", "10.0.0.32"),
            ],
        ),
        (
            "a leaf becomes a directory",
            vec![
                Change::Delete(format!("{BASE}/default/web/h7")),
                put("default/web/h7/x", "10.0.0.33"),
            ],
        ),
        (
            "a wildcard match appears",
            vec![put("other/web/ab", "10.0.0.34")],
        ),
        (
            "a PTR appears",
            vec![Change::Put(
                format!("{ptr}/11"),
                record(r#"{"host":"web.default.svc.cluster.local."}"#),
            )],
        ),
        (
            "a PTR changes",
            vec![Change::Put(
                format!("{ptr}/10"),
                record(r#"{"host":"other.default.svc.cluster.local."}"#),
            )],
        ),
        (
            "a namespace is deleted",
            vec![Change::DeleteDir(format!("{BASE}/default"))],
        ),
        (
            "an empty directory appears (v2)",
            vec![Change::Dir(format!("{BASE}/default/new"))],
        ),
    ];
    let with_ptr = || {
        cluster().with_changes(
            1,
            [Change::Put(
                format!("{ptr}/10"),
                record(r#"{"host":"kube-dns.kube-system.svc.cluster.local."}"#),
            )],
        )
    };
    let v2 = || {
        let s = with_ptr();
        let keys = s
            .scan_prefix("/")
            .map(|l| (l.key.to_string(), (*l.record).clone()));
        Snapshot::with_dirs(1, keys.collect::<Vec<_>>(), Vec::new())
    };
    let mut cached_after_a_change = 0;
    for (store, base) in [("v3", with_ptr()), ("v2", v2())] {
        for (what, change) in &changes {
            let (h, shared) = handler_sharing(Some(base.clone()), options());
            for (name, qtype) in questions {
                ask(&h, name, qtype);
                assert!(ask(&h, name, qtype).2, "{name} {qtype} is cached");
            }
            let changed = Arc::new(base.with_changes(2, change.clone()));
            shared.store(Some(changed.clone()));
            let (fresh, _) = handler_sharing(Some((*changed).clone()), options());
            for (name, qtype) in questions {
                let m = request(Name::from_ascii(name).unwrap(), qtype);
                let hits = h.engine().replies.hits();
                let got = seen(&ask_msg(&h, &m, Transport::Udp));
                cached_after_a_change += usize::from(h.engine().replies.hits() > hits);
                let want = seen(&ask_msg(&fresh, &m, Transport::Udp));
                assert_eq!(got, want, "{store}: {what}: {name} {qtype}");
            }
        }
    }
    assert!(
        cached_after_a_change > changes.len() * questions.len(),
        "replies a change did not touch stay cached ({cached_after_a_change})"
    );
}
