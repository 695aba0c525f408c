//! The index's reverse map: the names each IP's PTR points at, and the same
//! IPs in the order of their PTR keys in etcd, so that a full sync's PTR
//! chunk ([`crate::scope::Scope::PtrChunk`]) finds its IPs by range in
//! O(log n + its IPs) instead of a scan of every IP per chunk (51 chunks of
//! 50,000 IPs at 50k services).

use crate::records::{PtrName, PtrOrder};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Every IP with a PTR name, by address and by PTR key.
#[derive(Debug, Default)]
pub(super) struct ReverseIndex {
    /// The names each IP's PTR points at, sorted (without the
    /// specification's records the first alone gets the PTR). (A sorted
    /// Vec, not a set: almost every IP has one name, and a one-element
    /// B-tree set costs a whole node.)
    names: BTreeMap<IpAddr, Vec<PtrName>>,
    /// The same IPs, in PTR key order.
    in_key_order: BTreeMap<PtrOrder, IpAddr>,
}

impl ReverseIndex {
    /// Adds `name` to `ip`'s PTR names (once).
    pub(super) fn hold(&mut self, ip: IpAddr, name: PtrName) {
        let holders = self.names.entry(ip).or_insert_with(|| {
            // Almost every IP has one name: room for one, not the four of
            // a first push.
            Vec::with_capacity(1)
        });
        if holders.is_empty() {
            self.in_key_order.insert(PtrOrder::of(ip), ip);
        }
        if let Err(at) = holders.binary_search(&name) {
            holders.insert(at, name);
        }
    }

    /// Removes `name` from `ip`'s PTR names, and `ip` with its last name.
    pub(super) fn release(&mut self, ip: IpAddr, name: &PtrName) {
        if let Some(holders) = self.names.get_mut(&ip) {
            holders.retain(|n| n != name);
            if holders.is_empty() {
                self.names.remove(&ip);
                self.in_key_order.remove(&PtrOrder::of(ip));
            }
        }
    }

    /// Forgets every IP.
    pub(super) fn clear(&mut self) {
        self.names.clear();
        self.in_key_order.clear();
    }

    /// `ip`'s PTR names, if it has any.
    pub(super) fn get(&self, ip: &IpAddr) -> Option<&Vec<PtrName>> {
        self.names.get(ip)
    }

    /// Every IP with its names, in address order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&IpAddr, &Vec<PtrName>)> {
        self.names.iter()
    }

    /// Every IP with a name, in address order.
    pub(super) fn ips(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.names.keys().copied()
    }

    /// Every IP with a name, in PTR key order.
    pub(super) fn ips_in_key_order(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.in_key_order.values().copied()
    }

    /// The IPs whose PTR key is from that of `from` up to (not including)
    /// that of `to` (an open end when `None`), in key order.
    pub(super) fn in_key_range(&self, from: Option<IpAddr>, to: Option<IpAddr>) -> Vec<IpAddr> {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let from = from.map_or(Unbounded, |ip| Included(PtrOrder::of(ip)));
        let to = to.map_or(Unbounded, |ip| Excluded(PtrOrder::of(ip)));
        self.in_key_order
            .range((from, to))
            .map(|(_, ip)| *ip)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> PtrName {
        PtrName {
            namespace: "ns".into(),
            name: n.into(),
            hostname: None,
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn ips_come_in_ptr_key_order_and_leave_with_their_last_name() {
        let mut r = ReverseIndex::default();
        for (at, n) in [
            ("10.0.0.5", "a"),
            ("10.0.0.50", "b"),
            ("10.0.0.6", "c"),
            ("fd00::1", "d"),
        ] {
            r.hold(ip(at), name(n));
        }
        r.hold(ip("10.0.0.50"), name("e"));
        // `.../5`, `.../50`, `.../6` in etcd's byte order; ip6 after in-addr.
        let order: Vec<IpAddr> = r.ips_in_key_order().collect();
        assert_eq!(
            order,
            [
                ip("10.0.0.5"),
                ip("10.0.0.50"),
                ip("10.0.0.6"),
                ip("fd00::1")
            ]
        );
        assert_eq!(
            r.in_key_range(Some(ip("10.0.0.50")), Some(ip("fd00::1"))),
            [ip("10.0.0.50"), ip("10.0.0.6")]
        );
        assert_eq!(
            r.in_key_range(Some(ip("10.0.0.6")), None),
            [ip("10.0.0.6"), ip("fd00::1")]
        );
        // One of two names goes: the IP stays; the last goes: it leaves both maps.
        r.release(ip("10.0.0.50"), &name("b"));
        assert_eq!(r.get(&ip("10.0.0.50")), Some(&vec![name("e")]));
        r.release(ip("10.0.0.50"), &name("e"));
        assert_eq!(r.get(&ip("10.0.0.50")), None);
        assert_eq!(
            r.in_key_range(None, None),
            [ip("10.0.0.5"), ip("10.0.0.6"), ip("fd00::1")]
        );
        r.clear();
        assert_eq!(r.ips().count() + r.ips_in_key_order().count(), 0);
    }
}
