//! The desired state: a synchronous index of the API objects that records
//! depend on, with no client and no I/O. Watch events go in ([`Index::apply`])
//! and the [`Scope`]s they may have changed come out; [`Index::desired`] gives
//! the records a scope should hold. EndpointSlices are merged in `slices`, the
//! PTR names of every IP kept in `reverse`.

use crate::config::Features;
use crate::kube_dns_config::KubeDnsConfig;
use crate::objects::{ObjectKey, PodInfo, ServiceInfo, SliceInfo};
use crate::records::{
    cluster_ips, dns_version_records, endpoint_ptr_names, log_port_problems, pod_record,
    pod_records, ptr_records, service_kind, service_records, Names, Options, PtrName, Records,
    ServiceKind,
};
use crate::scope::{DesiredState, Scope};
use k8s_openapi::api::core::v1::Endpoints;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

/// One watch event, already reduced.
#[derive(Clone, Debug)]
pub(crate) enum Update<T> {
    /// Added or modified.
    Apply(T),
    /// Deleted (also a tombstone after a watch gap).
    Delete(T),
    /// A complete (re)list: everything not in it is gone.
    Relisted(Vec<T>),
}

impl<T> Update<T> {
    /// The same event over `f` of its objects.
    #[cfg(test)]
    pub(crate) fn map<U>(self, f: impl Fn(T) -> U) -> Update<U> {
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
pub(crate) enum Change {
    /// Services.
    Service(Update<ServiceInfo>),
    /// Endpoints.
    Endpoints(Update<Endpoints>),
    /// Pods.
    Pod(Update<PodInfo>),
    /// EndpointSlices (instead of Endpoints).
    EndpointSlice(Update<SliceInfo>),
    /// kube-dns's ConfigMap, valid (`--config-map`).
    KubeDns(KubeDnsConfig),
}

/// The objects records are built from.
#[derive(Debug)]
pub(crate) struct Index {
    names: Names,
    features: Features,
    // Compact (see `crate::objects::ServiceInfo`); Endpoints boxed: a k8s-openapi
    // Endpoints is most of a kilobyte even slimmed, and B-tree nodes hold
    // 11 values inline with slack.
    services: BTreeMap<ObjectKey, ServiceInfo>,
    endpoints: BTreeMap<ObjectKey, Box<Endpoints>>,
    /// EndpointSlices by slice key, and each service's slice names.
    slices: Slices,
    /// Each pod's IPs, space-separated (one allocation per pod).
    pods: BTreeMap<ObjectKey, Box<str>>,
    pod_ips: BTreeMap<(String, String), usize>,
    /// The names each IP's PTR points at, so a PTR costs O(log n)
    /// instead of a scan of every service.
    reverse: ReverseIndex,
    services_listed: bool,
    endpoints_listed: bool,
    /// kube-dns's ConfigMap; `None` until one (or its absence) was listed.
    kube_dns: Option<KubeDnsConfig>,
    kube_dns_followed: bool,
}

impl Index {
    /// An empty index.
    pub(crate) fn new(names: Names, features: Features) -> Self {
        Index {
            names,
            features,
            services: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            slices: Slices::default(),
            pods: BTreeMap::new(),
            pod_ips: BTreeMap::new(),
            reverse: ReverseIndex::default(),
            services_listed: false,
            endpoints_listed: false,
            kube_dns: None,
            kube_dns_followed: false,
        }
    }

    /// Records a change; returns the scopes to reconcile. Scopes whose
    /// desired state is not known yet are left out (see [`Index::is_known`]).
    pub(crate) fn apply(&mut self, change: Change) -> Vec<Scope> {
        let mut scopes = self.record(change);
        scopes.retain(|s| self.is_known(s));
        scopes
    }

    /// Whether [`Index::desired`] is the real desired state of `scope`. A
    /// headless service's records come from its Endpoints, so until the
    /// endpoints have been listed once its records are unknown and must not
    /// be touched: reconciling them would delete them all (an NXDOMAIN
    /// window at every restart, or for good if endpoints never list).
    pub(crate) fn is_known(&self, scope: &Scope) -> bool {
        match scope {
            Scope::Service(key) => {
                self.endpoints_listed
                    || !matches!(
                        self.services.get(key).map(ServiceInfo::is_headless),
                        Some(true)
                    )
            }
            Scope::AllServices => self.services_listed && self.endpoints_listed,
            Scope::StubZones | Scope::Upstreams => self.kube_dns.is_some(),
            _ => true,
        }
    }

    fn record(&mut self, change: Change) -> Vec<Scope> {
        match change {
            Change::Service(Update::Apply(svc)) => {
                if self.services.get(&svc.key) != Some(&svc) {
                    log_port_problems(&svc.to_service());
                }
                let key = svc.key.clone();
                self.change_object(&key, |ix| ix.services.insert(svc.key.clone(), svc))
            }
            Change::Service(Update::Delete(svc)) => {
                self.change_object(&svc.key, |ix| ix.services.remove(&svc.key))
            }
            Change::Service(Update::Relisted(all)) => {
                let old_ips = self.ptr_ips();
                let old = std::mem::take(&mut self.services);
                for svc in all {
                    if old.get(&svc.key) != Some(&svc) {
                        log_port_problems(&svc.to_service());
                    }
                    self.services.insert(svc.key.clone(), svc);
                }
                self.services_listed = true;
                self.rebuild_reverse();
                let mut scopes = self.service_scopes();
                if !scopes.contains(&Scope::AllServices) {
                    // The PTRs of IPs no service holds any more go too.
                    let now = self.ptr_ips();
                    scopes.extend(old_ips.difference(&now).copied().map(Scope::Ptr));
                }
                scopes
            }
            Change::Endpoints(Update::Apply(ep)) => {
                self.set_endpoints(ObjectKey::of(&ep.metadata), Some(ep))
            }
            // 1.2 ignored Endpoints deletions: the records (and the
            // index's view of them) stay until the next change.
            Change::Endpoints(Update::Delete(_)) if !self.features.endpoints_deletions => {
                Vec::new()
            }
            Change::Endpoints(Update::Delete(ep)) => {
                self.set_endpoints(ObjectKey::of(&ep.metadata), None)
            }
            Change::Endpoints(Update::Relisted(all)) => {
                self.endpoints = all
                    .into_iter()
                    .map(|e| (ObjectKey::of(&e.metadata), Box::new(e)))
                    .collect();
                self.endpoints_relisted()
            }
            Change::EndpointSlice(Update::Relisted(all)) => {
                self.endpoints = self.slices.relisted(all);
                self.endpoints_relisted()
            }
            Change::EndpointSlice(update) => {
                let merged = self.slices.apply(update);
                let deletions = self.features.endpoints_deletions;
                merged
                    .into_iter()
                    // A service's last slice gone is its Endpoints deleted.
                    .filter(|(_, ep)| ep.is_some() || deletions)
                    .flat_map(|(key, ep)| self.set_endpoints(key, ep))
                    .collect()
            }
            Change::Pod(update) => self.apply_pod(update),
            Change::KubeDns(config) => {
                self.kube_dns = Some(config);
                vec![Scope::StubZones, Scope::Upstreams]
            }
        }
    }

    /// Replaces (or with `None` removes) a service's endpoints.
    fn set_endpoints(&mut self, key: ObjectKey, ep: Option<Endpoints>) -> Vec<Scope> {
        let mut scopes = self.change_object(&key, |ix| match ep {
            Some(ep) => ix.endpoints.insert(key.clone(), Box::new(ep)).map(drop),
            None => ix.endpoints.remove(&key).map(drop),
        });
        // Only headless services' records come from endpoints.
        if !matches!(
            self.services.get(&key).map(ServiceInfo::is_headless),
            Some(true)
        ) {
            scopes.retain(|s| !matches!(s, Scope::Service(_)));
        }
        scopes
    }

    /// After endpoints were listed anew: every service at once (with stale
    /// removal) when services are known too, otherwise each headless one.
    fn endpoints_relisted(&mut self) -> Vec<Scope> {
        self.endpoints_listed = true;
        let endpoint_ips = |ix: &Self| -> BTreeSet<IpAddr> {
            (ix.reverse.iter())
                .filter(|(_, names)| names.iter().any(|n| n.hostname.is_some()))
                .map(|(ip, _)| *ip)
                .collect()
        };
        let before = endpoint_ips(self);
        self.rebuild_reverse();
        if self.features.remove_stale && self.services_listed {
            vec![Scope::AllServices]
        } else {
            // And the PTRs of endpoints, before and after (not of cluster
            // IPs, which endpoints do not change).
            let mut out = self.headless_scopes();
            out.extend(before.union(&endpoint_ips(self)).copied().map(Scope::Ptr));
            out
        }
    }

    /// Every IP with a PTR name.
    fn ptr_ips(&self) -> BTreeSet<IpAddr> {
        self.reverse.ips().collect()
    }

    /// Applies `change` to the objects of service `key`; returns its scope
    /// and the PTR scopes of the IPs whose names it changed.
    fn change_object<R>(
        &mut self,
        key: &ObjectKey,
        change: impl FnOnce(&mut Self) -> R,
    ) -> Vec<Scope> {
        let before: BTreeSet<(IpAddr, PtrName)> = self.ptr_names(key).into_iter().collect();
        change(self);
        let after: BTreeSet<(IpAddr, PtrName)> = self.ptr_names(key).into_iter().collect();
        let mut ips = BTreeSet::new();
        for gone in before.difference(&after) {
            self.reverse.release(gone.0, &gone.1);
            ips.insert(gone.0);
        }
        for new in after.difference(&before) {
            self.reverse.hold(new.0, new.1.clone());
            ips.insert(new.0);
        }
        let mut out = vec![Scope::Service(key.clone())];
        out.extend(ips.into_iter().map(Scope::Ptr));
        out
    }

    /// The PTR names service `key` gives: its cluster IPs, and (with the
    /// specification's records) its hostnamed endpoints when headless.
    fn ptr_names(&self, key: &ObjectKey) -> Vec<(IpAddr, PtrName)> {
        let Some(svc) = self.services.get(key).filter(|_| self.features.reverse) else {
            return Vec::new();
        };
        let name = |hostname| PtrName {
            namespace: key.namespace.as_str().into(),
            name: key.name.as_str().into(),
            hostname,
        };
        let service = svc.to_service();
        match service_kind(&service) {
            ServiceKind::ClusterIp(_) => cluster_ips(&service)
                .into_iter()
                .filter_map(|ip| Some((ip.parse().ok()?, name(None))))
                .collect(),
            ServiceKind::Headless if self.features.spec_records => self
                .endpoints
                .get(key)
                .map(|ep| endpoint_ptr_names(ep))
                .unwrap_or_default()
                .into_iter()
                .map(|(ip, hostname)| (ip, name(Some(hostname))))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Every IP's PTR names from scratch (after a relist).
    fn rebuild_reverse(&mut self) {
        self.reverse.clear();
        let keys: Vec<ObjectKey> = self.services.keys().cloned().collect();
        for key in keys {
            for (ip, name) in self.ptr_names(&key) {
                self.reverse.hold(ip, name);
            }
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
        out.extend(self.reverse.ips().map(Scope::Ptr));
        out
    }

    fn apply_pod(&mut self, update: Update<PodInfo>) -> Vec<Scope> {
        if !self.features.pods {
            return Vec::new();
        }
        let mut touched = BTreeSet::new();
        match update {
            // Status updates that keep the IPs change no record (1.2 did nothing either).
            Update::Apply(pod)
                if self.pods.get(&pod.key).map(|ips| &**ips) == Some(&*pod.ips.join(" ")) => {}
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

    /// Records a pod's IPs (those `validate` did not report; none yet:
    /// nothing); returns the pod directories it adds to.
    fn remember_pod(&mut self, pod: PodInfo) -> Vec<(String, String)> {
        let ips: Vec<String> = pod
            .ips
            .into_iter()
            .filter(|ip| crate::name_rules::is_ip(ip))
            .collect();
        if ips.is_empty() {
            return Vec::new();
        }
        let dirs: Vec<(String, String)> = ips
            .iter()
            .map(|ip| (pod.key.namespace.clone(), ip.clone()))
            .collect();
        for dir in &dirs {
            *self.pod_ips.entry(dir.clone()).or_default() += 1;
        }
        self.pods.insert(pod.key, ips.join(" ").into_boxed_str());
        dirs
    }

    fn forget_pod(&mut self, key: &ObjectKey) -> Vec<(String, String)> {
        let Some(ips) = self.pods.remove(key) else {
            return Vec::new();
        };
        let mut dirs = Vec::new();
        for ip in ips.split(' ') {
            let dir = (key.namespace.clone(), ip.to_string());
            if let Some(count) = self.pod_ips.get_mut(&dir) {
                *count -= 1;
                if *count == 0 {
                    self.pod_ips.remove(&dir);
                }
            }
            dirs.push(dir);
        }
        dirs
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

    /// Whether services and endpoints have both been listed once (and
    /// kube-dns's ConfigMap, when followed): after the next write, etcd
    /// holds every service's records (and the stub zones and upstreams).
    pub(crate) fn lists_done(&self) -> bool {
        self.services_listed
            && self.endpoints_listed
            && (self.kube_dns.is_some() || !self.kube_dns_followed)
    }

    /// `--config-map`: readiness also waits for the ConfigMap's first list.
    pub(crate) fn follow_kube_dns(&mut self) {
        self.kube_dns_followed = true;
    }

    /// Every known scope, for a full rewrite after etcd lost its data.
    pub(crate) fn all_scopes(&self) -> Vec<Scope> {
        let mut out = vec![Scope::DnsVersion, Scope::StubZones, Scope::Upstreams];
        out.extend(self.service_scopes());
        if self.features.pods {
            out.extend(self.pod_scopes());
        }
        out.retain(|s| self.is_known(s));
        out
    }

    /// The records `scope` should hold.
    pub(crate) fn desired(&self, scope: &Scope) -> Records {
        match scope {
            Scope::Service(key) => self.service(key),
            Scope::Ptr(ip) => self.ptr(*ip),
            Scope::DnsVersion => dns_version_records(&self.names, self.options()),
            Scope::StubZones => (self.kube_dns.as_ref())
                .map(|c| c.stub_records(&self.names))
                .unwrap_or_default(),
            Scope::Upstreams => Records::new(),
            Scope::PodDir { namespace, ip }
                if self.pod_ips.contains_key(&(namespace.clone(), ip.clone())) =>
            {
                pod_records(&self.names, namespace, ip)
            }
            Scope::PodDir { .. } => Records::new(),
            Scope::AllServices => {
                let mut out: Records = self.services.keys().flat_map(|k| self.service(k)).collect();
                out.extend(self.reverse.ips().flat_map(|ip| self.ptr(ip)));
                out
            }
            Scope::PodChunk { namespaces, .. } => namespaces
                .iter()
                .flat_map(|ns| {
                    let from = (ns.clone(), String::new());
                    self.pod_ips
                        .range(from..)
                        .take_while(move |((n, _), _)| n == ns)
                        .map(|((n, ip), _)| pod_record(&self.names, n, ip))
                })
                .collect(),
            Scope::ServiceChunk { namespaces, .. } => namespaces
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
                .collect(),
            Scope::PtrChunk { from, to } => self
                .reverse
                .in_key_range(*from, *to)
                .into_iter()
                .flat_map(|ip| self.ptr(ip))
                .collect(),
            Scope::AllPods => self
                .pod_ips
                .keys()
                .map(|(ns, ip)| pod_record(&self.names, ns, ip))
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
            self.options(),
        )
    }

    fn options(&self) -> Options {
        Options {
            external_name: self.features.external_name,
            spec: self.features.spec_records,
        }
    }

    /// The PTRs of `ip`: every name with the specification's records,
    /// otherwise the lowest `ns/name` with that cluster IP.
    fn ptr(&self, ip: IpAddr) -> Records {
        match self.reverse.get(&ip) {
            Some(targets) => ptr_records(&self.names, ip, targets, self.features.spec_records),
            None => Records::new(),
        }
    }
}

mod chunks;
mod reverse;
mod slices;
use reverse::ReverseIndex;
use slices::Slices;

impl DesiredState for Index {
    fn desired(&self, scope: &Scope) -> Records {
        Index::desired(self, scope)
    }

    fn upstreams(&self) -> &[SocketAddr] {
        self.kube_dns
            .as_ref()
            .map_or(&[], |c| c.upstreams.as_slice())
    }

    fn pod_chunks(&self, pods: usize) -> Vec<Scope> {
        Index::pod_chunks(self, pods)
    }

    fn service_chunks(&self, services: usize) -> Vec<Scope> {
        Index::service_chunks(self, services)
    }

    fn current_chunk(&self, chunk: &Scope) -> Scope {
        Index::current_chunk(self, chunk)
    }
}

#[cfg(test)]
mod tests;
