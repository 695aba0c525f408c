//! One etcd v3 client bound to one member at a time, moving on to the next
//! member after a failure: [`MemberClient`] connects to one endpoint that
//! answers and has a raft leader, and keeps it until [`MemberClient::forget`].
//! Requests carry etcd's "require leader" mark.

use crate::EtcdOptions;
use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How long connecting to one member and its status check may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The endpoints a [`MemberClient`] goes round, shared with whoever keeps
/// them up to date (`-discover`).
pub type Endpoints = Arc<RwLock<Vec<String>>>;

/// No member could be used: none given, none answered in time, none with
/// a leader, or the TLS files cannot be read. The words are skydns's
/// "store unavailable", which both binaries have always logged.
#[derive(Debug, thiserror::Error)]
#[error("store unavailable: {0}")]
pub struct Unavailable(pub String);

impl From<etcd_client::Error> for Unavailable {
    fn from(e: etcd_client::Error) -> Self {
        Unavailable(e.to_string())
    }
}

/// A v3 client on one member of the endpoints in [`EtcdOptions`].
pub struct MemberClient {
    options: EtcdOptions,
    endpoints: Endpoints,
    client: Option<Client>,
    /// The index of the endpoint to try first on the next connect.
    next: usize,
}

impl MemberClient {
    /// A client that connects with `options` when first used.
    pub fn new(options: EtcdOptions) -> Self {
        let endpoints = Arc::new(RwLock::new(options.endpoints.clone()));
        Self::sharing(options, endpoints)
    }

    /// A client going round `endpoints` (which may change), with the other
    /// connection settings of `options`.
    pub fn sharing(options: EtcdOptions, endpoints: Endpoints) -> Self {
        MemberClient {
            options,
            endpoints,
            client: None,
            next: random_start(),
        }
    }

    /// The endpoints this client goes round, to be kept up to date.
    pub fn endpoints(&self) -> Endpoints {
        self.endpoints.clone()
    }

    fn current(&self) -> Vec<String> {
        self.endpoints
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The longest [`MemberClient::get`] can take when no member answers:
    /// one connect timeout per endpoint.
    pub fn connect_budget(&self) -> Duration {
        CONNECT_TIMEOUT * u32::try_from(self.current().len().max(1)).unwrap_or(u32::MAX)
    }

    /// The connected client (a cheap handle), connecting first if needed:
    /// each endpoint in turn from the one after the last failure, until a
    /// member answers with a leader.
    pub async fn get(&mut self) -> Result<Client, Unavailable> {
        if let Some(client) = &self.client {
            return Ok(client.clone());
        }
        let endpoints = &self.current();
        if endpoints.is_empty() {
            return Err(Unavailable("no etcd endpoint given".into()));
        }
        let mut failures = Vec::new();
        for _ in 0..endpoints.len() {
            let at = self.next % endpoints.len();
            self.next = at + 1;
            let endpoint = &endpoints[at];
            match tokio::time::timeout(CONNECT_TIMEOUT, connect_member(&self.options, endpoint))
                .await
            {
                Ok(Ok(client)) => {
                    if failures.is_empty() {
                        tracing::info!(endpoint, "connected to etcd member");
                    } else {
                        let skipped = failures.join("; ");
                        tracing::info!(endpoint, %skipped, "connected to etcd member");
                    }
                    // Stay on this member until it fails.
                    self.next = at;
                    self.client = Some(client.clone());
                    return Ok(client);
                }
                Ok(Err(e)) => failures.push(format!("{endpoint}: {e}")),
                Err(_) => failures.push(format!("{endpoint}: no answer in {CONNECT_TIMEOUT:?}")),
            }
        }
        Err(Unavailable(failures.join("; ")))
    }

    /// Drops the client after an error; the next [`MemberClient::get`]
    /// tries the following member first.
    pub fn forget(&mut self) {
        if self.client.take().is_some() {
            self.next += 1;
        }
    }
}

/// A random index to start from: a hash with the process's random keys.
fn random_start() -> usize {
    use std::hash::{BuildHasher, Hasher};
    let hash = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    (hash % 1024) as usize
}

/// Connects to the member at `endpoint` and checks that it has a leader.
async fn connect_member(options: &EtcdOptions, endpoint: &str) -> Result<Client, Unavailable> {
    let mut connect = ConnectOptions::new()
        .with_connect_timeout(CONNECT_TIMEOUT)
        .with_keep_alive(Duration::from_secs(5), Duration::from_secs(3))
        .with_keep_alive_while_idle(true)
        .with_require_leader(true);
    if let Some((user, password)) = &options.user {
        connect = connect.with_user(user, password);
    }
    if let Some(tls) = tls(options)? {
        connect = connect.with_tls(tls);
    }
    let address = endpoint
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let mut client = Client::connect([address], Some(connect))
        .await
        .map_err(Unavailable::from)?;
    let status = client.status().await.map_err(Unavailable::from)?;
    if status.leader() == 0 {
        return Err(Unavailable("the member has no leader".into()));
    }
    Ok(client)
}

fn tls(options: &EtcdOptions) -> Result<Option<TlsOptions>, Unavailable> {
    let https = options.endpoints.iter().any(|e| e.starts_with("https://"));
    if !https && options.ca_cert.is_none() && options.tls_cert.is_none() {
        return Ok(None);
    }
    let read = |p: &PathBuf| {
        std::fs::read(p).map_err(|e| Unavailable(format!("cannot read {}: {e}", p.display())))
    };
    let mut tls = TlsOptions::new();
    if let Some(ca) = &options.ca_cert {
        tls = tls.ca_certificate(Certificate::from_pem(read(ca)?));
    }
    if let (Some(cert), Some(key)) = (&options.tls_cert, &options.tls_key) {
        tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
    }
    Ok(Some(tls))
}
