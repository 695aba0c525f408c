//! How many operations go in one etcd v3 transaction: `--etcd-max-txn-ops`,
//! halved each time etcd refuses a transaction as too large, and tried at full
//! size again after `--etcd-max-txn-ops-retry`, so an etcd restarted with a
//! larger limit gets that size again without a restart of kube2sky.

use gocompat::duration::format;
use std::time::{Duration, Instant};

/// The transaction size in force; see the module docs.
#[derive(Debug)]
pub(crate) struct TxnLimit {
    /// `--etcd-max-txn-ops`.
    configured: usize,
    /// The size used now.
    current: usize,
    /// `--etcd-max-txn-ops-retry`; zero: never try the configured size again.
    retry_after: Duration,
    /// When etcd last refused a transaction, while `current` is lowered.
    refused_at: Option<Instant>,
    /// While the configured size is being tried again: the size etcd last
    /// accepted, to go back to if it refuses.
    accepted: Option<usize>,
}

impl TxnLimit {
    /// Starts at `configured` (at least 1).
    pub(crate) fn new(configured: usize, retry_after: Duration) -> Self {
        let configured = configured.max(1);
        TxnLimit {
            configured,
            current: configured,
            retry_after,
            refused_at: None,
            accepted: None,
        }
    }

    /// Whether the configured size is due to be tried again at `now`.
    pub(crate) fn retry_due(&self, now: Instant) -> bool {
        self.refused_at.is_some_and(|at| {
            !self.retry_after.is_zero() && now.saturating_duration_since(at) >= self.retry_after
        })
    }

    /// How long a lowered size is kept, as the logs say it.
    pub(crate) fn kept_for(&self) -> String {
        match self.retry_after.is_zero() {
            true => "until kube2sky restarts".to_string(),
            false => format!("for {}", format(self.retry_after)),
        }
    }

    /// `--etcd-max-txn-ops`.
    pub(crate) fn configured(&self) -> usize {
        self.configured
    }

    /// The size to use for a sync starting `now`: the configured one again
    /// once `retry_after` has passed since the last refusal.
    pub(crate) fn at(&mut self, now: Instant) -> usize {
        if let Some(at) = self.refused_at {
            if !self.retry_after.is_zero() && now.saturating_duration_since(at) >= self.retry_after
            {
                tracing::info!(
                    "trying etcd transactions of {} operations again (--etcd-max-txn-ops) after {} \
                     at {} since etcd refused a larger one",
                    self.configured,
                    format(self.retry_after),
                    self.current
                );
                self.accepted = Some(self.current);
                self.current = self.configured;
                self.refused_at = None;
            }
        }
        self.current
    }

    /// Etcd refused (`why`) a transaction of a batch cut at `planned`
    /// operations at `now`: goes back to the size it last accepted after a
    /// try of the configured one, or halves `planned`. A batch cut before
    /// the size was lowered (a full sync's next chunk, planned while the
    /// one before was refused) changes nothing. `None`: no change.
    pub(crate) fn refused(
        &mut self,
        planned: usize,
        now: Instant,
        why: &impl std::fmt::Display,
    ) -> Option<usize> {
        let smaller = self.lower(planned, now)?;
        let again = self.kept_for();
        tracing::warn!(
            "etcd refused a transaction of up to {planned} operations ({why}): its --max-txn-ops \
             is lower than --etcd-max-txn-ops; using {smaller} {again}"
        );
        Some(smaller)
    }

    /// [`TxnLimit::refused`] without the warning (the probe logs once).
    pub(crate) fn lower(&mut self, planned: usize, now: Instant) -> Option<usize> {
        if planned > self.current {
            return None;
        }
        let smaller = match self.accepted.take() {
            Some(accepted) if accepted < planned => accepted,
            _ if planned > 1 => planned / 2,
            _ => return None,
        };
        self.current = smaller;
        self.refused_at = Some(now);
        Some(smaller)
    }

