//! The engine: the catalog plus the partition executors, and the operations that span them.
//!
//! Everything that changes data runs as a job on the executor of the partition that owns it:
//! one job per statement, which applies the statement and its undo log atomically with
//! respect to every other job. DDL is serialised by the catalog's DDL lock: storage changes
//! go to every partition first, then the new catalog version is published.
//!
//! Placement: this version runs every table in partition 0 (one executor). The data
//! structures and the snapshot protocol are written for several partitions; routing rows by a
//! partition key arrives with partitioned tables.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::catalog::{Catalog, CatalogStore, IndexDef, TableDef};
use crate::error::{Error, Result, SqlState};
use crate::executor::{reply_channel, Executor, Partition, ReplySender};
use crate::sql::ddl::{resolve_columns, DdlPlan};
use crate::sql::exec::{self, SelectOutcome};
use crate::sql::expr::EvalContext;
use crate::sql::plan::OltpPlan;
use crate::storage::{TableSnapshot, TableStats, Ts, TxnView};
use crate::txn::{self, Isolation, LocalTxn, ReadPredicate, TxnRegistry};
use crate::types::Value;

#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Rows an index-driven SELECT may examine on an executor before it is handed to the
    /// analytical side instead.
    pub short_select_budget: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { short_select_budget: 10_000 }
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
        TxnView { id: self.id, start: self.start }
    }
}

pub struct Engine {
    catalog: CatalogStore,
    executors: Vec<Executor>,
    registry: Arc<TxnRegistry>,
    waits: Arc<Waits>,
    config: EngineConfig,
}

/// Who waits for whom: running transactions that others may wait for, the waiters to wake
/// when one ends, and the wait-for edges used to detect deadlocks.
#[derive(Default)]
struct WaitState {
    running: HashSet<Ts>,
    waiters: HashMap<Ts, Vec<ReplySender<()>>>,
    waits_for: HashMap<Ts, Ts>,
}

#[derive(Default)]
struct Waits {
    state: Mutex<WaitState>,
}

impl Waits {
    fn ended(&self, id: Ts) {
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

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("partitions", &self.executors.len()).field("config", &self.config).finish()
    }
}

