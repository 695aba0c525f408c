//! The index with the DNS specification 1.1.0's inputs: EndpointSlices,
//! dual-stack objects, endpoint PTRs and type changes.

use crate::fixtures::{sorted_hosts, svc, ServiceExt};
use crate::index::*;
use crate::objects::SERVICE_NAME_LABEL;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

fn index(features: Features) -> Index {
    let mut ix = Index::new(Names::new("cluster.local"), features);
    ix.apply(Change::Service(Update::Relisted(vec![])));
    ix.apply(Change::EndpointSlice(Update::Relisted(vec![])));
    ix
}

fn service(s: Service) -> Change {
    Change::Service(Update::Apply(ServiceInfo::from(s)))
}

fn key(ns: &str, name: &str) -> ObjectKey {
    ObjectKey {
        namespace: ns.into(),
        name: name.into(),
    }
}

/// A slice of `service` with `endpoints` as `ip[=hostname][!]` (`!`: not ready).
fn slice(name: &str, service: &str, family: &str, endpoints: &[&str], port: i32) -> SliceInfo {
    let endpoints: Vec<serde_json::Value> = endpoints
        .iter()
        .map(|e| {
            let (e, ready) = e.strip_suffix('!').map_or((*e, true), |e| (e, false));
            let (ip, hostname) = e.split_once('=').map_or((e, None), |(i, h)| (i, Some(h)));
            serde_json::json!({"addresses": [ip], "hostname": hostname,
                               "conditions": {"ready": ready}})
        })
        .collect();
    let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
        "metadata": {"namespace": "d", "name": name,
                     "labels": {SERVICE_NAME_LABEL: service}},
        "addressType": family,
        "endpoints": endpoints,
        "ports": [{"name": "http", "protocol": "TCP", "port": port}],
    }))
    .expect("slice");
    SliceInfo::from(slice)
}

fn a_hosts(ix: &Index, ns: &str, name: &str) -> Vec<String> {
    let records = ix.desired(&Scope::Service(key(ns, name)));
    sorted_hosts(
        records
            .iter()
            .filter(|(k, _)| !k.contains("/_"))
            .map(|(_, v)| v),
    )
}

fn ptr_hosts(ix: &Index, ip: &str) -> Vec<String> {
    sorted_hosts(ix.desired(&Scope::Ptr(ip.parse().expect("ip"))).values())
}

#[test]
fn three_slices_merge_and_a_deleted_slice_takes_only_its_addresses() {
    let mut ix = index(Features::default());
    ix.apply(service(svc("d", "h")));
    let a = slice("h-a", "h", "IPv4", &["10.1.0.1", "10.1.0.2"], 80);
    let b = slice(
        "h-b",
        "h",
        "IPv4",
        &["10.1.0.3", "10.1.0.2", "10.1.0.9!"],
        80,
    );
    let c = slice("h-c", "h", "IPv6", &["fd00::4"], 80);
    for s in [&a, &b, &c] {
        let scopes = ix.apply(Change::EndpointSlice(Update::Apply(s.clone())));
        assert!(
            scopes.contains(&Scope::Service(key("d", "h"))),
            "{scopes:?}"
        );
    }
    assert_eq!(
        a_hosts(&ix, "d", "h"),
        ["10.1.0.1", "10.1.0.2", "10.1.0.3", "fd00::4"],
        "each address once; not-ready left out"
    );
    ix.apply(Change::EndpointSlice(Update::Delete(b)));
    assert_eq!(a_hosts(&ix, "d", "h"), ["10.1.0.1", "10.1.0.2", "fd00::4"]);
    ix.apply(Change::EndpointSlice(Update::Delete(a)));
    ix.apply(Change::EndpointSlice(Update::Delete(c)));
    assert!(a_hosts(&ix, "d", "h").is_empty());
}

#[test]
fn a_slice_moving_to_another_service_changes_both() {
    let mut ix = index(Features::default());
    ix.apply(service(svc("d", "one")));
    ix.apply(service(svc("d", "two")));
    ix.apply(Change::EndpointSlice(Update::Apply(slice(
        "s",
        "one",
        "IPv4",
        &["10.1.0.1"],
        80,
    ))));
    assert_eq!(a_hosts(&ix, "d", "one"), ["10.1.0.1"]);
    let scopes = ix.apply(Change::EndpointSlice(Update::Apply(slice(
        "s",
        "two",
        "IPv4",
        &["10.1.0.1"],
        80,
    ))));
    assert!(scopes.contains(&Scope::Service(key("d", "one"))));
    assert!(scopes.contains(&Scope::Service(key("d", "two"))));
    assert!(a_hosts(&ix, "d", "one").is_empty());
    assert_eq!(a_hosts(&ix, "d", "two"), ["10.1.0.1"]);
}

