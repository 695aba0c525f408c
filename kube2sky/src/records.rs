//! Pure "API object → SkyDNS records" functions: the records 1.2's
//! `kube2sky.go` wrote (docs/architecture.md, "What it writes"), and those of
//! the Kubernetes DNS specification 1.1.0. Each returns a [`Records`] map from
//! etcd key to exact JSON; [`Names`] builds every name and key. No I/O, no
//! clock, no state.

use crate::name_rules;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use skydns_msg::path::{fqdn, in_domain, PathPrefix};
use skydns_msg::record::{key_label_of, Record};
use std::collections::BTreeMap;

mod headless;
mod reverse;
mod units;
pub(crate) use headless::{endpoint_labels, headless_records, HOSTNAMES_ANNOTATION};
pub(crate) use reverse::{endpoint_ptr_names, ptr_records, PtrName, PtrOrder};

/// The name of every stub leaf kube2sky writes, before its number: `_`
/// makes it a label no stub domain can have (a leaf `kube-dns-0` would be
/// the directory of the zone `kube-dns-0.<zone>` too, which etcd v2
/// cannot hold), and is not leading, so v2 does not hide it.
pub(crate) const STUB_LEAF_PREFIX: &str = "kube-dns_";

/// Whether `leaf` (the last label of a key under the stub root) is one
/// kube2sky writes: `kube-dns_<n>`, nothing else.
pub(crate) fn is_stub_leaf(leaf: &str) -> bool {
    leaf.strip_prefix(STUB_LEAF_PREFIX)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// etcd key → JSON value.
pub(crate) type Records = BTreeMap<String, String>;

/// The schema version of the Kubernetes DNS specification the records
/// follow with [`Options::spec`], served as `dns-version.<domain>` TXT.
pub(crate) const SCHEMA_VERSION: &str = "1.1.0";

/// Which records beyond kube2sky 1.2's are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Options {
    /// Records for ExternalName services (`--external-name`).
    pub external_name: bool,
    /// The specification's records that change 1.2's key set for 1.2-era
    /// objects (`--spec-records`): one record per IP for endpoints sharing
    /// a hostname, PTRs for headless endpoints with a hostname, every name
    /// of a shared IP in its PTRs, and `dns-version.<domain>`.
    pub spec: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            external_name: true,
            spec: true,
        }
    }
}

/// Builds names, keys and record values for one cluster domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Names {
    domain: String,
    prefix: PathPrefix,
    /// The TTL written into every record (`--ttl`).
    ttl: u32,
}

impl Names {
    /// `domain` with or without its trailing dot, e.g. `cluster.local`;
    /// records with 1.2's TTL of 30 s.
    pub(crate) fn new(domain: &str) -> Self {
        Names {
            domain: fqdn(domain),
            prefix: PathPrefix::default(),
            ttl: KUBE2SKY_TTL,
        }
    }

    /// The same names, with records of TTL `ttl`.
    pub(crate) fn with_ttl(self, ttl: u32) -> Self {
        Names { ttl, ..self }
    }

    /// The A-type JSON for `host` and its key label. The label is 1.2's
    /// (the hash of the record with TTL 30) whatever `--ttl` is, so a new
    /// TTL rewrites values in place and never renames an endpoint.
    pub(crate) fn address(&self, host: &str) -> (String, String) {
        let record = Record::kube2sky_address(host);
        let label_json = record.to_json();
        let label = key_label_of(&label_json);
        if record.ttl == self.ttl {
            (label, label_json) // the value is the JSON just hashed
        } else {
            (label, self.value(record))
        }
    }

    /// The SRV-type JSON for `target` and `port`.
    pub(crate) fn service_value(&self, target: &str, port: u16) -> String {
        self.value(Record::kube2sky_service(target, port))
    }

    /// The `dns-version` TXT JSON for `version`.
    fn version_value(&self, version: &str) -> String {
        self.value(version_record(version))
    }

