//! A small client for the etcd v2 keys API (etcd 2.2.1, the Kubernetes 1.2 DNS
//! pod's store), covering what skydns and kube2sky use: [`Client::get`],
//! [`Client::watch`], [`Client::set`], [`Client::delete`] and
//! [`Client::version`]. Connection settings come from [`EtcdOptions`]; a server
//! without the v2 API is [`Error::NoV2Api`].

mod error;
mod node;

pub use error::{
    Error, DIRECTORY_NOT_EMPTY, EVENT_INDEX_CLEARED, KEY_EXISTS, KEY_NOT_FOUND, NOT_A_DIRECTORY,
};
pub use node::{Leaf, Node, Response};

use crate::EtcdOptions;
use reqwest::{Method, RequestBuilder, StatusCode, Url};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Upper bound of one ordinary request (not of a watch).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The versions `GET /version` reports.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct Version {
    /// The server's version, e.g. `3.4.23` or `2.2.1`.
    #[serde(rename = "etcdserver")]
    pub server: String,
    /// The cluster's version.
    #[serde(rename = "etcdcluster", default)]
    pub cluster: String,
}

impl Version {
    /// The major version of the server (2 for etcd 2.x).
    pub fn major(&self) -> Option<u32> {
        self.server.split('.').next()?.parse().ok()
    }
}

/// A v2 keys API client; cheap to clone.
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    /// Shared by every clone, replaced whole by [`Client::set_endpoints`].
    endpoints: Arc<RwLock<Arc<Vec<Url>>>>,
    preferred: Arc<AtomicUsize>,
    user: Option<(String, String)>,
}

