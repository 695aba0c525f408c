//! Pure "API object → SkyDNS records" functions (reference §4–5).
//!
//! Every function here returns a [`Records`] map from etcd key to the exact
//! JSON value kube2sky 1.2 wrote, built from [`skydns::record::Record`] (its
//! bytes are hashed into key labels, so they must never change). [`Names`]
//! knows the domain and builds every name and key, including the prefixes of
//! the subtrees kube2sky owns. No I/O, no clock, no state.

use crate::validate;
use k8s_openapi::api::core::v1::{EndpointSubset, Endpoints, Service};
use skydns::path::{fqdn, in_domain, PathPrefix};
use skydns::record::Record;
use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

/// etcd key → JSON value.
pub type Records = BTreeMap<String, String>;

/// The Endpoints annotation that maps IPs to hostnames (`{"<ip>":{"HostName":"<name>"}}`).
pub const HOSTNAMES_ANNOTATION: &str = "endpoints.beta.kubernetes.io/hostnames-map";

/// Builds names and keys for one cluster domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    domain: String,
    prefix: PathPrefix,
}

impl Names {
    /// `domain` with or without its trailing dot, e.g. `cluster.local`.
    pub fn new(domain: &str) -> Self {
        Names {
            domain: fqdn(domain),
            prefix: PathPrefix::default(),
        }
    }

    /// The domain with its trailing dot.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// `<name>.<ns>.svc.<domain>` (trailing dot).
    pub fn service_fqdn(&self, namespace: &str, name: &str) -> String {
        format!("{name}.{namespace}.svc.{}", self.domain)
    }

    /// The etcd key of a DNS name.
    pub fn key(&self, name: &str) -> String {
        self.prefix.path(name)
    }

    /// `/skydns/local/cluster/svc/`: every service record lives below it.
    pub fn svc_root(&self) -> String {
        format!("{}/", self.key(&format!("svc.{}", self.domain)))
    }

    /// `/skydns/local/cluster/pod/`: every pod record lives below it.
    pub fn pod_root(&self) -> String {
        format!("{}/", self.key(&format!("pod.{}", self.domain)))
    }

    /// `/skydns/local/cluster/svc/<ns>/<name>/`: one service's records.
    pub fn service_dir(&self, namespace: &str, name: &str) -> String {
        format!("{}/", self.key(&self.service_fqdn(namespace, name)))
    }

    /// `1-2-3-4.<ns>.pod.<domain>`.
    pub fn pod_fqdn(&self, namespace: &str, ip: &str) -> String {
        format!("{}.{namespace}.pod.{}", ip.replace('.', "-"), self.domain)
    }

    /// `/skydns/local/cluster/pod/<ns>/1-2-3-4/`: the records of one pod IP.
    pub fn pod_dir(&self, namespace: &str, ip: &str) -> String {
        format!("{}/", self.key(&self.pod_fqdn(namespace, ip)))
    }

    /// `/skydns/arpa/in-addr/`: the PTR subtree (shared with other writers).
    pub fn ptr_root(&self) -> String {
        format!("{}/", self.key("in-addr.arpa."))
    }

    /// `/skydns/arpa/in-addr/10/0/0/1` for `10.0.0.1`.
    pub fn ptr_key(&self, ip: Ipv4Addr) -> String {
        let [a, b, c, d] = ip.octets();
        self.key(&format!("{d}.{c}.{b}.{a}.in-addr.arpa."))
    }

    /// The deepest directory above `key` that is never removed when it
    /// empties (etcd v2): the namespace directory of service and pod keys,
    /// the PTR root of PTR keys; `None` for keys elsewhere.
    pub fn dir_floor(&self, key: &str) -> Option<String> {
        for root in [self.svc_root(), self.pod_root()] {
            if let Some(rest) = key.strip_prefix(&root) {
                let namespace = rest.split('/').next()?;
                return Some(format!("{root}{namespace}"));
            }
        }
        let ptr_root = self.ptr_root();
        key.starts_with(&ptr_root)
            .then(|| ptr_root.trim_end_matches('/').to_string())
    }

    /// The unit a key belongs to, which the writer never splits across
    /// transactions: the directory of its service (`.../svc/<ns>/<name>/`)
    /// or pod IP (`.../pod/<ns>/<ip>/`); for a PTR key the directory of the
    /// service its `value` names, so a PTR is written with its service.
    /// Any other key is its own unit.
    pub fn unit_of(&self, key: &str, value: Option<&str>) -> String {
        for root in [self.svc_root(), self.pod_root()] {
            if let Some(rest) = key.strip_prefix(&root) {
                let mut parts = rest.splitn(3, '/');
                if let (Some(a), Some(b), Some(_)) = (parts.next(), parts.next(), parts.next()) {
                    return format!("{root}{a}/{b}/");
                }
            }
        }
        if key.starts_with(&self.ptr_root()) {
            let service = value
                .and_then(|v| Record::from_json(v.as_bytes()).ok())
                .and_then(|r| {
                    let suffix = format!(".svc.{}", self.domain);
                    let (name, namespace) = r.host.strip_suffix(&suffix)?.split_once('.')?;
                    Some(self.service_dir(namespace, name))
                });
            if let Some(dir) = service {
                return dir;
            }
        }
        key.to_string()
    }

