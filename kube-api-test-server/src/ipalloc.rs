//! Service cluster IP allocation, as on a dual-stack cluster: IPv4 from the
//! configured service CIDR with the real allocator's observable rules, IPv6
//! from [`IPV6_SERVICE_RANGE`] (a requested IPv6 address need only be free).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Where allocated IPv6 cluster IPs come from: `fd00:10:96::/112`.
pub(crate) const IPV6_SERVICE_RANGE: (Ipv6Addr, u8) =
    (Ipv6Addr::new(0xfd00, 0x10, 0x96, 0, 0, 0, 0, 0), 112);

/// An IP family, as `spec.ipFamilies` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    /// `IPv4`.
    V4,
    /// `IPv6`.
    V6,
}

impl Family {
    /// The family of an IP address literal (None: not an IP).
    pub(crate) fn of(ip: &str) -> Option<Self> {
        match ip.parse::<IpAddr>().ok()? {
            IpAddr::V4(_) => Some(Self::V4),
            IpAddr::V6(_) => Some(Self::V6),
        }
    }

    /// Parses an `ipFamilies` entry.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        match name {
            "IPv4" => Some(Self::V4),
            "IPv6" => Some(Self::V6),
            _ => None,
        }
    }

    /// The `ipFamilies` name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::V4 => "IPv4",
            Self::V6 => "IPv6",
        }
    }

    /// The other family.
    pub(crate) fn other(self) -> Self {
        match self {
            Self::V4 => Self::V6,
            Self::V6 => Self::V4,
        }
    }
}

/// An IPv4 CIDR such as `10.0.0.0/24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Cidr {
    network: u32,
    prefix: u8,
}

impl Ipv4Cidr {
    /// `10.0.0.0/24`, the range the demo and the default config use.
    pub fn default_service_cidr() -> Self {
        Self {
            network: u32::from(Ipv4Addr::new(10, 0, 0, 0)),
            prefix: 24,
        }
    }

    fn size(self) -> u64 {
        1u64 << (32 - u32::from(self.prefix))
    }

    /// Whether `ip` is inside the range.
    pub fn contains(self, ip: Ipv4Addr) -> bool {
        let ip = u64::from(u32::from(ip));
        let net = u64::from(self.network);
        ip >= net && ip < net + self.size()
    }
}

impl FromStr for Ipv4Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: expected ADDRESS/PREFIX"))?;
        let addr: Ipv4Addr = addr.parse().map_err(|e| format!("{s:?}: {e}"))?;
        let prefix: u8 = prefix.parse().map_err(|e| format!("{s:?}: {e}"))?;
        if !(8..=30).contains(&prefix) {
            return Err(format!("{s:?}: prefix length must be between 8 and 30"));
        }
        let mask = u32::MAX << (32 - u32::from(prefix));
        Ok(Self {
            network: u32::from(addr) & mask,
            prefix,
        })
    }
}

impl std::fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.network), self.prefix)
    }
}

/// Tracks which cluster IPs are in use.
#[derive(Debug, Clone)]
pub(crate) struct IpAllocator {
    cidr: Ipv4Cidr,
    used: BTreeSet<u32>,
    used_v6: BTreeSet<u128>,
}

impl IpAllocator {
    /// A pool over `cidr` (and the IPv6 range) with nothing allocated.
    pub(crate) fn new(cidr: Ipv4Cidr) -> Self {
        Self {
            cidr,
            used: BTreeSet::new(),
            used_v6: BTreeSet::new(),
        }
    }

    /// Reserves a specific IP; the error is the real server's field message.
    pub(crate) fn reserve(&mut self, ip: &str) -> Result<(), String> {
        let taken = || {
            format!(
                "spec.clusterIPs: Invalid value: [\"{ip}\"]: failed to allocate IP {ip}: provided IP is already allocated"
            )
        };
        let addr: Ipv4Addr = match ip.parse::<IpAddr>() {
            Ok(IpAddr::V4(addr)) => addr,
            Ok(IpAddr::V6(addr)) => {
                return self
                    .used_v6
                    .insert(u128::from(addr))
                    .then_some(())
                    .ok_or_else(taken);
            }
            Err(_) => {
                return Err(format!(
                    "spec.clusterIPs: Invalid value: [\"{ip}\"]: must be a valid IP address"
                ))
            }
        };
        let n = u32::from(addr);
        let last = u64::from(self.cidr.network) + self.cidr.size() - 1;
        if !self.cidr.contains(addr) || n == self.cidr.network || u64::from(n) == last {
            return Err(format!(
                "spec.clusterIPs: Invalid value: [\"{ip}\"]: failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {}",
                self.cidr
            ));
        }
        if !self.used.insert(n) {
            return Err(taken());
        }
        Ok(())
    }

    /// Allocates the lowest free IP of `family`.
    pub(crate) fn allocate(&mut self, family: Family) -> Option<String> {
        match family {
            Family::V4 => {
                let first = self.cidr.network + 1;
                let count = u32::try_from(self.cidr.size() - 2).ok()?;
                let n = (first..first + count).find(|n| !self.used.contains(n))?;
                self.used.insert(n);
                Some(Ipv4Addr::from(n).to_string())
            }
            Family::V6 => {
                let (network, prefix) = IPV6_SERVICE_RANGE;
                let first = u128::from(network) + 1;
                let last = u128::from(network) + (1u128 << (128 - u32::from(prefix))) - 1;
                let n = (first..last).find(|n| !self.used_v6.contains(n))?;
                self.used_v6.insert(n);
                Some(Ipv6Addr::from(n).to_string())
            }
        }
    }

    /// Returns an IP to the pool (ignores anything not an allocated IP).
    pub(crate) fn release(&mut self, ip: &str) {
        match ip.parse::<IpAddr>() {
            Ok(IpAddr::V4(addr)) => {
                self.used.remove(&u32::from(addr));
            }
            Ok(IpAddr::V6(addr)) => {
                self.used_v6.remove(&u128::from(addr));
            }
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_and_reserves() {
        let mut a = IpAllocator::new("10.0.0.0/24".parse().unwrap());
        a.reserve("10.0.0.1").unwrap();
        assert!(a.reserve("10.0.0.1").is_err());
        assert!(a.reserve("10.0.1.1").is_err());
        assert!(a.reserve("10.0.0.0").is_err());
        assert_eq!(a.allocate(Family::V4).as_deref(), Some("10.0.0.2"));
        a.release("10.0.0.1");
        assert_eq!(a.allocate(Family::V4).as_deref(), Some("10.0.0.1"));
    }

    #[test]
    fn ipv6_is_allocated_from_its_range_and_any_free_one_reserved() {
        let mut a = IpAllocator::new("10.0.0.0/24".parse().unwrap());
        a.reserve("2001:db8::1").unwrap();
        // The same address spelled differently is the same address.
        assert!(a.reserve("2001:DB8:0::1").is_err());
        assert_eq!(a.allocate(Family::V6).as_deref(), Some("fd00:10:96::1"));
        a.reserve("fd00:10:96::2").unwrap();
        assert_eq!(a.allocate(Family::V6).as_deref(), Some("fd00:10:96::3"));
        a.release("fd00:10:96:0::1");
        assert_eq!(a.allocate(Family::V6).as_deref(), Some("fd00:10:96::1"));
        assert_eq!(Family::of("fd00::1"), Some(Family::V6));
        assert_eq!(Family::of("10.0.0.1"), Some(Family::V4));
        assert_eq!(Family::of("None"), None);
    }
}
