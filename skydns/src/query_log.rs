//! `-log-queries`: one structured line per answered query, as CoreDNS's `log`
//! plugin writes them. [`QueryLog`] decides which replies are written (their
//! class, then the sampling rate) and writes each as a tracing event with
//! target `skydns::query`. Off by default, it costs one branch per query.

use hickory_proto::rr::{DNSClass, Name, RecordType};
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use wire::{class_text, decode_question, name_text, rcode_name, type_text, ReplySummary};

mod flags;
mod wire;
pub use flags::Flags;

/// Which replies a query log keeps, by what they say (CoreDNS's classes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// NOERROR with answers, a referral, or any other NOERROR without an
    /// SOA in authority (CoreDNS's `Typify`, which does not look at TC).
    Success,
    /// NXDOMAIN, or NODATA: NOERROR with no answer and the SOA in authority.
    Denial,
    /// Any other rcode, extended ones included: SERVFAIL, REFUSED, FORMERR,
    /// NOTIMP, BADVERS...
    Error,
}

impl Class {
    const fn bit(self) -> u8 {
        match self {
            Class::Success => 1,
            Class::Denial => 2,
            Class::Error => 4,
        }
    }

    /// The class of an encoded reply (`None`: shorter than a header).
    pub fn of(reply: &[u8]) -> Option<Class> {
        let summary = ReplySummary::read(reply)?;
        Some(match summary.rcode {
            3 => Class::Denial,
            0 if summary.answers == 0 && summary.soa_in_authority => Class::Denial,
            0 => Class::Success,
            _ => Class::Error,
        })
    }
}

/// Where a reply came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Computed from the records in memory (the cluster domain, reverse
    /// names, refusals and errors decided here).
    Local,
    /// The hot path's encoded reply or the response cache's fresh entry.
    Cached,
    /// An expired response-cache entry served because the upstreams failed
    /// or were slow (RFC 8767).
    Stale,
    /// Relayed to the upstream resolvers (their reply, or SERVFAIL when
    /// every one failed).
    Forwarded,
    /// Relayed to a stub zone's servers.
    Stub,
    /// The end of an `-autopath` walk: a CNAME to the name found, or the
    /// asked name's NXDOMAIN.
    Autopath,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Source::Local => "local",
            Source::Cached => "cached",
            Source::Stale => "stale",
            Source::Forwarded => "forwarded",
            Source::Stub => "stub",
            Source::Autopath => "autopath",
        }
    }
}

/// The question of a logged query.
pub enum Asked<'a> {
    /// Decoded: the name as asked (case kept), type and class.
    Decoded(&'a Name, RecordType, DNSClass),
    /// The question section's bytes (the hot path decodes nothing unless
    /// the line is written).
    Wire(&'a [u8]),
    /// No question could be read (FORMERR, NOTIMP).
    Unknown,
}

/// One answered query.
pub struct Entry<'a> {
    /// Who asked (`None` in tests that call the handler directly).
    pub client: Option<SocketAddr>,
    /// Over TCP rather than UDP.
    pub tcp: bool,
    /// What was asked.
    pub asked: Asked<'a>,
    /// The encoded reply sent.
    pub reply: &'a [u8],
    /// From the query's arrival to its reply.
    pub elapsed: Duration,
    /// Where the reply came from.
    pub source: Source,
}

/// The classes and the share of their replies that `-log-queries` and
/// `-log-queries-sample` ask for.
pub struct QueryLog {
    classes: u8,
    /// The sampling rate in millionths.
    per_million: u64,
    /// Replies of the logged classes so far (for the sampling).
    matched: AtomicU64,
    /// The source, full rcode and name of each line written (tests look).
    #[cfg(test)]
    pub(crate) written: std::sync::Mutex<Vec<(Source, u16, String)>>,
}

impl fmt::Debug for QueryLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueryLog")
            .field("classes", &self.classes)
            .field("per_million", &self.per_million)
            .finish_non_exhaustive()
    }
}

