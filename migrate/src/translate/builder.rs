//! What a translation collects while it walks the Corefile: each binary's
//! flags (a flag set twice to different values leaves the second line
//! out), the kube-dns ConfigMap's stub domains and upstreams, the etcd
//! config key, and the lines left out and notes; [`Ctx`] is one
//! directive's view of it.

use super::{Block, Cluster, LeftOut};
use crate::corefile::{Directive, Pos};
use std::collections::BTreeMap;

/// skydns's flags in the order they are printed (its `--help` order).
const SKYDNS_ORDER: &[&str] = &[
    "addr",
    "domain",
    "no-rec",
    "nameservers",
    "ns-policy",
    "ns-transport",
    "ns-fail-threshold",
    "ns-probe-interval",
    "ns-probe-name",
    "max-pending-forwards",
    "rcache",
    "rcache-ttl",
    "rcache-stale",
    "rcache-stale-timeout",
    "rcache-prefetch",
    "rcache-prefetch-percent",
    "stubzones",
    "pods",
    "autopath",
    "round-robin",
    "loop",
    "dnssec",
    "scache",
    "log-queries",
    "tcp-idle-timeout",
    "tcp-read-timeout",
    "tcp-write-timeout",
    "lameduck",
    "metrics-addr",
];

/// kube2sky's flags in the order they are printed.
const KUBE2SKY_ORDER: &[&str] = &[
    "domain",
    "ttl",
    "reverse",
    "kube-master-url",
    "kubecfg-file",
    "initial-sync-timeout",
    "config-map",
];

/// A flag's value and the line that set it (none: a default of CoreDNS's).
#[derive(Clone, Debug)]
struct Flag {
    value: String,
    pos: Option<Pos>,
}

/// Which binary a flag belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bin {
    Skydns,
    Kube2sky,
}

#[derive(Debug, Default)]
pub(crate) struct Builder {
    skydns: BTreeMap<&'static str, Flag>,
    kube2sky: BTreeMap<&'static str, Flag>,
    /// Stub domain → servers (`IP` or `IP:port`), kube-dns's ConfigMap format.
    pub(crate) stub_domains: BTreeMap<String, Vec<String>>,
    /// Custom upstreams (`IP:port`), when the root zone forwards to addresses.
    pub(crate) upstreams: Option<Vec<std::net::SocketAddr>>,
    pub(crate) config_key: serde_json::Map<String, serde_json::Value>,
    pub(crate) left_out: Vec<LeftOut>,
    pub(crate) notes: Vec<String>,
    pub(crate) facts: Facts,
}

/// What the walk saw that the defaults depend on.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    /// A `kubernetes` plugin was translated.
    pub(crate) kubernetes: bool,
    /// The main block forwards the root zone.
    pub(crate) root_forward: bool,
    /// The main block has a `cache`.
    pub(crate) cache: bool,
    /// `bind`'s address.
    pub(crate) bind: Option<std::net::IpAddr>,
    /// `health`'s and `ready`'s addresses as written (`:8080`), and where.
    pub(crate) health: Option<(String, Pos)>,
    pub(crate) ready: Option<(String, Pos)>,
}

impl Builder {
    /// Sets `name`, or says which line set it to something else.
    pub(crate) fn set(
        &mut self,
        bin: Bin,
        name: &'static str,
        value: &str,
        pos: Option<&Pos>,
    ) -> Result<(), String> {
        let flags = match bin {
            Bin::Skydns => &mut self.skydns,
            Bin::Kube2sky => &mut self.kube2sky,
        };
        match flags.get(name) {
            Some(flag) if flag.value != value => Err(format!(
                "it would set {}{name}={value}, but {} set {}{name}={}",
                bin.dashes(),
                flag.pos
                    .as_ref()
                    .map_or("a default".to_owned(), |p| format!("line {}", p.line)),
                bin.dashes(),
                flag.value
            )),
            Some(_) => Ok(()),
            None => {
                let flag = Flag {
                    value: value.to_owned(),
                    pos: pos.cloned(),
                };
                flags.insert(name, flag);
                Ok(())
            }
        }
    }

