//! The edges of the answer rules that the mutation check found untested:
//! which leaves below an address a PTR reads, the CHAOS names for the
//! hostname and the domain, groups that disagree at one depth after an
//! ungrouped record, the owner of an MX target's address, and CNAMEs left
//! out of an upstream AAAA additional. Expected answers follow SkyDNS 2.5.2c
//! (`server/server.go`, `msg/service.go`).

use super::*;
use hickory_proto::rr::rdata::AAAA;

/// A snapshot of `records`, keys below `/skydns`.
fn with(records: &[(&str, SkyRecord)]) -> Snapshot {
    below("/skydns", records)
}

fn question(name: &str, qtype: RecordType, class: DNSClass) -> Question {
    Question::new(Name::from_ascii(name).unwrap(), qtype, class)
}

#[test]
fn a_ptr_reads_the_names_directly_below_an_address_but_not_hidden_or_deeper_ones() {
    let snap = with(&[
        ("arpa/in-addr/10/0/0/1/aaaa", host("a.svc.cluster.local.")),
        (
            "arpa/in-addr/10/0/0/1/_x",
            host("hidden.svc.cluster.local."),
        ),
        (
            "arpa/in-addr/10/0/0/1/deep/bbbb",
            host("deep.svc.cluster.local."),
        ),
    ]);
    let q = question("1.0.0.10.in-addr.arpa.", RecordType::PTR, DNSClass::IN);
    let ptr = reverse(&zone(), &snap, &q).expect("a PTR");
    assert_eq!(
        lines(&ptr),
        ["1.0.0.10.in-addr.arpa. 3600 PTR a.svc.cluster.local."]
    );
}

#[test]
fn chaos_txt_for_the_hostname_and_for_the_domain() {
    let ask = |name: &str| {
        let q = question(name, RecordType::TXT, DNSClass::CH);
        authoritative(&zone(), &cluster(), &q, NOW, &Lookups::disabled())
    };
    for name in ["hostname.bind.", "id.server."] {
        let (ans, _) = sections(ask(name));
        assert_eq!(ans, [format!("{name} 0 TXT localhost")]);
    }
    let (authors, _) = sections(ask("authors.bind."));
    let (domain, _) = sections(ask("cluster.local."));
    assert_eq!(
        domain.len(),
        4,
        "the domain's TXT is the authors': {domain:?}"
    );
    let texts = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .map(|l| l.rsplit(" TXT ").next().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(texts(&domain), texts(&authors));
}

#[test]
fn groups_that_disagree_at_one_depth_keep_everything_past_an_ungrouped_record() {
    let g = |h: &str, group: &str| SkyRecord {
        host: h.into(),
        group: group.into(),
        ..SkyRecord::default()
    };
    let snap = with(&[
        ("local/cluster/g/1", g("10.0.0.1", "blue")),
        ("local/cluster/g/2", g("10.0.0.2", "")),
        ("local/cluster/g/3", g("10.0.0.3", "red")),
    ]);
    let (mut ans, _) = sections(ask_in(&snap, "g.cluster.local.", RecordType::A));
    ans.sort();
    assert_eq!(
        ans,
        [
            "g.cluster.local. 3600 A 10.0.0.1",
            "g.cluster.local. 3600 A 10.0.0.2",
            "g.cluster.local. 3600 A 10.0.0.3"
        ]
    );
}

#[test]
fn an_mx_ip_host_gets_a_stripped_exchange_and_an_unstripped_address_owner() {
    let record = SkyRecord {
        host: "10.0.0.9".into(),
        mail: true,
        targetstrip: 1,
        ..SkyRecord::default()
    };
    let snap = with(&[("local/cluster/m/x", record)]);
    let (ans, add) = sections(ask_in(&snap, "m.cluster.local.", RecordType::MX));
    assert_eq!(ans, ["m.cluster.local. 3600 MX 10 m.cluster.local."]);
    assert_eq!(add, ["x.m.cluster.local. 3600 A 10.0.0.9"]);
}

#[test]
fn an_upstream_aaaa_additional_leaves_its_cnames_out() {
    let target = SkyRecord {
        host: "mail.example.org.".into(),
        port: 25,
        ..SkyRecord::default()
    };
    let snap = with(&[("local/cluster/srv/x", target)]);
    let q = question("srv.cluster.local.", RecordType::SRV, DNSClass::IN);
    let mut lookups = Lookups::new();
    let _ = authoritative(&zone(), &snap, &q, NOW, &lookups);
    let mail = Name::from_ascii("mail.example.org.").unwrap();
    let real = Name::from_ascii("real.example.org.").unwrap();
    let cname =
        hickory_proto::rr::Record::from_rdata(mail.clone(), 60, RData::CNAME(CNAME(real.clone())));
    let aaaa = hickory_proto::rr::Record::from_rdata(
        real,
        60,
        RData::AAAA(AAAA::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7)),
    );
    lookups.insert(mail.clone(), RecordType::A, None);
    lookups.insert(mail, RecordType::AAAA, Some(vec![cname, aaaa]));
    let (_, add) = sections(authoritative(&zone(), &snap, &q, NOW, &lookups));
    assert_eq!(add, ["real.example.org. 60 AAAA 2001:db8::7"]);
}
