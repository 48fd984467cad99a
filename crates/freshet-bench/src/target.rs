//! Where a workload runs: an in-process database or a server address. [`Target::run`] gives a
//! [`ConnJob`] a fresh connection on the calling thread and drives it to completion, so the
//! same job code runs embedded (on a plain executor) and over the wire (on a single-threaded
//! tokio runtime of that thread, which also drives the connection's socket).
//! [`Target::run_all`] runs several jobs that way on one thread, each with its connection.

use futures::stream::{FuturesUnordered, StreamExt};

use crate::conn::{Conn, DbError, DbResult, Embedded, Wire};

#[derive(Clone)]
pub enum TargetKind {
    Embedded(freshet::Database),
    /// A libpq-style connection string, e.g. `host=127.0.0.1 port=5433 user=bench dbname=x`.
    Wire(String),
}

#[derive(Clone)]
pub struct Target {
    pub kind: TargetKind,
    /// The isolation level every session sets for its transactions (e.g. "read committed");
    /// `None` keeps the system's default.
    pub isolation: Option<String>,
}

/// Lets the other tasks of this thread run before this one goes on.
///
/// A task's await points are its only turns. In-process, a statement or call that finds its
/// partition free runs at once on the caller's thread and its reply is ready when awaited, so
/// a task whose every await completes at once would never give another task of its thread a
/// turn: of [`Target::run_all`]'s terminals the first would run alone for the whole run, on
/// its one warehouse. A loop that means to share its thread calls this once per round. It wakes its own task and is pending
/// once, so the executor polls the other ready tasks first (`FuturesUnordered` queues a woken
/// task behind them); it costs one extra poll where the task runs alone.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if std::mem::replace(&mut yielded, true) {
            std::task::Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}

/// Work to do on one connection.
#[allow(async_fn_in_trait)]
pub trait ConnJob {
    type Output;
    async fn run<C: Conn>(self, conn: C) -> DbResult<Self::Output>;
}

impl Target {
    pub fn embedded(db: freshet::Database) -> Target {
        Target { kind: TargetKind::Embedded(db), isolation: None }
    }

    pub fn wire(conninfo: impl Into<String>) -> Target {
        Target { kind: TargetKind::Wire(conninfo.into()), isolation: None }
    }

    pub fn with_isolation(mut self, isolation: Option<String>) -> Target {
        self.isolation = isolation;
        self
    }

    async fn setup<C: Conn>(&self, mut conn: C) -> DbResult<C> {
        if let Some(level) = &self.isolation {
            conn.simple(&format!("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {level}")).await?;
        }
        Ok(conn)
    }

    /// Runs `job` on a new connection on this thread.
    pub fn run<J: ConnJob>(&self, job: J) -> DbResult<J::Output> {
        self.run_all(vec![job]).pop().unwrap_or_else(|| Err(DbError::new("", "no job")))
    }

    /// Runs each job on a new connection of its own, all on this thread: each job is a task,
    /// and the tasks take turns at their await points (while one waits for its statement,
    /// another runs), as an async application serves many sessions from one thread; a job
    /// whose awaits may all complete at once takes its turns with [`yield_now`]. Results
    /// are in the order of `jobs`.
    /// In-process, the thread first keeps off the executors' CPUs
    /// ([`freshet::Database::keep_off_executors`]).
    pub fn run_all<J: ConnJob>(&self, jobs: Vec<J>) -> Vec<DbResult<J::Output>> {
        if let TargetKind::Embedded(db) = &self.kind {
            db.keep_off_executors();
        }
        let n = jobs.len();
        let tasks: FuturesUnordered<_> = jobs.into_iter().enumerate().map(|(i, job)| async move { (i, self.run_one(job).await) }).collect();
        let mut done: Vec<(usize, DbResult<J::Output>)> = match &self.kind {
            TargetKind::Embedded(_) => futures::executor::block_on(tasks.collect()),
            TargetKind::Wire(_) => match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt.block_on(tasks.collect()),
                Err(e) => return (0..n).map(|_| Err(DbError::new("", format!("tokio runtime: {e}")))).collect(),
            },
        };
        // The stream ends when every task has; they finish in any order.
        done.sort_unstable_by_key(|(i, _)| *i);
        done.into_iter().map(|(_, r)| r).collect()
    }

    async fn run_one<J: ConnJob>(&self, job: J) -> DbResult<J::Output> {
        match &self.kind {
            TargetKind::Embedded(db) => job.run(self.setup(Embedded::new(db)).await?).await,
            // The connection's task is spawned on the runtime of this thread.
            TargetKind::Wire(conninfo) => job.run(self.setup(Wire::connect(conninfo).await?).await?).await,
        }
    }
}

/// The stack of a thread that runs connections' jobs ([`Target::run`], [`Target::run_all`]):
/// in-process, a statement's whole path runs inside the thread's futures, and a debug build's
/// futures are many times larger than an optimised build's (the default 2 MiB overflowed
/// loading TPC-C from a debug build).
const CLIENT_STACK: usize = 32 << 20;

/// Spawns a scoped thread for connections' jobs, with a stack of [`CLIENT_STACK`] bytes (of
/// address space: pages are touched only as deep as the futures go).
pub fn spawn_client<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    f: impl FnOnce() -> T + Send + 'scope,
) -> std::thread::ScopedJoinHandle<'scope, T> {
    std::thread::Builder::new().stack_size(CLIENT_STACK).spawn_scoped(scope, f).unwrap_or_else(|e| panic!("spawning a client thread: {e}"))
}