    /// Whether `key` is a PTR key.
    pub fn is_ptr_key(&self, key: &str) -> bool {
        key.starts_with(&self.ptr_root())
    }

    /// Whether a PTR value was written by us: its host is a service name in our domain.
    pub fn owns_ptr_value(&self, value: &str) -> bool {
        Record::from_json(value.as_bytes())
            .is_ok_and(|r| r.port == 0 && in_domain(&r.host, &format!("svc.{}", self.domain)))
    }
}

/// The A-type JSON and its key label for `host`.
fn address(host: &str) -> (String, String) {
    let record = Record::kube2sky_address(host);
    (record.key_label(), record.to_json())
}

/// What kind of DNS a Service gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceKind<'a> {
    /// A cluster IP (§5.1).
    ClusterIp(&'a str),
    /// `clusterIP` `None` or empty (§5.2).
    Headless,
    /// `type: ExternalName`.
    ExternalName(&'a str),
    /// A `clusterIP` that is not an IP address: no records
    /// ([`crate::validate`] reports it).
    Unusable,
}

/// Classifies a Service.
pub fn service_kind(svc: &Service) -> ServiceKind<'_> {
    let spec = svc.spec.as_ref();
    if spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
        return ServiceKind::ExternalName(
            spec.and_then(|s| s.external_name.as_deref()).unwrap_or(""),
        );
    }
    match spec.and_then(|s| s.cluster_ip.as_deref()).unwrap_or("") {
        "" | "None" => ServiceKind::Headless,
        ip if validate::is_ip(ip) => ServiceKind::ClusterIp(ip),
        _ => ServiceKind::Unusable,
    }
}

/// The IPv4 cluster IP of a Service, if it has one.
pub fn cluster_ipv4(svc: &Service) -> Option<Ipv4Addr> {
    match service_kind(svc) {
        ServiceKind::ClusterIp(ip) => ip.parse().ok(),
        _ => None,
    }
}

/// `_<name>._<proto>` labels and the number of a port, or `None` when it
/// gets no SRV record: name or protocol empty (1.2), or a name, protocol
/// or number [`crate::validate`] rejects.
fn port_labels(
    name: Option<&str>,
    protocol: Option<&str>,
    number: i32,
) -> Option<(String, String, u16)> {
    let name = name.filter(|n| !n.is_empty())?;
    let protocol = protocol.filter(|p| !p.is_empty())?;
    if !validate::is_port_label_pair(name, protocol) || !validate::is_port_number(number) {
        return None;
    }
    Some((
        format!("_{name}"),
        format!("_{}", protocol.to_ascii_lowercase()),
        u16::try_from(number).ok()?,
    ))
}

/// Something 1.2 logged about a cluster-IP service's ports (§5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortProblem {
    /// `Unexpected service with no ports, ...`: the A record is still written.
    NoPorts,
    /// `Port Protocol not set. ...`: a named port without a protocol gets no SRV.
    NoProtocol,
}

/// What 1.2 would log about `svc`'s ports; empty for other kinds of service.
pub fn port_problems(svc: &Service) -> Vec<PortProblem> {
    if !matches!(service_kind(svc), ServiceKind::ClusterIp(_)) {
        return Vec::new();
    }
    let ports = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default();
    if ports.is_empty() {
        return vec![PortProblem::NoPorts];
    }
    ports
        .iter()
        .filter(|p| p.name.as_deref().is_some_and(|n| !n.is_empty()))
        .filter(|p| p.protocol.as_deref().unwrap_or("").is_empty())
        .map(|_| PortProblem::NoProtocol)
        .collect()
}

/// All records of one Service. `endpoints` is used for headless services;
/// `external_name` enables ExternalName records.
pub fn service_records(
    names: &Names,
    svc: &Service,
    endpoints: Option<&Endpoints>,
    external_name: bool,
) -> Records {
    let namespace = svc.metadata.namespace.as_deref().unwrap_or("default");
    let name = svc.metadata.name.as_deref().unwrap_or("");
    let service = names.service_fqdn(namespace, name);
    let mut out = Records::new();
    match service_kind(svc) {
        ServiceKind::ClusterIp(ip) => {
            let (label, json) = address(ip);
            out.insert(names.key(&format!("{label}.{service}")), json);
            let ports = svc
                .spec
                .as_ref()
                .and_then(|s| s.ports.as_deref())
                .unwrap_or_default();
            for port in ports {
                let Some((pname, proto, number)) =
                    port_labels(port.name.as_deref(), port.protocol.as_deref(), port.port)
                else {
                    continue;
                };
                let json = Record::kube2sky_service(&service, number).to_json();
                out.insert(
                    names.key(&format!("{label}.{pname}.{proto}.{service}")),
                    json,
                );
            }
        }
        ServiceKind::Headless => {
            if let Some(endpoints) = endpoints {
                out = headless_records(names, &service, endpoints);
            }
        }
        ServiceKind::ExternalName(target)
            if external_name && validate::is_external_name(&target.to_ascii_lowercase()) =>
        {
            let (label, json) = address(&fqdn(&target.to_ascii_lowercase()));
            out.insert(names.key(&format!("{label}.{service}")), json);
        }
        ServiceKind::ExternalName(_) | ServiceKind::Unusable => {}
    }
    out
}