    /// `record`'s JSON with the TTL of `--ttl`.
    fn value(&self, record: Record) -> String {
        Record {
            ttl: self.ttl,
            ..record
        }
        .to_json()
    }

    /// The domain with its trailing dot.
    pub(crate) fn domain(&self) -> &str {
        &self.domain
    }

    /// `<name>.<ns>.svc.<domain>` (trailing dot).
    pub(crate) fn service_fqdn(&self, namespace: &str, name: &str) -> String {
        format!("{name}.{namespace}.svc.{}", self.domain)
    }

    /// The etcd key of a DNS name.
    pub(crate) fn key(&self, name: &str) -> String {
        self.prefix.path(name)
    }

    /// `/skydns/local/cluster/svc/`: every service record lives below it.
    pub(crate) fn svc_root(&self) -> String {
        format!("{}/", self.key(&format!("svc.{}", self.domain)))
    }

    /// `/skydns/local/cluster/pod/`: every pod record lives below it.
    pub(crate) fn pod_root(&self) -> String {
        format!("{}/", self.key(&format!("pod.{}", self.domain)))
    }

    /// `stub.dns.<domain>`: the stub zones' servers live below its key.
    pub(crate) fn stub_domain(&self) -> String {
        format!("stub.dns.{}", self.domain)
    }

    /// `/skydns/local/cluster/dns/stub/`: every stub zone's servers.
    pub(crate) fn stub_root(&self) -> String {
        format!("{}/", self.key(&self.stub_domain()))
    }

    /// `/skydns/config`: skydns's configuration key.
    pub(crate) fn config_key(&self) -> String {
        format!("{}config", self.prefix.root())
    }

    /// `/kube2sky/<domain>/upstreams`: the upstreams kube2sky last wrote
    /// into the config key (see `crate::kube_dns_config::merge_upstreams`).
    pub(crate) fn upstreams_note_key(&self) -> String {
        format!("/kube2sky/{}/upstreams", self.domain.trim_end_matches('.'))
    }

    /// `/skydns/local/cluster/svc/<ns>/<name>/`: one service's records.
    pub(crate) fn service_dir(&self, namespace: &str, name: &str) -> String {
        format!("{}/", self.key(&self.service_fqdn(namespace, name)))
    }

    /// `1-2-3-4.<ns>.pod.<domain>`; an IPv6 pod IP gets dashes for its
    /// colons too (`2001-db8--1.<ns>.pod.<domain>`, the specification's form).
    pub(crate) fn pod_fqdn(&self, namespace: &str, ip: &str) -> String {
        format!(
            "{}.{namespace}.pod.{}",
            ip.replace(['.', ':'], "-"),
            self.domain
        )
    }

    /// `/skydns/local/cluster/dns-version`: the schema version's TXT record.
    pub(crate) fn dns_version_key(&self) -> String {
        self.key(&format!("dns-version.{}", self.domain))
    }

    /// Whether a `dns-version` value was written by us (of any schema
    /// version): exactly the JSON [`dns_version_records`] writes.
    pub(crate) fn owns_version_value(&self, value: &str) -> bool {
        // Any TTL: one written before a change of `--ttl` is still ours.
        Record::from_json(value.as_bytes()).is_ok_and(|r| {
            !r.text.is_empty()
                && r.ttl != 0
                && (Record {
                    ttl: r.ttl,
                    ..version_record(&r.text)
                })
                .to_json()
                    == value
        })
    }

    /// `/skydns/local/cluster/pod/<ns>/1-2-3-4/`: the records of one pod IP.
    pub(crate) fn pod_dir(&self, namespace: &str, ip: &str) -> String {
        format!("{}/", self.key(&self.pod_fqdn(namespace, ip)))
    }

