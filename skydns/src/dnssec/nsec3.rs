//! Authenticated denial with NSEC3 "white lies" (RFC 7129 appendix B), as
//! SkyDNS and miekg/dns make them: NSEC3 records that cover just the hash to
//! deny. NXDOMAIN gets the closest encloser proof (RFC 5155 §7.2.1), NODATA one
//! matching NSEC3 (§7.2.3). Everything is pure.

use hickory_proto::dnssec::rdata::{DNSSECRData, NSEC3};
use hickory_proto::dnssec::Nsec3HashAlgorithm;
use hickory_proto::rr::{Name, RData, Record, RecordType};

/// The types the apex NSEC3 claims: those the apex always answers.
const APEX_TYPES: [RecordType; 3] = [RecordType::SOA, RecordType::RRSIG, RecordType::DNSKEY];

/// The NSEC3 hash of `name`: SHA-1 of its lowercase wire form, no salt,
/// no extra iterations.
pub(crate) fn hash(name: &Name) -> Vec<u8> {
    Nsec3HashAlgorithm::SHA1
        .hash(&[], name, 0)
        .map_or_else(|_| vec![0; 20], |d| d.as_ref().to_vec())
}

/// `hash` plus one, as a big-endian number (wrapping).
pub(crate) fn next(hash: &[u8]) -> Vec<u8> {
    let mut out = hash.to_vec();
    for byte in out.iter_mut().rev() {
        let (sum, carry) = byte.overflowing_add(1);
        *byte = sum;
        if !carry {
            break;
        }
    }
    out
}

/// `hash` minus one, as a big-endian number (wrapping).
pub(crate) fn previous(hash: &[u8]) -> Vec<u8> {
    let mut out = hash.to_vec();
    for byte in out.iter_mut().rev() {
        let (difference, borrow) = byte.overflowing_sub(1);
        *byte = difference;
        if !borrow {
            break;
        }
    }
    out
}

/// The NSEC3 owned by `hashed` (as a label under `zone`) that reaches to
/// `next_hashed`, claiming `types` for the owner.
fn nsec3(
    zone: &Name,
    hashed: &[u8],
    next_hashed: Vec<u8>,
    types: &[RecordType],
    ttl: u32,
) -> Record {
    let label = data_encoding::BASE32_DNSSEC.encode(hashed);
    let owner = Name::from_ascii(&label)
        .and_then(|l| l.append_domain(zone))
        .unwrap_or_else(|_| zone.clone());
    let data = NSEC3::new(
        Nsec3HashAlgorithm::SHA1,
        false,
        0,
        Vec::new(),
        next_hashed,
        types.iter().copied(),
    );
    Record::from_rdata(owner, ttl, RData::DNSSEC(DNSSECRData::NSEC3(data)))
}

/// An NSEC3 that covers `name`'s hash and nothing else.
pub(crate) fn covering(zone: &Name, name: &Name, ttl: u32) -> Record {
    let h = hash(name);
    nsec3(zone, &previous(&h), next(&h), &[], ttl)
}

/// An NSEC3 that matches `name`, claiming the types `name` has in the lie:
/// the apex's own types at the apex, none elsewhere.
pub(crate) fn matching(zone: &Name, name: &Name, ttl: u32) -> Record {
    let h = hash(name);
    let types: &[RecordType] = if name == zone { &APEX_TYPES } else { &[] };
    nsec3(zone, &h, next(&h), types, ttl)
}

/// The NSEC3s proving `qname` does not exist, given its closest encloser
/// (the nearest ancestor that exists, at most the zone).
pub(crate) fn name_error(
    zone: &Name,
    qname: &Name,
    closest_encloser: &Name,
    ttl: u32,
) -> Vec<Record> {
    let next_closer = ancestor(qname, closest_encloser.iter().count() + 1);
    let wildcard = closest_encloser
        .prepend_label("*")
        .unwrap_or_else(|_| closest_encloser.clone());
    let mut out = vec![matching(zone, closest_encloser, ttl)];
    for record in [
        covering(zone, &next_closer, ttl),
        covering(zone, &wildcard, ttl),
    ] {
        if !out.iter().any(|r| r.name == record.name) {
            out.push(record);
        }
    }
    out
}

/// The NSEC3 proving `qname` exists without the asked type.
pub(crate) fn no_data(zone: &Name, qname: &Name, ttl: u32) -> Record {
    matching(zone, qname, ttl)
}

