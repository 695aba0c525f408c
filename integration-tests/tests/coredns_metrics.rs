//! CoreDNS's series, ours beside a real CoreDNS's under the same traffic.
//! CoreDNS runs kubeadm's whole Corefile (health, ready, kubernetes on a
//! real kube-apiserver, prometheus, forward to dnsmasq, cache 30, loop,
//! reload, loadbalance) and skydns the flags that carry it over. Both get
//! the same queries (cluster names, a name that does not exist, forwarded
//! names twice, NXDOMAIN upstream, TCP, IPv6, DO). Then: the `coredns_*`
//! families and their types match but for the lists of docs/monitoring.md
//! ("CoreDNS's series"); each family both serve has the same label names;
//! and the requests, responses, DO requests and upstream exchanges each
//! counted for the traffic are the same, label values included.

#[path = "../../kube2sky/tests/support/mod.rs"]
mod kube2sky_support;

use anyhow::{ensure, Context, Result};
use kube2sky_support::*;
use std::collections::{BTreeMap, BTreeSet};
use test_support::coredns::Coredns;
use test_support::dnsmasq::Dnsmasq;
use test_support::http::{metric, scrape};
use test_support::ports::free_port;
use test_support::skydns::{Launch, Ports, Ready};

const KUBERNETES: &str = "kubernetes.default.svc.cluster.local.";

/// kubeadm's Corefile (Kubernetes 1.36 `kubeadm init`), its ports and
/// upstream moved to free ones on loopback.
fn kubeadm_corefile(dns: u16, ports: [u16; 3], kubeconfig: &str, upstream: u16) -> String {
    let [health, ready, metrics] = ports;
    format!(
        ".:{dns} {{
    errors
    health 127.0.0.1:{health} {{
       lameduck 5s
    }}
    ready 127.0.0.1:{ready}
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
       kubeconfig {kubeconfig}
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }}
    prometheus 127.0.0.1:{metrics}
    forward . 127.0.0.1:{upstream} {{
       max_concurrent 1000
    }}
    cache 30
    loop
    reload
    loadbalance
}}
"
    )
}

