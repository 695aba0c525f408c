//! `-autopath` end to end: kube2sky writes the pods of the API test server,
//! skydns (with a dnsmasq upstream) answers real `dig` clients that bind a
//! pod's address on the loopback (`dig -b 127.0.0.9`), over UDP and TCP.
//! A pod's first search step is answered with a CNAME to the name that
//! exists (an external name, a service of another namespace); its own
//! services as usual; a name that exists nowhere is the asked name's
//! NXDOMAIN. A client that is not a pod, a pod of another namespace, a DO
//! query and a skydns without `-autopath` get today's NXDOMAIN, and no
//! reply meant for one client reaches another through a cache. Run on v2
//! and v3 by the test command (`E2E_ETCD_API`).

#[path = "../../kube2sky/tests/support/mod.rs"]
mod kube2sky_support;

use anyhow::{ensure, Result};
use kube2sky_support::*;
use kube_api_test_server::ResourceKind;
use test_support::dns::{dig_reply, Reply};
use test_support::dnsmasq::Dnsmasq;
use test_support::http::{metric, scrape};
use test_support::skydns::SkydnsBinary;

/// A pod of namespace `web`, one of `other`, and an address that is no pod.
const WEB_POD: &str = "127.0.0.9";
const OTHER_POD: &str = "127.0.0.11";
const NOT_A_POD: &str = "127.0.0.10";

const EXTERNAL: &str = "api.example.com.web.svc.cluster.local.";
const OTHER_NS: &str = "db.other.web.svc.cluster.local.";
const OWN_NS: &str = "cache.web.svc.cluster.local.";
const NOWHERE: &str = "missing.example.com.web.svc.cluster.local.";

fn service(
    api: &kube_api_test_server::ApiServerHandle,
    ns: &str,
    name: &str,
    ip: &str,
) -> Result<()> {
    let body = serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterIP": ip, "ports": [{"name": "http", "protocol": "TCP", "port": 80}]},
    });
    api.store()
        .create(ResourceKind::Service, Some(ns), body, true)?;
    Ok(())
}

async fn ask(port: u16, from: &str, name: &str, extra: &[&str]) -> Result<Reply> {
    let mut args = vec!["-b", from, name, "A"];
    args.extend_from_slice(extra);
    dig_reply(port, &args).await
}

fn cname<'a>(name: &'a str, target: &'a str) -> impl Fn(&String) -> bool + 'a {
    move |line: &String| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.first() == Some(&name)
            && fields.get(3) == Some(&"CNAME")
            && fields.get(4) == Some(&target)
    }
}

