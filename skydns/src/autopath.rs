//! The server-side search path (`-autopath`; CoreDNS's `autopath @kubernetes`),
//! its pure part: which names qualify and for which namespace
//! ([`Autopath::split`]), the names to try ([`Autopath::steps`]), where a
//! client's pod records are ([`pod_dir`]) and the chained reply ([`chain`]).
//! The walk itself is `handler/autopath.rs`.

use crate::answer::Zone;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::CNAME;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use std::net::IpAddr;

mod flags;
pub use flags::Flags;

/// The search list and `ndots` autopath assumes every pod resolves with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Autopath {
    /// The search domains, lowercased with their trailing dot, `{ns}` not
    /// yet filled in. The first is `{ns}.<suffix>`.
    search: Vec<String>,
    /// What follows `{ns}` in the first search domain, e.g. `.svc.cluster.local.`.
    first_suffix: String,
    /// Names with this many dots or more are asked as they are first
    /// (resolv.conf's `ndots`): the search list does not come first for
    /// them, so autopath leaves them alone.
    ndots: usize,
}

/// The namespace placeholder of `-autopath-search`.
const NAMESPACE: &str = "{ns}";
/// The domain placeholder of `-autopath-search`.
const DOMAIN: &str = "{domain}";

impl Autopath {
    /// The search list `search` (comma separated; `{ns}` is the client's
    /// namespace, `{domain}` the served domain; the first must begin with
    /// `{ns}.`) with resolv.conf's `ndots`, for `domain`.
    pub fn new(search: &str, ndots: usize, domain: &str) -> Result<Self, String> {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        let search: Vec<String> = (search.split(','))
            .map(|s| s.trim().trim_end_matches('.').to_ascii_lowercase())
            .filter(|s| !s.is_empty())
            .map(|s| format!("{}.", s.replace(DOMAIN, &domain)))
            .collect();
        let Some(first_suffix) = search.first().and_then(|s| s.strip_prefix(NAMESPACE)) else {
            return Err(format!(
                "-autopath-search must begin with a domain {NAMESPACE}.<...> (the client's namespace first)"
            ));
        };
        if !first_suffix.starts_with('.')
            || first_suffix.len() < 2
            || first_suffix.contains(NAMESPACE)
        {
            return Err(format!(
                "-autopath-search's first domain must be {NAMESPACE}.<...> with {NAMESPACE} once"
            ));
        }
        if ndots == 0 {
            return Err("-autopath-ndots must be at least 1".into());
        }
        Ok(Autopath {
            first_suffix: first_suffix.to_string(),
            search,
            ndots,
        })
    }

    /// For a lowercased query `name` (trailing dot) that ends in the first
    /// search domain of some namespace: that namespace and the name the
    /// client looked up (`base`). `None` for any other name, for a base
    /// with `ndots` dots or more, and for names with a `_` label (SRV
    /// names: left to the client).
    pub(crate) fn split<'a>(&self, name: &'a str) -> Option<(&'a str, &'a str)> {
        let rest = name.strip_suffix(self.first_suffix.as_str())?;
        let (base, namespace) = rest.rsplit_once('.')?;
        let label = |l: &str| !l.is_empty() && !l.starts_with('_');
        let fits = label(namespace)
            && base.split('.').all(label)
            && base.matches('.').count() < self.ndots;
        fits.then_some((namespace, base))
    }

    /// The names to try after the asked one, in order: the other search
    /// domains for `namespace`, then `base` itself.
    pub(crate) fn steps(&self, base: &str, namespace: &str) -> Vec<String> {
        let mut out: Vec<String> = (self.search.iter().skip(1))
            .map(|domain| format!("{base}.{}", domain.replace(NAMESPACE, namespace)))
            .collect();
        out.push(format!("{base}."));
        out
    }
}

/// The etcd directory of the records of a pod with IP `client` in
/// `namespace` (kube2sky's `<a-b-c-d>.<ns>.pod.<domain>`), with a trailing
/// `/`: a client is a pod of the namespace when a key lies below it.
pub(crate) fn pod_dir(zone: &Zone, namespace: &str, client: IpAddr) -> String {
    let ip = client.to_canonical().to_string().replace(['.', ':'], "-");
    let name = format!("{ip}.{namespace}.pod.{}", zone.domain);
    format!("{}/", zone.prefix.path(&name))
}

