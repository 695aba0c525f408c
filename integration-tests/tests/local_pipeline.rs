//! Smoke test of README command 1: `deploy/local/run.sh` brings the whole
//! pod up (etcd, the API test server, kube2sky, skydns, exec-healthz) on free
//! ports; `dig` resolves `kubernetes.default.svc.cluster.local`; a service
//! created with kubectl resolves, and is NXDOMAIN after kubectl deletes it;
//! `/healthz` is 200; SIGTERM (run.sh traps it with Ctrl-C's SIGINT)
//! stops everything.
//!
//! The script runs with `SKIP_BUILD=1` on the binaries next to this test
//! (`scripts/test.sh` builds them with `cargo build --workspace --bins`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use test_support::bins::built_binary;
use test_support::dns::{dig, query, Transport};
use test_support::etcd::Api;
use test_support::http::get;
use test_support::kubectl::Kubectl;
use test_support::ports::{free_port, retry_on_conflict};
use test_support::process::Process;
use test_support::wait::{eventually, DEADLINE};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn bin_dir() -> PathBuf {
    for bin in ["skydns", "kube2sky", "exec-healthz", "kube-api-test-server"] {
        built_binary(bin);
    }
    test_support::bins::bin_dir()
}

/// The status of a GET of `path` on the loopback `port`.
async fn http_status(port: u16, path: &str) -> anyhow::Result<u16> {
    Ok(get(&format!("http://127.0.0.1:{port}{path}")).await?.status)
}

/// Polls `name A` until its status is `status`.
async fn wait_status(port: u16, name: &str, status: &str) {
    eventually(&format!("{name} {status}"), DEADLINE, async || {
        let r = query(port, name, "A", Transport::Udp).await?;
        anyhow::ensure!(
            r.status == status && (status != "NOERROR" || !r.answer.is_empty()),
            "{r:?}"
        );
        Ok(())
    })
    .await
    .unwrap();
}

/// The ports run.sh is told to use.
#[derive(Clone, Copy)]
struct Ports {
    dns: u16,
    etcd: u16,
    api: u16,
    healthz: u16,
    readiness: u16,
}

/// Starts run.sh on free ports and waits for its "==> ready" line. Fails
/// with run.sh's output when it exits first; the caller starts again on new
/// ports when that output says a port was taken meanwhile.
fn start_pipeline(etcd_api: Api, bins: &Path) -> anyhow::Result<(Process, Ports)> {
    let [dns, etcd, peer, api, healthz, readiness] = [(); 6].map(|_| free_port().unwrap());
    let mut command = Command::new("bash");
    command
        .arg(repo_root().join("deploy/local/run.sh"))
        .arg(etcd_api.kube2sky_flag())
        .current_dir(repo_root())
        .env("SKIP_BUILD", "1")
        .env("BIN_DIR", bins)
        .envs(
            [
                ("DNS_PORT", dns),
                ("ETCD_PORT", etcd),
                ("ETCD_PEER_PORT", peer),
                ("API_PORT", api),
                ("HEALTHZ_PORT", healthz),
                ("READINESS_PORT", readiness),
            ]
            .map(|(k, v)| (k, v.to_string())),
        );
    // Dropped on a failure: SIGTERM, which run.sh traps as it traps Ctrl-C,
    // then SIGKILL to its whole process group.
    let (mut pipeline, rx) = Process::spawn_with_lines("run.sh", command)?;
    let ready = test_support::wait::line("==> ready", &rx, Duration::from_secs(120), |l| {
        l.starts_with("==> ready")
    });
    if let Err(error) = ready {
        // run.sh's own check says "port N is in use".
        let taken = if format!("{error:#}").contains(" is in use") {
            " (address already in use)"
        } else {
            ""
        };
        let status = pipeline.try_wait()?;
        anyhow::bail!("run.sh ({status:?}) never became ready{taken}: {error:#}");
    }
    let ports = Ports {
        dns,
        etcd,
        api,
        healthz,
        readiness,
    };
    Ok((pipeline, ports))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_command_one_brings_the_pod_up_and_dns_follows_kubectl() {
    let kubectl = |api: u16| Kubectl::new(&format!("http://127.0.0.1:{api}")).unwrap();
    let bins = bin_dir();
    let etcd_api = Api::from_env();
    let (mut pipeline, ports) = retry_on_conflict(|| start_pipeline(etcd_api, &bins)).unwrap();
    let Ports {
        dns,
        etcd,
        api,
        healthz,
        readiness,
    } = ports;

    let out = dig(
        dns,
        &["+short", "kubernetes.default.svc.cluster.local", "A"],
    )
    .unwrap();
    assert_eq!(out.trim(), "10.0.0.1");
    assert_eq!(http_status(healthz, "/healthz").await.unwrap(), 200);
    assert_eq!(http_status(readiness, "/readiness").await.unwrap(), 200);
    if etcd_api == Api::V2 {
        // The 1.2 docs' inspection commands, literally.
        let endpoint = format!("http://127.0.0.1:{etcd}");
        let etcdctl = |args: &[&str]| {
            let out = test_support::etcd::etcdctl_v2(&endpoint, args).unwrap();
            assert!(out.status.success(), "etcdctl {args:?}: {out:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let dir = "/skydns/local/cluster/svc/kube-system/kube-dns";
        assert_eq!(etcdctl(&["ls", dir]), format!("{dir}/21172049\n"));
        assert_eq!(
            etcdctl(&["get", &format!("{dir}/21172049")]),
            "{\"host\":\"10.0.0.10\",\"priority\":10,\"weight\":10,\"ttl\":30,\"targetstrip\":0}\n"
        );
    }

    let demo = repo_root().join("deploy/local/demo-service.yaml");
    let demo = demo.display().to_string();
    let kubectl = kubectl(api);
    kubectl
        .run(&["create", "-f", &demo, "--validate=false"])
        .unwrap();
    wait_status(dns, "demo.default.svc.cluster.local", "NOERROR").await;
    kubectl.run(&["delete", "service", "demo"]).unwrap();
    wait_status(dns, "demo.default.svc.cluster.local", "NXDOMAIN").await;

    // SIGTERM, which run.sh traps as it traps Ctrl-C. Not SIGINT itself: a
    // shell started in the background without job control (as CI may start
    // the suite) ignores SIGINT, its children inherit that, and bash cannot
    // trap a signal ignored at entry.
    pipeline.signal(nix::sys::signal::Signal::SIGTERM).unwrap();
    pipeline.wait_exit(DEADLINE).await.unwrap();
    let left = pipeline.group_left();
    assert!(left.is_empty(), "still running after SIGTERM: {left:?}");
    let r = query(
        dns,
        "kubernetes.default.svc.cluster.local",
        "A",
        Transport::Udp,
    )
    .await;
    assert!(
        r.is_err(),
        "skydns still answers after run.sh exited: {r:?}"
    );
    assert!(
        http_status(healthz, "/healthz").await.is_err(),
        "exec-healthz still up after run.sh exited"
    );
}
