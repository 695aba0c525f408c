//! `-pods`: pod names answered from the name, from the records, or not.

use super::{ask_msg, assert_soa_authority, handler_with, request};
use crate::answer::tests::cluster;
use crate::handler::*;
use crate::pods::PodMode;
use hickory_proto::rr::Name;

fn ask(mode: PodMode, name: &str, qtype: RecordType) -> Message {
    let h = handler_with(
        Some(cluster()),
        Settings {
            pods: mode,
            ..Settings::default()
        },
    );
    ask_msg(
        &h,
        &request(Name::from_ascii(name).unwrap(), qtype),
        Transport::Udp,
    )
}

fn answers(r: &Message) -> Vec<String> {
    r.answers
        .iter()
        .map(|a| format!("{} {} {} {}", a.name, a.ttl, a.record_type(), a.data))
        .collect()
}

#[test]
fn insecure_answers_a_pod_nobody_runs_authoritatively() {
    let r = ask(
        PodMode::Insecure,
        "10-9-9-9.nowhere.pod.cluster.local.",
        RecordType::A,
    );
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(r.metadata.authoritative);
    assert_eq!(
        answers(&r),
        ["10-9-9-9.nowhere.pod.cluster.local. 30 A 10.9.9.9"]
    );
    // The other family: NODATA with the SOA.
    let r = ask(
        PodMode::Insecure,
        "10-9-9-9.nowhere.pod.cluster.local.",
        RecordType::AAAA,
    );
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(r.answers.is_empty());
    assert_soa_authority(&r);
}

#[test]
fn verified_answers_that_name_nxdomain_and_disabled_too() {
    for mode in [PodMode::Verified, PodMode::Disabled] {
        let r = ask(mode, "10-9-9-9.nowhere.pod.cluster.local.", RecordType::A);
        assert_eq!(r.metadata.response_code, ResponseCode::NXDomain, "{mode:?}");
        assert_soa_authority(&r);
    }
}

#[test]
fn services_are_answered_alike_in_every_mode() {
    for mode in [PodMode::Verified, PodMode::Insecure, PodMode::Disabled] {
        let r = ask(mode, "kubernetes.default.svc.cluster.local.", RecordType::A);
        assert_eq!(answers(&r).len(), 1, "{mode:?}: {r:?}");
    }
}
