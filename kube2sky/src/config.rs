//! Command-line flags of kube2sky 1.2 (`kube2sky.go`; docs/kube2sky.md
//! lists them) and the validated
//! [`Config`] the rest of the crate runs on.
//!
//! Go's pflag accepted `--kube_master_url` for `--kube-master-url` and a single
//! dash for long flags; [`SPELLING`] rewrites such spellings before clap
//! sees them. The glog flags (`--v`, `--logtostderr`, `--log-dir`, ...) are
//! accepted and `--v` is mapped onto a tracing level. Boolean switches take
//! Go's `--flag=false` form. Durations use Go syntax (`10s`, `1m30s`, `500ms`).

use clap::Parser;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// A flag value that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The raw flags, as parsed by clap.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "kube2sky",
    args_override_self = true,
    version,
    about = "Writes SkyDNS records for Kubernetes Services, Endpoints and Pods into etcd",
    long_about = "Watches Services, Endpoints (or EndpointSlices) and Pods and keeps the SkyDNS records of kube2sky 1.2 in etcd, through the v2 keys API (as 1.2) or, with --etcd-api=v3, the v3 API.\n\
Flags may be given as in 1.2 (--kube_master_url=..., -domain=...) or GNU style (--domain cluster.local).",
    after_help = "Environment: each variable in [env: ...] stands in for its flag when the flag is not given; \
RUST_LOG sets the log filter (it overrides --v); without --kube-master-url or --kubecfg-file the in-cluster service account is used \
(KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT and the mounted token). Exit status: 0 after SIGTERM or SIGINT, \
1 on a fatal error (etcd unreachable at start, a mutation failing for --etcd-mutation-timeout, a lost Lease), \
2 on a bad flag.\n\
Documentation: docs/kube2sky.md."
)]
pub struct Flags {
    /// Cluster domain; a trailing `.` is added if missing.
    #[arg(long, default_value = "cluster.local")]
    pub domain: String,
    /// etcd endpoint URL; repeat the flag or separate with commas for several.
    #[arg(
        long = "etcd-server",
        default_value = "http://127.0.0.1:4001",
        value_delimiter = ','
    )]
    pub etcd_server: Vec<String>,
    /// How long one etcd mutation is retried (every 50ms) before exiting.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub etcd_mutation_timeout: Duration,
    /// etcd API to write through: v2 (the keys API, as kube2sky 1.2; `etcdctl ls /skydns`
    /// shows the records) or v3 (transactions; `etcdctl get --prefix /skydns`).
    #[arg(long, default_value = "v2", value_parser = parse_etcd_api)]
    pub etcd_api: EtcdApi,
    /// etcd user name (basic auth on v2, etcd authentication on v3).
    #[arg(long, env = "ETCD_USERNAME")]
    pub etcd_username: Option<String>,
    /// etcd password (with --etcd-username).
    #[arg(long, env = "ETCD_PASSWORD", hide_env_values = true)]
    pub etcd_password: Option<String>,
    /// Client certificate (PEM) for etcd TLS.
    #[arg(long)]
    pub etcd_certfile: Option<PathBuf>,
    /// Client key (PEM) for etcd TLS.
    #[arg(long)]
    pub etcd_keyfile: Option<PathBuf>,
    /// CA certificate (PEM) that signed etcd's server certificate.
    #[arg(long)]
    pub etcd_cafile: Option<PathBuf>,
    /// Kubernetes API server URL; `$VAR` and `${VAR}` are expanded. Alone, it gives a plain
    /// unauthenticated client [default: none].
    #[arg(long, default_value = "", hide_default_value = true)]
    pub kube_master_url: String,
    /// kubeconfig file; `--kube-master-url` overrides its server [default: none; with neither
    /// flag, the in-cluster service account].
    #[arg(long, default_value = "", hide_default_value = true)]
    pub kubecfg_file: String,
    /// Port of `/readiness`, `/healthz` and `/metrics`.
    #[arg(long, default_value_t = 8081)]
    pub healthz_port: u16,
    /// Write pod records `1-2-3-4.<ns>.pod.<domain>`.
    #[arg(long, default_value = "true", action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub pods: bool,
    /// Write PTR records for cluster IPs under `/skydns/arpa/in-addr`.
    #[arg(long, default_value = "true", action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub reverse: bool,
    /// Write records for ExternalName services.
    #[arg(long, default_value = "true", action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub external_name: bool,
    /// Replace a service's records in one transaction (false: 1.2's remove-then-add).
    #[arg(long, default_value = "true", action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub atomic_updates: bool,
    /// After every (re)list, delete owned keys that match no API object.
    #[arg(long, default_value = "true", action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub remove_stale: bool,
    /// Remove a headless service's records when its Endpoints are deleted.
    #[arg(long, default_value = "true", action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub endpoints_deletions: bool,
    /// The Kubernetes DNS specification 1.1.0's records that 1.2 did not write:
    /// one record per IP for endpoints sharing a hostname, PTRs for ready
    /// headless endpoints with a hostname, every name of a shared IP in its PTRs,
    /// and `dns-version.<domain>` TXT "1.1.0". `false`: 1.2's key set (the
    /// legacy manifest). Dual-stack and IPv6 records need no switch.
    #[arg(long, default_value = "true", action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub spec_records: bool,
    /// TTL in seconds of every record written (1.2: always 30), from 1 to
    /// 2147483647 (RFC 2181). Record keys do not depend on it: a new TTL
    /// rewrites the values in place. SkyDNS reads a TTL of 0 as "use my own
    /// default" (its -ttl, 3600 s), so 0 is refused.
    #[arg(long, default_value_t = 30, value_parser = parse_ttl)]
    pub ttl: u32,
    /// Where headless services' endpoints come from: `endpoints` (v1
    /// Endpoints, as 1.2), `endpointslices` (discovery.k8s.io/v1: dual-stack,
    /// no 1000-address cap), or `auto`: EndpointSlices when the API server
    /// serves them (Kubernetes 1.21+), else Endpoints.
    #[arg(long, default_value = "auto", value_parser = parse_endpoints_source)]
    pub endpoints_source: EndpointsSource,
    /// How often to check etcd for data loss (0s: never).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub etcd_loss_check_interval: Duration,
    /// Operations per etcd v3 transaction at most (etcd's --max-txn-ops). If etcd
    /// allows fewer, kube2sky halves it until etcd accepts, with a warning.
    #[arg(long, default_value_t = MAX_TXN_OPS, value_parser = parse_max_txn_ops)]
    pub etcd_max_txn_ops: usize,
    /// Objects per slice of a full sync on etcd v3 (whole namespaces of pods
    /// or services, then PTRs by IP): the desired and actual records of one
    /// slice are held at a time, not a whole subtree's, and a change made
    /// during the sync waits for one slice at most.
    #[arg(long, default_value_t = 1_000, value_parser = parse_full_sync_chunk)]
    pub full_sync_chunk: usize,
    /// How long /readiness waits for the first complete write of services and
    /// endpoints before it opens anyway (0s: open when the watches start, as 1.2).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub initial_sync_timeout: Duration,
    /// Run as one of several replicas sharing one etcd: only the holder of the
    /// coordination.k8s.io/v1 Lease --leader-elect-resource-namespace/-name
    /// watches and writes; the others serve /healthz, stand by, and take over
    /// when the holder stops renewing. Off: one kube2sky per etcd (the 1.2 pod).
    #[arg(long, default_value = "false", action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub leader_elect: bool,
    /// How long a standby waits, after it last saw the Lease change, before it
    /// takes the Lease over.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader retries a failing renewal before it exits (shorter
    /// than the lease duration, so it stops before a standby takes over).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// Pause between two attempts to acquire or renew the Lease.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,
    /// Namespace of the Lease.
    #[arg(long, default_value = "kube-system")]
    pub leader_elect_resource_namespace: String,
    /// Name of the Lease.
    #[arg(long, default_value = "kube2sky")]
    pub leader_elect_resource_name: String,
    /// This replica's holderIdentity in the Lease [default: the host name, which is the pod's
    /// name; a restarted container keeps it and resumes].
    #[arg(long, default_value = "", hide_default_value = true)]
    pub leader_elect_identity: String,
    /// kube-dns's ConfigMap to follow, as kube-dns's flag: its `stubDomains` become
    /// skydns stub zones (skydns needs -stubzones) and its `upstreamNameservers` the
    /// `nameservers` of /skydns/config, live; a malformed value changes nothing
    /// (docs/configuration.md) [default: none, not followed].
    #[arg(long, default_value = "", hide_default_value = true)]
    pub config_map: String,
    /// Namespace of --config-map.
    #[arg(long, default_value = "kube-system")]
    pub config_map_namespace: String,
    /// glog verbosity: 0 info, 1-3 debug, 4+ trace (`RUST_LOG` overrides).
    #[arg(long = "v", default_value_t = 0)]
    pub verbosity: u8,
    /// The shape of log lines: text, or json (one object per line: timestamp, level, target,
    /// message and each field by name).
    #[arg(long = "log-format", default_value = "text")]
    pub log_format: logging::LogFormat,
    /// pflag's warnings for the flags spelled with `_` (`WARNING: kube_master_url is
    /// deprecated, use kube-master-url instead`), logged once logging is set up.
    #[arg(skip)]
    pub deprecated_spellings: Vec<String>,
    /// Accepted for compatibility; logs always go to stderr.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub logtostderr: Option<String>,
    /// Accepted for compatibility; ignored.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub alsologtostderr: Option<String>,
    /// Accepted for compatibility; ignored.
    #[arg(long)]
    pub log_dir: Option<String>,
    /// Accepted for compatibility; ignored.
    #[arg(long)]
    pub stderrthreshold: Option<String>,
    /// Accepted for compatibility; ignored.
    #[arg(long)]
    pub vmodule: Option<String>,
    /// Accepted for compatibility; ignored.
    #[arg(long)]
    pub log_backtrace_at: Option<String>,
}

