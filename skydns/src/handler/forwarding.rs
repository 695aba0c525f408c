//! Forwarded names: the response cache, serve-stale (RFC 8767), prefetch and
//! the relay to the upstreams. Stub zones are relayed to their own servers,
//! without the cache.

use super::{base_reply, Engine, Request};
use crate::forward::Upstreams;
use crate::query_log::Source;
use crate::response::MAX_UDP_PAYLOAD;
use crate::response_cache::{name_key, Asker, CacheKey, CachedReply, Stale};
use crate::stub;
use hickory_proto::op::{Message, ResponseCode};
use std::net::SocketAddr;
use std::sync::Arc;

impl Engine {
    /// The response cache's fresh answer to `r`, encoded, if there is one
    /// (`None` also when it cannot be encoded); a popular
    /// one due for a refresh is fetched again in the background. Called
    /// before a forward waits for a place among the pending ones, so a hit
    /// is answered at once.
    pub(super) fn cached_forward(self: &Arc<Self>, r: &Request) -> Option<Vec<u8>> {
        let cache = self.cache.as_ref()?;
        let key = cache_key(r);
        let asker = Asker {
            packet: &r.packet,
            edns: r.message.edns.is_some(),
            limit: if r.tcp {
                usize::from(u16::MAX)
            } else {
                r.limit.min(MAX_UDP_PAYLOAD)
            },
        };
        let hit = cache.hit(&key, self.clock.now(), Some(asker))?;
        self.metrics.cache_hit(is_denial(&hit.reply));
        if hit.prefetch {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                self.metrics.prefetch();
                runtime.spawn(Arc::clone(self).fetch(r.packet.clone(), (r.tcp, r.limit), key));
            }
        }
        match hit.reply {
            CachedReply::Wire(bytes) => {
                self.account(r, &bytes, false, Source::Cached);
                Some(bytes)
            }
            CachedReply::Message(reply) => {
                self.send_from(r, for_request(reply, &r.message), Source::Cached)
            }
        }
    }

    /// A forward the cache had no fresh answer for ([`Engine::cached_forward`]
    /// was asked before the request became pending).
    pub(super) async fn forward(self: &Arc<Self>, r: &Request) -> Option<Vec<u8>> {
        let key = cache_key(r);
        let mut stale = None;
        if let Some(cache) = &self.cache {
            self.metrics.cache_miss();
            stale = cache.get_stale(&key, self.clock.now());
        }
        let fetch = Arc::clone(self).fetch(r.packet.clone(), (r.tcp, r.limit), key);
        let reason = match stale {
            None => {
                return match fetch.await {
                    Some(bytes) => self.relayed(r, bytes),
                    None => self.upstream_failure(r),
                };
            }
            // A refresh of it is under way or failed within the recheck
            // time: the stale answer at once (RFC 8767 §5).
            Some(Stale {
                refresh: false,
                reply,
            }) => ("recheck", reply),
            Some(Stale {
                refresh: true,
                reply,
            }) => {
                // The fetch goes on without the client: it refreshes the cache.
                let task = tokio::spawn(fetch);
                match tokio::time::timeout(self.settings.cache.stale_timeout, task).await {
                    Ok(Ok(Some(bytes))) if !says_server_failure(&bytes) => {
                        return self.relayed(r, bytes)
                    }
                    Ok(_) => ("failed", reply),
                    Err(_) => ("timeout", reply),
                }
            }
        };
        self.metrics.stale_reply(reason.0);
        self.send_from(r, for_request(reason.1, &r.message), Source::Stale)
    }

    /// Relays `packet` for a client taking `room` bytes, and caches the reply.
    async fn fetch(
        self: Arc<Self>,
        packet: Vec<u8>,
        (tcp, room): (bool, usize),
        key: CacheKey,
    ) -> Option<Vec<u8>> {
        self.metrics.external("recursive");
        let bytes = self.upstreams.relay_within(&packet, tcp, room).await?;
        if let Some(cache) = &self.cache {
            if let Ok(reply) = Message::from_vec(&bytes) {
                if cache.insert(key, reply, self.clock.now()) {
                    let (answers, denials) = cache.counts();
                    self.metrics.cache_entries(answers, denials);
                }
            }
        }
        Some(bytes)
    }

    /// A relayed reply as the client may receive it: over UDP no larger
    /// than its buffer (fitted, with TC, when the upstream's is larger).
    fn relayed(&self, r: &Request, bytes: Vec<u8>) -> Option<Vec<u8>> {
        if r.tcp || bytes.len() <= r.limit.min(MAX_UDP_PAYLOAD) {
            self.account(r, &bytes, false, r.source);
            return Some(bytes);
        }
        match Message::from_vec(&bytes) {
            Ok(reply) => self.send(r, reply),
            Err(_) => self.upstream_failure(r),
        }
    }

    pub(super) async fn stub_forward(
        &self,
        r: &Request,
        servers: Vec<SocketAddr>,
    ) -> Option<Vec<u8>> {
        self.metrics.external("stub");
        let packet = stub::mark(&r.message)?;
        let upstreams = Upstreams::new(servers, self.settings.forward.relay.timeout);
        match upstreams.relay_within(&packet, r.tcp, r.limit).await {
            Some(bytes) => self.relayed(r, bytes),
            None => self.upstream_failure(r),
        }
    }

    /// SERVFAIL after every upstream failed (SkyDNS left the client waiting).
    fn upstream_failure(&self, r: &Request) -> Option<Vec<u8>> {
        let mut reply = base_reply(&r.message);
        reply.metadata.authoritative = false;
        reply.metadata.response_code = ResponseCode::ServFail;
        self.send(r, reply)
    }
}

/// What a forwarded reply to `r` is cached under.
fn cache_key(r: &Request) -> CacheKey {
    CacheKey {
        name: (r.message.queries.first()).map_or_else(String::new, |q| name_key(q.name())),
        qtype: r.q.qtype,
        qclass: u16::from(r.q.qclass),
        dnssec_ok: r.dnssec_ok,
        tcp: r.tcp,
        checking_disabled: r.message.metadata.checking_disabled,
    }
}

/// A cached reply as an answer to `request`: the header and OPT follow
/// this request, not the first asker's.
fn for_request(mut cached: Message, request: &Message) -> Message {
    cached.metadata.id = request.metadata.id;
    cached.metadata.recursion_desired = request.metadata.recursion_desired;
    cached.queries = request.queries.iter().take(1).cloned().collect();
    if request.edns.is_none() {
        cached.edns = None;
    }
    cached
}

/// Whether an encoded reply says SERVFAIL.
fn says_server_failure(bytes: &[u8]) -> bool {
    bytes.get(3).is_some_and(|b| b & 0x0f == 2)
}

/// Whether a cached reply is a denial: NXDOMAIN, or NOERROR with no answer.
fn is_denial(reply: &CachedReply) -> bool {
    match reply {
        CachedReply::Wire(bytes) => {
            let rcode = bytes.get(3).map_or(0, |b| b & 0x0f);
            let answers = bytes
                .get(6..8)
                .map_or(0, |a| u16::from_be_bytes([a[0], a[1]]));
            rcode == 3 || (rcode == 0 && answers == 0)
        }
        CachedReply::Message(m) => {
            m.metadata.response_code == ResponseCode::NXDomain
                || (m.metadata.response_code == ResponseCode::NoError && m.answers.is_empty())
        }
    }
}
