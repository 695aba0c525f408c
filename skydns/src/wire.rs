//! Encoding replies with every name compressed (RFC 1035 §4.1.4), where hickory
//! compresses only the first 120 names of a message. Record types this encoder
//! does not write are left to hickory: [`Encoded::Unsupported`].

use hickory_proto::op::Message;
use hickory_proto::rr::{Name, RData, Record};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};
use std::collections::HashMap;

/// What [`encode`] made of a message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Encoded {
    /// The wire form.
    Bytes(Vec<u8>),
    /// Larger than a DNS message can be (65,535 bytes).
    TooBig,
    /// A record this encoder does not write; use hickory's.
    Unsupported,
}

/// The largest DNS message (its TCP length prefix is 16 bits).
const MAX_MESSAGE: usize = u16::MAX as usize;

/// Encodes `message` with every name compressed against every earlier one.
pub(crate) fn encode(message: &Message) -> Encoded {
    if message.signature.is_some() {
        return Encoded::Unsupported;
    }
    // The header's flag bits from hickory: a message of the header alone.
    let mut bare = Message::new(
        message.metadata.id,
        message.metadata.message_type,
        message.metadata.op_code,
    );
    bare.metadata = message.metadata;
    let Ok(header) = bare.to_vec() else {
        return Encoded::Unsupported;
    };
    let mut w = Writer {
        out: header[..12].to_vec(),
        names: HashMap::new(),
    };
    for q in &message.queries {
        w.name(q.name(), true);
        w.u16(u16::from(q.query_type()));
        w.u16(u16::from(q.query_class()));
    }
    let sections = [&message.answers, &message.authorities, &message.additionals];
    for records in sections {
        for record in records.iter() {
            match w.record(record) {
                Ok(()) if w.out.len() <= MAX_MESSAGE => {}
                Ok(()) | Err(Encoded::TooBig) => return Encoded::TooBig,
                Err(_) => return Encoded::Unsupported,
            }
        }
    }
    let mut additionals = message.additionals.len();
    if let Some(edns) = &message.edns {
        let mut edns = edns.clone();
        edns.set_rcode_high(message.metadata.response_code.high());
        let opt = Record::from(&edns);
        let mut bytes = Vec::new();
        if opt.emit(&mut BinEncoder::new(&mut bytes)).is_err() {
            return Encoded::Unsupported;
        }
        w.out.extend_from_slice(&bytes); // owner is the root: nothing to point at
        additionals += 1;
    }
    let counts = [
        message.queries.len(),
        message.answers.len(),
        message.authorities.len(),
        additionals,
    ];
    for (i, count) in counts.into_iter().enumerate() {
        let Ok(count) = u16::try_from(count) else {
            return Encoded::TooBig;
        };
        w.out[4 + 2 * i..6 + 2 * i].copy_from_slice(&count.to_be_bytes());
    }
    if w.out.len() > MAX_MESSAGE {
        return Encoded::TooBig;
    }
    Encoded::Bytes(w.out)
}

/// The message so far and where each name suffix was first written.
struct Writer {
    out: Vec<u8>,
    /// Wire form of a name suffix (labels with their lengths) → offset.
    names: HashMap<Vec<u8>, u16>,
}

impl Writer {
    fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    /// Writes `name`, ending in a pointer to the longest suffix written
    /// before when `compress`; records its own suffixes either way.
    fn name(&mut self, name: &Name, compress: bool) {
        let labels: Vec<&[u8]> = name.iter().collect();
        for i in 0..labels.len() {
            let mut suffix = Vec::new();
            for label in &labels[i..] {
                suffix.push(label.len() as u8);
                suffix.extend_from_slice(label);
            }
            if compress {
                if let Some(&at) = self.names.get(&suffix) {
                    self.u16(0xc000 | at);
                    return;
                }
            }
            if let Ok(at) = u16::try_from(self.out.len()) {
                if at < 0x4000 {
                    self.names.entry(suffix).or_insert(at);
                }
            }
            self.out.push(labels[i].len() as u8);
            self.out.extend_from_slice(labels[i]);
        }
        self.out.push(0);
    }

    /// Writes one record; [`Encoded::Unsupported`] for a type this encoder
    /// leaves to hickory, [`Encoded::TooBig`] for data over 65,535 bytes.
    fn record(&mut self, record: &Record) -> Result<(), Encoded> {
        let start = self.out.len();
        self.name(&record.name, true);
        self.u16(u16::from(record.record_type()));
        self.u16(u16::from(record.dns_class));
        self.u32(record.ttl);
        let length_at = self.out.len();
        self.u16(0);
        match &record.data {
            RData::A(a) => self.out.extend_from_slice(&a.0.octets()),
            RData::AAAA(aaaa) => self.out.extend_from_slice(&aaaa.0.octets()),
            RData::TXT(txt) => {
                let size: usize = txt.txt_data.iter().map(|t| 1 + t.len()).sum();
                if size > MAX_MESSAGE {
                    self.out.truncate(start);
                    return Err(Encoded::TooBig);
                }
                for text in txt.txt_data.iter() {
                    let Ok(len) = u8::try_from(text.len()) else {
                        self.out.truncate(start);
                        return Err(Encoded::Unsupported);
                    };
                    self.out.push(len);
                    self.out.extend_from_slice(text);
                }
            }
            RData::CNAME(n) => self.name(&n.0, true),
            RData::NS(n) => self.name(&n.0, true),
            RData::PTR(n) => self.name(&n.0, true),
            RData::MX(mx) => {
                self.u16(mx.preference);
                self.name(&mx.exchange, true);
            }
            RData::SRV(srv) => {
                self.u16(srv.priority);
                self.u16(srv.weight);
                self.u16(srv.port);
                self.name(&srv.target, false);
            }
            RData::SOA(soa) => {
                self.name(&soa.mname, true);
                self.name(&soa.rname, true);
                self.u32(soa.serial);
                self.u32(soa.refresh as u32);
                self.u32(soa.retry as u32);
                self.u32(soa.expire as u32);
                self.u32(soa.minimum);
            }
            // DNSKEY and NSEC3 hold no names, and the names in RRSIG and
            // NSEC data must not be compressed (RFC 4034 §3.1.7, §4.1.1).
            RData::DNSSEC(_) => {
                let mut bytes = Vec::new();
                if record.data.emit(&mut BinEncoder::new(&mut bytes)).is_err() {
                    self.out.truncate(start);
                    return Err(Encoded::Unsupported);
                }
                self.out.extend_from_slice(&bytes);
            }
            _ => {
                self.out.truncate(start);
                return Err(Encoded::Unsupported);
            }
        }
        let Ok(length) = u16::try_from(self.out.len() - length_at - 2) else {
            self.out.truncate(start);
            return Err(Encoded::TooBig);
        };
        self.out[length_at..length_at + 2].copy_from_slice(&length.to_be_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests;
