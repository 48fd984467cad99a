//! DataFusion's view of Freshet's tables.
//!
//! [`FreshetSchema`] resolves table names against the live catalog at planning time and hands
//! out a [`SnapshotTable`] per table. A `SnapshotTable` holds no data: when DataFusion scans
//! it, it reads the query's [`DbSnapshot`] from the session configuration (put there by
//! [`crate::OlapEngine::execute`]) and wraps that snapshot's chunks as Arrow batches. So one
//! logical plan can run many times, each time over the snapshot of that execution.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use datafusion::arrow::record_batch::RecordBatch;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use freshet_core::catalog::TableDef;
use freshet_core::engine::Engine;
use freshet_core::storage::DbSnapshot;

use crate::prune::{range_test, RangeTest};
use crate::scan::chunk_batch;
use crate::types::table_schema;

/// A table as DataFusion sees it.
#[derive(Debug)]
pub struct SnapshotTable {
    pub def: Arc<TableDef>,
    schema: SchemaRef,
}

impl SnapshotTable {
    pub fn new(def: Arc<TableDef>) -> Self {
        let schema = table_schema(&def);
        SnapshotTable { def, schema }
    }
}

#[async_trait]
impl TableProvider for SnapshotTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// Range filters on integer, date and timestamp columns let the scan skip whole chunks
    /// ([`crate::prune`]); DataFusion still applies every filter to the rows that remain.
    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match range_test(f, &self.schema) {
                Some(_) => TableProviderFilterPushDown::Inexact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let tests: Vec<RangeTest> = filters.iter().filter_map(|f| range_test(f, &self.schema)).collect();
        let snapshot = state
            .config()
            .get_extension::<DbSnapshot>()
            .ok_or_else(|| DataFusionError::Internal("no snapshot for this query".into()))?;
        let table = snapshot.tables.get(&self.def.id).ok_or_else(|| {
            DataFusionError::Internal(format!("the snapshot lacks table \"{}\"", self.def.name))
        })?;
        let projection: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let projected = Arc::new(self.schema.project(&projection)?);
        let types = table.def.types();
        let partitions = state.config().target_partitions().max(1);
        let mut parts: Vec<Vec<_>> = vec![Vec::new(); partitions];
        let mut next = 0;
        // Chunks whose value ranges rule out a pushed-down filter hold no row that passes it.
        for chunk in table.chunks.iter().filter(|c| c.live > 0 && tests.iter().all(|t| t.may_match(c))) {
            parts[next].push(chunk_batch(chunk, &types, &projection, projected.clone())?);
            next = (next + 1) % partitions;
        }
        parts.retain(|p| !p.is_empty());
        if parts.is_empty() {
            parts.push(Vec::new());
        }
        Ok(MemorySourceConfig::try_new_exec(&parts, projected, None)?)
    }
}

/// A table computed when a query scans it: a system view such as `freshet_snapshots`.
pub trait SystemTable: Send + Sync + std::fmt::Debug {
    fn schema(&self) -> SchemaRef;
    fn batch(&self) -> Result<RecordBatch>;
    /// Whether the table never has rows (a catalog relation of a feature Freshet lacks).
    fn always_empty(&self) -> bool {
        false
    }
}

#[derive(Debug)]
struct SystemProvider(Arc<dyn SystemTable>);

#[async_trait]
impl TableProvider for SystemProvider {
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(&self, _state: &dyn Session, projection: Option<&Vec<usize>>, _filters: &[Expr], _limit: Option<usize>) -> Result<Arc<dyn ExecutionPlan>> {
        let batch = self.0.batch()?;
        Ok(MemorySourceConfig::try_new_exec(&[vec![batch]], self.0.schema(), projection.cloned())?)
    }
}

type SystemTables = Arc<RwLock<HashMap<String, Arc<dyn SystemTable>>>>;

/// The `public` schema: the user tables of the current catalog version, the system views,
/// and (unqualified) the `pg_catalog` relations. A user table of the same name hides a view
/// or a catalog relation.
#[derive(Debug)]
pub struct FreshetSchema {
    engine: Arc<Engine>,
    system: RwLock<HashMap<String, Arc<dyn SystemTable>>>,
    catalog: SystemTables,
}

