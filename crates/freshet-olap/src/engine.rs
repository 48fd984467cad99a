//! The analytical engine: DataFusion planning and execution over snapshots, on a worker pool
//! of its own.
//!
//! Planning takes the parser's AST (the same one the short path looked at: no second parse)
//! and yields an [`OlapPlan`]: the logical plan, its output schema, its parameter types and
//! the tables it scans. Execution takes a plan, parameter values and a [`DbSnapshot`] of
//! exactly those tables, builds the physical plan, and streams record batches from the OLAP
//! runtime to the caller through a bounded channel. Dropping the [`BatchStream`] stops the
//! query.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::OnceLock;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use datafusion::arrow::datatypes::{DataType as ArrowType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider, SchemaProvider};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::ScalarValue;
use datafusion::datasource::source_as_provider;
use datafusion::execution::context::{SessionConfig, SessionContext, SessionState};
use datafusion::common::tree_node::TreeNode;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{Expr, LogicalPlan, Volatility};
use datafusion::physical_plan::{execute_stream, display::DisplayableExecutionPlan, ExecutionPlan};
use parking_lot::Mutex;
use datafusion::sql::parser::Statement as DfStatement;
use freshet_core::catalog::TableDef;
use freshet_core::engine::Engine;
use freshet_core::{Error, Result, SqlState};
use std::time::Duration;
use std::panic::AssertUnwindSafe;

use futures::{FutureExt, Stream, StreamExt};
use sqlparser::ast;
use tokio::sync::mpsc;

use crate::error::from_datafusion;
use crate::provider::{FreshetSchema, SnapshotTable};
use crate::prune::{range_test, RangeTest};
use freshet_core::storage::DbSnapshot;

pub const CATALOG: &str = "freshet";
pub const SCHEMA: &str = "public";

/// A planned analytical query, reusable across executions.
#[derive(Clone, Debug)]
pub struct OlapPlan {
    pub logical: LogicalPlan,
    /// The output schema (field names as DataFusion gives them).
    pub schema: SchemaRef,
    /// The user tables the query scans.
    pub tables: Vec<Arc<TableDef>>,
    /// The type DataFusion inferred for `$1..$n`, where it could.
    pub param_types: Vec<Option<ArrowType>>,
    /// The plans kept from the first execution when planning again would give the same
    /// plans: the query has no parameters and no function that the optimizer replaces by the
    /// time of the query (`now()`, `current_date`, …); `None` when it would not. Clones share
    /// them.
    reuse: Option<Arc<PlanReuse>>,
}

/// What later executions of a plan take from the first instead of planning again.
#[derive(Debug, Default)]
struct PlanReuse {
    /// The optimized logical plan.
    logical: OnceLock<LogicalPlan>,
    /// The physical plan without data or state ([`crate::provider::template`]), when
    /// [`crate::provider::rebind`] can run it over another snapshot. Replaced when a table
    /// outgrows it.
    physical: Mutex<Option<Arc<dyn ExecutionPlan>>>,
    /// Per scanned table, the zone-map tests of its scan's filters ([`OlapPlan::snapshot_tests`]).
    tests: OnceLock<Vec<Vec<RangeTest>>>,
}

impl OlapPlan {
    /// For each of [`Self::tables`], the zone-map tests of the filters its scan applies
    /// (empty for a table scanned more than once, or without such filters), from the
    /// optimized plan the first execution kept; `None` before that or for a plan that is not
    /// kept. A snapshot taken for one execution may leave out every chunk they rule out
    /// (`freshet_core::engine::Engine::snapshot`): DataFusion applies the same filters to what
    /// the scan gives (the pushdown is inexact), and the scan skips those chunks anyway
    /// (`crate::prune`).
    pub fn snapshot_tests(&self) -> Option<Vec<Vec<RangeTest>>> {
        let reuse = self.reuse.as_ref()?;
        let optimized = reuse.logical.get()?;
        Some(reuse.tests.get_or_init(|| scan_tests(optimized, &self.tables)).clone())
    }

