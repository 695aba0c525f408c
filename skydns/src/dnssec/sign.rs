//! RRSIGs over the RRsets of a reply: a section is cut into RRsets and each is
//! signed with the zone's key, for SkyDNS's validity window (three hours ago to
//! seven days ahead). [`Signer::cache_key`] digests what a signature covers,
//! for the cache. The clock is an argument.

use hickory_proto::dnssec::rdata::{DNSSECRData, SigInput, DNSKEY, RRSIG};
use hickory_proto::dnssec::{Algorithm, SigningKey, TBS};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType, SerialNumber};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder, NameEncoding};

/// How far back a signature's inception lies (SkyDNS: "2+1 hours").
pub(crate) const INCEPTION_BACK: u64 = 3 * 3600;
/// How long a signature is valid from now (SkyDNS: a week).
pub(crate) const VALIDITY: u64 = 7 * 24 * 3600;

/// The zone's signing key with what every RRSIG repeats.
pub(crate) struct Signer {
    key: Box<dyn SigningKey>,
    algorithm: Algorithm,
    key_tag: u16,
    signer_name: Name,
}

impl Signer {
    /// A signer for `zone` with `key`, whose public half is `dnskey`.
    pub(crate) fn new(
        key: Box<dyn SigningKey>,
        dnskey: &DNSKEY,
        zone: Name,
    ) -> Result<Self, String> {
        let key_tag = dnskey
            .calculate_key_tag()
            .map_err(|e| format!("cannot compute the key tag: {e}"))?;
        Ok(Signer {
            algorithm: key.algorithm(),
            key,
            key_tag,
            signer_name: zone,
        })
    }

    /// The key tag every RRSIG names.
    pub(crate) fn key_tag(&self) -> u16 {
        self.key_tag
    }

    /// The signature input for `rrset` signed at `now` (Unix seconds).
    fn input(&self, rrset: &[Record], now: u64) -> SigInput {
        let first = &rrset[0];
        SigInput {
            type_covered: first.record_type(),
            algorithm: self.algorithm,
            // RFC 4034 §3.1.3: a leading `*` label is not counted.
            num_labels: first.name.num_labels(),
            original_ttl: rrset.iter().map(|r| r.ttl).max().unwrap_or(0),
            // Serial number arithmetic (RFC 4034 §3.1.5): modulo 2^32.
            sig_expiration: SerialNumber::new((now + VALIDITY) as u32),
            sig_inception: SerialNumber::new(now.saturating_sub(INCEPTION_BACK) as u32),
            key_tag: self.key_tag,
            signer_name: self.signer_name.clone(),
        }
    }

    /// The RRSIG data over `rrset` (one owner, type and class; not empty).
    pub(crate) fn sign(&self, rrset: &[Record], now: u64) -> Result<RRSIG, String> {
        let input = self.input(rrset, now);
        let first = &rrset[0];
        let tbs = canonical_tbs(&input, rrset)
            .map_err(|e| format!("cannot encode {} {}: {e}", first.name, first.record_type()))?;
        let signature = self
            .key
            .sign(&tbs)
            .map_err(|e| format!("cannot sign {} {}: {e}", first.name, first.record_type()))?;
        Ok(RRSIG::from_sig(input, signature))
    }

    /// What a signature over `rrset` depends on besides the clock: the
    /// SHA-256 of the canonical records with their original TTL and of the
    /// smallest TTL (a digest, so a large RRset costs the cache 32 bytes).
    pub(crate) fn cache_key(&self, rrset: &[Record]) -> Option<[u8; 32]> {
        let mut input = self.input(rrset, 0);
        input.sig_expiration = SerialNumber::new(0);
        input.sig_inception = SerialNumber::new(0);
        let tbs = canonical_tbs(&input, rrset).ok()?;
        let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
        digest.update(tbs.as_ref());
        digest.update(&min_ttl(rrset).to_be_bytes());
        digest.finish().as_ref().try_into().ok()
    }
}

/// The data an RRSIG over `rrset` signs (RFC 4034 §3.1.8.1): the RRSIG
/// fields, then each RR with the owner lowercased, the original TTL, and
/// the RDATA in canonical form, the RRs ordered by their canonical RDATA
/// as octet strings, duplicates once (§6.3). hickory's `TBS::from_input`
/// orders by its `Record` order instead (TTL first, names in their case,
/// names compared label by label from the right), which validators
/// reject for sets whose TTLs or target names differ.
fn canonical_tbs(input: &SigInput, rrset: &[Record]) -> Result<TBS, String> {
    let err = |e: hickory_proto::ProtoError| e.to_string();
    let first = &rrset[0];
    let mut rdatas: Vec<Vec<u8>> = Vec::with_capacity(rrset.len());
    for record in rrset {
        let mut rdata = Vec::new();
        let mut encoder = BinEncoder::new(&mut rdata);
        encoder.set_canonical_form(true);
        encoder.set_name_encoding(NameEncoding::UncompressedLowercase);
        record.data.emit(&mut encoder).map_err(err)?;
        rdatas.push(rdata);
    }
    rdatas.sort();
    rdatas.dedup();
    let mut buf = Vec::new();
    let mut encoder = BinEncoder::new(&mut buf);
    encoder.set_canonical_form(true);
    encoder.set_name_encoding(NameEncoding::Uncompressed);
    input.emit(&mut encoder).map_err(err)?;
    for rdata in &rdatas {
        {
            let mut owner = encoder.with_name_encoding(NameEncoding::UncompressedLowercase);
            first.name.emit(&mut owner).map_err(err)?;
        }
        input.type_covered.emit(&mut encoder).map_err(err)?;
        first.dns_class.emit(&mut encoder).map_err(err)?;
        encoder.emit_u32(input.original_ttl).map_err(err)?;
        let len = u16::try_from(rdata.len()).map_err(|_| "RDATA over 65535 bytes".to_string())?;
        encoder.emit_u16(len).map_err(err)?;
        encoder.emit_vec(rdata).map_err(err)?;
    }
    Ok(TBS::from(buf.as_slice()))
}

