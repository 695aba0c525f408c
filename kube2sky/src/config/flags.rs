//! kube2sky's command line: every flag of kube2sky 1.2 (`kube2sky.go`;
//! docs/kube2sky.md lists them) and this version's, as clap parses them into
//! [`Flags`], with Go's spellings ([`SPELLING`]), the glog flags, Go booleans
//! and Go durations. [`super::Config`] is what the flags are validated into.

use super::{EndpointsSource, EtcdApi, MAX_TXN_OPS};
use clap::Parser;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

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
    /// Operations per etcd v3 transaction at most (etcd's --max-txn-ops; the
    /// manifests run etcd with 1024). If etcd allows fewer (its default is 128),
    /// kube2sky halves it until etcd accepts, with a warning.
    #[arg(long, default_value_t = MAX_TXN_OPS, value_parser = parse_max_txn_ops)]
    pub etcd_max_txn_ops: usize,
    /// After etcd refused a transaction as too large, how long the smaller size
    /// is kept before --etcd-max-txn-ops is tried again (an etcd restarted with
    /// a larger --max-txn-ops is then used at that size; 0s: never).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub etcd_max_txn_ops_retry: Duration,
    /// Objects per chunk of a full sync on etcd v3 (whole namespaces of pods
    /// or services, then PTRs by IP): the desired and actual records of one
    /// chunk are held at a time, not a whole subtree's, and a change made
    /// during the sync waits for the chunks in flight (two at most).
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
    /// deprecated, use kube-master-url instead`), written once the log format is known
    /// (`logging::say`, whatever the log filter).
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
}

/// How kube2sky's pflag let users spell flags: `-name` for `--name` and
/// `_` for `-` (with a warning, like `WarnWordSepNormalizeFunc`); `-h` is help, `-V` the version.
pub const SPELLING: gocompat::args::Spelling = gocompat::args::Spelling {
    short_flags: &['h', 'V'],
    underscores_as_dashes: true,
};

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
