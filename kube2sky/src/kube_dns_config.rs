//! kube-dns's ConfigMap (`kube-system/kube-dns`): its `stubDomains` and
//! `upstreamNameservers`, checked as kube-dns checked them (k8s.io/dns
//! `pkg/dns/config/config.go`), and what they become in etcd: stub leaves
//! `kube-dns_<n>` and the `nameservers` of `/skydns/config`
//! ([`merge_upstreams`]). Pure; the watch that feeds it is `crate::config_map`.

use crate::name_rules::is_dns1123_subdomain;
use crate::reconcile::Actual;
use crate::records::{Names, Records, STUB_LEAF_PREFIX};
use serde_json::{Map, Value};
use skydns_msg::path::{fqdn, in_domain};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

/// kube-dns allowed at most three upstreams.
const MAX_UPSTREAMS: usize = 3;

/// The cluster configuration of a valid ConfigMap (an absent one is the
/// default: no stub domains, the upstreams of skydns's flags).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct KubeDnsConfig {
    /// Stub domain (no trailing dot) → its servers, in the ConfigMap's order.
    pub stub_domains: BTreeMap<String, Vec<SocketAddr>>,
    /// The upstream resolvers; empty: none configured here.
    pub upstreams: Vec<SocketAddr>,
}

/// Why a ConfigMap's data was refused, naming the data key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("data.{key}: {reason}")]
pub(crate) struct InvalidConfigMap {
    /// `stubDomains` or `upstreamNameservers`.
    pub key: &'static str,
    /// What is wrong, naming the value.
    pub reason: String,
}

impl KubeDnsConfig {
    /// Parses a ConfigMap's `data` as kube-dns did: each key is a JSON
    /// string (`null` or absent: none); every other key is ignored.
    /// Beyond kube-dns: a stub domain at, inside or above `cluster_domain`
    /// is refused (skydns asks stub zones before its own records, so it
    /// would take the cluster's names), as are a stub server given by name
    /// (skydns dials IPs) and port 0.
    pub(crate) fn parse(
        data: &BTreeMap<String, String>,
        cluster_domain: &str,
    ) -> Result<Self, InvalidConfigMap> {
        let mut config = KubeDnsConfig::default();
        if let Some(raw) = data.get("stubDomains") {
            let invalid = |reason: String| InvalidConfigMap {
                key: "stubDomains",
                reason,
            };
            let parsed: Option<BTreeMap<String, Option<Vec<String>>>> = serde_json::from_str(raw)
                .map_err(|e| {
                invalid(format!(
                    "{raw:?} is not a JSON object of domain to list of nameservers: {e}"
                ))
            })?;
            for (domain, servers) in parsed.unwrap_or_default() {
                check_stub_domain(&domain, cluster_domain).map_err(invalid)?;
                let servers = (servers.unwrap_or_default().iter())
                    .map(|s| stub_server(s).map_err(|why| format!("{domain}: {why}")))
                    .collect::<Result<_, _>>()
                    .map_err(invalid)?;
                config.stub_domains.insert(domain, servers);
            }
        }
        if let Some(raw) = data.get("upstreamNameservers") {
            let invalid = |reason: String| InvalidConfigMap {
                key: "upstreamNameservers",
                reason,
            };
            let parsed: Option<Vec<String>> = serde_json::from_str(raw)
                .map_err(|e| invalid(format!("{raw:?} is not a JSON list of nameservers: {e}")))?;
            let parsed = parsed.unwrap_or_default();
            if parsed.len() > MAX_UPSTREAMS {
                return Err(invalid(format!(
                    "{} nameservers; kube-dns takes at most {MAX_UPSTREAMS}",
                    parsed.len()
                )));
            }
            config.upstreams = (parsed.iter())
                .map(|s| upstream(s))
                .collect::<Result<_, _>>()
                .map_err(invalid)?;
        }
        Ok(config)
    }

    /// The stub leaves: `<zone reversed>/kube-dns_<n>` under
    /// `stub.dns.<domain>`, each `{"host":"IP","port":P}` as SkyDNS reads it.
    pub(crate) fn stub_records(&self, names: &Names) -> Records {
        let mut out = Records::new();
        for (domain, servers) in &self.stub_domains {
            let zone = names.key(&format!("{domain}.{}", names.stub_domain()));
            for (n, server) in servers.iter().enumerate() {
                let value =
                    serde_json::json!({"host": server.ip().to_string(), "port": server.port()});
                out.insert(format!("{zone}/{STUB_LEAF_PREFIX}{n}"), value.to_string());
            }
        }
        out
    }
}

/// kube-dns: a DNS-1123 subdomain (lower case, no trailing dot). Ours: not
/// the cluster domain, nor inside or above it.
fn check_stub_domain(domain: &str, cluster_domain: &str) -> Result<(), String> {
    if !is_dns1123_subdomain(domain) {
        return Err(format!(
            "{domain:?} is not a domain name (lower-case DNS-1123 labels, no trailing dot)"
        ));
    }
    let (stub, cluster) = (fqdn(domain), fqdn(cluster_domain));
    if in_domain(&stub, &cluster) || in_domain(&cluster, &stub) {
        return Err(format!(
            "{domain:?} overlaps the cluster domain {cluster}: skydns asks stub zones first, \
             so it would forward the cluster's own names"
        ));
    }
    Ok(())
}