/// The traffic: (dig arguments, whether over IPv6).
const TRAFFIC: &[(&[&str], bool)] = &[
    (&[KUBERNETES, "A"], false),
    (&[KUBERNETES, "AAAA"], false),
    (&["+tcp", KUBERNETES, "A"], false),
    (&[KUBERNETES, "A"], true),
    (&["+dnssec", KUBERNETES, "A"], false),
    (&["nosuch.default.svc.cluster.local.", "A"], false),
    (
        &["_https._tcp.kubernetes.default.svc.cluster.local.", "SRV"],
        false,
    ),
    (&["www.example.org.", "A"], false),
    (&["www.example.org.", "A"], false),
    (&["a.nx.example.org.", "A"], false),
    (&["+tcp", "www.example.org.", "MX"], false),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_coredns_series_match_a_real_coredns_under_the_same_traffic() -> Result<()> {
    let plane = ControlPlane::start()?;
    plane.with_logs(compare(&plane).await)
}

async fn compare(plane: &ControlPlane) -> Result<()> {
    let etcd = Etcd::start()?;
    let mut k2s = Kube2sky::start(&etcd, plane, &[])?;
    k2s.wait_ready().await?;
    let upstream = Dnsmasq::start(&[
        "--address=/www.example.org/192.0.2.10",
        "--address=/nx.example.org/",
    ])
    .await?;
    let ours_ports = Ports {
        dns: free_port()?,
        metrics: free_port()?,
    };
    let ours = Launch::new(&etcd.endpoint(), etcd.api())
        .args(&[
            &format!("-addr=[::]:{}", ours_ports.dns),
            &format!("-nameservers=127.0.0.1:{}", upstream.port),
            "-no-rec=false",
            "-rcache=10000",
            "-rcache-ttl=30",
            "-pods=insecure",
            "-loop=exit",
            "-lameduck=5s",
        ])
        .ready(Ready::Answer(KUBERNETES.into()))
        .start_on(ours_ports)
        .await?;
    let kubeconfig = plane.admin_kubeconfig()?;
    let side = [free_port()?, free_port()?, free_port()?];
    let theirs = Coredns::start(
        |port| kubeadm_corefile(port, side, &kubeconfig.display().to_string(), upstream.port),
        KUBERNETES,
    )
    .await?;
    let ours_url = ours.url("/metrics");
    let theirs_url = format!("http://127.0.0.1:{}/metrics", side[2]);
    // Our loop check is done (CoreDNS's asks itself at start: type other).
    eventually("skydns's loop check", DEADLINE, async || {
        let text = scrape(&ours_url).await?;
        let clear = metric(&text, "skydns_dns_loop_checks_total{result=\"clear\"}");
        ensure!(clear == Some(1.0), "{clear:?}");
        Ok(())
    })
    .await?;
    let before = [scrape(&ours_url).await?, scrape(&theirs_url).await?];
    for port in [ours_ports.dns, theirs.port] {
        for (args, ipv6) in TRAFFIC {
            let server = if *ipv6 { "::1" } else { "127.0.0.1" };
            let at = std::net::SocketAddr::new(server.parse()?, port);
            test_support::dns::dig_at(at, args)?;
        }
    }
    // Both count a query once its reply is written, which dig may read
    // first: each scrape is taken once every reply is counted.
    let after = [
        counted(&ours_url, &before[0]).await?,
        counted(&theirs_url, &before[1]).await?,
    ];
    let [ours_before, theirs_before] = &before;
    let [ours_after, theirs_after] = &after;
    compare_families(ours_after, theirs_after)?;
    compare_counts(
        (ours_before, ours_after),
        (theirs_before, theirs_after),
        ours_ports.dns,
        theirs.port,
    )
}

/// A scrape of `url` taken once `coredns_dns_responses_total` has grown by
/// one per query of `TRAFFIC` since `before`.
async fn counted(url: &str, before: &str) -> Result<String> {
    let responses = |text: &str| -> f64 {
        increases((before, text), "coredns_dns_responses_total", &[])
            .values()
            .sum()
    };
    eventually(
        &format!("every reply counted at {url}"),
        DEADLINE,
        async || {
            let text = scrape(url).await?;
            let n = responses(&text);
            ensure!(
                n == TRAFFIC.len() as f64,
                "{n} replies of {}",
                TRAFFIC.len()
            );
            Ok(text)
        },
    )
    .await
}

/// Family name (counters without `_total`) → type, for `coredns_*`.
fn families(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .filter(|(name, _)| name.starts_with("coredns_"))
        .map(|(name, kind)| {
            let name = name.strip_suffix("_total").unwrap_or(name);
            (name.to_string(), kind.trim().to_string())
        })
        .collect()
}

/// Each series line as (family, labels).
fn series(text: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("coredns_")) {
        let (head, _value) = line.rsplit_once(' ').unwrap_or((line, ""));
        let (name, labels) = match head.split_once('{') {
            Some((name, rest)) => (name, rest.trim_end_matches('}')),
            None => (head, ""),
        };
        let family = ["_total", "_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        out.push((family.to_string(), parse_labels(labels)));
    }
    out
}

fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while let Some((key, after)) = rest.split_once("=\"") {
        let end = after.find('"').unwrap_or(after.len());
        labels.insert(
            key.trim_start_matches(',').to_string(),
            after[..end].to_string(),
        );
        rest = after.get(end + 1..).unwrap_or("");
    }
    labels
}

/// The families and types match but for the documented lists; the label
/// names of each family both serve match.
fn compare_families(ours: &str, theirs: &str) -> Result<()> {
    let (o, t) = (families(ours), families(theirs));
    let missing: BTreeSet<_> = t.keys().filter(|k| !o.contains_key(*k)).cloned().collect();
    let extra: BTreeSet<_> = o.keys().filter(|k| !t.contains_key(*k)).cloned().collect();
    let (listed_missing, listed_extra) = documented()?;
    ensure!(
        missing == listed_missing && extra == listed_extra,
        "CoreDNS {}'s families not as docs/monitoring.md lists them:\n\
         not served by skydns: {missing:?} (listed: {listed_missing:?})\n\
         served by skydns only: {extra:?} (listed: {listed_extra:?})",
        test_support::coredns::version()?
    );
    for (name, kind) in &o {
        if let Some(theirs_kind) = t.get(name) {
            ensure!(
                kind == theirs_kind,
                "{name}: ours {kind}, CoreDNS {theirs_kind}"
            );
        }
    }
    let names = |text: &str| -> BTreeMap<String, BTreeSet<Vec<String>>> {
        let mut by_family: BTreeMap<String, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (family, labels) in series(text) {
            let names = labels.into_keys().filter(|k| k != "le").collect();
            by_family.entry(family).or_default().insert(names);
        }
        by_family
    };
    let (o, t) = (names(ours), names(theirs));
    let mut compared = 0;
    for (family, theirs_sets) in &t {
        if let Some(ours_sets) = o.get(family) {
            ensure!(
                ours_sets == theirs_sets,
                "{family}: ours {ours_sets:?}, CoreDNS {theirs_sets:?}"
            );
            compared += 1;
        }
    }
    ensure!(
        compared >= 15,
        "only {compared} families with series on both sides"
    );
    Ok(())
}

