//! Names as the Corefile writes them: server block keys
//! (`[SCHEME://]ZONE[:PORT]`), zones (lower case, no trailing dot, `.` for
//! the root; a CIDR stands for its reverse zone), and upstream addresses.

use std::net::{IpAddr, SocketAddr};

/// A server block key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    /// `dns`, or the scheme written (`tls`, `https`, `grpc`, `quic`).
    pub(crate) scheme: String,
    pub(crate) zone: String,
    pub(crate) port: u16,
}

/// Parses a key; `Err` says why it is not one.
pub(crate) fn key(text: &str) -> Result<Key, String> {
    let (scheme, rest) = match text.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
        None => ("dns".to_owned(), text),
    };
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') && !port.is_empty() => {
            let port = port
                .parse::<u16>()
                .map_err(|_| format!("{text:?}: the port is not a number"))?;
            (host, port)
        }
        _ => (rest, 53),
    };
    Ok(Key {
        scheme,
        zone: zone(host).ok_or_else(|| format!("{text:?} is not a zone"))?,
        port,
    })
}

/// A zone as written (`Example.org.`, `.`, `10.0.0.0/8`) in normal form:
/// lower case, no trailing dot, `.` for the root, a CIDR as its reverse zone.
pub(crate) fn zone(text: &str) -> Option<String> {
    if text.contains('/') {
        return reverse_zone(text);
    }
    let name = text.trim_end_matches('.').to_ascii_lowercase();
    if name.is_empty() {
        return Some(".".to_owned());
    }
    let ok = name.split('.').all(|l| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_*".contains(c))
    });
    ok.then_some(name)
}

/// `10.0.0.0/8` → `10.in-addr.arpa`, `fd00::/8` → `d.f.ip6.arpa` (whole
/// octets or nibbles only, as CoreDNS).
fn reverse_zone(cidr: &str) -> Option<String> {
    let (ip, bits) = cidr.split_once('/')?;
    let bits: usize = bits.parse().ok()?;
    match ip.parse::<IpAddr>().ok()? {
        IpAddr::V4(v4) if bits <= 32 && bits.is_multiple_of(8) => {
            let labels: Vec<String> = v4.octets()[..bits / 8]
                .iter()
                .rev()
                .map(u8::to_string)
                .collect();
            Some(join_reverse(labels, "in-addr.arpa"))
        }
        IpAddr::V6(v6) if bits <= 128 && bits.is_multiple_of(4) => {
            let nibbles: Vec<String> = (v6.octets().iter())
                .flat_map(|o| [o >> 4, o & 0xf])
                .take(bits / 4)
                .map(|n| format!("{n:x}"))
                .collect();
            Some(join_reverse(
                nibbles.into_iter().rev().collect(),
                "ip6.arpa",
            ))
        }
        _ => None,
    }
}

fn join_reverse(mut labels: Vec<String>, suffix: &str) -> String {
    labels.push(suffix.to_owned());
    labels.join(".")
}

/// Whether `zone` is `parent` or below it.
pub(crate) fn within(zone: &str, parent: &str) -> bool {
    parent == "." || zone == parent || zone.ends_with(&format!(".{parent}"))
}

/// A reverse zone: under in-addr.arpa or ip6.arpa.
pub(crate) fn is_reverse(zone: &str) -> bool {
    within(zone, "in-addr.arpa") || within(zone, "ip6.arpa")
}

/// An upstream as `forward` names it: `IP`, `IP:port`, `[IPv6]:port`, each
/// maybe with `dns://`. `None`: not an address.
pub(crate) fn upstream(text: &str) -> Option<SocketAddr> {
    let text = text.strip_prefix("dns://").unwrap_or(text);
    match text.parse::<IpAddr>() {
        Ok(ip) => Some(SocketAddr::new(ip, 53)),
        Err(_) => text.parse::<SocketAddr>().ok().filter(|a| a.port() != 0),
    }
}

/// An address as kube-dns's ConfigMap writes it: `IP` for port 53, else
/// `IP:port` (`[IPv6]:port`).
pub(crate) fn kube_dns_server(addr: SocketAddr) -> String {
    if addr.port() == 53 {
        addr.ip().to_string()
    } else {
        addr.to_string()
    }
}