/// A stub server: `IP` (port 53) or `IP:port` (`[v6]:port`).
fn stub_server(ns: &str) -> Result<SocketAddr, String> {
    let host = ns.rsplit_once(':').map_or(ns, |(host, _)| host);
    match address(ns) {
        Some(addr) => checked_port(ns, addr),
        None if host.parse::<IpAddr>().is_err() && is_dns1123_subdomain(host) => Err(format!(
            "nameserver {ns:?} is a name; kube2sky writes stub servers as IP \
                 addresses, which skydns dials: give its IP"
        )),
        None => Err(format!("nameserver {ns:?} is not an IP or IP:port")),
    }
}

/// An upstream: `IP` (port 53) or `IP:port` (kube-dns's
/// `ValidateNameserverIpAndPort`).
fn upstream(ns: &str) -> Result<SocketAddr, String> {
    match address(ns) {
        Some(addr) => checked_port(ns, addr),
        None => Err(format!("nameserver {ns:?} is not an IP or IP:port")),
    }
}

fn address(ns: &str) -> Option<SocketAddr> {
    match ns.parse::<IpAddr>() {
        Ok(ip) => Some(SocketAddr::new(ip, 53)),
        Err(_) => ns.parse::<SocketAddr>().ok(),
    }
}

fn checked_port(ns: &str, addr: SocketAddr) -> Result<SocketAddr, String> {
    match addr.port() {
        0 => Err(format!("nameserver {ns:?} has port 0")),
        _ => Ok(addr),
    }
}

/// kube2sky's note, beside the config key, of what it did to the key's
/// `nameservers`: the value it wrote, and the value that was there before
/// (`null`: none), which is given back when the ConfigMap's upstreams go.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct UpstreamsNote {
    wrote: Value,
    replaced: Value,
}

/// What the config key and kube2sky's note should hold, from what they
/// hold (`config`, `noted`) and the ConfigMap's upstreams (`wanted`;
/// empty: none). `None` is "absent". The key's other fields are kept (the
/// key is written back with its fields sorted). With upstreams wanted,
/// `nameservers` is set and the value it replaces noted; with none, the
/// noted value is put back (or the field removed, and the key with it if
/// nothing else is left), but only while the field still holds what
/// kube2sky wrote: a value changed by hand since stays. A value that is
/// unchanged is returned as it was, byte for byte, so skydns sees no
/// reload. `Err`: the key holds something that is not a JSON object (not
/// ours to rewrite).
pub(crate) fn merge_upstreams(
    config: Option<&str>,
    noted: Option<&str>,
    wanted: &[SocketAddr],
) -> Result<(Option<String>, Option<String>), String> {
    let mut object = match config {
        None => Map::new(),
        Some(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(Value::Object(object)) => object,
            _ => return Err(format!("it holds {raw:?}, not a JSON object")),
        },
    };
    let current = object.get("nameservers").cloned();
    let note = noted.and_then(|n| serde_json::from_str::<UpstreamsNote>(n).ok());
    // Ours while the field holds what kube2sky wrote.
    let ours = note.filter(|n| current.as_ref() == Some(&n.wrote));
    if !wanted.is_empty() {
        let list = Value::from(wanted.iter().map(SocketAddr::to_string).collect::<Vec<_>>());
        let replaced = match &ours {
            Some(note) => note.replaced.clone(),
            None => current.clone().unwrap_or(Value::Null),
        };
        let note = UpstreamsNote {
            wrote: list.clone(),
            replaced,
        };
        let note = Some(serde_json::to_string(&note).map_err(|e| e.to_string())?);
        if current.as_ref() == Some(&list) {
            return Ok((config.map(str::to_string), note));
        }
        object.insert("nameservers".into(), list);
        return Ok((Some(Value::Object(object).to_string()), note));
    }
    let Some(ours) = ours else {
        return Ok((config.map(str::to_string), None));
    };
    match ours.replaced {
        Value::Null => object.remove("nameservers"),
        before => object.insert("nameservers".into(), before),
    };
    let rest = (!object.is_empty()).then(|| Value::Object(object).to_string());
    Ok((rest, None))
}

/// The records of `crate::scope::Scope::Upstreams` given what etcd holds
/// (`actual`, read from the config key and the note): see
/// [`merge_upstreams`]. A config key that is not a JSON object is not
/// touched (the writer warns that it holds a value kube2sky did not write),
/// and the note stays as it was.
pub(crate) fn upstream_records(names: &Names, actual: &Actual, wanted: &[SocketAddr]) -> Records {
    let (config_key, note_key) = (names.config_key(), names.upstreams_note_key());
    let noted = actual.records.get(&note_key).map(String::as_str);
    let mut out = Records::new();
    let merged = if actual.foreign.contains(&config_key) {
        Err("it holds a value that is not a JSON object".to_string())
    } else {
        merge_upstreams(
            actual.records.get(&config_key).map(String::as_str),
            noted,
            wanted,
        )
    };
    match merged {
        Ok((config, note)) => {
            out.extend(config.map(|c| (config_key, c)));
            out.extend(note.map(|n| (note_key, n)));
        }
        Err(why) => {
            tracing::warn!(
                "not setting the nameservers of kube-dns's ConfigMap in {config_key}: {why}"
            );
            out.extend(noted.map(|n| (note_key, n.to_string())));
        }
    }
    out
}

#[cfg(test)]
mod tests;
