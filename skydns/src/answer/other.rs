//! The remaining answer types: TXT, CNAME, NS, SOA, PTR and CHAOS TXT, each as
//! SkyDNS's `server/server.go` builds it.

use super::records::{group, records, Service};
use super::{name, rr, Answer, Question, Zone};
use crate::snapshot::{Leaf, Snapshot};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS, PTR, SOA, TXT};
use hickory_proto::rr::{DNSClass, RData, Record, RecordType};
use skydns_msg::path::{fqdn, labels};
use skydns_msg::record::HostKind;
use std::collections::HashSet;
use std::net::IpAddr;

/// The version SkyDNS 2.5.2c reports for `version.bind`.
const VERSION: &str = "2.5.2c";
const AUTHORS: [&str; 4] = [
    "Erik St. Martin",
    "Brian Ketelsen",
    "Miek Gieben",
    "Michael Crosby",
];

/// TXT: one record per service with text, after the group filter.
pub(super) fn answer_txt(zone: &Zone, snapshot: &Snapshot, q: &Question) -> Answer {
    let Some(services) = records(zone, snapshot, &q.name, false) else {
        return Answer::NameError;
    };
    let answers = group(services)
        .into_iter()
        .filter(|s| !s.record.text.is_empty())
        .map(|s| {
            rr(
                q.qname.clone(),
                s.ttl,
                RData::TXT(split_text(&s.record.text)),
            )
        })
        .collect();
    Answer::records(answers)
}

/// SkyDNS's TXT splitting: shorter than 255 bytes stays one string, longer
/// text becomes 255-byte chunks plus the (possibly empty) remainder. Each
/// string then goes on the wire as miekg/dns packed it ([`unescape`]).
fn split_text(text: &str) -> TXT {
    let bytes = text.as_bytes();
    let mut parts: Vec<&[u8]> = Vec::new();
    if bytes.len() < 255 {
        parts.push(bytes);
    } else {
        parts.extend(bytes.chunks_exact(255));
        parts.push(bytes.chunks_exact(255).remainder());
    }
    let parts: Vec<Vec<u8>> = parts.into_iter().map(unescape).collect();
    TXT::from_bytes(parts.iter().map(Vec::as_slice).collect())
}

/// miekg/dns's TXT string packing: `\DDD` (three digits) is the byte DDD
/// (computed in a byte, so `\999` wraps), `\X` is X, a trailing lone `\`
/// is dropped; everything else is copied.
fn unescape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != b'\\' {
            out.push(raw[i]);
            i += 1;
            continue;
        }
        i += 1;
        match raw.get(i..i + 3) {
            Some(d) if d.iter().all(u8::is_ascii_digit) => {
                let byte = d
                    .iter()
                    .fold(0u8, |n, c| n.wrapping_mul(10).wrapping_add(c - b'0'));
                out.push(byte);
                i += 3;
            }
            _ => {
                if let Some(&c) = raw.get(i) {
                    out.push(c);
                }
                i += 1;
            }
        }
    }
    out
}

/// CNAME: the CNAME an A query for the name starts with. Its records are
/// the leaf at the name or the leaves one level below it (an ExternalName
/// service's `<svc>/<hash>`; SkyDNS read the exact key only); deeper
/// leaves belong to other names. Of several name hosts the last wins, as
/// the A answer's de-duplication keeps the last CNAME of an owner; a host
/// equal to the query name is skipped, as there.
pub(super) fn answer_cname(zone: &Zone, snapshot: &Snapshot, q: &Question) -> Answer {
    let Some(services) = records(zone, snapshot, &q.name, false) else {
        return Answer::NameError;
    };
    let depth = zone.prefix.path(&q.name).split('/').count() + 1;
    let near: Vec<Service> = services
        .into_iter()
        .filter(|s| s.key.split('/').count() <= depth)
        .collect();
    let cname = group(near).into_iter().rev().find_map(|s| {
        let HostKind::Name(host) = s.record.host_kind() else {
            return None;
        };
        let target = fqdn(host);
        if target == q.qname_text {
            return None;
        }
        Some(rr(
            q.qname.clone(),
            s.ttl,
            RData::CNAME(CNAME(name(&target)?)),
        ))
    });
    Answer::records(cname.into_iter().collect())
}

