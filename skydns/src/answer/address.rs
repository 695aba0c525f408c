//! A and AAAA answers, with SkyDNS's CNAME chasing (`AddressRecords`).
//!
//! An IP host gives an address record owned by the query name (original
//! case). A name host gives `CNAME qname → host` followed by the addresses of
//! the host, looked up again in the snapshot: a chain is cut after 8 links or
//! on a loop, a CNAME to the query name itself is skipped (that is why the
//! SRV leaf of a cluster-IP service never shows up in its A answer), and a
//! CNAME whose target yields nothing is left out.

use super::records::{group, records};
use super::{name, rr, Answer, Ctx, Question};
use crate::path::fqdn;
use crate::path::in_domain;
use crate::record::HostKind;
use hickory_proto::rr::rdata::{A, AAAA, CNAME};
use hickory_proto::rr::{Name, RData, Record, RecordType};
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
    let services = group(records(ctx.zone, ctx.snapshot, owner.lower, false)?);
    let mut out = Vec::new();
    for s in services {
        match s.record.host_kind() {
            HostKind::Ip(IpAddr::V4(ip)) if family != Family::V6 => {
                out.push(rr(owner.name.clone(), s.ttl, RData::A(A(ip))));
            }
            HostKind::Ip(IpAddr::V6(ip)) if family != Family::V4 => {
                out.push(rr(owner.name.clone(), s.ttl, RData::AAAA(AAAA(ip))));
            }
            HostKind::Ip(_) | HostKind::None => {}
            HostKind::Name(host) => {
                let target = fqdn(host);
                if let Some(records) = chase(ctx, owner, &target, s.ttl, family, chain) {
                    out.extend(records);
                }
            }
        }
    }
    Some(out)
}

/// `CNAME owner → target` plus the target's addresses, or `None` to skip.
fn chase(
    ctx: &Ctx<'_>,
    owner: &Owner<'_>,
    target: &str,
    ttl: u32,
    family: Family,
    chain: &[Record],
) -> Option<Vec<Record>> {
    if owner.text == target || chain.len() > MAX_CHAIN {
        return None;
    }
    let target_name = name(target)?;
    let looped = chain
        .iter()
        .any(|r| matches!(&r.data, RData::CNAME(c) if c.0 == target_name));
    if looped {
        return None;
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
    let found = match address_records(ctx, &next, family, &next_chain) {
        // From the store, a CNAME is only worth it with addresses behind it.
        Some(found) if found.is_empty() => return None,
        Some(found) => found,
        // Not in the store: a target outside the domain is asked upstream;
        // a successful lookup keeps the CNAME even without addresses.
        None if !in_domain(&lower, &ctx.zone.domain) => {
            let qtype = if family == Family::V6 {
                RecordType::AAAA
            } else {
                RecordType::A
            };
            ctx.lookups.external(&target_name, qtype)?
        }
        None => return None,
    };
    let mut out = Vec::with_capacity(found.len() + 1);
    out.push(cname);
    out.extend(found);
    Some(out)
}
