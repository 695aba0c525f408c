//! Reading the key pair `-dnssec` names: BIND's `<base>.key` (one DNSKEY
//! record) and `<base>.private` (`Field: value` lines), parsed here into ring
//! keys: ECDSA P-256 (algorithm 13) or RSA/SHA-256 (algorithm 8).

use hickory_proto::dnssec::crypto::EcdsaSigningKey;
use hickory_proto::dnssec::rdata::DNSKEY;
use hickory_proto::dnssec::{Algorithm, DnsSecResult, PublicKey, PublicKeyBuf, SigningKey, TBS};
use hickory_proto::rr::Name;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, KeyPair as _, RsaKeyPair, RsaPublicKeyComponents,
    ECDSA_P256_SHA256_FIXED_SIGNING, RSA_PKCS1_SHA256,
};
use std::collections::HashMap;

/// The DNSKEY flag that marks a zone key (RFC 4034 §2.1.1).
const ZONE_KEY: u16 = 0x0100;

/// A zone's DNSKEY and the private key that signs for it.
pub struct KeyPair {
    /// The DNSKEY's owner: the zone the key signs.
    pub owner: Name,
    /// The public key, as served.
    pub dnskey: DNSKEY,
    /// The private key.
    pub key: Box<dyn SigningKey>,
}

/// Reads `<base>.key` and `<base>.private`; a `base` ending in `.key` or
/// `.private` names the pair too. Errors name the file at fault.
pub(crate) fn read(base: &str) -> Result<KeyPair, String> {
    let base = basename(base);
    let read = |path: &str| std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"));
    let public_path = format!("{base}.key");
    let private_path = format!("{base}.private");
    let (owner, dnskey) =
        parse_public(&read(&public_path)?).map_err(|e| format!("{public_path}: {e}"))?;
    let key = parse_private(&read(&private_path)?, &dnskey)
        .map_err(|e| format!("{private_path}: {e}"))?;
    Ok(KeyPair { owner, dnskey, key })
}

/// The pair's name without a `.key` or `.private` ending.
pub(crate) fn basename(base: &str) -> &str {
    base.strip_suffix(".key")
        .or_else(|| base.strip_suffix(".private"))
        .unwrap_or(base)
}

