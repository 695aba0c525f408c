//! Which transaction unit an etcd key belongs to: the set of keys the
//! writer never splits across etcd transactions, so that a service (or a
//! pod IP) is always complete or absent in etcd. [`Units`] computes the
//! roots it compares against once, because a full sync asks for the unit of
//! every key it writes (300,000 at 50k services and 150k pods).

use super::Names;
use skydns_msg::record::Record;

/// The unit of any key under one [`Names`]: see [`Units::of`].
pub(crate) struct Units<'a> {
    names: &'a Names,
    /// `/skydns/local/cluster/svc/` and `/skydns/local/cluster/pod/`.
    dir_roots: [String; 2],
    /// `/skydns/arpa/`.
    ptr_root: String,
    /// `.svc.cluster.local.`: the end of every service name a PTR may hold.
    service_suffix: String,
}

impl Names {
    /// The units of keys under these names ([`Units::of`]).
    pub(crate) fn units(&self) -> Units<'_> {
        Units {
            names: self,
            dir_roots: [self.svc_root(), self.pod_root()],
            ptr_root: self.ptr_root(),
            service_suffix: format!(".svc.{}", self.domain()),
        }
    }

    /// The unit of one key ([`Units::of`]); a caller asking for many keys
    /// builds [`Names::units`] once.
    #[cfg(test)]
    pub(crate) fn unit_of(&self, key: &str, value: Option<&str>) -> String {
        self.units().of(key, value)
    }
}

impl Units<'_> {
    /// The unit `key` belongs to: the directory of its service
    /// (`.../svc/<ns>/<name>/`) or pod IP (`.../pod/<ns>/<ip>/`); for a PTR
    /// key the directory of the service its `value` names, so a PTR is
    /// written with its service. Any other key is its own unit.
    pub(crate) fn of(&self, key: &str, value: Option<&str>) -> String {
        for root in &self.dir_roots {
            if let Some(rest) = key.strip_prefix(root.as_str()) {
                let mut parts = rest.splitn(3, '/');
                if let (Some(a), Some(b), Some(_)) = (parts.next(), parts.next(), parts.next()) {
                    // `<root><a>/<b>/`, a prefix of the key itself.
                    return key[..root.len() + a.len() + b.len() + 2].to_string();
                }
            }
        }
        if key.starts_with(&self.ptr_root) {
            // `<name>.<ns>.svc.<domain>` or `<hostname>.<name>.<ns>.svc.<domain>`.
            let service = value
                .and_then(|v| Record::from_json(v.as_bytes()).ok())
                .and_then(|r| {
                    let (rest, namespace) = r
                        .host
                        .strip_suffix(&self.service_suffix)?
                        .rsplit_once('.')?;
                    let name = rest.rsplit('.').next()?;
                    Some(self.names.service_dir(namespace, name))
                });
            if let Some(dir) = service {
                return dir;
            }
        }
        key.to_string()
    }
}
