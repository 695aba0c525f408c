//! A Pod as kube2sky decodes it from the API server: [`WatchedPod`] reads only
//! the name, namespace and resourceVersion and the IPs of the status, and skips
//! the rest without building it. [`PodInfo`] (all a pod contributes to DNS) is
//! made from it.

use super::ObjectKey;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};

/// All a pod contributes to DNS (k/k#22290: never keep whole Pods).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PodInfo {
    /// Namespace and name.
    pub key: ObjectKey,
    /// `status.podIPs` (`status.podIP` first), empty when not assigned.
    pub ips: Vec<String>,
}

/// A `v1` Pod with only what kube2sky reads (see the module docs); the
/// type the pods watch lists and watches, in place of k8s-openapi's `Pod`.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct WatchedPod {
    /// Name, namespace and resourceVersion; nothing else is kept.
    #[serde(default, deserialize_with = "names_and_version")]
    pub metadata: ObjectMeta,
    /// `status.podIP` and `status.podIPs`.
    #[serde(default)]
    pub status: Option<PodAddresses>,
}

/// The IP fields of a Pod's status.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct PodAddresses {
    /// `status.podIP`.
    #[serde(default, rename = "podIP")]
    pub pod_ip: Option<String>,
    /// `status.podIPs`.
    #[serde(default, rename = "podIPs")]
    pub pod_ips: Option<Vec<PodAddress>>,
}

/// One entry of `status.podIPs`.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct PodAddress {
    /// The address; an entry without one counts as empty.
    #[serde(default)]
    pub ip: Option<String>,
}

/// The part of `metadata` a [`WatchedPod`] keeps.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NamesAndVersion {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
}

/// Decodes `metadata` into an `ObjectMeta` of name, namespace and
/// resourceVersion (kube-rs's watcher resumes from the last one); a `null`
/// metadata is an empty one.
fn names_and_version<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let kept = Option::<NamesAndVersion>::deserialize(d)?;
    Ok(kept.map_or_else(ObjectMeta::default, |m| ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        resource_version: m.resource_version,
        ..ObjectMeta::default()
    }))
}

