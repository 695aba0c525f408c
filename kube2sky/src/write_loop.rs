//! The single writer: takes the watches' changes off one channel, applies them
//! to the [`Index`], writes the scopes they touched, and writes the full syncs
//! a relist asks for a chunk at a time ([`FullSyncs`]), changes in between. It
//! also checks etcd for data loss. One writer means no races between handlers.

use crate::etcd::{WriteError, Writer};
use crate::full_sync::{split_whole, FullSyncs};
use crate::index::{Change, Index};
use crate::metrics::Metrics;
use crate::scope::Scope;
use futures::future::OptionFuture;
use std::future::Future;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How many queued events are folded into one round of writes.
const MAX_EVENTS_PER_ROUND: usize = 256;

/// What the writer does next.
#[derive(Debug)]
enum Work {
    /// Shutdown, or every watch has ended.
    Stop,
    /// Queued changes, folded into one round.
    Changes(Vec<Change>),
    /// Time to check etcd for data loss.
    CheckLoss,
    /// Nothing queued: the next chunk of a full sync.
    Chunk,
}

/// Where the next chunk of a full sync stands against queued events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkTurn {
    /// No full sync is running.
    None,
    /// A chunk was just written: queued events go first.
    AfterEvents,
    /// A round of events was just written: the chunk goes first.
    BeforeEvents,
}

/// Waits for the next piece of work. The loss-check tick goes before the
/// events, so steady churn cannot starve it; it is ready at most once per
/// interval, so it cannot starve the events either. A full sync's chunks
/// and rounds of queued events take turns ([`ChunkTurn`]): a change waits
/// for the chunk being planned (or one written in place: see
/// `crate::etcd::chunks`), and a full sync moves on under any churn. A
/// chunk's turn comes once `in_flight` (the chunk etcd is applying) is
/// done; events are taken meanwhile.
async fn next_work(
    rx: &mut mpsc::Receiver<Change>,
    ticker: &mut tokio::time::Interval,
    (check_loss, turn): (bool, ChunkTurn),
    in_flight: impl Future<Output = ()>,
    shutdown: &CancellationToken,
) -> Work {
    let mut in_flight = std::pin::pin!(in_flight);
    // One future, in the branch before the events or in the one after.
    let (mut before, mut after): (OptionFuture<_>, OptionFuture<_>) = match turn {
        ChunkTurn::BeforeEvents => (Some(in_flight.as_mut()).into(), None.into()),
        ChunkTurn::AfterEvents => (None.into(), Some(in_flight.as_mut()).into()),
        ChunkTurn::None => (None.into(), None.into()),
    };
    tokio::select! {
        biased;
        _ = shutdown.cancelled() => Work::Stop,
        _ = ticker.tick(), if check_loss => Work::CheckLoss,
        _ = &mut before, if turn == ChunkTurn::BeforeEvents => Work::Chunk,
        change = rx.recv() => {
            let Some(change) = change else { return Work::Stop };
            let mut changes = vec![change];
            while changes.len() < MAX_EVENTS_PER_ROUND {
                match rx.try_recv() {
                    Ok(change) => changes.push(change),
                    Err(_) => break,
                }
            }
            Work::Changes(changes)
        }
        _ = &mut after, if turn == ChunkTurn::AfterEvents => Work::Chunk,
    }
}

/// The single writer; see the module docs.
pub(crate) struct WriteLoop<'a> {
    pub writer: &'a mut Writer,
    pub index: &'a mut Index,
    pub metrics: &'a Metrics,
    pub loss_check: Option<Duration>,
    pub shutdown: &'a CancellationToken,
}