/// Everything kube2sky needs to run, validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// The cluster domain with its trailing dot, e.g. `cluster.local.`.
    pub domain: String,
    /// etcd connection settings.
    pub etcd: etcd_access::EtcdOptions,
    /// The etcd API written through.
    pub etcd_api: EtcdApi,
    /// Mutation retry deadline.
    pub mutation_timeout: Duration,
    /// How to reach the API server.
    pub kube: KubeSource,
    /// Port of the HTTP server.
    pub healthz_port: u16,
    /// Which records to write and how.
    pub features: Features,
    /// Data-loss check period; `None` disables it.
    pub loss_check: Option<Duration>,
    /// `--etcd-max-txn-ops`.
    pub max_txn_ops: usize,
    /// `--full-sync-chunk`.
    pub full_sync_chunk: usize,
    /// `--initial-sync-timeout`; zero: ready at once (1.2).
    pub initial_sync_timeout: Duration,
    /// `--leader-elect` and its settings; `None`: write without a Lease.
    pub leader_election: Option<crate::leader::Election>,
    /// `--endpoints-source`.
    pub endpoints_source: EndpointsSource,
    /// `--config-map-namespace`/`--config-map`; `None`: not followed.
    pub config_map: Option<(String, String)>,
}

/// `--endpoints-source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointsSource {
    /// v1 Endpoints.
    Endpoints,
    /// discovery.k8s.io/v1 EndpointSlices.
    EndpointSlices,
    /// EndpointSlices if the API server serves them, else Endpoints.
    Auto,
}

