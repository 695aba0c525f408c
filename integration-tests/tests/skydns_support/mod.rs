//! Shared by the skydns end-to-end tests: skydns in-process on free ports
//! for DNS and metrics (started again on others if one was taken), ready
//! once it answers; the rest (etcd, dnsmasq, queries) is `test_support`.
#![allow(dead_code, unreachable_pub)]

use std::ffi::OsString;
use std::time::Duration;
pub use test_support::dns::Reply;
use test_support::dns::{dig_reply, query, Transport};
use test_support::etcd::Etcd;
use test_support::ports::{free_port, on_free_port};
use test_support::wait::{eventually, DEADLINE};
use tokio_util::sync::CancellationToken;

/// A real etcd holding the demo `kubernetes` record.
pub fn etcd_with_kubernetes() -> Etcd {
    let etcd = Etcd::start().unwrap();
    let (key, value) = test_support::etcd::KUBERNETES_RECORD;
    etcd.put(key, value).unwrap();
    etcd
}

/// skydns as a pod's resolver for `cluster.local.` (forwarding on, the
/// first upstream tried first), with `extra` flags; ready once the demo
/// `kubernetes` name resolves.
pub async fn resolver(etcd: &Etcd, extra: &[&str]) -> SkyDns {
    SkyDns::start_with(
        etcd,
        &["-domain=cluster.local.", "-ns-rotate=false"],
        extra,
        "kubernetes.default.svc.cluster.local",
    )
    .await
}

/// The answer line for the `kubernetes` service of the demo records (docs/architecture.md, "What it writes").
pub const KUBERNETES_A: &str = "kubernetes.default.svc.cluster.local. 30 IN A 10.0.0.1";

pub struct SkyDns {
    pub port: u16,
    /// Where `/metrics` is served.
    pub metrics_port: u16,
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
        Self::launch(args, probe, |r| {
            r.status == "NOERROR" || r.status == "NXDOMAIN"
        })
        .await
    }

    /// Starts skydns and waits only until it answers at all (e.g. SERVFAIL
    /// while it cannot read etcd).
    pub async fn start_unsynced(args: &[&str]) -> SkyDns {
        Self::launch(args, "kubernetes.default.svc.cluster.local", |r| {
            !r.status.is_empty()
        })
        .await
    }

    /// Starts skydns until `ready` holds for `probe A`; a port taken
    /// between choosing and binding it means another port and a new start.
    async fn launch(args: &[&str], probe: &str, ready: impl Fn(&Reply) -> bool) -> SkyDns {
        let start = async |port: u16| {
            let metrics_port = free_port()?;
            let mut argv: Vec<OsString> = vec![
                OsString::from("skydns"),
                OsString::from("-domain=cluster.local."),
            ];
            argv.push(format!("-addr=127.0.0.1:{port}").into());
            argv.push(format!("-metrics-addr=127.0.0.1:{metrics_port}").into());
            argv.extend(args.iter().map(OsString::from));
            let flags = skydns::config::parse_args(argv)?;
            let stop = CancellationToken::new();
            let mut server = SkyDns {
                port,
                metrics_port,
                stop: stop.clone(),
                task: Some(tokio::spawn(skydns::run(flags, stop))),
            };
            server.until_ready(probe, &ready).await?;
            Ok(server)
        };
        // An explicit -addr=127.0.0.1:PORT wins (Go flags: last one counts).
        let fixed: Option<u16> = args.iter().find_map(|a| {
            a.strip_prefix("-addr=127.0.0.1:")
                .and_then(|p| p.parse().ok())
        });
        let started: anyhow::Result<SkyDns> = match fixed {
            Some(port) => start(port).await,
            None => on_free_port(start).await,
        };
        started.unwrap_or_else(|e| panic!("skydns did not start: {e:#}"))
    }

    /// Waits until `ready` holds for `probe A`, or skydns stops (its error).
    async fn until_ready(
        &mut self,
        probe: &str,
        ready: &impl Fn(&Reply) -> bool,
    ) -> anyhow::Result<()> {
        let port = self.port;
        let task = &mut self.task;
        eventually("skydns to answer", DEADLINE, async || {
            if let Some(ended) = task.take_if(|t| t.is_finished()) {
                return Ok(Err(anyhow::anyhow!("skydns stopped: {:?}", ended.await?)));
            }
            let r = query(port, probe, "A", Transport::Udp).await?;
            anyhow::ensure!(ready(&r), "{r:?}");
            Ok(Ok(()))
        })
        .await?
    }

    /// Asserts that `kubernetes.default.svc.cluster.local A` gives the demo record.
    pub async fn assert_kubernetes_resolves(&self) {
        let r = self
            .dig(&["kubernetes.default.svc.cluster.local", "A"])
            .await;
        assert_eq!(r.answer, [KUBERNETES_A], "{r:?}");
    }

    /// The reply `dig` (the real client) gets for `args`.
    pub async fn dig(&self, args: &[&str]) -> Reply {
        dig_reply(self.port, args).await.unwrap()
    }

    /// Polls (in-process, over UDP) until `pred` holds for `name qtype`;
    /// fails after [`DEADLINE`] with the last reply.
    pub async fn wait_for(&self, name: &str, qtype: &str, pred: impl Fn(&Reply) -> bool) -> Reply {
        let what = format!("{name} {qtype}");
        eventually(&what, DEADLINE, async || {
            let r = query(self.port, name, qtype, Transport::Udp).await?;
            anyhow::ensure!(pred(&r), "last reply {r:?}");
            Ok(r)
        })
        .await
        .unwrap()
    }

    /// The text of `/metrics`.
    pub async fn scrape(&self) -> String {
        let url = format!("http://127.0.0.1:{}/metrics", self.metrics_port);
        test_support::http::scrape(&url).await.unwrap()
    }

    /// Waits until skydns has counted at least `n` failed reads of etcd
    /// (`skydns_dns_store_error_count`).
    pub async fn wait_for_store_errors(&self, n: u64) {
        wait_for_store_errors(self.metrics_port, n).await;
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
    eventually(&what, DEADLINE, async || {
        let errors = test_support::http::metric(&test_support::http::scrape(&url).await?, series);
        anyhow::ensure!(errors.is_some_and(|e| e >= n as f64), "{series} {errors:?}");
        Ok(())
    })
    .await
    .unwrap();
}
