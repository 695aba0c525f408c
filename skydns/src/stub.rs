//! Stub zones (`-stubzones`, SkyDNS's `server/stub.go`): names forwarded to the
//! nameservers configured for their zone under `stub.dns.<domain>`. The table
//! follows the current snapshot; forwarded requests carry a loop marker.

use crate::snapshot::Snapshot;
use hickory_proto::op::{Edns, Message};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use skydns_msg::path::{in_domain, labels};
use skydns_msg::record::HostKind;
use std::collections::BTreeMap;
use std::net::SocketAddr;

mod flags;
pub use flags::Flags;

/// The EDNS0 local option marking a stub-forwarded request.
pub(crate) const LOOP_OPTION: u16 = 65001 + 10;

/// Stub zone → its nameservers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct StubZones {
    zones: BTreeMap<String, Vec<SocketAddr>>,
}

impl StubZones {
    /// The etcd directory of the stub zones' servers (`.../dns/stub/`).
    pub(crate) fn dir(zone: &crate::answer::Zone) -> String {
        format!(
            "{}/",
            zone.prefix.path(&format!("stub.dns.{}", zone.domain))
        )
    }

    /// The stub zones configured in `snapshot` for `domain`.
    pub(crate) fn from_snapshot(snapshot: &Snapshot, zone: &crate::answer::Zone) -> Self {
        let stub_root = format!("stub.dns.{}", zone.domain);
        let local = format!("local.dns.{}", zone.domain);
        let dir = Self::dir(zone);
        let strip = labels(&stub_root).count();
        let mut zones: BTreeMap<String, Vec<SocketAddr>> = BTreeMap::new();
        for leaf in snapshot.scan_prefix(&dir) {
            let HostKind::Ip(ip) = leaf.record.host_kind() else {
                continue;
            };
            let name = zone.prefix.domain(&leaf.key);
            let all: Vec<&str> = labels(&name).collect();
            if all.len() <= strip + 1 {
                continue;
            }
            let stub = format!("{}.", all[1..all.len() - strip].join("."));
            if stub == local {
                continue;
            }
            let port = match leaf.record.port {
                0 => 53,
                // SkyDNS dialled "host:port": out of range, no server.
                port => match u16::try_from(port) {
                    Ok(port) => port,
                    Err(_) => continue,
                },
            };
            zones
                .entry(stub)
                .or_default()
                .push(SocketAddr::new(ip, port));
        }
        StubZones { zones }
    }

    /// The servers of the longest zone containing `name` (label-aware).
    pub(crate) fn servers_for(&self, name: &str) -> Option<&[SocketAddr]> {
        self.zones
            .iter()
            .filter(|(zone, _)| in_domain(name, zone))
            .max_by_key(|(zone, _)| zone.len())
            .map(|(_, servers)| servers.as_slice())
    }
}

/// Whether `request` carries the stub loop marker.
pub(crate) fn has_loop_marker(request: &Message) -> bool {
    request
        .edns
        .as_ref()
        .is_some_and(|e| e.option(EdnsCode::from(LOOP_OPTION)).is_some())
}

/// `request` with the loop marker added, ready to send to a stub server.
pub(crate) fn mark(request: &Message) -> Option<Vec<u8>> {
    let mut marked = request.clone();
    let edns = marked.edns.get_or_insert_with(|| {
        let mut e = Edns::new();
        e.set_max_payload(512);
        e
    });
    edns.options_mut()
        .insert(EdnsOption::Unknown(LOOP_OPTION, vec![1]));
    marked.to_vec().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use skydns_msg::record::Record;

    fn zone() -> crate::answer::Zone {
        crate::answer::Zone {
            domain: "cluster.local.".into(),
            prefix: skydns_msg::path::PathPrefix::default(),
            ttl: 3600,
            min_ttl: 60,
            priority: 10,
            hostmaster: "h.".into(),
        }
    }

    #[test]
    fn zones_come_from_stub_dns_keys() {
        let rec = |h: &str, port| Record {
            host: h.into(),
            port,
            ..Record::default()
        };
        let snap = Snapshot::new(
            1,
            [
                (
                    "/skydns/local/cluster/dns/stub/com/example/ns1".to_string(),
                    rec("10.0.0.53", 0),
                ),
                (
                    "/skydns/local/cluster/dns/stub/com/example/ns2".to_string(),
                    rec("10.0.0.54", 5353),
                ),
                (
                    "/skydns/local/cluster/dns/stub/org/other/ns1".to_string(),
                    rec("not-an-ip", 0),
                ),
                (
                    "/skydns/local/cluster/dns/stub/local/cluster/dns/local/x".to_string(),
                    rec("10.9.9.9", 0),
                ),
            ],
        );
        let stubs = StubZones::from_snapshot(&snap, &zone());
        assert_eq!(
            stubs.servers_for("www.example.com."),
            Some(
                &[
                    "10.0.0.53:53".parse().unwrap(),
                    "10.0.0.54:5353".parse().unwrap()
                ][..]
            )
        );
        assert_eq!(
            stubs.servers_for("example.com."),
            stubs.servers_for("a.example.com.")
        );
        assert!(stubs.servers_for("wwwexample.com.").is_none());
        assert!(stubs.servers_for("x.other.org.").is_none());
        assert!(stubs.servers_for("local.dns.cluster.local.").is_none());
    }

    #[test]
    fn the_loop_marker_round_trips() {
        let mut m = Message::query();
        m.queries.push(hickory_proto::op::Query::query(
            hickory_proto::rr::Name::from_ascii("a.example.com.").unwrap(),
            hickory_proto::rr::RecordType::A,
        ));
        assert!(!has_loop_marker(&m));
        let marked = Message::from_vec(&mark(&m).unwrap()).unwrap();
        assert!(has_loop_marker(&marked));
    }
}
