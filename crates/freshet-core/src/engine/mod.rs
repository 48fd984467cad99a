//! The engine: the catalog plus the partition executors, and the operations that span them.
//!
//! Everything that changes data runs as a job on the executor of the partition that owns it:
//! one job per statement, which applies the statement and its undo log atomically with
//! respect to every other job. DDL is serialised by the catalog's DDL lock: storage changes
//! go to every partition first, then the new catalog version is published.
//!
//! Placement (`routing`): a table with a partition key spreads its rows over the partitions by
//! the key's hash; a table without one is replicated on every partition. A statement runs on
//! the one partition its key pins it to, or on several; a step that involves several
//! partitions runs with all of them quiesced (`quiesce`, HyPer §3.4, §4.3).

mod fork;
mod quiesce;
mod recovery;
mod routing;
mod statements;
mod waits;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use waits::Waits;
pub use fork::{ForkChild, Forked};

pub use recovery::CheckpointImage;
pub use statements::{JobOutcome, JobStatements, JobTxn, Savepoint};

use crate::catalog::{Catalog, CatalogStore, ColumnDef, IndexDef, TableDef, TableId};
use crate::error::{Error, Result, SqlState};
use crate::executor::cpus::CpuPlan;
use crate::executor::{self, Executor, Partition};
use crate::sql::ddl::{check_includes_partition_key, resolve_columns, DdlPlan};
use crate::sql::plpgsql::PlType;
use crate::storage::{TableStats, Ts, TxnView};
use crate::txn::{Isolation, TxnRegistry};
use crate::types::Value;
use crate::executor::Reply;
use crate::wal::{Logged, Lsn, RedoRecord, RowChange, Wal};

/// Resolves when a commit's redo record is durable (or its write failed).
pub type Durable = Reply<Result<Lsn>>;

#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Rows an index-driven SELECT may examine on an executor before it is handed to the
    /// analytical side instead.
    pub short_select_budget: usize,
    /// Partitions, each with its executor thread (at most 64).
    pub partitions: usize,
    /// Give each executor a CPU of its own ([`CpuPlan::for_partitions`]); off by default.
    pub pin_cpus: bool,
    /// How the executors run: reply-wake batching, niceness and polling (see
    /// `freshet::Config::batch_reply_wakes`, `executor_nice` and `executor_poll`).
    pub executor: executor::Settings,
    /// Statements, commits and rollbacks that find their executor idle run on the caller's
    /// thread ([`executor::Executor::call_inline`]; `freshet::Config::inline_statements`).
    pub inline_statements: bool,
    /// Procedure calls run as one job likewise (`freshet::Config::inline_calls`).
    pub inline_calls: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            short_select_budget: 10_000,
            partitions: 1,
            pin_cpus: false,
            executor: executor::Settings::default(),
            inline_statements: false,
            inline_calls: false,
        }
    }
}

/// What a DDL statement did: its command tag and notices for the client.
#[derive(Clone, Debug, PartialEq)]
pub struct DdlOutcome {
    pub tag: &'static str,
    pub notices: Vec<String>,
}

/// The result of a short statement.
#[derive(Debug)]
pub enum OltpResult {
    /// Rows changed (UPDATE, DELETE).
    Count(u64),
    Rows(Vec<Vec<Value>>),
    /// The SELECT examined more rows than the short path allows.
    TooLarge,
}

/// A statement's transaction: an interactive transaction's id, the snapshot the statement
/// reads (the transaction's, or for READ COMMITTED the statement's own), and its isolation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnCtx {
    pub id: Ts,
    pub start: Ts,
    pub isolation: Isolation,
}

impl TxnCtx {
    pub fn view(&self) -> TxnView {
        TxnView::new(self.id, self.start)
    }
}

pub struct Engine {
    catalog: CatalogStore,
    executors: Vec<Executor>,
    registry: Arc<TxnRegistry>,
    waits: Arc<Waits>,
    /// Multi-partition steps are queued on their executors under this lock, so that every
    /// executor sees them in the same order and their barriers cannot deadlock.
    quiesce_order: Mutex<()>,
    /// The partitions each running transaction has touched (bit i: partition i). Hashed with
    /// hashbrown's default (foldhash) rather than SipHash: it is looked up by every statement
    /// of a transaction block, and its keys are the engine's own timestamps.
    touched: Mutex<hashbrown::HashMap<Ts, u64>>,
    /// Round robin over the replicas for reads of replicated tables outside a transaction.
    next_reader: AtomicUsize,
    /// The redo log, once recovery has attached it (none for an in-memory database).
    wal: OnceLock<Arc<Wal>>,
    /// The log failure (its count in [`Wal::failures`]) whose commits were last undone.
    rewound: AtomicU64,
    rewind_lock: futures::lock::Mutex<()>,
    /// A schema change is in memory but not in the log: the log must not resume.
    ddl_unlogged: AtomicBool,
    config: EngineConfig,
    cpus: CpuPlan,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("partitions", &self.executors.len()).field("config", &self.config).finish()
    }
}

