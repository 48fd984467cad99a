//! Partition executors: one thread per partition owns that partition's rows and indexes and
//! runs every job that touches them, one after another (HyPer §3.1, §3.4).
//!
//! A job is a closure over `&mut Partition`. Because only the executor thread ever holds the
//! `Partition`, nothing inside it needs a latch. A job runs start to finish without
//! interruption, so a job that runs a whole statement (or a whole one-shot transaction) is
//! serial with respect to every other job of the partition; a snapshot taken by a job is
//! therefore transaction-consistent.
//!
//! The executor never waits on I/O or on an analytical query: it hands out snapshots and
//! answers through [`Reply`]. A job that panics (a bug) is caught, reported to its submitter as
//! an internal error, and the executor goes on with the next job.
//!
//! Waking the task that awaits a reply costs a system call when its thread sleeps, so an
//! executor started with `batch_wakes` (an embedded database's default; not the server's) holds
//! wakes back while more jobs are queued and sends them together: when at most
//! `reply::WAKE_AHEAD` (one) job is left, after `reply::MAX_DEFERRED_WAKES` replies or
//! `reply::MAX_WAKE_DELAY`, before it waits for work, and before a quiesced step's barrier. A
//! lone client is therefore woken at once.
//!
//! Handing a job to the executor thread and its reply back costs two thread wakes, which on a
//! virtual machine are each an interrupt to another CPU. A submitter that finds the executor
//! idle — no job queued or running — may run its job on its own thread instead
//! ([`Executor::call_inline`]): the partition is a lock as much as a thread, and whoever holds
//! it runs the jobs. Jobs still run one at a time and in the order they were submitted, since
//! a job runs inline only when every job submitted before it has finished. The engine runs
//! statements, commits and procedure calls inline where its configuration says so; jobs that
//! wait for other executors (quiesced steps) or fork the process always run on the executor
//! thread.
//!
//! A short job that must not wait behind the queue — the snapshot an analytical query reads —
//! is run soon ([`Executor::call_soon`]): on the calling thread if the partition is free,
//! otherwise by whichever thread holds the partition, as soon as its job ends. Neither wakes
//! the executor thread nor makes later submitters queue rather than run inline; queued, the
//! snapshot of every analytical query did both (under TPC-C in-process, the query waited for
//! its snapshot over half a millisecond in three queries of ten).
//!
//! An executor whose queue runs empty polls it briefly before it sleeps. Unless it has a CPU
//! of its own, only while it is the busy thread (`Load`): a mostly idle executor's polling
//! takes CPU time from the threads that make its work.

pub mod cpus;
mod reply;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::{Mutex, MutexGuard};

pub use reply::{await_reply_briefly, reply_channel, watch_replies, Reply, ReplySender};
pub(crate) use reply::flush_wakes;

use crate::catalog::{TableDef, TableId};
use crate::error::{Error, Result, SqlState};
use crate::storage::TableStore;
use crate::txn::PartitionTxns;

/// The data one executor owns.
#[derive(Debug)]
pub struct Partition {
    pub id: usize,
    /// By table id (ids are handed out in sequence and never reused): looked up by every
    /// statement and record operation, dozens of times per TPC-C transaction, so an index
    /// into a vector rather than a hash probe. Boxed, so that the ids of dropped tables cost a
    /// pointer each; trailing empty places are trimmed.
    tables: Vec<Option<Box<TableStore>>>,
    /// Transactions that have touched this partition.
    pub txns: PartitionTxns,
}

impl Partition {
    pub fn new(id: usize) -> Self {
        Partition { id, tables: Vec::new(), txns: PartitionTxns::default() }
    }

    #[inline]
    pub fn table(&self, id: TableId) -> Result<&TableStore> {
        match self.tables.get(id as usize) {
            Some(Some(t)) => Ok(t),
            _ => Err(dropped(id)),
        }
    }

    #[inline]
    pub fn table_mut(&mut self, id: TableId) -> Result<&mut TableStore> {
        match self.tables.get_mut(id as usize) {
            Some(Some(t)) => Ok(t),
            _ => Err(dropped(id)),
        }
    }

    /// The tables of this partition, in table id order.
    pub fn tables(&self) -> impl Iterator<Item = &TableStore> {
        self.tables.iter().flatten().map(|t| &**t)
    }

