//! EndpointSlice (`discovery.k8s.io/v1`) rules: defaults, validation and
//! `metadata.generation`, as kube-apiserver applies them, as far as clients
//! trip over them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::{json, Value};

use super::dualstack::NOT_AN_IP;
use super::names::{dns1123_label, dns1123_subdomain};

const MAX_ENDPOINTS: usize = 1000;
const MAX_ADDRESSES: usize = 100;
const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Sets the port defaults (`SetDefaults_EndpointPort`).
pub(crate) fn default(slice: &mut Value) {
    for port in slice["ports"].as_array_mut().into_iter().flatten() {
        if port.get("name").is_none_or(Value::is_null) {
            port["name"] = json!("");
        }
        if port.get("protocol").is_none_or(Value::is_null) {
            port["protocol"] = json!("TCP");
        }
    }
}

/// The field errors of `slice` (`old`: its stored state, on update).
pub(crate) fn validate(slice: &Value, old: Option<&Value>) -> Vec<String> {
    let address_type = slice["addressType"].as_str().unwrap_or_default();
    let mut errors = Vec::new();
    if address_type.is_empty() {
        errors.push("addressType: Required value".to_string());
    } else if !["FQDN", "IPv4", "IPv6"].contains(&address_type) {
        errors.push(format!(
            "addressType: Unsupported value: {address_type:?}: supported values: \"FQDN\", \"IPv4\", \"IPv6\""
        ));
    }
    errors.extend(validate_endpoints(address_type, &slice["endpoints"]));
    errors.extend(validate_ports(&slice["ports"]));
    if let Some(was) = old.and_then(|o| o["addressType"].as_str()) {
        if was != address_type {
            errors.push(format!(
                "addressType: Invalid value: {address_type:?}: field is immutable"
            ));
        }
    }
    errors
}

