//! The life of a skydns process: *loading* until the first snapshot is in
//! place, *ready* while the store is in reach, *lameduck* after the first
//! SIGTERM, then the drain and exit. [`Status`] holds the state the `/ready`
//! endpoint reads, and [`readiness`] is the rule.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

mod flags;
pub use flags::{Flags, Keys, Settings};

/// How long, once the listeners are closed, replies already being worked on
/// (a TCP query read, a forward waiting on an upstream) may take to finish.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// What stops skydns: `terminate` (the first SIGTERM or SIGINT) starts the
/// lameduck and the drain; `abort` (a second one) ends them at once.
#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    /// Start stopping, gracefully.
    pub terminate: CancellationToken,
    /// Stop now: no more lameduck, no more drain.
    pub abort: CancellationToken,
}

impl From<CancellationToken> for Shutdown {
    /// Graceful stop on `terminate`, never cut short.
    fn from(terminate: CancellationToken) -> Self {
        Shutdown {
            terminate,
            abort: CancellationToken::new(),
        }
    }
}

/// Why `/ready` says 503.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    /// The first snapshot of the records is not in place yet.
    #[error("records not loaded from the store yet")]
    Loading,
    /// SIGTERM received: the listeners close at the end of the lameduck.
    #[error("stopping (lameduck)")]
    Lameduck,
    /// The store has been out of reach for longer than the bound.
    #[error("store unreachable for {0:?}; answering from the last snapshot")]
    StoreUnreachable(Duration),
}

/// The readiness rule: the records are loaded, the process is not stopping,
/// and the store has not been out of reach (`store_down_for`) for longer
/// than `store_timeout` (zero: the store's reachability does not count).
pub fn readiness(
    loaded: bool,
    lameduck: bool,
    store_down_for: Option<Duration>,
    store_timeout: Duration,
) -> Result<(), NotReady> {
    if lameduck {
        return Err(NotReady::Lameduck);
    }
    if !loaded {
        return Err(NotReady::Loading);
    }
    match store_down_for {
        Some(down) if !store_timeout.is_zero() && down > store_timeout => {
            Err(NotReady::StoreUnreachable(down))
        }
        _ => Ok(()),
    }
}

/// The state `/ready` reports, shared by the store task, the listeners
/// and the signal handling.
#[derive(Debug)]
pub struct Status {
    loaded: watch::Sender<bool>,
    lameduck: AtomicBool,
    store_down_since: Mutex<Option<Instant>>,
    store_timeout: Duration,
}

impl Status {
    /// A loading process whose readiness allows the store to be out of
    /// reach for `store_timeout` (zero: for ever).
    pub fn new(store_timeout: Duration) -> Self {
        Status {
            loaded: watch::Sender::new(false),
            lameduck: AtomicBool::new(false),
            store_down_since: Mutex::new(None),
            store_timeout,
        }
    }

    /// The store task put a snapshot in place: the store answered.
    pub fn store_loaded(&self) {
        self.loaded.send_replace(true);
        *self.down_since() = None;
    }

    /// The store could not be read (kept from the first failure on).
    pub fn store_failed(&self) {
        self.down_since().get_or_insert_with(Instant::now);
    }

    /// SIGTERM: from now on `/ready` says 503.
    pub fn enter_lameduck(&self) {
        self.lameduck.store(true, Ordering::Release);
    }

    /// Whether the first snapshot is in place.
    pub fn is_loaded(&self) -> bool {
        *self.loaded.borrow()
    }

    /// Waits until the first snapshot is in place.
    pub async fn loaded(&self) {
        let mut loaded = self.loaded.subscribe();
        // The sender lives in `self`, so the wait ends only when loaded.
        let _ = loaded.wait_for(|loaded| *loaded).await;
    }

    /// Ready, or why not.
    pub fn readiness(&self) -> Result<(), NotReady> {
        let down_for = self.down_since().map(|since| since.elapsed());
        readiness(
            self.is_loaded(),
            self.lameduck.load(Ordering::Acquire),
            down_for,
            self.store_timeout,
        )
    }