    fn tables_mut(&mut self) -> impl Iterator<Item = &mut TableStore> {
        self.tables.iter_mut().flatten().map(|t| &mut **t)
    }

    pub fn create_table(&mut self, def: Arc<TableDef>) {
        let at = def.id as usize;
        if self.tables.len() <= at {
            self.tables.resize_with(at + 1, || None);
        }
        self.tables[at] = Some(Box::new(TableStore::new(def)));
    }

    pub fn drop_table(&mut self, id: TableId) -> Option<TableStore> {
        let dropped = self.tables.get_mut(id as usize)?.take();
        while matches!(self.tables.last(), Some(None)) {
            self.tables.pop();
        }
        dropped.map(|t| *t)
    }

    /// Ends recovery on this partition: every table rebuilds its indexes and free slots.
    pub fn finish_restore(&mut self) -> Result<()> {
        for t in self.tables_mut() {
            t.finish_restore()?;
        }
        Ok(())
    }

    /// Versions held by all tables of this partition.
    pub fn tables_version_count(&self) -> usize {
        self.tables().map(|t| t.version_count()).sum()
    }
}

/// A statement planned against a table that a concurrent DROP removed.
fn dropped(id: TableId) -> Error {
    Error::new(SqlState::UndefinedTable, format!("relation with id {id} was dropped"))
}

type Job = Box<dyn FnOnce(&mut Partition) + Send + 'static>;

/// The handle of one partition's executor thread.
pub struct Executor {
    pub id: usize,
    sender: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    owned: Arc<Owned>,
}

/// The partition and who may run jobs on it.
///
/// INVARIANTS: `pending` counts the jobs submitted and not yet finished, queued or running;
/// it is raised before a job is queued and lowered after the job has run and released the
/// partition. A job runs inline only by raising `pending` from zero, so it never overtakes an
/// earlier job and finds the partition locked only by a job run soon. Jobs run soon are not
/// counted in `pending`: they are in `soon` until a thread holding the partition takes them,
/// and `has_soon` is set after a job is added. Every thread that ends a job runs those added
/// meanwhile before it releases the partition, and looks at `has_soon` again afterwards; a
/// thread that adds a job tries the lock after setting it (both behind a full fence), so one
/// of the two always runs the job.
struct Owned {
    partition: Mutex<Partition>,
    pending: AtomicUsize,
    soon: Mutex<Vec<Job>>,
    has_soon: AtomicBool,
}

impl Owned {
    /// Runs a job once the partition is free (see [`run_holding`](Self::run_holding)).
    fn run(&self, job: impl FnOnce(&mut Partition)) {
        self.run_holding(self.partition.lock(), job);
    }

    /// Runs a job on the partition `partition` holds, and then the jobs to be run soon that
    /// were added meanwhile, before it lets the partition go; then [`run_soon`](Self::run_soon).
    fn run_holding(&self, mut partition: MutexGuard<Partition>, job: impl FnOnce(&mut Partition)) {
        run_job(&mut partition, job);
        self.run_soon_holding(&mut partition);
        drop(partition);
        self.run_soon();
    }

    fn run_soon_holding(&self, partition: &mut Partition) {
        if self.has_soon.load(Ordering::Relaxed) {
            self.has_soon.store(false, Ordering::Relaxed);
            let jobs = std::mem::take(&mut *self.soon.lock());
            for job in jobs {
                run_job(partition, job);
            }
        }
    }

    /// Runs the jobs to be run soon, if any, when the partition is free; to be called after
    /// releasing the partition (and after adding such a job). A thread that finds the
    /// partition taken leaves them to the one that holds it.
    fn run_soon(&self) {
        fence(Ordering::SeqCst);
        while self.has_soon.load(Ordering::Relaxed) {
            let Some(mut partition) = self.partition.try_lock() else { return };
            self.run_soon_holding(&mut partition);
            drop(partition);
            fence(Ordering::SeqCst);
        }
    }
}

/// How every executor thread runs (the CPU each is restricted to, if any, is its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Hold back the wakes of replies while more jobs are queued (see
    /// [`reply::flush_wakes_if_due`]).
    pub batch_wakes: bool,
    /// A negative niceness raises the thread's scheduling priority, where the process may
    /// (see [`set_priority`]).
    pub nice: i32,
    /// How long the executor polls its queue once it runs empty before it sleeps (see
    /// [`poll_briefly`] and [`Load`]); zero sleeps at once.
    pub poll: Duration,
}

