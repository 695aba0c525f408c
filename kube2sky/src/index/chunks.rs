//! A full sync in chunks: [`Index::pod_chunks`] and [`Index::service_chunks`]
//! cut the pod and service subtrees into chunks of whole namespaces, and the
//! PTR subtree into chunks of IPs, in etcd's key order. A chunk keeps its key
//! range; what it desires is read when it is written
//! ([`Index::current_chunk`]).

use super::Index;
use crate::objects::ObjectKey;
use crate::scope::Scope;
use std::collections::BTreeMap;

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
    /// `services` services each (whole namespaces), then, with reverse
    /// records, [`Scope::PtrChunk`]s of about as many IPs: every key under
    /// `svc/` and every owned PTR is covered.
    pub(crate) fn service_chunks(&self, services: usize) -> Vec<Scope> {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for key in self.services.keys() {
            *counts.entry(format!("{}/", key.namespace)).or_default() += 1;
        }
        let mut from = None;
        let mut out: Vec<Scope> = chunked(in_key_order(counts), services)
            .into_iter()
            .map(|(namespaces, to)| Scope::ServiceChunk {
                namespaces,
                from: std::mem::replace(&mut from, to.clone()),
                to,
            })
            .collect();
        if self.features.reverse {
            let mut from = None;
            let weighted = self.reverse.ips_in_key_order().map(|ip| (ip, 1)).collect();
            out.extend(
                chunked(weighted, services)
                    .into_iter()
                    .map(|(_, to)| Scope::PtrChunk {
                        from: std::mem::replace(&mut from, to),
                        to,
                    }),
            );
        }
        out
    }

    /// `chunk`, planned earlier, as the index stands now: the same key
    /// range, with the namespaces in it today (O(namespaces)). A
    /// [`Scope::PtrChunk`] needs nothing: its desired records are found
    /// by key range when it is written.
    pub(crate) fn current_chunk(&self, chunk: &Scope) -> Scope {
        match chunk {
            Scope::PodChunk { from, to, .. } => Scope::PodChunk {
                namespaces: in_range(self.pod_namespaces(), from, to),
                from: from.clone(),
                to: to.clone(),
            },
            Scope::ServiceChunk { from, to, .. } => Scope::ServiceChunk {
                namespaces: in_range(self.service_namespaces(), from, to),
                from: from.clone(),
                to: to.clone(),
            },
            other => other.clone(),
        }
    }

    /// The namespaces with pods, in name order.
    fn pod_namespaces(&self) -> Vec<String> {
        distinct(
            &self.pod_ips,
            |(ns, _)| ns,
            |ns| (format!("{ns}\0"), String::new()),
        )
    }

    /// The namespaces with services, in name order.
    fn service_namespaces(&self) -> Vec<String> {
        distinct(
            &self.services,
            |k| &k.namespace,
            |ns| ObjectKey {
                namespace: format!("{ns}\0"),
                name: String::new(),
            },
        )
    }
}

/// The distinct namespaces of `map`'s keys (ordered by namespace first;
/// `past(ns)` is a key after every key of `ns` and before the next
/// namespace's): one B-tree seek per namespace, not a walk over every key.
fn distinct<K: Ord, V>(
    map: &BTreeMap<K, V>,
    namespace: impl Fn(&K) -> &String,
    past: impl Fn(&str) -> K,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut next = map.keys().next();
    while let Some(key) = next {
        let ns = namespace(key).clone();
        next = map.range(past(&ns)..).next().map(|(k, _)| k);
        out.push(ns);
    }
    out
}

/// The namespaces whose directory (`<ns>/`) is in `[from/, to/)`, in
/// etcd's key order (a `None` end is open).
fn in_range(namespaces: Vec<String>, from: &Option<String>, to: &Option<String>) -> Vec<String> {
    let dir = |ns: &str| format!("{ns}/");
    let mut dirs: Vec<String> = namespaces
        .iter()
        .map(|ns| dir(ns))
        .filter(|d| from.as_deref().is_none_or(|f| dir(f) <= *d))
        .filter(|d| to.as_deref().is_none_or(|t| *d < dir(t)))
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|d| d.trim_end_matches('/').to_string())
        .collect()
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
