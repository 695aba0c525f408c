//! DNSSEC's command-line flags and etcd config keys.

use super::{Dnssec, Settings};
use crate::values::non_negative;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// `-dnssec` and its signature cache.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
#[command(next_help_heading = "DNSSEC")]
pub struct Flags {
    /// Sign DO replies with this BIND key pair: <basename>.key and <basename>.private [default: off].
    #[arg(long, default_value = "", hide_default_value = true)]
    pub dnssec: String,
    /// DNSSEC signature cache capacity in RRSIGs (0 disables it).
    #[arg(long, default_value_t = 10000)]
    pub scache: i64,
}

/// The keys of the etcd config key DNSSEC owns (both need a restart).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Keys {
    /// `dnssec`: basename of the key pair (`<it>.key`, `<it>.private`).
    pub dnssec: String,
    /// `scache`: signature cache capacity (0 disables it).
    pub scache: i64,
}

impl Keys {
    /// The keys as the flags set them, before the etcd key overrides any.
    pub fn from_flags(f: &Flags) -> Self {
        Keys {
            dnssec: f.dnssec.clone(),
            scache: f.scache,
        }
    }

    /// Signing of `domain` (fully qualified) with the key pair `dnssec`
    /// names, if any; `ttl` and `min_ttl` are the zone's. The error names
    /// the flag (or the etcd key, when the value came from there) and the file.
    pub fn build(
        &self,
        flags: &Flags,
        domain: &str,
        ttl: u32,
        min_ttl: u32,
    ) -> Result<Option<Arc<Dnssec>>, String> {
        if self.dnssec.is_empty() {
            return Ok(None);
        }
        let settings = Settings {
            ttl,
            min_ttl,
            scache: non_negative(self.scache),
        };
        let source = if self.dnssec == flags.dnssec {
            "-dnssec"
        } else {
            "dnssec (etcd config key)"
        };
        Dnssec::load(&self.dnssec, domain, settings)
            .map(|d| Some(Arc::new(d)))
            .map_err(|e| format!("{source} {}: {e}", self.dnssec))
    }
}
