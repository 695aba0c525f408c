//! One DNS request in, one reply out: SkyDNS's `ServeDNS` pipeline.
//!
//! [`Handler::handle`] decodes the packet and routes the question as
//! SkyDNS's `ServeDNS` did (SkyDNS `server/server.go`): refused (ANY), stub
//! zone, reverse, forwarded (outside the domain) or authoritative. Everything answerable from memory is answered right away,
//! without waiting on anything; the rest comes back as [`Outcome::Pending`],
//! which [`Handler::resolve`] completes by talking to upstream servers (see
//! `pending.rs`). This module is the only place where answers become
//! response codes: NOERROR, NODATA and NXDOMAIN with the SOA, SERVFAIL,
//! REFUSED, FORMERR, NOTIMP. Malformed packets get FORMERR when they have a
//! readable header and are dropped otherwise; nothing a client sends can
//! make it panic.

mod autopath;
mod forwarding;
mod live;
mod pending;
mod secure;
mod settings;

pub use live::Handler;
pub use settings::Settings;

use crate::answer::{self, Answer, Lookups, Question, Zone};
use crate::forward::Upstreams;
use crate::metrics::Metrics;
use crate::query_log::{Asked, Entry, Source};
use crate::reply_cache::{Computed, PlainQuery, QuestionKey, ReplyCache};
use crate::response::{clamp_ttls, dedup, fit_reporting, shuffle};
use crate::response_cache::ResponseCache;
use crate::snapshot::{note_read, record_reads, SharedSnapshot, Snapshot};
use crate::store::paths::{hidden_part, PathReader};
use crate::stub::{has_loop_marker, StubZones};
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};
use skydns_msg::path::{in_domain, is_addressable_label};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
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

/// A decoded request and what the reply depends on.
struct Request {
    message: Message,
    packet: Vec<u8>,
    q: Question,
    tcp: bool,
    limit: usize,
    dnssec_ok: bool,
    start: Instant,
    /// Whether its reply is counted in the metrics and the query log (not
    /// for the names autopath tries on a client's behalf).
    account: bool,
    /// Who asked.
    client: Option<SocketAddr>,
    /// Where its reply comes from, unless said otherwise when it is sent.
    source: Source,
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
}

