//! What a query log line reads from the encoded reply and question, without
//! decoding them: the full rcode, the counts, the TC bit, an SOA in the
//! authority section, and names as dig prints them. Every read is
//! bounds-checked.

use hickory_proto::rr::{DNSClass, RecordType};

/// The parts of a reply its log line and class depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReplySummary {
    /// The full rcode: the OPT record's high bits, then the header's four.
    pub rcode: u16,
    /// ANCOUNT.
    pub answers: u16,
    /// The TC bit.
    pub truncated: bool,
    /// Whether an SOA record is in the authority section (a negative answer).
    pub soa_in_authority: bool,
}

const TYPE_SOA: u16 = 6;
const TYPE_OPT: u16 = 41;

impl ReplySummary {
    /// `None` for less than a header.
    pub(crate) fn read(reply: &[u8]) -> Option<ReplySummary> {
        let header = reply.get(..12)?;
        let count = |i: usize| u16::from_be_bytes([header[i], header[i + 1]]);
        let mut summary = ReplySummary {
            rcode: u16::from(header[3] & 0x0f),
            answers: count(6),
            truncated: header[2] & 0x02 != 0,
            soa_in_authority: false,
        };
        let (questions, authority, additional) = (count(4), count(8), count(10));
        if authority == 0 && additional == 0 {
            return Some(summary);
        }
        let mut pos = 12;
        for _ in 0..questions {
            let Some(end) = skip_name(reply, pos) else {
                return Some(summary);
            };
            pos = end + 4;
        }
        for i in 0..u32::from(summary.answers) + u32::from(authority) + u32::from(additional) {
            let Some(record) = Record::at(reply, pos) else {
                break;
            };
            let in_authority = i >= u32::from(summary.answers)
                && i < u32::from(summary.answers) + u32::from(authority);
            if in_authority && record.rtype == TYPE_SOA {
                summary.soa_in_authority = true;
            }
            if record.rtype == TYPE_OPT && i >= u32::from(summary.answers) + u32::from(authority) {
                // EXTENDED-RCODE: the TTL's first byte, above the header's bits.
                summary.rcode |= u16::from((record.ttl >> 24) as u8) << 4;
            }
            pos = record.end;
        }
        Some(summary)
    }
}

/// One resource record's type and TTL, and where the next begins.
struct Record {
    rtype: u16,
    ttl: u32,
    end: usize,
}

impl Record {
    fn at(packet: &[u8], pos: usize) -> Option<Record> {
        let fixed = skip_name(packet, pos)?;
        let field = packet.get(fixed..fixed + 10)?;
        let rdlength = usize::from(u16::from_be_bytes([field[8], field[9]]));
        let end = fixed + 10 + rdlength;
        (end <= packet.len()).then(|| Record {
            rtype: u16::from_be_bytes([field[0], field[1]]),
            ttl: u32::from_be_bytes([field[4], field[5], field[6], field[7]]),
            end,
        })
    }
}

/// Where the name at `pos` ends: after its root label or its first
/// compression pointer.
fn skip_name(packet: &[u8], mut pos: usize) -> Option<usize> {
    loop {
        let len = *packet.get(pos)?;
        match len {
            0 => return Some(pos + 1),
            l if l & 0xc0 == 0xc0 => return Some(pos + 2),
            l if l & 0xc0 != 0 => return None, // reserved label types
            l => pos += 1 + usize::from(l),
        }
    }
}

/// A name's labels as dig prints them: `\` before `.`, `\`, `"`, `(`,
/// `)`, `;`, `@` and `$` inside a label (BIND's special characters),
/// `\DDD` for bytes that are not printable ASCII, a dot after each label;
/// the root is `.`.
pub(crate) fn name_text<'a>(labels: impl Iterator<Item = &'a [u8]>) -> String {
    let mut name = String::new();
    for label in labels {
        for &byte in label {
            match byte {
                b'.' | b'\\' | b'"' | b'(' | b')' | b';' | b'@' | b'$' => {
                    name.push('\\');
                    name.push(char::from(byte));
                }
                b'!'..=b'~' => name.push(char::from(byte)),
                _ => name.push_str(&format!("\\{byte:03}")),
            }
        }
        name.push('.');
    }
    if name.is_empty() {
        name.push('.');
    }
    name
}

/// The name (as [`name_text`]), type and class of a question section in
/// wire format (its first name, which has no compression pointer).
pub(crate) fn decode_question(question: &[u8]) -> Option<(String, RecordType, DNSClass)> {
    let mut labels = Vec::new();
    let mut pos = 0;
    loop {
        let len = usize::from(*question.get(pos)?);
        pos += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            return None;
        }
        labels.push(question.get(pos..pos + len)?);
        pos += len;
    }
    let field = |at: usize| {
        Some(u16::from_be_bytes([
            *question.get(at)?,
            *question.get(at + 1)?,
        ]))
    };
    Some((
        name_text(labels.into_iter()),
        RecordType::from(field(pos)?),
        DNSClass::from(field(pos + 2)?),
    ))
}

/// An rcode's mnemonic (the IANA registry's, as dig prints it), or
/// `RCODE<n>`.
pub(crate) fn rcode_name(rcode: u16) -> String {
    let name = match rcode {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        6 => "YXDOMAIN",
        7 => "YXRRSET",
        8 => "NXRRSET",
        9 => "NOTAUTH",
        10 => "NOTZONE",
        11 => "DSOTYPENI",
        16 => "BADVERS",
        17 => "BADKEY",
        18 => "BADTIME",
        19 => "BADMODE",
        20 => "BADNAME",
        21 => "BADALG",
        22 => "BADTRUNC",
        23 => "BADCOOKIE",
        n => return format!("RCODE{n}"),
    };
    name.to_string()
}

/// A type as dig prints it: its mnemonic, or `TYPE<n>` (RFC 3597).
pub(crate) fn type_text(qtype: RecordType) -> String {
    match qtype {
        RecordType::Unknown(n) => format!("TYPE{n}"),
        known => known.to_string(),
    }
}

/// A class as dig prints it: its mnemonic, or `CLASS<n>` (RFC 3597).
pub(crate) fn class_text(qclass: DNSClass) -> String {
    match qclass {
        DNSClass::Unknown(n) => format!("CLASS{n}"),
        known => known.to_string(),
    }
}
