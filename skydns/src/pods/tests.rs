use super::*;
use hickory_proto::rr::{DNSClass, Name};

const DOMAIN: &str = "cluster.local.";

fn ask(mode: PodMode, name: &str, qtype: RecordType) -> Option<Answer> {
    let q = Question::new(Name::from_ascii(name).unwrap(), qtype, DNSClass::IN);
    answer(mode, &q, DOMAIN)
}

/// The answer section as `rdata` text, or the shape of the answer.
fn text(answer: Option<Answer>) -> String {
    match answer {
        None => "to the records".into(),
        Some(Answer::NameError) => "NXDOMAIN".into(),
        Some(Answer::ServerFailure) => "SERVFAIL".into(),
        Some(Answer::Records { answers, .. }) if answers.is_empty() => "NODATA".into(),
        Some(Answer::Records { answers, .. }) => answers
            .iter()
            .map(|r| format!("{} {} {}", r.name, r.ttl, r.data))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[test]
fn insecure_answers_the_address_in_the_name() {
    let cases = [
        (
            "10-1-0-50.conf.pod.cluster.local.",
            RecordType::A,
            "10-1-0-50.conf.pod.cluster.local. 30 10.1.0.50",
        ),
        (
            "Fd00--50.conf.pod.cluster.local.",
            RecordType::AAAA,
            "Fd00--50.conf.pod.cluster.local. 30 fd00::50",
        ),
        (
            "10-1-0-50.conf.pod.cluster.local.",
            RecordType::AAAA,
            "NODATA",
        ),
        ("fd00--50.conf.pod.cluster.local.", RecordType::A, "NODATA"),
        (
            "10-1-0-50.conf.pod.cluster.local.",
            RecordType::TXT,
            "NODATA",
        ),
        // Not an address: the records decide (NXDOMAIN unless one exists).
        (
            "web-0.conf.pod.cluster.local.",
            RecordType::A,
            "to the records",
        ),
        (
            "10-1-0-300.conf.pod.cluster.local.",
            RecordType::A,
            "to the records",
        ),
        // Not a pod name at all.
        ("conf.pod.cluster.local.", RecordType::A, "to the records"),
        (
            "x.10-1-0-50.conf.pod.cluster.local.",
            RecordType::A,
            "to the records",
        ),
        (
            "10-1-0-50.conf.svc.cluster.local.",
            RecordType::A,
            "to the records",
        ),
        ("10-1-0-50.conf.pod.other.", RecordType::A, "to the records"),
    ];
    for (name, qtype, want) in cases {
        assert_eq!(
            text(ask(PodMode::Insecure, name, qtype)),
            want,
            "{name} {qtype}"
        );
    }
}

#[test]
fn verified_leaves_every_name_to_the_records_and_disabled_answers_none() {
    for name in [
        "10-1-0-50.conf.pod.cluster.local.",
        "conf.pod.cluster.local.",
        "x.y.z.pod.cluster.local.",
    ] {
        assert_eq!(
            text(ask(PodMode::Verified, name, RecordType::A)),
            "to the records"
        );
        assert_eq!(
            text(ask(PodMode::Disabled, name, RecordType::A)),
            "NXDOMAIN",
            "{name}"
        );
    }
    for other in [
        "web.conf.svc.cluster.local.",
        "xpod.cluster.local.",
        "a.xpod.cluster.local.",
    ] {
        assert_eq!(
            text(ask(PodMode::Disabled, other, RecordType::A)),
            "to the records"
        );
    }
    let service = "web.conf.svc.cluster.local.";
    assert_eq!(
        text(ask(PodMode::Disabled, service, RecordType::A)),
        "to the records"
    );
}

#[test]
fn a_bad_mode_names_the_choices() {
    assert_eq!(
        "secure".parse::<PodMode>(),
        Err("invalid pod mode \"secure\" (use verified, insecure or disabled)".into())
    );
}