fn validate_endpoints(address_type: &str, endpoints: &Value) -> Vec<String> {
    let endpoints = endpoints.as_array().map(Vec::as_slice).unwrap_or_default();
    if endpoints.len() > MAX_ENDPOINTS {
        return vec![format!(
            "endpoints: Too many: {}: must have at most {MAX_ENDPOINTS} items",
            endpoints.len()
        )];
    }
    let mut errors = Vec::new();
    for (i, endpoint) in endpoints.iter().enumerate() {
        let path = format!("endpoints[{i}]");
        let addresses = endpoint["addresses"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        if addresses.is_empty() {
            errors.push(format!(
                "{path}.addresses: Required value: must contain at least 1 address"
            ));
        } else if addresses.len() > MAX_ADDRESSES {
            errors.push(format!(
                "{path}.addresses: Too many: {}: must have at most {MAX_ADDRESSES} items",
                addresses.len()
            ));
        }
        for (j, address) in addresses.iter().enumerate() {
            let address = address.as_str().unwrap_or_default();
            for (at, why) in address_errors(address_type, address) {
                let at = match at {
                    ErrorPath::Address => format!("{path}.addresses[{j}]"),
                    ErrorPath::List => format!("{path}.addresses"),
                };
                errors.push(format!("{at}: Invalid value: {address:?}: {why}"));
            }
        }
        if let Some(host) = endpoint["hostname"].as_str().filter(|h| !dns1123_label(h)) {
            errors.push(format!("{path}.hostname: Invalid value: {host:?}: {LABEL}"));
        }
        if let Some(node) = endpoint["nodeName"]
            .as_str()
            .filter(|n| !dns1123_subdomain(n))
        {
            errors.push(format!(
                "{path}.nodeName: Invalid value: {node:?}: {SUBDOMAIN}"
            ));
        }
    }
    errors
}

/// Which field an address's error names: the address (`addresses[j]`), or,
/// for an IP of the other family, the list (`addresses`), as kube-apiserver
/// 1.36 does (pkg/apis/discovery/validation/validation.go).
enum ErrorPath {
    Address,
    List,
}

/// Why `address` is not valid for `address_type` (unknown types pass, as
/// they already failed on `addressType`), as kube-apiserver 1.36 with its
/// StrictIPCIDRValidation on: an IPv4-mapped IPv6 address or leading zeros
/// are refused for either family, an IPv6 address must be in canonical
/// form, and an IP of the other family is refused for the list and checked
/// for special ranges all the same.
fn address_errors(address_type: &str, address: &str) -> Vec<(ErrorPath, String)> {
    use ErrorPath::{Address, List};
    let at_address = |errors: Vec<String>| errors.into_iter().map(|e| (Address, e)).collect();
    if address_type == "FQDN" {
        return at_address(fqdn_errors(address));
    }
    if address_type != "IPv4" && address_type != "IPv6" {
        return Vec::new();
    }
    let Ok(ip) = address.parse::<IpAddr>() else {
        let why = match leading_zeros(address) {
            true => "must not have leading 0s",
            false => NOT_AN_IP,
        };
        return vec![(Address, why.into())];
    };
    if matches!(ip, IpAddr::V6(a) if a.to_ipv4_mapped().is_some()) {
        return vec![(Address, "must not be an IPv4-mapped IPv6 address".into())];
    }
    let canonical = ip.to_string();
    if address_type == "IPv6" && address != canonical {
        return vec![(
            Address,
            format!("must be in canonical form ({canonical:?})"),
        )];
    }
    let special = match ip {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    };
    let mut errors = Vec::new();
    match (address_type, ip) {
        ("IPv4", IpAddr::V6(_)) => errors.push((List, "must be an IPv4 address".into())),
        ("IPv6", IpAddr::V4(_)) => errors.push((List, "must be an IPv6 address".into())),
        _ => {}
    }
    errors.extend(at_address(special));
    errors
}

/// A dotted IPv4 address with a 0 leading an octet (`010.1.0.1`), which Go
/// parses "sloppily" and 1.36 then refuses as such.
fn leading_zeros(address: &str) -> bool {
    let octets: Vec<&str> = address.split('.').collect();
    let octet = |o: &&str| {
        !o.is_empty()
            && o.len() <= 3
            && o.bytes().all(|b| b.is_ascii_digit())
            && o.parse::<u16>().is_ok_and(|n| n <= 255)
    };
    octets.len() == 4
        && octets.iter().all(octet)
        && octets.iter().any(|o| o.len() > 1 && o.starts_with('0'))
}

fn special(
    unspecified: bool,
    loopback: bool,
    link_local: bool,
    ll_multicast: bool,
    ip: String,
) -> Vec<String> {
    let mut errors = Vec::new();
    if unspecified {
        errors.push(format!("may not be unspecified ({ip})"));
    }
    if loopback {
        errors.push("may not be in the loopback range (127.0.0.0/8, ::1/128)".into());
    }
    if link_local {
        errors.push("may not be in the link-local range (169.254.0.0/16, fe80::/10)".into());
    }
    if ll_multicast {
        errors
            .push("may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)".into());
    }
    errors
}

/// `ValidateEndpointIP` for an IPv4 address.
fn special_v4(ip: Ipv4Addr) -> Vec<String> {
    let o = ip.octets();
    let ll_multicast = o[0] == 224 && o[1] == 0 && o[2] == 0;
    special(
        ip.is_unspecified(),
        ip.is_loopback(),
        ip.is_link_local(),
        ll_multicast,
        ip.to_string(),
    )
}

/// `ValidateEndpointIP` for an IPv6 address.
fn special_v6(ip: Ipv6Addr) -> Vec<String> {
    let s = ip.segments();
    let link_local = s[0] & 0xffc0 == 0xfe80;
    let ll_multicast = s[0] & 0xff0f == 0xff02;
    special(
        ip.is_unspecified(),
        ip.is_loopback(),
        link_local,
        ll_multicast,
        ip.to_string(),
    )
}

/// `IsFullyQualifiedDomainName`: a DNS subdomain of two labels or more
/// (a trailing dot allowed).
fn fqdn_errors(name: &str) -> Vec<String> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        vec!["Required value".into()]
    } else if !dns1123_subdomain(name) {
        vec![SUBDOMAIN.into()]
    } else if !name.contains('.') {
        vec!["should be a domain with at least two segments separated by dots".into()]
    } else {
        Vec::new()
    }
}

fn validate_ports(ports: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (i, port) in ports.as_array().into_iter().flatten().enumerate() {
        let name = port["name"].as_str().unwrap_or_default();
        if !name.is_empty() && !dns1123_label(name) {
            errors.push(format!("ports[{i}].name: Invalid value: {name:?}: {LABEL}"));
        }
        if names.contains(&name) {
            errors.push(format!("ports[{i}].name: Duplicate value: {name:?}"));
        }
        names.push(name);
        match port["protocol"].as_str() {
            None => errors.push(format!("ports[{i}].protocol: Required value")),
            Some(p) if !["SCTP", "TCP", "UDP"].contains(&p) => errors.push(format!(
                "ports[{i}].protocol: Unsupported value: {p:?}: supported values: \"SCTP\", \"TCP\", \"UDP\""
            )),
            Some(_) => {}
        }
    }
    errors
}

