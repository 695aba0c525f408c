//! The manifests as a real kube-apiserver 1.36 takes them: every way in
//! (each flavour's `kubectl kustomize`, `deploy/example/`,
//! `deploy/render.sh` with non-default settings, and the Helm chart with
//! default and other values) is applied with
//! `kubectl apply --dry-run=server --validate=strict`, so the server checks
//! every object against its schema (an unknown field fails), RBAC objects,
//! budgets and Services included. Every pod template is then created as a
//! Pod, dry-run too: that is where the server checks the pod itself
//! (security contexts, the unprivileged-port sysctl, probes) and the
//! Priority admission plugin resolves `priorityClassName`. A template with
//! a PriorityClass that does not exist is refused, so the check bites.
//! The NetworkPolicy example of docs/security.md goes the same way.

use std::process::Command;

use anyhow::{bail, ensure, Context, Result};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, ReplicationController, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use test_support::control_plane::{ControlPlane, Options};
use test_support::deploy::{helm_template, kustomize as kustomized, repo_root};
use test_support::kubectl::Kubectl;

/// A service range holding both defaults the modern manifests and the
/// tests use (10.96.0.10, 10.96.0.53), with the IPv6 one of the other tests.
const SERVICE_CIDRS: &str = "10.96.0.0/12,fd00:10::/112";

/// `deploy/render.sh FLAVOUR` with settings none of the defaults.
fn rendered(flavour: &str) -> Result<String> {
    test_support::deploy::render(
        flavour,
        &[
            ("IMAGE_PREFIX", "registry.example.com/dns"),
            ("DNS_SERVER_IP", "10.96.0.53"),
            ("DNS_DOMAIN", "k8s.example"),
            ("DNS_REPLICAS", "3"),
        ],
    )
}

/// The YAML block under docs/security.md's NetworkPolicy heading.
fn security_md_network_policy() -> Result<String> {
    let text = std::fs::read_to_string(repo_root().join("docs/security.md"))?;
    let heading = "### NetworkPolicy for the pod's ports";
    let after = &text[text
        .find(heading)
        .context("docs/security.md: no such heading")?..];
    let start = after.find("```yaml\n").context("no yaml block")? + "```yaml\n".len();
    let end = start + after[start..].find("```").context("unclosed block")?;
    Ok(after[start..end].to_string())
}

/// The kubectl commands of docs/install.md's `sh-cluster` block under
/// "Notes on `legacy/`", each as its arguments.
fn install_md_legacy_rbac() -> Result<Vec<Vec<String>>> {
    let text = std::fs::read_to_string(repo_root().join("docs/install.md"))?;
    let after = &text[text.find("Notes on `legacy/`").context("no legacy notes")?..];
    let start = after.find("```sh-cluster\n").context("no block")? + "```sh-cluster\n".len();
    let end = start + after[start..].find("```").context("unclosed block")?;
    Ok(after[start..end]
        .lines()
        .map(|l| l.split_whitespace().skip(1).map(String::from).collect())
        .collect())
}

