//! The UDP and TCP listeners: [`Listeners::bind`] opens both sockets, or
//! [`Listeners::from_systemd`] takes systemd's (`-systemd`), and [`serve`] runs
//! them until stop. UDP (`udp`) is read by one thread per core; TCP (`tcp`)
//! gets one task per connection, in a table of bounded size ([`TcpLimits`]).

use crate::handler::Handler;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

mod flags;
mod open_files;
mod tcp;
pub use flags::Flags;
mod udp;

/// Bounds on TCP clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpLimits {
    /// Connections served at once; past it a newcomer takes the place of
    /// the connection idle longest, or is closed when every one is busy.
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
pub(crate) struct Listeners {
    udp: Vec<std::net::UdpSocket>,
    tcp: Vec<TcpListener>,
}

impl Listeners {
    /// Binds UDP and TCP on `addr`. With port 0 the system picks a UDP
    /// port, and another one if that port is taken for TCP.
    pub(crate) async fn bind(addr: SocketAddr) -> io::Result<Self> {
        Self::bind_with(addr, TcpListener::bind).await
    }

    /// [`Listeners::bind`], the TCP side bound by `bind_tcp` (a test's
    /// fails on cue).
    async fn bind_with<F, Bound>(addr: SocketAddr, bind_tcp: F) -> io::Result<Self>
    where
        F: Fn(SocketAddr) -> Bound,
        Bound: std::future::Future<Output = io::Result<TcpListener>>,
    {
        let mut attempts = if addr.port() == 0 { 20 } else { 1 };
        loop {
            let udp = std::net::UdpSocket::bind(addr)?;
            udp.set_nonblocking(true)?;
            match bind_tcp(udp.local_addr()?).await {
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
    pub(crate) fn from_systemd() -> io::Result<Self> {
        Self::from_fds(listenfd::ListenFd::from_env())
    }

    fn from_fds(mut fds: listenfd::ListenFd) -> io::Result<Self> {
        let (mut udp, mut tcp) = (Vec::new(), Vec::new());
        for i in 0..fds.len() {
            if let Ok(Some(socket)) = fds.take_udp_socket(i) {
                udp.push(socket);
            } else if let Some(listener) = fds.take_tcp_listener(i)? {
                tcp.push(listener);
            }
        }
        Self::from_sockets(udp, tcp)
    }

    /// Listeners on sockets already bound: either kind may be missing,
    /// not both.
    fn from_sockets(
        udp: Vec<std::net::UdpSocket>,
        tcp: Vec<std::net::TcpListener>,
    ) -> io::Result<Self> {
        if udp.is_empty() && tcp.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no UDP or TCP sockets supplied by systemd (LISTEN_FDS/LISTEN_PID)",
            ));
        }
        for socket in &udp {
            socket.set_nonblocking(true)?;
        }
        let tcp = (tcp.into_iter())
            .map(|listener| {
                listener.set_nonblocking(true)?;
                TcpListener::from_std(listener)
            })
            .collect::<io::Result<_>>()?;
        Ok(Listeners { udp, tcp })
    }

    /// The address of the first socket.
    #[cfg(test)]
    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        match (self.udp.first(), self.tcp.first()) {
            (Some(udp), _) => udp.local_addr(),
            (None, Some(tcp)) => tcp.local_addr(),
            (None, None) => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// Every address served, UDP first.
    pub(crate) fn addresses(&self) -> Vec<String> {
        let udp = self.udp.iter().filter_map(|s| s.local_addr().ok());
        let tcp = self.tcp.iter().filter_map(|s| s.local_addr().ok());
        udp.map(|a| format!("udp://{a}"))
            .chain(tcp.map(|a| format!("tcp://{a}")))
            .collect()
    }
}

/// Serves DNS on `listeners` until `stop` is cancelled, then finishes the
/// replies in flight (within [`crate::lifecycle::DRAIN_LIMIT`], or until `abort`).
pub(crate) async fn serve(
    listeners: Listeners,
    handler: Handler,
    limits: TcpLimits,
    stop: CancellationToken,
    abort: CancellationToken,
) {
    open_files::raise_for(limits.max_connections);
    let readers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut threads = Vec::new();
    for socket in &listeners.udp {
        for i in 0..readers {
            let (handler, stop, abort) = (handler.clone(), stop.clone(), abort.clone());
            match udp::reader(i, socket, handler, stop, abort) {
                Ok(thread) => threads.push(thread),
                Err(error) => tracing::error!(%error, "cannot start a UDP reader"),
            }
        }
    }
    let mut tcp = JoinSet::new();
    // One connection limit across every listener (systemd may pass several).
    let table = tcp::Connections::new(limits.max_connections);
    for listener in listeners.tcp {
        let (handler, table) = (handler.clone(), table.clone());
        let (stop, abort) = (stop.clone(), abort.clone());
        tcp.spawn(tcp::serve(listener, handler, limits, table, stop, abort));
    }
    while tcp.join_next().await.is_some() {}
    if threads.is_empty() {
        stop.cancelled().await;
    }
    for thread in threads {
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }
}

#[cfg(test)]
mod tests;