fn parse_endpoints_source(s: &str) -> Result<EndpointsSource, String> {
    match s {
        "endpoints" => Ok(EndpointsSource::Endpoints),
        "endpointslices" => Ok(EndpointsSource::EndpointSlices),
        "auto" => Ok(EndpointsSource::Auto),
        _ => Err(format!(
            "invalid endpoints source {s:?} (use endpoints, endpointslices or auto)"
        )),
    }
}

/// Where the Kubernetes client configuration comes from (1.2's `newKubeClient`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeSource {
    /// `--kube-master-url` without kubeconfig: plain, unauthenticated client.
    Url(String),
    /// A kubeconfig file, its server optionally overridden by the URL.
    Kubeconfig {
        /// Path of the file.
        path: PathBuf,
        /// Server override.
        url: Option<String>,
    },
    /// The in-cluster service account.
    InCluster,
}

/// The beyond-1.2 switches that change which records exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// Pod records.
    pub pods: bool,
    /// PTR records for cluster IPs.
    pub reverse: bool,
    /// ExternalName records.
    pub external_name: bool,
    /// One transaction per service update instead of remove-then-add.
    pub atomic_updates: bool,
    /// Stale-key removal after (re)lists.
    pub remove_stale: bool,
    /// Endpoints deletions remove headless records.
    pub endpoints_deletions: bool,
    /// The specification's records that change 1.2's key set.
    pub spec_records: bool,
    /// `--ttl`: the TTL written into every record.
    pub ttl: u32,
}

impl Default for Features {
    fn default() -> Self {
        Features {
            pods: true,
            reverse: true,
            external_name: true,
            atomic_updates: true,
            remove_stale: true,
            endpoints_deletions: true,
            spec_records: true,
            ttl: 30,
        }
    }
}

impl Flags {
    /// Parses `args` (including the program name) in Go's spellings ([`SPELLING`]).
    pub fn parse_from_go_style<I: IntoIterator<Item = String>>(
        args: I,
    ) -> Result<Self, clap::Error> {
        let (args, deprecated) = SPELLING.to_gnu_noting(args);
        match Flags::try_parse_from(args) {
            Ok(mut flags) => {
                flags.deprecated_spellings = deprecated;
                Ok(flags)
            }
            Err(e) => {
                // No log to give them to: as pflag wrote them.
                for warning in deprecated {
                    let _ = writeln!(std::io::stderr(), "{warning}");
                }
                Err(e)
            }
        }
    }

