//! Servers that are gone, as tests need them: an upstream that never
//! answers and a port where nothing listens.
//!
//! A fixed "dead" address such as `127.0.0.1:9` is dead only by custom:
//! anything on the machine may listen there, and whether a datagram to it
//! is refused or lost depends on that. [`SilentUpstream`] is a UDP socket
//! the test binds and holds for its whole run and never reads, so a query
//! sent to it is certainly swallowed (a timeout, as a crashed server's).
//! [`closed_port`] is a loopback port the test bound and closed again, for
//! an endpoint that must refuse at once (an etcd that is not there); the
//! port is ephemeral, so the kernel hands it out again only after the
//! others in its range.

use anyhow::{Context, Result};
use std::net::{SocketAddr, TcpListener, UdpSocket};

/// A UDP socket on 127.0.0.1 that receives queries and never answers,
/// held until dropped.
#[derive(Debug)]
pub struct SilentUpstream {
    socket: UdpSocket,
}

impl SilentUpstream {
    /// Binds a fresh loopback port.
    pub fn bind() -> Result<Self> {
        Self::at("127.0.0.1:0".parse().expect("a socket address"))
    }

    /// Binds `addr` (e.g. the UDP side of a TCP-only server's port).
    pub fn at(addr: SocketAddr) -> Result<Self> {
        let socket = UdpSocket::bind(addr).with_context(|| format!("binding UDP {addr}"))?;
        Ok(SilentUpstream { socket })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.socket
            .local_addr()
            .expect("a bound socket has an address")
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.addr().port()
    }
}

/// A silent upstream on a fresh port; panics if none can be bound.
pub fn silent_upstream() -> SilentUpstream {
    SilentUpstream::bind().expect("binding a loopback UDP socket")
}

/// A loopback TCP port that was bound and closed again: a connection to
/// it is refused.
pub fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback TCP port");
    listener.local_addr().expect("a bound address").port()
}

/// `http://127.0.0.1:<closed port>`: an etcd (or any HTTP server) that is
/// not there.
pub fn closed_url() -> String {
    format!("http://127.0.0.1:{}", closed_port())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_silent_upstream_swallows_queries() {
        let silent = silent_upstream();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        client.send_to(b"query", silent.addr()).unwrap();
        let mut buf = [0u8; 16];
        let err = client.recv_from(&mut buf).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "no reply and no refusal: {err:?}"
        );
    }

    #[test]
    fn a_closed_port_refuses() {
        let port = closed_port();
        let err = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    }
}
