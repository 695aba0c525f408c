//! What the writer reconciles and where it reads: a [`Scope`] is a part of the
//! owned key space diffed as a unit, and [`Scope::reads`] names the etcd
//! [`Read`]s that give its actual records. [`DesiredState`] is all the writer
//! asks of the index.

use crate::objects::ObjectKey;
use crate::records::{Names, Records};
use std::net::{IpAddr, SocketAddr};

/// The desired state as the writer sees it.
pub(crate) trait DesiredState {
    /// The records `scope` should hold. [`Scope::Upstreams`] holds none
    /// here: its key is merged with what etcd holds, from [`Self::upstreams`].
    fn desired(&self, scope: &Scope) -> Records;

    /// The upstreams kube-dns's ConfigMap asks for (empty: none).
    fn upstreams(&self) -> &[SocketAddr];

    /// [`Scope::AllPods`] as [`Scope::PodChunk`]s of about `pods` pods
    /// each, covering every key under `pod/`.
    fn pod_chunks(&self, pods: usize) -> Vec<Scope>;

    /// [`Scope::AllServices`] as [`Scope::ServiceChunk`]s of about
    /// `services` services each, then [`Scope::PtrChunk`]s of about as many
    /// IPs, covering every key under `svc/` and every owned PTR.
    fn service_chunks(&self, services: usize) -> Vec<Scope>;

    /// A chunk planned by one of the above, as the state stands now (the
    /// same keys; the namespaces and held PTRs of today): chunks are
    /// written one at a time with changes applied in between.
    fn current_chunk(&self, chunk: &Scope) -> Scope;
}

/// A part of the owned key space that is reconciled as a unit.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Scope {
    /// One service's directory.
    Service(ObjectKey),
    /// The PTRs of one IP: its key, or the leaves below it.
    Ptr(IpAddr),
    /// `dns-version.<domain>`.
    DnsVersion,
    /// The stub zones of kube-dns's ConfigMap: kube2sky's leaves under
    /// `stub.dns.<domain>`.
    StubZones,
    /// The upstreams of kube-dns's ConfigMap: the `nameservers` field of
    /// skydns's config key, and kube2sky's note of what it wrote there.
    Upstreams,
    /// One pod IP's directory in a namespace.
    PodDir {
        /// Namespace.
        namespace: String,
        /// Pod IP.
        ip: String,
    },
    /// Everything under `svc/` and every PTR we own.
    AllServices,
    /// Everything under `pod/`.
    AllPods,
    /// A chunk of `pod/` in key order: the namespaces' pods are desired, and
    /// every key from the directory of namespace `from` (the start of `pod/`
    /// when `None`) up to that of `to` (the end when `None`) is read, so
    /// keys of namespaces that are gone are deleted too. A full sync of
    /// pods as several of these holds one chunk in memory at a time.
    PodChunk {
        /// The namespaces with pods in this chunk, in key order.
        namespaces: Vec<String>,
        /// First namespace directory read.
        from: Option<String>,
        /// First namespace directory not read.
        to: Option<String>,
    },
    /// [`Scope::PodChunk`] for `svc/`: the services of `namespaces`.
    ServiceChunk {
        /// The namespaces with services in this chunk, in key order.
        namespaces: Vec<String>,
        /// First namespace directory read.
        from: Option<String>,
        /// First namespace directory not read.
        to: Option<String>,
    },
    /// A chunk of the PTR subtree in key order: the PTRs of the IPs whose
    /// key is from that of `from` (the start of the subtree when `None`)
    /// up to that of `to` (the end when `None`) are desired, and every
    /// owned PTR key in that range is read, so the PTRs of IPs no service
    /// holds are deleted. The bounds are IPs' keys, so an IP's key and the
    /// leaves below it (an IP with several names) are in one chunk.
    PtrChunk {
        /// The IP whose key is the first read.
        from: Option<IpAddr>,
        /// The IP whose key is the first not read.
        to: Option<IpAddr>,
    },
}

/// Where a scope's actual records live in etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// Every key with this prefix.
    Prefix(String),
    /// Every PTR key under this prefix whose value points into our domain.
    OwnedPtrs(String),
    /// The PTRs of one IP: this key and the keys below it, if their
    /// values point into our domain.
    OwnedPtr(String),
    /// This key alone.
    Key(String),
    /// Every key from `from` (inclusive) to `to` (exclusive): etcd v3 only.
    Range {
        /// First key.
        from: String,
        /// End key, not included.
        to: String,
    },
    /// The keys from `from` (inclusive) to `to` (exclusive) that point
    /// into our domain (PTRs): etcd v3 only.
    OwnedRange {
        /// First key.
        from: String,
        /// End key, not included.
        to: String,
    },
}

