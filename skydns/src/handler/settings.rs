//! What the handler runs with: [`Settings`], each feature's own settings
//! side by side, built by `crate::config` from the flags and the etcd
//! config key, one set per configuration the handler runs.

use crate::autopath::Autopath;
use crate::dnssec::Dnssec;
use crate::query_log::QueryLog;
use std::sync::Arc;

/// The settings of the query path, feature by feature.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Shuffle A/AAAA answers (`-round-robin`).
    pub round_robin: bool,
    /// `-local`: the name `local.dns.<domain>` is looked up as.
    pub local: Option<String>,
    /// Names outside the domain.
    pub forward: crate::forward::Settings,
    /// The cache of forwarded replies.
    pub cache: crate::response_cache::Settings,
    /// Forward names in stub zones to their servers (`-stubzones`).
    pub stubzones: bool,
    /// How pod names are answered (`-pods`).
    pub pods: crate::pods::PodMode,
    /// Online DNSSEC signing of DO replies (`-dnssec`), if on.
    pub dnssec: Option<Arc<Dnssec>>,
    /// The server-side search path (`-autopath`), if on.
    pub autopath: Option<Arc<Autopath>>,
    /// The query log (`-log-queries`), if on.
    pub query_log: Option<Arc<QueryLog>>,
}

impl Default for Settings {
    /// What the flags' defaults build, with no nameservers.
    fn default() -> Self {
        Settings {
            round_robin: true,
            local: None,
            forward: Default::default(),
            cache: Default::default(),
            stubzones: false,
            pods: Default::default(),
            dnssec: None,
            autopath: None,
            query_log: None,
        }
    }
}
