//! The index (the desired state) over 1.2's inputs: the worked example of
//! the demo records, PTRs for cluster IPs, relists with and without stale
//! removal, headless services and their Endpoints, pods sharing an IP, and
//! the chunks of a full sync; the DNS specification 1.1.0's inputs in
//! `spec`.

use super::*;
use crate::fixtures::{endpoints, subset, svc, ServiceExt};
use crate::scope::Read;
use k8s_openapi::api::core::v1::Service;

mod spec;

/// A Service event as the watch sends it.
fn service(update: Update<Service>) -> Change {
    Change::Service(update.map(ServiceInfo::from))
}

const REST: &str = r#""priority":10,"weight":10,"ttl":30,"targetstrip":0}"#;

fn index(features: Features) -> Index {
    Index::new(Names::new("cluster.local"), features)
}

fn pod(ns: &str, name: &str, ip: &str) -> PodInfo {
    PodInfo {
        key: ObjectKey {
            namespace: ns.into(),
            name: name.into(),
        },
        ips: vec![ip.into()],
    }
}

fn key(ns: &str, name: &str) -> ObjectKey {
    ObjectKey {
        namespace: ns.into(),
        name: name.into(),
    }
}

fn demo_index(features: Features) -> Index {
    let mut ix = index(features);
    ix.apply(service(Update::Relisted(vec![
        svc("default", "kubernetes")
            .ip("10.0.0.1")
            .port("https", "TCP", 443),
        svc("kube-system", "kube-dns")
            .ip("10.0.0.10")
            .port("dns", "UDP", 53)
            .port("dns-tcp", "TCP", 53),
    ])));
    ix.apply(Change::Endpoints(Update::Relisted(vec![])));
    ix.apply(Change::Pod(Update::Relisted(vec![pod(
        "default", "p", "1.2.3.4",
    )])));
    ix
}

