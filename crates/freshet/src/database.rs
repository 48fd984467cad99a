use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use freshet_core::engine::{Engine, EngineConfig};
use freshet_core::Result;
use freshet_core::storage::{DbSnapshot, SnapshotScope, TxnView};
use freshet_olap::fork::ForkProcess;
use freshet_olap::OlapEngine;

use crate::durability::checkpoint::CheckpointInfo;
use crate::durability::{DataDir, DurabilityConfig, RecoveryReport};
use crate::session::Session;
use crate::snapshots::{SnapshotInfo, SnapshotMode, Snapshots, SnapshotsView};
use freshet_core::wal::{Fs, RealFs};

/// How a database is opened.
#[derive(Clone, Debug)]
pub struct Config {
    /// Worker threads of the analytical engine; 0 (the default) means the CPUs the partition
    /// executors leave: the number of CPUs minus `partitions`, at least one. Measured with
    /// TPC-C and one CH stream on 2 cores: 2 workers beside the busy executor cost TPC-C
    /// 23–29% and made the queries 9–21% slower than 1 worker did (see ARCHITECTURE.md).
    pub olap_threads: usize,
    /// Scheduling niceness of the analytical workers, 0–19 (default 0: both sides alike).
    /// Higher gives the executors more of the CPU when both sides want it (at 10, about ten
    /// times a worker's share); idle CPU still goes to the queries. Measured with TPC-C and
    /// one CH stream on 2 cores, 10 did not raise TPC-C throughput and slowed the queries,
    /// hence the default.
    pub olap_nice: i32,
    /// Bytes the analytical queries may hold together in hash tables, sorts and aggregates;
    /// 0 (the default) means a quarter of physical memory (the tables live in the same
    /// memory). A query that needs more spills its sorts and aggregates to temporary files
    /// where it can and otherwise fails with SQLSTATE 53200, instead of exhausting the
    /// server's memory.
    pub olap_memory_limit: u64,
    /// Rows an index-driven SELECT may examine on an executor before it moves to the
    /// analytical side (default 10,000).
    pub short_select_budget: usize,
    /// Where the database is kept (redo log and checkpoints); `None` keeps it in memory only.
    pub data_dir: Option<PathBuf>,
    /// Log growth after which a checkpoint is written (default 256 MiB).
    pub checkpoint_bytes: u64,
    /// Time after which a checkpoint is written if anything was logged (default 5 minutes).
    pub checkpoint_interval: std::time::Duration,
    /// The default of `synchronous_commit` for new sessions (default on).
    pub synchronous_commit: bool,
    /// Give each partition's executor a CPU of its own and keep Freshet's other threads (the
    /// analytical workers) on the CPUs left (default off, as for the server: `--pin-cpus`). Nothing
    /// is pinned when there are no more CPUs than partitions. An application that drives the
    /// database from its own threads keeps them off the executors' CPUs with
    /// [`Database::keep_off_executors`].
    pub pin_cpus: bool,
    /// While more jobs are queued, an executor holds back the wake of each reply and sends
    /// them together (when at most one job is left, after 16 replies or 200 µs, and before it
    /// waits). Default on: in-process, where the threads that wait for replies share CPUs
    /// with analytical queries, it spares them a preemption per reply (TPC-C beside a CH
    /// stream went from 18.5k to 26.6k tps with it, and alone it changed nothing). The server
    /// turns it off (`--batch-reply-wakes`): over the wire a held reply delays a client's next
    /// request, and procedure calls ran 25% slower with it.
    pub batch_reply_wakes: bool,
    /// Scheduling niceness of the partition executors, −20 to 0 (default 0: as every other
    /// thread). Negative lets an executor that has work take its CPU ahead of the threads it
    /// shares it with, since every session waits for it. Needs CAP_SYS_NICE (or an RLIMIT_NICE
    /// that allows it); without, the executors stay at the process's niceness (logged). The
    /// server sets −10 (`--executor-nice`): one PL/pgSQL call per TPC-C transaction over the
    /// wire, W=5, ran 14% faster with it (mean of four alternated runs; ARCHITECTURE.md).
    pub executor_nice: i32,
    /// How long a busy partition executor whose queue ran empty keeps polling it, yielding
    /// its CPU between polls, before it sleeps (default 50 µs; zero sleeps at once). A job
    /// that arrives meanwhile is taken without a wake-up: the submitting thread makes no futex
    /// call and the executor pays no sleep and wake latency. An executor without a CPU of its
    /// own (`pin_cpus` off) polls only while busy, having waited for jobs during at most half
    /// of its last millisecond; a mostly idle one (serving statement-by-statement clients)
    /// sleeps at once, since the yields of its polling took CPU time from the threads that
    /// make its work. An idle database sleeps after this long.
    pub executor_poll: std::time::Duration,
    /// Let a session that finds its partition's executor idle (no job queued or running) run
    /// its statement, commit or rollback on its own thread instead of handing it to the
    /// executor thread: jobs still run one at a time and in the order they were submitted,
    /// and the hand-off's two thread wakes are saved. Default on (the server's
    /// `--inline-statements`, also on).
    pub inline_statements: bool,
    /// Likewise for procedure calls that run as one job (CALL, SELECT of a function, the
    /// native procedure API). Default on in-process, where the calling thread has nothing
    /// else to do meanwhile. The server turns it off (`--inline-calls`): its network threads
    /// do every connection's protocol work, and a call of tens of microseconds run on the
    /// executor thread, at its raised priority, overlaps that work instead of holding a
    /// network thread (see ARCHITECTURE.md, "Sessions run their own jobs when the executor is
    /// idle"). With it on, `pin_cpus` gives a CPU to a mostly idle executor.
    pub inline_calls: bool,
    /// Partitions, each owned by one executor thread (default 1). Tables declared with
    /// `PARTITION BY HASH (column)` spread over them; other tables are replicated on each.
    pub partitions: usize,
    /// The default of `freshet.max_staleness` for new sessions: how old a snapshot an
    /// analytical query may read (default 0: every commit acknowledged before it started).
    pub max_staleness: std::time::Duration,
    /// The default of `freshet.snapshot_mode` for new sessions (default copy-on-write).
    pub snapshot_mode: SnapshotMode,
    /// The default of `freshet.foreign_keys` for new sessions: what CREATE TABLE does with a
    /// FOREIGN KEY constraint, which Freshet does not enforce (default: refuse it).
    pub foreign_keys: freshet_core::sql::ddl::ForeignKeys,
}