/// Per-endpoint A and SRV records of a headless service named `service` (§5.2).
pub fn headless_records(names: &Names, service: &str, endpoints: &Endpoints) -> Records {
    let (labels, _) = endpoint_labels(endpoints);
    let mut out = Records::new();
    for (subset, labels) in endpoints
        .subsets
        .as_deref()
        .unwrap_or_default()
        .iter()
        .zip(labels)
    {
        subset_records(names, service, subset, &labels, &mut out);
    }
    out
}

fn subset_records(
    names: &Names,
    service: &str,
    subset: &EndpointSubset,
    labels: &[(String, String)],
    out: &mut Records,
) {
    for (ip, label) in labels {
        let (_, json) = address(ip);
        let endpoint = format!("{label}.{service}");
        out.insert(names.key(&endpoint), json);
        for port in subset.ports.as_deref().unwrap_or_default() {
            let Some((pname, proto, number)) =
                port_labels(port.name.as_deref(), port.protocol.as_deref(), port.port)
            else {
                continue;
            };
            let json = Record::kube2sky_service(&endpoint, number).to_json();
            out.insert(
                names.key(&format!("{label}.{pname}.{proto}.{service}")),
                json,
            );
        }
    }
}

/// `(ip, label)` of every ready address that gets records, subset by
/// subset: the address's hostname if valid, else the annotation's, else
/// the hash of its record (1.2). Addresses whose IP is not an IP are left
/// out; so is an address whose label another address (with another IP)
/// already has, returned second as `(ip, label)`: one name, one record.
/// One IP in several subsets keeps its label in each (1.2 wrote the SRVs
/// of every subset's ports).
pub type EndpointLabels = (Vec<Vec<(String, String)>>, Vec<(String, String)>);

/// See [`EndpointLabels`].
pub fn endpoint_labels(endpoints: &Endpoints) -> EndpointLabels {
    let hostnames = hostnames_map(endpoints);
    let mut owner: HashMap<String, String> = HashMap::new();
    let mut taken = Vec::new();
    let mut subsets = Vec::new();
    for subset in endpoints.subsets.as_deref().unwrap_or_default() {
        let mut labels = Vec::new();
        for entry in subset.addresses.as_deref().unwrap_or_default() {
            let ip = entry.ip.as_str();
            if !validate::is_ip(ip) {
                continue;
            }
            let label = entry
                .hostname
                .as_deref()
                .filter(|h| validate::is_dns1123_label(h))
                .or_else(|| hostnames.get(ip).map(String::as_str))
                .map_or_else(|| address(ip).0, str::to_string);
            match owner.get(&label) {
                // The same address again (another subset, other ports):
                // its A record is the same key, its SRVs are its own.
                Some(first) if first == ip => labels.push((ip.to_string(), label)),
                Some(_) => taken.push((ip.to_string(), label)),
                None => {
                    owner.insert(label.clone(), ip.to_string());
                    labels.push((ip.to_string(), label));
                }
            }
        }
        subsets.push(labels);
    }
    (subsets, taken)
}

/// IP → hostname from the hostnames-map annotation, valid labels only.
/// 1.2 failed the whole mutation (and eventually exited) on invalid JSON; we
/// fall back to hash labels instead.
fn hostnames_map(endpoints: &Endpoints) -> HashMap<String, String> {
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(rename = "HostName", default)]
        host_name: String,
    }
    let Some(raw) = endpoints
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HOSTNAMES_ANNOTATION))
    else {
        return HashMap::new();
    };
    if raw.is_empty() {
        return HashMap::new();
    }
    match serde_json::from_str::<HashMap<String, Entry>>(raw) {
        Ok(map) => map
            .into_iter()
            .filter(|(_, e)| validate::is_dns1123_label(&e.host_name))
            .map(|(ip, e)| (ip, e.host_name))
            .collect(),
        Err(error) => {
            tracing::warn!(%error, annotation = HOSTNAMES_ANNOTATION, "ignoring invalid annotation; using hash labels");
            HashMap::new()
        }
    }
}

/// The record of one pod IP (§5.3): `/skydns/.../pod/<ns>/1-2-3-4/<hash>`.
pub fn pod_records(names: &Names, namespace: &str, ip: &str) -> Records {
    let (label, json) = address(ip);
    Records::from([(
        names.key(&format!("{label}.{}", names.pod_fqdn(namespace, ip))),
        json,
    )])
}

/// The PTR record of a cluster IP owned by service `namespace/name`.
pub fn ptr_record(names: &Names, ip: Ipv4Addr, namespace: &str, name: &str) -> (String, String) {
    (
        names.ptr_key(ip),
        Record::kube2sky_address(&names.service_fqdn(namespace, name)).to_json(),
    )
}

#[cfg(test)]
mod tests;
