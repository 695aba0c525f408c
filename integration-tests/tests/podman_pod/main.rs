//! The kube-dns pod in a real container runtime: `deploy/podman/run.sh`
//! runs the legacy pod (the 1.2 ReplicationController's template) and the
//! modern Deployment with `podman kube play`, from the images
//! `deploy/podman/images.sh` builds out of the binaries under test and the
//! manifests a cluster applies. For each:
//! - `kubernetes.default.svc.cluster.local` resolves through the pod's
//!   port 53 with the real `dig`, over UDP and TCP;
//! - the 1.2 inspection runs literally in the etcd container;
//! - a Service created with kubectl answers through the pod;
//! - a hung skydns turns exec-healthz to 503 and the liveness probe, run as
//!   the kubelet would (`podman healthcheck run`), restarts the probed
//!   container, and the pod answers again;
//! - Ctrl-C (SIGTERM) leaves no pod, container, volume or network behind.
//!
//! Needs root (podman's bridge network): as another user each test fails
//! saying so (a test that cannot run must not pass). `scripts/test.sh`
//! installs podman, runc and busybox-static.

mod support;

use anyhow::{ensure, Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::time::Duration;
use support::{
    build_images, container_log, container_pid, missing_privilege, podman, podman_objects,
    RunningPod,
};
use test_support::dns::{dig_at, query_at, Transport};
use test_support::http::get;
use test_support::kubectl::Kubectl;
use test_support::wait::{eventually, DEADLINE};

/// The liveness probes' `initialDelaySeconds` (60, podman's start period,
/// in which failures do not count) plus `failureThreshold` (5) probes and
/// podman's 10 s stop timeout for the hung container, with room to spare.
const RESTARTED_WITHIN: Duration = Duration::from_secs(240);

/// What the kube2sky of the demo seed writes for `kube-system/kube-dns`
/// (cluster IP 10.0.0.10): the label is FNV-1a of
/// `{"host":"10.0.0.10","priority":10,"weight":10,"ttl":30,"targetstrip":0}`.
const KUBE_DNS_KEY: &str = "/skydns/local/cluster/svc/kube-system/kube-dns/21172049";

/// Answers `name` A through the pod with the real `dig` over `transport`.
fn dig_a(pod: &RunningPod, name: &str, transport: Transport) -> Result<String> {
    let mut args = vec!["+short", name, "A"];
    if transport == Transport::Tcp {
        args.push("+tcp");
    }
    Ok(dig_at(pod.dns(), &args)?.trim().to_string())
}

/// Waits until `name` answers `address` through the pod (polled in-process).
async fn answers(pod: &RunningPod, name: &str, address: &str) -> Result<()> {
    eventually(&format!("{name} A {address}"), DEADLINE, async || {
        let reply = query_at(pod.dns(), name, "A", Transport::Udp).await?;
        ensure!(
            reply
                .answer
                .iter()
                .any(|a| a.ends_with(&format!(" A {address}"))),
            "{reply:?}"
        );
        Ok(())
    })
    .await
}

/// `GET http://<pod>:8080/healthz`: status and body.
async fn healthz(pod: &RunningPod) -> Result<(u16, String)> {
    let r = get(&format!("http://{}:8080/healthz", pod.ip)).await?;
    Ok((r.status, r.body))
}

/// Waits until `/healthz` answers `status` with a body containing `body`
/// (exec-healthz checks every 2 s).
async fn healthz_becomes(pod: &RunningPod, status: u16, body: &str) -> Result<()> {
    eventually(&format!("healthz {status}"), DEADLINE, async || {
        let (got, text) = healthz(pod).await?;
        ensure!(got == status && text.contains(body), "{got} {text:?}");
        Ok(())
    })
    .await
}

/// Stops (SIGSTOP) skydns's process: it hangs, as a wedged server would.
fn hang(pid: i32) -> Result<()> {
    kill(Pid::from_raw(pid), Signal::SIGSTOP).context("SIGSTOP skydns")
}

/// `container`'s liveness probe passes while the pod is healthy (so a
/// failing probe later is the hang, not the probe).
fn probe_passes(container: &str) -> Result<()> {
    podman(&["healthcheck", "run", container])
        .map(drop)
        .with_context(|| format!("{container}'s probe on a healthy pod"))
}

/// Runs `container`'s liveness probe as the kubelet would, once a second,
/// until podman has restarted the container; the probe outputs seen.
async fn probe_until_restarted(container: &str) -> Result<Vec<String>> {
    let before = container_pid(container)?;
    let mut outputs = Vec::new();
    eventually(
        &format!("{container} restarted by its probe"),
        RESTARTED_WITHIN,
        async || {
            // Exit 1 and "unhealthy" while the probe fails; that is the point.
            let out = podman(&["healthcheck", "run", container]).unwrap_or_else(|e| e.to_string());
            outputs.push(out.trim().to_string());
            let now = container_pid(container)?;
            ensure!(
                now != before && now != 0,
                "pid {now}, was {before}; probe said {out:?}"
            );
            Ok(())
        },
    )
    .await?;
    Ok(outputs)
}

/// Hangs skydns and runs the liveness probe of `probed` (kube2sky's is the
/// nslookup check in the 1.2 pod; skydns's own `/health` in the modern one)
/// until podman restarts it: the probe
/// passes before, `/healthz` turns 503, the probe reports unhealthy. Returns
/// the hung skydns's pid.
async fn hang_skydns_until_probe_restarts(pod: &RunningPod, probed: &str) -> Result<i32> {
    probe_passes(&pod.container(probed))?;
    let skydns = container_pid(&pod.container("skydns"))?;
    hang(skydns)?;
    healthz_becomes(pod, 503, "error exit status 1").await?;
    let outputs = probe_until_restarted(&pod.container(probed)).await?;
    ensure!(
        outputs.iter().any(|o| o.contains("unhealthy")),
        "the probe never said unhealthy: {outputs:?}"
    );
    Ok(skydns)
}

/// What both pods must do before their liveness checks.
async fn serves_dns_and_records(pod: &RunningPod, inspection: &[&str]) -> Result<String> {
    for transport in [Transport::Udp, Transport::Tcp] {
        let a = dig_a(pod, "kubernetes.default.svc.cluster.local", transport)?;
        ensure!(a == "10.0.0.1", "{transport:?}: dig +short said {a:?}");
    }
    // `kubernetes` is seeded before kube2sky watches; kube-dns comes with
    // the first list of services, which may be written later.
    let what = format!("{inspection:?} to print {KUBE_DNS_KEY}");
    let inspected = eventually(&what, DEADLINE, async || {
        let inspected = podman(inspection)?;
        ensure!(
            inspected.contains(KUBE_DNS_KEY),
            "{inspection:?} printed {inspected:?}"
        );
        Ok(inspected)
    })
    .await?;
    let (status, body) = healthz(pod).await?;
    ensure!(status == 200 && body == "ok", "healthz {status} {body:?}");
    Ok(inspected)
}

/// A Service created through the API answers through the pod.
async fn a_new_service_answers(pod: &RunningPod, name: &str) -> Result<()> {
    let kubectl = Kubectl::new(&pod.api)?;
    kubectl.run(&["create", "service", "clusterip", name, "--tcp=80"])?;
    let svc = kubectl.json(&["get", "service", name])?;
    let ip = svc["spec"]["clusterIP"]
        .as_str()
        .context("clusterIP")?
        .to_string();
    answers(pod, &format!("{name}.default.svc.cluster.local"), &ip).await?;
    let a = dig_a(
        pod,
        &format!("{name}.default.svc.cluster.local"),
        Transport::Udp,
    )?;
    ensure!(a == ip, "dig said {a:?}, the API {ip}");
    Ok(())
}

/// A Service of 130 named ports: its A, 130 SRVs and its PTR are one unit
/// of 132 operations, one transaction over etcd's default 128. Waits until
/// its last SRV answers (a service is written whole or not at all).
async fn a_service_of_many_ports_answers(pod: &RunningPod) -> Result<()> {
    let ports: Vec<String> = (1..=130)
        .map(|p| format!(r#"{{"name":"p{p}","protocol":"TCP","port":{p}}}"#))
        .collect();
    let manifest = format!(
        r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"ports","namespace":"default"}},
            "spec":{{"ports":[{}]}}}}"#,
        ports.join(",")
    );
    Kubectl::new(&pod.api)?.with_manifest("create", &manifest)?;
    let srv = "_p130._tcp.ports.default.svc.cluster.local";
    eventually(&format!("{srv} SRV"), DEADLINE, async || {
        let reply = query_at(pod.dns(), srv, "SRV", Transport::Udp).await?;
        ensure!(
            reply.answer.iter().any(|a| a.contains(" SRV ")),
            "{reply:?}"
        );
        Ok(())
    })
    .await
}

