//! The desired state: a synchronous index of the API objects that records
//! depend on, with no client and no I/O (linkerd's index pattern).
//!
//! Watch events go in ([`Index::apply`]); what comes out is the list of
//! [`Scope`]s whose records may have changed. [`Index::desired`] computes the
//! records a scope should hold and [`Scope::reads`] says where its actual
//! records live in etcd, so the writer can diff the two. A relist replaces a
//! kind's objects wholesale; once services *and* endpoints have been listed,
//! a relist yields [`Scope::AllServices`], whose diff deletes every owned key
//! that matches no object (stale-key removal). Until endpoints have been
//! listed, headless services' records are unknown and their scopes are
//! never returned ([`Index::is_known`]). Pods are kept as
//! `(namespace, name, ip)` only.

use crate::config::Features;
use crate::records::{
    cluster_ipv4, pod_records, port_problems, ptr_record, service_kind, service_records, Names,
    PortProblem, Records, ServiceKind,
};
use k8s_openapi::api::core::v1::Endpoints;
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

/// `namespace/name` of an object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// The key of an object's metadata.
    pub fn of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Self {
        ObjectKey {
            namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

/// All a pod contributes to DNS (k/k#22290: never keep whole Pods).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodInfo {
    /// Namespace and name.
    pub key: ObjectKey,
    /// `status.podIP`, empty when not assigned.
    pub ip: String,
}

/// One watch event, already reduced.
#[derive(Clone, Debug)]
pub enum Update<T> {
    /// Added or modified.
    Apply(T),
    /// Deleted (also a tombstone after a watch gap).
    Delete(T),
    /// A complete (re)list: everything not in it is gone.
    Relisted(Vec<T>),
}

impl<T> Update<T> {
    /// The same event over `f` of its objects.
    pub fn map<U>(self, f: impl Fn(T) -> U) -> Update<U> {
        match self {
            Update::Apply(t) => Update::Apply(f(t)),
            Update::Delete(t) => Update::Delete(f(t)),
            Update::Relisted(all) => Update::Relisted(all.into_iter().map(f).collect()),
        }
    }
}

/// An event from one of the three watches.
// Moved once from a watch task to the writer; boxing would only add allocations.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Change {
    /// Services.
    Service(Update<ServiceInfo>),
    /// Endpoints.
    Endpoints(Update<Endpoints>),
    /// Pods.
    Pod(Update<PodInfo>),
}

/// The objects records are built from.
#[derive(Debug)]
pub struct Index {
    names: Names,
    features: Features,
    // Compact (see `service_info`); Endpoints boxed: a k8s-openapi
    // Endpoints is most of a kilobyte even slimmed, and B-tree nodes hold
    // 11 values inline with slack.
    services: BTreeMap<ObjectKey, ServiceInfo>,
    endpoints: BTreeMap<ObjectKey, Box<Endpoints>>,
    pods: BTreeMap<ObjectKey, String>,
    pod_ips: BTreeMap<(String, String), usize>,
    /// Which services hold each IPv4 cluster IP (the PTR goes to the first),
    /// so a PTR costs O(log n) instead of a scan of every service.
    /// (A sorted Vec, not a set: almost every IP has one holder, and a
    /// one-element B-tree set costs a whole node.)
    cluster_ips: BTreeMap<Ipv4Addr, Vec<ObjectKey>>,
    services_listed: bool,
    endpoints_listed: bool,
}

impl Index {
    /// An empty index.
    pub fn new(names: Names, features: Features) -> Self {
        Index {
            names,
            features,
            services: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            pods: BTreeMap::new(),
            pod_ips: BTreeMap::new(),
            cluster_ips: BTreeMap::new(),
            services_listed: false,
            endpoints_listed: false,
        }
    }

    /// The names this index builds records with.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// Records a change; returns the scopes to reconcile. Scopes whose
    /// desired state is not known yet are left out (see [`Index::is_known`]).
    pub fn apply(&mut self, change: Change) -> Vec<Scope> {
        let mut scopes = self.record(change);
        scopes.retain(|s| self.is_known(s));
        scopes
    }

