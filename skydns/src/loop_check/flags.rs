//! Loop detection's command-line flag, flattened into skydns's own.

use super::Mode;

/// `-loop`.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
#[command(next_help_heading = "Loop detection")]
pub struct Flags {
    /// Forwarding loop detection, as CoreDNS's `loop`: at start and after each change of the
    /// upstreams, a query for a random name is sent through each upstream; if it comes back
    /// to skydns, that upstream forwards to skydns (e.g. a node resolver at 127.0.0.53 that
    /// forwards back to cluster DNS). off (SkyDNS: no check), exit (log `forwarding loop
    /// detected` and exit 1, as CoreDNS) or refuse (log it and never forward to that upstream
    /// until the upstreams change).
    #[arg(long = "loop", default_value = "off")]
    pub mode: Mode,
}