#[test]
fn five_thousand_endpoints_over_five_slices() {
    let mut ix = index(Features::default());
    ix.apply(service(svc("d", "big")));
    let ips: Vec<String> = (0..5000)
        .map(|i| format!("10.2.{}.{}", i / 250, i % 250))
        .collect();
    let slices: Vec<SliceInfo> = ips
        .chunks(1000)
        .enumerate()
        .map(|(n, chunk)| {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            slice(&format!("big-{n}"), "big", "IPv4", &refs, 80)
        })
        .collect();
    ix.apply(Change::EndpointSlice(Update::Relisted(slices)));
    let records = ix.desired(&Scope::Service(key("d", "big")));
    // An A record and an SRV per endpoint.
    assert_eq!(records.len(), 10_000);
    let mut expected = ips.clone();
    expected.sort();
    assert_eq!(a_hosts(&ix, "d", "big"), expected);
}

#[test]
fn dual_stack_cluster_ips_get_a_ptr_each() {
    let mut ix = index(Features::default());
    let mut s = svc("d", "web").ip("10.0.0.5").port("http", "TCP", 80);
    if let Some(spec) = s.spec.as_mut() {
        spec.cluster_ips = Some(vec!["10.0.0.5".into(), "fd00:10::5".into()]);
    }
    let scopes = ix.apply(service(s));
    assert!(scopes.contains(&Scope::Ptr("fd00:10::5".parse().expect("ip"))));
    assert_eq!(ptr_hosts(&ix, "10.0.0.5"), ["web.d.svc.cluster.local."]);
    assert_eq!(ptr_hosts(&ix, "fd00:10::5"), ["web.d.svc.cluster.local."]);
    assert_eq!(a_hosts(&ix, "d", "web"), ["10.0.0.5", "fd00:10::5"]);
}

#[test]
fn headless_endpoints_with_hostnames_get_ptrs_and_a_shared_ip_answers_every_name() {
    let mut ix = index(Features::default());
    ix.apply(service(svc("d", "db")));
    ix.apply(service(svc("d", "web").ip("10.1.0.1")));
    let scopes = ix.apply(Change::EndpointSlice(Update::Apply(slice(
        "db-x",
        "db",
        "IPv4",
        &["10.1.0.1=db-0", "10.1.0.2"],
        5432,
    ))));
    assert!(scopes.contains(&Scope::Ptr("10.1.0.1".parse().expect("ip"))));
    assert_eq!(
        ptr_hosts(&ix, "10.1.0.1"),
        ["db-0.db.d.svc.cluster.local.", "web.d.svc.cluster.local."]
    );
    assert!(ptr_hosts(&ix, "10.1.0.2").is_empty(), "no hostname: no PTR");
    // The endpoint goes: only its own name leaves the PTRs.
    ix.apply(Change::EndpointSlice(Update::Apply(slice(
        "db-x",
        "db",
        "IPv4",
        &["10.1.0.2"],
        5432,
    ))));
    assert_eq!(ptr_hosts(&ix, "10.1.0.1"), ["web.d.svc.cluster.local."]);
    // Without the specification's records there are no endpoint PTRs.
    let mut old = index(Features {
        spec_records: false,
        ..Features::default()
    });
    old.apply(service(svc("d", "db")));
    old.apply(Change::EndpointSlice(Update::Apply(slice(
        "db-x",
        "db",
        "IPv4",
        &["10.1.0.1=db-0"],
        5432,
    ))));
    assert!(ptr_hosts(&old, "10.1.0.1").is_empty());
    assert!(old.desired(&Scope::DnsVersion).is_empty());
    assert_eq!(ix.desired(&Scope::DnsVersion).len(), 1);
}

