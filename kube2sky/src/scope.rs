//! What the writer reconciles and where it reads: a [`Scope`] is a part of
//! the owned key space diffed as a unit (one service, one PTR, one pod
//! directory, a whole subtree or a slice of one), and [`Scope::reads`] names
//! the etcd [`Read`]s that give its actual records.
//!
//! [`DesiredState`] is all the writer asks of the index: the records a
//! scope should hold, and a full sync cut into slices. The index answers it;
//! the writer sees no more of the index than that.

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

    /// A slice planned by one of the above, as the state stands now (the
    /// same keys; the namespaces and held PTRs of today): slices are
    /// written one at a time with changes applied in between.
    fn current_slice(&self, slice: &Scope) -> Scope;
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
    /// A slice of `pod/` in key order: the namespaces' pods are desired, and
    /// every key from the directory of namespace `from` (the start of `pod/`
    /// when `None`) up to that of `to` (the end when `None`) is read, so
    /// keys of namespaces that are gone are deleted too. A full sync of
    /// pods as several of these holds one slice in memory at a time.
    PodChunk {
        /// The namespaces with pods in this slice, in key order.
        namespaces: Vec<String>,
        /// First namespace directory read.
        from: Option<String>,
        /// First namespace directory not read.
        to: Option<String>,
    },
    /// [`Scope::PodChunk`] for `svc/`: the services of `namespaces`.
    ServiceChunk {
        /// The namespaces with services in this slice, in key order.
        namespaces: Vec<String>,
        /// First namespace directory read.
        from: Option<String>,
        /// First namespace directory not read.
        to: Option<String>,
    },
    /// A slice of the PTR subtree in key order: the PTRs of the IPs whose
    /// key is from that of `from` (the start of the subtree when `None`)
    /// up to that of `to` (the end when `None`) are desired, and every
    /// owned PTR key in that range is read, so the PTRs of IPs no service
    /// holds are deleted. The bounds are IPs' keys, so an IP's key and the
    /// leaves below it (an IP with several names) are in one slice.
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
