//! The kube-dns manifests as `podman kube play` runs them: [`podman_workload`]
//! turns what `deploy/render.sh` prints into the one workload podman can run,
//! changing only what podman needs (each change is listed in `docs/install.md`,
//! "podman: the pod from the manifests"). The function is pure;
//! `podman-manifest` is its command line.

use std::collections::BTreeMap;

use anyhow::{bail, ensure, Context, Result};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, Pod, PodSpec, ReplicationController, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

/// Where kube2sky finds its kubeconfig inside the container.
pub const KUBECONFIG_MOUNT: &str = "/etc/kube2sky";
/// The file in [`KUBECONFIG_MOUNT`] (and in the host directory).
pub const KUBECONFIG_FILE: &str = "kubeconfig";
/// The image the manifests name for etcd; replaced by [`PodmanOptions::etcd_image`].
pub const UPSTREAM_ETCD_IMAGE: &str = "registry.k8s.io/etcd:3.5.15-0";
/// The Deployment of the cluster-proportional autoscaler in the modern
/// manifests: dropped, not run.
pub const AUTOSCALER_DEPLOYMENT: &str = "kube-dns-autoscaler";

/// What the podman workload is made with.
#[derive(Debug, Clone)]
pub struct PodmanOptions {
    /// Host directory holding `kubeconfig`, mounted read-only into kube2sky.
    pub kubeconfig_dir: String,
    /// The local etcd image (`localhost/kube-dns-rs-podman/etcd:<version>`).
    pub etcd_image: String,
    /// The workload's name; `None` keeps the manifest's (`kube-dns-v11`,
    /// `kube-dns`). podman names a Deployment's pod `<name>-pod-0`.
    pub name: Option<String>,
}

/// The workload of a rendered manifest stream, as podman YAML.
pub fn podman_workload(stream: &str, options: &PodmanOptions) -> Result<String> {
    let config_maps = crate::kubelet_env::config_maps(stream)?;
    let mut workload = None;
    for (index, document) in serde_yaml::Deserializer::from_str(stream).enumerate() {
        let value = serde_yaml::Value::deserialize(document)
            .with_context(|| format!("document {}: not YAML", index + 1))?;
        let kind = value.get("kind").and_then(|k| k.as_str()).unwrap_or("");
        let found = match kind {
            "ReplicationController" => {
                let rc: ReplicationController = serde_yaml::from_value(value)
                    .with_context(|| format!("document {}: ReplicationController", index + 1))?;
                Some(pod_of_replication_controller(rc)?)
            }
            "Deployment" => {
                let deployment: Deployment = serde_yaml::from_value(value)
                    .with_context(|| format!("document {}: Deployment", index + 1))?;
                let autoscaler = deployment.metadata.name.as_deref() == Some(AUTOSCALER_DEPLOYMENT);
                (!autoscaler).then(|| Workload::Deployment(Box::new(deployment)))
            }
            _ => None,
        };
        if let Some(found) = found {
            ensure!(
                workload.is_none(),
                "more than one workload (ReplicationController or Deployment) in the manifests"
            );
            workload = Some(found);
        }
    }
    let Some(mut workload) = workload else {
        bail!("no ReplicationController or Deployment in the manifests");
    };
    workload.adapt(options, &config_maps)?;
    workload.to_yaml()
}

/// The one object podman runs.
enum Workload {
    Pod(Box<Pod>),
    Deployment(Box<Deployment>),
}

/// The Pod a ReplicationController's template describes, named after it.
fn pod_of_replication_controller(rc: ReplicationController) -> Result<Workload> {
    let name = rc
        .metadata
        .name
        .clone()
        .context("ReplicationController without a name")?;
    let template = rc
        .spec
        .and_then(|s| s.template)
        .with_context(|| format!("ReplicationController {name} has no pod template"))?;
    let labels = template.metadata.and_then(|m| m.labels);
    Ok(Workload::Pod(Box::new(Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: rc.metadata.namespace,
            labels,
            ..ObjectMeta::default()
        },
        spec: template.spec,
        status: None,
    })))
}

impl Workload {
    /// Applies every change listed in the module documentation.
    fn adapt(
        &mut self,
        options: &PodmanOptions,
        config_maps: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> Result<()> {
        let (metadata, spec) = match self {
            Workload::Pod(pod) => (&mut pod.metadata, pod.spec.as_mut()),
            Workload::Deployment(d) => {
                let spec = d.spec.get_or_insert_with(Default::default);
                spec.replicas = Some(1);
                (&mut d.metadata, spec.template.spec.as_mut())
            }
        };
        if let Some(name) = &options.name {
            metadata.name = Some(name.clone());
        }
        let name = metadata.name.clone().context("the workload has no name")?;
        let spec = spec.with_context(|| format!("{name} has no pod spec"))?;
        crate::kubelet_env::resolve_config_map_env(spec, config_maps)?;
        adapt_pod_spec(spec, &name, options)
    }

    fn to_yaml(&self) -> Result<String> {
        Ok(match self {
            Workload::Pod(pod) => serde_yaml::to_string(pod)?,
            Workload::Deployment(d) => serde_yaml::to_string(d)?,
        })
    }
}

/// The etcd image, kube2sky's kubeconfig, and pod-named volumes.
fn adapt_pod_spec(spec: &mut PodSpec, pod: &str, options: &PodmanOptions) -> Result<()> {
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    let renamed: Vec<(String, String)> = volumes
        .iter_mut()
        .map(|v| {
            let new = format!("{pod}-{}", v.name);
            (std::mem::replace(&mut v.name, new.clone()), new)
        })
        .collect();
    let kubeconfig_volume = format!("{pod}-kubeconfig");
    volumes.push(Volume {
        name: kubeconfig_volume.clone(),
        host_path: Some(HostPathVolumeSource {
            path: options.kubeconfig_dir.clone(),
            type_: Some("Directory".into()),
        }),
        ..Volume::default()
    });

    let (mut kube2sky, mut etcd) = (false, false);
    for container in &mut spec.containers {
        container.ports = None;
        for mount in container.volume_mounts.iter_mut().flatten() {
            if let Some((_, new)) = renamed.iter().find(|(old, _)| *old == mount.name) {
                mount.name = new.clone();
            }
        }
        if container.image.as_deref() == Some(UPSTREAM_ETCD_IMAGE) {
            container.image = Some(options.etcd_image.clone());
            // The probes are written for the upstream image; the stand-in
            // is Debian's etcd.
            container.liveness_probe = None;
            container.readiness_probe = None;
            etcd = true;
        }
        if container.name == "kube2sky" {
            kube2sky = true;
            container.args.get_or_insert_with(Vec::new).push(format!(
                "--kubecfg-file={KUBECONFIG_MOUNT}/{KUBECONFIG_FILE}"
            ));
            container
                .volume_mounts
                .get_or_insert_with(Vec::new)
                .push(VolumeMount {
                    name: kubeconfig_volume.clone(),
                    mount_path: KUBECONFIG_MOUNT.into(),
                    read_only: Some(true),
                    ..VolumeMount::default()
                });
        }
    }
    ensure!(kube2sky, "{pod} has no container named kube2sky");
    ensure!(
        etcd,
        "{pod} has no container with the image {UPSTREAM_ETCD_IMAGE}"
    );
    Ok(())
}

#[cfg(test)]
mod tests;