impl k8s_openapi::Resource for WatchedPod {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Pod as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for WatchedPod {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl From<WatchedPod> for PodInfo {
    /// `status.podIP` first, then the other non-empty `status.podIPs`
    /// (dual-stack), each once.
    fn from(pod: WatchedPod) -> Self {
        let status = pod.status.unwrap_or_default();
        let mut ips: Vec<String> = status
            .pod_ip
            .into_iter()
            .filter(|ip| !ip.is_empty())
            .collect();
        for ip in status.pod_ips.into_iter().flatten().filter_map(|p| p.ip) {
            if !ip.is_empty() && !ips.contains(&ip) {
                ips.push(ip);
            }
        }
        PodInfo {
            key: ObjectKey::of(&pod.metadata),
            ips,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A Pod as a 1.33 API server sends it, trimmed but with every kind of
    /// field the decoder must skip: spec, labels, annotations, managedFields,
    /// owner references, conditions and container statuses.
    fn real_pod() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-7d4b9c-x2x9k", "namespace": "shop", "uid": "4c1e",
                "resourceVersion": "912345", "generateName": "web-7d4b9c-",
                "creationTimestamp": "2026-11-27T05:00:00Z",
                "labels": {"app": "web", "pod-template-hash": "7d4b9c"},
                "annotations": {"kubectl.kubernetes.io/restartedAt": "now"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web-7d4b9c", "uid": "9f", "controller": true}],
                "managedFields": [{"manager": "kubelet", "operation": "Update",
                    "apiVersion": "v1", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:podIPs": {".": {}, "k:{\"ip\":\"10.1.2.3\"}": {}}}}}]
            },
            "spec": {
                "containers": [{"name": "web", "image": "nginx:1.27",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                    "env": [{"name": "A", "value": "b"}]}],
                "nodeName": "node-1", "hostname": "web", "subdomain": "svc",
                "tolerations": [{"key": "k", "operator": "Exists"}]
            },
            "status": {
                "phase": "Running", "hostIP": "192.168.0.4",
                "podIP": "10.1.2.3",
                "podIPs": [{"ip": "10.1.2.3"}, {"ip": "fd00::3"}],
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0,
                    "image": "nginx:1.27", "imageID": "sha", "state": {"running": {}}}]
            }
        })
    }

    fn decode(value: serde_json::Value) -> WatchedPod {
        serde_json::from_value(value).expect("a pod kube2sky can decode")
    }

    /// What the whole k8s-openapi `Pod` made before: `status.podIP` first,
    /// then the rest of `status.podIPs`, each once, empty ones left out.
    fn from_whole_pod(value: serde_json::Value) -> PodInfo {
        let pod: Pod = serde_json::from_value(value).expect("valid Pod");
        let status = pod.status.unwrap_or_default();
        let mut ips: Vec<String> = status
            .pod_ip
            .into_iter()
            .filter(|i| !i.is_empty())
            .collect();
        for ip in status.pod_ips.into_iter().flatten().map(|p| p.ip) {
            if !ip.is_empty() && !ips.contains(&ip) {
                ips.push(ip);
            }
        }
        PodInfo {
            key: ObjectKey::of(&pod.metadata),
            ips,
        }
    }

    #[test]
    fn a_real_pod_keeps_its_key_its_version_and_its_ips_only() {
        let pod = decode(real_pod());
        assert_eq!(pod.metadata.resource_version.as_deref(), Some("912345"));
        assert_eq!(pod.metadata.labels, None);
        assert_eq!(pod.metadata.annotations, None);
        assert_eq!(pod.metadata.managed_fields, None);
        assert_eq!(pod.metadata.uid, None);
        let info = PodInfo::from(pod);
        assert_eq!(
            info,
            PodInfo {
                key: ObjectKey {
                    namespace: "shop".into(),
                    name: "web-7d4b9c-x2x9k".into()
                },
                ips: vec!["10.1.2.3".into(), "fd00::3".into()],
            }
        );
        assert_eq!(info, from_whole_pod(real_pod()));
    }

    #[test]
    fn pods_decode_to_what_the_whole_pod_made() {
        let cases = [
            json!({"metadata": {"name": "a", "namespace": "n"}}),
            json!({"metadata": {"name": "a"}, "status": {}}),
            json!({"metadata": {"name": "a", "namespace": "n"}, "status": {"podIP": ""}}),
            json!({"metadata": {"name": "a", "namespace": "n"},
                   "status": {"podIP": "fd00::1", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}}),
            json!({"metadata": {"name": "a", "namespace": "n"},
                   "status": {"podIPs": [{"ip": ""}, {"ip": "10.0.0.2"}]}}),
            json!({"metadata": {"name": "a", "namespace": "n"},
                   "status": {"podIP": null, "podIPs": null}}),
            json!({"metadata": {"name": "a", "namespace": "n"}, "status": null}),
        ];
        for case in cases {
            assert_eq!(
                PodInfo::from(decode(case.clone())),
                from_whole_pod(case.clone()),
                "{case}"
            );
        }
    }

    #[test]
    fn an_entry_of_pod_ips_without_an_ip_is_skipped_not_an_error() {
        let pod = decode(json!({"metadata": {"name": "a", "namespace": "n"},
                                "status": {"podIPs": [{}, {"ip": "10.0.0.3"}]}}));
        assert_eq!(PodInfo::from(pod).ips, ["10.0.0.3"]);
    }

    #[test]
    fn a_field_of_the_wrong_type_is_still_an_error() {
        for bad in [
            json!({"metadata": {"name": 7}}),
            json!({"metadata": {"name": "a"}, "status": {"podIP": 10}}),
            json!({"metadata": {"name": "a"}, "status": {"podIPs": "10.0.0.1"}}),
        ] {
            assert!(
                serde_json::from_value::<WatchedPod>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_watched_pod_is_listed_and_watched_where_pods_are() {
        use kube::Resource;
        assert_eq!(WatchedPod::kind(&()), "Pod");
        assert_eq!(WatchedPod::api_version(&()), "v1");
        assert_eq!(
            WatchedPod::url_path(&(), Some("shop")),
            Pod::url_path(&(), Some("shop"))
        );
        assert_eq!(WatchedPod::url_path(&(), None), "/api/v1/pods");
    }
}
