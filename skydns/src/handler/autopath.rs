//! The walk of `-autopath` (the names and the reply are `crate::autopath`).
//!
//! A query qualifies when autopath is on, it has no DO bit (a chain of
//! names that do not exist cannot be signed as proof), its name ends in the
//! first search domain of a namespace, and the client has a pod in that
//! namespace: its IP has a key under `pod/<ns>/<a-b-c-d>/` (kube2sky's pod
//! records). The asked name is answered first, as always; only when it is
//! NXDOMAIN does the walk go on, each further name routed exactly as a
//! query for it would be (cluster records, stub zones, the forwarders,
//! with their caches). The first name that is not NXDOMAIN gives the reply,
//! chained from the asked name by a CNAME when it is NOERROR; a SERVFAIL or
//! REFUSED there, or NXDOMAIN everywhere, gives the asked name's own
//! NXDOMAIN, and the client goes on with its search list as it would have.
//! Those replies depend on the client, so they never enter the hot path's
//! cache, and neither does an NXDOMAIN a walk could replace
//! ([`Inner::autopath_may_walk`]).

use super::{pending, Inner, Outcome, Pending, Request, Route};
use crate::answer::Question;
use crate::autopath::{chain, chain_ttl, ends_walk, pod_dir, walks};
use crate::snapshot::Snapshot;
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name};
use std::net::IpAddr;
use std::sync::Arc;

/// A walk waiting on upstream work for one of its names.
pub(super) struct Walk {
    /// The name being tried, waiting for its answer.
    step: Box<Pending>,
    /// The name the CNAME points to.
    target: Name,
    /// The asked name's own reply (NXDOMAIN), sent when the walk finds nothing.
    first: Message,
}

impl Inner {
    /// Whether a query qualifies for a walk (see the module docs).
    pub(super) fn may_walk(
        &self,
        request: &Request,
        snapshot: Option<&Arc<Snapshot>>,
        client: Option<IpAddr>,
    ) -> bool {
        let (Some(autopath), Some(snapshot), Some(client)) =
            (self.options.autopath.as_ref(), snapshot, client)
        else {
            return false;
        };
        let q = &request.q;
        if request.dnssec_ok || !walks(q.qtype) || q.qclass != DNSClass::IN {
            return false;
        }
        let Some((namespace, _)) = autopath.split(&q.name) else {
            return false;
        };
        let dir = pod_dir(&self.zone, namespace, client);
        let is_pod = snapshot.scan_prefix(&dir).next().is_some();
        is_pod
    }

    /// The reply of a walk for a request that [`Inner::may_walk`], or the
    /// request back when its own name is not NXDOMAIN (then it is answered
    /// as usual).
    pub(super) fn walk(
        self: &Arc<Self>,
        request: Request,
        snapshot: &Arc<Snapshot>,
    ) -> Result<Outcome, Box<Request>> {
        let Some(autopath) = self.options.autopath.clone() else {
            return Err(Box::new(request));
        };
        let Some((namespace, base)) = autopath.split(&request.q.name) else {
            return Err(Box::new(request));
        };
        let first = match self.route(&request, Some(snapshot.clone())) {
            Route::Reply(reply) if !ends_walk(&reply) => reply,
            _ => return Err(Box::new(request)),
        };
        for name in autopath.steps(base, namespace) {
            let Some(step) = step_request(&request, &name) else {
                break;
            };
            let target = step.q.qname.clone();
            match self.route(&step, Some(snapshot.clone())) {
                Route::Reply(reply) if !ends_walk(&reply) => continue,
                Route::Reply(reply) => {
                    let reply = self.chained(&request, Some((target, reply)), first);
                    return Ok(Outcome::Done(reply));
                }
                Route::Drop => break,
                Route::Pending(route) => return Ok(self.walk_on(request, step, route, first)),
            }
        }
        Ok(Outcome::Done(self.chained(&request, None, first)))
    }

    /// A walk whose name `step` needs upstream work (`route`).
    fn walk_on(
        self: &Arc<Self>,
        request: Request,
        step: Request,
        route: pending::Route,
        first: Message,
    ) -> Outcome {
        let target = step.q.qname.clone();
        match self.pending(step, route) {
            Outcome::Done(bytes) => {
                let reply = bytes.and_then(|b| Message::from_vec(&b).ok());
                Outcome::Done(self.chained(&request, reply.map(|r| (target, r)), first))
            }
            Outcome::Pending(step) => Outcome::Pending(Box::new(Pending {
                engine: Arc::clone(self),
                request,
                route: pending::Route::Autopath(Box::new(Walk {
                    step,
                    target,
                    first,
                })),
                _slot: None,
            })),
        }
    }

    /// Completes a walk that waited on upstream work.
    pub(super) async fn finish_walk(
        self: &Arc<Self>,
        request: &Request,
        walk: Walk,
    ) -> Option<Vec<u8>> {
        let Walk {
            step,
            target,
            first,
        } = walk;
        let bytes = Box::pin(self.resolve(*step)).await;
        let reply = bytes.and_then(|b| Message::from_vec(&b).ok());
        self.chained(request, reply.map(|r| (target, r)), first)
    }

    /// The reply of a walk: the found name's NOERROR reply chained from the
    /// asked name (a hit), else the asked name's own NXDOMAIN (a miss).
    fn chained(
        &self,
        request: &Request,
        found: Option<(Name, Message)>,
        first: Message,
    ) -> Option<Vec<u8>> {
        match found {
            Some((target, found)) if found.metadata.response_code == ResponseCode::NoError => {
                self.metrics.autopath("hit");
                let ttl = chain_ttl(&found, self.zone.min_ttl);
                self.send(request, chain(&request.message, &target, found, ttl))
            }
            _ => {
                self.metrics.autopath("miss");
                self.send(request, first)
            }
        }
    }

    /// Whether `bytes`, the reply to `q`, is an NXDOMAIN that a walk could
    /// replace for some client: it must not be reused for every client.
    pub(super) fn autopath_may_walk(&self, q: &Question, bytes: &[u8]) -> bool {
        let nxdomain = bytes.get(3).is_some_and(|b| b & 0x0f == 3);
        nxdomain && (self.options.autopath.as_ref()).is_some_and(|a| a.split(&q.name).is_some())
    }
}

/// The request for one name of a walk: the client's question for `name`,
/// not counted in the metrics.
fn step_request(request: &Request, name: &str) -> Option<Request> {
    let qname = Name::from_ascii(name).ok()?;
    let mut query = Query::query(qname.clone(), request.q.qtype);
    query.set_query_class(request.q.qclass);
    let mut message = request.message.clone();
    message.queries = vec![query];
    let packet = message.to_vec().ok()?;
    Some(Request {
        message,
        packet,
        q: Question::new(qname, request.q.qtype, request.q.qclass),
        tcp: request.tcp,
        limit: request.limit,
        dnssec_ok: false,
        start: request.start,
        account: false,
    })
}