impl WriteLoop<'_> {
    /// Runs until shutdown or until every watch has ended.
    pub(crate) async fn run(self, mut rx: mpsc::Receiver<Change>) -> Result<(), WriteError> {
        let WriteLoop {
            writer,
            index,
            metrics,
            loss_check,
            shutdown,
        } = self;
        let mut full = FullSyncs::default();
        let mut ticker = tokio::time::interval(loss_check.unwrap_or(Duration::from_secs(3600)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Whether the last thing written was a round of changes.
        let mut after_changes = false;
        // Events in the round being written, when it is one.
        let mut round: Option<usize> = None;
        loop {
            let turn = match (full.is_running(), after_changes) {
                (false, _) => ChunkTurn::None,
                (true, true) => ChunkTurn::BeforeEvents,
                (true, false) => ChunkTurn::AfterEvents,
            };
            let due = (loss_check.is_some(), turn);
            let in_flight = writer.in_flight_finished();
            let work = next_work(&mut rx, &mut ticker, due, in_flight, shutdown).await;
            let scopes: Vec<Scope> = match work {
                Work::Stop => {
                    full.count(writer.settle(index).await?);
                    return Ok(());
                }
                Work::Changes(changes) => {
                    tracing::trace!(changes = changes.len(), "round of changes received");
                    round = Some(changes.len());
                    after_changes = true;
                    changes.into_iter().flat_map(|c| index.apply(c)).collect()
                }
                Work::CheckLoss => {
                    // The chunk in flight first: revisions it reports after
                    // a loss was seen would look like another loss.
                    full.count(writer.settle(index).await?);
                    match writer.data_lost().await {
                        true => index.all_scopes(),
                        false => continue,
                    }
                }
                Work::Chunk => {
                    after_changes = false;
                    let again = full.write_next(writer, index, metrics).await?;
                    again.into_iter().collect()
                }
            };
            let (now, whole) = split_whole(scopes);
            // A chunk in flight goes on beside writes of other keys only:
            // changes to its keys, or a new pass, wait for it to be in etcd.
            if !whole.is_empty() || writer.in_flight_overlaps(&now) {
                full.count(writer.settle(index).await?);
            }
            // A chunk planned before these writes is read again if they
            // could touch its keys, or its pass starts over.
            writer.forget_planned(&now);
            writer.forget_planned(&whole);
            if whole.contains(&Scope::AllServices) {
                // A services pass goes before a running pods pass: the pods
                // chunk planned is sent and counted to its own pass first.
                // (Any other new pass goes after the running one, which
                // goes on with the chunk it planned.)
                full.count(writer.flush_planned(index).await?);
            }
            for subtree in whole {
                if full.request(&subtree) {
                    let chunks = writer.full_sync_chunks(index, &subtree);
                    full.begin(subtree, chunks);
                }
            }
            writer.sync(index, now).await?;
            if let Some(changes) = round.take() {
                // The breakdown of propagation (docs/testing.md) reads it.
                let revision = writer.last_revision();
                tracing::debug!(target: "kube2sky::timing", changes, revision, "round written");
            }
            let written = index.lists_done() && full.services_written();
            if written && !shutdown.is_cancelled() && metrics.set_ready() {
                tracing::info!("ready: the first lists of services and endpoints are written");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Update;
    use crate::objects::{ObjectKey, PodInfo};
    use std::future::{pending, ready};

    fn pod_change(i: usize) -> Change {
        Change::Pod(Update::Apply(PodInfo {
            key: ObjectKey {
                namespace: "d".into(),
                name: format!("p{i}"),
            },
            ips: vec![format!("10.1.0.{i}")],
        }))
    }

    #[tokio::test]
    async fn loss_check_is_not_starved_by_steady_events() {
        let (tx, mut rx) = mpsc::channel(16);
        let shutdown = CancellationToken::new();
        // A tick that fell due while the writer was busy writing.
        let fell_due = tokio::time::Instant::now() - Duration::from_secs(5);
        let mut ticker = tokio::time::interval_at(fell_due, Duration::from_secs(3600));
        let due = (true, ChunkTurn::None);
        for i in 0..8 {
            tx.send(pod_change(i)).await.expect("send");
        }
        let first = next_work(&mut rx, &mut ticker, due, ready(()), &shutdown).await;
        assert!(matches!(first, Work::CheckLoss), "{first:?}");
        let second = next_work(&mut rx, &mut ticker, due, ready(()), &shutdown).await;
        assert!(
            matches!(&second, Work::Changes(c) if c.len() == 8),
            "{second:?}"
        );
        shutdown.cancel();
        tx.send(pod_change(9)).await.expect("send");
        let third = next_work(&mut rx, &mut ticker, due, ready(()), &shutdown).await;
        assert!(matches!(third, Work::Stop), "{third:?}");
    }

    #[tokio::test]
    async fn changes_are_taken_while_the_chunk_in_flight_is_applied() {
        let (tx, mut rx) = mpsc::channel(16);
        let shutdown = CancellationToken::new();
        let mut ticker = tokio::time::interval(Duration::from_secs(3600));
        ticker.tick().await;
        let before = (false, ChunkTurn::BeforeEvents);
        // The chunk's turn, but etcd is still applying the one in flight:
        // nothing to do until it is done...
        let waiting = tokio::time::timeout(
            Duration::from_millis(20),
            next_work(&mut rx, &mut ticker, before, pending(), &shutdown),
        )
        .await;
        assert!(waiting.is_err(), "no chunk while one is in flight");
        // ...and a change that comes meanwhile is taken at once.
        tx.send(pod_change(1)).await.expect("send");
        let round = next_work(&mut rx, &mut ticker, before, pending(), &shutdown).await;
        assert!(
            matches!(&round, Work::Changes(c) if c.len() == 1),
            "{round:?}"
        );
        tx.send(pod_change(2)).await.expect("send");
        let chunk = next_work(&mut rx, &mut ticker, before, ready(()), &shutdown).await;
        assert!(matches!(chunk, Work::Chunk), "in flight done: {chunk:?}");
    }

    #[tokio::test]
    async fn chunks_and_rounds_of_queued_changes_take_turns() {
        let (tx, mut rx) = mpsc::channel(1024);
        let shutdown = CancellationToken::new();
        let mut ticker = tokio::time::interval(Duration::from_secs(3600));
        ticker.tick().await;
        let idle = tokio::time::timeout(
            Duration::from_millis(20),
            next_work(
                &mut rx,
                &mut ticker,
                (false, ChunkTurn::None),
                ready(()),
                &shutdown,
            ),
        )
        .await;
        assert!(idle.is_err(), "no work without changes or chunks");
        let after = (false, ChunkTurn::AfterEvents);
        let before = (false, ChunkTurn::BeforeEvents);
        let chunk = next_work(&mut rx, &mut ticker, after, ready(()), &shutdown).await;
        assert!(matches!(chunk, Work::Chunk), "nothing queued: {chunk:?}");
        for i in 0..MAX_EVENTS_PER_ROUND + 3 {
            tx.send(pod_change(i)).await.expect("send");
        }
        // After a chunk, queued changes go first, a round at a time...
        let round = next_work(&mut rx, &mut ticker, after, ready(()), &shutdown).await;
        assert!(
            matches!(&round, Work::Changes(c) if c.len() == MAX_EVENTS_PER_ROUND),
            "{round:?}"
        );
        // ...and after a round, the next chunk, though changes are queued.
        let chunk = next_work(&mut rx, &mut ticker, before, ready(()), &shutdown).await;
        assert!(matches!(chunk, Work::Chunk), "{chunk:?}");
        let rest = next_work(&mut rx, &mut ticker, after, ready(()), &shutdown).await;
        assert!(
            matches!(&rest, Work::Changes(c) if c.len() == 3),
            "{rest:?}"
        );
    }
}
