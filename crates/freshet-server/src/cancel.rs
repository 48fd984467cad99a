//! Query cancellation (CancelRequest).
//!
//! A client cancels by opening a new connection and sending the process id and secret key it
//! got in BackendKeyData. The [`CancelRegistry`] maps process ids to each connection's
//! [`CancelSignal`]; a request with the wrong secret is ignored, as in PostgreSQL.
//!
//! INVARIANTS
//! - A cancel only affects a connection that is busy (handling messages). One that arrives
//!   while the connection waits for its client is dropped, so it cannot hit a later query.
//! - A cancel takes effect at a cancellation point: the future racing [`CancelSignal::cancelled`]
//!   is dropped. Points are the execution of statements that return rows, each wait for the
//!   next batch of rows, and each wait for COPY data; dropping any of them undoes nothing
//!   because nothing was written. Writes (INSERT, UPDATE, DELETE, DDL, a COPY batch being
//!   stored) are not dropped halfway: a cancel arriving during one takes effect at the next
//!   cancellation point of the same busy period, if any.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

#[derive(Default)]
struct State {
    busy: bool,
    requested: bool,
}

/// The cancel flag of one connection.
#[derive(Default)]
pub struct CancelSignal {
    state: Mutex<State>,
    notify: Notify,
}

impl CancelSignal {
    /// Marks the connection busy (handling messages) or idle (waiting for its client). Going
    /// idle drops a pending request.
    pub fn set_busy(&self, busy: bool) {
        let mut s = self.state.lock();
        s.busy = busy;
        if !busy {
            s.requested = false;
        }
    }

    /// A cancel request for this connection.
    pub fn request(&self) {
        let mut s = self.state.lock();
        if s.busy {
            s.requested = true;
            drop(s);
            self.notify.notify_waiters();
        }
    }

    /// Consumes a pending request.
    fn take(&self) -> bool {
        std::mem::take(&mut self.state.lock().requested)
    }

    /// Completes when a cancel request arrives, consuming it.
    pub async fn cancelled(&self) {
        loop {
            // Registered before the flag is checked, so a request in between still wakes it.
            let notified = self.notify.notified();
            if self.take() {
                return;
            }
            notified.await;
        }
    }

    /// Runs `work` unless a cancel request arrives first; then `work` is dropped and `on_cancel`
    /// is returned.
    pub async fn race<T, E>(&self, work: impl Future<Output = Result<T, E>>, on_cancel: impl FnOnce() -> E) -> Result<T, E> {
        tokio::select! {
            biased;
            r = work => r,
            () = self.cancelled() => Err(on_cancel()),
        }
    }
}

/// The process id and secret key a client needs to cancel its queries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackendKey {
    pub pid: i32,
    pub secret: i32,
}

/// Running connections by process id.
#[derive(Default)]
pub struct CancelRegistry {
    connections: Mutex<HashMap<i32, (i32, Arc<CancelSignal>)>>,
    counter: AtomicU64,
}

impl CancelRegistry {
    /// Registers a connection; it stays registered while the returned guard lives.
    pub fn register(self: &Arc<Self>, pid: i32) -> (BackendKey, Registration) {
        let key = BackendKey { pid, secret: self.secret() };
        let signal = Arc::new(CancelSignal::default());
        self.connections.lock().insert(pid, (key.secret, signal.clone()));
        (key, Registration { registry: self.clone(), pid, signal })
    }

    /// Handles a CancelRequest.
    pub fn cancel(&self, key: BackendKey) {
        let target = self.connections.lock().get(&key.pid).filter(|(secret, _)| *secret == key.secret).map(|(_, s)| s.clone());
        match target {
            Some(signal) => signal.request(),
            None => tracing::debug!(pid = key.pid, "cancel request for no matching connection"),
        }
    }

    /// An unpredictable 32-bit secret (std's per-process random hash keys, mixed with a counter).
    fn secret(&self) -> i32 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(self.counter.fetch_add(1, Ordering::Relaxed));
        h.finish() as i32
    }
}

/// A connection's entry in the registry, removed on drop.
pub struct Registration {
    registry: Arc<CancelRegistry>,
    pid: i32,
    pub signal: Arc<CancelSignal>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.connections.lock().remove(&self.pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn cancel_reaches_a_busy_connection_only() {
        let registry = Arc::new(CancelRegistry::default());
        let (key, reg) = registry.register(7);
        // Idle: the request is dropped.
        registry.cancel(key);
        reg.signal.set_busy(true);
        let quick = reg.signal.race(async { Ok::<_, ()>(1) }, || ()).await;
        assert_eq!(quick, Ok(1));
        // Busy, wrong secret: ignored.
        registry.cancel(BackendKey { pid: 7, secret: key.secret.wrapping_add(1) });
        let slow = reg.signal.race(tokio::time::sleep(Duration::from_millis(50)).then_ok(), || ());
        assert_eq!(slow.await, Ok(()));
        // Busy, right secret: the work is dropped.
        let signal = reg.signal.clone();
        let canceller = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            registry.cancel(key);
            drop(signal);
        });
        let forever = reg.signal.race(std::future::pending::<Result<(), ()>>(), || ());
        assert_eq!(forever.await, Err(()));
        canceller.await.unwrap();
    }

    trait ThenOk: Future<Output = ()> + Sized {
        fn then_ok(self) -> impl Future<Output = Result<(), ()>> {
            async { self.await; Ok(()) }
        }
    }
    impl<F: Future<Output = ()>> ThenOk for F {}
}
