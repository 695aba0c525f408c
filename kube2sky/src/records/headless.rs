//! The records of a headless service's endpoints (1.2's
//! `generateRecordsForHeadlessService` in `kube2sky.go`): which label each
//! ready address gets ([`endpoint_labels`]) and the A/AAAA and SRV records
//! under them ([`headless_records`]).

use super::{address_label, port_labels, Names, Records};
use crate::name_rules;
use k8s_openapi::api::core::v1::{EndpointSubset, Endpoints};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The Endpoints annotation that maps IPs to hostnames (`{"<ip>":{"HostName":"<name>"}}`).
pub(crate) const HOSTNAMES_ANNOTATION: &str = "endpoints.beta.kubernetes.io/hostnames-map";

/// One ready address that gets records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Address {
    /// Its IP, as received.
    pub ip: String,
    /// The first label of its name.
    pub label: String,
    /// Whether the label is a hostname (not the hash of the record).
    pub hostname: bool,
}

/// The addresses that get records, subset by subset, and the `(ip, label)`
/// of those left out because another IP holds their label (only without
/// the specification's records). One IP in several subsets keeps its label
/// in each (1.2 wrote the SRVs of every subset's ports).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct EndpointLabels {
    /// Per subset, in order.
    pub subsets: Vec<Vec<Address>>,
    /// Left out: `(ip, label)`.
    pub taken: Vec<(String, String)>,
}

/// See [`EndpointLabels`]. Addresses whose IP is not an IP are left out.
pub(crate) fn endpoint_labels(endpoints: &Endpoints, spec: bool) -> EndpointLabels {
    let hostnames = hostnames_map(endpoints);
    let mut owner: HashMap<String, String> = HashMap::new();
    let mut out = EndpointLabels::default();
    for subset in endpoints.subsets.as_deref().unwrap_or_default() {
        let mut labels = Vec::new();
        for entry in subset.addresses.as_deref().unwrap_or_default() {
            let ip = entry.ip.as_str();
            if !name_rules::is_ip(ip) {
                continue;
            }
            let hostname = entry
                .hostname
                .as_deref()
                .filter(|h| name_rules::is_dns1123_label(h))
                .or_else(|| hostnames.get(ip).map(String::as_str));
            let address = Address {
                ip: ip.to_string(),
                label: hostname.map_or_else(|| address_label(ip), str::to_string),
                hostname: hostname.is_some(),
            };
            match owner.get(&address.label) {
                // The same address again (another subset, other ports):
                // its A record is the same key, its SRVs are its own.
                Some(first) if first == ip || spec => labels.push(address),
                Some(_) => out.taken.push((address.ip, address.label)),
                None => {
                    owner.insert(address.label.clone(), ip.to_string());
                    labels.push(address);
                }
            }
        }
        out.subsets.push(labels);
    }
    out
}

/// Per-endpoint A/AAAA and SRV records of a headless service named
/// `service`; `spec`: one record per IP for a shared label.
pub(crate) fn headless_records(
    names: &Names,
    service: &str,
    endpoints: &Endpoints,
    spec: bool,
) -> Records {
    let labels = endpoint_labels(endpoints, spec);
    let mut ips: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for address in labels.subsets.iter().flatten() {
        ips.entry(&address.label).or_default().insert(&address.ip);
    }
    let mut out = Records::new();
    for (label, ips) in &ips {
        let endpoint = format!("{label}.{service}");
        if let [ip] = ips.iter().collect::<Vec<_>>()[..] {
            out.insert(names.key(&endpoint), names.address(ip).1);
            continue;
        }
        for ip in ips {
            let (hash, json) = names.address(ip);
            out.insert(names.key(&format!("{hash}.{endpoint}")), json);
        }
    }
    for (subset, addresses) in endpoints
        .subsets
        .as_deref()
        .unwrap_or_default()
        .iter()
        .zip(&labels.subsets)
    {
        subset_srvs(names, service, subset, addresses, &mut out);
    }
    out
}

/// The SRV records of one subset's named ports, one per address label.
fn subset_srvs(
    names: &Names,
    service: &str,
    subset: &EndpointSubset,
    addresses: &[Address],
    out: &mut Records,
) {
    for Address { label, .. } in addresses {
        let endpoint = format!("{label}.{service}");
        for port in subset.ports.as_deref().unwrap_or_default() {
            let Some((pname, proto, number)) =
                port_labels(port.name.as_deref(), port.protocol.as_deref(), port.port)
            else {
                continue;
            };
            let json = names.service_value(&endpoint, number);
            out.insert(
                names.key(&format!("{label}.{pname}.{proto}.{service}")),
                json,
            );
        }
    }
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
            .filter(|(_, e)| name_rules::is_dns1123_label(&e.host_name))
            .map(|(ip, e)| (ip, e.host_name))
            .collect(),
        Err(error) => {
            tracing::warn!(%error, annotation = HOSTNAMES_ANNOTATION, "ignoring invalid annotation; using hash labels");
            HashMap::new()
        }
    }
}
