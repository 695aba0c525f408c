//! The availability objects of the modern flavours (`kubernetes`,
//! `shared-etcd`): PodDisruptionBudgets, topology spread, the Prometheus
//! scrape annotations (kube-dns-autoscaler: autoscaler.rs); and the legacy
//! manifest, which has none of them and stays as it was.

use super::support::*;
use super::*;

pub(crate) const MODERN: [&str; 2] = ["kubernetes", "shared-etcd"];
/// The Deployment of the DNS-serving pods, in both modern flavours.
pub(crate) const DNS: &str = "kube-dns";
pub(crate) const AUTOSCALER: &str = "kube-dns-autoscaler";
const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

/// Labels of the pods of kubeadm's CoreDNS, which sits behind the same
/// Service during a migration (docs/migrate.md): never counted by our
/// budgets or spread constraints.
pub(crate) fn coredns_pod() -> BTreeMap<String, String> {
    [("k8s-app", "kube-dns"), ("pod-template-hash", "674b8bbfcf")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into()
}

fn budgets(m: &Manifests) -> Vec<&PodDisruptionBudget> {
    m.objects
        .iter()
        .filter_map(|o| match o {
            Object::PodDisruptionBudget(p) => Some(&**p),
            _ => None,
        })
        .collect()
}

/// The workloads (by name) whose pod template `selector` selects.
fn selected_workloads(m: &Manifests, selector: &LabelSelector) -> BTreeSet<String> {
    m.templates()
        .into_iter()
        .filter(|(_, t)| selects(selector, &template_labels(t)))
        .map(|(name, _)| name)
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn workload_template<'a>(m: &'a Manifests, name: &str) -> &'a PodTemplateSpec {
    m.templates()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("deploy/{}: no workload {name}", m.flavour))
}

// ---------------------------------------------------------------------------
// PodDisruptionBudgets

/// Each budget lets one pod go at a time and selects exactly the pods of
/// its workloads: every selector label of the Deployment (so no pod
/// outside it), no other workload's pods, no CoreDNS pod; no pod has two
/// budgets (the eviction API refuses such a pod, and a drain stops there).
fn check_budgets(m: &Manifests) {
    let f = m.flavour;
    let mut budget_of: BTreeMap<String, String> = BTreeMap::new();
    for pdb in budgets(m) {
        let name = pdb.metadata.name.clone().unwrap_or_default();
        assert_eq!(
            pdb.metadata.namespace.as_deref(),
            Some("kube-system"),
            "{f} {name}"
        );
        let spec = pdb.spec.as_ref().expect("pdb spec");
        assert_eq!(
            spec.max_unavailable,
            Some(IntOrString::Int(1)),
            "{f} {name}: one pod at a time"
        );
        assert_eq!(
            spec.min_available, None,
            "{f} {name}: minAvailable would block a drain of a single replica"
        );
        let selector = spec.selector.as_ref().expect("selector");
        assert!(
            selector
                .match_labels
                .as_ref()
                .is_some_and(|l| !l.is_empty()),
            "{f} {name}: an empty selector selects every pod of the namespace"
        );
        assert!(
            !selects(selector, &coredns_pod()),
            "{f} {name}: selects CoreDNS's pods"
        );
        for workload in selected_workloads(m, selector) {
            if let Some(other) = budget_of.insert(workload.clone(), name.clone()) {
                panic!("{f}: {workload}'s pods have two budgets, {other} and {name}");
            }
        }
    }
    let mut want: BTreeMap<String, String> = [(DNS.to_owned(), DNS.to_owned())].into();
    if f == "shared-etcd" {
        want.insert("kube2sky".into(), "kube2sky".into());
        for n in 0..3 {
            want.insert(format!("kube-dns-etcd-{n}"), "kube-dns-etcd".into());
        }
    }
    assert_eq!(budget_of, want, "{f}: which budget covers which workload");

    // The Deployments' budgets select within their Deployment's selector.
    for name in budget_of.keys().filter(|n| !n.starts_with("kube-dns-etcd")) {
        let deployment = m.deployment(name);
        let pdb = budgets(m)
            .into_iter()
            .find(|p| p.metadata.name.as_ref() == Some(name))
            .expect("the budget");
        let within = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
        let within = within
            .and_then(|s| s.match_labels.clone())
            .unwrap_or_default();
        let spec = deployment.spec.as_ref().expect("deployment spec");
        for (k, v) in spec.selector.match_labels.iter().flatten() {
            assert_eq!(
                within.get(k),
                Some(v),
                "{f} {name}: the budget may select pods outside the Deployment ({k})"
            );
        }
        assert!(
            spec.selector.match_expressions.is_none(),
            "{f} {name}: only matchLabels are compared here"
        );
    }
}

