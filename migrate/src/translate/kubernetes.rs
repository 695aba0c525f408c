//! The `kubernetes` plugin: its zones become the cluster domain (kube2sky
//! `--domain`, skydns `-domain`) and PTRs (`--reverse`); `pods` becomes
//! skydns `-pods`, `ttl` kube2sky `--ttl` and the negative answers' TTL
//! (the config key's `min_ttl`), `endpoint` and `kubeconfig` how kube2sky
//! reaches the API server.

use super::builder::{duration, Bin, Builder, Ctx};
use super::{zones, Cluster};
use crate::corefile::Directive;

/// CoreDNS's TTL without a `ttl` option.
const COREDNS_TTL: u32 = 5;

/// CoreDNS caps the TTL of the SOA in negative answers at this.
const SOA_TTL_CAP: u32 = 300;

pub(super) fn translate(ctx: &mut Ctx, d: &Directive) {
    if ctx.cluster.pos.as_ref() != Some(&d.pos) {
        ctx.leave(
            d,
            "a second kubernetes plugin: kube2sky writes one cluster domain",
        );
        return;
    }
    ctx.b.facts.kubernetes = true;
    let cluster = ctx.cluster.clone();
    for arg in &d.args {
        match zones::zone(arg) {
            None => ctx.leave(d, &format!("{arg:?} is not a zone")),
            Some(z) if zones::is_reverse(&z) || Some(&z) == cluster.domain.as_ref() => {}
            Some(z) => ctx.leave(
                d,
                &format!(
                    "zone {z}: kube2sky writes the records of one cluster domain ({})",
                    cluster.domain.as_deref().unwrap_or("none")
                ),
            ),
        }
    }
    let reverse: Vec<&String> = cluster
        .zones
        .iter()
        .filter(|z| zones::is_reverse(z))
        .collect();
    ctx.kube2sky(
        d,
        "reverse",
        if reverse.is_empty() { "false" } else { "true" },
    );
    if let Some(narrow) = reverse
        .iter()
        .find(|z| !["in-addr.arpa", "ip6.arpa"].contains(&z.as_str()))
    {
        ctx.note(
            d,
            &format!("kube2sky writes the PTRs of every cluster IP, not only those under {narrow}"),
        );
    }
    ctx.options(d, option);
}

/// One option of the plugin's block; false when it is not one.
fn option(ctx: &mut Ctx, o: &Directive) -> bool {
    let arg = o.args.first().map(String::as_str);
    match o.name.as_str() {
        "pods" => match arg {
            Some(mode @ ("insecure" | "verified" | "disabled")) if o.args.len() == 1 => {
                ctx.skydns(o, "pods", mode);
            }
            _ => ctx.leave(o, "pods takes one of insecure, verified, disabled"),
        },
        "ttl" => ttl(ctx, o),
        "fallthrough" => fallthrough(ctx, o),
        "endpoint" => match o.args.as_slice() {
            [url] => {
                ctx.kube2sky(o, "kube-master-url", url);
            }
            _ => ctx.leave(
                o,
                "kube2sky talks to one API server URL (--kube-master-url)",
            ),
        },
        "kubeconfig" => kubeconfig(ctx, o),
        "startup_timeout" => match arg.and_then(duration) {
            Some(d) if o.args.len() == 1 => {
                if ctx.kube2sky(o, "initial-sync-timeout", &d) {
                    ctx.note(
                        o,
                        "kube2sky's /readiness (so the pod's readiness) waits at most this long \
                         for its first complete write of the records; skydns answers meanwhile",
                    );
                }
            }
            _ => ctx.leave(o, "startup_timeout takes one duration"),
        },
        _ => match unsupported(&o.name) {
            Some(why) => ctx.leave(o, why),
            None => return false,
        },
    }
    true
}

