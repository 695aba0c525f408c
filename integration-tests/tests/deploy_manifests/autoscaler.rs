//! kube-dns-autoscaler (the cluster-proportional autoscaler of the modern
//! flavours): its target, parameters, security settings and RBAC.

use super::ha::*;
use super::support::*;
use super::*;
use k8s_openapi::api::rbac::v1::{PolicyRule, Subject};

/// `--flag=value` arguments after the command's program.
fn long_flags(command: &[String], what: &str) -> BTreeMap<String, String> {
    let mut flags = BTreeMap::new();
    for arg in &command[1..] {
        let (k, v) = arg
            .strip_prefix("--")
            .and_then(|a| a.split_once('='))
            .unwrap_or_else(|| panic!("{what}: {arg:?} is not --flag=value"));
        assert!(
            flags.insert(k.to_owned(), v.to_owned()).is_none(),
            "{what}: --{k} twice"
        );
    }
    flags
}

/// (namespace, or None for cluster-wide; API group; resource; name, or
/// None for any; verb).
type Grant = (Option<String>, String, String, Option<String>, String);

fn expand_rules(rules: &[PolicyRule], scope: Option<&str>) -> Vec<Grant> {
    let mut out = Vec::new();
    for rule in rules {
        assert!(rule.non_resource_urls.is_none());
        let names: Vec<Option<String>> = match &rule.resource_names {
            Some(n) => n.iter().cloned().map(Some).collect(),
            None => vec![None],
        };
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for name in &names {
                    for verb in &rule.verbs {
                        out.push((
                            scope.map(str::to_owned),
                            group.clone(),
                            resource.clone(),
                            name.clone(),
                            verb.clone(),
                        ));
                    }
                }
            }
        }
    }
    out
}

/// Everything the manifests grant the ServiceAccount `kube-system/account`,
/// through every binding that names it. Each such binding names it alone.
fn granted_to(m: &Manifests, account: &str) -> BTreeSet<Grant> {
    let is_account = |s: &Subject| {
        s.kind == "ServiceAccount"
            && s.name == account
            && s.namespace.as_deref() == Some("kube-system")
    };
    let cluster_role = |name: &str| -> Vec<PolicyRule> {
        m.one(|o| match o {
            Object::ClusterRole(r) if r.metadata.name.as_deref() == Some(name) => Some(&**r),
            _ => None,
        })
        .rules
        .clone()
        .unwrap_or_default()
    };
    let role = |name: &str, namespace: &str| -> Vec<PolicyRule> {
        m.one(|o| match o {
            Object::Role(r)
                if r.metadata.name.as_deref() == Some(name)
                    && r.metadata.namespace.as_deref() == Some(namespace) =>
            {
                Some(&**r)
            }
            _ => None,
        })
        .rules
        .clone()
        .unwrap_or_default()
    };
    let mut granted = BTreeSet::new();
    for o in &m.objects {
        let (subjects, role_ref, namespace) = match o {
            Object::ClusterRoleBinding(b) => (&b.subjects, &b.role_ref, None),
            Object::RoleBinding(b) => (&b.subjects, &b.role_ref, b.metadata.namespace.as_deref()),
            _ => continue,
        };
        let subjects = subjects.clone().unwrap_or_default();
        if !subjects.iter().any(is_account) {
            continue;
        }
        assert_eq!(subjects.len(), 1, "{account}'s bindings name it alone");
        let rules = match (role_ref.kind.as_str(), namespace) {
            ("ClusterRole", scope) => cluster_role(&role_ref.name)
                .into_iter()
                .map(|r| (r, scope))
                .collect::<Vec<_>>(),
            ("Role", Some(ns)) => role(&role_ref.name, ns)
                .into_iter()
                .map(|r| (r, Some(ns)))
                .collect(),
            other => panic!("{account}: binding to {other:?}"),
        };
        for (rule, scope) in rules {
            granted.extend(expand_rules(&[rule], scope));
        }
    }
    granted
}

