//! A and AAAA answers, with SkyDNS's CNAME chasing (`AddressRecords`): an IP
//! host gives an address record, a name host gives a CNAME followed by the
//! addresses of the target. A chain stops after 8 links or on a loop.

use super::records::{group, records};
use super::{name, rr, Answer, Ctx, Question};
use hickory_proto::rr::rdata::{A, AAAA, CNAME};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use skydns_msg::path::fqdn;
use skydns_msg::path::in_domain;
use skydns_msg::record::HostKind;
use std::net::IpAddr;

/// Longest CNAME chain followed (SkyDNS: more than 7 previous records stops).
const MAX_CHAIN: usize = 7;

/// The A or AAAA answer for `q`.
pub(super) fn answer(ctx: &Ctx<'_>, q: &Question) -> Answer {
    let owner = Owner {
        name: &q.qname,
        text: &q.qname_text,
        lower: &q.name,
    };
    match address_records(ctx, &owner, Family::of(q.qtype), &[]) {
        Some(records) => Answer::records(records),
        None => Answer::NameError,
    }
}

/// Which address records to produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Family {
    V4,
    V6,
    Both,
}

impl Family {
    fn of(qtype: RecordType) -> Self {
        if qtype == RecordType::AAAA {
            Family::V6
        } else {
            Family::V4
        }
    }
}

/// The name being resolved, in the three forms the rules need.
pub(super) struct Owner<'a> {
    pub(super) name: &'a Name,
    pub(super) text: &'a str,
    pub(super) lower: &'a str,
}

/// Address records for `owner`; `None` when the name does not exist.
pub(super) fn address_records(
    ctx: &Ctx<'_>,
    owner: &Owner<'_>,
    family: Family,
    chain: &[Record],
) -> Option<Vec<Record>> {
    resolve(ctx, owner, family, chain).map(|r| r.records)
}

/// What resolving one name gave.
#[derive(Default)]
struct Resolved {
    records: Vec<Record>,
    /// A CNAME below was dropped for a loop or the chain limit.
    cut: bool,
}

/// What one name host gave.
enum Link {
    /// `CNAME owner → target`, then whatever the target resolved to.
    Records(Vec<Record>),
    /// Dropped for a loop or the chain limit; an owner left with nothing
    /// else is dropped by the CNAME above it too.
    Cut,
    /// Not a CNAME to follow: the owner itself, or not a valid name.
    Skip,
}

fn resolve(ctx: &Ctx<'_>, owner: &Owner<'_>, family: Family, chain: &[Record]) -> Option<Resolved> {
    let services = group(records(ctx.zone, ctx.snapshot, owner.lower, false)?);
    let mut out = Resolved::default();
    for s in services {
        match s.record.host_kind() {
            HostKind::Ip(IpAddr::V4(ip)) if family != Family::V6 => {
                out.records
                    .push(rr(owner.name.clone(), s.ttl, RData::A(A(ip))));
            }
            HostKind::Ip(IpAddr::V6(ip)) if family != Family::V4 => {
                out.records
                    .push(rr(owner.name.clone(), s.ttl, RData::AAAA(AAAA(ip))));
            }
            HostKind::Ip(_) | HostKind::None => {}
            HostKind::Name(host) => match chase(ctx, owner, &fqdn(host), s.ttl, family, chain) {
                Link::Records(records) => out.records.extend(records),
                Link::Cut => out.cut = true,
                Link::Skip => {}
            },
        }
    }
    Some(out)
}

/// `CNAME owner → target` plus the target's addresses. The CNAME stays
/// when the target does not resolve (absent, no address of the family, or
/// an upstream lookup that failed): only loops and over-long chains drop it.
fn chase(
    ctx: &Ctx<'_>,
    owner: &Owner<'_>,
    target: &str,
    ttl: u32,
    family: Family,
    chain: &[Record],
) -> Link {
    if owner.text == target {
        return Link::Skip;
    }
    if chain.len() > MAX_CHAIN {
        return Link::Cut;
    }
    let Some(target_name) = name(target) else {
        return Link::Skip;
    };
    let looped = chain
        .iter()
        .any(|r| matches!(&r.data, RData::CNAME(c) if c.0 == target_name));
    if looped {
        return Link::Cut;
    }
    let cname = rr(
        owner.name.clone(),
        ttl,
        RData::CNAME(CNAME(target_name.clone())),
    );
    let mut next_chain = chain.to_vec();
    next_chain.push(cname.clone());
    let lower = target.to_ascii_lowercase();
    let next = Owner {
        name: &target_name,
        text: target,
        lower: &lower,
    };
    let found = match resolve(ctx, &next, family, &next_chain) {
        Some(found) if found.records.is_empty() && found.cut => return Link::Cut,
        Some(found) => found.records,
        // Not in the store: a target outside the domain is asked upstream.
        None if !in_domain(&lower, &ctx.zone.domain) => {
            let qtype = if family == Family::V6 {
                RecordType::AAAA
            } else {
                RecordType::A
            };
            ctx.lookups
                .external(&target_name, qtype)
                .unwrap_or_default()
        }
        None => Vec::new(),
    };
    let mut out = Vec::with_capacity(found.len() + 1);
    out.push(cname);
    out.extend(found);
    Link::Records(out)
}
