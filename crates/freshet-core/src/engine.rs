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

use std::sync::Arc;

use crate::catalog::{Catalog, CatalogStore, IndexDef, TableDef};
use crate::error::{Error, Result, SqlState};
use crate::executor::{Executor, Partition};
use crate::sql::ddl::{resolve_columns, DdlPlan};
use crate::sql::exec::{self, SelectOutcome};
use crate::sql::expr::EvalContext;
use crate::sql::plan::OltpPlan;
use crate::storage::{RowId, TableSnapshot, TableStats};
use crate::txn::{UndoEntry, UndoLog};
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

pub struct Engine {
    catalog: CatalogStore,
    executors: Vec<Executor>,
    config: EngineConfig,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("partitions", &self.executors.len()).field("config", &self.config).finish()
    }
}

impl Engine {
    pub fn start(config: EngineConfig) -> Result<Arc<Engine>> {
        let executor = Executor::spawn(0).map_err(|e| Error::internal(format!("cannot start executor: {e}")))?;
        Ok(Arc::new(Engine { catalog: CatalogStore::new(), executors: vec![executor], config }))
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.current()
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
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

    /// Inserts rows that already have the table's column types, atomically.
    pub async fn insert_rows(&self, table: &Arc<TableDef>, rows: Vec<Vec<Value>>) -> Result<u64> {
        let id = table.id;
        self.executor_for(table)
            .call(move |p| -> Result<u64> {
                let mut undo = UndoLog::new();
                let result = p.table_mut(id).and_then(|t| exec::insert_rows(t, &rows, &mut undo));
                finish(p, undo, result)
            })
            .await?
    }

    /// Inserts rows atomically and returns their row ids (for a multi-batch load that may
    /// have to take them back, see [`remove_inserted`](Self::remove_inserted)).
    pub async fn insert_rows_returning_ids(&self, table: &Arc<TableDef>, rows: Vec<Vec<Value>>) -> Result<Vec<RowId>> {
        let id = table.id;
        self.executor_for(table)
            .call(move |p| -> Result<Vec<RowId>> {
                let mut undo = UndoLog::new();
                let mut ids = Vec::with_capacity(rows.len());
                let result = p.table_mut(id).and_then(|t| {
                    for row in &rows {
                        let rid = t.insert(row)?;
                        undo.push(UndoEntry::Inserted { table: id, row: rid });
                        ids.push(rid);
                    }
                    Ok(())
                });
                finish(p, undo, result).map(|()| ids)
            })
            .await?
    }

    /// Removes rows this caller inserted earlier (the undo of a multi-batch load).
    pub async fn remove_inserted(&self, table: &Arc<TableDef>, rows: Vec<RowId>) -> Result<()> {
        let id = table.id;
        self.executor_for(table)
            .call(move |p| -> Result<()> {
                let t = p.table_mut(id)?;
                for row in rows.into_iter().rev() {
                    t.remove_inserted(row);
                }
                Ok(())
            })
            .await?
    }

    /// Runs a short statement with its parameters.
    pub async fn run(&self, plan: Arc<OltpPlan>, params: Vec<Value>, now: i64) -> Result<OltpResult> {
        let budget = self.config.short_select_budget;
        self.executor_for(plan.table())
            .call(move |p| run_on_partition(p, &plan, &params, now, budget))
            .await?
    }

    /// A transaction-consistent snapshot of `tables`: taken by one job, between statements.
    pub async fn snapshot(&self, tables: &[Arc<TableDef>]) -> Result<Vec<TableSnapshot>> {
        let ids: Vec<_> = tables.iter().map(|t| t.id).collect();
        let defs: Vec<_> = tables.to_vec();
        self.executors[0]
            .call(move |p| -> Result<Vec<TableSnapshot>> {
                ids.iter()
                    .zip(&defs)
                    .map(|(id, def)| {
                        let store = p.table(*id)?;
                        if !Arc::ptr_eq(store.def(), def) && store.def().as_ref() != def.as_ref() {
                            return Err(Error::new(SqlState::UndefinedTable, format!("relation \"{}\" changed during the query", def.name)));
                        }
                        Ok(store.snapshot_table())
                    })
                    .collect()
            })
            .await?
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

/// Ends a statement's job: commit the undo log on success, roll it back on error.
fn finish<T>(p: &mut Partition, undo: UndoLog, result: Result<T>) -> Result<T> {
    match result {
        Ok(v) => {
            undo.commit(p)?;
            Ok(v)
        }
        Err(e) => {
            undo.rollback(p)?;
            Err(e)
        }
    }
}

fn run_on_partition(p: &mut Partition, plan: &OltpPlan, params: &[Value], now: i64, budget: usize) -> Result<OltpResult> {
    let cx = EvalContext { params, now };
    let id = plan.table().id;
    match plan {
        OltpPlan::Select(s) => Ok(match exec::run_select(p.table(id)?, s, &cx, budget)? {
            SelectOutcome::Rows(rows) => OltpResult::Rows(rows),
            SelectOutcome::TooLarge => OltpResult::TooLarge,
        }),
        OltpPlan::Update(u) => {
            let mut undo = UndoLog::new();
            let result = p.table_mut(id).and_then(|t| exec::run_update(t, u, &cx, &mut undo));
            finish(p, undo, result).map(OltpResult::Count)
        }
        OltpPlan::Delete(d) => {
            let mut undo = UndoLog::new();
            let result = p.table_mut(id).and_then(|t| exec::run_delete(t, d, &cx, &mut undo));
            finish(p, undo, result).map(OltpResult::Count)
        }
    }
}
