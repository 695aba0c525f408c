//! The Helm chart (`charts/kube-dns-rs`), with the Helm that
//! `scripts/kube-tools.sh` builds from the Go module proxy:
//!
//! - `helm lint` passes for every flavour, with default and other values;
//! - with default values, `helm template` prints for every flavour the very
//!   objects `kubectl kustomize deploy/<flavour>` prints (the chart reads
//!   those files), so the two ways in cannot drift apart;
//! - other values reach the objects they name, and the manifest checks
//!   pass on that output;
//! - bad values are refused, each with a message naming the value;
//! - the monitoring objects are deploy/monitoring's.

use super::support::*;
use super::*;
use serde_json::Value;

const CHART: &str = "charts/kube-dns-rs";

/// The Helm of the tests' tool cache (built on first use).
fn helm(args: &[&str]) -> std::process::Output {
    test_support::deploy::helm(args).expect("running helm (scripts/kube-tools.sh builds it)")
}

/// `helm template` of the chart with `--set` each of `set`; its stdout, or
/// its stderr as the error.
fn template(set: &[&str]) -> Result<String, String> {
    let mut args = vec!["template", "kube-dns", CHART];
    for s in set {
        args.extend(["--set", s]);
    }
    let out = helm(&args);
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).expect("UTF-8"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The objects of a stream by `kind/namespace/name`, as JSON.
fn by_identity(stream: &str, what: &str) -> BTreeMap<String, Value> {
    let mut objects = BTreeMap::new();
    for doc in documents(stream, what) {
        let json = serde_json::to_value(&doc).expect("YAML to JSON");
        let id = format!(
            "{}/{}/{}",
            json["kind"].as_str().unwrap_or(""),
            json["metadata"]["namespace"].as_str().unwrap_or(""),
            json["metadata"]["name"].as_str().unwrap_or("")
        );
        assert!(
            objects.insert(id.clone(), json).is_none(),
            "{what}: {id} twice"
        );
    }
    objects
}

#[test]
fn helm_lint_passes_for_every_flavour_and_other_values() {
    for flavour in ALL_FLAVOURS {
        let flavour_value = format!("flavour={flavour}");
        for extra in [
            &[][..],
            &[
                "clusterDomain=k8s.example",
                "autoscaler.enabled=false",
                "monitoring.podMonitor.enabled=true",
                "monitoring.prometheusRule.enabled=true",
                "monitoring.dashboard.enabled=true",
            ][..],
        ] {
            let mut args = vec![
                "lint",
                "--strict",
                CHART,
                "--set",
                "image.registry=reg.example/dns",
            ];
            args.extend(["--set", &flavour_value]);
            for e in extra {
                args.extend(["--set", e]);
            }
            let out = helm(&args);
            let printed = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && printed.contains("1 chart(s) linted, 0 chart(s) failed"),
                "helm lint {flavour} {extra:?}: {printed}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[test]
fn with_default_values_the_chart_renders_what_kustomize_renders() {
    for flavour in ALL_FLAVOURS {
        let flavour_value = format!("flavour={flavour}");
        let chart = template(&[
            &flavour_value,
            &format!("image.registry={TEST_IMAGE_PREFIX}"),
        ])
        .unwrap_or_else(|e| panic!("helm template {flavour}: {e}"));
        let chart = by_identity(&chart, &format!("helm {flavour}"));
        let kustomize = by_identity(&kustomized(&format!("deploy/{flavour}")), flavour);
        assert_eq!(
            chart.keys().collect::<Vec<_>>(),
            kustomize.keys().collect::<Vec<_>>(),
            "{flavour}: the same objects"
        );
        for (id, object) in &kustomize {
            if let Some(diff) = first_difference(object, &chart[id], "") {
                panic!("{flavour}: {id} differs: {diff}");
            }
        }
    }
}

#[test]
fn other_values_reach_the_objects_and_pass_the_manifest_checks() {
    let digest = format!("sha256:{}", "ab".repeat(32));
    let skydns_digest = format!("image.digests.skydns={digest}");
    let set = [
        "flavour=kubernetes",
        "image.registry=reg.example:5000/dns",
        "image.tag=0.1.0-rc1",
        skydns_digest.as_str(),
        "clusterDomain=k8s.example",
        "clusterIP=10.96.0.53",
        "autoscaler.min=3",
        "autoscaler.max=7",
        "resources.skydns.requests.cpu=250m",
        "resources.skydns.requests.memory=120Mi",
        "resources.skydns.limits.memory=300Mi",
        "skydns.rcache.size=500",
        "skydns.rcache.ttlSeconds=60",
        "skydns.autopath=false",
        "skydns.pods=verified",
        "skydns.lameduckSeconds=5",
    ];
    let stream = template(&set).unwrap_or_else(|e| panic!("helm template: {e}"));
    let m = Manifests::rendered_with("kubernetes", "k8s.example", "10.96.0.53", &stream);
    check_service(&m);
    let (_, pod) = m.pod();
    let skydns = container(pod, "skydns");
    assert_eq!(
        skydns.image.as_deref(),
        Some(format!("reg.example:5000/dns/skydns@{digest}").as_str())
    );
    assert_eq!(
        container(pod, "kube2sky").image.as_deref(),
        Some("reg.example:5000/dns/kube2sky:0.1.0-rc1")
    );
    let args = skydns.args.clone().unwrap_or_default();
    for want in [
        "-rcache=500",
        "-rcache-ttl=60",
        "-autopath=false",
        "-pods=verified",
        "-lameduck=5s",
        "-domain=k8s.example.",
    ] {
        assert!(args.iter().any(|a| a == want), "{want} not in {args:?}");
    }
    let resources = serde_json::to_value(&skydns.resources).unwrap();
    assert_eq!(
        resources,
        serde_json::json!({"requests": {"cpu": "250m", "memory": "120Mi"}, "limits": {"memory": "300Mi"}})
    );
    let linear = m.one(|o| match o {
        Object::ConfigMap(c) if c.metadata.name.as_deref() == Some("kube-dns-autoscaler") => {
            c.data.as_ref()?.get("linear")
        }
        _ => None,
    });
    let linear: Value = serde_json::from_str(linear).unwrap();
    assert_eq!(
        (linear["min"].as_u64(), linear["max"].as_u64()),
        (Some(3), Some(7))
    );

    // The wiring checks hold for the modern pod with the skydns defaults
    // (they assert -pods=insecure and the lameduck within the grace period).
    let stream = template(&[
        "image.registry=reg.example/dns",
        "clusterDomain=k8s.example",
        "clusterIP=10.96.0.53",
    ])
    .unwrap();
    check_pod_wiring(&Manifests::rendered_with(
        "kubernetes",
        "k8s.example",
        "10.96.0.53",
        &stream,
    ));

    // Without the autoscaler: a fixed count and none of its objects.
    let stream = template(&[
        "image.registry=r.example",
        "autoscaler.enabled=false",
        "replicas=4",
    ])
    .unwrap();
    assert!(!stream.contains("autoscaler"), "{stream}");
    let m = Manifests::rendered_with("kubernetes", "cluster.local", "10.96.0.10", &stream);
    assert_eq!(
        m.deployment("kube-dns").spec.as_ref().unwrap().replicas,
        Some(4)
    );
}

#[test]
fn bad_values_are_refused_naming_the_value() {
    for (set, named) in [
        (&["flavour=kubernetes"][..], "image.registry is required"),
        (
            &["image.registry=r.example", "flavour=modern"][..],
            "flavour",
        ),
        (&["image.registry=R.example"][..], "registry"),
        (
            &["image.registry=r.example", "image.digests.skydns=sha1:ab"][..],
            "skydns",
        ),
        (
            &["image.registry=r.example", "clusterDomain=cluster.local."][..],
            "clusterDomain",
        ),
        (
            &["image.registry=r.example", "clusterIP=10.96.0"][..],
            "clusterIP",
        ),
        (&["image.registry=r.example", "autoscaler.min=0"][..], "min"),
        (
            &["image.registry=r.example", "autoscaler.min=30"][..],
            "autoscaler.min (30) is above autoscaler.max (20)",
        ),
        (
            &["image.registry=r.example", "skydns.lameduckSeconds=40"][..],
            "lameduckSeconds",
        ),
        (
            &["image.registry=r.example", "skydns.pods=maybe"][..],
            "pods",
        ),
        (&["image.registry=r.example", "replica=3"][..], "replica"),
        (
            &[
                "image.registry=r.example",
                "resources.skydns.limits.cpu=lots",
            ][..],
            "cpu",
        ),
    ] {
        let err = template(set).expect_err(&format!("{set:?} was accepted"));
        assert!(err.contains(named), "{set:?}: {err}");
    }
}

#[test]
fn the_monitoring_objects_are_deploy_monitoring_s() {
    let stream = template(&[
        "image.registry=r.example",
        "monitoring.podMonitor.enabled=true",
        "monitoring.prometheusRule.enabled=true",
        "monitoring.prometheusRule.labels.release=kube-prometheus-stack",
        "monitoring.dashboard.enabled=true",
    ])
    .unwrap();
    let objects = by_identity(&stream, "helm monitoring");
    let pod_monitor = &objects["PodMonitor/kube-system/kube-dns-rs"];
    let ports: Vec<&str> = pod_monitor["spec"]["podMetricsEndpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["port"].as_str())
        .collect();
    assert_eq!(ports, ["metrics", "kube2sky-http", "healthz"]);

    let rule = &objects["PrometheusRule/kube-system/kube-dns-rs"];
    let file = documents(
        &read("deploy/monitoring/kube-dns-rs.prometheusrule.yaml"),
        "rule",
    );
    let file = serde_json::to_value(&file[0]).unwrap();
    assert_eq!(rule["spec"], file["spec"]);
    assert_eq!(
        rule["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    assert_eq!(rule["metadata"]["labels"]["k8s-app"], "kube-dns");

    let dashboard = &objects["ConfigMap/kube-system/kube-dns-rs-dashboard"];
    let json: Value =
        serde_json::from_str(dashboard["data"]["kube-dns-rs.json"].as_str().unwrap()).unwrap();
    let file: Value =
        serde_json::from_str(&read("deploy/monitoring/kube-dns-rs.dashboard.json")).unwrap();
    assert_eq!(json, file);
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");

    // Off by default.
    let plain = template(&["image.registry=r.example"]).unwrap();
    for kind in ["PodMonitor", "PrometheusRule", "kube-dns-rs-dashboard"] {
        assert!(!plain.contains(kind), "{kind} without asking");
    }
}
