//! A full sync in slices: [`Index::pod_chunks`] and
//! [`Index::service_chunks`] cut the pod and service subtrees into
//! [`Scope::PodChunk`]s and [`Scope::ServiceChunk`]s of whole namespaces in
//! etcd's key order, so the writer holds one slice's desired and actual
//! records at a time; each service's PTRs go in its slice, and one
//! [`Scope::PtrSweep`] removes the owned PTRs no service holds.

use super::Index;
use crate::scope::Scope;
use std::collections::BTreeMap;
use std::net::IpAddr;

impl Index {
    /// [`Scope::AllPods`] as [`Scope::PodChunk`]s of about `pods` pods
    /// each (whole namespaces), covering every key under `pod/`.
    pub(crate) fn pod_chunks(&self, pods: usize) -> Vec<Scope> {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for (ns, _) in self.pod_ips.keys() {
            *counts.entry(format!("{ns}/")).or_default() += 1;
        }
        let mut from = None;
        chunked(in_key_order(counts), pods)
            .into_iter()
            .map(|(namespaces, to)| Scope::PodChunk {
                namespaces,
                from: std::mem::replace(&mut from, to.clone()),
                to,
            })
            .collect()
    }

    /// [`Scope::AllServices`] as [`Scope::ServiceChunk`]s of about
    /// `services` services each (whole namespaces, each service with the
    /// PTRs it owns), then, with reverse records, a [`Scope::PtrSweep`] for
    /// the owned PTRs of no service: every key under `svc/` and every owned
    /// PTR is covered.
    pub(crate) fn service_chunks(&self, services: usize) -> Vec<Scope> {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for key in self.services.keys() {
            *counts.entry(format!("{}/", key.namespace)).or_default() += 1;
        }
        // Each IP's PTRs go with the namespace of its first name.
        let mut owned: BTreeMap<&str, Vec<IpAddr>> = BTreeMap::new();
        for (ip, holders) in &self.reverse {
            if let Some(owner) = holders.first() {
                owned.entry(&*owner.namespace).or_default().push(*ip);
            }
        }
        let mut from = None;
        let mut out: Vec<Scope> = chunked(in_key_order(counts), services)
            .into_iter()
            .map(|(namespaces, to)| Scope::ServiceChunk {
                ptrs: namespaces
                    .iter()
                    .flat_map(|ns| owned.get(ns.as_str()).into_iter().flatten().copied())
                    .collect(),
                namespaces,
                from: std::mem::replace(&mut from, to.clone()),
                to,
            })
            .collect();
        if self.features.reverse {
            let mut held: Vec<String> = self
                .reverse
                .keys()
                .map(|ip| self.names.ptr_key(*ip))
                .collect();
            held.sort();
            out.push(Scope::PtrSweep { held });
        }
        out
    }
}

/// Cuts `items` (in key order, each with its weight) into runs of about
/// `size`; returns each run with the item that starts the next one.
fn chunked<T: Clone>(items: Vec<(T, usize)>, size: usize) -> Vec<(Vec<T>, Option<T>)> {
    let mut runs: Vec<(Vec<T>, Option<T>)> = Vec::new();
    let (mut run, mut weight) = (Vec::new(), 0);
    for (item, count) in items {
        if weight > 0 && weight + count > size {
            runs.push((std::mem::take(&mut run), Some(item.clone())));
            weight = 0;
        }
        run.push(item);
        weight += count;
    }
    runs.push((run, None));
    runs
}

/// Namespace directories (`<ns>/`) with their counts, as namespaces in
/// etcd's key order (`a-b/` sorts before `a/`).
fn in_key_order(counts: BTreeMap<String, usize>) -> Vec<(String, usize)> {
    counts
        .into_iter()
        .map(|(dir, n)| (dir.trim_end_matches('/').to_string(), n))
        .collect()
}
