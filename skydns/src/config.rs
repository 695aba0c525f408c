//! SkyDNS configuration (SkyDNS `main.go` and `server/config.go`): flags and
//! their environment fallbacks fill a [`Settings`], the JSON at
//! `/<prefix>/config` in etcd overrides it ([`Settings::merge_json`]), and
//! [`Settings::finish`] applies defaults and validates it into a [`Config`].
//! Each feature owns its settings; this module holds the zone's.

use crate::answer::Zone;
use crate::store::etcd::EtcdOptions;
use crate::values::{fqdn_lower, parse_ip_port};
use clap::Parser;
use serde::{Deserialize, Serialize};
use skydns_msg::path::PathPrefix;
use std::ffi::OsString;
use std::net::SocketAddr;

mod flags;
pub(crate) mod live;
pub use crate::forward::nameservers_from_resolv_conf;
pub use flags::{go_bool, go_duration, go_style_args, Flags};

/// A configuration problem, naming the flag or key at fault.
#[derive(Debug, thiserror::Error)]
#[error("skydns: {0}")]
pub struct ConfigError(pub String);

/// The keys SkyDNS's `Config` struct holds, before defaults: the zone's and
/// the server's here, each feature's in its own `Keys`, flattened so that
/// the JSON stays SkyDNS's one flat object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// `dns_addr`: listen address, `IP:port`.
    pub dns_addr: String,
    /// `domain`: the served domain.
    pub domain: String,
    /// `hostmaster`: SOA RNAME (`@` allowed).
    pub hostmaster: String,
    /// `round_robin`: shuffle A/AAAA answers.
    pub round_robin: bool,
    /// `priority`: default record priority.
    pub priority: u16,
    /// `ttl`: default record TTL.
    pub ttl: u32,
    /// `min_ttl`: SOA TTL in negative answers.
    pub min_ttl: u32,
    /// `local`: the name `local.dns.<domain>` stands for.
    pub local: String,
    /// `systemd`: serve the sockets systemd passes (socket activation).
    pub systemd: bool,
    /// Forwarding's: `nameservers`, `no_rec`, `ns_rotate`, `read_timeout`, `ndot`.
    #[serde(flatten)]
    pub forward: crate::forward::Keys,
    /// The response cache's: `rcache`, `rcache_ttl`.
    #[serde(flatten)]
    pub cache: crate::response_cache::Keys,
    /// DNSSEC's: `dnssec`, `scache`.
    #[serde(flatten)]
    pub dnssec: crate::dnssec::Keys,
    /// The lifecycle's: `lameduck`.
    #[serde(flatten)]
    pub lifecycle: crate::lifecycle::Keys,
}

/// The validated configuration the server runs with.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Settings of the authoritative zone.
    pub zone: Zone,
    /// Where to listen, UDP and TCP.
    pub addr: SocketAddr,
    /// Take the listening sockets from systemd (`-systemd`).
    pub systemd: bool,
    /// The query path's features: forwarding, caches, stub zones,
    /// autopath, DNSSEC, the query log.
    pub handler: crate::handler::Settings,
    /// Bounds on TCP clients.
    pub tcp: crate::server::TcpLimits,
    /// How to reach etcd.
    pub etcd: EtcdOptions,
    /// Where and how metrics and the probes are served.
    pub metrics: crate::metrics::Settings,
    /// Start-up wait, readiness and lameduck.
    pub lifecycle: crate::lifecycle::Settings,
}

impl Settings {
    /// The settings the flags and environment give.
    pub fn from_flags(f: &Flags) -> Self {
        Settings {
            dns_addr: f.addr.clone(),
            domain: f.domain.clone(),
            hostmaster: f.hostmaster.clone(),
            round_robin: f.round_robin,
            local: f.local.clone(),
            systemd: f.systemd,
            forward: crate::forward::Keys::from_flags(&f.forward),
            cache: crate::response_cache::Keys::from_flags(&f.cache),
            dnssec: crate::dnssec::Keys::from_flags(&f.dnssec),
            lifecycle: crate::lifecycle::Keys::from_flags(&f.lifecycle),
            ..Settings::default()
        }
    }

