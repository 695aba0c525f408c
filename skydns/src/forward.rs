//! Talking to upstream nameservers: [`Upstreams::relay`] sends a client's
//! request to them and returns the first reply that answers it, and
//! [`Upstreams::lookup`] is SkyDNS's internal `Lookup`. `exchange.rs` is one
//! exchange, `health.rs` remembers which servers fail, and `coalesce.rs` shares
//! one exchange between identical requests.

mod coalesce;
mod exchange;
mod flags;
mod health;
mod settings;

pub use flags::Flags;
pub use settings::{nameservers_from_resolv_conf, Keys, Settings};

use crate::metrics::Metrics;
use coalesce::{Coalescer, Leader, Turn};
use health::{FailureLog, Health, Probe};
use hickory_proto::op::{Edns, Message, Query, ResponseCode};
use hickory_proto::rr::{Name, Record, RecordType};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which upstream server a forwarded query tries first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NsPolicy {
    /// SkyDNS `-ns-rotate=true`: the request ID modulo the number of servers.
    #[default]
    RequestId,
    /// Always the first listed (SkyDNS `-ns-rotate=false`; CoreDNS `sequential`).
    Sequential,
    /// Each query the next server (CoreDNS `round_robin`).
    RoundRobin,
    /// A random server (CoreDNS `random`, its default).
    Random,
}

impl std::str::FromStr for NsPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sequential" => Ok(NsPolicy::Sequential),
            "round_robin" | "round-robin" => Ok(NsPolicy::RoundRobin),
            "random" => Ok(NsPolicy::Random),
            _ => Err(format!(
                "invalid policy {s:?} (use sequential, round_robin or random)"
            )),
        }
    }
}

/// Which transport forwarded queries use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NsTransport {
    /// The client's (SkyDNS).
    #[default]
    Client,
    /// Always TCP (CoreDNS `force_tcp`; NodeLocal DNSCache talks TCP).
    Tcp,
    /// Always UDP first, TCP after a truncated reply (CoreDNS `prefer_udp`).
    Udp,
}

impl std::str::FromStr for NsTransport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "client" => Ok(NsTransport::Client),
            "tcp" => Ok(NsTransport::Tcp),
            "udp" => Ok(NsTransport::Udp),
            _ => Err(format!("invalid transport {s:?} (use client, tcp or udp)")),
        }
    }
}

/// How forwarded queries are sent: what one set of [`Upstreams`] keeps.
#[derive(Clone, Debug, PartialEq)]
pub struct Relay {
    /// Bound of one exchange (`-rtimeout`).
    pub timeout: Duration,
    /// The first server to try.
    pub policy: NsPolicy,
    /// UDP, TCP or the client's.
    pub transport: NsTransport,
    /// Consecutive failures that mark a server down (0: never; SkyDNS).
    pub fail_threshold: u32,
    /// Pause between probes of a down server.
    pub probe_interval: Duration,
    /// The name whose NS records a probe asks for (`-ns-probe-name`).
    pub probe_name: Name,
}

impl Relay {
    /// SkyDNS's forwarding: first server by request ID, the client's
    /// transport, no memory of failures.
    pub(crate) fn plain(timeout: Duration) -> Self {
        Relay {
            timeout,
            policy: NsPolicy::RequestId,
            transport: NsTransport::Client,
            fail_threshold: 0,
            probe_interval: Duration::from_millis(500),
            probe_name: Name::root(),
        }
    }
}

/// The client a relay answers: its transport and how large a reply it takes.
#[derive(Clone, Copy, Debug)]
struct Client {
    tcp: bool,
    room: usize,
}

/// The upstream nameservers and how to use them.
#[derive(Clone)]
pub(crate) struct Upstreams {
    servers: Arc<[SocketAddr]>,
    settings: Relay,
    coalescer: Coalescer,
    failures: Arc<FailureLog>,
    health: Option<Arc<Health>>,
    metrics: Option<Arc<Metrics>>,
    next: Arc<AtomicUsize>,
    /// Servers found to send queries back (`-loop=refuse`): never asked.
    refused: Arc<[AtomicBool]>,
}

impl Upstreams {
    /// Upstreams `servers` used as SkyDNS did, each exchange bounded by
    /// `timeout` (stub zones; tests).
    pub(crate) fn new(servers: Vec<SocketAddr>, timeout: Duration) -> Self {
        Self::with(servers, Relay::plain(timeout), None)
    }

