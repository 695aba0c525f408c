//! The `forward` plugin: the root zone's upstreams (skydns `-nameservers`
//! and the `-ns-*` settings, and kube-dns's `upstreamNameservers`), or a
//! stub domain (kube-dns's `stubDomains`, which kube2sky writes for skydns
//! `-stubzones`) for any other zone.

use super::builder::{duration, Bin, Builder, Ctx};
use super::{zones, Role};
use crate::corefile::Directive;
use std::net::SocketAddr;

/// Where a `forward` sends queries.
enum Targets {
    /// `/etc/resolv.conf`: skydns's own default.
    ResolvConf,
    Addrs(Vec<SocketAddr>),
}

pub(super) fn translate(ctx: &mut Ctx, d: &Directive) {
    let Some((from, to)) = d.args.split_first().filter(|(_, to)| !to.is_empty()) else {
        ctx.leave(d, "forward takes a zone and at least one upstream");
        return;
    };
    let Some(from) = zones::zone(from) else {
        ctx.leave(d, &format!("{from:?} is not a zone"));
        return;
    };
    let targets = match targets(to) {
        Ok(t) => t,
        Err(why) => return ctx.leave(d, &why),
    };
    let block_is_root = ctx.block.zones.iter().any(|z| z == ".");
    if from != "." {
        let in_block = block_is_root || ctx.block.zones.iter().any(|z| zones::within(&from, z));
        if in_block {
            stub(ctx, d, &[from], targets);
        } else {
            ctx.leave(
                d,
                &format!("{from} is outside this block's zones: the line never forwards"),
            );
        }
    } else if ctx.block.role == Role::Main && block_is_root {
        root(ctx, d, targets);
    } else {
        let zones = ctx.block.zones.clone();
        stub(ctx, d, &zones, targets);
    }
}

fn targets(to: &[String]) -> Result<Targets, String> {
    let (mut addrs, mut paths) = (Vec::new(), Vec::new());
    for t in to {
        if t.starts_with("tls://") {
            return Err(format!("{t}: DNS over TLS upstreams are not available yet"));
        }
        if let Some(addr) = zones::upstream(t) {
            addrs.push(addr);
        } else if t.contains("://") || !t.contains('/') {
            return Err(format!(
                "{t} is not an IP address, IP:port or resolv.conf path"
            ));
        } else {
            paths.push(t);
        }
    }
    match paths.as_slice() {
        [] => Ok(Targets::Addrs(addrs)),
        [path] if addrs.is_empty() && path.as_str() == "/etc/resolv.conf" => Ok(Targets::ResolvConf),
        [path] if addrs.is_empty() => Err(format!(
            "{path}: skydns reads the upstreams of /etc/resolv.conf only (else -nameservers names them)"
        )),
        _ => Err("mixes resolv.conf files and addresses: skydns takes either -nameservers or /etc/resolv.conf".to_owned()),
    }
}

/// The root zone's upstreams.
fn root(ctx: &mut Ctx, d: &Directive, targets: Targets) {
    if ctx.b.facts.root_forward {
        ctx.leave(
            d,
            "a second forward for the root zone: CoreDNS never reaches it",
        );
        return;
    }
    ctx.b.facts.root_forward = true;
    match targets {
        Targets::ResolvConf => ctx.note(
            d,
            "skydns's default: the nameservers of its own /etc/resolv.conf (the pod's dnsPolicy: \
             Default, as CoreDNS's), so no -nameservers",
        ),
        Targets::Addrs(addrs) => {
            let list: Vec<String> = addrs.iter().map(SocketAddr::to_string).collect();
            if ctx.skydns(d, "nameservers", &list.join(",")) {
                ctx.b.upstreams = Some(addrs);
                ctx.note(
                    d,
                    "-nameservers carries the upstreams; the kube-dns ConfigMap's \
                     upstreamNameservers does too (it overrides the flag and changes live): \
                     either is enough",
                );
            }
        }
    }
    ctx.options(d, root_option);
}

/// One option of the root zone's `forward`; false when it is not one.
fn root_option(ctx: &mut Ctx, o: &Directive) -> bool {
    let one = o
        .args
        .first()
        .filter(|_| o.args.len() == 1)
        .map(String::as_str);
    let number = one.and_then(|n| n.parse::<u32>().ok());
    let set = match (o.name.as_str(), one) {
        ("max_concurrent", _) => number.map(|n| ("max-pending-forwards", n.to_string())),
        // CoreDNS marks an upstream down past N failures (`fails > max_fails`,
        // plugin/pkg/proxy), skydns at N: one more; 0 is "never" in both.
        ("max_fails", _) => number.map(|n| {
            let at = if n == 0 { 0 } else { u64::from(n) + 1 };
            ("ns-fail-threshold", at.to_string())
        }),
        ("policy", Some(p @ ("random" | "round_robin" | "sequential"))) => {
            Some(("ns-policy", p.to_owned()))
        }
        ("force_tcp", None) => Some(("ns-transport", "tcp".to_owned())),
        ("prefer_udp", None) => Some(("ns-transport", "udp".to_owned())),
        ("health_check", _) => return health_check(ctx, o),
        _ => None,
    };
    if let Some((flag, value)) = set {
        ctx.skydns(o, flag, &value);
        return true;
    }
    let why = match o.name.as_str() {
        "max_concurrent" | "max_fails" => "takes one number",
        "policy" => "takes one of random, round_robin, sequential",
        "force_tcp" | "prefer_udp" => "takes no argument",
        "tls" | "tls_servername" => "DNS over TLS upstreams are not available yet",
        "except" => "skydns forwards every name outside the cluster domain and the stub zones: no exceptions",
        "next" => "skydns relays the upstream's reply whatever its rcode: there is no next plugin",
        "failfast_all_unhealthy_upstreams" => {
            "skydns still tries the upstreams marked down when every one is down"
        }
        "failover" => {
            "skydns relays the first reply, whatever its rcode (it moves on only after a \
             timeout or an error)"
        }
        "expire" | "max_age" | "max_idle_conns" | "max_connect_attempts" => {
            "skydns's upstream connections have no such setting"
        }
        _ => return false,
    };
    ctx.leave(o, &format!("{}: {why}", o.name));
    true
}

