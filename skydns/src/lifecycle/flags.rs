//! The lifecycle's command-line flags and etcd config key.

use crate::values::nanos;
use gocompat::flag::duration;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Start-up wait, readiness and lameduck.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
#[command(next_help_heading = "Lifecycle")]
pub struct Flags {
    /// On SIGTERM, keep answering for this long with /ready saying 503, so that the Service
    /// stops sending queries before the listeners close (Go duration; 0: close at once).
    /// A second SIGTERM or SIGINT stops at once.
    #[arg(long, value_parser = duration, default_value = "0s")]
    pub lameduck: Duration,
    /// How long queries that arrive before the first load of the records wait for it; past
    /// it, names in the domain get SERVFAIL until the load (0: do not wait).
    #[arg(long = "startup-wait", value_parser = duration, default_value = "5s")]
    pub startup_wait: Duration,
    /// /ready says 503 once etcd has been out of reach for longer than this, while answers
    /// still come from the last snapshot (0: etcd's reachability does not count).
    #[arg(long = "ready-store-timeout", value_parser = duration, default_value = "60s")]
    pub ready_store_timeout: Duration,
}

/// The key of the etcd config key the lifecycle owns (it needs a restart).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Keys {
    /// `lameduck` in nanoseconds, or a Go duration string (`"5s"`): how
    /// long to keep answering after SIGTERM (not a SkyDNS 2.5.2c key).
    #[serde(deserialize_with = "nanos_or_duration")]
    pub lameduck: i64,
}

/// What the lifecycle runs with.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// How long to keep answering after SIGTERM, not ready (`-lameduck`).
    pub lameduck: Duration,
    /// How long early queries wait for the first load (`-startup-wait`).
    pub startup_wait: Duration,
    /// How long etcd may be out of reach before `/ready` says 503
    /// (`-ready-store-timeout`; zero: it never does for that).
    pub ready_store_timeout: Duration,
}

impl Keys {
    /// The key as the flags set it, before the etcd key overrides it.
    pub fn from_flags(f: &Flags) -> Self {
        Keys {
            lameduck: nanos(f.lameduck),
        }
    }

    /// The settings; the error names the key.
    pub fn build(&self, flags: &Flags) -> Result<Settings, String> {
        let lameduck = u64::try_from(self.lameduck)
            .map_err(|_| format!("lameduck must not be negative: {}ns", self.lameduck))?;
        Ok(Settings {
            lameduck: Duration::from_nanos(lameduck),
            startup_wait: flags.startup_wait,
            ready_store_timeout: flags.ready_store_timeout,
        })
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
            .map(nanos)
            .map_err(serde::de::Error::custom),
    }
}
