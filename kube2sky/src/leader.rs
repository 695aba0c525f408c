//! Leader election over a `coordination.k8s.io/v1` Lease (`--leader-elect`), so
//! that kube2sky replicas can share one etcd and only one of them writes. The
//! rules are client-go's `leaderelection`, timed on the local clock only.
//! [`decide`] is the pure part; [`acquire`] and [`keep`] are the loops around
//! the API.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Which Lease, who we are, and the three timings (`--leader-elect-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Election {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's `holderIdentity`.
    pub identity: String,
    /// How long a holder's silence lasts before a standby takes over.
    pub lease_duration: Duration,
    /// How long the holder retries a failing renewal before it gives up.
    pub renew_deadline: Duration,
    /// Pause between attempts.
    pub retry_period: Duration,
}

/// What to do with the Lease as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// There is none: create it, held by us.
    Create,
    /// Nobody holds it, or its holder went silent: take it over.
    TakeOver,
    /// We hold it: renew it.
    Renew,
    /// Someone else holds it and renewed it within the lease duration.
    Wait {
        /// The holder.
        holder: String,
    },
}

/// The Lease record as last seen, and when (local clock) it last changed.
#[derive(Debug, Clone)]
pub(crate) struct Observation {
    record: Option<(Option<String>, Option<String>, Option<i32>)>,
    at: Instant,
}

impl Observation {
    /// Nothing seen yet, as of `now`.
    pub(crate) fn new(now: Instant) -> Self {
        Observation {
            record: None,
            at: now,
        }
    }
}

/// Decides what to do with `lease` (None: absent) at `now`; updates the
/// observation when the record changed since it was last seen.
pub(crate) fn decide(
    lease: Option<&LeaseSpec>,
    me: &str,
    seen: &mut Observation,
    now: Instant,
    default_duration: Duration,
) -> Action {
    let Some(spec) = lease else {
        return Action::Create;
    };
    let record = (
        spec.holder_identity.clone(),
        spec.renew_time.as_ref().map(|t| t.0.to_string()),
        spec.lease_transitions,
    );
    if seen.record.as_ref() != Some(&record) {
        seen.record = Some(record);
        seen.at = now;
    }
    let holder = spec.holder_identity.clone().unwrap_or_default();
    if holder == me {
        return Action::Renew;
    }
    let duration = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .filter(|s| *s > 0)
        .map_or(default_duration, Duration::from_secs);
    if holder.is_empty() || now.duration_since(seen.at) >= duration {
        Action::TakeOver
    } else {
        Action::Wait { holder }
    }
}