    /// The deepest directory above `key` that is never removed when it
    /// empties (etcd v2): the namespace directory of service and pod keys,
    /// the family's PTR root (`in-addr`, `ip6`) of PTR keys, the stub root
    /// of stub leaves; `None` for keys elsewhere.
    pub(crate) fn dir_floor(&self, key: &str) -> Option<String> {
        for root in [self.svc_root(), self.pod_root()] {
            if let Some(rest) = key.strip_prefix(&root) {
                let namespace = rest.split('/').next()?;
                return Some(format!("{root}{namespace}"));
            }
        }
        let stub_root = self.stub_root();
        if key.starts_with(&stub_root) {
            return Some(stub_root.trim_end_matches('/').to_string());
        }
        self.ptr_family_roots()
            .into_iter()
            .find(|root| key.starts_with(root.as_str()))
            .map(|root| root.trim_end_matches('/').to_string())
    }

    /// Whether `key` is a PTR key (`in-addr.arpa` or `ip6.arpa`).
    pub(crate) fn is_ptr_key(&self, key: &str) -> bool {
        self.ptr_family_roots()
            .iter()
            .any(|root| key.starts_with(root.as_str()))
    }

    /// Whether a PTR value was written by us: its host is a service name in our domain.
    pub(crate) fn owns_ptr_value(&self, value: &str) -> bool {
        Record::from_json(value.as_bytes())
            .is_ok_and(|r| r.port == 0 && in_domain(&r.host, &format!("svc.{}", self.domain)))
    }
}

/// The key label of `host`'s A-type record (1.2's: the hash of its JSON
/// with TTL 30), which also names a headless endpoint without a hostname.
pub(crate) fn address_label(host: &str) -> String {
    Record::kube2sky_address(host).key_label()
}

/// 1.2's TTL for every record.
const KUBE2SKY_TTL: u32 = 30;

/// What kind of DNS a Service gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ServiceKind<'a> {
    /// A cluster IP: `spec.clusterIP`, the first of `spec.clusterIPs`.
    ClusterIp(&'a str),
    /// `clusterIP` `None` or empty.
    Headless,
    /// `type: ExternalName`.
    ExternalName(&'a str),
    /// A `clusterIP` that is not an IP address: no records
    /// ([`crate::validate`] reports it).
    Unusable,
}

/// Classifies a Service.
pub(crate) fn service_kind(svc: &Service) -> ServiceKind<'_> {
    let spec = svc.spec.as_ref();
    if spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
        return ServiceKind::ExternalName(
            spec.and_then(|s| s.external_name.as_deref()).unwrap_or(""),
        );
    }
    match spec.and_then(|s| s.cluster_ip.as_deref()).unwrap_or("") {
        "" | "None" => ServiceKind::Headless,
        ip if name_rules::is_ip(ip) => ServiceKind::ClusterIp(ip),
        _ => ServiceKind::Unusable,
    }
}

/// Every cluster IP of a Service, `spec.clusterIP` first, then the other
/// entries of `spec.clusterIPs` (dual-stack) that are IPs; empty for other
/// kinds of service.
pub(crate) fn cluster_ips(svc: &Service) -> Vec<&str> {
    let ServiceKind::ClusterIp(primary) = service_kind(svc) else {
        return Vec::new();
    };
    let mut out = vec![primary];
    let all = svc.spec.as_ref().and_then(|s| s.cluster_ips.as_deref());
    for ip in all.unwrap_or_default() {
        if name_rules::is_ip(ip) && !out.contains(&ip.as_str()) {
            out.push(ip);
        }
    }
    out
}

/// `_<name>._<proto>` labels and the number of a port, or `None` when it
/// gets no SRV record: name or protocol empty (1.2), or a name, protocol
/// or number [`crate::validate`] rejects.
pub(crate) fn port_labels(
    name: Option<&str>,
    protocol: Option<&str>,
    number: i32,
) -> Option<(String, String, u16)> {
    let name = name.filter(|n| !n.is_empty())?;
    let protocol = protocol.filter(|p| !p.is_empty())?;
    if !name_rules::is_port_label_pair(name, protocol) || !name_rules::is_port_number(number) {
        return None;
    }
    Some((
        format!("_{name}"),
        format!("_{}", protocol.to_ascii_lowercase()),
        u16::try_from(number).ok()?,
    ))
}

