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

/// A part of the owned key space that is reconciled as a unit.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// One service's directory.
    Service(ObjectKey),
    /// One PTR key.
    Ptr(Ipv4Addr),
    /// One pod IP's directory in a namespace.
    PodDir {
        /// Namespace.
        namespace: String,
        /// Pod IP.
        ip: String,
    },
    /// Everything under `svc/` and every PTR we own.
    AllServices,
    /// Everything under `pod/`.
    AllPods,
    /// A slice of `pod/` in key order: the namespaces' pods are desired, and
    /// every key from the directory of namespace `from` (the start of `pod/`
    /// when `None`) up to that of `to` (the end when `None`) is read, so
    /// keys of namespaces that are gone are deleted too. A full sync of
    /// pods as several of these holds one slice in memory at a time.
    PodChunk {
        /// The namespaces with pods in this slice, in key order.
        namespaces: Vec<String>,
        /// First namespace directory read.
        from: Option<String>,
        /// First namespace directory not read.
        to: Option<String>,
    },
    /// [`Scope::PodChunk`] for `svc/`: the services of `namespaces`, and the
    /// PTRs of `ptrs` (the cluster IPs these services own), so a service and
    /// its PTR stay in one transaction.
    ServiceChunk {
        /// The namespaces with services in this slice, in key order.
        namespaces: Vec<String>,
        /// First namespace directory read.
        from: Option<String>,
        /// First namespace directory not read.
        to: Option<String>,
        /// The cluster IPs owned by these services (with reverse records).
        ptrs: Vec<Ipv4Addr>,
    },
    /// The owned PTRs of no service: every owned PTR key not in `held`
    /// (the sorted PTR keys of every cluster IP) is deleted.
    PtrSweep {
        /// PTR keys of the cluster IPs services hold, sorted.
        held: Vec<String>,
    },
}

/// Where a scope's actual records live in etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Read {
    /// Every key with this prefix.
    Prefix(String),
    /// Every PTR key under this prefix whose value points into our domain.
    OwnedPtrs(String),
    /// This key, if its value points into our domain.
    OwnedPtr(String),
    /// Every key from `from` (inclusive) to `to` (exclusive): etcd v3 only.
    Range {
        /// First key.
        from: String,
        /// End key, not included.
        to: String,
    },
    /// The PTR keys under `root` that point into our domain and are among
    /// `keys` (sorted) when `listed`, or not among them otherwise: one read
    /// of the PTR subtree keeping only those. etcd v3 only.
    Ptrs {
        /// The PTR root.
        root: String,
        /// Sorted keys.
        keys: Vec<String>,
        /// Keep the keys listed (or the others).
        listed: bool,
    },
}

impl Scope {
    /// The etcd reads that give this scope's actual records.
    pub fn reads(&self, names: &Names, reverse: bool) -> Vec<Read> {
        match self {
            Scope::Service(k) => vec![Read::Prefix(names.service_dir(&k.namespace, &k.name))],
            Scope::Ptr(ip) => vec![Read::OwnedPtr(names.ptr_key(*ip))],
            Scope::PodDir { namespace, ip } => vec![Read::Prefix(names.pod_dir(namespace, ip))],
            Scope::AllServices if reverse => vec![
                Read::Prefix(names.svc_root()),
                Read::OwnedPtrs(names.ptr_root()),
            ],
            Scope::AllServices => vec![Read::Prefix(names.svc_root())],
            Scope::AllPods => vec![Read::Prefix(names.pod_root())],
            Scope::PodChunk { from, to, .. } => {
                vec![namespace_range(&names.pod_root(), from, to)]
            }
            Scope::ServiceChunk { from, to, ptrs, .. } => {
                let mut reads = vec![namespace_range(&names.svc_root(), from, to)];
                if reverse && !ptrs.is_empty() {
                    let mut keys: Vec<String> = ptrs.iter().map(|ip| names.ptr_key(*ip)).collect();
                    keys.sort();
                    reads.push(Read::Ptrs {
                        root: names.ptr_root(),
                        keys,
                        listed: true,
                    });
                }
                reads
            }
            Scope::PtrSweep { held } => vec![Read::Ptrs {
                root: names.ptr_root(),
                keys: held.clone(),
                listed: false,
            }],
        }
    }