    /// Whether [`Index::desired`] is the real desired state of `scope`. A
    /// headless service's records come from its Endpoints, so until the
    /// endpoints have been listed once its records are unknown and must not
    /// be touched: reconciling them would delete them all (an NXDOMAIN
    /// window at every restart, or for good if endpoints never list).
    pub fn is_known(&self, scope: &Scope) -> bool {
        match scope {
            Scope::Service(key) => {
                self.endpoints_listed
                    || !matches!(
                        self.services.get(key).map(ServiceInfo::is_headless),
                        Some(true)
                    )
            }
            Scope::AllServices => self.services_listed && self.endpoints_listed,
            _ => true,
        }
    }

    fn record(&mut self, change: Change) -> Vec<Scope> {
        match change {
            Change::Service(Update::Apply(svc)) => self.put_service(svc),
            Change::Service(Update::Delete(svc)) => self.remove_service(&svc.key),
            Change::Service(Update::Relisted(all)) => {
                let old = std::mem::take(&mut self.services);
                self.cluster_ips.clear();
                for svc in all {
                    let key = svc.key.clone();
                    if old.get(&key) != Some(&svc) {
                        log_port_problems(&svc);
                    }
                    self.hold_cluster_ip(&key, &svc);
                    self.services.insert(key, svc);
                }
                self.services_listed = true;
                self.service_scopes()
            }
            Change::Endpoints(Update::Apply(ep)) => {
                let key = ObjectKey::of(&ep.metadata);
                self.endpoints.insert(key.clone(), Box::new(ep));
                self.headless_scope(key)
            }
            Change::Endpoints(Update::Delete(ep)) => {
                let key = ObjectKey::of(&ep.metadata);
                self.endpoints.remove(&key);
                if self.features.endpoints_deletions {
                    self.headless_scope(key)
                } else {
                    Vec::new()
                }
            }
            Change::Endpoints(Update::Relisted(all)) => {
                self.endpoints = all
                    .into_iter()
                    .map(|e| (ObjectKey::of(&e.metadata), Box::new(e)))
                    .collect();
                self.endpoints_listed = true;
                if self.features.remove_stale && self.services_listed {
                    vec![Scope::AllServices]
                } else {
                    // Only headless services' records come from Endpoints.
                    self.headless_scopes()
                }
            }
            Change::Pod(update) => self.apply_pod(update),
        }
    }

    fn put_service(&mut self, svc: ServiceInfo) -> Vec<Scope> {
        let key = svc.key.clone();
        let new_ip = svc.cluster_ipv4();
        if self.services.get(&key) != Some(&svc) {
            log_port_problems(&svc);
        }
        self.hold_cluster_ip(&key, &svc);
        let old_ip = self
            .services
            .insert(key.clone(), svc)
            .and_then(|old| old.cluster_ipv4());
        if old_ip != new_ip {
            self.release_cluster_ip(&key, old_ip);
        }
        self.with_ptrs(Scope::Service(key), [old_ip, new_ip])
    }

    fn remove_service(&mut self, key: &ObjectKey) -> Vec<Scope> {
        let old_ip = self.services.remove(key).and_then(|old| old.cluster_ipv4());
        self.release_cluster_ip(key, old_ip);
        self.with_ptrs(Scope::Service(key.clone()), [old_ip, None])
    }

    fn hold_cluster_ip(&mut self, key: &ObjectKey, svc: &ServiceInfo) {
        if let Some(ip) = svc.cluster_ipv4() {
            // Almost every IP has one holder: room for one, not the four of
            // a first push.
            let holders = self
                .cluster_ips
                .entry(ip)
                .or_insert_with(|| Vec::with_capacity(1));
            if let Err(at) = holders.binary_search(key) {
                holders.insert(at, key.clone());
            }
        }
    }