#[test]
fn modern_budgets_select_their_deployment_s_pods_and_no_others() {
    for flavour in MODERN {
        check_budgets(&Manifests::load(flavour));
    }
}

// ---------------------------------------------------------------------------
// Topology spread

/// The DNS pods spread over nodes (a spread constraint) and zones (a
/// preferred anti-affinity), as preferences (a hard hostname rule counts
/// tainted and draining nodes and would leave replicas Pending on small
/// clusters), each counting the DNS pods alone: the budget's pods.
fn check_spread(m: &Manifests) {
    let f = m.flavour;
    let template = workload_template(m, DNS);
    let pod = template.spec.as_ref().expect("pod spec");
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-cluster-critical"),
        "{f}"
    );
    let budget = budgets(m)
        .into_iter()
        .find(|p| p.metadata.name.as_deref() == Some(DNS))
        .and_then(|p| p.spec.clone()?.selector)
        .expect("the DNS budget's selector");
    let mut keys: BTreeMap<String, (i32, String)> = BTreeMap::new();
    for c in pod.topology_spread_constraints.iter().flatten() {
        let what = format!("{f} {DNS} spread over {}", c.topology_key);
        let selector = c.label_selector.as_ref().expect("labelSelector");
        assert_eq!(
            selected_workloads(m, selector),
            names(&[DNS]),
            "{what}: counts other pods"
        );
        assert!(!selects(selector, &coredns_pod()), "{what}: counts CoreDNS");
        assert_eq!(selector, &budget, "{what}: not the budget's pods");
        assert!(
            c.min_domains.is_none() && c.match_label_keys.is_none(),
            "{what}: fields a 1.22 cluster does not know"
        );
        let old = keys.insert(
            c.topology_key.clone(),
            (c.max_skew, c.when_unsatisfiable.clone()),
        );
        assert!(old.is_none(), "{what}: twice");
    }
    let want: BTreeMap<String, (i32, String)> = [HOSTNAME]
        .map(|k| (k.to_owned(), (1, "ScheduleAnyway".to_owned())))
        .into();
    assert_eq!(keys, want, "{f}: spread constraints of the DNS pods");
    // Zones as a preferred anti-affinity over the same pods: a zone spread
    // constraint would make the scheduler ignore every node without a zone
    // label for the hostname constraint too.
    let zones: Vec<_> = (pod.affinity.as_ref())
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .clone()
        })
        .unwrap_or_default();
    assert!(
        zones
            .iter()
            .any(|t| t.pod_affinity_term.topology_key == ZONE
                && t.pod_affinity_term.label_selector.as_ref() == Some(&budget)),
        "{f}: no preferred spread over zones of the budget's pods"
    );

    if f == "shared-etcd" {
        // kube2sky's two replicas on different nodes when there are two.
        let k2s = workload_template(m, "kube2sky").spec.as_ref().expect("pod");
        let constraints = k2s.topology_spread_constraints.clone().unwrap_or_default();
        assert!(
            constraints.iter().any(|c| c.topology_key == HOSTNAME
                && c.label_selector
                    .as_ref()
                    .is_some_and(|s| selected_workloads(m, s) == names(&["kube2sky"]))),
            "{f}: kube2sky's replicas may share a node"
        );
    }
}

#[test]
fn modern_dns_pods_spread_over_nodes_and_zones() {
    for flavour in MODERN {
        check_spread(&Manifests::load(flavour));
    }
}

// ---------------------------------------------------------------------------
// Scrape annotations