impl Engine {
    /// Handles one request as far as memory allows.
    fn handle(
        self: &Arc<Self>,
        packet: &[u8],
        transport: Transport,
        client: Option<SocketAddr>,
    ) -> Outcome {
        let start = Instant::now();
        let tcp = transport == Transport::Tcp;
        let plain = QuestionKey::parse(packet, tcp);
        let snapshot = self.snapshot.load_full();
        let generation = snapshot.as_ref().map_or(-1, |s| s.generation());
        if let Some(s) = &snapshot {
            self.replies
                .advance(generation, |since| s.touched_since(since));
        }
        let hour = unix_now() / 3600;
        if let Some(q) = &plain {
            if let Some(reply) = self.replies.get(q, generation, hour) {
                self.metrics.request(tcp, q.dnssec_ok);
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
                return Outcome::Done(Some(reply));
            }
        }
        let message = match Message::from_vec(packet) {
            Ok(message) => message,
            Err(error) => {
                tracing::debug!(%error, len = packet.len(), "undecodable request");
                let reply = format_error(packet);
                // The question, when it is the one part that can be read.
                let asked = match (packet.get(4..6), packet.get(12..)) {
                    (Some([0, 1]), Some(question)) => Asked::Wire(question),
                    _ => Asked::Unknown,
                };
                return self.refused_early(client, tcp, asked, reply, start);
            }
        };
        if message.metadata.message_type != MessageType::Query {
            return Outcome::Done(None);
        }
        let dnssec_ok = message.edns.as_ref().is_some_and(|e| e.flags().dnssec_ok);
        self.metrics.request(tcp, dnssec_ok);
        let asked = match message.queries.first() {
            Some(q) => Asked::Decoded(q.name(), q.query_type(), q.query_class()),
            None => Asked::Unknown,
        };
        if message.metadata.op_code != OpCode::Query {
            let reply = error_reply(&message, ResponseCode::NotImp).to_vec().ok();
            return self.refused_early(client, tcp, asked, reply, start);
        }
        let [query] = message.queries.as_slice() else {
            // None, or several: DNS has no meaning for more than one question.
            let reply = error_reply(&message, ResponseCode::FormErr).to_vec().ok();
            return self.refused_early(client, tcp, asked, reply, start);
        };
        if message.edns.as_ref().is_some_and(|e| e.version() > 0) {
            // RFC 6891 §6.1.3: BADVERS, with an OPT of the version we speak
            // and the question echoed, whatever the options.
            let mut reply = error_reply(&message, ResponseCode::BADVERS);
            reply.queries = vec![query.clone()];
            reply.edns = Some(hickory_proto::op::Edns::new());
            return self.refused_early(client, tcp, asked, reply.to_vec().ok(), start);
        }
        let mut q = Question::new(
            query.name().clone(),
            query.query_type(),
            query.query_class(),
        );
        if let (Some(local), Some(local_dns)) = (&self.settings.local, &self.local_dns) {
            // `-local`: local.dns.<domain> is looked up as that name; the
            // answers keep the owner asked for (SkyDNS `server/server.go`, `ServeDNS`).
            if q.name == *local_dns {
                q.name.clone_from(local);
            }
        }
        let limit = match transport {
            Transport::Tcp => 65535,
            Transport::Udp => message
                .edns
                .as_ref()
                .map_or(512, |e| usize::from(e.max_payload()).max(512)),
        };
        let request = Request {
            message,
            packet: packet.to_vec(),
            q,
            tcp,
            limit,
            dnssec_ok,
            start,
            account: true,
            client,
            source: Source::Local,
        };
        let request = match &snapshot {
            Some(s) if self.may_walk(&request, Some(s)) => match self.walk(request, s) {
                Ok(outcome) => return outcome,
                Err(request) => *request,
            },
            _ => request,
        };
        let (route, mut paths) = record_reads(|| self.route(&request, snapshot.clone()));
        match route {
            Route::Reply(reply) => {
                let bytes = self.send(&request, reply);
                if let (Some(plain), Some(bytes)) = (&plain, &bytes) {
                    if self.autopath_may_walk(&request, bytes, snapshot.as_deref(), &mut paths) {
                        // A pod of the namespace gets another answer.
                        return Outcome::Done(Some(bytes.clone()));
                    }
                    let at = Computed {
                        generation,
                        hour,
                        paths: &paths,
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
    /// is free; SERVFAIL at once when none is (etcd reads are not limited).
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
                    reply.metadata.response_code = ResponseCode::ServFail;
                    // Refused here, not by an upstream.
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

    /// Decides the path of a request (SkyDNS `server/server.go`, `ServeDNS`)
    /// and answers what memory can.
    fn route(&self, r: &Request, snapshot: Option<Arc<Snapshot>>) -> Route {
        let q = &r.q;
        let mut reply = base_reply(&r.message);
        if q.qtype == RecordType::ANY {
            reply.metadata.response_code = ResponseCode::Refused;
            reply.metadata.authoritative = false;
            reply.metadata.recursion_available = false;
            reply.metadata.recursion_desired = false;
            return Route::Reply(reply);
        }
        if let Some(servers) = self.stub_servers(snapshot.as_deref(), &q.name) {
            if has_loop_marker(&r.message) {
                tracing::warn!(name = %q.qname_text, "dropping a stub-forwarded request that came back (loop)");
                return Route::Drop;
            }
            return Route::Pending(pending::Route::Stub(servers));
        }
        // PTR in either reverse tree; SkyDNS sent every type under
        // `.ip6.arpa.` here and answered an AAAA question with a PTR.
        let reverse = q.qtype == RecordType::PTR
            && (q.name.ends_with(".in-addr.arpa.") || q.name.ends_with(".ip6.arpa."));
        if reverse {
            let ptrs = snapshot
                .as_deref()
                .and_then(|s| answer::reverse(&self.zone, s, q));
            return match ptrs {
                Some(ptrs) => {
                    reply.metadata.authoritative = false;
                    reply.answers = ptrs;
                    Route::Reply(reply)
                }
                None => self.forward_route(reply, q),
            };
        }
        if q.qclass != DNSClass::CH && !in_domain(&q.name, &self.zone.domain) {
            return self.forward_route(reply, q);
        }
        if q.qclass != DNSClass::IN && q.qclass != DNSClass::CH {
            // The records are IN data; HS, NONE, ANY or class 77 has none.
            // (SkyDNS answered them with IN records and AA.)
            reply.metadata.response_code = ResponseCode::Refused;
            reply.metadata.authoritative = false;
            return Route::Reply(reply);
        }
        let Some(snapshot) = snapshot else {
            // Not synced with etcd yet: "I don't know", not "no such name".
            reply.metadata.response_code = ResponseCode::ServFail;
            return Route::Reply(reply);
        };
        if !addressable(&q.qname) {
            return Route::Reply(self.finish(reply, r, Answer::NameError, &snapshot));
        }
        if let Some(answer) = self.dnskey_answer(q) {
            return Route::Reply(self.finish(reply, r, answer, &snapshot));
        }
        if let Some(path) = self.unread_hidden_path(&snapshot, &q.name) {
            return Route::Pending(pending::Route::HiddenPath(path));
        }
        let lookups = if self.can_forward() {
            Lookups::new()
        } else {
            Lookups::disabled()
        };
        let answer = answer::authoritative(&self.zone, &snapshot, q, unix_now(), &lookups);
        if !lookups.take_missing().is_empty() {
            return Route::Pending(pending::Route::Lookups);
        }
        Route::Reply(self.finish(reply, r, answer, &snapshot))
    }

    /// Forwarding, or the reply SkyDNS gives when it cannot forward.
    fn forward_route(&self, mut reply: Message, q: &Question) -> Route {
        reply.metadata.authoritative = false;
        if self.settings.forward.no_rec {
            reply.metadata.response_code = ResponseCode::ServFail;
            reply.metadata.recursion_available = false;
            return Route::Reply(reply);
        }
        if self.upstreams.is_empty() || q.qname.iter().count() < self.settings.forward.ndots {
            reply.metadata.response_code = ResponseCode::ServFail;
            return Route::Reply(reply);
        }
        Route::Pending(pending::Route::Forward)
    }

    /// The hidden etcd v2 path `name` needs and the snapshot lacks, if any.
    fn unread_hidden_path(&self, snapshot: &Snapshot, name: &str) -> Option<String> {
        // Cheap test first: most names have no `_` label at all.
        if !self.paths.is_enabled() || !name.split('.').any(|l| l.starts_with('_')) {
            return None;
        }
        let prefix = &self.zone.prefix;
        let (path, _) = prefix.path_with_wildcard(name);
        let root = prefix.root();
        let hidden = hidden_part(&path, root.trim_end_matches('/'))?;
        (!snapshot.has_read(&hidden)).then_some(hidden)
    }

    /// Whether internal lookups (of CNAME and SRV/MX targets outside the
    /// domain, docs/skydns.md) can run: they need upstreams only;
    /// `-no-rec` stops forwarding, not lookups.
    fn can_forward(&self) -> bool {
        !self.upstreams.is_empty()
    }

    /// The stub servers for `name`, when stub zones are on and one matches.
    fn stub_servers(&self, snapshot: Option<&Snapshot>, name: &str) -> Option<Vec<SocketAddr>> {
        if !self.settings.stubzones {
            return None;
        }
        let snapshot = snapshot?;
        // Every answer depends on the stub zones, read once per snapshot.
        note_read(&self.stub_dir);
        let zones = {
            let mut cached = self.stubs.lock().unwrap_or_else(|e| e.into_inner());
            if cached.0 != snapshot.generation() {
                *cached = (
                    snapshot.generation(),
                    Arc::new(StubZones::from_snapshot(snapshot, &self.zone)),
                );
            }
            cached.1.clone()
        };
        zones.servers_for(name).map(<[SocketAddr]>::to_vec)
    }

    /// The authoritative answer as a reply, signed when the request asked
    /// for DNSSEC and a key is configured.
    fn finish(&self, reply: Message, r: &Request, answer: Answer, snapshot: &Snapshot) -> Message {
        let mut reply = self.shape(reply, &r.q, answer);
        self.secure(&mut reply, r, snapshot);
        reply
    }

    /// The authoritative answer as a reply: post-processing and rcodes.
    fn shape(&self, mut reply: Message, q: &Question, answer: Answer) -> Message {
        match answer {
            Answer::ServerFailure => {
                reply.metadata.response_code = ResponseCode::ServFail;
                reply
            }
            Answer::NameError => self.negative(reply, ResponseCode::NXDomain),
            Answer::Records {
                mut answers,
                mut additionals,
            } => {
                dedup(&mut answers);
                dedup(&mut additionals);
                clamp_ttls(&mut answers, self.zone.ttl);
                if self.settings.round_robin && matches!(q.qtype, RecordType::A | RecordType::AAAA)
                {
                    shuffle(&mut answers);
                }
                if answers.is_empty() {
                    return self.negative(reply, ResponseCode::NoError);
                }
                reply.answers = answers;
                reply.additionals = additionals;
                reply
            }
        }
    }

    /// NXDOMAIN or NODATA: the rcode and the SOA (TTL `min_ttl`) as authority.
    fn negative(&self, mut reply: Message, rcode: ResponseCode) -> Message {
        reply.metadata.response_code = rcode;
        let soa = answer::soa(&self.zone, unix_now(), self.zone.min_ttl);
        reply.authorities.push(soa);
        reply
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

    /// FORMERR, NOTIMP or BADVERS before the question is routed: written
    /// to the query log (the metrics count no reply for them, as SkyDNS's
    /// did not).
    fn refused_early(
        &self,
        client: Option<SocketAddr>,
        tcp: bool,
        asked: Asked<'_>,
        reply: Option<Vec<u8>>,
        start: Instant,
    ) -> Outcome {
        if let (Some(log), Some(bytes)) = (&self.settings.query_log, &reply) {
            log.note(&Entry {
                client,
                tcp,
                asked,
                reply: bytes,
                elapsed: start.elapsed(),
                source: Source::Local,
            });
        }
        Outcome::Done(reply)
    }
}

/// Where a request goes after [`Handler::route`].
enum Route {
    Reply(Message),
    Drop,
    Pending(pending::Route),
}

/// The reply skeleton: ID, RD and the question copied; QR, AA and RA set.
fn base_reply(request: &Message) -> Message {
    let mut reply = Message::response(request.metadata.id, OpCode::Query);
    reply.metadata.recursion_desired = request.metadata.recursion_desired;
    reply.metadata.authoritative = true;
    reply.metadata.recursion_available = true;
    reply.queries = request.queries.iter().take(1).cloned().collect();
    reply
}

fn error_reply(request: &Message, rcode: ResponseCode) -> Message {
    let mut reply = Message::response(request.metadata.id, request.metadata.op_code);
    reply.metadata.recursion_desired = request.metadata.recursion_desired;
    reply.metadata.response_code = rcode;
    reply
}

/// FORMERR for a packet whose header is readable but whose body is not;
/// nothing at all for fragments and for packets that are themselves replies.
fn format_error(packet: &[u8]) -> Option<Vec<u8>> {
    if packet.len() < 12 || packet[2] & 0x80 != 0 {
        return None;
    }
    let id = u16::from_be_bytes([packet[0], packet[1]]);
    let mut reply = Message::response(id, OpCode::from_u8((packet[2] >> 3) & 0x0f));
    reply.metadata.recursion_desired = packet[2] & 0x01 != 0;
    reply.metadata.response_code = ResponseCode::FormErr;
    reply.to_vec().ok()
}

/// Whether every label of the query maps to exactly one etcd path segment.
fn addressable(name: &Name) -> bool {
    name.iter().all(is_addressable_label)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
pub(crate) mod tests;
