//! The pod mode's command-line flag, flattened into skydns's own.

use super::PodMode;

/// `-pods`.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
#[command(next_help_heading = "Pod names")]
pub struct Flags {
    /// How <ip-with-dashes>.<ns>.pod.<domain> is answered: verified (from kube2sky's pod
    /// records, --pods), insecure (the address in the name, whether a pod has it or not:
    /// CoreDNS's `pods insecure`, kube-dns's behaviour; see docs/security.md) or disabled
    /// (NXDOMAIN).
    #[arg(long, default_value = "verified")]
    pub pods: PodMode,
}
