//! SkyDNS configuration: flags, environment, the etcd `config` key, defaults.
//!
//! The order is SkyDNS's (SkyDNS `main.go` and `server/config.go`): command-line flags (Go style
//! `-domain=x` and `-ns-rotate=false` as well as `--domain x`) with their
//! environment fallbacks fill a [`Settings`]; the JSON at `/<prefix>/config`
//! in etcd, when present, overrides the keys it holds ([`Settings::merge_json`]);
//! then [`Settings::finish`] applies the defaults and validates everything
//! into a [`Config`]. Every error names the flag or key and the bad value.

use crate::answer::Zone;
use crate::store::etcd::EtcdOptions;
use clap::Parser;
use serde::{Deserialize, Serialize};
use skydns_msg::path::PathPrefix;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::time::Duration;

mod flags;
pub(crate) mod live;
pub use flags::{go_bool, go_duration, go_style_args, Flags};

/// A configuration problem, naming the flag or key at fault.
#[derive(Debug, thiserror::Error)]
#[error("skydns: {0}")]
pub struct ConfigError(pub String);

/// The settings SkyDNS's `Config` struct holds, before defaults.
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
    /// `ns_rotate`: pick the first forwarder by request ID.
    pub ns_rotate: bool,
    /// `nameservers`: forwarders, `IP:port`.
    pub nameservers: Vec<String>,
    /// `no_rec`: never forward.
    pub no_rec: bool,
    /// `read_timeout` in nanoseconds.
    pub read_timeout: i64,
    /// `priority`: default record priority.
    pub priority: u16,
    /// `ttl`: default record TTL.
    pub ttl: u32,
    /// `min_ttl`: SOA TTL in negative answers.
    pub min_ttl: u32,
    /// `rcache`: response cache capacity.
    pub rcache: i64,
    /// `rcache_ttl`: response cache lifetime in seconds.
    pub rcache_ttl: i64,
    /// `ndot`: labels a name needs to be forwarded.
    pub ndot: i64,
    /// `dnssec`: basename of the DNSSEC key pair (`<it>.key`, `<it>.private`).
    pub dnssec: String,
    /// `local`: the name `local.dns.<domain>` stands for.
    pub local: String,
    /// `systemd`: serve the sockets systemd passes (socket activation).
    pub systemd: bool,
    /// `scache`: signature cache capacity (DNSSEC only; 0 disables it).
    pub scache: i64,
    /// `lameduck` in nanoseconds, or a Go duration string (`"5s"`): how
    /// long to keep answering after SIGTERM (not a SkyDNS 2.5.2c key).
    #[serde(deserialize_with = "nanos_or_duration")]
    pub lameduck: i64,
}

/// The validated configuration the server runs with.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Settings of the authoritative zone.
    pub zone: Zone,
    /// Where to listen, UDP and TCP.
    pub addr: SocketAddr,
    /// Upstream resolvers.
    pub nameservers: Vec<SocketAddr>,
    /// Never forward.
    pub no_rec: bool,
    /// Shuffle A/AAAA answers.
    pub round_robin: bool,
    /// Pick the first forwarder by request ID.
    pub ns_rotate: bool,
    /// Labels a name needs before it is forwarded.
    pub ndots: usize,
    /// Upstream read/write timeout.
    pub read_timeout: Duration,
    /// How to reach etcd.
    pub etcd: EtcdOptions,
    /// Log every query.
    pub verbose: bool,
    /// Response cache capacity (0 = off).
    pub rcache: usize,
    /// Response cache TTL cap in seconds.
    pub rcache_ttl: u32,
    /// Forwarding beyond SkyDNS: policy, transport, upstream health,
    /// serve-stale and prefetch (flags only).
    pub forwarding: Forwarding,
    /// Forward stub zones.
    pub stubzones: bool,
    /// `-autopath` and its search list, if on.
    pub autopath: Option<std::sync::Arc<crate::autopath::Autopath>>,
    /// `-log-queries` with its sampling rate, if on.
    pub query_log: Option<std::sync::Arc<crate::query_log::QueryLog>>,
    /// Requests that may wait on upstream servers at once (0: no limit).
    pub max_pending_forwards: usize,
    /// Bounds on TCP clients.
    pub tcp: crate::server::TcpLimits,
    /// Where to serve metrics, if anywhere.
    pub metrics_addr: Option<SocketAddr>,
    /// The name `local.dns.<domain>` stands for (`-local`), lowercase and
    /// fully qualified.
    pub local: Option<String>,
    /// Take the listening sockets from systemd (`-systemd`).
    pub systemd: bool,
    /// Follow the etcd cluster's members (`-discover`).
    pub discover: bool,
    /// Path of the metrics endpoint.
    pub metrics_path: String,
    /// Online DNSSEC signing, with `-dnssec`.
    pub dnssec: Option<std::sync::Arc<crate::dnssec::Dnssec>>,
    /// How long to keep answering after SIGTERM, not ready (`-lameduck`).
    pub lameduck: Duration,
    /// How long early queries wait for the first load (`-startup-wait`).
    pub startup_wait: Duration,
    /// How long etcd may be out of reach before `/ready` says 503
    /// (`-ready-store-timeout`; zero: it never does for that).
    pub ready_store_timeout: Duration,
}

