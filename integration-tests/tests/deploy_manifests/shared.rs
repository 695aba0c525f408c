//! `deploy/shared-etcd/`: a three-member etcd cluster, two kube2sky
//! replicas electing a leader, and the skydns pods, wired by the etcd
//! Services' `KUBE_DNS_ETCD_<n>_SERVICE_HOST` variables.

use super::support::*;
use super::*;
use k8s_openapi::api::core::v1::PodTemplateSpec;

const FLAVOUR: &str = "shared-etcd";
const MEMBERS: usize = 3;

/// What the kubelet would put in `KUBE_DNS_ETCD_<n>_SERVICE_HOST`.
fn member_host(n: usize) -> String {
    format!("10.96.200.{}", n + 1)
}

/// The Service-link variable the kubelet sets for Service `name`.
fn service_host_var(name: &str) -> String {
    format!("{}_SERVICE_HOST", name.to_uppercase().replace('-', "_"))
}

/// Expands `$(VAR)` as the kubelet does in `command` and `args`: from the
/// container's `env` (here, a downward-API field gets `<field>-value`) and
/// the Service links of `services`. A reference to anything else fails.
fn expand(c: &Container, services: &[String], hosts: &BTreeMap<String, String>) -> Container {
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    for s in services {
        let host = hosts
            .get(s)
            .cloned()
            .unwrap_or_else(|| format!("ip-of-{s}"));
        vars.insert(service_host_var(s), host);
    }
    for e in c.env.iter().flatten() {
        let value = e
            .value
            .clone()
            .unwrap_or_else(|| format!("{}-value", e.name));
        vars.insert(e.name.clone(), value);
    }
    let one = |text: &String| -> String {
        let mut out = text.clone();
        while let Some(start) = out.find("$(") {
            let end = start + out[start..].find(')').expect("closed $(");
            let name = &out[start + 2..end];
            let value = vars
                .get(name)
                .unwrap_or_else(|| panic!("{}: $({name}) is neither env nor a Service", c.name));
            out.replace_range(start..=end, value);
        }
        out
    };
    let mut expanded = c.clone();
    expanded.command = c.command.as_ref().map(|l| l.iter().map(one).collect());
    expanded.args = c.args.as_ref().map(|l| l.iter().map(one).collect());
    expanded
}

fn services(m: &Manifests) -> Vec<&Service> {
    m.objects
        .iter()
        .filter_map(|o| match o {
            Object::Service(s) => Some(&**s),
            _ => None,
        })
        .collect()
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn labels(t: &PodTemplateSpec) -> BTreeMap<String, String> {
    template_labels(t)
}

/// The Services whose selector matches `pod_labels`.
fn selecting<'a>(all: &[&'a Service], pod_labels: &BTreeMap<String, String>) -> Vec<&'a Service> {
    all.iter()
        .copied()
        .filter(|s| {
            let selector = s.spec.as_ref().and_then(|sp| sp.selector.clone());
            selector.is_some_and(|sel| sel.iter().all(|(k, v)| pod_labels.get(k) == Some(v)))
        })
        .collect()
}

