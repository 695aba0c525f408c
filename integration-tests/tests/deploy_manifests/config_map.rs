//! The modern manifests' part of kube-dns's ConfigMap and autopath: kube2sky follows
//! `kube-system/kube-dns`, skydns forwards stub zones, and a Role grants
//! exactly what that needs, bound to the pod's account.

use super::support::*;
use super::*;

/// `what`'s kube2sky follows the ConfigMap and its skydns has `-stubzones`;
/// the Role `kube-dns-rs-config-map` reads that one ConfigMap and writes
/// Events, nothing else, for `account`.
pub(crate) fn check_config_map_access(
    m: &Manifests,
    kube2sky: &kube2sky::config::Config,
    skydns: &skydns::config::Config,
    account: &str,
) {
    let what = &m.flavour;
    let (namespace, name) = kube2sky.config_map.clone().expect("--config-map");
    assert_eq!(
        (namespace.as_str(), name.as_str()),
        ("kube-system", "kube-dns"),
        "{what}"
    );
    assert!(
        skydns.handler.stubzones,
        "{what}: the ConfigMap's stub domains need -stubzones"
    );
    // Autopath finds a client's namespace through kube2sky's pod records.
    assert!(skydns.handler.autopath.is_some(), "{what}: -autopath");
    assert!(
        kube2sky.features.pods,
        "{what}: -autopath needs kube2sky --pods"
    );
    let role = m.one(|o| match o {
        Object::Role(r) if r.metadata.name.as_deref() == Some("kube-dns-rs-config-map") => {
            Some(&**r)
        }
        _ => None,
    });
    assert_eq!(
        role.metadata.namespace.as_deref(),
        Some(namespace.as_str()),
        "{what}"
    );
    let mut granted: BTreeSet<(String, String, Option<String>, String)> = BTreeSet::new();
    for rule in role.rules.iter().flatten() {
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                let names: Vec<Option<String>> = match &rule.resource_names {
                    Some(n) => n.iter().cloned().map(Some).collect(),
                    None => vec![None],
                };
                for verb in &rule.verbs {
                    for n in &names {
                        granted.insert((group.clone(), resource.clone(), n.clone(), verb.clone()));
                    }
                }
            }
        }
    }
    let mut want = BTreeSet::new();
    for verb in ["get", "list", "watch"] {
        want.insert((
            String::new(),
            "configmaps".into(),
            Some(name.clone()),
            verb.into(),
        ));
    }
    for verb in ["create", "patch"] {
        want.insert(("events.k8s.io".into(), "events".into(), None, verb.into()));
    }
    assert_eq!(granted, want, "{what}");
    let binding = m.one(|o| match o {
        Object::RoleBinding(b) if b.role_ref.name == "kube-dns-rs-config-map" => Some(&**b),
        _ => None,
    });
    assert_eq!(binding.role_ref.kind, "Role", "{what}");
    assert_eq!(
        binding.metadata.namespace, role.metadata.namespace,
        "{what}"
    );
    let subjects = binding.subjects.clone().unwrap_or_default();
    assert_eq!(subjects.len(), 1, "{what}");
    assert_eq!(subjects[0].kind, "ServiceAccount", "{what}");
    assert_eq!(subjects[0].name, account, "{what}");
}
