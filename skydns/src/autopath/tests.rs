use super::*;
use hickory_proto::op::{MessageType, OpCode, Query};
use hickory_proto::rr::rdata::A;
use skydns_msg::path::PathPrefix;
use std::str::FromStr;

const KUBERNETES: &str = "{ns}.svc.{domain},svc.{domain},{domain}";

fn autopath() -> Autopath {
    Autopath::new(KUBERNETES, 5, "cluster.local.").expect("the Kubernetes search list")
}

#[test]
fn names_in_a_namespaces_first_search_domain_are_split_into_namespace_and_base() {
    let a = autopath();
    assert_eq!(
        a.split("api.example.com.web.svc.cluster.local."),
        Some(("web", "api.example.com"))
    );
    assert_eq!(
        a.split("db.other.web.svc.cluster.local."),
        Some(("web", "db.other"))
    );
    // The asked name is itself a service name of the namespace: still a
    // first step (the walk answers it at once when it exists).
    assert_eq!(a.split("db.web.svc.cluster.local."), Some(("web", "db")));
    for name in [
        "web.svc.cluster.local.",               // no base
        "db.svc.cluster.local.",                // the second search domain
        "x.cluster.local.",                     // the third
        "api.example.com.",                     // not in the domain
        "a.b.c.d.e.web.svc.cluster.local.",     // 4 dots: fewer than 5 but...
        "_http._tcp.db.web.svc.cluster.local.", // SRV names stay the client's
        "a.b.c.d.e.f.web.svc.cluster.local.",   // 5 dots: asked as is first
        "db.web.svc.cluster.localx.",
    ] {
        let split = a.split(name);
        if name == "a.b.c.d.e.web.svc.cluster.local." {
            assert_eq!(split, Some(("web", "a.b.c.d.e")), "4 dots < ndots 5");
        } else {
            assert_eq!(split, None, "{name}");
        }
    }
}

#[test]
fn the_steps_are_the_other_search_domains_then_the_base() {
    let a = autopath();
    assert_eq!(
        a.steps("api.example.com", "web"),
        [
            "api.example.com.svc.cluster.local.",
            "api.example.com.cluster.local.",
            "api.example.com.",
        ]
    );
    let custom = Autopath::new(
        "{ns}.svc.{domain},{ns}.corp.example.com,svc.{domain}",
        2,
        "k8s.",
    )
    .expect("custom");
    assert_eq!(
        custom.steps("db", "web"),
        ["db.web.corp.example.com.", "db.svc.k8s.", "db."]
    );
    assert_eq!(
        custom.split("x.y.web.svc.k8s."),
        Some(("web", "x.y")),
        "1 dot < ndots 2"
    );
    assert_eq!(
        custom.split("x.y.z.web.svc.k8s."),
        None,
        "2 dots: asked as is first"
    );
}

#[test]
fn a_search_list_that_does_not_begin_with_the_namespace_is_refused() {
    for bad in [
        "svc.{domain},{ns}.svc.{domain}",
        "",
        "{ns}",
        "{ns}.{ns}.svc",
    ] {
        let error = Autopath::new(bad, 5, "cluster.local.").expect_err(bad);
        assert!(error.contains("-autopath-search"), "{bad}: {error}");
    }
    assert!(Autopath::new(KUBERNETES, 0, "cluster.local.").is_err());
}

#[test]
fn a_clients_pod_records_are_under_its_dashed_ip_in_the_namespace() {
    let zone = Zone {
        domain: "cluster.local.".into(),
        prefix: PathPrefix::default(),
        ttl: 3600,
        min_ttl: 60,
        priority: 10,
        hostmaster: "h.".into(),
    };
    let v4: IpAddr = "10.1.2.3".parse().unwrap();
    assert_eq!(
        pod_dir(&zone, "web", v4),
        "/skydns/local/cluster/pod/web/10-1-2-3/"
    );
    let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
    assert_eq!(
        pod_dir(&zone, "web", mapped),
        "/skydns/local/cluster/pod/web/10-1-2-3/"
    );
    let v6: IpAddr = "fd00::12".parse().unwrap();
    assert_eq!(
        pod_dir(&zone, "web", v6),
        "/skydns/local/cluster/pod/web/fd00--12/"
    );
}

