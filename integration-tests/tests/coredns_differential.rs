//! Our answers beside CoreDNS's, query by query. One real kube-apiserver
//! holds the DNS specification's cases (`kube2sky_support::objects`) and a
//! few more; kube2sky → etcd → skydns serves them, and so does CoreDNS's
//! kubernetes plugin configured as kubeadm ships it (`pods verified`, the
//! pod mode matching skydns's default; then pod names with both in
//! `insecure`, kubeadm's). Both are asked the same questions over UDP and
//! TCP, and every part of each reply is compared: rcode, flags, answer,
//! authority, additional (records in any order, TTLs included). The
//! differences found must be exactly the ones docs/compatibility.md lists
//! under "Differences from CoreDNS", so a new one fails the test.

#[path = "../../kube2sky/tests/support/mod.rs"]
mod kube2sky_support;

use anyhow::{ensure, Context, Result};
use kube2sky_support::objects::*;
use kube2sky_support::*;
use std::collections::{BTreeMap, BTreeSet};
use test_support::coredns::{kubeadm_corefile, Coredns};
use test_support::dns::{query, Reply, Transport};

/// More cases: a ClusterIP and a headless service without endpoints, a
/// service with an unnamed port, and a service of another namespace.
const MORE: &[&str] = &[
    r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"lonely","namespace":"conf"},
 "spec":{"clusterIP":"10.0.0.30","ports":[{"name":"http","port":80,"protocol":"TCP"}]}}"#,
    r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"empty","namespace":"conf"},
 "spec":{"clusterIP":"None","ports":[{"name":"http","port":80,"protocol":"TCP"}]}}"#,
    r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"plain","namespace":"conf"},
 "spec":{"clusterIP":"10.0.0.31","ports":[{"port":8080,"protocol":"TCP"}]}}"#,
    r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"other"}}"#,
    r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"other"},
 "spec":{"clusterIP":"10.0.0.40","ports":[{"name":"http","port":80,"protocol":"TCP"}]}}"#,
];

/// The questions: the DNS specification 1.1.0's record types, and its
/// NXDOMAIN and NODATA cases.
const QUESTIONS: &[(&str, &str)] = &[
    ("dns-version.cluster.local.", "TXT"),
    ("kubernetes.default.svc.cluster.local.", "A"),
    ("kubernetes.default.svc.cluster.local.", "AAAA"),
    ("_https._tcp.kubernetes.default.svc.cluster.local.", "SRV"),
    ("dual.conf.svc.cluster.local.", "A"),
    ("dual.conf.svc.cluster.local.", "AAAA"),
    ("dual.conf.svc.cluster.local.", "SRV"),
    ("dual.conf.svc.cluster.local.", "TXT"),
    ("_http._tcp.dual.conf.svc.cluster.local.", "SRV"),
    ("_nope._tcp.dual.conf.svc.cluster.local.", "SRV"),
    ("plain.conf.svc.cluster.local.", "A"),
    ("plain.conf.svc.cluster.local.", "SRV"),
    ("lonely.conf.svc.cluster.local.", "A"),
    ("_http._tcp.lonely.conf.svc.cluster.local.", "SRV"),
    ("headless.conf.svc.cluster.local.", "A"),
    ("headless.conf.svc.cluster.local.", "AAAA"),
    ("headless.conf.svc.cluster.local.", "SRV"),
    ("_http._tcp.headless.conf.svc.cluster.local.", "SRV"),
    ("pet-0.headless.conf.svc.cluster.local.", "A"),
    ("pet-0.headless.conf.svc.cluster.local.", "AAAA"),
    ("pet-3.headless.conf.svc.cluster.local.", "A"),
    ("empty.conf.svc.cluster.local.", "A"),
    ("ext.conf.svc.cluster.local.", "A"),
    ("ext.conf.svc.cluster.local.", "CNAME"),
    ("web.other.svc.cluster.local.", "A"),
    ("10-1-0-50.conf.pod.cluster.local.", "A"),
    ("fd00--50.conf.pod.cluster.local.", "AAAA"),
    ("10-9-9-9.conf.pod.cluster.local.", "A"),
    ("missing.conf.svc.cluster.local.", "A"),
    ("dual.missing.svc.cluster.local.", "A"),
    ("conf.svc.cluster.local.", "A"),
    ("svc.cluster.local.", "A"),
    ("cluster.local.", "SOA"),
    ("20.0.0.10.in-addr.arpa.", "PTR"),
    ("1.0.1.10.in-addr.arpa.", "PTR"),
    ("3.0.1.10.in-addr.arpa.", "PTR"),
    (
        "0.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.0.0.0.0.0.0.0.d.f.ip6.arpa.",
        "PTR",
    ),
    (
        "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.",
        "PTR",
    ),
];