    /// The tracing filter directive for `--v`: more detail from kube2sky
    /// and skydns only; other crates (h2, hyper, tonic) stay at info.
    pub fn log_level(&self) -> &'static str {
        match self.verbosity {
            0 => "info",
            1..=3 => "kube2sky=debug,skydns=debug,info",
            _ => "kube2sky=trace,skydns=trace,info",
        }
    }

    /// Validates the flags into a [`Config`].
    pub fn into_config(self) -> Result<Config, ConfigError> {
        let Flags {
            domain,
            etcd_server,
            etcd_mutation_timeout,
            etcd_api,
            etcd_username,
            etcd_password,
            etcd_certfile,
            etcd_keyfile,
            etcd_cafile,
            kube_master_url,
            kubecfg_file,
            healthz_port,
            pods,
            reverse,
            external_name,
            atomic_updates,
            remove_stale,
            endpoints_deletions,
            spec_records,
            ttl,
            endpoints_source,
            etcd_loss_check_interval,
            etcd_max_txn_ops,
            full_sync_chunk,
            initial_sync_timeout,
            ..
        } = self.clone();
        let leader_election = self.leader_election()?;
        let config_map = crate::config_map::checked(&self.config_map_namespace, &self.config_map)?;
        let domain = domain.trim().to_ascii_lowercase();
        if domain.trim_matches('.').is_empty() {
            return Err(ConfigError("--domain must not be empty".into()));
        }
        let endpoints: Vec<String> = etcd_server
            .into_iter()
            .filter(|e| !e.trim().is_empty())
            .collect();
        if endpoints.is_empty() {
            return Err(ConfigError(
                "--etcd-server must name at least one endpoint".into(),
            ));
        }
        if etcd_password.is_some() && etcd_username.is_none() {
            return Err(ConfigError("--etcd-password needs --etcd-username".into()));
        }
        if etcd_certfile.is_some() != etcd_keyfile.is_some() {
            return Err(ConfigError(
                "--etcd-certfile and --etcd-keyfile must be given together".into(),
            ));
        }
        let url = match kube_master_url.as_str() {
            "" => None,
            raw => Some(validate_master_url(&expand_env(raw, |k| {
                std::env::var(k).ok()
            }))?),
        };
        let kube = match (url, kubecfg_file.as_str()) {
            (Some(url), "") => KubeSource::Url(url),
            (None, "") => KubeSource::InCluster,
            (url, path) => KubeSource::Kubeconfig {
                path: PathBuf::from(path),
                url,
            },
        };
        Ok(Config {
            domain: skydns_msg::path::fqdn(&domain),
            etcd: etcd_access::EtcdOptions {
                endpoints,
                tls_cert: etcd_certfile,
                tls_key: etcd_keyfile,
                ca_cert: etcd_cafile,
                user: etcd_username.map(|u| (u, etcd_password.unwrap_or_default())),
            },
            etcd_api,
            mutation_timeout: etcd_mutation_timeout,
            kube,
            healthz_port,
            features: Features {
                pods,
                reverse,
                external_name,
                atomic_updates,
                remove_stale,
                endpoints_deletions,
                spec_records,
                ttl,
            },
            loss_check: (!etcd_loss_check_interval.is_zero()).then_some(etcd_loss_check_interval),
            max_txn_ops: etcd_max_txn_ops,
            full_sync_chunk,
            initial_sync_timeout,
            leader_election,
            endpoints_source,
            config_map,
        })
    }

    /// The `--leader-elect-*` flags, checked: retry period < renew deadline
    /// < lease duration, as client-go requires.
    fn leader_election(&self) -> Result<Option<crate::leader::Election>, ConfigError> {
        if !self.leader_elect {
            return Ok(None);
        }
        let (lease, renew, retry) = (
            self.leader_elect_lease_duration,
            self.leader_elect_renew_deadline,
            self.leader_elect_retry_period,
        );
        if retry.is_zero() || retry >= renew || renew >= lease {
            return Err(ConfigError(format!(
                "--leader-elect-retry-period ({retry:?}) must be above zero and below \
                 --leader-elect-renew-deadline ({renew:?}), which must be below \
                 --leader-elect-lease-duration ({lease:?})"
            )));
        }
        use crate::name_rules::{is_dns1123_label, is_dns1123_subdomain};
        for (flag, value, ok) in [
            (
                "--leader-elect-resource-namespace",
                &self.leader_elect_resource_namespace,
                is_dns1123_label(&self.leader_elect_resource_namespace),
            ),
            (
                "--leader-elect-resource-name",
                &self.leader_elect_resource_name,
                is_dns1123_subdomain(&self.leader_elect_resource_name),
            ),
        ] {
            if !ok {
                return Err(ConfigError(format!(
                    "{flag} {value:?} is not a valid Kubernetes name (lowercase letters, digits, '-', '.')"
                )));
            }
        }
        let identity = match self.leader_elect_identity.trim() {
            "" => std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_default(),
            given => given.to_string(),
        };
        if identity.is_empty() {
            return Err(ConfigError(
                "--leader-elect-identity is empty and the host name cannot be read".into(),
            ));
        }
        Ok(Some(crate::leader::Election {
            namespace: self.leader_elect_resource_namespace.clone(),
            name: self.leader_elect_resource_name.clone(),
            identity,
            lease_duration: lease,
            renew_deadline: renew,
            retry_period: retry,
        }))
    }
}

