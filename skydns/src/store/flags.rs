//! How to reach etcd: the command-line flags, flattened into skydns's own.

use super::etcd::EtcdOptions;
use crate::values::split_list;
use gocompat::flag::boolean;
use std::path::PathBuf;

/// etcd's endpoints, credentials and API.
#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
#[command(next_help_heading = "etcd")]
pub struct Flags {
    /// etcd endpoints, comma-separated URLs.
    #[arg(long, env = "ETCD_MACHINES", default_value = "http://127.0.0.1:2379")]
    pub machines: String,
    /// TLS client certificate (PEM) for etcd.
    #[arg(long = "tls-pem", env = "ETCD_TLSPEM")]
    pub tls_pem: Option<PathBuf>,
    /// TLS client key (PEM) for etcd.
    #[arg(long = "tls-key", env = "ETCD_TLSKEY")]
    pub tls_key: Option<PathBuf>,
    /// CA certificate (PEM) that signed etcd's certificate.
    #[arg(long = "ca-cert", env = "ETCD_CACERT")]
    pub ca_cert: Option<PathBuf>,
    /// etcd user name (with --password).
    #[arg(long, env = "ETCD_USERNAME")]
    pub username: Option<String>,
    /// etcd password.
    #[arg(long, env = "ETCD_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// Read etcd through the v3 API instead of the v2 keys API (SkyDNS 2.5.2c, and the
    /// Kubernetes 1.2 pod, used v2; etcd >= 3.4 serves v2 only with --enable-v2=true).
    #[arg(long, value_parser = boolean, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub etcd3: bool,
    /// Follow the etcd cluster's members (v3 MemberList, v2 /v2/members): the endpoints given
    /// in -machines are only where to start.
    #[arg(long, value_parser = boolean, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub discover: bool,
}

impl Flags {
    /// etcd connection options from the flags.
    pub fn etcd_options(&self) -> EtcdOptions {
        EtcdOptions {
            endpoints: split_list(&self.machines),
            tls_cert: self.tls_pem.clone(),
            tls_key: self.tls_key.clone(),
            ca_cert: self.ca_cert.clone(),
            user: self
                .username
                .clone()
                .map(|u| (u, self.password.clone().unwrap_or_default())),
        }
    }
}
