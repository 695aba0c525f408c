//! `podman_workload` over the rendered manifests: the legacy
//! ReplicationController becomes its Pod, the modern Deployment stays a
//! Deployment of one pod, each with only the listed changes; streams
//! without exactly one workload, or without kube2sky or the etcd image, are
//! refused.

use super::*;
use k8s_openapi::api::core::v1::Container;
use std::collections::BTreeMap;

/// What `deploy/render.sh FLAVOUR` prints, as deploy/podman/run.sh calls it.
fn rendered(flavour: &str) -> String {
    let settings = [
        ("IMAGE_PREFIX", "localhost/kube-dns-rs"),
        ("DNS_SERVER_IP", "10.0.0.10"),
        ("DNS_DOMAIN", "cluster.local"),
    ];
    test_support::deploy::render(flavour, &settings).unwrap_or_else(|e| panic!("{e:#}"))
}

fn options(name: Option<&str>) -> PodmanOptions {
    PodmanOptions {
        kubeconfig_dir: "/run/kdrs/k".into(),
        etcd_image: "localhost/kube-dns-rs-podman/etcd:3.4.23".into(),
        name: name.map(String::from),
    }
}

/// The pod template of the manifests as rendered (the real-cluster one).
fn original_spec(flavour: &str) -> PodSpec {
    for doc in serde_yaml::Deserializer::from_str(&rendered(flavour)) {
        let value = serde_yaml::Value::deserialize(doc).unwrap();
        match value.get("kind").and_then(|k| k.as_str()) {
            Some("ReplicationController") => {
                let rc: ReplicationController = serde_yaml::from_value(value).unwrap();
                return rc.spec.unwrap().template.unwrap().spec.unwrap();
            }
            Some("Deployment") => {
                let d: Deployment = serde_yaml::from_value(value).unwrap();
                return d.spec.unwrap().template.spec.unwrap();
            }
            _ => {}
        }
    }
    panic!("no workload in deploy/{flavour}");
}

fn container<'a>(spec: &'a PodSpec, name: &str) -> &'a Container {
    spec.containers.iter().find(|c| c.name == name).unwrap()
}

/// Everything but the listed changes is what the cluster manifest says.
fn assert_only_the_listed_changes(
    original: &PodSpec,
    maps: &BTreeMap<String, BTreeMap<String, String>>,
    podman: &PodSpec,
    pod: &str,
) {
    let names = |s: &PodSpec| {
        s.containers
            .iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(podman), ["etcd", "kube2sky", "skydns", "healthz"]);
    assert_eq!(names(original), names(podman));

    let mut expected = original.clone();
    // The settings, as the kubelet would give them.
    crate::kubelet_env::resolve_config_map_env(&mut expected, maps).unwrap();
    for v in expected.volumes.iter_mut().flatten() {
        v.name = format!("{pod}-{}", v.name);
    }
    expected.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: format!("{pod}-kubeconfig"),
        host_path: Some(HostPathVolumeSource {
            path: "/run/kdrs/k".into(),
            type_: Some("Directory".into()),
        }),
        ..Volume::default()
    });
    for c in &mut expected.containers {
        c.ports = None;
        for m in c.volume_mounts.iter_mut().flatten() {
            m.name = format!("{pod}-{}", m.name);
        }
        match c.name.as_str() {
            "etcd" => {
                c.image = Some("localhost/kube-dns-rs-podman/etcd:3.4.23".into());
                c.liveness_probe = None;
                c.readiness_probe = None;
            }
            "kube2sky" => {
                c.args
                    .get_or_insert_with(Vec::new)
                    .push("--kubecfg-file=/etc/kube2sky/kubeconfig".into());
                c.volume_mounts
                    .get_or_insert_with(Vec::new)
                    .push(VolumeMount {
                        name: format!("{pod}-kubeconfig"),
                        mount_path: "/etc/kube2sky".into(),
                        read_only: Some(true),
                        ..VolumeMount::default()
                    });
            }
            _ => {}
        }
    }
    assert_eq!(&expected, podman);
}

