//! Step 2 of a query: the packet decoded into a [`Request`] and checked.
//! FORMERR, NOTIMP and BADVERS end it here, written to the query log.

use super::{Engine, Outcome, Transport};
use crate::answer::Question;
use crate::query_log::{Asked, Entry, Source};
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::time::Instant;

/// A decoded request and what the reply depends on.
pub(super) struct Request {
    pub(super) message: Message,
    pub(super) packet: Vec<u8>,
    pub(super) q: Question,
    pub(super) tcp: bool,
    pub(super) limit: usize,
    pub(super) dnssec_ok: bool,
    pub(super) start: Instant,
    /// Whether its reply is counted in the metrics and the query log (not
    /// for the names autopath tries on a client's behalf).
    pub(super) account: bool,
    /// Who asked.
    pub(super) client: Option<SocketAddr>,
    /// Where its reply comes from, unless said otherwise when it is sent.
    pub(super) source: Source,
}

impl Engine {
    /// Decodes and checks `packet`: the request to route, or the reply (or
    /// silence) that ends it.
    pub(super) fn decode(
        &self,
        packet: &[u8],
        transport: Transport,
        client: Option<SocketAddr>,
        start: Instant,
    ) -> ControlFlow<Outcome, Request> {
        let tcp = transport == Transport::Tcp;
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
                return ControlFlow::Break(self.refused_early(client, tcp, asked, reply, start));
            }
        };
        if message.metadata.message_type != MessageType::Query {
            return ControlFlow::Break(Outcome::Done(None));
        }
        let dnssec_ok = message.edns.as_ref().is_some_and(|e| e.flags().dnssec_ok);
        self.metrics.request(&crate::metrics::Asked {
            tcp,
            ipv6: is_ipv6(client),
            dnssec_ok,
            qtype: message.queries.first().map_or(0, |q| q.query_type().into()),
            len: packet.len(),
        });
        let asked = match message.queries.first() {
            Some(q) => Asked::Decoded(q.name(), q.query_type(), q.query_class()),
            None => Asked::Unknown,
        };
        if message.metadata.op_code != OpCode::Query {
            let reply = error_reply(&message, ResponseCode::NotImp).to_vec().ok();
            return ControlFlow::Break(self.refused_early(client, tcp, asked, reply, start));
        }
        let [query] = message.queries.as_slice() else {
            // None, or several: DNS has no meaning for more than one question.
            let reply = error_reply(&message, ResponseCode::FormErr).to_vec().ok();
            return ControlFlow::Break(self.refused_early(client, tcp, asked, reply, start));
        };
        if message.edns.as_ref().is_some_and(|e| e.version() > 0) {
            // RFC 6891 §6.1.3: BADVERS, with an OPT of the version we speak
            // and the question echoed, whatever the options.
            let mut reply = error_reply(&message, ResponseCode::BADVERS);
            reply.queries = vec![query.clone()];
            reply.edns = Some(hickory_proto::op::Edns::new());
            return ControlFlow::Break(self.refused_early(
                client,
                tcp,
                asked,
                reply.to_vec().ok(),
                start,
            ));
        }
        let q = Question::new(
            query.name().clone(),
            query.query_type(),
            query.query_class(),
        );
        let limit = match transport {
            Transport::Tcp => 65535,
            Transport::Udp => message
                .edns
                .as_ref()
                .map_or(512, |e| usize::from(e.max_payload()).max(512)),
        };
        ControlFlow::Continue(Request {
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
        })
    }

    /// FORMERR, NOTIMP or BADVERS before the question is routed: written
    /// to the query log (the metrics count no reply for them, as SkyDNS's
    /// did not).
    pub(super) fn refused_early(
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

pub(super) fn error_reply(request: &Message, rcode: ResponseCode) -> Message {
    let mut reply = Message::response(request.metadata.id, request.metadata.op_code);
    reply.metadata.recursion_desired = request.metadata.recursion_desired;
    reply.metadata.response_code = rcode;
    reply
}

/// FORMERR for a packet whose header is readable but whose body is not;
/// nothing at all for fragments and for packets that are themselves replies.
pub(super) fn format_error(packet: &[u8]) -> Option<Vec<u8>> {
    if packet.len() < 12 || packet[2] & 0x80 != 0 {
        return None;
    }
    let id = u16::from_be_bytes([packet[0], packet[1]]);
    let mut reply = Message::response(id, OpCode::from_u8((packet[2] >> 3) & 0x0f));
    reply.metadata.recursion_desired = packet[2] & 0x01 != 0;
    reply.metadata.response_code = ResponseCode::FormErr;
    reply.to_vec().ok()
}

/// Whether `client` asked over IPv6 (an IPv4-mapped address is IPv4).
pub(super) fn is_ipv6(client: Option<SocketAddr>) -> bool {
    client.is_some_and(|c| c.ip().to_canonical().is_ipv6())
}