impl Read {
    /// The keys this read covers, from the first (included) to the end (not
    /// included; `None`: every key after the first).
    fn keys(&self) -> (&[u8], Option<Vec<u8>>) {
        let end = |prefix: &[u8]| Some(etcd_access::prefix_end(prefix)).filter(|e| e != &[0]);
        match self {
            Read::Prefix(p) | Read::OwnedPtrs(p) => (p.as_bytes(), end(p.as_bytes())),
            // The key, and the leaves below it.
            Read::OwnedPtr(key) => (key.as_bytes(), end(format!("{key}/").as_bytes())),
            Read::Key(key) => (key.as_bytes(), Some([key.as_bytes(), &[0]].concat())),
            Read::Range { from, to } | Read::OwnedRange { from, to } => {
                (from.as_bytes(), Some(to.as_bytes().to_vec()))
            }
        }
    }

    /// Whether some key could be covered by both reads (a scope writes only
    /// keys its reads cover, so scopes whose reads do not overlap can be
    /// written in any order).
    pub(crate) fn overlaps(&self, other: &Read) -> bool {
        let ((a, a_end), (b, b_end)) = (self.keys(), other.keys());
        a_end.is_none_or(|end| b < end.as_slice()) && b_end.is_none_or(|end| a < end.as_slice())
    }
}

impl Scope {
    /// The etcd reads that give this scope's actual records.
    pub(crate) fn reads(&self, names: &Names, reverse: bool) -> Vec<Read> {
        match self {
            Scope::Service(k) => vec![Read::Prefix(names.service_dir(&k.namespace, &k.name))],
            Scope::Ptr(ip) => vec![Read::OwnedPtr(names.ptr_key(*ip))],
            Scope::DnsVersion => vec![Read::Key(names.dns_version_key())],
            Scope::StubZones => vec![Read::Prefix(names.stub_root())],
            Scope::Upstreams => vec![
                Read::Key(names.config_key()),
                Read::Key(names.upstreams_note_key()),
            ],
            Scope::PodDir { namespace, ip } => vec![Read::Prefix(names.pod_dir(namespace, ip))],
            Scope::AllServices if reverse => vec![
                Read::Prefix(names.svc_root()),
                Read::OwnedPtrs(names.ptr_root()),
            ],
            Scope::AllServices => vec![Read::Prefix(names.svc_root())],
            Scope::AllPods => vec![Read::Prefix(names.pod_root())],
            Scope::PodChunk { from, to, .. } => {
                vec![namespace_range(&names.pod_root(), from, to)]
            }
            Scope::ServiceChunk { from, to, .. } => {
                vec![namespace_range(&names.svc_root(), from, to)]
            }
            Scope::PtrChunk { from, to } => {
                let root = names.ptr_root();
                vec![Read::OwnedRange {
                    to: to.map_or_else(|| end_of(&root), |ip| names.ptr_key(ip)),
                    from: from.map_or(root, |ip| names.ptr_key(ip)),
                }]
            }
        }
    }

    /// Whether this is one of the scopes of kube-dns's ConfigMap.
    pub(crate) fn is_kube_dns_config(&self) -> bool {
        matches!(self, Scope::StubZones | Scope::Upstreams)
    }

    /// A short description for logs and errors.
    pub(crate) fn describe(&self, names: &Names) -> String {
        match self.reads(names, true).first() {
            Some(Read::Prefix(p) | Read::OwnedPtrs(p) | Read::OwnedPtr(p) | Read::Key(p)) => {
                p.clone()
            }
            Some(Read::Range { from, to } | Read::OwnedRange { from, to }) => {
                format!("{from}..{to}")
            }
            None => format!("{self:?}"),
        }
    }
}

/// The keys of the namespace directories `from` to `to` (exclusive) under
/// `root`; the whole of `root` at either end when `None`.
fn namespace_range(root: &str, from: &Option<String>, to: &Option<String>) -> Read {
    let dir = |ns: &String| format!("{root}{ns}/");
    Read::Range {
        from: from.as_ref().map_or_else(|| root.to_string(), dir),
        to: to.as_ref().map_or_else(|| end_of(root), dir),
    }
}

