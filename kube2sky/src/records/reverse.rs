//! PTR records: the keys of `in-addr.arpa` and `ip6.arpa` names, and the
//! records of one IP given the names that point at it (a leaf at the IP's path
//! for one name, a directory with one leaf per name for several).

use super::{Names, Records};
use k8s_openapi::api::core::v1::Endpoints;
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

/// Where an IP's PTR key sorts among the others in etcd's byte order,
/// without building the key: `in-addr/a/b/c/d` before `ip6/…`; an IPv4
/// octet as its decimal digits padded with zeros (a shorter number is a
/// prefix and sorts first, as `5` before `50` and `1/` before `10/`); an
/// IPv6 key as its 32 nibbles (hex digits sort as their values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum PtrOrder {
    /// An `in-addr.arpa` key.
    V4([u8; 12]),
    /// An `ip6.arpa` key.
    V6([u8; 32]),
}

impl PtrOrder {
    /// The order of `ip`'s PTR key.
    pub(crate) fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => {
                let mut out = [0u8; 12];
                for (i, octet) in v4.octets().into_iter().enumerate() {
                    let digits = match octet {
                        100.. => 3,
                        10.. => 2,
                        _ => 1,
                    };
                    let mut rest = octet;
                    for at in (i * 3..i * 3 + digits).rev() {
                        out[at] = b'0' + rest % 10;
                        rest /= 10;
                    }
                }
                PtrOrder::V4(out)
            }
            IpAddr::V6(v6) => {
                let mut out = [0u8; 32];
                for (i, byte) in v6.octets().iter().enumerate() {
                    out[i * 2] = byte >> 4;
                    out[i * 2 + 1] = byte & 0xf;
                }
                PtrOrder::V6(out)
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
    match targets {
        [] => Records::new(),
        [one] => Records::from([(key, names.address(&one.fqdn(names)).1)]),
        many => many
            .iter()
            .map(|t| {
                let (label, json) = names.address(&t.fqdn(names));
                (format!("{key}/{label}"), json)
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
