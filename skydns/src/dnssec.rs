//! Online DNSSEC signing (`-dnssec <key basename>`, `-scache`), as SkyDNS did
//! it: the apex DNSKEY, NSEC3 denial ([`nsec3`]), RRSIGs ([`sign`]), the
//! signature cache ([`sigcache`]) and the key pair ([`keyfile`]), applied to
//! authoritative replies to queries with the DO bit.

pub(crate) mod keyfile;
pub(crate) mod nsec3;
pub(crate) mod sigcache;
pub(crate) mod sign;

use hickory_proto::dnssec::rdata::{DNSSECRData, DNSKEY, RRSIG};
use hickory_proto::op::{Edns, Message, ResponseCode};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use sigcache::SigCache;
use sign::Signer;
use std::sync::atomic::{AtomicU64, Ordering};

mod flags;
pub use flags::{Flags, Keys};

/// The UDP payload size a signed reply advertises (SkyDNS's).
const EDNS_PAYLOAD: u16 = 4096;

/// The zone's key, its signature cache and the denial settings.
pub struct Dnssec {
    zone: Name,
    dnskey: Record,
    signer: Signer,
    cache: Option<SigCache>,
    /// TTL of the NSEC3 records: the SOA minimum, as RFC 5155 asks.
    min_ttl: u32,
    /// Signatures made (cache misses), for tests and the metric.
    signed: AtomicU64,
}

impl std::fmt::Debug for Dnssec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dnssec")
            .field("zone", &self.zone.to_ascii())
            .field("key_tag", &self.signer.key_tag())
            .finish_non_exhaustive()
    }
}

impl PartialEq for Dnssec {
    fn eq(&self, other: &Self) -> bool {
        self.zone == other.zone && self.dnskey == other.dnskey
    }
}

/// The settings signing depends on besides the key.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// TTL of the DNSKEY record (the zone's default TTL).
    pub ttl: u32,
    /// TTL of NSEC3 records (the SOA minimum).
    pub min_ttl: u32,
    /// Signature cache capacity; 0 disables the cache.
    pub scache: usize,
}

impl Dnssec {
    /// Reads the key pair `base` names for `domain` (fully qualified). The
    /// error says which file is wrong and why; the flag is the caller's.
    pub fn load(base: &str, domain: &str, settings: Settings) -> Result<Self, String> {
        Self::new(keyfile::read(base)?, domain, settings)
            .map_err(|e| format!("{}.key: {e}", keyfile::basename(base)))
    }

    /// Signing for `domain` with `pair`, whose owner must be the domain.
    pub fn new(pair: keyfile::KeyPair, domain: &str, settings: Settings) -> Result<Self, String> {
        let zone = Name::from_ascii(domain).map_err(|e| format!("bad domain {domain:?}: {e}"))?;
        if pair.owner != zone {
            return Err(format!(
                "the DNSKEY is for {}, but the served domain is {domain}",
                pair.owner.to_ascii()
            ));
        }
        let signer = Signer::new(pair.key, &pair.dnskey, zone.clone())?;
        let dnskey = Record::from_rdata(
            zone.clone(),
            settings.ttl,
            RData::DNSSEC(DNSSECRData::DNSKEY(pair.dnskey)),
        );
        Ok(Dnssec {
            zone,
            dnskey,
            signer,
            cache: (settings.scache > 0).then(|| SigCache::new(settings.scache)),
            min_ttl: settings.min_ttl,
            signed: AtomicU64::new(0),
        })
    }

    /// The DNSKEY record the apex answers with.
    pub fn dnskey(&self) -> Record {
        self.dnskey.clone()
    }

    /// The DNSKEY's data.
    pub fn dnskey_data(&self) -> Option<&DNSKEY> {
        match &self.dnskey.data {
            RData::DNSSEC(DNSSECRData::DNSKEY(key)) => Some(key),
            _ => None,
        }
    }

    /// The key tag in every RRSIG.
    pub fn key_tag(&self) -> u16 {
        self.signer.key_tag()
    }

    /// How many signatures have been made (the cache's misses).
    pub fn signatures_made(&self) -> u64 {
        self.signed.load(Ordering::Relaxed)
    }

    /// Adds the denial of existence, the RRSIGs and the OPT with DO to an
    /// authoritative reply for a name in the zone. `exists` says whether a
    /// name of the zone exists (for the closest encloser of an NXDOMAIN).
    /// Returns how many signatures had to be made (not in the cache).
    pub fn secure(&self, reply: &mut Message, exists: impl Fn(&Name) -> bool, now: u64) -> u64 {
        self.deny(reply, exists);
        let mut made = 0;
        for section in [
            &mut reply.answers,
            &mut reply.authorities,
            &mut reply.additionals,
        ] {
            let mut sigs = Vec::new();
            for rrset in sign::rrsets(section, &self.zone) {
                if let Some((sig, fresh)) = self.signature(&rrset, now) {
                    made += u64::from(fresh);
                    sigs.push(sign::rrsig_record(&rrset, sig));
                }
            }
            section.extend(sigs);
        }
        let mut edns = Edns::new();
        edns.set_max_payload(EDNS_PAYLOAD);
        edns.set_dnssec_ok(true);
        reply.edns = Some(edns);
        // AD only when everything answered is ours to vouch for (RFC 4035
        // §3.2.3): not with an upstream's records (an ExternalName target's
        // addresses, SRV targets outside the zone).
        let ours = |r: &Record| self.zone.zone_of(&r.name);
        reply.metadata.authentic_data =
            reply.answers.iter().all(ours) && reply.authorities.iter().all(ours);
        made
    }

    /// NSEC3 white lies for NXDOMAIN and NODATA (the SOA alone as authority).
    fn deny(&self, reply: &mut Message, exists: impl Fn(&Name) -> bool) {
        let Some(query) = reply.queries.first() else {
            return;
        };
        let mut qname = query.name().clone();
        qname.set_fqdn(true);
        if !self.zone.zone_of(&qname) {
            return;
        }
        let only_soa =
            matches!(reply.authorities.as_slice(), [soa] if soa.record_type() == RecordType::SOA);
        match reply.metadata.response_code {
            ResponseCode::NXDomain => {
                let ce = nsec3::closest_encloser(&self.zone, &qname, exists);
                let denial = nsec3::name_error(&self.zone, &qname, &ce, self.min_ttl);
                reply.authorities.extend(denial);
            }
            ResponseCode::NoError if reply.answers.is_empty() && only_soa => {
                let denial = nsec3::no_data(&self.zone, &qname, self.min_ttl);
                reply.authorities.push(denial);
            }
            _ => {}
        }
    }

    /// The signature over `rrset`, from the cache or made now (`true`).
    fn signature(&self, rrset: &[Record], now: u64) -> Option<(RRSIG, bool)> {
        let key = self
            .cache
            .as_ref()
            .and_then(|_| self.signer.cache_key(rrset));
        if let (Some(cache), Some(key)) = (&self.cache, &key) {
            if let Some(sig) = cache.get(key, now) {
                return Some((sig, false));
            }
        }
        self.signed.fetch_add(1, Ordering::Relaxed);
        let sig = match self.signer.sign(rrset, now) {
            Ok(sig) => sig,
            Err(error) => {
                tracing::warn!(%error, "DNSSEC signing failed; the RRset goes unsigned");
                return None;
            }
        };
        if let (Some(cache), Some(key)) = (&self.cache, key) {
            cache.insert(key, sig.clone(), now);
        }
        Some((sig, true))
    }
}

#[cfg(test)]
pub(crate) mod tests;
