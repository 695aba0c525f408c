//! A parsed Corefile to this project's configuration ([`translate`]): each
//! server block gets a role (the root zone's main block, the cluster
//! domain's, a stub domain's, another zone's), each plugin is translated by
//! its family's module, and what the Corefile leaves to CoreDNS's defaults
//! is stated as flags too, so that the args replace a manifest's.

mod builder;
mod cache;
mod forward;
mod kubernetes;
mod other;
mod probes;
pub mod table;
mod zones;

use crate::corefile::{Corefile, Directive, ServerBlock};
use builder::{Bin, Builder, Ctx};
use serde::Serialize;
use std::collections::BTreeMap;

/// The kube-dns ConfigMap (`kube-system/kube-dns`) the Corefile asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KubeDnsConfigMap {
    /// Domain → servers (`IP` or `IP:port`).
    pub stub_domains: BTreeMap<String, Vec<String>>,
    /// At most three `IP` or `IP:port`.
    pub upstream_nameservers: Vec<String>,
}

/// A plugin, or an option of one, that is not carried over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    /// The server block's keys.
    pub block: String,
    pub file: String,
    pub line: usize,
    /// The line as written.
    pub text: String,
    pub reason: String,
}

/// Everything the Corefile translates to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Translation {
    /// skydns's args, `-flag=value`.
    pub skydns: Vec<String>,
    /// kube2sky's args, `--flag=value`.
    pub kube2sky: Vec<String>,
    pub config_map: Option<KubeDnsConfigMap>,
    /// The `/skydns/config` etcd key's JSON object.
    pub config_key: Option<serde_json::Map<String, serde_json::Value>>,
    pub left_out: Vec<LeftOut>,
    pub notes: Vec<String>,
}

/// What a server block stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The root zone's block (or, without one, the cluster domain's).
    Main,
    /// A block of the cluster domain or its reverse zones.
    Cluster,
    /// Another zone forwarded somewhere: a stub domain.
    Stub,
    /// Another zone served by other plugins.
    Other,
}

/// A server block being translated.
#[derive(Clone, Debug)]
pub(crate) struct Block {
    /// Its keys as written, for the left-out lines.
    pub(crate) name: String,
    pub(crate) role: Role,
    /// Its zones (dns keys on the listening port).
    pub(crate) zones: Vec<String>,
}

/// The cluster domain, from the first `kubernetes` plugin.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cluster {
    /// The first zone that is not a reverse one.
    pub(crate) domain: Option<String>,
    /// Every zone of that plugin.
    pub(crate) zones: Vec<String>,
    /// Where that plugin is.
    pub(crate) pos: Option<crate::corefile::Pos>,
}

impl Cluster {
    /// Whether `zone` is the cluster domain or inside it (reverse zones are
    /// not: their names without a PTR are forwarded).
    pub(crate) fn covers(&self, zone: &str) -> bool {
        (self.domain.as_deref()).is_some_and(|domain| zones::within(zone, domain))
    }
}

/// Translates `corefile`.
pub fn translate(corefile: &Corefile) -> Translation {
    let mut b = Builder::default();
    b.notes.push(
        "the args state every setting the Corefile decides, the features it leaves off \
         included: they replace the same flags of the manifest (deploy/*/kube-dns.yaml); \
         keep the manifest's other flags (-machines, -etcd3, ...)"
            .to_owned(),
    );
    b.notes.extend(corefile.notes.iter().cloned());
    let main = main_block(&corefile.blocks);
    let port = main
        .and_then(|m| dns_keys(&corefile.blocks[m]).first().map(|k| k.port))
        .unwrap_or(53);
    let cluster = cluster(&corefile.blocks, main);
    let mut main_seen = false;
    for (i, block) in corefile.blocks.iter().enumerate() {
        let Some(info) = classify(&mut b, block, port, &cluster, Some(i) == main && !main_seen)
        else {
            continue;
        };
        main_seen |= info.role == Role::Main;
        for d in &block.directives {
            let mut ctx = Ctx {
                b: &mut b,
                block: &info,
                cluster: &cluster,
            };
            directive(&mut ctx, d);
        }
    }
    finish(&mut b, &cluster, main.is_some(), port);
    build(b)
}

