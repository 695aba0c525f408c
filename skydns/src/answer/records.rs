//! From a query name to the list of SkyDNS services it addresses: SkyDNS's
//! `Records` plus the steps every answer type shares (the etcd v2 lookup with
//! wildcards, de-duplication, the TTL rule, the default priority and the group
//! filter, `msg.Group`).

use super::Zone;
use crate::snapshot::{Leaf, Snapshot};
use skydns_msg::record::Record;
use std::collections::HashSet;
use std::sync::Arc;

/// One record as an answer sees it: the stored record, its key, its TTL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Service {
    /// The etcd key the record came from.
    pub key: Arc<str>,
    /// The record, with priority 0 replaced by the configured default.
    pub record: Record,
    /// The TTL to answer with.
    pub ttl: u32,
}

/// SkyDNS `Records(name, exact)`. `None` means the name does not exist
/// (etcd "key not found"), which the caller answers with NXDOMAIN.
pub(super) fn records(
    zone: &Zone,
    snapshot: &Snapshot,
    name: &str,
    exact: bool,
) -> Option<Vec<Service>> {
    let (path, star) = zone.prefix.path_with_wildcard(name);
    let pattern = star.then(|| zone.prefix.path(name));
    let leaves = snapshot.lookup(&path, pattern.as_deref(), exact)?;
    Some(to_services(zone, leaves))
}

fn to_services(zone: &Zone, leaves: Vec<Leaf>) -> Vec<Service> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(leaves.len());
    for leaf in &leaves {
        let r = &leaf.record;
        if !seen.insert((&*r.host, r.port, r.priority, r.weight, &*r.text)) {
            continue;
        }
        let mut record = (*leaf.record).clone();
        if record.priority == 0 {
            record.priority = i64::from(zone.priority);
        }
        let ttl = if record.ttl == 0 {
            zone.ttl
        } else {
            record.ttl
        };
        out.push(Service {
            key: leaf.key.clone(),
            record,
            ttl,
        });
    }
    out
}

/// SkyDNS `msg.Group`: when records carry groups, keep the group chosen by
/// the least-nested grouped record plus the ungrouped ones; if records at that
/// depth disagree, keep everything.
pub(super) fn group(services: Vec<Service>) -> Vec<Service> {
    let Some(first) = services.first() else {
        return services;
    };
    let slashes = |s: &Service| s.key.matches('/').count();
    // As in Go, the slash count of records after the `break` stays 0.
    let mut counts = vec![0; services.len()];
    let mut group = first.record.group.clone();
    let mut depth = slashes(first);
    for (i, s) in services.iter().enumerate() {
        counts[i] = slashes(s);
        if counts[i] < depth {
            if s.record.group.is_empty() {
                break;
            }
            depth = counts[i];
            group = s.record.group.clone();
        }
    }
    if group.is_empty() {
        return services;
    }
    let mut kept = Vec::with_capacity(services.len());
    for (s, count) in services.iter().zip(counts) {
        if s.record.group.is_empty() {
            kept.push(s.clone());
        } else if count == depth && s.record.group != group {
            return services;
        } else if s.record.group == group {
            kept.push(s.clone());
        }
    }
    kept
}

/// Removes `n` leading labels from `name`, keeping the name whole when that
/// would consume all of it (SkyDNS `targetStrip`).
pub(super) fn target_strip(name: &str, n: u16) -> String {
    if n == 0 {
        return name.to_string();
    }
    let labels: Vec<&str> = skydns_msg::path::labels(name).collect();
    if usize::from(n) >= labels.len() {
        return name.to_string();
    }
    let mut out = labels[usize::from(n)..].join(".");
    out.push('.');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(key: &str, group: &str) -> Service {
        Service {
            key: Arc::from(key),
            record: Record {
                group: group.into(),
                ..Record::default()
            },
            ttl: 1,
        }
    }

    fn keys(s: &[Service]) -> Vec<&str> {
        s.iter().map(|s| &*s.key).collect()
    }

    #[test]
    fn no_groups_keeps_everything() {
        let all = vec![svc("/a/b", ""), svc("/a/c", "")];
        assert_eq!(group(all.clone()), all);
    }

    #[test]
    fn one_group_keeps_its_members_and_ungrouped_records() {
        let all = vec![
            svc("/a/b/1", "g"),
            svc("/a/b/2", "h"),
            svc("/a/c/3/4", "g"),
            svc("/a/5", ""),
        ];
        // depth of first is 3; "/a/5" has fewer slashes and no group: stop scanning.
        // /a/b/2 has the same depth with another group: disagreement → everything.
        assert_eq!(keys(&group(all.clone())), keys(&all));
        let agree = vec![
            svc("/a/b/1", "g"),
            svc("/a/c/3/4", "h"),
            svc("/a/b/2", "g"),
            svc("/a/5", ""),
        ];
        assert_eq!(keys(&group(agree)), vec!["/a/b/1", "/a/b/2", "/a/5"]);
    }

    #[test]
    fn shallower_group_wins() {
        let all = vec![
            svc("/a/b/c/1", "deep"),
            svc("/a/b/2", "shallow"),
            svc("/a/b/c/3", "shallow"),
        ];
        assert_eq!(keys(&group(all)), vec!["/a/b/2", "/a/b/c/3"]);
    }

    #[test]
    fn target_strip_removes_leading_labels_unless_it_would_empty_the_name() {
        assert_eq!(target_strip("a.b.c.", 0), "a.b.c.");
        assert_eq!(target_strip("a.b.c.", 1), "b.c.");
        assert_eq!(target_strip("a.b.c.", 3), "a.b.c.");
    }
}
