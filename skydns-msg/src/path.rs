//! Mapping between DNS names and etcd keys: SkyDNS stores `a.b.cluster.local.`
//! under `/skydns/local/cluster/b/a`. [`PathPrefix::path`] goes one way,
//! [`PathPrefix::domain`] the other; [`is_addressable_label`] tells which
//! labels may be mapped, and [`hidden_part`] which part of a key etcd v2 hides.

/// The etcd root of all records, `skydns` by default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathPrefix(String);

impl Default for PathPrefix {
    fn default() -> Self {
        PathPrefix("skydns".to_string())
    }
}

impl PathPrefix {
    /// A prefix such as `skydns` (slashes around it are ignored).
    pub fn new(prefix: &str) -> Self {
        PathPrefix(prefix.trim_matches('/').to_string())
    }

    /// The prefix itself, without slashes.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `/skydns/`: the string every key of ours starts with.
    pub fn root(&self) -> String {
        format!("/{}/", self.0)
    }

    /// `a.b.cluster.local.` → `/skydns/local/cluster/b/a`.
    pub fn path(&self, name: &str) -> String {
        let mut out = format!("/{}", self.0);
        for label in labels(name).rev() {
            out.push('/');
            out.push_str(label);
        }
        out
    }

    /// `/skydns/local/cluster/b/a` → `a.b.cluster.local.` (the first path
    /// element, whatever it is, is dropped).
    pub fn domain(&self, key: &str) -> String {
        let mut parts: Vec<&str> = key.split('/').filter(|p| !p.is_empty()).skip(1).collect();
        parts.reverse();
        let mut out = parts.join(".");
        out.push('.');
        out
    }

    /// Like [`PathPrefix::path`], but cut just before the first label (from the
    /// root side) that is `*` or `any`; the flag says whether a cut happened.
    pub fn path_with_wildcard(&self, name: &str) -> (String, bool) {
        let mut out = format!("/{}", self.0);
        for label in labels(name).rev() {
            if label == "*" || label == "any" {
                return (out, true);
            }
            out.push('/');
            out.push_str(label);
        }
        (out, false)
    }
}

/// The labels of a dotted name, ignoring a trailing dot.
pub fn labels(name: &str) -> impl DoubleEndedIterator<Item = &str> {
    name.strip_suffix('.')
        .unwrap_or(name)
        .split('.')
        .filter(|l| !l.is_empty())
}

/// Whether a raw query label can be mapped to one etcd path segment without
/// changing which key is addressed: printable ASCII, no `/`, no `.`.
pub fn is_addressable_label(label: &[u8]) -> bool {
    !label.is_empty()
        && label
            .iter()
            .all(|&b| (0x21..=0x7e).contains(&b) && b != b'/' && b != b'.')
}

/// Whether `name` is `domain` or a name below it, compared label by label
/// (`xcluster.local.` is *not* inside `cluster.local.`). Both lowercased.
pub fn in_domain(name: &str, domain: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    let domain = domain.strip_suffix('.').unwrap_or(domain);
    if domain.is_empty() {
        return true;
    }
    name == domain
        || name
            .strip_suffix(domain)
            .is_some_and(|head| head.ends_with('.'))
}

/// Makes a name fully qualified by adding a trailing dot if missing.
pub fn fqdn(name: &str) -> String {
    if name.ends_with('.') {
        name.to_string()
    } else {
        format!("{name}.")
    }
}

/// The hidden path a query needs read, if any: `path` (an etcd path under
/// `root`, already cut at any wildcard) up to its last segment starting
/// with `_`. `None` when no segment below `root` is hidden.
pub fn hidden_part(path: &str, root: &str) -> Option<String> {
    let relative = path.strip_prefix(root)?;
    let mut end = None;
    let mut at = root.len();
    for segment in relative.split('/') {
        at += segment.len();
        if segment.starts_with('_') {
            end = Some(at);
        }
        at += 1;
    }
    end.map(|end| path[..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_reverses_labels_below_the_prefix() {
        let p = PathPrefix::default();
        assert_eq!(p.path("a.b.cluster.local."), "/skydns/local/cluster/b/a");
        assert_eq!(p.path("a.b.cluster.local"), "/skydns/local/cluster/b/a");
        assert_eq!(p.path("."), "/skydns");
        assert_eq!(PathPrefix::new("/other/").path("x.y."), "/other/y/x");
    }

    #[test]
    fn the_prefix_is_kept_without_its_slashes_and_its_root_has_them() {
        let p = PathPrefix::new("/other/");
        assert_eq!(p.as_str(), "other");
        assert_eq!(p.root(), "/other/");
        assert_eq!(PathPrefix::default().as_str(), "skydns");
        assert_eq!(PathPrefix::default().root(), "/skydns/");
    }

    #[test]
    fn a_name_is_made_fully_qualified_once() {
        assert_eq!(fqdn("cluster.local"), "cluster.local.");
        assert_eq!(fqdn("cluster.local."), "cluster.local.");
        assert_eq!(fqdn(""), ".");
    }

    #[test]
    fn domain_inverts_path() {
        let p = PathPrefix::default();
        assert_eq!(
            p.domain("/skydns/local/cluster/svc/ns/x/abc"),
            "abc.x.ns.svc.cluster.local."
        );
        let name = "c88f1059.kubernetes.default.svc.cluster.local.";
        assert_eq!(p.domain(&p.path(name)), name);
    }

    #[test]
    fn wildcard_cuts_at_the_first_star_from_the_root() {
        let p = PathPrefix::default();
        assert_eq!(
            p.path_with_wildcard("x.*.svc.cluster.local."),
            ("/skydns/local/cluster/svc".to_string(), true)
        );
        assert_eq!(
            p.path_with_wildcard("any.default.svc.cluster.local."),
            ("/skydns/local/cluster/svc/default".to_string(), true)
        );
        assert_eq!(
            p.path_with_wildcard("a.cluster.local."),
            ("/skydns/local/cluster/a".to_string(), false)
        );
    }

    #[test]
    fn domain_membership_is_label_aware() {
        assert!(in_domain("a.cluster.local.", "cluster.local."));
        assert!(in_domain("cluster.local.", "cluster.local."));
        assert!(!in_domain("xcluster.local.", "cluster.local."));
        assert!(!in_domain("local.", "cluster.local."));
    }

    #[test]
    fn labels_with_path_bytes_are_not_addressable() {
        assert!(is_addressable_label(b"kubernetes"));
        assert!(is_addressable_label(b"_tcp"));
        assert!(!is_addressable_label(b"a/b"));
        assert!(!is_addressable_label(b".."));
        assert!(!is_addressable_label(b"a b"));
        assert!(!is_addressable_label(b"\x00"));
        assert!(!is_addressable_label(b""));
    }

    #[test]
    fn the_hidden_part_ends_at_the_last_underscore_segment() {
        let root = "/skydns";
        let svc = "/skydns/local/cluster/svc/default/kubernetes";
        assert_eq!(hidden_part(svc, root), None);
        assert_eq!(
            hidden_part(&format!("{svc}/_tcp/_https"), root).as_deref(),
            Some(format!("{svc}/_tcp/_https").as_str())
        );
        assert_eq!(
            hidden_part(&format!("{svc}/_tcp/_https/c88f1059"), root).as_deref(),
            Some(format!("{svc}/_tcp/_https").as_str())
        );
        assert_eq!(
            hidden_part(&format!("{svc}/_tcp"), root).as_deref(),
            Some(format!("{svc}/_tcp").as_str())
        );
        assert_eq!(hidden_part("/other/_x", root), None);
    }
}
