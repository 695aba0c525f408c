//! The Prometheus rules of `deploy/monitoring/`, with Debian's real
//! `promtool`: the rule file checks, its unit tests pass (every alert fires
//! on a bad series and stays quiet on a good one, which this test also
//! checks is written down for each), the PrometheusRule holds exactly the
//! same groups, every alert has a runbook section in docs/monitoring.md,
//! and every series the rules read is one the binaries serve (the tables
//! of docs/monitoring.md, which list them).

use anyhow::{ensure, Context, Result};
use serde_yaml::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn monitoring_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/monitoring")
}

fn read_yaml(name: &str) -> Result<Value> {
    let path = monitoring_dir().join(name);
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    serde_yaml::from_str(&text).with_context(|| format!("{}", path.display()))
}

fn promtool(args: &[&str]) -> Result<String> {
    test_support::tools::promtool(&monitoring_dir(), args)
}

/// Every rule of the rule file, as (name, expression, runbook annotation).
fn rules() -> Result<Vec<(String, String, Option<String>)>> {
    let file = read_yaml("kube-dns-rs.rules.yaml")?;
    let mut out = Vec::new();
    for group in file["groups"].as_sequence().context("groups")? {
        for rule in group["rules"].as_sequence().context("rules")? {
            let name = rule["alert"].as_str().or(rule["record"].as_str());
            let expr = rule["expr"].as_str().context("expr")?;
            let runbook = rule["annotations"]["runbook"].as_str().map(str::to_string);
            out.push((name.context("name")?.to_string(), expr.to_string(), runbook));
        }
    }
    Ok(out)
}

fn alerts() -> Result<Vec<(String, Option<String>)>> {
    Ok(rules()?
        .into_iter()
        .filter(|(name, _, _)| !name.contains(':'))
        .map(|(name, _, runbook)| (name, runbook))
        .collect())
}

#[test]
fn the_rules_check_and_their_unit_tests_pass() -> Result<()> {
    let checked = promtool(&["check", "rules", "kube-dns-rs.rules.yaml"])?;
    ensure!(checked.contains("SUCCESS"), "{checked}");
    let tested = promtool(&["test", "rules", "kube-dns-rs.rules.test.yaml"])?;
    ensure!(tested.contains("SUCCESS"), "{tested}");
    // The PrometheusRule is the same rules for the Prometheus Operator.
    let operator = read_yaml("kube-dns-rs.prometheusrule.yaml")?;
    ensure!(operator["kind"] == "PrometheusRule", "{operator:?}");
    let file = read_yaml("kube-dns-rs.rules.yaml")?;
    ensure!(
        operator["spec"]["groups"] == file["groups"],
        "kube-dns-rs.prometheusrule.yaml's groups differ from kube-dns-rs.rules.yaml's"
    );
    Ok(())
}

#[test]
fn every_alert_is_tested_firing_and_quiet() -> Result<()> {
    let tests = read_yaml("kube-dns-rs.rules.test.yaml")?;
    let (mut fires, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    for test in tests["tests"].as_sequence().context("tests")? {
        for case in test["alert_rule_test"].as_sequence().into_iter().flatten() {
            let name = case["alertname"].as_str().context("alertname")?.to_string();
            match case["exp_alerts"].as_sequence() {
                Some(expected) if !expected.is_empty() => fires.insert(name),
                _ => quiet.insert(name),
            };
        }
    }
    for (alert, _) in alerts()? {
        ensure!(
            fires.contains(&alert),
            "{alert}: no unit test where it fires"
        );
        ensure!(
            quiet.contains(&alert),
            "{alert}: no unit test where it stays quiet"
        );
    }
    Ok(())
}

#[test]
fn every_alert_has_a_runbook_and_reads_documented_series() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let docs = std::fs::read_to_string(root.join("docs/monitoring.md"))?;
    let alerts = alerts()?;
    ensure!(alerts.len() >= 10, "{alerts:?}");
    for (alert, runbook) in &alerts {
        let anchor = format!("docs/monitoring.md#{}", alert.to_lowercase());
        ensure!(
            runbook.as_deref() == Some(&*anchor),
            "{alert}: runbook {runbook:?}"
        );
        ensure!(
            docs.contains(&format!("\n### {alert}\n")),
            "{alert}: no runbook section `### {alert}` in docs/monitoring.md"
        );
    }
    // Series the binaries serve, read in the rules: each is in the tables.
    for (name, expr, _) in rules()? {
        for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            let family = ["_bucket", "_total"]
                .iter()
                .fold(word, |w, suffix| w.strip_suffix(suffix).unwrap_or(w));
            let ours = ["skydns_dns_", "kube2sky_", "exechealthz_"]
                .iter()
                .any(|p| family.starts_with(p));
            if ours {
                ensure!(
                    docs.contains(&format!("`{family}")),
                    "{name} reads {word}, which docs/monitoring.md does not list"
                );
            }
        }
    }
    Ok(())
}
