//! The asynchronous half of the pipeline: requests that wait on upstream
//! servers (names outside the domain, stub zones, lookups of CNAME or SRV
//! targets outside the domain) or on etcd (a hidden v2 path not read yet). When
//! the upstreams fail, or the path cannot be read, the client gets SERVFAIL.

use super::{base_reply, unix_now, Engine, Pending, Request};
use crate::answer::{self, Lookups};
use crate::store::paths::PathRead;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{Name, Record, RecordType};
use std::net::SocketAddr;
use std::sync::Arc;

/// Most rounds of internal lookups for one answer.
const LOOKUP_ROUNDS: usize = 4;

/// Which upstream work a pending request needs.
pub(super) enum Route {
    /// Relay to the upstream resolvers.
    Forward,
    /// Relay to these stub-zone servers.
    Stub(Vec<SocketAddr>),
    /// Authoritative answer needing internal lookups.
    Lookups,
    /// Authoritative answer needing this hidden etcd v2 path read first.
    HiddenPath(String),
    /// An autopath walk waiting on upstream work for one of its names.
    Autopath(Box<Walk>),
}

/// An autopath walk (`super::autopath`) waiting on upstream work for one of
/// its names.
pub(super) struct Walk {
    /// The name being tried, waiting for its answer.
    pub(super) step: Box<Pending>,
    /// The name the CNAME points to.
    pub(super) target: Name,
    /// The asked name's own reply (NXDOMAIN), sent when the walk finds
    /// nothing (`None` on a walk that went straight to its step: made then).
    pub(super) first: Option<Message>,
}

impl Engine {
    /// Completes a pending request; `None` means "send nothing".
    pub(super) async fn resolve(self: &Arc<Self>, pending: Pending) -> Option<Vec<u8>> {
        let Pending { request, route, .. } = pending;
        match route {
            Route::Forward => self.forward(&request).await,
            Route::Stub(servers) => self.stub_forward(&request, servers).await,
            Route::Lookups => self.answer_with_lookups(&request).await,
            Route::Autopath(walk) => self.finish_walk(&request, *walk).await,
            Route::HiddenPath(path) => {
                let timeout = self.settings.forward.relay.timeout;
                match self.paths.read(path, timeout).await {
                    PathRead::Read | PathRead::Absent => self.answer_with_lookups(&request).await,
                    PathRead::Failed => self.server_failure(&request),
                }
            }
        }
    }

    pub(super) fn server_failure(&self, r: &Request) -> Option<Vec<u8>> {
        let mut reply = base_reply(&r.message);
        reply.metadata.response_code = ResponseCode::ServFail;
        self.send(r, reply)
    }

    async fn answer_with_lookups(&self, r: &Request) -> Option<Vec<u8>> {
        let Some(snapshot) = self.snapshot.load_full() else {
            return self.server_failure(r);
        };
        let mut lookups = Lookups::new();
        for round in 0..=LOOKUP_ROUNDS {
            let answer = answer::authoritative(&self.zone, &snapshot, &r.q, unix_now(), &lookups);
            let missing = lookups.take_missing();
            if missing.is_empty() {
                let reply = self.finish(base_reply(&r.message), r, answer, &snapshot);
                return self.send(r, reply);
            }
            if round == LOOKUP_ROUNDS - 1 {
                lookups.settle();
            }
            let fetches = missing.into_iter().map(|(name, qtype)| async move {
                let result = self.lookup(r, &name, qtype).await;
                (name, qtype, result)
            });
            for (name, qtype, result) in futures::future::join_all(fetches).await {
                lookups.insert(name, qtype, result);
            }
        }
        None
    }

    /// SkyDNS `Lookup` for one target outside the domain.
    async fn lookup(&self, r: &Request, name: &Name, qtype: RecordType) -> Option<Vec<Record>> {
        if name.iter().count() < self.settings.forward.ndots {
            return None;
        }
        self.metrics.external("lookup");
        let bufsize = r.message.edns.as_ref().map_or(512, |e| e.max_payload());
        let ttl = self.settings.cache.max_ttl_secs();
        self.upstreams
            .lookup(name, qtype, bufsize, r.dnssec_ok, ttl)
            .await
    }
}
