//! The name rules the real server checks: DNS-1123 labels (Service and
//! Namespace names, endpoint hostnames) and subdomains (other object names,
//! node names). A leaf: the per-kind rules of `resource.rs` and the
//! EndpointSlice validation of `endpointslice.rs` both use it.

/// A DNS-1123 label: 1-63 lowercase alphanumerics or `-`, alphanumeric at
/// both ends.
pub(crate) fn dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
pub(crate) fn dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(dns1123_label)
}