/// `health_check DURATION [no_rec] [domain NAME]`.
fn health_check(ctx: &mut Ctx, o: &Directive) -> bool {
    let Some(interval) = o.args.first().and_then(|a| duration(a)) else {
        ctx.leave(o, "health_check takes a duration first");
        return true;
    };
    if gocompat::duration::parse(&interval).is_ok_and(|d| d.is_zero()) {
        ctx.leave(
            o,
            "health_check 0s: skydns always probes an upstream marked down (-ns-probe-interval must be more than 0s)",
        );
        return true;
    }
    ctx.skydns(o, "ns-probe-interval", &interval);
    let mut rest = o.args[1..].iter();
    let mut no_rec = false;
    while let Some(arg) = rest.next() {
        match (arg.as_str(), rest.clone().next()) {
            ("no_rec", _) => no_rec = true,
            ("domain", Some(name)) => {
                rest.next();
                ctx.skydns(o, "ns-probe-name", name);
            }
            _ => ctx.leave(
                o,
                &format!("health_check: {arg:?} is not no_rec or domain NAME"),
            ),
        }
    }
    if !no_rec {
        ctx.note(
            o,
            "skydns's probes ask without recursion desired (CoreDNS's no_rec); a resolver \
             answers `. NS` that way too",
        );
    }
    true
}

/// A stub domain for each of `zones`.
fn stub(ctx: &mut Ctx, d: &Directive, stub_zones: &[String], targets: Targets) {
    let Targets::Addrs(addrs) = targets else {
        ctx.leave(
            d,
            "a stub domain forwards to IP addresses; kube-dns's ConfigMap names no resolv.conf",
        );
        return;
    };
    let servers: Vec<String> = addrs.into_iter().map(zones::kube_dns_server).collect();
    for zone in stub_zones {
        let overlaps = (ctx.cluster.domain.as_deref())
            .is_some_and(|c| zones::within(zone, c) || zones::within(c, zone));
        let why = if overlaps {
            "kube2sky refuses a stub domain at, inside or above the cluster domain (skydns asks \
             stub zones before its own records, so it would forward the cluster's names)"
        } else if !zone
            .split('.')
            .all(|l| l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        {
            "not a DNS-1123 name, which kube-dns's ConfigMap takes"
        } else if ctx.b.stub_domains.contains_key(zone) {
            "already a stub domain of another line"
        } else {
            ctx.b.stub_domains.insert(zone.clone(), servers.clone());
            continue;
        };
        ctx.leave(d, &format!("stub domain {zone}: {why}"));
    }
    ctx.note(
        d,
        "stub domains reach skydns through kube-dns's ConfigMap: kube2sky --config-map=kube-dns \
         writes them into etcd, skydns -stubzones forwards them",
    );
    ctx.options(d, |ctx, o| {
        ctx.leave(
            o,
            &format!(
                "{}: a stub domain takes only its servers (skydns's -ns-* settings are the \
                 root zone's upstreams')",
                o.name
            ),
        );
        true
    });
}

/// Without a root `forward`, CoreDNS answers no other name: -no-rec.
/// With one, its defaults that differ from skydns's.
pub(super) fn finish(b: &mut Builder) {
    if !b.facts.root_forward {
        b.fallback(Bin::Skydns, "no-rec", "true");
        b.notes.push(
            "no forward for the root zone: CoreDNS answered nothing outside its zones, so \
             -no-rec=true (CNAME targets outside the domain are still looked up, if upstreams exist)"
                .to_owned(),
        );
        return;
    }
    if !b.has(Bin::Skydns, "ns-policy") {
        b.fallback(Bin::Skydns, "ns-policy", "random");
        b.notes.push(
            "forward: -ns-policy=random is CoreDNS's default policy (the modern manifests' \
             -ns-rotate=false is sequential)"
                .to_owned(),
        );
    }
    if !b.has(Bin::Skydns, "max-pending-forwards") {
        b.fallback(Bin::Skydns, "max-pending-forwards", "0");
        b.notes.push(
            "forward: no max_concurrent, so no limit (-max-pending-forwards=0); skydns's own \
             default is 1000"
                .to_owned(),
        );
    }
}