    fn release_cluster_ip(&mut self, key: &ObjectKey, ip: Option<Ipv4Addr>) {
        let Some(ip) = ip else { return };
        if let Some(holders) = self.cluster_ips.get_mut(&ip) {
            holders.retain(|k| k != key);
            if holders.is_empty() {
                self.cluster_ips.remove(&ip);
            }
        }
    }

    fn with_ptrs(&self, scope: Scope, ips: [Option<Ipv4Addr>; 2]) -> Vec<Scope> {
        let mut out = vec![scope];
        if self.features.reverse {
            out.extend(
                ips.into_iter()
                    .flatten()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .map(Scope::Ptr),
            );
        }
        out
    }

    fn headless_scope(&self, key: ObjectKey) -> Vec<Scope> {
        match self.services.get(&key).map(ServiceInfo::is_headless) {
            Some(true) => vec![Scope::Service(key)],
            _ => Vec::new(),
        }
    }

    /// Every headless service's scope.
    fn headless_scopes(&self) -> Vec<Scope> {
        self.services
            .iter()
            .filter(|(_, svc)| svc.is_headless())
            .map(|(key, _)| Scope::Service(key.clone()))
            .collect()
    }

    /// After a relist: everything at once (with stale removal) when both
    /// services and endpoints are known, otherwise each known service.
    fn service_scopes(&self) -> Vec<Scope> {
        if self.features.remove_stale && self.services_listed && self.endpoints_listed {
            return vec![Scope::AllServices];
        }
        let mut out: Vec<Scope> = self.services.keys().cloned().map(Scope::Service).collect();
        if self.features.reverse {
            out.extend(self.cluster_ips.keys().copied().map(Scope::Ptr));
        }
        out
    }

    fn apply_pod(&mut self, update: Update<PodInfo>) -> Vec<Scope> {
        if !self.features.pods {
            return Vec::new();
        }
        let mut touched = BTreeSet::new();
        match update {
            // Status updates that keep the IP change no record (1.2 did nothing either).
            Update::Apply(pod) if self.pods.get(&pod.key) == Some(&pod.ip) => {}
            Update::Apply(pod) => {
                touched.extend(self.forget_pod(&pod.key));
                touched.extend(self.remember_pod(pod));
            }
            Update::Delete(pod) => touched.extend(self.forget_pod(&pod.key)),
            Update::Relisted(all) => {
                self.pods.clear();
                self.pod_ips.clear();
                for pod in all {
                    self.remember_pod(pod);
                }
                return self.pod_scopes();
            }
        }
        touched
            .into_iter()
            .map(|(namespace, ip)| Scope::PodDir { namespace, ip })
            .collect()
    }

    fn remember_pod(&mut self, pod: PodInfo) -> Option<(String, String)> {
        // No IP yet, or one `validate` reported: no record.
        if !crate::validate::is_ip(&pod.ip) {
            return None;
        }
        let dir = (pod.key.namespace.clone(), pod.ip.clone());
        *self.pod_ips.entry(dir.clone()).or_default() += 1;
        self.pods.insert(pod.key, pod.ip);
        Some(dir)
    }

    fn forget_pod(&mut self, key: &ObjectKey) -> Option<(String, String)> {
        let ip = self.pods.remove(key)?;
        let dir = (key.namespace.clone(), ip);
        if let Some(count) = self.pod_ips.get_mut(&dir) {
            *count -= 1;
            if *count == 0 {
                self.pod_ips.remove(&dir);
            }
        }
        Some(dir)
    }

    fn pod_scopes(&self) -> Vec<Scope> {
        if self.features.remove_stale {
            return vec![Scope::AllPods];
        }
        self.pod_ips
            .keys()
            .map(|(namespace, ip)| Scope::PodDir {
                namespace: namespace.clone(),
                ip: ip.clone(),
            })
            .collect()
    }

    /// Whether services and endpoints have both been listed once: after
    /// the next write, etcd holds every service's records.
    pub fn lists_done(&self) -> bool {
        self.services_listed && self.endpoints_listed
    }

