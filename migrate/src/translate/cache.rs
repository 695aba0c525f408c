//! The `cache` plugin: skydns's response cache of forwarded replies
//! (`-rcache` of the success and denial capacities together, `-rcache-ttl`
//! the TTL cap), prefetch (`-rcache-prefetch*`) and serve-stale
//! (`-rcache-stale*`). Cluster names need none: skydns answers them from
//! memory.

use super::builder::{duration, Bin, Builder, Ctx};
use super::{zones, Role};
use crate::corefile::Directive;

/// CoreDNS's capacity of each of the success and denial caches.
const CAPACITY: u32 = 9984;
/// CoreDNS's TTL cap of successes without a TTL.
const MAX_TTL: u32 = 3600;
/// CoreDNS's TTL cap of denials without a TTL.
const DENIAL_TTL: u32 = 1800;

/// The sizes and TTLs a `cache` block sets.
struct Sizes {
    success: u32,
    denial: u32,
    ttl: Option<u32>,
    denial_ttl: Option<(u32, Directive)>,
}

pub(super) fn translate(ctx: &mut Ctx, d: &Directive) {
    if ctx.block.role != Role::Main {
        let what = if ctx.block.role == Role::Cluster {
            "skydns answers the cluster's names from memory: nothing to cache"
        } else {
            "skydns does not keep stub-zone replies in its response cache: each query goes to \
             the zone's servers"
        };
        ctx.note(d, what);
        return;
    }
    if ctx.b.facts.cache {
        ctx.leave(d, "a second cache in one block");
        return;
    }
    ctx.b.facts.cache = true;
    let (ttl, zone_args) = match d.args.first().map(|a| a.parse::<u32>()) {
        Some(Ok(ttl)) => (Some(ttl), &d.args[1..]),
        _ => (None, &d.args[..]),
    };
    if zone_args
        .iter()
        .any(|z| zones::zone(z).as_deref() != Some("."))
    {
        ctx.leave(
            d,
            "caching some zones only: skydns's cache takes every forwarded reply",
        );
    }
    let mut sizes = Sizes {
        success: CAPACITY,
        denial: CAPACITY,
        ttl,
        denial_ttl: None,
    };
    ctx.options(d, |ctx, o| option(ctx, o, &mut sizes));
    let cap = sizes.ttl.unwrap_or(MAX_TTL);
    let capacity = u64::from(sizes.success) + u64::from(sizes.denial);
    ctx.skydns(d, "rcache", &capacity.to_string());
    ctx.skydns(d, "rcache-ttl", &cap.to_string());
    match sizes.denial_ttl {
        Some((t, o)) if t != cap => ctx.leave(
            &o,
            &format!("a denial TTL ({t}) apart from the success TTL ({cap}): skydns has one TTL cap"),
        ),
        Some(_) => {}
        None if ttl.is_none() => ctx.note(
            d,
            &format!("CoreDNS caps denials at {DENIAL_TTL} s unless a TTL is given; skydns caps every reply at -rcache-ttl"),
        ),
        None => {}
    }
    ctx.note(
        d,
        &format!(
            "skydns answers the cluster's names from memory; -rcache caches forwarded replies \
             only, in one cache of the success and denial capacities together ({} + {}), and \
             never SERVFAIL",
            sizes.success, sizes.denial
        ),
    );
}

/// One option of the block; false when it is not one.
fn option(ctx: &mut Ctx, o: &Directive, sizes: &mut Sizes) -> bool {
    match o.name.as_str() {
        "success" | "denial" => capacity(ctx, o, sizes),
        "prefetch" => prefetch(ctx, o),
        "serve_stale" => serve_stale(ctx, o),
        "servfail" => {
            if !o
                .args
                .first()
                .and_then(|a| gocompat::duration::parse(a).ok())
                .is_some_and(|d| d.is_zero())
            {
                ctx.leave(o, "skydns never caches SERVFAIL replies");
            }
        }
        "disable" => {
            let cluster_only = o.args.len() > 1
                && ["success", "denial"].contains(&o.args[0].as_str())
                && o.args[1..]
                    .iter()
                    .all(|z| zones::zone(z).is_some_and(|z| ctx.cluster.covers(&z)));
            if cluster_only {
                ctx.note(
                    o,
                    "skydns never caches the cluster's names: carried over as it is",
                );
            } else {
                ctx.leave(o, "skydns caches every forwarded reply: only the cluster domain's can be left uncached (as they always are)");
            }
        }
        "keepttl" => ctx.leave(o, "skydns counts the TTLs of cached replies down"),
        _ => return false,
    }
    true
}

