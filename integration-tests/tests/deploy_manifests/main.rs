//! The deployment files under `deploy/` and the image build:
//!
//! - every flavour (`deploy/{legacy,kubernetes,shared-etcd}/`, a kustomize
//!   overlay of `deploy/base/`), rendered by `deploy/render.sh` (kubectl
//!   kustomize with the settings), parses document by document into
//!   k8s-openapi types, with no field the types do not know (checked by a
//!   serialisation round trip, since k8s-openapi ignores unknown fields);
//!   the checks run on the pods as the kubelet sees them, settings expanded;
//! - `deploy/render.sh` is `kubectl kustomize` and nothing more, and the
//!   flavours and `deploy/example/` render as they are;
//! - every container argument list for one of our images is accepted by that
//!   binary's own flag parser and validation, with the values the pod's
//!   wiring needs (ports, domain, etcd URL), and a corrupted list is not;
//! - the pod, RBAC and security settings of docs/security.md are there (modern
//!   manifests: non-root everywhere, exec-healthz `/quit` off);
//! - the modern flavours' availability objects hold together (`ha.rs`): the
//!   PodDisruptionBudgets select their Deployment's pods and no others, the
//!   DNS pods spread over nodes and zones, the scrape annotations name a
//!   metrics port of the pod, kube-dns-autoscaler targets the DNS
//!   Deployment with only the RBAC it uses (`autoscaler.rs`); the legacy
//!   manifest has none of it and is byte for byte what it was;
//! - the Dockerfile builds with `scripts/build-release.sh` only, whose one
//!   cargo command builds exactly the three binaries, all `[[bin]]` targets
//!   of the workspace, and the image stages match the manifests' images.
//!
//! Nothing here needs a cluster or Docker.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, PodSpec, PodTemplateSpec, Probe, ReplicationController, Service,
    ServiceAccount,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Values the tests render with; not the defaults of the manifests
/// (cluster.local, 10.96.0.10 or 10.0.0.10, 1 or 2 replicas), so a setting
/// that did not reach the manifests shows.
const DOMAIN: &str = "k8s.example";
const SERVER_IP: &str = "10.96.0.53";
const REPLICAS: &str = "3";

const ETCD_IMAGE: &str = "registry.k8s.io/etcd:3.5.15-0";
/// kube-dns-autoscaler's image (cluster-proportional-autoscaler).
const AUTOSCALER_IMAGE: &str = "registry.k8s.io/cpa/cluster-proportional-autoscaler:v1.9.0";
/// The images the manifests pull from upstream, not built here (and not
/// moved by `IMAGE_PREFIX`); docs/install.md lists them.
const UPSTREAM_IMAGES: [&str; 2] = [ETCD_IMAGE, AUTOSCALER_IMAGE];
const IMAGE_TAG: &str = "0.1.0";

/// The crate that owns each image's binary.
const CRATE_OF_BINARY: [(&str, &str); 3] = [
    ("skydns", "skydns"),
    ("kube2sky", "kube2sky"),
    ("exec-healthz", "healthz"),
];

/// One line of `deploy/images.txt`, the list both the Dockerfile and
/// `deploy/podman/images.sh` build from.
#[derive(Debug)]
struct ImageLine {
    /// Without the tag.
    name: String,
    tag: String,
    stage: String,
    binary: String,
    /// `static` or `busybox`.
    base: String,
    user: String,
    ports: Vec<String>,
}

/// Our images, from `deploy/images.txt`.
fn our_images() -> Vec<ImageLine> {
    let lines: Vec<ImageLine> = read("deploy/images.txt")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(cols.len(), 6, "deploy/images.txt: six columns: {l:?}");
            let (name, tag) = cols[0].rsplit_once(':').expect("image name:tag");
            ImageLine {
                name: name.into(),
                tag: tag.into(),
                stage: cols[1].into(),
                binary: cols[2].into(),
                base: cols[3].into(),
                user: cols[4].into(),
                ports: cols[5].split(',').map(String::from).collect(),
            }
        })
        .collect();
    let binaries: BTreeSet<&str> = lines.iter().map(|i| i.binary.as_str()).collect();
    assert_eq!(
        binaries,
        CRATE_OF_BINARY.iter().map(|(b, _)| *b).collect(),
        "deploy/images.txt lists the three images"
    );
    lines
}

/// The crate whose `[[bin]]` `binary` is.
fn crate_of(binary: &str) -> &'static str {
    CRATE_OF_BINARY
        .iter()
        .find(|(b, _)| *b == binary)
        .map(|(_, c)| *c)
        .unwrap_or_else(|| panic!("no crate for {binary}"))
}

/// The flavours whose manifests hold the whole kube-dns pod.
const FLAVOURS: [&str; 2] = ["legacy", "kubernetes"];
/// Every flavour `deploy/render.sh` renders.
const ALL_FLAVOURS: [&str; 3] = ["legacy", "kubernetes", "shared-etcd"];

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

