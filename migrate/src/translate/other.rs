//! The smaller plugins: `errors` and `reload` (nothing to set), `log`
//! (`-log-queries`), `loop` (`-loop=exit`), `loadbalance` (`-round-robin`),
//! `autopath @kubernetes` (`-autopath`), `bind` (the IP of `-addr`),
//! `dnssec` (`-dnssec`, `-scache`) and `timeouts` (`-tcp-*-timeout`).

use super::builder::{duration, Ctx};
use super::{zones, Role};
use crate::corefile::Directive;

pub(super) fn translate(ctx: &mut Ctx, d: &Directive) {
    match d.name.as_str() {
        "errors" => ctx.options(d, |ctx, o| {
            ctx.note(o, "harmless: skydns logs each error in its own way");
            true
        }),
        "log" => log(ctx, d),
        "loop" => {
            if ctx.skydns(d, "loop", "exit") && ctx.block.role == Role::Stub {
                ctx.note(
                    d,
                    "skydns marks stub-forwarded queries (EDNS0 option 65011) and drops one \
                     that comes back",
                );
            }
        }
        "reload" => ctx.note(
            d,
            "nothing to set: skydns follows /skydns/config and kube2sky the kube-dns ConfigMap \
             live; changed args need a rollout",
        ),
        "loadbalance" => loadbalance(ctx, d),
        "autopath" => match d.args.as_slice() {
            [k] if k == "@kubernetes" => {
                if ctx.skydns(d, "autopath", "true") {
                    ctx.note(
                        d,
                        "-autopath needs kube2sky's pod records (--pods, on by default)",
                    );
                }
            }
            _ => ctx.leave(
                d,
                "skydns's -autopath walks the pods' search lists from kube2sky's pod records \
                 (autopath @kubernetes), not from a zone list or resolv.conf",
            ),
        },
        "bind" => bind(ctx, d),
        "dnssec" => dnssec(ctx, d),
        _ => timeouts(ctx, d),
    }
}

/// `log [NAMES...] [FORMAT] { class CLASSES... }`.
fn log(ctx: &mut Ctx, d: &Directive) {
    let (names, format) = match d.args.split_last() {
        Some((last, names)) if last.contains('{') => (names, Some(last.as_str())),
        _ => (&d.args[..], None),
    };
    if names.iter().any(|n| zones::zone(n).as_deref() != Some(".")) {
        ctx.leave(
            d,
            "logs some names only: skydns's query log takes every name",
        );
    }
    if format.is_some_and(|f| f != "{common}" && f != "{combined}") {
        ctx.leave(d, "a format of its own: skydns writes its own fields (client, proto, name, qtype, rcode, ...)");
    }
    let mut classes: Vec<String> = Vec::new();
    ctx.options(d, |ctx, o| {
        if o.name != "class" {
            return false;
        }
        for class in &o.args {
            if ["all", "success", "denial", "error"].contains(&class.as_str()) {
                classes.push(class.clone());
            } else {
                ctx.leave(
                    o,
                    &format!("class {class}: the classes are all, success, denial, error"),
                );
            }
        }
        true
    });
    if classes.is_empty() || classes.iter().any(|c| c == "all") {
        classes = vec!["all".to_owned()];
    }
    if ctx.skydns(d, "log-queries", &classes.join(",")) {
        ctx.note(d, "skydns's query log writes one line per reply, with its own fields (docs/monitoring.md)");
        if ctx.block.role != Role::Main {
            ctx.note(
                d,
                "-log-queries logs every zone's replies, not only this block's",
            );
        }
    }
}

fn loadbalance(ctx: &mut Ctx, d: &Directive) {
    match d.args.as_slice() {
        [] => {}
        [policy] if policy == "round_robin" => {}
        _ => {
            ctx.leave(d, "only round_robin: skydns shuffles A and AAAA answers (-round-robin), with no weights");
            return;
        }
    }
    if ctx.skydns(d, "round-robin", "true") {
        ctx.note(d, "skydns shuffles A and AAAA answers (CoreDNS MX too)");
    }
    ctx.options(d, |ctx, o| {
        ctx.leave(
            o,
            &format!("{}: skydns's -round-robin has no options", o.name),
        );
        true
    });
}

fn bind(ctx: &mut Ctx, d: &Directive) {
    match d.args.as_slice() {
        [ip] => match ip.parse::<std::net::IpAddr>() {
            Ok(ip) if d.block.is_none() => ctx.b.facts.bind = Some(ip),
            Ok(_) => ctx.leave(d, "bind's except: skydns listens on one address"),
            Err(_) => ctx.leave(
                d,
                &format!("{ip}: skydns listens on an IP address (-addr), not an interface"),
            ),
        },
        _ => ctx.leave(d, "skydns listens on one address (-addr)"),
    }
}

/// `dnssec [ZONES] { key file BASE; cache_capacity N }`.
fn dnssec(ctx: &mut Ctx, d: &Directive) {
    let cluster = ctx.cluster.domain.clone().unwrap_or_default();
    let zones: Vec<Option<String>> = d.args.iter().map(|z| zones::zone(z)).collect();
    if zones.iter().any(|z| z.as_deref() != Some(cluster.as_str())) {
        ctx.leave(d, "skydns signs the cluster domain only (-dnssec)");
    }
    let mut key = false;
    ctx.options(d, |ctx, o| {
        match (o.name.as_str(), o.args.as_slice()) {
            ("key", [file, base]) if file == "file" && !key => {
                key = ctx.skydns(o, "dnssec", base);
                if key {
                    ctx.note(o, "skydns reads <base>.key and <base>.private; the key's owner must be the cluster domain");
                }
            }
            ("key", _) => ctx.leave(o, "skydns signs with one key pair from files (key file BASE)"),
            ("cache_capacity", [n]) if n.parse::<u32>().is_ok() => {
                ctx.skydns(o, "scache", n);
            }
            _ => return false,
        }
        true
    });
    if !key {
        ctx.leave(
            d,
            "no key file: skydns -dnssec signs with a key pair from files",
        );
    }
}

/// `timeouts { read D; write D; idle D }`: skydns's TCP timeouts.
fn timeouts(ctx: &mut Ctx, d: &Directive) {
    ctx.options(d, |ctx, o| {
        let flag = match o.name.as_str() {
            "read" => "tcp-read-timeout",
            "write" => "tcp-write-timeout",
            "idle" => "tcp-idle-timeout",
            _ => return false,
        };
        match o.args.as_slice() {
            [t] if duration(t).is_some() => {
                ctx.skydns(o, flag, t);
            }
            _ => ctx.leave(o, &format!("{} takes one duration", o.name)),
        }
        true
    });
    ctx.note(
        d,
        "skydns's TCP timeouts: -tcp-read-timeout bounds the rest of a message once it started",
    );
}
