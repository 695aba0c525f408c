//! The resource types the server knows, and their per-type rules:
//! [`ResourceKind`] names each served resource and owns the type-specific parts
//! of a write (decoding, defaults, validation, the `status` subresource).
//! [`Served`] is which of the kinds a server serves.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::events::v1::Event;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use super::names::{dns1123_label, dns1123_subdomain};
use super::status::ApiError;
use super::{configmap, endpointslice, event, podips};

/// A resource served by the test server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceKind {
    /// `namespaces` (cluster scoped).
    Namespace,
    /// `services`.
    Service,
    /// `endpoints`.
    Endpoints,
    /// `pods`.
    Pod,
    /// `configmaps`.
    ConfigMap,
    /// `leases` (`coordination.k8s.io/v1`).
    Lease,
    /// `endpointslices` (`discovery.k8s.io/v1`).
    EndpointSlice,
    /// `events` (`events.k8s.io/v1`).
    Event,
}

impl ResourceKind {
    /// All served resources, in discovery order.
    pub const ALL: [ResourceKind; 8] = [
        Self::Namespace,
        Self::Service,
        Self::Endpoints,
        Self::Pod,
        Self::ConfigMap,
        Self::Lease,
        Self::EndpointSlice,
        Self::Event,
    ];

    /// The `apiVersion`: `v1` for the core group, `<group>/<version>` otherwise.
    pub fn api_version(self) -> &'static str {
        match self {
            Self::Lease => "coordination.k8s.io/v1",
            Self::EndpointSlice => "discovery.k8s.io/v1",
            Self::Event => "events.k8s.io/v1",
            _ => "v1",
        }
    }

    /// The kinds served under `api_version` (a path's `/api/v1` or
    /// `/apis/<group>/<version>`), in discovery order.
    pub fn of_version(api_version: &str) -> impl Iterator<Item = ResourceKind> + '_ {
        Self::ALL
            .into_iter()
            .filter(move |k| k.api_version() == api_version)
    }

    /// The URL plural, e.g. `services`.
    pub fn plural(self) -> &'static str {
        match self {
            Self::Namespace => "namespaces",
            Self::Service => "services",
            Self::Endpoints => "endpoints",
            Self::Pod => "pods",
            Self::ConfigMap => "configmaps",
            Self::Lease => "leases",
            Self::EndpointSlice => "endpointslices",
            Self::Event => "events",
        }
    }

    /// The lowercase singular name used in discovery.
    pub fn singular(self) -> &'static str {
        match self {
            Self::Namespace => "namespace",
            Self::Service => "service",
            Self::Endpoints => "endpoints",
            Self::Pod => "pod",
            Self::ConfigMap => "configmap",
            Self::Lease => "lease",
            Self::EndpointSlice => "endpointslice",
            Self::Event => "event",
        }
    }

    /// The `kind` field value.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Namespace => "Namespace",
            Self::Service => "Service",
            Self::Endpoints => "Endpoints",
            Self::Pod => "Pod",
            Self::ConfigMap => "ConfigMap",
            Self::Lease => "Lease",
            Self::EndpointSlice => "EndpointSlice",
            Self::Event => "Event",
        }
    }

    /// The kind qualified by its group (`Lease.coordination.k8s.io`; a core
    /// kind alone), as the real server names it in a 422 Invalid.
    pub fn qualified_kind(self) -> String {
        match self.api_version().rsplit_once('/') {
            Some((group, _)) => format!("{}.{group}", self.kind()),
            None => self.kind().to_string(),
        }
    }

    /// Short names advertised in discovery (what `kubectl get svc` resolves).
    pub fn short_names(self) -> &'static [&'static str] {
        match self {
            Self::Namespace => &["ns"],
            Self::Service => &["svc"],
            Self::Endpoints => &["ep"],
            Self::Pod => &["po"],
            Self::ConfigMap => &["cm"],
            Self::Event => &["ev"],
            Self::Lease | Self::EndpointSlice => &[],
        }
    }

    /// Categories advertised in discovery (`all`: what `kubectl get all`
    /// lists).
    pub fn categories(self) -> &'static [&'static str] {
        match self {
            Self::Service | Self::Endpoints | Self::Pod => &["all"],
            Self::Namespace | Self::ConfigMap | Self::Lease | Self::EndpointSlice | Self::Event => {
                &[]
            }
        }
    }

    /// Whether objects of this kind live in a namespace.
    pub fn namespaced(self) -> bool {
        !matches!(self, Self::Namespace)
    }

    /// Whether the resource has a `status` subresource.
    pub fn has_status(self) -> bool {
        !matches!(
            self,
            Self::Endpoints | Self::ConfigMap | Self::Lease | Self::EndpointSlice | Self::Event
        )
    }

    /// Whether a PUT to a missing object creates it (true for endpoints only).
    pub fn create_on_update(self) -> bool {
        matches!(self, Self::Endpoints)
    }

    /// Looks a resource up by URL plural.
    pub fn from_plural(api_version: &str, plural: &str) -> Option<Self> {
        Self::of_version(api_version).find(|k| k.plural() == plural)
    }

    /// Looks a resource up by `kind` (used by seeding).
    pub fn from_kind(kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.kind() == kind)
    }

    /// Decodes `body` as this kind and returns its normalized JSON form.
    ///
    /// Missing `apiVersion`/`kind` are filled in (as the server does from the
    /// URL); wrong ones, unknown enum values, wrong field types and the like
    /// are a 400 BadRequest, just as a decode failure is on the real server.
    /// What the real server does on every decode happens here too: a Pod's
    /// `podIP`/`podIPs` conversion, an EndpointSlice's port defaults.
    pub fn decode(self, mut body: Value) -> Result<Value, ApiError> {
        let Some(obj) = body.as_object_mut() else {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        };
        obj.entry("apiVersion")
            .or_insert_with(|| json!(self.api_version()));
        obj.entry("kind").or_insert_with(|| json!(self.kind()));
        let api_version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        if api_version != self.api_version() || kind != self.kind() {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) and kind ({kind}) do not match the resource {} {} ",
                self.api_version(),
                self.kind()
            )));
        }
        match self {
            Self::Namespace => roundtrip::<Namespace>(body),
            Self::Service => roundtrip::<Service>(body),
            Self::Endpoints => roundtrip::<Endpoints>(body),
            Self::ConfigMap => roundtrip::<ConfigMap>(body),
            Self::Lease => roundtrip::<Lease>(body),
            Self::Event => roundtrip::<Event>(body),
            Self::EndpointSlice => {
                let mut obj = roundtrip::<EndpointSlice>(body)?;
                endpointslice::default(&mut obj);
                Ok(obj)
            }
            Self::Pod => {
                let mut obj = roundtrip::<Pod>(body)?;
                podips::convert_pod_ips(&mut obj);
                Ok(obj)
            }
        }
    }

    /// Checks an object about to be stored (`old`: the stored one, on an
    /// update) as the real server's validation does, for the fields it
    /// checks here: a 422 Invalid listing every field error.
    pub fn validate(self, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
        let errors = match self {
            Self::EndpointSlice => endpointslice::validate(obj, old),
            Self::Pod => podips::validate_pod_ips(obj),
            Self::ConfigMap => configmap::validate(obj, old),
            Self::Event => event::validate(obj, old),
            Self::Namespace | Self::Service | Self::Endpoints | Self::Lease => Vec::new(),
        };
        if errors.is_empty() {
            return Ok(());
        }
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        Err(ApiError::invalid_fields(
            &self.qualified_kind(),
            self.plural(),
            name,
            &errors,
        ))
    }

    /// Applies the defaults kube-apiserver sets on create.
    pub fn apply_create_defaults(self, obj: &mut Value) {
        match self {
            Self::Namespace => {
                let name = obj["metadata"]["name"].clone();
                obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
                obj["spec"] = json!({ "finalizers": ["kubernetes"] });
                obj["status"] = json!({ "phase": "Active" });
            }
            Self::Service => default_service(obj),
            Self::Endpoints | Self::ConfigMap | Self::Lease | Self::EndpointSlice | Self::Event => {
            }
            Self::Pod => default_pod(obj),
        }
    }

    /// Resets the status a client sent on create, as the real server does.
    pub fn reset_status_on_create(self, obj: &mut Value) {
        match self {
            Self::Service => obj["status"] = json!({ "loadBalancer": {} }),
            Self::Pod => obj["status"] = json!({ "phase": "Pending", "qosClass": "BestEffort" }),
            Self::Namespace
            | Self::Endpoints
            | Self::ConfigMap
            | Self::Lease
            | Self::EndpointSlice
            | Self::Event => {}
        }
    }

    /// Checks a name the way the real server does for this kind.
    pub fn validate_name(self, name: &str) -> Result<(), String> {
        let ok = match self {
            // DNS-1035 label for services, DNS-1123 label for namespaces.
            Self::Service => {
                dns1123_label(name) && name.starts_with(|c: char| c.is_ascii_lowercase())
            }
            Self::Namespace => dns1123_label(name),
            // DNS-1123 subdomain for the rest.
            Self::Endpoints
            | Self::Pod
            | Self::ConfigMap
            | Self::Lease
            | Self::EndpointSlice
            | Self::Event => dns1123_subdomain(name),
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "metadata.name: Invalid value: \"{name}\": a lowercase RFC 1123 name must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
            ))
        }
    }
}