    /// The physical plan of one execution with `params`, over the snapshot in `state`.
    ///
    /// A plan without parameters is optimized and planned once; later executions rebind the
    /// physical plan's table scans to their own snapshot. Planning took about a third of a
    /// short query's time (the top-10 query of the TPC-C benchmark: 1.7 of 5.2 ms).
    pub(crate) async fn physical(&self, state: &SessionState, params: Vec<ScalarValue>) -> DfResult<Arc<dyn ExecutionPlan>> {
        let Some(reuse) = self.reuse.as_ref().filter(|_| params.is_empty()) else {
            let logical = if params.is_empty() { self.logical.clone() } else { self.logical.clone().with_param_values(params)? };
            return state.create_physical_plan(&logical).await;
        };
        let kept = reuse.physical.lock().clone();
        if let Some(template) = kept
            && let Some(plan) = crate::provider::rebind(&template, crate::provider::query_snapshot(state.config())?)?
        {
            return Ok(plan);
        }
        let optimized = match reuse.logical.get() {
            Some(plan) => plan,
            None => {
                let plan = state.optimize(&self.logical)?;
                reuse.logical.get_or_init(|| plan)
            }
        };
        let plan = state.query_planner().create_physical_plan(optimized, state).await?;
        *reuse.physical.lock() = crate::provider::template(&plan)?;
        Ok(plan)
    }
}

/// Per table, the zone-map tests of the pushed-down filters of its one scan in `plan`
/// (subqueries included); nothing for a table scanned twice, whose scans may differ.
fn scan_tests(plan: &LogicalPlan, tables: &[Arc<TableDef>]) -> Vec<Vec<RangeTest>> {
    let mut scans: HashMap<String, (usize, Vec<RangeTest>)> = HashMap::new();
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            let schema = scan.source.schema();
            let tests = scan.filters.iter().filter_map(|f| range_test(f, &schema)).collect();
            let seen = scans.entry(scan.table_name.table().to_string()).or_default();
            *seen = (seen.0 + 1, tests);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    tables
        .iter()
        .map(|t| match scans.get(&t.name) {
            Some((1, tests)) => tests.clone(),
            _ => Vec::new(),
        })
        .collect()
}

/// Whether optimizing `plan` gives the same plan whenever it runs: no parameters, and no
/// function of the stable kind except Freshet's own (`ours`). The optimizer evaluates stable
/// functions over constants: DataFusion's give the query's time, Freshet's read only the
/// catalog, whose version the plan was made for.
fn optimized_plan_is_reusable(plan: &LogicalPlan, ours: &HashSet<String>) -> bool {
    let mut reusable = true;
    let _ = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                match e {
                    Expr::Placeholder(_) => reusable = false,
                    Expr::ScalarFunction(f) if f.func.signature().volatility == Volatility::Stable && !ours.contains(f.func.name()) => {
                        reusable = false
                    }
                    _ => {}
                }
                Ok(if reusable { TreeNodeRecursion::Continue } else { TreeNodeRecursion::Stop })
            })
        })
    });
    reusable
}

/// Plans of analytical statements by their text, shared by all sessions, for the catalog
/// version they were planned against (a plan of an older version is never used).
#[derive(Default)]
struct PlanCache {
    plans: HashMap<String, (u64, OlapPlan)>,
}

impl PlanCache {
    /// Statements kept at most; past that the cache starts again empty.
    const CAPACITY: usize = 256;

    fn get(&self, text: &str, version: u64) -> Option<OlapPlan> {
        self.plans.get(text).filter(|(v, _)| *v == version).map(|(_, p)| p.clone())
    }

    fn put(&mut self, text: String, version: u64, plan: OlapPlan) {
        if self.plans.len() >= Self::CAPACITY {
            self.plans.clear();
        }
        self.plans.insert(text, (version, plan));
    }
}

