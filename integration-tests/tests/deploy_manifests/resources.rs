//! The resources of the modern manifests are the ones docs/install.md's
//! "Resources" table gives with the measurements behind them: each
//! container's CPU request, memory request and memory limit, and no CPU
//! limit on etcd, kube2sky and skydns (checked in args.rs).

use super::*;
use crate::ha::MODERN;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The table's rows: container -> (CPU request, memory request, memory limit).
fn install_md_resources() -> BTreeMap<String, (String, String, String)> {
    let text = read("docs/install.md");
    let section = &text[text.find("\n## Resources\n").expect("a Resources section")..];
    let section = &section[..section[1..].find("\n## ").map_or(section.len(), |i| i + 1)];
    let mut rows = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells[0] == "container" || cells[0].starts_with("---") {
            continue;
        }
        rows.insert(
            cells[0].to_owned(),
            (
                cells[1].to_owned(),
                cells[2].to_owned(),
                cells[3].to_owned(),
            ),
        );
    }
    rows
}

fn quantity(map: &Option<BTreeMap<String, Quantity>>, key: &str) -> String {
    map.as_ref()
        .and_then(|m| m.get(key))
        .map(|q| q.0.clone())
        .unwrap_or_default()
}

fn check_resources(m: &Manifests, table: &BTreeMap<String, (String, String, String)>) {
    for (workload, spec) in m.pod_specs() {
        for c in &spec.containers {
            let Some(want) = table.get(&c.name) else {
                continue;
            };
            // shared-etcd's members have their own row-less figures (1Gi).
            if m.flavour == "shared-etcd" && c.name == "etcd" {
                continue;
            }
            let r = c.resources.clone().unwrap_or_default();
            let got = (
                quantity(&r.requests, "cpu"),
                quantity(&r.requests, "memory"),
                quantity(&r.limits, "memory"),
            );
            assert_eq!(
                &got, want,
                "deploy/{} {workload} container {}: docs/install.md's Resources",
                m.flavour, c.name
            );
        }
    }
}

#[test]
fn the_modern_manifests_request_what_install_md_measured() {
    let table = install_md_resources();
    assert_eq!(
        table.keys().map(String::as_str).collect::<Vec<_>>(),
        ["etcd", "healthz", "kube2sky", "skydns"],
        "a row per container of the pod"
    );
    for flavour in MODERN {
        check_resources(&Manifests::load(flavour), &table);
    }
    // The check bites: a request off by a little.
    let mut wrong = table.clone();
    wrong.get_mut("skydns").unwrap().1 = "101Mi".into();
    let m = Manifests::load("kubernetes");
    let caught =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_resources(&m, &wrong)));
    assert!(caught.is_err(), "a wrong memory request passed");
}