/// Pod names asked of skydns `-pods=insecure` and CoreDNS `pods insecure`:
/// a pod that runs, one that does not, the other family, another
/// namespace, and a name that spells no address.
const INSECURE_QUESTIONS: &[(&str, &str)] = &[
    ("10-1-0-50.conf.pod.cluster.local.", "A"),
    ("10-9-9-9.conf.pod.cluster.local.", "A"),
    ("10-9-9-9.conf.pod.cluster.local.", "AAAA"),
    ("fd00--9.conf.pod.cluster.local.", "AAAA"),
    ("10-9-9-9.default.pod.cluster.local.", "A"),
    ("10-9-9-9.no-such-ns.pod.cluster.local.", "A"),
    ("web-0.conf.pod.cluster.local.", "A"),
];

/// The heading of the list in docs/compatibility.md.
const DIFFERENCES: &str = "## Differences from CoreDNS";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_real_apiserver_coredns_answers_as_we_do_but_for_the_listed_differences(
) -> Result<()> {
    let plane = ControlPlane::start()?;
    plane.with_logs(compare(&plane).await)
}

async fn compare(plane: &ControlPlane) -> Result<()> {
    let etcd = Etcd::start()?;
    let kubectl = plane.kubectl()?;
    for manifest in [NAMESPACE, DUAL, HEADLESS, EXTERNAL, SLICES]
        .iter()
        .chain(MORE)
    {
        kubectl.with_manifest("create", manifest)?;
    }
    KubeApi::create_pod(plane, NS, "pod-a", &["10.1.0.50", "fd00::50"])?;
    let mut k2s = Kube2sky::start(&etcd, plane, &["--endpoints-source=auto"])?;
    k2s.wait_ready().await?;
    k2s.wait_for_log("full sync of pods done").await?;
    let ours = skydns_binary(
        &etcd.endpoint(),
        etcd.api(),
        &[],
        "kubernetes.default.svc.cluster.local.",
    )
    .await?;
    let kubeconfig = plane.admin_kubeconfig()?;
    let theirs = Coredns::start(
        |port| kubeadm_corefile(port, &kubeconfig, "verified"),
        "kubernetes.default.svc.cluster.local.",
    )
    .await?;
    // Both have everything once the last object written answers on each.
    for port in [ours.port, theirs.port] {
        let last = "fd00--50.conf.pod.cluster.local.";
        eventually(&format!("{last} on {port}"), DEADLINE, async || {
            let reply = query(port, last, "AAAA", Transport::Udp).await?;
            ensure!(reply.answer.len() == 1, "{reply:?}");
            let srv = "_http._tcp.headless.conf.svc.cluster.local.";
            let reply = query(port, srv, "SRV", Transport::Udp).await?;
            ensure!(reply.answer.len() == 3, "{reply:?}");
            Ok(())
        })
        .await?;
    }
    // Each difference, with both replies the first time it was seen.
    let mut found = BTreeMap::new();
    ask_both(ours.port, theirs.port, QUESTIONS, &mut found).await?;
    // Pod names in kubeadm's mode, `insecure`, on both.
    let ours = skydns_binary(
        &etcd.endpoint(),
        etcd.api(),
        &["-pods=insecure"],
        "kubernetes.default.svc.cluster.local.",
    )
    .await?;
    let theirs = Coredns::start(
        |port| kubeadm_corefile(port, &kubeconfig, "insecure"),
        "kubernetes.default.svc.cluster.local.",
    )
    .await?;
    ask_both(ours.port, theirs.port, INSECURE_QUESTIONS, &mut found).await?;
    let listed = listed_differences()?;
    let new: BTreeMap<_, _> = found
        .iter()
        .filter(|(k, _)| !listed.iter().any(|l| explains(l, k)))
        .collect();
    let gone: Vec<_> = listed
        .iter()
        .filter(|l| !found.keys().any(|k| explains(l, k)))
        .collect();
    ensure!(
        new.is_empty() && gone.is_empty(),
        "differences from CoreDNS {} not as docs/compatibility.md lists them:\n\
         new (fix, or list with the reason): {new:#?}\ngone (remove from the list): {gone:#?}",
        test_support::coredns::version()?
    );
    Ok(())
}

