//! Request → reply tests of the Kubernetes DNS specification 1.1.0 records:
//! PTR directories in both reverse trees, ExternalName CNAMEs whose target
//! fails upstream, and the `dns-version` TXT leaf.

use super::tests::{ask_msg, assert_soa_authority, handler, request};
use super::*;
use crate::answer::tests::spec::spec;

fn ask(h: &Handler, name: &str, qtype: RecordType) -> Message {
    let name = Name::from_ascii(name).unwrap();
    ask_msg(h, &request(name, qtype), Transport::Udp)
}

fn data(r: &Message) -> Vec<String> {
    r.answers
        .iter()
        .map(|a| format!("{} {}", a.record_type(), a.data))
        .collect()
}

#[test]
fn dns_version_answers_txt_and_nodata_for_addresses() {
    let h = handler(Some(spec()));
    let r = ask(&h, "dns-version.cluster.local.", RecordType::TXT);
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert_eq!(data(&r), ["TXT 1.1.0"]);
    for qtype in [RecordType::A, RecordType::AAAA] {
        let r = ask(&h, "dns-version.cluster.local.", qtype);
        assert_eq!(r.metadata.response_code, ResponseCode::NoError, "{qtype}");
        assert!(r.answers.is_empty(), "{qtype}: {:?}", r.answers);
        assert_soa_authority(&r);
    }
}
