//! `-autopath` through the pipeline, without sockets: a pod's query for its
//! first search step is walked (CNAME to the name that exists), its own
//! names are answered as usual, and a client that is no pod, a DO query,
//! an ANY, AXFR or IXFR query, a namespace's directory and a name that exists nowhere
//! get the asked name's NXDOMAIN. The end-to-end test with real `dig`
//! clients is `integration-tests/tests/skydns_autopath.rs`.

use super::{handler_sharing, request};
use crate::autopath::Autopath;
use crate::handler::*;
use crate::snapshot::Snapshot;
use hickory_proto::op::Edns;
use hickory_proto::rr::Name;
use skydns_msg::record::Record as SkyRecord;

/// A pod of `web`, one of `other`, and an address that is no pod.
const WEB_POD: &str = "127.0.0.9";
const OTHER_POD: &str = "127.0.0.11";
const NOT_A_POD: &str = "127.0.0.10";

/// `db` of `other` as a pod of `web` first asks it.
const OTHER_NS: &str = "db.other.web.svc.cluster.local.";
const OTHER_TARGET: &str = "db.other.svc.cluster.local.";

/// The records kube2sky writes for the two pods and services of `other`,
/// `web` and `redis` (a namespace named like a name pods look up).
fn records(generation: i64, with_db: bool) -> Snapshot {
    let a = SkyRecord::kube2sky_address;
    let mut keys = vec![
        ("pod/web/127-0-0-9/aa", a(WEB_POD)),
        ("pod/other/127-0-0-11/bb", a(OTHER_POD)),
        ("svc/web/cache/cc", a("10.0.0.60")),
        ("svc/redis/x/dd", a("10.0.0.70")),
    ];
    if with_db {
        keys.push(("svc/other/db/ee", a("10.0.0.50")));
    }
    let keys = keys
        .into_iter()
        .map(|(k, r)| (format!("/skydns/local/cluster/{k}"), r));
    Snapshot::new(generation, keys)
}

fn settings() -> Settings {
    let search = "{ns}.svc.{domain},svc.{domain},{domain}";
    let autopath = Autopath::new(search, 5, "cluster.local.").unwrap();
    Settings {
        round_robin: false,
        autopath: Some(Arc::new(autopath)),
        ..Settings::default()
    }
}

/// `name`/`qtype` asked of `h` by `client`, with EDNS's DO bit as given.
fn ask(h: &Handler, client: &str, name: &str, qtype: RecordType, dnssec_ok: bool) -> Message {
    let mut m = request(Name::from_ascii(name).unwrap(), qtype);
    m.metadata.id = 77;
    if dnssec_ok {
        let mut edns = Edns::new();
        edns.set_dnssec_ok(true);
        m.edns = Some(edns);
    }
    let from = Some(SocketAddr::new(client.parse().unwrap(), 5353));
    let packet = m.to_vec().unwrap();
    let reply = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(h.handle_async_from(&packet, Transport::Udp, from))
        .expect("a reply");
    let reply = Message::from_vec(&reply).unwrap();
    assert_eq!(reply.metadata.id, 77);
    reply
}

fn answers(r: &Message) -> Vec<String> {
    (r.answers.iter())
        .map(|a| format!("{} {} {} {}", a.name, a.ttl, a.record_type(), a.data))
        .collect()
}

#[test]
fn a_pods_first_search_step_is_walked_to_the_name_that_exists() {
    let (h, _) = handler_sharing(Some(records(1, true)), settings());
    let r = ask(&h, WEB_POD, OTHER_NS, RecordType::A, false);
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert_eq!(
        answers(&r),
        [
            format!("{OTHER_NS} 30 CNAME {OTHER_TARGET}"),
            format!("{OTHER_TARGET} 30 A 10.0.0.50"),
        ]
    );
    assert_eq!(r.queries[0].name().to_string(), OTHER_NS);
    // The pod of `other` asks the same name in its own namespace's words.
    let r = ask(
        &h,
        OTHER_POD,
        "db.other.svc.cluster.local.",
        RecordType::A,
        false,
    );
    assert_eq!(answers(&r), [format!("{OTHER_TARGET} 30 A 10.0.0.50")]);
}

#[test]
fn a_pods_own_names_are_answered_without_a_walk() {
    let (h, _) = handler_sharing(Some(records(1, true)), settings());
    let r = ask(
        &h,
        WEB_POD,
        "cache.web.svc.cluster.local.",
        RecordType::A,
        false,
    );
    assert_eq!(answers(&r), ["cache.web.svc.cluster.local. 30 A 10.0.0.60"]);
}

/// Each gets the reply a client that is no pod gets: NXDOMAIN (REFUSED
/// for ANY). AXFR and IXFR, never walked, are NXDOMAIN over UDP.
#[test]
fn no_walk_for_a_client_that_is_no_pod_a_pod_elsewhere_a_do_query_or_any() {
    let (h, _) = handler_sharing(Some(records(1, true)), settings());
    let cases = [
        (NOT_A_POD, RecordType::A, false, ResponseCode::NXDomain),
        (OTHER_POD, RecordType::A, false, ResponseCode::NXDomain),
        (WEB_POD, RecordType::A, true, ResponseCode::NXDomain),
        (WEB_POD, RecordType::ANY, false, ResponseCode::Refused),
        (WEB_POD, RecordType::AXFR, false, ResponseCode::NXDomain),
        (WEB_POD, RecordType::IXFR, false, ResponseCode::NXDomain),
    ];
    for (client, qtype, dnssec_ok, rcode) in cases {
        let r = ask(&h, client, OTHER_NS, qtype, dnssec_ok);
        let what = format!("{client} {qtype} DO={dnssec_ok}: {r:?}");
        assert_eq!(r.metadata.response_code, rcode, "{what}");
        assert!(r.answers.is_empty(), "{what}");
    }
}

/// `redis.web.svc.<domain>` walks to `redis.svc.<domain>`, the directory
/// of namespace `redis`, which SkyDNS answers with every record below it:
/// a walk must not stop there. A name that exists nowhere is NXDOMAIN too.
#[test]
fn a_namespaces_directory_and_a_name_that_exists_nowhere_end_in_the_asked_names_nxdomain() {
    let (h, _) = handler_sharing(Some(records(1, true)), settings());
    for name in [
        "redis.web.svc.cluster.local.",
        "nowhere.web.svc.cluster.local.",
    ] {
        let r = ask(&h, WEB_POD, name, RecordType::A, false);
        assert_eq!(
            r.metadata.response_code,
            ResponseCode::NXDomain,
            "{name}: {r:?}"
        );
        assert!(r.answers.is_empty(), "{name}: {r:?}");
        assert_eq!(r.queries[0].name().to_string(), name);
    }
}

/// A question walked before goes straight to the step that answered, on
/// the same records; on new records it is walked again.
#[test]
fn a_walk_asked_again_gets_the_same_reply_and_new_records_are_walked_again() {
    let (h, shared) = handler_sharing(Some(records(1, true)), settings());
    let first = answers(&ask(&h, WEB_POD, OTHER_NS, RecordType::A, false));
    let again = answers(&ask(&h, WEB_POD, OTHER_NS, RecordType::A, false));
    assert_eq!(first, again);
    assert_eq!(first.len(), 2);
    shared.store(Some(Arc::new(records(2, false))));
    let r = ask(&h, WEB_POD, OTHER_NS, RecordType::A, false);
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain, "{r:?}");
    assert!(r.answers.is_empty(), "{r:?}");
}
