//! RRSIGs over the RRsets of a reply.
//!
//! A reply section is cut into RRsets (same owner, compared without case,
//! same type and class, in order of first appearance); each gets one RRSIG
//! made with hickory-proto's canonical to-be-signed form ([`TBS`]) and the
//! zone's key. The validity window is SkyDNS's: from three hours ago (clock
//! skew, daylight saving mistakes) to seven days ahead. The original TTL is
//! the largest TTL of the set, so no record outlives its signature's claim;
//! the RRSIG's own TTL is the smallest. [`Signer::cache_key`] digests what
//! a signature covers (owner, type, class, TTLs, canonical data), so a
//! cached signature is reused only for the same records. The clock is an
//! argument.

use hickory_proto::dnssec::rdata::{DNSSECRData, SigInput, DNSKEY, RRSIG};
use hickory_proto::dnssec::{Algorithm, SigningKey, TBS};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType, SerialNumber};

/// How far back a signature's inception lies (SkyDNS: "2+1 hours").
pub const INCEPTION_BACK: u64 = 3 * 3600;
/// How long a signature is valid from now (SkyDNS: a week).
pub const VALIDITY: u64 = 7 * 24 * 3600;

/// The zone's signing key with what every RRSIG repeats.
pub struct Signer {
    key: Box<dyn SigningKey>,
    algorithm: Algorithm,
    key_tag: u16,
    signer_name: Name,
}

impl Signer {
    /// A signer for `zone` with `key`, whose public half is `dnskey`.
    pub fn new(key: Box<dyn SigningKey>, dnskey: &DNSKEY, zone: Name) -> Result<Self, String> {
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
    pub fn key_tag(&self) -> u16 {
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
    pub fn sign(&self, rrset: &[Record], now: u64) -> Result<RRSIG, String> {
        let input = self.input(rrset, now);
        let first = &rrset[0];
        let tbs = TBS::from_input(&first.name, first.dns_class, &input, rrset.iter())
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
    pub fn cache_key(&self, rrset: &[Record]) -> Option<[u8; 32]> {
        let mut input = self.input(rrset, 0);
        input.sig_expiration = SerialNumber::new(0);
        input.sig_inception = SerialNumber::new(0);
        let first = &rrset[0];
        let tbs = TBS::from_input(&first.name, first.dns_class, &input, rrset.iter()).ok()?;
        let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
        digest.update(tbs.as_ref());
        digest.update(&min_ttl(rrset).to_be_bytes());
        digest.finish().as_ref().try_into().ok()
    }
}

/// The RRSIG record for `rrset` carrying `sig`: the set's owner (its case
/// kept), class and smallest TTL.
pub fn rrsig_record(rrset: &[Record], sig: RRSIG) -> Record {
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
pub fn rrsets(records: &[Record], zone: &Name) -> Vec<Vec<Record>> {
    let mut sets: Vec<Vec<Record>> = Vec::new();
    for r in records {
        let rtype = r.record_type();
        if r.dns_class != DNSClass::IN
            || matches!(rtype, RecordType::RRSIG | RecordType::OPT)
            || !zone.zone_of(&r.name)
        {
            continue;
        }
        // Name equality ignores case.
        match sets
            .iter_mut()
            .find(|s| s[0].record_type() == rtype && s[0].name == r.name)
        {
            Some(set) => set.push(r.clone()),
            None => sets.push(vec![r.clone()]),
        }
    }
    sets
}