impl Config {
    /// The default of [`executor_poll`](Self::executor_poll).
    pub const DEFAULT_EXECUTOR_POLL: std::time::Duration = freshet_core::executor::DEFAULT_POLL;

    /// The analytical worker threads this configuration gives (see `olap_threads`).
    pub fn resolved_olap_threads(&self) -> usize {
        match self.olap_threads {
            0 => {
                let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
                cpus.saturating_sub(self.partitions).max(1)
            }
            n => n,
        }
    }

    /// The analytical memory limit in bytes this configuration gives (see
    /// `olap_memory_limit`).
    pub fn resolved_olap_memory_limit(&self) -> u64 {
        match self.olap_memory_limit {
            0 => physical_memory().unwrap_or(4 << 30) / 4,
            n => n,
        }
    }
}

/// Physical memory in bytes (`MemTotal` of /proc/meminfo), where the system says.
fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

impl Default for Config {
    fn default() -> Self {
        Config {
            olap_threads: 0,
            olap_nice: 0,
            olap_memory_limit: 0,
            short_select_budget: EngineConfig::default().short_select_budget,
            data_dir: None,
            checkpoint_bytes: 256 << 20,
            checkpoint_interval: std::time::Duration::from_secs(300),
            synchronous_commit: true,
            pin_cpus: false,
            batch_reply_wakes: true,
            executor_nice: 0,
            executor_poll: Config::DEFAULT_EXECUTOR_POLL,
            inline_statements: true,
            inline_calls: true,
            partitions: 1,
            max_staleness: std::time::Duration::ZERO,
            snapshot_mode: SnapshotMode::Cow,
            foreign_keys: freshet_core::sql::ddl::ForeignKeys::Refuse,
        }
    }
}

pub(crate) struct Inner {
    pub engine: Arc<Engine>,
    pub olap: OlapEngine,
    pub config: Config,
    pub data: Option<Arc<DataDir>>,
    pub recovery: RecoveryReport,
    pub snapshots: Arc<Snapshots>,
    next_session: AtomicU32,
    /// Native procedures registered by the embedding program (not durable).
    pub natives: crate::procedure::Natives,
    /// Calls of procedures (stored and native) since the database was opened, by name.
    pub call_counts: crate::procedure::CallCounts,
    /// Sessions and transactions, for `pg_stat_database`.
    pub activity: Arc<crate::pg_catalog::Activity>,
    /// The advisory locks sessions hold.
    pub advisory: Arc<crate::advisory::AdvisoryLocks>,
    /// The sessions listening on each notification channel.
    pub channels: Arc<crate::notify::Channels>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(data) = &self.data {
            data.stop_background();
        }
    }
}

/// An open database. Cheap to clone; every clone is the same database.
#[derive(Clone)]
pub struct Database {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database").field("config", &self.inner.config).finish()
    }
}

impl Database {
    /// Opens a database: in memory, or kept in `config.data_dir` (recovering what is there).
    pub fn open(config: Config) -> Result<Database> {
        Self::open_with(config, Arc::new(RealFs))
    }