/// The default of [`Settings::poll`].
pub const DEFAULT_POLL: Duration = Duration::from_micros(50);

impl Default for Settings {
    fn default() -> Self {
        Settings { batch_wakes: true, nice: 0, poll: DEFAULT_POLL }
    }
}

impl Executor {
    /// Starts executor `id` on its own thread, restricted to `cpu` when given, run as
    /// `settings` say.
    pub fn spawn(id: usize, cpu: Option<usize>, settings: Settings) -> std::io::Result<Executor> {
        let (sender, receiver) = crossbeam_channel::unbounded::<Job>();
        let owned = Arc::new(Owned { partition: Mutex::new(Partition::new(id)), pending: AtomicUsize::new(0), soon: Mutex::new(Vec::new()), has_soon: AtomicBool::new(false) });
        let on_thread = owned.clone();
        let thread = std::thread::Builder::new().name(format!("freshet-exec-{id}")).spawn(move || {
            if let Some(cpu) = cpu
                && let Err(e) = cpus::pin_current_thread(&[cpu])
            {
                tracing::warn!(partition = id, cpu, "cannot pin the executor to its CPU: {e}");
            }
            set_priority(id, settings.nice);
            run(&on_thread, receiver, settings, cpu.is_some())
        })?;
        Ok(Executor { id, sender: Some(sender), thread: Some(thread), owned })
    }

    /// Like [`call`](Self::call), but when the executor is idle (nothing queued or running),
    /// runs `f` at once on the calling thread; the reply is then ready when returned. Only for
    /// jobs that never wait for anything (statements, commits, procedure calls): a job that
    /// waited would hold the caller's thread, and the partition, meanwhile.
    pub fn call_inline<R, F>(&self, f: F) -> Reply<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Partition) -> R + Send + 'static,
    {
        if self.owned.pending.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return self.call(f);
        }
        let mut result = None;
        self.owned.run(|p: &mut Partition| result = Some(f(p)));
        self.owned.pending.fetch_sub(1, Ordering::Release);
        // No result: the job panicked (`run_job` caught it).
        Reply::ready(result)
    }

    /// Runs `f` ahead of the queued jobs: at once on the calling thread if the partition is
    /// free, else right after the job that holds it, on that job's thread. The caller never
    /// waits for the lock. Only for short jobs that never wait for anything and whose order
    /// against the queued jobs does not matter: a snapshot of what is committed (every job
    /// whose answer a caller has seen has run).
    pub fn call_soon<R, F>(&self, f: F) -> Reply<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Partition) -> R + Send + 'static,
    {
        if let Some(partition) = self.owned.partition.try_lock() {
            let mut result = None;
            self.owned.run_holding(partition, |p: &mut Partition| result = Some(f(p)));
            return Reply::ready(result);
        }
        let (tx, rx) = reply_channel();
        self.owned.soon.lock().push(Box::new(move |p: &mut Partition| tx.send(f(p))));
        self.owned.has_soon.store(true, Ordering::Relaxed);
        self.owned.run_soon();
        rx
    }

    /// Runs `f` on the executor and returns its result through a [`Reply`].
    pub fn call<R, F>(&self, f: F) -> Reply<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Partition) -> R + Send + 'static,
    {
        let (tx, rx) = reply_channel();
        self.submit(Box::new(move |p: &mut Partition| tx.send(f(p))));
        rx
    }

    /// Queues a job without waiting for it. If the executor has stopped, the job is dropped
    /// (and with it any reply sender, which its receiver sees as an error).
    pub fn submit(&self, job: Box<dyn FnOnce(&mut Partition) + Send + 'static>) {
        if let Some(sender) = &self.sender {
            self.owned.pending.fetch_add(1, Ordering::AcqRel);
            if sender.send(job).is_err() {
                self.owned.pending.fetch_sub(1, Ordering::Release);
            }
        }
    }

    /// Jobs waiting in the queue.
    pub fn queue_len(&self) -> usize {
        self.sender.as_ref().map_or(0, |s| s.len())
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.sender.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sets the calling executor thread's niceness to `nice` (clamped to −20…0; 0 leaves it).
/// An executor that has work should get its CPU ahead of the threads it shares one with
/// (network threads, clients on the same machine), since every session waits for it. Lowering
/// a niceness needs the privilege to (CAP_SYS_NICE, or RLIMIT_NICE allowing it); without it
/// the executor runs at the process's niceness and says so once. INVARIANT: what the executor
/// starts (table-growth helpers, fork snapshots' children) sets the process's niceness
/// ([`cpus::process_niceness`]) back on itself first.
fn set_priority(partition: usize, nice: i32) {
    let nice = nice.clamp(-20, 0);
    if nice == 0 {
        return;
    }
    if let Err(e) = cpus::set_thread_niceness(nice) {
        tracing::info!(partition, nice, "executor runs at the process's priority: cannot lower its niceness ({e})");
    }
}

fn run(owned: &Owned, jobs: Receiver<Job>, settings: Settings, pinned: bool) {
    if settings.batch_wakes {
        reply::defer_wakes();
    }
    // Pinned, the executor's CPU is its own (the threads that make its work keep off it), so
    // its polling takes CPU time from no one: it always polls.
    let mut load = Load::new(std::time::Instant::now());
    reply::executor_busy(true);
    loop {
        let job = match jobs.try_recv() {
            Ok(job) => job,
            Err(_) => {
                // Nothing queued: every waiter learns of its answer before the executor waits.
                reply::flush_wakes();
                let idle_from = std::time::Instant::now();
                let polled = if pinned || load.busy() { poll_briefly(&jobs, settings.poll) } else { None };
                let job = match polled {
                    Some(job) => job,
                    None => match jobs.recv() {
                        Ok(job) => job,
                        Err(_) => break,
                    },
                };
                let was_busy = load.busy();
                load.idled(idle_from, std::time::Instant::now());
                if load.busy() != was_busy {
                    reply::executor_busy(load.busy());
                }
                job
            }
        };
        owned.run(job);
        owned.pending.fetch_sub(1, Ordering::Release);
        reply::flush_wakes_if_due(jobs.len());
    }
    if load.busy() {
        reply::executor_busy(false);
    }
    reply::flush_wakes();
}

/// Runs one job; a panic is logged and the partition goes on (the job's reply sender, dropped
/// in the unwinding, tells its submitter).
fn run_job(partition: &mut Partition, job: impl FnOnce(&mut Partition)) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| job(partition))) {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        tracing::error!(partition = partition.id, "executor job panicked: {what}");
    }
}