/// The RRSIG record for `rrset` carrying `sig`: the set's owner (its case
/// kept), class and smallest TTL.
pub(crate) fn rrsig_record(rrset: &[Record], sig: RRSIG) -> Record {
    let first = &rrset[0];
    let mut record = Record::from_rdata(
        first.name.clone(),
        min_ttl(rrset),
        RData::DNSSEC(DNSSECRData::RRSIG(sig)),
    );
    record.dns_class = first.dns_class;
    record
}

fn min_ttl(rrset: &[Record]) -> u32 {
    rrset.iter().map(|r| r.ttl).min().unwrap_or(0)
}

/// The RRsets of `records` that `zone` signs: class IN, owned at or below
/// `zone`, neither RRSIG nor OPT; in order of first appearance.
pub(crate) fn rrsets(records: &[Record], zone: &Name) -> Vec<Vec<Record>> {
    let mut sets: Vec<Vec<Record>> = Vec::new();
    // (lowercased owner, type) → index in `sets`: O(1) per record, so an
    // answer of thousands of records is not a quadratic search.
    let mut at: std::collections::HashMap<(Name, RecordType), usize> =
        std::collections::HashMap::new();
    for r in records {
        let rtype = r.record_type();
        if r.dns_class != DNSClass::IN
            || matches!(rtype, RecordType::RRSIG | RecordType::OPT)
            || !zone.zone_of(&r.name)
        {
            continue;
        }
        match at.entry((r.name.to_lowercase(), rtype)) {
            std::collections::hash_map::Entry::Occupied(i) => sets[*i.get()].push(r.clone()),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(sets.len());
                sets.push(vec![r.clone()]);
            }
        }
    }
    sets
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, SRV};

    fn input(type_covered: RecordType) -> SigInput {
        SigInput {
            type_covered,
            algorithm: Algorithm::ECDSAP256SHA256,
            num_labels: 3,
            original_ttl: 30,
            sig_expiration: SerialNumber::new(2),
            sig_inception: SerialNumber::new(1),
            key_tag: 1,
            signer_name: Name::from_ascii("cluster.local.").unwrap(),
        }
    }

    fn position(haystack: &[u8], needle: &[u8]) -> usize {
        haystack
            .windows(needle.len())
            .position(|w| w == needle)
            .expect("present")
    }

    #[test]
    fn rrs_are_ordered_by_canonical_rdata_whatever_their_ttl_or_case() {
        let owner = Name::from_ascii("Web.D.svc.cluster.local.").unwrap();
        let a = |ip: [u8; 4], ttl| {
            Record::from_rdata(
                owner.clone(),
                ttl,
                RData::A(A::from(std::net::Ipv4Addr::from(ip))),
            )
        };
        // hickory's Record order puts the lower TTL (10.0.0.2) first.
        let set = [
            a([10, 0, 0, 2], 10),
            a([10, 0, 0, 1], 30),
            a([10, 0, 0, 1], 30),
        ];
        let tbs = canonical_tbs(&input(RecordType::A), &set).unwrap();
        let bytes = tbs.as_ref();
        assert!(position(bytes, &[10, 0, 0, 1]) < position(bytes, &[10, 0, 0, 2]));
        assert_eq!(
            bytes.windows(4).filter(|w| *w == [10, 0, 0, 1]).count(),
            1,
            "duplicates once"
        );
        assert!(
            !bytes.windows(3).any(|w| w == b"Web"),
            "the owner is lowercased"
        );
        // Targets compare as octets left to right ("a.z." < "b.example."),
        // not label by label from the right as Name's order does.
        let srv = |target: &str| {
            let target = Name::from_ascii(target).unwrap();
            Record::from_rdata(owner.clone(), 30, RData::SRV(SRV::new(10, 10, 80, target)))
        };
        let set = [srv("B.example."), srv("a.z.")];
        let tbs = canonical_tbs(&input(RecordType::SRV), &set).unwrap();
        let bytes = tbs.as_ref();
        assert!(position(bytes, b"\x01a\x01z") < position(bytes, b"\x01b\x07example"));
    }
}
