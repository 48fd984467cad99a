//! DataFusion's view of Freshet's tables.
//!
//! [`FreshetSchema`] resolves table names against the live catalog at planning time and hands
//! out a [`SnapshotTable`] per table. A `SnapshotTable` holds no data: when DataFusion scans
//! it, it reads the query's [`DbSnapshot`] from the session configuration (put there by
//! [`crate::OlapEngine::execute`]) and wraps that snapshot's chunks as Arrow batches in a
//! [`SnapshotScanExec`]. So one logical plan can run many times, each time over the snapshot
//! of that execution, and so can one physical plan: [`template`] keeps it without data and
//! [`rebind`] points its scans at a newer snapshot.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use datafusion::arrow::array::BooleanArray;
use datafusion::arrow::compute::BatchCoalescer;
use datafusion::arrow::record_batch::RecordBatch;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::Statistics;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::coop::cooperative;
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet, RecordOutput};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, SchedulingType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, ReplaceChildrenOptions,
    SendableRecordBatchStream,
};
use freshet_core::catalog::TableDef;
use freshet_core::engine::Engine;
use freshet_core::storage::{ChunkSnapshot, DbSnapshot};

use crate::prune::{self, RangeTest};
use crate::scan::{chunk_batch, selection};
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
    /// ([`crate::prune`]). A comparison with a constant or a BETWEEN the scan applies itself,
    /// row by row over the segments ([`crate::scan::selection`]); DataFusion still applies the
    /// others (IN lists, ORs) to the rows that remain.
    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match prune::test(f, &self.schema) {
                Some((_, true)) => TableProviderFilterPushDown::Exact,
                Some((_, false)) => TableProviderFilterPushDown::Inexact,
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
        let pushed: Vec<(RangeTest, bool)> = filters.iter().filter_map(|f| prune::test(f, &self.schema)).collect();
        let tests: Vec<RangeTest> = pushed.iter().map(|(t, _)| *t).collect();
        let exact: Arc<[RangeTest]> = pushed.iter().filter(|(_, exact)| *exact).map(|(t, _)| *t).collect();
        let projection: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let schema = Arc::new(self.schema.project(&projection)?);
        let leaf = ScanLeaf { table: self.def.clone(), projection, tests, exact, schema };
        let partitions = state.config().target_partitions().max(1);
        Ok(Arc::new(SnapshotScanExec::try_new(leaf, query_snapshot(state.config())?, Shape::Spread(partitions))?))
    }
}

/// The snapshot of the query being planned or rebound, which [`crate::OlapEngine::execute`]
/// puts into the session configuration.
pub(crate) fn query_snapshot(config: &datafusion::execution::context::SessionConfig) -> Result<Arc<DbSnapshot>> {
    config.get_extension::<DbSnapshot>().ok_or_else(|| DataFusionError::Internal("no snapshot for this query".into()))
}

/// What a scan reads, whatever the snapshot: a table, its projected columns, the range
/// tests of its pushed-down filters and, of those, the ones that are exactly their filter:
/// the scan applies them to the rows (DataFusion does not).
#[derive(Debug, Clone)]
struct ScanLeaf {
    table: Arc<TableDef>,
    projection: Vec<usize>,
    tests: Vec<RangeTest>,
    exact: Arc<[RangeTest]>,
    schema: SchemaRef,
}

/// One chunk of a scan: its batch over every slot, zero-copy, and when some of its rows are
/// to be left out (deleted, or failing an exact test that its value ranges do not settle),
/// the chunk and those tests; the rows are selected when the partition's stream reaches it,
/// on the thread that runs that partition.
#[derive(Debug, Clone)]
struct Piece {
    batch: RecordBatch,
    select: Option<(ChunkSnapshot, Arc<[RangeTest]>)>,
}

