//! `-local`: `local.dns.<domain>` is answered as the name it stands for.

use super::{ask_msg, handler, handler_with, request};
use crate::answer::tests::spec::spec;
use crate::handler::*;
use hickory_proto::rr::Name;

fn ask(h: &Handler, name: &str, qtype: RecordType) -> Message {
    let name = Name::from_ascii(name).unwrap();
    ask_msg(h, &request(name, qtype), Transport::Udp)
}

#[test]
fn local_dns_is_answered_as_the_local_name_with_the_owner_asked_for() {
    let h = handler_with(
        Some(spec()),
        Settings {
            round_robin: false,
            local: Some("ext.default.svc.cluster.local.".into()),
            ..Settings::default()
        },
    );
    let r = ask(&h, "Local.DNS.cluster.local.", RecordType::CNAME);
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    let answers: Vec<String> = r
        .answers
        .iter()
        .map(|a| format!("{} {} {}", a.name, a.record_type(), a.data))
        .collect();
    assert_eq!(answers, ["Local.DNS.cluster.local. CNAME example.com."]);
    // Other names are untouched.
    let r = ask(&h, "ext.default.svc.cluster.local.", RecordType::CNAME);
    assert_eq!(r.answers.len(), 1);
    // Without -local the name is just a name: nothing there.
    let r = ask(
        &handler(Some(spec())),
        "local.dns.cluster.local.",
        RecordType::CNAME,
    );
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
}
