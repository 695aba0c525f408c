//! A full sync's chunks, written one behind the other on etcd v3: while etcd
//! applies one chunk, the writer plans the next and goes back to the write
//! loop, so changes are written meanwhile. Writes whose keys could be the
//! chunk's wait for it ([`Writer::settle`]); a planned chunk that a change
//! touched is read again ([`Writer::forget_planned`]).

use super::v3::Applied;
use super::{counts_of, EtcdError, Op, WriteError, Writer};
use crate::scope::{DesiredState, Scope};
use std::time::Instant;
use tokio::task::JoinHandle;

/// A chunk whose transactions etcd is applying; dropped (the writer
/// stopped, or lost the leader election), it stops sending them.
pub(super) struct PendingChunk {
    /// The chunk, to write again should a transaction fail.
    chunk: Scope,
    /// The transaction size its batches were cut at.
    limit: usize,
    /// Each transaction's operations, and of those the puts and deletes.
    sizes: Vec<usize>,
    counts: Vec<(u64, u64)>,
    applying: JoinHandle<Applied>,
    /// What the task returned, once [`Writer::in_flight_finished`] saw it.
    applied: Option<Applied>,
}

/// The next chunk of a full sync, planned while the one before it is in
/// flight, and not sent yet.
pub(super) struct PlannedChunk {
    /// The chunk, as it stood when it was planned.
    chunk: Scope,
    /// Its transactions and the size they were cut at; `None` when it is
    /// to be written in place when its turn comes (v2, a read that failed,
    /// or a change to its keys since it was read).
    batches: Option<(Vec<Vec<Op>>, usize)>,
}

impl Drop for PendingChunk {
    fn drop(&mut self) {
        self.applying.abort();
    }
}

impl Writer {
    /// The chunks a full sync of `whole` ([`Scope::AllServices`] or
    /// [`Scope::AllPods`]) is written in. On etcd v3, about `sync_chunk`
    /// objects each ([`DesiredState::pod_chunks`],
    /// [`DesiredState::service_chunks`]: services by namespace, then the
    /// PTRs): at 150,000 pods the desired and actual records of the whole
    /// subtree at once were 50 MB, and a chunk is as long as a change made
    /// during the sync waits. v2 reads a subtree in one request: one chunk.
    pub(crate) fn full_sync_chunks(&self, state: &impl DesiredState, whole: &Scope) -> Vec<Scope> {
        let chunk = self.options.sync_chunk;
        match whole {
            Scope::AllPods if self.backend.has_transactions() => state.pod_chunks(chunk),
            Scope::AllServices if self.backend.has_transactions() => state.service_chunks(chunk),
            _ => vec![whole.clone()],
        }
    }

    /// One step of a full sync: waits for the chunk in flight, sends the
    /// chunk planned beside it, and plans `next` (as the state stands now,
    /// [`DesiredState::current_chunk`]) while that one is applied. On v2
    /// nothing is planned: the chunk is written in place at its turn.
    /// Returns the keys written and deleted by what finished meanwhile.
    pub(crate) async fn sync_chunk(
        &mut self,
        state: &impl DesiredState,
        next: Option<&Scope>,
    ) -> Result<(u64, u64), WriteError> {
        if self.shutdown.is_cancelled() {
            return Ok((0, 0));
        }
        let mut done = self.settle(state).await?;
        if let Some(planned) = self.planned.take() {
            done = add(done, self.send_planned(state, planned).await?);
        }
        if let Some(chunk) = next {
            let chunk = state.current_chunk(chunk);
            let batches = match self.backend.has_transactions() {
                true => self.plan(state, std::slice::from_ref(&chunk)).await.ok(),
                false => None,
            };
            let operations = batches
                .as_ref()
                .map(|(b, _)| b.iter().map(Vec::len).sum::<usize>());
            tracing::debug!(
                "next chunk planned: {}: {}",
                chunk.describe(&self.names),
                match operations {
                    Some(n) => format!("{n} operations"),
                    None => "to be read at its turn".to_string(),
                }
            );
            self.planned = Some(PlannedChunk { chunk, batches });
        }
        Ok(done)
    }

    /// Sends the planned chunk, if any, and waits until it is in etcd.
    pub(crate) async fn flush_planned(
        &mut self,
        state: &impl DesiredState,
    ) -> Result<(u64, u64), WriteError> {
        let Some(planned) = self.planned.take() else {
            return Ok((0, 0));
        };
        let done = self.send_planned(state, planned).await?;
        Ok(add(done, self.settle(state).await?))
    }

    /// Sends a planned chunk, or writes it in place as the state stands
    /// now when it must be read again.
    async fn send_planned(
        &mut self,
        state: &impl DesiredState,
        planned: PlannedChunk,
    ) -> Result<(u64, u64), WriteError> {
        let (batches, limit) = match planned.batches {
            Some((batches, _)) if batches.is_empty() => return Ok((0, 0)),
            Some(planned) => planned,
            None => return self.sync_chunk_now(state, &planned.chunk).await,
        };
        let (sizes, counts) = (batches.iter().map(Vec::len).collect(), counts_of(&batches));
        match self.backend.start_apply(batches).await {
            Ok(Some(applying)) => {
                self.pending = Some(PendingChunk {
                    chunk: planned.chunk,
                    limit,
                    sizes,
                    counts,
                    applying,
                    applied: None,
                });
                Ok((0, 0))
            }
            _ => self.sync_chunk_now(state, &planned.chunk).await,
        }
    }