impl Piece {
    fn new(chunk: &ChunkSnapshot, leaf: &ScanLeaf, types: &[freshet_core::types::DataType]) -> Result<Piece> {
        let batch = chunk_batch(chunk, types, &leaf.projection, leaf.schema.clone())?;
        // A test that every value of its column passes (the segment's range lies inside the
        // test's, and no value is NULL) need not be applied row by row.
        let pending: Arc<[RangeTest]> = leaf
            .exact
            .iter()
            .filter(|t| {
                chunk.columns.get(t.column).is_none_or(|segment| {
                    let within = segment.int_range().is_some_and(|(min, max)| t.lo <= min && max <= t.hi);
                    !within || segment.validity().is_some()
                })
            })
            .copied()
            .collect();
        let select = (!pending.is_empty() || chunk.live < chunk.len).then(|| (chunk.clone(), pending));
        Ok(Piece { batch, select })
    }

    /// Rows it may give, as the statistics tell them: its live rows, a fifth of them when a
    /// test is still to be applied (DataFusion's default selectivity of a filter it knows
    /// nothing of).
    fn estimated_rows(&self) -> usize {
        match &self.select {
            Some((chunk, tests)) if !tests.is_empty() => chunk.live / 5,
            Some((chunk, _)) => chunk.live,
            None => self.batch.num_rows(),
        }
    }
}

/// The rows of one partition's pieces, in batches: a piece handed over whole is its own
/// (zero-copy) batch; the rows selected from pieces that lose some are copied together into
/// batches of the session's batch size, so that a selective filter does not feed the plan
/// above one small batch per chunk (each batch costs every operator a fixed overhead).
struct Rows {
    pieces: std::vec::IntoIter<Piece>,
    selected: BatchCoalescer,
    done: bool,
    metrics: BaselineMetrics,
}

impl Rows {
    /// The next batch, or `None` at the end.
    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            if let Some(batch) = self.selected.next_completed_batch() {
                return Ok(Some(batch));
            }
            if self.done {
                return Ok(None);
            }
            let Some(piece) = self.pieces.next() else {
                self.done = true;
                self.selected.finish_buffered_batch()?;
                continue;
            };
            let Some((chunk, tests)) = &piece.select else {
                return Ok(Some(piece.batch));
            };
            let (keep, kept) = selection(chunk, tests);
            if kept == chunk.len {
                return Ok(Some(piece.batch));
            }
            if kept > 0 {
                self.selected.push_batch_with_filter(piece.batch, &BooleanArray::new(keep, None))?;
            }
        }
    }
}

impl Iterator for Rows {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        let clock = self.metrics.elapsed_compute().clone();
        let timer = clock.timer();
        let next = self.next_batch();
        timer.done();
        match next {
            Ok(Some(batch)) => Some(Ok(batch.record_output(&self.metrics))),
            Ok(None) => {
                self.metrics.done();
                None
            }
            Err(e) => Some(Err(e)),
        }
    }
}

/// How a scan's chunks are spread over its partitions.
enum Shape {
    /// Over at most this many partitions, one per chunk beyond that (at least one).
    Spread(usize),
    /// Exactly as an earlier scan of the same plan (its `most` and properties), so that the
    /// plan above it stays valid: the same partition count (some perhaps empty) and the same
    /// properties.
    Like(usize, Arc<PlanProperties>),
}

/// The leaf of a physical plan over a user table: the chunks of one table in the query's
/// snapshot that the pushed-down range filters may match (zone maps, [`crate::prune`]), as
/// Arrow batches over the chunks' columns without copying, spread round-robin over the
/// partitions.
///
/// It reports its row count as inexact, so no physical optimizer rule turns an aggregate
/// into a constant computed from it, and it does not take filters, limits or projections
/// from the optimizer. The physical plan above it therefore depends on the snapshot only
/// through this leaf, which lets a cached physical plan run again over a newer snapshot
/// ([`rebind`]).
#[derive(Debug)]
pub struct SnapshotScanExec {
    leaf: ScanLeaf,
    /// The most partitions the scan may have: the analytical threads when it was planned.
    most: usize,
    parts: Vec<Vec<Piece>>,
    /// Rows and bytes of all partitions' batches.
    rows: usize,
    bytes: usize,
    properties: Arc<PlanProperties>,
    /// Rows and batches given, and the time spent selecting and copying rows (EXPLAIN ANALYZE).
    metrics: ExecutionPlanMetricsSet,
}