    fn down_since(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.store_down_since
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

/// Waits for the first snapshot, at most `wait`, and logs how it went;
/// `false` when `terminate` came first.
pub async fn wait_for_first_load(
    status: &Status,
    wait: Duration,
    terminate: &CancellationToken,
) -> bool {
    if status.is_loaded() || wait.is_zero() {
        return true;
    }
    let start = Instant::now();
    tokio::select! {
        _ = terminate.cancelled() => return false,
        _ = status.loaded() => tracing::info!(waited = ?start.elapsed(), "first load of the records done"),
        _ = tokio::time::sleep(wait) => tracing::warn!(
            ?wait,
            "no records loaded within -startup-wait; answering anyway (SERVFAIL for the cluster domain until the first load)"
        ),
    }
    true
}

/// The lameduck after `terminate`: `/ready` turns 503 at once, queries are
/// still answered for `lameduck` (or until `abort`); then `stop` is
/// cancelled, which closes the listeners.
pub async fn lameduck(
    status: &Status,
    lameduck: Duration,
    shutdown: &Shutdown,
    stop: &CancellationToken,
) {
    tokio::select! {
        _ = shutdown.terminate.cancelled() => {}
        _ = stop.cancelled() => return,
    }
    status.enter_lameduck();
    if !lameduck.is_zero() {
        tracing::info!(
            ?lameduck,
            "lameduck: not ready, still answering; the listeners close after it"
        );
        tokio::select! {
            _ = tokio::time::sleep(lameduck) => {}
            _ = shutdown.abort.cancelled() => tracing::info!("lameduck cut short"),
        }
    }
    tracing::info!("closing the listeners");
    stop.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn ready_once_loaded_and_while_the_store_answers() {
        assert_eq!(readiness(false, false, None, MIN), Err(NotReady::Loading));
        assert_eq!(readiness(true, false, None, MIN), Ok(()));
        let short = Some(Duration::from_secs(59));
        assert_eq!(readiness(true, false, short, MIN), Ok(()));
    }

    #[test]
    fn a_store_out_of_reach_for_exactly_the_bound_is_still_ready() {
        assert_eq!(readiness(true, false, Some(MIN), MIN), Ok(()));
        let just_over = MIN + Duration::from_nanos(1);
        assert_eq!(
            readiness(true, false, Some(just_over), MIN),
            Err(NotReady::StoreUnreachable(just_over))
        );
    }

    #[test]
    fn a_shutdown_from_a_token_terminates_on_that_token_and_never_aborts() {
        let token = CancellationToken::new();
        let shutdown = Shutdown::from(token.clone());
        assert!(!shutdown.terminate.is_cancelled());
        token.cancel();
        assert!(shutdown.terminate.is_cancelled());
        assert!(!shutdown.abort.is_cancelled());
    }

    #[test]
    fn not_ready_in_lameduck_even_when_loaded() {
        assert_eq!(readiness(true, true, None, MIN), Err(NotReady::Lameduck));
        assert_eq!(readiness(false, true, None, MIN), Err(NotReady::Lameduck));
    }

    #[test]
    fn a_store_out_of_reach_past_the_bound_is_not_ready_unless_the_bound_is_zero() {
        let long = Duration::from_secs(61);
        assert_eq!(
            readiness(true, false, Some(long), MIN),
            Err(NotReady::StoreUnreachable(long))
        );
        assert_eq!(readiness(true, false, Some(long), Duration::ZERO), Ok(()));
    }

    #[test]
    fn status_follows_the_store_and_the_lameduck() {
        let status = Status::new(Duration::from_millis(1));
        assert_eq!(status.readiness(), Err(NotReady::Loading));
        status.store_loaded();
        assert_eq!(status.readiness(), Ok(()));
        status.store_failed();
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(
            status.readiness(),
            Err(NotReady::StoreUnreachable(_))
        ));
        status.store_loaded();
        assert_eq!(status.readiness(), Ok(()));
        status.enter_lameduck();
        assert_eq!(status.readiness(), Err(NotReady::Lameduck));
    }

    #[tokio::test(start_paused = true)]
    async fn queries_wait_for_the_first_load_at_most_the_startup_wait() {
        let status = Status::new(MIN);
        let never = CancellationToken::new();
        let start = tokio::time::Instant::now();
        assert!(wait_for_first_load(&status, Duration::from_secs(3), &never).await);
        assert_eq!(start.elapsed(), Duration::from_secs(3));

        let status = std::sync::Arc::new(Status::new(MIN));
        let loader = status.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(40)).await;
            loader.store_loaded();
        });
        let start = tokio::time::Instant::now();
        assert!(wait_for_first_load(&status, Duration::from_secs(3), &never).await);
        assert_eq!(start.elapsed(), Duration::from_millis(40));
    }

    /// Loaded (or told not to wait) is ready, whatever came since: the
    /// wait is not entered, where a terminate already given could win
    /// (`select!` picks among ready branches at random, so it is asked
    /// many times).
    #[tokio::test(start_paused = true)]
    async fn a_loaded_status_or_no_wait_needs_no_wait_even_once_terminated() {
        let terminated = CancellationToken::new();
        terminated.cancel();
        let loaded = Status::new(MIN);
        loaded.store_loaded();
        let loading = Status::new(MIN);
        for _ in 0..32 {
            assert!(wait_for_first_load(&loaded, Duration::from_secs(3), &terminated).await);
            assert!(wait_for_first_load(&loading, Duration::ZERO, &terminated).await);
        }
        assert!(!wait_for_first_load(&loading, Duration::from_secs(3), &terminated).await);
    }

    #[tokio::test(start_paused = true)]
    async fn lameduck_keeps_serving_for_its_duration_then_stops() {
        let status = Status::new(MIN);
        status.store_loaded();
        let shutdown = Shutdown::default();
        let stop = CancellationToken::new();
        shutdown.terminate.cancel();
        let start = tokio::time::Instant::now();
        let task = lameduck(&status, Duration::from_secs(4), &shutdown, &stop);
        tokio::pin!(task);
        // Not ready at once, listeners still open.
        assert!(futures::poll!(&mut task).is_pending());
        assert_eq!(status.readiness(), Err(NotReady::Lameduck));
        assert!(!stop.is_cancelled());
        task.await;
        assert_eq!(start.elapsed(), Duration::from_secs(4));
        assert!(stop.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_signal_cuts_the_lameduck_short() {
        let status = Status::new(MIN);
        let shutdown = Shutdown::default();
        let stop = CancellationToken::new();
        shutdown.terminate.cancel();
        let abort = shutdown.abort.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            abort.cancel();
        });
        let start = tokio::time::Instant::now();
        lameduck(&status, Duration::from_secs(30), &shutdown, &stop).await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        assert!(stop.is_cancelled());
    }
}
