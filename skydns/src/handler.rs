//! One DNS request in, one reply out: SkyDNS's `ServeDNS` pipeline.
//!
//! [`Handler::handle`] decodes the packet, decides which path a question
//! takes (refused, reverse, forwarded, CHAOS, authoritative — reference §5)
//! and is the only place where answers become response codes: NOERROR,
//! NODATA and NXDOMAIN with the SOA, SERVFAIL, REFUSED, FORMERR, NOTIMP.
//! It never blocks on etcd: it reads whatever [`Snapshot`] is current.
//! Malformed packets get FORMERR when they have a readable header and are
//! dropped otherwise; nothing a client sends can make it panic.

use crate::answer::{self, Answer, Question, Zone};
use crate::path::{in_domain, is_addressable_label};
use crate::response::{clamp_ttls, dedup, fit, shuffle};
use crate::snapshot::Snapshot;
use arc_swap::ArcSwapOption;
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Which transport a request came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// UDP: replies are limited by the client's buffer size.
    Udp,
    /// TCP: replies up to 65535 bytes.
    Tcp,
}

/// The current snapshot, shared between the store task and the listeners.
/// `None` until the first complete read of etcd.
pub type SharedSnapshot = Arc<ArcSwapOption<Snapshot>>;

/// Answers DNS requests from the shared snapshot.
#[derive(Clone)]
pub struct Handler {
    zone: Arc<Zone>,
    snapshot: SharedSnapshot,
    round_robin: bool,
}

impl Handler {
    /// A handler for `zone` reading `snapshot`.
    pub fn new(zone: Zone, snapshot: SharedSnapshot, round_robin: bool) -> Self {
        Handler {
            zone: Arc::new(zone),
            snapshot,
            round_robin,
        }
    }

    /// Handles one request; `None` means "send nothing".
    pub fn handle(&self, packet: &[u8], transport: Transport) -> Option<Vec<u8>> {
        let request = match Message::from_vec(packet) {
            Ok(request) => request,
            Err(error) => {
                tracing::debug!(%error, len = packet.len(), "undecodable request");
                return format_error(packet);
            }
        };
        if request.metadata.message_type != MessageType::Query {
            return None;
        }
        if request.metadata.op_code != OpCode::Query {
            return error_reply(&request, ResponseCode::NotImp).to_vec().ok();
        }
        let Some(query) = request.queries.first() else {
            return error_reply(&request, ResponseCode::FormErr).to_vec().ok();
        };
        let q = Question::new(
            query.name().clone(),
            query.query_type(),
            query.query_class(),
        );
        let limit = match transport {
            Transport::Tcp => 65535,
            Transport::Udp => request
                .edns
                .as_ref()
                .map_or(512, |e| usize::from(e.max_payload()).max(512)),
        };
        let reply = self.reply(&request, &q);
        tracing::debug!(name = %q.qname_text, qtype = %q.qtype, rcode = %reply.metadata.response_code, "reply");
        fit(reply, limit, transport == Transport::Tcp)
    }

    fn reply(&self, request: &Message, q: &Question) -> Message {
        let mut reply = base_reply(request);
        if q.qtype == RecordType::ANY {
            reply.metadata.response_code = ResponseCode::Refused;
            reply.metadata.authoritative = false;
            reply.metadata.recursion_available = false;
            reply.metadata.recursion_desired = false;
            return reply;
        }
        let reverse = (q.qtype == RecordType::PTR && q.name.ends_with(".in-addr.arpa."))
            || q.name.ends_with(".ip6.arpa.");
        let snapshot = self.snapshot.load_full();
        if reverse {
            let ptr = snapshot
                .as_deref()
                .and_then(|s| answer::reverse(&self.zone, s, q));
            return match ptr {
                Some(ptr) => {
                    reply.metadata.authoritative = false;
                    reply.answers.push(ptr);
                    reply
                }
                None => self.forward(reply),
            };
        }
        if q.qclass != DNSClass::CH && !in_domain(&q.name, &self.zone.domain) {
            return self.forward(reply);
        }
        let Some(snapshot) = snapshot else {
            // Not synced with etcd yet: "I don't know", not "no such name".
            reply.metadata.response_code = ResponseCode::ServFail;
            return reply;
        };
        if !addressable(&q.qname) {
            return self.negative(reply, ResponseCode::NXDomain);
        }
        let answer = answer::authoritative(&self.zone, &snapshot, q, unix_now());
        self.finish(reply, q, answer)
    }

    /// The authoritative answer as a reply: post-processing and rcodes.
    fn finish(&self, mut reply: Message, q: &Question, answer: Answer) -> Message {
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
                if self.round_robin && matches!(q.qtype, RecordType::A | RecordType::AAAA) {
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

    /// A name that is not ours. Forwarding is not configured here, so this is
    /// SkyDNS's "no nameservers" reply: SERVFAIL, AA=0, RA=1.
    fn forward(&self, mut reply: Message) -> Message {
        reply.metadata.authoritative = false;
        reply.metadata.response_code = ResponseCode::ServFail;
        reply
    }
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
mod tests;
