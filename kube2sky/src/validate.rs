//! Which parts of an API object may become etcd keys and records, so that no
//! object can address another object's keys. [`service`], [`endpoints`] and
//! [`pod`] list an object's [`Problem`]s, found with Kubernetes's own rules
//! ([`crate::name_rules`]); a problem with its name keeps the object out.

use crate::name_rules::{
    is_dns1035_label, is_dns1123_label, is_external_name, is_ip, is_port_number,
};
use crate::objects::PodInfo;
use crate::records::endpoint_labels;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use prometheus_client::encoding::EncodeLabelValue;

/// The field a problem is about (the `field` label of the metric).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub(crate) enum Field {
    /// `metadata.name`.
    Name,
    /// `metadata.namespace`.
    Namespace,
    /// `spec.clusterIP`.
    ClusterIp,
    /// `spec.externalName`.
    ExternalName,
    /// A port's name.
    PortName,
    /// A port's protocol.
    PortProtocol,
    /// A port's number.
    PortNumber,
    /// An endpoint address's or pod's IP.
    Ip,
    /// An endpoint's hostname (invalid, or taken by another address).
    Hostname,
}

/// One part of an object that cannot become records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    /// Which field.
    pub field: Field,
    /// Its value, as received.
    pub value: String,
    /// Why it cannot be used.
    pub reason: &'static str,
}

impl Problem {
    fn new(field: Field, value: impl Into<String>, reason: &'static str) -> Self {
        Problem {
            field,
            value: value.into(),
            reason,
        }
    }

    /// Whether the object as a whole is skipped (its name or namespace
    /// cannot be part of a key); otherwise only the part is.
    pub(crate) fn whole_object(&self) -> bool {
        matches!(self.field, Field::Name | Field::Namespace)
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} {:?} {}", self.field, self.value, self.reason)
    }
}

const NOT_DNS1123_LABEL: &str =
    "is not a DNS-1123 label (lower-case letters, digits and '-', at most 63)";
const NOT_DNS1035_LABEL: &str =
    "is not a DNS-1035 label (a lower-case letter, then letters, digits and '-', at most 63)";

fn meta_problems(
    meta: &ObjectMeta,
    name_is_valid: fn(&str) -> bool,
    why: &'static str,
) -> Vec<Problem> {
    let mut out = Vec::new();
    let namespace = meta.namespace.as_deref().unwrap_or("default");
    if !is_dns1123_label(namespace) {
        out.push(Problem::new(Field::Namespace, namespace, NOT_DNS1123_LABEL));
    }
    let name = meta.name.as_deref().unwrap_or("");
    if !name_is_valid(name) {
        out.push(Problem::new(Field::Name, name, why));
    }
    out
}

fn port_problems(out: &mut Vec<Problem>, name: Option<&str>, protocol: Option<&str>, number: i32) {
    // An unnamed port gets no SRV record (1.2), which is not a problem; a
    // named one without protocol is 1.2's own complaint (see `records`).
    let (Some(name), Some(protocol)) = (name.filter(|n| !n.is_empty()), protocol) else {
        return;
    };
    if protocol.is_empty() {
        return;
    }
    if !is_dns1123_label(name) {
        out.push(Problem::new(Field::PortName, name, NOT_DNS1123_LABEL));
    } else if !is_dns1123_label(&protocol.to_ascii_lowercase()) {
        out.push(Problem::new(
            Field::PortProtocol,
            protocol,
            NOT_DNS1123_LABEL,
        ));
    } else if !is_port_number(number) {
        out.push(Problem::new(
            Field::PortNumber,
            number.to_string(),
            "is not a port number (1-65535)",
        ));
    }
}

/// Everything about a Service that cannot become records.
pub(crate) fn service(svc: &Service) -> Vec<Problem> {
    let mut out = meta_problems(&svc.metadata, is_dns1035_label, NOT_DNS1035_LABEL);
    let Some(spec) = svc.spec.as_ref() else {
        return out;
    };
    if spec.type_.as_deref() == Some("ExternalName") {
        let target = spec.external_name.as_deref().unwrap_or("");
        if !target.is_empty() && !is_external_name(&target.to_ascii_lowercase()) {
            out.push(Problem::new(
                Field::ExternalName,
                target,
                "is not a DNS-1123 subdomain",
            ));
        }
        return out;
    }
    match spec.cluster_ip.as_deref().unwrap_or("") {
        // A headless service's SRV records come from its Endpoints' ports.
        "" | "None" => return out,
        ip if !is_ip(ip) => {
            out.push(Problem::new(Field::ClusterIp, ip, "is not an IP address"));
            return out;
        }
        _ => {}
    }
    for ip in spec.cluster_ips.iter().flatten().filter(|ip| !is_ip(ip)) {
        out.push(Problem::new(Field::ClusterIp, ip, "is not an IP address"));
    }
    for port in spec.ports.as_deref().unwrap_or_default() {
        port_problems(
            &mut out,
            port.name.as_deref(),
            port.protocol.as_deref(),
            port.port,
        );
    }
    out
}

/// Everything about an Endpoints object that cannot become records;
/// `spec`: addresses may share a hostname (one record per IP).
pub(crate) fn endpoints(ep: &Endpoints, spec: bool) -> Vec<Problem> {
    let mut out = meta_problems(&ep.metadata, is_dns1035_label, NOT_DNS1035_LABEL);
    for subset in ep.subsets.as_deref().unwrap_or_default() {
        for address in subset.addresses.as_deref().unwrap_or_default() {
            if !is_ip(&address.ip) {
                out.push(Problem::new(Field::Ip, &address.ip, "is not an IP address"));
            }
            if let Some(hostname) = address.hostname.as_deref().filter(|h| !h.is_empty()) {
                if !is_dns1123_label(hostname) {
                    out.push(Problem::new(Field::Hostname, hostname, NOT_DNS1123_LABEL));
                }
            }
        }
        for port in subset.ports.as_deref().unwrap_or_default() {
            port_problems(
                &mut out,
                port.name.as_deref(),
                port.protocol.as_deref(),
                port.port,
            );
        }
    }
    for (ip, label) in endpoint_labels(ep, spec).taken {
        out.push(Problem {
            field: Field::Hostname,
            value: format!("{label} ({ip})"),
            reason: "is already the hostname of another address: this address gets no record",
        });
    }
    out
}

/// Everything about a pod that cannot become records.
pub(crate) fn pod(pod: &PodInfo) -> Vec<Problem> {
    let mut out = Vec::new();
    if !is_dns1123_label(&pod.key.namespace) {
        out.push(Problem::new(
            Field::Namespace,
            &pod.key.namespace,
            NOT_DNS1123_LABEL,
        ));
    }
    for ip in pod.ips.iter().filter(|ip| !ip.is_empty() && !is_ip(ip)) {
        out.push(Problem::new(Field::Ip, ip, "is not an IP address"));
    }
    out
}

#[cfg(test)]
mod tests;
