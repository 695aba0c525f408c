//! The walk of `-autopath` (the names and the reply are `crate::autopath`):
//! when the asked name is NXDOMAIN and the client qualifies, each further name
//! of its search list is routed as a query for it would be, and the first that
//! is not NXDOMAIN gives the reply. Such replies never enter the reply cache.

use super::pending::{self, Walk};
use super::{Engine, Outcome, Pending, Request, Route};
use crate::answer::Question;
use crate::autopath::{chain, chain_ttl, ends_walk, names_records, pod_dir, walks};
use crate::query_log::Source;
use crate::snapshot::{Read, Snapshot};
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name};
use std::ops::ControlFlow;
use std::sync::Arc;

impl Engine {
    /// The namespace whose search list `request` could be walked for,
    /// whoever asks: autopath on, no DO, class IN, a type that walks, a name
    /// in a namespace's first search domain.
    fn walk_namespace<'a>(&self, request: &'a Request) -> Option<&'a str> {
        let autopath = self.settings.autopath.as_ref()?;
        let q = &request.q;
        if request.dnssec_ok || !walks(q.qtype) || q.qclass != DNSClass::IN {
            return None;
        }
        autopath.split(&q.name).map(|(namespace, _)| namespace)
    }

    /// Step 5: walks the search list of a pod's query, or passes the
    /// request on.
    pub(super) fn autopath(
        self: &Arc<Self>,
        request: Request,
        snapshot: Option<&Arc<Snapshot>>,
    ) -> ControlFlow<Outcome, Request> {
        match snapshot {
            Some(s) if self.may_walk(&request, Some(s)) => match self.walk(request, s) {
                Ok(outcome) => ControlFlow::Break(outcome),
                Err(request) => ControlFlow::Continue(*request),
            },
            _ => ControlFlow::Continue(request),
        }
    }

    /// Whether a query qualifies for a walk (see the module docs).
    pub(super) fn may_walk(&self, request: &Request, snapshot: Option<&Arc<Snapshot>>) -> bool {
        let (Some(snapshot), Some(client)) = (snapshot, request.client) else {
            return false;
        };
        let Some(namespace) = self.walk_namespace(request) else {
            return false;
        };
        let dir = pod_dir(&self.zone, namespace, client.ip());
        let is_pod = snapshot.scan_prefix(&dir).next().is_some();
        is_pod
    }

    /// The reply of a walk for a request that [`Engine::may_walk`], or the
    /// request back when its own name is not NXDOMAIN (then it is answered
    /// as usual). A question walked before on the same records goes
    /// straight to the step that answered ([`crate::autopath::WalkMemo`]).
    pub(super) fn walk(
        self: &Arc<Self>,
        request: Request,
        snapshot: &Arc<Snapshot>,
    ) -> Result<Outcome, Box<Request>> {
        let Some(autopath) = self.settings.autopath.clone() else {
            return Err(Box::new(request));
        };
        let Some((namespace, base)) = autopath.split(&request.q.name) else {
            return Err(Box::new(request));
        };
        let steps = autopath.steps(base, namespace);
        let (name, qtype, generation) = (&request.q.name, request.q.qtype, snapshot.generation());
        if let Some(known) = self.walks.get(name, qtype, generation) {
            let step = steps.get(known).and_then(|n| step_request(&request, n));
            if let Some(step) = step {
                match self.route(&step, Some(snapshot.clone())) {
                    Route::Reply(reply)
                        if reply.metadata.response_code == ResponseCode::NoError =>
                    {
                        let target = step.q.qname.clone();
                        let reply = self.chained(&request, Some((target, reply)), None);
                        return Ok(Outcome::Done(reply));
                    }
                    Route::Pending(route) => return Ok(self.walk_on(request, step, route, None)),
                    _ => {} // walked in full below
                }
            }
        }
        let first = match self.route(&request, Some(snapshot.clone())) {
            Route::Reply(reply) if !ends_walk(&reply) => reply,
            _ => return Err(Box::new(request)),
        };
        for (index, name) in steps.iter().enumerate() {
            let Some(step) = step_request(&request, name) else {
                continue; // longer than a name can be
            };
            let target = step.q.qname.clone();
            match self.route(&step, Some(snapshot.clone())) {
                Route::Reply(reply) if !ends_walk(&reply) => continue,
                Route::Reply(_) if !names_records(&self.zone.domain, name) => continue,
                Route::Reply(reply) => {
                    self.walks.note(&request.q.name, qtype, generation, index);
                    let reply = self.chained(&request, Some((target, reply)), Some(first));
                    return Ok(Outcome::Done(reply));
                }
                Route::Drop => continue,
                Route::Pending(route) => {
                    self.walks.note(&request.q.name, qtype, generation, index);
                    return Ok(self.walk_on(request, step, route, Some(first)));
                }
            }
        }
        Ok(Outcome::Done(self.chained(&request, None, Some(first))))
    }

    /// A walk whose name `step` needs upstream work (`route`).
    fn walk_on(
        self: &Arc<Self>,
        request: Request,
        step: Request,
        route: pending::Route,
        first: Option<Message>,
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
        first: Option<Message>,
    ) -> Option<Vec<u8>> {
        match found {
            Some((target, found)) if found.metadata.response_code == ResponseCode::NoError => {
                self.metrics.autopath("hit");
                // The CNAME also says that the names before it do not
                // exist: no longer than an NXDOMAIN would be kept.
                let ttl = chain_ttl(&found, self.zone.min_ttl).min(self.zone.min_ttl);
                let reply = chain(&request.message, &target, found, ttl);
                self.send_from(request, reply, Source::Autopath)
            }
            _ => {
                self.metrics.autopath("miss");
                let first = first.unwrap_or_else(|| self.own_reply(request));
                self.send_from(request, first, Source::Autopath)
            }
        }
    }

    /// The asked name's own reply on the current records (a walk that went
    /// straight to its step and found nothing there after all).
    fn own_reply(&self, request: &Request) -> Message {
        match self.route(request, self.snapshot.load_full()) {
            Route::Reply(reply) => reply,
            _ => {
                let mut reply = super::base_reply(&request.message);
                reply.metadata.response_code = ResponseCode::ServFail;
                reply
            }
        }
    }

    /// Whether `bytes`, the reply to `request`, is an NXDOMAIN that a walk
    /// could replace for a pod of the name's namespace, which has pods: it
    /// must not be reused for every client. The namespace's pod directory is
    /// added to `reads`, the reads the reply depends on, so that a first pod
    /// there drops a reply cached meanwhile.
    pub(super) fn autopath_may_walk(
        &self,
        request: &Request,
        bytes: &[u8],
        snapshot: Option<&Snapshot>,
        reads: &mut Vec<Read>,
    ) -> bool {
        let nxdomain = bytes.get(3).is_some_and(|b| b & 0x0f == 3);
        let (Some(snapshot), true) = (snapshot, nxdomain) else {
            return false;
        };
        let Some(namespace) = self.walk_namespace(request) else {
            return false;
        };
        let pods = format!(
            "{}/",
            self.zone
                .prefix
                .path(&format!("{namespace}.pod.{}", self.zone.domain))
        );
        let has_pods = snapshot.scan_prefix(&pods).next().is_some();
        reads.push(Read::Prefix(Arc::from(pods)));
        has_pods
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
        client: request.client,
        source: request.source,
    })
}