impl Engine {
    pub fn start(config: EngineConfig) -> Result<Arc<Engine>> {
        let executor = Executor::spawn(0).map_err(|e| Error::internal(format!("cannot start executor: {e}")))?;
        Ok(Arc::new(Engine {
            catalog: CatalogStore::new(),
            executors: vec![executor],
            registry: Arc::new(TxnRegistry::default()),
            waits: Arc::new(Waits::default()),
            config,
        }))
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.current()
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn registry(&self) -> &Arc<TxnRegistry> {
        &self.registry
    }

    pub fn partitions(&self) -> usize {
        self.executors.len()
    }

    fn executor_for(&self, _table: &TableDef) -> &Executor {
        &self.executors[0]
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

    /// Inserts rows that already have the table's column types: as one autocommit statement,
    /// or as a statement of `txn`.
    pub async fn insert_rows(&self, table: &Arc<TableDef>, rows: Vec<Vec<Value>>, txn: Option<TxnCtx>) -> Result<u64> {
        let id = table.id;
        let registry = self.registry.clone();
        self.executor_for(table)
            .call(move |p| with_txn(p, txn, &registry, |p, local| exec::insert_rows(p.table_mut(id)?, &rows, local)))
            .await?
    }

    /// Runs a short statement with its parameters, in `txn` or as an autocommit statement.
    pub async fn run(&self, plan: Arc<OltpPlan>, params: Vec<Value>, now: i64, txn: Option<TxnCtx>) -> Result<OltpResult> {
        let budget = self.config.short_select_budget;
        let registry = self.registry.clone();
        let params: Arc<[Value]> = params.into();
        self.executor_for(plan.table())
            .call(move |p| with_txn(p, txn, &registry, |p, local| run_on_partition(p, local, &plan, &params, now, budget)))
            .await?
    }

    /// A transaction-consistent snapshot of `tables`, taken by one job between statements.
    /// With a view, the snapshot shows what that transaction sees; without one, everything
    /// committed. Uncommitted changes of running transactions are reverted in the snapshot.
    pub async fn snapshot(&self, tables: &[Arc<TableDef>], view: Option<TxnView>) -> Result<Vec<TableSnapshot>> {
        let defs: Vec<_> = tables.to_vec();
        let view = view.unwrap_or_else(TxnView::committed);
        self.executors[0]
            .call(move |p| -> Result<Vec<TableSnapshot>> {
                defs.iter()
                    .map(|def| {
                        let store = p.table(def.id)?;
                        if !Arc::ptr_eq(store.def(), def) && store.def().as_ref() != def.as_ref() {
                            return Err(Error::new(SqlState::UndefinedTable, format!("relation \"{}\" changed during the query", def.name)));
                        }
                        Ok(store.snapshot_for(&view))
                    })
                    .collect()
            })
            .await?
    }

    /// Records that a SERIALIZABLE transaction read whole tables (an analytical query).
    pub async fn record_table_reads(&self, txn: TxnCtx, tables: &[Arc<TableDef>]) -> Result<()> {
        if txn.isolation != Isolation::Serializable || tables.is_empty() {
            return Ok(());
        }
        let ids: Vec<_> = tables.iter().map(|t| t.id).collect();
        let registry = self.registry.clone();
        self.executors[0]
            .call(move |p| {
                with_txn(p, Some(txn), &registry, |_, local| {
                    local.reads.extend(ids.iter().map(|id| ReadPredicate::Table(*id)));
                    Ok(())
                })
            })
            .await?
    }

    /// Records that an interactive transaction runs (others may wait for it to end).
    pub fn txn_began(&self, id: Ts) {
        self.waits.state.lock().running.insert(id);
    }

    /// Waits until transaction `holder` has ended. `waiter` is the waiting transaction (if it
    /// is an interactive one that holds changes): if `holder` waits, directly or not, for
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

    /// Commits an interactive transaction: validates its reads (SERIALIZABLE), stamps its
    /// versions with one commit timestamp. On a validation failure it is rolled back (40001).
    pub async fn commit(&self, txn: TxnCtx) -> Result<()> {
        let registry = self.registry.clone();
        let waits = self.waits.clone();
        let result = self.executors[0]
            .call(move |p| -> Result<()> {
                let Some(mut local) = p.txns.local.remove(&txn.id) else { return Ok(()) };
                if let Err(e) = txn::validate(p, &local) {
                    txn::rollback_versions(p, &mut local.versions, 0)?;
                    return Err(e);
                }
                if local.versions.is_empty() {
                    return Ok(());
                }
                let ts = registry.next_commit_ts();
                txn::commit(p, local, ts, &registry)
            })
            .await;
        waits.ended(txn.id);
        result?
    }

    /// Rolls an interactive transaction back.
    pub async fn rollback(&self, id: Ts) -> Result<()> {
        let registry = self.registry.clone();
        let result = self.executors[0]
            .call(move |p| -> Result<()> {
                txn::rollback(p, id)?;
                txn::collect_garbage(p, registry.oldest_needed())
            })
            .await;
        self.waits.ended(id);
        result?
    }

    /// Ends a registered snapshot. When it was the oldest, versions only it needed are
    /// collected (in the background, by each executor).
    pub fn release_snapshot(&self, start: Ts) {
        if self.registry.end_snapshot(start) {
            for e in &self.executors {
                let registry = self.registry.clone();
                e.submit(Box::new(move |p: &mut Partition| {
                    if let Err(e) = txn::collect_garbage(p, registry.oldest_needed()) {
                        tracing::error!("garbage collection failed: {e}");
                    }
                }));
            }
        }
    }

    /// Rolls a transaction back without waiting (for sessions that end abruptly).
    pub fn rollback_detached(&self, id: Ts) {
        let registry = self.registry.clone();
        let waits = self.waits.clone();
        self.executors[0].submit(Box::new(move |p: &mut Partition| {
            if let Err(e) = txn::rollback(p, id).and_then(|_| txn::collect_garbage(p, registry.oldest_needed())) {
                tracing::error!("rollback of an abandoned transaction failed: {e}");
            }
            waits.ended(id);
        }));
    }

    /// A savepoint: how many versions the transaction has made so far.
    pub async fn savepoint(&self, id: Ts) -> Result<usize> {
        self.executors[0].call(move |p| p.txns.local.get(&id).map_or(0, |t| t.versions.len())).await
    }

    /// Undoes what the transaction did after a savepoint.
    pub async fn rollback_to(&self, id: Ts, mark: usize) -> Result<()> {
        self.executors[0]
            .call(move |p| -> Result<()> {
                let Some(mut local) = p.txns.local.remove(&id) else { return Ok(()) };
                let result = txn::rollback_versions(p, &mut local.versions, mark);
                p.txns.local.insert(id, local);
                result
            })
            .await?
    }

    /// Versions held and waiting for collection, summed over partitions (for tests).
    pub async fn version_counts(&self) -> Result<(usize, usize)> {
        let counts = self.on_all(|p| (p.tables_version_count(), p.txns.pending_versions())).await?;
        Ok(counts.into_iter().fold((0, 0), |(a, b), (x, y)| (a + x, b + y)))
    }

    pub async fn table_stats(&self, table: &Arc<TableDef>) -> Result<TableStats> {
        let id = table.id;
        self.executor_for(table).call(move |p| p.table(id).map(|t| t.stats())).await?
    }

    pub async fn execute_ddl(&self, plan: DdlPlan) -> Result<DdlOutcome> {
        let _guard = self.catalog.ddl_lock.lock().await;
        let catalog = self.catalog.current();
        match plan {
            DdlPlan::CreateTable { def, if_not_exists } => self.create_table(&catalog, def, if_not_exists).await,
            DdlPlan::DropTables { names, if_exists } => self.drop_tables(&catalog, names, if_exists).await,
            DdlPlan::CreateIndex { table, name, columns, unique, if_not_exists } => {
                self.create_index(&catalog, &table, name, &columns, unique, if_not_exists).await
            }
            DdlPlan::DropIndexes { names, if_exists } => self.drop_indexes(&catalog, names, if_exists).await,
            DdlPlan::AddPrimaryKey { table, columns } => self.add_primary_key(&catalog, &table, &columns).await,
            DdlPlan::Truncate { tables } => {
                let defs = tables.iter().map(|t| catalog.require_table(t).cloned()).collect::<Result<Vec<_>>>()?;
                let ids: Vec<_> = defs.iter().map(|d| d.id).collect();
                self.on_all(move |p| -> Result<()> {
                    for id in &ids {
                        p.table_mut(*id)?.truncate();
                    }
                    Ok(())
                })
                .await?
                .into_iter()
                .collect::<Result<()>>()?;
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
        let def = Arc::new(def);
        let d = def.clone();
        self.on_all(move |p| p.create_table(d.clone())).await?;
        self.catalog.put_table(def);
        Ok(DdlOutcome { tag: "CREATE TABLE", notices: vec![] })
    }

    async fn drop_tables(&self, catalog: &Catalog, names: Vec<String>, if_exists: bool) -> Result<DdlOutcome> {
        let mut notices = Vec::new();
        let mut doomed = Vec::new();
        for n in &names {
            match catalog.table(n) {
                Some(t) => doomed.push(t.clone()),
                None if if_exists => notices.push(format!("table \"{n}\" does not exist, skipping")),
                None => return Err(Error::undefined_table(n)),
            }
        }
        for t in &doomed {
            self.catalog.remove_table(&t.name)?;
        }
        let ids: Vec<_> = doomed.iter().map(|t| t.id).collect();
        self.on_all(move |p| ids.iter().for_each(|id| drop(p.drop_table(*id)))).await?;
        Ok(DdlOutcome { tag: "DROP TABLE", notices })
    }

    /// Installs a changed definition on every partition (building or dropping indexes), then
    /// publishes it.
    async fn replace_def(&self, def: TableDef) -> Result<()> {
        let def = Arc::new(def);
        let d = def.clone();
        let results = self.on_all(move |p| p.table_mut(d.id).and_then(|t| t.set_def(d.clone()))).await?;
        results.into_iter().collect::<Result<()>>()?;
        self.catalog.put_table(def);
        Ok(())
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
        let mut new_def = (**def).clone();
        for &p in &positions {
            new_def.columns[p].nullable = false;
        }
        new_def.indexes.insert(0, IndexDef { name, columns: positions, unique: true, primary: true });
        self.replace_def(new_def).await?;
        Ok(DdlOutcome { tag: "ALTER TABLE", notices: vec![] })
    }
}

/// Runs `f` as a statement of `txn` on this partition, or as an autocommit statement: then
/// it commits at once if it succeeds and rolls back if it fails, all within this one job.
fn with_txn<R>(
    p: &mut Partition,
    txn: Option<TxnCtx>,
    registry: &TxnRegistry,
    f: impl FnOnce(&mut Partition, &mut LocalTxn) -> Result<R>,
) -> Result<R> {
    match txn {
        None => {
            let view = TxnView { id: registry.new_txn_id(), start: registry.now() };
            let mut local = LocalTxn::new(view, Isolation::RepeatableRead);
            match f(p, &mut local) {
                Ok(r) => {
                    if !local.versions.is_empty() {
                        let ts = registry.next_commit_ts();
                        txn::commit(p, local, ts, registry)?;
                    }
                    Ok(r)
                }
                Err(e) => {
                    txn::rollback_versions(p, &mut local.versions, 0)?;
                    Err(e)
                }
            }
        }
        Some(ctx) => {
            let mut local = p.txns.local.remove(&ctx.id).unwrap_or_else(|| {
                let mut local = LocalTxn::new(ctx.view(), ctx.isolation);
                // Interactive SERIALIZABLE transactions are counted from their first statement.
                local.registered = ctx.isolation == Isolation::Serializable;
                local
            });
            local.view.start = ctx.start;
            let mark = local.versions.len();
            let mut result = f(p, &mut local);
            // A statement that must wait for another transaction undoes its partial work, so
            // that it can run again from the start once that transaction has ended.
            if let Err(e) = &result
                && e.blocked_by.is_some()
                && let Err(undo) = txn::rollback_versions(p, &mut local.versions, mark)
            {
                result = Err(undo);
            }
            p.txns.local.insert(ctx.id, local);
            result
        }
    }
}

fn run_on_partition(
    p: &mut Partition,
    local: &mut LocalTxn,
    plan: &Arc<OltpPlan>,
    params: &Arc<[Value]>,
    now: i64,
    budget: usize,
) -> Result<OltpResult> {
    let cx = EvalContext { params, now };
    let id = plan.table().id;
    if local.records_reads() {
        local.reads.push(ReadPredicate::Filter { table: id, plan: plan.clone(), params: params.clone() });
    }
    match plan.as_ref() {
        OltpPlan::Select(s) => match exec::run_select(p.table(id)?, s, &local.view, &cx, budget)? {
            SelectOutcome::Rows(rows, ids) => {
                if s.lock {
                    let table = p.table_mut(id)?;
                    for row in ids {
                        if let Some(v) = table.lock(row, &local.view)? {
                            local.versions.push((id, v));
                        }
                    }
                }
                Ok(OltpResult::Rows(rows))
            }
            SelectOutcome::TooLarge if s.lock => {
                Err(Error::unsupported(format!("FOR UPDATE over more than {budget} rows")))
            }
            SelectOutcome::TooLarge => Ok(OltpResult::TooLarge),
        },
        OltpPlan::Update(u) => exec::run_update(p.table_mut(id)?, u, &cx, local).map(OltpResult::Count),
        OltpPlan::Delete(d) => exec::run_delete(p.table_mut(id)?, d, &cx, local).map(OltpResult::Count),
    }
}
