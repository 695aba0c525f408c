//! Servers that are gone, as tests need them: [`SilentUpstream`], a UDP socket
//! the test holds and never reads, so a query to it is certainly swallowed, and
//! [`closed_port`], a loopback port bound and closed again, which refuses at
//! once.

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
