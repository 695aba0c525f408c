//! The NetworkPolicy example of docs/security.md ("NetworkPolicy for the
//! pod's ports"): one YAML object, a `networking.k8s.io/v1` NetworkPolicy
//! as Kubernetes' types read it, for the kube-dns pods of `kube-system`,
//! with DNS (53 UDP and TCP) open to all and the metrics and health ports
//! (8080, 8081, 9153) open to the `monitoring` namespace only; and those
//! ports are the ones the modern pod's containers declare.

use anyhow::{ensure, Context, Result};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyIngressRule};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

const HEADING: &str = "### NetworkPolicy for the pod's ports";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The first ```yaml block after `heading`, before the next heading.
fn yaml_block_after(text: &str, heading: &str) -> Result<String> {
    let (_, after) = text
        .split_once(&format!("\n{heading}\n"))
        .with_context(|| format!("no heading {heading:?}"))?;
    let mut block = None::<String>;
    for line in after.lines() {
        match &mut block {
            None if line.starts_with('#') => break,
            None if line == "```yaml" => block = Some(String::new()),
            None => {}
            Some(body) if line == "```" => return Ok(std::mem::take(body)),
            Some(body) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    anyhow::bail!("no closed ```yaml block under {heading:?}")
}

/// Ports of a rule as (port, protocol).
fn ports(rule: &NetworkPolicyIngressRule) -> Result<BTreeSet<(i32, String)>> {
    let mut out = BTreeSet::new();
    for p in rule.ports.iter().flatten() {
        let port = match p.port.as_ref().context("a rule's port without a number")? {
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => *n,
            other => anyhow::bail!("port {other:?}: want a number"),
        };
        let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".into());
        out.insert((port, protocol));
    }
    Ok(out)
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The one object of the example.
fn the_example() -> Result<(serde_yaml::Value, NetworkPolicy)> {
    let text = std::fs::read_to_string(root().join("docs/security.md"))?;
    let yaml = yaml_block_after(&text, HEADING)?;
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&yaml)
        .map(serde_yaml::Value::deserialize)
        .collect::<Result<_, _>>()
        .context("the example is not valid YAML")?;
    ensure!(docs.len() == 1, "{} YAML documents, want one", docs.len());
    let value = docs.into_iter().next().context("one document")?;
    let policy = serde_yaml::from_value(value.clone()).context("not a NetworkPolicy")?;
    Ok((value, policy))
}

#[test]
fn the_security_md_network_policy_keeps_dns_open_and_metrics_to_monitoring() -> Result<()> {
    let (value, policy) = the_example()?;
    ensure!(value["apiVersion"] == "networking.k8s.io/v1", "{value:?}");
    ensure!(value["kind"] == "NetworkPolicy", "{value:?}");
    ensure!(policy.metadata.namespace.as_deref() == Some("kube-system"));
    let spec = policy.spec.context("no spec")?;
    let selected = spec.pod_selector.unwrap_or_default();
    ensure!(
        selected.match_labels == Some(labels(&[("k8s-app", "kube-dns")])),
        "podSelector {selected:?}"
    );
    ensure!(spec.policy_types == Some(vec!["Ingress".to_owned()]));
    let rules = spec.ingress.context("no ingress rules")?;
    ensure!(rules.len() == 2, "{rules:?}");
    let dns = &rules[0];
    ensure!(
        dns.from.as_ref().is_none_or(Vec::is_empty),
        "DNS must be open to all: {dns:?}"
    );
    let want_dns = [(53, "UDP".to_owned()), (53, "TCP".to_owned())].into();
    ensure!(ports(dns)? == want_dns, "{dns:?}");
    let metrics = &rules[1];
    let from = metrics.from.as_deref().unwrap_or_default();
    ensure!(from.len() == 1, "{from:?}");
    ensure!(from[0].pod_selector.is_none() && from[0].ip_block.is_none());
    let namespaces = from[0].namespace_selector.clone().unwrap_or_default();
    let monitoring = labels(&[("kubernetes.io/metadata.name", "monitoring")]);
    ensure!(
        namespaces.match_labels == Some(monitoring),
        "{namespaces:?}"
    );
    let want = [8080, 8081, 9153].map(|p| (p, "TCP".to_owned())).into();
    ensure!(ports(metrics)? == want, "{metrics:?}");
    Ok(())
}

#[test]
fn the_policy_ports_are_the_modern_pods_ports() -> Result<()> {
    let (_, policy) = the_example()?;
    let mut in_policy = BTreeSet::new();
    for rule in policy.spec.and_then(|s| s.ingress).unwrap_or_default() {
        in_policy.extend(ports(&rule)?.into_iter().map(|(port, _)| port));
    }
    let mut declared = BTreeSet::new();
    let dir = root().join("deploy/kubernetes");
    for entry in std::fs::read_dir(&dir).with_context(|| format!("{}", dir.display()))? {
        let text = std::fs::read_to_string(entry?.path())?;
        for line in text.lines() {
            let port = line.trim_start().trim_start_matches("- ");
            if let Some(n) = port.strip_prefix("containerPort: ") {
                declared.insert(n.trim().parse::<i32>()?);
            }
        }
    }
    for port in &in_policy {
        ensure!(
            declared.contains(port),
            "port {port} of the policy is no containerPort of deploy/kubernetes ({declared:?})"
        );
    }
    Ok(())
}

#[test]
fn the_block_reader_reads_what_it_is_for() -> Result<()> {
    let text = "x\n### H\n\ntext\n```sh\nno\n```\n```yaml\na: 1\n```\n```yaml\nb: 2\n```\n";
    ensure!(yaml_block_after(text, "### H")? == "a: 1\n");
    ensure!(yaml_block_after("\n### H\n## next\n```yaml\na: 1\n```\n", "### H").is_err());
    Ok(())
}
