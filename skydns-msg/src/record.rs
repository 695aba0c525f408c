//! The SkyDNS service record: the JSON value stored under every etcd key, which
//! kube2sky writes and skydns reads. Writing is byte-exact with kube2sky 1.2's
//! Go `encoding/json`, because a record's key label is the FNV-1a hash of those
//! bytes ([`Record::key_label`]). Reading is lenient.

use serde::Deserialize;
use std::net::IpAddr;

/// One SkyDNS record (`msg.Service` in the Go sources).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(default)]
pub struct Record {
    /// An IP address (gives A/AAAA) or a domain name (gives CNAME, SRV/MX target).
    pub host: Box<str>,
    /// SRV port. Like `priority` and `weight`, a Go `int` in SkyDNS: any
    /// 64-bit integer is valid, and [`go_uint16`] wraps it into the DNS field.
    pub port: i64,
    /// SRV priority and MX preference; 0 means "the configured default".
    pub priority: i64,
    /// Relative SRV weight; 0 counts as 100.
    pub weight: i64,
    /// TXT data.
    pub text: Box<str>,
    /// When true, the record also answers MX queries.
    pub mail: bool,
    /// Record TTL in seconds; 0 means "the configured default".
    pub ttl: u32,
    /// Number of leading labels removed from a synthesised SRV/MX target.
    pub targetstrip: u16,
    /// Group name, see the answer module's group filter.
    pub group: Box<str>,
}

/// What a record's `host` field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostKind<'a> {
    /// An IPv4 or IPv6 literal.
    Ip(IpAddr),
    /// A domain name (not necessarily fully qualified).
    Name(&'a str),
    /// No host at all: a text-only record such as kube2sky's
    /// `dns-version` TXT. It gives no address, CNAME, SRV, MX or PTR.
    None,
}

/// A JSON value that is not a valid SkyDNS record.
#[derive(Debug, thiserror::Error)]
#[error("invalid SkyDNS record JSON: {0}")]
pub struct RecordError(#[from] serde_json::Error);

impl Record {
    /// The A-type record kube2sky writes for an IP: priority 10, weight 10, TTL 30.
    pub fn kube2sky_address(ip: &str) -> Self {
        Record {
            host: ip.into(),
            priority: 10,
            weight: 10,
            ttl: 30,
            ..Record::default()
        }
    }

    /// The SRV-type record kube2sky writes: a target name and a port.
    pub fn kube2sky_service(target: &str, port: u16) -> Self {
        Record {
            port: i64::from(port),
            ..Record::kube2sky_address(target)
        }
    }

    /// Parses a stored value leniently (unknown fields ignored).
    pub fn from_json(bytes: &[u8]) -> Result<Self, RecordError> {
        Ok(serde_json::from_slice(bytes)?)
    }

    /// Serialises exactly as Go's `encoding/json` did for kube2sky 1.2.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(96);
        out.push('{');
        let mut first = true;
        let mut field = |out: &mut String, name: &str, value: &str| {
            if !first {
                out.push(',');
            }
            first = false;
            out.push('"');
            out.push_str(name);
            out.push_str("\":");
            out.push_str(value);
        };
        if !self.host.is_empty() {
            field(&mut out, "host", &go_json_string(&self.host));
        }
        for (name, value) in [
            ("port", self.port),
            ("priority", self.priority),
            ("weight", self.weight),
        ] {
            if value != 0 {
                field(&mut out, name, &value.to_string());
            }
        }
        if !self.text.is_empty() {
            field(&mut out, "text", &go_json_string(&self.text));
        }
        if self.mail {
            field(&mut out, "mail", "true");
        }
        if self.ttl != 0 {
            field(&mut out, "ttl", &self.ttl.to_string());
        }
        field(&mut out, "targetstrip", &self.targetstrip.to_string());
        if !self.group.is_empty() {
            field(&mut out, "group", &go_json_string(&self.group));
        }
        out.push('}');
        out
    }

    /// The etcd key label kube2sky derives from a record: lowercase hex
    /// FNV-1a 32 of [`Record::to_json`], without zero padding.
    pub fn key_label(&self) -> String {
        key_label_of(&self.to_json())
    }

    /// Classifies the `host` field. An IPv4-mapped IPv6 address
    /// (`::ffff:10.5.2.1`) is IPv4, as Go's `To4()` made it for SkyDNS.
    /// An empty host is [`HostKind::None`] (SkyDNS chased it as the root
    /// name `.`).
    pub fn host_kind(&self) -> HostKind<'_> {
        if self.host.is_empty() {
            return HostKind::None;
        }
        match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
                Some(v4) => HostKind::Ip(IpAddr::V4(v4)),
                None => HostKind::Ip(IpAddr::V6(v6)),
            },
            Ok(ip) => HostKind::Ip(ip),
            Err(_) => HostKind::Name(&self.host),
        }
    }
}

/// Go's `uint16(n)` for an `int`: the low 16 bits, so 65546 is 10 and -1
/// is 65535 (how SkyDNS put out-of-range ports, priorities and weights on
/// the wire).
pub fn go_uint16(n: i64) -> u16 {
    n as u16
}

/// Go's `uint16(f)` for a float64 on amd64 (the SkyDNS images' platform):
/// truncated to an int64 first, then its low 16 bits; a value no int64
/// holds (or NaN) becomes int64's "indefinite" 0x8000000000000000, so 0.
pub fn go_float_to_uint16(f: f64) -> u16 {
    // i64::MIN as f64 is exactly -2^63; 2^63 is the first value past i64::MAX.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if !(-LIMIT..LIMIT).contains(&f) {
        return 0;
    }
    go_uint16(f as i64)
}