    /// Every known scope, for a full rewrite after etcd lost its data.
    pub fn all_scopes(&self) -> Vec<Scope> {
        let mut out = self.service_scopes();
        if self.features.pods {
            out.extend(self.pod_scopes());
        }
        out.retain(|s| self.is_known(s));
        out
    }

    /// The records `scope` should hold.
    pub fn desired(&self, scope: &Scope) -> Records {
        match scope {
            Scope::Service(key) => self.service(key),
            Scope::Ptr(ip) => self.ptr(*ip).into_iter().collect(),
            Scope::PodDir { namespace, ip }
                if self.pod_ips.contains_key(&(namespace.clone(), ip.clone())) =>
            {
                pod_records(&self.names, namespace, ip)
            }
            Scope::PodDir { .. } => Records::new(),
            Scope::AllServices => {
                let mut out: Records = self.services.keys().flat_map(|k| self.service(k)).collect();
                if self.features.reverse {
                    out.extend(self.cluster_ips.keys().filter_map(|ip| self.ptr(*ip)));
                }
                out
            }
            Scope::PodChunk { namespaces, .. } => namespaces
                .iter()
                .flat_map(|ns| {
                    let from = (ns.clone(), String::new());
                    self.pod_ips
                        .range(from..)
                        .take_while(move |((n, _), _)| n == ns)
                        .flat_map(|((n, ip), _)| pod_records(&self.names, n, ip))
                })
                .collect(),
            Scope::ServiceChunk {
                namespaces, ptrs, ..
            } => namespaces
                .iter()
                .flat_map(|ns| {
                    let from = ObjectKey {
                        namespace: ns.clone(),
                        name: String::new(),
                    };
                    self.services
                        .range(from..)
                        .take_while(move |(k, _)| &k.namespace == ns)
                        .flat_map(|(k, _)| self.service(k))
                })
                .chain(ptrs.iter().filter_map(|ip| self.ptr(*ip)))
                .collect(),
            Scope::PtrSweep { .. } => Records::new(),
            Scope::AllPods => self
                .pod_ips
                .keys()
                .flat_map(|(ns, ip)| pod_records(&self.names, ns, ip))
                .collect(),
        }
    }

    fn service(&self, key: &ObjectKey) -> Records {
        let Some(svc) = self.services.get(key) else {
            return Records::new();
        };
        service_records(
            &self.names,
            &svc.to_service(),
            self.endpoints.get(key).map(|e| &**e),
            self.features.external_name,
        )
    }

    /// The PTR of `ip`, owned by the lowest `ns/name` with that cluster IP.
    fn ptr(&self, ip: Ipv4Addr) -> Option<(String, String)> {
        if !self.features.reverse {
            return None;
        }
        let key = self.cluster_ips.get(&ip)?.first()?;
        Some(ptr_record(&self.names, ip, &key.namespace, &key.name))
    }
}

/// Logs 1.2's complaints about a cluster-IP service's ports (§5.1), once
/// per received version of the service rather than on every reconcile.
fn log_port_problems(svc: &ServiceInfo) {
    let svc = svc.to_service();
    for problem in port_problems(&svc) {
        match problem {
            PortProblem::NoPorts => tracing::info!(
                "Unexpected service with no ports, this should not have happend: {svc:?}"
            ),
            PortProblem::NoProtocol => {
                tracing::warn!("Port Protocol not set. port segment string cannot be created.")
            }
        }
    }
}

mod chunks;
mod scope;
mod service_info;
pub use scope::{Read, Scope};
pub use service_info::{PortInfo, ServiceInfo};

impl ServiceInfo {
    /// The IPv4 cluster IP, if the service has one.
    pub fn cluster_ipv4(&self) -> Option<Ipv4Addr> {
        cluster_ipv4(&self.to_service())
    }

    /// Whether the service is headless (its records come from Endpoints).
    pub fn is_headless(&self) -> bool {
        service_kind(&self.to_service()) == ServiceKind::Headless
    }
}

#[cfg(test)]
mod tests;