impl Client {
    /// A client for `options` (no request is made yet).
    pub fn new(options: &EtcdOptions) -> Result<Self, Error> {
        if options.endpoints.is_empty() {
            return Err(Error::Config("no etcd endpoint given".into()));
        }
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .connect_timeout(Duration::from_secs(3))
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(90));
        let read = |p: &PathBuf| {
            std::fs::read(p).map_err(|e| Error::Config(format!("cannot read {}: {e}", p.display())))
        };
        if let Some(ca) = &options.ca_cert {
            let cert = reqwest::Certificate::from_pem(&read(ca)?)
                .map_err(|e| Error::Config(format!("bad CA certificate {}: {e}", ca.display())))?;
            builder = builder
                .tls_built_in_root_certs(false)
                .add_root_certificate(cert);
        }
        match (&options.tls_cert, &options.tls_key) {
            (Some(cert), Some(key)) => {
                let mut pem = read(cert)?;
                pem.push(b'\n');
                pem.extend(read(key)?);
                let identity = reqwest::Identity::from_pem(&pem).map_err(|e| {
                    Error::Config(format!(
                        "bad client certificate/key {}/{}: {e}",
                        cert.display(),
                        key.display()
                    ))
                })?;
                builder = builder.identity(identity);
            }
            (None, None) => {}
            _ => {
                return Err(Error::Config(
                    "a TLS client certificate needs both the certificate and the key".into(),
                ))
            }
        }
        let http = builder
            .build()
            .map_err(|e| Error::Config(format!("cannot build the HTTP client: {e}")))?;
        let endpoints = parse_endpoints(&options.endpoints)?;
        Ok(Client {
            http,
            endpoints: Arc::new(RwLock::new(Arc::new(endpoints))),
            preferred: Arc::new(AtomicUsize::new(0)),
            user: options.user.clone(),
        })
    }

    /// The endpoints requests go to, in order.
    pub fn endpoints(&self) -> Vec<String> {
        self.current()
            .iter()
            .map(|u| u.as_str().trim_end_matches('/').to_string())
            .collect()
    }

    /// Replaces the endpoints of this client and all its clones (`-discover`
    /// follows the cluster's members); an empty or bad list is an error and
    /// changes nothing.
    pub fn set_endpoints(&self, endpoints: &[String]) -> Result<(), Error> {
        if endpoints.is_empty() {
            return Err(Error::Config("no etcd endpoint given".into()));
        }
        let parsed = Arc::new(parse_endpoints(endpoints)?);
        *self.endpoints.write().unwrap_or_else(|e| e.into_inner()) = parsed;
        Ok(())
    }

    /// `GET /v2/members`: the client URLs of every member of the cluster.
    pub async fn members(&self) -> Result<Vec<String>, Error> {
        #[derive(serde::Deserialize)]
        struct Members {
            members: Vec<Member>,
        }
        #[derive(serde::Deserialize)]
        struct Member {
            #[serde(rename = "clientURLs", default)]
            client_urls: Vec<String>,
        }
        let reply = self
            .send(Method::GET, "/v2/members", "", None, REQUEST_TIMEOUT)
            .await?;
        if !reply.status.is_success() {
            return Err(Error::Status {
                status: reply.status.as_u16(),
                body: shorten(&reply.body),
            });
        }
        let members: Members = serde_json::from_slice(&reply.body)
            .map_err(|e| Error::Decode(format!("/v2/members: {e}")))?;
        Ok(members
            .members
            .into_iter()
            .flat_map(|m| m.client_urls)
            .collect())
    }

    fn current(&self) -> Arc<Vec<Url>> {
        self.endpoints
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// `GET /version`.
    pub async fn version(&self) -> Result<Version, Error> {
        let reply = self
            .send(Method::GET, "/version", "", None, REQUEST_TIMEOUT)
            .await?;
        if !reply.status.is_success() {
            return Err(Error::Status {
                status: reply.status.as_u16(),
                body: shorten(&reply.body),
            });
        }
        serde_json::from_slice(&reply.body).map_err(|e| Error::Decode(format!("/version: {e}")))
    }

    /// Reads `key`; with `recursive`, a directory comes with its whole
    /// (visible) subtree.
    pub async fn get(&self, key: &str, recursive: bool) -> Result<Response, Error> {
        let query = if recursive { "recursive=true" } else { "" };
        self.keys(Method::GET, key, query, None, REQUEST_TIMEOUT)
            .await
    }

    /// Waits for the first change at or below `key` with an index of at
    /// least `wait_index`. `Ok(None)` when nothing happened within `timeout`
    /// (ask again with the same index: nothing is lost).
    pub async fn watch(
        &self,
        key: &str,
        wait_index: u64,
        timeout: Duration,
    ) -> Result<Option<Response>, Error> {
        let query = format!("wait=true&recursive=true&waitIndex={wait_index}");
        match self.keys(Method::GET, key, &query, None, timeout).await {
            Ok(resp) => Ok(Some(resp)),
            Err(Error::Timeout(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes `value` at `key` (no TTL); missing directories are created.
    pub async fn set(&self, key: &str, value: &str) -> Result<Response, Error> {
        self.keys(Method::PUT, key, "", Some(value), REQUEST_TIMEOUT)
            .await
    }

    /// Writes `value` at `key` only if `key` does not exist
    /// ([`KEY_EXISTS`] otherwise, carrying etcd's index).
    pub async fn create(&self, key: &str, value: &str) -> Result<Response, Error> {
        self.keys(
            Method::PUT,
            key,
            "prevExist=false",
            Some(value),
            REQUEST_TIMEOUT,
        )
        .await
    }

    /// Deletes `key`: a key, or with `recursive` a directory and everything
    /// below it (hidden nodes included).
    pub async fn delete(&self, key: &str, recursive: bool) -> Result<Response, Error> {
        let query = if recursive { "recursive=true" } else { "" };
        self.keys(Method::DELETE, key, query, None, REQUEST_TIMEOUT)
            .await
    }

    /// Deletes the directory `key` only if it is empty
    /// ([`DIRECTORY_NOT_EMPTY`] otherwise).
    pub async fn delete_empty_dir(&self, key: &str) -> Result<Response, Error> {
        self.keys(Method::DELETE, key, "dir=true", None, REQUEST_TIMEOUT)
            .await
    }

    /// A request on `/v2/keys<key>`; `value`, when given, is sent as the
    /// form field `value`.
    async fn keys(
        &self,
        method: Method,
        key: &str,
        query: &str,
        value: Option<&str>,
        timeout: Duration,
    ) -> Result<Response, Error> {
        let path = format!("/v2/keys{key}");
        let reply = self.send(method, &path, query, value, timeout).await?;
        decode(&reply)
    }

    /// Sends one request, trying each endpoint in turn from the last one
    /// that answered.
    async fn send(
        &self,
        method: Method,
        path: &str,
        query: &str,
        value: Option<&str>,
        timeout: Duration,
    ) -> Result<Reply, Error> {
        let endpoints = self.current();
        let n = endpoints.len();
        let first = self.preferred.load(Ordering::Relaxed) % n;
        let mut last_error = String::new();
        for i in 0..n {
            let at = (first + i) % n;
            let url = url(&endpoints[at], path, query);
            let request = self.request(method.clone(), url, value, timeout);
            let endpoint = endpoints[at].as_str().trim_end_matches('/');
            match exchange(endpoint, request).await {
                Ok(reply) => {
                    self.preferred.store(at, Ordering::Relaxed);
                    return Ok(reply);
                }
                Err(Error::Transport(e)) => last_error = format!("{endpoint}: {e}"),
                Err(e) => return Err(e),
            }
        }
        Err(Error::Transport(last_error))
    }

    fn request(
        &self,
        method: Method,
        url: Url,
        value: Option<&str>,
        timeout: Duration,
    ) -> RequestBuilder {
        let mut request = self.http.request(method, url).timeout(timeout);
        if let Some((user, password)) = &self.user {
            request = request.basic_auth(user, Some(password));
        }
        if let Some(value) = value {
            request = request.form(&[("value", value)]);
        }
        request
    }
}

/// Endpoint URLs, each with a scheme and host.
fn parse_endpoints(endpoints: &[String]) -> Result<Vec<Url>, Error> {
    endpoints
        .iter()
        .map(|e| {
            Url::parse(e)
                .ok()
                .filter(|url| !url.cannot_be_a_base())
                .ok_or_else(|| Error::Config(format!("bad etcd endpoint URL {e:?}")))
        })
        .collect()
}

/// `endpoint` with `path` (its segments percent-encoded one by one) and
/// `query` (already encoded; empty for none).
fn url(endpoint: &Url, path: &str, query: &str) -> Url {
    let mut url = endpoint.clone();
    if let Ok(mut segments) = url.path_segments_mut() {
        segments.pop_if_empty().extend(path.split('/').skip(1));
    }
    url.set_query((!query.is_empty()).then_some(query));
    url
}

/// One HTTP answer.
struct Reply {
    endpoint: String,
    status: StatusCode,
    /// `X-Etcd-Index`, 0 when absent.
    index: u64,
    body: Vec<u8>,
}

/// `error` and what caused it, down the chain: reqwest's own text alone
/// ("error sending request") hides e.g. a TLS handshake that etcd refused
/// for want of a client certificate.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

/// Sends a request to `endpoint` and reads the whole answer; a failure is
/// [`Error::Timeout`] or [`Error::Transport`] (try another endpoint).
async fn exchange(endpoint: &str, request: RequestBuilder) -> Result<Reply, Error> {
    let describe = |e: reqwest::Error| {
        if e.is_timeout() {
            Error::Timeout(e.to_string())
        } else {
            Error::Transport(with_causes(&e))
        }
    };
    let resp = request.send().await.map_err(describe)?;
    let status = resp.status();
    let index = resp
        .headers()
        .get("X-Etcd-Index")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let body = resp.bytes().await.map_err(describe)?.to_vec();
    Ok(Reply {
        endpoint: endpoint.to_string(),
        status,
        index,
        body,
    })
}

#[derive(serde::Deserialize)]
struct EtcdError {
    #[serde(rename = "errorCode")]
    code: u32,
    #[serde(default)]
    message: String,
    #[serde(default)]
    cause: String,
    #[serde(default)]
    index: u64,
}

/// Turns a `/v2/keys` answer into a [`Response`] or an [`Error`].
fn decode(reply: &Reply) -> Result<Response, Error> {
    let (status, body) = (reply.status, reply.body.as_slice());
    if status.is_success() {
        let mut resp: Response = serde_json::from_slice(body)
            .map_err(|e| Error::Decode(format!("{e}: {}", shorten(body))))?;
        resp.index = reply.index;
        return Ok(resp);
    }
    if let Ok(e) = serde_json::from_slice::<EtcdError>(body) {
        return Err(Error::Etcd {
            code: e.code,
            message: e.message,
            cause: e.cause,
            index: e.index,
        });
    }
    if status == StatusCode::NOT_FOUND {
        return Err(Error::NoV2Api {
            endpoint: reply.endpoint.clone(),
            status: status.as_u16(),
        });
    }
    Err(Error::Status {
        status: status.as_u16(),
        body: shorten(body),
    })
}

fn shorten(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with an optional cause, as reqwest's wrap hyper's.
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn a_transport_error_names_its_causes_once_each() {
        let alert = Layer("received fatal alert: CertificateRequired", None);
        let connect = Layer("client error (Connect)", Some(Box::new(alert)));
        let send = Layer("error sending request", Some(Box::new(connect)));
        assert_eq!(
            with_causes(&send),
            "error sending request: client error (Connect): received fatal alert: CertificateRequired"
        );
        let repeats = Layer("error: timed out", Some(Box::new(Layer("timed out", None))));
        assert_eq!(with_causes(&repeats), "error: timed out");
    }

    #[test]
    fn keys_are_percent_encoded_segment_by_segment() {
        let endpoint = Url::parse("http://127.0.0.1:2379/").expect("url");
        let keys = |key: &str, query: &str| url(&endpoint, &format!("/v2/keys{key}"), query);
        assert_eq!(
            keys("/skydns/a_b/c-1.x", "recursive=true").as_str(),
            "http://127.0.0.1:2379/v2/keys/skydns/a_b/c-1.x?recursive=true"
        );
        assert_eq!(
            keys("/a b/?", "").as_str(),
            "http://127.0.0.1:2379/v2/keys/a%20b/%3F"
        );
        assert_eq!(keys("/", "").as_str(), "http://127.0.0.1:2379/v2/keys/");
    }

    #[test]
    fn answers_decode_into_responses_and_errors() {
        let reply = |status: u16, body: &[u8]| Reply {
            endpoint: "http://e".into(),
            status: StatusCode::from_u16(status).expect("status"),
            index: 42,
            body: body.to_vec(),
        };
        let ok = br#"{"action":"set","node":{"key":"/a","value":"1"}}"#;
        let resp = decode(&reply(201, ok)).expect("ok");
        assert_eq!((resp.index, resp.node.key.as_str()), (42, "/a"));

        let missing =
            br#"{"errorCode":100,"message":"Key not found","cause":"/skydns","index":12}"#;
        let err = decode(&reply(404, missing)).expect_err("error 100");
        assert!(err.is_key_not_found(), "{err}");

        let cleared = br#"{"errorCode":401,"message":"The event in requested index is outdated and cleared","cause":"the requested history has been cleared [1008/8]","index":2007}"#;
        let err = decode(&reply(400, cleared)).expect_err("error 401");
        assert!(err.is_event_index_cleared(), "{err}");

        let err = decode(&reply(404, b"404 page not found\n")).expect_err("no v2");
        assert!(err.is_permanent(), "{err}");
        assert!(err.to_string().contains("--enable-v2"), "{err}");

        let err = decode(&reply(401, b"unauthorized")).expect_err("401");
        assert!(
            !err.is_permanent() && err.to_string().contains("401"),
            "{err}"
        );
    }

    #[test]
    fn versions_tell_etcd_2_from_3() {
        let v: Version =
            serde_json::from_str(r#"{"etcdserver":"2.2.1","etcdcluster":"2.2.0"}"#).expect("v");
        assert_eq!(v.major(), Some(2));
    }
}
