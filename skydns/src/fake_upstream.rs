//! Fake upstream DNS servers for the forwarding tests: each echoes a query
//! back with the QR bit set, so a relay's reply can be told apart from the
//! query and carries its ID. Plain threads and std sockets, so they serve
//! whatever runtime (or none) the test runs its client on.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A UDP upstream on 127.0.0.1 that counts the queries it receives and
/// echoes each one after `delay`.
pub(crate) fn echo_udp(delay: Duration) -> (SocketAddr, Arc<AtomicUsize>) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    // The thread ends once no query came for a while.
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let addr = socket.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((len, peer)) = socket.recv_from(&mut buf) {
            counter.fetch_add(1, Ordering::SeqCst);
            let mut reply = buf[..len].to_vec();
            reply[2] |= 0x80;
            let Ok(socket) = socket.try_clone() else {
                return;
            };
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let _ = socket.send_to(&reply, peer);
            });
        }
    });
    (addr, seen)
}

/// A UDP-only upstream: [`echo_udp`] with its port held over TCP by a
/// listener that never accepts (kept alive by the returned value).
pub(crate) fn echo_udp_only() -> (SocketAddr, TcpListener) {
    let (addr, _) = echo_udp(Duration::ZERO);
    (addr, TcpListener::bind(addr).unwrap())
}

/// A TCP-only upstream on 127.0.0.1 echoing each length-prefixed query.
/// Its port is held over UDP by a socket that never answers (kept alive by
/// the returned value).
pub(crate) fn echo_tcp_only() -> (SocketAddr, UdpSocket) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mute = UdpSocket::bind(addr).unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut len = [0u8; 2];
            let mut msg = Vec::new();
            let read = stream.read_exact(&mut len).and_then(|()| {
                msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
                stream.read_exact(&mut msg)
            });
            if read.is_ok() {
                msg[2] |= 0x80;
                let _ = stream.write_all(&len);
                let _ = stream.write_all(&msg);
            }
        }
    });
    (addr, mute)
}
