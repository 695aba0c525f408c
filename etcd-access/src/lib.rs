//! How the project reaches etcd, through either of its APIs; shared by skydns
//! (which reads) and kube2sky (which writes). What the keys and values mean is
//! skydns-msg's. Crate map:
//! - [`EtcdOptions`]: endpoints, TLS client certificate, CA, user and
//!   password: the one description of "how to reach etcd", whichever API;
//! - [`v2`]: a small client for the v2 keys API (no maintained crate speaks
//!   it), the API of the Kubernetes 1.2 DNS pod's etcd 2.2.1;
//! - [`member`]: an etcd-client v3 client bound to one member at a time,
//!   moving to the next after a failure;
//! - [`prefix_end`]: the end of the v3 key range of a prefix.

pub mod member;
pub mod v2;

use std::path::PathBuf;

/// How to reach etcd, whichever API is used.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EtcdOptions {
    /// Endpoint URLs, e.g. `http://127.0.0.1:2379`.
    pub endpoints: Vec<String>,
    /// Client certificate (PEM).
    pub tls_cert: Option<PathBuf>,
    /// Client key (PEM).
    pub tls_key: Option<PathBuf>,
    /// CA certificate (PEM) that signed etcd's server certificate.
    pub ca_cert: Option<PathBuf>,
    /// User and password (v2: HTTP basic auth; v3: etcd authentication).
    pub user: Option<(String, String)>,
}

/// The end of the v3 key range of every key that starts with `prefix`
/// (etcd's `GetPrefixRangeEnd`): the prefix with its last byte below 0xff
/// incremented and what follows dropped; `[0]` (every key) when there is
/// no such byte.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn prefix_end_increments_the_last_byte() {
        assert_eq!(prefix_end(b"/skydns/pod/"), b"/skydns/pod0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }
}