/// `c` with each `$(VAR)` of its arguments (shared-etcd's member addresses,
/// the pod name) replaced by a documentation address, as the kubelet would
/// expand them; shared.rs checks what they expand to.
fn with_references_expanded(c: &Container) -> Container {
    let one = |arg: &String| {
        let mut out = arg.clone();
        while let Some(start) = out.find("$(") {
            let end = start + out[start..].find(')').expect("closed $(");
            out.replace_range(start..=end, "192.0.2.1");
        }
        out
    };
    let mut expanded = c.clone();
    expanded.args = c.args.as_ref().map(|l| l.iter().map(one).collect());
    expanded
}

/// Every pod template with `prometheus.io/scrape: "true"` names, in
/// `prometheus.io/port` and `prometheus.io/path`, a TCP containerPort of
/// the pod on which one of our binaries serves its metrics at that path:
/// skydns (`-metrics-addr`, `-prometheus-path`) on the DNS pods, kube2sky
/// (`--healthz-port`, `/metrics`) on shared-etcd's kube2sky pods.
fn check_scrape(m: &Manifests) {
    let f = m.flavour;
    let mut scraped: BTreeMap<String, String> = BTreeMap::new();
    for (name, template) in m.templates() {
        let annotations = template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.clone())
            .unwrap_or_default();
        let prometheus: BTreeMap<&str, &str> = annotations
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("prometheus.io/")?, v.as_str())))
            .collect();
        if prometheus.is_empty() {
            continue;
        }
        let what = format!("{f} {name}");
        assert_eq!(
            prometheus.keys().copied().collect::<BTreeSet<_>>(),
            ["path", "port", "scrape"].into(),
            "{what}"
        );
        assert_eq!(prometheus["scrape"], "true", "{what}");
        let port: i32 = prometheus["port"].parse().expect("a port number");
        let path = prometheus["path"];
        let pod = template.spec.as_ref().expect("pod spec");
        let c = pod
            .containers
            .iter()
            .find(|c| {
                c.ports.iter().flatten().any(|p| {
                    p.container_port == port && p.protocol.as_deref().unwrap_or("TCP") == "TCP"
                })
            })
            .unwrap_or_else(|| panic!("{what}: port {port} is no TCP containerPort of the pod"));
        // The container serves its metrics there: its own flags say so.
        let served = match check_args(&with_references_expanded(c), &what) {
            Some(Ok(Accepted::Skydns(config))) => {
                let addr = config.metrics.addr.expect("-metrics-addr");
                (i32::from(addr.port()), config.metrics.path.clone())
            }
            Some(Ok(Accepted::Kube2sky(config))) => {
                (i32::from(config.healthz_port), "/metrics".to_owned())
            }
            other => panic!("{what}: {} serves no metrics we know of: {other:?}", c.name),
        };
        assert_eq!(served, (port, path.to_owned()), "{what}: {}", c.name);
        scraped.insert(name, c.name.clone());
    }
    let mut want: BTreeMap<String, String> = [(DNS.to_owned(), "skydns".to_owned())].into();
    if f == "shared-etcd" {
        want.insert("kube2sky".into(), "kube2sky".into());
    }
    assert_eq!(
        scraped, want,
        "{f}: which pods are scraped, for which container"
    );
}

#[test]
fn scrape_annotations_name_a_metrics_port_of_the_pod() {
    for flavour in MODERN {
        check_scrape(&Manifests::load(flavour));
    }
}

// ---------------------------------------------------------------------------
// The checks can fail

/// The objects of `flavour`, changed by `change`.
pub(crate) fn altered(flavour: &'static str, change: impl Fn(&mut Object)) -> Manifests {
    let mut m = Manifests::load(flavour);
    m.objects.iter_mut().for_each(change);
    m
}

pub(crate) fn fails(check: fn(&Manifests), m: &Manifests) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(m))).is_err()
}