impl SnapshotScanExec {
    fn try_new(leaf: ScanLeaf, snapshot: Arc<DbSnapshot>, shape: Shape) -> Result<SnapshotScanExec> {
        let table = snapshot.tables.get(&leaf.table.id).ok_or_else(|| {
            DataFusionError::Internal(format!("the snapshot lacks table \"{}\"", leaf.table.name))
        })?;
        let types = table.def.types();
        // Chunks whose value ranges rule out a pushed-down filter hold no row that passes it.
        let chunks: Vec<_> =
            table.chunks.iter().filter(|c| c.live > 0 && leaf.tests.iter().all(|t| t.may_match(&c.columns))).collect();
        let (most, properties) = match shape {
            Shape::Like(most, properties) => (most, properties),
            Shape::Spread(most) => (most, Arc::new(
                PlanProperties::new(
                    EquivalenceProperties::new(leaf.schema.clone()),
                    Partitioning::UnknownPartitioning(chunks.len().clamp(1, most)),
                    EmissionType::Incremental,
                    Boundedness::Bounded,
                )
                .with_scheduling_type(SchedulingType::Cooperative),
            )),
        };
        let mut parts: Vec<Vec<Piece>> = vec![Vec::new(); properties.partitioning.partition_count()];
        let (mut rows, mut bytes) = (0, 0);
        for (i, chunk) in chunks.into_iter().enumerate() {
            let piece = Piece::new(chunk, &leaf, &types)?;
            rows += piece.estimated_rows();
            bytes += piece.batch.get_array_memory_size();
            let n = parts.len();
            parts[i % n].push(piece);
        }
        Ok(SnapshotScanExec { leaf, most, parts, rows, bytes, properties, metrics: ExecutionPlanMetricsSet::new() })
    }

    /// The same scan without data: what a cached plan keeps.
    fn emptied(&self) -> SnapshotScanExec {
        let parts = vec![Vec::new(); self.parts.len()];
        SnapshotScanExec {
            leaf: self.leaf.clone(),
            most: self.most,
            parts,
            rows: 0,
            bytes: 0,
            properties: self.properties.clone(),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The same scan over `snapshot`, with the same partitions and properties; `None` when
    /// the table has outgrown them (more chunks than partitions, where it was planned with
    /// fewer partitions than it may have), so that planning again would spread it wider.
    fn rebind(&self, snapshot: Arc<DbSnapshot>) -> Result<Option<SnapshotScanExec>> {
        let scan = SnapshotScanExec::try_new(self.leaf.clone(), snapshot, Shape::Like(self.most, self.properties.clone()))?;
        let chunks: usize = scan.parts.iter().map(Vec::len).sum();
        Ok((scan.parts.len() >= self.most || chunks <= scan.parts.len()).then_some(scan))
    }
}

impl DisplayAs for SnapshotScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let sizes: Vec<String> = self.parts.iter().map(|p| p.len().to_string()).collect();
        write!(f, "SnapshotScanExec: table={}, partition_sizes=[{}], rows={}", self.leaf.table.name, sizes.join(", "), self.rows)?;
        if !self.leaf.exact.is_empty() {
            let tests: Vec<String> = self
                .leaf
                .exact
                .iter()
                .map(|t| {
                    let name = self.leaf.table.columns.get(t.column).map_or("?", |c| c.name.as_str());
                    match (t.lo, t.hi) {
                        (lo, hi) if lo == hi => format!("{name} = {lo}"),
                        (i64::MIN, hi) => format!("{name} <= {hi}"),
                        (lo, i64::MAX) => format!("{name} >= {lo}"),
                        (lo, hi) => format!("{name} BETWEEN {lo} AND {hi}"),
                    }
                })
                .collect();
            write!(f, ", filter=[{}]", tests.join(" AND "))?;
        }
        Ok(())
    }
}