fn ttl(ctx: &mut Ctx, o: &Directive) {
    match o.args.first().map(|a| a.parse::<u32>()) {
        Some(Ok(0)) if o.args.len() == 1 => ctx.leave(
            o,
            "kube2sky refuses --ttl=0 (SkyDNS reads a TTL of 0 as its own default, 3600 s), so \
             records cannot be made uncacheable",
        ),
        Some(Ok(n @ 1..=3600)) if o.args.len() == 1 => {
            ctx.kube2sky(o, "ttl", &n.to_string());
        }
        _ => ctx.leave(o, "ttl takes one number of seconds from 0 to 3600"),
    }
}

fn fallthrough(ctx: &mut Ctx, o: &Directive) {
    let zones: Vec<Option<String>> = o.args.iter().map(|a| zones::zone(a)).collect();
    let reverse_only = !zones.is_empty()
        && zones
            .iter()
            .all(|z| z.as_deref().is_some_and(zones::is_reverse));
    if !reverse_only {
        ctx.note(
            o,
            "names of the cluster domain that have no record get NXDOMAIN from skydns (CoreDNS \
             passed them on to the next plugin); reverse names without a PTR are forwarded",
        );
    }
}

fn kubeconfig(ctx: &mut Ctx, o: &Directive) {
    match o.args.as_slice() {
        [path] => {
            ctx.kube2sky(o, "kubecfg-file", path);
        }
        [path, context] => {
            ctx.kube2sky(o, "kubecfg-file", path);
            ctx.leave(
                o,
                &format!(
                    "context {context}: kube2sky uses the kubeconfig's current context (make \
                     {context} current in the file)"
                ),
            );
        }
        _ => ctx.leave(o, "kubeconfig takes a path and maybe a context"),
    }
}

/// The reason an option with no counterpart is left out.
fn unsupported(name: &str) -> Option<&'static str> {
    Some(match name {
        "namespaces" => "kube2sky writes the records of every namespace",
        "labels" => "kube2sky writes the records of every Service, whatever its labels",
        "namespace_labels" => "kube2sky writes the records of every namespace, whatever its labels",
        "endpoint_pod_names" => {
            "kube2sky names a headless Service's endpoints by hostname, else by an ID from \
             the IP (as kube-dns), not by pod name"
        }
        "noendpoints" => "kube2sky always writes the endpoint records of headless Services",
        "multicluster" => "multicluster (clusterset) names are not available in kube-dns-rs",
        "ignore" => "kube2sky writes the records of Services without endpoints, as kube-dns did",
        "upstream" => "obsolete (CoreDNS 1.7 removed it): drop the line",
        "resyncperiod" => "harmless: kube2sky's watches re-list by themselves",
        "tls" => "give kube2sky a kubeconfig (--kubecfg-file) holding the client certificates",
        "transfer" => "zone transfers (AXFR/IXFR) are not available in kube-dns-rs",
        "apiserver_qps" | "apiserver_burst" | "apiserver_max_inflight" => {
            "kube2sky's API client has no rate settings"
        }
        _ => return None,
    })
}

/// The defaults of a `kubernetes` plugin, and the TTL of negative answers.
pub(super) fn finish(b: &mut Builder, cluster: &Cluster) {
    if !b.facts.kubernetes {
        b.notes.push(
            "no kubernetes plugin: nothing in this Corefile answers the cluster's names; \
             kube2sky and skydns still serve --domain (cluster.local unless set)"
                .to_owned(),
        );
        return;
    }
    b.fallback(Bin::Skydns, "pods", "disabled");
    b.fallback(Bin::Kube2sky, "ttl", &COREDNS_TTL.to_string());
    if cluster.domain.is_none() {
        b.notes.push(
            "the kubernetes plugin names no forward zone: no cluster domain to set".to_owned(),
        );
    }
    let ttl = b
        .get(Bin::Kube2sky, "ttl")
        .and_then(|t| t.parse::<u32>().ok());
    if let Some(ttl) = ttl {
        b.config_key
            .insert("min_ttl".to_owned(), ttl.min(SOA_TTL_CAP).into());
        b.notes.push(format!(
            "/skydns/config min_ttl={}: the TTL of the SOA in negative answers, as CoreDNS's \
             ttl gives it (skydns's default is 60); no flag sets it",
            ttl.min(SOA_TTL_CAP)
        ));
    }
}
