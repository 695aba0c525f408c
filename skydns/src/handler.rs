//! One DNS request in, one reply out: `Engine::handle` passes a query through a
//! fixed chain of steps (reply cache, decoding, loop probes, `-local`, autopath, route, then
//! the reply or the wait on upstreams), and each step answers or passes it on.
//! docs/architecture.md draws the chain and says where a new feature goes.

mod autopath;
mod forwarding;
mod live;
mod pending;
mod request;
mod route;
mod secure;
mod settings;

pub use live::Handler;
pub use settings::Settings;

use request::Request;
use route::{base_reply, Route};

use crate::answer::{Question, Zone};
use crate::forward::Upstreams;
use crate::metrics::Metrics;
use crate::query_log::{Asked, Entry, Source};
use crate::reply_cache::{Computed, PlainQuery, QuestionKey, ReplyCache};
use crate::response::fit_reporting;
use crate::response_cache::{Clock, ResponseCache};
use crate::snapshot::{record_reads, Read, SharedSnapshot, Snapshot};
use crate::store::paths::PathReader;
use crate::stub::StubZones;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use std::cell::Cell;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Which transport a request came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// UDP: replies are limited by the client's buffer size.
    Udp,
    /// TCP: replies up to 65535 bytes.
    Tcp,
}

/// What [`Handler::handle`] produced.
pub enum Outcome {
    /// The reply to send (`None`: send nothing).
    Done(Option<Vec<u8>>),
    /// Needs upstream servers; finish with [`Handler::resolve`].
    Pending(Box<Pending>),
}

/// A request waiting for upstream answers.
pub struct Pending {
    /// The configuration the request was routed with.
    engine: Arc<Engine>,
    request: Request,
    route: pending::Route,
    /// Its place among the pending forwards, released when it is done.
    _slot: Option<OwnedSemaphorePermit>,
}

/// One configuration of the handler and what it keeps between requests;
/// [`Handler`] holds the current one and swaps it when the etcd config key
/// changes. The snapshot, metrics, path reader and forward slots are shared
/// by every configuration; the rest is made for each. Requests are answered
/// by its methods, on the configuration current when they arrived.
struct Engine {
    zone: Zone,
    snapshot: SharedSnapshot,
    settings: Settings,
    upstreams: Upstreams,
    cache: Option<Arc<ResponseCache>>,
    /// The response cache's time.
    clock: Clock,
    stubs: Mutex<(i64, Arc<StubZones>)>,
    /// [`StubZones::dir`]: every answer depends on it when stub zones are on.
    stub_dir: String,
    /// `local.dns.<domain>`, with `-local` (made once, not per query).
    local_dns: Option<String>,
    replies: ReplyCache,
    /// Which step answered each autopath walk on the current records.
    walks: crate::autopath::WalkMemo,
    metrics: Arc<Metrics>,
    /// Reads hidden etcd v2 paths on demand (disabled for v3).
    paths: PathReader,
    /// Places for requests waiting on upstream servers (`None`: no limit).
    forward_slots: Option<Arc<Semaphore>>,
    /// The loop check, once started (`-loop`).
    loop_check: Arc<std::sync::OnceLock<Arc<crate::loop_check::LoopCheck>>>,
}

impl Engine {
    /// Handles one request as far as memory allows: the steps of a query in
    /// order (docs/architecture.md draws them). A step answers (`Break`) or
    /// passes the request on, changed or not.
    fn handle(
        self: &Arc<Self>,
        packet: &[u8],
        transport: Transport,
        client: Option<SocketAddr>,
        start: Instant,
    ) -> Outcome {
        // A guard, not a clone, until the reply cache has missed: no shared
        // counter touched on the hot path.
        let snapshot = self.snapshot.load();
        // 1. The reply cache: encoded replies, before any decoding.
        let replay = match self.replay(packet, transport, client, snapshot.as_deref(), start) {
            ControlFlow::Break(outcome) => return outcome,
            ControlFlow::Continue(replay) => replay,
        };
        let snapshot = arc_swap::Guard::into_inner(snapshot);
        // 2. Decode and check (FORMERR, NOTIMP, BADVERS).
        let mut request = match self.decode(packet, transport, client, start) {
            ControlFlow::Break(outcome) => return outcome,
            ControlFlow::Continue(request) => request,
        };
        // 3. A loop check's probe that an upstream sent back ends here.
        if let ControlFlow::Break(outcome) = self.came_back(&request) {
            return outcome;
        }
        // 4. `-local` changes the question.
        self.local_name(&mut request.q);
        // 5. Autopath walks a pod's search list, routing each name.
        let request = match self.autopath(request, snapshot.as_ref()) {
            ControlFlow::Break(outcome) => return outcome,
            ControlFlow::Continue(request) => request,
        };
        // 6. The route: refused, stub zone, reverse, forwarded, local records.
        let (route, reads) = record_reads(|| self.route(&request, snapshot.clone()));
        // 7. The reply now, kept for step 1; or 8. the wait on upstreams.
        self.conclude(request, route, replay, reads, snapshot.as_deref())
    }