/// How kube2sky's pflag let users spell flags: `-name` for `--name` and
/// `_` for `-` (with a warning, like `WarnWordSepNormalizeFunc`); `-h` is help, `-V` the version.
pub const SPELLING: gocompat::args::Spelling = gocompat::args::Spelling {
    short_flags: &['h', 'V'],
    underscores_as_dashes: true,
};

/// Go's `os.ExpandEnv`: `$VAR` and `${VAR}`, unknown variables become empty.
pub fn expand_env(s: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let rest = &s[i + 1..];
        if let Some(inner) = rest.strip_prefix('{') {
            if let Some(end) = inner.find('}') {
                out.push_str(&lookup(&inner[..end]).unwrap_or_default());
                for _ in 0..end + 2 {
                    chars.next();
                }
                continue;
            }
        }
        let len = rest
            .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
            .unwrap_or(rest.len());
        if len == 0 {
            out.push('$');
            continue;
        }
        out.push_str(&lookup(&rest[..len]).unwrap_or_default());
        for _ in 0..len {
            chars.next();
        }
    }
    out
}

/// The URL must have a scheme and a host, and the host must not be `:`.
fn validate_master_url(url: &str) -> Result<String, ConfigError> {
    let invalid = || {
        ConfigError(format!(
            "invalid --kube-master-url specified {url:?}: it needs a scheme and a host"
        ))
    };
    let uri: axum::http::Uri = url.parse().map_err(|_| invalid())?;
    match (uri.scheme(), uri.host()) {
        (Some(_), Some(host)) if !host.is_empty() && host != ":" => Ok(url.to_string()),
        _ => Err(invalid()),
    }
}

/// Which etcd API to write through (`--etcd-api`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EtcdApi {
    /// The v2 keys API, as kube2sky 1.2 (the default).
    #[default]
    V2,
    /// The v3 API: one transaction per batch.
    V3,
}

/// etcd's default `--max-txn-ops`: the default of `--etcd-max-txn-ops`.
pub const MAX_TXN_OPS: usize = 128;

/// `--etcd-api`: `v2` or `v3`.
fn parse_etcd_api(s: &str) -> Result<EtcdApi, String> {
    match s {
        "v2" | "2" => Ok(EtcdApi::V2),
        "v3" | "3" => Ok(EtcdApi::V3),
        _ => Err(format!("invalid etcd API {s:?} (use v2 or v3)")),
    }
}

/// `--etcd-max-txn-ops`: a whole number of at least 1.
fn parse_max_txn_ops(s: &str) -> Result<usize, String> {
    match gocompat::int::parse(s) {
        Ok(n) if n >= 1 => usize::try_from(n).map_err(|e| e.to_string()),
        Ok(n) => Err(format!("{n} is not a transaction size (at least 1)")),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_full_sync_chunk(s: &str) -> Result<usize, String> {
    match gocompat::int::parse(s) {
        Ok(n) if n >= 1 => usize::try_from(n).map_err(|e| e.to_string()),
        Ok(n) => Err(format!("{n} is not a number of objects (at least 1)")),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_ttl(s: &str) -> Result<u32, String> {
    match gocompat::int::parse(s) {
        Ok(n) if (1..=i64::from(i32::MAX)).contains(&n) => {
            u32::try_from(n).map_err(|e| e.to_string())
        }
        Ok(n) => Err(format!(
            "{n} is not a TTL from 1 to 2147483647 seconds (SkyDNS reads 0 as its own default TTL)"
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Go `time.ParseDuration` (non-negative), shared with skydns and exec-healthz.
pub use gocompat::duration::parse as parse_duration;

#[cfg(test)]
mod tests;