/// Sets `metadata.generation`: 1 on create; on update the old one, plus one
/// when anything but metadata, or the labels, changed.
pub(crate) fn set_generation(slice: &mut Value, old: Option<&Value>) {
    let generation = match old {
        None => 1,
        Some(old) => {
            let was = old["metadata"]["generation"].as_i64().unwrap_or(1);
            let body = |v: &Value| {
                let mut v = v.clone();
                if let Some(m) = v.as_object_mut() {
                    m.remove("metadata");
                }
                v
            };
            let labels_changed = old["metadata"]["labels"] != slice["metadata"]["labels"];
            if labels_changed || body(old) != body(slice) {
                was + 1
            } else {
                was
            }
        }
    };
    slice["metadata"]["generation"] = json!(generation);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(address_type: &str, addresses: &[&str]) -> Value {
        json!({ "addressType": address_type, "endpoints": [{ "addresses": addresses }] })
    }

    #[test]
    fn addresses_are_checked_against_the_address_type() {
        assert!(validate(&slice("IPv4", &["10.1.0.1"]), None).is_empty());
        assert!(validate(&slice("IPv6", &["fd00::1"]), None).is_empty());
        assert!(validate(&slice("FQDN", &["web.example.com."]), None).is_empty());
        // The address's path, but for an IP of the other family: the list's
        // (kube-apiserver 1.36).
        let at = "endpoints[0].addresses[0]: Invalid value";
        let at_list = "endpoints[0].addresses: Invalid value";
        for (t, a, want) in [
            ("IPv4", "fd00::1", at_list),
            ("IPv4", "10.1.0", at),
            ("IPv4", "127.0.0.1", at),
            ("IPv4", "169.254.1.1", at),
            ("IPv6", "10.1.0.1", at_list),
            ("IPv6", "::ffff:10.1.0.1", at),
            ("IPv4", "::ffff:10.1.0.1", at),
            ("IPv6", "not-an-ip", at),
            ("IPv6", "fe80::1", at),
            ("FQDN", "localhost", at),
            ("FQDN", "Web.example.com", at),
        ] {
            let errors = validate(&slice(t, &[a]), None);
            assert_eq!(errors.len(), 1, "{t} {a}: {errors:?}");
            assert!(errors[0].starts_with(want), "{errors:?}");
        }
        assert_eq!(
            validate(&slice("IPv4", &["fd00::1"]), None),
            ["endpoints[0].addresses: Invalid value: \"fd00::1\": must be an IPv4 address"]
        );
        // The other family is checked for special ranges all the same.
        assert_eq!(
            validate(&slice("IPv4", &["::1"]), None),
            [
                "endpoints[0].addresses: Invalid value: \"::1\": must be an IPv4 address",
                "endpoints[0].addresses[0]: Invalid value: \"::1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
            ]
        );
        assert_eq!(
            validate(&slice("IPv6", &["FD00::1"]), None),
            ["endpoints[0].addresses[0]: Invalid value: \"FD00::1\": must be in canonical form (\"fd00::1\")"]
        );
        assert_eq!(
            validate(&slice("IPv4", &["010.1.0.1"]), None),
            ["endpoints[0].addresses[0]: Invalid value: \"010.1.0.1\": must not have leading 0s"]
        );
        let errors = validate(&slice("IPv4", &[]), None);
        assert_eq!(
            errors,
            ["endpoints[0].addresses: Required value: must contain at least 1 address"]
        );
        let many: Vec<String> = (0..101)
            .map(|i| format!("10.1.{}.{}", i / 200, i % 200 + 1))
            .collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(validate(&slice("IPv4", &many), None).len(), 1);
    }

    #[test]
    fn address_type_is_required_known_and_immutable() {
        let none = json!({ "endpoints": [] });
        assert_eq!(validate(&none, None), ["addressType: Required value"]);
        let bad = validate(&slice("IPv5", &["10.1.0.1"]), None);
        assert!(
            bad[0].starts_with("addressType: Unsupported value: \"IPv5\""),
            "{bad:?}"
        );
        let old = slice("IPv4", &["10.1.0.1"]);
        let errors = validate(&slice("IPv6", &["fd00::1"]), Some(&old));
        assert_eq!(
            errors,
            ["addressType: Invalid value: \"IPv6\": field is immutable"]
        );
    }

    #[test]
    fn ports_default_and_validate() {
        let mut s =
            json!({ "ports": [{ "port": 80 }, { "name": "dns", "port": 53, "protocol": "UDP" }] });
        default(&mut s);
        assert_eq!(
            s["ports"][0],
            json!({ "name": "", "port": 80, "protocol": "TCP" })
        );
        assert!(validate_ports(&s["ports"]).is_empty());
        let bad = json!([{ "name": "Bad_Name", "protocol": "TCP" }, { "name": "Bad_Name", "protocol": "ICMP" }]);
        assert_eq!(validate_ports(&bad).len(), 4);
    }

    #[test]
    fn generation_counts_changes_but_not_metadata() {
        let mut s = json!({ "metadata": { "name": "a" }, "addressType": "IPv4", "endpoints": [] });
        set_generation(&mut s, None);
        assert_eq!(s["metadata"]["generation"], 1);
        let mut same = s.clone();
        same["metadata"]["annotations"] = json!({ "x": "y" });
        set_generation(&mut same, Some(&s));
        assert_eq!(same["metadata"]["generation"], 1);
        let mut changed = s.clone();
        changed["endpoints"] = json!([{ "addresses": ["10.1.0.1"] }]);
        set_generation(&mut changed, Some(&s));
        assert_eq!(changed["metadata"]["generation"], 2);
    }
}
