//! A one-shot reply from an executor job to whoever submitted it: awaitable from async code
//! (the server) and waitable from plain threads (the embedded API, tests).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

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
        wake(w);
    }
}

/// Wakes deferred on this thread (an executor's): `Some` while the executor runs jobs.
struct Deferred {
    wakers: Vec<Waker>,
    since: Option<Instant>,
}

thread_local! {
    static DEFERRED: RefCell<Option<Deferred>> = const { RefCell::new(None) };
}

/// Wakes `w` now, or, on an executor thread, when the executor next flushes ([`flush_wakes`]).
fn wake(w: Waker) {
    let w = DEFERRED.with(|d| match d.borrow_mut().as_mut() {
        Some(d) => {
            d.since.get_or_insert_with(Instant::now);
            d.wakers.push(w);
            None
        }
        None => Some(w),
    });
    if let Some(w) = w {
        w.wake();
    }
}

/// Makes this thread defer the wakes of replies sent on it until [`flush_wakes`].
pub(super) fn defer_wakes() {
    DEFERRED.with(|d| *d.borrow_mut() = Some(Deferred { wakers: Vec::new(), since: None }));
}

/// Replies whose wakes an executor holds back while more jobs are queued: at most this many…
pub(super) const MAX_DEFERRED_WAKES: usize = 16;
/// …for at most this long.
pub(super) const MAX_WAKE_DELAY: std::time::Duration = std::time::Duration::from_micros(200);

/// The deferred wakes go out once at most this many jobs are left queued. More would keep the
/// executor busy while the woken clients make their next requests (alone, the native TPC-C
/// executor polled an empty queue 13% of its time at one, 0.5% at three, and ran 2.6% faster
/// on average), but it sends the same wakes in smaller batches, and beside an analytical
/// stream every wake of the clients' thread preempts a query worker: there three ran 7.7%
/// slower (ARCHITECTURE.md, "Executors hold back reply wakes").
pub(super) const WAKE_AHEAD: usize = 1;

/// After a job, with `queued` jobs waiting: sends this thread's deferred wakes when at most
/// [`WAKE_AHEAD`] jobs are left, or when [`MAX_DEFERRED_WAKES`] or [`MAX_WAKE_DELAY`] is
/// reached.
pub(super) fn flush_wakes_if_due(queued: usize) {
    let due = DEFERRED.with(|d| {
        d.borrow().as_ref().is_some_and(|d| {
            !d.wakers.is_empty()
                && (queued <= WAKE_AHEAD || d.wakers.len() >= MAX_DEFERRED_WAKES || d.since.is_some_and(|t| t.elapsed() >= MAX_WAKE_DELAY))
        })
    });
    if due {
        flush_wakes();
    }
}

/// Wakes every waiter whose wake this thread deferred.
pub(crate) fn flush_wakes() {
    // Taken out, so that a waker that sends a reply itself defers into an empty list.
    let mut wakers = DEFERRED.with(|d| match d.borrow_mut().as_mut() {
        Some(d) => {
            d.since = None;
            std::mem::take(&mut d.wakers)
        }
        None => Vec::new(),
    });
    for w in wakers.drain(..) {
        w.wake();
    }
    // Give the allocation back for the next round.
    DEFERRED.with(|d| {
        if let Some(d) = d.borrow_mut().as_mut()
            && d.wakers.is_empty()
        {
            d.wakers = wakers;
        }
    });
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
