//! Kubernetes's own name rules (`k8s.io/apimachinery/pkg/util/validation`) and
//! the other field checks that decide whether a value may become part of an
//! etcd key or a record: pure predicates, used by [`crate::validate`],
//! [`crate::records`] and [`crate::config`].

use std::net::IpAddr;

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, at most 63 characters.
pub(crate) fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(edge)
        && b.last().is_some_and(edge)
        && b.iter().all(|c| edge(c) || *c == b'-')
}

/// A DNS-1123 label that starts with a letter (Service names).
pub(crate) fn is_dns1035_label(s: &str) -> bool {
    is_dns1123_label(s) && s.as_bytes()[0].is_ascii_lowercase()
}

/// DNS-1123 labels joined by dots, at most 253 characters.
pub(crate) fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// Whether `s` is an IPv4 or IPv6 address, nothing more (no prefix length).
pub(crate) fn is_ip(s: &str) -> bool {
    s.parse::<IpAddr>().is_ok()
}

/// Whether an ExternalName can be a record's host: a DNS-1123 subdomain,
/// compared in lower case, with or without its trailing dot.
pub(crate) fn is_external_name(s: &str) -> bool {
    is_dns1123_subdomain(s.strip_suffix('.').unwrap_or(s))
}

/// Whether a port number can be in an SRV record.
pub(crate) fn is_port_number(n: i32) -> bool {
    (1..=65535).contains(&n)
}

/// Whether a port can become `_<name>._<proto>` labels: both DNS-1123
/// labels (the protocol compared in lower case).
pub(crate) fn is_port_label_pair(name: &str, protocol: &str) -> bool {
    is_dns1123_label(name) && is_dns1123_label(&protocol.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_name_rules() {
        assert!(is_dns1123_label("a"));
        assert!(is_dns1123_label("web-0"));
        assert!(is_dns1123_label("0web"));
        assert!(!is_dns1123_label("-a"));
        assert!(!is_dns1123_label("a-"));
        assert!(!is_dns1123_label("A"));
        assert!(!is_dns1123_label("a.b"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1123_label(&"a".repeat(63)));
        assert!(!is_dns1123_label(""));
        assert!(is_dns1035_label("web"));
        assert!(!is_dns1035_label("0web"));
        assert!(is_dns1123_subdomain("example.com"));
        assert!(!is_dns1123_subdomain("bad name..com"));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(!is_dns1123_subdomain(&format!("{}.com", "a.".repeat(125))));
        assert!(is_external_name("example.com."));
        assert!(!is_external_name("bad name..com."));
        assert!(!is_external_name("."));
        assert!(is_ip("10.0.0.1") && is_ip("fd00::1"));
        assert!(!is_ip("10.7.7.7/24") && !is_ip("not-an-ip") && !is_ip(""));
    }
}
