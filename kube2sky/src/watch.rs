//! The three Kubernetes watches (all namespaces): kube-rs `watcher` streams
//! with the default backoff, reduced and sent to the writer as
//! [`Change`]s.
//!
//! Each watch buffers `InitApply` events between `Init` and `InitDone` and
//! sends them as one [`Update::Relisted`], so the writer learns the complete
//! set after every (re)list, including the one the watcher does after a
//! 410 Gone, and can delete whatever is no longer there. Objects are reduced
//! before they are buffered or sent: Pods to `(namespace, name, ip)`
//! (k/k#22290), Services and Endpoints to the fields records use.

use crate::index::{Change, ObjectKey, PodInfo, Update};
use crate::metrics::{Kind, Metrics};
use crate::records::HOSTNAMES_ANNOTATION;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Pod, Service, ServicePort,
    ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// List page size: bounds how many full objects exist at once during a list.
const PAGE_SIZE: u32 = 500;

/// Starts the endpoints, services and (if enabled) pods watches, in 1.2's order.
pub fn spawn_all(
    client: &Client,
    pods: bool,
    tx: &mpsc::Sender<Change>,
    metrics: &Arc<Metrics>,
    shutdown: &CancellationToken,
) -> JoinSet<()> {
    let mut set = JoinSet::new();
    let ctx = |kind| Ctx {
        kind,
        tx: tx.clone(),
        metrics: metrics.clone(),
        shutdown: shutdown.clone(),
    };
    set.spawn(
        run(
            Api::<Endpoints>::all(client.clone()),
            slim_endpoints,
            Change::Endpoints,
            ctx(Kind::Endpoints),
        )
        .instrument(tracing::info_span!("watch", kind = "endpoints")),
    );
    set.spawn(
        run(
            Api::<Service>::all(client.clone()),
            slim_service,
            Change::Service,
            ctx(Kind::Services),
        )
        .instrument(tracing::info_span!("watch", kind = "services")),
    );
    if pods {
        set.spawn(
            run(
                Api::<Pod>::all(client.clone()),
                pod_info,
                Change::Pod,
                ctx(Kind::Pods),
            )
            .instrument(tracing::info_span!("watch", kind = "pods")),
        );
    }
    set
}

struct Ctx {
    kind: Kind,
    tx: mpsc::Sender<Change>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
}

async fn run<K, T>(api: Api<K>, reduce: fn(K) -> T, wrap: fn(Update<T>) -> Change, ctx: Ctx)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let mut stream = watcher::watcher(api, watcher::Config::default().page_size(PAGE_SIZE))
        .default_backoff()
        .boxed();
    let mut buffer: Vec<T> = Vec::new();
    loop {
        let item = tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            item = stream.next() => item,
        };
        let event = match item {
            None => return,
            Some(Err(error)) => {
                tracing::warn!(%error, "watch failed; retrying with backoff");
                ctx.metrics.set_watch_ok(ctx.kind, false);
                continue;
            }
            Some(Ok(event)) => event,
        };
        ctx.metrics.set_watch_ok(ctx.kind, true);
        let update = match event {
            Event::Init => {
                buffer.clear();
                continue;
            }
            Event::InitApply(obj) => {
                buffer.push(reduce(obj));
                continue;
            }
            Event::InitDone => Update::Relisted(std::mem::take(&mut buffer)),
            Event::Apply(obj) => Update::Apply(reduce(obj)),
            Event::Delete(obj) => Update::Delete(reduce(obj)),
        };
        if ctx.tx.send(wrap(update)).await.is_err() {
            return;
        }
    }
}

fn slim_meta(meta: ObjectMeta, keep_annotation: Option<&str>) -> ObjectMeta {
    let annotations = keep_annotation.and_then(|name| {
        let value = meta.annotations.as_ref()?.get(name)?.clone();
        Some([(name.to_string(), value)].into())
    });
    ObjectMeta {
        namespace: meta.namespace,
        name: meta.name,
        annotations,
        ..ObjectMeta::default()
    }
}

