//! What the exec-healthz tests share beyond `test_support`: a `sleep`
//! argument unique to one test (so the commands a test starts can be found
//! in /proc and nothing else matches), the check that none is left, the
//! wait for a 503, and metric values that must be present.
#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicU32, Ordering};
use test_support::process::processes_with;
use test_support::wait::{eventually, DEADLINE};

/// A `sleep` argument unique to this call, e.g. `3600.123400017`.
pub fn unique_sleep() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "3600.{}{:04}7",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Waits until no live process carries `token`.
pub async fn assert_no_process_with(token: &str) {
    eventually(
        &format!("processes with {token} to be gone"),
        DEADLINE,
        async || {
            let left = processes_with(token);
            anyhow::ensure!(left.is_empty(), "still there: {left:?}");
            Ok(())
        },
    )
    .await
    .unwrap();
}

/// Polls `url` until it answers 503, and returns that body.
pub async fn eventually_503(what: &str, url: &str) -> String {
    eventually(what, DEADLINE, async || {
        let reply = test_support::http::get(url).await?;
        anyhow::ensure!(reply.status == 503, "{reply:?}");
        Ok(reply.body)
    })
    .await
    .unwrap()
}

/// The value of sample `name`, which must be in `text`.
pub fn metric(text: &str, name: &str) -> f64 {
    test_support::http::metric(text, name)
        .unwrap_or_else(|| panic!("metric {name} missing from:\n{text}"))
}
