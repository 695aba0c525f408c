//! Writing through the etcd v3 API. Each batch is one transaction (at most
//! `--etcd-max-txn-ops` operations, within etcd's `--max-txn-ops`), up to [`TXNS_IN_FLIGHT`] at once. Prefixes are read in pages of
//! [`PAGE_SIZE`] keys, all at the revision of the first page, so no single
//! response comes near gRPC's 4 MiB decode limit however many keys kube2sky
//! owns; the reads of one transaction share one page. Each request runs
//! under the per-request deadline.

use super::attempt::{bounded, bounded_for, EtcdError};
use crate::reconcile::{Actual, Op};
use crate::records::Names;
use crate::scope::Read;
use etcd_access::member::MemberClient;
use etcd_access::{prefix_end, EtcdOptions};
use etcd_client::{Client, Compare, CompareOp, GetOptions, KeyValue, Txn, TxnOp, TxnOpResponse};
use futures::StreamExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Keys per range request: 500 values of up to 8 KiB stay under 4 MiB.
const PAGE_SIZE: i64 = 500;

/// Reads sent in one read-only transaction. A transaction's reads count
/// against etcd's `--max-txn-ops` (128 by default) as its writes do.
const READS_PER_REQUEST: usize = 32;

/// One [`Read`] as a key range: the range, whether its keys are PTRs, and
/// for the PTRs of one IP the key and the directory below it (all the
/// range keeps).
struct Span {
    start: Vec<u8>,
    /// The end (exclusive); empty for a single key.
    end: Vec<u8>,
    ptr: bool,
    only: Option<(Vec<u8>, Vec<u8>)>,
}

impl Span {
    fn of(read: &Read) -> Span {
        let range = |from: &str, end: Vec<u8>, ptr| Span {
            start: from.as_bytes().to_vec(),
            end,
            ptr,
            only: None,
        };
        match read {
            Read::Prefix(p) => range(p, prefix_end(p.as_bytes()), false),
            Read::OwnedPtrs(p) => range(p, prefix_end(p.as_bytes()), true),
            Read::Range { from, to } => range(from, to.as_bytes().to_vec(), false),
            Read::OwnedRange { from, to } => range(from, to.as_bytes().to_vec(), true),
            Read::OwnedPtr(key) => {
                // The key, and the leaves below it (an IP with several names).
                let dir = format!("{key}/");
                Span {
                    only: Some((key.as_bytes().to_vec(), dir.as_bytes().to_vec())),
                    ..range(key, prefix_end(dir.as_bytes()), true)
                }
            }
            Read::Key(key) => range(key, Vec::new(), false),
        }
    }

    /// The read of the first `limit` keys of the range (of the key alone).
    fn first_page(&self, limit: i64) -> TxnOp {
        let options = match self.end.is_empty() {
            true => None,
            false => Some(
                GetOptions::new()
                    .with_range(self.end.clone())
                    .with_limit(limit),
            ),
        };
        TxnOp::get(self.start.clone(), options)
    }

    fn keeps(&self, key: &[u8]) -> bool {
        self.only
            .as_ref()
            .is_none_or(|(exact, dir)| key == exact.as_slice() || key.starts_with(dir))
    }
}

/// Transactions in flight at once in a sync of many batches: etcd commits
/// each through raft and a disk sync, and batches what arrives meanwhile,
/// so one at a time leaves it idle between round trips.
const TXNS_IN_FLIGHT: usize = 8;

/// One batch as a transaction.
fn txn_of(batch: &[Op]) -> Txn {
    let ops: Vec<TxnOp> = batch
        .iter()
        .map(|op| match op {
            Op::Put { key, value } => TxnOp::put(key.as_str(), value.as_str(), None),
            Op::Delete { key } => TxnOp::delete(key.as_str(), None),
        })
        .collect();
    Txn::new().and_then(ops)
}

/// The v3 backend: a lazily (re)connected gRPC client on one member at a
/// time, the next one after an error.
pub(in crate::etcd) struct V3 {
    client: MemberClient,
    names: Names,
    shutdown: CancellationToken,
    /// Reads per read-only transaction: [`READS_PER_REQUEST`], halved when
    /// etcd refuses one.
    reads_per_request: usize,
}

impl V3 {
    pub(in crate::etcd) fn new(
        options: EtcdOptions,
        names: Names,
        shutdown: CancellationToken,
    ) -> Self {
        V3 {
            client: MemberClient::new(options),
            names,
            shutdown,
            reads_per_request: READS_PER_REQUEST,
        }
    }