#[test]
fn shared_etcd_manifests_parse_and_wire_three_members_two_kube2sky_and_skydns() {
    let m = Manifests::load(FLAVOUR);
    let all_services = services(&m);
    let service_names: Vec<String> = all_services.iter().map(|s| name_of(&s.metadata)).collect();
    let hosts: BTreeMap<String, String> = (0..MEMBERS)
        .map(|n| (format!("kube-dns-etcd-{n}"), member_host(n)))
        .collect();
    let endpoints: Vec<String> = (0..MEMBERS)
        .map(|n| format!("http://{}:2379", member_host(n)))
        .collect();

    // The members: one StatefulSet each, selected by its own Service only.
    let sets: Vec<&StatefulSet> = m
        .objects
        .iter()
        .filter_map(|o| match o {
            Object::StatefulSet(s) => Some(&**s),
            _ => None,
        })
        .collect();
    assert_eq!(sets.len(), MEMBERS);
    for (n, set) in sets.iter().enumerate() {
        let spec = set.spec.as_ref().expect("statefulset spec");
        assert_eq!(spec.replicas, Some(1), "member {n}");
        let pod_labels = labels(&spec.template);
        let chosen: Vec<String> = selecting(&all_services, &pod_labels)
            .iter()
            .map(|s| name_of(&s.metadata))
            .collect();
        assert_eq!(
            chosen,
            [format!("kube-dns-etcd-{n}")],
            "member {n}'s Service"
        );
        let pod = spec.template.spec.as_ref().expect("pod spec");
        let etcd = expand(container(pod, "etcd"), &service_names, &hosts);
        assert_eq!(etcd.image.as_deref(), Some(ETCD_IMAGE));
        let command = etcd.command.clone().expect("etcd command");
        let flag = |f: &str| {
            let i = command.iter().position(|a| a == f);
            i.and_then(|i| command.get(i + 1))
                .cloned()
                .unwrap_or_else(|| panic!("member {n}: no {f}"))
        };
        assert_eq!(flag("-name"), format!("m{n}"));
        assert_eq!(flag("-advertise-client-urls"), endpoints[n]);
        let peer = |k: usize| format!("http://{}:2380", member_host(k));
        assert_eq!(flag("-initial-advertise-peer-urls"), peer(n));
        let cluster: Vec<String> = (0..MEMBERS).map(|k| format!("m{k}={}", peer(k))).collect();
        assert_eq!(flag("-initial-cluster"), cluster.join(","));
        let data_dir = flag("-data-dir");
        let claims = spec.volume_claim_templates.clone().unwrap_or_default();
        let mounted = etcd.volume_mounts.iter().flatten().any(|vm| {
            data_dir.starts_with(&vm.mount_path)
                && claims
                    .iter()
                    .any(|c| c.metadata.name.as_ref() == Some(&vm.name))
        });
        assert!(
            mounted,
            "member {n}: {data_dir} is not on its claimed volume"
        );
    }

    // kube2sky: two replicas, the Lease, every member.
    let deployment = |name: &str| -> &Deployment {
        m.one(|o| match o {
            Object::Deployment(d) if d.metadata.name.as_deref() == Some(name) => Some(&**d),
            _ => None,
        })
    };
    let k2s = deployment("kube2sky").spec.as_ref().expect("spec");
    assert_eq!(k2s.replicas, Some(2));
    let k2s_pod = k2s.template.spec.as_ref().expect("pod spec");
    let kube2sky = expand(container(k2s_pod, "kube2sky"), &service_names, &hosts);
    assert!(
        kube2sky.readiness_probe.is_none(),
        "the standby is never ready"
    );
    let Accepted::Kube2sky(config) = check_args(&kube2sky, "kube2sky")
        .expect("ours")
        .unwrap_or_else(|e| panic!("kube2sky arguments rejected: {e}"))
    else {
        panic!("kube2sky parsed as another binary")
    };
    assert_eq!(config.etcd.endpoints, endpoints);
    assert_eq!(config.domain, format!("{}.", m.domain));
    let election = config.leader_election.clone().expect("--leader-elect");
    assert_eq!(election.identity, "POD_NAME-value");
    let pod_name = kube2sky.env.iter().flatten().find(|e| e.name == "POD_NAME");
    let field = pod_name
        .and_then(|e| e.value_from.as_ref())
        .and_then(|v| v.field_ref.as_ref())
        .map(|f| f.field_path.as_str());
    assert_eq!(field, Some("metadata.name"), "identity from the pod's name");

    // The Lease's RBAC: create, and get/update on that one Lease, in its
    // namespace, for the account kube2sky runs as.
    let role = m.one(|o| match o {
        Object::Role(r) if r.metadata.name.as_deref() == Some("kube-dns-rs-leader-election") => {
            Some(&**r)
        }
        _ => None,
    });
    assert_eq!(
        role.metadata.namespace.as_deref(),
        Some(election.namespace.as_str())
    );
    let mut granted: BTreeSet<(String, Option<String>)> = BTreeSet::new();
    for rule in role.rules.iter().flatten() {
        assert_eq!(
            rule.api_groups.as_deref(),
            Some(&["coordination.k8s.io".to_owned()][..])
        );
        assert_eq!(rule.resources.as_deref(), Some(&["leases".to_owned()][..]));
        let names: Vec<Option<String>> = match &rule.resource_names {
            Some(n) => n.iter().cloned().map(Some).collect(),
            None => vec![None],
        };
        for verb in &rule.verbs {
            for name in &names {
                granted.insert((verb.clone(), name.clone()));
            }
        }
    }
    let lease = Some(election.name.clone());
    let want: BTreeSet<(String, Option<String>)> = [
        ("create".to_owned(), None),
        ("get".to_owned(), lease.clone()),
        ("update".to_owned(), lease),
    ]
    .into();
    assert_eq!(granted, want);
    let binding = m.one(|o| match o {
        Object::RoleBinding(b) if b.role_ref.name == "kube-dns-rs-leader-election" => Some(&**b),
        _ => None,
    });
    assert_eq!(Some(&binding.role_ref.name), role.metadata.name.as_ref());
    let subjects = binding.subjects.clone().unwrap_or_default();
    assert_eq!(subjects.len(), 1);
    assert_eq!(
        subjects[0].name,
        k2s_pod.service_account_name.clone().unwrap_or_default()
    );

    // skydns: every member; ready on its own /ready. The replicas are
    // kube-dns-autoscaler's to set (ha.rs).
    let dns = deployment("kube-dns").spec.as_ref().expect("spec");
    assert_eq!(dns.replicas, None, "a count would fight the autoscaler");
    let dns_pod = dns.template.spec.as_ref().expect("pod spec");
    let names: Vec<&str> = dns_pod.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["skydns", "healthz"]);
    let skydns = expand(container(dns_pod, "skydns"), &service_names, &hosts);
    let Accepted::Skydns(sky) = check_args(&skydns, "skydns")
        .expect("ours")
        .unwrap_or_else(|e| panic!("skydns arguments rejected: {e}"))
    else {
        panic!("skydns parsed as another binary")
    };
    assert_eq!(sky.etcd.endpoints, endpoints);
    assert_eq!(sky.zone.domain, format!("{}.", m.domain));
    let account = k2s_pod.service_account_name.clone().unwrap_or_default();
    config_map::check_config_map_access(&m, &config, &sky, &account);
    check_skydns_lifecycle(dns_pod, &skydns, &sky, "shared-etcd skydns");
    assert!(
        sky.lifecycle.ready_store_timeout.is_zero(),
        "a shared etcd's outage must not take every replica out of the Service"
    );
    let healthz = container(dns_pod, "healthz");
    assert!(check_args(healthz, "healthz").expect("ours").is_ok());

    // The kube-dns Service selects the skydns pods, and only them.
    let kube_dns: Vec<String> = selecting(&all_services, &labels(&dns.template))
        .iter()
        .map(|s| name_of(&s.metadata))
        .collect();
    assert_eq!(kube_dns, ["kube-dns"]);
    assert!(selecting(&all_services, &labels(&k2s.template)).is_empty());

    // The etcd Services come before every pod that names them.
    let first_workload = m
        .objects
        .iter()
        .position(|o| matches!(o, Object::StatefulSet(_) | Object::Deployment(_)))
        .expect("workloads");
    let last_etcd_service = m
        .objects
        .iter()
        .rposition(|o| matches!(o, Object::Service(s) if name_of(&s.metadata).starts_with("kube-dns-etcd-")))
        .expect("etcd Services");
    assert!(
        last_etcd_service < first_workload,
        "a pod would start without a member's address"
    );
}

