//! The loop check against a handler whose upstream sends every query back
//! to it (the node-resolver trap), an upstream that answers, and both.

use super::*;
use crate::answer::tests::cluster;
use crate::forward::NsPolicy;
use crate::handler::tests::handler_with;
use crate::handler::{Handler, Settings, Transport};
use hickory_proto::op::{Message, ResponseCode};
use std::sync::atomic::{AtomicUsize, Ordering};
use test_support::wait::{eventually, DEADLINE};
use tokio::net::UdpSocket;

/// An upstream that hands every query to the handler `h` will be and
/// relays its reply: skydns forwarding to itself. Counts the queries.
async fn looping() -> (
    SocketAddr,
    Arc<AtomicUsize>,
    tokio::sync::oneshot::Sender<Handler>,
) {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let (give, take) = tokio::sync::oneshot::channel::<Handler>();
    let counter = seen.clone();
    tokio::spawn(async move {
        let h = take.await.unwrap();
        let socket = Arc::new(socket);
        let mut buf = vec![0u8; 4096];
        while let Ok((len, peer)) = socket.recv_from(&mut buf).await {
            counter.fetch_add(1, Ordering::SeqCst);
            let (h, socket, packet) = (h.clone(), socket.clone(), buf[..len].to_vec());
            tokio::spawn(async move {
                if let Some(reply) = h.handle_async(&packet, Transport::Udp).await {
                    let _ = socket.send_to(&reply, peer).await;
                }
            });
        }
    });
    (addr, seen, give)
}

fn forwarding_to(servers: Vec<SocketAddr>) -> Settings {
    let mut s = Settings::default();
    s.forward.nameservers = servers;
    s.forward.relay.policy = NsPolicy::Sequential;
    s.forward.relay.fail_threshold = 0;
    s
}

fn check(h: &Handler, mode: Mode) -> (Arc<LoopCheck>, CancellationToken) {
    let exit = CancellationToken::new();
    let check = Arc::new(LoopCheck::new(mode, exit.clone(), h.metrics()));
    h.check_loops(check.clone());
    (check, exit)
}

/// Waits until the loop checks counted `n` of `result`.
async fn counted(h: &Handler, result: &str, n: u64) {
    let series = format!("skydns_dns_loop_checks_total{{result=\"{result}\"}} {n}\n");
    eventually(&series, DEADLINE, async || {
        let text = h.metrics().render();
        text.contains(&series)
            .then_some(())
            .ok_or_else(|| anyhow::anyhow!("{text}"))
    })
    .await
    .unwrap();
}