    /// Upstreams `servers` used as `settings` say, counted in `metrics`.
    pub(crate) fn with(
        servers: Vec<SocketAddr>,
        settings: Relay,
        metrics: Option<Arc<Metrics>>,
    ) -> Self {
        let health = (settings.fail_threshold > 0 && !servers.is_empty()).then(|| {
            let probe = Probe {
                interval: settings.probe_interval,
                timeout: settings.timeout,
                tcp: settings.transport == NsTransport::Tcp,
                name: settings.probe_name.clone(),
            };
            Health::new(&servers, settings.fail_threshold, probe, metrics.clone())
        });
        Upstreams {
            refused: servers.iter().map(|_| AtomicBool::new(false)).collect(),
            servers: servers.into(),
            settings,
            coalescer: Coalescer::default(),
            failures: Arc::default(),
            health,
            metrics,
            next: Arc::default(),
        }
    }

    /// How the servers are used.
    pub(crate) fn settings(&self) -> &Relay {
        &self.settings
    }

    /// Whether any server is configured.
    pub(crate) fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Whether `other` is this very set (a clone kept by a new
    /// configuration), not merely the same servers.
    pub(crate) fn same_as(&self, other: &Upstreams) -> bool {
        Arc::ptr_eq(&self.servers, &other.servers)
    }

    /// The servers, in the order configured.
    pub(crate) fn servers(&self) -> &[SocketAddr] {
        &self.servers
    }

    /// Never asks `server` again (it sends queries back: a loop).
    pub(crate) fn refuse(&self, server: SocketAddr) {
        for (i, _) in self
            .servers
            .iter()
            .enumerate()
            .filter(|(_, &s)| s == server)
        {
            self.refused[i].store(true, Ordering::Release);
        }
    }

    /// One UDP exchange of a fresh query for `name`/`qtype` with `server`,
    /// outside health and metrics (the loop check's probe): `Ok` when any
    /// reply to it came.
    pub(crate) async fn ask(
        &self,
        server: SocketAddr,
        name: &Name,
        qtype: RecordType,
    ) -> std::io::Result<()> {
        let mut query = Message::query();
        query.metadata.id = rand::random();
        query.metadata.recursion_desired = true;
        query.queries.push(Query::query(name.clone(), qtype));
        let packet = query.to_vec().map_err(std::io::Error::other)?;
        exchange::udp(server, &packet, &query, self.settings.timeout).await?;
        Ok(())
    }

    /// [`Upstreams::relay_within`] for a client that takes any size.
    #[cfg(test)]
    pub(crate) async fn relay(&self, packet: &[u8], tcp: bool) -> Option<Vec<u8>> {
        self.relay_within(packet, tcp, usize::from(u16::MAX)).await
    }

    /// Relays `packet` (a client request that came over TCP if `tcp`, whose
    /// replies may be `room` bytes) to the servers. Identical requests in
    /// flight share the exchange; the reply carries the caller's ID.
    pub(crate) async fn relay_within(
        &self,
        packet: &[u8],
        tcp: bool,
        room: usize,
    ) -> Option<Vec<u8>> {
        if packet.len() < 12 || self.servers.is_empty() {
            return None;
        }
        let id = [packet[0], packet[1]];
        let mut key = packet[2..].to_vec();
        key.push(u8::from(tcp));
        key.extend_from_slice(&u32::try_from(room).unwrap_or(u32::MAX).to_be_bytes());
        let mut reply = match self.coalescer.join(&key) {
            Turn::Follower(rx) => rx.await.ok().flatten()?,
            Turn::Leader => {
                // Followers are released even if this future is dropped.
                let mut leader = Leader {
                    coalescer: &self.coalescer,
                    key: &key,
                    reply: None,
                };
                let client = Client { tcp, room };
                leader.reply = self.attempts(packet, u16::from_be_bytes(id), client).await;
                leader.reply.clone()?
            }
        };
        reply[..2].copy_from_slice(&id);
        Some(reply)
    }

    /// The servers in the order this query tries them: the policy's
    /// rotation, the servers marked down moved to the end (asked only when
    /// every server up before them failed), those the loop check refused
    /// left out.
    fn plan(&self, id: u16) -> Vec<usize> {
        let n = self.servers.len();
        let first = match self.settings.policy {
            NsPolicy::RequestId => usize::from(id) % n,
            NsPolicy::Sequential => 0,
            NsPolicy::RoundRobin => self.next.fetch_add(1, Ordering::Relaxed) % n,
            NsPolicy::Random => rand::random_range(0..n),
        };
        let rotation = (0..n)
            .map(|k| (first + k) % n)
            .filter(|&i| !self.refused[i].load(Ordering::Acquire));
        match &self.health {
            Some(health) => {
                let (mut up, down): (Vec<usize>, Vec<usize>) =
                    rotation.partition(|&i| health.is_up(i));
                if up.is_empty() && !down.is_empty() {
                    self.count(|m| m.all_upstreams_down());
                }
                up.extend(down);
                up
            }
            None => rotation.collect(),
        }
    }

    /// SkyDNS's n+1 attempts over the plan (the first server is asked
    /// again last); the first reply wins, SERVFAIL included (as SkyDNS and
    /// CoreDNS; it still counts against that server's health).
    async fn attempts(&self, packet: &[u8], id: u16, client: Client) -> Option<Vec<u8>> {
        let query = Message::from_vec(packet).ok()?;
        let plan = self.plan(id);
        if plan.is_empty() {
            return None; // every server refused: a loop through each
        }
        for attempt in 0..=plan.len() {
            let i = plan[attempt % plan.len()];
            if let Some(reply) = self.attempt(i, packet, &query, client).await {
                return Some(reply);
            }
        }
        self.failures.failed(&self.servers);
        None
    }

    /// One server asked, over UDP and then TCP when the UDP reply is
    /// truncated and the client has room for more; its health and metrics
    /// updated.
    async fn attempt(
        &self,
        i: usize,
        packet: &[u8],
        query: &Message,
        client: Client,
    ) -> Option<Vec<u8>> {
        let server = self.servers[i];
        let tcp = match self.settings.transport {
            NsTransport::Client => client.tcp,
            NsTransport::Tcp => true,
            NsTransport::Udp => false,
        };
        let timeout = self.settings.timeout;
        let start = Instant::now();
        self.count(|m| m.upstream_request(server));
        let mut result = if tcp {
            exchange::tcp(server, packet, query, timeout).await
        } else {
            exchange::udp(server, packet, query, timeout).await
        };
        if let Ok(reply) = &result {
            let truncated = reply.get(2).is_some_and(|b| b & 0x02 != 0);
            if !tcp && truncated && client.room > reply.len() {
                // Truncated: the whole answer over TCP; failing that, the
                // truncated one (the client may ask over TCP itself).
                match exchange::tcp(server, packet, query, timeout).await {
                    Ok(full) => result = Ok(full),
                    Err(error) => {
                        tracing::debug!(%server, %error, "TCP retry of a truncated reply failed")
                    }
                }
            }
        }
        match result {
            Ok(reply) => {
                self.count(|m| m.upstream_reply(server, &reply, start.elapsed()));
                if health::is_server_failure(&reply) {
                    self.failed(i, "servfail");
                } else if let Some(health) = &self.health {
                    health.succeeded(i);
                }
                Some(reply)
            }
            Err(error) => {
                tracing::debug!(%server, %error, "upstream exchange failed");
                self.failed(i, exchange::failure_reason(&error));
                None
            }
        }
    }

    fn failed(&self, i: usize, reason: &'static str) {
        self.count(|m| m.upstream_failure(self.servers[i], reason));
        if let Some(health) = &self.health {
            health.failed(i);
        }
    }

    fn count(&self, f: impl FnOnce(&Metrics)) {
        if let Some(m) = &self.metrics {
            f(m);
        }
    }

    /// SkyDNS `Lookup`: a fresh query for `name`/`qtype` with EDNS0
    /// (`bufsize`, `dnssec_ok`), first server chosen by the policy.
    /// Only a NOERROR reply counts; its TTLs are set to `ttl`.
    pub(crate) async fn lookup(
        &self,
        name: &Name,
        qtype: RecordType,
        bufsize: u16,
        dnssec_ok: bool,
        ttl: u32,
    ) -> Option<Vec<Record>> {
        if self.servers.is_empty() {
            return None;
        }
        let mut query = Message::query();
        query.metadata.recursion_desired = true;
        query.queries.push(Query::query(name.clone(), qtype));
        let mut edns = Edns::new();
        edns.set_max_payload(bufsize.max(512));
        edns.set_dnssec_ok(dnssec_ok);
        query.edns = Some(edns);
        let packet = query.to_vec().ok()?;
        let client = Client {
            tcp: false,
            room: usize::from(bufsize.max(512)),
        };
        let reply = self.attempts(&packet, query.metadata.id, client).await?;
        let reply = Message::from_vec(&reply).ok()?;
        if reply.metadata.response_code != ResponseCode::NoError {
            return None;
        }
        let mut answers = reply.answers;
        for r in &mut answers {
            r.ttl = ttl;
        }
        Some(answers)
    }
}

#[cfg(test)]
mod tests;
