//! A full sync's slices, written one behind the other on etcd v3: while
//! etcd applies one slice's transactions (on a task of their own), the
//! writer already works out the next slice's records and reads its keys.
//! Written strictly one after the other, etcd sat idle while kube2sky
//! planned, and kube2sky while etcd applied: at 50,000 services and
//! 150,000 pods the planning was about a third of the sync.
//!
//! Only the next slice of the same pass overlaps the one in flight, and the
//! slices of a pass cover disjoint key ranges (`crate::index::chunks`), so
//! the keys one reads are never the keys the other writes. Everything else
//! waits for the slice in flight first ([`Writer::settle`]): the write loop
//! before it applies watch events or checks for data loss, and the last
//! slice of a pass before the pass is logged done. So an event is diffed
//! against etcd with the slice's writes in it, and a slice planned before
//! an event never lands after the event's own writes. If etcd did not take
//! the whole slice, it is written again as the index stands now, as a
//! failed scope always was.

use super::{counts_of, WriteError, Writer};
use crate::scope::{DesiredState, Scope};
use std::time::Instant;
use tokio::task::JoinHandle;

use super::v3::Applied;

/// A slice whose transactions etcd is applying.
pub(super) struct PendingSlice {
    /// The slice, to write again should a transaction fail.
    slice: Scope,
    /// Each transaction's operations, and of those the puts and deletes.
    sizes: Vec<usize>,
    counts: Vec<(u64, u64)>,
    applying: JoinHandle<Applied>,
}

impl Writer {
    /// The slices a full sync of `whole` ([`Scope::AllServices`] or
    /// [`Scope::AllPods`]) is written in. On etcd v3, about `sync_chunk`
    /// objects each ([`DesiredState::pod_chunks`],
    /// [`DesiredState::service_chunks`]: services by namespace, then the
    /// PTRs): at 150,000 pods the desired and actual records of the whole
    /// subtree at once were 50 MB, and a slice is as long as a change made
    /// during the sync waits. v2 reads a subtree in one request: one slice.
    pub(crate) fn full_sync_slices(&self, state: &impl DesiredState, whole: &Scope) -> Vec<Scope> {
        let chunk = self.options.sync_chunk;
        match whole {
            Scope::AllPods if self.backend.has_transactions() => state.pod_chunks(chunk),
            Scope::AllServices if self.backend.has_transactions() => state.service_chunks(chunk),
            _ => vec![whole.clone()],
        }
    }

    /// Writes one slice of a full sync as the state stands now
    /// ([`DesiredState::current_slice`]): plans it while the previous
    /// slice is applied, waits for that one, then leaves this one in
    /// flight (see the module docs). Returns the keys written and deleted
    /// by what finished meanwhile.
    pub(crate) async fn sync_slice(
        &mut self,
        state: &impl DesiredState,
        slice: &Scope,
    ) -> Result<(u64, u64), WriteError> {
        if self.shutdown.is_cancelled() {
            return Ok((0, 0));
        }
        let scope = state.current_slice(slice);
        let planned = match self.backend.has_transactions() {
            true => Some(self.plan(state, std::slice::from_ref(&scope)).await),
            false => None,
        };
        let mut done = self.settle(state).await?;
        let batches = match planned {
            Some(Ok(batches)) if batches.is_empty() => return Ok(done),
            Some(Ok(batches)) => batches,
            // v2, or a read that failed: written in place, with retries.
            _ => return Ok(add(done, self.sync_slice_now(state, &scope).await?)),
        };
        let (sizes, counts) = (batches.iter().map(Vec::len).collect(), counts_of(&batches));
        match self.backend.start_apply(batches).await {
            Ok(Some(applying)) => {
                self.pending = Some(PendingSlice {
                    slice: scope,
                    sizes,
                    counts,
                    applying,
                });
            }
            _ => done = add(done, self.sync_slice_now(state, &scope).await?),
        }
        Ok(done)
    }

    /// Waits for the slice in flight, if any, and writes it again as the
    /// index stands now if etcd did not take all of it. Returns the keys
    /// written and deleted.
    pub(crate) async fn settle(
        &mut self,
        state: &impl DesiredState,
    ) -> Result<(u64, u64), WriteError> {
        let Some(pending) = self.pending.take() else {
            return Ok((0, 0));
        };
        let (revisions, result) = match pending.applying.await {
            Ok(applied) => applied,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down.
            Err(_) => return Ok((0, 0)),
        };
        let mut done = (0, 0);
        for (i, revision) in revisions.into_iter().enumerate() {
            self.saw(revision);
            self.last_progress = Instant::now();
            self.txn_limit.accepted(pending.sizes[i]);
            let (puts, deletes) = pending.counts[i];
            self.metrics.records_written.inc_by(puts);
            self.metrics.records_deleted.inc_by(deletes);
            done = add(done, (puts, deletes));
        }
        match result {
            Ok(()) => {
                self.metrics.set_etcd_ok(true);
                Ok(done)
            }
            Err(_) if self.shutdown.is_cancelled() => Ok(done),
            Err(error) => {
                self.refused(&error);
                self.backend.reset();
                tracing::debug!(
                    "Failed to mutate etcd: a slice of a full sync ({}) due to: {error}. Writing it again",
                    pending.slice.describe(&self.names)
                );
                let slice = state.current_slice(&pending.slice);
                Ok(add(done, self.sync_slice_now(state, &slice).await?))
            }
        }
    }

    /// Writes `slice` in place, with retries; returns the keys written and
    /// deleted.
    async fn sync_slice_now(
        &mut self,
        state: &impl DesiredState,
        slice: &Scope,
    ) -> Result<(u64, u64), WriteError> {
        let before = (
            self.metrics.records_written.get(),
            self.metrics.records_deleted.get(),
        );
        self.sync_with_retry(state, std::slice::from_ref(slice))
            .await?;
        Ok((
            self.metrics.records_written.get() - before.0,
            self.metrics.records_deleted.get() - before.1,
        ))
    }
}

fn add(a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
    (a.0 + b.0, a.1 + b.1)
}