fn a_record(ip: &str) -> impl Fn(&String) -> bool + '_ {
    move |line: &String| line.split_whitespace().nth(3) == Some("A") && line.ends_with(ip)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_search_path_is_walked_at_the_server_and_no_one_else_gets_its_answers() -> Result<()>
{
    let (etcd, api, _kubectl, _k2s) = cluster(&[]).await?;
    for ns in ["web", "other"] {
        let body =
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        api.store()
            .create(ResourceKind::Namespace, None, body, true)?;
    }
    create_pod(&api, "web", "client", WEB_POD)?;
    create_pod(&api, "other", "client", OTHER_POD)?;
    service(&api, "other", "db", "10.0.0.50")?;
    service(&api, "web", "cache", "10.0.0.60")?;
    // A namespace named like a name pods look up: its directory
    // (`redis.svc.cluster.local`) must not answer a walk for `redis`.
    let body =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "redis"}});
    api.store()
        .create(ResourceKind::Namespace, None, body, true)?;
    service(&api, "redis", "x", "10.0.0.70")?;
    wait_for_keys(&etcd, "/skydns/local/cluster/pod/web/", 1).await?;
    wait_for_keys(&etcd, "/skydns/local/cluster/pod/other/", 1).await?;
    wait_for_keys(&etcd, "/skydns/local/cluster/svc/other/db/", 2).await?;
    wait_for_keys(&etcd, "/skydns/local/cluster/svc/redis/x/", 2).await?;
    let upstream = Dnsmasq::start(&[
        "--address=/api.example.com/192.0.2.7",
        "--address=/missing.example.com/",
    ])
    .await?;
    let forward = format!("-nameservers=127.0.0.1:{}", upstream.port);
    let flags = ["-no-rec=false", "-rcache=100", &forward];
    let ready = "cache.web.svc.cluster.local.";
    let on = SkydnsBinary::start(
        &etcd.endpoint(),
        etcd.api(),
        &[&flags[..], &["-autopath"]].concat(),
        ready,
    )
    .await?;
    let off = SkydnsBinary::start(&etcd.endpoint(), etcd.api(), &flags, ready).await?;
    let (port, port_off) = (on.ports().dns, off.ports().dns);

    // A client that is no pod asks first: today's NXDOMAIN, which must not
    // be reused for the pod below.
    let r = ask(port, NOT_A_POD, EXTERNAL, &[]).await?;
    ensure!(
        r.status == "NXDOMAIN" && r.answer.is_empty(),
        "not a pod: {r:?}"
    );

    // The pod of `web`: one round trip for an external name...
    let r = ask(port, WEB_POD, EXTERNAL, &[]).await?;
    ensure!(r.status == "NOERROR", "{r:?}");
    ensure!(
        r.answer.iter().any(cname(EXTERNAL, "api.example.com.")),
        "{r:?}"
    );
    ensure!(r.answer.iter().any(a_record("192.0.2.7")), "{r:?}");
    // ...over TCP too...
    let r = ask(port, WEB_POD, EXTERNAL, &["+tcp"]).await?;
    ensure!(r.answer.iter().any(a_record("192.0.2.7")), "tcp: {r:?}");
    // ...for a service of another namespace (`db.other`)...
    let r = ask(port, WEB_POD, OTHER_NS, &[]).await?;
    ensure!(
        r.answer
            .iter()
            .any(cname(OTHER_NS, "db.other.svc.cluster.local.")),
        "{r:?}"
    );
    ensure!(r.answer.iter().any(a_record("10.0.0.50")), "{r:?}");
    // ...its own services as always, with no CNAME...
    let r = ask(port, WEB_POD, OWN_NS, &[]).await?;
    ensure!(r.status == "NOERROR" && r.answer.len() == 1, "{r:?}");
    ensure!(r.answer.iter().any(a_record("10.0.0.60")), "{r:?}");
    // ...and a name that exists nowhere is the asked name's NXDOMAIN, as
    // is one whose only match is a namespace's directory.
    let r = ask(port, WEB_POD, NOWHERE, &[]).await?;
    ensure!(r.status == "NXDOMAIN" && r.answer.is_empty(), "{r:?}");
    let r = ask(port, WEB_POD, "redis.web.svc.cluster.local.", &[]).await?;
    ensure!(
        r.status == "NXDOMAIN" && r.answer.is_empty(),
        "namespace directory: {r:?}"
    );
    // A CNAME that says the names before it do not exist lasts no longer
    // than their NXDOMAIN would (the SOA minimum, 60).
    let r = ask(port, WEB_POD, EXTERNAL, &[]).await?;
    let ttl = |line: &String| {
        line.split_whitespace()
            .nth(1)
            .and_then(|t| t.parse::<u32>().ok())
    };
    let cname_ttl = r
        .answer
        .iter()
        .find(|l| cname(EXTERNAL, "api.example.com.")(l))
        .and_then(ttl);
    ensure!(cname_ttl.is_some_and(|t| t <= 60), "{r:?}");

    // After the pod's walks: no one else gets them, from any cache.
    for (who, name) in [
        (NOT_A_POD, EXTERNAL),
        (OTHER_POD, EXTERNAL),
        (NOT_A_POD, OTHER_NS),
    ] {
        let r = ask(port, who, name, &[]).await?;
        ensure!(
            r.status == "NXDOMAIN" && r.answer.is_empty(),
            "{who} {name}: {r:?}"
        );
    }
    // DO queries are not walked (a chain of missing names cannot be signed).
    let r = ask(port, WEB_POD, EXTERNAL, &["+dnssec"]).await?;
    ensure!(r.status == "NXDOMAIN", "DO: {r:?}");
    // Without -autopath, the pod gets today's answers.
    let r = ask(port_off, WEB_POD, EXTERNAL, &[]).await?;
    ensure!(r.status == "NXDOMAIN" && r.answer.is_empty(), "off: {r:?}");

    let text = scrape(&on.url("/metrics")).await?;
    let hits = metric(&text, r#"skydns_dns_autopath_total{result="hit"}"#);
    let misses = metric(&text, r#"skydns_dns_autopath_total{result="miss"}"#);
    ensure!(
        hits == Some(4.0) && misses == Some(2.0),
        "hits {hits:?}, misses {misses:?}"
    );
    let off_text = scrape(&off.url("/metrics")).await?;
    ensure!(
        !off_text.contains("skydns_dns_autopath_total{"),
        "{off_text}"
    );
    Ok(())
}

/// A network namespace with one veth into the host's, `/etc/netns/<name>/
/// resolv.conf` (which `ip netns exec` mounts over `/etc/resolv.conf`)
/// naming the host end: a pod's network as glibc sees it. Removed on drop.
struct PodNetwork {
    name: String,
    host: String,
    pod: String,
}

impl PodNetwork {
    /// A namespace whose resolver is `host:53`, searching as a pod of `ns`.
    fn create(ns: &str) -> Result<Self> {
        let id = std::process::id();
        // 198.18.0.0/15 is for benchmarks and tests (RFC 2544): no real
        // network's routes are taken. A /30 per process id.
        let n = id % (1 << 15);
        let (a, b, c) = (18 + (n >> 14), (n >> 6) & 0xff, (n & 0x3f) << 2);
        let name = format!("kdrs-autopath-{id}");
        let net = PodNetwork {
            host: format!("198.{a}.{b}.{}", c + 1),
            pod: format!("198.{a}.{b}.{}", c + 2),
            name,
        };
        // What a killed run with this process id may have left.
        net.remove();
        let (outside, inside) = (format!("kda{id}"), format!("kdb{id}"));
        let run = |args: &[&str]| -> Result<()> {
            let out = std::process::Command::new("ip").args(args).output()?;
            ensure!(
                out.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            Ok(())
        };
        run(&["netns", "add", &net.name])?;
        run(&[
            "link", "add", &outside, "type", "veth", "peer", "name", &inside,
        ])?;
        run(&["link", "set", &inside, "netns", &net.name])?; // else dropped below
        run(&["addr", "add", &format!("{}/30", net.host), "dev", &outside])?;
        run(&["link", "set", &outside, "up"])?;
        let exec = ["netns", "exec", &net.name, "ip"];
        run(&[
            &exec[..],
            &["addr", "add", &format!("{}/30", net.pod), "dev", &inside],
        ]
        .concat())?;
        run(&[&exec[..], &["link", "set", &inside, "up"]].concat())?;
        run(&[&exec[..], &["link", "set", "lo", "up"]].concat())?;
        let dir = format!("/etc/netns/{}", net.name);
        std::fs::create_dir_all(&dir)?;
        // One attempt per question, however loaded the machine: what the
        // test counts is the client's questions, never a retry of them.
        let resolv = format!(
            "search {ns}.svc.cluster.local svc.cluster.local cluster.local\nnameserver {}\noptions ndots:5 timeout:30 attempts:1\n",
            net.host
        );
        std::fs::write(format!("{dir}/resolv.conf"), resolv)?;
        Ok(net)
    }

    /// `getent ahosts name` in the namespace (glibc's getaddrinfo): the
    /// addresses it printed (none when the name is not found).
    fn getent(&self, name: &str) -> Result<Vec<String>> {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &self.name, "getent", "ahosts", name])
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut ips: Vec<String> = text
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(String::from)
            .collect();
        ips.dedup();
        Ok(ips)
    }
}

