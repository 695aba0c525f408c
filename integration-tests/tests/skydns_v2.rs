//! skydns on the etcd v2 keys API, where v2 differs from v3: the 1000-event
//! history (a watcher that falls behind gets error 401 and must reload),
//! node TTLs, and hidden `_` paths that no listing or recursive watch shows.
//! The skydns binary runs as its own process so that it can be stopped
//! (SIGSTOP) while etcd moves on.

use test_support::dns::{query, Reply, Transport};
use test_support::etcd::{Api, Etcd};
use test_support::skydns::{Launch, Ready, SkydnsBinary};
use test_support::wait::{eventually, DEADLINE};

const KUBERNETES: (&str, &str) = (
    "/skydns/local/cluster/svc/default/kubernetes/c88f1059",
    r#"{"host":"10.0.0.1","priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
);
const HTTPS: (&str, &str) = (
    "/skydns/local/cluster/svc/default/kubernetes/_tcp/_https/c88f1059",
    r#"{"host":"kubernetes.default.svc.cluster.local.","port":443,"priority":10,"weight":10,"ttl":30,"targetstrip":0}"#,
);

/// The skydns binary on a free port, stopped on drop.
struct SkyDnsProcess(SkydnsBinary);

impl SkyDnsProcess {
    /// Starts skydns on `etcd`'s v2 API; returns once it answers.
    async fn start(etcd: &Etcd) -> SkyDnsProcess {
        let probe = "kubernetes.default.svc.cluster.local";
        let launch = Launch::new(&etcd.endpoint(), Api::V2).ready(Ready::Reply(probe.into()));
        SkyDnsProcess(launch.start().await.unwrap())
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        self.0.process.signal(signal).unwrap();
    }

    fn log(&self) -> String {
        self.0.log()
    }

    /// Polls `name qtype` until `pred` holds.
    async fn wait_for(&self, name: &str, qtype: &str, pred: impl Fn(&Reply) -> bool) {
        let what = format!("{name} {qtype}");
        let polled = eventually(&what, DEADLINE, async || {
            let r = query(self.0.port, name, qtype, Transport::Udp).await?;
            anyhow::ensure!(pred(&r), "last reply {r:?}");
            Ok(())
        })
        .await;
        if let Err(e) = polled {
            panic!("{e:#}; log:\n{}", self.log());
        }
    }
}

fn seeded() -> Etcd {
    let etcd = Etcd::start_with(Api::V2).unwrap();
    etcd.put(KUBERNETES.0, KUBERNETES.1).unwrap();
    etcd.put(HTTPS.0, HTTPS.1).unwrap();
    etcd
}