/// The owner and DNSKEY of a `.key` file: one record, `owner [ttl] [class]
/// DNSKEY flags 3 algorithm base64...`, comments and parentheses allowed.
pub(crate) fn parse_public(text: &str) -> Result<(Name, DNSKEY), String> {
    let body: String = text
        .lines()
        .map(|line| line.split(';').next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join(" ")
        .replace(['(', ')'], " ");
    let mut tokens = body.split_whitespace();
    let owner = tokens.next().ok_or("no DNSKEY record in the file")?;
    let mut owner = Name::from_ascii(owner).map_err(|e| format!("bad owner {owner:?}: {e}"))?;
    owner.set_fqdn(true);
    // TTL and class, in either order, before the type.
    let rtype = tokens
        .by_ref()
        .find(|t| !t.bytes().all(|b| b.is_ascii_digit()) && !t.eq_ignore_ascii_case("IN"))
        .ok_or("no record type")?;
    if !rtype.eq_ignore_ascii_case("DNSKEY") {
        return Err(format!("a {rtype} record, not a DNSKEY"));
    }
    let mut number = |what: &str| -> Result<u16, String> {
        let t = tokens.next().ok_or(format!("no {what}"))?;
        t.parse().map_err(|_| format!("bad {what} {t:?}"))
    };
    let flags = number("flags")?;
    let protocol = number("protocol")?;
    let algorithm = number("algorithm")?;
    if protocol != 3 {
        return Err(format!("protocol {protocol}, not 3"));
    }
    if flags & ZONE_KEY == 0 {
        return Err(format!("flags {flags}: not a zone key (256 or 257)"));
    }
    let algorithm = supported(algorithm)?;
    let encoded: String = tokens.collect();
    let public = data_encoding::BASE64
        .decode(encoded.as_bytes())
        .map_err(|e| format!("bad base64 public key: {e}"))?;
    if algorithm == Algorithm::ECDSAP256SHA256 && public.len() != 64 {
        return Err(format!(
            "an ECDSA P-256 key has 64 bytes, not {}",
            public.len()
        ));
    }
    let dnskey = DNSKEY::with_flags(flags, PublicKeyBuf::new(public, algorithm));
    Ok((owner, dnskey))
}

/// Algorithms 8 (RSASHA256) and 13 (ECDSAP256SHA256).
fn supported(algorithm: u16) -> Result<Algorithm, String> {
    match algorithm {
        8 => Ok(Algorithm::RSASHA256),
        13 => Ok(Algorithm::ECDSAP256SHA256),
        n => Err(format!(
            "algorithm {n} is not supported (use 8, RSASHA256, or 13, ECDSAP256SHA256)"
        )),
    }
}

/// The signing key of a `.private` file, checked against `dnskey`.
pub(crate) fn parse_private(text: &str, dnskey: &DNSKEY) -> Result<Box<dyn SigningKey>, String> {
    let fields: HashMap<&str, &str> = text
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let format = fields
        .get("Private-key-format")
        .copied()
        .unwrap_or_default();
    if !format.starts_with("v1.") {
        return Err(format!(
            "not a BIND private key (Private-key-format {format:?}, want v1.2 or v1.3)"
        ));
    }
    let algorithm = fields.get("Algorithm").copied().unwrap_or_default();
    let number = algorithm.split_whitespace().next().unwrap_or_default();
    let want = u8::from(dnskey.public_key().algorithm());
    if number.parse::<u8>() != Ok(want) {
        return Err(format!(
            "Algorithm {algorithm:?} does not match the DNSKEY's algorithm {want}"
        ));
    }
    let field = |name: &str| -> Result<Vec<u8>, String> {
        let value = fields.get(name).ok_or(format!("no {name} field"))?;
        data_encoding::BASE64
            .decode(value.as_bytes())
            .map_err(|e| format!("bad base64 in {name}: {e}"))
    };
    let public = dnskey.public_key().public_bytes();
    let key: Box<dyn SigningKey> = if dnskey.public_key().algorithm() == Algorithm::ECDSAP256SHA256
    {
        let point = [&[4u8][..], public].concat(); // uncompressed SEC1 point
        let pair = EcdsaKeyPair::from_private_key_and_public_key(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            &p256_scalar(field("PrivateKey")?)?,
            &point,
            &SystemRandom::new(),
        )
        .map_err(|e| format!("the private key does not match the .key file's DNSKEY ({e})"))?;
        Box::new(EcdsaSigningKey::from_ecdsa(
            pair,
            Algorithm::ECDSAP256SHA256,
        ))
    } else {
        Box::new(RsaSha256::from_fields(&field, public)?)
    };
    Ok(key)
}

/// A P-256 private scalar as the 32 bytes ring wants: ldns writes it
/// without its leading zero bytes (1 key in 256 has at least one).
fn p256_scalar(bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    if bytes.len() > 32 {
        return Err(format!(
            "PrivateKey is {} bytes, more than a P-256 key's 32",
            bytes.len()
        ));
    }
    let mut padded = vec![0u8; 32 - bytes.len()];
    padded.extend(bytes);
    Ok(padded)
}

/// An RSA/SHA-256 key: hickory builds its RSA keys only from DER, ring
/// builds them from the components BIND writes.
struct RsaSha256(RsaKeyPair);

impl RsaSha256 {
    fn from_fields(
        field: &dyn Fn(&str) -> Result<Vec<u8>, String>,
        public: &[u8],
    ) -> Result<Self, String> {
        let components = ring::rsa::KeyPairComponents {
            public_key: RsaPublicKeyComponents {
                n: field("Modulus")?,
                e: field("PublicExponent")?,
            },
            d: field("PrivateExponent")?,
            p: field("Prime1")?,
            q: field("Prime2")?,
            dP: field("Exponent1")?,
            dQ: field("Exponent2")?,
            qInv: field("Coefficient")?,
        };
        if rsa_public_key(&components.public_key.e, &components.public_key.n) != public {
            return Err("the private key does not match the .key file's DNSKEY".into());
        }
        let pair = RsaKeyPair::from_components(&components).map_err(|e| {
            format!("the RSA key is not usable ({e}; ring signs with 2048 to 4096-bit keys)")
        })?;
        Ok(RsaSha256(pair))
    }
}

/// RFC 3110 §2: the exponent's length (one octet, or zero and two), the
/// exponent, the modulus.
fn rsa_public_key(e: &[u8], n: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(3 + e.len() + n.len());
    match u8::try_from(e.len()) {
        Ok(len) => out.push(len),
        Err(_) => {
            out.push(0);
            out.extend_from_slice(&(e.len() as u16).to_be_bytes());
        }
    }
    out.extend_from_slice(e);
    out.extend_from_slice(n);
    out
}

impl SigningKey for RsaSha256 {
    fn sign(&self, tbs: &TBS) -> DnsSecResult<Vec<u8>> {
        let mut signature = vec![0; self.0.public().modulus_len()];
        self.0.sign(
            &RSA_PKCS1_SHA256,
            &SystemRandom::new(),
            tbs.as_ref(),
            &mut signature,
        )?;
        Ok(signature)
    }

    fn to_public_key(&self) -> DnsSecResult<PublicKeyBuf> {
        let c = RsaPublicKeyComponents::<Vec<u8>>::from(self.0.public_key());
        Ok(PublicKeyBuf::new(
            rsa_public_key(&c.e, &c.n),
            Algorithm::RSASHA256,
        ))
    }

    fn algorithm(&self) -> Algorithm {
        Algorithm::RSASHA256
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_short_p256_scalar_is_padded_and_a_long_one_refused() {
        assert_eq!(super::p256_scalar(vec![7; 31]).unwrap()[..2], [0, 7]);
        assert_eq!(super::p256_scalar(vec![7; 32]).unwrap(), vec![7; 32]);
        assert!(super::p256_scalar(vec![7; 33])
            .unwrap_err()
            .contains("33 bytes"));
    }
}
