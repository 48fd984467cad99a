//! Waiting for transactions: who runs, who waits for whom, deadlock detection.

use hashbrown::{HashMap, HashSet};

use parking_lot::Mutex;

use super::Engine;
use crate::error::{Error, Result};
use crate::executor::{reply_channel, ReplySender};
use crate::storage::Ts;

/// Running transactions that others may wait for, the waiters to wake when one ends, and the
/// wait-for edges used to detect deadlocks.
#[derive(Default)]
struct WaitState {
    running: HashSet<Ts>,
    waiters: HashMap<Ts, Vec<ReplySender<()>>>,
    waits_for: HashMap<Ts, Ts>,
}

#[derive(Default)]
pub(super) struct Waits {
    state: Mutex<WaitState>,
}

impl Waits {
    /// A transaction has ended (its changes are committed or undone on every partition):
    /// wake everyone waiting for it.
    pub(super) fn ended(&self, id: Ts) {
        let waiters = {
            let mut s = self.state.lock();
            s.running.remove(&id);
            s.waiters.remove(&id).unwrap_or_default()
        };
        for w in waiters {
            w.send(());
        }
    }
}

impl Engine {
    /// Records that a transaction runs across statements (others may wait for it to end).
    pub fn txn_began(&self, id: Ts) {
        self.waits.state.lock().running.insert(id);
    }

    /// Waits until transaction `holder` has ended. `waiter` is the waiting transaction (if it
    /// is one that holds changes across statements): if `holder` waits, directly or not, for
    /// `waiter`, waiting would never end and this fails with 40P01 instead.
    pub async fn wait_for(&self, waiter: Option<Ts>, holder: Ts) -> Result<()> {
        let reply = {
            let mut s = self.waits.state.lock();
            if !s.running.contains(&holder) {
                return Ok(());
            }
            if let Some(w) = waiter {
                let mut next = Some(holder);
                while let Some(t) = next {
                    if t == w {
                        return Err(Error::deadlock());
                    }
                    next = s.waits_for.get(&t).copied();
                }
                s.waits_for.insert(w, holder);
            }
            let (tx, rx) = reply_channel();
            s.waiters.entry(holder).or_default().push(tx);
            rx
        };
        // A dropped sender (the engine went away) ends the wait as well.
        let _ = reply.await;
        if let Some(w) = waiter {
            self.waits.state.lock().waits_for.remove(&w);
        }
        Ok(())
    }
}
