//! Stub zones' command-line flag, flattened into skydns's own.

use gocompat::flag::boolean;

/// `-stubzones`.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
#[command(next_help_heading = "Stub zones")]
pub struct Flags {
    /// Forward names in stub zones (configured under stub.dns.<domain> in etcd) to their servers.
    #[arg(long, value_parser = boolean, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub stubzones: bool,
}
