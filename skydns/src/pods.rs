//! Pod names, `<ip with dashes>.<ns>.pod.<domain>`, in the mode `-pods`
//! chooses: `verified` answers from kube2sky's pod records, `insecure`
//! answers with the address in the name whether a pod has it or not
//! (CoreDNS's `pods insecure`, kube-dns's behaviour), `disabled` answers
//! none. A pure function of the question: no records are read.

use crate::answer::{Answer, Question};
use hickory_proto::rr::{RData, Record, RecordType};
use std::net::IpAddr;

mod flags;
pub use flags::Flags;

#[cfg(test)]
mod tests;

/// The TTL of an answer made from the name: kube2sky's pod records' TTL.
pub(crate) const TTL: u32 = 30;

/// How pod names are answered (`-pods`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PodMode {
    /// From kube2sky's pod records only (its `--pods`), as before.
    #[default]
    Verified,
    /// The address in the name, for any name that holds one.
    Insecure,
    /// No pod names: NXDOMAIN under `pod.<domain>`.
    Disabled,
}

impl std::str::FromStr for PodMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "verified" => Ok(PodMode::Verified),
            "insecure" => Ok(PodMode::Insecure),
            "disabled" => Ok(PodMode::Disabled),
            _ => Err(format!(
                "invalid pod mode {s:?} (use verified, insecure or disabled)"
            )),
        }
    }
}

/// The answer `mode` gives `q` on its own, if it decides it: `None` leaves
/// the question to the records. `domain` is the served domain, lowercase
/// and fully qualified.
pub(crate) fn answer(mode: PodMode, q: &Question, domain: &str) -> Option<Answer> {
    if mode == PodMode::Verified {
        return None;
    }
    let rest = q.name.strip_suffix(domain)?.strip_suffix("pod.")?;
    if !rest.is_empty() && !rest.ends_with('.') {
        return None; // `xpod.<domain>`: another name
    }
    let mut labels = rest.trim_end_matches('.').split('.');
    let (Some(pod), Some(namespace), None) = (labels.next(), labels.next(), labels.next()) else {
        return (mode == PodMode::Disabled).then_some(Answer::NameError);
    };
    if mode == PodMode::Disabled || namespace.is_empty() {
        return Some(Answer::NameError);
    }
    let ip = address(pod)?;
    let rdata = match (ip, q.qtype) {
        (IpAddr::V4(v4), RecordType::A) => RData::A(v4.into()),
        (IpAddr::V6(v6), RecordType::AAAA) => RData::AAAA(v6.into()),
        _ => {
            return Some(Answer::Records {
                answers: Vec::new(),
                additionals: Vec::new(),
            })
        }
    };
    Some(Answer::Records {
        answers: vec![Record::from_rdata(q.qname.clone(), TTL, rdata)],
        additionals: Vec::new(),
    })
}

/// The address a pod label spells, as CoreDNS reads it: three dashes and
/// no `--` is IPv4 (`10-1-0-50`), anything else IPv6 with `-` for `:`
/// (`fd00--50`). `None` when it spells none.
fn address(label: &str) -> Option<IpAddr> {
    let ipv4 = label.matches('-').count() == 3 && !label.contains("--");
    let text = if ipv4 {
        label.replace('-', ".")
    } else {
        label.replace('-', ":")
    };
    text.parse().ok()
}