mod args;
mod autoscaler;
mod config_map;
mod etcd_gc;
mod ha;
mod helm;
mod kube_tools;
mod resources;
mod scripts;
mod shared;
mod support;
mod systemd;
mod txn_limits;
mod workflows;

use args::*;
use support::*;

// ---------------------------------------------------------------------------
// Tests: manifests

#[test]
fn legacy_manifests_parse_and_args_are_accepted() {
    let m = Manifests::load("legacy");
    assert_eq!(m.objects.len(), 3, "the settings, the RC and the Service");
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

    // kube-dns-autoscaler's account and roles are checked in ha.rs.
    let sa = m.one(|o| match o {
        Object::ServiceAccount(sa) if sa.metadata.name.as_deref() == Some("kube-dns") => {
            Some(&**sa)
        }
        _ => None,
    });
    let role = m.one(|o| match o {
        Object::ClusterRole(r) if r.metadata.name.as_deref() == Some("kube-dns-rs") => Some(&**r),
        _ => None,
    });
    let binding = m.one(|o| match o {
        Object::ClusterRoleBinding(b) if b.role_ref.name == "kube-dns-rs" => Some(&**b),
        _ => None,
    });
    let deployment = m.deployment("kube-dns");

    // Least privilege: read Services, Endpoints and Pods, list and watch
    // EndpointSlices (--endpoints-source=auto), nothing else.
    let set =
        |v: &Option<Vec<String>>| -> BTreeSet<String> { v.iter().flatten().cloned().collect() };
    let granted: BTreeSet<(String, String, String)> = role
        .rules
        .iter()
        .flatten()
        .inspect(|rule| assert!(rule.resource_names.is_none() && rule.non_resource_urls.is_none()))
        .flat_map(|rule| {
            let (groups, resources) = (set(&rule.api_groups), set(&rule.resources));
            let verbs = rule.verbs.clone();
            groups.into_iter().flat_map(move |g| {
                let verbs = verbs.clone();
                resources.clone().into_iter().flat_map(move |r| {
                    let g = g.clone();
                    verbs
                        .clone()
                        .into_iter()
                        .map(move |v| (g.clone(), r.clone(), v))
                })
            })
        })
        .collect();
    let mut want = BTreeSet::new();
    for resource in ["services", "endpoints", "pods"] {
        for verb in ["get", "list", "watch"] {
            want.insert((String::new(), resource.to_owned(), verb.to_owned()));
        }
    }
    for verb in ["list", "watch"] {
        want.insert((
            "discovery.k8s.io".to_owned(),
            "endpointslices".to_owned(),
            verb.to_owned(),
        ));
    }
    assert_eq!(granted, want);

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
    // kube-dns-autoscaler sets the replicas, at least DNS_REPLICAS (ha.rs).
    assert_eq!(spec.replicas, None, "a count would fight the autoscaler");
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

    // Probes: kube2sky ready on /readiness 8081; skydns's own /ready and
    // /health (checked with its arguments in check_pod_wiring).
    let kube2sky = container(pod, "kube2sky");
    assert_eq!(
        http_get(kube2sky.readiness_probe.as_ref(), "kube2sky"),
        ("/readiness".to_owned(), 8081)
    );
    let skydns = container(pod, "skydns");
    assert_eq!(
        http_get(skydns.readiness_probe.as_ref(), "skydns").0,
        "/ready"
    );
    let accepted = |c: &Container| check_args(c, &c.name).expect("ours").expect("accepted");
    let (Accepted::Kube2sky(k2s), Accepted::Skydns(sky)) = (accepted(kube2sky), accepted(skydns))
    else {
        panic!("kube2sky or skydns parsed as another binary")
    };
    let account = sa.metadata.name.clone().unwrap_or_default();
    config_map::check_config_map_access(&m, &k2s, &sky, &account);
}

