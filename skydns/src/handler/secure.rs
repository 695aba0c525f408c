//! DNSSEC in the reply pipeline: with `-dnssec`, the apex DNSKEY answer, and
//! authoritative replies to DO queries handed to
//! [`crate::dnssec::Dnssec::secure`], with the closest encloser of a denied
//! name read from the snapshot.

use super::{unix_now, Engine, Request};
use crate::answer::{name_text, Answer, Question};
use crate::snapshot::Snapshot;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};

impl Engine {
    /// The apex DNSKEY answer, when signing is on and that is the question.
    pub(super) fn dnskey_answer(&self, q: &Question) -> Option<Answer> {
        let dnssec = self.settings.dnssec.as_ref()?;
        let asked =
            q.qtype == RecordType::DNSKEY && q.qclass == DNSClass::IN && q.name == self.zone.domain;
        asked.then(|| Answer::Records {
            answers: vec![dnssec.dnskey()],
            additionals: Vec::new(),
        })
    }

    /// Signs `reply` if the request set DO and a key is configured.
    pub(super) fn secure(&self, reply: &mut Message, r: &Request, snapshot: &Snapshot) {
        if !r.dnssec_ok {
            return;
        }
        let Some(dnssec) = &self.settings.dnssec else {
            return;
        };
        if r.q.qclass != DNSClass::IN || reply.metadata.response_code == ResponseCode::ServFail {
            return;
        }
        let prefix = &self.zone.prefix;
        let exists = |name: &Name| {
            let path = prefix.path(&name_text(name).to_ascii_lowercase());
            snapshot.lookup(&path, None, true).is_some()
        };
        let made = dnssec.secure(reply, exists, unix_now());
        self.metrics.signature_misses(made);
    }
}
