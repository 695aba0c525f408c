//! Reading a scope's actual records. Prefixes are read in pages of
//! [`PAGE_SIZE`] keys, all at the revision of the first page, so no single
//! response comes near gRPC's 4 MiB decode limit however many keys kube2sky
//! owns. Each page is one request under the per-request timeout.

use super::Writer;
use crate::index::Read;
use crate::reconcile::Actual;
use etcd_client::{GetOptions, KeyValue};

/// Keys per range request: 500 values of up to 8 KiB stay under 4 MiB.
const PAGE_SIZE: i64 = 500;

impl Writer {
    /// The actual records of `reads`; foreign PTR values are set apart.
    pub(super) async fn read(&mut self, reads: &[Read]) -> Result<Actual, String> {
        let mut out = Actual::default();
        for read in reads {
            match read {
                Read::Prefix(p) => self.read_prefix(p, false, &mut out).await?,
                Read::OwnedPtrs(p) => self.read_prefix(p, true, &mut out).await?,
                Read::OwnedPtr(key) => {
                    let mut client = self.client().await?;
                    let resp = self.bounded(client.get(key.as_str(), None)).await?;
                    self.saw(resp.header());
                    for kv in resp.kvs() {
                        self.sort(kv, true, &mut out);
                    }
                }
            }
        }
        Ok(out)
    }

    async fn read_prefix(
        &mut self,
        prefix: &str,
        ptr: bool,
        out: &mut Actual,
    ) -> Result<(), String> {
        let end = prefix_end(prefix.as_bytes());
        let mut from = prefix.as_bytes().to_vec();
        let mut revision = 0;
        loop {
            let mut options = GetOptions::new()
                .with_range(end.clone())
                .with_limit(PAGE_SIZE);
            if revision > 0 {
                options = options.with_revision(revision);
            }
            let mut client = self.client().await?;
            let resp = self
                .bounded(client.get(from.clone(), Some(options)))
                .await?;
            self.saw(resp.header());
            if revision == 0 {
                revision = resp.header().map_or(0, |h| h.revision());
            }
            for kv in resp.kvs() {
                self.sort(kv, ptr, out);
            }
            match resp.kvs().last() {
                Some(last) if resp.more() => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => return Ok(()),
            }
        }
    }

    /// Files one key-value as ours or foreign. Under the PTR subtree only
    /// values naming one of our services are ours.
    fn sort(&self, kv: &KeyValue, ptr: bool, out: &mut Actual) {
        let Ok(key) = kv.key_str() else {
            return;
        };
        match kv.value_str() {
            Ok(value) if !ptr || self.names.owns_ptr_value(value) => {
                out.records.insert(key.to_string(), value.to_string());
            }
            _ if ptr => {
                out.foreign.insert(key.to_string());
            }
            _ => {}
        }
    }
}

/// The end of the key range of everything starting with `prefix`.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn prefix_end_increments_the_last_byte() {
        assert_eq!(prefix_end(b"/skydns/pod/"), b"/skydns/pod0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }
}
