//! Forwarding loop detection (`-loop`), as CoreDNS's `loop` plugin: a query
//! for a random name goes through each upstream at start and after each
//! change of the upstreams; the handler's step 3 ([`LoopCheck::came_back`])
//! recognises it when an upstream sends it back. docs/skydns.md#loop-detection.

use crate::forward::Upstreams;
use crate::metrics::Metrics;
use hickory_proto::rr::{Name, RecordType};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod flags;
pub use flags::Flags;

#[cfg(test)]
mod tests;

/// How long an upstream is asked before its check gives up (CoreDNS: 30 s).
const CHECK_WINDOW: Duration = Duration::from_secs(30);
/// The pause after a failed probe exchange (CoreDNS: 1 s).
const RETRY_PAUSE: Duration = Duration::from_secs(1);
/// How long a probe's name is still recognised after its reply came: the
/// query may still be on its way back through other replicas (CoreDNS: 2 s).
const GRACE: Duration = Duration::from_secs(2);

/// What a detected loop does (`-loop`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// No check (SkyDNS).
    #[default]
    Off,
    /// Log it and exit 1 (CoreDNS's `loop`).
    Exit,
    /// Log it and stop forwarding to that upstream until the upstreams change.
    Refuse,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Mode::Off),
            "exit" => Ok(Mode::Exit),
            "refuse" => Ok(Mode::Refuse),
            _ => Err(format!("invalid loop mode {s:?} (use off, exit or refuse)")),
        }
    }
}

/// A probe on its way: the upstream it was sent through, and the set of
/// upstreams that upstream belongs to.
struct Probe {
    server: SocketAddr,
    upstreams: Upstreams,
}

/// The probes under way and what a detected loop does.
pub struct LoopCheck {
    mode: Mode,
    /// Probe names (lowercase, fully qualified) to their upstream.
    probes: Mutex<HashMap<String, Probe>>,
    /// The upstream a loop was found through, in exit mode.
    fatal: Mutex<Option<SocketAddr>>,
    /// Cancelled when a loop is found in exit mode.
    exit: CancellationToken,
    metrics: Arc<Metrics>,
}

impl LoopCheck {
    /// A check in `mode` (not [`Mode::Off`]) that cancels `exit` when a
    /// loop is found in exit mode.
    pub fn new(mode: Mode, exit: CancellationToken, metrics: Arc<Metrics>) -> Self {
        LoopCheck {
            mode,
            probes: Mutex::default(),
            fatal: Mutex::default(),
            exit,
            metrics,
        }
    }

    /// The upstream a loop was found through, if the process must exit.
    pub fn fatal(&self) -> Option<SocketAddr> {
        *lock(&self.fatal)
    }

    /// Sends a probe through each of `upstreams`, in the background.
    pub(crate) fn start(self: &Arc<Self>, upstreams: &Upstreams) {
        for &server in upstreams.servers() {
            let name = random_name();
            let probe = Probe {
                server,
                upstreams: upstreams.clone(),
            };
            lock(&self.probes).insert(name.to_ascii(), probe);
            tokio::spawn(Arc::clone(self).probe(upstreams.clone(), server, name));
        }
    }

    /// One upstream asked for `name` until it replies or the window ends;
    /// then, after the grace, the result counted unless the probe came back.
    async fn probe(self: Arc<Self>, upstreams: Upstreams, server: SocketAddr, name: Name) {
        let deadline = Instant::now() + CHECK_WINDOW;
        let key = name.to_ascii();
        let result = loop {
            match upstreams.ask(server, &name, RecordType::HINFO).await {
                Ok(()) => break "clear",
                Err(_) if !lock(&self.probes).contains_key(&key) => return, // it came back
                Err(error) if Instant::now() + RETRY_PAUSE < deadline => {
                    tracing::debug!(upstream = %server, %error, "loop check: no reply yet");
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Err(_) => break "unanswered",
            }
        };
        tokio::time::sleep(GRACE).await;
        if lock(&self.probes).remove(&key).is_some() {
            tracing::info!(upstream = %server, result, "loop check done");
            self.metrics.loop_check(result);
        }
    }

    /// Whether a query for `name`/`qtype` is a probe of ours that an
    /// upstream sent back: then the loop is handled (logged, and exit or
    /// refuse) and its upstream returned.
    pub(crate) fn came_back(&self, name: &str, qtype: RecordType) -> Option<SocketAddr> {
        if qtype != RecordType::HINFO {
            return None;
        }
        let probe = lock(&self.probes).remove(name)?;
        let upstream = probe.server;
        self.metrics.loop_check("loop");
        match self.mode {
            Mode::Exit => {
                tracing::error!(
                    %upstream,
                    probe = name,
                    "forwarding loop detected: the upstream sends queries back to skydns; exiting (-loop=exit; docs/troubleshooting.md#a-forwarding-loop)"
                );
                *lock(&self.fatal) = Some(upstream);
                self.exit.cancel();
            }
            Mode::Refuse | Mode::Off => {
                tracing::error!(
                    %upstream,
                    probe = name,
                    "forwarding loop detected: the upstream sends queries back to skydns; not forwarding to it until the upstreams change (-loop=refuse)"
                );
                probe.upstreams.refuse(upstream);
            }
        }
        Some(upstream)
    }
}

/// `<random>.<random>.`, as CoreDNS's loop plugin names its probe.
fn random_name() -> Name {
    let label = || (rand::random::<u64>() >> 2).to_string();
    Name::from_ascii(format!("{}.{}.", label(), label())).expect("digits make a valid name")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
