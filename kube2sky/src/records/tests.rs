//! Objects → records: A and SRV of cluster-IP services, headless services
//! (1.2's examples and the 10-key case), ExternalName, pods, PTRs and their
//! ownership, IPv6 and dual-stack, hostnames, the `dns-version` TXT, and
//! what kube2sky owns in etcd.

use super::*;
use crate::fixtures::{endpoints, subset, svc, ServiceExt};

const A1: &str = r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#;

fn names() -> Names {
    Names::new("cluster.local")
}

fn pairs(records: &Records) -> Vec<(&str, &str)> {
    records
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

#[test]
fn cluster_ip_service_gets_a_and_srv_with_the_same_label() {
    let s = svc("default", "kubernetes")
        .ip("10.0.0.1")
        .port("https", "TCP", 443);
    assert_eq!(
        pairs(&service_records(&names(), &s, None, Options::default())),
        [
            (
                "/skydns/local/cluster/svc/default/kubernetes/_tcp/_https/c88f1059",
                r#"{"host":"kubernetes.default.svc.cluster.local.","port":443,"priority":10,"weight":10,"ttl":30,"targetstrip":0}"#
            ),
            ("/skydns/local/cluster/svc/default/kubernetes/c88f1059", A1),
        ]
    );
}

#[test]
fn ports_without_name_or_protocol_get_no_srv() {
    let s = svc("default", "x")
        .ip("10.0.0.1")
        .port("", "TCP", 80)
        .port("web", "", 81);
    assert_eq!(
        pairs(&service_records(&names(), &s, None, Options::default())),
        [("/skydns/local/cluster/svc/default/x/c88f1059", A1)]
    );
    let no_ports = svc("default", "x").ip("10.0.0.1");
    assert_eq!(
        service_records(&names(), &no_ports, None, Options::default()).len(),
        1
    );
}

#[test]
fn headless_example_of_section_5_2() {
    let s = svc("default", "web").ip("None");
    let ep = endpoints(
        "default",
        "web",
        vec![subset(&["10.244.1.6"], &[("http", "TCP", 80)])],
    );
    assert_eq!(
        pairs(&service_records(
            &names(),
            &s,
            Some(&ep),
            Options::default()
        )),
        [
            (
                "/skydns/local/cluster/svc/default/web/_tcp/_http/ad649af9",
                r#"{"host":"ad649af9.web.default.svc.cluster.local.","port":80,"priority":10,"weight":10,"ttl":30,"targetstrip":0}"#
            ),
            (
                "/skydns/local/cluster/svc/default/web/ad649af9",
                r#"{"host":"10.244.1.6","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#
            ),
        ]
    );
}

#[test]
fn headless_two_subsets_give_ten_keys() {
    let s = svc("default", "h");
    let ep = endpoints(
        "default",
        "h",
        vec![
            subset(
                &["10.0.0.1", "10.0.0.2"],
                &[("http1", "TCP", 80), ("http2", "TCP", 81)],
            ),
            subset(&["10.0.0.3", "10.0.0.4"], &[("https", "TCP", 443)]),
        ],
    );
    let records = service_records(&names(), &s, Some(&ep), Options::default());
    assert_eq!(records.len(), 10);
    assert_eq!(records.keys().filter(|k| k.contains("/_tcp/")).count(), 6);
    assert!(records.contains_key("/skydns/local/cluster/svc/default/h/_tcp/_http1/c88f1059"));
}

#[test]
fn headless_without_endpoints_or_addresses_writes_nothing() {
    let s = svc("default", "h").ip("None");
    assert!(service_records(&names(), &s, None, Options::default()).is_empty());
    let empty = endpoints("default", "h", vec![]);
    assert!(service_records(&names(), &s, Some(&empty), Options::default()).is_empty());
}

#[test]
fn hostnames_from_annotation_and_from_the_address_field() {
    let s = svc("default", "db").ip("None");
    let mut ep = endpoints(
        "default",
        "db",
        vec![subset(
            &["10.0.0.1", "10.0.0.2=db-1", "10.0.0.3"],
            &[("pg", "TCP", 5432)],
        )],
    );
    ep.metadata.annotations = Some(
        [(
            HOSTNAMES_ANNOTATION.to_string(),
            r#"{"10.0.0.1":{"HostName":"db-0"},"10.0.0.3":{"HostName":"Bad_Name"}}"#.to_string(),
        )]
        .into(),
    );
    let records = service_records(&names(), &s, Some(&ep), Options::default());
    assert_eq!(records["/skydns/local/cluster/svc/default/db/db-0"], A1);
    assert_eq!(
        records["/skydns/local/cluster/svc/default/db/_tcp/_pg/db-1"],
        r#"{"host":"db-1.db.default.svc.cluster.local.","port":5432,"priority":10,"weight":10,"ttl":30,"targetstrip":0}"#
    );
    // FNV-1a 32 of 10.0.0.3's A JSON, computed apart from this code.
    assert_eq!(
        records["/skydns/local/cluster/svc/default/db/2c92af47"],
        r#"{"host":"10.0.0.3","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
        "invalid hostname falls back to hash"
    );
}

#[test]
fn invalid_annotation_json_falls_back_to_hash_labels() {
    let s = svc("default", "db");
    let mut ep = endpoints("default", "db", vec![subset(&["10.0.0.1"], &[])]);
    ep.metadata.annotations =
        Some([(HOSTNAMES_ANNOTATION.to_string(), "{not json".to_string())].into());
    assert_eq!(
        pairs(&service_records(
            &names(),
            &s,
            Some(&ep),
            Options::default()
        )),
        [("/skydns/local/cluster/svc/default/db/c88f1059", A1)]
    );
}

#[test]
fn external_name_record_points_at_the_fqdn() {
    let s = svc("default", "ext").external("Example.COM");
    let records = service_records(&names(), &s, None, Options::default());
    // The label: FNV-1a 32 of the JSON, computed apart from this code.
    assert_eq!(
        pairs(&records),
        [(
            "/skydns/local/cluster/svc/default/ext/5502a00a",
            r#"{"host":"example.com.","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#
        )]
    );
    assert!(service_records(
        &names(),
        &s,
        None,
        Options {
            external_name: false,
            spec: true
        }
    )
    .is_empty());
}

#[test]
fn pod_record_example() {
    assert_eq!(
        pairs(&pod_records(&names(), "default", "1.2.3.4")),
        [(
            "/skydns/local/cluster/pod/default/1-2-3-4/ad70cf0f",
            r#"{"host":"1.2.3.4","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#
        )]
    );
}

#[test]
fn ptr_record_and_ownership() {
    let n = names();
    let kubernetes = PtrName {
        namespace: "default".into(),
        name: "kubernetes".into(),
        hostname: None,
    };
    let ip = "10.0.0.1".parse().expect("ip");
    let records = ptr_records(&n, ip, &[kubernetes], true);
    let value = &records["/skydns/arpa/in-addr/10/0/0/1"];
    assert_eq!(
        value,
        r#"{"host":"kubernetes.default.svc.cluster.local.","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#
    );
    assert_eq!(records.len(), 1);
    assert!(n.owns_ptr_value(value));
    assert!(!n.owns_ptr_value(r#"{"host":"router.example.org."}"#));
    assert!(!n.owns_ptr_value(r#"{"host":"x.default.svc.other.local."}"#));
    assert!(!n.owns_ptr_value("garbage"));
}

#[test]
fn an_ip_with_several_names_gets_a_ptr_per_name_below_its_key() {
    let n = names();
    let name = |ns: &str, svc: &str, host: Option<&str>| PtrName {
        namespace: ns.into(),
        name: svc.into(),
        hostname: host.map(Into::into),
    };
    let targets = [name("a", "db", Some("db-0")), name("b", "web", None)];
    let ip = "10.1.0.7".parse().expect("ip");
    let every = ptr_records(&n, ip, &targets, true);
    let hosts = crate::fixtures::sorted_hosts(every.values());
    assert_eq!(
        hosts,
        ["db-0.db.a.svc.cluster.local.", "web.b.svc.cluster.local."]
    );
    assert_eq!(every.len(), 2);
    for key in every.keys() {
        assert!(key.starts_with("/skydns/arpa/in-addr/10/1/0/7/"), "{key}");
    }
    // Without the specification's records: the lowest name alone, as a leaf.
    let first = ptr_records(&n, ip, &targets, false);
    assert_eq!(
        first.keys().collect::<Vec<_>>(),
        ["/skydns/arpa/in-addr/10/1/0/7"]
    );
    assert!(first.values().all(|v| v.contains("db-0.db.a.svc")));
    // An endpoint's PTR belongs to its service's transaction unit.
    let leaf = every
        .iter()
        .find(|(_, v)| v.contains("db-0"))
        .expect("db-0");
    assert_eq!(
        n.unit_of(leaf.0, Some(leaf.1)),
        "/skydns/local/cluster/svc/a/db/"
    );
}

#[test]
fn ipv6_ptr_keys_have_32_nibbles() {
    let n = names();
    let key = n.ptr_key("2001:db8::567:89ab".parse().expect("ip"));
    assert_eq!(
        key,
        "/skydns/arpa/ip6/2/0/0/1/0/d/b/8/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/5/6/7/8/9/a/b"
    );
    assert!(n.is_ptr_key(&key));
    assert_eq!(n.dir_floor(&key).as_deref(), Some("/skydns/arpa/ip6"));
}

#[test]
fn stub_leaves_empty_their_zone_directories_down_to_the_stub_root() {
    let n = names();
    let leaf = "/skydns/local/cluster/dns/stub/local/acme/kube-dns_0";
    assert_eq!(
        n.dir_floor(leaf).as_deref(),
        Some("/skydns/local/cluster/dns/stub")
    );
    assert_eq!(n.dir_floor("/skydns/local/cluster/dns/ns/ns1"), None);
}

#[test]
fn dual_stack_services_and_pods_get_both_families() {
    let mut s = svc("d", "web").ip("10.0.0.5").port("http", "TCP", 80);
    if let Some(spec) = s.spec.as_mut() {
        spec.cluster_ips = Some(vec!["10.0.0.5".into(), "fd00:10::5".into()]);
    }
    let records = service_records(&names(), &s, None, Options::default());
    // Key label and value written out: FNV-1a 32 of the JSON computed
    // apart from this code.
    assert_eq!(
        records["/skydns/local/cluster/svc/d/web/b85cd329"],
        r#"{"host":"fd00:10::5","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#
    );
    let srvs: Vec<&String> = records.keys().filter(|k| k.contains("/_tcp/")).collect();
    assert_eq!(srvs.len(), 1, "one SRV per port: {records:#?}");
    assert_eq!(records.len(), 3);
    let pod = pod_records(&names(), "d", "2001:db8::1");
    let pod: Vec<(&str, &str)> = pod.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        pod,
        [(
            "/skydns/local/cluster/pod/d/2001-db8--1/2a6ceeed",
            r#"{"host":"2001:db8::1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#
        )]
    );
    assert_eq!(
        names().pod_fqdn("d", "2001:db8::1"),
        "2001-db8--1.d.pod.cluster.local."
    );
}

#[test]
fn cluster_ips_are_the_primary_then_the_other_ips_once_each() {
    let mut s = svc("d", "web").ip("10.0.0.5");
    if let Some(spec) = s.spec.as_mut() {
        spec.cluster_ips = Some(vec![
            "10.0.0.5".into(),
            "not-an-ip".into(),
            "fd00:10::5".into(),
        ]);
    }
    assert_eq!(cluster_ips(&s), ["10.0.0.5", "fd00:10::5"]);
    assert!(cluster_ips(&svc("d", "h")).is_empty(), "headless");
}

#[test]
fn names_keep_the_domain_with_its_trailing_dot() {
    assert_eq!(Names::new("cluster.local").domain(), "cluster.local.");
    assert_eq!(Names::new("cluster.local.").domain(), "cluster.local.");
}

#[test]
fn endpoints_sharing_a_hostname_get_one_record_each() {
    let ep = endpoints(
        "d",
        "h",
        vec![
            subset(
                &["10.1.0.1=web", "10.1.0.2=web", "10.1.0.3=db"],
                &[("http", "TCP", 80)],
            ),
            subset(&["fd00::3=db"], &[("http", "TCP", 80)]),
        ],
    );
    let records = service_records(&names(), &svc("d", "h"), Some(&ep), Options::default());
    // Each below its hostname, labelled by the FNV-1a 32 of its A JSON
    // (computed apart from this code).
    for (key, ip) in [
        ("web/1aa841b0", "10.1.0.1"),
        ("web/1b985e67", "10.1.0.2"),
        ("db/2fb13a7e", "10.1.0.3"),
        ("db/39e8bd20", "fd00::3"),
    ] {
        assert_eq!(
            records[&format!("/skydns/local/cluster/svc/d/h/{key}")],
            format!(r#"{{"host":"{ip}","priority":10,"weight":10,"ttl":30,"targetstrip":0}}"#),
            "{records:#?}"
        );
    }
    assert!(!records.contains_key("/skydns/local/cluster/svc/d/h/web"));
    assert!(records.contains_key("/skydns/local/cluster/svc/d/h/_tcp/_http/web"));
    assert!(records.contains_key("/skydns/local/cluster/svc/d/h/_tcp/_http/db"));
    assert_eq!(records.len(), 6, "{records:#?}");
    let ptrs = endpoint_ptr_names(&ep);
    assert_eq!(ptrs.len(), 4, "{ptrs:?}");
    // 1.2's set: the first keeps the hostname, as a leaf.
    let legacy = Options {
        external_name: true,
        spec: false,
    };
    let old = service_records(&names(), &svc("d", "h"), Some(&ep), legacy);
    assert!(old["/skydns/local/cluster/svc/d/h/web"].contains("10.1.0.1"));
}

#[test]
fn dns_version_is_a_txt_record_with_the_spec_records() {
    let records = dns_version_records(&names(), Options::default());
    assert_eq!(
        pairs(&records),
        [(
            "/skydns/local/cluster/dns-version",
            r#"{"text":"1.1.0","ttl":30,"targetstrip":0}"#
        )]
    );
    let legacy = Options {
        external_name: true,
        spec: false,
    };
    assert!(dns_version_records(&names(), legacy).is_empty());
}

#[test]
fn owned_roots_and_dirs() {
    let n = Names::new("cluster.local.");
    assert_eq!(n.svc_root(), "/skydns/local/cluster/svc/");
    assert_eq!(n.pod_root(), "/skydns/local/cluster/pod/");
    assert_eq!(n.ptr_root(), "/skydns/arpa/");
    assert_eq!(n.service_dir("ns", "a"), "/skydns/local/cluster/svc/ns/a/");
    assert_eq!(
        n.pod_dir("ns", "1.2.3.4"),
        "/skydns/local/cluster/pod/ns/1-2-3-4/"
    );
}

#[test]
fn port_problems_are_the_ones_1_2_logged() {
    assert_eq!(
        port_problems(&svc("a", "x").ip("10.0.0.1")),
        vec![PortProblem::NoPorts]
    );
    assert_eq!(
        port_problems(
            &svc("a", "x")
                .ip("10.0.0.1")
                .port("http", "", 80)
                .port("", "", 81)
                .port("dns", "UDP", 53)
        ),
        vec![PortProblem::NoProtocol]
    );
    assert_eq!(
        port_problems(&svc("a", "x").ip("10.0.0.1").port("http", "", 80)),
        vec![PortProblem::NoProtocol],
        "a named port without a protocol, alone"
    );
    assert!(
        port_problems(&svc("a", "h")).is_empty(),
        "headless: ports come from the endpoints"
    );
    assert!(port_problems(&svc("a", "e").external("example.org")).is_empty());
}

#[test]
fn units_are_service_and_pod_directories_and_ptrs_join_their_service() {
    let n = names();
    let web = "/skydns/local/cluster/svc/ns/web/";
    assert_eq!(n.unit_of(&format!("{web}c88f1059"), None), web);
    assert_eq!(n.unit_of(&format!("{web}_tcp/_http/c88f1059"), None), web);
    let pod = "/skydns/local/cluster/pod/ns/1-2-3-4/";
    assert_eq!(n.unit_of(&format!("{pod}ad70cf0f"), None), pod);
    let ptr_value = r#"{"host":"web.ns.svc.cluster.local.","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#;
    assert_eq!(
        n.unit_of("/skydns/arpa/in-addr/10/0/0/1", Some(ptr_value)),
        web
    );
    assert_eq!(
        n.unit_of("/skydns/arpa/in-addr/10/0/0/1", Some("not json")),
        "/skydns/arpa/in-addr/10/0/0/1"
    );
    assert_eq!(n.unit_of("/kube2sky/x", None), "/kube2sky/x");
}

#[test]
fn one_address_in_two_subsets_gets_the_srvs_of_both() {
    // hostNetwork pods of one node share its IP across subsets.
    let ep = endpoints(
        "d",
        "h",
        vec![
            subset(&["10.1.0.5"], &[("http", "TCP", 80)]),
            subset(&["10.1.0.5"], &[("dns", "UDP", 53)]),
        ],
    );
    let keys: Vec<String> =
        service_records(&names(), &svc("d", "h"), Some(&ep), Options::default())
            .into_keys()
            .collect();
    assert_eq!(keys.len(), 3, "{keys:#?}");
    assert!(keys.iter().any(|k| k.contains("/_tcp/_http/")), "{keys:#?}");
    assert!(keys.iter().any(|k| k.contains("/_udp/_dns/")), "{keys:#?}");
    assert!(crate::validate::endpoints(&ep, false).is_empty());
}

#[test]
fn only_our_own_dns_version_value_is_ours() {
    let n = names();
    let ours = dns_version_records(&n, Options::default());
    assert!(n.owns_version_value(&ours[&n.dns_version_key()]));
    assert!(n.owns_version_value(r#"{"text":"1.0.0","ttl":30,"targetstrip":0}"#));
    // Any TTL: one written under another `--ttl` is kube2sky's too.
    assert!(n.owns_version_value(r#"{"text":"1.1.0","ttl":60,"targetstrip":0}"#));
    assert!(!n.owns_version_value(r#"{"text":"1.1.0","targetstrip":0}"#));
    assert!(!n.owns_version_value(r#"{"text":"1.1.0","ttl":60,"priority":10,"targetstrip":0}"#));
    assert!(!n.owns_version_value(r#"{"host":"10.0.0.1","ttl":30,"targetstrip":0}"#));
    assert!(!n.owns_version_value("garbage"));
}

#[test]
fn ptr_order_is_the_order_of_the_ptr_keys() {
    let n = names();
    let ips: Vec<std::net::IpAddr> = [
        "10.0.0.5",
        "10.0.0.50",
        "10.0.0.6",
        "10.0.0.255",
        "1.0.0.1",
        "10.1.0.1",
        "100.0.0.1",
        "9.9.9.9",
        "10.0.10.0",
        "10.0.1.0",
        "192.168.0.9",
        "2001:db8::1",
        "2001:db8::a",
        "2001:db8::10",
        "::1",
        "fd00::",
        // Low nibbles out of order, in early and late bytes.
        "2001:db8::f",
        "2001:db8::e0",
        "2001:db8:3::",
        "2001:db8:2::",
        "2001:db8::2:0",
        "2001:db8::1:0",
    ]
    .iter()
    .map(|s| s.parse().expect("ip"))
    .collect();
    let mut by_key = ips.clone();
    by_key.sort_by_key(|ip| n.ptr_key(*ip));
    let mut by_order = ips;
    by_order.sort_by_key(|ip| PtrOrder::of(*ip));
    assert_eq!(by_order, by_key);
}

/// `--ttl` changes the `ttl` of every value kube2sky writes and nothing
/// else: the keys, endpoint names among them, are 1.2's whatever the TTL.
#[test]
fn the_ttl_flag_changes_every_value_and_no_key() {
    let records = |n: &Names| {
        let web = svc("default", "web").ip("None").port("http", "TCP", 80);
        // Two IPs without a hostname, two sharing one (a record each below it).
        let ep = endpoints(
            "default",
            "web",
            vec![subset(
                &["10.244.1.6", "10.244.1.7", "10.244.1.8=db", "10.244.1.9=db"],
                &[("http", "TCP", 80)],
            )],
        );
        let target = |ns: &str, name: &str| PtrName {
            namespace: ns.into(),
            name: name.into(),
            hostname: None,
        };
        let mut all = Records::new();
        let kubernetes = svc("default", "kubernetes")
            .ip("10.0.0.1")
            .port("https", "TCP", 443);
        all.extend(service_records(n, &kubernetes, None, Options::default()));
        all.extend(service_records(n, &web, Some(&ep), Options::default()));
        let ext = svc("default", "ext").external("example.com");
        all.extend(service_records(n, &ext, None, Options::default()));
        all.extend(pod_records(n, "default", "1.2.3.4"));
        all.extend(dns_version_records(n, Options::default()));
        let ip = "10.0.0.9".parse().expect("ip");
        let targets = [target("a", "db"), target("b", "web")];
        all.extend(ptr_records(n, ip, &targets, true));
        let one = "10.0.0.1".parse().expect("ip");
        all.extend(ptr_records(
            n,
            one,
            &[target("default", "kubernetes")],
            true,
        ));
        all
    };
    let at_30 = records(&names());
    let at_5 = records(&names().with_ttl(5));
    assert_eq!(at_30.len(), 15, "{at_30:#?}");
    let keys = at_30.keys().map(String::as_str);
    let hostnamed = keys.clone().filter(|k| k.contains("/web/db/")).count();
    assert_eq!(hostnamed, 2, "one record per IP below the shared hostname");
    assert!(
        keys.clone().any(|k| k == "/skydns/arpa/in-addr/10/0/0/1"),
        "a PTR leaf"
    );
    assert_eq!(
        at_30.keys().collect::<Vec<_>>(),
        at_5.keys().collect::<Vec<_>>()
    );
    for (key, value) in &at_30 {
        assert!(value.contains(r#""ttl":30,"#), "{key}: {value}");
        assert_eq!(
            at_5[key],
            value.replace(r#""ttl":30,"#, r#""ttl":5,"#),
            "{key}"
        );
    }
    // A version record written under another TTL is still kube2sky's.
    let version = &at_5["/skydns/local/cluster/dns-version"];
    assert!(names().owns_version_value(version), "{version}");
    assert!(!names().owns_version_value(&version.replace(r#""ttl":5,"#, "")));
}
