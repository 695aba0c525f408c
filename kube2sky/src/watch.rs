//! The three Kubernetes watches (all namespaces): kube-rs `watcher` streams,
//! reduced and sent to the writer as [`Change`]s, each (re)list as one
//! [`Update::Relisted`]. Endpoints come from v1 Endpoints or EndpointSlices
//! ([`Source`]). Errors are retried with a short backoff ([`backoff`]).

use crate::config::EndpointsSource;
use crate::index::{Change, Update};
use crate::metrics::{Kind, Metrics, SkippedLabels};
use crate::objects::{ObjectKey, PodInfo, ServiceInfo, SliceInfo, WatchedPod};
use crate::records::HOSTNAMES_ANNOTATION;
use crate::validate::{self, Problem};
use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Service,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::{self, Event, ExponentialBackoff};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

mod recovering;
pub(crate) use recovering::Recovering;

/// List page size: bounds how many full objects exist at once during a list.
const PAGE_SIZE: u32 = 500;
/// First and longest pause between two attempts of a failing watch, before
/// jitter (backon adds up to the pause again: at most 1 s in all).
const BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_millis(500));

/// The watch backoff: exponential with jitter between [`BACKOFF`]'s bounds,
/// reset by kube-rs on every successful event.
pub(crate) fn backoff() -> ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(BACKOFF.0)
        .with_max_delay(BACKOFF.1)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .into()
}

/// Whether a watch error says the resourceVersion is newer than anything the
/// server has (client-go's `IsTooLargeResourceVersion`): only a new list helps.
pub(crate) fn is_too_large_resource_version(error: &watcher::Error) -> bool {
    let status = match error {
        watcher::Error::WatchError(status) => status.as_ref(),
        watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status))
        | watcher::Error::InitialListFailed(kube::Error::Api(status)) => status.as_ref(),
        _ => return false,
    };
    let cause = status.details.as_ref().is_some_and(|d| {
        d.causes
            .iter()
            .any(|c| c.reason == "ResourceVersionTooLarge")
    });
    cause || status.message.contains("Too large resource version")
}

/// Where endpoints come from, once `auto` is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// v1 Endpoints.
    Endpoints,
    /// discovery.k8s.io/v1 EndpointSlices.
    EndpointSlices,
}