fn forwarded(name: &str) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.recursion_desired = true;
    m.metadata.id = 7;
    m.queries.push(hickory_proto::op::Query::query(
        Name::from_ascii(name).unwrap(),
        RecordType::A,
    ));
    m.to_vec().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_sent_back_is_a_loop_and_exit_mode_stops_the_server() {
    let (upstream, _, give) = looping().await;
    let h = handler_with(Some(cluster()), forwarding_to(vec![upstream]));
    give.send(h.clone()).ok().unwrap();
    let (check, exit) = check(&h, Mode::Exit);
    tokio::time::timeout(DEADLINE, exit.cancelled())
        .await
        .expect("the loop is found and the server told to exit");
    assert_eq!(check.fatal(), Some(upstream));
    counted(&h, "loop", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuse_mode_stops_forwarding_to_the_looping_upstream_only() {
    let (looper, looped, give) = looping().await;
    let (answering, answered) = test_support::fake_upstream::answering();
    // Sequential: without the refusal every query would try the loop first.
    let h = handler_with(Some(cluster()), forwarding_to(vec![looper, answering]));
    give.send(h.clone()).ok().unwrap();
    let (check, exit) = check(&h, Mode::Refuse);
    counted(&h, "loop", 1).await;
    counted(&h, "clear", 1).await;
    assert_eq!(check.fatal(), None);
    assert!(!exit.is_cancelled());
    assert_eq!(
        looped.load(Ordering::SeqCst),
        1,
        "only the probe went to the loop"
    );
    let before = answered.load(Ordering::SeqCst);
    let reply = h
        .handle_async(&forwarded("www.example.org."), Transport::Udp)
        .await;
    let reply = Message::from_vec(&reply.unwrap()).unwrap();
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert_eq!(reply.answers.len(), 1, "{reply:?}");
    assert_eq!(answered.load(Ordering::SeqCst), before + 1);
    assert_eq!(
        looped.load(Ordering::SeqCst),
        1,
        "the looping upstream is never asked again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_answers_is_clear_and_changed_upstreams_are_checked_again() {
    let (first, first_seen) = test_support::fake_upstream::answering();
    let h = handler_with(Some(cluster()), forwarding_to(vec![first]));
    let (check, exit) = check(&h, Mode::Exit);
    counted(&h, "clear", 1).await;
    assert_eq!(first_seen.load(Ordering::SeqCst), 1, "one probe");
    // A new configuration with the same upstreams keeps them, unchecked.
    // (A probe is registered before it is sent: none was.)
    h.reconfigure(crate::answer::tests::zone(), forwarding_to(vec![first]));
    assert_eq!(
        lock(&check.probes).len(),
        0,
        "the same upstreams probed again"
    );
    let (second, second_seen) = test_support::fake_upstream::answering();
    h.reconfigure(crate::answer::tests::zone(), forwarding_to(vec![second]));
    counted(&h, "clear", 2).await;
    assert_eq!(
        second_seen.load(Ordering::SeqCst),
        1,
        "the new upstream probed"
    );
    assert_eq!(check.fatal(), None);
    assert!(!exit.is_cancelled());
    // A probe name is a random question: asked of skydns by anyone else, it
    // is forwarded as any other name, never taken for a loop.
    let text = h.metrics().render();
    assert!(!text.contains("result=\"loop\""), "{text}");
}

#[test]
fn the_mode_is_parsed_and_off_by_default() {
    assert_eq!("exit".parse::<Mode>(), Ok(Mode::Exit));
    assert_eq!("refuse".parse::<Mode>(), Ok(Mode::Refuse));
    assert_eq!("off".parse::<Mode>(), Ok(Mode::Off));
    let error = "on".parse::<Mode>().unwrap_err();
    assert_eq!(error, "invalid loop mode \"on\" (use off, exit or refuse)");
    let flags = crate::config::parse_args(["skydns".into()]).unwrap();
    assert_eq!(flags.loop_check.mode, Mode::Off);
    let flags = crate::config::parse_args(["skydns".into(), "-loop=exit".into()]).unwrap();
    assert_eq!(flags.loop_check.mode, Mode::Exit);
}

#[test]
fn probe_names_are_two_random_numeric_labels() {
    let (a, b) = (random_name(), random_name());
    assert_ne!(a, b);
    assert_eq!(a.num_labels(), 2);
    assert!(a
        .to_ascii()
        .trim_end_matches('.')
        .split('.')
        .all(|l| l.parse::<u64>().is_ok()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_checked_while_no_rec_forbids_forwarding_and_then_it_is() {
    let (upstream, seen, give) = looping().await;
    let mut settings = forwarding_to(vec![upstream]);
    settings.forward.no_rec = true;
    let h = handler_with(Some(cluster()), settings.clone());
    give.send(h.clone()).ok().unwrap();
    let (check, exit) = check(&h, Mode::Exit);
    // A probe is registered before it is sent: none was.
    let pending = || lock(&check.probes).len();
    assert_eq!(pending(), 0, "no probe under -no-rec");
    // A configuration change that keeps -no-rec probes nothing either.
    h.reconfigure(crate::answer::tests::zone(), settings.clone());
    assert_eq!(pending(), 0, "no probe under -no-rec");
    // Forwarding turned on live, the same servers: now they are checked.
    settings.forward.no_rec = false;
    h.reconfigure(crate::answer::tests::zone(), settings);
    tokio::time::timeout(DEADLINE, exit.cancelled())
        .await
        .expect("the loop is found once forwarding is on");
    assert_eq!(check.fatal(), Some(upstream));
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "one probe: none under -no-rec"
    );
}