    /// Step 1: a reply kept encoded for this very packet, if the records
    /// it read have not changed since; else what step 6 keeps it under.
    fn replay(
        &self,
        packet: &[u8],
        transport: Transport,
        client: Option<SocketAddr>,
        snapshot: Option<&Snapshot>,
        start: Instant,
    ) -> ControlFlow<Outcome, Replay> {
        let tcp = transport == Transport::Tcp;
        let plain = QuestionKey::parse(packet, tcp);
        let generation = snapshot.map_or(-1, |s| s.generation());
        if let Some(s) = snapshot {
            self.replies
                .advance(generation, |since| s.touched_since(since));
        }
        let hour = hour_at(start);
        if let Some(q) = &plain {
            if let Some(reply) = self.replies.get(q, generation, hour) {
                let question = q.key.question();
                let at = question.len().saturating_sub(4);
                self.metrics.request(&crate::metrics::Asked {
                    tcp,
                    ipv6: request::is_ipv6(client),
                    dnssec_ok: q.dnssec_ok,
                    qtype: question
                        .get(at..at + 2)
                        .map_or(0, |t| u16::from_be_bytes([t[0], t[1]])),
                    len: packet.len(),
                });
                self.metrics.reply(tcp, &reply, start.elapsed(), false);
                if let Some(log) = &self.settings.query_log {
                    log.note(&Entry {
                        client,
                        tcp,
                        asked: Asked::Wire(q.key.question()),
                        reply: &reply,
                        elapsed: start.elapsed(),
                        source: Source::Cached,
                    });
                }
                return ControlFlow::Break(Outcome::Done(Some(reply)));
            }
        }
        ControlFlow::Continue(Replay {
            plain,
            generation,
            hour,
        })
    }

    /// Step 3: a probe of the loop check that came back is answered
    /// REFUSED (ending the loop), and the loop handled as `-loop` says.
    fn came_back(&self, request: &Request) -> ControlFlow<Outcome> {
        let Some(check) = self.loop_check.get() else {
            return ControlFlow::Continue(());
        };
        if check.came_back(&request.q.name, request.q.qtype).is_none() {
            return ControlFlow::Continue(());
        }
        let mut reply = base_reply(&request.message);
        reply.metadata.authoritative = false;
        reply.metadata.response_code = ResponseCode::Refused;
        ControlFlow::Break(Outcome::Done(self.send_from(request, reply, Source::Local)))
    }

    /// Step 4: `-local` looks local.dns.<domain> up as that name; the
    /// answers keep the owner asked for (SkyDNS `server/server.go`, `ServeDNS`).
    fn local_name(&self, q: &mut Question) {
        if let (Some(local), Some(local_dns)) = (&self.settings.local, &self.local_dns) {
            if q.name == *local_dns {
                q.name.clone_from(local);
            }
        }
    }

    /// Steps 7 and 8: the reply now, kept in the reply cache unless
    /// autopath may answer the same packet otherwise; or the wait on
    /// upstreams.
    fn conclude(
        self: &Arc<Self>,
        request: Request,
        route: Route,
        replay: Replay,
        mut reads: Vec<Read>,
        snapshot: Option<&Snapshot>,
    ) -> Outcome {
        match route {
            Route::Reply(reply) => {
                let bytes = self.send(&request, reply);
                if let (Some(plain), Some(bytes)) = (&replay.plain, &bytes) {
                    if self.autopath_may_walk(&request, bytes, snapshot, &mut reads) {
                        // A pod of the namespace gets another answer.
                        return Outcome::Done(Some(bytes.clone()));
                    }
                    let at = Computed {
                        generation: replay.generation,
                        hour: replay.hour,
                        reads: &reads,
                    };
                    self.remember(plain, &request.q, bytes, at);
                }
                Outcome::Done(bytes)
            }
            Route::Drop => Outcome::Done(None),
            Route::Pending(route) => self.pending(request, route),
        }
    }

