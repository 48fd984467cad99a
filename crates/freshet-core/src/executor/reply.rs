//! A one-shot reply from an executor job to whoever submitted it: awaitable from async code
//! (the server) and waitable from plain threads (the embedded API, tests).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};

struct State<T> {
    value: Option<T>,
    waker: Option<Waker>,
    closed: bool,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

/// The sending half, moved into the job.
pub struct ReplySender<T> {
    shared: Option<Arc<Shared<T>>>,
}

/// The receiving half.
pub struct Reply<T> {
    shared: Arc<Shared<T>>,
}

pub fn reply_channel<T>() -> (ReplySender<T>, Reply<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State { value: None, waker: None, closed: false }),
        ready: Condvar::new(),
    });
    (ReplySender { shared: Some(shared.clone()) }, Reply { shared })
}

impl<T> ReplySender<T> {
    pub fn send(mut self, value: T) {
        if let Some(shared) = self.shared.take() {
            finish(&shared, Some(value));
        }
    }
}

fn finish<T>(shared: &Shared<T>, value: Option<T>) {
    let waker = {
        let mut state = shared.state.lock();
        state.value = value;
        state.closed = true;
        state.waker.take()
    };
    shared.ready.notify_one();
    if let Some(w) = waker {
        w.wake();
    }
}

impl<T> Drop for ReplySender<T> {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take() {
            finish(&shared, None);
        }
    }
}

fn lost() -> Error {
    Error::internal("the partition executor stopped before answering")
}

impl<T> std::fmt::Debug for Reply<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reply")
    }
}

impl<T> Reply<T> {
    /// Blocks the calling thread until the job has answered.
    pub fn wait(self) -> Result<T> {
        let mut state = self.shared.state.lock();
        while !state.closed {
            self.shared.ready.wait(&mut state);
        }
        state.value.take().ok_or_else(lost)
    }
}

impl<T> Future for Reply<T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let mut state = self.shared.state.lock();
        if state.closed {
            return Poll::Ready(state.value.take().ok_or_else(lost));
        }
        match &state.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => state.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}
