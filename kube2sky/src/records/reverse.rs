//! PTR records: the keys of `in-addr.arpa` and `ip6.arpa` names, and the
//! records of one IP given the names that point at it.
//!
//! An IP with one name keeps the layout kube2sky's PTRs always had, a leaf
//! at the IP's path (`/skydns/arpa/in-addr/10/0/0/1`). An IP with several
//! names (a cluster IP shared by services, an endpoint IP of several
//! headless services) is a directory with one leaf per name, labelled with
//! the hash of its record (`/skydns/arpa/in-addr/10/0/0/1/<hash>`), so a
//! PTR query answers every name. Without the specification's records only
//! the lowest name is kept (the owner rule of the first PTRs).

use super::{Names, Records};
use k8s_openapi::api::core::v1::Endpoints;
use skydns_msg::record::Record;
use std::net::IpAddr;

/// A name a PTR points at: a service, or a hostname of its endpoints.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct PtrName {
    /// The service's namespace.
    pub namespace: Box<str>,
    /// The service's name.
    pub name: Box<str>,
    /// The endpoint's hostname, for a headless endpoint.
    pub hostname: Option<Box<str>>,
}

impl PtrName {
    /// `[<hostname>.]<name>.<ns>.svc.<domain>`.
    pub(crate) fn fqdn(&self, names: &Names) -> String {
        let service = names.service_fqdn(&self.namespace, &self.name);
        match &self.hostname {
            Some(hostname) => format!("{hostname}.{service}"),
            None => service,
        }
    }
}

impl Names {
    /// `/skydns/arpa/`: every PTR subtree (`in-addr`, `ip6`; shared with
    /// other writers) lives below it.
    pub(crate) fn ptr_root(&self) -> String {
        format!("{}/", self.key("arpa."))
    }

    /// `/skydns/arpa/in-addr/` and `/skydns/arpa/ip6/`.
    pub(crate) fn ptr_family_roots(&self) -> [String; 2] {
        [
            format!("{}/", self.key("in-addr.arpa.")),
            format!("{}/", self.key("ip6.arpa.")),
        ]
    }

    /// `/skydns/arpa/in-addr/10/0/0/1` for `10.0.0.1`;
    /// `/skydns/arpa/ip6/f/d/0/0/.../1` (32 nibbles) for `fd00::1`.
    pub(crate) fn ptr_key(&self, ip: IpAddr) -> String {
        match ip {
            IpAddr::V4(v4) => {
                let [a, b, c, d] = v4.octets();
                self.key(&format!("{d}.{c}.{b}.{a}.in-addr.arpa."))
            }
            IpAddr::V6(v6) => {
                let mut name = String::with_capacity(72);
                for byte in v6.octets().iter().rev() {
                    name.push_str(&format!("{:x}.{:x}.", byte & 0xf, byte >> 4));
                }
                self.key(&format!("{name}ip6.arpa."))
            }
        }
    }
}

/// The PTR records of `ip` pointing at `targets` (sorted): nothing for
/// none, the leaf for one, a leaf per name below the IP's key for several.
/// `every`: all names; otherwise the first alone.
pub(crate) fn ptr_records(names: &Names, ip: IpAddr, targets: &[PtrName], every: bool) -> Records {
    let targets = if every {
        targets
    } else {
        &targets[..targets.len().min(1)]
    };
    let key = names.ptr_key(ip);
    let record = |t: &PtrName| Record::kube2sky_address(&t.fqdn(names));
    match targets {
        [] => Records::new(),
        [one] => Records::from([(key, record(one).to_json())]),
        many => many
            .iter()
            .map(|t| {
                let record = record(t);
                (format!("{key}/{}", record.key_label()), record.to_json())
            })
            .collect(),
    }
}

/// The IPs and hostnames of a headless service's ready endpoints that
/// have a hostname (the specification's endpoint PTRs), de-duplicated.
pub(crate) fn endpoint_ptr_names(endpoints: &Endpoints) -> Vec<(IpAddr, Box<str>)> {
    let mut out: Vec<(IpAddr, Box<str>)> = super::endpoint_labels(endpoints, true)
        .subsets
        .into_iter()
        .flatten()
        .filter(|a| a.hostname)
        .filter_map(|a| Some((a.ip.parse().ok()?, a.label.into_boxed_str())))
        .collect();
    out.sort();
    out.dedup();
    out
}