/// Which kinds a server serves: all, or all but EndpointSlices and
/// events.k8s.io Events (an API from before `discovery.k8s.io`, such as
/// Kubernetes 1.2's, which had neither group; Leases stay, as leader
/// election needs them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Served {
    /// Whether `discovery.k8s.io/v1` EndpointSlices and `events.k8s.io/v1`
    /// Events are served.
    pub(crate) endpoint_slices: bool,
}

impl Served {
    /// Whether `kind` is served.
    pub(crate) fn serves(self, kind: ResourceKind) -> bool {
        !matches!(kind, ResourceKind::EndpointSlice | ResourceKind::Event) || self.endpoint_slices
    }

    /// The served kinds, in discovery order.
    pub(crate) fn kinds(self) -> impl Iterator<Item = ResourceKind> {
        ResourceKind::ALL
            .into_iter()
            .filter(move |k| self.serves(*k))
    }

    /// The served kinds of `api_version`, in discovery order.
    pub(crate) fn of_version(self, api_version: &str) -> impl Iterator<Item = ResourceKind> + '_ {
        ResourceKind::of_version(api_version).filter(move |k| self.serves(*k))
    }
}

fn roundtrip<T: DeserializeOwned + Serialize>(body: Value) -> Result<Value, ApiError> {
    let typed: T = serde_json::from_value(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))?;
    serde_json::to_value(typed)
        .map_err(|e| ApiError::bad_request(format!("error encoding object: {e}")))
}