/// `kubectl apply|create --dry-run=server --validate=strict -f` of `stream`.
fn dry_run(kubectl: &Kubectl, verb: &str, name: &str, stream: &str) -> Result<String> {
    let path = kubectl.file(name, stream)?;
    let path = path.display().to_string();
    let out = kubectl.output(&[verb, "--dry-run=server", "--validate=strict", "-f", &path])?;
    if !out.status.success() {
        bail!(
            "{verb} --dry-run=server of {name} refused: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A Pod for every pod template of `stream`, as its controller would make
/// it: the template's labels and spec, a StatefulSet's claims as volumes.
fn pods_of(stream: &str) -> Result<Vec<Pod>> {
    let mut pods = Vec::new();
    for document in serde_yaml::Deserializer::from_str(stream) {
        let value = serde_yaml::Value::deserialize(document)?;
        let kind = value.get("kind").and_then(|k| k.as_str()).unwrap_or("");
        let (meta, template, claims): (ObjectMeta, PodTemplateSpec, Vec<String>) = match kind {
            "ReplicationController" => {
                let rc: ReplicationController = serde_yaml::from_value(value)?;
                let template = rc.spec.and_then(|s| s.template).context("RC template")?;
                (rc.metadata, template, vec![])
            }
            "Deployment" => {
                let d: Deployment = serde_yaml::from_value(value)?;
                (d.metadata, d.spec.context("spec")?.template, vec![])
            }
            "StatefulSet" => {
                let s: StatefulSet = serde_yaml::from_value(value)?;
                let spec = s.spec.context("spec")?;
                let claims = spec
                    .volume_claim_templates
                    .iter()
                    .flatten()
                    .filter_map(|c| c.metadata.name.clone())
                    .collect();
                (s.metadata, spec.template, claims)
            }
            _ => continue,
        };
        let name = meta.name.clone().context("a workload without a name")?;
        let mut spec = template.spec.context("a template without a spec")?;
        for claim in claims {
            spec.volumes.get_or_insert_with(Vec::new).push(Volume {
                name: claim.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: format!("{claim}-{name}-0"),
                    read_only: None,
                }),
                ..Volume::default()
            });
        }
        pods.push(Pod {
            metadata: ObjectMeta {
                name: Some(format!("{name}-0")),
                namespace: meta.namespace,
                labels: template.metadata.and_then(|m| m.labels),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
            status: None,
        });
    }
    Ok(pods)
}

/// Applies `stream` and creates its pods, all dry-run; the number of pods.
fn accepted(kubectl: &Kubectl, what: &str, stream: &str) -> Result<usize> {
    let printed = dry_run(kubectl, "apply", &format!("{what}.yaml"), stream)
        .with_context(|| what.to_string())?;
    ensure!(
        printed.contains("(server dry run)"),
        "{what}: kubectl printed no server dry run: {printed}"
    );
    let pods = pods_of(stream)?;
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        dry_run(
            kubectl,
            "create",
            &format!("{what}-{name}.yaml"),
            &serde_yaml::to_string(pod)?,
        )
        .with_context(|| format!("{what}: the pod of {name}"))?;
    }
    Ok(pods.len())
}

#[test]
fn every_rendering_is_accepted_by_a_real_kube_apiserver() -> Result<()> {
    let plane = ControlPlane::start_with(Options {
        apiserver_flags: vec![format!("--service-cluster-ip-range={SERVICE_CIDRS}")],
        ..Options::default()
    })?;
    let kubectl = plane.kubectl()?;
    let mut renderings = vec![];
    for flavour in ["kubernetes", "shared-etcd"] {
        renderings.push((
            format!("kustomize-{flavour}"),
            kustomized(&format!("deploy/{flavour}"))?,
        ));
    }
    renderings.push((
        "kustomize-example".to_owned(),
        kustomized("deploy/example")?,
    ));
    for flavour in ["legacy", "kubernetes", "shared-etcd"] {
        renderings.push((format!("render-{flavour}"), rendered(flavour)?));
        let flavour_value = format!("flavour={flavour}");
        let chart = helm_template(&[
            &flavour_value,
            "image.registry=registry.example.com/dns",
            "clusterIP=10.96.0.53",
        ])?;
        renderings.push((format!("helm-{flavour}"), chart));
    }
    // The chart with other values (its monitoring objects need the
    // Prometheus Operator's CRDs, which this server does not have).
    let other = helm_template(&[
        "image.registry=registry.example.com/dns",
        "clusterDomain=k8s.example",
        "clusterIP=10.96.0.53",
        "autoscaler.enabled=false",
        "replicas=3",
        "resources.skydns.requests.cpu=250m",
        "resources.skydns.limits.memory=300Mi",
        "skydns.lameduckSeconds=5",
        "skydns.pods=verified",
    ])?;
    renderings.push(("helm-other-values".to_owned(), other));
    // Pods per rendering: legacy 1, kubernetes 2 (DNS, autoscaler),
    // shared-etcd 6 (three members, kube2sky, DNS, autoscaler).
    let want_pods = |what: &str| match what {
        w if w.ends_with("legacy") => 1,
        w if w.ends_with("shared-etcd") => 6,
        w if w.ends_with("other-values") => 1,
        _ => 2,
    };
    for (what, stream) in &renderings {
        let pods = plane.with_logs(accepted(&kubectl, what, stream))?;
        assert_eq!(pods, want_pods(what), "{what}: pod templates");
    }

    // The check bites: a PriorityClass that does not exist is refused at
    // the pod, though the Deployment holding it is not.
    let stream = &renderings[0].1;
    let wrong = stream.replace(
        "priorityClassName: system-cluster-critical",
        "priorityClassName: no-such-class",
    );
    assert_ne!(&wrong, stream);
    dry_run(&kubectl, "apply", "wrong-priority.yaml", &wrong)?;
    let err = accepted(&kubectl, "wrong-priority", &wrong).unwrap_err();
    assert!(
        format!("{err:#}").contains("no PriorityClass with name no-such-class was found"),
        "{err:#}"
    );
    // And a misspelt field fails the schema.
    let misspelt = stream.replacen("readinessProbe:", "readynessProbe:", 1);
    let err = dry_run(&kubectl, "apply", "misspelt.yaml", &misspelt).unwrap_err();
    assert!(format!("{err:#}").contains("readynessProbe"), "{err:#}");

    dry_run(
        &kubectl,
        "apply",
        "security-md-network-policy.yaml",
        &security_md_network_policy()?,
    )?;

    // The legacy pod's account gets what kube2sky reads from the commands
    // install.md gives, and not before.
    let can_i = |verb: &str, resource: &str| -> Result<bool> {
        let out = kubectl.output(&[
            "auth",
            "can-i",
            verb,
            resource,
            "--as=system:serviceaccount:kube-system:default",
        ])?;
        Ok(String::from_utf8_lossy(&out.stdout).trim() == "yes")
    };
    let reads = [
        ("watch", "services"),
        ("list", "endpoints"),
        ("watch", "pods"),
        ("list", "endpointslices.discovery.k8s.io"),
        ("watch", "endpointslices.discovery.k8s.io"),
    ];
    assert!(
        !can_i("list", "services")?,
        "the default account could read before"
    );
    let commands = install_md_legacy_rbac()?;
    assert_eq!(commands.len(), 2, "{commands:?}");
    for args in &commands {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kubectl.run(&args)?;
    }
    for (verb, resource) in reads {
        assert!(can_i(verb, resource)?, "{verb} {resource}");
    }
    assert!(!can_i("create", "pods")?, "more than reads");
    Ok(())
}

/// kubeadm's DNS objects as a cluster has them before the switch: the
/// `kube-dns` Service (created without `kubectl apply`), CoreDNS's
/// Deployment and its ConfigMap.
const KUBEADM_DNS: &str = r#"
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: CoreDNS}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: 10.96.0.10
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
  - {name: metrics, port: 9153, protocol: TCP}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: ".:53 {\n    forward . /etc/resolv.conf\n}\n"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 2
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      containers:
      - {name: coredns, image: "registry.k8s.io/coredns/coredns:v1.12.0"}
