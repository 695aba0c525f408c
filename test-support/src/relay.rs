//! A TCP relay in front of a server, for tests that cut a client's
//! connections: the client connects to the relay, which forwards every byte
//! (TLS included) to the server. [`TcpRelay::hold`] cuts every open
//! connection and keeps new ones waiting, unforwarded, until
//! [`TcpRelay::release`]: a network cut between one client and a server
//! that keeps running, which a real kube-apiserver cannot be told to make.

use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The relay: a loopback port forwarding to `upstream`.
pub struct TcpRelay {
    addr: SocketAddr,
    held: watch::Sender<bool>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accepted: Arc<AtomicUsize>,
    accept: JoinHandle<()>,
}

impl TcpRelay {
    /// Starts relaying a free loopback port to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the relay's port")?;
        let addr = listener.local_addr()?;
        let (held, _) = watch::channel(false);
        let connections = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicUsize::new(0));
        let accept = tokio::spawn(accept(
            listener,
            upstream,
            held.clone(),
            connections.clone(),
            accepted.clone(),
        ));
        Ok(TcpRelay {
            addr,
            held,
            connections,
            accepted,
            accept,
        })
    }

    /// Where clients connect instead of the server.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many connections clients have opened to the relay so far: a
    /// test sees a client reconnect after a cut.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Cuts every open connection (the client sees its peer close), and
    /// keeps new connections waiting until [`TcpRelay::release`].
    pub fn hold(&self) {
        self.held.send_replace(true);
        for connection in lock(&self.connections).drain(..) {
            connection.abort();
        }
    }

    /// Lets waiting and new connections through to the server again.
    pub fn release(&self) {
        self.held.send_replace(false);
    }
}

impl Drop for TcpRelay {
    fn drop(&mut self) {
        self.accept.abort();
        for connection in lock(&self.connections).drain(..) {
            connection.abort();
        }
    }
}

async fn accept(
    listener: TcpListener,
    upstream: SocketAddr,
    held: watch::Sender<bool>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accepted: Arc<AtomicUsize>,
) {
    while let Ok((client, _)) = listener.accept().await {
        accepted.fetch_add(1, Ordering::SeqCst);
        let mut held = held.subscribe();
        let connection = tokio::spawn(async move {
            // Waits while held; a relay dropped meanwhile ends the wait.
            if held.wait_for(|held| !held).await.is_err() {
                return;
            }
            forward(client, upstream).await;
        });
        let mut connections = lock(&connections);
        connections.retain(|c| !c.is_finished());
        connections.push(connection);
    }
}

async fn forward(mut client: TcpStream, upstream: SocketAddr) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return; // the client sees its connection closed, as a refused one
    };
    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
