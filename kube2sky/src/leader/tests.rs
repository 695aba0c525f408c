//! The Lease decisions of `--leader-elect` on a clock of our own: create
//! one where there is none, renew our own, take over a free or silent
//! lease, never compare the holder's clock with ours, and count
//! transitions only on take-over.

use super::*;

const DURATION: Duration = Duration::from_secs(15);

fn lease(holder: &str, renewed_secs: i64, transitions: i32) -> LeaseSpec {
    LeaseSpec {
        holder_identity: (!holder.is_empty()).then(|| holder.to_string()),
        renew_time: Some(MicroTime(
            k8s_openapi::jiff::Timestamp::from_second(renewed_secs).expect("timestamp"),
        )),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    }
}

#[test]
fn no_lease_is_created() {
    let now = Instant::now();
    let mut seen = Observation::new(now);
    assert_eq!(decide(None, "a", &mut seen, now, DURATION), Action::Create);
}

#[test]
fn our_own_lease_is_renewed() {
    let now = Instant::now();
    let mut seen = Observation::new(now);
    let l = lease("a", 100, 0);
    assert_eq!(
        decide(Some(&l), "a", &mut seen, now, DURATION),
        Action::Renew
    );
}

#[test]
fn a_lease_nobody_holds_is_taken_at_once() {
    let now = Instant::now();
    let mut seen = Observation::new(now);
    let l = lease("", 100, 3);
    assert_eq!(
        decide(Some(&l), "a", &mut seen, now, DURATION),
        Action::TakeOver
    );
}

#[test]
fn a_silent_holder_loses_the_lease_after_its_duration_on_our_clock() {
    let t0 = Instant::now();
    let mut seen = Observation::new(t0);
    let l = lease("b", 100, 0);
    let wait = Action::Wait { holder: "b".into() };
    assert_eq!(decide(Some(&l), "a", &mut seen, t0, DURATION), wait);
    let almost = t0 + DURATION - Duration::from_millis(1);
    assert_eq!(decide(Some(&l), "a", &mut seen, almost, DURATION), wait);
    assert_eq!(
        decide(Some(&l), "a", &mut seen, t0 + DURATION, DURATION),
        Action::TakeOver
    );
}

#[test]
fn a_renewal_restarts_the_wait() {
    let t0 = Instant::now();
    let mut seen = Observation::new(t0);
    let wait = Action::Wait { holder: "b".into() };
    assert_eq!(
        decide(Some(&lease("b", 100, 0)), "a", &mut seen, t0, DURATION),
        wait
    );
    // Renewed 10 s later (as we saw it): 15 s from then, not from t0.
    let t1 = t0 + Duration::from_secs(10);
    let renewed = lease("b", 102, 0);
    assert_eq!(decide(Some(&renewed), "a", &mut seen, t1, DURATION), wait);
    let t2 = t0 + Duration::from_secs(20);
    assert_eq!(decide(Some(&renewed), "a", &mut seen, t2, DURATION), wait);
    assert_eq!(
        decide(Some(&renewed), "a", &mut seen, t1 + DURATION, DURATION),
        Action::TakeOver
    );
}

#[test]
fn the_holders_clock_is_never_compared_with_ours() {
    // A renewTime years in the past (a node with a wrong clock) that we
    // have only just seen is a live lease.
    let now = Instant::now();
    let mut seen = Observation::new(now);
    let l = lease("b", 0, 7);
    assert_eq!(
        decide(Some(&l), "a", &mut seen, now, DURATION),
        Action::Wait { holder: "b".into() }
    );
}

#[test]
fn the_lease_own_duration_wins_over_ours() {
    let t0 = Instant::now();
    let mut seen = Observation::new(t0);
    let mut l = lease("b", 100, 0);
    l.lease_duration_seconds = Some(40);
    let _ = decide(Some(&l), "a", &mut seen, t0, DURATION);
    let later = t0 + Duration::from_secs(20);
    assert_eq!(
        decide(Some(&l), "a", &mut seen, later, DURATION),
        Action::Wait { holder: "b".into() }
    );
    assert_eq!(
        decide(
            Some(&l),
            "a",
            &mut seen,
            t0 + Duration::from_secs(40),
            DURATION
        ),
        Action::TakeOver
    );
}

#[test]
fn held_counts_transitions_only_on_take_over() {
    let e = Election {
        namespace: "kube-system".into(),
        name: "kube2sky".into(),
        identity: "a".into(),
        lease_duration: DURATION,
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    };
    let created = held(&e, None, false);
    let spec = created.spec.clone().expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.lease_transitions, None);
    assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());
    let other = Lease {
        spec: Some(lease("b", 100, 4)),
        ..created.clone()
    };
    let taken = held(&e, Some(other), true).spec.expect("spec");
    assert_eq!(taken.lease_transitions, Some(5));
    assert_eq!(taken.holder_identity.as_deref(), Some("a"));
    let renewed = held(&e, Some(created), false).spec.expect("spec");
    assert_eq!(renewed.acquire_time, spec.acquire_time);
}