#[test]
fn the_legacy_replication_controller_becomes_its_pod() {
    let yaml = podman_workload(&rendered("legacy"), &options(None)).unwrap();
    let pod: Pod = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some("kube-dns-v11"));
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels["k8s-app"], "kube-dns");
    assert_eq!(labels["version"], "v11");
    let spec = pod.spec.unwrap();
    let maps = crate::kubelet_env::config_maps(&rendered("legacy")).unwrap();
    assert_only_the_listed_changes(&original_spec("legacy"), &maps, &spec, "kube-dns-v11");
    assert_eq!(
        container(&spec, "kube2sky").args.as_deref().unwrap(),
        [
            "--domain=cluster.local",
            "--spec-records=false",
            "--kubecfg-file=/etc/kube2sky/kubeconfig"
        ]
    );
    assert!(yaml.starts_with("apiVersion: v1\nkind: Pod\n"), "{yaml}");
    let skydns = container(&original_spec("legacy"), "skydns")
        .ports
        .clone()
        .unwrap();
    assert_eq!(skydns.len(), 2, "the manifest lists 53/udp and 53/tcp");
    assert!(spec.containers.iter().all(|c| c.ports.is_none()), "{yaml}");
}

#[test]
fn the_modern_deployment_stays_a_deployment_of_one_pod() {
    let stream = rendered("kubernetes");
    let autoscaler = serde_yaml::Deserializer::from_str(&stream)
        .map(|doc| serde_yaml::Value::deserialize(doc).unwrap())
        .filter(|v| v.get("kind").and_then(|k| k.as_str()) == Some("Deployment"))
        .any(|v| v["metadata"]["name"].as_str() == Some(AUTOSCALER_DEPLOYMENT));
    assert!(
        autoscaler,
        "the manifests hold the autoscaler, which is dropped"
    );
    let yaml = podman_workload(&stream, &options(Some("kdrs-t1"))).unwrap();
    let d: Deployment = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(d.metadata.name.as_deref(), Some("kdrs-t1"));
    assert!(!yaml.contains("autoscaler"), "{yaml}");
    let spec = d.spec.unwrap();
    assert_eq!(
        spec.replicas,
        Some(1),
        "the manifests leave it to the autoscaler"
    );
    let pod = spec.template.spec.unwrap();
    let maps = crate::kubelet_env::config_maps(&stream).unwrap();
    assert_only_the_listed_changes(&original_spec("kubernetes"), &maps, &pod, "kdrs-t1");
    // The settings reach the arguments: podman expands no $(VAR) itself.
    let skydns = container(&pod, "skydns").args.clone().unwrap();
    assert!(
        skydns.contains(&"-domain=cluster.local.".to_owned()),
        "{skydns:?}"
    );
    assert_eq!(
        container(&pod, "etcd").volume_mounts.as_deref().unwrap()[0].name,
        "kdrs-t1-etcd-storage"
    );
    assert!(
        yaml.starts_with("apiVersion: apps/v1\nkind: Deployment\n"),
        "{yaml}"
    );
}

#[test]
fn manifests_without_exactly_one_workload_are_refused() {
    let service = "apiVersion: v1\nkind: Service\nmetadata:\n  name: kube-dns\n";
    let err = podman_workload(service, &options(None)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no ReplicationController or Deployment in the manifests"
    );
    let two = format!("{}---\n{}", rendered("legacy"), rendered("kubernetes"));
    let err = podman_workload(&two, &options(None)).unwrap_err();
    assert!(err.to_string().contains("more than one workload"), "{err}");
    let err = podman_workload("kind: [", &options(None)).unwrap_err();
    assert!(
        format!("{err:#}").starts_with("document 1: not YAML"),
        "{err:#}"
    );
}

#[test]
fn a_workload_without_kube2sky_or_the_etcd_image_is_refused() {
    let no_kube2sky = rendered("legacy").replace("  name: kube2sky\n", "  name: k2s\n");
    let err = podman_workload(&no_kube2sky, &options(None)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "kube-dns-v11 has no container named kube2sky"
    );
    let other_etcd = rendered("kubernetes").replace(UPSTREAM_ETCD_IMAGE, "quay.io/coreos/etcd:v3");
    let err = podman_workload(&other_etcd, &options(None)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "kube-dns has no container with the image registry.k8s.io/etcd:3.5.15-0"
    );
}