/// The forwarding and response-cache flags SkyDNS did not have.
#[derive(Clone, Debug, PartialEq)]
pub struct Forwarding {
    /// `-ns-policy`.
    pub ns_policy: Option<crate::handler::NsPolicy>,
    /// `-ns-transport`.
    pub ns_transport: crate::handler::NsTransport,
    /// `-ns-fail-threshold`.
    pub ns_fail_threshold: u32,
    /// `-ns-probe-interval`.
    pub ns_probe_interval: Duration,
    /// `-rcache-stale`.
    pub rcache_stale: Duration,
    /// `-rcache-stale-timeout`.
    pub rcache_stale_timeout: Duration,
    /// `-rcache-stale-ttl`.
    pub rcache_stale_ttl: u32,
    /// `-rcache-prefetch`.
    pub rcache_prefetch: u32,
    /// `-rcache-prefetch-percent`.
    pub rcache_prefetch_percent: u8,
}

impl Forwarding {
    fn from_flags(f: &Flags) -> Result<Self, ConfigError> {
        if f.ns_probe_interval.is_zero() {
            return Err(ConfigError("ns-probe-interval must be more than 0s".into()));
        }
        Ok(Forwarding {
            ns_policy: f.ns_policy,
            ns_transport: f.ns_transport,
            ns_fail_threshold: f.ns_fail_threshold,
            ns_probe_interval: f.ns_probe_interval,
            rcache_stale: f.rcache_stale,
            rcache_stale_timeout: f.rcache_stale_timeout,
            rcache_stale_ttl: f.rcache_stale_ttl,
            rcache_prefetch: f.rcache_prefetch,
            rcache_prefetch_percent: f.rcache_prefetch_percent,
        })
    }
}

impl Config {
    /// The handler options this configuration asks for.
    pub fn handler_options(&self) -> crate::handler::Options {
        crate::handler::Options {
            round_robin: self.round_robin,
            nameservers: self.nameservers.clone(),
            no_rec: self.no_rec,
            ns_rotate: self.ns_rotate,
            ns_policy: self.forwarding.ns_policy,
            ns_transport: self.forwarding.ns_transport,
            ns_fail_threshold: self.forwarding.ns_fail_threshold,
            ns_probe_interval: self.forwarding.ns_probe_interval,
            ndots: self.ndots,
            read_timeout: self.read_timeout,
            rcache: self.rcache,
            rcache_ttl: self.rcache_ttl,
            rcache_stale: self.forwarding.rcache_stale,
            rcache_stale_timeout: self.forwarding.rcache_stale_timeout,
            rcache_stale_ttl: self.forwarding.rcache_stale_ttl,
            rcache_prefetch: self.forwarding.rcache_prefetch,
            rcache_prefetch_percent: self.forwarding.rcache_prefetch_percent,
            stubzones: self.stubzones,
            autopath: self.autopath.clone(),
            query_log: self.query_log.clone(),
            max_pending_forwards: self.max_pending_forwards,
            local: self.local.clone(),
            dnssec: self.dnssec.clone(),
        }
    }
}

/// `-autopath` with its search list, checked.
fn autopath(
    flags: &Flags,
    domain: &str,
) -> Result<Option<std::sync::Arc<crate::autopath::Autopath>>, ConfigError> {
    if !flags.autopath {
        return Ok(None);
    }
    crate::autopath::Autopath::new(&flags.autopath_search, flags.autopath_ndots, domain)
        .map(|a| Some(std::sync::Arc::new(a)))
        .map_err(ConfigError)
}