    /// Etcd accepted a transaction of `ops` operations: once that is more
    /// than the size it last accepted, the configured size holds again.
    pub(crate) fn accepted(&mut self, ops: usize) {
        if self.accepted.is_some_and(|before| ops > before) {
            self.accepted = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RETRY: Duration = Duration::from_secs(600);
    const WHY: &str = "too many operations in txn request";

    /// A batch cut at the size in force at `now`, refused.
    fn refuse(limit: &mut TxnLimit, now: Instant) -> Option<usize> {
        let planned = limit.at(now);
        limit.refused(planned, now, &WHY)
    }

    #[test]
    fn a_refused_size_is_halved_until_one() {
        let now = Instant::now();
        let mut limit = TxnLimit::new(1024, RETRY);
        assert_eq!(limit.at(now), 1024);
        assert_eq!(refuse(&mut limit, now), Some(512));
        assert_eq!(refuse(&mut limit, now), Some(256));
        assert_eq!(limit.at(now), 256);
        let mut one = TxnLimit::new(1, RETRY);
        assert_eq!(one.refused(1, now, &WHY), None);
        assert_eq!(one.at(now), 1);
    }

    #[test]
    fn the_configured_size_is_tried_again_after_the_retry_period() {
        let start = Instant::now();
        let mut limit = TxnLimit::new(1024, RETRY);
        refuse(&mut limit, start);
        refuse(&mut limit, start);
        refuse(&mut limit, start);
        assert_eq!(limit.at(start + RETRY - Duration::from_secs(1)), 128);
        assert_eq!(limit.at(start + RETRY), 1024);
        // Transactions no larger than before prove nothing.
        limit.accepted(128);
        assert_eq!(refuse(&mut limit, start + RETRY), Some(128));
        assert_eq!(limit.at(start + RETRY * 2), 1024);
        // A larger one accepted: it stays, however long after.
        limit.accepted(129);
        assert_eq!(limit.at(start + RETRY * 5), 1024);
        assert_eq!(refuse(&mut limit, start + RETRY * 5), Some(512));
    }

    #[test]
    fn a_refused_retry_goes_straight_back_to_the_size_last_accepted() {
        let start = Instant::now();
        let mut limit = TxnLimit::new(1024, RETRY);
        refuse(&mut limit, start);
        refuse(&mut limit, start);
        let later = start + RETRY;
        assert_eq!(limit.at(later), 1024);
        assert_eq!(refuse(&mut limit, later), Some(256));
        // And the period starts again from this refusal.
        assert_eq!(limit.at(later + RETRY / 2), 256);
        assert_eq!(limit.at(later + RETRY), 1024);
    }

    #[test]
    fn a_batch_cut_at_the_size_last_accepted_and_refused_during_a_retry_halves_it() {
        let start = Instant::now();
        let mut limit = TxnLimit::new(1024, RETRY);
        refuse(&mut limit, start);
        let later = start + RETRY;
        assert_eq!(limit.at(later), 1024);
        // A batch cut at 512 before the retry, refused during it: etcd
        // no longer takes 512, so going back to it would be refused again.
        assert_eq!(limit.refused(512, later, &WHY), Some(256));
        assert_eq!(limit.at(later), 256);
    }

    #[test]
    fn the_configured_size_halves_as_before_once_accepted_after_a_retry() {
        let start = Instant::now();
        let mut limit = TxnLimit::new(1024, RETRY);
        refuse(&mut limit, start);
        assert_eq!(limit.at(start + RETRY), 1024);
        limit.accepted(1000);
        // A member at a lower limit later on: halving, not the old 512.
        assert_eq!(refuse(&mut limit, start + RETRY * 2), Some(512));
        assert_eq!(refuse(&mut limit, start + RETRY * 2), Some(256));
    }

    #[test]
    fn a_retry_is_due_once_the_period_has_passed_since_a_refusal() {
        let start = Instant::now();
        let mut limit = TxnLimit::new(1024, RETRY);
        assert!(!limit.retry_due(start + RETRY), "nothing refused yet");
        // The probe lowers without a warning, as a refusal does.
        assert_eq!(limit.lower(1024, start), Some(512));
        assert!(!limit.retry_due(start + RETRY - Duration::from_secs(1)));
        assert!(limit.retry_due(start + RETRY));
        assert_eq!(limit.at(start + RETRY), 1024);
        assert!(
            !limit.retry_due(start + RETRY * 3),
            "tried again: nothing refused since"
        );
        let mut never = TxnLimit::new(1024, Duration::ZERO);
        never.lower(1024, start);
        assert!(!never.retry_due(start + RETRY * 100), "0s: never");
        assert_eq!(
            (never.configured(), never.kept_for().as_str()),
            (1024, "until kube2sky restarts")
        );
        assert_eq!(limit.kept_for(), "for 10m0s");
    }

    #[test]
    fn a_zero_retry_period_keeps_the_lowered_size() {
        let start = Instant::now();
        let mut limit = TxnLimit::new(1024, Duration::ZERO);
        refuse(&mut limit, start);
        assert_eq!(limit.at(start + Duration::from_secs(86_400)), 512);
    }

    #[test]
    fn a_batch_cut_before_the_size_was_lowered_changes_nothing() {
        let now = Instant::now();
        let mut limit = TxnLimit::new(1024, RETRY);
        // Two chunks cut at 1024; the first is refused, then halved to 128.
        let planned = limit.at(now);
        assert_eq!(limit.refused(planned, now, &WHY), Some(512));
        assert_eq!(limit.refused(512, now, &WHY), Some(256));
        assert_eq!(limit.refused(256, now, &WHY), Some(128));
        // The second, cut at 1024 before all that, is refused too.
        assert_eq!(limit.refused(planned, now, &WHY), None);
        assert_eq!(limit.at(now), 128);
    }

    #[test]
    fn a_retry_refused_twice_stays_at_the_size_last_accepted() {
        let start = Instant::now();
        let mut limit = TxnLimit::new(1024, RETRY);
        limit.refused(1024, start, &WHY);
        limit.refused(512, start, &WHY);
        let later = start + RETRY;
        let planned = limit.at(later);
        assert_eq!(planned, 1024);
        assert_eq!(limit.refused(planned, later, &WHY), Some(256));
        // A second chunk cut at 1024 during the try: no further halving.
        assert_eq!(limit.refused(planned, later, &WHY), None);
        assert_eq!(limit.at(later), 256);
    }
}
