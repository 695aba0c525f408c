//! Smoke test of README command 1: `deploy/local/run.sh` brings the whole
//! pod up (etcd, the API test server, kube2sky, skydns, exec-healthz) on free
//! ports; `dig` resolves `kubernetes.default.svc.cluster.local`; a service
//! created with kubectl resolves, and is NXDOMAIN after kubectl deletes it;
//! `/healthz` is 200; SIGTERM (run.sh traps it with Ctrl-C's SIGINT)
//! stops everything.
//!
//! The script runs with `SKIP_BUILD=1` on the binaries next to this test
//! (`scripts/test.sh` builds them with `cargo build --workspace --bins`).

use integration_tests::bins::built_binary;
use integration_tests::etcd::Api;
use integration_tests::etcd::{dig, free_port, require_binary};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

struct Pipeline {
    child: Child,
}

impl Pipeline {
    /// SIGTERM, which run.sh traps as it traps Ctrl-C. Not SIGINT itself: a
    /// shell started in the background without job control (as CI may start
    /// the suite) ignores SIGINT, its children inherit that, and bash cannot
    /// trap a signal ignored at entry.
    fn terminate(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
    }

    /// Whether run.sh exited by itself within `within`.
    fn exited_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// The live processes of run.sh's process group (it leads one), as
    /// `pid command` lines.
    fn group_left(&self) -> Vec<String> {
        let group = self.child.id().to_string();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter_map(|stat| {
                // pid (comm) state ppid pgrp ...
                let (head, rest) = stat.rsplit_once(") ")?;
                let fields: Vec<&str> = rest.split(' ').collect();
                (fields.get(2) == Some(&group.as_str()) && fields.first() != Some(&"Z"))
                    .then(|| head.replace(" (", " "))
            })
            .collect()
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.terminate();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Last resort: the whole process group.
        let _ = Command::new("kill")
            .args(["-KILL", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.wait();
    }
}

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
    integration_tests::bins::bin_dir()
}

fn kubectl(kubeconfig: &Path, api: u16, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .arg(format!("--server=http://127.0.0.1:{api}"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("running kubectl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "kubectl {args:?} failed: {text}");
    text
}

fn wait_dig(port: u16, name: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let out = dig(port, &[name, "A"]).unwrap();
        if pred(&out) {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "timed out on {name}; last reply:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn http_status(port: u16, path: &str) -> String {
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &format!("http://127.0.0.1:{port}{path}"),
        ])
        .output()
        .expect("running curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn readme_command_one_brings_the_pod_up_and_dns_follows_kubectl() {
    require_binary("kubectl", "kubectl (from the Kubernetes apt repository)").unwrap();
    require_binary("curl", "curl").unwrap();
    let bins = bin_dir();
    let [dns, etcd, peer, api, healthz, readiness] = [(); 6].map(|_| free_port().unwrap());
    let etcd_api = Api::from_env();
    let mut child = Command::new("bash")
        .arg(repo_root().join("deploy/local/run.sh"))
        .arg(match etcd_api {
            Api::V2 => "--etcd-api=v2",
            Api::V3 => "--etcd-api=v3",
        })
        .current_dir(repo_root())
        .env("SKIP_BUILD", "1")
        .env("BIN_DIR", &bins)
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
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .spawn()
        .expect("starting deploy/local/run.sh");
    let stdout = child.stdout.take().unwrap();
    let mut pipeline = Pipeline { child };

    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.starts_with("==> ready") => break,
            Ok(line) => seen.push(line),
            Err(_) => panic!(
                "the pipeline never became ready; output:\n{}",
                seen.join("\n")
            ),
        }
    }

    let out = dig(
        dns,
        &["+short", "kubernetes.default.svc.cluster.local", "A"],
    )
    .unwrap();
    assert_eq!(out.trim(), "10.0.0.1");
    assert_eq!(http_status(healthz, "/healthz"), "200");
    assert_eq!(http_status(readiness, "/readiness"), "200");
    if etcd_api == Api::V2 {
        // The 1.2 docs' inspection commands, literally.
        let endpoints = format!("--endpoints=http://127.0.0.1:{etcd}");
        let etcdctl = |args: &[&str]| {
            let out = Command::new("etcdctl")
                .env("ETCDCTL_API", "2")
                .arg(&endpoints)
                .args(args)
                .output()
                .expect("running etcdctl");
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

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, "").unwrap();
    kubectl(
        &kubeconfig,
        api,
        &[
            "create",
            "-f",
            "deploy/local/demo-service.yaml",
            "--validate=false",
        ],
    );
    wait_dig(dns, "demo.default.svc.cluster.local", |o| {
        o.contains("status: NOERROR") && o.contains("IN\tA\t")
    });
    kubectl(&kubeconfig, api, &["delete", "service", "demo"]);
    wait_dig(dns, "demo.default.svc.cluster.local", |o| {
        o.contains("status: NXDOMAIN")
    });

    pipeline.terminate();
    let deadline = Instant::now() + Duration::from_secs(20);
    while dig(dns, &["+short", "kubernetes.default.svc.cluster.local"])
        .unwrap()
        .contains("10.0.0.1")
    {
        assert!(
            Instant::now() < deadline,
            "skydns still answers after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_ne!(
        http_status(healthz, "/healthz"),
        "200",
        "exec-healthz still up after SIGTERM"
    );
    assert!(
        pipeline.exited_within(Duration::from_secs(30)),
        "run.sh still running 30 s after SIGTERM"
    );
    let left = pipeline.group_left();
    assert!(left.is_empty(), "still running after SIGTERM: {left:?}");
}
