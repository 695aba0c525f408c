//! Full syncs in progress, written a chunk at a time so that changes never wait
//! for one: [`FullSyncs`] holds each sync a relist asks for as the chunks still
//! to write. The write loop writes one chunk, then the watch events that
//! arrived meanwhile, then the next chunk. Services go before pods.

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
    /// The chunks not written yet, in key order.
    chunks: VecDeque<Scope>,
    started: Instant,
    written: u64,
    deleted: u64,
    /// A relist came during this pass: one more pass after it.
    again: bool,
}

/// The full syncs still running, services first.
#[derive(Debug, Default)]
pub(crate) struct FullSyncs {
    running: Vec<FullSync>,
    /// Passes of the services' sync completed.
    services_passes: u64,
}

/// Splits `scopes` into the ones written at once and the whole subtrees;
/// a whole subtree absorbs the scopes of its parts (a relist's
/// per-service scopes would otherwise be one round beside it, not cut
/// into chunks).
pub(crate) fn split_whole(scopes: Vec<Scope>) -> (Vec<Scope>, Vec<Scope>) {
    let (whole, mut now): (Vec<Scope>, Vec<Scope>) = scopes
        .into_iter()
        .partition(|s| matches!(s, Scope::AllServices | Scope::AllPods));
    if whole.contains(&Scope::AllServices) {
        now.retain(|s| !matches!(s, Scope::Service(_) | Scope::Ptr(_)));
    }
    if whole.contains(&Scope::AllPods) {
        now.retain(|s| !matches!(s, Scope::PodDir { .. }));
    }
    (now, whole)
}

impl FullSyncs {
    /// Asks for a full sync of `whole`: `true` when one must be planned
    /// and [`FullSyncs::begin`] now; `false` when one is running, which
    /// then takes one more pass after the current one.
    pub(crate) fn request(&mut self, whole: &Scope) -> bool {
        match self.running.iter_mut().find(|s| s.whole == *whole) {
            Some(running) => {
                running.again = true;
                false
            }
            None => true,
        }
    }

    /// Starts a pass of the full sync of `whole` in `chunks`.
    pub(crate) fn begin(&mut self, whole: Scope, chunks: Vec<Scope>) {
        self.running.retain(|s| s.whole != whole);
        self.running.push(FullSync {
            whole,
            chunks: chunks.into(),
            started: Instant::now(),
            written: 0,
            deleted: 0,
            again: false,
        });
        self.running
            .sort_by_key(|s| !matches!(s.whole, Scope::AllServices));
    }

    /// Counts keys that a chunk of the running pass wrote and deleted, as
    /// [`Writer::settle`] reports them when something else waited for it.
    pub(crate) fn count(&mut self, (written, deleted): (u64, u64)) {
        if let Some(sync) = self.running.first_mut() {
            sync.written += written;
            sync.deleted += deleted;
        }
    }

    /// Whether a chunk is waiting to be written.
    pub(crate) fn is_running(&self) -> bool {
        !self.running.is_empty()
    }

    /// Whether every service has been written by a full sync once, or
    /// none is running (readiness, with the lists done).
    pub(crate) fn services_written(&self) -> bool {
        self.services_passes > 0
            || !self
                .running
                .iter()
                .any(|s| matches!(s.whole, Scope::AllServices))
    }

    /// Writes the next chunk; logs (and for services, notes in `metrics`)
    /// a pass whose last chunk this was. Returns the subtree to plan and
    /// [`FullSyncs::begin`] again when a relist came during that pass.
    /// After shutdown nothing is written and nothing is logged as done.
    pub(crate) async fn write_next(
        &mut self,
        writer: &mut Writer,
        state: &impl DesiredState,
        metrics: &Metrics,
    ) -> Result<Option<Scope>, WriteError> {
        let Some(sync) = self.running.first_mut() else {
            return Ok(None);
        };
        // Sends the chunk planned at the last step and plans the next one.
        let next = sync.chunks.pop_front();
        let (written, deleted) = writer.sync_chunk(state, next.as_ref()).await?;
        sync.written += written;
        sync.deleted += deleted;
        // Nothing is left planned after a last step, but at shutdown.
        if next.is_some() || writer.is_shutting_down() {
            return Ok(None);
        }
        // The last chunk was sent: it is in etcd before the pass is done.
        let (written, deleted) = writer.settle(state).await?;
        sync.written += written;
        sync.deleted += deleted;
        if writer.is_shutting_down() {
            return Ok(None);
        }
        let done = self.running.remove(0);
        let what = match done.whole {
            Scope::AllServices => {
                metrics.full_sync_done();
                self.services_passes += 1;
                "services"
            }
            _ => "pods",
        };
        tracing::info!(
            "full sync of {what} done in {:.3} s: {} keys written, {} deleted{}",
            done.started.elapsed().as_secs_f64(),
            done.written,
            done.deleted,
            if done.again {
                "; a relist came meanwhile: once more"
            } else {
                ""
            },
        );
        Ok(done.again.then_some(done.whole))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::ObjectKey;

    fn chunk(from: Option<&str>) -> Scope {
        Scope::PodChunk {
            namespaces: vec![],
            from: from.map(String::from),
            to: None,
        }
    }

    #[test]
    fn services_go_first_and_a_relist_during_a_pass_asks_for_one_more() {
        let mut syncs = FullSyncs::default();
        assert!(!syncs.is_running() && syncs.services_written());
        assert!(syncs.request(&Scope::AllPods));
        syncs.begin(Scope::AllPods, vec![chunk(None), chunk(Some("b"))]);
        assert!(syncs.request(&Scope::AllServices));
        let ptrs = Scope::PtrChunk {
            from: None,
            to: None,
        };
        syncs.begin(Scope::AllServices, vec![ptrs]);
        assert!(!syncs.services_written());
        assert_eq!(syncs.running[0].whole, Scope::AllServices);
        syncs.running[1].chunks.pop_front();
        // A relist of pods while their pass runs: it goes on, once more after.
        assert!(!syncs.request(&Scope::AllPods));
        assert!(!syncs.request(&Scope::AllPods));
        assert_eq!(syncs.running.len(), 2);
        assert_eq!(syncs.running[0].whole, Scope::AllServices);
        assert_eq!(syncs.running[1].chunks.len(), 1, "not started over");
        assert!(syncs.running[1].again && !syncs.running[0].again);
    }

    #[test]
    fn whole_subtrees_are_split_from_the_scopes_written_at_once_and_absorb_their_parts() {
        let service = Scope::Service(ObjectKey {
            namespace: "d".into(),
            name: "s".into(),
        });
        let ptr = Scope::Ptr("10.0.0.1".parse().expect("ip"));
        let pod = Scope::PodDir {
            namespace: "d".into(),
            ip: "10.1.0.1".into(),
        };
        let (now, whole) = split_whole(vec![
            Scope::DnsVersion,
            service.clone(),
            ptr.clone(),
            pod.clone(),
            Scope::AllPods,
            Scope::AllServices,
        ]);
        assert_eq!(now, [Scope::DnsVersion]);
        assert_eq!(whole, [Scope::AllPods, Scope::AllServices]);
        let (now, whole) = split_whole(vec![
            service.clone(),
            ptr.clone(),
            pod.clone(),
            Scope::AllPods,
        ]);
        assert_eq!(now, [service, ptr]);
        assert_eq!(whole, [Scope::AllPods]);
        let (now, _) = split_whole(vec![pod.clone()]);
        assert_eq!(now, [pod]);
    }
}
