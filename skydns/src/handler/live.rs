//! The handler the listeners share, and its configuration swapped live:
//! [`Handler`] holds the current [`Engine`], and [`Handler::reconfigure`]
//! builds a new one when the etcd config key changes, keeping the upstreams'
//! health and the response cache when their settings did not change.

use super::{Engine, Outcome, Pending, Settings, SharedSnapshot, Transport};
use crate::answer::Zone;
use crate::forward::Upstreams;
use crate::loop_check::LoopCheck;
use crate::metrics::Metrics;
use crate::reply_cache::ReplyCache;
use crate::response_cache::{Clock, ResponseCache};
use crate::store::paths::PathReader;
use crate::stub::StubZones;
use arc_swap::ArcSwap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;
use tokio::sync::Semaphore;

/// Answers DNS requests from the shared snapshot.
#[derive(Clone)]
pub struct Handler {
    current: Arc<ArcSwap<Engine>>,
}

impl Handler {
    /// A handler for `zone` reading `snapshot` (from a store that lists
    /// every key: etcd v3, or tests).
    pub fn new(
        zone: Zone,
        snapshot: SharedSnapshot,
        settings: Settings,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self::reading_paths(zone, snapshot, settings, metrics, PathReader::default())
    }

    /// A handler that asks `paths` for the hidden paths the snapshot lacks
    /// (an etcd v2 store).
    pub fn reading_paths(
        zone: Zone,
        snapshot: SharedSnapshot,
        settings: Settings,
        metrics: Arc<Metrics>,
        paths: PathReader,
    ) -> Self {
        let max_pending = settings.forward.max_pending;
        let forward_slots = (max_pending > 0).then(|| Arc::new(Semaphore::new(max_pending)));
        let shared = Shared {
            snapshot,
            metrics,
            paths,
            forward_slots,
            loop_check: Arc::default(),
            clock: Clock::default(),
        };
        let engine = Engine::build(zone, settings, shared, None);
        Handler {
            current: Arc::new(ArcSwap::from_pointee(engine)),
        }
    }

    /// This handler with its response cache on `clock` (tests move it by hand).
    #[cfg(test)]
    pub(crate) fn on_clock(self, clock: Clock) -> Self {
        let engine = self.current.load_full();
        let shared = Shared {
            clock,
            ..engine.shared()
        };
        let engine = Engine::build(engine.zone.clone(), engine.settings.clone(), shared, None);
        Handler {
            current: Arc::new(ArcSwap::from_pointee(engine)),
        }
    }

    /// Runs the handler with `zone` and `settings` from now on; requests
    /// under way finish with the configuration they started with.
    pub fn reconfigure(&self, zone: Zone, mut settings: Settings) {
        let current = self.current.load_full();
        if settings.query_log == current.settings.query_log {
            // The same query log goes on counting for its sampling.
            settings.query_log.clone_from(&current.settings.query_log);
        }
        let next = Engine::build(zone, settings, current.shared(), Some(&current));
        self.current.store(Arc::new(next));
    }

