//! Key pairs made by BIND's `dnssec-keygen` at test time (never committed):
//! both algorithms read and sign verifiably, bad files are refused with
//! the file named, and [`Dnssec::secure`] signs, denies and caches.

use super::*;
use hickory_proto::dnssec::rdata::RRSIG;
use hickory_proto::dnssec::{PublicKey, Verifier};
use hickory_proto::op::{MessageType, OpCode, Query};
use hickory_proto::rr::rdata::{A, SOA};
use hickory_proto::rr::DNSClass;
use std::net::Ipv4Addr;

/// A key pair written by `dnssec-keygen` into a temporary directory.
pub(crate) use test_support::dnssec::KeyPair as TestKey;

/// `dnssec-keygen -n ZONE <args> <zone>` in a fresh directory.
pub(crate) fn keygen(zone: &str, args: &[&str]) -> TestKey {
    test_support::dnssec::keygen(zone, args).unwrap()
}

/// An ECDSA P-256 zone key for `cluster.local.`.
pub(crate) fn ecdsa() -> TestKey {
    keygen("cluster.local.", &["-a", "ECDSAP256SHA256"])
}

fn rsa() -> TestKey {
    keygen("cluster.local.", &["-a", "RSASHA256", "-b", "2048"])
}

const NOW: u64 = 1_750_000_000;

fn settings(scache: usize) -> Settings {
    Settings {
        ttl: 3600,
        min_ttl: 60,
        scache,
    }
}

fn name(text: &str) -> Name {
    Name::from_ascii(text).unwrap()
}

fn a(owner: &str, ip: u8, ttl: u32) -> Record {
    Record::from_rdata(name(owner), ttl, RData::A(A(Ipv4Addr::new(10, 0, 0, ip))))
}

fn soa() -> Record {
    let zone = name("cluster.local.");
    let data = SOA::new(
        name("ns.dns.cluster.local."),
        name("hostmaster.skydns.local."),
        1,
        28800,
        7200,
        604800,
        60,
    );
    Record::from_rdata(zone, 60, RData::SOA(data))
}

fn reply(qname: &str, qtype: RecordType) -> Message {
    let mut m = Message::new(1, MessageType::Response, OpCode::Query);
    m.queries.push(Query::query(name(qname), qtype));
    m
}

fn rrsig(r: &Record) -> &RRSIG {
    match &r.data {
        RData::DNSSEC(DNSSECRData::RRSIG(sig)) => sig,
        other => panic!("not an RRSIG: {other:?}"),
    }
}

/// Checks every RRSIG of `section` against the records it covers there.
fn assert_verifies(d: &Dnssec, section: &[Record]) -> usize {
    let key = d.dnskey_data().unwrap();
    let sigs: Vec<&Record> = section
        .iter()
        .filter(|r| r.record_type() == RecordType::RRSIG)
        .collect();
    for s in &sigs {
        let sig = rrsig(s);
        let covered = section
            .iter()
            .filter(|r| r.name == s.name && r.record_type() == sig.input().type_covered);
        key.verify_rrsig(&s.name, DNSClass::IN, sig, covered)
            .unwrap_or_else(|e| panic!("{} {:?}: {e}", s.name, sig.input().type_covered));
    }
    sigs.len()
}