/// The reply to `request` from the reply `step` to the same question for
/// `target`: a CNAME from the asked name to `target` (TTL `ttl`), then
/// `step`'s answers, authority, additionals and rcode; the header and the
/// question are the request's.
pub(crate) fn chain(request: &Message, target: &Name, step: Message, ttl: u32) -> Message {
    let mut reply = Message::response(request.metadata.id, request.metadata.op_code);
    reply.metadata.recursion_desired = request.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    reply.metadata.authoritative = step.metadata.authoritative;
    reply.metadata.response_code = step.metadata.response_code;
    reply.queries = request.queries.iter().take(1).cloned().collect();
    if let Some(query) = request.queries.first() {
        let cname = RData::CNAME(CNAME(target.clone()));
        let mut record = Record::from_rdata(query.name().clone(), ttl, cname);
        record.dns_class = query.query_class();
        reply.answers.push(record);
    }
    reply.answers.extend(step.answers);
    reply.authorities.extend(step.authorities);
    reply.additionals.extend(step.additionals);
    // A step cut short: the client asks again over TCP.
    reply.metadata.truncation = step.metadata.truncation;
    reply
}

/// The TTL of the CNAME [`chain`] adds: the lowest of the answers it
/// leads to, or `fallback` when there are none (NODATA).
pub(crate) fn chain_ttl(step: &Message, fallback: u32) -> u32 {
    (step.answers.iter())
        .map(|r| r.ttl)
        .min()
        .unwrap_or(fallback)
}

/// Whether `name`, a step's name, can own records a walk may chain to:
/// not a namespace's directory (`<ns>.svc.<domain>`, `<ns>.pod.<domain>`)
/// nor the `svc`/`pod` roots, which SkyDNS answers with every record below
/// them. (`redis.default.svc.<domain>`, glibc's second step for
/// `redis.default`, reads as a first step for `redis`; its walk must not
/// answer `redis.svc.<domain>` with every service of a namespace `redis`.)
pub(crate) fn names_records(domain: &str, name: &str) -> bool {
    let domain = domain.trim_end_matches('.');
    let Some(rest) = name.trim_end_matches('.').strip_suffix(domain) else {
        return true; // outside the domain: forwarded, not a directory of ours
    };
    let labels: Vec<&str> = rest
        .trim_end_matches('.')
        .split('.')
        .filter(|l| !l.is_empty())
        .collect();
    match labels.as_slice() {
        [] => false,
        [.., kind] if *kind == "svc" || *kind == "pod" => labels.len() >= 3,
        _ => true,
    }
}

/// Whether a step's reply ends the walk: anything but NXDOMAIN.
pub(crate) fn ends_walk(step: &Message) -> bool {
    step.metadata.response_code != ResponseCode::NXDomain
}

/// Whether the walk may run for a question of `qtype`.
pub(crate) fn walks(qtype: RecordType) -> bool {
    !matches!(
        qtype,
        RecordType::ANY | RecordType::AXFR | RecordType::IXFR | RecordType::OPT
    )
}

/// Most questions [`WalkMemo`] remembers; it starts over when full.
const WALK_MEMO_ENTRIES: usize = 10_000;

/// Which step of a walk answered, per question (lowercased name and type),
/// for the snapshot generation it was walked on: a repeated question on the
/// same snapshot goes straight to that step (the steps before it were
/// NXDOMAIN and still are), so a walk costs one lookup, not four. Any
/// change of the records is a new generation, which the memo does not
/// match. What the step answers is not kept: a forwarded name still goes
/// through the forwarders and their cache.
#[derive(Debug, Default)]
pub(crate) struct WalkMemo {
    steps: std::sync::Mutex<std::collections::HashMap<(String, u16), (i64, usize)>>,
}

impl WalkMemo {
    /// The step that answered `name`/`qtype` on snapshot `generation`.
    pub(crate) fn get(&self, name: &str, qtype: RecordType, generation: i64) -> Option<usize> {
        let steps = self.steps.lock().unwrap_or_else(|e| e.into_inner());
        match steps.get(&(name.to_string(), u16::from(qtype))) {
            Some(&(at, step)) if at == generation => Some(step),
            _ => None,
        }
    }

    /// Notes that `step` answered `name`/`qtype` on snapshot `generation`.
    pub(crate) fn note(&self, name: &str, qtype: RecordType, generation: i64, step: usize) {
        let mut steps = self.steps.lock().unwrap_or_else(|e| e.into_inner());
        if steps.len() >= WALK_MEMO_ENTRIES {
            steps.clear();
        }
        steps.insert((name.to_string(), u16::from(qtype)), (generation, step));
    }
}

#[cfg(test)]
mod tests;
