//! Which upstream servers answer, remembered between queries (CoreDNS
//! `forward`'s `max_fails` and `health_check`; SkyDNS had no memory): a server
//! that keeps failing is marked down, tried last and probed until it answers.
//! Failed forwards are logged here too ([`FailureLog`]).

use super::exchange;
use crate::metrics::Metrics;
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How a down server is probed.
#[derive(Clone, Debug)]
pub(super) struct Probe {
    /// Pause between probes.
    pub interval: Duration,
    /// Bound of one probe exchange.
    pub timeout: Duration,
    /// Probe over TCP (`-ns-transport=tcp`) instead of UDP.
    pub tcp: bool,
    /// The name whose NS records a probe asks for (`-ns-probe-name`).
    pub name: Name,
}

/// The health of every configured upstream server.
pub(super) struct Health {
    servers: Box<[ServerState]>,
    threshold: u32,
    probe: Probe,
    metrics: Option<Arc<Metrics>>,
    /// The generation the metrics know this configuration's health by.
    generation: u64,
}

struct ServerState {
    addr: SocketAddr,
    fails: AtomicU32,
    down: AtomicBool,
    probing: AtomicBool,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let down: Vec<_> = (self.servers.iter())
            .filter(|s| s.down.load(Ordering::Relaxed))
            .map(|s| s.addr)
            .collect();
        f.debug_struct("Health").field("down", &down).finish()
    }
}

impl Health {
    /// Every server up, marked down after `threshold` consecutive failures.
    pub(super) fn new(
        servers: &[SocketAddr],
        threshold: u32,
        probe: Probe,
        metrics: Option<Arc<Metrics>>,
    ) -> Arc<Self> {
        let generation = metrics
            .as_ref()
            .map_or(0, |m| m.upstreams_configured(servers));
        Arc::new(Health {
            servers: (servers.iter())
                .map(|&addr| ServerState {
                    addr,
                    fails: AtomicU32::new(0),
                    down: AtomicBool::new(false),
                    probing: AtomicBool::new(false),
                })
                .collect(),
            threshold: threshold.max(1),
            probe,
            metrics,
            generation,
        })
    }

    /// Whether server `i` is up (not marked down).
    pub(super) fn is_up(&self, i: usize) -> bool {
        !self.servers[i].down.load(Ordering::Relaxed)
    }

    /// Server `i` answered: its failures start again from zero.
    pub(super) fn succeeded(&self, i: usize) {
        let s = &self.servers[i];
        s.fails.store(0, Ordering::Relaxed);
        if s.down.swap(false, Ordering::AcqRel) {
            tracing::info!(upstream = %s.addr, "upstream nameserver answers again; back in use");
            if let Some(m) = &self.metrics {
                m.upstream_up(self.generation, s.addr, true);
            }
        }
    }

    /// Server `i` failed; at the threshold it is marked down and probed.
    pub(super) fn failed(self: &Arc<Self>, i: usize) {
        let s = &self.servers[i];
        let fails = s.fails.fetch_add(1, Ordering::AcqRel).saturating_add(1);
        if fails < self.threshold || s.down.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::warn!(
            upstream = %s.addr,
            failures = fails,
            probe_every = ?self.probe.interval,
            "upstream nameserver marked down; tried last while another answers, probed until it answers"
        );
        if let Some(m) = &self.metrics {
            m.upstream_up(self.generation, s.addr, false);
        }
        if !s.probing.swap(true, Ordering::AcqRel) {
            tokio::spawn(probe_until_up(Arc::downgrade(self), i, self.probe.clone()));
        }
    }
}

/// Probes server `i` until it answers, is marked up by a real query, or
/// the configuration that knew it is gone.
async fn probe_until_up(health: Weak<Health>, i: usize, probe: Probe) {
    loop {
        tokio::time::sleep(probe.interval).await;
        let Some(h) = health.upgrade() else { return };
        if !h.servers[i].down.load(Ordering::Acquire) {
            if h.stop_probing(i) {
                return;
            }
            continue;
        }
        let addr = h.servers[i].addr;
        drop(h);
        let answered = probe_once(addr, &probe).await;
        let Some(h) = health.upgrade() else { return };
        if !answered {
            if let Some(m) = &h.metrics {
                m.health_check_failed(addr);
            }
        }
        if answered {
            h.succeeded(i);
            if h.stop_probing(i) {
                return;
            }
        }
    }
}