/// Something 1.2 logged about a cluster-IP service's ports
/// (`buildPortSegmentString`, `generateRecordsForPortalService`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortProblem {
    /// `Unexpected service with no ports, ...`: the A record is still written.
    NoPorts,
    /// `Port Protocol not set. ...`: a named port without a protocol gets no SRV.
    NoProtocol,
}

/// Logs 1.2's complaints about a cluster-IP service's ports (see
/// [`PortProblem`]); the index calls it once per received version of the
/// service rather than on every reconcile.
pub(crate) fn log_port_problems(svc: &Service) {
    for problem in port_problems(svc) {
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

/// What 1.2 would log about `svc`'s ports; empty for other kinds of service.
pub(crate) fn port_problems(svc: &Service) -> Vec<PortProblem> {
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

/// All records of one Service. `endpoints` is used for headless services.
/// A dual-stack Service's second IP gets its A/AAAA record; its SRVs are
/// written once, under the first IP's label (one SRV per port, as the
/// specification's examples).
pub(crate) fn service_records(
    names: &Names,
    svc: &Service,
    endpoints: Option<&Endpoints>,
    options: Options,
) -> Records {
    let namespace = svc.metadata.namespace.as_deref().unwrap_or("default");
    let name = svc.metadata.name.as_deref().unwrap_or("");
    let service = names.service_fqdn(namespace, name);
    let mut out = Records::new();
    match service_kind(svc) {
        ServiceKind::ClusterIp(_) => {
            for (i, ip) in cluster_ips(svc).into_iter().enumerate() {
                let (label, json) = names.address(ip);
                out.insert(names.key(&format!("{label}.{service}")), json);
                if i == 0 {
                    service_srvs(names, svc, &service, &label, &mut out);
                }
            }
        }
        ServiceKind::Headless => {
            if let Some(endpoints) = endpoints {
                out = headless_records(names, &service, endpoints, options.spec);
            }
        }
        ServiceKind::ExternalName(target)
            if options.external_name
                && name_rules::is_external_name(&target.to_ascii_lowercase()) =>
        {
            let (label, json) = names.address(&fqdn(&target.to_ascii_lowercase()));
            out.insert(names.key(&format!("{label}.{service}")), json);
        }
        ServiceKind::ExternalName(_) | ServiceKind::Unusable => {}
    }
    out
}

/// The SRV records of a cluster-IP service's named ports, keyed under `label`.
fn service_srvs(names: &Names, svc: &Service, service: &str, label: &str, out: &mut Records) {
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
        let json = names.service_value(service, number);
        out.insert(
            names.key(&format!("{label}.{pname}.{proto}.{service}")),
            json,
        );
    }
}

/// `dns-version.<domain>` TXT [`SCHEMA_VERSION`] (with [`Options::spec`]).
pub(crate) fn dns_version_records(names: &Names, options: Options) -> Records {
    if !options.spec {
        return Records::new();
    }
    Records::from([(names.dns_version_key(), names.version_value(SCHEMA_VERSION))])
}

/// The TXT record of `version`, its TTL left to the caller (`--ttl` when
/// written, the value's own when read).
fn version_record(version: &str) -> Record {
    Record {
        text: version.into(),
        ..Record::default()
    }
}

/// The record of one pod IP (1.2's `handlePodCreate`): `/skydns/.../pod/<ns>/1-2-3-4/<hash>`
/// (AAAA for an IPv6 pod IP: `.../pod/<ns>/2001-db8--1/<hash>`).
pub(crate) fn pod_records(names: &Names, namespace: &str, ip: &str) -> Records {
    Records::from([pod_record(names, namespace, ip)])
}

/// The one record of [`pod_records`], as a pair: a sync of 150k pods
/// collects these without a map per pod.
pub(crate) fn pod_record(names: &Names, namespace: &str, ip: &str) -> (String, String) {
    let (label, json) = names.address(ip);
    let key = names.key(&format!("{label}.{}", names.pod_fqdn(namespace, ip)));
    (key, json)
}

#[cfg(test)]
mod tests;
