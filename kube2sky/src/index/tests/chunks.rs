//! A full sync in chunks: how the index cuts the subtrees into chunks in
//! etcd's key order, and brings a planned chunk up to date.

use super::{index, pod, service};
use crate::config::Features;
use crate::fixtures::{svc, ServiceExt};
use crate::index::{Change, Update};
use crate::objects::PodInfo;
use crate::records::{Names, Records};
use crate::scope::{Read, Scope};
use std::net::IpAddr;

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
    // Four IPs, two a chunk, in key order (`10/0/0/40` < `10/0/0/5`).
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
    // Every record desired once; the shared IP's two leaves in one chunk.
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

/// Chunks are planned when a full sync starts and written later, with
/// events applied in between: brought up to date, a chunk desires a
/// namespace created since in its range (instead of deleting its keys as
/// stale) and drops one gone since, and a PTR chunk desires a PTR written
/// since.
#[test]
fn a_planned_chunk_brought_up_to_date_desires_what_came_since() {
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
    // Since: namespace `d` gains a pod (in the range of `c`'s chunk, which
    // runs to `e/`), `b-new` a service (in the range of `a`'s, which runs to
    // `c/`), and `e` loses its pod.
    ix.apply(Change::Pod(Update::Apply(pod("d", "p4", "10.1.0.4"))));
    ix.apply(Change::Pod(Update::Delete(pod("e", "p3", "10.1.0.3"))));
    ix.apply(service(Update::Apply(svc("b-new", "z").ip("10.0.0.7"))));
    let namespaces = |chunk: &Scope| match ix.current_chunk(chunk) {
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
    let new_pod = ix.desired(&ix.current_chunk(&pods[1]));
    assert!(
        new_pod.keys().any(|k| k.contains("/pod/d/10-1-0-4/")),
        "{new_pod:?}"
    );
    let new_svc = ix.desired(&ix.current_chunk(&services[0]));
    assert!(
        new_svc.keys().any(|k| k.contains("/svc/b-new/z/")),
        "{new_svc:?}"
    );
    // Its PTR is in the range of a PTR chunk planned before it existed.
    let ptr = "/skydns/arpa/in-addr/10/0/0/7";
    let holders: Vec<&Scope> = services
        .iter()
        .filter(|s| ix.desired(&ix.current_chunk(s)).contains_key(ptr))
        .collect();
    assert!(
        matches!(holders[..], [Scope::PtrChunk { .. }]),
        "{holders:?}"
    );
    // Every chunk brought up to date covers the whole desired state once.
    let mut desired = Records::new();
    for chunk in pods.iter().chain(&services) {
        let part = ix.desired(&ix.current_chunk(chunk));
        assert!(part.keys().all(|k| !desired.contains_key(k)));
        desired.extend(part);
    }
    let mut whole = ix.desired(&Scope::AllPods);
    whole.extend(ix.desired(&Scope::AllServices));
    assert_eq!(desired, whole);
}
