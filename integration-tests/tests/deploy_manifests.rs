//! The deployment files under `deploy/` and the image build:
//!
//! - every manifest template (`deploy/{legacy,kubernetes}/*.yaml.in`), rendered
//!   with the substitution of `deploy/render.sh`, parses document by document
//!   into k8s-openapi types, with no field the types do not know (checked by
//!   a serialisation round trip, since k8s-openapi ignores unknown fields);
//! - `deploy/render.sh` prints exactly those rendered documents;
//! - every container argument list for one of our images is accepted by that
//!   binary's own flag parser and validation, with the values the pod's
//!   wiring needs (ports, domain, etcd URL), and a corrupted list is not;
//! - the pod, RBAC and security settings the issue asks for are there;
//! - the Dockerfile builds with `scripts/build-release.sh` only, whose one
//!   cargo command builds exactly the three binaries, all `[[bin]]` targets
//!   of the workspace, and the image stages match the manifests' images.
//!
//! Nothing here needs a cluster or Docker.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Container, PodSpec, Probe, ReplicationController, Service, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Values the tests render with; not the defaults, so a placeholder that
/// was not substituted, or a hard-coded default, shows.
const DOMAIN: &str = "k8s.example";
const SERVER_IP: &str = "10.96.0.10";
const REPLICAS: &str = "2";

const ETCD_IMAGE: &str = "registry.k8s.io/etcd:3.5.15-0";
const IMAGE_TAG: &str = "0.1.0";

/// Our images: (image name, Dockerfile stage, binary, crate that owns it).
const OUR_IMAGES: [(&str, &str, &str, &str); 3] = [
    ("kube-dns-rs/skydns", "skydns", "skydns", "skydns"),
    ("kube-dns-rs/kube2sky", "kube2sky", "kube2sky", "kube2sky"),
    (
        "kube-dns-rs/exechealthz",
        "exechealthz",
        "exec-healthz",
        "healthz",
    ),
];

const FLAVOURS: [&str; 2] = ["legacy", "kubernetes"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("integration-tests lives in the workspace")
        .to_path_buf()
}

fn read(rel: &str) -> String {
    let path = repo_root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

// ---------------------------------------------------------------------------
// Rendering

/// The substitution of `deploy/render.sh` (its three `sed -e` expressions):
/// each placeholder replaced everywhere, as plain text.
fn render(template: &str, domain: &str, server_ip: &str, replicas: &str) -> String {
    template
        .replace("$DNS_DOMAIN", domain)
        .replace("$DNS_SERVER_IP", server_ip)
        .replace("$DNS_REPLICAS", replicas)
}

/// The template files of one flavour, sorted like the shell glob
/// `deploy/<flavour>/*.yaml.in` sorts them.
fn templates(flavour: &str) -> Vec<PathBuf> {
    let dir = repo_root().join("deploy").join(flavour);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    files.sort();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy();
        assert!(
            name.ends_with(".yaml.in"),
            "{}: every file in deploy/{flavour}/ must be a .yaml.in template, \
             or render.sh and this test would skip it",
            f.display()
        );
    }
    assert!(!files.is_empty(), "no templates in {}", dir.display());
    files
}

/// What `deploy/render.sh <flavour>` must print: the rendered templates,
/// separated by `---` lines.
fn rendered_stream(flavour: &str) -> String {
    templates(flavour)
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).expect("reading template");
            assert!(
                text.ends_with('\n'),
                "{}: must end with a newline",
                path.display()
            );
            render(&text, DOMAIN, SERVER_IP, REPLICAS)
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

