//! Shared by the skydns end-to-end tests: skydns in-process on a free port,
//! and `dig` replies split into sections.
#![allow(dead_code, unreachable_pub)]

use integration_tests::etcd::{dig, free_port, Etcd};
use std::ffi::OsString;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// One `dig` reply, split into the parts the tests look at.
#[derive(Debug)]
pub struct Reply {
    pub status: String,
    pub flags: Vec<String>,
    pub answer: Vec<String>,
    pub authority: Vec<String>,
    pub additional: Vec<String>,
    pub raw: String,
}

pub fn parse(text: &str) -> Reply {
    let mut reply = Reply {
        status: String::new(),
        flags: vec![],
        answer: vec![],
        authority: vec![],
        additional: vec![],
        raw: text.to_string(),
    };
    let mut section: Option<&mut Vec<String>> = None;
    for line in text.lines() {
        if let Some(rest) = line.split("status: ").nth(1) {
            reply.status = rest.split(',').next().unwrap_or_default().to_string();
        }
        if let Some(rest) = line.strip_prefix(";; flags: ") {
            let flags = rest.split(';').next().unwrap_or_default();
            reply.flags = flags.split_whitespace().map(String::from).collect();
        }
        section = match line {
            ";; ANSWER SECTION:" => Some(&mut reply.answer),
            ";; AUTHORITY SECTION:" => Some(&mut reply.authority),
            ";; ADDITIONAL SECTION:" => Some(&mut reply.additional),
            "" => None,
            l if l.starts_with(';') => section,
            l => {
                if let Some(s) = section.as_deref_mut() {
                    s.push(l.split_whitespace().collect::<Vec<_>>().join(" "));
                }
                section
            }
        };
    }
    reply
}

/// The answer line for the `kubernetes` service of reference §9.
pub const KUBERNETES_A: &str = "kubernetes.default.svc.cluster.local. 30 IN A 10.0.0.1";

pub struct SkyDns {
    pub port: u16,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl SkyDns {
    pub async fn start(etcd: &Etcd, extra: &[&str]) -> SkyDns {
        Self::start_with(
            etcd,
            &["-domain=cluster.local.", "-ns-rotate=false", "-no-rec"],
            extra,
            "kubernetes.default.svc.cluster.local",
        )
        .await
    }

    /// Starts skydns with `base` and `extra` flags; ready once `probe` resolves.
    pub async fn start_with(etcd: &Etcd, base: &[&str], extra: &[&str], probe: &str) -> SkyDns {
        let machines = format!("-machines={}", etcd.endpoint());
        let mut args: Vec<&str> = base.to_vec();
        args.push(&machines);
        args.extend_from_slice(etcd.api().skydns_flags());
        args.extend_from_slice(extra);
        Self::start_with_etcd_url(&args, probe).await
    }

    /// Starts skydns for `cluster.local.` with `args` (which name the etcd
    /// endpoints themselves); ready once `probe` resolves.
    pub async fn start_with_etcd_url(args: &[&str], probe: &str) -> SkyDns {
        let server = Self::launch(args);
        server
            .wait_for(probe, "A", |r| {
                r.status == "NOERROR" || r.status == "NXDOMAIN"
            })
            .await;
        server
    }

    /// Starts skydns and waits only until it answers at all (e.g. SERVFAIL
    /// while it cannot read etcd).
    pub async fn start_unsynced(args: &[&str]) -> SkyDns {
        let server = Self::launch(args);
        server
            .wait_for("kubernetes.default.svc.cluster.local", "A", |r| {
                !r.status.is_empty()
            })
            .await;
        server
    }

    fn launch(args: &[&str]) -> SkyDns {
        // An explicit -addr=127.0.0.1:PORT wins (Go flags: last one counts).
        let port = args
            .iter()
            .find_map(|a| {
                a.strip_prefix("-addr=127.0.0.1:")
                    .and_then(|p| p.parse().ok())
            })
            .unwrap_or_else(|| free_port().unwrap());
        let mut argv: Vec<OsString> = vec![
            OsString::from("skydns"),
            OsString::from("-domain=cluster.local."),
        ];
        argv.push(format!("-addr=127.0.0.1:{port}").into());
        argv.extend(args.iter().map(OsString::from));
        let flags = skydns::config::parse_args(argv).unwrap();
        let stop = CancellationToken::new();
        let task = tokio::spawn(skydns::run(flags, stop.clone()));
        SkyDns {
            port,
            stop,
            task: Some(task),
        }
    }

    /// Asserts that `kubernetes.default.svc.cluster.local A` gives the §9 record.
    pub async fn assert_kubernetes_resolves(&self) {
        let r = self
            .dig(&["kubernetes.default.svc.cluster.local", "A"])
            .await;
        assert_eq!(r.answer, [KUBERNETES_A], "{r:?}");
    }

    pub async fn dig(&self, args: &[&str]) -> Reply {
        let port = self.port;
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let text = tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            dig(port, &refs).unwrap()
        })
        .await
        .unwrap();
        parse(&text)
    }

    /// Polls until `pred` holds for `dig name qtype`, failing after 5 s.
    pub async fn wait_for(&self, name: &str, qtype: &str, pred: impl Fn(&Reply) -> bool) -> Reply {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let r = self.dig(&[name, qtype]).await;
            if pred(&r) {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting on {name} {qtype}; last reply {r:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("skydns stops")
                .unwrap()
                .unwrap();
        }
    }
}

