//! Loopback ports for servers that take their port as a flag. A port found free
//! here may be taken before the server binds it, so launchers pick new ports
//! and start again ([`retry_on_conflict`]) instead of failing the test.

use anyhow::{bail, Result};
use std::net::{TcpListener, UdpSocket};

/// A loopback port that is free for TCP and UDP at the moment of the call.
pub fn free_port() -> Result<u16> {
    for _ in 0..100 {
        let tcp = TcpListener::bind("127.0.0.1:0")?;
        let port = tcp.local_addr()?.port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no free loopback port found")
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