/// The expansion the checks above rely on refuses a `$(...)` that the
/// kubelet would leave unexpanded (a misspelt Service).
#[test]
fn an_unknown_reference_is_caught() {
    let m = Manifests::load(FLAVOUR);
    let dns = m.one(|o| match o {
        Object::Deployment(d) if d.metadata.name.as_deref() == Some("kube-dns") => Some(&**d),
        _ => None,
    });
    let pod = dns
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod");
    let mut skydns = container(pod, "skydns").clone();
    skydns.args = Some(vec![
        "-machines=http://$(KUBE_DNS_ETCD_9_SERVICE_HOST):2379".into(),
    ]);
    let known = vec!["kube-dns-etcd-0".to_owned()];
    let caught = std::panic::catch_unwind(|| expand(&skydns, &known, &BTreeMap::new()));
    assert!(caught.is_err(), "an unknown $(...) was expanded");
}

/// The ports of etcd's NetworkPolicy that a pod with `labels` may reach.
fn reachable_ports(policy: &NetworkPolicy, labels: &BTreeMap<String, String>) -> BTreeSet<i32> {
    let spec = policy.spec.as_ref().expect("policy spec");
    let mut ports = BTreeSet::new();
    for rule in spec.ingress.iter().flatten() {
        let admitted = rule.from.iter().flatten().any(|peer| {
            assert!(peer.ip_block.is_none() && peer.namespace_selector.is_none());
            peer.pod_selector
                .as_ref()
                .is_some_and(|s| selects(s, labels))
        });
        if admitted {
            for port in rule.ports.iter().flatten() {
                ports.insert(port_number(port.port.as_ref().expect("a port")));
            }
        }
    }
    ports
}