/// kube-dns-autoscaler scales the DNS Deployment of these manifests from
/// the ConfigMap they ship (no `--default-params`; `min` being
/// DNS_REPLICAS, and a `max`), runs locked down like the other modern containers,
/// and its own ServiceAccount has exactly what it uses: list and watch the
/// Nodes, get its ConfigMap, get and update its target's scale.
fn check_autoscaler(m: &Manifests) {
    let f = m.flavour;
    let deployment = m.deployment(AUTOSCALER);
    assert_eq!(
        deployment.metadata.namespace.as_deref(),
        Some("kube-system")
    );
    let spec = deployment.spec.as_ref().expect("spec");
    assert_eq!(spec.replicas, Some(1), "{f}");
    let pod = spec.template.spec.as_ref().expect("pod spec");
    assert_eq!(pod.containers.len(), 1, "{f}");
    let c = &pod.containers[0];
    let what = format!("{f} {AUTOSCALER}");
    assert_eq!(c.image.as_deref(), Some(AUTOSCALER_IMAGE), "{what}");
    assert!(c.args.is_none(), "{what}: all in command, as upstream");
    let command = c.command.clone().expect("command");
    assert_eq!(command[0], "/cluster-proportional-autoscaler", "{what}");
    let flags = long_flags(&command, &what);
    assert_eq!(
        flags.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        ["configmap", "logtostderr", "namespace", "target", "v"].into(),
        "{what}: flags"
    );
    // Logs go to stderr only: no log files on the read-only root.
    assert_eq!(flags["logtostderr"], "true", "{what}");

    // The target: the DNS Deployment, the one the kube-dns Service sends to.
    let namespace = flags["namespace"].clone();
    let (kind, target) = flags["target"].split_once('/').expect("kind/name");
    assert_eq!(kind, "deployment", "{what}: --target");
    assert_eq!(target, DNS, "{what}: --target names another Deployment");
    let dns = m.deployment(target);
    assert_eq!(dns.metadata.namespace.as_deref(), Some(namespace.as_str()));
    let service = m.one(|o| match o {
        Object::Service(s) if s.metadata.name.as_deref() == Some("kube-dns") => Some(&**s),
        _ => None,
    });
    let dns_labels = template_labels(&dns.spec.as_ref().expect("spec").template);
    let service_selector = service.spec.as_ref().and_then(|s| s.selector.clone());
    assert!(
        service_selector
            .expect("service selector")
            .iter()
            .all(|(k, v)| dns_labels.get(k) == Some(v)),
        "{what}: the target's pods are not the kube-dns Service's"
    );

    // The parameters: the shipped ConfigMap, the same as --default-params.
    let config_map = m.one(|o| match o {
        Object::ConfigMap(c) if c.metadata.name.as_ref() == Some(&flags["configmap"]) => Some(&**c),
        _ => None,
    });
    assert_eq!(
        config_map.metadata.namespace.as_deref(),
        Some(namespace.as_str())
    );
    assert!(
        !flags.contains_key("default-params"),
        "{what}: --default-params would be a second copy of the ConfigMap's parameters"
    );
    let data = config_map.data.clone().unwrap_or_default();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["linear"],
        "{what}: ConfigMap keys"
    );
    let linear: serde_json::Value = serde_json::from_str(&data["linear"]).expect("JSON");
    // A max: each replica of the kubernetes flavour opens its own API
    // watches, and each of shared-etcd its own etcd watch (the comment
    // above the ConfigMap says why each number).
    let max = if f == "kubernetes" { 20 } else { 50 };
    let want = serde_json::json!({
        "coresPerReplica": 256,
        "nodesPerReplica": 16,
        "min": REPLICAS.parse::<u32>().unwrap(),
        "max": max,
        "preventSinglePointFailure": true,
        "includeUnschedulableNodes": true,
    });
    assert_eq!(linear, want, "{what}: parameters");

    // Locked down as the other modern containers, and as critical as DNS.
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-cluster-critical"),
        "{what}"
    );
    assert!(
        pod.tolerations
            .iter()
            .flatten()
            .any(|t| t.key.as_deref() == Some("CriticalAddonsOnly")),
        "{what}"
    );
    let psc = pod.security_context.as_ref().expect("pod securityContext");
    assert_eq!(psc.run_as_non_root, Some(true), "{what}");
    assert!(psc.run_as_user.is_some_and(|u| u != 0), "{what}");
    assert_eq!(
        psc.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
        Some("RuntimeDefault"),
        "{what}"
    );
    let sc = c.security_context.as_ref().expect("securityContext");
    assert_eq!(sc.allow_privilege_escalation, Some(false), "{what}");
    assert_eq!(sc.read_only_root_filesystem, Some(true), "{what}");
    assert_ne!(sc.privileged, Some(true), "{what}");
    let caps = sc.capabilities.as_ref().expect("capabilities");
    assert_eq!(
        caps.drop.as_deref(),
        Some(&["ALL".to_owned()][..]),
        "{what}"
    );
    assert!(caps.add.is_none(), "{what}");
    let requests = c.resources.as_ref().and_then(|r| r.requests.clone());
    assert!(
        requests.is_some_and(|r| r.contains_key("cpu") && r.contains_key("memory")),
        "{what}: requests"
    );

    // RBAC: its own account, exactly what it uses.
    let account = pod
        .service_account_name
        .clone()
        .expect("serviceAccountName");
    let dns_account = dns.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    let dns_account = dns_account.and_then(|p| p.service_account_name.clone());
    assert_ne!(
        Some(&account),
        dns_account.as_ref(),
        "{what}: its own account"
    );
    m.one(|o| match o {
        Object::ServiceAccount(sa)
            if sa.metadata.name.as_ref() == Some(&account)
                && sa.metadata.namespace.as_deref() == Some("kube-system") =>
        {
            Some(&**sa)
        }
        _ => None,
    });
    let ns = Some(namespace.clone());
    let mut want: BTreeSet<Grant> = BTreeSet::new();
    for verb in ["list", "watch"] {
        want.insert((None, String::new(), "nodes".into(), None, verb.into()));
    }
    want.insert((
        ns.clone(),
        String::new(),
        "configmaps".into(),
        Some(flags["configmap"].clone()),
        "get".into(),
    ));
    for verb in ["get", "update"] {
        want.insert((
            ns.clone(),
            "apps".into(),
            "deployments/scale".into(),
            Some(target.to_owned()),
            verb.into(),
        ));
    }
    assert_eq!(granted_to(m, &account), want, "{what}: RBAC");
    // And the DNS pods' account gets none of it.
    if let Some(dns_account) = dns_account {
        let theirs = granted_to(m, &dns_account);
        assert!(
            theirs.iter().all(|g| !want.contains(g)),
            "{f}: the DNS pods' account can scale or list nodes"
        );
    }
}

