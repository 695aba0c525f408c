//! Step 6 of a query: its route, as SkyDNS's `ServeDNS` decided it (SkyDNS
//! `server/server.go`): refused (ANY), a stub zone, reverse, forwarded
//! (outside the domain) or the local records. Each step answers or passes
//! the request on; the last always answers. What memory can answer is
//! answered here; the rest goes pending (`pending.rs`).

use super::{pending, unix_now, Engine, Request};
use crate::answer::{self, Answer, Lookups, Question};
use crate::response::{clamp_ttls, dedup, shuffle};
use crate::snapshot::{note_read, Read, Snapshot};
use crate::store::paths::hidden_part;
use crate::stub::{has_loop_marker, StubZones};
use hickory_proto::op::{Message, OpCode, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};
use skydns_msg::path::{in_domain, is_addressable_label};
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::Arc;

/// Where a request goes after `Engine::route`.
pub(super) enum Route {
    Reply(Message),
    Drop,
    Pending(pending::Route),
}

impl Engine {
    /// The route of `r`: the steps in SkyDNS's order, the first that
    /// answers wins.
    pub(super) fn route(&self, r: &Request, snapshot: Option<Arc<Snapshot>>) -> Route {
        let s = snapshot.as_deref();
        let steps = || {
            refuse_any(r)?;
            self.stub_zone(r, s)?;
            self.reverse(r, s)?;
            self.outside_domain(r)?;
            refuse_class(r)?;
            ControlFlow::Continue(self.local_records(r, snapshot.clone()))
        };
        match steps() {
            ControlFlow::Break(route) | ControlFlow::Continue(route) => route,
        }
    }

    /// A stub zone's servers, or a drop when the request came back (loop).
    fn stub_zone(&self, r: &Request, snapshot: Option<&Snapshot>) -> ControlFlow<Route> {
        let Some(servers) = self.stub_servers(snapshot, &r.q.name) else {
            return ControlFlow::Continue(());
        };
        if has_loop_marker(&r.message) {
            tracing::warn!(name = %r.q.qname_text, "dropping a stub-forwarded request that came back (loop)");
            return ControlFlow::Break(Route::Drop);
        }
        ControlFlow::Break(Route::Pending(pending::Route::Stub(servers)))
    }

    /// PTR in either reverse tree, from the records or forwarded. SkyDNS
    /// sent every type under `.ip6.arpa.` here and answered an AAAA
    /// question with a PTR.
    fn reverse(&self, r: &Request, snapshot: Option<&Snapshot>) -> ControlFlow<Route> {
        let q = &r.q;
        let reverse = q.qtype == RecordType::PTR
            && (q.name.ends_with(".in-addr.arpa.") || q.name.ends_with(".ip6.arpa."));
        if !reverse {
            return ControlFlow::Continue(());
        }
        let mut reply = base_reply(&r.message);
        ControlFlow::Break(
            match snapshot.and_then(|s| answer::reverse(&self.zone, s, q)) {
                Some(ptrs) => {
                    reply.metadata.authoritative = false;
                    reply.answers = ptrs;
                    Route::Reply(reply)
                }
                None => self.forward_route(reply, q),
            },
        )
    }

    /// Names outside the domain (CHAOS stays here) are forwarded.
    fn outside_domain(&self, r: &Request) -> ControlFlow<Route> {
        if r.q.qclass != DNSClass::CH && !in_domain(&r.q.name, &self.zone.domain) {
            return ControlFlow::Break(self.forward_route(base_reply(&r.message), &r.q));
        }
        ControlFlow::Continue(())
    }

    /// The answer from the local records (signed with `-dnssec`), or the
    /// reads they need first.
    fn local_records(&self, r: &Request, snapshot: Option<Arc<Snapshot>>) -> Route {
        let q = &r.q;
        let mut reply = base_reply(&r.message);
        let Some(snapshot) = snapshot else {
            // Not synced with etcd yet: "I don't know", not "no such name".
            reply.metadata.response_code = ResponseCode::ServFail;
            return Route::Reply(reply);
        };
        if !addressable(&q.qname) {
            return Route::Reply(self.finish(reply, r, Answer::NameError, &snapshot));
        }
        if let Some(answer) = crate::pods::answer(self.settings.pods, q, &self.zone.domain) {
            return Route::Reply(self.finish(reply, r, answer, &snapshot));
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
    pub(super) fn forward_route(&self, mut reply: Message, q: &Question) -> Route {
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
        note_read(|| Read::Prefix(Arc::from(self.stub_dir.as_str())));
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
    pub(super) fn finish(
        &self,
        reply: Message,
        r: &Request,
        answer: Answer,
        snapshot: &Snapshot,
    ) -> Message {
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
}

/// ANY is refused (RFC 8482 allows it; SkyDNS did so).
fn refuse_any(r: &Request) -> ControlFlow<Route> {
    if r.q.qtype != RecordType::ANY {
        return ControlFlow::Continue(());
    }
    let mut reply = base_reply(&r.message);
    reply.metadata.response_code = ResponseCode::Refused;
    reply.metadata.authoritative = false;
    reply.metadata.recursion_available = false;
    reply.metadata.recursion_desired = false;
    ControlFlow::Break(Route::Reply(reply))
}

/// The records are IN data; HS, NONE, ANY or class 77 has none (SkyDNS
/// answered them with IN records and AA).
fn refuse_class(r: &Request) -> ControlFlow<Route> {
    if r.q.qclass == DNSClass::IN || r.q.qclass == DNSClass::CH {
        return ControlFlow::Continue(());
    }
    let mut reply = base_reply(&r.message);
    reply.metadata.response_code = ResponseCode::Refused;
    reply.metadata.authoritative = false;
    ControlFlow::Break(Route::Reply(reply))
}

/// The reply skeleton: ID, RD and the question copied; QR, AA and RA set.
pub(super) fn base_reply(request: &Message) -> Message {
    let mut reply = Message::response(request.metadata.id, OpCode::Query);
    reply.metadata.recursion_desired = request.metadata.recursion_desired;
    reply.metadata.authoritative = true;
    reply.metadata.recursion_available = true;
    reply.queries = request.queries.iter().take(1).cloned().collect();
    reply
}

/// Whether every label of the query maps to exactly one etcd path segment.
fn addressable(name: &Name) -> bool {
    name.iter().all(is_addressable_label)
}
