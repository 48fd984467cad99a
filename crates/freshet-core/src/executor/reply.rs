//! A one-shot reply from an executor job to whoever submitted it: awaitable from async code
//! (the server) and waitable from plain threads (the embedded API, tests).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};

struct State<T> {
    value: Option<T>,
    waker: Option<Waker>,
    closed: bool,
    /// The waker counts in [`AWAITED`] (registered while replies were watched).
    counted: bool,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

/// The sending half, moved into the job.
pub struct ReplySender<T> {
    shared: Option<Arc<Shared<T>>>,
}

/// The receiving half: a channel's, or a value already there (a job the caller ran itself,
/// [`super::Executor::call_inline`], which needs no channel).
pub struct Reply<T> {
    inner: Inner<T>,
}

enum Inner<T> {
    Channel(Arc<Shared<T>>),
    /// Taken by the first poll or wait.
    Ready(Option<T>),
}

impl<T> Reply<T> {
    /// A reply whose outcome is known already: the value, or `None` for a job that ended
    /// without answering (it panicked), which the receiver sees as the executor's error.
    pub fn ready(value: Option<T>) -> Reply<T> {
        Reply { inner: Inner::Ready(value) }
    }
}

pub fn reply_channel<T>() -> (ReplySender<T>, Reply<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State { value: None, waker: None, closed: false, counted: false }),
        ready: Condvar::new(),
    });
    (ReplySender { shared: Some(shared.clone()) }, Reply { inner: Inner::Channel(shared) })
}

impl<T> ReplySender<T> {
    pub fn send(mut self, value: T) {
        if let Some(shared) = self.shared.take() {
            finish(&shared, Some(value));
        }
    }
}

