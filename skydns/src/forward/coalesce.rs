//! Identical requests in flight at the same time share one upstream
//! exchange: the first one (the leader) asks, the others (followers) wait
//! for its reply, which reaches them even if the leader's future is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Where a follower's reply goes.
type ReplySender = oneshot::Sender<Option<Vec<u8>>>;

/// Shares one upstream exchange among identical concurrent requests.
#[derive(Clone, Debug, Default)]
pub(crate) struct Coalescer {
    waiting: Arc<Mutex<HashMap<Vec<u8>, Vec<ReplySender>>>>,
}

/// Who does the exchange.
pub(super) enum Turn {
    Leader,
    Follower(oneshot::Receiver<Option<Vec<u8>>>),
}

impl Coalescer {
    pub(super) fn join(&self, key: &[u8]) -> Turn {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        match waiting.get_mut(key) {
            Some(followers) => {
                let (tx, rx) = oneshot::channel();
                followers.push(tx);
                Turn::Follower(rx)
            }
            None => {
                waiting.insert(key.to_vec(), Vec::new());
                Turn::Leader
            }
        }
    }

    fn finish(&self, key: &[u8], reply: Option<Vec<u8>>) {
        let followers = self
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key)
            .unwrap_or_default();
        for tx in followers {
            let _ = tx.send(reply.clone());
        }
    }
}

/// The exchange of a leader; on drop, hands its reply (or `None`) to the followers.
pub(super) struct Leader<'a> {
    pub coalescer: &'a Coalescer,
    pub key: &'a [u8],
    pub reply: Option<Vec<u8>>,
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        self.coalescer.finish(self.key, self.reply.take());
    }
}