/// What docs/monitoring.md lists under "CoreDNS's series": the families
/// CoreDNS serves and skydns does not, and the reverse.
fn documented() -> Result<(BTreeSet<String>, BTreeSet<String>)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/monitoring.md");
    let text = std::fs::read_to_string(path)?;
    let list = |heading: &str| -> Result<BTreeSet<String>> {
        let start = text
            .find(heading)
            .with_context(|| format!("{heading:?} in {path}"))?;
        let body = &text[start + heading.len()..];
        let body = &body[..body.find("\n\n").unwrap_or(body.len())];
        // Each bullet names its families in backquotes before the colon.
        Ok(body
            .lines()
            .filter_map(|l| l.strip_prefix("- "))
            .filter_map(|l| l.split(": ").next())
            .flat_map(|names| names.split('`').skip(1).step_by(2))
            .map(|n| n.strip_suffix("_total").unwrap_or(n).to_string())
            .collect())
    };
    Ok((
        list("CoreDNS series skydns does not serve:\n")?,
        list("Series skydns serves that CoreDNS 1.15 does not:\n")?,
    ))
}

/// The increase of each series of `family` from `before` to `after`, by
/// the labels but `server`, `le` and those in `skip`.
fn increases(
    (before, after): (&str, &str),
    family: &str,
    skip: &[&str],
) -> BTreeMap<Vec<(String, String)>, f64> {
    let values = |text: &str| {
        let mut out = BTreeMap::new();
        for line in text.lines().filter(|l| l.starts_with(family)) {
            let Some((head, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let labels = head
                .split_once('{')
                .map_or("", |(_, l)| l.trim_end_matches('}'));
            if head.split('{').next() != Some(family) {
                continue;
            }
            let key: Vec<(String, String)> = parse_labels(labels)
                .into_iter()
                .filter(|(k, _)| k != "server" && !skip.contains(&k.as_str()))
                .collect();
            *out.entry(key).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
        }
        out
    };
    let (b, a) = (values(before), values(after));
    a.into_iter()
        .map(|(k, v)| {
            let was = b.get(&k).copied().unwrap_or(0.0);
            (k, v - was)
        })
        .filter(|(_, d)| *d != 0.0)
        .collect()
}

/// The same traffic counted the same: requests by proto, family and type,
/// responses by rcode, DO requests, request sizes by proto, and the
/// exchanges with the upstream by rcode; and `server` names each port.
fn compare_counts(
    ours: (&str, &str),
    theirs: (&str, &str),
    our_port: u16,
    their_port: u16,
) -> Result<()> {
    for (family, skip) in [
        ("coredns_dns_requests_total", &[][..]),
        ("coredns_dns_responses_total", &["plugin"][..]),
        ("coredns_dns_do_requests_total", &[][..]),
        ("coredns_dns_request_size_bytes_count", &[][..]),
        ("coredns_dns_response_size_bytes_count", &[][..]),
        ("coredns_proxy_request_duration_seconds_count", &["to"][..]),
    ] {
        let (o, t) = (
            increases(ours, family, skip),
            increases(theirs, family, skip),
        );
        ensure!(!t.is_empty(), "{family}: CoreDNS counted nothing");
        ensure!(
            o == t,
            "{family} increased otherwise:\nours:    {o:?}\nCoreDNS: {t:?}"
        );
    }
    for (text, port) in [(ours.1, our_port), (theirs.1, their_port)] {
        let server = format!("dns://:{port}");
        let found = series(text).into_iter().any(|(family, labels)| {
            family == "coredns_dns_requests" && labels.get("server") == Some(&server)
        });
        ensure!(
            found,
            "no coredns_dns_requests_total{{server={server:?}}} in\n{text}"
        );
    }
    Ok(())
}