#[test]
fn shared_etcd_members_are_fenced_spread_and_never_drained_together() {
    let m = Manifests::load(FLAVOUR);
    let templates: BTreeMap<String, PodTemplateSpec> = m
        .objects
        .iter()
        .filter_map(|o| match o {
            Object::StatefulSet(s) => {
                Some((name_of(&s.metadata), s.spec.as_ref()?.template.clone()))
            }
            Object::Deployment(d) => {
                Some((name_of(&d.metadata), d.spec.as_ref()?.template.clone()))
            }
            _ => None,
        })
        .collect();
    let member_labels: Vec<BTreeMap<String, String>> = (0..MEMBERS)
        .map(|n| labels(&templates[&format!("kube-dns-etcd-{n}")]))
        .collect();

    // The policy covers every member; kube2sky and skydns reach 2379,
    // members 2380, and a pod with other labels nothing.
    let policy = m.one(|o| match o {
        Object::NetworkPolicy(p) => Some(&**p),
        _ => None,
    });
    let spec = policy.spec.as_ref().expect("policy spec");
    assert_eq!(
        spec.policy_types.as_deref(),
        Some(&["Ingress".to_owned()][..])
    );
    for member in &member_labels {
        assert!(
            selects(spec.pod_selector.as_ref().expect("podSelector"), member),
            "{member:?} is not fenced"
        );
        assert_eq!(reachable_ports(policy, member), [2380].into());
    }
    for client in ["kube2sky", "kube-dns"] {
        let client_labels = labels(&templates[client]);
        assert_eq!(
            reachable_ports(policy, &client_labels),
            [2379].into(),
            "{client}"
        );
    }
    let stranger: BTreeMap<String, String> = [("app".to_owned(), "web".to_owned())].into();
    assert!(reachable_ports(policy, &stranger).is_empty());

    // A drain takes one member at a time (the other budgets: ha.rs).
    let pdb = m.one(|o| match o {
        Object::PodDisruptionBudget(p) if p.metadata.name.as_deref() == Some("kube-dns-etcd") => {
            Some(&**p)
        }
        _ => None,
    });
    let pdb_spec = pdb.spec.as_ref().expect("pdb spec");
    assert_eq!(pdb_spec.max_unavailable.as_ref().map(port_number), Some(1));
    for member in &member_labels {
        assert!(selects(
            pdb_spec.selector.as_ref().expect("selector"),
            member
        ));
    }

    // One member per node.
    for n in 0..MEMBERS {
        let pod = templates[&format!("kube-dns-etcd-{n}")]
            .spec
            .clone()
            .expect("pod");
        let terms = pod
            .affinity
            .and_then(|a| a.pod_anti_affinity)
            .and_then(|a| a.required_during_scheduling_ignored_during_execution)
            .unwrap_or_default();
        assert!(
            terms
                .iter()
                .any(|t| t.topology_key == "kubernetes.io/hostname"
                    && member_labels
                        .iter()
                        .all(|l| selects(t.label_selector.as_ref().expect("selector"), l))),
            "member {n} may share a node with another"
        );
    }

    // Service links exist only for Services with a cluster IP in the pods'
    // own namespace.
    for s in services(&m) {
        let name = name_of(&s.metadata);
        if name.starts_with("kube-dns-etcd-") {
            assert_eq!(
                s.metadata.namespace.as_deref(),
                Some("kube-system"),
                "{name}"
            );
            let ip = s.spec.as_ref().and_then(|sp| sp.cluster_ip.clone());
            assert_ne!(
                ip.as_deref(),
                Some("None"),
                "{name}: a headless Service has no link variable"
            );
        }
    }
    let in_kube_system = m.objects.iter().all(|o| match o {
        Object::StatefulSet(s) => s.metadata.namespace.as_deref() == Some("kube-system"),
        Object::Deployment(d) => d.metadata.namespace.as_deref() == Some("kube-system"),
        _ => true,
    });
    assert!(in_kube_system, "every workload beside the etcd Services");
    for t in templates.values() {
        // Every image is an upstream one we list or one of ours, tagged.
        for c in &t.spec.as_ref().expect("pod").containers {
            let image = c.image.clone().unwrap_or_default();
            if UPSTREAM_IMAGES.contains(&image.as_str()) {
                continue;
            }
            let (name, tag) = image.rsplit_once(':').expect("tagged image");
            assert!(
                our_images().iter().any(|i| i.name == name),
                "unknown image {image}"
            );
            assert_eq!(tag, IMAGE_TAG, "{image}");
        }
    }
}