/// The Lease `lease` (None: a new one) as held by `e.identity` from now on.
fn held(e: &Election, lease: Option<Lease>, took_over: bool) -> Lease {
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let mut lease = lease.unwrap_or_else(|| Lease {
        metadata: ObjectMeta {
            name: Some(e.name.clone()),
            namespace: Some(e.namespace.clone()),
            ..ObjectMeta::default()
        },
        spec: None,
    });
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    if took_over || spec.acquire_time.is_none() {
        spec.acquire_time = Some(now.clone());
        if took_over {
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
    }
    spec.holder_identity = Some(e.identity.clone());
    spec.lease_duration_seconds =
        Some(i32::try_from(e.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX));
    spec.renew_time = Some(now);
    lease
}

/// One read and, when [`decide`] says so, one write. `Ok(true)`: we hold
/// the lease now.
async fn try_hold(api: &Api<Lease>, e: &Election, seen: &mut Observation) -> Result<bool, String> {
    let lease = api.get_opt(&e.name).await.map_err(|err| err.to_string())?;
    let action = decide(
        lease.as_ref().and_then(|l| l.spec.as_ref()),
        &e.identity,
        seen,
        Instant::now(),
        e.lease_duration,
    );
    let params = PostParams::default();
    let result = match action {
        Action::Wait { holder } => {
            tracing::debug!("lease {}/{} is held by {holder}", e.namespace, e.name);
            return Ok(false);
        }
        Action::Create => api.create(&params, &held(e, None, false)).await,
        Action::TakeOver => {
            let was = lease
                .as_ref()
                .and_then(|l| l.spec.as_ref()?.holder_identity.clone())
                .unwrap_or_default();
            tracing::info!("taking over lease {}/{} from {was:?}", e.namespace, e.name);
            api.replace(&e.name, &params, &held(e, lease, true)).await
        }
        Action::Renew => api.replace(&e.name, &params, &held(e, lease, false)).await,
    };
    match result {
        Ok(_) => Ok(true),
        // Someone else wrote first (409): read again next time.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(err) => Err(err.to_string()),
    }
}

/// Waits until this replica holds the lease. `false`: shutdown first.
pub(crate) async fn acquire(api: &Api<Lease>, e: &Election, shutdown: &CancellationToken) -> bool {
    let mut seen = Observation::new(Instant::now());
    let mut waiting_logged = false;
    loop {
        let attempt = tokio::time::timeout(e.renew_deadline, try_hold(api, e, &mut seen));
        let outcome = tokio::select! {
            _ = shutdown.cancelled() => return false,
            outcome = attempt => outcome,
        };
        match outcome {
            Ok(Ok(true)) => {
                tracing::info!(
                    "became the leader: lease {}/{} is held by {}",
                    e.namespace,
                    e.name,
                    e.identity
                );
                return true;
            }
            Ok(Ok(false)) if !waiting_logged => {
                tracing::info!(
                    "standing by: lease {}/{} is held by another replica",
                    e.namespace,
                    e.name
                );
                waiting_logged = true;
            }
            Ok(Ok(false)) => {}
            Ok(Err(err)) => tracing::warn!(
                "cannot read or write lease {}/{}: {err}",
                e.namespace,
                e.name
            ),
            Err(_) => tracing::warn!(
                "lease {}/{}: the API server did not answer in time",
                e.namespace,
                e.name
            ),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return false,
            _ = tokio::time::sleep(e.retry_period) => {}
        }
    }
}

/// Renews the lease every retry period while this replica holds it. Returns
/// why leadership ended (another holder, or no renewal for the renew
/// deadline); never returns before `shutdown` otherwise (then `None`).
pub(crate) async fn keep(
    api: &Api<Lease>,
    e: &Election,
    shutdown: &CancellationToken,
) -> Option<String> {
    let mut seen = Observation::new(Instant::now());
    let mut renewed = Instant::now();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(e.retry_period) => {}
        }
        let left = e.renew_deadline.saturating_sub(renewed.elapsed());
        let attempt = tokio::time::timeout(left, try_hold(api, e, &mut seen));
        let outcome = tokio::select! {
            _ = shutdown.cancelled() => return None,
            outcome = attempt => outcome,
        };
        match outcome {
            Ok(Ok(true)) => renewed = Instant::now(),
            Ok(Ok(false)) => {
                return Some(format!(
                    "lease {}/{} is held by another replica",
                    e.namespace, e.name
                ))
            }
            Ok(Err(err)) => tracing::warn!("cannot renew lease {}/{}: {err}", e.namespace, e.name),
            Err(_) => {}
        }
        if renewed.elapsed() >= e.renew_deadline {
            return Some(format!(
                "lease {}/{} not renewed for --leader-elect-renew-deadline={:?}",
                e.namespace, e.name, e.renew_deadline
            ));
        }
    }
}

/// Gives the lease up (empty holder) if this replica still holds it, so a
/// standby takes over at its next attempt; best effort, one retry period.
pub(crate) async fn release(api: &Api<Lease>, e: &Election) {
    let give_up = async {
        let Some(mut lease) = api.get_opt(&e.name).await? else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(e.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        api.replace(&e.name, &PostParams::default(), &lease).await?;
        tracing::info!("released lease {}/{}", e.namespace, e.name);
        Ok::<(), kube::Error>(())
    };
    match tokio::time::timeout(e.retry_period, give_up).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => tracing::warn!("cannot release lease {}/{}: {err}", e.namespace, e.name),
        Err(_) => tracing::warn!(
            "cannot release lease {}/{}: no answer in time",
            e.namespace,
            e.name
        ),
    }
}

#[cfg(test)]
mod tests;