impl Drop for SkyDns {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Waits until the skydns serving metrics on `port` has counted at least
/// `n` failed reads of etcd (`skydns_dns_store_error_count`).
pub async fn wait_for_store_errors(port: u16, n: u64) {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let series = "skydns_dns_store_error_count_total";
    let what = format!("{n} failed reads of etcd");
    integration_tests::wait::eventually(&what, integration_tests::wait::DEADLINE, async || {
        let errors =
            integration_tests::wait::metric(&integration_tests::wait::scrape(&url).await?, series);
        anyhow::ensure!(errors.is_some_and(|e| e >= n as f64), "{series} {errors:?}");
        Ok(())
    })
    .await
    .unwrap();
}

/// dnsmasq on a free loopback port as an upstream resolver, killed on drop.
pub struct Dnsmasq {
    pub port: u16,
    child: std::process::Child,
}

impl Dnsmasq {
    /// Starts dnsmasq answering only from `args` (e.g. `--address=/x/1.2.3.4`).
    pub fn start(args: &[&str]) -> Dnsmasq {
        integration_tests::etcd::require_binary("dnsmasq", "dnsmasq-base")
            .or_else(|_| {
                if std::path::Path::new("/usr/sbin/dnsmasq").exists() {
                    Ok("/usr/sbin/dnsmasq".into())
                } else {
                    Err(anyhow::anyhow!(
                        "dnsmasq is not installed: run `apt-get install -y dnsmasq-base`"
                    ))
                }
            })
            .unwrap();
        let port = free_port().unwrap();
        let child =
            std::process::Command::new(if std::path::Path::new("/usr/sbin/dnsmasq").exists() {
                "/usr/sbin/dnsmasq"
            } else {
                "dnsmasq"
            })
            .args([
                "--no-daemon",
                "--listen-address=127.0.0.1",
                "--bind-interfaces",
                "--no-resolv",
                "--no-hosts",
            ])
            .args([
                "--conf-file=/dev/null",
                "--pid-file=",
                "--user=root",
                "--local-ttl=100",
            ])
            .arg(format!("--port={port}"))
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starting dnsmasq");
        let server = Dnsmasq { port, child };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !dig(port, &["version.bind", "CH", "TXT"])
            .unwrap()
            .contains("status:")
        {
            assert!(Instant::now() < deadline, "dnsmasq did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// Stops it now.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A UDP socket that swallows queries and never answers, like a dead server.
pub fn black_hole() -> (std::net::UdpSocket, u16) {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    (socket, port)
}