#[test]
fn worked_example_of_section_9_is_exact() {
    let ix = demo_index(Features {
        reverse: false,
        ..Features::default()
    });
    let mut all = ix.desired(&Scope::AllServices);
    all.extend(ix.desired(&Scope::AllPods));
    let expected: Records = [
        (
            "/skydns/local/cluster/svc/default/kubernetes/c88f1059",
            format!(r#"{{"host":"10.0.0.1",{REST}"#),
        ),
        (
            "/skydns/local/cluster/svc/default/kubernetes/_tcp/_https/c88f1059",
            format!(r#"{{"host":"kubernetes.default.svc.cluster.local.","port":443,{REST}"#),
        ),
        (
            "/skydns/local/cluster/svc/kube-system/kube-dns/21172049",
            format!(r#"{{"host":"10.0.0.10",{REST}"#),
        ),
        (
            "/skydns/local/cluster/svc/kube-system/kube-dns/_udp/_dns/21172049",
            format!(r#"{{"host":"kube-dns.kube-system.svc.cluster.local.","port":53,{REST}"#),
        ),
        (
            "/skydns/local/cluster/svc/kube-system/kube-dns/_tcp/_dns-tcp/21172049",
            format!(r#"{{"host":"kube-dns.kube-system.svc.cluster.local.","port":53,{REST}"#),
        ),
        (
            "/skydns/local/cluster/pod/default/1-2-3-4/ad70cf0f",
            format!(r#"{{"host":"1.2.3.4",{REST}"#),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(all, expected);
}

#[test]
fn reverse_adds_ptrs_for_cluster_ips() {
    let ix = demo_index(Features::default());
    let all = ix.desired(&Scope::AllServices);
    assert_eq!(
        all["/skydns/arpa/in-addr/10/0/0/10"],
        format!(r#"{{"host":"kube-dns.kube-system.svc.cluster.local.",{REST}"#)
    );
    assert_eq!(
        all.keys()
            .filter(|k| k.starts_with("/skydns/arpa/"))
            .count(),
        2
    );
}

#[test]
fn relist_gives_a_full_scope_only_once_services_and_endpoints_are_known() {
    let mut ix = index(Features::default());
    let scopes = ix.apply(service(Update::Relisted(
        vec![svc("a", "x").ip("10.0.0.5")],
    )));
    assert_eq!(
        scopes,
        vec![
            Scope::Service(key("a", "x")),
            Scope::Ptr("10.0.0.5".parse().expect("ip"))
        ]
    );
    assert_eq!(
        ix.apply(Change::Endpoints(Update::Relisted(vec![]))),
        vec![Scope::AllServices]
    );
    assert_eq!(
        ix.apply(service(Update::Relisted(vec![]))),
        vec![Scope::AllServices]
    );
    assert!(
        ix.desired(&Scope::AllServices).is_empty(),
        "a service missing from the relist has no records"
    );
}

#[test]
fn without_stale_removal_a_relist_only_rewrites_listed_services() {
    let mut ix = index(Features {
        remove_stale: false,
        reverse: false,
        ..Features::default()
    });
    ix.apply(Change::Endpoints(Update::Relisted(vec![])));
    let scopes = ix.apply(service(Update::Relisted(
        vec![svc("a", "x").ip("10.0.0.5")],
    )));
    assert_eq!(scopes, vec![Scope::Service(key("a", "x"))]);
}

#[test]
fn service_ip_change_reconciles_both_ptrs() {
    let mut ix = index(Features::default());
    ix.apply(service(Update::Apply(svc("a", "x").ip("10.0.0.5"))));
    let scopes = ix.apply(service(Update::Apply(svc("a", "x").ip("10.0.0.6"))));
    assert_eq!(
        scopes,
        vec![
            Scope::Service(key("a", "x")),
            Scope::Ptr("10.0.0.5".parse().expect("ip")),
            Scope::Ptr("10.0.0.6".parse().expect("ip")),
        ]
    );
    assert!(ix
        .desired(&Scope::Ptr("10.0.0.5".parse().expect("ip")))
        .is_empty());
}

#[test]
fn shared_cluster_ip_ptr_goes_to_the_lowest_name() {
    // 1.2's key set; with the specification's records every name gets a PTR
    // (`spec_tests`).
    let mut ix = index(Features {
        spec_records: false,
        ..Features::default()
    });
    ix.apply(service(Update::Apply(svc("b", "z").ip("10.0.0.7"))));
    ix.apply(service(Update::Apply(svc("a", "y").ip("10.0.0.7"))));
    let ptr = ix.desired(&Scope::Ptr("10.0.0.7".parse().expect("ip")));
    assert_eq!(ptr.len(), 1);
    assert!(ptr["/skydns/arpa/in-addr/10/0/0/7"].contains("y.a.svc.cluster.local."));
    ix.apply(service(Update::Delete(svc("a", "y"))));
    let ptr = ix.desired(&Scope::Ptr("10.0.0.7".parse().expect("ip")));
    assert!(ptr["/skydns/arpa/in-addr/10/0/0/7"].contains("z.b.svc.cluster.local."));
}

#[test]
fn endpoints_changes_touch_headless_services_only() {
    let mut ix = index(Features::default());
    ix.apply(Change::Endpoints(Update::Relisted(vec![])));
    ix.apply(service(Update::Apply(svc("a", "h").ip("None"))));
    ix.apply(service(Update::Apply(svc("a", "c").ip("10.0.0.9"))));
    let ep = endpoints(
        "a",
        "h",
        vec![subset(&["10.244.1.6"], &[("http", "TCP", 80)])],
    );
    assert_eq!(
        ix.apply(Change::Endpoints(Update::Apply(ep.clone()))),
        vec![Scope::Service(key("a", "h"))]
    );
    assert_eq!(ix.desired(&Scope::Service(key("a", "h"))).len(), 2);
    assert!(ix
        .apply(Change::Endpoints(Update::Apply(endpoints(
            "a",
            "c",
            vec![]
        ))))
        .is_empty());
    assert_eq!(
        ix.apply(Change::Endpoints(Update::Delete(ep))),
        vec![Scope::Service(key("a", "h"))]
    );
    assert!(ix.desired(&Scope::Service(key("a", "h"))).is_empty());
}

#[test]
fn endpoints_deletions_can_be_ignored_like_1_2() {
    let mut ix = index(Features {
        endpoints_deletions: false,
        ..Features::default()
    });
    ix.apply(Change::Endpoints(Update::Relisted(vec![])));
    ix.apply(service(Update::Apply(svc("a", "h"))));
    let ep = endpoints("a", "h", vec![subset(&["10.244.1.6"], &[])]);
    ix.apply(Change::Endpoints(Update::Apply(ep.clone())));
    assert!(ix.apply(Change::Endpoints(Update::Delete(ep))).is_empty());
}

#[test]
fn pods_sharing_an_ip_keep_the_record_until_the_last_goes() {
    let mut ix = index(Features::default());
    let dir = Scope::PodDir {
        namespace: "d".into(),
        ip: "1.2.3.4".into(),
    };
    assert_eq!(
        ix.apply(Change::Pod(Update::Apply(pod("d", "a", "1.2.3.4")))),
        vec![dir.clone()]
    );
    ix.apply(Change::Pod(Update::Apply(pod("d", "b", "1.2.3.4"))));
    ix.apply(Change::Pod(Update::Delete(pod("d", "a", ""))));
    assert_eq!(ix.desired(&dir).len(), 1);
    ix.apply(Change::Pod(Update::Delete(pod("d", "b", ""))));
    assert!(ix.desired(&dir).is_empty());
}

#[test]
fn pod_ip_change_moves_the_record() {
    let mut ix = index(Features::default());
    ix.apply(Change::Pod(Update::Apply(pod("d", "a", ""))));
    let scopes = ix.apply(Change::Pod(Update::Apply(pod("d", "a", "1.2.3.4"))));
    assert_eq!(
        scopes,
        vec![Scope::PodDir {
            namespace: "d".into(),
            ip: "1.2.3.4".into()
        }]
    );
    let scopes = ix.apply(Change::Pod(Update::Apply(pod("d", "a", "1.2.3.5"))));
    assert_eq!(scopes.len(), 2);
}

#[test]
fn pods_off_means_no_pod_scopes() {
    let mut ix = index(Features {
        pods: false,
        ..Features::default()
    });
    assert!(ix
        .apply(Change::Pod(Update::Apply(pod("d", "a", "1.2.3.4"))))
        .is_empty());
    assert!(!ix.all_scopes().contains(&Scope::AllPods));
}

#[test]
fn scope_reads() {
    let names = Names::new("cluster.local");
    assert_eq!(
        Scope::AllServices.reads(&names, true),
        vec![
            Read::Prefix("/skydns/local/cluster/svc/".into()),
            Read::OwnedPtrs("/skydns/arpa/".into())
        ]
    );
    assert_eq!(Scope::AllServices.reads(&names, false).len(), 1);
}

fn headless_with_endpoints() -> (Service, Endpoints) {
    (
        svc("a", "h").ip("None"),
        endpoints(
            "a",
            "h",
            vec![subset(&["10.244.1.6"], &[("http", "TCP", 80)])],
        ),
    )
}

#[test]
fn headless_services_are_left_alone_until_endpoints_are_listed() {
    for features in [
        Features::default(),
        Features {
            remove_stale: false,
            ..Features::default()
        },
    ] {
        let mut ix = index(features);
        let (headless, ep) = headless_with_endpoints();
        let scopes = ix.apply(service(Update::Relisted(vec![
            headless.clone(),
            svc("a", "c").ip("10.0.0.9"),
        ])));
        assert!(
            !scopes.contains(&Scope::Service(key("a", "h"))),
            "services listed first must not empty the headless service: {scopes:?}"
        );
        assert!(scopes.contains(&Scope::Service(key("a", "c"))));
        assert!(ix.apply(service(Update::Apply(headless))).is_empty());
        let all = ix.all_scopes();
        assert!(!all.contains(&Scope::Service(key("a", "h"))), "{all:?}");
        assert!(!all.contains(&Scope::AllServices), "{all:?}");

        let scopes = ix.apply(Change::Endpoints(Update::Relisted(vec![ep])));
        assert!(
            scopes.contains(&Scope::AllServices) || scopes.contains(&Scope::Service(key("a", "h"))),
            "{scopes:?}"
        );
        assert_eq!(ix.desired(&Scope::Service(key("a", "h"))).len(), 2);
    }
}

#[test]
fn deleting_a_headless_service_before_endpoints_are_listed_still_removes_it() {
    let mut ix = index(Features::default());
    let (headless, _) = headless_with_endpoints();
    ix.apply(service(Update::Relisted(vec![headless.clone()])));
    assert_eq!(
        ix.apply(service(Update::Delete(headless))),
        vec![Scope::Service(key("a", "h"))]
    );
}

#[test]
fn pod_status_update_with_the_same_ip_touches_nothing() {
    let mut ix = index(Features::default());
    ix.apply(Change::Pod(Update::Apply(pod("d", "a", "1.2.3.4"))));
    assert!(ix
        .apply(Change::Pod(Update::Apply(pod("d", "a", "1.2.3.4"))))
        .is_empty());
    assert!(ix
        .apply(Change::Pod(Update::Apply(pod("d", "b", ""))))
        .is_empty());
    assert_eq!(
        ix.apply(Change::Pod(Update::Apply(pod("d", "a", "")))),
        vec![Scope::PodDir {
            namespace: "d".into(),
            ip: "1.2.3.4".into()
        }]
    );
}

#[test]
fn a_ptr_follows_its_owners_ip_changes_and_relists() {
    let mut ix = index(Features::default());
    let ptr_of = |ix: &Index, ip: &str| {
        ix.desired(&Scope::Ptr(ip.parse().expect("ip")))
            .into_values()
            .next()
    };
    ix.apply(service(Update::Apply(svc("a", "x").ip("10.0.0.7"))));
    ix.apply(service(Update::Apply(svc("b", "y").ip("10.0.0.7"))));
    // x moves away: the PTR of .7 passes to y, .8 is x's.
    ix.apply(service(Update::Apply(svc("a", "x").ip("10.0.0.8"))));
    assert!(ptr_of(&ix, "10.0.0.7").is_some_and(|v| v.contains("y.b.svc")));
    assert!(ptr_of(&ix, "10.0.0.8").is_some_and(|v| v.contains("x.a.svc")));
    // A relist without y forgets it: no PTR for .7.
    ix.apply(service(Update::Relisted(
        vec![svc("a", "x").ip("10.0.0.8")],
    )));
    assert_eq!(ptr_of(&ix, "10.0.0.7"), None);
    assert!(ptr_of(&ix, "10.0.0.8").is_some_and(|v| v.contains("x.a.svc")));
}

#[test]
fn an_endpoints_relist_without_stale_removal_touches_headless_services_only() {
    let mut ix = index(Features {
        remove_stale: false,
        ..Features::default()
    });
    ix.apply(service(Update::Relisted(vec![
        svc("a", "c").ip("10.0.0.5"),
        svc("a", "h").ip("None"),
    ])));
    // A cluster-IP service's records do not depend on Endpoints: syncing it
    // here would apply a service deletion the services relist has not
    // delivered yet (and that 1.2 never applied).
    assert_eq!(
        ix.apply(Change::Endpoints(Update::Relisted(vec![]))),
        vec![Scope::Service(key("a", "h"))]
    );
}

#[test]
fn sync_chunks_cover_the_pod_subtree_in_key_order_whole_namespaces_each() {
    let mut ix = index(Features::default());
    let pods: Vec<PodInfo> = [
        ("a", "p1", "10.1.0.1"),
        ("a", "p2", "10.1.0.2"),
        ("a-b", "p3", "10.1.0.3"),
        ("b", "p4", "10.1.0.4"),
        ("c", "p5", "10.1.0.5"),
        ("c", "p6", "10.1.0.6"),
        ("c", "p7", "10.1.0.7"),
    ]
    .into_iter()
    .map(|(ns, name, ip)| pod(ns, name, ip))
    .collect();
    ix.apply(Change::Pod(Update::Relisted(pods)));
    let names = Names::new("cluster.local");
    let chunks = ix.pod_chunks(2);
    // `a-b/` sorts before `a/` in etcd; no namespace is split, and a
    // namespace larger than a chunk gets one of its own.
    let namespaces: Vec<Vec<String>> = chunks
        .iter()
        .map(|c| match c {
            Scope::PodChunk { namespaces, .. } => namespaces.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(namespaces, [vec!["a-b"], vec!["a"], vec!["b"], vec!["c"]]);
    // The ranges join end to end from the start of pod/ to its end, so a key
    // of a namespace with no pods left (`a-a/`, `bb/`) is read by exactly one.
    let ranges: Vec<(String, String)> = chunks
        .iter()
        .map(|c| match c.reads(&names, false).as_slice() {
            [Read::Range { from, to, .. }] => (from.clone(), to.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    let root = names.pod_root();
    assert_eq!(ranges.first().unwrap().0, root);
    assert_eq!(ranges.last().unwrap().1, "/skydns/local/cluster/pod0");
    for pair in ranges.windows(2) {
        assert_eq!(pair[0].1, pair[1].0);
    }
    for orphan in ["a-a/10-1-0-9/x", "bb/10-1-0-9/x", "d/10-1-0-9/x", "0/x"] {
        let key = format!("{root}{orphan}");
        let holders = ranges
            .iter()
            .filter(|(from, to)| from.as_str() <= key.as_str() && key.as_str() < to.as_str())
            .count();
        assert_eq!(holders, 1, "{key}");
    }
    // Each chunk desires its own namespaces' pods, all of them once.
    let mut desired = Records::new();
    for chunk in &chunks {
        let part = ix.desired(chunk);
        assert!(part.keys().all(|k| !desired.contains_key(k)));
        desired.extend(part);
    }
    assert_eq!(desired, ix.desired(&Scope::AllPods));
    assert_eq!(desired.len(), 7);
}

#[test]
fn no_pods_is_one_chunk_over_the_whole_subtree() {
    let ix = index(Features::default());
    let names = Names::new("cluster.local");
    let chunks = ix.pod_chunks(10);
    assert_eq!(chunks.len(), 1);
    assert_eq!(
        chunks[0].reads(&names, false),
        [Read::Range {
            from: "/skydns/local/cluster/pod/".into(),
            to: "/skydns/local/cluster/pod0".into(),
        }]
    );
}

#[test]
fn service_chunks_are_whole_namespaces_then_ptr_ranges() {
    let mut ix = index(Features {
        reverse: true,
        ..Features::default()
    });
    ix.apply(service(Update::Relisted(vec![
        svc("a", "x").ip("10.0.0.5").port("http", "TCP", 80),
        svc("a", "y").ip("10.0.0.40"),
        svc("a-b", "z").ip("10.0.0.6"),
        svc("c", "w").ip("10.0.0.7"),
        svc("c", "v").ip("10.0.0.7"),
    ])));
    ix.apply(Change::Endpoints(Update::Relisted(vec![])));
    let names = Names::new("cluster.local");
    let chunks = ix.service_chunks(2);
    let namespaces: Vec<Vec<String>> = chunks
        .iter()
        .filter_map(|c| match c {
            Scope::ServiceChunk { namespaces, .. } => Some(namespaces.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(namespaces, [vec!["a-b"], vec!["a"], vec!["c"]]);
    // Four IPs, two a slice, in key order (`10/0/0/40` < `10/0/0/5`).
    let ptr_ranges: Vec<(Option<IpAddr>, Option<IpAddr>)> = chunks
        .iter()
        .filter_map(|c| match c {
            Scope::PtrChunk { from, to } => Some((*from, *to)),
            _ => None,
        })
        .collect();
    let ip = |ip: &str| Some(ip.parse::<IpAddr>().unwrap());
    assert_eq!(ptr_ranges, [(None, ip("10.0.0.6")), (ip("10.0.0.6"), None)]);
    // The ranges of each subtree join end to end, from its root to its end.
    let ranges = |owned: bool| -> Vec<(String, String)> {
        chunks
            .iter()
            .flat_map(|c| c.reads(&names, true))
            .filter_map(|r| match r {
                Read::Range { from, to } if !owned => Some((from, to)),
                Read::OwnedRange { from, to } if owned => Some((from, to)),
                _ => None,
            })
            .collect()
    };
    for (owned, root, end) in [
        (false, names.svc_root(), "/skydns/local/cluster/svc0"),
        (true, names.ptr_root(), "/skydns/arpa0"),
    ] {
        let ranges = ranges(owned);
        assert_eq!(ranges.first().unwrap().0, root);
        assert_eq!(ranges.last().unwrap().1, end);
        for pair in ranges.windows(2) {
            assert_eq!(pair[0].1, pair[1].0);
        }
    }
    // Every record desired once; the shared IP's two leaves in one slice.
    let mut desired = Records::new();
    for chunk in &chunks {
        let part = ix.desired(chunk);
        assert!(part.keys().all(|k| !desired.contains_key(k)));
        let shared = part.keys().filter(|k| k.contains("/10/0/0/7/")).count();
        assert!(shared == 0 || shared == 2, "{part:?}");
        desired.extend(part);
    }
    assert_eq!(desired, ix.desired(&Scope::AllServices));
    assert_eq!(
        desired
            .keys()
            .filter(|k| k.starts_with("/skydns/arpa/"))
            .count(),
        5
    );
}

/// Slices are planned when a full sync starts and written later, with
/// events applied in between: brought up to date, a slice desires a
/// namespace created since in its range (instead of deleting its keys as
/// stale) and drops one gone since, and a PTR slice desires a PTR written
/// since.
#[test]
fn a_planned_slice_brought_up_to_date_desires_what_came_since() {
    let mut ix = index(Features {
        reverse: true,
        ..Features::default()
    });
    ix.apply(Change::Pod(Update::Relisted(vec![
        pod("a", "p1", "10.1.0.1"),
        pod("c", "p2", "10.1.0.2"),
        pod("e", "p3", "10.1.0.3"),
    ])));
    ix.apply(service(Update::Relisted(vec![
        svc("a", "x").ip("10.0.0.5"),
        svc("c", "y").ip("10.0.0.6"),
    ])));
    ix.apply(Change::Endpoints(Update::Relisted(vec![])));
    let pods = ix.pod_chunks(1);
    let services = ix.service_chunks(1);
    // Since: namespace `d` gains a pod (in the range of `c`'s slice, which
    // runs to `e/`), `b-new` a service (in the range of `a`'s, which runs to
    // `c/`), and `e` loses its pod.
    ix.apply(Change::Pod(Update::Apply(pod("d", "p4", "10.1.0.4"))));
    ix.apply(Change::Pod(Update::Delete(pod("e", "p3", "10.1.0.3"))));
    ix.apply(service(Update::Apply(svc("b-new", "z").ip("10.0.0.7"))));
    let namespaces = |slice: &Scope| match ix.current_slice(slice) {
        Scope::PodChunk { namespaces, .. } | Scope::ServiceChunk { namespaces, .. } => namespaces,
        other => panic!("{other:?}"),
    };
    let planned: Vec<Vec<String>> = pods.iter().map(namespaces).collect();
    assert_eq!(planned, [vec!["a"], vec!["c", "d"], vec![]]);
    let planned: Vec<Vec<String>> = services[..2].iter().map(namespaces).collect();
    assert!(
        matches!(services[2], Scope::PtrChunk { .. }),
        "{services:?}"
    );
    assert_eq!(planned, [vec!["a", "b-new"], vec!["c"]]);
    let new_pod = ix.desired(&ix.current_slice(&pods[1]));
    assert!(
        new_pod.keys().any(|k| k.contains("/pod/d/10-1-0-4/")),
        "{new_pod:?}"
    );
    let new_svc = ix.desired(&ix.current_slice(&services[0]));
    assert!(
        new_svc.keys().any(|k| k.contains("/svc/b-new/z/")),
        "{new_svc:?}"
    );
    // Its PTR is in the range of a PTR slice planned before it existed.
    let ptr = "/skydns/arpa/in-addr/10/0/0/7";
    let holders: Vec<&Scope> = services
        .iter()
        .filter(|s| ix.desired(&ix.current_slice(s)).contains_key(ptr))
        .collect();
    assert!(
        matches!(holders[..], [Scope::PtrChunk { .. }]),
        "{holders:?}"
    );
    // Every slice brought up to date covers the whole desired state once.
    let mut desired = Records::new();
    for slice in pods.iter().chain(&services) {
        let part = ix.desired(&ix.current_slice(slice));
        assert!(part.keys().all(|k| !desired.contains_key(k)));
        desired.extend(part);
    }
    let mut whole = ix.desired(&Scope::AllPods);
    whole.extend(ix.desired(&Scope::AllServices));
    assert_eq!(desired, whole);
}
