//! The plugin table: which CoreDNS plugins have a counterpart and which
//! family module translates them ([`MAPPED`]), and which have none, with
//! the reason printed for them ([`UNAVAILABLE`]). docs/migrate-check.md
//! shows both tables; a test keeps it in step with them.

/// Plugin → what it becomes (the family module translating it).
pub const MAPPED: &[(&str, &str)] = &[
    (
        "kubernetes",
        "kube2sky --domain, --ttl, --reverse, ...; skydns -domain, -pods",
    ),
    (
        "forward",
        "skydns -nameservers, -ns-*, -max-pending-forwards; stub domains",
    ),
    (
        "cache",
        "skydns -rcache, -rcache-ttl, -rcache-prefetch*, -rcache-stale*",
    ),
    ("health", "skydns /health on -metrics-addr; -lameduck"),
    ("ready", "skydns /ready on -metrics-addr"),
    ("prometheus", "skydns -metrics-addr"),
    ("errors", "nothing to set: skydns logs errors"),
    ("log", "skydns -log-queries"),
    ("loop", "skydns -loop=exit"),
    ("reload", "nothing to set: changes apply live"),
    ("loadbalance", "skydns -round-robin"),
    ("autopath", "skydns -autopath"),
    ("bind", "the IP of skydns -addr"),
    ("dnssec", "skydns -dnssec, -scache"),
    (
        "timeouts",
        "skydns -tcp-read-timeout, -tcp-write-timeout, -tcp-idle-timeout",
    ),
];

/// Plugin → why it is left out.
pub const UNAVAILABLE: &[(&str, &str)] = &[
    ("acl", "no query filtering by client address in kube-dns-rs (a NetworkPolicy can limit who reaches port 53)"),
    ("any", "harmless: skydns answers ANY queries with REFUSED, as SkyDNS did, instead of RFC 8482's short answer"),
    ("auto", "serving zone files is not available in kube-dns-rs"),
    ("azure", "Azure DNS zones are not available in kube-dns-rs"),
    ("bufsize", "the EDNS0 buffer size cannot be set in kube-dns-rs"),
    ("cancel", "harmless: skydns bounds each upstream exchange by -rtimeout"),
    ("chaos", "skydns answers only CHAOS version.bind, with its own version"),
    ("clouddns", "Google Cloud DNS zones are not available in kube-dns-rs"),
    ("debug", "harmless: skydns -verbose logs every query if you want more"),
    ("dns64", "DNS64 is not available in kube-dns-rs"),
    ("dnstap", "dnstap is not available in kube-dns-rs (skydns -log-queries logs queries)"),
    ("erratic", "a testing plugin; nothing in kube-dns-rs stands for it"),
    ("etcd", "CoreDNS's etcd plugin reads another layout; kube2sky writes SkyDNS records itself"),
    ("federation", "kube-dns federations are not available in kube-dns-rs"),
    ("file", "serving zone files is not available in kube-dns-rs"),
    ("geoip", "GeoIP data is not available in kube-dns-rs"),
    ("grpc", "forwarding over gRPC is not available in kube-dns-rs"),
    ("header", "rewriting header bits is not available in kube-dns-rs"),
    ("hosts", "static host entries are not available in kube-dns-rs (a Service, or an ExternalName one, can stand for a name)"),
    ("k8s_external", "answers for Services' external IPs are not available in kube-dns-rs"),
    ("local", "skydns forwards localhost and the other names this plugin answers"),
    ("metadata", "harmless: only other plugins read metadata"),
    ("minimal", "skydns's replies carry their usual authority and additional sections"),
    ("multisocket", "skydns has its own UDP readers; the socket count cannot be set"),
    ("nsid", "NSID is not available in kube-dns-rs"),
    ("on", "event hooks are not available in kube-dns-rs"),
    ("pprof", "harmless: no profiling endpoint in kube-dns-rs"),
    ("proxy", "the plugin CoreDNS replaced with forward: write forward"),
    ("rewrite", "rewriting names is not available in kube-dns-rs: skydns answers names as asked"),
    ("root", "harmless: only other plugins (file, auto, ...) read the root directory"),
    ("route53", "Route 53 zones are not available in kube-dns-rs"),
    ("secondary", "zone transfers in are not available in kube-dns-rs"),
    ("sign", "signing zone files is not available in kube-dns-rs (skydns -dnssec signs the cluster domain)"),
    ("template", "answers made from templates are not available in kube-dns-rs"),
    ("tls", "DNS over TLS listeners are not available in kube-dns-rs"),
    ("trace", "tracing is not available in kube-dns-rs"),
    ("transfer", "zone transfers (AXFR/IXFR) are not available in kube-dns-rs"),
    ("tsig", "TSIG is not available in kube-dns-rs"),
    ("view", "answering by client address or query (views) is not available in kube-dns-rs"),
    ("whoami", "whoami is not available in kube-dns-rs"),
];

/// Why plugin `name` is left out, if it has no counterpart.
pub fn unavailable(name: &str) -> Option<&'static str> {
    UNAVAILABLE
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, why)| *why)
}
