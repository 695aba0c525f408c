//! The etcd probes of the modern manifests, asked of a real etcd: the
//! in-pod etcd of `deploy/kubernetes` is started with the manifest's own
//! command line (its data directory and loopback ports moved to the
//! test's), and both probes' paths answer 200 with a healthy body on the
//! port of its `-listen-metrics-urls`. A path etcd does not serve would get
//! 404, so a misspelt probe fails here. The shared-etcd members carry the
//! same probes (checked against the in-pod etcd's). The etcd is the one
//! `scripts/kube-tools.sh` builds (3.6; the manifests pull 3.5.15, whose
//! `/health` takes the same `exclude` and `serializable` parameters).

use std::process::Command;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Container, Probe};
use serde::Deserialize;
use test_support::ports::{free_port, retry_on_conflict};
use test_support::process::Process;

const START: Duration = Duration::from_secs(60);

/// Every etcd container of `kubectl kustomize deploy/FLAVOUR`.
fn etcd_containers(flavour: &str) -> Result<Vec<Container>> {
    let stream = test_support::deploy::kustomize(&format!("deploy/{flavour}"))?;
    let mut found = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&stream) {
        let value = serde_yaml::Value::deserialize(document)?;
        let spec = match value.get("kind").and_then(|k| k.as_str()) {
            Some("Deployment") => serde_yaml::from_value::<Deployment>(value)?
                .spec
                .and_then(|s| s.template.spec),
            Some("StatefulSet") => serde_yaml::from_value::<StatefulSet>(value)?
                .spec
                .and_then(|s| s.template.spec),
            _ => None,
        };
        for c in spec.map(|s| s.containers).unwrap_or_default() {
            if c.name == "etcd" {
                found.push(c);
            }
        }
    }
    Ok(found)
}

/// `(path, port)` of a probe's httpGet.
fn http_get(probe: &Option<Probe>) -> Result<(String, i32)> {
    let get = probe
        .as_ref()
        .and_then(|p| p.http_get.as_ref())
        .context("no httpGet probe")?;
    let port = match &get.port {
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => *n,
        other => anyhow::bail!("probe port {other:?}: use numbers"),
    };
    Ok((get.path.clone().unwrap_or_default(), port))
}

/// The manifest's etcd command with the data directory in `data` and the
/// client and metrics URLs on loopback ports; the metrics port.
fn local_command(manifest: &[String], data: &str) -> Result<(Vec<String>, u16)> {
    let (client, metrics) = (free_port()?, free_port()?);
    let mut command = Vec::new();
    let mut args = manifest.iter().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().context("a flag without a value")?;
        let value = match flag.as_str() {
            "-data-dir" => format!("{data}/data"),
            "-listen-client-urls" | "-advertise-client-urls" => {
                format!("http://127.0.0.1:{client}")
            }
            "-listen-metrics-urls" => format!("http://127.0.0.1:{metrics}"),
            _ => value.clone(),
        };
        command.extend([flag.clone(), value]);
    }
    // The peer URL etcd defaults to (2380) may be taken on a shared machine.
    let peer = free_port()?;
    command.extend([
        "-listen-peer-urls".into(),
        format!("http://127.0.0.1:{peer}"),
        "-initial-advertise-peer-urls".into(),
        format!("http://127.0.0.1:{peer}"),
        "-initial-cluster".into(),
        format!("default=http://127.0.0.1:{peer}"),
    ]);
    Ok((command, metrics))
}

#[test]
fn the_etcd_probes_are_answered_by_a_real_etcd() -> Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let get = |url: String| runtime.block_on(async move { test_support::http::get(&url).await });
    let pod = etcd_containers("kubernetes")?;
    ensure!(pod.len() == 1, "one etcd in deploy/kubernetes");
    let etcd = &pod[0];
    let readiness = http_get(&etcd.readiness_probe)?;
    let liveness = http_get(&etcd.liveness_probe)?;
    let manifest = etcd.command.clone().context("etcd's command")?;
    let at = manifest
        .iter()
        .position(|a| a == "-listen-metrics-urls")
        .context("no -listen-metrics-urls")?;
    let port: i32 = manifest[at + 1]
        .rsplit_once(':')
        .context("a URL")?
        .1
        .parse()?;
    assert_eq!(readiness.1, port, "readiness on the metrics listener");
    assert_eq!(liveness.1, port, "liveness on the metrics listener");

    let binary = test_support::control_plane::binaries()?.join("etcd");
    let dir = tempfile::tempdir()?;
    let data = dir.path().display().to_string();
    let (mut process, metrics) = retry_on_conflict(|| {
        let (args, metrics) = local_command(&manifest, &data)?;
        let _ = std::fs::remove_dir_all(dir.path().join("data"));
        let mut command = Command::new(&binary);
        command.args(&args);
        let log = dir.path().join("etcd.log");
        let mut process = Process::spawn_logged("etcd", command, &log)?;
        let url = format!("http://127.0.0.1:{metrics}{}", readiness.0);
        let ready = runtime.block_on(process.until_ready(START, async || {
            let reply = test_support::http::get(&url).await?;
            ensure!(reply.status == 200, "{url}: {}", reply.status);
            Ok(())
        }));
        match ready {
            Ok(()) => Ok((process, metrics)),
            Err(e) => {
                process.stop();
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                Err(e.context(text))
            }
        }
    })?;

    for (what, path) in [("readiness", &readiness.0), ("liveness", &liveness.0)] {
        let reply = get(format!("http://127.0.0.1:{metrics}{path}"))?;
        assert_eq!(reply.status, 200, "{what} {path}: {}", reply.body);
        assert!(
            reply.body.contains(r#""health":"true""#),
            "{what} {path}: {}",
            reply.body
        );
    }
    // A path etcd does not serve is not 200: the check above can fail.
    let wrong = get(format!("http://127.0.0.1:{metrics}/healthz"))?;
    assert_eq!(wrong.status, 404, "{}", wrong.body);
    process.stop();

    // The shared members probe the same paths on their metrics port.
    let members = etcd_containers("shared-etcd")?;
    assert_eq!(members.len(), 3);
    for member in &members {
        assert_eq!(http_get(&member.readiness_probe)?.0, readiness.0);
        assert_eq!(http_get(&member.liveness_probe)?.0, liveness.0);
        let command = member.command.clone().unwrap_or_default();
        let at = command.iter().position(|a| a == "-listen-metrics-urls");
        let url = at
            .and_then(|i| command.get(i + 1))
            .context("member metrics URL")?;
        assert!(url.ends_with(&format!(":{}", http_get(&member.readiness_probe)?.1)));
    }
    Ok(())
}
