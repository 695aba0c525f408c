//! Each plugin family's translation, the defaults stated as flags, the
//! left-out lines with their reasons, and the doc's plugin tables.

use super::*;
use crate::corefile::{parse, Files, Source};

struct NoFiles;

impl Files for NoFiles {
    fn glob(&self, _: &str) -> Result<Vec<Source>, String> {
        Ok(Vec::new())
    }
}

fn run(text: &str) -> Translation {
    let source = Source {
        label: "Corefile".to_owned(),
        text: text.to_owned(),
    };
    translate(&parse(&source, &NoFiles, &|_| None).expect("parses"))
}

/// A root block holding `body`, with a cluster and the root forwarded.
fn root(body: &str) -> Translation {
    run(&format!(
        ".:53 {{\n kubernetes cluster.local\n forward . /etc/resolv.conf\n{body}\n}}\n"
    ))
}

/// Each left-out line as `line: reason`.
fn left(t: &Translation) -> Vec<String> {
    t.left_out
        .iter()
        .map(|l| format!("{}: {}", l.line, l.reason))
        .collect()
}

fn has(args: &[String], want: &[&str]) {
    for w in want {
        assert!(args.iter().any(|a| a == w), "{w} missing from {args:?}");
    }
}

fn lacks(args: &[String], prefix: &str) {
    assert!(
        !args.iter().any(|a| a.starts_with(prefix)),
        "{prefix} in {args:?}"
    );
}

const KUBEADM: &str = ".:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
";

#[test]
fn kubeadm_s_corefile_is_carried_over_whole() {
    let t = run(KUBEADM);
    assert_eq!(t.left_out, []);
    assert_eq!(
        t.skydns,
        [
            "-addr=0.0.0.0:53",
            "-domain=cluster.local.",
            "-ns-policy=random",
            "-max-pending-forwards=1000",
            "-rcache=19968",
            "-rcache-ttl=30",
            "-rcache-stale=0s",
            "-rcache-prefetch=0",
            "-pods=insecure",
            "-autopath=false",
            "-round-robin=true",
            "-loop=exit",
            "-lameduck=5s",
            "-metrics-addr=0.0.0.0:9153",
        ]
    );
    assert_eq!(
        t.kube2sky,
        ["--domain=cluster.local", "--ttl=30", "--reverse=true"]
    );
    assert_eq!(t.config_map, None);
    assert_eq!(
        t.config_key,
        Some(
            serde_json::json!({"min_ttl": 30})
                .as_object()
                .cloned()
                .unwrap_or_default()
        )
    );
}

#[test]
fn the_kubernetes_plugin_s_defaults_and_limits() {
    let t = run(".:53 {\n kubernetes Cluster.Local. 10.0.0.0/8\n forward . /etc/resolv.conf\n}");
    has(&t.skydns, &["-domain=cluster.local.", "-pods=disabled"]);
    assert_eq!(
        t.kube2sky,
        ["--domain=cluster.local", "--ttl=5", "--reverse=true"]
    );
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("not only those under 10.in-addr.arpa")),
        "{:?}",
        t.notes
    );
    let t = root(" kubernetes other.example\n");
    assert_eq!(
        left(&t),
        ["4: a second kubernetes plugin: kube2sky writes one cluster domain"]
    );
    let t = run(".:53 {\n kubernetes cluster.local example.com {\n  ttl 0\n  namespaces a b\n  endpoint https://10.0.0.1:6443\n  kubeconfig /k.conf prod\n  startup_timeout 20s\n  bogus 1\n }\n forward . /etc/resolv.conf\n}");
    assert_eq!(
        left(&t),
        [
            "2: zone example.com: kube2sky writes the records of one cluster domain (cluster.local)",
            "3: kube2sky refuses --ttl=0 (SkyDNS reads a TTL of 0 as its own default, 3600 s), so records cannot be made uncacheable",
            "4: kube2sky writes the records of every namespace",
            "6: context prod: kube2sky uses the kubeconfig's current context (make prod current in the file)",
            "8: kubernetes has no option \"bogus\" that kube-dns-migrate knows",
        ]
    );
    assert_eq!(
        t.kube2sky,
        [
            "--domain=cluster.local",
            "--ttl=5",
            "--reverse=false",
            "--kube-master-url=https://10.0.0.1:6443",
            "--kubecfg-file=/k.conf",
            "--initial-sync-timeout=20s",
        ]
    );
    let t =
        run(".:53 {\n kubernetes cluster.local {\n  ttl 600\n }\n forward . /etc/resolv.conf\n}");
    has(&t.kube2sky, &["--ttl=600"]);
    assert_eq!(
        t.config_key
            .as_ref()
            .and_then(|k| k.get("min_ttl"))
            .cloned(),
        Some(300.into())
    );
}