/// `success|denial CAPACITY [TTL [MINTTL]]`.
fn capacity(ctx: &mut Ctx, o: &Directive, sizes: &mut Sizes) {
    let numbers: Vec<Option<u32>> = o.args.iter().map(|a| a.parse().ok()).collect();
    let (Some(Some(cap)), 1..=3) = (numbers.first(), numbers.len()) else {
        ctx.leave(
            o,
            &format!("{} takes a capacity, maybe a TTL and a minimum TTL", o.name),
        );
        return;
    };
    let ttl = numbers.get(1).copied().flatten();
    if o.name == "success" {
        sizes.success = *cap;
        if ttl.is_some() {
            sizes.ttl = ttl;
        }
    } else {
        sizes.denial = *cap;
        sizes.denial_ttl = ttl.map(|t| (t, o.clone()));
    }
    if numbers.len() == 3 {
        ctx.leave(
            o,
            "a minimum TTL: skydns keeps a reply for its own TTL, with no floor",
        );
    }
}

/// `prefetch AMOUNT [DURATION] [PERCENTAGE%]`.
fn prefetch(ctx: &mut Ctx, o: &Directive) {
    let Some(amount) = o.args.first().and_then(|a| a.parse::<u32>().ok()) else {
        ctx.leave(o, "prefetch takes an amount first");
        return;
    };
    ctx.skydns(o, "rcache-prefetch", &amount.to_string());
    for arg in &o.args[1..] {
        if let Some(percent) = arg.strip_suffix('%') {
            match percent.parse::<u8>() {
                Ok(p @ 1..=100) => {
                    ctx.skydns(o, "rcache-prefetch-percent", &p.to_string());
                }
                _ => ctx.leave(o, &format!("{arg}: not a percentage from 1% to 100%")),
            }
        } else if gocompat::duration::parse(arg).ok() != gocompat::duration::parse("1m").ok() {
            ctx.leave(
                o,
                &format!(
                    "{arg}: skydns counts the requests since a reply was stored, not within a \
                     window (CoreDNS's default window is 1m)"
                ),
            );
        }
    }
}

/// `serve_stale [DURATION [REFRESH_MODE]]`.
fn serve_stale(ctx: &mut Ctx, o: &Directive) {
    let stale = match o.args.first() {
        None => Some("1h".to_owned()),
        Some(a) => duration(a),
    };
    let Some(stale) = stale else {
        ctx.leave(o, "serve_stale takes a duration first");
        return;
    };
    ctx.skydns(o, "rcache-stale", &stale);
    match o.args.get(1).map(String::as_str) {
        None | Some("immediate") => {
            ctx.skydns(o, "rcache-stale-timeout", "0s");
        }
        Some("verify") => ctx.note(
            o,
            "verify: skydns asks the upstreams first and serves the stale reply when they fail \
             or take longer than -rcache-stale-timeout (1800ms, RFC 8767's timer)",
        ),
        Some(mode) => ctx.leave(
            o,
            &format!("{mode}: the refresh mode is immediate or verify"),
        ),
    }
}

/// Without a cache, none; with one, no prefetch or serve-stale unless set.
pub(super) fn finish(b: &mut Builder) {
    if b.facts.cache {
        b.fallback(Bin::Skydns, "rcache-prefetch", "0");
        b.fallback(Bin::Skydns, "rcache-stale", "0s");
    } else {
        b.fallback(Bin::Skydns, "rcache", "0");
        b.notes.push(
            "no cache in the main block: -rcache=0, no response cache (the modern manifests \
             cache 10000 replies; keep their -rcache lines to keep that)"
                .to_owned(),
        );
    }
}