#[test]
fn the_chained_reply_answers_the_asked_name_with_a_cname_to_the_found_one() {
    let asked = Name::from_str("API.example.com.web.svc.cluster.local.").unwrap();
    let target = Name::from_str("api.example.com.").unwrap();
    let mut request = Message::query();
    request.metadata.id = 4242;
    request.metadata.recursion_desired = true;
    request
        .queries
        .push(Query::query(asked.clone(), RecordType::A));
    let mut step = Message::response(7, OpCode::Query);
    step.metadata.message_type = MessageType::Response;
    step.answers.push(Record::from_rdata(
        target.clone(),
        120,
        RData::A(A::new(192, 0, 2, 1)),
    ));
    step.answers.push(Record::from_rdata(
        target.clone(),
        60,
        RData::A(A::new(192, 0, 2, 2)),
    ));
    let ttl = chain_ttl(&step, 30);
    assert_eq!(ttl, 60);
    let reply = chain(&request, &target, step, ttl);
    assert_eq!(reply.metadata.id, 4242);
    assert!(reply.metadata.recursion_desired);
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert_eq!(
        reply.queries[0].name(),
        &asked,
        "the question as asked, case kept"
    );
    assert_eq!(reply.answers.len(), 3);
    assert_eq!(reply.answers[0].name, asked);
    assert_eq!(reply.answers[0].ttl, 60);
    assert_eq!(reply.answers[0].data, RData::CNAME(CNAME(target.clone())));
    assert_eq!(reply.answers[1].name, target);
    // NODATA: the CNAME alone, with the fallback TTL.
    assert_eq!(chain_ttl(&Message::query(), 30), 30);
}

#[test]
fn the_memo_knows_a_step_for_the_records_it_was_walked_on_only() {
    let memo = WalkMemo::default();
    let name = "api.example.com.web.svc.cluster.local.";
    assert_eq!(memo.get(name, RecordType::A, 7), None);
    memo.note(name, RecordType::A, 7, 2);
    assert_eq!(memo.get(name, RecordType::A, 7), Some(2));
    assert_eq!(memo.get(name, RecordType::AAAA, 7), None, "per type");
    assert_eq!(
        memo.get(name, RecordType::A, 8),
        None,
        "the records changed"
    );
    // Every question is kept until the memo is full...
    for i in 1..WALK_MEMO_ENTRIES {
        memo.note(&format!("n{i}.web.svc.cluster.local."), RecordType::A, 7, 0);
    }
    assert_eq!(memo.get(name, RecordType::A, 7), Some(2), "kept until full");
    let last = "n1.web.svc.cluster.local.";
    assert_eq!(memo.get(last, RecordType::A, 7), Some(0));
    // ...and the next one starts it over.
    memo.note("more.web.svc.cluster.local.", RecordType::A, 7, 1);
    assert_eq!(memo.get(name, RecordType::A, 7), None, "full: started over");
    let more = memo.get("more.web.svc.cluster.local.", RecordType::A, 7);
    assert_eq!(more, Some(1));
}

#[test]
fn a_namespaces_directory_is_no_name_to_chain_to() {
    let d = "cluster.local.";
    for (name, records) in [
        ("db.other.svc.cluster.local.", true),
        ("redis.svc.cluster.local.", false), // namespace redis's directory
        ("svc.cluster.local.", false),
        ("1-2-3-4.web.pod.cluster.local.", true),
        ("web.pod.cluster.local.", false),
        ("x.cluster.local.", true),
        ("cluster.local.", false),
        ("api.example.com.", true),
    ] {
        assert_eq!(names_records(d, name), records, "{name}");
    }
}
