//! The HTTP endpoints: `prometheus` becomes skydns `-metrics-addr`, where
//! skydns also serves `/health` and `/ready`, so `health` and `ready` move
//! there (a note: the probes' port changes); `health`'s `lameduck` becomes
//! skydns `-lameduck`.

use super::builder::{duration, Bin, Builder, Ctx};
use crate::corefile::Directive;
use std::net::{IpAddr, SocketAddr};

pub(super) fn translate(ctx: &mut Ctx, d: &Directive) {
    let default = match d.name.as_str() {
        "prometheus" => "localhost:9153",
        "health" => ":8080",
        _ => ":8181",
    };
    let addr = d.args.first().map_or(default, String::as_str);
    if d.args.len() > 1 {
        ctx.leave(d, &format!("{} listens on one address", d.name));
    }
    let Some(listen) = listen(addr) else {
        ctx.leave(
            d,
            &format!("{addr:?} is not [HOST]:PORT with an IP or localhost"),
        );
        return;
    };
    match d.name.as_str() {
        "prometheus" => {
            if ctx.skydns(d, "metrics-addr", &listen.to_string()) {
                ctx.note(
                    d,
                    "skydns serves CoreDNS's series too (coredns_dns_requests_total and the \
                     others, docs/monitoring.md) beside its own skydns_dns_* ones",
                );
            }
            if d.args.is_empty() {
                ctx.note(
                    d,
                    "CoreDNS's default address, localhost:9153: reachable from the pod only",
                );
            }
        }
        "health" => {
            ctx.b.facts.health = Some((addr.to_owned(), d.pos.clone()));
            ctx.options(d, |ctx, o| {
                if o.name != "lameduck" {
                    return false;
                }
                match o.args.as_slice() {
                    [t] if duration(t).is_some() => {
                        ctx.skydns(o, "lameduck", t);
                    }
                    _ => ctx.leave(o, "lameduck takes one duration"),
                }
                true
            });
        }
        _ => ctx.b.facts.ready = Some((addr.to_owned(), d.pos.clone())),
    }
}

/// `:9153` → `0.0.0.0:9153`, `localhost:9153` → `127.0.0.1:9153`.
fn listen(text: &str) -> Option<SocketAddr> {
    let (host, port) = text.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip: IpAddr = match host {
        "" => std::net::Ipv4Addr::UNSPECIFIED.into(),
        "localhost" => std::net::Ipv4Addr::LOCALHOST.into(),
        ip => ip.parse().ok()?,
    };
    Some(SocketAddr::new(ip, port))
}

/// Without `prometheus`, the metrics address from `health` or `ready`;
/// where the probes move to.
pub(super) fn finish(b: &mut Builder) {
    let (health, ready) = (b.facts.health.clone(), b.facts.ready.clone());
    if !b.has(Bin::Skydns, "metrics-addr") {
        let from = health.as_ref().or(ready.as_ref());
        match from.and_then(|(addr, _)| listen(addr)) {
            Some(addr) => b.fallback(Bin::Skydns, "metrics-addr", &addr.to_string()),
            None => {
                b.notes.push(
                    "no prometheus, health or ready: keep the manifest's -metrics-addr, where \
                     skydns serves its probes"
                        .to_owned(),
                );
                return;
            }
        }
    }
    let metrics = b
        .get(Bin::Skydns, "metrics-addr")
        .unwrap_or_default()
        .to_owned();
    for (path, probe, found) in [
        ("/health", "livenessProbe", health),
        ("/ready", "readinessProbe", ready),
    ] {
        let Some((addr, pos)) = found else { continue };
        if listen(&addr).map(|a| a.to_string()) != Some(metrics.clone()) {
            b.notes.push(format!(
                "{}:{} {}: skydns serves {path} on -metrics-addr ({metrics}), not on {addr}: \
                 point the {probe} there",
                pos.file,
                pos.line,
                &path[1..]
            ));
        }
    }
}