/// The first key after every key under `root` (which ends in `/`).
fn end_of(root: &str) -> String {
    format!("{}0", root.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        Names::new("cluster.local.")
    }

    fn overlap(a: &Scope, b: &Scope) -> bool {
        let n = names();
        let (a, b) = (a.reads(&n, true), b.reads(&n, true));
        let any = a.iter().any(|x| b.iter().any(|y| x.overlaps(y)));
        let back = b.iter().any(|y| a.iter().any(|x| y.overlaps(x)));
        assert_eq!(any, back, "overlap is symmetric");
        any
    }

    fn pod(namespace: &str, ip: &str) -> Scope {
        Scope::PodDir {
            namespace: namespace.into(),
            ip: ip.parse().expect("ip"),
        }
    }

    fn service(namespace: &str, name: &str) -> Scope {
        Scope::Service(ObjectKey {
            namespace: namespace.into(),
            name: name.into(),
        })
    }

    #[test]
    fn a_chunk_of_namespaces_overlaps_the_objects_in_them_only() {
        let pods = Scope::PodChunk {
            namespaces: vec!["b".into()],
            from: Some("b".into()),
            to: Some("d".into()),
        };
        assert!(overlap(&pods, &pod("b", "10.0.0.1")));
        assert!(overlap(&pods, &pod("c", "10.0.0.1")));
        assert!(!overlap(&pods, &pod("a", "10.0.0.1")));
        assert!(!overlap(&pods, &pod("d", "10.0.0.1")));
        // In key order "bx/" is after "b/", and "b-x/" before it.
        assert!(overlap(&pods, &pod("bx", "10.0.0.1")));
        assert!(!overlap(&pods, &pod("b-x", "10.0.0.1")));
        assert!(!overlap(&pods, &service("b", "web")));
        let services = Scope::ServiceChunk {
            namespaces: vec![],
            from: None,
            to: Some("m".into()),
        };
        assert!(overlap(&services, &service("a", "web")));
        assert!(!overlap(&services, &service("m", "web")));
        assert!(!overlap(&services, &pod("a", "10.0.0.1")));
        assert!(!overlap(
            &services,
            &Scope::Ptr("10.0.0.1".parse().expect("ip"))
        ));
        let last = Scope::ServiceChunk {
            namespaces: vec![],
            from: Some("m".into()),
            to: None,
        };
        assert!(overlap(&last, &service("zzz", "web")));
        assert!(!overlap(&last, &service("a", "web")));
    }

    #[test]
    fn a_chunk_of_ptrs_overlaps_the_ips_in_its_range_only() {
        let ip = |s: &str| -> IpAddr { s.parse().expect("ip") };
        let ptrs = Scope::PtrChunk {
            from: Some(ip("10.0.0.5")),
            to: Some(ip("10.0.0.9")),
        };
        assert!(overlap(&ptrs, &Scope::Ptr(ip("10.0.0.5"))));
        assert!(overlap(&ptrs, &Scope::Ptr(ip("10.0.0.7"))));
        assert!(!overlap(&ptrs, &Scope::Ptr(ip("10.0.0.9"))));
        assert!(!overlap(&ptrs, &Scope::Ptr(ip("10.0.0.4"))));
        assert!(!overlap(&ptrs, &service("default", "web")));
        // 10.0.0.4's PTR and the keys below it, not 10.0.0.40's.
        let four = Scope::Ptr(ip("10.0.0.4"));
        assert!(!overlap(&four, &Scope::Ptr(ip("10.0.0.40"))));
        assert!(overlap(&four, &Scope::Ptr(ip("10.0.0.4"))));
    }

    #[test]
    fn whole_subtrees_and_single_keys() {
        assert!(overlap(&Scope::AllPods, &pod("x", "10.1.1.1")));
        assert!(!overlap(&Scope::AllPods, &service("x", "y")));
        assert!(overlap(
            &Scope::AllServices,
            &Scope::Ptr("10.0.0.1".parse().expect("ip"))
        ));
        assert!(!overlap(&Scope::DnsVersion, &Scope::AllServices));
        assert!(overlap(&Scope::DnsVersion, &Scope::DnsVersion));
        assert!(!overlap(&Scope::Upstreams, &Scope::AllPods));
    }
}