    /// A short description for logs and errors.
    pub fn describe(&self, names: &Names) -> String {
        match self.reads(names, true).first() {
            Some(Read::Prefix(p) | Read::OwnedPtrs(p) | Read::OwnedPtr(p)) => p.clone(),
            Some(Read::Range { from, to }) => format!("{from}..{to}"),
            Some(Read::Ptrs { root, .. }) => root.clone(),
            None => format!("{self:?}"),
        }
    }
}

/// The keys of the namespace directories `from` to `to` (exclusive) under
/// `root`; the whole of `root` at either end when `None`.
fn namespace_range(root: &str, from: &Option<String>, to: &Option<String>) -> Read {
    let dir = |ns: &String| format!("{root}{ns}/");
    Read::Range {
        from: from.as_ref().map_or_else(|| root.to_string(), dir),
        to: to.as_ref().map_or_else(|| end_of(root), dir),
    }
}

/// The first key after every key under `root` (which ends in `/`).
fn end_of(root: &str) -> String {
    format!("{}0", root.trim_end_matches('/'))
}

/// Cuts `items` (in key order, each with its weight) into runs of about
/// `size`; returns each run with the item that starts the next one.
fn chunked<T: Clone>(items: Vec<(T, usize)>, size: usize) -> Vec<(Vec<T>, Option<T>)> {
    let mut runs: Vec<(Vec<T>, Option<T>)> = Vec::new();
    let (mut run, mut weight) = (Vec::new(), 0);
    for (item, count) in items {
        if weight > 0 && weight + count > size {
            runs.push((std::mem::take(&mut run), Some(item.clone())));
            weight = 0;
        }
        run.push(item);
        weight += count;
    }
    runs.push((run, None));
    runs
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

    /// [`Scope::AllPods`] as [`Scope::PodChunk`]s of about `pods` pods
    /// each (whole namespaces), covering every key under `pod/`.
    pub fn sync_chunks(&self, pods: usize) -> Vec<Scope> {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for (ns, _) in self.pod_ips.keys() {
            *counts.entry(format!("{ns}/")).or_default() += 1;
        }
        let mut from = None;
        chunked(in_key_order(counts), pods)
            .into_iter()
            .map(|(namespaces, to)| Scope::PodChunk {
                namespaces,
                from: std::mem::replace(&mut from, to.clone()),
                to,
            })
            .collect()
    }

    /// [`Scope::AllServices`] as [`Scope::ServiceChunk`]s of about
    /// `services` services each (whole namespaces, each service with the
    /// PTRs it owns), then, with reverse records, a [`Scope::PtrSweep`] for
    /// the owned PTRs of no service: every key under `svc/` and every owned
    /// PTR is covered.
    pub fn service_chunks(&self, services: usize) -> Vec<Scope> {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for key in self.services.keys() {
            *counts.entry(format!("{}/", key.namespace)).or_default() += 1;
        }
        // Each cluster IP's PTR goes with the namespace of its owner.
        let mut owned: BTreeMap<&str, Vec<Ipv4Addr>> = BTreeMap::new();
        if self.features.reverse {
            for (ip, holders) in &self.cluster_ips {
                if let Some(owner) = holders.first() {
                    owned.entry(owner.namespace.as_str()).or_default().push(*ip);
                }
            }
        }
        let mut from = None;
        let mut out: Vec<Scope> = chunked(in_key_order(counts), services)
            .into_iter()
            .map(|(namespaces, to)| Scope::ServiceChunk {
                ptrs: namespaces
                    .iter()
                    .flat_map(|ns| owned.get(ns.as_str()).into_iter().flatten().copied())
                    .collect(),
                namespaces,
                from: std::mem::replace(&mut from, to.clone()),
                to,
            })
            .collect();
        if self.features.reverse {
            let mut held: Vec<String> = self
                .cluster_ips
                .keys()
                .map(|ip| self.names.ptr_key(*ip))
                .collect();
            held.sort();
            out.push(Scope::PtrSweep { held });
        }
        out
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

/// Namespace directories (`<ns>/`) with their counts, as namespaces in
/// etcd's key order (`a-b/` sorts before `a/`).
fn in_key_order(counts: BTreeMap<String, usize>) -> Vec<(String, usize)> {
    counts
        .into_iter()
        .map(|(dir, n)| (dir.trim_end_matches('/').to_string(), n))
        .collect()
}

mod service_info;
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
