//! Loopback ports for servers that take their port as a flag. A port found free
//! here may be taken before the server binds it, so launchers pick new ports
//! and start again ([`retry_on_conflict`]) instead of failing the test.
//!
//! The ports come from below the kernel's ephemeral range, in turn from a
//! cursor of this process: an outgoing connection (which takes an ephemeral
//! port) never takes one between the check and the server's bind, and two
//! tests of one process never get the same one.

use anyhow::{bail, Result};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::LazyLock;

/// The ports handed out: [`FIRST`, the ephemeral range's start).
const FIRST: u16 = 15_000;

/// A port that is free for TCP and UDP, on the loopback address and on the
/// wildcard addresses (`[::]`, or `0.0.0.0` without IPv6), so a server may
/// bind it on any of them.
pub fn free_port() -> Result<u16> {
    let end = ephemeral_start().max(FIRST + 1_000);
    let span = u32::from(end - FIRST);
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    // Processes started together begin at different places.
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7919) % span,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..span {
        let offset = NEXT.fetch_add(1, Ordering::Relaxed) % span;
        let port = FIRST + u16::try_from(offset).unwrap_or(0);
        if is_free(port) {
            return Ok(port);
        }
    }
    bail!("no free port in {FIRST}..{end}")
}

/// Where the kernel's ephemeral ports begin (32768 when it cannot be read).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// Whether `port` can be bound for TCP and UDP on every address a server
/// of the tests binds.
fn is_free(port: u16) -> bool {
    // Whether the host has IPv6, found once.
    static IPV6: LazyLock<bool> =
        LazyLock::new(|| TcpListener::bind((Ipv6Addr::UNSPECIFIED, 0)).is_ok());
    let wildcard = if *IPV6 {
        SocketAddr::from((Ipv6Addr::UNSPECIFIED, port))
    } else {
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))
    };
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    [wildcard, loopback]
        .iter()
        .all(|addr| TcpListener::bind(addr).is_ok() && UdpSocket::bind(addr).is_ok())
}

/// How many times a launcher starts again on new ports.
pub const ATTEMPTS: usize = 5;

/// Runs `start` until it succeeds or fails for a reason other than a
/// taken port (an error whose text says "address already in use", "Address
/// in use" or "EADDRINUSE"), at most a few times.
pub fn retry_on_conflict<T>(mut start: impl FnMut() -> Result<T>) -> Result<T> {
    let mut attempt = 1;
    loop {
        match start() {
            Err(e) if attempt < ATTEMPTS && is_conflict(&format!("{e:#}")) => attempt += 1,
            other => return other,
        }
    }
}

/// Starts a server with `start(port)` on a free port, again on another
/// port while it fails because its port was taken meanwhile.
pub async fn on_free_port<T>(mut start: impl AsyncFnMut(u16) -> Result<T>) -> Result<T> {
    let mut attempt = 1;
    loop {
        match start(free_port()?).await {
            Err(e) if attempt < ATTEMPTS && is_conflict(&format!("{e:#}")) => attempt += 1,
            other => return other,
        }
    }
}

/// Whether an error (or a log) says a port was taken.
pub fn is_conflict(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    text.contains("address already in use")
        || text.contains("address in use")
        || text.contains("eaddrinuse")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_is_below_the_ephemeral_range_and_free_on_every_address() {
        let port = free_port().unwrap();
        assert!((FIRST..ephemeral_start()).contains(&port), "{port}");
        for addr in [
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)),
            SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        ] {
            TcpListener::bind(addr).unwrap();
            UdpSocket::bind(addr).unwrap();
        }
        assert_ne!(free_port().unwrap(), port, "a port is handed out once");
    }

    #[test]
    fn a_port_taken_on_the_wildcard_address_is_not_free() {
        let taken = TcpListener::bind((Ipv6Addr::UNSPECIFIED, 0)).unwrap();
        assert!(!is_free(taken.local_addr().unwrap().port()));
    }

    #[test]
    fn only_a_taken_port_is_retried() {
        let mut tries = 0;
        let r: Result<()> = retry_on_conflict(|| {
            tries += 1;
            bail!("listen tcp 127.0.0.1:1: bind: address already in use")
        });
        assert!(r.is_err());
        assert_eq!(tries, ATTEMPTS);
        let mut tries = 0;
        let r: Result<()> = retry_on_conflict(|| {
            tries += 1;
            bail!("permission denied")
        });
        assert!(r.is_err());
        assert_eq!(tries, 1);
    }
}
