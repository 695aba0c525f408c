//! The index (the desired state) over 1.2's inputs: the worked example of
//! the demo records, PTRs for cluster IPs, relists with and without stale
//! removal, headless services and their Endpoints, pods sharing an IP, and
//! the chunks of a full sync; the DNS specification 1.1.0's inputs in
//! `spec`.

use super::*;
use crate::fixtures::{endpoints, subset, svc, ServiceExt};
use crate::scope::Read;
use k8s_openapi::api::core::v1::Service;

mod chunks;
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
fn the_config_maps_scopes_are_unknown_until_it_was_listed_and_then_its_records() {
    let mut ix = index(Features::default());
    assert!(
        !ix.all_scopes().contains(&Scope::StubZones),
        "not listed yet"
    );
    assert!(!ix.is_known(&Scope::Upstreams));
    let config = crate::kube_dns_config::KubeDnsConfig {
        stub_domains: [(
            "acme.local".to_string(),
            vec!["1.2.3.4:53".parse().unwrap()],
        )]
        .into(),
        upstreams: vec!["8.8.8.8:53".parse().unwrap()],
    };
    let scopes = ix.apply(Change::KubeDns(config));
    assert_eq!(scopes, vec![Scope::StubZones, Scope::Upstreams]);
    assert!(ix.all_scopes().contains(&Scope::StubZones));
    assert!(ix.all_scopes().contains(&Scope::Upstreams));
    let stub = ix.desired(&Scope::StubZones);
    assert_eq!(
        stub.get("/skydns/local/cluster/dns/stub/local/acme/kube-dns_0")
            .map(String::as_str),
        Some(r#"{"host":"1.2.3.4","port":53}"#)
    );
    assert_eq!(
        DesiredState::upstreams(&ix),
        ["8.8.8.8:53".parse().unwrap()]
    );
    // Deleted: known, and empty.
    ix.apply(Change::KubeDns(Default::default()));
    assert!(ix.desired(&Scope::StubZones).is_empty());
    assert!(DesiredState::upstreams(&ix).is_empty());
}
