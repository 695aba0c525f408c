//! Writing through the etcd v3 API. Each batch is one transaction (at most
//! `--etcd-max-txn-ops` operations, within etcd's `--max-txn-ops`), up to [`TXNS_IN_FLIGHT`] at once. Prefixes are read in pages of
//! [`PAGE_SIZE`] keys, all at the revision of the first page, so no single
//! response comes near gRPC's 4 MiB decode limit however many keys kube2sky
//! owns. Each request runs under the per-request deadline.

use super::attempt::{bounded, bounded_for, EtcdError};
use crate::reconcile::{Actual, Op};
use crate::records::Names;
use crate::scope::Read;
use etcd_access::member::MemberClient;
use etcd_access::{prefix_end, EtcdOptions};
use etcd_client::{Client, Compare, CompareOp, GetOptions, KeyValue, Txn, TxnOp};
use futures::StreamExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Keys per range request: 500 values of up to 8 KiB stay under 4 MiB.
const PAGE_SIZE: i64 = 500;

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
    pub(in crate::etcd) async fn read(
        &mut self,
        reads: &[Read],
    ) -> Result<(Actual, i64), EtcdError> {
        let mut out = Actual::default();
        let mut seen = 0;
        for read in reads {
            let at = match read {
                Read::Prefix(p) => {
                    let end = prefix_end(p.as_bytes());
                    self.read_range(p.as_bytes(), end, false, &mut out, |_| true)
                        .await?
                }
                Read::OwnedPtrs(p) => {
                    let end = prefix_end(p.as_bytes());
                    self.read_range(p.as_bytes(), end, true, &mut out, |_| true)
                        .await?
                }
                Read::Range { from, to } => {
                    let end = to.as_bytes().to_vec();
                    self.read_range(from.as_bytes(), end, false, &mut out, |_| true)
                        .await?
                }
                Read::OwnedRange { from, to } => {
                    let end = to.as_bytes().to_vec();
                    self.read_range(from.as_bytes(), end, true, &mut out, |_| true)
                        .await?
                }
                Read::OwnedPtr(key) => {
                    // The key, and the leaves below it (an IP with several names).
                    let dir = format!("{key}/");
                    let end = prefix_end(dir.as_bytes());
                    let keep = |k: &[u8]| k == key.as_bytes() || k.starts_with(dir.as_bytes());
                    self.read_range(key.as_bytes(), end, true, &mut out, keep)
                        .await?
                }
                Read::Key(key) => {
                    let mut client = self.client().await?;
                    let resp = bounded(&self.shutdown, client.get(key.as_str(), None)).await?;
                    for kv in resp.kvs() {
                        self.file(kv, false, &mut out);
                    }
                    revision(resp.header())
                }
            };
            seen = seen.max(at);
        }
        Ok((out, seen))
    }

    /// Reads the keys from `start` up to `end` (exclusive), a page at a
    /// time, all at the revision of the first page; keeps those `keep` wants.
    async fn read_range(
        &mut self,
        start: &[u8],
        end: Vec<u8>,
        ptr: bool,
        out: &mut Actual,
        keep: impl Fn(&[u8]) -> bool,
    ) -> Result<i64, EtcdError> {
        let mut from = start.to_vec();
        let mut at = 0;
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