#[test]
fn type_changes_move_the_ptrs() {
    let mut ix = index(Features::default());
    ix.apply(Change::EndpointSlice(Update::Apply(slice(
        "s-1",
        "s",
        "IPv4",
        &["10.1.0.9=s-0"],
        80,
    ))));
    ix.apply(service(svc("d", "s").ip("10.0.0.9")));
    assert_eq!(ptr_hosts(&ix, "10.0.0.9"), ["s.d.svc.cluster.local."]);
    assert!(ptr_hosts(&ix, "10.1.0.9").is_empty(), "not headless");
    // ClusterIP → headless: the cluster IP's PTR goes, the endpoint's comes.
    let scopes = ix.apply(service(svc("d", "s")));
    assert!(scopes.contains(&Scope::Ptr("10.0.0.9".parse().expect("ip"))));
    assert!(scopes.contains(&Scope::Ptr("10.1.0.9".parse().expect("ip"))));
    assert!(ptr_hosts(&ix, "10.0.0.9").is_empty());
    assert_eq!(ptr_hosts(&ix, "10.1.0.9"), ["s-0.s.d.svc.cluster.local."]);
    // headless → ExternalName: a CNAME, no PTR.
    ix.apply(service(svc("d", "s").external("example.org")));
    assert!(ptr_hosts(&ix, "10.1.0.9").is_empty());
    assert_eq!(a_hosts(&ix, "d", "s"), ["example.org."]);
    // Deleted: nothing.
    ix.apply(Change::Service(Update::Delete(ServiceInfo::from(svc(
        "d", "s",
    )))));
    assert!(a_hosts(&ix, "d", "s").is_empty());
}

#[test]
fn a_relist_without_stale_removal_still_reconciles_the_ptrs_that_went() {
    let mut ix = index(Features {
        remove_stale: false,
        ..Features::default()
    });
    ix.apply(service(svc("d", "h")));
    ix.apply(service(svc("d", "web").ip("10.0.0.9")));
    let s = slice("h-1", "h", "IPv4", &["10.1.0.5=web"], 80);
    ix.apply(Change::EndpointSlice(Update::Apply(s)));
    assert_eq!(ptr_hosts(&ix, "10.1.0.5"), ["web.h.d.svc.cluster.local."]);
    // Missed during a watch gap: the slice is gone from the relist.
    let scopes = ix.apply(Change::EndpointSlice(Update::Relisted(vec![])));
    assert!(
        scopes.contains(&Scope::Ptr("10.1.0.5".parse().expect("ip"))),
        "{scopes:?}"
    );
    assert!(ptr_hosts(&ix, "10.1.0.5").is_empty());
    // The same for a cluster IP whose service went.
    let scopes = ix.apply(Change::Service(Update::Relisted(vec![ServiceInfo::from(
        svc("d", "h"),
    )])));
    assert!(
        scopes.contains(&Scope::Ptr("10.0.0.9".parse().expect("ip"))),
        "{scopes:?}"
    );
}

#[test]
fn ignored_endpoints_deletions_keep_a_services_last_slice() {
    let mut ix = index(Features {
        endpoints_deletions: false,
        ..Features::default()
    });
    ix.apply(service(svc("d", "h")));
    let s = slice("h-1", "h", "IPv4", &["10.1.0.5=web"], 80);
    ix.apply(Change::EndpointSlice(Update::Apply(s.clone())));
    let scopes = ix.apply(Change::EndpointSlice(Update::Delete(s)));
    assert!(scopes.is_empty(), "{scopes:?}");
    assert_eq!(a_hosts(&ix, "d", "h"), ["10.1.0.5"]);
    assert_eq!(ptr_hosts(&ix, "10.1.0.5"), ["web.h.d.svc.cluster.local."]);
}

#[test]
fn a_slice_relabelled_to_no_valid_service_leaves_its_old_one() {
    let mut ix = index(Features::default());
    ix.apply(service(svc("d", "h")));
    ix.apply(Change::EndpointSlice(Update::Apply(slice(
        "s",
        "h",
        "IPv4",
        &["10.1.0.1"],
        80,
    ))));
    ix.apply(Change::EndpointSlice(Update::Apply(slice(
        "s",
        "Not_A_Name",
        "IPv4",
        &["10.1.0.1"],
        80,
    ))));
    assert!(a_hosts(&ix, "d", "h").is_empty());
}

#[test]
fn is_headless_agrees_with_service_kind() {
    for s in [
        svc("d", "h"),
        svc("d", "n").ip("None"),
        svc("d", "c").ip("10.0.0.1"),
        svc("d", "bad").ip("not-an-ip"),
        svc("d", "e").external("example.org"),
    ] {
        let info = ServiceInfo::from(s.clone());
        assert_eq!(
            info.is_headless(),
            service_kind(&s) == ServiceKind::Headless,
            "{s:?}"
        );
    }
}
