//! A TCP relay in front of a server, for tests that cut a client's connections:
//! [`TcpRelay::hold`] cuts every open connection and keeps new ones waiting
//! until [`TcpRelay::release`], a network cut that a real kube-apiserver cannot
//! be told to make; [`TcpRelay::redirect`] sends new connections to another
//! server while open ones stay with the first (a store replaced under a
//! client that still has requests in flight to the old one).

use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The relay: a loopback port forwarding to `upstream`.
pub struct TcpRelay {
    addr: SocketAddr,
    state: watch::Sender<State>,
    accept: JoinHandle<()>,
}

/// What every connection reads and changes under the channel's one lock,
/// so that a connection is either admitted before a hold (and then cut by
/// it) or waits for the release: none slips between the two.
#[derive(Clone, Copy, Debug)]
struct State {
    /// New connections wait and open ones end while set.
    held: bool,
    /// Connections forwarding now.
    active: usize,
    /// Connections let through to the server so far.
    admitted: usize,
    /// The relay is dropped: every connection ends.
    closed: bool,
    /// Where connections admitted from now on are forwarded.
    upstream: SocketAddr,
}

impl TcpRelay {
    /// Starts relaying a free loopback port to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the relay's port")?;
        let addr = listener.local_addr()?;
        let (state, _) = watch::channel(State {
            held: false,
            active: 0,
            admitted: 0,
            closed: false,
            upstream,
        });
        let accept = tokio::spawn(accept(listener, state.clone()));
        Ok(TcpRelay {
            addr,
            state,
            accept,
        })
    }

    /// Where clients connect instead of the server.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many connections the relay has let through to the server: one
    /// admitted after a [`TcpRelay::hold`] is a client that came back.
    pub fn admitted(&self) -> usize {
        self.state.borrow().admitted
    }

    /// Cuts every open connection (the client sees its peer close) and
    /// returns once each is closed; new connections wait until
    /// [`TcpRelay::release`].
    pub async fn hold(&self) {
        self.state.send_modify(|s| s.held = true);
        let mut state = self.state.subscribe();
        // The sender lives in `self`: the wait cannot end in an error.
        let _ = state.wait_for(|s| s.active == 0).await;
    }

    /// Lets waiting and new connections through to the server again.
    pub fn release(&self) {
        self.state.send_modify(|s| s.held = false);
    }

    /// Forwards the connections admitted from now on to `upstream`; the
    /// open ones stay with the server they reached.
    pub fn redirect(&self, upstream: SocketAddr) {
        self.state.send_modify(|s| s.upstream = upstream);
    }
}

impl Drop for TcpRelay {
    /// Stops accepting, and ends every connection, open or waiting.
    fn drop(&mut self) {
        self.accept.abort();
        self.state.send_modify(|s| s.closed = true);
    }
}

async fn accept(listener: TcpListener, state: watch::Sender<State>) {
    loop {
        match listener.accept().await {
            Ok((client, _)) => {
                tokio::spawn(connection(client, state.clone()));
            }
            // Out of descriptors, say: a failed accept is no reason to
            // stop relaying.
            Err(error) => {
                eprintln!("relay: accept failed: {error}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// One client connection: admitted once the relay is not held, then
/// forwarded (to the upstream of that moment) until either side closes or
/// the relay is held or dropped.
async fn connection(client: TcpStream, state: watch::Sender<State>) {
    let mut changes = state.subscribe();
    let upstream = loop {
        // Under the channel's lock: admitted now, or held and waiting.
        let mut admitted = None;
        state.send_if_modified(|s| {
            if !s.held && !s.closed {
                s.active += 1;
                s.admitted += 1;
                admitted = Some(s.upstream);
            }
            admitted.is_some()
        });
        if let Some(upstream) = admitted {
            break upstream;
        }
        if changes.wait_for(|s| !s.held || s.closed).await.is_err() || changes.borrow().closed {
            return;
        }
    };
    tokio::select! {
        () = forward(client, upstream) => {}
        _ = changes.wait_for(|s| s.held || s.closed) => {}
    }
    state.send_modify(|s| s.active -= 1);
}

async fn forward(mut client: TcpStream, upstream: SocketAddr) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return; // the client sees its connection closed, as a refused one
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
}