/// How busy an executor has been lately: whether it spent at most half of its last window of
/// at least [`Load::WINDOW`] waiting for jobs. Only a busy executor polls its empty queue (see
/// [`poll_briefly`]): there it is the thread everyone waits for, and a job that comes while it
/// polls is taken without a wake-up. A mostly idle executor (statement-by-statement clients,
/// whose network threads and clients are the busy ones) sleeps at once, since on a machine
/// with few CPUs the yields of its polling took CPU time from the threads that make its work.
/// The clock is read only when the queue runs empty: an executor that always has a job
/// queued pays nothing for this. An executor pinned to a CPU of its own always polls. How many
/// executors are busy also decides whether network threads wait for replies before they
/// sleep ([`reply::await_reply_briefly`]).
struct Load {
    window_start: std::time::Instant,
    idle_in_window: Duration,
    busy: bool,
}

impl Load {
    const WINDOW: Duration = Duration::from_millis(1);

    fn new(now: std::time::Instant) -> Load {
        Load { window_start: now, idle_in_window: Duration::ZERO, busy: true }
    }

    /// Counts a wait for work from `from` to `now`; a window that has passed decides
    /// [`busy`](Self::busy) until the next wait ends one.
    fn idled(&mut self, from: std::time::Instant, now: std::time::Instant) {
        self.idle_in_window += now.saturating_duration_since(from);
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed >= Self::WINDOW {
            self.busy = self.idle_in_window * 2 <= elapsed;
            self.window_start = now;
            self.idle_in_window = Duration::ZERO;
        }
    }

    fn busy(&self) -> bool {
        self.busy
    }
}