    /// A handle on the connection (cheap to clone), connecting if needed.
    async fn client(&mut self) -> Result<Client, EtcdError> {
        // One connect timeout per member, not one request's deadline: a
        // member that drops packets must not use up the time for the next.
        let budget = self.client.connect_budget();
        bounded_for(budget, &self.shutdown, self.client.get()).await
    }

    pub(in crate::etcd) fn reset(&mut self) {
        self.client.forget();
    }

    pub(in crate::etcd) async fn put_marker(&mut self, marker: &str) -> Result<i64, EtcdError> {
        let mut client = self.client().await?;
        // Created only when absent, so a restart over a store that is
        // already right changes nothing (the revision stays put).
        let create = Txn::new()
            .when([Compare::create_revision(marker, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(marker, "kube2sky", None)]);
        let resp = bounded(&self.shutdown, client.txn(create)).await?;
        Ok(revision(resp.header()))
    }

    /// Whether etcd takes a transaction of `ops` operations: a read-only
    /// one (`ops` reads of `key`), which its `--max-txn-ops` counts as it
    /// counts writes, so finding the limit writes nothing.
    pub(in crate::etcd) async fn allows(
        &mut self,
        ops: usize,
        key: &str,
    ) -> Result<bool, EtcdError> {
        let mut client = self.client().await?;
        let reads: Vec<TxnOp> = (0..ops).map(|_| TxnOp::get(key, None)).collect();
        match bounded(&self.shutdown, client.txn(Txn::new().and_then(reads))).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_too_many_ops() => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub(in crate::etcd) async fn marker(&mut self, marker: &str) -> Result<(bool, i64), EtcdError> {
        let mut client = self.client().await?;
        let resp = bounded(&self.shutdown, client.get(marker, None)).await?;
        Ok((!resp.kvs().is_empty(), revision(resp.header())))
    }

    /// Applies `batches` as transactions, [`TXNS_IN_FLIGHT`] at a time,
    /// calling `applied(i, revision)` for each in order; stops at the first
    /// error (the caller reads again and retries). The batches touch
    /// disjoint keys (a diff has one operation per key), so the order in
    /// which etcd applies them does not change the result.
    pub(in crate::etcd) async fn apply_all(
        &mut self,
        batches: &[Vec<Op>],
        applied: impl FnMut(usize, i64),
    ) -> Result<(), EtcdError> {
        let client = self.client().await?;
        apply_batches(client, &self.shutdown, batches, applied).await
    }

    /// [`V3::apply_all`] on a task of its own, so the writer can go on
    /// (plan the next chunk of a full sync) while etcd applies these.
    pub(in crate::etcd) async fn start_apply(
        &mut self,
        batches: Vec<Vec<Op>>,
    ) -> Result<JoinHandle<Applied>, EtcdError> {
        let client = self.client().await?;
        let shutdown = self.shutdown.clone();
        Ok(tokio::spawn(async move {
            let mut revisions = Vec::with_capacity(batches.len());
            let result = apply_batches(client, &shutdown, batches, |_, r| revisions.push(r)).await;
            (revisions, result)
        }))
    }

    /// The actual records of `reads`; foreign PTR values are set apart.
    /// Up to [`READS_PER_REQUEST`] reads go in one read-only transaction
    /// (one round trip, one revision), each range's first page; a range
    /// with more keys is read on in pages at that revision.
    pub(in crate::etcd) async fn read(
        &mut self,
        reads: &[Read],
    ) -> Result<(Actual, i64), EtcdError> {
        let mut out = Actual::default();
        let mut seen = 0;
        let spans: Vec<Span> = reads.iter().map(Span::of).collect();
        for group in spans.chunks(self.reads_per_request) {
            // The group's first pages together are one page at most.
            let limit = (PAGE_SIZE / group.len() as i64).max(1);
            let pages: Vec<TxnOp> = group.iter().map(|s| s.first_page(limit)).collect();
            let txn = Txn::new().and_then(pages);
            let mut client = self.client().await?;
            let resp = match bounded(&self.shutdown, client.txn(txn)).await {
                Ok(resp) => resp,
                // An etcd allowing fewer operations: a request per read,
                // and fewer reads per request from now on.
                Err(e) if e.is_too_many_ops() => {
                    self.reads_per_request = (group.len() / 2).max(1);
                    tracing::debug!(
                        "etcd refused {} reads in one transaction ({e}); reading them one by one, \
                         and at most {} at once from now on",
                        group.len(),
                        self.reads_per_request
                    );
                    for span in group {
                        let (start, end) = (span.start.clone(), span.end.clone());
                        let at = self
                            .read_range(start, end, 0, span.ptr, &mut out, |k| span.keeps(k))
                            .await?;
                        seen = seen.max(at);
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            let at = revision(resp.header());
            seen = seen.max(at);
            for (span, op) in group.iter().zip(resp.op_responses()) {
                let TxnOpResponse::Get(page) = op else {
                    return Err(EtcdError::Failed(
                        "etcd answered a read with a write".into(),
                    ));
                };
                for kv in page.kvs().iter().filter(|kv| span.keeps(kv.key())) {
                    self.file(kv, span.ptr, &mut out);
                }
                if let (true, Some(last)) = (page.more(), page.kvs().last()) {
                    let mut from = last.key().to_vec();
                    from.push(0);
                    self.read_range(from, span.end.clone(), at, span.ptr, &mut out, |k| {
                        span.keeps(k)
                    })
                    .await?;
                }
            }
        }
        Ok((out, seen))
    }

    /// Reads the keys from `start` up to `end` (exclusive; empty: `start`
    /// alone), a page at a time, at revision `at` (0: the current one, then
    /// that of the first page); keeps those `keep` wants.
    async fn read_range(
        &mut self,
        start: Vec<u8>,
        end: Vec<u8>,
        mut at: i64,
        ptr: bool,
        out: &mut Actual,
        keep: impl Fn(&[u8]) -> bool,
    ) -> Result<i64, EtcdError> {
        let mut from = start;
        loop {
            let mut options = GetOptions::new()
                .with_range(end.clone())
                .with_limit(PAGE_SIZE);
            if at > 0 {
                options = options.with_revision(at);
            }
            let mut client = self.client().await?;
            let resp = bounded(&self.shutdown, client.get(from.clone(), Some(options))).await?;
            if at == 0 {
                at = revision(resp.header());
            }
            for kv in resp.kvs().iter().filter(|kv| keep(kv.key())) {
                self.file(kv, ptr, out);
            }
            match resp.kvs().last() {
                Some(last) if resp.more() => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => return Ok(at),
            }
        }
    }

    fn file(&self, kv: &KeyValue, ptr: bool, out: &mut Actual) {
        let Ok(key) = kv.key_str() else {
            return;
        };
        match kv.value_str() {
            Ok(value) => out.file(&self.names, key, value, ptr),
            // Not text: another writer's, where kube2sky shares the space
            // (PTRs, the config key, stub zones); ours to overwrite elsewhere.
            Err(_)
                if ptr
                    || key == self.names.config_key()
                    || key.starts_with(&self.names.stub_root()) =>
            {
                out.foreign.insert(key.to_string());
            }
            Err(_) => {}
        }
    }
}

/// What a batch of transactions applied on its own task did: each
/// transaction's revision, in order, up to the first error (later ones may
/// have been applied too; the writer reads again and retries).
pub(in crate::etcd) type Applied = (Vec<i64>, Result<(), EtcdError>);

/// Applies `batches` through `client`; see [`V3::apply_all`].
async fn apply_batches<B: AsRef<[Op]>>(
    client: Client,
    shutdown: &CancellationToken,
    batches: impl IntoIterator<Item = B>,
    mut applied: impl FnMut(usize, i64),
) -> Result<(), EtcdError> {
    // Each future owns what it uses: a spawned apply takes its batches by
    // value (borrowed ones make the stream's closure too general to be
    // proven `Send`).
    let mut results = futures::stream::iter(batches.into_iter().enumerate())
        .map(|(i, batch)| {
            let (mut client, shutdown) = (client.clone(), shutdown.clone());
            let txn = txn_of(batch.as_ref());
            async move {
                if shutdown.is_cancelled() {
                    return Err(EtcdError::ShuttingDown);
                }
                let resp = bounded(&shutdown, client.txn(txn)).await?;
                Ok((i, revision(resp.header())))
            }
        })
        .buffered(TXNS_IN_FLIGHT);
    while let Some(result) = results.next().await {
        let (i, revision) = result?;
        applied(i, revision);
    }
    Ok(())
}

fn revision(header: Option<&etcd_client::ResponseHeader>) -> i64 {
    header.map_or(0, |h| h.revision())
}
