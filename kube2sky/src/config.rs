//! The validated [`Config`] kube2sky runs on, from its command line
//! ([`Flags`], in [`flags`]): which etcd and API server, which records, how
//! they are written.

mod flags;

use crate::name_rules::{is_dns1123_label, is_dns1123_subdomain};
pub use flags::{parse_duration, Flags, SPELLING};
use std::path::PathBuf;
use std::time::Duration;

/// A flag value that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

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
    /// `--etcd-max-txn-ops-retry`; zero: never.
    pub max_txn_ops_retry: Duration,
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
            etcd_max_txn_ops_retry,
            full_sync_chunk,
            initial_sync_timeout,
            ..
        } = self.clone();
        let leader_election = self.leader_election()?;
        let config_map = config_map_flags(&self.config_map_namespace, &self.config_map)?;
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
            max_txn_ops_retry: etcd_max_txn_ops_retry,
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

/// `--config-map-namespace` and `--config-map`, checked as object names;
/// `None` when `--config-map` is empty (not followed).
fn config_map_flags(namespace: &str, name: &str) -> Result<Option<(String, String)>, ConfigError> {
    if name.is_empty() {
        return Ok(None);
    }
    if !is_dns1123_subdomain(name) {
        return Err(ConfigError(format!(
            "--config-map {name:?} is not a ConfigMap name (lower-case DNS-1123 subdomain)"
        )));
    }
    if !is_dns1123_label(namespace) {
        return Err(ConfigError(format!(
            "--config-map-namespace {namespace:?} is not a namespace name (DNS-1123 label)"
        )));
    }
    Ok(Some((namespace.to_string(), name.to_string())))
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

/// The default of `--etcd-max-txn-ops`: the limit the manifests give their
/// etcd (`-max-txn-ops=1024`), under which a full sync costs etcd about half
/// the CPU of transactions of 128. An etcd at its own default
/// ([`ETCD_MAX_TXN_OPS`]) refuses the first transactions and kube2sky halves
/// three times, to 128, once (docs/kube2sky.md gives the cost).
pub const MAX_TXN_OPS: usize = 1024;

/// etcd's default `--max-txn-ops`.
pub const ETCD_MAX_TXN_OPS: usize = 128;

#[cfg(test)]
mod tests;