    /// Resolves once etcd has applied the chunk in flight (at once when
    /// there is none), keeping the result for [`Writer::settle`]. Dropped
    /// before that (the write loop took an event first), it changes nothing.
    pub(crate) async fn in_flight_finished(&mut self) {
        let Some(pending) = &mut self.pending else {
            return;
        };
        if pending.applied.is_none() {
            pending.applied = Some(joined((&mut pending.applying).await));
        }
    }

    /// Marks the planned chunk to be read again when its turn comes if
    /// `scopes` (a round of changes, or passes that start over) could touch
    /// its keys: it was diffed against etcd before their writes.
    pub(crate) fn forget_planned(&mut self, scopes: &[Scope]) {
        let touched = (self.planned.as_ref()).is_some_and(|p| self.overlaps(&p.chunk, scopes));
        if let Some(planned) = self.planned.as_mut().filter(|_| touched) {
            planned.batches = None;
        }
    }

    /// Stops sending the chunk in flight, if any (the writer is stopping:
    /// shutdown, or the leader election was lost).
    pub(crate) fn abandon_in_flight(&mut self) {
        self.pending = None;
        self.planned = None;
    }

    /// Whether writing `scopes` could touch a key of the chunk in flight
    /// (their etcd reads overlap): then [`Writer::settle`] must come first.
    pub(crate) fn in_flight_overlaps(&self, scopes: &[Scope]) -> bool {
        (self.pending.as_ref()).is_some_and(|p| self.overlaps(&p.chunk, scopes))
    }

    /// Whether `chunk` and `scopes` read overlapping keys in etcd.
    fn overlaps(&self, chunk: &Scope, scopes: &[Scope]) -> bool {
        let reverse = self.options.reverse;
        let reads = chunk.reads(&self.names, reverse);
        scopes
            .iter()
            .flat_map(|s| s.reads(&self.names, reverse))
            .any(|read| reads.iter().any(|r| r.overlaps(&read)))
    }

    /// Waits for the chunk in flight, if any, and writes it again as the
    /// index stands now if etcd did not take all of it. Returns the keys
    /// written and deleted.
    pub(crate) async fn settle(
        &mut self,
        state: &impl DesiredState,
    ) -> Result<(u64, u64), WriteError> {
        Ok(self.wait_in_flight(state).await?.0)
    }

    /// [`Writer::settle`], and whether etcd took the chunk as it was sent
    /// (`false`: it was written again).
    async fn wait_in_flight(
        &mut self,
        state: &impl DesiredState,
    ) -> Result<((u64, u64), bool), WriteError> {
        let Some(mut pending) = self.pending.take() else {
            return Ok(((0, 0), true));
        };
        let (revisions, result) = match pending.applied.take() {
            Some(applied) => applied,
            None => joined((&mut pending.applying).await),
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
                Ok((done, true))
            }
            Err(_) if self.shutdown.is_cancelled() => Ok((done, true)),
            Err(error) => {
                self.metrics.set_etcd_ok(false);
                self.refused(&error, pending.limit);
                self.backend.reset();
                tracing::debug!(
                    "Failed to mutate etcd using mutator: sync {} due to: {error}. Writing it again",
                    pending.chunk.describe(&self.names)
                );
                // The chunk planned beside it was read before this rewrite.
                if let Some(planned) = &mut self.planned {
                    planned.batches = None;
                }
                let written = self.sync_chunk_now(state, &pending.chunk).await?;
                Ok((add(done, written), false))
            }
        }
    }

    /// Writes `chunk` (planned earlier) in place as the state stands now
    /// ([`DesiredState::current_chunk`]), with retries; returns the keys
    /// written and deleted.
    async fn sync_chunk_now(
        &mut self,
        state: &impl DesiredState,
        chunk: &Scope,
    ) -> Result<(u64, u64), WriteError> {
        let chunk = &state.current_chunk(chunk);
        let before = (
            self.metrics.records_written.get(),
            self.metrics.records_deleted.get(),
        );
        self.sync_with_retry(state, std::slice::from_ref(chunk))
            .await?;
        Ok((
            self.metrics.records_written.get() - before.0,
            self.metrics.records_deleted.get() - before.1,
        ))
    }
}

/// A chunk task's result; a task that panicked panics here too.
fn joined(result: Result<Applied, tokio::task::JoinError>) -> Applied {
    match result {
        Ok(applied) => applied,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => (Vec::new(), Err(EtcdError::Failed(e.to_string()))),
    }
}

fn add(a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
    (a.0 + b.0, a.1 + b.1)
}