/// A Service with only what records use: name, namespace, type,
/// clusterIP, externalName and each port's name, protocol and number.
pub fn slim_service(svc: Service) -> Service {
    let spec = svc.spec.map(|spec| ServiceSpec {
        type_: spec.type_,
        cluster_ip: spec.cluster_ip,
        external_name: spec.external_name,
        ports: spec.ports.map(|ports| {
            ports
                .into_iter()
                .map(|p| ServicePort {
                    name: p.name,
                    protocol: p.protocol,
                    port: p.port,
                    ..ServicePort::default()
                })
                .collect()
        }),
        ..ServiceSpec::default()
    });
    Service {
        metadata: slim_meta(svc.metadata, None),
        spec,
        status: None,
    }
}

/// Endpoints with only name, namespace, the hostnames annotation, and per
/// subset the ready addresses' IP and hostname and the ports' name,
/// protocol and number (`notReadyAddresses` never make records).
pub fn slim_endpoints(ep: Endpoints) -> Endpoints {
    let subsets = ep.subsets.map(|subsets| {
        subsets
            .into_iter()
            .map(|subset| EndpointSubset {
                addresses: subset.addresses.map(|addresses| {
                    addresses
                        .into_iter()
                        .map(|a| EndpointAddress {
                            ip: a.ip,
                            hostname: a.hostname,
                            ..EndpointAddress::default()
                        })
                        .collect()
                }),
                not_ready_addresses: None,
                ports: subset.ports.map(|ports| {
                    ports
                        .into_iter()
                        .map(|p| EndpointPort {
                            name: p.name,
                            protocol: p.protocol,
                            port: p.port,
                            ..EndpointPort::default()
                        })
                        .collect()
                }),
            })
            .collect()
    });
    Endpoints {
        metadata: slim_meta(ep.metadata, Some(HOSTNAMES_ANNOTATION)),
        subsets,
    }
}

/// The only part of a Pod kube2sky keeps.
pub fn pod_info(pod: Pod) -> PodInfo {
    PodInfo {
        key: ObjectKey::of(&pod.metadata),
        ip: pod.status.and_then(|s| s.pod_ip).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;

    fn from_json<T: DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_value(value).expect("valid object")
    }

    #[test]
    fn services_keep_only_what_records_use() {
        let svc: Service = from_json(serde_json::json!({
            "metadata": {"name": "web", "namespace": "d", "labels": {"a": "b"},
                         "annotations": {"x": "y"}, "resourceVersion": "7"},
            "spec": {"type": "ClusterIP", "clusterIP": "10.0.0.5", "clusterIPs": ["10.0.0.5"],
                     "selector": {"app": "web"}, "sessionAffinity": "None",
                     "ports": [{"name": "http", "protocol": "TCP", "port": 80,
                                "targetPort": 8080, "nodePort": 30080}]},
            "status": {"loadBalancer": {}},
        }));
        let slim: Service = from_json(serde_json::json!({
            "metadata": {"name": "web", "namespace": "d"},
            "spec": {"type": "ClusterIP", "clusterIP": "10.0.0.5",
                     "ports": [{"name": "http", "protocol": "TCP", "port": 80}]},
        }));
        assert_eq!(slim_service(svc), slim);
    }

    #[test]
    fn endpoints_keep_only_ready_ips_hostnames_and_ports() {
        let ep: Endpoints = from_json(serde_json::json!({
            "metadata": {"name": "h", "namespace": "d", "labels": {"a": "b"},
                         "annotations": {HOSTNAMES_ANNOTATION: "{}", "other": "x"}},
            "subsets": [{
                "addresses": [{"ip": "10.1.0.1", "hostname": "web-0", "nodeName": "n1",
                               "targetRef": {"kind": "Pod", "name": "web-0"}}],
                "notReadyAddresses": [{"ip": "10.1.0.2"}],
                "ports": [{"name": "http", "protocol": "TCP", "port": 80, "appProtocol": "http"}],
            }],
        }));
        let slim = slim_endpoints(ep);
        let expected: Endpoints = from_json(serde_json::json!({
            "metadata": {"name": "h", "namespace": "d",
                         "annotations": {HOSTNAMES_ANNOTATION: "{}"}},
            "subsets": [{
                "addresses": [{"ip": "10.1.0.1", "hostname": "web-0"}],
                "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
            }],
        }));
        assert_eq!(slim, expected);
        let kept = slim.subsets.as_deref().unwrap_or_default();
        assert_eq!(
            kept[0].addresses.as_deref().unwrap_or_default()[0].target_ref,
            None::<ObjectReference>
        );
    }
}