/// The index of the root zone's block, else of the first with `kubernetes`,
/// else the first.
fn main_block(blocks: &[ServerBlock]) -> Option<usize> {
    let root = blocks
        .iter()
        .position(|b| dns_keys(b).iter().any(|k| k.zone == "."));
    let kubernetes = || {
        blocks
            .iter()
            .position(|b| b.directives.iter().any(|d| d.name == "kubernetes"))
    };
    root.or_else(kubernetes)
        .or((!blocks.is_empty()).then_some(0))
}

/// A block's keys that are plain DNS and parse.
fn dns_keys(block: &ServerBlock) -> Vec<zones::Key> {
    (block.keys.iter())
        .filter_map(|k| zones::key(k).ok())
        .filter(|k| k.scheme == "dns")
        .collect()
}

/// The cluster's zones: the `kubernetes` plugin of the main block, else
/// the first one anywhere.
fn cluster(blocks: &[ServerBlock], main: Option<usize>) -> Cluster {
    let order = main.into_iter().chain(0..blocks.len());
    for block in order.map(|i| &blocks[i]) {
        let Some(d) = block.directives.iter().find(|d| d.name == "kubernetes") else {
            continue;
        };
        let written: Vec<String> = d.args.iter().filter_map(|a| zones::zone(a)).collect();
        let zones = if written.is_empty() {
            dns_keys(block).into_iter().map(|k| k.zone).collect()
        } else {
            written
        };
        let domain = zones
            .iter()
            .find(|z| !zones::is_reverse(z) && *z != ".")
            .cloned();
        return Cluster {
            domain,
            zones,
            pos: Some(d.pos.clone()),
        };
    }
    Cluster::default()
}

/// The block's role and zones; keys that cannot be served are left out,
/// and a block with none left is skipped (`None`).
fn classify(
    b: &mut Builder,
    block: &ServerBlock,
    port: u16,
    cluster: &Cluster,
    main: bool,
) -> Option<Block> {
    let name = block.keys.join(" ");
    let mut zones = Vec::new();
    for text in &block.keys {
        let why = match zones::key(text) {
            Err(why) => why,
            Ok(k) if k.scheme != "dns" => format!(
                "key {text}: {}:// listeners (DNS over TLS, HTTPS, gRPC or QUIC) are not available \
                 in kube-dns-rs, which serves plain DNS over UDP and TCP",
                k.scheme
            ),
            Ok(k) if k.port != port => format!(
                "key {text}: skydns listens on one address (-addr, port {port} here); a server \
                 on port {} is not carried over",
                k.port
            ),
            Ok(k) if zones.contains(&k.zone) || (k.zone == "." && !main) => format!(
                "key {text}: zone {} is already served by another block",
                k.zone
            ),
            Ok(k) => {
                zones.push(k.zone);
                continue;
            }
        };
        let skipped = if zones.is_empty() && block.keys.last() == Some(text) {
            " (nothing of this block is carried over)"
        } else {
            ""
        };
        b.left_out.push(LeftOut {
            block: name.clone(),
            file: block.pos.file.clone(),
            line: block.pos.line,
            text: block.text.clone(),
            reason: format!("{why}{skipped}"),
        });
    }
    if zones.is_empty() {
        leave_block(b, block, &name);
        return None;
    }
    let role = role(block, &zones, cluster, main);
    Some(Block { name, role, zones })
}

/// Every line of a block none of whose keys is served.
fn leave_block(b: &mut Builder, block: &ServerBlock, name: &str) {
    for d in &block.directives {
        let why = table::unavailable(&d.name).map_or_else(
            || {
                format!(
                    "its server block (line {}) is not carried over",
                    block.pos.line
                )
            },
            str::to_owned,
        );
        b.left_out.push(LeftOut {
            block: name.to_owned(),
            file: d.pos.file.clone(),
            line: d.pos.line,
            text: d.text.clone(),
            reason: why,
        });
    }
}