    /// Overrides the keys present in the etcd `config` JSON.
    pub fn merge_json(&mut self, json: &[u8]) -> Result<(), ConfigError> {
        let bad =
            |e: serde_json::Error| ConfigError(format!("invalid JSON in the etcd config key: {e}"));
        let value: serde_json::Value = serde_json::from_slice(json).map_err(bad)?;
        let serde_json::Value::Object(present) = value else {
            return Err(ConfigError(
                "the etcd config key must hold a JSON object".into(),
            ));
        };
        let mut merged = serde_json::to_value(&*self).map_err(bad)?;
        if let serde_json::Value::Object(current) = &mut merged {
            for (k, v) in present {
                if current.contains_key(&k) {
                    current.insert(k, v);
                } else {
                    tracing::warn!(key = %k, "ignoring unknown key in the etcd config");
                }
            }
        }
        *self = serde_json::from_value(merged)
            .map_err(|e| ConfigError(format!("invalid value in the etcd config key: {e}")))?;
        Ok(())
    }

    /// SkyDNS's `SetDefaults` plus validation: the zone's here, each
    /// feature's by its own builder.
    pub fn finish(
        self,
        flags: &Flags,
        resolv_conf: impl FnOnce() -> Result<Vec<SocketAddr>, String>,
    ) -> Result<Config, ConfigError> {
        let zone = self.zone(flags);
        let dns_addr = if self.dns_addr.is_empty() {
            "127.0.0.1:53"
        } else {
            &self.dns_addr
        };
        let addr = parse_ip_port(dns_addr)
            .map_err(|_| ConfigError(format!("addr is invalid: {dns_addr:?} (want IP:port)")))?;
        let handler = crate::handler::Settings {
            round_robin: self.round_robin,
            local: local_name(&self.local)?,
            forward: crate::forward::Settings::build(&flags.forward, &self.forward, resolv_conf)
                .map_err(ConfigError)?,
            cache: crate::response_cache::Settings::build(&flags.cache, &self.cache),
            stubzones: flags.stub.stubzones,
            pods: flags.pods.pods,
            dnssec: (self.dnssec)
                .build(&flags.dnssec, &zone.domain, zone.ttl, zone.min_ttl)
                .map_err(ConfigError)?,
            autopath: flags.autopath.build(&zone.domain).map_err(ConfigError)?,
            query_log: flags.query_log.build().map_err(ConfigError)?,
        };
        Ok(Config {
            addr,
            systemd: self.systemd,
            handler,
            tcp: flags.tcp.build().map_err(ConfigError)?,
            etcd: flags.store.etcd_options(),
            metrics: flags.metrics.build().map_err(ConfigError)?,
            lifecycle: self
                .lifecycle
                .build(&flags.lifecycle)
                .map_err(ConfigError)?,
            zone,
        })
    }

    /// The zone, SkyDNS's defaults filled in.
    fn zone(&self, flags: &Flags) -> Zone {
        let domain = fqdn_lower(if self.domain.is_empty() {
            "skydns.local."
        } else {
            &self.domain
        });
        let hostmaster = if self.hostmaster.is_empty() {
            format!("hostmaster.{domain}")
        } else {
            self.hostmaster.clone()
        };
        Zone {
            prefix: PathPrefix::new(&flags.path_prefix),
            ttl: if self.ttl == 0 { 3600 } else { self.ttl },
            min_ttl: if self.min_ttl == 0 { 60 } else { self.min_ttl },
            priority: if self.priority == 0 {
                10
            } else {
                self.priority
            },
            hostmaster: skydns_msg::path::fqdn(&hostmaster.replace('@', ".")),
            domain,
        }
    }
}

/// `-local`: a domain name (lowercased, made fully qualified), or none.
fn local_name(local: &str) -> Result<Option<String>, ConfigError> {
    let local = local.trim();
    if local.is_empty() {
        return Ok(None);
    }
    let name = fqdn_lower(local);
    let labels_ok = name.trim_end_matches('.').split('.').all(|l| {
        !l.is_empty() && l.len() <= 63 && skydns_msg::path::is_addressable_label(l.as_bytes())
    });
    if !labels_ok || name.len() > 254 {
        return Err(ConfigError(format!(
            "local is not a domain name: {local:?}"
        )));
    }
    Ok(Some(name))
}

/// Parses argv (Go-style or GNU-style flags) into [`Flags`].
pub fn parse_args(args: impl IntoIterator<Item = OsString>) -> Result<Flags, clap::Error> {
    Flags::try_parse_from(go_style_args(args))
}

#[cfg(test)]
mod tests;
