//! Rendering the templates and parsing them into typed objects.

use super::*;

// ---------------------------------------------------------------------------
// Rendering

/// The image prefix the tests render with: the manifests' own, so that the
/// images are the names of deploy/images.txt.
pub(crate) const TEST_IMAGE_PREFIX: &str = "localhost/kube-dns-rs";

/// Runs `deploy/render.sh FLAVOUR` with exactly the variables of `env`.
pub(crate) fn render_sh(flavour: &str, env: &[(&str, &str)]) -> std::process::Output {
    test_support::deploy::render_sh(flavour, env).expect("running bash deploy/render.sh")
}

/// What `deploy/render.sh <flavour>` prints with the test values (rendered
/// once per flavour and test binary).
pub(crate) fn rendered_stream(flavour: &str) -> String {
    static CACHE: std::sync::Mutex<BTreeMap<String, String>> =
        std::sync::Mutex::new(BTreeMap::new());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .entry(flavour.to_owned())
        .or_insert_with(|| {
            let settings = [
                ("DNS_DOMAIN", DOMAIN),
                ("DNS_SERVER_IP", SERVER_IP),
                ("DNS_REPLICAS", REPLICAS),
                ("IMAGE_PREFIX", TEST_IMAGE_PREFIX),
            ];
            test_support::deploy::render(flavour, &settings).unwrap_or_else(|e| panic!("{e:#}"))
        })
        .clone()
}

/// What `kubectl kustomize DIR` prints (DIR relative to the repository).
pub(crate) fn kustomized(dir: &str) -> String {
    test_support::deploy::kustomize(dir).unwrap_or_else(|e| panic!("{e:#}"))
}

/// The manifest files of one flavour (its kustomization's resources), sorted.
pub(crate) fn manifest_files(flavour: &str) -> Vec<PathBuf> {
    let dir = repo_root().join("deploy").join(flavour);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in {}", dir.display());
    files
}

/// The non-empty YAML documents of a multi-document stream.
pub(crate) fn documents(stream: &str, what: &str) -> Vec<serde_yaml::Value> {
    serde_yaml::Deserializer::from_str(stream)
        .enumerate()
        .map(|(i, doc)| {
            serde::Deserialize::deserialize(doc)
                .unwrap_or_else(|e| panic!("{what}: document {i} is not YAML: {e}"))
        })
        .filter(|doc: &serde_yaml::Value| !doc.is_null())
        .collect()
}

// ---------------------------------------------------------------------------
// Typed parsing

/// The objects a manifest may hold.
#[derive(Debug)]
pub(crate) enum Object {
    ReplicationController(Box<ReplicationController>),
    Deployment(Box<Deployment>),
    ConfigMap(Box<ConfigMap>),
    StatefulSet(Box<StatefulSet>),
    Role(Box<Role>),
    RoleBinding(Box<RoleBinding>),
    NetworkPolicy(Box<NetworkPolicy>),
    PodDisruptionBudget(Box<PodDisruptionBudget>),
    Service(Box<Service>),
    ServiceAccount(Box<ServiceAccount>),
    ClusterRole(Box<ClusterRole>),
    ClusterRoleBinding(Box<ClusterRoleBinding>),
}

/// Parses `doc` as `T`, then serialises it back and requires the same tree:
/// k8s-openapi silently drops fields it does not know, so a misspelt or
/// misplaced field only shows in the round trip.
pub(crate) fn typed<T: DeserializeOwned + Serialize>(doc: &serde_yaml::Value, what: &str) -> T {
    let value: T = serde_yaml::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{what}: does not parse as its k8s-openapi type: {e}"));
    let original = serde_json::to_value(doc).expect("YAML to JSON");
    let back = serde_json::to_value(&value).expect("serialising");
    if let Some(diff) = first_difference(&original, &back, "") {
        panic!("{what}: the k8s-openapi type does not keep the manifest as written: {diff}");
    }
    value
}

pub(crate) fn first_difference(
    a: &serde_json::Value,
    b: &serde_json::Value,
    path: &str,
) -> Option<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let here = format!("{path}.{k}");
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => first_difference(p, q, &here),
                    (Some(_), None) => Some(format!("{here} is not a field of the type")),
                    (None, _) => Some(format!("{here} appeared in the round trip")),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{path}: {a} became {b}")),
    }
}

pub(crate) fn parse_objects(stream: &str, what: &str) -> Vec<Object> {
    documents(stream, what)
        .iter()
        .enumerate()
        .map(|(i, doc)| {
            let kind = doc.get("kind").and_then(|k| k.as_str()).unwrap_or("");
            let what = format!("{what} document {i} ({kind})");
            match kind {
                "ReplicationController" => Object::ReplicationController(typed(doc, &what)),
                "Deployment" => Object::Deployment(typed(doc, &what)),
                "ConfigMap" => Object::ConfigMap(typed(doc, &what)),
                "StatefulSet" => Object::StatefulSet(typed(doc, &what)),
                "Role" => Object::Role(typed(doc, &what)),
                "RoleBinding" => Object::RoleBinding(typed(doc, &what)),
                "NetworkPolicy" => Object::NetworkPolicy(typed(doc, &what)),
                "PodDisruptionBudget" => Object::PodDisruptionBudget(typed(doc, &what)),
                "Service" => Object::Service(typed(doc, &what)),
                "ServiceAccount" => Object::ServiceAccount(typed(doc, &what)),
                "ClusterRole" => Object::ClusterRole(typed(doc, &what)),
                "ClusterRoleBinding" => Object::ClusterRoleBinding(typed(doc, &what)),
                other => panic!("{what}: unexpected kind {other:?}"),
            }
        })
        .collect()
}

