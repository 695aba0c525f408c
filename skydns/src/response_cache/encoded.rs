//! A cached reply kept encoded, so that a hit is a copy and a few patches:
//! [`Encoded::of`] encodes a reply once and notes where each TTL sits, and
//! [`Encoded::answer`] patches in one request's ID, RD bit and question and the
//! counted-down TTLs, or gives `None` for the decoded path.

use hickory_proto::op::Message;

/// A reply encoded once, with the places of its TTLs.
#[derive(Debug)]
pub(super) struct Encoded {
    bytes: Vec<u8>,
    /// Offset and value of each record's TTL.
    ttls: Vec<(usize, u32)>,
    /// Where the question ends; 0 when the reply has not exactly one
    /// (it is then only decoded).
    question_end: usize,
    /// Whether it carries an OPT record.
    has_opt: bool,
}

/// The request a cached reply answers, as the encoded path needs it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Asker<'a> {
    /// The request as received.
    pub packet: &'a [u8],
    /// Whether it has an OPT record.
    pub edns: bool,
    /// The most bytes the client takes.
    pub limit: usize,
}

impl Encoded {
    /// `reply` encoded, if it encodes and walks cleanly.
    pub(super) fn of(reply: &Message) -> Option<Encoded> {
        let bytes = reply.to_vec().ok()?;
        if bytes.len() < 12 {
            return None;
        }
        let count = |i: usize| usize::from(u16::from_be_bytes([bytes[i], bytes[i + 1]]));
        let mut pos = 12;
        for _ in 0..count(4) {
            pos = name_end(&bytes, pos)? + 4;
        }
        let question_end = if count(4) == 1 { pos } else { 0 };
        let mut ttls = Vec::new();
        let mut has_opt = false;
        for _ in 0..count(6) + count(8) + count(10) {
            pos = name_end(&bytes, pos)?;
            let fixed = bytes.get(pos..pos + 10)?;
            let rtype = u16::from_be_bytes([fixed[0], fixed[1]]);
            let ttl = u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
            if rtype == 41 {
                has_opt = true;
            } else {
                ttls.push((pos + 4, ttl));
            }
            pos += 10 + usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
        }
        (pos == bytes.len()).then_some(Encoded {
            bytes,
            ttls,
            question_end,
            has_opt,
        })
    }

    /// The reply decoded again (the decoded path; stale answers).
    pub(super) fn decode(&self) -> Option<Message> {
        Message::from_vec(&self.bytes).ok()
    }

    /// The reply to `asker`, `elapsed` seconds after it was cached; `None`
    /// when only the decoded path can shape it.
    pub(super) fn answer(&self, asker: Asker<'_>, elapsed: u32) -> Option<Vec<u8>> {
        let request = asker.packet;
        if self.question_end == 0 || (self.has_opt && !asker.edns) || self.bytes.len() > asker.limit
        {
            return None;
        }
        // The request's question must be the cached one but for the case
        // of its letters: the same labels, so the same place.
        let question = 12..self.question_end;
        if !request
            .get(question.clone())
            .is_some_and(|asked| asked.eq_ignore_ascii_case(&self.bytes[question]))
        {
            return None;
        }
        let mut out = self.bytes.clone();
        out[..2].copy_from_slice(&request[..2]);
        out[2] = (out[2] & !0x01) | (request[2] & 0x01);
        out[12..self.question_end].copy_from_slice(&request[12..self.question_end]);
        for &(at, ttl) in &self.ttls {
            out[at..at + 4].copy_from_slice(&ttl.saturating_sub(elapsed).to_be_bytes());
        }
        Some(out)
    }
}

/// Where the name at `pos` ends: after its root label or its pointer.
fn name_end(buf: &[u8], mut pos: usize) -> Option<usize> {
    loop {
        let len = *buf.get(pos)?;
        match len & 0xc0 {
            0x00 if len == 0 => return Some(pos + 1),
            0x00 => pos += 1 + usize::from(len),
            0xc0 => return buf.get(pos + 1).map(|_| pos + 2),
            _ => return None,
        }
    }
}