/// What one execution needs besides its plan and parameters.
#[derive(Clone, Copy, Debug)]
pub struct QueryRun {
    /// What `now()` gives, microseconds since 1970: the start of the statement, or of its
    /// transaction block.
    pub now: i64,
    /// `statement_timeout`, if any.
    pub timeout: Option<Duration>,
}

pub struct OlapEngine {
    pub(crate) state: SessionState,
    schema: Arc<FreshetSchema>,
    plans: Mutex<PlanCache>,
    /// Names of the functions Freshet registered ([`Self::register_function`]).
    functions: HashSet<String>,
    /// The worker pool; `None` only while the engine is dropped.
    runtime: Option<tokio::runtime::Runtime>,
    pub(crate) handle: tokio::runtime::Handle,
    pub(crate) threads: usize,
}

impl std::fmt::Debug for OlapEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OlapEngine").field("threads", &self.threads).finish()
    }
}

impl OlapEngine {
    /// An analytical engine reading `engine`'s tables with `threads` worker threads, each at
    /// scheduling niceness `nice` (0 = the same as the executors; higher yields the CPU to
    /// them when both want it). Its queries hold at most `memory_limit` bytes together in
    /// the operators that account for memory (hash joins, sorts, aggregates); past it they
    /// spill where they can and otherwise fail with 53200.
    pub fn new(engine: Arc<Engine>, threads: usize, nice: i32, memory_limit: usize) -> Result<OlapEngine> {
        let threads = threads.max(1);
        let cpus = engine.cpus().clone();
        let mut config = SessionConfig::new()
            .with_default_catalog_and_schema(CATALOG, SCHEMA)
            .with_create_default_catalog_and_schema(false)
            .with_information_schema(false)
            .with_target_partitions(threads)
            .with_batch_size(freshet_core::storage::CHUNK_ROWS);
        {
            let options = config.options_mut();
            options.sql_parser.parse_float_as_decimal = true;
            options.sql_parser.enable_ident_normalization = true;
            // The session time zone is UTC: now() and casts to timestamptz give UTC instants
            // (Arrow timestamps labelled with the zone), as a PostgreSQL session with
            // TimeZone UTC does. Without a zone they would come out as timestamps without one.
            options.execution.time_zone = Some(crate::types::UTC.into());
            // Dynamic filters are state that a physical plan shares between its nodes while it
            // runs, which resetting the nodes for another run does not undo
            // (`reset_plan_states`); plans are run again (`OlapPlan::physical`), so they are
            // off. Snapshot scans could not use them anyway: they take no filters.
            options.optimizer.enable_dynamic_filter_pushdown = false;
            options.optimizer.enable_topk_dynamic_filter_pushdown = false;
            options.optimizer.enable_join_dynamic_filter_pushdown = false;
            options.optimizer.enable_aggregate_dynamic_filter_pushdown = false;
        }
        let runtime_env = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
            .with_memory_limit(memory_limit, 1.0)
            .build_arc()
            .map_err(from_datafusion)?;
        let mut ctx = SessionContext::new_with_config_rt(config, runtime_env);
        ctx.add_analyzer_rule(Arc::new(crate::checked::CheckedIntegerArithmetic::default()));
        ctx.add_analyzer_rule(Arc::new(crate::uuid::UuidLiterals));
        ctx.add_analyzer_rule(Arc::new(crate::shown_numeric::ShownNumericText::default()));
        datafusion::execution::FunctionRegistry::register_expr_planner(&mut ctx, Arc::new(crate::interval::IntervalArithmetic::default()))
            .map_err(from_datafusion)?;
        // PostgreSQL's generate_series in FROM over DataFusion's (integers) and its own (times).
        let integers = ctx.table_function("generate_series").map_err(from_datafusion)?.function().clone();
        ctx.register_udtf("generate_series", Arc::new(crate::series::GenerateSeries { integers }));
        // PostgreSQL's template patterns in place of DataFusion's chrono formats.
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(crate::to_char::ToChar::new()));
        for date in [false, true] {
            ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(crate::to_char::ToTimestamp::new(date)));
        }
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(crate::similar::SimilarRegex::new()));
        for f in crate::functions::all().into_iter().chain(crate::uuid::functions()) {
            ctx.register_udf(f);
        }
        for f in crate::ordered_set::all() {
            ctx.register_udaf(f);
        }
        let catalog = MemoryCatalogProvider::new();
        let schema = Arc::new(FreshetSchema::new(engine));
        catalog
            .register_schema(SCHEMA, schema.clone() as Arc<dyn SchemaProvider>)
            .map_err(from_datafusion)?;
        catalog
            .register_schema("pg_catalog", Arc::new(schema.pg_catalog()) as Arc<dyn SchemaProvider>)
            .map_err(from_datafusion)?;
        ctx.register_catalog(CATALOG, Arc::new(catalog) as Arc<dyn CatalogProvider>);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("freshet-olap")
            .on_thread_start(move || {
                set_thread_nice(nice);
                cpus.keep_off_executors();
            })
            .enable_all()
            .build()
            .map_err(|e| Error::internal(format!("cannot start the analytical worker pool: {e}")))?;
        let handle = runtime.handle().clone();
        Ok(OlapEngine {
            state: ctx.state(),
            schema,
            plans: Mutex::new(PlanCache::default()),
            functions: HashSet::new(),
            runtime: Some(runtime),
            handle,
            threads,
        })
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Makes `table` visible to queries as `name` in the public schema.
    pub fn register_system_table(&self, name: &str, table: Arc<dyn crate::provider::SystemTable>) {
        self.schema.register_system_table(name, table);
    }

    /// Makes `table` visible to queries as `pg_catalog.name` (and as `name` where no user
    /// table of that name exists).
    pub fn register_catalog_table(&self, name: &str, table: Arc<dyn crate::provider::SystemTable>) {
        self.schema.register_catalog_table(name, table);
    }

    /// Adds a scalar function (or replaces DataFusion's of the same name).
    pub fn register_function(&mut self, function: datafusion::logical_expr::ScalarUDF) {
        self.functions.insert(function.name().to_string());
        // Registering returns the function it replaced, if any.
        let _ = datafusion::execution::FunctionRegistry::register_udf(&mut self.state, Arc::new(function));
    }

    /// Plans a query statement, or takes the plan of the same text from the plan cache when
    /// the catalog has not changed since.
    pub async fn plan(&self, statement: ast::Statement) -> Result<OlapPlan> {
        // The version is read before planning: a plan is never filed under a newer catalog
        // version than the one it was planned against.
        let version = self.schema.catalog_version();
        let text = statement.to_string();
        if let Some(plan) = self.plans.lock().get(&text, version) {
            return Ok(plan);
        }
        let plan = self.plan_statement(statement).await?;
        self.plans.lock().put(text, version, plan.clone());
        Ok(plan)
    }

    async fn plan_statement(&self, mut statement: ast::Statement) -> Result<OlapPlan> {
        crate::rewrite::information_schema_views(&mut statement);
        crate::rewrite::subquery_output_names(&mut statement);
        crate::rewrite::shown_oid_names(&mut statement);
        crate::rewrite::catalog_spellings(&mut statement, self.schema.as_ref());
        crate::rewrite::typed_values_literals(&mut statement);
        crate::rewrite::postgres_functions(&mut statement);
        crate::rewrite::integer_literals(&mut statement);
        crate::rewrite::grouped_order_ordinals(&mut statement);
        crate::rewrite::unique_output_names(&mut statement);
        crate::rewrite::nullable_scalar_subqueries(&mut statement);
        let names = crate::join_order::from_list_tables(&statement);
        if !names.is_empty() {
            // One executor job per table for its row count, all in flight together.
            let infos = futures::future::join_all(names.iter().map(|n| self.schema.table_info(n))).await;
            let tables = names.into_iter().zip(infos).filter_map(|(n, info)| Some((n, info?))).collect();
            crate::join_order::order_from_lists(&mut statement, &tables);
        }
        let logical = self
            .state
            .statement_to_plan(DfStatement::Statement(Box::new(statement)))
            .await
            .map_err(from_datafusion)?;
        let schema = Arc::new(logical.schema().as_arrow().clone());
        let tables = scanned_tables(&logical)?;
        let mut by_index = BTreeMap::new();
        for (name, ty) in logical.get_parameter_types().map_err(from_datafusion)? {
            if let Some(n) = name.strip_prefix('$').and_then(|d| d.parse::<usize>().ok()) {
                by_index.insert(n, ty);
            }
        }
        let count = by_index.keys().next_back().copied().unwrap_or(0);
        let param_types = (1..=count).map(|i| by_index.get(&i).cloned().flatten()).collect();
        let reuse = optimized_plan_is_reusable(&logical, &self.functions).then(Arc::default);
        Ok(OlapPlan { logical, schema, tables, param_types, reuse })
    }

    /// The plan after DataFusion's optimizer, as indented text (for EXPLAIN).
    pub fn explain(&self, plan: &OlapPlan) -> Result<String> {
        let optimized = self.state.optimize(&plan.logical).map_err(from_datafusion)?;
        Ok(optimized.display_indent().to_string())
    }

    /// The session state of one execution: the query's snapshot (when it is known here), and
    /// `now` (microseconds since 1970: the statement's or its block's start) as the time that
    /// `now()`, `current_date` and the like give, as on the short path.
    pub(crate) fn execution_state(&self, snapshot: Option<Arc<DbSnapshot>>, now: i64) -> SessionState {
        let mut state = self.state.clone();
        if let Some(snapshot) = snapshot {
            state.config_mut().set_extension(snapshot);
        }
        state.mark_start_execution();
        state.execution_props_mut().query_execution_start_time = chrono::DateTime::from_timestamp_micros(now);
        state
    }

    /// Runs a plan over `snapshot` with parameter values; results stream back.
    /// With a timeout (`statement_timeout`), the query is stopped when it has not finished
    /// in time and the stream ends with 57014.
    pub fn execute(&self, plan: &OlapPlan, params: Vec<ScalarValue>, snapshot: Arc<DbSnapshot>, run: QueryRun) -> BatchStream {
        let QueryRun { now, timeout } = run;
        let (tx, rx) = mpsc::channel(2);
        let state = self.execution_state(Some(snapshot.clone()), now);
        let plan = plan.clone();
        let task = self.handle.spawn(async move {
            let errors = tx.clone();
            // A panic inside DataFusion must reach the client as an error, not as a result
            // that silently ends early.
            let run = AssertUnwindSafe(stream_batches(state, plan, params, tx)).catch_unwind();
            let outcome = match timeout {
                None => run.await,
                Some(t) => match tokio::time::timeout(t, run).await {
                    Ok(outcome) => outcome,
                    Err(_) => {
                        let _ = errors.send(Err(Error::new(SqlState::QueryCanceled, "canceling statement due to statement timeout"))).await;
                        return;
                    }
                },
            };
            if outcome.is_err() {
                let _ = errors.send(Err(Error::internal("the analytical query failed unexpectedly"))).await;
            }
        });
        BatchStream { rx, task, snapshot: Some(snapshot) }
    }
}