impl FreshetSchema {
    pub fn new(engine: Arc<Engine>) -> Self {
        FreshetSchema { engine, system: RwLock::new(HashMap::new()), catalog: SystemTables::default() }
    }

    /// The version of the live catalog (it changes with every DDL statement).
    pub fn catalog_version(&self) -> u64 {
        self.engine.catalog().version
    }

    /// What join ordering knows of the user table `name` (folded): its columns and live rows.
    pub async fn table_info(&self, name: &str) -> Option<crate::join_order::TableInfo> {
        let def = self.engine.catalog().table(name)?.clone();
        let stats = self.engine.table_stats(&def).await.ok()?;
        let columns = def.columns.iter().map(|c| c.name.clone()).collect();
        let keys = def.indexes.iter().filter(|i| i.unique).map(|i| i.columns.iter().map(|&c| def.columns[c].name.clone()).collect()).collect();
        Some(crate::join_order::TableInfo { columns, rows: stats.live_rows as f64, keys })
    }

    pub fn register_system_table(&self, name: &str, table: Arc<dyn SystemTable>) {
        self.system.write().insert(name.to_string(), table);
    }

    /// Adds a relation of the `pg_catalog` schema.
    pub fn register_catalog_table(&self, name: &str, table: Arc<dyn SystemTable>) {
        self.catalog.write().insert(name.to_string(), table);
    }

    /// The `pg_catalog` schema, sharing this schema's catalog relations.
    pub fn pg_catalog(&self) -> PgCatalogSchema {
        PgCatalogSchema(self.catalog.clone())
    }

    /// The catalog relation `name` (folded; `pg_catalog.x`, or an unqualified `x` that no
    /// user table hides) refers to, if any.
    pub fn catalog_relation(&self, schema: Option<&str>, name: &str) -> Option<Arc<dyn SystemTable>> {
        match schema {
            Some("pg_catalog") => self.catalog.read().get(name).cloned(),
            Some(_) => None,
            None if self.engine.catalog().table(name).is_some() => None,
            None => self.catalog.read().get(name).cloned(),
        }
    }

    fn system_table(&self, name: &str) -> Option<Arc<dyn SystemTable>> {
        self.system.read().get(name).or(self.catalog.read().get(name)).cloned()
    }
}

impl crate::rewrite::CatalogNames for FreshetSchema {
    fn is_catalog(&self, name: &sqlparser::ast::ObjectName) -> bool {
        self.relation_of(name).is_some()
    }

    fn is_always_empty(&self, name: &sqlparser::ast::ObjectName) -> bool {
        self.relation_of(name).is_some_and(|t| t.always_empty())
    }
}

impl FreshetSchema {
    fn relation_of(&self, name: &sqlparser::ast::ObjectName) -> Option<Arc<dyn SystemTable>> {
        let parts: Vec<String> = name.0.iter().filter_map(|p| p.as_ident()).map(freshet_core::sql::names::fold_ident).collect();
        match parts.as_slice() {
            [n] => self.catalog_relation(None, n),
            [.., s, n] => self.catalog_relation(Some(s), n),
            [] => None,
        }
    }
}

/// The `pg_catalog` schema: the catalog relations PostgreSQL clients query.
#[derive(Debug)]
pub struct PgCatalogSchema(SystemTables);

#[async_trait]
impl SchemaProvider for PgCatalogSchema {
    fn table_names(&self) -> Vec<String> {
        self.0.read().keys().cloned().collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(self.0.read().get(name).map(|t| Arc::new(SystemProvider(t.clone())) as _))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.0.read().contains_key(name)
    }
}

#[async_trait]
impl SchemaProvider for FreshetSchema {
    fn table_names(&self) -> Vec<String> {
        self.engine.catalog().tables().map(|t| t.name.clone()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        if let Some(def) = self.engine.catalog().table(name) {
            return Ok(Some(Arc::new(SnapshotTable::new(def.clone())) as _));
        }
        Ok(self.system_table(name).map(|t| Arc::new(SystemProvider(t)) as _))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.engine.catalog().table(name).is_some() || self.system_table(name).is_some()
    }
}
