//! Forwarding's command-line flags, flattened into skydns's own.

use super::{NsPolicy, NsTransport};
use gocompat::flag::{boolean, duration};
use std::time::Duration;

/// The flags of names outside the domain: upstreams, policy, transport,
/// health and the bound on waiting requests.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
#[command(next_help_heading = "Forwarding")]
pub struct Flags {
    /// Upstream nameservers, comma-separated IP:port [default: every nameserver of /etc/resolv.conf].
    #[arg(
        long,
        env = "SKYDNS_NAMESERVERS",
        default_value = "",
        hide_default_value = true
    )]
    pub nameservers: String,
    /// Never forward queries for names outside the domain.
    #[arg(long = "no-rec", value_parser = boolean, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub no_rec: bool,
    /// Read/write timeout towards upstream nameservers (Go duration, e.g. 2s).
    #[arg(long, value_parser = duration, default_value = "2s")]
    pub rtimeout: Duration,
    /// Choose the first upstream nameserver by request ID.
    #[arg(long = "ns-rotate", value_parser = boolean, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true")]
    pub ns_rotate: bool,
    /// Which upstream nameserver a forwarded query tries first: sequential (the first listed),
    /// round_robin (each query the next) or random; the others follow in turn [default: the
    /// request ID chooses, SkyDNS's -ns-rotate=true; with -ns-rotate=false, sequential].
    #[arg(long = "ns-policy")]
    pub ns_policy: Option<NsPolicy>,
    /// Transport of forwarded queries: client (the client's, as SkyDNS), tcp (always TCP, as
    /// CoreDNS force_tcp) or udp (UDP even for TCP clients, as CoreDNS prefer_udp). A truncated
    /// UDP reply is asked again over TCP before it is relayed when the client can take more.
    #[arg(long = "ns-transport", default_value = "client")]
    pub ns_transport: NsTransport,
    /// Consecutive failures (timeout, refused, bad reply, SERVFAIL) after which an upstream
    /// nameserver is marked down: tried last while another is up, probed with ". NS" until it
    /// answers (0: never; every query tries the servers in the policy's order, as SkyDNS).
    #[arg(long = "ns-fail-threshold", default_value_t = 2)]
    pub ns_fail_threshold: u32,
    /// How often an upstream marked down is probed (Go duration).
    #[arg(long = "ns-probe-interval", value_parser = duration, default_value = "500ms")]
    pub ns_probe_interval: Duration,
    /// The name a probe of a down upstream asks the NS records of, as CoreDNS's
    /// `health_check ... domain` (a resolver that refuses the root can be probed with a
    /// name it serves).
    #[arg(long = "ns-probe-name", default_value = ".")]
    pub ns_probe_name: String,
    /// Labels a name needs before it is forwarded [default: 2; 0 also means 2].
    #[arg(
        long,
        env = "SKYDNS_NDOTS",
        default_value_t = 0,
        hide_default_value = true
    )]
    pub ndots: i64,
    /// Requests that may wait on upstream servers at once; past it they get
    /// REFUSED at once, as CoreDNS's `forward { max_concurrent }` (0: no limit).
    #[arg(long = "max-pending-forwards", default_value_t = 1_000)]
    pub max_pending_forwards: usize,
}
