//! Forwarding's settings: the SkyDNS keys it reads from `/skydns/config`
//! ([`Keys`]), and what the flags and those keys make of it ([`Settings`]).

use super::{Flags, NsPolicy, NsTransport, Relay};
use crate::values::{nanos, parse_ip_port, split_list};
use hickory_proto::rr::Name;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;

/// The keys of the etcd config key forwarding owns, in SkyDNS's units.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Keys {
    /// `nameservers`: forwarders, `IP:port`.
    pub nameservers: Vec<String>,
    /// `no_rec`: never forward.
    pub no_rec: bool,
    /// `ns_rotate`: pick the first forwarder by request ID.
    pub ns_rotate: bool,
    /// `read_timeout` in nanoseconds.
    pub read_timeout: i64,
    /// `ndot`: labels a name needs to be forwarded.
    pub ndot: i64,
}

impl Keys {
    /// The keys as the flags set them, before the etcd key overrides any.
    pub fn from_flags(f: &Flags) -> Self {
        Keys {
            nameservers: split_list(&f.nameservers),
            no_rec: f.no_rec,
            ns_rotate: f.ns_rotate,
            read_timeout: nanos(f.rtimeout),
            ndot: f.ndots,
        }
    }
}

/// How names outside the domain are forwarded.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// The upstream nameservers.
    pub nameservers: Vec<SocketAddr>,
    /// Never forward (`-no-rec`).
    pub no_rec: bool,
    /// Labels a name needs before it is forwarded (`-ndots`).
    pub ndots: usize,
    /// Requests that may wait on upstream servers at once (0: no limit);
    /// past it they get REFUSED at once, counted as
    /// `skydns_dns_limit_count{limit="pending_forwards"}`.
    pub max_pending: usize,
    /// How each query is relayed: timeout, policy, transport, health.
    pub relay: Relay,
}

impl Default for Settings {
    /// What the flags' defaults build, with no nameservers.
    fn default() -> Self {
        Settings {
            nameservers: Vec::new(),
            no_rec: false,
            ndots: 2,
            max_pending: 1_000,
            relay: Relay {
                timeout: Duration::from_secs(2),
                policy: NsPolicy::RequestId,
                transport: NsTransport::Client,
                fail_threshold: 2,
                probe_interval: Duration::from_millis(500),
                probe_name: Name::root(),
            },
        }
    }
}

impl Settings {
    /// SkyDNS's defaults and checks over `keys`, with the flags only
    /// forwarding has; `resolv_conf` gives the nameservers when none is
    /// set. The error names the flag or key and the value.
    pub fn build(
        flags: &Flags,
        keys: &Keys,
        resolv_conf: impl FnOnce() -> Result<Vec<SocketAddr>, String>,
    ) -> Result<Self, String> {
        let mut nameservers = Vec::new();
        for ns in &keys.nameservers {
            nameservers.push(
                parse_ip_port(ns)
                    .map_err(|_| format!("nameserver is invalid: {ns:?} (want IP:port)"))?,
            );
        }
        if nameservers.is_empty() {
            nameservers = resolv_conf()
                .map_err(|e| format!("defaults could not be set from /etc/resolv.conf: {e}"))?;
        }
        if flags.ns_probe_interval.is_zero() {
            return Err("ns-probe-interval must be more than 0s".into());
        }
        let bad_probe_name = || {
            format!(
                "ns-probe-name is not a domain name: {:?}",
                flags.ns_probe_name
            )
        };
        if flags.ns_probe_name.trim().is_empty() {
            return Err(bad_probe_name());
        }
        let probe_name = Name::from_ascii(&flags.ns_probe_name)
            .map_err(|_| bad_probe_name())?
            .to_lowercase();
        let policy = flags.ns_policy.unwrap_or(if keys.ns_rotate {
            NsPolicy::RequestId
        } else {
            NsPolicy::Sequential
        });
        Ok(Settings {
            nameservers,
            no_rec: keys.no_rec,
            ndots: if keys.ndot <= 0 {
                2
            } else {
                keys.ndot as usize
            },
            max_pending: flags.max_pending_forwards,
            relay: Relay {
                timeout: match keys.read_timeout {
                    t if t <= 0 => Duration::from_secs(2),
                    t => Duration::from_nanos(t as u64),
                },
                policy,
                transport: flags.ns_transport,
                fail_threshold: flags.ns_fail_threshold,
                probe_interval: flags.ns_probe_interval.max(Duration::from_millis(10)),
                probe_name: fqdn(probe_name),
            },
        })
    }
}

/// `name` made fully qualified.
fn fqdn(mut name: Name) -> Name {
    name.set_fqdn(true);
    name
}

/// The `nameserver` lines of a resolv.conf, as `IP:53`.
pub fn nameservers_from_resolv_conf(path: &std::path::Path) -> Result<Vec<SocketAddr>, String> {
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let parsed =
        resolv_conf::Config::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(parsed
        .nameservers
        .iter()
        .map(|ns| SocketAddr::new(std::net::IpAddr::from(ns), 53))
        .collect())
}