/// Asks both servers each of `questions` over UDP and TCP, and notes each
/// difference in `found` with both replies, the first time it is seen.
async fn ask_both(
    ours: u16,
    theirs: u16,
    questions: &[(&str, &str)],
    found: &mut BTreeMap<String, String>,
) -> Result<()> {
    for (name, qtype) in questions {
        for transport in [Transport::Udp, Transport::Tcp] {
            let a = query(ours, name, qtype, transport).await?;
            let b = query(theirs, name, qtype, transport).await?;
            for part in differences(&a, &b) {
                let seen = format!(
                    "{transport:?}\nours:    {}\nCoreDNS: {}",
                    text(&a),
                    text(&b)
                );
                found
                    .entry(format!("{name} {qtype} {part}"))
                    .or_insert(seen);
            }
        }
    }
    Ok(())
}

/// A reply on one line: rcode, flags and each section.
fn text(r: &Reply) -> String {
    format!(
        "{} [{}] answer {:?} authority {:?} additional {:?}",
        r.status,
        r.flags.join(" "),
        r.answer,
        r.authority,
        r.additional
    )
}

/// The parts of two replies to the same question that differ: `rcode`;
/// `flags +x` (ours only) or `flags -x` (CoreDNS's only) per flag;
/// `answer`, `authority` or `additional`, or `answer SOA` / `authority SOA`
/// when both hold one SOA of the same owner that differs in its values.
fn differences(ours: &Reply, theirs: &Reply) -> Vec<String> {
    let mut parts = Vec::new();
    if ours.status != theirs.status {
        parts.push("rcode".to_string());
    }
    for flag in &ours.flags {
        if !theirs.flags.contains(flag) {
            parts.push(format!("flags +{flag}"));
        }
    }
    for flag in &theirs.flags {
        if !ours.flags.contains(flag) {
            parts.push(format!("flags -{flag}"));
        }
    }
    for (part, a, b) in [
        ("answer", &ours.answer, &theirs.answer),
        ("authority", &ours.authority, &theirs.authority),
        ("additional", &ours.additional, &theirs.additional),
    ] {
        if records(a) != records(b) {
            let same_soa = |x: &[String], y: &[String]| match (x, y) {
                ([x], [y]) => soa_owner(x).is_some() && soa_owner(x) == soa_owner(y),
                _ => false,
            };
            parts.push(if same_soa(a, b) {
                format!("{part} SOA")
            } else {
                part.to_string()
            });
        }
    }
    parts
}

/// The owner of an SOA record's line, if it is one.
fn soa_owner(line: &str) -> Option<&str> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    (fields.get(3) == Some(&"SOA")).then(|| fields[0])
}

/// Records in any order (loadbalance shuffles), an SOA's serial left out
/// (each server counts its own).
fn records(lines: &[String]) -> BTreeSet<String> {
    lines
        .iter()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [owner, ttl, class, "SOA", mname, rname, _serial, rest @ ..] => {
                    format!(
                        "{owner} {ttl} {class} SOA {mname} {rname} {}",
                        rest.join(" ")
                    )
                }
                _ => fields.join(" "),
            }
        })
        .collect()
}

/// Whether the listed difference `listed` (`<name> <type> <part>`, where
/// the name or the type may be `*`) stands for the one found, `found`.
fn explains(listed: &str, found: &str) -> bool {
    let mut l = listed.splitn(3, ' ');
    let mut f = found.splitn(3, ' ');
    let (ln, lt, lp) = (l.next(), l.next(), l.next());
    let (fname, ftype, fpart) = (f.next(), f.next(), f.next());
    (ln == Some("*") || ln == fname) && (lt == Some("*") || lt == ftype) && lp == fpart
}

/// The differences docs/compatibility.md lists under [`DIFFERENCES`]: the
/// code spans that open each bullet, up to its colon, each
/// `<name> <type> <part>`; `*` stands for any name or type.
fn listed_differences() -> Result<BTreeSet<String>> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/compatibility.md");
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    let section = text
        .split(DIFFERENCES)
        .nth(1)
        .with_context(|| format!("no {DIFFERENCES:?} in docs/compatibility.md"))?;
    let section = section.split("\n## ").next().unwrap_or_default();
    // Each bullet with its continuation lines on one line.
    let bullets = section
        .split("\n- ")
        .skip(1)
        .map(|b| b.replace("\n  ", " "));
    let mut listed = BTreeSet::new();
    for bullet in bullets {
        let head = bullet.split("`:").next().unwrap_or_default();
        listed.extend(head.split('`').skip(1).step_by(2).map(String::from));
    }
    Ok(listed)
}