impl Drop for PodNetwork {
    fn drop(&mut self) {
        self.remove();
    }
}

impl PodNetwork {
    /// Removes the namespace (and the veth pair with it), the host end if
    /// it never moved, and the resolv.conf.
    fn remove(&self) {
        let ip = |args: &[&str]| {
            let _ = std::process::Command::new("ip")
                .args(args)
                .stderr(std::process::Stdio::null())
                .status();
        };
        ip(&["netns", "del", &self.name]);
        ip(&["link", "del", &format!("kda{}", std::process::id())]);
        let _ = std::fs::remove_dir_all(format!("/etc/netns/{}", self.name));
    }
}

/// UDP queries skydns has received so far.
async fn queries(skydns: &SkydnsBinary) -> Result<f64> {
    let text = scrape(&skydns.url("/metrics")).await?;
    Ok(metric(&text, r#"skydns_dns_request_count_total{type="udp"}"#).unwrap_or(0.0))
}

/// The queries each lookup of `names` by glibc costs, and what it found.
async fn lookups(
    net: &PodNetwork,
    skydns: &SkydnsBinary,
    names: &[&str],
) -> Result<Vec<(f64, Vec<String>)>> {
    let mut out = Vec::new();
    for name in names {
        let before = queries(skydns).await?;
        let found = net.getent(name)?;
        out.push((queries(skydns).await? - before, found));
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glibc_in_a_pods_network_needs_one_round_trip_per_family_with_autopath() -> Result<()> {
    ensure!(
        nix::unistd::geteuid().is_root(),
        "this test makes a network namespace: run it as root (CI does)"
    );
    let (etcd, api, _kubectl, _k2s) = cluster(&[]).await?;
    for ns in ["web", "other"] {
        let body =
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        api.store()
            .create(ResourceKind::Namespace, None, body, true)?;
    }
    let net = PodNetwork::create("web")?;
    create_pod(&api, "web", "client", &net.pod)?;
    service(&api, "other", "db", "10.0.0.50")?;
    service(&api, "web", "cache", "10.0.0.60")?;
    wait_for_keys(&etcd, "/skydns/local/cluster/pod/web/", 1).await?;
    wait_for_keys(&etcd, "/skydns/local/cluster/svc/other/db/", 2).await?;
    wait_for_keys(&etcd, "/skydns/local/cluster/svc/web/cache/", 2).await?;
    let upstream = Dnsmasq::start(&[
        "--address=/api.example.com/192.0.2.7",
        "--address=/missing.example.com/",
    ])
    .await?;
    let forward = format!("-nameservers=127.0.0.1:{}", upstream.port);
    let addr = format!("-addr={}:53", net.host);
    let names = [
        "api.example.com",
        "db.other",
        "cache",
        "missing.example.com",
    ];
    let mut costs = Vec::new();
    for autopath in [false, true] {
        let flags = [
            "-no-rec=false",
            "-rcache=100",
            &forward,
            &addr,
            &format!("-autopath={autopath}"),
        ];
        let skydns = test_support::skydns::Launch::new(&etcd.endpoint(), etcd.api())
            .args(&flags)
            .ready(test_support::skydns::Ready::Health)
            .start()
            .await?;
        let found = lookups(&net, &skydns, &names).await?;
        let expected: [&[&str]; 4] = [&["192.0.2.7"], &["10.0.0.50"], &["10.0.0.60"], &[]];
        for ((name, (_, ips)), want) in names.iter().zip(&found).zip(expected) {
            ensure!(
                ips == want,
                "autopath={autopath}: {name} gave {ips:?}, want {want:?}"
            );
        }
        costs.push(found.iter().map(|(n, _)| *n).collect::<Vec<f64>>());
    }
    // The own namespace's service is the first search step either way: one
    // query per address family glibc asks.
    let families = costs[0][2];
    ensure!(families >= 1.0 && costs[1][2] == families, "{costs:?}");
    let (off, on) = (&costs[0], &costs[1]);
    eprintln!("queries per lookup of {names:?}: without autopath {off:?}, with {on:?}");
    ensure!(
        off[..2] == [4.0 * families, 2.0 * families],
        "without autopath: {off:?}"
    );
    ensure!(on[..2] == [families, families], "with autopath: {on:?}");
    // A name that exists nowhere: the asked name's NXDOMAIN, then glibc's
    // own search as before (an NXDOMAIN for the first step is the truth).
    ensure!(
        off[3] == 4.0 * families && on[3] == 4.0 * families,
        "{costs:?}"
    );
    Ok(())
}