    /// [`open`](Self::open) over a given file layer (tests inject faults through it).
    pub fn open_with(config: Config, fs: Arc<dyn Fs>) -> Result<Database> {
        let engine = Engine::start(EngineConfig {
            short_select_budget: config.short_select_budget,
            partitions: config.partitions,
            pin_cpus: config.pin_cpus,
            executor: freshet_core::executor::Settings { batch_wakes: config.batch_reply_wakes, nice: config.executor_nice, poll: config.executor_poll },
            inline_statements: config.inline_statements,
            inline_calls: config.inline_calls,
        })?;
        let (data, recovery) = match &config.data_dir {
            Some(dir) => {
                let durability = DurabilityConfig {
                    dir: dir.clone(),
                    checkpoint_bytes: config.checkpoint_bytes,
                    checkpoint_interval: config.checkpoint_interval,
                };
                let (data, report) = DataDir::open(durability, fs, engine.clone())?;
                (Some(data), report)
            }
            None => (None, RecoveryReport::default()),
        };
        let memory = usize::try_from(config.resolved_olap_memory_limit()).unwrap_or(usize::MAX);
        let mut olap = OlapEngine::new(engine.clone(), config.resolved_olap_threads(), config.olap_nice.clamp(0, 19), memory)?;
        let activity = Arc::new(crate::pg_catalog::Activity::default());
        let advisory = Arc::new(crate::advisory::AdvisoryLocks::default());
        crate::pg_catalog::register(&mut olap, &engine, &activity, &advisory, data.as_ref());
        let snapshots = Arc::new(Snapshots::default());
        olap.register_system_table("freshet_snapshots", Arc::new(SnapshotsView(snapshots.clone())));
        let natives = crate::procedure::Natives::default();
        let call_counts = crate::procedure::CallCounts::default();
        let view = crate::procedure::ProceduresView { engine: engine.clone(), natives: natives.clone(), call_counts: call_counts.clone() };
        olap.register_system_table("freshet_procedures", Arc::new(view));
        let inner = Inner { engine, olap, config, data, recovery, snapshots, next_session: AtomicU32::new(1), natives, call_counts, activity, advisory, channels: Default::default() };
        Ok(Database { inner: Arc::new(inner) })
    }

    /// What recovery did when the database was opened.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    /// Writes a checkpoint now (CHECKPOINT). An in-memory database has nothing to write.
    pub fn checkpoint(&self) -> Result<Option<CheckpointInfo>> {
        match &self.inner.data {
            Some(d) => d.checkpoint().map(Some),
            None => Ok(None),
        }
    }

    /// Makes every commit so far durable (asynchronous commits included). Servers call this
    /// when they stop.
    pub fn close(&self) -> Result<()> {
        match &self.inner.data {
            Some(d) => d.wal().sync().wait()?.map(|_| ()),
            None => Ok(()),
        }
    }