fn role(block: &ServerBlock, zones: &[String], cluster: &Cluster, main: bool) -> Role {
    let has = |name: &str| block.directives.iter().any(|d| d.name == name);
    if main {
        Role::Main
    } else if has("kubernetes") || zones.iter().all(|z| cluster.covers(z)) {
        Role::Cluster
    } else if has("forward") {
        Role::Stub
    } else {
        Role::Other
    }
}

/// Translates one plugin line.
fn directive(ctx: &mut Ctx, d: &Directive) {
    if let Some(reason) = table::unavailable(&d.name) {
        ctx.leave(d, reason);
        return;
    }
    let everywhere = matches!(ctx.block.role, Role::Main | Role::Cluster);
    match d.name.as_str() {
        "forward" => forward::translate(ctx, d),
        "cache" => cache::translate(ctx, d),
        "health" | "ready" | "prometheus" => probes::translate(ctx, d),
        "errors" | "log" | "loop" | "reload" => other::translate(ctx, d),
        _ if !everywhere => ctx.leave(
            d,
            "a setting of a block for another zone: only forward, cache, errors, log, loop, \
             reload, health, ready and prometheus carry over from it (skydns's other settings \
             apply to every zone)",
        ),
        "kubernetes" => kubernetes::translate(ctx, d),
        "loadbalance" | "autopath" | "bind" | "dnssec" | "timeouts" => other::translate(ctx, d),
        name => ctx.leave(
            d,
            &format!("{name} is no CoreDNS plugin kube-dns-migrate knows: nothing in kube-dns-rs stands for it"),
        ),
    }
}

/// What the Corefile leaves to CoreDNS's defaults, as flags.
fn finish(b: &mut Builder, cluster: &Cluster, has_main: bool, port: u16) {
    if has_main {
        let ip = b
            .facts
            .bind
            .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
        let addr = std::net::SocketAddr::new(ip, port).to_string();
        b.fallback(Bin::Skydns, "addr", &addr);
    }
    if let Some(domain) = &cluster.domain {
        let _ = b.set(Bin::Skydns, "domain", &format!("{domain}."), None);
        let _ = b.set(Bin::Kube2sky, "domain", domain, None);
    }
    kubernetes::finish(b, cluster);
    forward::finish(b);
    cache::finish(b);
    probes::finish(b);
    for (flag, value, why) in [
        (
            "round-robin",
            "false",
            "no loadbalance: CoreDNS kept the answers' order",
        ),
        (
            "autopath",
            "false",
            "no autopath (the modern manifests turn -autopath on)",
        ),
        (
            "lameduck",
            "0s",
            "no health lameduck: CoreDNS stopped at once (the modern manifests keep answering 10s)",
        ),
    ] {
        if !b.has(Bin::Skydns, flag) {
            b.fallback(Bin::Skydns, flag, value);
            b.notes.push(format!("-{flag}={value}: {why}"));
        }
    }
    if !b.stub_domains.is_empty() {
        b.fallback(Bin::Skydns, "stubzones", "true");
    }
}

/// The builder's content as a [`Translation`].
fn build(mut b: Builder) -> Translation {
    let upstreams: Vec<String> = (b.upstreams.iter().flatten())
        .map(|a| zones::kube_dns_server(*a))
        .collect();
    let upstreams = if upstreams.len() > 3 {
        b.notes.push(format!(
            "{} upstreams: kube-dns's ConfigMap takes at most 3, so only -nameservers carries them",
            upstreams.len()
        ));
        Vec::new()
    } else {
        upstreams
    };
    let config_map =
        (!b.stub_domains.is_empty() || !upstreams.is_empty()).then(|| KubeDnsConfigMap {
            stub_domains: std::mem::take(&mut b.stub_domains),
            upstream_nameservers: upstreams,
        });
    if config_map.is_some() {
        b.fallback(Bin::Kube2sky, "config-map", "kube-dns");
    }
    Translation {
        skydns: b.args(Bin::Skydns),
        kube2sky: b.args(Bin::Kube2sky),
        config_map,
        config_key: (!b.config_key.is_empty()).then_some(b.config_key),
        left_out: b.left_out,
        notes: b.notes,
    }
}

#[cfg(test)]
mod tests;