/// Polls the queue for `poll`, yielding the CPU between polls. A job that arrives meanwhile
/// is taken without the executor having slept: its sender pays no wake-up (a futex call, and
/// on a virtual machine an interrupt to another CPU) and the executor none of the sleep and
/// wake latency. Yielding leaves the CPU to any other runnable thread, so the polling costs
/// only time nothing else wanted, and the system calls of the yields.
fn poll_briefly(jobs: &Receiver<Job>, poll: Duration) -> Option<Job> {
    if poll.is_zero() {
        return None;
    }
    let until = std::time::Instant::now() + poll;
    loop {
        std::thread::yield_now();
        if let Ok(job) = jobs.try_recv() {
            return Some(job);
        }
        if std::time::Instant::now() >= until {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_in_order_and_answer_with_wakes_batched_or_not() {
        // Polling or sleeping at once when the queue runs empty, too.
        for (batch_wakes, poll) in [(true, DEFAULT_POLL), (false, DEFAULT_POLL), (true, Duration::ZERO), (false, Duration::ZERO)] {
            let exec = Executor::spawn(0, None, Settings { batch_wakes, poll, ..Settings::default() }).unwrap();
            let replies: Vec<_> = (0..100).map(|i| exec.call(move |p| (p.id, i))).collect();
            for (i, r) in replies.into_iter().enumerate() {
                assert_eq!(r.wait().unwrap(), (0, i));
            }
            // Awaited replies too (their wakes are the ones held back).
            let replies: Vec<_> = (0..100).map(|i| exec.call(move |_| i)).collect();
            let got = futures::executor::block_on(futures::future::join_all(replies));
            assert_eq!(got.into_iter().map(|r| r.unwrap()).collect::<Vec<_>>(), (0..100).collect::<Vec<_>>());
        }
    }

    /// A job run soon runs at once on the caller's thread while the partition is free, and
    /// otherwise right after the job that holds the partition, on that job's thread, ahead of
    /// the queue: the executor thread's job or a job run inline on another thread.
    #[test]
    fn a_job_run_soon_runs_at_once_or_right_after_the_job_holding_the_partition() {
        let exec = Arc::new(Executor::spawn(0, None, Settings::default()).unwrap());
        let here = std::thread::current().id();
        assert_eq!(exec.call_soon(|_| std::thread::current().id()).wait().unwrap(), here);
        assert!(exec.call_soon(|_| -> i32 { panic!("a bug") }).wait().is_err(), "a panic answers with an error");
        for inline in [false, true] {
            let (release, held) = std::sync::mpsc::channel::<()>();
            let (holding, started) = std::sync::mpsc::channel::<std::thread::ThreadId>();
            let hold = move |_: &mut Partition| {
                holding.send(std::thread::current().id()).unwrap();
                held.recv().unwrap();
            };
            let holder = if inline {
                let exec = exec.clone();
                std::thread::spawn(move || exec.call_inline(hold).wait().unwrap())
            } else {
                let blocker = exec.call(hold);
                std::thread::spawn(move || blocker.wait().unwrap())
            };
            let holder_thread = started.recv().unwrap();
            let order = Arc::new(Mutex::new(Vec::new()));
            let o = order.clone();
            let queued = exec.call(move |_| o.lock().push("queued"));
            let o = order.clone();
            let soon = exec.call_soon(move |_| {
                o.lock().push("soon");
                std::thread::current().id()
            });
            assert!(order.lock().is_empty(), "nothing runs while the partition is held");
            release.send(()).unwrap();
            holder.join().unwrap();
            assert_eq!(soon.wait().unwrap(), holder_thread, "inline: {inline}");
            queued.wait().unwrap();
            assert_eq!(*order.lock(), ["soon", "queued"], "inline: {inline}");
        }
    }

    /// Jobs run soon from several threads, among jobs run inline and queued, all run and
    /// answer their own callers.
    #[test]
    fn no_job_run_soon_is_lost_among_inline_and_queued_jobs() {
        let exec = Arc::new(Executor::spawn(0, None, Settings::default()).unwrap());
        let (done, finished) = std::sync::mpsc::channel::<u64>();
        for t in 0..4u64 {
            let (exec, done) = (exec.clone(), done.clone());
            std::thread::spawn(move || {
                let mut sum = 0;
                for i in 0..2_000u64 {
                    let n = t * 10_000 + i;
                    sum += match i % 3 {
                        0 => exec.call_soon(move |_| n).wait().unwrap(),
                        1 => exec.call_inline(move |_| n).wait().unwrap(),
                        _ => exec.call(move |_| n).wait().unwrap(),
                    };
                }
                done.send(sum).unwrap();
            });
        }
        let mut total = 0;
        for _ in 0..4 {
            total += finished.recv_timeout(Duration::from_secs(60)).expect("a job was lost");
        }
        assert_eq!(total, (0..4u64).map(|t| (0..2_000u64).map(|i| t * 10_000 + i).sum::<u64>()).sum());
    }

    /// A thread started from a thread at a raised priority inherits it, and gives it up by
    /// setting the process's niceness on itself (checked where this process may lower one).
    #[test]
    fn threads_an_executor_starts_take_the_process_niceness_back() {
        let base = cpus::process_niceness();
        let seen = std::thread::spawn(move || {
            cpus::set_thread_niceness(base - 3).ok()?; // not permitted here: nothing to check
            std::thread::spawn(move || {
                let inherited = cpus::thread_niceness();
                cpus::set_thread_niceness(cpus::process_niceness()).unwrap();
                (inherited, cpus::thread_niceness())
            })
            .join()
            .ok()
        })
        .join()
        .unwrap();
        if let Some((inherited, after)) = seen {
            assert_eq!(inherited, base - 3);
            assert_eq!(after, base);
        }
    }

    #[test]
    fn an_executor_is_busy_while_it_waited_for_at_most_half_of_its_last_window() {
        let t0 = std::time::Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let mut load = Load::new(t0);
        assert!(load.busy(), "a new executor polls");
        // 600 µs of waiting in a 1.2 ms window: busy.
        load.idled(at(0), at(300));
        load.idled(at(900), at(1200));
        assert!(load.busy());
        // A window still open leaves it so; 950 µs of waiting in the next 1.1 ms: idle.
        load.idled(at(1300), at(1400));
        assert!(load.busy(), "the window has not ended");
        load.idled(at(1450), at(2300));
        assert!(!load.busy());
        // Long work between two short waits ends the idle spell.
        load.idled(at(5000), at(5010));
        assert!(load.busy());
    }

    #[test]
    fn an_idle_executor_lets_the_caller_run_the_job_but_never_ahead_of_an_earlier_one() {
        let exec = Executor::spawn(2, None, Settings::default()).unwrap();
        let me = std::thread::current().id();
        let ran_on = |r: Reply<std::thread::ThreadId>| r.wait().unwrap();
        assert_eq!(ran_on(exec.call_inline(|_| std::thread::current().id())), me, "idle: run by the caller");
        assert_ne!(ran_on(exec.call(|_| std::thread::current().id())), me, "call always hands over");

        // While a job runs on the executor, a later one queues behind it.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let order = Arc::new(Mutex::new(Vec::new()));
        let o = order.clone();
        let first = exec.call(move |_| {
            held.recv().unwrap();
            o.lock().push(1);
        });
        let o = order.clone();
        let second = exec.call_inline(move |_| {
            o.lock().push(2);
            std::thread::current().id()
        });
        release.send(()).unwrap();
        first.wait().unwrap();
        assert_ne!(second.wait().unwrap(), me, "queued behind a running job");
        assert_eq!(*order.lock(), vec![1, 2]);

        // A queued job has answered before the executor thread counts it finished.
        while exec.owned.pending.load(Ordering::Acquire) != 0 {
            std::thread::yield_now();
        }
        // A panic inline is the caller's error; the executor goes on, inline again.
        assert!(exec.call_inline(|_| -> u32 { panic!("boom") }).wait().is_err());
        assert_eq!(ran_on(exec.call_inline(|_| std::thread::current().id())), me);
    }

    #[test]
    fn a_panicking_job_does_not_stop_the_executor() {
        let exec = Executor::spawn(1, None, Settings { batch_wakes: false, ..Settings::default() }).unwrap();
        let bad = exec.call(|_| -> u32 { panic!("boom") });
        assert!(bad.wait().is_err());
        assert_eq!(exec.call(|p| p.id).wait().unwrap(), 1);
    }
}