/// Sets the calling thread's niceness (Linux schedules threads one by one, so this affects
/// this thread only). Raising it needs no privilege; a failure leaves the thread as it was.
fn set_thread_nice(nice: i32) {
    if nice == 0 {
        return;
    }
    if freshet_core::executor::cpus::set_thread_niceness(nice).is_err() {
        tracing::warn!(nice, "could not set the analytical worker's niceness");
    }
}

impl OlapEngine {
    /// Runs a plan over `snapshot` to the end and returns the physical plan with the
    /// metrics of that run, as indented text (EXPLAIN ANALYZE), and the rows it produced.
    pub async fn explain_analyze(&self, plan: &OlapPlan, params: Vec<ScalarValue>, snapshot: Arc<DbSnapshot>, now: i64) -> Result<(String, usize)> {
        let state = self.execution_state(Some(snapshot), now);
        let plan = plan.clone();
        let task = self.handle.spawn(async move {
            let physical = plan.physical(&state, params).await?;
            let mut stream = execute_stream(physical.clone(), state.task_ctx())?;
            let mut rows = 0;
            while let Some(batch) = stream.next().await {
                rows += batch?.num_rows();
            }
            let text = DisplayableExecutionPlan::with_metrics(physical.as_ref()).indent(true).to_string();
            Ok::<_, datafusion::error::DataFusionError>((text, rows))
        });
        match task.await {
            Ok(result) => result.map_err(from_datafusion),
            Err(_) => Err(Error::internal("the analytical query failed unexpectedly")),
        }
    }

