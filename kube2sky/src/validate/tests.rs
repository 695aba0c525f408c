//! Fields that cannot become records: names that would address other keys
//! skip the whole service, bad parts are reported and not written, bad
//! endpoint addresses and duplicate hostnames are skipped, bad pods
//! reported.

use super::*;
use crate::fixtures::{endpoints, subset, svc, ServiceExt};
use crate::objects::ObjectKey;
use crate::records::{service_records, Names, Options};

/// 1.2's key set: the first address keeps a shared hostname.
const LEGACY: Options = Options {
    external_name: true,
    spec: false,
};

fn fields(problems: &[Problem]) -> Vec<(Field, &str)> {
    problems
        .iter()
        .map(|p| (p.field, p.value.as_str()))
        .collect()
}

fn records(s: &Service, ep: Option<&Endpoints>) -> Vec<String> {
    service_records(&Names::new("cluster.local"), s, ep, LEGACY)
        .into_keys()
        .collect()
}

#[test]
fn names_that_would_address_other_keys_skip_the_whole_service() {
    let long = "a".repeat(300);
    for (ns, name, field) in [
        ("y", "", Field::Name),
        ("z", "x.foo", Field::Name),
        ("b", "web.a", Field::Name),
        ("a.b", "web", Field::Namespace),
        ("z", long.as_str(), Field::Name),
        ("z", "Web", Field::Name),
        ("z", "x/y", Field::Name),
    ] {
        let problems = service(&svc(ns, name).ip("10.0.0.9").port("http", "TCP", 80));
        assert_eq!(problems.len(), 1, "{ns}/{name}: {problems:?}");
        assert_eq!(problems[0].field, field, "{ns}/{name}");
        assert!(problems[0].whole_object(), "{ns}/{name}");
    }
    assert!(service(&svc("y", "web").ip("10.0.0.9")).is_empty());
}

#[test]
fn a_bad_part_is_reported_and_not_written() {
    let bad_ports = svc("z", "web")
        .ip("10.0.0.9")
        .port("a.b", "TCP", 80)
        .port("zero", "TCP", 0)
        .port("big", "TCP", 70000)
        .port("p", "T/CP", 81)
        .port("ok", "TCP", 82);
    assert_eq!(
        fields(&service(&bad_ports)),
        [
            (Field::PortName, "a.b"),
            (Field::PortNumber, "0"),
            (Field::PortNumber, "70000"),
            (Field::PortProtocol, "T/CP"),
        ]
    );
    assert!(service(&bad_ports).iter().all(|p| !p.whole_object()));
    let keys = records(&bad_ports, None);
    // 19ccb11: FNV-1a of 10.0.0.9's A-record JSON, computed outside this code.
    assert_eq!(
        keys,
        [
            "/skydns/local/cluster/svc/z/web/19ccb11",
            "/skydns/local/cluster/svc/z/web/_tcp/_ok/19ccb11",
        ]
    );

    let not_an_ip = svc("z", "web").ip("not-an-ip").port("http", "TCP", 80);
    assert_eq!(
        fields(&service(&not_an_ip)),
        [(Field::ClusterIp, "not-an-ip")]
    );
    assert!(records(&not_an_ip, None).is_empty());

    let bad_target = svc("z", "ext").external("bad name..com.");
    assert_eq!(
        fields(&service(&bad_target)),
        [(Field::ExternalName, "bad name..com.")]
    );
    assert!(records(&bad_target, None).is_empty());
    assert!(service(&svc("z", "ext").external("Example.COM.")).is_empty());
}

#[test]
fn endpoints_skip_bad_addresses_and_duplicate_hostnames() {
    let headless = svc("z", "h");
    let ep = endpoints(
        "z",
        "h",
        vec![subset(
            &[
                "10.1.0.1=web",
                "10.1.0.2=web",
                "10.7.7.7/24",
                "10.1.0.3=Bad_Host",
                "10.1.0.1=web",
            ],
            &[("http", "TCP", 80), ("no", "TCP", 0)],
        )],
    );
    assert_eq!(
        fields(&super::endpoints(&ep, false)),
        [
            (Field::Ip, "10.7.7.7/24"),
            (Field::Hostname, "Bad_Host"),
            (Field::PortNumber, "0"),
            (Field::Hostname, "web (10.1.0.2)"),
        ]
    );
    // The specification's records: a shared hostname is no problem.
    assert_eq!(
        fields(&super::endpoints(&ep, true)),
        [
            (Field::Ip, "10.7.7.7/24"),
            (Field::Hostname, "Bad_Host"),
            (Field::PortNumber, "0"),
        ]
    );
    let keys = records(&headless, Some(&ep));
    assert_eq!(keys.len(), 4, "{keys:#?}");
    assert!(keys.contains(&"/skydns/local/cluster/svc/z/h/web".to_string()));
    assert!(keys
        .iter()
        .all(|k| !k.contains("10.7.7.7") && !k.contains("/24")));
    let one = service_records(&Names::new("cluster.local"), &headless, Some(&ep), LEGACY);
    assert!(
        one["/skydns/local/cluster/svc/z/h/web"].contains("10.1.0.1"),
        "the first address keeps its hostname: {one:#?}"
    );
}

#[test]
fn pods_with_a_bad_namespace_or_ip_are_reported() {
    let pod = |namespace: &str, ip: &str| PodInfo {
        key: ObjectKey {
            namespace: namespace.into(),
            name: "p".into(),
        },
        ips: vec![ip.into()],
    };
    assert!(pod_problems(&pod("d", "10.1.0.1")).is_empty());
    assert!(pod_problems(&pod("d", "")).is_empty(), "no IP yet");
    assert_eq!(
        fields(&pod_problems(&pod("d", "10.7.7.7/24"))),
        [(Field::Ip, "10.7.7.7/24")]
    );
    let bad_ns = pod_problems(&pod("a.b", "10.1.0.1"));
    assert_eq!(fields(&bad_ns), [(Field::Namespace, "a.b")]);
    assert!(bad_ns[0].whole_object());
}

fn pod_problems(p: &PodInfo) -> Vec<Problem> {
    pod(p)
}
