//! The query log through the handler: replies refused before any lookup
//! (an undecodable packet's FORMERR, NOTIMP, two questions) are written
//! with what could be read of the question, and the log's sampling count
//! goes on across a new configuration from the etcd config key.

use super::{handler_with, request, run};
use crate::answer::tests::{cluster, zone};
use crate::handler::*;
use crate::query_log::{QueryLog, Source};
use hickory_proto::op::OpCode;
use hickory_proto::op::Query;
use hickory_proto::rr::Name;

fn logging(classes: &str, sample: f64) -> Settings {
    Settings {
        query_log: Some(Arc::new(QueryLog::new(classes, sample).unwrap().unwrap())),
        ..Settings::default()
    }
}

/// The (source, rcode, name) of every line written so far.
fn written(h: &Handler) -> Vec<(Source, u16, String)> {
    let log = h.settings().query_log.expect("a query log");
    let written = log.written.lock().unwrap();
    written.clone()
}

#[test]
fn replies_refused_before_a_lookup_are_written_with_the_question_read() {
    let h = handler_with(Some(cluster()), logging("error", 1.0));
    let name = Name::from_ascii("Odd.Example.").unwrap();
    // A question that reads, followed by an answer record that does not.
    let mut undecodable = request(name.clone(), RecordType::A).to_vec().unwrap();
    undecodable[7] = 1; // ANCOUNT 1, with nothing after the question
    let mut notify = request(name.clone(), RecordType::SOA);
    notify.metadata.op_code = OpCode::Notify;
    let mut two = request(name.clone(), RecordType::A);
    two.queries.push(Query::query(name, RecordType::AAAA));
    let mut cut = undecodable.clone();
    cut.truncate(12);
    cut[5] = 0; // no question at all
    for packet in [
        undecodable,
        notify.to_vec().unwrap(),
        two.to_vec().unwrap(),
        cut,
    ] {
        assert!(run(&h, &packet, Transport::Udp).is_some(), "a reply");
    }
    let want = [
        (Source::Local, 1, "Odd.Example.".to_string()),
        (Source::Local, 4, "Odd.Example.".to_string()),
        (Source::Local, 1, "Odd.Example.".to_string()),
        (Source::Local, 1, "-".to_string()),
    ];
    assert_eq!(written(&h), want, "FORMERR, NOTIMP, FORMERR, FORMERR");
}

#[test]
fn the_sampling_count_goes_on_in_a_new_configuration() {
    let h = handler_with(Some(cluster()), logging("denial", 0.5));
    let ask = |h: &Handler| {
        let q = request(
            Name::from_ascii("nope.default.svc.cluster.local.").unwrap(),
            RecordType::A,
        );
        run(h, &q.to_vec().unwrap(), Transport::Udp).expect("a reply");
    };
    ask(&h); // the first of two: not written
    let before = h.settings().query_log.unwrap();
    h.reconfigure(zone(), logging("denial", 0.5));
    let after = h.settings().query_log.unwrap();
    assert!(Arc::ptr_eq(&before, &after), "the same log goes on");
    ask(&h); // the second: written
    assert_eq!(written(&h).len(), 1);
    h.reconfigure(zone(), logging("all", 0.5));
    assert!(
        !Arc::ptr_eq(&after, &h.settings().query_log.unwrap()),
        "a new one when it changed"
    );
}

/// A reply from the reply cache is logged and counted with the question
/// it answers, read from the request's bytes.
#[test]
fn a_cached_reply_is_logged_and_counted_with_its_question() {
    let h = handler_with(Some(cluster()), logging("all", 1.0));
    let name = "kubernetes.default.svc.cluster.local.";
    let packet = request(Name::from_ascii(name).unwrap(), RecordType::AAAA)
        .to_vec()
        .unwrap();
    for _ in 0..2 {
        assert!(run(&h, &packet, Transport::Udp).is_some(), "a reply");
    }
    let want = [
        (Source::Local, 0, name.to_string()),
        (Source::Cached, 0, name.to_string()),
    ];
    assert_eq!(written(&h), want);
    let text = h.metrics().render();
    let aaaa = (text.lines())
        .filter(|l| l.starts_with("coredns_dns_requests_total{"))
        .find(|l| l.contains("type=\"AAAA\""));
    assert!(aaaa.is_some_and(|l| l.ends_with("} 2")), "{text}");
}