#[test]
fn dnssec_keygen_pairs_of_both_algorithms_sign_verifiably() {
    for (key, algorithm) in [(ecdsa(), 13u8), (rsa(), 8)] {
        let pair = keyfile::read(&key.base).unwrap();
        assert_eq!(pair.owner, name("cluster.local."));
        assert_eq!(u8::from(pair.dnskey.public_key().algorithm()), algorithm);
        let d = Dnssec::new(pair, "cluster.local.", settings(0)).unwrap();
        assert_eq!(d.key_tag(), key.tag, "the key tag dnssec-keygen computed");
        let mut m = reply("kubernetes.default.svc.cluster.local.", RecordType::A);
        m.answers = vec![
            a("kubernetes.default.svc.cluster.local.", 1, 30),
            a("kubernetes.default.svc.cluster.local.", 2, 30),
        ];
        assert_eq!(
            d.secure(&mut m, |_| true, NOW),
            1,
            "one RRset, one signature"
        );
        assert_eq!(assert_verifies(&d, &m.answers), 1);
        let sig = rrsig(&m.answers[2]).clone();
        assert_eq!(u8::from(sig.input().algorithm), algorithm);
        assert_eq!(sig.input().signer_name, name("cluster.local."));
        assert_eq!(sig.input().key_tag, key.tag);
        assert_eq!(sig.input().sig_inception.get(), (NOW - 3 * 3600) as u32);
        assert_eq!(sig.input().sig_expiration.get(), (NOW + 7 * 86400) as u32);
        // A changed record no longer matches its signature.
        m.answers[1] = a("kubernetes.default.svc.cluster.local.", 3, 30);
        let covered = m.answers[..2].iter();
        let key = d.dnskey_data().unwrap();
        assert!(key
            .verify_rrsig(&m.answers[2].name, DNSClass::IN, &sig, covered)
            .is_err());
    }
}

#[test]
fn the_public_key_is_read_from_zone_file_text_in_any_layout() {
    let key = ecdsa();
    let text = std::fs::read_to_string(format!("{}.key", key.base)).unwrap();
    let (owner, dnskey) = keyfile::parse_public(&text).unwrap();
    let record = text.lines().find(|l| !l.starts_with(';')).unwrap();
    let fields: Vec<&str> = record.split_whitespace().collect();
    let b64 = fields[6..].join("");
    let (b64a, b64b) = b64.split_at(20);
    // ldns-keygen's layout: a TTL, tabs, a trailing comment; and parentheses.
    let ldns =
        format!("cluster.local.\t3600\tIN\tDNSKEY\t256 3 13 {b64a}{b64b} ;{{id = 1 (zsk)}}\n");
    let split =
        format!("cluster.local. IN 3600 DNSKEY 256 3 13 (\n {b64a} ; first part\n {b64b} )\n");
    for text in [ldns, split] {
        assert_eq!(
            keyfile::parse_public(&text).unwrap(),
            (owner.clone(), dnskey.clone()),
            "{text}"
        );
    }
}

/// Writes `text` over `<base>.<ext>`.
fn overwrite(key: &TestKey, ext: &str, text: &str) {
    std::fs::write(format!("{}.{ext}", key.base), text).unwrap();
}

fn load_error(key: &TestKey) -> String {
    Dnssec::load(&key.base, "cluster.local.", settings(0)).unwrap_err()
}

#[test]
fn bad_key_files_are_refused_naming_the_file() {
    let key = ecdsa();
    let other = ecdsa();
    let private = |k: &TestKey| std::fs::read_to_string(format!("{}.private", k.base)).unwrap();
    let public = std::fs::read_to_string(format!("{}.key", key.base)).unwrap();

    std::fs::remove_file(format!("{}.private", key.base)).unwrap();
    let err = load_error(&key);
    assert!(
        err.contains(&format!("{}.private", key.base)) && err.contains("No such file"),
        "{err}"
    );

    overwrite(&key, "private", &private(&other));
    let err = load_error(&key);
    assert!(
        err.contains(".private") && err.contains("does not match"),
        "{err}"
    );

    overwrite(&key, "private", "PrivateKey: AAAA\n");
    assert!(
        load_error(&key).contains("not a BIND private key"),
        "{}",
        load_error(&key)
    );

    let rsa_private = private(&rsa());
    overwrite(&key, "private", &rsa_private);
    assert!(load_error(&key).contains("does not match the DNSKEY's algorithm 13"));

    overwrite(&key, "private", &private(&other));
    overwrite(&key, "key", "; nothing here\n");
    let err = load_error(&key);
    assert!(
        err.contains(&format!("{}.key", key.base)) && err.contains("no DNSKEY"),
        "{err}"
    );

    overwrite(
        &key,
        "key",
        &public.replace("DNSKEY 256 3 13", "DNSKEY 0 3 13"),
    );
    assert!(load_error(&key).contains("not a zone key"));
    overwrite(
        &key,
        "key",
        &public.replace("DNSKEY 256 3 13", "DNSKEY 256 3 15"),
    );
    assert!(load_error(&key).contains("algorithm 15 is not supported"));
    overwrite(&key, "key", &public.replace(" IN DNSKEY", " IN DS"));
    assert!(load_error(&key).contains("a DS record, not a DNSKEY"));
}