/// The non-empty YAML documents of a multi-document stream.
fn documents(stream: &str, what: &str) -> Vec<serde_yaml::Value> {
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
enum Object {
    ReplicationController(Box<ReplicationController>),
    Deployment(Box<Deployment>),
    Service(Box<Service>),
    ServiceAccount(Box<ServiceAccount>),
    ClusterRole(Box<ClusterRole>),
    ClusterRoleBinding(Box<ClusterRoleBinding>),
}

/// Parses `doc` as `T`, then serialises it back and requires the same tree:
/// k8s-openapi silently drops fields it does not know, so a misspelt or
/// misplaced field only shows in the round trip.
fn typed<T: DeserializeOwned + Serialize>(doc: &serde_yaml::Value, what: &str) -> T {
    let value: T = serde_yaml::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{what}: does not parse as its k8s-openapi type: {e}"));
    let original = serde_json::to_value(doc).expect("YAML to JSON");
    let back = serde_json::to_value(&value).expect("serialising");
    if let Some(diff) = first_difference(&original, &back, "") {
        panic!("{what}: the k8s-openapi type does not keep the manifest as written: {diff}");
    }
    value
}

fn first_difference(a: &serde_json::Value, b: &serde_json::Value, path: &str) -> Option<String> {
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

fn parse_objects(stream: &str, what: &str) -> Vec<Object> {
    documents(stream, what)
        .iter()
        .enumerate()
        .map(|(i, doc)| {
            let kind = doc.get("kind").and_then(|k| k.as_str()).unwrap_or("");
            let what = format!("{what} document {i} ({kind})");
            match kind {
                "ReplicationController" => Object::ReplicationController(typed(doc, &what)),
                "Deployment" => Object::Deployment(typed(doc, &what)),
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
struct Manifests {
    flavour: &'static str,
    objects: Vec<Object>,
}

impl Manifests {
    fn load(flavour: &'static str) -> Self {
        let stream = rendered_stream(flavour);
        assert!(
            !stream.contains("$DNS_"),
            "deploy/{flavour}: a $DNS_ placeholder is left after rendering"
        );
        let objects = parse_objects(&stream, &format!("deploy/{flavour}"));
        Manifests { flavour, objects }
    }

    fn one<T>(&self, pick: impl Fn(&Object) -> Option<&T>) -> &T {
        let found: Vec<&T> = self.objects.iter().filter_map(pick).collect();
        assert_eq!(found.len(), 1, "deploy/{}: want exactly one", self.flavour);
        found[0]
    }

    fn service(&self) -> &Service {
        self.one(|o| match o {
            Object::Service(s) => Some(&**s),
            _ => None,
        })
    }

    /// The pod template's labels and spec, of the RC or the Deployment.
    fn pod(&self) -> (BTreeMap<String, String>, &PodSpec) {
        let template = self.one(|o| match o {
            Object::ReplicationController(rc) => rc.spec.as_ref()?.template.as_ref(),
            Object::Deployment(d) => Some(&d.spec.as_ref()?.template),
            _ => None,
        });
        let labels = template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        (labels, template.spec.as_ref().expect("pod template spec"))
    }
}

// ---------------------------------------------------------------------------
// Container arguments against our flag parsers

/// What a binary made of a container's arguments.
#[derive(Debug)]
enum Accepted {
    Skydns(Box<skydns::config::Config>),
    Kube2sky(Box<kube2sky::config::Config>),
    Healthz(healthz::flags::Config),
}

fn skydns_accepts(args: &[String]) -> Result<Accepted, String> {
    let argv = std::iter::once("skydns".to_owned())
        .chain(args.iter().cloned())
        .map(OsString::from);
    let flags = skydns::config::parse_args(argv).map_err(|e| e.to_string())?;
    let config = skydns::config::Settings::from_flags(&flags)
        .finish(&flags, || Ok(vec![]))
        .map_err(|e| e.0)?;
    Ok(Accepted::Skydns(Box::new(config)))
}

fn kube2sky_accepts(args: &[String]) -> Result<Accepted, String> {
    let argv = std::iter::once("kube2sky".to_owned()).chain(args.iter().cloned());
    let flags = kube2sky::config::Flags::parse_from_go_style(argv).map_err(|e| e.to_string())?;
    let config = flags.into_config().map_err(|e| e.to_string())?;
    Ok(Accepted::Kube2sky(Box::new(config)))
}

/// `healthz::flags::parse` takes the arguments after the program name, as
/// exec-healthz's main passes them.
fn healthz_accepts(args: &[String]) -> Result<Accepted, String> {
    match healthz::flags::parse(args.iter().cloned()) {
        Ok(healthz::flags::Parsed::Run(config)) => Ok(Accepted::Healthz(config)),
        Ok(healthz::flags::Parsed::Help) => Err("asks for help instead of running".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// `kube-dns-rs/skydns:0.1.0` → the parser of the binary in that image.
type Parser = fn(&[String]) -> Result<Accepted, String>;

fn parser_for(image: &str) -> Option<Parser> {
    let (name, _tag) = image.rsplit_once(':')?;
    match name {
        "kube-dns-rs/skydns" => Some(skydns_accepts),
        "kube-dns-rs/kube2sky" => Some(kube2sky_accepts),
        "kube-dns-rs/exechealthz" => Some(healthz_accepts),
        _ => None,
    }
}

/// Runs one container's arguments through its binary's parser. Containers
/// with a `command` (etcd) are not ours and return `None`.
fn check_args(c: &Container, what: &str) -> Option<Result<Accepted, String>> {
    let image = c.image.as_deref().unwrap_or("");
    if c.command.is_some() {
        assert!(
            parser_for(image).is_none(),
            "{what}: our images are run through their entrypoint; no command"
        );
        return None;
    }
    let parse = parser_for(image)
        .unwrap_or_else(|| panic!("{what}: image {image:?} has no command and is not one of ours"));
    let args = c.args.clone().unwrap_or_default();
    // Every argument is one `-flag=value`: a value split into its own list
    // item would be a positional argument, which Go's flag package (and so
    // exec-healthz) silently treats as the end of the flags.
    for arg in &args {
        assert!(
            arg.starts_with('-') && arg.contains('='),
            "{what}: argument {arg:?} is not of the form -flag=value"
        );
    }
    Some(parse(&args))
}

fn port_number(port: &IntOrString) -> i32 {
    match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => panic!("probe port {s:?}: use numbers"),
    }
}

/// `(path, port)` of an HTTP GET probe.
fn http_get(probe: Option<&Probe>, what: &str) -> (String, i32) {
    let get = probe
        .and_then(|p| p.http_get.as_ref())
        .unwrap_or_else(|| panic!("{what}: no httpGet probe"));
    (get.path.clone().unwrap_or_default(), port_number(&get.port))
}

fn container<'a>(pod: &'a PodSpec, name: &str) -> &'a Container {
    pod.containers
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

/// The four containers' arguments are accepted, and they wire the pod
/// together: kube2sky and skydns use the etcd the etcd container serves, the
/// probes hit the ports the binaries listen on, the domain is the rendered one.
fn check_pod_wiring(m: &Manifests) {
    let (_, pod) = m.pod();
    let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["etcd", "kube2sky", "skydns", "healthz"],
        "{}",
        m.flavour
    );

    let etcd = container(pod, "etcd");
    assert_eq!(etcd.image.as_deref(), Some(ETCD_IMAGE));
    let command = etcd.command.clone().expect("etcd has a command");
    assert_eq!(command[0], "/usr/local/bin/etcd");
    let flag_value = |flag: &str| {
        let i = command.iter().position(|a| a == flag);
        i.and_then(|i| command.get(i + 1)).cloned()
    };
    let client_urls: BTreeSet<String> = flag_value("-listen-client-urls")
        .expect("etcd -listen-client-urls")
        .split(',')
        .map(str::to_owned)
        .collect();
    let expected: BTreeSet<String> = ["http://127.0.0.1:2379", "http://127.0.0.1:4001"]
        .map(String::from)
        .into();
    assert_eq!(client_urls, expected);
    let data_dir = flag_value("-data-dir").expect("etcd -data-dir");
    let mounts = etcd.volume_mounts.clone().unwrap_or_default();
    assert!(
        mounts
            .iter()
            .any(|vm| vm.name == "etcd-storage" && data_dir.starts_with(&vm.mount_path)),
        "{}: etcd's data dir {data_dir} is not on the etcd-storage volume",
        m.flavour
    );

    let mut checked = BTreeSet::new();
    for c in &pod.containers {
        let what = format!("deploy/{} container {}", m.flavour, c.name);
        let Some(result) = check_args(c, &what) else {
            continue;
        };
        let image = c.image.clone().unwrap_or_default();
        assert!(
            image.ends_with(&format!(":{IMAGE_TAG}")),
            "{what}: image {image} is not tagged {IMAGE_TAG}"
        );
        match result.unwrap_or_else(|e| panic!("{what}: arguments rejected: {e}")) {
            Accepted::Skydns(config) => {
                assert_eq!(config.zone.domain, format!("{DOMAIN}."), "{what}");
                assert_eq!(config.addr.to_string(), "0.0.0.0:53", "{what}");
                assert!(!config.ns_rotate, "{what}: -ns-rotate=false as in 1.2");
                assert_eq!(config.etcd.endpoints, ["http://127.0.0.1:4001"], "{what}");
                assert!(client_urls.contains(&config.etcd.endpoints[0]));
                let ports: BTreeSet<(i32, String)> = c
                    .ports
                    .iter()
                    .flatten()
                    .map(|p| (p.container_port, p.protocol.clone().unwrap_or_default()))
                    .collect();
                let want: BTreeSet<(i32, String)> =
                    [(53, "UDP".to_owned()), (53, "TCP".to_owned())].into();
                assert_eq!(ports, want, "{what}");
            }
            Accepted::Kube2sky(config) => {
                assert_eq!(config.domain, format!("{DOMAIN}."), "{what}");
                assert_eq!(config.etcd.endpoints, ["http://127.0.0.1:4001"], "{what}");
                assert!(client_urls.contains(&config.etcd.endpoints[0]));
                let readiness = http_get(c.readiness_probe.as_ref(), &what);
                assert_eq!(
                    readiness,
                    ("/readiness".to_owned(), i32::from(config.healthz_port)),
                    "{what}: readiness must hit kube2sky's own /readiness"
                );
                assert!(c.liveness_probe.is_some(), "{what}: liveness probe");
            }
            Accepted::Healthz(config) => {
                assert_eq!(
                    config.cmd,
                    format!("nslookup kubernetes.default.svc.{DOMAIN} 127.0.0.1 >/dev/null"),
                    "{what}"
                );
                assert_eq!(config.port, 8080, "{what}");
                let declared: Vec<i32> =
                    c.ports.iter().flatten().map(|p| p.container_port).collect();
                assert_eq!(declared, [i32::from(config.port)], "{what}");
            }
        }
        checked.insert(c.name.clone());
    }
    assert_eq!(
        checked,
        ["kube2sky", "skydns", "healthz"].map(String::from).into(),
        "{}: every one of our containers is checked",
        m.flavour
    );

    // Every HTTP probe in the pod hits a port some container listens on:
    // 8080 (exec-healthz) or 8081 (kube2sky's --healthz-port default).
    for c in &pod.containers {
        for probe in [&c.liveness_probe, &c.readiness_probe]
            .into_iter()
            .flatten()
        {
            let (path, port) = http_get(Some(probe), &c.name);
            assert!(
                matches!(
                    (path.as_str(), port),
                    ("/healthz", 8080 | 8081) | ("/readiness", 8081)
                ),
                "deploy/{} container {}: probe {path} on {port}",
                m.flavour,
                c.name
            );
        }
    }

    // Resources: requests and limits for cpu and memory everywhere.
    for c in &pod.containers {
        let r = c.resources.as_ref().expect("resources");
        for map in [&r.requests, &r.limits] {
            let map = map.as_ref().expect("requests and limits");
            assert!(
                map.contains_key("cpu") && map.contains_key("memory"),
                "{}",
                c.name
            );
        }
    }
    assert_eq!(pod.dns_policy.as_deref(), Some("Default"), "{}", m.flavour);
    let volumes: BTreeSet<&str> = pod
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    for c in &pod.containers {
        for vm in c.volume_mounts.iter().flatten() {
            assert!(
                volumes.contains(vm.name.as_str()),
                "{}: {}",
                c.name,
                vm.name
            );
        }
    }
}

fn check_service(m: &Manifests) {
    let svc = m.service();
    let meta = &svc.metadata;
    assert_eq!(meta.name.as_deref(), Some("kube-dns"));
    assert_eq!(meta.namespace.as_deref(), Some("kube-system"));
    let spec = svc.spec.as_ref().expect("service spec");
    assert_eq!(spec.cluster_ip.as_deref(), Some(SERVER_IP));
    let ports: Vec<(String, i32, String)> = spec
        .ports
        .iter()
        .flatten()
        .map(|p| {
            (
                p.name.clone().unwrap_or_default(),
                p.port,
                p.protocol.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [
            ("dns".to_owned(), 53, "UDP".to_owned()),
            ("dns-tcp".to_owned(), 53, "TCP".to_owned())
        ]
    );
    let (labels, _) = m.pod();
    for (k, v) in spec.selector.iter().flatten() {
        assert_eq!(labels.get(k), Some(v), "{}: selector {k}", m.flavour);
    }
}

// ---------------------------------------------------------------------------
// Tests: manifests

#[test]
fn legacy_manifests_parse_and_args_are_accepted() {
    let m = Manifests::load("legacy");
    assert_eq!(m.objects.len(), 2, "the RC and the Service");
    let rc = m.one(|o| match o {
        Object::ReplicationController(rc) => Some(&**rc),
        _ => None,
    });
    assert_eq!(rc.metadata.name.as_deref(), Some("kube-dns-v11"));
    assert_eq!(rc.metadata.namespace.as_deref(), Some("kube-system"));
    let spec = rc.spec.as_ref().expect("rc spec");
    assert_eq!(
        spec.replicas.map(|r| r.to_string()).as_deref(),
        Some(REPLICAS)
    );
    let want: BTreeMap<String, String> = [("k8s-app", "kube-dns"), ("version", "v11")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into();
    assert_eq!(spec.selector.as_ref(), Some(&want));
    let (labels, pod) = m.pod();
    for (k, v) in &want {
        assert_eq!(labels.get(k), Some(v));
    }
    // 1.2's probes: kube2sky's liveness is the healthz sidecar's nslookup.
    let kube2sky = container(pod, "kube2sky");
    assert_eq!(
        http_get(kube2sky.liveness_probe.as_ref(), "kube2sky"),
        ("/healthz".to_owned(), 8080)
    );
    check_pod_wiring(&m);
    check_service(&m);
}

#[test]
fn kubernetes_manifests_parse_and_args_are_accepted() {
    let m = Manifests::load("kubernetes");
    check_pod_wiring(&m);
    check_service(&m);

    let sa = m.one(|o| match o {
        Object::ServiceAccount(sa) => Some(&**sa),
        _ => None,
    });
    let role = m.one(|o| match o {
        Object::ClusterRole(r) => Some(&**r),
        _ => None,
    });
    let binding = m.one(|o| match o {
        Object::ClusterRoleBinding(b) => Some(&**b),
        _ => None,
    });
    let deployment = m.one(|o| match o {
        Object::Deployment(d) => Some(&**d),
        _ => None,
    });

    // Least privilege: read Services, Endpoints and Pods, nothing else.
    let rules = role.rules.clone().unwrap_or_default();
    assert_eq!(rules.len(), 1, "one rule");
    let rule = &rules[0];
    assert_eq!(rule.api_groups.as_deref(), Some(&[String::new()][..]));
    let set =
        |v: &Option<Vec<String>>| -> BTreeSet<String> { v.iter().flatten().cloned().collect() };
    assert_eq!(
        set(&rule.resources),
        ["services", "endpoints", "pods"].map(String::from).into()
    );
    assert_eq!(
        rule.verbs.iter().cloned().collect::<BTreeSet<_>>(),
        ["get", "list", "watch"].map(String::from).into()
    );
    assert!(rule.resource_names.is_none() && rule.non_resource_urls.is_none());

    // The binding ties that role to the pod's service account.
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(Some(&binding.role_ref.name), role.metadata.name.as_ref());
    let subjects = binding.subjects.clone().unwrap_or_default();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0].kind, "ServiceAccount");
    assert_eq!(Some(&subjects[0].name), sa.metadata.name.as_ref());
    assert_eq!(subjects[0].namespace, sa.metadata.namespace);
    assert_eq!(sa.metadata.namespace.as_deref(), Some("kube-system"));

    let spec = deployment.spec.as_ref().expect("deployment spec");
    assert_eq!(
        deployment.metadata.namespace.as_deref(),
        Some("kube-system")
    );
    assert_eq!(
        spec.replicas.map(|r| r.to_string()).as_deref(),
        Some(REPLICAS)
    );
    let (labels, pod) = m.pod();
    for (k, v) in spec.selector.match_labels.iter().flatten() {
        assert_eq!(labels.get(k), Some(v), "deployment selector {k}");
    }
    assert_eq!(pod.service_account_name, sa.metadata.name);
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-cluster-critical")
    );

    // Non-root everywhere; port 53 through the unprivileged-port sysctl.
    let psc = pod.security_context.as_ref().expect("pod securityContext");
    assert_eq!(psc.run_as_non_root, Some(true));
    assert!(psc.run_as_user.is_some_and(|u| u != 0));
    assert_eq!(
        psc.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
        Some("RuntimeDefault")
    );
    let sysctls: Vec<(String, String)> = psc
        .sysctls
        .iter()
        .flatten()
        .map(|s| (s.name.clone(), s.value.clone()))
        .collect();
    assert_eq!(
        sysctls,
        [(
            "net.ipv4.ip_unprivileged_port_start".to_owned(),
            "0".to_owned()
        )]
    );
    for c in &pod.containers {
        let sc = c
            .security_context
            .as_ref()
            .unwrap_or_else(|| panic!("{}: securityContext", c.name));
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{}", c.name);
        assert_eq!(sc.read_only_root_filesystem, Some(true), "{}", c.name);
        assert!(sc.run_as_user.is_none_or(|u| u != 0), "{}", c.name);
        assert_ne!(sc.run_as_non_root, Some(false), "{}", c.name);
        assert_ne!(sc.privileged, Some(true), "{}", c.name);
        let caps = sc.capabilities.as_ref().expect("capabilities");
        assert_eq!(
            caps.drop.as_deref(),
            Some(&["ALL".to_owned()][..]),
            "{}",
            c.name
        );
        assert!(caps.add.is_none(), "{}", c.name);
    }

    // Probes: kube2sky ready on /readiness 8081; something restarts on
    // the nslookup check (/healthz 8080).
    let kube2sky = container(pod, "kube2sky");
    assert_eq!(
        http_get(kube2sky.readiness_probe.as_ref(), "kube2sky"),
        ("/readiness".to_owned(), 8081)
    );
    assert!(pod
        .containers
        .iter()
        .any(|c| c.liveness_probe.as_ref().is_some_and(|_| {
            http_get(c.liveness_probe.as_ref(), &c.name) == ("/healthz".to_owned(), 8080)
        })));
}

#[test]
fn both_flavours_run_the_same_commands_and_images() {
    let legacy = Manifests::load("legacy");
    let modern = Manifests::load("kubernetes");
    let (_, a) = legacy.pod();
    let (_, b) = modern.pod();
    for (x, y) in a.containers.iter().zip(&b.containers) {
        assert_eq!(x.name, y.name);
        assert_eq!(x.image, y.image, "{}", x.name);
        assert_eq!(x.command, y.command, "{}", x.name);
        assert_eq!(x.args, y.args, "{}", x.name);
        assert_eq!(x.resources, y.resources, "{}", x.name);
    }
}

/// The checks above can fail: a corrupted argument list is rejected by each
/// parser, through the same path the manifests take.
#[test]
fn corrupted_arguments_are_rejected() {
    let m = Manifests::load("kubernetes");
    let (_, pod) = m.pod();
    let mut seen = 0;
    for c in &pod.containers {
        if c.command.is_some() {
            continue;
        }
        let mut bad = c.clone();
        bad.args
            .get_or_insert_with(Vec::new)
            .push("-no-such-flag=1".to_owned());
        let result = check_args(&bad, &c.name).expect("one of ours");
        assert!(result.is_err(), "{}: an unknown flag was accepted", c.name);
        seen += 1;
    }
    assert_eq!(seen, 3);

    // Known flags with bad values, and an empty domain.
    let bad_value = [
        (skydns_accepts as Parser, "-addr=0.0.0.0"),
        (skydns_accepts, "-ns-rotate=maybe"),
        (kube2sky_accepts, "--domain="),
        (kube2sky_accepts, "--healthz-port=70000"),
        (healthz_accepts, "-port=70000"),
        (healthz_accepts, "-period=0s"),
    ];
    for (parse, arg) in bad_value {
        assert!(parse(&[arg.to_owned()]).is_err(), "{arg} was accepted");
    }

    // A value split into its own list item is caught before the parser
    // (exec-healthz would stop at it and run just `nslookup`).
    let mut split = container(pod, "healthz").clone();
    split.args = Some(vec![
        "-cmd=nslookup".to_owned(),
        "kubernetes.default".to_owned(),
    ]);
    let caught = std::panic::catch_unwind(|| check_args(&split, "split"));
    assert!(caught.is_err(), "a split argument list was accepted");
}

#[test]
fn unknown_fields_are_caught() {
    let doc =
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  clusterIp: 10.0.0.10\n";
    let caught = std::panic::catch_unwind(|| parse_objects(doc, "misspelt"));
    assert!(caught.is_err(), "clusterIp (for clusterIP) was not caught");
    let doc = "apiVersion: apps/v1\nkind: Service\nmetadata:\n  name: x\n";
    let caught = std::panic::catch_unwind(|| parse_objects(doc, "wrong apiVersion"));
    assert!(caught.is_err(), "a wrong apiVersion was not caught");
}

// ---------------------------------------------------------------------------
// Tests: render script

fn render_sh(flavour: &str, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("deploy/render.sh")).arg(flavour);
    for var in ["DNS_DOMAIN", "DNS_SERVER_IP", "DNS_REPLICAS"] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    cmd.output().expect("running bash deploy/render.sh")
}

#[test]
fn render_script_prints_the_tested_manifests() {
    let env = [
        ("DNS_DOMAIN", DOMAIN),
        ("DNS_SERVER_IP", SERVER_IP),
        ("DNS_REPLICAS", REPLICAS),
    ];
    for flavour in FLAVOURS {
        let out = render_sh(flavour, &env);
        assert!(
            out.status.success(),
            "render.sh {flavour}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = String::from_utf8(out.stdout).expect("UTF-8");
        assert_eq!(printed, rendered_stream(flavour), "render.sh {flavour}");
        // Each template uses every placeholder it is documented to use.
        let raw: String = templates(flavour)
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        for placeholder in ["$DNS_DOMAIN", "$DNS_SERVER_IP", "$DNS_REPLICAS"] {
            assert!(
                raw.contains(placeholder),
                "deploy/{flavour} lacks {placeholder}"
            );
        }
    }

    // Defaults: cluster.local and one replica; the server IP is required.
    let out = render_sh("kubernetes", &[("DNS_SERVER_IP", SERVER_IP)]);
    assert!(out.status.success());
    let printed = String::from_utf8(out.stdout).unwrap();
    let expected = templates("kubernetes")
        .iter()
        .map(|p| {
            render(
                &std::fs::read_to_string(p).unwrap(),
                "cluster.local",
                SERVER_IP,
                "1",
            )
        })
        .collect::<Vec<_>>()
        .join("---\n");
    assert_eq!(printed, expected);
    parse_objects(&printed, "render.sh defaults");

    for (flavour, env) in [
        ("kubernetes", vec![]),
        ("kubernetes", vec![("DNS_SERVER_IP", "10.0.0.10/8")]),
        (
            "legacy",
            vec![
                ("DNS_SERVER_IP", SERVER_IP),
                ("DNS_DOMAIN", "cluster.local."),
            ],
        ),
        (
            "legacy",
            vec![("DNS_SERVER_IP", SERVER_IP), ("DNS_DOMAIN", "a/b")],
        ),
        (
            "legacy",
            vec![("DNS_SERVER_IP", SERVER_IP), ("DNS_REPLICAS", "two")],
        ),
        ("modern", vec![("DNS_SERVER_IP", SERVER_IP)]),
    ] {
        let out = render_sh(flavour, &env);
        assert!(
            !out.status.success(),
            "render.sh {flavour} {env:?} succeeded"
        );
        assert!(
            out.stdout.is_empty(),
            "render.sh {flavour} {env:?} printed output"
        );
    }
}

// ---------------------------------------------------------------------------
// Tests: Dockerfile and the release build

/// Dockerfile instructions with their continuation lines joined, comments
/// and blank lines dropped.
fn dockerfile_instructions() -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in read("Dockerfile").lines() {
        let line = line.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head.trim());
                current.push(' ');
            }
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    assert!(current.is_empty(), "Dockerfile ends in a continuation");
    out
}

/// Stage name → its instructions after `FROM`, plus each stage's base image.
fn dockerfile_stages() -> BTreeMap<String, (String, Vec<String>)> {
    let mut stages = BTreeMap::new();
    let mut current: Option<String> = None;
    for ins in dockerfile_instructions() {
        let words: Vec<&str> = ins.split_whitespace().collect();
        if words[0].eq_ignore_ascii_case("FROM") {
            assert!(
                words.len() == 4 && words[2].eq_ignore_ascii_case("AS"),
                "every stage is named: {ins}"
            );
            let name = words[3].to_owned();
            stages.insert(name.clone(), (words[1].to_owned(), Vec::new()));
            current = Some(name);
        } else if let Some(name) = &current {
            stages.get_mut(name).unwrap().1.push(ins);
        }
    }
    stages
}

/// `cargo metadata`: every `bin` target of the workspace → its package, and
/// the workspace's rust-version.
fn workspace_bins() -> (BTreeMap<String, String>, String) {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo_root())
        .output()
        .expect("running cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let mut bins = BTreeMap::new();
    let mut versions = BTreeSet::new();
    for package in meta["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().unwrap().to_owned();
        if let Some(v) = package["rust_version"].as_str() {
            versions.insert(v.to_owned());
        }
        for target in package["targets"].as_array().unwrap() {
            let is_bin = target["kind"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k == "bin");
            if is_bin {
                bins.insert(target["name"].as_str().unwrap().to_owned(), name.clone());
            }
        }
    }
    assert_eq!(
        versions.len(),
        1,
        "one workspace rust-version: {versions:?}"
    );
    (bins, versions.into_iter().next().unwrap())
}

#[test]
fn release_script_builds_exactly_the_three_binaries() {
    let script = read("scripts/build-release.sh");
    let cargo_lines: Vec<&str> = script
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("cargo ") || l.contains(" cargo "))
        .filter(|l| !l.starts_with('#'))
        .collect();
    assert_eq!(cargo_lines.len(), 1, "one cargo command: {cargo_lines:?}");
    let words: Vec<&str> = cargo_lines[0].split_whitespace().collect();
    assert_eq!(&words[..2], ["cargo", "build"]);
    let mut bins = BTreeSet::new();
    let mut flags = BTreeSet::new();
    let mut rest = words[2..].iter();
    while let Some(w) = rest.next() {
        if *w == "--bin" {
            bins.insert(rest.next().expect("--bin NAME").to_string());
        } else {
            flags.insert(w.to_string());
        }
    }
    let want: BTreeSet<String> = OUR_IMAGES.iter().map(|i| i.2.to_owned()).collect();
    assert_eq!(bins, want, "the binaries of the three images");
    assert_eq!(
        flags,
        ["--locked", "--release"].map(String::from).into(),
        "locked, release profile, nothing else (no --target or --features that CI does not build)"
    );
    // The same three are the ones copied out.
    assert!(
        script.contains("for bin in skydns kube2sky exec-healthz; do"),
        "the --out loop copies the same binaries"
    );

    // Each is a bin target of the expected workspace crate (CI's
    // `cargo test --workspace` builds every workspace bin).
    let (targets, _) = workspace_bins();
    for (_, _, bin, package) in OUR_IMAGES {
        assert_eq!(
            targets.get(bin).map(String::as_str),
            Some(package),
            "{bin} is a [[bin]] of crate {package}"
        );
    }
}

#[test]
fn dockerfile_builds_with_the_release_script_and_matches_the_manifests() {
    let stages = dockerfile_stages();
    let instructions = dockerfile_instructions();

    // The build: only scripts/build-release.sh runs cargo.
    let build_runs: Vec<&String> = instructions
        .iter()
        .filter(|i| i.starts_with("RUN") && i.contains("build-release.sh"))
        .collect();
    assert_eq!(build_runs.len(), 1, "one RUN of the release script");
    assert!(
        build_runs[0].contains("scripts/build-release.sh --out /out"),
        "{}",
        build_runs[0]
    );
    assert!(
        stages["build"].1.contains(build_runs[0]),
        "the release script runs in the build stage"
    );
    for ins in &instructions {
        assert!(
            !ins.split_whitespace().any(|w| w == "cargo" || w == "rustc"),
            "cargo runs only through scripts/build-release.sh: {ins}"
        );
    }

    // The toolchain image is the workspace's declared rust-version.
    let (_, rust_version) = workspace_bins();
    assert!(
        instructions.contains(&format!("ARG RUST_VERSION={rust_version}")),
        "Dockerfile's RUST_VERSION is the workspace rust-version {rust_version}"
    );
    assert!(stages["build"].0.starts_with("rust:${RUST_VERSION}"));

    // One runtime stage per image, running its binary as a non-root user.
    for (image, stage, bin, _) in OUR_IMAGES {
        let (_, body) = stages
            .get(stage)
            .unwrap_or_else(|| panic!("no Dockerfile stage {stage} for {image}"));
        assert!(
            body.contains(&format!("COPY --from=build /out/{bin} /{bin}")),
            "stage {stage} copies {bin}"
        );
        assert!(
            body.contains(&format!("ENTRYPOINT [\"/{bin}\"]")),
            "stage {stage} runs {bin}"
        );
        assert!(
            body.iter()
                .any(|i| i.starts_with("USER ") && !i.starts_with("USER 0")),
            "stage {stage} runs as non-root"
        );
    }
    // exec-healthz's command in the pod is `sh -c "nslookup ..."`.
    assert!(stages["exechealthz"].0.starts_with("busybox:"));

    // Every image the manifests use is built by a stage, and deploy/README.md
    // says how.
    let readme = read("deploy/README.md");
    for flavour in FLAVOURS {
        let m = Manifests::load(flavour);
        let (_, pod) = m.pod();
        for c in &pod.containers {
            let image = c.image.clone().unwrap_or_default();
            if image == ETCD_IMAGE {
                continue;
            }
            let (name, tag) = image.rsplit_once(':').expect("tagged image");
            let (_, stage, _, _) = OUR_IMAGES
                .iter()
                .find(|i| i.0 == name)
                .unwrap_or_else(|| panic!("deploy/{flavour}: unknown image {image}"));
            assert_eq!(tag, IMAGE_TAG);
            let command = format!("docker build --target {stage} -t {image} .");
            assert!(
                readme.contains(&command),
                "deploy/README.md lacks `{command}`"
            );
        }
    }

    let ignore = read(".dockerignore");
    assert!(
        ignore.lines().any(|l| l.trim() == "target/"),
        "target/ stays out of the context"
    );
}
