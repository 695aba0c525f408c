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

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, ReplicationController, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use test_support::control_plane::{ControlPlane, Options};
use test_support::kubectl::Kubectl;

/// A service range holding both defaults the modern manifests and the
/// tests use (10.96.0.10, 10.96.0.53), with the IPv6 one of the other tests.
const SERVICE_CIDRS: &str = "10.96.0.0/12,fd00:10::/112";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `kubectl kustomize DIR` (DIR relative to the repository).
fn kustomized(dir: &str) -> Result<String> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(repo_root().join(dir))
        .output()
        .context("running kubectl kustomize")?;
    ensure!(
        out.status.success(),
        "kubectl kustomize {dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// `deploy/render.sh FLAVOUR` with settings none of the defaults.
fn rendered(flavour: &str) -> Result<String> {
    let out = Command::new("bash")
        .arg(repo_root().join("deploy/render.sh"))
        .arg(flavour)
        .env("IMAGE_PREFIX", "registry.example.com/dns")
        .env("DNS_SERVER_IP", "10.96.0.53")
        .env("DNS_DOMAIN", "k8s.example")
        .env("DNS_REPLICAS", "3")
        .output()
        .context("running deploy/render.sh")?;
    ensure!(
        out.status.success(),
        "render.sh {flavour}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// `helm template` of charts/kube-dns-rs with `set`.
fn helm_template(set: &[&str]) -> Result<String> {
    let helm = test_support::control_plane::binaries()?.join("helm");
    let mut command = Command::new(helm);
    command.args(["template", "kube-dns", "charts/kube-dns-rs"]);
    for s in set {
        command.args(["--set", s]);
    }
    let out = command
        .current_dir(repo_root())
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("kube-dns-rs-helm-cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("kube-dns-rs-helm-config"),
        )
        .output()
        .context("running helm")?;
    ensure!(
        out.status.success(),
        "helm template {set:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
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
    Ok(())
}
