//! The command line, as SkyDNS 2.5.2c accepted it (Go `flag` package).
//!
//! Go flags are written `-name=value`, `-name value` or `--name=value`, and
//! boolean flags take `-name`, `-name=true` or `-name=false` but never a
//! separate value. [`go_style_args`] rewrites single-dash long flags into
//! GNU style so that clap can parse them; [`Flags`] lists every flag with its
//! environment fallback and its SkyDNS default.

use crate::store::etcd::EtcdOptions;
use clap::Parser;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Command-line flags of `skydns`.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "skydns",
    args_override_self = true,
    version,
    about = "SkyDNS 2.5.2c-compatible DNS server for the Kubernetes cluster domain, serving records from etcd.",
    long_about = "Serves the SkyDNS records kube2sky writes to etcd as DNS over UDP and TCP, read through the etcd v2 keys API (as SkyDNS 2.5.2c) or, with -etcd3, the v3 API.\n\
Flags may be given Go style (-domain=cluster.local. -ns-rotate=false) or GNU style (--domain cluster.local.).\n\
Settings in the JSON at /<path-prefix>/config in etcd override the flags; skydns follows that key and applies a change without a restart (addr, domain, dnssec, scache, systemd and lameduck need one).",
    after_help = "Environment: each variable in [env: ...] stands in for its flag when the flag is not given; \
RUST_LOG sets the log filter (default info). Exit status: 0 after SIGTERM or SIGINT, 1 on a fatal error at start \
(the line names the flag, key or file), 2 on a command-line error.\n\
Documentation: docs/skydns.md."
)]
pub struct Flags {
    /// Domain to serve (lowercased, made fully qualified).
    #[arg(long, env = "SKYDNS_DOMAIN", default_value = "skydns.local.")]
    pub domain: String,
    /// Address to listen on, UDP and TCP, as IP:port.
    #[arg(long, env = "SKYDNS_ADDR", default_value = "127.0.0.1:53")]
    pub addr: String,
    /// Upstream nameservers, comma-separated IP:port [default: every nameserver of /etc/resolv.conf].
    #[arg(
        long,
        env = "SKYDNS_NAMESERVERS",
        default_value = "",
        hide_default_value = true
    )]
    pub nameservers: String,
    /// Never forward queries for names outside the domain.
    #[arg(long = "no-rec", value_parser = go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub no_rec: bool,
    /// etcd endpoints, comma-separated URLs.
    #[arg(long, env = "ETCD_MACHINES", default_value = "http://127.0.0.1:2379")]
    pub machines: String,
    /// TLS client certificate (PEM) for etcd.
    #[arg(long = "tls-pem", env = "ETCD_TLSPEM")]
    pub tls_pem: Option<PathBuf>,
    /// TLS client key (PEM) for etcd.
    #[arg(long = "tls-key", env = "ETCD_TLSKEY")]
    pub tls_key: Option<PathBuf>,
    /// CA certificate (PEM) that signed etcd's certificate.
    #[arg(long = "ca-cert", env = "ETCD_CACERT")]
    pub ca_cert: Option<PathBuf>,
    /// etcd user name (with --password).
    #[arg(long, env = "ETCD_USERNAME")]
    pub username: Option<String>,
    /// etcd password.
    #[arg(long, env = "ETCD_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// Read/write timeout towards upstream nameservers (Go duration, e.g. 2s).
    #[arg(long, value_parser = go_duration, default_value = "2s")]
    pub rtimeout: Duration,
    /// Shuffle A and AAAA answers.
    #[arg(long = "round-robin", value_parser = go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true")]
    pub round_robin: bool,
    /// Choose the first upstream nameserver by request ID.
    #[arg(long = "ns-rotate", value_parser = go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true")]
    pub ns_rotate: bool,
    /// Which upstream nameserver a forwarded query tries first: sequential (the first listed),
    /// round_robin (each query the next) or random; the others follow in turn [default: the
    /// request ID chooses, SkyDNS's -ns-rotate=true; with -ns-rotate=false, sequential].
    #[arg(long = "ns-policy")]
    pub ns_policy: Option<crate::handler::NsPolicy>,
    /// Transport of forwarded queries: client (the client's, as SkyDNS), tcp (always TCP, as
    /// CoreDNS force_tcp) or udp (UDP even for TCP clients, as CoreDNS prefer_udp). A truncated
    /// UDP reply is asked again over TCP before it is relayed when the client can take more.
    #[arg(long = "ns-transport", default_value = "client")]
    pub ns_transport: crate::handler::NsTransport,
    /// Consecutive failures (timeout, refused, bad reply, SERVFAIL) after which an upstream
    /// nameserver is marked down: tried last while another is up, probed with ". NS" until it
    /// answers (0: never; every query tries the servers in the policy's order, as SkyDNS).
    #[arg(long = "ns-fail-threshold", default_value_t = 2)]
    pub ns_fail_threshold: u32,
    /// How often an upstream marked down is probed (Go duration).
    #[arg(long = "ns-probe-interval", value_parser = go_duration, default_value = "500ms")]
    pub ns_probe_interval: Duration,
    /// SOA hostmaster (not derived from -domain, as in SkyDNS).
    #[arg(long, default_value = "hostmaster@skydns.local.")]
    pub hostmaster: String,
    /// Response cache capacity (0 disables it).
    #[arg(long, default_value_t = 0)]
    pub rcache: i64,
    /// Response cache TTL in seconds.
    #[arg(long = "rcache-ttl", default_value_t = 60)]
    pub rcache_ttl: i64,
    /// Serve-stale (RFC 8767): how long after it expired a cached reply may still be served,
    /// when the upstreams fail or say SERVFAIL, or none answers within -rcache-stale-timeout (Go duration;
    /// 0s: never). Needs -rcache.
    #[arg(long = "rcache-stale", value_parser = go_duration, default_value = "0s")]
    pub rcache_stale: Duration,
    /// How long a client waits for the upstreams before a stale reply is served; the refresh
    /// goes on in the background (RFC 8767 suggests 1.8s; 0s: serve the stale reply at once).
    #[arg(long = "rcache-stale-timeout", value_parser = go_duration, default_value = "1800ms")]
    pub rcache_stale_timeout: Duration,
    /// TTL of the records of a stale reply, in seconds (RFC 8767: 30).
    #[arg(long = "rcache-stale-ttl", default_value_t = 30)]
    pub rcache_stale_ttl: u32,
    /// Prefetch: a cached reply asked this many times since it was stored is refreshed in the
    /// background when -rcache-prefetch-percent of its lifetime is left (0: never). Needs -rcache.
    #[arg(long = "rcache-prefetch", default_value_t = 0)]
    pub rcache_prefetch: u32,
    /// Share of a cached reply's lifetime left, in percent (1-100), when its prefetch is due.
    #[arg(long = "rcache-prefetch-percent", default_value_t = 10, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub rcache_prefetch_percent: u8,
    /// DNSSEC signature cache capacity in RRSIGs (0 disables it).
    #[arg(long, default_value_t = 10000)]
    pub scache: i64,
    /// Labels a name needs before it is forwarded [default: 2; 0 also means 2].
    #[arg(
        long,
        env = "SKYDNS_NDOTS",
        default_value_t = 0,
        hide_default_value = true
    )]
    pub ndots: i64,
    /// etcd root of the records.
    #[arg(
        long = "path-prefix",
        env = "SKYDNS_PATH_PREFIX",
        default_value = "skydns"
    )]
    pub path_prefix: String,
    /// Sign DO replies with this BIND key pair: <basename>.key and <basename>.private [default: off].
    #[arg(long, default_value = "", hide_default_value = true)]
    pub dnssec: String,
    /// Name that local.dns.<domain> stands for: its records answer queries for local.dns.<domain>
    /// [default: none].
    #[arg(long, default_value = "", hide_default_value = true)]
    pub local: String,
    /// Forward names in stub zones (configured under stub.dns.<domain> in etcd) to their servers.
    #[arg(long, value_parser = go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub stubzones: bool,
    /// Answer a pod's search list at the server: a query ending in the first search domain
    /// of the asking pod's namespace (found from its IP in the pod records) that is NXDOMAIN
    /// is walked on through -autopath-search and then the bare name, and the first name
    /// found is answered with a CNAME to it. Needs kube2sky's pod records (--pods).
    #[arg(long, value_parser = go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub autopath: bool,
    /// The search list -autopath assumes pods resolve with, comma separated; {ns} is the
    /// pod's namespace and {domain} -domain; the first must begin with {ns}. (Kubernetes's).
    #[arg(long, default_value = "{ns}.svc.{domain},svc.{domain},{domain}")]
    pub autopath_search: String,
    /// The ndots -autopath assumes (Kubernetes's 5): a name with this many dots is asked as
    /// it is first, so it is not walked.
    #[arg(long, default_value_t = 5)]
    pub autopath_ndots: usize,
    /// Follow the etcd cluster's members (v3 MemberList, v2 /v2/members): the endpoints given
    /// in -machines are only where to start.
    #[arg(long, value_parser = go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub discover: bool,
    /// Serve the UDP and TCP sockets systemd passes (socket activation, LISTEN_FDS) instead of
    /// binding -addr.
    #[arg(long, value_parser = go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub systemd: bool,
    /// Requests that may wait on upstream servers at once; past it they get
    /// SERVFAIL at once (0: no limit).
    #[arg(long = "max-pending-forwards", default_value_t = 1_000)]
    pub max_pending_forwards: usize,
    /// TCP connections served at once; at the limit a new one takes the place of the connection
    /// idle longest, and is closed only when every connection is in the middle of a query.
    #[arg(long = "tcp-max-connections", default_value_t = 1_000)]
    pub tcp_max_connections: usize,
    /// How long a TCP connection may sit idle between queries (Go duration).
    #[arg(long = "tcp-idle-timeout", value_parser = go_duration, default_value = "10s")]
    pub tcp_idle_timeout: Duration,
    /// How long the rest of a TCP message may take once it started.
    #[arg(long = "tcp-read-timeout", value_parser = go_duration, default_value = "2s")]
    pub tcp_read_timeout: Duration,
    /// How long a TCP client may take to accept a reply before it is closed.
    #[arg(long = "tcp-write-timeout", value_parser = go_duration, default_value = "2s")]
    pub tcp_write_timeout: Duration,
    /// On SIGTERM, keep answering for this long with /ready saying 503, so that the Service
    /// stops sending queries before the listeners close (Go duration; 0: close at once).
    /// A second SIGTERM or SIGINT stops at once.
    #[arg(long, value_parser = go_duration, default_value = "0s")]
    pub lameduck: Duration,
    /// How long queries that arrive before the first load of the records wait for it; past
    /// it, names in the domain get SERVFAIL until the load (0: do not wait).
    #[arg(long = "startup-wait", value_parser = go_duration, default_value = "5s")]
    pub startup_wait: Duration,
    /// /ready says 503 once etcd has been out of reach for longer than this, while answers
    /// still come from the last snapshot (0: etcd's reachability does not count).
    #[arg(long = "ready-store-timeout", value_parser = go_duration, default_value = "60s")]
    pub ready_store_timeout: Duration,
    /// Log every query.
    #[arg(long, value_parser = go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub verbose: bool,
    /// Write one line per answered query of these classes, comma separated: all, success
    /// (answers), denial (NXDOMAIN, NODATA), error (SERVFAIL, REFUSED, FORMERR, NOTIMP...):
    /// client, proto, name, qtype, qclass, rcode, answers, truncated, size, duration_seconds,
    /// source (local, cached, stale, forwarded, stub, autopath); tracing target skydns::query,
    /// level INFO [default: off].
    #[arg(long = "log-queries", default_value = "", hide_default_value = true)]
    pub log_queries: String,
    /// The share of the -log-queries classes' replies written, from 0.000001 to 1 (0.01: one
    /// in a hundred, evenly spread).
    #[arg(long = "log-queries-sample", default_value_t = 1.0)]
    pub log_queries_sample: f64,
    /// The shape of log lines: text, or json (one object per line: timestamp, level, target,
    /// message and each field by name).
    #[arg(long = "log-format", default_value = "text")]
    pub log_format: logging::LogFormat,
    /// Serve Prometheus metrics, /health and /ready on this address (IP:port) [default:
    /// 0.0.0.0:<PROMETHEUS_PORT> when that is set, else off].
    #[arg(long = "metrics-addr")]
    pub metrics_addr: Option<String>,
    /// Port of the metrics listener on all interfaces, when -metrics-addr is not given (SkyDNS
    /// read only the environment variable) [default: off].
    #[arg(long = "prometheus-port", env = "PROMETHEUS_PORT")]
    pub prometheus_port: Option<String>,
    /// Path of the metrics endpoint (not /health or /ready, the probes).
    #[arg(
        long = "prometheus-path",
        env = "PROMETHEUS_PATH",
        default_value = "/metrics"
    )]
    pub prometheus_path: String,
    /// Read etcd through the v3 API instead of the v2 keys API (SkyDNS 2.5.2c, and the
    /// Kubernetes 1.2 pod, used v2; etcd >= 3.4 serves v2 only with --enable-v2=true).
    #[arg(long, value_parser = go_bool, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub etcd3: bool,
}