/// Writes `/skydns/local/cluster/svc/bulk/s<i>/1` for every `i` in `range`
/// (A 10.1.x.y), all at once.
async fn write_bulk(etcd: &Etcd, range: std::ops::Range<usize>) {
    let client = etcd_access::v2::Client::new(&etcd_access::EtcdOptions {
        endpoints: vec![etcd.endpoint()],
        ..etcd_access::EtcdOptions::default()
    })
    .unwrap();
    let writes = range.map(|i| {
        let client = client.clone();
        async move {
            let key = format!("/skydns/local/cluster/svc/bulk/s{i}/1");
            let value = format!(r#"{{"host":"10.1.{}.{}"}}"#, i / 256, i % 256);
            client.set(&key, &value).await.map(|_| ())
        }
    });
    for result in futures::future::join_all(writes).await {
        result.unwrap();
    }
}

/// A watcher that finds itself more than 200 events behind etcd's index
/// reloads everything once instead of catching up one event (one round
/// trip) at a time; 50 behind, it catches up event by event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_more_than_200_events_behind_reloads_fewer_catches_up() {
    let etcd = seeded();
    let dns = SkyDnsProcess::start(&etcd).await;
    dns.wait_for("kubernetes.default.svc.cluster.local", "A", |r| {
        !r.answer.is_empty()
    })
    .await;
    let reloads = |log: &str| log.matches("the watch fell behind; reloading").count();
    // 50 behind: no reload.
    dns.signal(nix::sys::signal::Signal::SIGSTOP);
    write_bulk(&etcd, 0..50).await;
    dns.signal(nix::sys::signal::Signal::SIGCONT);
    dns.wait_for("s49.bulk.svc.cluster.local", "A", |r| !r.answer.is_empty())
        .await;
    assert_eq!(reloads(&dns.log()), 0, "50 events behind:\n{}", dns.log());
    // 300 behind (within etcd's 1000-event history): one reload.
    dns.signal(nix::sys::signal::Signal::SIGSTOP);
    write_bulk(&etcd, 50..350).await;
    dns.signal(nix::sys::signal::Signal::SIGCONT);
    dns.wait_for("s349.bulk.svc.cluster.local", "A", |r| {
        r.answer == ["s349.bulk.svc.cluster.local. 3600 IN A 10.1.1.93"]
    })
    .await;
    let log = dns.log();
    assert_eq!(reloads(&log), 1, "300 events behind:\n{log}");
    let after = log
        .find("the watch fell behind; reloading")
        .map(|at| &log[at..]);
    assert!(
        after.is_some_and(|rest| rest.contains("loaded records from the store")),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_left_behind_by_more_than_1000_events_reloads_and_serves_the_final_state() {
    let etcd = seeded();
    let dns = SkyDnsProcess::start(&etcd).await;
    dns.wait_for("kubernetes.default.svc.cluster.local", "A", |r| {
        r.answer == ["kubernetes.default.svc.cluster.local. 30 IN A 10.0.0.1"]
    })
    .await;
    dns.signal(nix::sys::signal::Signal::SIGSTOP);
    // 1100 writes: the event after skydns's wait index falls out of etcd's
    // 1000-event history.
    write_bulk(&etcd, 0..1100).await;
    etcd.del(KUBERNETES.0).unwrap();
    dns.signal(nix::sys::signal::Signal::SIGCONT);

    dns.wait_for("s1099.bulk.svc.cluster.local", "A", |r| {
        r.answer == ["s1099.bulk.svc.cluster.local. 3600 IN A 10.1.4.75"]
    })
    .await;
    dns.wait_for("kubernetes.default.svc.cluster.local", "A", |r| {
        r.status == "NOERROR" && r.answer.is_empty()
    })
    .await;
    // "loaded records" is also logged at the first start: the reload is the
    // one after the 401.
    let log = dns.log();
    let after_401 = log.find("is compacted").map(|at| &log[at..]);
    assert!(
        after_401.is_some_and(|rest| rest.contains("loaded records from the store")),
        "the 401 must have led to a reload:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_ttl_becomes_the_record_ttl_when_the_json_has_none() {
    let etcd = seeded();
    let out = etcd
        .etcdctl_v2(&[
            "set",
            "--ttl",
            "500",
            "/skydns/local/cluster/svc/default/leased/1",
            r#"{"host":"10.0.0.50"}"#,
        ])
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let dns = SkyDnsProcess::start(&etcd).await;
    dns.wait_for("leased.default.svc.cluster.local", "A", |r| {
        let ttl: Option<u32> = r
            .answer
            .first()
            .and_then(|a| a.split_whitespace().nth(1))
            .and_then(|t| t.parse().ok());
        // The node TTL counts down from 500 (not the 3600 default).
        matches!(ttl, Some(400..=500)) && r.answer[0].ends_with("A 10.0.0.50")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_srv_keys_are_read_by_name_and_follow_etcd() {
    let etcd = seeded();
    let dns = SkyDnsProcess::start(&etcd).await;
    let srv = "_https._tcp.kubernetes.default.svc.cluster.local";
    dns.wait_for(srv, "SRV", |r| {
        r.answer
            == [format!(
                "{srv}. 30 IN SRV 10 100 443 kubernetes.default.svc.cluster.local."
            )]
    })
    .await;
    // A change to a hidden key reaches no recursive watch: skydns sees
    // etcd's index move and reads the path again.
    etcd.put(HTTPS.0, &HTTPS.1.replace("443", "8443")).unwrap();
    dns.wait_for(srv, "SRV", |r| {
        r.answer
            == [format!(
                "{srv}. 30 IN SRV 10 100 8443 kubernetes.default.svc.cluster.local."
            )]
    })
    .await;
    // The service's directory deleted recursively takes the hidden keys along.
    let out = etcd
        .etcdctl_v2(&[
            "rm",
            "--recursive",
            "/skydns/local/cluster/svc/default/kubernetes",
        ])
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    dns.wait_for(srv, "SRV", |r| r.status == "NXDOMAIN").await;
    // A hidden name that does not exist is NXDOMAIN, as in SkyDNS.
    dns.wait_for(
        "_nosuch._tcp.kube-dns.default.svc.cluster.local",
        "SRV",
        |r| r.status == "NXDOMAIN",
    )
    .await;
}