#[test]
fn unusable_keys_are_refused() {
    let small = keygen("cluster.local.", &["-a", "RSASHA256", "-b", "1024"]);
    let err = load_error(&small);
    assert!(err.contains(".private") && err.contains("2048"), "{err}");
    let ed = keygen("cluster.local.", &["-a", "ED25519"]);
    assert!(load_error(&ed).contains("algorithm 15 is not supported"));
}

#[test]
fn the_key_must_belong_to_the_served_domain() {
    let key = keygen("example.org.", &["-a", "ECDSAP256SHA256"]);
    let err = Dnssec::load(&key.base, "cluster.local.", settings(0)).unwrap_err();
    assert!(
        err.contains("example.org.") && err.contains("cluster.local.") && err.contains(".key"),
        "{err}"
    );
    // The basename may be given with either extension.
    for ext in [".key", ".private"] {
        let named = format!("{}{ext}", key.base);
        assert!(
            Dnssec::load(&named, "example.org.", settings(0)).is_ok(),
            "{named}"
        );
    }
}

fn loaded(scache: usize) -> (TestKey, Dnssec) {
    let key = ecdsa();
    let d = Dnssec::load(&key.base, "cluster.local.", settings(scache)).unwrap();
    (key, d)
}

#[test]
fn replies_get_the_opt_with_do_ad_and_signatures_for_the_domain_only() {
    let (_key, d) = loaded(10);
    let mut m = reply("web.default.svc.cluster.local.", RecordType::SRV);
    m.answers = vec![a("web.default.svc.cluster.local.", 1, 30)];
    // A target outside the domain (an internal lookup's answer) stays unsigned.
    m.additionals = vec![
        a("x.default.svc.cluster.local.", 2, 30),
        a("mail.example.org.", 3, 30),
    ];
    d.secure(&mut m, |_| true, NOW);
    assert_eq!(assert_verifies(&d, &m.answers), 1);
    assert_eq!(assert_verifies(&d, &m.additionals), 1);
    assert_eq!(rrsig(&m.additionals[2]).input().type_covered, RecordType::A);
    assert_eq!(m.additionals[2].name, name("x.default.svc.cluster.local."));
    let edns = m.edns.as_ref().expect("an OPT");
    assert!(edns.flags().dnssec_ok);
    assert_eq!(edns.max_payload(), 4096);
    assert!(m.metadata.authentic_data);
    // An answer from upstream (an ExternalName's target): no AD.
    let mut m = reply("ext.default.svc.cluster.local.", RecordType::A);
    m.answers = vec![a("www.example.org.", 4, 30)];
    d.secure(&mut m, |_| true, NOW);
    assert!(!m.metadata.authentic_data);
}

/// The hashed owner label of an NSEC3 record, decoded.
fn owner_hash(r: &Record) -> Vec<u8> {
    let label = r.name.iter().next().unwrap();
    data_encoding::BASE32_DNSSEC.decode(label).unwrap()
}

#[test]
fn nxdomain_gets_a_closest_encloser_proof_all_signed() {
    let (_key, d) = loaded(10);
    let mut m = reply("nosuch.web.default.svc.cluster.local.", RecordType::A);
    m.metadata.response_code = ResponseCode::NXDomain;
    m.authorities = vec![soa()];
    let existing = [
        name("default.svc.cluster.local."),
        name("svc.cluster.local."),
    ];
    d.secure(&mut m, |n| existing.contains(n), NOW);
    let nsec3: Vec<&Record> = m
        .authorities
        .iter()
        .filter(|r| r.record_type() == RecordType::NSEC3)
        .collect();
    assert_eq!(nsec3.len(), 3, "{:#?}", m.authorities);
    // Matches default.svc (the closest encloser), covers web.default.svc
    // (the next closer name) and *.default.svc (the wildcard).
    assert_eq!(owner_hash(nsec3[0]), nsec3::hash(&existing[0]));
    let covered = |r: &Record, n: &str| {
        let RData::DNSSEC(DNSSECRData::NSEC3(data)) = &r.data else {
            panic!()
        };
        let h = nsec3::hash(&name(n));
        owner_hash(r) < h && h < data.next_hashed_owner_name().to_vec()
    };
    assert!(covered(nsec3[1], "web.default.svc.cluster.local."));
    assert!(covered(nsec3[2], "*.default.svc.cluster.local."));
    assert!(nsec3.iter().all(|r| r.ttl == 60));
    assert_eq!(
        assert_verifies(&d, &m.authorities),
        4,
        "SOA and three NSEC3s"
    );
}

