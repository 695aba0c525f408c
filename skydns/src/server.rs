//! The UDP and TCP listeners.
//!
//! [`Listeners::bind`] opens both sockets on one address, or
//! [`Listeners::from_systemd`] takes the sockets systemd passed (socket
//! activation, `-systemd`: every UDP and TCP socket in `LISTEN_FDS`);
//! [`serve`] runs them until the shutdown token is cancelled. UDP is read by one thread
//! per core on the same socket, each with its own single-threaded runtime,
//! answering inline (answers come from memory, so there is nothing to wait
//! for) and running its requests' forwards. They share no scheduler with
//! TCP, so hundreds of busy TCP connections (clients pipelining queries for
//! large answers) cannot delay UDP answers: the kernel shares the cores. TCP gets one task per
//! connection, serving length-prefixed messages until the client closes,
//! stays idle, is slow to send a message or to take its reply
//! ([`TcpLimits`]). Past the connection limit a new connection is closed at
//! once, so clients that never read cannot pile up memory.

use crate::handler::{Handler, Outcome, Transport};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Bounds on TCP clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpLimits {
    /// Connections served at once; more are closed when accepted.
    pub max_connections: usize,
    /// How long a connection may sit idle between queries.
    pub idle: Duration,
    /// How long the rest of a message may take once its first byte came.
    pub read: Duration,
    /// How long the client may take to accept a reply.
    pub write: Duration,
}

impl Default for TcpLimits {
    fn default() -> Self {
        TcpLimits {
            max_connections: 1_000,
            idle: Duration::from_secs(10),
            read: Duration::from_secs(2),
            write: Duration::from_secs(2),
        }
    }
}

/// Bound UDP sockets and TCP listeners (one of each unless systemd passed more).
pub struct Listeners {
    udp: Vec<std::net::UdpSocket>,
    tcp: Vec<TcpListener>,
}