    /// Sets `name` unless something set it already.
    pub(crate) fn fallback(&mut self, bin: Bin, name: &'static str, value: &str) {
        if !self.has(bin, name) {
            let _ = self.set(bin, name, value, None);
        }
    }

    pub(crate) fn has(&self, bin: Bin, name: &str) -> bool {
        match bin {
            Bin::Skydns => self.skydns.contains_key(name),
            Bin::Kube2sky => self.kube2sky.contains_key(name),
        }
    }

    pub(crate) fn get(&self, bin: Bin, name: &str) -> Option<&str> {
        let flags = match bin {
            Bin::Skydns => &self.skydns,
            Bin::Kube2sky => &self.kube2sky,
        };
        flags.get(name).map(|f| f.value.as_str())
    }

    /// The args, `-flag=value` (skydns) or `--flag=value` (kube2sky), in
    /// the printing order.
    pub(crate) fn args(&self, bin: Bin) -> Vec<String> {
        let (flags, order) = match bin {
            Bin::Skydns => (&self.skydns, SKYDNS_ORDER),
            Bin::Kube2sky => (&self.kube2sky, KUBE2SKY_ORDER),
        };
        let rank = |name: &str| order.iter().position(|o| *o == name).unwrap_or(order.len());
        let mut names: Vec<&&str> = flags.keys().collect();
        names.sort_by_key(|n| rank(n));
        (names.into_iter())
            .map(|n| format!("{}{n}={}", bin.dashes(), flags[*n].value))
            .collect()
    }
}

impl Bin {
    fn dashes(self) -> &'static str {
        match self {
            Bin::Skydns => "-",
            Bin::Kube2sky => "--",
        }
    }
}

/// One directive's translation: its block, the cluster, and the builder.
pub(crate) struct Ctx<'a> {
    pub(crate) b: &'a mut Builder,
    pub(crate) block: &'a Block,
    pub(crate) cluster: &'a Cluster,
}

impl Ctx<'_> {
    /// `d` (a directive or one of its options) cannot be carried over.
    pub(crate) fn leave(&mut self, d: &Directive, reason: &str) {
        self.b.left_out.push(LeftOut {
            block: self.block.name.clone(),
            file: d.pos.file.clone(),
            line: d.pos.line,
            text: d.text.clone(),
            reason: reason.to_owned(),
        });
    }

    /// A note about `d`, prefixed with where it is.
    pub(crate) fn note(&mut self, d: &Directive, text: &str) {
        let note = format!("{}:{} {}: {text}", d.pos.file, d.pos.line, d.name);
        if !self.b.notes.contains(&note) {
            self.b.notes.push(note);
        }
    }

    /// Sets a flag for `d`; on a conflict `d` is left out and this is false.
    pub(crate) fn set(&mut self, d: &Directive, bin: Bin, name: &'static str, value: &str) -> bool {
        match self.b.set(bin, name, value, Some(&d.pos)) {
            Ok(()) => true,
            Err(why) => {
                self.leave(d, &format!("conflicts with another line: {why}"));
                false
            }
        }
    }

    pub(crate) fn skydns(&mut self, d: &Directive, name: &'static str, value: &str) -> bool {
        self.set(d, Bin::Skydns, name, value)
    }

    pub(crate) fn kube2sky(&mut self, d: &Directive, name: &'static str, value: &str) -> bool {
        self.set(d, Bin::Kube2sky, name, value)
    }

    /// Each option of `d`'s block that `known` does not take is left out.
    pub(crate) fn options(
        &mut self,
        d: &Directive,
        mut known: impl FnMut(&mut Self, &Directive) -> bool,
    ) {
        for option in d.block.iter().flatten() {
            if !known(self, option) {
                let reason = format!(
                    "{} has no option {:?} that kube-dns-migrate knows",
                    d.name, option.name
                );
                self.leave(option, &reason);
            }
        }
    }
}

/// `text` when it is a Go duration (`5s`, `1m30s`, `500ms`), as the
/// flags take it; `None` when it is not one.
pub(crate) fn duration(text: &str) -> Option<String> {
    gocompat::duration::parse(text)
        .ok()
        .map(|_| text.to_owned())
}