/// The parsed objects of one flavour, rendered with the test values.
pub(crate) struct Manifests {
    pub(crate) flavour: &'static str,
    /// The cluster domain and the Service's cluster IP it was rendered with.
    pub(crate) domain: String,
    pub(crate) server_ip: String,
    pub(crate) objects: Vec<Object>,
}

impl Manifests {
    pub(crate) fn load(flavour: &'static str) -> Self {
        Self::from_stream(flavour, &rendered_stream(flavour))
    }

    /// The objects of a stream rendered with the test values (a flavour's,
    /// perhaps altered).
    pub(crate) fn from_stream(flavour: &'static str, stream: &str) -> Self {
        Self::rendered_with(flavour, DOMAIN, SERVER_IP, stream)
    }

    /// The objects of a stream rendered with cluster domain `domain`, as the
    /// kubelet sees them: each pod's ConfigMap settings resolved and
    /// expanded in the arguments (`integration_tests::kubelet_env`).
    pub(crate) fn rendered_with(
        flavour: &'static str,
        domain: &str,
        server_ip: &str,
        stream: &str,
    ) -> Self {
        let what = format!("deploy/{flavour}");
        let maps = integration_tests::kubelet_env::config_maps(stream)
            .unwrap_or_else(|e| panic!("{what}: {e:#}"));
        let mut objects = parse_objects(stream, &what);
        for object in &mut objects {
            let spec = match object {
                Object::ReplicationController(rc) => rc
                    .spec
                    .as_mut()
                    .and_then(|s| s.template.as_mut())
                    .and_then(|t| t.spec.as_mut()),
                Object::Deployment(d) => d.spec.as_mut().and_then(|s| s.template.spec.as_mut()),
                Object::StatefulSet(s) => s.spec.as_mut().and_then(|s| s.template.spec.as_mut()),
                _ => None,
            };
            if let Some(spec) = spec {
                integration_tests::kubelet_env::resolve_config_map_env(spec, &maps)
                    .unwrap_or_else(|e| panic!("{what}: {e:#}"));
            }
        }
        Manifests {
            flavour,
            domain: domain.to_owned(),
            server_ip: server_ip.to_owned(),
            objects,
        }
    }

    pub(crate) fn one<T>(&self, pick: impl Fn(&Object) -> Option<&T>) -> &T {
        let found: Vec<&T> = self.objects.iter().filter_map(pick).collect();
        assert_eq!(found.len(), 1, "deploy/{}: want exactly one", self.flavour);
        found[0]
    }

    pub(crate) fn service(&self) -> &Service {
        self.one(|o| match o {
            Object::Service(s) => Some(&**s),
            _ => None,
        })
    }

    /// The Deployment named `name`.
    pub(crate) fn deployment(&self, name: &str) -> &Deployment {
        self.one(|o| match o {
            Object::Deployment(d) if d.metadata.name.as_deref() == Some(name) => Some(&**d),
            _ => None,
        })
    }

    /// The pod template's labels and spec, of the RC or the DNS Deployment
    /// (`kube-dns`; not `kube-dns-autoscaler`).
    pub(crate) fn pod(&self) -> (BTreeMap<String, String>, &PodSpec) {
        let template = self.one(|o| match o {
            Object::ReplicationController(rc) => rc.spec.as_ref()?.template.as_ref(),
            Object::Deployment(d) if d.metadata.name.as_deref() == Some("kube-dns") => {
                Some(&d.spec.as_ref()?.template)
            }
            _ => None,
        });
        let labels = template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        (labels, template.spec.as_ref().expect("pod template spec"))
    }

    /// Every pod template of every workload (RC, Deployment, StatefulSet),
    /// with the workload's name.
    pub(crate) fn pod_specs(&self) -> Vec<(String, &PodSpec)> {
        self.templates()
            .into_iter()
            .filter_map(|(name, template)| Some((name, template.spec.as_ref()?)))
            .collect()
    }

    /// Every workload's pod template, with the workload's name.
    pub(crate) fn templates(&self) -> Vec<(String, &PodTemplateSpec)> {
        self.objects
            .iter()
            .filter_map(|o| {
                let (meta, template) = match o {
                    Object::ReplicationController(rc) => {
                        (&rc.metadata, rc.spec.as_ref()?.template.as_ref()?)
                    }
                    Object::Deployment(d) => (&d.metadata, &d.spec.as_ref()?.template),
                    Object::StatefulSet(s) => (&s.metadata, &s.spec.as_ref()?.template),
                    _ => return None,
                };
                Some((meta.name.clone().unwrap_or_default(), template))
            })
            .collect()
    }
}

/// A pod template's labels.
pub(crate) fn template_labels(t: &PodTemplateSpec) -> BTreeMap<String, String> {
    t.metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}

/// Whether a label selector (matchLabels, and matchExpressions with `In`)
/// selects a pod with `labels`.
pub(crate) fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expressions = selector.match_expressions.iter().flatten().all(|e| {
        assert_eq!(e.operator, "In", "only In expressions are understood here");
        let values = e.values.clone().unwrap_or_default();
        labels.get(&e.key).is_some_and(|v| values.contains(v))
    });
    by_labels && by_expressions
}