"#;

/// README's quick start, run as written on a cluster holding kubeadm's DNS
/// objects (but the wait for ready pods: this control plane runs no
/// kubelet): the backup is taken, Helm adopts the Service and installs
/// beside CoreDNS on its IP, and CoreDNS is scaled to 0.
#[test]
fn readme_quick_start_installs_with_helm_over_kubeadm_s_dns() -> Result<()> {
    let plane = ControlPlane::start_with(Options {
        apiserver_flags: vec![format!("--service-cluster-ip-range={SERVICE_CIDRS}")],
        ..Options::default()
    })?;
    let kubectl = plane.kubectl()?;
    kubectl.run(&[
        "create",
        "-f",
        &kubectl
            .file("kubeadm.yaml", KUBEADM_DNS)?
            .display()
            .to_string(),
    ])?;

    let readme = std::fs::read_to_string(repo_root().join("README.md"))?;
    let after = &readme[readme
        .find("## Quick start on a cluster")
        .context("no quick start")?..];
    let start = after.find("```sh-cluster\n").context("no block")? + "```sh-cluster\n".len();
    let end = start + after[start..].find("```").context("unclosed block")?;
    let block = &after[start..end];
    let script: String = block
        .lines()
        .filter(|l| !l.starts_with("kubectl -n kube-system wait "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(script.contains("helm install"), "{script}");
    // Run where the chart is `charts/kube-dns-rs`, as from a checkout, in a
    // directory of the test's own (the backup is written there).
    let work = tempfile::tempdir()?;
    std::os::unix::fs::symlink(repo_root().join("charts"), work.path().join("charts"))?;
    let helm_dir = test_support::control_plane::binaries()?;
    let path = format!(
        "{}:{}",
        helm_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(work.path())
        .env("PATH", path)
        .env("KUBECONFIG", plane.admin_kubeconfig()?)
        .env("HOME", work.path())
        .env("HELM_CACHE_HOME", work.path().join("cache"))
        .env("HELM_CONFIG_HOME", work.path().join("config"))
        .env("HELM_DATA_HOME", work.path().join("data"))
        .output()?;
    plane.with_logs(if out.status.success() {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "the quick start failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    })?;
    // The backup: kubeadm's objects as they were.
    let saved = std::fs::read_to_string(work.path().join("dns-backup/deployments.yaml"))?;
    assert!(saved.contains("name: coredns"), "the backup lacks CoreDNS");

    let service = kubectl.json(&["-n", "kube-system", "get", "service", "kube-dns"])?;
    assert_eq!(service["spec"]["clusterIP"], "10.96.0.10", "the IP kept");
    assert_eq!(
        service["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "Helm"
    );
    let ports: Vec<&str> = service["spec"]["ports"]
        .as_array()
        .context("ports")?
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(
        ports.contains(&"dns") && ports.contains(&"dns-tcp"),
        "{ports:?}"
    );
    let ours = kubectl.json(&["-n", "kube-system", "get", "deployment", "kube-dns"])?;
    let images: Vec<&str> = ours["spec"]["template"]["spec"]["containers"]
        .as_array()
        .context("containers")?
        .iter()
        .filter_map(|c| c["image"].as_str())
        .collect();
    assert!(
        images.contains(&"registry.example.com/dns/skydns:0.1.0"),
        "{images:?}"
    );
    let coredns = kubectl.json(&["-n", "kube-system", "get", "deployment", "coredns"])?;
    assert_eq!(coredns["spec"]["replicas"], 0, "CoreDNS taken out");
    Ok(())
}