#[test]
fn the_root_zone_s_upstreams_become_nameservers_and_the_config_map_s() {
    let t = run(".:53 {\n forward . 10.0.0.2 dns://10.0.0.3:5353 [fd00::1]:53 {\n  max_fails 3\n  health_check 1s no_rec domain example.org\n  policy sequential\n  prefer_udp\n  expire 10s\n  tls_servername dns.example\n }\n}");
    has(
        &t.skydns,
        &[
            "-nameservers=10.0.0.2:53,10.0.0.3:5353,[fd00::1]:53",
            // CoreDNS: down past 3 failures; skydns: at 4.
            "-ns-fail-threshold=4",
            "-ns-probe-interval=1s",
            "-ns-probe-name=example.org",
            "-ns-policy=sequential",
            "-ns-transport=udp",
            "-max-pending-forwards=0",
        ],
    );
    let cm = t.config_map.clone().expect("a ConfigMap");
    assert_eq!(
        cm.upstream_nameservers,
        ["10.0.0.2", "10.0.0.3:5353", "fd00::1"]
    );
    assert_eq!(
        t.kube2sky.last().map(String::as_str),
        Some("--config-map=kube-dns")
    );
    assert_eq!(
        left(&t),
        [
            "7: expire: skydns's upstream connections have no such setting",
            "8: tls_servername: DNS over TLS upstreams are not available yet",
        ]
    );
    let t = run(".:53 {\n forward . 10.0.0.1 10.0.0.2 10.0.0.3 10.0.0.4\n}");
    assert_eq!(t.config_map, None);
    assert!(t
        .notes
        .iter()
        .any(|n| n.starts_with("4 upstreams: kube-dns's ConfigMap takes at most 3")));
    for (to, why) in [
        ("tls://9.9.9.9", "tls://9.9.9.9: DNS over TLS upstreams are not available yet"),
        ("/run/resolv.conf", "/run/resolv.conf: skydns reads the upstreams of /etc/resolv.conf only (else -nameservers names them)"),
        ("/etc/resolv.conf 10.0.0.2", "mixes resolv.conf files and addresses: skydns takes either -nameservers or /etc/resolv.conf"),
        ("ns1.example.org", "ns1.example.org is not an IP address, IP:port or resolv.conf path"),
    ] {
        let t = run(&format!(".:53 {{\n forward . {to}\n}}"));
        assert_eq!(left(&t), [format!("2: {why}")], "{to}");
        has(&t.skydns, &["-no-rec=true"]);
    }
}

#[test]
fn other_zones_forwarded_are_stub_domains() {
    let t = run(".:53 {\n kubernetes cluster.local\n forward example.org 10.0.0.53:5353\n forward . /etc/resolv.conf\n}\nconsul.local:53 {\n errors\n cache 30\n log\n forward . 10.150.0.1 10.150.0.2 {\n  force_tcp\n }\n rewrite name a b\n}\nsvc.cluster.local {\n forward . 10.0.0.9\n}\nother.org:5353 {\n forward . 10.0.0.1\n}");
    let cm = t.config_map.clone().expect("a ConfigMap");
    assert_eq!(
        serde_json::to_string(&cm.stub_domains).unwrap_or_default(),
        r#"{"consul.local":["10.150.0.1","10.150.0.2"],"example.org":["10.0.0.53:5353"]}"#
    );
    assert_eq!(cm.upstream_nameservers, Vec::<String>::new());
    has(&t.skydns, &["-stubzones=true", "-log-queries=all"]);
    lacks(&t.skydns, "-nameservers");
    assert_eq!(
        t.kube2sky.last().map(String::as_str),
        Some("--config-map=kube-dns")
    );
    assert_eq!(
        left(&t),
        [
            "11: force_tcp: a stub domain takes only its servers (skydns's -ns-* settings are the root zone's upstreams')",
            "13: rewriting names is not available in kube-dns-rs: skydns answers names as asked",
            "16: stub domain svc.cluster.local: kube2sky refuses a stub domain at, inside or above the cluster domain (skydns asks stub zones before its own records, so it would forward the cluster's names)",
            "18: key other.org:5353: skydns listens on one address (-addr, port 53 here); a server on port 5353 is not carried over (nothing of this block is carried over)",
            "19: its server block (line 18) is not carried over",
        ]
    );
    let t = run(".:53 {\n kubernetes cluster.local in-addr.arpa\n forward 10.in-addr.arpa 10.0.0.53\n forward svc.cluster.local 10.0.0.54\n}\nlocal {\n forward . 10.0.0.1\n}\nweird_zone {\n forward . 10.0.0.1\n}");
    let overlap = "kube2sky refuses a stub domain at, inside or above the cluster domain (skydns asks stub zones before its own records, so it would forward the cluster's names)";
    assert_eq!(
        left(&t),
        [
            format!("4: stub domain svc.cluster.local: {overlap}"),
            format!("7: stub domain local: {overlap}"),
            "10: stub domain weird_zone: not a DNS-1123 name, which kube-dns's ConfigMap takes"
                .to_owned(),
        ]
    );
    let stubs = t.config_map.map(|cm| cm.stub_domains).unwrap_or_default();
    assert_eq!(
        stubs.keys().collect::<Vec<_>>(),
        ["10.in-addr.arpa"],
        "a reverse zone is a stub domain as in kube-dns"
    );
}