impl Flags {
    /// etcd connection options from the flags.
    pub fn etcd_options(&self) -> EtcdOptions {
        EtcdOptions {
            endpoints: super::split_list(&self.machines),
            tls_cert: self.tls_pem.clone(),
            tls_key: self.tls_key.clone(),
            ca_cert: self.ca_cert.clone(),
            user: self
                .username
                .clone()
                .map(|u| (u, self.password.clone().unwrap_or_default())),
        }
    }
}

/// How SkyDNS's Go `flag` package let users spell flags: `-name[=value]`
/// for long flags; `-h` and `-V` are clap's short help and version.
pub(super) const SPELLING: gocompat::args::Spelling = gocompat::args::Spelling {
    short_flags: &['h', 'V'],
    underscores_as_dashes: false,
};

/// Rewrites Go-style `-name[=value]` into `--name[=value]` for clap.
pub fn go_style_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    SPELLING.to_gnu(args)
}

/// Go's `strconv.ParseBool`, as a clap value parser.
pub fn go_bool(s: &str) -> Result<bool, String> {
    gocompat::parse_bool(s).ok_or_else(|| format!("invalid boolean {s:?} (use true or false)"))
}

/// Go's `time.ParseDuration` for non-negative values (`300ms`, `2s`,
/// `1h2m3.5s`), as a clap value parser.
pub fn go_duration(s: &str) -> Result<Duration, String> {
    gocompat::duration::parse(s)
}