#[test]
fn ha_checks_catch_a_stray_budget_spread_or_scrape_port() {
    let pdb_selector = |labels: &[(&str, &str)]| {
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |o: &mut Object| {
            if let Object::PodDisruptionBudget(p) = o {
                if p.metadata.name.as_deref() == Some(DNS) {
                    let spec = p.spec.as_mut().unwrap();
                    spec.selector.as_mut().unwrap().match_labels = Some(labels.clone());
                }
            }
        }
    };
    // The Deployment's selector alone also selects CoreDNS's pods.
    let m = altered("kubernetes", pdb_selector(&[("k8s-app", "kube-dns")]));
    assert!(fails(check_budgets, &m), "a budget selecting CoreDNS");
    let mut m = Manifests::load("shared-etcd");
    m.objects.retain(|o| {
        !matches!(o, Object::PodDisruptionBudget(p) if p.metadata.name.as_deref() == Some("kube2sky"))
    });
    assert!(fails(check_budgets, &m), "kube2sky without a budget");
    // A second budget over the same pods.
    let mut m = Manifests::load("kubernetes");
    let mut second = budgets(&m)[0].clone();
    second.metadata.name = Some("kube-dns-too".into());
    m.objects
        .push(Object::PodDisruptionBudget(Box::new(second)));
    assert!(fails(check_budgets, &m), "two budgets over the DNS pods");
    let m = altered("kubernetes", |o| {
        if let Object::PodDisruptionBudget(p) = o {
            p.spec.as_mut().unwrap().max_unavailable = None;
            p.spec.as_mut().unwrap().min_available = Some(IntOrString::Int(1));
        }
    });
    assert!(fails(check_budgets, &m), "minAvailable: 1");

    let m = altered("shared-etcd", |o| {
        if let Object::Deployment(d) = o {
            if d.metadata.name.as_deref() == Some(DNS) {
                let pod = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
                let constraints = pod.topology_spread_constraints.as_mut().unwrap();
                constraints[0].when_unsatisfiable = "DoNotSchedule".into();
            }
        }
    });
    assert!(fails(check_spread, &m), "a hard hostname rule");

    let m = altered("kubernetes", |o| {
        if let Object::Deployment(d) = o {
            let meta = d.spec.as_mut().unwrap().template.metadata.as_mut().unwrap();
            if let Some(a) = meta.annotations.as_mut() {
                a.insert("prometheus.io/port".into(), "8080".into());
            }
        }
    });
    assert!(fails(check_scrape, &m), "exec-healthz's port for skydns");
}

// ---------------------------------------------------------------------------
// The legacy manifest

/// FNV-1a, 64 bits: a digest of the legacy templates that needs no crate.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `deploy/legacy/` is the 1.2 pod as it was (docs/security.md, "What the
/// legacy manifest keeps"): no budget, spreading, priority, autoscaler or
/// scrape annotations, and its templates are byte for byte the reviewed
/// ones. Changing them is a decision about faithfulness to 1.2: make it,
/// then update the digests here.
#[test]
fn the_legacy_manifest_is_unchanged_and_has_none_of_the_ha_objects() {
    let m = Manifests::load("legacy");
    let kinds: Vec<&str> = m
        .objects
        .iter()
        .map(|o| match o {
            Object::ReplicationController(_) => "ReplicationController",
            Object::Service(_) => "Service",
            Object::ConfigMap(_) => "ConfigMap",
            _ => "other",
        })
        .collect();
    // The settings ConfigMap (deploy/base) is the one object 1.2 did not have.
    assert_eq!(kinds, ["ConfigMap", "Service", "ReplicationController"]);
    let (labels, pod) = m.pod();
    assert!(pod.topology_spread_constraints.is_none() && pod.affinity.is_none());
    assert!(pod.priority_class_name.is_none() && pod.priority.is_none());
    assert!(pod.service_account_name.is_none());
    assert!(!labels.contains_key("app.kubernetes.io/name"));
    for (_, template) in m.templates() {
        let annotations = template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref());
        assert!(annotations.is_none(), "the 1.2 pod had no annotations");
    }

    let digests: Vec<(String, u64)> = manifest_files("legacy")
        .iter()
        .map(|p| {
            let bytes = std::fs::read(p).expect("reading template");
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                fnv1a(&bytes),
            )
        })
        .collect();
    let want = [
        ("skydns-rc.yaml".to_owned(), 0x2e7d_cfab_834e_593e),
        ("skydns-svc.yaml".to_owned(), 0xdd71_d3c0_37f5_594f),
    ];
    assert_eq!(
        digests, want,
        "deploy/legacy/ changed: it is the Kubernetes 1.2 pod as it was"
    );
    assert_eq!(
        fnv1a(b"a"),
        0xaf63_dc4c_8601_ec8c,
        "FNV-1a's published value"
    );
}