/// Decides `--endpoints-source`: `auto` is EndpointSlices when the API
/// server's discovery lists `endpointslices` in `discovery.k8s.io/v1`
/// (Kubernetes 1.21+), Endpoints when the group is not served (a 1.2-era
/// API). A discovery request that fails otherwise is retried (every second,
/// until shutdown: `None`), so a passing API outage cannot pick the wrong one.
pub(crate) async fn decide_source(
    client: &Client,
    source: EndpointsSource,
    shutdown: &CancellationToken,
) -> Option<Source> {
    match source {
        EndpointsSource::Endpoints => return Some(Source::Endpoints),
        EndpointsSource::EndpointSlices => return Some(Source::EndpointSlices),
        EndpointsSource::Auto => {}
    }
    loop {
        let asked = tokio::select! {
            _ = shutdown.cancelled() => return None,
            r = client.list_api_group_resources("discovery.k8s.io/v1") => r,
        };
        let source = match asked {
            Ok(list) if list.resources.iter().any(|r| r.name == "endpointslices") => {
                Source::EndpointSlices
            }
            Ok(_) => Source::Endpoints,
            Err(kube::Error::Api(status)) if status.code == 404 => Source::Endpoints,
            // Not allowed to see the group: slices could not be watched either.
            Err(kube::Error::Api(status)) if matches!(status.code, 401 | 403) => {
                tracing::warn!(
                    code = status.code,
                    "discovery of discovery.k8s.io/v1 refused; watching v1 Endpoints"
                );
                Source::Endpoints
            }
            Err(error) => {
                tracing::warn!(%error, "cannot tell whether the API server serves EndpointSlices; asking again in 1s");
                tokio::select! {
                    _ = shutdown.cancelled() => return None,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        tracing::info!(
            "--endpoints-source=auto: watching {}",
            match source {
                Source::EndpointSlices => "EndpointSlices (discovery.k8s.io/v1 is served)",
                Source::Endpoints => "v1 Endpoints (discovery.k8s.io/v1 is not served)",
            }
        );
        return Some(source);
    }
}

/// Starts the endpoints (or EndpointSlices), services and (if enabled)
/// pods watches, in 1.2's order. `spec`: endpoints may share hostnames
/// (not reported as problems).
pub(crate) fn spawn_all(
    client: &Client,
    (source, pods, spec): (Source, bool, bool),
    tx: &mpsc::Sender<Change>,
    metrics: &Arc<Metrics>,
    shutdown: &CancellationToken,
) -> JoinSet<()> {
    let mut set = JoinSet::new();
    let ctx = |kind| Ctx {
        kind,
        spec,
        tx: tx.clone(),
        metrics: metrics.clone(),
        shutdown: shutdown.clone(),
    };
    match source {
        Source::Endpoints => set.spawn(
            run(
                Api::<Endpoints>::all(client.clone()),
                slim_endpoints,
                Change::Endpoints,
                ctx(Kind::Endpoints),
            )
            .instrument(tracing::info_span!("watch", kind = "endpoints")),
        ),
        Source::EndpointSlices => set.spawn(
            run(
                Api::<EndpointSlice>::all(client.clone()),
                SliceInfo::from,
                Change::EndpointSlice,
                ctx(Kind::EndpointSlices),
            )
            .instrument(tracing::info_span!("watch", kind = "endpointslices")),
        ),
    };
    set.spawn(
        run(
            Api::<Service>::all(client.clone()),
            ServiceInfo::from,
            Change::Service,
            ctx(Kind::Services),
        )
        .instrument(tracing::info_span!("watch", kind = "services")),
    );
    if pods {
        set.spawn(
            run(
                Api::<WatchedPod>::all(client.clone()),
                PodInfo::from,
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
    spec: bool,
    tx: mpsc::Sender<Change>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
}

/// The longest pause before a re-list when the server keeps sending watches
/// back to list (client-go's reflector backs off to 30 s as well).
const RELIST_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The pause before the `restarts`-th re-list in a row without an event:
/// [`BACKOFF`]'s first step, doubled each time up to [`RELIST_BACKOFF_MAX`],
/// so a server (or HA pair out of step) that keeps answering so cannot make
/// us list everything ten times a second.
pub(crate) fn relist_pause(restarts: u32) -> Duration {
    BACKOFF
        .0
        .saturating_mul(1 << restarts.min(16))
        .min(RELIST_BACKOFF_MAX)
}

/// Whether a watch error is 410 Gone: its resourceVersion is older than
/// the server's history, so only a new list helps.
pub(crate) fn is_gone(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchError(status) => status.code == 410,
        watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.code == 410,
        _ => false,
    }
}

/// A reduced object, as [`crate::validate`] checks it.
/// `spec`: the specification's records are on (endpoints may share a hostname).
trait Checked {
    fn key(&self) -> ObjectKey;
    fn problems(&self, spec: bool) -> Vec<Problem>;
}

impl Checked for ServiceInfo {
    fn key(&self) -> ObjectKey {
        self.key.clone()
    }
    fn problems(&self, _: bool) -> Vec<Problem> {
        validate::service(&self.to_service())
    }
}

impl Checked for Endpoints {
    fn key(&self) -> ObjectKey {
        ObjectKey::of(&self.metadata)
    }
    fn problems(&self, spec: bool) -> Vec<Problem> {
        validate::endpoints(self, spec)
    }
}

impl Checked for SliceInfo {
    fn key(&self) -> ObjectKey {
        self.key.clone()
    }
    /// A slice of no service is not a problem (it makes no records).
    fn problems(&self, spec: bool) -> Vec<Problem> {
        if self.service.is_none() {
            return Vec::new();
        }
        validate::endpoints(&self.as_endpoints(), spec)
    }
}

impl Checked for PodInfo {
    fn key(&self) -> ObjectKey {
        self.key.clone()
    }
    fn problems(&self, _: bool) -> Vec<Problem> {
        validate::pod(self)
    }
}

/// Logs and counts what of `obj` cannot become records (one warning per
/// problem, per version received); `None` when the object as a whole must
/// stay out of the index (its name or namespace would make a wrong key).
fn admit<T: Checked>(obj: T, ctx: &Ctx) -> Option<T> {
    let problems = obj.problems(ctx.spec);
    if problems.is_empty() {
        return Some(obj);
    }
    let key = obj.key();
    let whole = problems.iter().any(Problem::whole_object);
    for problem in &problems {
        let skipped = if whole { "the object" } else { "this part" };
        tracing::warn!(
            "{:?} {:?}/{:?}: {problem}; skipping {skipped}",
            ctx.kind,
            key.namespace,
            key.name
        );
        let labels = SkippedLabels {
            kind: ctx.kind,
            field: problem.field,
        };
        ctx.metrics.skipped.get_or_create(&labels).inc();
    }
    (!whole).then_some(obj)
}

/// [`admit`] without a report: for deletes, whose problems were reported
/// when the object was received.
fn admit_quietly<T: Checked>(obj: T, ctx: &Ctx) -> Option<T> {
    (!obj.problems(ctx.spec).iter().any(Problem::whole_object)).then_some(obj)
}

async fn run<K, T>(api: Api<K>, reduce: fn(K) -> T, wrap: fn(Update<T>) -> Change, ctx: Ctx)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
    T: Checked,
{
    let config = watcher::Config::default().page_size(PAGE_SIZE);
    let health = (ctx.kind, ctx.metrics.clone(), ctx.shutdown.clone());
    let mut events = Recovering::new(api, config, health);
    let mut buffer: Vec<T> = Vec::new();
    while let Some(event) = events.next().await {
        let update = match event {
            Event::Init => {
                buffer.clear();
                continue;
            }
            Event::InitApply(obj) => {
                buffer.extend(admit(reduce(obj), &ctx));
                continue;
            }
            Event::InitDone => Update::Relisted(std::mem::take(&mut buffer)),
            Event::Apply(obj) => match admit(reduce(obj), &ctx) {
                Some(obj) => {
                    seen(ctx.kind, &obj);
                    Update::Apply(obj)
                }
                None => continue,
            },
            Event::Delete(obj) => match admit_quietly(reduce(obj), &ctx) {
                Some(obj) => {
                    seen(ctx.kind, &obj);
                    Update::Delete(obj)
                }
                None => continue,
            },
        };
        if ctx.tx.send(wrap(update)).await.is_err() {
            return;
        }
    }
}

/// The first step of a change's propagation, for the benchmark's
/// breakdown (`RUST_LOG=kube2sky::timing=debug`; docs/testing.md).
fn seen<T: Checked>(kind: Kind, obj: &T) {
    let key = obj.key();
    tracing::debug!(target: "kube2sky::timing", ?kind, namespace = %key.namespace, name = %key.name, "watch event");
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

/// Endpoints with only name, namespace, the hostnames annotation, and per
/// subset the ready addresses' IP and hostname and the ports' name,
/// protocol and number (`notReadyAddresses` never make records).
pub(crate) fn slim_endpoints(ep: Endpoints) -> Endpoints {
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;

    fn from_json<T: DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_value(value).expect("valid object")
    }

    fn status(code: u16, message: &str, cause: Option<&str>) -> Box<kube::core::Status> {
        let causes: Vec<serde_json::Value> = cause
            .into_iter()
            .map(|c| serde_json::json!({"reason": c}))
            .collect();
        from_json(serde_json::json!({
            "status": "Failure", "code": code, "message": message, "reason": "Timeout",
            "details": {"causes": causes},
        }))
    }

    #[test]
    fn a_too_large_resource_version_is_told_from_other_errors() {
        let too_large = status(
            504,
            "Timeout: Too large resource version: 20, current: 4",
            Some("ResourceVersionTooLarge"),
        );
        let start = watcher::Error::WatchStartFailed(kube::Error::Api(too_large.clone()));
        assert!(is_too_large_resource_version(&start));
        assert!(is_too_large_resource_version(&watcher::Error::WatchError(
            too_large
        )));
        let by_cause = status(504, "something else", Some("ResourceVersionTooLarge"));
        assert!(is_too_large_resource_version(&watcher::Error::WatchError(
            by_cause
        )));
        let gone = status(410, "too old resource version", None);
        assert!(!is_too_large_resource_version(&watcher::Error::WatchError(
            gone
        )));
        assert!(!is_too_large_resource_version(
            &watcher::Error::NoResourceVersion
        ));
    }

    #[test]
    fn the_watch_backoff_starts_short_and_stays_within_a_second() {
        let delays: Vec<Duration> = backoff().take(30).collect();
        assert_eq!(delays.len(), 30, "the backoff never gives up");
        assert!(delays[0] <= BACKOFF.0 * 2, "{delays:?}");
        // backon's jitter adds up to the delay again.
        assert!(
            delays.iter().all(|d| *d <= Duration::from_secs(1)),
            "{delays:?}"
        );
        assert!(delays[29] >= BACKOFF.1, "it grows to the cap: {delays:?}");
    }

    #[test]
    fn repeated_relists_back_off_to_thirty_seconds() {
        assert_eq!(relist_pause(0), BACKOFF.0);
        assert_eq!(relist_pause(1), BACKOFF.0 * 2);
        assert_eq!(relist_pause(5), BACKOFF.0 * 32);
        assert_eq!(relist_pause(9), RELIST_BACKOFF_MAX);
        assert_eq!(relist_pause(u32::MAX), RELIST_BACKOFF_MAX);
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
        assert_eq!(ServiceInfo::from(svc).to_service(), slim);
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