impl Listeners {
    /// Binds UDP and TCP on `addr`. With port 0 the system picks a UDP
    /// port, and another one if that port is taken for TCP.
    pub async fn bind(addr: SocketAddr) -> io::Result<Self> {
        let mut attempts = if addr.port() == 0 { 20 } else { 1 };
        loop {
            let udp = std::net::UdpSocket::bind(addr)?;
            udp.set_nonblocking(true)?;
            match TcpListener::bind(udp.local_addr()?).await {
                Ok(tcp) => {
                    return Ok(Listeners {
                        udp: vec![udp],
                        tcp: vec![tcp],
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AddrInUse && attempts > 1 => attempts -= 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// The sockets systemd passed (`LISTEN_FDS`, checked against
    /// `LISTEN_PID`): each UDP socket and TCP listener among them. Anything
    /// else among them, or none of either kind, is an error (SkyDNS: "no UDP
    /// or TCP sockets supplied by systemd").
    pub fn from_systemd() -> io::Result<Self> {
        Self::from_fds(listenfd::ListenFd::from_env())
    }

    fn from_fds(mut fds: listenfd::ListenFd) -> io::Result<Self> {
        let (mut udp, mut tcp) = (Vec::new(), Vec::new());
        for i in 0..fds.len() {
            if let Ok(Some(socket)) = fds.take_udp_socket(i) {
                socket.set_nonblocking(true)?;
                udp.push(socket);
            } else if let Some(listener) = fds.take_tcp_listener(i)? {
                listener.set_nonblocking(true)?;
                tcp.push(TcpListener::from_std(listener)?);
            }
        }
        if udp.is_empty() && tcp.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no UDP or TCP sockets supplied by systemd (LISTEN_FDS/LISTEN_PID)",
            ));
        }
        Ok(Listeners { udp, tcp })
    }

    /// The address of the first socket.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match (self.udp.first(), self.tcp.first()) {
            (Some(udp), _) => udp.local_addr(),
            (None, Some(tcp)) => tcp.local_addr(),
            (None, None) => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// Every address served, UDP first.
    pub fn addresses(&self) -> Vec<String> {
        let udp = self.udp.iter().filter_map(|s| s.local_addr().ok());
        let tcp = self.tcp.iter().filter_map(|s| s.local_addr().ok());
        udp.map(|a| format!("udp://{a}"))
            .chain(tcp.map(|a| format!("tcp://{a}")))
            .collect()
    }
}

/// Serves DNS on `listeners` until `shutdown` is cancelled.
pub async fn serve(
    listeners: Listeners,
    handler: Handler,
    limits: TcpLimits,
    shutdown: CancellationToken,
) {
    let readers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut threads = Vec::new();
    for socket in &listeners.udp {
        for i in 0..readers {
            match udp_thread(i, socket, handler.clone(), shutdown.clone()) {
                Ok(thread) => threads.push(thread),
                Err(error) => tracing::error!(%error, "cannot start a UDP reader"),
            }
        }
    }
    let mut tcp = JoinSet::new();
    // One connection limit across every listener (systemd may pass several).
    let open = Arc::new(AtomicUsize::new(0));
    for listener in listeners.tcp {
        let (handler, open, shutdown) = (handler.clone(), open.clone(), shutdown.clone());
        tcp.spawn(serve_tcp(listener, handler, limits, open, shutdown));
    }
    while tcp.join_next().await.is_some() {}
    if threads.is_empty() {
        shutdown.cancelled().await;
    }
    for thread in threads {
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }
}

/// Starts UDP reader `i`: a thread with its own runtime reading a clone of
/// `socket` until `shutdown`.
fn udp_thread(
    i: usize,
    socket: &std::net::UdpSocket,
    handler: Handler,
    shutdown: CancellationToken,
) -> io::Result<std::thread::JoinHandle<()>> {
    let socket = socket.try_clone()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(format!("udp-{i}"))
        .spawn(move || {
            runtime.block_on(async move {
                match UdpSocket::from_std(socket) {
                    Ok(socket) => serve_udp(Arc::new(socket), handler, shutdown.clone()).await,
                    Err(error) => tracing::error!(%error, "UDP reader cannot use its socket"),
                }
            });
            // Forwards still waiting are dropped with the runtime.
        })
}

async fn serve_udp(socket: Arc<UdpSocket>, handler: Handler, shutdown: CancellationToken) {
    let mut buf = vec![0u8; 65535];
    loop {
        let (len, peer) = tokio::select! {
            _ = shutdown.cancelled() => return,
            received = socket.recv_from(&mut buf) => match received {
                Ok(r) => r,
                Err(error) => {
                    // e.g. ICMP port unreachable reported on a later recv.
                    tracing::debug!(%error, "udp receive failed");
                    continue;
                }
            },
        };
        match handler.handle(&buf[..len], Transport::Udp) {
            Outcome::Done(Some(reply)) => send_udp(&socket, &reply, peer).await,
            Outcome::Done(None) => {}
            Outcome::Pending(pending) => {
                // Upstream work must not hold up the receive loop.
                let (socket, handler) = (socket.clone(), handler.clone());
                tokio::spawn(async move {
                    if let Some(reply) = handler.resolve(*pending).await {
                        send_udp(&socket, &reply, peer).await;
                    }
                });
            }
        }
    }
}

async fn send_udp(socket: &UdpSocket, reply: &[u8], peer: SocketAddr) {
    if let Err(error) = socket.send_to(reply, peer).await {
        tracing::debug!(%error, %peer, "udp send failed");
    }
}

async fn serve_tcp(
    listener: TcpListener,
    handler: Handler,
    limits: TcpLimits,
    open: Arc<AtomicUsize>,
    shutdown: CancellationToken,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) if open.load(Ordering::Relaxed) >= limits.max_connections => {
                    handler.metrics().limit("tcp_connections");
                    tracing::debug!(%peer, "tcp connection limit reached; closing");
                    drop(stream);
                }
                Ok((stream, _)) => {
                    let connection = serve_connection(stream, handler.clone(), limits, shutdown.clone());
                    open.fetch_add(1, Ordering::Relaxed);
                    let open = open.clone();
                    connections.spawn(async move {
                        connection.await;
                        open.fetch_sub(1, Ordering::Relaxed);
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "tcp accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
}

async fn serve_connection(
    mut stream: TcpStream,
    handler: Handler,
    limits: TcpLimits,
    shutdown: CancellationToken,
) {
    let mut buf = Vec::new();
    loop {
        let len = tokio::select! {
            _ = shutdown.cancelled() => return,
            len = tokio::time::timeout(limits.idle, stream.read_u8()) => match len {
                Ok(Ok(high)) => high,
                _ => return,
            },
        };
        let len = match tokio::time::timeout(limits.read, stream.read_u8()).await {
            Ok(Ok(low)) => usize::from(u16::from_be_bytes([len, low])),
            _ => return,
        };
        buf.resize(len, 0);
        match tokio::time::timeout(limits.read, stream.read_exact(&mut buf)).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
        let Some(reply) = handler.handle_async(&buf, Transport::Tcp).await else {
            continue;
        };
        let Ok(reply_len) = u16::try_from(reply.len()) else {
            return;
        };
        let mut framed = Vec::with_capacity(reply.len() + 2);
        framed.extend_from_slice(&reply_len.to_be_bytes());
        framed.extend_from_slice(&reply);
        match tokio::time::timeout(limits.write, stream.write_all(&framed)).await {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
