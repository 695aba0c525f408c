//! The pod's etcd runs Go's garbage collector less often than Go's default
//! (`GOGC` above 100: a full sync of a large cluster costs etcd less CPU)
//! with a soft memory limit (`GOMEMLIMIT`) below its container's memory
//! limit: near it, the collector works harder instead of the kernel killing
//! etcd and every record with it. The local pipeline and the benchmarks run
//! etcd with the same settings, so the figures they print are the pod's.

use super::ha::{altered, fails};
use super::*;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Go's default `GOGC`.
const GO_DEFAULT_GOGC: u64 = 100;
/// The share of the container's memory limit `GOMEMLIMIT` may take: the
/// rest is memory Go's limit does not count (etcd's memory-mapped database,
/// thread stacks outside the heap).
const MAX_SHARE_PERCENT: u64 = 85;

/// Bytes of `value`: digits with one of `units`' suffixes (`what` names
/// the value in a failure).
fn bytes_of(value: &str, what: &str, units: &[(&str, u64)]) -> u64 {
    let digits = value.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &value[digits.len()..];
    let Some((_, unit)) = units.iter().find(|(s, _)| *s == suffix) else {
        panic!("{what}={value}: unit {suffix:?} is not one of {units:?}");
    };
    let n: u64 = digits
        .parse()
        .unwrap_or_else(|e| panic!("{what}={value}: {e}"));
    n * unit
}

/// Bytes of a `GOMEMLIMIT` value: digits with an optional `B`, `KiB`,
/// `MiB`, `GiB` or `TiB` suffix (Go's `runtime/debug` syntax).
fn go_limit_bytes(value: &str) -> u64 {
    let units = [
        ("", 1),
        ("B", 1),
        ("KiB", 1 << 10),
        ("MiB", 1 << 20),
        ("GiB", 1 << 30),
        ("TiB", 1 << 40),
    ];
    bytes_of(value, "GOMEMLIMIT", &units)
}

/// Bytes of a memory quantity with a binary suffix (`500Mi`), as the
/// manifests write memory.
fn quantity_bytes(q: &Quantity) -> u64 {
    let units = [("", 1), ("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)];
    bytes_of(&q.0, "memory", &units)
}

/// The etcd containers of `m`'s workloads.
fn etcds(m: &Manifests) -> Vec<(String, &Container)> {
    let mut out = Vec::new();
    for (workload, template) in m.templates() {
        for c in &template.spec.as_ref().expect("pod spec").containers {
            let exe = c.command.iter().flatten().next();
            if exe.is_some_and(|e| e.ends_with("/etcd")) {
                out.push((format!("{workload}/{}", c.name), c));
            }
        }
    }
    out
}

/// The value of environment variable `name` in `c`.
fn env<'a>(c: &'a Container, name: &str) -> Option<&'a str> {
    c.env
        .iter()
        .flatten()
        .find(|e| e.name == name)
        .and_then(|e| e.value.as_deref())
}

/// The pod's etcd: `GOGC` above Go's default, `GOMEMLIMIT` at most
/// [`MAX_SHARE_PERCENT`] of the container's memory limit. Returns both
/// values.
fn check_etcd_gc(m: &Manifests) -> (String, String) {
    let etcds = etcds(m);
    assert_eq!(etcds.len(), 1, "deploy/{}: one etcd in the pod", m.flavour);
    let (what, c) = &etcds[0];
    let gogc = env(c, "GOGC").unwrap_or_else(|| panic!("{what}: no GOGC"));
    let at: u64 = gogc
        .parse()
        .unwrap_or_else(|e| panic!("{what}: GOGC={gogc}: {e}"));
    assert!(at > GO_DEFAULT_GOGC, "{what}: GOGC={gogc}");
    let soft = env(c, "GOMEMLIMIT").unwrap_or_else(|| panic!("{what}: no GOMEMLIMIT"));
    let limit = (c.resources.as_ref())
        .and_then(|r| r.limits.as_ref()?.get("memory"))
        .unwrap_or_else(|| panic!("{what}: no memory limit"));
    assert!(
        go_limit_bytes(soft) * 100 <= quantity_bytes(limit) * MAX_SHARE_PERCENT,
        "{what}: GOMEMLIMIT={soft} leaves too little of the {} limit",
        limit.0
    );
    (gogc.to_string(), soft.to_string())
}

#[test]
fn the_pods_etcd_collects_less_often_within_its_memory_limit() {
    let (gogc, soft) = check_etcd_gc(&Manifests::load("kubernetes"));
    // Everything else that runs the pod's etcd runs it the same way.
    let shell = format!("GOGC={gogc} GOMEMLIMIT={soft} ");
    for script in [
        "deploy/local/run.sh",
        "integration-tests/bench/lib.sh",
        "integration-tests/bench/pipeline.sh",
    ] {
        let text = read(script);
        let starts = text.matches(" etcd --name").count();
        assert_eq!(starts, 1, "{script}: one etcd");
        assert!(
            text.contains(&format!(
                "{shell}ETCD_UNSUPPORTED_ARCH=$(uname -m) etcd --name"
            )),
            "{script}: etcd without {shell}"
        );
    }
    let python = format!("GOGC=\"{gogc}\", GOMEMLIMIT=\"{soft}\"");
    assert!(
        read("integration-tests/bench/benchlib.py").contains(&python),
        "benchlib.py: start_etcd without {python}"
    );
}

#[test]
fn etcd_gc_checks_catch_a_default_gc_or_a_limit_at_the_containers() {
    let set = |name: &'static str, value: Option<&'static str>, memory: Option<&'static str>| {
        move |o: &mut Object| {
            if let Object::Deployment(d) = o {
                let pod = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
                for c in pod.containers.iter_mut().filter(|c| c.name == "etcd") {
                    let vars = c.env.get_or_insert_with(Vec::new);
                    vars.retain(|e| e.name != name);
                    if let Some(v) = value {
                        vars.push(k8s_openapi::api::core::v1::EnvVar {
                            name: name.into(),
                            value: Some(v.into()),
                            ..Default::default()
                        });
                    }
                    if let Some(m) = memory {
                        let limits = c.resources.as_mut().unwrap().limits.as_mut().unwrap();
                        limits.insert("memory".into(), Quantity(m.into()));
                    }
                }
            }
        }
    };
    let broken = [
        altered("kubernetes", set("GOGC", None, None)),
        altered("kubernetes", set("GOGC", Some("100"), None)),
        altered("kubernetes", set("GOMEMLIMIT", None, None)),
        altered("kubernetes", set("GOMEMLIMIT", Some("500MiB"), None)),
        altered("kubernetes", set("GOGC", Some("200"), Some("400Mi"))),
    ];
    for m in &broken {
        assert!(fails(|m| drop(check_etcd_gc(m)), m));
    }
    // The same values, as the manifest has them, pass.
    check_etcd_gc(&altered("kubernetes", set("GOGC", Some("200"), None)));
    assert_eq!(go_limit_bytes("400MiB"), 400 << 20);
    assert_eq!(go_limit_bytes("1073741824"), 1 << 30);
    assert_eq!(quantity_bytes(&Quantity("1Gi".into())), 1 << 30);
}
