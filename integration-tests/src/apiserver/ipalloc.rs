//! Service cluster IP allocation from the configured service CIDR.
//!
//! Mirrors the real allocator's observable rules: the network and broadcast
//! addresses are never handed out, a requested IP must lie in the range and
//! be free, and a deleted Service's IP returns to the pool.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::str::FromStr;

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
}

impl IpAllocator {
    /// A pool over `cidr` with nothing allocated.
    pub(crate) fn new(cidr: Ipv4Cidr) -> Self {
        Self {
            cidr,
            used: BTreeSet::new(),
        }
    }

    /// Reserves a specific IP; the error is the real server's field message.
    pub(crate) fn reserve(&mut self, ip: &str) -> Result<(), String> {
        let addr: Ipv4Addr = ip.parse().map_err(|_| {
            format!("spec.clusterIPs: Invalid value: [\"{ip}\"]: must be a valid IP address")
        })?;
        let n = u32::from(addr);
        let last = u64::from(self.cidr.network) + self.cidr.size() - 1;
        if !self.cidr.contains(addr) || n == self.cidr.network || u64::from(n) == last {
            return Err(format!(
                "spec.clusterIPs: Invalid value: [\"{ip}\"]: failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {}",
                self.cidr
            ));
        }
        if !self.used.insert(n) {
            return Err(format!(
                "spec.clusterIPs: Invalid value: [\"{ip}\"]: failed to allocate IP {ip}: provided IP is already allocated"
            ));
        }
        Ok(())
    }

    /// Allocates the lowest free IP.
    pub(crate) fn allocate(&mut self) -> Option<String> {
        let first = self.cidr.network + 1;
        let count = u32::try_from(self.cidr.size() - 2).ok()?;
        let n = (first..first + count).find(|n| !self.used.contains(n))?;
        self.used.insert(n);
        Some(Ipv4Addr::from(n).to_string())
    }

    /// Returns an IP to the pool (ignores anything not an allocated IP).
    pub(crate) fn release(&mut self, ip: &str) {
        if let Ok(addr) = ip.parse::<Ipv4Addr>() {
            self.used.remove(&u32::from(addr));
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
        assert_eq!(a.allocate().as_deref(), Some("10.0.0.2"));
        a.release("10.0.0.1");
        assert_eq!(a.allocate().as_deref(), Some("10.0.0.1"));
    }
}