#[test]
fn the_cache_maps_to_the_response_cache() {
    let t = root(" cache {\n  success 5000 300 10\n  denial 1000\n  prefetch 10 2m 20%\n  serve_stale\n  servfail 0s\n  disable success cluster.local\n  disable denial example.org\n  keepttl\n }");
    has(
        &t.skydns,
        &[
            "-rcache=6000",
            "-rcache-ttl=300",
            "-rcache-prefetch=10",
            "-rcache-prefetch-percent=20",
            "-rcache-stale=1h",
            "-rcache-stale-timeout=0s",
        ],
    );
    assert_eq!(
        left(&t),
        [
            "5: a minimum TTL: skydns keeps a reply for its own TTL, with no floor",
            "7: 2m: skydns counts the requests since a reply was stored, not within a window (CoreDNS's default window is 1m)",
            "11: skydns caches every forwarded reply: only the cluster domain's can be left uncached (as they always are)",
            "12: skydns counts the TTLs of cached replies down",
        ]
    );
    let t = root(" cache 60 {\n  serve_stale 30m verify\n  denial 9984 30\n  servfail 5s\n }");
    has(
        &t.skydns,
        &["-rcache=19968", "-rcache-ttl=60", "-rcache-stale=30m"],
    );
    lacks(&t.skydns, "-rcache-stale-timeout");
    assert_eq!(
        left(&t),
        [
            "7: skydns never caches SERVFAIL replies",
            "6: a denial TTL (30) apart from the success TTL (60): skydns has one TTL cap",
        ]
    );
    let t = root(" cache");
    has(
        &t.skydns,
        &[
            "-rcache=19968",
            "-rcache-ttl=3600",
            "-rcache-stale=0s",
            "-rcache-prefetch=0",
        ],
    );
    let t = root("");
    has(&t.skydns, &["-rcache=0"]);
    lacks(&t.skydns, "-rcache-ttl");
}

#[test]
fn endpoints_probes_and_the_listener() {
    let t = root(" prometheus\n health :8080 {\n  lameduck 10s\n }\n ready :8181\n bind 10.0.0.10");
    has(
        &t.skydns,
        &[
            "-metrics-addr=127.0.0.1:9153",
            "-lameduck=10s",
            "-addr=10.0.0.10:53",
        ],
    );
    assert!(t.notes.iter().any(|n| n.ends_with("health: skydns serves /health on -metrics-addr (127.0.0.1:9153), not on :8080: point the livenessProbe there")), "{:?}", t.notes);
    let t =
        run("dns://.:1053 tls://.:853 {\n health :8080\n ready\n forward . /etc/resolv.conf\n}");
    has(
        &t.skydns,
        &["-addr=0.0.0.0:1053", "-metrics-addr=0.0.0.0:8080"],
    );
    assert_eq!(
        left(&t),
        ["1: key tls://.:853: tls:// listeners (DNS over TLS, HTTPS, gRPC or QUIC) are not available in kube-dns-rs, which serves plain DNS over UDP and TCP"]
    );
    let t = root(" bind lo\n bind 10.0.0.1 10.0.0.2");
    assert_eq!(
        left(&t),
        [
            "4: lo: skydns listens on an IP address (-addr), not an interface",
            "5: skydns listens on one address (-addr)",
        ]
    );
}