/// The closest encloser of `qname` in `zone`: its nearest proper ancestor
/// for which `exists` holds, or the zone itself.
pub(crate) fn closest_encloser(zone: &Name, qname: &Name, exists: impl Fn(&Name) -> bool) -> Name {
    ((zone.iter().count() + 1)..qname.iter().count())
        .rev()
        .map(|n| ancestor(qname, n))
        .find(|ancestor| exists(ancestor))
        .unwrap_or_else(|| zone.clone())
}

/// The last `labels` labels of `name`, fully qualified.
fn ancestor(name: &Name, labels: usize) -> Name {
    let mut out = name.trim_to(labels);
    out.set_fqdn(true);
    out
}

/// Base32hex of a hash as it appears in NSEC3 owner names.
#[cfg(test)]
pub(crate) fn base32(hash: &[u8]) -> String {
    data_encoding::BASE32_DNSSEC.encode(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(text: &str) -> Name {
        Name::from_ascii(text).unwrap()
    }

    #[test]
    fn the_hash_is_sha1_of_the_lowercase_wire_name() {
        let wire = b"\x07cluster\x05local\x00";
        let sha1 = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, wire);
        assert_eq!(hash(&name("Cluster.LOCAL.")), sha1.as_ref());
        assert_eq!(base32(&hash(&name("cluster.local."))).len(), 32);
    }

    #[test]
    fn hash_arithmetic_carries_and_wraps() {
        assert_eq!(next(&[0, 0xff]), [1, 0]);
        assert_eq!(next(&[0xff, 0xff]), [0, 0]);
        assert_eq!(previous(&[1, 0]), [0, 0xff]);
        assert_eq!(previous(&[0, 0]), [0xff, 0xff]);
        assert_eq!(previous(&next(&[7, 9])), [7, 9]);
    }

    fn owner_hash(r: &Record) -> Vec<u8> {
        data_encoding::BASE32_DNSSEC
            .decode(r.name.iter().next().unwrap())
            .unwrap()
    }

    fn next_hash(r: &Record) -> Vec<u8> {
        let RData::DNSSEC(DNSSECRData::NSEC3(n)) = &r.data else {
            panic!("{r:?}")
        };
        assert_eq!((n.iterations(), n.salt(), n.opt_out()), (0, &[][..], false));
        n.next_hashed_owner_name().to_vec()
    }

    #[test]
    fn a_covering_nsec3_spans_one_hash_and_a_matching_one_none() {
        let zone = name("cluster.local.");
        let x = name("x.cluster.local.");
        let h = hash(&x);
        let cover = covering(&zone, &x, 60);
        assert_eq!(
            (owner_hash(&cover), next_hash(&cover)),
            (previous(&h), next(&h))
        );
        assert!(cover.name.base_name() == zone && cover.ttl == 60);
        let m = matching(&zone, &x, 60);
        assert_eq!((owner_hash(&m), next_hash(&m)), (h.clone(), next(&h)));
        let RData::DNSSEC(DNSSECRData::NSEC3(data)) = &matching(&zone, &zone, 60).data else {
            panic!()
        };
        assert_eq!(data.type_bit_maps().collect::<Vec<_>>(), APEX_TYPES);
    }

    #[test]
    fn the_closest_encloser_is_the_nearest_existing_proper_ancestor() {
        let zone = name("cluster.local.");
        let q = name("a.b.svc.cluster.local.");
        let exists = |n: &Name| [name("svc.cluster.local."), q.clone()].contains(n);
        assert_eq!(
            closest_encloser(&zone, &q, exists),
            name("svc.cluster.local.")
        );
        assert_eq!(closest_encloser(&zone, &q, |_| false), zone);
        assert_eq!(
            closest_encloser(&zone, &name("x.cluster.local."), |_| true),
            zone
        );
    }

    #[test]
    fn name_error_proves_encloser_next_closer_and_wildcard() {
        let zone = name("cluster.local.");
        let ce = name("svc.cluster.local.");
        let proof = name_error(&zone, &name("a.b.svc.cluster.local."), &ce, 60);
        let hashes: Vec<Vec<u8>> = proof.iter().map(owner_hash).collect();
        assert_eq!(hashes[0], hash(&ce));
        assert_eq!(hashes[1], previous(&hash(&name("b.svc.cluster.local."))));
        assert_eq!(hashes[2], previous(&hash(&name("*.svc.cluster.local."))));
        // One label below the zone, the next closer name is the name itself.
        let proof = name_error(&zone, &name("x.cluster.local."), &zone, 60);
        assert_eq!(
            owner_hash(&proof[1]),
            previous(&hash(&name("x.cluster.local.")))
        );
    }
}