fn default_service(obj: &mut Value) {
    let spec = &mut obj["spec"];
    if !spec.is_object() {
        *spec = json!({});
    }
    for (field, value) in [
        ("type", "ClusterIP"),
        ("sessionAffinity", "None"),
        ("internalTrafficPolicy", "Cluster"),
    ] {
        if spec.get(field).is_none() {
            spec[field] = json!(value);
        }
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports {
            if port.get("protocol").is_none() {
                port["protocol"] = json!("TCP");
            }
            if port.get("targetPort").is_none() {
                port["targetPort"] = port["port"].clone();
            }
        }
    }
}

fn default_pod(obj: &mut Value) {
    let spec = &mut obj["spec"];
    if !spec.is_object() {
        *spec = json!({ "containers": [] });
    }
    for (field, value) in [
        ("restartPolicy", json!("Always")),
        ("dnsPolicy", json!("ClusterFirst")),
        ("schedulerName", json!("default-scheduler")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("securityContext", json!({})),
    ] {
        if spec.get(field).is_none() {
            spec[field] = value;
        }
    }
}

/// Splits an object into (status, rest) so status updates can be applied
/// separately from spec/metadata updates.
pub(crate) fn status_of(obj: &Value) -> Value {
    obj.get("status").cloned().unwrap_or(Value::Null)
}

/// Replaces (or removes, for `Null`) the `status` field of `obj`.
pub(crate) fn set_status(obj: &mut Value, status: Value) {
    if let Some(map) = obj.as_object_mut() {
        if status.is_null() {
            map.remove("status");
        } else {
            map.insert("status".into(), status);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An events.k8s.io Event as kube-rs's `Recorder` sends it decodes to
    /// its normalized form (microsecond `eventTime`, kind filled in); a
    /// core/v1 Event body is not one, and one without `eventTime` is a 422
    /// naming the field.
    #[test]
    fn event_decodes_through_the_events_v1_type() {
        let body = json!({
            "apiVersion": "events.k8s.io/v1",
            "metadata": {"name": "kube-dns.17d2", "namespace": "kube-system"},
            "eventTime": "2025-01-01T00:00:00.123456789Z",
            "action": "Sync",
            "reason": "Synced",
            "note": "stubDomains reloaded",
            "type": "Normal",
            "regarding": {"kind": "ConfigMap", "namespace": "kube-system", "name": "kube-dns"},
            "reportingController": "kube2sky",
            "reportingInstance": "kube2sky-0",
            "series": {"count": 2, "lastObservedTime": "2025-01-01T00:00:05Z"},
        });
        let event = ResourceKind::Event.decode(body).unwrap();
        assert_eq!(event["kind"], "Event");
        assert_eq!(event["apiVersion"], "events.k8s.io/v1");
        assert_eq!(event["eventTime"], "2025-01-01T00:00:00.123456Z");
        assert_eq!(event["series"]["count"], 2);
        assert_eq!(event["regarding"]["name"], "kube-dns");
        assert!(ResourceKind::Event.validate(&event, None).is_ok());

        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "x"}});
        assert_eq!(ResourceKind::Event.decode(core).unwrap_err().code, 400);
        let typo = json!({"metadata": {"name": "x"}, "series": {"count": "two"}});
        assert_eq!(ResourceKind::Event.decode(typo).unwrap_err().code, 400);

        let untimed = ResourceKind::Event
            .decode(json!({"metadata": {"name": "x"}, "reason": "Synced"}))
            .unwrap();
        let err = ResourceKind::Event.validate(&untimed, None).unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "Event.events.k8s.io \"x\" is invalid: eventTime: Required value"
        );
    }

    #[test]
    fn configmaps_and_events_are_named_as_the_real_server_names_them() {
        let cm = ResourceKind::ConfigMap;
        assert_eq!(
            (cm.api_version(), cm.plural(), cm.singular(), cm.kind()),
            ("v1", "configmaps", "configmap", "ConfigMap")
        );
        assert_eq!(
            (cm.short_names(), cm.namespaced(), cm.has_status()),
            (&["cm"][..], true, false)
        );
        let ev = ResourceKind::Event;
        assert_eq!(
            (
                ev.api_version(),
                ev.plural(),
                ev.singular(),
                ev.qualified_kind()
            ),
            (
                "events.k8s.io/v1",
                "events",
                "event",
                "Event.events.k8s.io".to_string()
            )
        );
        assert_eq!(
            (ev.short_names(), ev.namespaced(), ev.has_status()),
            (&["ev"][..], true, false)
        );
        assert_eq!(ResourceKind::from_plural("v1", "events"), None);
        assert_eq!(
            ResourceKind::from_plural("events.k8s.io/v1", "events"),
            Some(ev)
        );
        assert!(cm.categories().is_empty() && ev.categories().is_empty());
        let decoded = cm
            .decode(json!({"metadata": {"name": "kube-dns"}, "data": {"stubDomains": "{}"}}))
            .unwrap();
        assert_eq!(decoded["data"]["stubDomains"], "{}");
        assert_eq!(cm.decode(json!({"data": {"k": 1}})).unwrap_err().code, 400);
        // A 1.2-era API has ConfigMaps but no events.k8s.io.
        let old = Served {
            endpoint_slices: false,
        };
        assert!(old.serves(cm) && !old.serves(ev));
        assert_eq!(old.of_version("events.k8s.io/v1").count(), 0);
    }
}