impl ExecutionPlan for SnapshotScanExec {
    fn name(&self) -> &'static str {
        "SnapshotScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(self: Arc<Self>, _children: Vec<Arc<dyn ExecutionPlan>>, _options: ReplaceChildrenOptions) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    #[allow(deprecated)]
    fn with_new_children(self: Arc<Self>, _children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let pieces = self.parts.get(partition).ok_or_else(|| {
            DataFusionError::Internal(format!("SnapshotScanExec has no partition {partition}"))
        })?;
        let batch_size = context.session_config().batch_size();
        let batches = Rows {
            pieces: pieces.clone().into_iter(),
            selected: BatchCoalescer::new(self.leaf.schema.clone(), batch_size),
            done: false,
            metrics: BaselineMetrics::new(&self.metrics, partition),
        };
        let stream = RecordBatchStreamAdapter::new(self.leaf.schema.clone(), futures::stream::iter(batches));
        Ok(Box::pin(cooperative(stream)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn statistics_from_inputs(&self, _input_stats: &[Arc<Statistics>], args: &StatisticsArgs) -> Result<Arc<Statistics>> {
        let (rows, bytes) = match args.partition() {
            None => (self.rows, self.bytes),
            Some(p) => self.parts.get(p).map_or((0, 0), |b| {
                (b.iter().map(Piece::estimated_rows).sum(), b.iter().map(|p| p.batch.get_array_memory_size()).sum())
            }),
        };
        let statistics = Statistics::new_unknown(&self.leaf.schema)
            .with_num_rows(Precision::Inexact(rows))
            .with_total_byte_size(Precision::Inexact(bytes));
        Ok(Arc::new(statistics))
    }
}

/// `plan` as a physical plan to keep and run again ([`rebind`]): its scans without their
/// data and every other node without run-time state, so that it holds on to no snapshot and
/// no result of a run. `None` when the plan has a leaf that is not a snapshot scan or a
/// constant row source (a system table, VALUES, a recursive query's work table): those
/// leaves hold their data, or state that resetting does not cover.
pub(crate) fn template(plan: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if !rebindable(plan) {
        return Ok(None);
    }
    renew(plan, &|scan| Ok(Some(scan.emptied())))
}

/// `template` ready to run over `snapshot`: each [`SnapshotScanExec`] reads `snapshot`,
/// with the partitions and properties it had, and every other node is a fresh copy (run-time
/// state reset) that keeps its properties, so nothing is planned again. `None` when a table
/// has outgrown its scan's partitions ([`SnapshotScanExec::rebind`]): the query is then
/// better planned again.
pub(crate) fn rebind(template: &Arc<dyn ExecutionPlan>, snapshot: Arc<DbSnapshot>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    renew(template, &|scan| scan.rebind(snapshot.clone()))
}

/// `plan` with each scan replaced by what `scan` makes of it and every other node reset;
/// `None` as soon as `scan` gives `None`.
fn renew(
    plan: &Arc<dyn ExecutionPlan>,
    scan: &dyn Fn(&SnapshotScanExec) -> Result<Option<SnapshotScanExec>>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let mut outgrown = false;
    let renewed = plan.clone().transform_up(|node| {
        if let Some(s) = node.downcast_ref::<SnapshotScanExec>() {
            let Some(new) = scan(s)? else {
                outgrown = true;
                return Ok(Transformed::new(node, false, TreeNodeRecursion::Stop));
            };
            return Ok(Transformed::yes(Arc::new(new) as Arc<dyn ExecutionPlan>));
        }
        Ok(Transformed::yes(node.reset_state()?))
    })?;
    Ok((!outgrown).then_some(renewed.data))
}

/// Whether [`rebind`] can run `plan` again: every leaf is a snapshot scan or a constant.
fn rebindable(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let mut ok = true;
    let _ = plan.apply(|node| {
        let leaf_ok = !node.children().is_empty()
            || node.is::<SnapshotScanExec>()
            || node.is::<EmptyExec>()
            || node.is::<PlaceholderRowExec>();
        ok &= leaf_ok && node.name() != "RecursiveQueryExec";
        Ok(if ok { TreeNodeRecursion::Continue } else { TreeNodeRecursion::Stop })
    });
    ok
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
