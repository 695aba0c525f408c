//! Full syncs in progress, written a slice at a time so that changes never
//! wait for one.
//!
//! A (re)list of services and endpoints asks for the whole `svc/` subtree
//! (and the PTRs) to be reconciled, a relist of pods for `pod/`: at 50,000
//! services and 150,000 pods that is seconds of writing. [`FullSyncs`]
//! holds each such sync as the slices still to write (planned by
//! [`Writer::full_sync_slices`]); the write loop writes one slice, then
//! applies the watch events that arrived meanwhile and writes their scopes,
//! then the next slice. A change made during a full sync waits for at most
//! the slice in flight. Each slice is diffed against the index as it stands
//! when the slice is written ([`DesiredState::current_slice`]), so what an
//! event wrote between two slices is neither undone nor lost, and a
//! service is still written whole or not at all. A new relist of a subtree
//! whose sync is running starts that sync over. Services go before pods.

use crate::etcd::{WriteError, Writer};
use crate::metrics::Metrics;
use crate::scope::{DesiredState, Scope};
use std::collections::VecDeque;
use std::time::Instant;

/// One subtree's full sync.
#[derive(Debug)]
struct FullSync {
    /// [`Scope::AllServices`] or [`Scope::AllPods`].
    whole: Scope,
    /// The slices not written yet, in key order.
    slices: VecDeque<Scope>,
    started: Instant,
    written: u64,
    deleted: u64,
}

/// The full syncs still running, services first.
#[derive(Debug, Default)]
pub(crate) struct FullSyncs {
    running: Vec<FullSync>,
}

/// Splits `scopes` into the ones written at once and the whole subtrees.
pub(crate) fn split_whole(scopes: Vec<Scope>) -> (Vec<Scope>, Vec<Scope>) {
    scopes
        .into_iter()
        .partition(|s| !matches!(s, Scope::AllServices | Scope::AllPods))
}

impl FullSyncs {
    /// Starts a full sync of `whole` in `slices`, or starts the running one
    /// over.
    pub(crate) fn start(&mut self, whole: Scope, slices: Vec<Scope>) {
        self.running.retain(|s| s.whole != whole);
        self.running.push(FullSync {
            whole,
            slices: slices.into(),
            started: Instant::now(),
            written: 0,
            deleted: 0,
        });
        self.running
            .sort_by_key(|s| !matches!(s.whole, Scope::AllServices));
    }

    /// Whether a slice is waiting to be written.
    pub(crate) fn is_running(&self) -> bool {
        !self.running.is_empty()
    }

    /// Whether the services' full sync is still running.
    pub(crate) fn services_running(&self) -> bool {
        self.running
            .iter()
            .any(|s| matches!(s.whole, Scope::AllServices))
    }

    /// Writes the next slice; logs (and for services, notes in `metrics`)
    /// a subtree whose last slice this was. After shutdown nothing is
    /// written and nothing is logged as done.
    pub(crate) async fn write_next(
        &mut self,
        writer: &mut Writer,
        state: &impl DesiredState,
        metrics: &Metrics,
    ) -> Result<(), WriteError> {
        let Some(sync) = self.running.first_mut() else {
            return Ok(());
        };
        if let Some(slice) = sync.slices.pop_front() {
            let (written, deleted) = writer.sync_slice(state, &slice).await?;
            sync.written += written;
            sync.deleted += deleted;
        }
        if !sync.slices.is_empty() || writer.is_shutting_down() {
            return Ok(());
        }
        let done = self.running.remove(0);
        let what = match done.whole {
            Scope::AllServices => {
                metrics.full_sync_done();
                "services"
            }
            _ => "pods",
        };
        tracing::info!(
            "full sync of {what} done in {:.3} s: {} keys written, {} deleted",
            done.started.elapsed().as_secs_f64(),
            done.written,
            done.deleted,
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(from: Option<&str>) -> Scope {
        Scope::PodChunk {
            namespaces: vec![],
            from: from.map(String::from),
            to: None,
        }
    }

    #[test]
    fn services_go_first_and_a_new_relist_starts_a_sync_over() {
        let mut syncs = FullSyncs::default();
        assert!(!syncs.is_running());
        syncs.start(Scope::AllPods, vec![chunk(None), chunk(Some("b"))]);
        syncs.start(
            Scope::AllServices,
            vec![Scope::PtrChunk {
                from: None,
                to: None,
            }],
        );
        assert!(syncs.services_running());
        assert_eq!(syncs.running[0].whole, Scope::AllServices);
        syncs.running[1].slices.pop_front();
        syncs.start(Scope::AllPods, vec![chunk(None), chunk(Some("b"))]);
        assert_eq!(syncs.running.len(), 2);
        assert_eq!(syncs.running[0].whole, Scope::AllServices);
        assert_eq!(syncs.running[1].slices.len(), 2, "started over");
    }

    #[test]
    fn whole_subtrees_are_split_from_the_scopes_written_at_once() {
        let (now, whole) = split_whole(vec![Scope::DnsVersion, Scope::AllPods, Scope::AllServices]);
        assert_eq!(now, [Scope::DnsVersion]);
        assert_eq!(whole, [Scope::AllPods, Scope::AllServices]);
    }
}