/// Stops run.sh and checks that no pod, container or volume of its pod is
/// left, and that the networks are those there were before.
fn stops_without_leftovers(pod: RunningPod, before: &BTreeSet<String>) -> Result<()> {
    let name = pod.pod.clone();
    pod.stop()?;
    let after = podman_objects()?;
    let left: Vec<_> = after.iter().filter(|o| o.contains(&name)).collect();
    ensure!(left.is_empty(), "left behind: {left:?}");
    let networks = |all: &BTreeSet<String>| {
        all.iter()
            .filter(|o| o.starts_with("network "))
            .cloned()
            .collect::<Vec<_>>()
    };
    ensure!(
        networks(before) == networks(&after),
        "networks changed: {after:?}"
    );
    Ok(())
}

/// Builds the images and starts run.sh with `args` and a pod name of its
/// own: what podman held before, the name, the pod. Fails, saying why, when
/// not root: a test that cannot run must not pass.
fn start_pod(flavour: &str, args: &[&str]) -> (BTreeSet<String>, String, RunningPod) {
    if let Some(why) = missing_privilege() {
        panic!("{why}");
    }
    build_images();
    let before = podman_objects().unwrap();
    let name = format!("kdrs-{flavour}-{}", std::process::id());
    let args: Vec<&str> = args.iter().copied().chain(["--name", &name]).collect();
    let pod = RunningPod::start(&args, &name).unwrap();
    (before, name, pod)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_legacy_pod_runs_in_podman() {
    let (before, name, pod) = start_pod("legacy", &["--legacy"]);
    assert_eq!(pod.pod, name, "a Pod keeps its name");

    // 1.2's docs: `etcdctl ls` in the etcd container, on the v2 keys API
    // (etcd v2 hides the `_udp`/`_tcp` SRV directories from listings).
    let ls = [
        "exec",
        &pod.container("etcd"),
        "etcdctl",
        "ls",
        "/skydns/local/cluster/svc/kube-system/kube-dns",
    ];
    let listed = serves_dns_and_records(&pod, &ls).await.unwrap();
    assert_eq!(listed, format!("{KUBE_DNS_KEY}\n"));

    // 1.2 wires the nslookup check to kube2sky's liveness probe: a hung
    // skydns gets kube2sky restarted, not itself.
    let skydns = hang_skydns_until_probe_restarts(&pod, "kube2sky")
        .await
        .unwrap();
    assert_eq!(
        container_pid(&pod.container("skydns")).unwrap(),
        skydns,
        "skydns untouched"
    );
    // A skydns that dies is restarted by the pod's restart policy.
    kill(Pid::from_raw(skydns), Signal::SIGKILL).unwrap();
    answers(&pod, "kubernetes.default.svc.cluster.local", "10.0.0.1")
        .await
        .unwrap();
    assert_ne!(container_pid(&pod.container("skydns")).unwrap(), skydns);
    healthz_becomes(&pod, 200, "ok").await.unwrap();

    // The restarted kube2sky follows the API again.
    a_new_service_answers(&pod, "after-restarts").await.unwrap();
    stops_without_leftovers(pod, &before).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_modern_deployment_runs_in_podman() {
    let (before, name, pod) = start_pod("modern", &[]);
    assert_eq!(
        pod.pod,
        format!("{name}-pod-0"),
        "podman's name for a Deployment's pod"
    );

    // The v3 API: the same records through `etcdctl get --prefix`.
    let etcd = pod.container("etcd");
    let get = [
        "exec",
        &etcd,
        "etcdctl",
        "get",
        "/skydns/local/cluster/svc/kube-system/kube-dns",
        "--prefix",
    ];
    let got = serves_dns_and_records(&pod, &get).await.unwrap();
    assert!(
        got.contains(&format!(
            "{KUBE_DNS_KEY}\n{{\"host\":\"10.0.0.10\",\"priority\":10,\"weight\":10,\"ttl\":30,\"targetstrip\":0}}\n"
        )),
        "{got}"
    );
    a_new_service_answers(&pod, "before-restarts")
        .await
        .unwrap();

    // Here skydns's liveness probe is its own /health, which a hung skydns
    // cannot answer: it is restarted, and the pod answers again.
    let kube2sky = container_pid(&pod.container("kube2sky")).unwrap();
    hang_skydns_until_probe_restarts(&pod, "skydns")
        .await
        .unwrap();
    answers(&pod, "kubernetes.default.svc.cluster.local", "10.0.0.1")
        .await
        .unwrap();
    healthz_becomes(&pod, 200, "ok").await.unwrap();
    assert_eq!(
        container_pid(&pod.container("kube2sky")).unwrap(),
        kube2sky,
        "kube2sky untouched"
    );
    a_new_service_answers(&pod, "after-restarts").await.unwrap();
    // The pod's etcd takes kube2sky's transactions of 1024 operations: one
    // of 132 is not refused.
    a_service_of_many_ports_answers(&pod).await.unwrap();
    let log = container_log(&pod.container("kube2sky"), None).unwrap();
    assert!(log.contains("ready: "), "{log}");
    assert!(!log.contains("etcd refused a transaction"), "{log}");
    stops_without_leftovers(pod, &before).unwrap();
}