/// The flavours differ only in the etcd API (and the legacy pod's
/// `--spec-records=false`): the legacy pod runs the 1.2
/// v2 keys API (etcd with `-enable-v2=true`, binaries on their defaults),
/// the modern one the v3 API (with compaction of the v3 history).
#[test]
fn both_flavours_run_the_same_commands_and_images_but_for_the_etcd_api() {
    let legacy = Manifests::load("legacy");
    let modern = Manifests::load("kubernetes");
    let (_, a) = legacy.pod();
    let (_, b) = modern.pod();
    let names = |p: &k8s_openapi::api::core::v1::PodSpec| -> Vec<String> {
        p.containers.iter().map(|c| c.name.clone()).collect()
    };
    assert_eq!(names(a), names(b), "the same containers in the same order");
    let v3_only: &[&str] = &[
        "-auto-compaction-mode",
        "periodic",
        "-auto-compaction-retention",
        "1h",
        "-max-txn-ops",
        "1024",
        "--etcd-api=v3",
        "--etcd-max-txn-ops=1024",
        "-etcd3=true",
        // etcd's /health for the modern pod's probes.
        "-listen-metrics-urls",
        "http://0.0.0.0:2381",
    ];
    // The legacy pod keeps 1.2's key set (the DNS specification's extra
    // records off). The modern skydns also serves its probes and has a
    // lameduck, which 1.2 did not, and caches forwarded answers.
    // Its exec-healthz answers /quit with 403 (1.2's /quit stops the
    // container without authentication; the legacy pod keeps it).
    let v3_only: &[&str] = &[
        v3_only,
        &[
            "-metrics-addr=0.0.0.0:9153",
            "-lameduck=10s",
            "-quit-enabled=false",
            "-rcache=10000",
            "-rcache-ttl=30",
            "-rcache-prefetch=10",
            "-rcache-stale=1h",
            // kube-dns's ConfigMap: followed by kube2sky, stub zones in skydns.
            "--config-map=kube-dns",
            "-stubzones=true",
            "-autopath=true",
            // Pod names as kubeadm's CoreDNS answers them; 1.2 kept records.
            "-pods=insecure",
            // kubeadm's CoreDNS has `loop`; 1.2 had no check.
            "-loop=exit",
        ],
    ]
    .concat();
    let v2_only: &[&str] = &["-enable-v2=true", "--spec-records=false"];
    let without = |list: &Option<Vec<String>>, drop: &[&str]| -> Option<Vec<String>> {
        list.as_ref().map(|l| {
            l.iter()
                .filter(|x| !drop.contains(&x.as_str()))
                .cloned()
                .collect()
        })
    };
    for (x, y) in a.containers.iter().zip(&b.containers) {
        assert_eq!(x.image, y.image, "{}", x.name);
        assert_eq!(
            without(&x.command, v2_only),
            without(&y.command, v3_only),
            "{}",
            x.name
        );
        assert_eq!(
            without(&x.args, v2_only),
            without(&y.args, v3_only),
            "{}",
            x.name
        );
    }
    let etcd = |p: &k8s_openapi::api::core::v1::PodSpec| -> k8s_openapi::api::core::v1::Container {
        p.containers
            .iter()
            .find(|c| c.name == "etcd")
            .cloned()
            .expect("etcd")
    };
    assert!(etcd(a)
        .command
        .unwrap_or_default()
        .contains(&"-enable-v2=true".to_string()));
    let env = etcd(a).env.unwrap_or_default();
    assert!(
        env.iter()
            .any(|e| e.name == "ETCDCTL_API" && e.value.as_deref() == Some("2")),
        "legacy etcd container: ETCDCTL_API=2 for the 1.2 etcdctl commands"
    );
    let skydns_args = |p: &k8s_openapi::api::core::v1::PodSpec| -> Vec<String> {
        p.containers
            .iter()
            .find(|c| c.name == "skydns")
            .and_then(|c| c.args.clone())
            .unwrap_or_default()
    };
    assert!(!skydns_args(a).iter().any(|x| x.starts_with("-etcd3")));
    assert!(skydns_args(b).contains(&"-etcd3=true".to_string()));
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

/// The safe defaults of the modern manifests (docs/security.md): every
/// exec-healthz has `/quit` off and every container of every workload runs
/// as a user other than root; the legacy pod keeps 1.2's `/quit` and its
/// root skydns, and sets root for nothing else.
#[test]
fn modern_manifests_turn_quit_off_and_run_nothing_as_root() {
    for flavour in ["kubernetes", "shared-etcd"] {
        let m = Manifests::load(flavour);
        let mut healthz_seen = 0;
        for (what, pod) in m.pod_specs() {
            let pod_user = pod.security_context.as_ref().and_then(|s| s.run_as_user);
            let pod_non_root = pod
                .security_context
                .as_ref()
                .and_then(|s| s.run_as_non_root);
            for c in &pod.containers {
                let sc = c.security_context.as_ref();
                let user = sc.and_then(|s| s.run_as_user).or(pod_user);
                let non_root = sc.and_then(|s| s.run_as_non_root).or(pod_non_root);
                assert!(
                    user.is_some_and(|u| u != 0),
                    "{flavour} {what}/{}: runs as user {user:?}",
                    c.name
                );
                assert_eq!(non_root, Some(true), "{flavour} {what}/{}", c.name);
                if let Some(Ok(Accepted::Healthz(config))) = check_args(c, &c.name) {
                    assert!(
                        !config.quit_enabled,
                        "{flavour} {what}/{}: /quit is on",
                        c.name
                    );
                    healthz_seen += 1;
                }
            }
        }
        assert!(healthz_seen >= 1, "{flavour}: no exec-healthz container");
    }

    let legacy = Manifests::load("legacy");
    let (_, pod) = legacy.pod();
    let Some(Ok(Accepted::Healthz(config))) = check_args(container(pod, "healthz"), "healthz")
    else {
        panic!("legacy healthz arguments rejected")
    };
    assert!(config.quit_enabled, "the legacy pod keeps 1.2's /quit");
    let root: Vec<&str> = pod
        .containers
        .iter()
        .filter(|c| {
            c.security_context
                .as_ref()
                .and_then(|s| s.run_as_user)
                .is_some_and(|u| u == 0)
        })
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        root,
        ["skydns"],
        "the legacy pod sets root for skydns only, to bind :53"
    );
}
