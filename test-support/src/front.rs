//! A Service front for DNS replicas, as kube-proxy makes one: queries to one
//! UDP port are relayed to the ready replicas in rotation. A replica joins when
//! its `/ready` answers 200, and leaves only after a removal delay, as in a
//! real cluster.

use crate::http::get;
use anyhow::Result;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

/// How long a relayed query waits for the replica's reply.
pub const RELAY_TIMEOUT: Duration = Duration::from_secs(3);

/// How often each replica's `/ready` is asked.
const PROBE_PERIOD: Duration = Duration::from_millis(50);

/// One replica: where it answers DNS and where it says whether it is ready.
#[derive(Clone, Debug)]
pub struct Replica {
    pub dns: SocketAddr,
    pub ready_url: String,
}

#[derive(Debug)]
struct State {
    replica: Replica,
    in_rotation: bool,
    unready_since: Option<Instant>,
}

/// The front: a UDP port relaying to the replicas in rotation.
pub struct ServiceFront {
    /// The UDP port clients query.
    pub port: u16,
    states: Arc<Mutex<Vec<State>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl ServiceFront {
    /// A front for `replicas` (none in rotation until ready), removing a
    /// replica `removal_delay` after its `/ready` stopped answering 200.
    pub async fn start(replicas: &[Replica], removal_delay: Duration) -> Result<Self> {
        let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await?);
        let port = socket.local_addr()?.port();
        let states = Arc::new(Mutex::new(
            replicas
                .iter()
                .map(|r| State {
                    replica: r.clone(),
                    in_rotation: false,
                    unready_since: None,
                })
                .collect::<Vec<_>>(),
        ));
        let tasks = vec![
            tokio::spawn(probe(states.clone(), removal_delay)),
            tokio::spawn(relay(socket, states.clone())),
        ];
        Ok(ServiceFront {
            port,
            states,
            tasks,
        })
    }

    /// The DNS addresses of the replicas in rotation now.
    pub fn in_rotation(&self) -> Vec<SocketAddr> {
        lock(&self.states)
            .iter()
            .filter(|s| s.in_rotation)
            .map(|s| s.replica.dns)
            .collect()
    }
}

impl Drop for ServiceFront {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn lock(states: &Mutex<Vec<State>>) -> std::sync::MutexGuard<'_, Vec<State>> {
    states.lock().unwrap_or_else(|e| e.into_inner())
}

/// Asks every replica's `/ready` each [`PROBE_PERIOD`] and moves it in or
/// out of the rotation.
async fn probe(states: Arc<Mutex<Vec<State>>>, removal_delay: Duration) {
    loop {
        let urls: Vec<String> = lock(&states)
            .iter()
            .map(|s| s.replica.ready_url.clone())
            .collect();
        for (i, url) in urls.iter().enumerate() {
            let ready = matches!(get(url).await, Ok(r) if r.status == 200);
            let mut states = lock(&states);
            let state = &mut states[i];
            if ready {
                state.in_rotation = true;
                state.unready_since = None;
            } else {
                let since = *state.unready_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= removal_delay {
                    state.in_rotation = false;
                }
            }
        }
        tokio::time::sleep(PROBE_PERIOD).await;
    }
}

/// Relays each query on `socket` to the next replica in rotation.
async fn relay(socket: Arc<UdpSocket>, states: Arc<Mutex<Vec<State>>>) {
    let next = AtomicUsize::new(0);
    let mut buf = vec![0u8; 65535];
    loop {
        let Ok((len, client)) = socket.recv_from(&mut buf).await else {
            continue;
        };
        let target = {
            let states = lock(&states);
            let ready: Vec<SocketAddr> = states
                .iter()
                .filter(|s| s.in_rotation)
                .map(|s| s.replica.dns)
                .collect();
            if ready.is_empty() {
                continue; // no endpoint: the query is lost
            }
            ready[next.fetch_add(1, Ordering::Relaxed) % ready.len()]
        };
        let query = buf[..len].to_vec();
        let socket = socket.clone();
        tokio::spawn(async move {
            if let Some(reply) = ask(target, &query).await {
                let _ = socket.send_to(&reply, client).await;
            }
        });
    }
}

async fn ask(target: SocketAddr, query: &[u8]) -> Option<Vec<u8>> {
    let upstream = UdpSocket::bind("127.0.0.1:0").await.ok()?;
    upstream.connect(target).await.ok()?;
    upstream.send(query).await.ok()?;
    let mut reply = vec![0u8; 65535];
    let len = tokio::time::timeout(RELAY_TIMEOUT, upstream.recv(&mut reply))
        .await
        .ok()?
        .ok()?;
    reply.truncate(len);
    Some(reply)
}