#[test]
fn the_smaller_plugins() {
    let t = root(" log . {\n  class denial error\n }\n autopath @kubernetes\n loadbalance round_robin\n loop\n timeouts {\n  read 3s\n  idle 30s\n }\n dnssec cluster.local {\n  key file /keys/Kcluster.local.+013+12345\n  cache_capacity 5000\n }");
    has(
        &t.skydns,
        &[
            "-log-queries=denial,error",
            "-autopath=true",
            "-round-robin=true",
            "-loop=exit",
            "-tcp-read-timeout=3s",
            "-tcp-idle-timeout=30s",
            "-dnssec=/keys/Kcluster.local.+013+12345",
            "-scache=5000",
        ],
    );
    assert_eq!(t.left_out, []);
    let t = root(" log example.org \"{remote} {name}\"\n autopath cluster.local /etc/resolv.conf\n loadbalance weighted /w.txt\n dnssec example.org\n debug\n whoami\n frobnicate");
    assert_eq!(
        left(&t),
        [
            "4: logs some names only: skydns's query log takes every name",
            "4: a format of its own: skydns writes its own fields (client, proto, name, qtype, rcode, ...)",
            "5: skydns's -autopath walks the pods' search lists from kube2sky's pod records (autopath @kubernetes), not from a zone list or resolv.conf",
            "6: only round_robin: skydns shuffles A and AAAA answers (-round-robin), with no weights",
            "7: skydns signs the cluster domain only (-dnssec)",
            "7: no key file: skydns -dnssec signs with a key pair from files",
            "8: harmless: skydns -verbose logs every query if you want more",
            "9: whoami is not available in kube-dns-rs",
            "10: frobnicate is no CoreDNS plugin kube-dns-migrate knows: nothing in kube-dns-rs stands for it",
        ]
    );
}

#[test]
fn a_flag_set_twice_differently_leaves_the_second_line_out() {
    let t = run(".:53 {\n kubernetes cluster.local\n forward . /etc/resolv.conf\n prometheus :9153\n}\nconsul.local {\n forward . 10.0.0.1\n prometheus :9253\n log\n}");
    assert_eq!(
        left(&t),
        ["8: conflicts with another line: it would set -metrics-addr=0.0.0.0:9253, but line 4 set -metrics-addr=0.0.0.0:9153"]
    );
    has(
        &t.skydns,
        &["-metrics-addr=0.0.0.0:9153", "-log-queries=all"],
    );
    assert!(
        t.notes
            .iter()
            .any(|n| n
                .ends_with("log: -log-queries logs every zone's replies, not only this block's"))
    );
}

#[test]
fn without_a_root_block_nothing_else_is_forwarded() {
    let t = run("cluster.local:1053 {\n kubernetes\n cache 30\n}");
    has(
        &t.skydns,
        &[
            "-addr=0.0.0.0:1053",
            "-domain=cluster.local.",
            "-no-rec=true",
            "-rcache=19968",
        ],
    );
    assert_eq!(
        t.kube2sky,
        ["--domain=cluster.local", "--ttl=5", "--reverse=false"]
    );
    assert_eq!(t.left_out, []);
}

/// docs/migrate-check.md lists every plugin of both tables, with its reason.
#[test]
fn the_doc_shows_the_plugin_tables() {
    let doc = include_str!("../../../docs/migrate-check.md");
    for (name, target) in table::MAPPED {
        assert!(
            doc.contains(&format!("| `{name}` | {target} |")),
            "MAPPED {name} not in the doc"
        );
    }
    for (name, why) in table::UNAVAILABLE {
        assert!(
            doc.contains(&format!("| `{name}` | {why} |")),
            "UNAVAILABLE {name} not in the doc"
        );
    }
}

#[test]
fn a_zero_health_check_interval_is_left_out_and_a_huge_cache_does_not_wrap() {
    let t = run(".:53 {\n forward . 10.0.0.2 {\n  health_check 0s\n  max_fails 0\n }\n cache 30 {\n  success 4294967295\n  denial 1\n }\n}");
    assert!(
        t.left_out
            .iter()
            .any(|l| l.text.starts_with("health_check 0s")),
        "{:?}",
        t.left_out
    );
    has(&t.skydns, &["-ns-fail-threshold=0", "-rcache=4294967296"]);
}