    /// Registers a native procedure: `CALL name(…)` from SQL (or `Session::call` from Rust)
    /// runs `body` with the call's arguments, atomically like a PL/pgSQL procedure; its
    /// [`ProcedureContext`](crate::ProcedureContext) runs SQL inside the call's transaction.
    /// CALL returns no rows. Native procedures are not durable: register them after every
    /// `Database::open`. A stored procedure of the same name takes precedence.
    pub fn register_procedure<F>(&self, name: &str, body: F)
    where
        F: Fn(&mut crate::ProcedureContext<'_>, &[freshet_core::types::Value]) -> Result<Vec<Vec<freshet_core::types::Value>>> + Send + Sync + 'static,
    {
        self.register_procedure_returning(name, vec![], body)
    }

    /// [`register_procedure`](Self::register_procedure) for a procedure whose CALL returns
    /// rows with `columns`.
    pub fn register_procedure_returning<F>(&self, name: &str, columns: Vec<crate::ColumnInfo>, body: F)
    where
        F: Fn(&mut crate::ProcedureContext<'_>, &[freshet_core::types::Value]) -> Result<Vec<Vec<freshet_core::types::Value>>> + Send + Sync + 'static,
    {
        self.add_native(name, None, columns, None, Arc::new(body));
    }

    /// [`register_procedure_returning`](Self::register_procedure_returning) for a procedure
    /// with declared parameter types: a call must pass one argument per parameter (42883
    /// otherwise), each is converted to its parameter's type before the body sees it (22P02
    /// and the like if it does not convert), and a prepared `CALL name($1, …)` describes its
    /// parameters with these types. Without them an argument comes as it is written: a
    /// number as a number, anything else (a `$n` parameter too) as text.
    pub fn register_typed_procedure<F>(&self, name: &str, params: Vec<freshet_core::types::DataType>, columns: Vec<crate::ColumnInfo>, body: F)
    where
        F: Fn(&mut crate::ProcedureContext<'_>, &[freshet_core::types::Value]) -> Result<Vec<Vec<freshet_core::types::Value>>> + Send + Sync + 'static,
    {
        self.add_native(name, Some(params), columns, None, Arc::new(body));
    }

    /// [`register_typed_procedure`](Self::register_typed_procedure) for a partition-constrained
    /// procedure (HyPer §4.3): argument `home` (counted from 0) is the partition key value the
    /// body works on — TPC-C's warehouse. On a database with several partitions
    /// ([`Config::partitions`](crate::Config::partitions)) a call outside a transaction block
    /// runs as one job on the partition that value names, as a PL/pgSQL routine's calls do on
    /// their home parameter's; a body that reaches another partition's rows there (a remote
    /// warehouse, a write of a replicated table) gives the job up and the call runs again the
    /// ordinary way, its record accesses as SQL. Other procedures run the ordinary way on such
    /// a database; with one partition `home` changes nothing. 22023 if there is no parameter
    /// `home`.
    pub fn register_partitioned_procedure<F>(&self, name: &str, params: Vec<freshet_core::types::DataType>, columns: Vec<crate::ColumnInfo>, home: usize, body: F) -> Result<()>
    where
        F: Fn(&mut crate::ProcedureContext<'_>, &[freshet_core::types::Value]) -> Result<Vec<Vec<freshet_core::types::Value>>> + Send + Sync + 'static,
    {
        if home >= params.len() {
            return Err(crate::Error::new(
                crate::SqlState::InvalidParameterValue,
                format!("procedure \"{name}\" has {} parameters: no parameter {home} to name its partition", params.len()),
            ));
        }
        self.add_native(name, Some(params), columns, Some(home), Arc::new(body));
        Ok(())
    }

    fn add_native(
        &self,
        name: &str,
        params: Option<Vec<freshet_core::types::DataType>>,
        columns: Vec<crate::ColumnInfo>,
        home: Option<usize>,
        body: Arc<crate::procedure::NativeBody>,
    ) {
        let name = name.to_lowercase();
        let native = crate::procedure::NativeProcedure { name: name.clone(), params, columns, body, home };
        self.inner.natives.write().insert(name, Arc::new(native));
    }

    pub(crate) fn native_procedure(&self, name: &str) -> Option<Arc<crate::procedure::NativeProcedure>> {
        self.inner.natives.read().get(name).cloned()
    }

    /// A new session (one per client connection).
    pub fn session(&self) -> Session {
        let id = self.inner.next_session.fetch_add(1, Ordering::Relaxed);
        Session::new(self.clone(), id)
    }

    /// Restricts the calling thread, and the threads it starts from now on, to the CPUs the
    /// executors leave, when [`Config::pin_cpus`] pinned them; otherwise does nothing. For an
    /// application's threads that call into the database: on an executor's CPU they would
    /// take turns with it.
    pub fn keep_off_executors(&self) {
        self.inner.engine.cpus().keep_off_executors();
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.inner.engine
    }

    /// Takes a copy-on-write snapshot of every table now, as analytical queries do; it is
    /// listed in `freshet_snapshots` and lives until the last clone is dropped.
    pub fn snapshot(&self) -> Result<Arc<DbSnapshot>> {
        let engine = &self.inner.engine;
        let tables: Vec<_> = engine.catalog().tables().cloned().collect();
        futures::executor::block_on(self.inner.snapshots.take(engine, &tables, None, SnapshotScope::Shared))
    }

    /// Forks a child process that holds an image of the database taken at a transaction
    /// boundary (fork mode's snapshot) and does nothing else until the handle is dropped,
    /// which kills and reaps it. Listed in `freshet_snapshots` with its pid.
    pub fn fork_snapshot(&self) -> Result<Arc<ForkProcess>> {
        let engine = &self.inner.engine;
        let tables: Vec<_> = engine.catalog().tables().cloned().collect();
        let count = tables.len();
        let taken = std::time::Instant::now();
        let taken_at = crate::session::now_micros();
        let child: freshet_core::engine::ForkChild = Box::new(|_snapshots| -> std::convert::Infallible {
            // SAFETY: a plain system call in the child, which only waits to be killed.
            unsafe {
                loop {
                    libc::pause();
                }
            }
        });
        let forked = futures::executor::block_on(engine.fork(tables, TxnView::committed(), Vec::new(), child))?;
        let process = Arc::new(ForkProcess { id: self.inner.snapshots.next_id(), forked, taken_at, taken, tables: count });
        let weak: std::sync::Weak<ForkProcess> = Arc::downgrade(&process);
        self.inner.snapshots.register(weak);
        Ok(process)
    }

    /// The live analytical snapshots (what `SELECT * FROM freshet_snapshots` shows).
    pub fn snapshots(&self) -> Vec<SnapshotInfo> {
        self.inner.snapshots.list()
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }
}