#[test]
fn the_autoscaler_scales_the_dns_deployment_with_only_what_it_needs() {
    for flavour in MODERN {
        check_autoscaler(&Manifests::load(flavour));
    }
}

#[test]
fn autoscaler_checks_catch_a_wrong_target_parameter_or_grant() {
    let autoscaler_command = |from: &'static str, to: &'static str| {
        move |o: &mut Object| {
            if let Object::Deployment(d) = o {
                if d.metadata.name.as_deref() == Some(AUTOSCALER) {
                    let pod = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
                    for arg in pod.containers[0].command.iter_mut().flatten() {
                        *arg = arg.replace(from, to);
                    }
                }
            }
        }
    };
    let m = altered(
        "kubernetes",
        autoscaler_command("deployment/kube-dns", "deployment/coredns"),
    );
    assert!(fails(check_autoscaler, &m), "--target=deployment/coredns");
    let config_map = |from: &'static str, to: &'static str| {
        move |o: &mut Object| {
            if let Object::ConfigMap(c) = o {
                if c.metadata.name.as_deref() == Some(AUTOSCALER) {
                    let data = c.data.as_mut().unwrap();
                    let linear = data["linear"].replace(from, to);
                    data.insert("linear".into(), linear);
                }
            }
        }
    };
    let m = altered("shared-etcd", config_map(",\"max\":50", ""));
    assert!(fails(check_autoscaler, &m), "no max");
    let m = altered("kubernetes", config_map("\"max\":20", "\"max\":200"));
    assert!(fails(check_autoscaler, &m), "a max past the reasoned one");
    let m = altered("kubernetes", |o| {
        if let Object::Deployment(d) = o {
            if d.metadata.name.as_deref() == Some(AUTOSCALER) {
                let pod = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
                pod.containers[0]
                    .command
                    .as_mut()
                    .unwrap()
                    .push("--default-params={}".into());
            }
        }
    });
    assert!(
        fails(check_autoscaler, &m),
        "--default-params beside the ConfigMap"
    );
    let m = altered("kubernetes", |o| {
        if let Object::Role(r) = o {
            if r.metadata.name.as_deref() == Some("kube-dns-rs-autoscaler") {
                r.rules.as_mut().unwrap()[0].verbs.push("create".into());
            }
        }
    });
    assert!(fails(check_autoscaler, &m), "create on ConfigMaps");
    let m = altered("kubernetes", |o| {
        if let Object::RoleBinding(b) = o {
            if b.role_ref.name == "kube-dns-rs-config-map" {
                let mut extra = b.subjects.clone().unwrap()[0].clone();
                extra.name = AUTOSCALER.into();
                b.subjects.as_mut().unwrap().push(extra);
            }
        }
    });
    assert!(
        fails(check_autoscaler, &m),
        "the autoscaler bound to kube2sky's role"
    );
}