impl Settings {
    /// The settings the flags and environment give.
    pub fn from_flags(f: &Flags) -> Self {
        Settings {
            dns_addr: f.addr.clone(),
            domain: f.domain.clone(),
            hostmaster: f.hostmaster.clone(),
            round_robin: f.round_robin,
            ns_rotate: f.ns_rotate,
            nameservers: split_list(&f.nameservers),
            no_rec: f.no_rec,
            read_timeout: i64::try_from(f.rtimeout.as_nanos()).unwrap_or(i64::MAX),
            rcache: f.rcache,
            rcache_ttl: f.rcache_ttl,
            ndot: f.ndots,
            dnssec: f.dnssec.clone(),
            local: f.local.clone(),
            systemd: f.systemd,
            scache: f.scache,
            lameduck: i64::try_from(f.lameduck.as_nanos()).unwrap_or(i64::MAX),
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

    /// SkyDNS's `SetDefaults` plus validation.
    pub fn finish(
        self,
        flags: &Flags,
        resolv_conf: impl FnOnce() -> Result<Vec<SocketAddr>, String>,
    ) -> Result<Config, ConfigError> {
        let domain = fqdn_lower(if self.domain.is_empty() {
            "skydns.local."
        } else {
            &self.domain
        });
        let dns_addr = if self.dns_addr.is_empty() {
            "127.0.0.1:53"
        } else {
            &self.dns_addr
        };
        let addr = parse_ip_port(dns_addr)
            .map_err(|_| ConfigError(format!("addr is invalid: {dns_addr:?} (want IP:port)")))?;
        let mut nameservers = Vec::new();
        for ns in &self.nameservers {
            nameservers.push(parse_ip_port(ns).map_err(|_| {
                ConfigError(format!("nameserver is invalid: {ns:?} (want IP:port)"))
            })?);
        }
        if nameservers.is_empty() {
            nameservers = resolv_conf().map_err(|e| {
                ConfigError(format!(
                    "defaults could not be set from /etc/resolv.conf: {e}"
                ))
            })?;
        }
        let hostmaster = if self.hostmaster.is_empty() {
            format!("hostmaster.{domain}")
        } else {
            self.hostmaster.clone()
        };
        let zone = Zone {
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
        };
        let dnssec = self.dnssec_signing(flags, &zone)?;
        let read_timeout = match self.read_timeout {
            t if t <= 0 => Duration::from_secs(2),
            t => Duration::from_nanos(t as u64),
        };
        let metrics_addr = metrics_addr(flags)?;
        let rcache_ttl = if self.rcache_ttl <= 0 {
            60
        } else {
            u32::try_from(self.rcache_ttl).unwrap_or(u32::MAX)
        };
        if !flags.prometheus_path.starts_with('/') {
            return Err(ConfigError(format!(
                "PROMETHEUS_PATH must start with '/': {:?}",
                flags.prometheus_path
            )));
        }
        if ["/health", "/ready"].contains(&flags.prometheus_path.as_str()) {
            return Err(ConfigError(format!(
                "PROMETHEUS_PATH {:?} is taken by the probe of that name",
                flags.prometheus_path
            )));
        }
        let lameduck = u64::try_from(self.lameduck).map_err(|_| {
            ConfigError(format!(
                "lameduck must not be negative: {}ns",
                self.lameduck
            ))
        })?;
        Ok(Config {
            rcache: usize::try_from(self.rcache.max(0)).unwrap_or(usize::MAX),
            rcache_ttl,
            forwarding: Forwarding::from_flags(flags)?,
            stubzones: flags.stubzones,
            autopath: autopath(flags, &zone.domain)?,
            query_log: crate::query_log::QueryLog::new(
                &flags.log_queries,
                flags.log_queries_sample,
            )
            .map_err(ConfigError)?
            .map(std::sync::Arc::new),
            max_pending_forwards: flags.max_pending_forwards,
            tcp: tcp_limits(flags)?,
            metrics_addr,
            metrics_path: flags.prometheus_path.clone(),
            zone,
            addr,
            nameservers,
            no_rec: self.no_rec,
            round_robin: self.round_robin,
            ns_rotate: self.ns_rotate,
            ndots: if self.ndot <= 0 {
                2
            } else {
                self.ndot as usize
            },
            read_timeout,
            etcd: flags.etcd_options(),
            verbose: flags.verbose,
            local: local_name(&self.local)?,
            systemd: self.systemd,
            discover: flags.discover,
            dnssec,
            lameduck: Duration::from_nanos(lameduck),
            startup_wait: flags.startup_wait,
            ready_store_timeout: flags.ready_store_timeout,
        })
    }

    /// The key pair `dnssec` names, read for `zone`; the error names the
    /// flag (or the etcd key, when the value came from there) and the file.
    fn dnssec_signing(
        &self,
        flags: &Flags,
        zone: &Zone,
    ) -> Result<Option<std::sync::Arc<crate::dnssec::Dnssec>>, ConfigError> {
        if self.dnssec.is_empty() {
            return Ok(None);
        }
        let settings = crate::dnssec::Settings {
            ttl: zone.ttl,
            min_ttl: zone.min_ttl,
            scache: usize::try_from(self.scache.max(0)).unwrap_or(usize::MAX),
        };
        let source = if self.dnssec == flags.dnssec {
            "-dnssec"
        } else {
            "dnssec (etcd config key)"
        };
        crate::dnssec::Dnssec::load(&self.dnssec, &zone.domain, settings)
            .map(|d| Some(std::sync::Arc::new(d)))
            .map_err(|e| ConfigError(format!("{source} {}: {e}", self.dnssec)))
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

/// The TCP flags; a zero limit or timeout is an error.
fn tcp_limits(flags: &Flags) -> Result<crate::server::TcpLimits, ConfigError> {
    let positive = |name: &str, d: Duration| {
        if d.is_zero() {
            Err(ConfigError(format!("{name} must be greater than zero")))
        } else {
            Ok(d)
        }
    };
    if flags.tcp_max_connections == 0 {
        return Err(ConfigError("tcp-max-connections must be at least 1".into()));
    }
    Ok(crate::server::TcpLimits {
        max_connections: flags.tcp_max_connections,
        idle: positive("tcp-idle-timeout", flags.tcp_idle_timeout)?,
        read: positive("tcp-read-timeout", flags.tcp_read_timeout)?,
        write: positive("tcp-write-timeout", flags.tcp_write_timeout)?,
    })
}

/// `-metrics-addr`, else `0.0.0.0:$PROMETHEUS_PORT`, else none.
fn metrics_addr(flags: &Flags) -> Result<Option<SocketAddr>, ConfigError> {
    if let Some(addr) = &flags.metrics_addr {
        let parsed = addr.parse().map_err(|_| {
            ConfigError(format!("metrics-addr is invalid: {addr:?} (want IP:port)"))
        })?;
        return Ok(Some(parsed));
    }
    match flags.prometheus_port.as_deref() {
        None | Some("") => Ok(None),
        Some(port) => {
            let port: u16 = port
                .parse()
                .map_err(|_| ConfigError(format!("PROMETHEUS_PORT is invalid: {port:?}")))?;
            Ok(Some(SocketAddr::from(([0, 0, 0, 0], port))))
        }
    }
}

/// A duration in the etcd config key: nanoseconds as Go's `time.Duration`
/// marshals it (`5000000000`), or a Go duration string (`"5s"`).
fn nanos_or_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Value {
        Nanos(i64),
        Text(String),
    }
    match Value::deserialize(d)? {
        Value::Nanos(n) => Ok(n),
        Value::Text(text) => gocompat::duration::parse(&text)
            .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
            .map_err(serde::de::Error::custom),
    }
}

/// Parses argv (Go-style or GNU-style flags) into [`Flags`].
pub fn parse_args(args: impl IntoIterator<Item = OsString>) -> Result<Flags, clap::Error> {
    Flags::try_parse_from(go_style_args(args))
}

/// A comma-separated flag value as a list, blanks dropped.
fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

fn fqdn_lower(s: &str) -> String {
    skydns_msg::path::fqdn(&s.to_ascii_lowercase())
}

/// `IP:port` with an IP literal host and a port in 1–65535.
fn parse_ip_port(s: &str) -> Result<SocketAddr, ()> {
    let addr: SocketAddr = s.parse().map_err(|_| ())?;
    if addr.port() == 0 {
        return Err(());
    }
    Ok(addr)
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

#[cfg(test)]
mod tests;