impl Engine {
    pub fn start(config: EngineConfig) -> Result<Arc<Engine>> {
        if config.partitions == 0 || config.partitions > 64 {
            return Err(Error::new(SqlState::InvalidParameterValue, "the number of partitions must be between 1 and 64"));
        }
        let cpus = if config.pin_cpus { CpuPlan::for_partitions(config.partitions) } else { CpuPlan::unpinned() };
        let executors = (0..config.partitions)
            .map(|i| Executor::spawn(i, cpus.executor_cpu(i), config.executor).map_err(|e| Error::internal(format!("cannot start executor {i}: {e}"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(Engine {
            catalog: CatalogStore::new(),
            executors,
            registry: Arc::new(TxnRegistry::default()),
            waits: Arc::new(Waits::default()),
            quiesce_order: Mutex::new(()),
            touched: Mutex::new(hashbrown::HashMap::new()),
            next_reader: AtomicUsize::new(0),
            wal: OnceLock::new(),
            rewound: AtomicU64::new(0),
            rewind_lock: futures::lock::Mutex::new(()),
            ddl_unlogged: AtomicBool::new(false),
            config,
            cpus,
        }))
    }

    /// Where the executors run, and where every other thread should.
    pub fn cpus(&self) -> &CpuPlan {
        &self.cpus
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.current()
    }

    /// A fresh table id (views take theirs from the same space).
    pub fn allocate_table_id(&self) -> TableId {
        self.catalog.allocate_table_id()
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn registry(&self) -> &Arc<TxnRegistry> {
        &self.registry
    }

    /// Starts logging: every later commit and schema change is appended to `wal`, and
    /// versions of commits are kept until their records are durable.
    pub async fn attach_wal(&self, wal: Arc<Wal>) -> Result<()> {
        if self.wal.set(wal.clone()).is_err() {
            return Err(Error::internal("a redo log is attached already"));
        }
        self.on_all(move |p| p.txns.log = Some(wal.clone())).await?;
        Ok(())
    }

    /// After the log failed: undoes, in memory, every commit whose record did not become
    /// durable (once per failure), then tries to make the log writable again. Returns whether
    /// the log accepts records. Transactions running at that moment are rolled back; their
    /// next statement or COMMIT fails with the log's error.
    ///
    /// INVARIANT: once this returns `true`, the database in memory is exactly what recovery
    /// from the data directory would produce, plus nothing: commits are only ever acknowledged
    /// or visible as durable if their records are below the durable LSN.
    pub async fn resume_log(&self) -> Result<bool> {
        let Some(wal) = self.wal.get().cloned() else { return Ok(true) };
        if !wal.is_failed() {
            return Ok(true);
        }
        if self.ddl_unlogged.load(Ordering::Acquire) {
            return Ok(false);
        }
        self.undo_unlogged().await?;
        Ok(wal.resume())
    }

    /// Waits until a commit's record is durable. If it could not be written, the commits that
    /// did not become durable are undone before the error is returned, so that no session
    /// reads a commit after its committer was told it failed.
    pub(crate) async fn wait_durable(&self, token: Option<Durable>) -> Result<()> {
        let outcome = durable(token).await;
        if outcome.is_err()
            && let Err(e) = self.undo_unlogged().await
        {
            tracing::error!("cannot undo the commits the redo log lost: {e}");
        }
        outcome
    }

    /// Once per log failure: undoes the commits whose records did not become durable and
    /// rolls back the running transactions (see [`resume_log`](Self::resume_log)).
    async fn undo_unlogged(&self) -> Result<()> {
        let Some(wal) = self.wal.get().cloned() else { return Ok(()) };
        let _one = self.rewind_lock.lock().await;
        let failures = wal.failures();
        if self.rewound.load(Ordering::Acquire) != failures {
            // Everything queued before the failure is answered first, so no commit whose
            // record is still on its way can be stamped after the undo below.
            let _ = wal.sync().await;
            let durable = wal.durable_lsn();
            let all: Vec<usize> = (0..self.executors.len()).collect();
            let counts = self.quiesced(&all, move |p, _, _| crate::txn::rewind(p, durable)).await?;
            let (mut commits, mut aborted) = (0, 0);
            for c in counts {
                let (c, a) = c?;
                commits += c;
                aborted += a;
            }
            self.rewound.store(failures, Ordering::Release);
            tracing::warn!(
                durable_lsn = durable,
                undone_commits = commits,
                rolled_back_transactions = aborted,
                "the redo log failed: commits that did not become durable were undone in memory"
            );
        }
        Ok(())
    }

    /// Whether a schema change could not be logged (the server must restart to write again).
    pub fn needs_restart(&self) -> bool {
        self.ddl_unlogged.load(Ordering::Acquire)
    }

    pub fn wal(&self) -> Option<&Arc<Wal>> {
        self.wal.get()
    }

    pub fn partitions(&self) -> usize {
        self.executors.len()
    }

    /// Runs `f` on every partition and waits for all of them.
    async fn on_all<R, F>(&self, f: F) -> Result<Vec<R>>
    where
        R: Send + 'static,
        F: Fn(&mut Partition) -> R + Send + Sync + Clone + 'static,
    {
        let replies: Vec<_> = self.executors.iter().map(|e| e.call(f.clone())).collect();
        let mut out = Vec::with_capacity(replies.len());
        for r in replies {
            out.push(r.await?);
        }
        Ok(out)
    }

    /// Versions held and waiting for collection, summed over partitions (for tests).
    pub async fn version_counts(&self) -> Result<(usize, usize)> {
        let counts = self.on_all(|p| (p.tables_version_count(), p.txns.pending_versions())).await?;
        Ok(counts.into_iter().fold((0, 0), |(a, b), (x, y)| (a + x, b + y)))
    }

    /// The table's counters: see `replica_share`.
    pub async fn table_stats(&self, table: &Arc<TableDef>) -> Result<TableStats> {
        let id = table.id;
        let stats = self.on_all(move |p| p.table(id).map(|t| replica_share(t, p.id))).await?;
        stats.into_iter().try_fold(TableStats::default(), |acc, s| Ok(acc + s?))
    }

    /// Every table's counters, by table id: see `replica_share`.
    pub async fn all_table_stats(&self) -> Result<std::collections::HashMap<TableId, TableStats>> {
        let per = self.on_all(|p| p.tables().map(|t| (t.def().id, replica_share(t, p.id))).collect::<Vec<_>>()).await?;
        let mut out: std::collections::HashMap<TableId, TableStats> = std::collections::HashMap::new();
        for (id, s) in per.into_iter().flatten() {
            let total = out.entry(id).or_default();
            *total = *total + s;
        }
        Ok(out)
    }

    /// Scans through each index of each table since the database opened, by index position,
    /// summed over partitions (and over a replicated table's copies, as its other scans are).
    pub async fn all_index_scans(&self) -> Result<std::collections::HashMap<TableId, Vec<u64>>> {
        let per = self.on_all(|p| p.tables().map(|t| (t.def().id, t.index_scan_counts())).collect::<Vec<_>>()).await?;
        let mut out: std::collections::HashMap<TableId, Vec<u64>> = std::collections::HashMap::new();
        for (id, counts) in per.into_iter().flatten() {
            let total = out.entry(id).or_default();
            if total.len() < counts.len() {
                total.resize(counts.len(), 0);
            }
            for (t, c) in total.iter_mut().zip(counts) {
                *t += c;
            }
        }
        Ok(out)
    }

    pub async fn execute_ddl(&self, plan: DdlPlan) -> Result<DdlOutcome> {
        let _guard = self.catalog.ddl_lock.lock().await;
        let catalog = self.catalog.current();
        match plan {
            DdlPlan::CreateTable { def, if_not_exists, notices } => {
                let mut outcome = self.create_table(&catalog, def, if_not_exists).await?;
                outcome.notices.extend(notices);
                Ok(outcome)
            }
            DdlPlan::DropTables { names, if_exists, cascade } => self.drop_tables(&catalog, names, if_exists, cascade).await,
            DdlPlan::CreateView { def, or_replace } => self.create_view(&catalog, def, or_replace).await,
            DdlPlan::DropViews { names, if_exists, cascade } => self.drop_views(&catalog, names, if_exists, cascade).await,
            DdlPlan::CreateIndex { table, name, columns, unique, if_not_exists } => {
                self.create_index(&catalog, &table, name, &columns, unique, if_not_exists).await
            }
            DdlPlan::DropIndexes { names, if_exists } => self.drop_indexes(&catalog, names, if_exists).await,
            DdlPlan::AddPrimaryKey { table, columns } => self.add_primary_key(&catalog, &table, &columns).await,
            DdlPlan::AddCheck { table, name, sql } => self.add_check(&catalog, &table, name, sql).await,
            DdlPlan::Comment { table, column, text } => {
                let def = catalog.require_table(&table)?;
                if let Some(c) = &column
                    && def.column_index(c).is_none()
                {
                    return Err(Error::new(SqlState::UndefinedColumn, format!("column \"{c}\" of relation \"{table}\" does not exist")));
                }
                let mut new_def = (**def).clone();
                new_def.set_comment(column.as_deref(), text.filter(|t| !t.is_empty()));
                self.replace_def(new_def).await?;
                Ok(DdlOutcome { tag: "COMMENT", notices: vec![] })
            }
            DdlPlan::AddUnique { table, name, columns } => {
                let outcome = self.create_index(&catalog, &table, name, &columns, true, false).await?;
                Ok(DdlOutcome { tag: "ALTER TABLE", ..outcome })
            }
            DdlPlan::AddColumn { table, column, if_not_exists } => self.add_column(&catalog, &table, column, if_not_exists).await,
            DdlPlan::CreateProcedure { routine } => self.create_procedure(&catalog, routine).await,
            DdlPlan::DropProcedures { function, names, if_exists } => self.drop_procedures(&catalog, function, names, if_exists).await,
            DdlPlan::CreateSequence { def, if_not_exists } => self.create_sequence(&catalog, def, if_not_exists).await,
            DdlPlan::DropSequences { names, if_exists } => self.drop_sequences(&catalog, names, if_exists).await,
            DdlPlan::AlterColumnDefault { table, column, default } => self.alter_column_default(&catalog, &table, &column, default.as_deref()).await,
            DdlPlan::AddIdentity { table, column, always, options, name } => self.add_identity(&catalog, &table, &column, always, options, name).await,
            DdlPlan::SequenceOwnedBy { sequence, owner } => self.sequence_owned_by(&catalog, &sequence, owner).await,
            DdlPlan::Accepted { tag, notices } => Ok(DdlOutcome { tag, notices }),
            DdlPlan::AlterColumnNullable { table, column, nullable } => self.alter_column_nullable(&catalog, &table, &column, nullable).await,
            DdlPlan::RenameColumn { table, from, to } => self.rename_column(&catalog, &table, &from, &to).await,
            DdlPlan::DropColumn { table, column, if_exists } => self.drop_column(&catalog, &table, &column, if_exists).await,
            DdlPlan::AlterColumnType { table, column, ty, explicit } => self.alter_column_type(&catalog, &table, &column, ty, explicit).await,
            DdlPlan::RenameTable { table, to } => self.rename_table(&catalog, &table, &to).await,
            DdlPlan::Truncate { tables, .. } => {
                let defs = tables.iter().map(|t| catalog.require_table(t).cloned()).collect::<Result<Vec<_>>>()?;
                let ids: Vec<_> = defs.iter().map(|d| d.id).collect();
                let logged = ids.clone();
                self.ddl_step(Some(RedoRecord::Truncate(logged)), move |p| -> Result<()> {
                    for id in &ids {
                        crate::txn::truncate_table(p, *id)?;
                    }
                    Ok(())
                })
                .await?;
                Ok(DdlOutcome { tag: "TRUNCATE TABLE", notices: vec![] })
            }
        }
    }

    async fn create_table(&self, catalog: &Catalog, mut def: TableDef, if_not_exists: bool) -> Result<DdlOutcome> {
        if catalog.relation_exists(&def.name) {
            if if_not_exists {
                return Ok(DdlOutcome {
                    tag: "CREATE TABLE",
                    notices: vec![format!("relation \"{}\" already exists, skipping", def.name)],
                });
            }
            return Err(Error::new(SqlState::DuplicateTable, format!("relation \"{}\" already exists", def.name)));
        }
        for index in &def.indexes {
            if catalog.relation_exists(&index.name) || def.indexes.iter().filter(|i| i.name == index.name).count() > 1 {
                return Err(Error::new(SqlState::DuplicateTable, format!("relation \"{}\" already exists", index.name)));
            }
        }
        def.id = self.catalog.allocate_table_id();
        self.name_owned_sequences(catalog, &mut def, 0);
        let def = Arc::new(def);
        let d = def.clone();
        self.ddl_step(Some(RedoRecord::PutTable((*def).clone())), move |p| {
            p.create_table(d.clone());
            Ok(())
        })
        .await?;
        self.catalog.put_table(def);
        Ok(DdlOutcome { tag: "CREATE TABLE", notices: vec![] })
    }

    async fn drop_tables(&self, catalog: &Catalog, names: Vec<String>, if_exists: bool, cascade: bool) -> Result<DdlOutcome> {
        let mut notices = Vec::new();
        let mut doomed = Vec::new();
        for n in &names {
            match catalog.table(n) {
                Some(t) => doomed.push(t.clone()),
                None if catalog.view(n).is_some() => {
                    return Err(Error::new(SqlState::WrongObjectType, format!("\"{n}\" is not a table")).with_hint("Use DROP VIEW to remove a view."));
                }
                None if if_exists => notices.push(format!("table \"{n}\" does not exist, skipping")),
                None => return Err(Error::undefined_table(n)),
            }
        }
        let doomed_names: Vec<String> = doomed.iter().map(|t| t.name.clone()).collect();
        let views = catalog.dependent_views(&doomed_names, "table", cascade)?;
        notices.extend(views.iter().map(|v| format!("drop cascades to view {v}")));
        self.remove_views(views).await?;
        for t in &doomed {
            self.catalog.remove_table(&t.name)?;
        }
        for t in &doomed {
            let id = t.id;
            self.ddl_step(Some(RedoRecord::DropTable(id)), move |p| {
                p.drop_table(id);
                Ok(())
            })
            .await?;
        }
        Ok(DdlOutcome { tag: "DROP TABLE", notices })
    }

    /// Gives a table's new sequences (those from position `first` on) their ids, and names
    /// that are free: `<table>_<column>_seq`, or with a number added if that is taken (as
    /// PostgreSQL does), the column default following the name.
    fn name_owned_sequences(&self, catalog: &Catalog, def: &mut TableDef, first: usize) {
        let mut taken: Vec<String> = Vec::new();
        for i in first..def.sequences.len() {
            let mut seq = (*def.sequences[i]).clone();
            let base = seq.name.clone();
            let mut n = 0;
            while catalog.relation_exists(&seq.name) || taken.contains(&seq.name) || seq.name == def.name || def.indexes.iter().any(|x| x.name == seq.name) {
                n += 1;
                seq.name = format!("{base}{n}");
            }
            seq.id = self.catalog.allocate_table_id();
            for c in &mut def.columns {
                match &mut c.default {
                    Some(crate::catalog::ColumnDefault::Nextval(s) | crate::catalog::ColumnDefault::Identity { sequence: s, .. }) if *s == base => {
                        *s = seq.name.clone();
                    }
                    _ => {}
                }
            }
            taken.push(seq.name.clone());
            def.sequences[i] = Arc::new(seq);
        }
    }

    /// CREATE SEQUENCE: logged, then published. A sequence has no storage on the partitions.
    async fn create_sequence(&self, catalog: &Catalog, mut def: crate::sequence::SequenceDef, if_not_exists: bool) -> Result<DdlOutcome> {
        if catalog.relation_exists(&def.name) {
            if if_not_exists {
                return Ok(DdlOutcome { tag: "CREATE SEQUENCE", notices: vec![format!("relation \"{}\" already exists, skipping", def.name)] });
            }
            return Err(Error::new(SqlState::DuplicateTable, format!("relation \"{}\" already exists", def.name)));
        }
        def.id = self.catalog.allocate_table_id();
        self.ddl_step(Some(RedoRecord::PutSequence(def.clone())), |_| Ok(())).await?;
        self.catalog.put_sequence(Arc::new(def));
        Ok(DdlOutcome { tag: "CREATE SEQUENCE", notices: vec![] })
    }

    /// DROP SEQUENCE. A sequence a table owns goes only with its table (2BP01).
    async fn drop_sequences(&self, catalog: &Catalog, names: Vec<String>, if_exists: bool) -> Result<DdlOutcome> {
        let mut notices = Vec::new();
        let mut doomed = Vec::new();
        for n in names {
            match catalog.sequence(&n) {
                Some(s) if s.owned_by.is_some() => {
                    let (table, column) = s.owned_by.clone().unwrap_or_default();
                    return Err(Error::new(SqlState::DependentObjectsStillExist, format!("cannot drop sequence {n} because other objects depend on it"))
                        .with_detail(format!("default value for column {column} of table {table} depends on sequence {n}"))
                        .with_hint("Drop the table, or the column's default first (not supported yet)."));
                }
                Some(_) => doomed.push(n),
                None if catalog.relation_exists(&n) => return Err(Error::new(SqlState::WrongObjectType, format!("\"{n}\" is not a sequence"))),
                None if if_exists => notices.push(format!("sequence \"{n}\" does not exist, skipping")),
                None => return Err(Error::new(SqlState::UndefinedTable, format!("sequence \"{n}\" does not exist"))),
            }
        }
        for n in doomed {
            self.ddl_step(Some(RedoRecord::DropSequence(n.clone())), |_| Ok(())).await?;
            self.catalog.remove_sequence(&n);
        }
        Ok(DdlOutcome { tag: "DROP SEQUENCE", notices })
    }

    /// Queues a sequence's log-ahead record (`sequence` module); its LSN, which must be durable
    /// before a value it covers is reported used (none for an in-memory database).
    pub fn log_sequence(&self, record: crate::sequence::SequenceRecord) -> Result<Option<crate::wal::Lsn>> {
        let Some(wal) = self.wal.get() else { return Ok(None) };
        let mut bytes = Vec::new();
        crate::wal::record::encode(&RedoRecord::SequenceValue { id: record.id, last: record.last, called: record.called }, &mut bytes);
        Ok(Some(wal.append(bytes, false)?.lsn))
    }

    /// Waits until the log is durable up to and including the record at `lsn`.
    pub async fn wait_logged(&self, lsn: crate::wal::Lsn) -> Result<()> {
        let Some(wal) = self.wal.get() else { return Ok(()) };
        if wal.durable_lsn() > lsn {
            return Ok(());
        }
        wal.sync().await?.map(|_| ())
    }

    /// CREATE [OR REPLACE] PROCEDURE|FUNCTION: logged (its source text) in a DDL step, then
    /// published. The notice says how the routine is classified (HyPer §4.3).
    async fn create_procedure(&self, catalog: &Catalog, routine: Arc<crate::sql::plpgsql::Routine>) -> Result<DdlOutcome> {
        let tag = if routine.function { "CREATE FUNCTION" } else { "CREATE PROCEDURE" };
        if let Some(old) = catalog.routine(&routine.name, &routine.signature) {
            if !routine.or_replace {
                // PostgreSQL says "function" for procedures too.
                return Err(Error::new(SqlState::DuplicateFunction, format!("function \"{}\" already exists with same argument types", routine.name)));
            }
            let old = &old.routine;
            if old.function != routine.function {
                return Err(Error::new(SqlState::WrongObjectType, "cannot change routine kind")
                    .with_detail(format!("\"{}\" is a {}.", routine.name, old.kind())));
            }
            let result = |r: &crate::sql::plpgsql::Routine| (r.returns.map(|t| t.name()), r.set.as_ref().map(|s| (s.table, s.single, s.relation.clone(), s.columns.iter().map(|c| c.1.pg_name()).collect::<Vec<_>>())));
            if routine.function && result(old) != result(&routine) {
                return Err(Error::new(SqlState::InvalidFunctionDefinition, "cannot change return type of existing function")
                    .with_hint(format!("Use DROP FUNCTION {} first.", old.identity)));
            }
        }
        let notice = crate::sql::plpgsql::classify(&routine, catalog).describe(&routine);
        self.ddl_step(Some(RedoRecord::PutProcedure(routine.source.clone())), |_| Ok(())).await?;
        self.catalog.put_procedure(routine);
        Ok(DdlOutcome { tag, notices: vec![notice] })
    }

    /// DROP PROCEDURE|FUNCTION: each routine named by its name alone (which must then name
    /// one routine) or with its input parameters' types; the messages are PostgreSQL's.
    async fn drop_procedures(&self, catalog: &Catalog, function: bool, names: Vec<(String, Option<Vec<PlType>>)>, if_exists: bool) -> Result<DdlOutcome> {
        let kind = if function { "function" } else { "procedure" };
        let mut notices = Vec::new();
        let mut doomed = Vec::new();
        for (n, types) in names {
            match catalog.named_routine(function, &n, types.as_deref())? {
                Some(p) => doomed.push(p.clone()),
                None if if_exists => {
                    let shown = crate::sql::plpgsql::signature_text(&n, types.iter().flatten().map(PlType::name));
                    notices.push(format!("{kind} {shown} does not exist, skipping"));
                }
                None => return Err(Catalog::missing_routine(function, &n, types.as_deref())),
            }
        }
        for p in doomed {
            let r = &p.routine;
            self.ddl_step(Some(RedoRecord::DropProcedure(crate::sql::plpgsql::drop_key(&r.name, &r.signature))), |_| Ok(())).await?;
            self.catalog.remove_procedure(&r.name, Some(&r.signature));
        }
        Ok(DdlOutcome { tag: if function { "DROP FUNCTION" } else { "DROP PROCEDURE" }, notices })
    }

    /// CREATE [OR REPLACE] VIEW: logged, then published. A view has no storage, so its step
    /// touches no partition.
    async fn create_view(&self, catalog: &Catalog, mut def: crate::catalog::ViewDef, or_replace: bool) -> Result<DdlOutcome> {
        catalog.check_create_view(&def, or_replace)?;
        def.id = match catalog.view(&def.name) {
            Some(old) => old.id,
            None => self.catalog.allocate_table_id(),
        };
        self.ddl_step(Some(RedoRecord::PutView(def.clone())), |_| Ok(())).await?;
        self.catalog.put_view(Arc::new(def));
        Ok(DdlOutcome { tag: "CREATE VIEW", notices: vec![] })
    }

    async fn drop_views(&self, catalog: &Catalog, names: Vec<String>, if_exists: bool, cascade: bool) -> Result<DdlOutcome> {
        let (doomed, notices) = catalog.views_to_drop(&names, if_exists, cascade)?;
        self.remove_views(doomed).await?;
        Ok(DdlOutcome { tag: "DROP VIEW", notices })
    }

    /// Drops views, in the order given (dependents before what they depend on).
    async fn remove_views(&self, names: Vec<String>) -> Result<()> {
        for n in names {
            self.ddl_step(Some(RedoRecord::DropView(n.clone())), |_| Ok(())).await?;
            self.catalog.remove_view(&n);
        }
        Ok(())
    }

    /// Installs a changed definition on every partition (building or dropping indexes), then
    /// publishes it.
    async fn replace_def(&self, def: TableDef) -> Result<()> {
        self.replace_def_renamed(None, def).await
    }

    /// [`Self::replace_def`] of a table that had the name `renamed_from` (RENAME TO).
    async fn replace_def_renamed(&self, renamed_from: Option<&str>, def: TableDef) -> Result<()> {
        let def = Arc::new(def);
        let d = def.clone();
        self.ddl_step(Some(RedoRecord::PutTable((*def).clone())), move |p| p.table_mut(d.id).and_then(|t| t.set_def(d.clone()))).await?;
        self.catalog.put_table_renamed(renamed_from, def);
        Ok(())
    }

    /// A schema change's storage step: applied on every partition with all of them quiesced;
    /// if every partition succeeded, its redo record is logged in the same step (so it sits
    /// between the same commits on every partition) and made durable.
    async fn ddl_step<F>(&self, record: Option<RedoRecord>, f: F) -> Result<()>
    where
        F: Fn(&mut Partition) -> Result<()> + Send + Sync + 'static,
    {
        self.ddl_step_checked(record, f, |_| {}).await
    }

    /// [`Self::ddl_step`] in two parts: `check` runs on every partition (and may change it, as
    /// `ddl_step`'s function does); only if it succeeded on all of them does `apply` run on each.
    async fn ddl_step_checked<F, A>(&self, record: Option<RedoRecord>, f: F, apply: A) -> Result<()>
    where
        F: Fn(&mut Partition) -> Result<()> + Send + Sync + 'static,
        A: Fn(&mut Partition) + Send + Sync + 'static,
    {
        let wal = self.wal.get().cloned();
        if let Some(w) = &wal {
            w.check_writable()?;
        }
        let logs_record = record.is_some();
        let all: Vec<usize> = (0..self.executors.len()).collect();
        let (results, step) = self
            .quiesced_step(&all, move |p, step, first| {
                let r = f(p);
                step.report(r.is_ok());
                if step.decide(first, || 0).is_none() {
                    return r;
                }
                apply(p);
                step.append_once(first, || match (&wal, &record) {
                    (Some(wal), Some(record)) => {
                        let mut bytes = Vec::new();
                        crate::wal::record::encode(record, &mut bytes);
                        wal.append(bytes, true).map(Some)
                    }
                    _ => Ok(None),
                })
                .map(|_| ())
                .and(r)
            })
            .await?;
        let outcome = match results.into_iter().collect::<Result<()>>() {
            Ok(()) => self.wait_durable(step.take_durable()).await,
            Err(e) => Err(e),
        };
        if outcome.is_err() && logs_record && step.decided() {
            // The change is made in memory but its record did not reach the log: the log
            // cannot resume without losing it, so the server must restart (and recover the
            // state the log has).
            self.ddl_unlogged.store(true, Ordering::Release);
            tracing::error!("a schema change could not be logged; restart the server to continue writing");
        }
        outcome
    }

    async fn create_index(
        &self,
        catalog: &Catalog,
        table: &str,
        name: String,
        columns: &[String],
        unique: bool,
        if_not_exists: bool,
    ) -> Result<DdlOutcome> {
        let def = catalog.require_table(table)?;
        if catalog.relation_exists(&name) {
            if if_not_exists {
                return Ok(DdlOutcome {
                    tag: "CREATE INDEX",
                    notices: vec![format!("relation \"{name}\" already exists, skipping")],
                });
            }
            return Err(Error::new(SqlState::DuplicateTable, format!("relation \"{name}\" already exists")));
        }
        let positions = resolve_columns(def, columns)?;
        if unique {
            check_includes_partition_key(def, &positions)?;
        }
        let mut new_def = (**def).clone();
        new_def.indexes.push(IndexDef { name, columns: positions, unique, primary: false });
        self.replace_def(new_def).await?;
        Ok(DdlOutcome { tag: "CREATE INDEX", notices: vec![] })
    }

    async fn drop_indexes(&self, catalog: &Catalog, names: Vec<String>, if_exists: bool) -> Result<DdlOutcome> {
        let mut notices = Vec::new();
        for n in names {
            let Some((table, position)) = catalog.index_owner(&n) else {
                if if_exists {
                    notices.push(format!("index \"{n}\" does not exist, skipping"));
                    continue;
                }
                return Err(Error::new(SqlState::UndefinedObject, format!("index \"{n}\" does not exist")));
            };
            let current = self.catalog.current();
            let table = current.require_table(&table.name)?;
            if table.indexes[position].primary {
                return Err(Error::new(
                    SqlState::DependentObjectsStillExist,
                    format!("cannot drop index {n} because constraint {n} on table {} requires it", table.name),
                ));
            }
            let mut new_def = (**table).clone();
            new_def.indexes.retain(|i| i.name != n);
            self.replace_def(new_def).await?;
        }
        Ok(DdlOutcome { tag: "DROP INDEX", notices })
    }

    /// ALTER TABLE … ADD COLUMN: the column goes at the end, every existing row holding its
    /// default (a constant, or the time of the change for CURRENT_TIMESTAMP) or NULL. Refused
    /// (23502) when it is NOT NULL without a default and the table has rows: checked on every
    /// partition, with all of them quiesced, before any changes.
    async fn add_column(&self, catalog: &Catalog, table: &str, column: ColumnDef, if_not_exists: bool) -> Result<DdlOutcome> {
        let now = crate::types::datetime::now_micros();
        let def = catalog.require_table(table)?;
        if def.column_index(&column.name).is_some() {
            let message = format!("column \"{}\" of relation \"{table}\" already exists", column.name);
            if if_not_exists {
                return Ok(DdlOutcome { tag: "ALTER TABLE", notices: vec![format!("{message}, skipping")] });
            }
            return Err(Error::new(SqlState::DuplicateColumn, message));
        }
        let fill = match &column.default {
            None => Value::Null,
            Some(crate::catalog::ColumnDefault::Value(v)) => v.clone(),
            Some(crate::catalog::ColumnDefault::CurrentTimestamp) => Value::Timestamp(now).cast(column.ty)?,
            Some(crate::catalog::ColumnDefault::TimeDependent { expr, .. }) => {
                expr.eval(&crate::sql::expr::NoRow, &crate::sql::expr::EvalContext { params: &[], now, session: None })?.assign_to(column.ty)?
            }
            Some(crate::catalog::ColumnDefault::RandomUuid) => return Err(Error::unsupported("ADD COLUMN with a DEFAULT of gen_random_uuid()")),
            Some(_) => return Err(Error::unsupported("ADD COLUMN with a sequence default (serial, identity, nextval)")),
        };
        let mut fill = fill;
        column.round(&mut fill);
        let mut new_def = (**def).clone();
        new_def.columns.push(column.clone());
        crate::catalog::validate_table(&new_def)?;
        let new_def = Arc::new(new_def);
        let (id, name, d, f) = (def.id, column.name.clone(), new_def.clone(), fill.clone());
        let table_name = table.to_string();
        let empty_needed = fill.is_null() && !column.nullable;
        self.ddl_step_checked(
            Some(RedoRecord::AddColumn { table: id, column, fill }),
            move |p| {
                let t = p.table(id)?;
                if empty_needed && t.stats().live_rows > 0 {
                    return Err(Error::new(SqlState::NotNullViolation, format!("column \"{name}\" of relation \"{table_name}\" contains null values")));
                }
                Ok(())
            },
            move |p| {
                if let Ok(t) = p.table_mut(id) {
                    t.add_column(d.clone(), &f);
                }
            },
        )
        .await?;
        self.catalog.put_table(new_def);
        Ok(DdlOutcome { tag: "ALTER TABLE", notices: vec![] })
    }

    /// ALTER TABLE … ALTER COLUMN … SET DEFAULT / DROP DEFAULT: the new default applies to
    /// rows inserted from now on.
    async fn alter_column_default(&self, catalog: &Catalog, table: &str, column: &str, default: Option<&sqlparser::ast::Expr>) -> Result<DdlOutcome> {
        let def = catalog.require_table(table)?;
        let c = column_of(def, table, column)?;
        if matches!(def.columns[c].default, Some(crate::catalog::ColumnDefault::Identity { .. })) {
            // DROP DEFAULT of an identity column leaves it as it is, as in PostgreSQL.
            return match default {
                Some(_) => Err(Error::new(SqlState::SyntaxError, format!("column \"{column}\" of relation \"{table}\" is an identity column"))),
                None => Ok(DdlOutcome { tag: "ALTER TABLE", notices: vec![] }),
            };
        }
        let new_default = match default {
            Some(e) => crate::sql::ddl::column_default(e, def.columns[c].ty, column)?,
            None => None,
        };
        if let Some(crate::catalog::ColumnDefault::Nextval(s)) = &new_default
            && catalog.sequence(s).is_none()
        {
            return Err(Error::new(SqlState::UndefinedTable, format!("relation \"{s}\" does not exist")));
        }
        let mut new_def = (**def).clone();
        new_def.columns[c].default = new_default;
        self.replace_def(new_def).await?;
        Ok(DdlOutcome { tag: "ALTER TABLE", notices: vec![] })
    }

    /// ALTER TABLE … RENAME TO: the definition with the new name, logged as PutTable and
    /// published in place of the old name (recovery does the same, `restore_put_table`). Indexes and
    /// owned sequences keep their names, as in PostgreSQL. Refused (0A000) while a view reads
    /// the table.
    async fn rename_table(&self, catalog: &Catalog, table: &str, to: &str) -> Result<DdlOutcome> {
        let def = catalog.require_table(table)?;
        if catalog.relation_exists(to) {
            return Err(Error::new(SqlState::DuplicateTable, format!("relation \"{to}\" already exists")));
        }
        if let Some(v) = catalog.dependents(table).next() {
            return Err(Error::unsupported(format!("renaming \"{table}\" while view \"{}\" depends on it", v.name))
                .with_hint("Drop the view, rename the table, and create the view again."));
        }
        let mut new_def = (**def).clone();
        new_def.name = to.to_string();
        for s in &mut new_def.sequences {
            let mut owned = (**s).clone();
            if let Some((t, _)) = &mut owned.owned_by {
                *t = to.to_string();
            }
            *s = Arc::new(owned);
        }
        for k in &mut new_def.checks {
            k.sql = k.renamed_sql(Some((table, to)), None)?;
        }
        new_def.bind_checks()?;
        self.replace_def_renamed(Some(table), new_def).await?;
        Ok(DdlOutcome { tag: "ALTER TABLE", notices: vec![] })
    }

    /// ALTER TABLE … RENAME COLUMN: the definition with the new name, logged as PutTable.
    /// Indexes, defaults and the partition key name columns by position, so only a sequence
    /// the column owns is told (`owned_by`). Refused (0A000) while a view reads the table:
    /// views keep their query's text, which names the old column.
    async fn rename_column(&self, catalog: &Catalog, table: &str, from: &str, to: &str) -> Result<DdlOutcome> {
        let def = catalog.require_table(table)?;
        let c = def.column_index(from).ok_or_else(|| Error::new(SqlState::UndefinedColumn, format!("column \"{from}\" does not exist")))?;
        if def.column_index(to).is_some() {
            return Err(Error::new(SqlState::DuplicateColumn, format!("column \"{to}\" of relation \"{table}\" already exists")));
        }
        if let Some(v) = catalog.dependents(table).next() {
            return Err(Error::unsupported(format!("renaming a column of \"{table}\" while view \"{}\" depends on it", v.name))
                .with_hint("Drop the view, rename the column, and create the view again."));
        }
        let mut new_def = (**def).clone();
        new_def.columns[c].name = to.to_string();
        for (column, _) in &mut new_def.comments {
            if column.as_deref() == Some(from) {
                *column = Some(to.to_string());
            }
        }
        for k in &mut new_def.checks {
            if k.reads(c) {
                k.sql = k.renamed_sql(None, Some((from, to)))?;
            }
        }
        new_def.bind_checks()?;
        for s in &mut new_def.sequences {
            if s.owned_by.as_ref().is_some_and(|(_, column)| column == from) {
                let mut owned = (**s).clone();
                owned.owned_by = Some((table.to_string(), to.to_string()));
                *s = Arc::new(owned);
            }
        }
        self.replace_def(new_def).await?;
        Ok(DdlOutcome { tag: "ALTER TABLE", notices: vec![] })
    }

    /// ALTER TABLE … DROP COLUMN: the column's values leave every partition in one quiesced
    /// step logged as `RedoRecord::DropColumn`; indexes that include it and sequences it owns
    /// go with it, as in PostgreSQL ([`TableDef::without_column`]). Refused (0A000) for the
    /// partition key, for a table's last column, and while a view reads the table (views keep
    /// their query's text; PostgreSQL refuses with 2BP01 when the view uses the column).
    async fn drop_column(&self, catalog: &Catalog, table: &str, column: &str, if_exists: bool) -> Result<DdlOutcome> {
        let def = catalog.require_table(table)?;
        let Some(c) = def.column_index(column) else {
            let message = format!("column \"{column}\" of relation \"{table}\" does not exist");
            if if_exists {
                return Ok(DdlOutcome { tag: "ALTER TABLE", notices: vec![format!("{message}, skipping")] });
            }
            return Err(Error::new(SqlState::UndefinedColumn, message));
        };
        if def.partition_key == Some(c) {
            return Err(Error::unsupported(format!("dropping column \"{column}\", the partition key of \"{table}\"")));
        }
        if def.columns.len() == 1 {
            return Err(Error::unsupported(format!("dropping the last column of \"{table}\"")));
        }
        if let Some(v) = catalog.dependents(table).next() {
            // 0A000 rather than PostgreSQL's 2BP01: views keep their query as text, so even a
            // view that does not use the column is in the way here.
            return Err(Error::new(
                SqlState::FeatureNotSupported,
                format!("cannot drop column {column} of table {table} because view {} depends on table {table}", v.name),
            )
            .with_hint("Drop the view, drop the column, and create the view again."));
        }
        let new_def = Arc::new(def.without_column(c));
        let (id, d) = (def.id, new_def.clone());
        self.ddl_step(Some(RedoRecord::DropColumn { table: id, column: c as u32 }), move |p| {
            if let Ok(t) = p.table_mut(id) {
                t.drop_column(d.clone(), c);
            }
            Ok(())
        })
        .await?;
        self.catalog.put_table(new_def);
        Ok(DdlOutcome { tag: "ALTER TABLE", notices: vec![] })
    }

    /// ALTER TABLE … ALTER COLUMN … TYPE: every value converted (an assignment cast, or an
    /// explicit one for `USING column::type`), checked on every partition before any changes,
    /// in one quiesced step logged as `RedoRecord::AlterColumnType`; indexes on the column are
    /// rebuilt. Without USING, only types PostgreSQL converts by assignment (42804 otherwise,
    /// with its hint). Refused (0A000) for the partition key, while a view reads the table
    /// (PostgreSQL refuses when the view uses the column), and for a column whose default
    /// draws from a sequence when the new type is not an integer.
    async fn alter_column_type(&self, catalog: &Catalog, table: &str, column: &str, ty: crate::types::DataType, explicit: bool) -> Result<DdlOutcome> {
        let def = catalog.require_table(table)?;
        let c = column_of(def, table, column)?;
        let done = Ok(DdlOutcome { tag: "ALTER TABLE", notices: vec![] });
        let old = def.columns[c].ty;
        // To the same type (without a precision): nothing changes, unless a timestamp(p)
        // column loses its precision.
        if old == ty && def.columns[c].precision.is_none() {
            return done;
        }
        if !explicit && !crate::catalog::converts_without_using(old, ty) {
            return Err(Error::new(SqlState::DatatypeMismatch, format!("column \"{column}\" cannot be cast automatically to type {}", ty.pg_name()))
                .with_hint(format!("You might need to specify \"USING {column}::{}\".", ty.pg_name())));
        }
        if def.partition_key == Some(c) {
            return Err(Error::unsupported(format!("changing the type of \"{column}\", the partition key of \"{table}\"")));
        }
        if let Some(v) = catalog.dependents(table).next() {
            return Err(Error::new(SqlState::FeatureNotSupported, "cannot alter type of a column used by a view or rule")
                .with_detail(format!("view {} depends on table {table}", v.name)));
        }
        if def.columns[c].default.as_ref().is_some_and(|d| d.sequence().is_some()) && ty.family() != crate::types::TypeFamily::Integer {
            return Err(Error::unsupported(format!("changing the type of \"{column}\", whose default draws from a sequence, to {}", ty.pg_name())));
        }
        let new_def = Arc::new(def.with_column_type(c, ty, explicit)?);
        crate::catalog::validate_table(&new_def)?;
        let (id, d) = (def.id, new_def.clone());
        let registry = self.registry.clone();
        self.ddl_step_checked(
            Some(RedoRecord::AlterColumnType { table: id, column: c as u32, ty, explicit }),
            move |p| {
                // Values no transaction can see any more do not count: collect them first.
                crate::txn::collect_garbage(p, registry.oldest_needed())?;
                match p.table(id) {
                    Ok(t) => t.check_column_type(c, ty, explicit),
                    Err(_) => Ok(()),
                }
            },
            move |p| {
                if let Ok(t) = p.table_mut(id) {
                    t.alter_column_type(d.clone(), c, explicit);
                }
            },
        )
        .await?;
        self.catalog.put_table(new_def);
        done
    }

    /// ALTER TABLE … ADD CHECK: the constraint is checked against every row of every
    /// partition (23514 if one violates it) and installed in the same quiesced step, so no
    /// write slips in between; logged as PutTable.
    async fn add_check(&self, catalog: &Catalog, table: &str, name: Option<String>, sql: String) -> Result<DdlOutcome> {
        let def = catalog.require_table(table)?;
        if let Some(n) = &name
            && def.checks.iter().any(|k| &k.name == n)
        {
            return Err(Error::new(SqlState::DuplicateObject, format!("constraint \"{n}\" for relation \"{table}\" already exists")));
        }
        let mut check = crate::catalog::CheckDef::bind(name.clone().unwrap_or_default(), sql, def)?;
        if name.is_none() {
            check.name = def.check_name(&check);
        }
        let mut new_def = (**def).clone();
        new_def.checks.push(check.clone());
        let new_def = Arc::new(new_def);
        let (id, d) = (def.id, new_def.clone());
        let registry = self.registry.clone();
        self.ddl_step_checked(
            Some(RedoRecord::PutTable((*new_def).clone())),
            move |p| {
                // Rows no transaction can see any more do not count: collect them first.
                crate::txn::collect_garbage(p, registry.oldest_needed())?;
                match p.table(id) {
                    Ok(t) => t.check_rows(&check),
                    Err(_) => Ok(()),
                }
            },
            move |p| {
                if let Ok(t) = p.table_mut(id) {
                    let _ = t.set_def(d.clone());
                }
            },
        )
        .await?;
        self.catalog.put_table(new_def);
        Ok(DdlOutcome { tag: "ALTER TABLE", notices: vec![] })
    }

    /// ALTER TABLE … ALTER COLUMN … SET NOT NULL (refused with 23502 if a row holds NULL there,
    /// checked on every partition before any changes) or DROP NOT NULL (not of a primary key
    /// column, 42P16).
    async fn alter_column_nullable(&self, catalog: &Catalog, table: &str, column: &str, nullable: bool) -> Result<DdlOutcome> {
        let def = catalog.require_table(table)?;
        let c = column_of(def, table, column)?;
        let done = Ok(DdlOutcome { tag: "ALTER TABLE", notices: vec![] });
        if def.columns[c].nullable == nullable {
            return done;
        }
        if nullable && def.primary_key().is_some_and(|k| k.columns.contains(&c)) {
            return Err(Error::new(SqlState::InvalidTableDefinition, format!("column \"{column}\" is in a primary key")));
        }
        let mut new_def = (**def).clone();
        new_def.columns[c].nullable = nullable;
        let new_def = Arc::new(new_def);
        let (id, d, name, table_name) = (def.id, new_def.clone(), column.to_string(), table.to_string());
        let registry = self.registry.clone();
        self.ddl_step_checked(
            Some(RedoRecord::PutTable((*new_def).clone())),
            move |p| {
                // Deleted rows no transaction can see any more do not count: collect them first.
                crate::txn::collect_garbage(p, registry.oldest_needed())?;
                if !nullable && p.table(id)?.has_null(c) {
                    return Err(Error::new(SqlState::NotNullViolation, format!("column \"{name}\" of relation \"{table_name}\" contains null values")));
                }
                Ok(())
            },
            move |p| {
                if let Ok(t) = p.table_mut(id) {
                    let _ = if nullable { t.set_def(d.clone()) } else { t.set_not_null(d.clone(), c) };
                }
            },
        )
        .await?;
        self.catalog.put_table(new_def);
        done
    }

    /// ALTER TABLE … ALTER COLUMN … ADD GENERATED … AS IDENTITY: a new sequence the table
    /// owns gives the column its values.
    async fn add_identity(
        &self,
        catalog: &Catalog,
        table: &str,
        column: &str,
        always: bool,
        mut options: crate::sequence::SequenceOptions,
        name: Option<String>,
    ) -> Result<DdlOutcome> {
        let def = catalog.require_table(table)?;
        let c = column_of(def, table, column)?;
        let col = &def.columns[c];
        if !matches!(col.ty, crate::types::DataType::Int16 | crate::types::DataType::Int32 | crate::types::DataType::Int64) {
            return Err(Error::new(SqlState::InvalidParameterValue, "identity column type must be smallint, integer, or bigint"));
        }
        if col.nullable {
            return Err(Error::new(
                SqlState::ObjectNotInPrerequisiteState,
                format!("column \"{column}\" of relation \"{table}\" must be declared NOT NULL before identity can be added"),
            ));
        }
        match &col.default {
            Some(crate::catalog::ColumnDefault::Identity { .. }) => {
                return Err(Error::new(SqlState::ObjectNotInPrerequisiteState, format!("column \"{column}\" of relation \"{table}\" is already an identity column")));
            }
            Some(_) => {
                return Err(Error::new(SqlState::ObjectNotInPrerequisiteState, format!("column \"{column}\" of relation \"{table}\" already has a default value")));
            }
            None => {}
        }
        if let Some(n) = &name
            && catalog.relation_exists(n)
        {
            return Err(Error::new(SqlState::DuplicateTable, format!("relation \"{n}\" already exists")));
        }
        options.ty = Some(col.ty);
        let seq = crate::sequence::SequenceDef::new(name.unwrap_or_else(|| format!("{table}_{column}_seq")), &options, Some((table.to_string(), column.to_string())))?;
        let mut new_def = (**def).clone();
        new_def.columns[c].default = Some(crate::catalog::ColumnDefault::Identity { sequence: seq.name.clone(), always });
        let first_new = new_def.sequences.len();
        new_def.sequences.push(Arc::new(seq));
        self.name_owned_sequences(catalog, &mut new_def, first_new);
        self.replace_def(new_def).await?;
        Ok(DdlOutcome { tag: "ALTER TABLE", notices: vec![] })
    }

    /// ALTER SEQUENCE … OWNED BY table.column: a sequence of its own moves into the table,
    /// keeping its counter (it is then dropped with the table). OWNED BY NONE of a sequence
    /// of its own changes nothing.
    async fn sequence_owned_by(&self, catalog: &Catalog, name: &str, owner: Option<(String, String)>) -> Result<DdlOutcome> {
        let seq = catalog.sequence(name).ok_or_else(|| Error::new(SqlState::UndefinedTable, format!("relation \"{name}\" does not exist")))?;
        let done = Ok(DdlOutcome { tag: "ALTER SEQUENCE", notices: vec![] });
        match (&seq.owned_by, owner) {
            (None, None) => done,
            (Some(now), Some(wanted)) if *now == wanted => done,
            (Some(_), _) => Err(Error::unsupported("changing the owner of a sequence a column owns (serial or identity)")),
            (None, Some((table, column))) => {
                let def = catalog.require_table(&table)?;
                column_of(def, &table, &column)?;
                let mut owned = (**seq).clone();
                owned.owned_by = Some((table, column));
                let mut new_def = (**def).clone();
                new_def.sequences.push(Arc::new(owned));
                self.replace_def(new_def).await?;
                done
            }
        }
    }

    async fn add_primary_key(&self, catalog: &Catalog, table: &str, columns: &[String]) -> Result<DdlOutcome> {
        let def = catalog.require_table(table)?;
        if def.primary_key().is_some() {
            return Err(Error::new(
                SqlState::InvalidTableDefinition,
                format!("multiple primary keys for table \"{table}\" are not allowed"),
            ));
        }
        let name = format!("{table}_pkey");
        if catalog.relation_exists(&name) {
            return Err(Error::new(SqlState::DuplicateTable, format!("relation \"{name}\" already exists")));
        }
        let positions = resolve_columns(def, columns)?;
        check_includes_partition_key(def, &positions)?;
        let mut new_def = (**def).clone();
        for &p in &positions {
            new_def.columns[p].nullable = false;
        }
        new_def.indexes.insert(0, IndexDef { name, columns: positions, unique: true, primary: true });
        self.replace_def(new_def).await?;
        Ok(DdlOutcome { tag: "ALTER TABLE", notices: vec![] })
    }
}

/// The position of `table`'s column `column` (42703 if it has none).
fn column_of(def: &TableDef, table: &str, column: &str) -> Result<usize> {
    def.column_index(column).ok_or_else(|| Error::new(SqlState::UndefinedColumn, format!("column \"{column}\" of relation \"{table}\" does not exist")))
}

/// Appends a committed transaction's row changes to the log (if there is one); with `sync`,
/// returns the token that resolves once the record is durable.
pub(crate) fn log_commit(wal: Option<&Arc<Wal>>, ts: Ts, mut changes: Vec<RowChange>, sync: bool) -> Result<Option<Logged>> {
    use crate::wal::record::{encode, CHANGES_PER_RECORD};
    let Some(wal) = wal else { return Ok(None) };
    if changes.is_empty() {
        return Ok(None);
    }
    // A large transaction: its first changes go ahead as parts; the commit record, last,
    // decides (its LSN is the transaction's).
    while changes.len() > CHANGES_PER_RECORD {
        let rest = changes.split_off(CHANGES_PER_RECORD);
        let mut bytes = Vec::new();
        encode(&RedoRecord::Part { ts, changes: std::mem::replace(&mut changes, rest) }, &mut bytes);
        wal.append(bytes, false)?;
    }
    let mut bytes = Vec::new();
    encode(&RedoRecord::Commit { ts, changes }, &mut bytes);
    wal.append(bytes, sync).map(Some)
}

/// What one partition's copy adds to a table's counters. A partitioned table's are summed over
/// its partitions. A replicated table has a copy on each partition with every write applied to
/// each, so its row counts are those of one copy (partition 0's), while the work each copy did on
/// its own (scans, segments copied for snapshots) is summed.
fn replica_share(table: &crate::storage::TableStore, partition: usize) -> TableStats {
    let s = table.stats();
    if table.def().partition_key.is_some() || partition == 0 {
        return s;
    }
    TableStats { seq_scans: s.seq_scans, index_scans: s.index_scans, segments_copied: s.segments_copied, ..TableStats::default() }
}

/// Waits until a commit is durable.
pub(crate) async fn durable(token: Option<Durable>) -> Result<()> {
    match token {
        Some(t) => t.await?.map(|_| ()),
        None => Ok(()),
    }
}
