//! SRV and MX answers (SkyDNS's `SRVRecords`, `MXRecords`): the targets, their
//! A/AAAA records in the additional section, and the weights scaled per
//! priority exactly as SkyDNS computed them.

use super::address::{address_records, Family, Owner};
use super::records::{group, records, target_strip, Service};
use super::{name, rr, Answer, Ctx, Question};
use hickory_proto::rr::rdata::{A, AAAA, MX, SRV};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use skydns_msg::path::{fqdn, in_domain};
use skydns_msg::record::{go_float_to_uint16, go_uint16, HostKind};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

/// The SRV answer for `q`.
pub(super) fn answer(ctx: &Ctx<'_>, q: &Question) -> Answer {
    let Some(services) = records(ctx.zone, ctx.snapshot, &q.name, false) else {
        return Answer::NameError;
    };
    // Text-only records (no host) have no target: they neither answer
    // nor count in the weights.
    let services: Vec<Service> = group(services)
        .into_iter()
        .filter(|s| s.record.host_kind() != HostKind::None)
        .collect();
    let weights = weights(&services);
    let mut targets = Targets::default();
    let mut answers = Vec::with_capacity(services.len());
    for (s, weight) in services.iter().zip(weights) {
        let Some(target) = targets.target(ctx, s) else {
            continue;
        };
        let srv = SRV::new(
            go_uint16(s.record.priority),
            weight,
            go_uint16(s.record.port),
            target,
        );
        answers.push(rr(q.qname.clone(), s.ttl, RData::SRV(srv)));
    }
    Answer::Records {
        answers,
        additionals: targets.additionals,
    }
}

/// The MX answer for `q`: records with `mail: true` only, no group filter.
pub(super) fn answer_mx(ctx: &Ctx<'_>, q: &Question) -> Answer {
    let Some(services) = records(ctx.zone, ctx.snapshot, &q.name, false) else {
        return Answer::NameError;
    };
    let mut targets = Targets {
        mx: true,
        ..Targets::default()
    };
    let mut answers = Vec::new();
    for s in services.iter().filter(|s| s.record.mail) {
        let Some(exchange) = targets.target(ctx, s) else {
            continue;
        };
        let mx = MX::new(go_uint16(s.record.priority), exchange);
        answers.push(rr(q.qname.clone(), s.ttl, RData::MX(mx)));
    }
    Answer::Records {
        answers,
        additionals: targets.additionals,
    }
}

/// SRV weights: per priority, `floor(100 / sum * weight)` with 0 counted as 100.
pub(super) fn weights(services: &[Service]) -> Vec<u16> {
    // As SkyDNS: Go ints, grouped and summed before any 16-bit wrapping.
    let effective = |s: &Service| match s.record.weight {
        0 => 100,
        w => w,
    };
    let mut sums: HashMap<i64, i64> = HashMap::new();
    for s in services {
        let sum = sums.entry(s.record.priority).or_default();
        *sum = sum.wrapping_add(effective(s));
    }
    services
        .iter()
        .map(|s| {
            let share = 100.0 / sums[&s.record.priority] as f64;
            go_float_to_uint16((share * effective(s) as f64).floor())
        })
        .collect()
}

/// Builds targets and collects the additional section, once per target.
#[derive(Default)]
struct Targets {
    /// MX owns the additional record of an IP host by the un-stripped name.
    mx: bool,
    seen: HashSet<Name>,
    additionals: Vec<Record>,
}

impl Targets {
    fn target(&mut self, ctx: &Ctx<'_>, s: &Service) -> Option<Name> {
        match s.record.host_kind() {
            HostKind::Name(host) => {
                let target = name(&target_strip(&fqdn(host), s.record.targetstrip))?;
                if self.seen.insert(target.clone()) {
                    self.add_addresses_of(ctx, &target);
                }
                Some(target)
            }
            HostKind::None => None,
            HostKind::Ip(ip) => {
                let full = ctx.zone.prefix.domain(&s.key);
                let target = name(&target_strip(&full, s.record.targetstrip))?;
                let owner = if self.mx {
                    name(&full)?
                } else {
                    target.clone()
                };
                let data = match ip {
                    IpAddr::V4(ip) => RData::A(A(ip)),
                    IpAddr::V6(ip) => RData::AAAA(AAAA(ip)),
                };
                self.additionals.push(rr(owner, s.ttl, data));
                Some(target)
            }
        }
    }

    fn add_addresses_of(&mut self, ctx: &Ctx<'_>, target: &Name) {
        let text = super::name_text(target);
        let lower = text.to_ascii_lowercase();
        if !in_domain(&lower, &ctx.zone.domain) {
            // Outside the domain: A (everything) and AAAA (no CNAMEs) upstream.
            if let Some(a) = ctx.lookups.external(target, RecordType::A) {
                self.additionals.extend(a);
            }
            if let Some(aaaa) = ctx.lookups.external(target, RecordType::AAAA) {
                let no_cnames = aaaa
                    .into_iter()
                    .filter(|r| r.record_type() != RecordType::CNAME);
                self.additionals.extend(no_cnames);
            }
            return;
        }
        let owner = Owner {
            name: target,
            text: &text,
            lower: &lower,
        };
        if let Some(records) = address_records(ctx, &owner, Family::Both, &[]) {
            self.additionals.extend(records);
        }
    }
}