/// [`Record::key_label`] of a record whose [`Record::to_json`] is `json`
/// (for a caller that needs the JSON too, without building it twice).
pub fn key_label_of(json: &str) -> String {
    format!("{:x}", fnv1a32(json.as_bytes()))
}

/// FNV-1a, 32 bits (offset basis 2166136261, prime 16777619).
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(2_166_136_261u32, |hash, &b| {
        (hash ^ u32::from(b)).wrapping_mul(16_777_619)
    })
}

/// A JSON string literal escaped the way Go's `encoding/json` does by default
/// (HTML-safe: `<`, `>`, `&`, U+2028 and U+2029 are `\u` escaped).
fn go_json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_integer_conversions_keep_the_low_16_bits() {
        assert_eq!(go_uint16(80), 80);
        assert_eq!(go_uint16(65_546), 10);
        assert_eq!(go_uint16(-1), 65_535);
        // float64 → uint16 on amd64: truncated to int64, then the low bits;
        // outside int64 (or NaN) the "indefinite" integer, so 0.
        assert_eq!(go_float_to_uint16(80.9), 80);
        assert_eq!(go_float_to_uint16(-1.5), 65_535);
        assert_eq!(go_float_to_uint16(65_546.0), 10);
        assert_eq!(go_float_to_uint16(1e19), 0);
        assert_eq!(go_float_to_uint16(-1e19), 0);
        assert_eq!(go_float_to_uint16(f64::NAN), 0);
    }

    #[test]
    fn json_strings_escape_controls_and_html_as_go_does() {
        let record = Record {
            text: "a b\u{1}\u{1f}<&>\u{2028}\"".into(),
            ..Record::default()
        };
        assert_eq!(
            record.to_json(),
            r#"{"text":"a b\u0001\u001f\u003c\u0026\u003e\u2028\"","targetstrip":0}"#
        );
    }

    #[test]
    fn address_record_is_byte_exact() {
        assert_eq!(
            Record::kube2sky_address("10.0.0.10").to_json(),
            r#"{"host":"10.0.0.10","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#
        );
    }

    #[test]
    fn service_record_is_byte_exact() {
        assert_eq!(
            Record::kube2sky_service("kubernetes.default.svc.cluster.local.", 443).to_json(),
            r#"{"host":"kubernetes.default.svc.cluster.local.","port":443,"priority":10,"weight":10,"ttl":30,"targetstrip":0}"#
        );
    }

    #[test]
    fn key_labels_match_the_reference_examples() {
        for (ip, label) in [
            ("10.0.0.1", "c88f1059"),
            ("10.0.0.10", "21172049"),
            ("1.2.3.4", "ad70cf0f"),
            ("10.244.1.6", "ad649af9"),
        ] {
            assert_eq!(Record::kube2sky_address(ip).key_label(), label, "{ip}");
        }
    }

    #[test]
    fn labels_are_not_zero_padded() {
        // FNV-1a 32 of this record's JSON is 0x00734242 (computed apart
        // from this code): kube2sky wrote the label with Go's %x, so "734242",
        // six characters, not "00734242".
        let record = Record::kube2sky_address("10.0.0.26");
        assert_eq!(
            record.to_json(),
            r#"{"host":"10.0.0.26","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#
        );
        assert_eq!(record.key_label(), "734242");
    }

    #[test]
    fn empty_record_keeps_targetstrip_only() {
        assert_eq!(Record::default().to_json(), r#"{"targetstrip":0}"#);
    }

    #[test]
    fn all_fields_in_go_order_with_html_escaping() {
        let r = Record {
            host: "a<b>&".into(),
            port: 1,
            priority: 2,
            weight: 3,
            text: "t\"x".into(),
            mail: true,
            ttl: 4,
            targetstrip: 5,
            group: "g".into(),
        };
        assert_eq!(
            r.to_json(),
            r#"{"host":"a\u003cb\u003e\u0026","port":1,"priority":2,"weight":3,"text":"t\"x","mail":true,"ttl":4,"targetstrip":5,"group":"g"}"#
        );
        assert_eq!(Record::from_json(r.to_json().as_bytes()).unwrap(), r);
    }

    #[test]
    fn parsing_is_lenient_about_unknown_and_missing_fields() {
        let r = Record::from_json(br#"{"host":"1.2.3.4","extra":[1,2],"ttl":5}"#).unwrap();
        assert_eq!(&*r.host, "1.2.3.4");
        assert_eq!(r.ttl, 5);
        assert_eq!(r.port, 0);
    }

    #[test]
    fn malformed_values_are_errors() {
        assert!(Record::from_json(b"{not json").is_err());
        assert!(Record::from_json(br#"{"port":"eighty"}"#).is_err());
        // Go's int holds 70000 (wrapped on the wire), but not this:
        assert!(Record::from_json(br#"{"port":99999999999999999999}"#).is_err());
    }

    #[test]
    fn ipv4_mapped_ipv6_hosts_are_ipv4_as_in_skydns() {
        let record = Record {
            host: "::ffff:10.5.2.1".into(),
            ..Record::default()
        };
        assert_eq!(
            record.host_kind(),
            HostKind::Ip(IpAddr::V4(std::net::Ipv4Addr::new(10, 5, 2, 1)))
        );
        let plain = Record {
            host: "2001:db8::1".into(),
            ..Record::default()
        };
        assert!(matches!(plain.host_kind(), HostKind::Ip(IpAddr::V6(_))));
    }

    #[test]
    fn host_kind_classifies_ips_and_names() {
        assert!(matches!(
            Record::kube2sky_address("::1").host_kind(),
            HostKind::Ip(IpAddr::V6(_))
        ));
        assert_eq!(
            Record::kube2sky_address("a.b.").host_kind(),
            HostKind::Name("a.b.")
        );
        assert_eq!(Record::default().host_kind(), HostKind::None);
    }
}
