//! Small parsers of configured values that several features share; it
//! imports nothing from the crate, so any feature may use it.

use std::net::SocketAddr;

/// A comma-separated flag value as a list, blanks dropped.
pub(crate) fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// A domain name lowercased and fully qualified.
pub(crate) fn fqdn_lower(s: &str) -> String {
    skydns_msg::path::fqdn(&s.to_ascii_lowercase())
}

/// `IP:port` with an IP literal host and a port in 1–65535.
pub(crate) fn parse_ip_port(s: &str) -> Result<SocketAddr, ()> {
    let addr: SocketAddr = s.parse().map_err(|_| ())?;
    if addr.port() == 0 {
        return Err(());
    }
    Ok(addr)
}

/// A count or size from flags or the etcd key, where a negative one means 0.
pub(crate) fn non_negative(n: i64) -> usize {
    usize::try_from(n.max(0)).unwrap_or(usize::MAX)
}

/// A [`std::time::Duration`] as the nanoseconds Go's `time.Duration` holds.
pub(crate) fn nanos(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}