    /// Checks the upstreams for loops now (the listeners are open) and after
    /// each change of them (`-loop`).
    pub fn check_loops(&self, check: Arc<LoopCheck>) {
        let engine = self.current.load_full();
        if engine.loop_check.set(check.clone()).is_ok() && !engine.settings.forward.no_rec {
            check.start(&engine.upstreams);
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> Settings {
        self.current.load().settings.clone()
    }

    /// The metrics this handler counts in.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.current.load().metrics.clone()
    }

    /// The configuration in force (tests look inside).
    #[cfg(test)]
    pub(super) fn engine(&self) -> Arc<Engine> {
        self.current.load_full()
    }

    /// Handles one request, completing any upstream work.
    pub async fn handle_async(&self, packet: &[u8], transport: Transport) -> Option<Vec<u8>> {
        self.handle_async_from(packet, transport, None).await
    }

    /// [`Handler::handle_async`] for a request from `client` (autopath
    /// needs to know who asks).
    pub async fn handle_async_from(
        &self,
        packet: &[u8],
        transport: Transport,
        client: Option<SocketAddr>,
    ) -> Option<Vec<u8>> {
        match self.handle_from(packet, transport, client) {
            Outcome::Done(reply) => reply,
            Outcome::Pending(pending) => self.resolve(*pending).await,
        }
    }

    /// Handles one request as far as memory allows.
    pub fn handle(&self, packet: &[u8], transport: Transport) -> Outcome {
        self.handle_from(packet, transport, None)
    }

    /// [`Handler::handle`] for a request from `client`.
    pub fn handle_from(
        &self,
        packet: &[u8],
        transport: Transport,
        client: Option<SocketAddr>,
    ) -> Outcome {
        self.handle_at(packet, transport, client, Instant::now())
    }

    /// [`Handler::handle_from`] for a request that came at `start` (a UDP
    /// reader reads the clock once between requests, for both).
    pub fn handle_at(
        &self,
        packet: &[u8],
        transport: Transport,
        client: Option<SocketAddr>,
        start: Instant,
    ) -> Outcome {
        // A guard, not a clone: no shared counter touched per query.
        Engine::handle(&self.current.load(), packet, transport, client, start)
    }

    /// Completes a pending request; `None` means "send nothing".
    pub async fn resolve(&self, pending: Pending) -> Option<Vec<u8>> {
        let engine = pending.engine.clone();
        engine.resolve(pending).await
    }
}

/// What every configuration shares.
struct Shared {
    snapshot: SharedSnapshot,
    metrics: Arc<Metrics>,
    paths: PathReader,
    forward_slots: Option<Arc<Semaphore>>,
    /// Set once the loop check starts (`-loop`).
    loop_check: Arc<OnceLock<Arc<LoopCheck>>>,
    clock: Clock,
}

impl Engine {
    /// What this configuration shares with every other.
    fn shared(&self) -> Shared {
        Shared {
            snapshot: self.snapshot.clone(),
            metrics: self.metrics.clone(),
            paths: self.paths.clone(),
            forward_slots: self.forward_slots.clone(),
            loop_check: self.loop_check.clone(),
            clock: self.clock.clone(),
        }
    }

    /// A configuration; `previous` lends its upstreams (their health) and
    /// its response cache when their settings are the same.
    fn build(zone: Zone, settings: Settings, shared: Shared, previous: Option<&Engine>) -> Engine {
        let forward = &settings.forward;
        // Same servers, same settings: their health and coalescing go on.
        let same_servers =
            previous.filter(|p| p.settings.forward.nameservers == forward.nameservers);
        let upstreams = match same_servers {
            Some(p) if p.upstreams.settings() == &forward.relay => p.upstreams.clone(),
            _ => Upstreams::with(
                forward.nameservers.clone(),
                forward.relay.clone(),
                Some(shared.metrics.clone()),
            ),
        };
        // New upstreams, or forwarding just turned on: checked for loops
        // (with -no-rec nothing is forwarded, so nothing can loop).
        let checked = previous.filter(|p| !p.settings.forward.no_rec);
        let unchanged = checked.is_some_and(|p| p.upstreams.same_as(&upstreams));
        if let Some(check) = shared.loop_check.get() {
            if !forward.no_rec && !unchanged {
                check.start(&upstreams);
            }
        }
        // New servers may answer otherwise (the old ones may be why they
        // changed): their answers start from an empty cache.
        let wanted = (settings.cache.capacity > 0).then_some(&settings.cache);
        let cache = match same_servers.and_then(|p| p.cache.as_ref()) {
            Some(cache) if wanted == Some(cache.settings()) => Some(cache.clone()),
            _ => wanted.map(|s| Arc::new(ResponseCache::with(s.clone()))),
        };
        let stub_dir = StubZones::dir(&zone);
        let local_dns = (settings.local.as_ref()).map(|_| format!("local.dns.{}", zone.domain));
        Engine {
            zone,
            snapshot: shared.snapshot,
            settings,
            upstreams,
            cache,
            clock: shared.clock,
            stubs: Mutex::new((i64::MIN, Arc::default())),
            stub_dir,
            local_dns,
            replies: ReplyCache::default(),
            walks: Default::default(),
            metrics: shared.metrics,
            paths: shared.paths,
            forward_slots: shared.forward_slots,
            loop_check: shared.loop_check,
        }
    }
}