impl PartialEq for QueryLog {
    fn eq(&self, other: &Self) -> bool {
        (self.classes, self.per_million) == (other.classes, other.per_million)
    }
}

impl QueryLog {
    /// The query log `classes` (a comma-separated list of `all`, `success`,
    /// `denial`, `error`; empty: off) and `sample` (the share of those
    /// replies written, from 0.000001 to 1) ask for; the error names the flag.
    pub fn new(classes: &str, sample: f64) -> Result<Option<QueryLog>, String> {
        let mut bits = 0;
        for word in classes.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            bits |= match word {
                "all" => Class::Success.bit() | Class::Denial.bit() | Class::Error.bit(),
                "success" => Class::Success.bit(),
                "denial" => Class::Denial.bit(),
                "error" => Class::Error.bit(),
                other => {
                    return Err(format!(
                        "-log-queries: unknown class {other:?} (all, success, denial or error)"
                    ))
                }
            };
        }
        if !(1e-6..=1.0).contains(&sample) {
            return Err(format!(
                "-log-queries-sample must be from 0.000001 to 1: {sample}"
            ));
        }
        if bits == 0 {
            return Ok(None);
        }
        Ok(Some(QueryLog {
            classes: bits,
            per_million: ((sample * 1e6).round() as u64).max(1),
            matched: AtomicU64::new(0),
            #[cfg(test)]
            written: Default::default(),
        }))
    }

    /// Whether `reply` is written: its class is logged and it is among the
    /// sampled share. Of every million replies of the logged classes (one
    /// count for them all), exactly the rate's share is taken, spread
    /// evenly (the k-th is taken when k × rate passes a whole number).
    pub fn admits(&self, reply: &[u8]) -> bool {
        let Some(class) = Class::of(reply) else {
            return false;
        };
        if self.classes & class.bit() == 0 {
            return false;
        }
        if self.per_million == 1_000_000 {
            return true;
        }
        let k = self.matched.fetch_add(1, Ordering::Relaxed) % 1_000_000 + 1;
        k * self.per_million / 1_000_000 > (k - 1) * self.per_million / 1_000_000
    }

    /// Writes `entry` when [`QueryLog::admits`] its reply.
    pub fn note(&self, entry: &Entry<'_>) {
        if self.admits(entry.reply) {
            write(entry);
            #[cfg(test)]
            if let Some(summary) = ReplySummary::read(entry.reply) {
                let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
                written.push((entry.source, summary.rcode, asked_text(&entry.asked).0));
            }
        }
    }
}

/// The name, type and class of a line, as dig writes them (`-` for each
/// when no question could be read).
fn asked_text(asked: &Asked<'_>) -> (String, String, String) {
    let decoded = |(name, qtype, qclass): (String, RecordType, DNSClass)| {
        (name, type_text(qtype), class_text(qclass))
    };
    let unknown = || ("-".to_string(), "-".to_string(), "-".to_string());
    match *asked {
        Asked::Decoded(name, qtype, qclass) => decoded((name_text(name.iter()), qtype, qclass)),
        Asked::Wire(question) => decode_question(question).map_or_else(unknown, decoded),
        Asked::Unknown => unknown(),
    }
}

/// The query log line of `entry`.
fn write(entry: &Entry<'_>) {
    let (name, qtype, qclass) = asked_text(&entry.asked);
    let reply = entry.reply;
    let summary = ReplySummary::read(reply);
    let client = entry
        .client
        .map_or_else(|| "-".to_string(), |c| c.to_string());
    tracing::info!(
        target: "skydns::query",
        client,
        proto = if entry.tcp { "tcp" } else { "udp" },
        name,
        qtype,
        qclass,
        rcode = summary.map_or_else(|| "-".to_string(), |s| rcode_name(s.rcode)),
        answers = summary.map_or(0, |s| s.answers),
        truncated = summary.is_some_and(|s| s.truncated),
        size = reply.len(),
        duration_seconds = entry.elapsed.as_secs_f64(),
        source = entry.source.as_str(),
        "query"
    );
}

#[cfg(test)]
mod tests;