    /// The analytical worker pool's handle (timers and background tasks of the library).
    pub fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }
}

impl Drop for OlapEngine {
    /// Stops the worker pool without waiting for it, so that a database can be dropped from
    /// async code (dropping a runtime there panics); running queries are abandoned.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

async fn stream_batches(state: SessionState, plan: OlapPlan, params: Vec<ScalarValue>, tx: mpsc::Sender<Result<RecordBatch>>) {
    let run = async {
        let physical = plan.physical(&state, params).await?;
        execute_stream(physical, state.task_ctx())
    };
    let mut stream = match run.await {
        Ok(s) => s,
        Err(e) => {
            let _ = tx.send(Err(from_datafusion(e))).await;
            return;
        }
    };
    while let Some(item) = stream.next().await {
        let failed = item.is_err();
        if tx.send(item.map_err(from_datafusion)).await.is_err() || failed {
            return;
        }
    }
}

/// The user tables a plan scans, including inside subqueries.
fn scanned_tables(plan: &LogicalPlan) -> Result<Vec<Arc<TableDef>>> {
    let mut tables: Vec<Arc<TableDef>> = Vec::new();
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            let provider = source_as_provider(&scan.source)?;
            if let Some(t) = provider.downcast_ref::<SnapshotTable>()
                && !tables.iter().any(|d| d.id == t.def.id) {
                    tables.push(t.def.clone());
                }
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .map_err(from_datafusion)?;
    Ok(tables)
}

/// Record batches of a running query. Dropping it cancels the query.
///
/// The query counts as running, and keeps its snapshot, until its results have been read to
/// the end or dropped: a plan that finishes early (its last batches wait in the channel) does
/// not release the snapshot before the client has them.
pub struct BatchStream {
    rx: mpsc::Receiver<Result<RecordBatch>>,
    task: tokio::task::JoinHandle<()>,
    snapshot: Option<Arc<DbSnapshot>>,
}

impl BatchStream {
    pub(crate) fn new(rx: mpsc::Receiver<Result<RecordBatch>>, task: tokio::task::JoinHandle<()>) -> Self {
        BatchStream { rx, task, snapshot: None }
    }

    pub async fn next_batch(&mut self) -> Option<Result<RecordBatch>> {
        let next = self.rx.recv().await;
        self.release_at_end(next.is_none());
        next
    }

    /// Blocks the calling thread (not an async task) for the next batch.
    pub fn blocking_next(&mut self) -> Option<Result<RecordBatch>> {
        let next = self.rx.blocking_recv();
        self.release_at_end(next.is_none());
        next
    }

    fn release_at_end(&mut self, ended: bool) {
        if ended {
            self.snapshot = None;
        }
    }
}

impl Stream for BatchStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = self.rx.poll_recv(cx);
        if let Poll::Ready(item) = &next {
            let ended = item.is_none();
            self.release_at_end(ended);
        }
        next
    }
}

impl Drop for BatchStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}