    /// A request for upstream work, if a place among the pending forwards
    /// is free; REFUSED at once when none is, as CoreDNS's `max_concurrent`
    /// (etcd reads are not limited).
    fn pending(self: &Arc<Self>, mut request: Request, route: pending::Route) -> Outcome {
        request.source = match route {
            pending::Route::Forward => Source::Forwarded,
            pending::Route::Stub(_) => Source::Stub,
            pending::Route::Autopath(_) => Source::Autopath,
            pending::Route::Lookups | pending::Route::HiddenPath(_) => request.source,
        };
        if matches!(route, pending::Route::Forward) {
            if let Some(bytes) = self.cached_forward(&request) {
                return Outcome::Done(Some(bytes));
            }
        }
        let slot = match (&self.forward_slots, &route) {
            (_, pending::Route::HiddenPath(_)) | (None, _) => None,
            (Some(slots), _) => match slots.clone().try_acquire_owned() {
                Ok(slot) => Some(slot),
                Err(_) => {
                    self.metrics.limit("pending_forwards");
                    let mut reply = base_reply(&request.message);
                    reply.metadata.authoritative = false;
                    // Refused here, not by an upstream.
                    reply.metadata.response_code = ResponseCode::Refused;
                    return Outcome::Done(self.send_from(&request, reply, Source::Local));
                }
            },
        };
        Outcome::Pending(Box::new(Pending {
            engine: Arc::clone(self),
            request,
            route,
            _slot: slot,
        }))
    }

    /// Keeps an encoded reply for the hot path.
    fn remember(&self, plain: &PlainQuery, q: &Question, bytes: &[u8], at: Computed<'_>) {
        if q.qtype == RecordType::ANY {
            return; // the REFUSED reply clears RD, which the hot path copies
        }
        let shufflable =
            self.settings.round_robin && matches!(q.qtype, RecordType::A | RecordType::AAAA);
        self.replies.insert(plain, bytes, at, shufflable);
    }

    /// Fits, encodes and accounts for a reply from the request's source.
    fn send(&self, r: &Request, reply: Message) -> Option<Vec<u8>> {
        self.send_from(r, reply, r.source)
    }

    /// Fits, encodes and accounts for a reply from `source`.
    fn send_from(&self, r: &Request, reply: Message, source: Source) -> Option<Vec<u8>> {
        let (bytes, overflow) = fit_reporting(reply, r.limit, r.tcp)?;
        self.account(r, &bytes, overflow, source);
        Some(bytes)
    }

    /// Counts a reply in the metrics and writes it to the query log.
    fn account(&self, r: &Request, bytes: &[u8], overflow: bool, source: Source) {
        if !r.account {
            return;
        }
        let elapsed = r.start.elapsed();
        self.metrics.reply(r.tcp, bytes, elapsed, overflow);
        tracing::debug!(name = %r.q.qname_text, qtype = %r.q.qtype, rcode = bytes.get(3).map_or(0, |b| b & 0x0f), "reply");
        if let Some(log) = &self.settings.query_log {
            log.note(&Entry {
                client: r.client,
                tcp: r.tcp,
                asked: Asked::Decoded(&r.q.qname, r.q.qtype, r.q.qclass),
                reply: bytes,
                elapsed,
                source,
            });
        }
    }
}

/// What step 1 leaves for step 7: the key to keep the reply under, and the
/// records' state it was computed on.
struct Replay {
    plain: Option<PlainQuery>,
    generation: i64,
    hour: u64,
}

/// The Unix clock's hour at `now` (the SOA serial changes with it), read
/// from the wall clock at most once a second per thread: a reply kept for
/// an hour is at most a second late to expire.
fn hour_at(now: Instant) -> u64 {
    thread_local! {
        static READ: Cell<Option<(Instant, u64)>> = const { Cell::new(None) };
    }
    READ.with(|read| match read.get() {
        Some((at, hour)) if now.saturating_duration_since(at) < Duration::from_secs(1) => hour,
        _ => {
            let hour = unix_now() / 3600;
            read.set(Some((now, hour)));
            hour
        }
    })
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
pub(crate) mod tests;