#[test]
fn nodata_gets_the_nsec3_of_the_name_without_the_type() {
    let (_key, d) = loaded(10);
    let mut m = reply("Kubernetes.default.svc.cluster.local.", RecordType::AAAA);
    m.authorities = vec![soa()];
    d.secure(&mut m, |_| true, NOW);
    let RData::DNSSEC(DNSSECRData::NSEC3(nsec3)) = &m.authorities[1].data else {
        panic!("{:#?}", m.authorities)
    };
    assert_eq!(
        owner_hash(&m.authorities[1]),
        nsec3::hash(&name("kubernetes.default.svc.cluster.local."))
    );
    assert!(!nsec3
        .type_bit_maps()
        .any(|t| t == RecordType::AAAA || t == RecordType::CNAME));
    assert_eq!(assert_verifies(&d, &m.authorities), 2);
}

fn signed_a(d: &Dnssec, ttl: u32, now: u64) -> (Message, u64) {
    let mut m = reply("kubernetes.default.svc.cluster.local.", RecordType::A);
    m.answers = vec![a("kubernetes.default.svc.cluster.local.", 1, ttl)];
    let made = d.secure(&mut m, |_| true, now);
    (m, made)
}

#[test]
fn signatures_are_reused_only_for_the_same_records_until_near_expiry() {
    let (_key, d) = loaded(10);
    let (first, made) = signed_a(&d, 30, NOW);
    assert_eq!(made, 1);
    let (again, made) = signed_a(&d, 30, NOW + 3600);
    assert_eq!(
        (made, &again.answers),
        (0, &first.answers),
        "from the cache"
    );
    assert_eq!(signed_a(&d, 31, NOW).1, 1, "another TTL is another RRset");
    // Reused until two days before the week is over, then signed anew.
    assert_eq!(signed_a(&d, 30, NOW + 5 * 86400 - 1).1, 0);
    let (late, made) = signed_a(&d, 30, NOW + 5 * 86400 + 1);
    assert_eq!(made, 1);
    assert_ne!(late.answers[1], first.answers[1]);
    assert_eq!(d.signatures_made(), 3);

    let (_key, uncached) = loaded(0);
    assert_eq!(signed_a(&uncached, 30, NOW).1, 1);
    assert_eq!(signed_a(&uncached, 30, NOW).1, 1, "-scache=0: no cache");
}

#[test]
fn a_full_signature_cache_makes_room() {
    let cache = sigcache::SigCache::new(2);
    let (_key, d) = loaded(0);
    let (m, _) = signed_a(&d, 30, NOW);
    let sig = rrsig(&m.answers[1]).clone();
    for i in 0..5u8 {
        cache.insert([i; 32], sig.clone(), NOW);
        assert!(cache.len() <= 2);
        assert!(cache.get(&[i; 32], NOW).is_some());
    }
    assert!(
        cache.get(&[4; 32], NOW + 6 * 86400).is_none(),
        "too close to expiry"
    );
    // The oldest made goes first; a key signed again becomes the newest.
    assert!(cache.get(&[3; 32], NOW).is_some() && cache.get(&[2; 32], NOW).is_none());
    cache.insert([3; 32], sig.clone(), NOW);
    cache.insert([5; 32], sig.clone(), NOW);
    assert!(cache.get(&[3; 32], NOW).is_some(), "re-signed: kept");
    assert!(cache.get(&[4; 32], NOW).is_none(), "oldest: evicted");
}