fn finish<T>(shared: &Shared<T>, value: Option<T>) {
    let (waker, counted) = {
        let mut state = shared.state.lock();
        state.value = value;
        state.closed = true;
        (state.waker.take(), std::mem::take(&mut state.counted))
    };
    shared.ready.notify_one();
    if let Some(w) = waker {
        wake(w);
    }
    if counted {
        AWAITED.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether awaited replies and their wakes are counted ([`watch_replies`]): only a process
/// whose threads wait for replies before they sleep pays for the shared counters.
static WATCHED: AtomicBool = AtomicBool::new(false);

/// Starts counting awaited replies and their wakes, for [`await_reply_briefly`] (the server's
/// network runtime calls it when its threads are to wait for replies).
pub fn watch_replies() {
    WATCHED.store(true, Ordering::Relaxed);
}

/// Replies that a task awaits (it has polled them and registered its waker) and whose job has
/// not answered yet, in the whole process, since [`watch_replies`].
static AWAITED: AtomicUsize = AtomicUsize::new(0);
/// Wakes sent to tasks awaiting replies so far, in the whole process.
static WOKEN: AtomicU64 = AtomicU64::new(0);

fn wake_now(w: Waker) {
    w.wake();
    if WATCHED.load(Ordering::Relaxed) {
        WOKEN.fetch_add(1, Ordering::Release);
    }
}

/// For a network thread about to sleep (the server's runtime calls it before a worker parks):
/// while some task awaits a reply, waits up to `limit` for the next reply to be sent, yielding
/// the CPU between looks, and returns as soon as one is. The awaiting task is then woken while
/// its thread is still awake (tokio then queues it without waking a thread: a worker about to
/// park is still counted as searching for work), so the executor that answers makes no
/// futex call, on a virtual machine an interrupt to another CPU. Returns at once when no reply
/// is awaited (an idle server, or statements run on the network threads themselves).
///
/// Only while some executor is busy (it waited for jobs during at most half of its last
/// millisecond: `Load`): then it is the thread everyone waits for and the wakes it saves are
/// its time. With a mostly idle executor (statement-by-statement clients, whose statements
/// the network threads run themselves) the network threads and the clients are the busy
/// threads, and the waiting thread's yields took CPU time from them.
pub fn await_reply_briefly(limit: Duration) {
    if BUSY_EXECUTORS.load(Ordering::Relaxed) > 0 {
        wait_while_awaited(&AWAITED, &WOKEN, limit);
    }
}

/// Executors judged busy, in the whole process.
static BUSY_EXECUTORS: AtomicUsize = AtomicUsize::new(0);

/// An executor became busy (`true`) or stopped being busy, or started busy or stopped.
pub(super) fn executor_busy(busy: bool) {
    if busy {
        BUSY_EXECUTORS.fetch_add(1, Ordering::Relaxed);
    } else {
        BUSY_EXECUTORS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Yields until `woken` changes, `awaited` is zero or `limit` has passed (at once if
/// `awaited` is zero).
fn wait_while_awaited(awaited: &AtomicUsize, woken: &AtomicU64, limit: Duration) {
    if limit.is_zero() || awaited.load(Ordering::Relaxed) == 0 {
        return;
    }
    let seen = woken.load(Ordering::Acquire);
    let until = Instant::now() + limit;
    loop {
        std::thread::yield_now();
        if woken.load(Ordering::Acquire) != seen || awaited.load(Ordering::Relaxed) == 0 || Instant::now() >= until {
            return;
        }
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
        wake_now(w);
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
        wake_now(w);
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
        let shared = match self.inner {
            Inner::Channel(shared) => shared,
            Inner::Ready(value) => return value.ok_or_else(lost),
        };
        let mut state = shared.state.lock();
        while !state.closed {
            shared.ready.wait(&mut state);
        }
        state.value.take().ok_or_else(lost)
    }
}

// A reply never pins its value: it only moves it out.
impl<T> Unpin for Reply<T> {}

impl<T> Future for Reply<T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let shared = match &mut self.get_mut().inner {
            Inner::Channel(shared) => shared,
            Inner::Ready(value) => return Poll::Ready(value.take().ok_or_else(lost)),
        };
        let mut state = shared.state.lock();
        if state.closed {
            return Poll::Ready(state.value.take().ok_or_else(lost));
        }
        match &state.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            Some(_) => state.waker = Some(cx.waker().clone()),
            None => {
                state.waker = Some(cx.waker().clone());
                if !state.counted && WATCHED.load(Ordering::Relaxed) {
                    state.counted = true;
                    AWAITED.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait before a network thread sleeps ends at once with nothing awaited, when a
    /// reply's waiter is woken or the last awaited reply is answered, and otherwise at its
    /// limit.
    #[test]
    fn a_thread_waits_for_an_awaited_reply_only_while_one_is_awaited() {
        let long = Duration::from_secs(30);
        let (awaited, woken) = (AtomicUsize::new(0), AtomicU64::new(0));
        let start = Instant::now();
        wait_while_awaited(&awaited, &woken, long);
        assert!(start.elapsed() < long, "nothing awaited: it returned at once");
        awaited.store(1, Ordering::Relaxed);
        let short = Duration::from_millis(5);
        let start = Instant::now();
        wait_while_awaited(&awaited, &woken, short);
        assert!(start.elapsed() >= short, "nothing woke it, so it waited its whole limit");
        // Waits while another thread does `event` a moment later; `happened` must hold as soon
        // as the wait returns (before that thread is joined).
        let wait_for = |event: &(dyn Fn() + Sync), happened: &dyn Fn() -> bool, what: &str| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    std::thread::sleep(Duration::from_millis(20));
                    event();
                });
                let start = Instant::now();
                wait_while_awaited(&awaited, &woken, long);
                assert!(start.elapsed() < long);
                assert!(happened(), "{what}");
            });
        };
        wait_for(
            &|| {
                woken.fetch_add(1, Ordering::Release);
            },
            &|| woken.load(Ordering::Acquire) == 1,
            "it returned once the waiter was woken",
        );
        wait_for(&|| awaited.store(0, Ordering::Relaxed), &|| awaited.load(Ordering::Relaxed) == 0, "it returned once nothing was awaited");
    }

    /// An awaited reply counts as awaited from its first poll until it is answered, and its
    /// answer counts a wake. (The counters are the process's: other tests' replies may add to
    /// them meanwhile, never take this one's part away.)
    #[test]
    fn an_awaited_reply_is_counted_until_its_waiter_is_woken() {
        watch_replies();
        let (sender, mut reply) = reply_channel::<u32>();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut reply).poll(&mut cx).is_pending());
        assert!(AWAITED.load(Ordering::Relaxed) >= 1);
        assert!(Pin::new(&mut reply).poll(&mut cx).is_pending());
        let before = WOKEN.load(Ordering::Acquire);
        sender.send(7);
        assert!(WOKEN.load(Ordering::Acquire) > before, "answering woke the waiter");
        match Pin::new(&mut reply).poll(&mut cx) {
            Poll::Ready(Ok(v)) => assert_eq!(v, 7),
            other => panic!("expected the answer, got {other:?}"),
        }
    }
}