/// NS: only for the apex, from the records under `ns.dns.<domain>`.
pub(super) fn answer_ns(zone: &Zone, snapshot: &Snapshot, q: &Question) -> Answer {
    if q.name != zone.domain {
        return Answer::no_data();
    }
    let Some(services) = records(zone, snapshot, &zone.ns_name(), false) else {
        return Answer::NameError;
    };
    let mut answers = Vec::new();
    let mut additionals = Vec::new();
    for s in group(services) {
        let HostKind::Ip(ip) = s.record.host_kind() else {
            // A name host is an error in SkyDNS, which answers NODATA.
            return Answer::no_data();
        };
        let Some(server) = name(&zone.prefix.domain(&s.key)) else {
            continue;
        };
        answers.push(rr(q.qname.clone(), s.ttl, RData::NS(NS(server.clone()))));
        let data = match ip {
            IpAddr::V4(ip) => RData::A(A(ip)),
            IpAddr::V6(ip) => RData::AAAA(AAAA(ip)),
        };
        additionals.push(rr(server, s.ttl, data));
    }
    Answer::Records {
        answers,
        additionals,
    }
}

/// The zone's SOA record with the given TTL; the serial is `now` truncated
/// to the hour.
pub(crate) fn soa(zone: &Zone, now: u64, ttl: u32) -> Record {
    let serial = (now - now % 3600) as u32;
    let data = SOA::new(
        name(&zone.ns_name()).unwrap_or_default(),
        name(&zone.hostmaster).unwrap_or_default(),
        serial,
        28800,
        7200,
        604_800,
        zone.min_ttl,
    );
    rr(
        name(&zone.domain).unwrap_or_default(),
        ttl,
        RData::SOA(data),
    )
}

/// PTR from the reverse tree: the leaf at the name, or, when an address
/// has several names, every leaf directly below its directory (kube2sky's
/// `<ip path>/<label>`; SkyDNS refused a directory). One PTR per distinct
/// target, in key order; records without a host give none. No wildcards.
/// `None` (nothing to answer) sends the question upstream.
pub(crate) fn reverse(zone: &Zone, snapshot: &Snapshot, q: &Question) -> Option<Vec<Record>> {
    let (path, star) = zone.prefix.path_with_wildcard(&q.name);
    if star {
        return None;
    }
    let leaves: Vec<Leaf> = match snapshot.get(&path) {
        Some(leaf) => vec![leaf],
        // Only a whole address has names below it: `0.0.10.in-addr.arpa.`
        // is the directory of 10.0.0.*, whose leaves are other addresses.
        None if !is_address_name(&q.name) => return None,
        None => {
            let dir = format!("{path}/");
            snapshot
                .scan_prefix(&dir)
                .filter(|leaf| {
                    let label = &leaf.key[dir.len()..];
                    !label.contains('/') && !label.starts_with('_')
                })
                .collect()
        }
    };
    let mut seen = HashSet::new();
    let mut answers = Vec::new();
    for leaf in leaves {
        if leaf.record.host_kind() == HostKind::None {
            continue;
        }
        let Some(target) = name(&fqdn(&leaf.record.host)) else {
            continue;
        };
        if !seen.insert(target.to_lowercase()) {
            continue;
        }
        let ttl = match leaf.record.ttl {
            0 => zone.ttl,
            t => t,
        };
        answers.push(rr(q.qname.clone(), ttl, RData::PTR(PTR(target))));
    }
    (!answers.is_empty()).then_some(answers)
}

/// Whether `name` (lowercase) is a whole address in a reverse tree: four
/// labels before `in-addr.arpa.` or 32 before `ip6.arpa.`.
fn is_address_name(name: &str) -> bool {
    let count = |suffix: &str| name.strip_suffix(suffix).map(|head| labels(head).count());
    count(".in-addr.arpa.") == Some(4) || count(".ip6.arpa.") == Some(32)
}

/// CHAOS class: TXT for the authors, version and hostname names.
pub(crate) fn chaos(zone: &Zone, q: &Question) -> Answer {
    if q.qtype != RecordType::TXT {
        return Answer::ServerFailure;
    }
    let texts: Vec<&str> = match q.name.as_str() {
        "authors.bind." => AUTHORS.to_vec(),
        n if n == zone.domain => AUTHORS.to_vec(),
        "version.bind." | "version.server." => vec![VERSION],
        "hostname.bind." | "id.server." => vec!["localhost"],
        _ => return Answer::ServerFailure,
    };
    let answers = texts
        .into_iter()
        .map(|t| {
            let mut r = rr(
                q.qname.clone(),
                0,
                RData::TXT(TXT::new(vec![t.to_string()])),
            );
            r.dns_class = DNSClass::CH;
            r
        })
        .collect();
    Answer::records(answers)
}
