//! Authoritative answers for the cluster domain, as pure functions:
//! [`authoritative`] takes the [`Zone`] settings, the [`Snapshot`] and a
//! [`Question`] and returns an [`Answer`] (SkyDNS's `ServeDNS` in
//! `server/server.go`). No I/O, no clock, no randomness. One file per kind of
//! answer (`address`, `srv`, `other`); `records` holds the steps they share.

mod address;
mod lookups;
mod other;
mod records;
mod srv;

pub(crate) use lookups::Lookups;
pub(crate) use other::{chaos, reverse, soa};
#[cfg(test)]
use records::Service;
#[cfg(test)]
use srv::weights;

use crate::snapshot::Snapshot;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use skydns_msg::path::PathPrefix;

/// The settings an authoritative answer depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Zone {
    /// The served domain, lowercase and fully qualified (`cluster.local.`).
    pub domain: String,
    /// The etcd root (`skydns`).
    pub prefix: PathPrefix,
    /// Default record TTL and the SOA TTL (3600).
    pub ttl: u32,
    /// TTL of the SOA in negative answers and the SOA minimum (60).
    pub min_ttl: u32,
    /// Priority given to records with priority 0 (10).
    pub priority: u16,
    /// SOA RNAME, fully qualified, `@` already replaced.
    pub hostmaster: String,
}

impl Zone {
    /// `ns.dns.<domain>`: the SOA MNAME and where NS records live.
    pub fn ns_name(&self) -> String {
        format!("ns.dns.{}", self.domain)
    }
}

/// A question, already validated by the handler.
#[derive(Clone, Debug)]
pub(crate) struct Question {
    /// The query name exactly as received (its case is used for owners).
    pub qname: Name,
    /// `qname` as text, original case, with the trailing dot.
    pub qname_text: String,
    /// `qname` as text, lowercased, with the trailing dot.
    pub name: String,
    /// The query type.
    pub qtype: RecordType,
    /// The query class.
    pub qclass: DNSClass,
}

impl Question {
    /// A question for `qname` (case kept for owner names).
    pub(crate) fn new(qname: Name, qtype: RecordType, qclass: DNSClass) -> Self {
        let mut qname = qname;
        qname.set_fqdn(true);
        let qname_text = name_text(&qname);
        let name = qname_text.to_ascii_lowercase();
        Question {
            qname,
            qname_text,
            name,
            qtype,
            qclass,
        }
    }
}

/// The outcome of an authoritative lookup, before rcodes and wire limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// NOERROR; an empty answer section means NODATA.
    Records {
        /// Answer section.
        answers: Vec<Record>,
        /// Additional section.
        additionals: Vec<Record>,
    },
    /// The name does not exist (NXDOMAIN).
    NameError,
    /// SERVFAIL, as SkyDNS sends it for unknown CHAOS names.
    ServerFailure,
}

impl Answer {
    fn records(answers: Vec<Record>) -> Self {
        Answer::Records {
            answers,
            additionals: Vec::new(),
        }
    }

    fn no_data() -> Self {
        Answer::records(Vec::new())
    }
}

/// What an answer is computed from.
#[derive(Clone, Copy)]
pub(crate) struct Ctx<'a> {
    /// Zone settings.
    pub zone: &'a Zone,
    /// The records.
    pub snapshot: &'a Snapshot,
    /// Upstream answers for targets outside the domain.
    pub lookups: &'a Lookups,
}

/// Answers a question inside the domain (SkyDNS's `server/server.go`). `now` is the Unix
/// time, used only for the SOA serial. Targets outside the domain are taken
/// from `lookups`; those it lacks are noted there for the caller to fetch.
pub(crate) fn authoritative(
    zone: &Zone,
    snapshot: &Snapshot,
    q: &Question,
    now: u64,
    lookups: &Lookups,
) -> Answer {
    let ctx = Ctx {
        zone,
        snapshot,
        lookups,
    };
    if q.name == zone.domain && q.qtype == RecordType::SOA {
        return Answer::records(vec![soa(zone, now, zone.ttl)]);
    }
    if q.qclass == DNSClass::CH {
        return chaos(zone, q);
    }
    match q.qtype {
        RecordType::A | RecordType::AAAA => address::answer(&ctx, q),
        RecordType::SRV => srv::answer(&ctx, q),
        RecordType::MX => srv::answer_mx(&ctx, q),
        RecordType::TXT => other::answer_txt(zone, snapshot, q),
        RecordType::CNAME => other::answer_cname(zone, snapshot, q),
        RecordType::NS => other::answer_ns(zone, snapshot, q),
        // Every other type goes through the SRV path and keeps only its verdict.
        _ => match srv::answer(&ctx, q) {
            Answer::NameError => Answer::NameError,
            _ => Answer::no_data(),
        },
    }
}

/// A record of class IN.
fn rr(name: Name, ttl: u32, data: RData) -> Record {
    Record::from_rdata(name, ttl, data)
}

/// A name as plain text from its raw labels, with the trailing dot: no
/// escaping and no IDNA decoding (hickory's `Display` turns `xn--` labels
/// into Unicode), so the text maps to the etcd path the labels spell.
pub(crate) fn name_text(name: &Name) -> String {
    let mut out = String::with_capacity(name.len() + 1);
    for label in name.iter() {
        out.push_str(&String::from_utf8_lossy(label));
        out.push('.');
    }
    if out.is_empty() {
        out.push('.');
    }
    out
}

/// Parses a textual name; `None` for text hickory cannot represent.
fn name(text: &str) -> Option<Name> {
    let mut n = Name::from_ascii(text).ok()?;
    n.set_fqdn(true);
    Some(n)
}

#[cfg(test)]
pub(crate) mod tests;
