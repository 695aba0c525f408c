//! The command line, as SkyDNS 2.5.2c accepted it (Go `flag` package):
//! [`go_style_args`] rewrites Go flag spellings for clap, and [`Flags`] holds
//! the zone's and the process's flags and flattens each feature's own.

use clap::Parser;
use gocompat::flag::boolean;
use std::ffi::OsString;

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
    /// Shuffle A and AAAA answers.
    #[arg(long = "round-robin", value_parser = boolean, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true")]
    pub round_robin: bool,
    /// SOA hostmaster (not derived from -domain, as in SkyDNS).
    #[arg(long, default_value = "hostmaster@skydns.local.")]
    pub hostmaster: String,
    /// etcd root of the records.
    #[arg(
        long = "path-prefix",
        env = "SKYDNS_PATH_PREFIX",
        default_value = "skydns"
    )]
    pub path_prefix: String,
    /// Name that local.dns.<domain> stands for: its records answer queries for local.dns.<domain>
    /// [default: none].
    #[arg(long, default_value = "", hide_default_value = true)]
    pub local: String,
    /// Serve the UDP and TCP sockets systemd passes (socket activation, LISTEN_FDS) instead of
    /// binding -addr.
    #[arg(long, value_parser = boolean, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub systemd: bool,
    /// Log every query.
    #[arg(long, value_parser = boolean, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub verbose: bool,
    /// The shape of log lines: text, or json (one object per line: timestamp, level, target,
    /// message and each field by name).
    #[arg(long = "log-format", default_value = "text")]
    pub log_format: logging::LogFormat,
    #[command(flatten)]
    pub forward: crate::forward::Flags,
    #[command(flatten)]
    pub cache: crate::response_cache::Flags,
    #[command(flatten)]
    pub stub: crate::stub::Flags,
    #[command(flatten)]
    pub pods: crate::pods::Flags,
    #[command(flatten)]
    pub autopath: crate::autopath::Flags,
    #[command(flatten)]
    pub dnssec: crate::dnssec::Flags,
    #[command(flatten)]
    pub query_log: crate::query_log::Flags,
    #[command(flatten)]
    pub loop_check: crate::loop_check::Flags,
    #[command(flatten)]
    pub tcp: crate::server::Flags,
    #[command(flatten)]
    pub lifecycle: crate::lifecycle::Flags,
    #[command(flatten)]
    pub metrics: crate::metrics::Flags,
    #[command(flatten)]
    pub store: crate::store::Flags,
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

pub use gocompat::flag::{boolean as go_bool, duration as go_duration};