impl Health {
    /// Ends the probing of server `i`, unless it was marked down again
    /// meanwhile (by failures that found the probe still running, so started
    /// none): then the probe goes on.
    fn stop_probing(&self, i: usize) -> bool {
        let s = &self.servers[i];
        s.probing.store(false, Ordering::Release);
        !s.down.load(Ordering::Acquire) || s.probing.swap(true, Ordering::AcqRel)
    }
}

/// Asks `server` for the probe name's NS; any matching reply but SERVFAIL
/// counts.
async fn probe_once(server: SocketAddr, probe: &Probe) -> bool {
    let mut query = Message::query();
    query.metadata.id = rand::random();
    query
        .queries
        .push(Query::query(probe.name.clone(), RecordType::NS));
    let Ok(packet) = query.to_vec() else {
        return false;
    };
    let reply = if probe.tcp {
        exchange::tcp(server, &packet, &query, probe.timeout).await
    } else {
        exchange::udp(server, &packet, &query, probe.timeout).await
    };
    reply.is_ok_and(|bytes| !is_server_failure(&bytes))
}

/// Whether an encoded reply says SERVFAIL (rcode 2).
pub(super) fn is_server_failure(reply: &[u8]) -> bool {
    reply.get(3).is_some_and(|b| b & 0x0f == 2)
}

/// How often failed forwards are logged: a dead upstream under load would
/// otherwise write one line per query (hundreds of thousands a minute).
const FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Logs failed forwards at most once per [`FAILURE_LOG_INTERVAL`], with
/// how many failed since the last line.
#[derive(Debug, Default)]
pub(super) struct FailureLog {
    /// When the last line was written, and failures since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl FailureLog {
    pub(super) fn failed(&self, servers: &[SocketAddr]) {
        if let Some(failed) = self.count(Instant::now()) {
            tracing::warn!(
                ?servers,
                failed,
                "failure to forward request (count since the last such line, at most one per 10s)"
            );
        }
    }

    /// Counts one failure at `now`; `Some(failures since the last line)`
    /// when a line is due.
    pub(super) fn count(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.1 += 1;
        let due = state
            .0
            .is_none_or(|last| now.duration_since(last) >= FAILURE_LOG_INTERVAL);
        due.then(|| {
            state.0 = Some(now);
            std::mem::take(&mut state.1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe of a server that is up again ends; one whose server was
    /// marked down again meanwhile (by failures that found it running, so
    /// started no other) goes on.
    #[tokio::test(start_paused = true)]
    async fn a_probe_ends_once_its_server_is_up_unless_it_is_down_again() {
        let probe = Probe {
            interval: Duration::from_secs(3600),
            timeout: Duration::from_secs(1),
            tcp: false,
            name: Name::root(),
        };
        let health = Health::new(&["127.0.0.1:9".parse().unwrap()], 1, probe, None);
        let probing = |h: &Health| h.servers[0].probing.load(Ordering::Acquire);
        health.failed(0);
        assert!(!health.is_up(0) && probing(&health));
        health.succeeded(0);
        assert!(health.stop_probing(0), "up: the probe ends");
        assert!(!probing(&health));
        health.servers[0].probing.store(true, Ordering::Release);
        health.succeeded(0);
        health.failed(0);
        assert!(!health.stop_probing(0), "down again: the probe goes on");
        assert!(probing(&health));
    }

    /// A failed forward is logged at once with the servers asked; the next
    /// ones within 10 s are counted into the line after.
    #[test]
    fn a_failed_forward_is_logged_with_the_servers_asked() {
        let log = FailureLog::default();
        let servers: [SocketAddr; 1] = ["127.0.0.1:53".parse().unwrap()];
        let text = logging::Captured::plain_lines_of(|| {
            log.failed(&servers);
            log.failed(&servers);
        });
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains("failure to forward request")
                && text.contains("servers=[127.0.0.1:53]")
                && text.contains("failed=1"),
            "{text}"
        );
    }
}
