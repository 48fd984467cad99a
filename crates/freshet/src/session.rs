//! Sessions: preparing and executing statements.
//!
//! `prepare` classifies a parsed statement and plans it once:
//! - a SELECT with an index path becomes a short-statement plan for the partition executor
//!   (`freshet_core::sql::plan::plan_select`); every other query becomes an analytical plan;
//! - INSERT … VALUES, UPDATE and DELETE become executor plans; INSERT … SELECT also gets an
//!   analytical plan for its source; UPDATE/DELETE with subqueries are planned at execution,
//!   after their (uncorrelated) subqueries have been evaluated on a snapshot;
//! - DDL, COPY and session statements (SET, SHOW, …) get their own plans.
//!
//! `execute` runs a prepared statement with parameter values. A prepared statement remembers
//! the catalog version it was planned against and is planned again when the catalog changed.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use freshet_core::catalog::{ColumnDef, ColumnDefault, TableDef};
use freshet_core::storage::{DbSnapshot, SnapshotMode, SnapshotScope, TxnView};
use freshet_olap::fork::ForkProcess;
use freshet_core::engine::{JobStatements, OltpResult, TxnCtx};
use freshet_core::txn::Isolation;
use freshet_core::sql::ddl::{self, DdlPlan};
use freshet_core::sql::expr::{EvalContext, NoRow};
use freshet_core::sql::names::{column_name, fold_ident, user_relation};
use freshet_core::sql::parse::placeholder_index as placeholder;
use freshet_core::sql::plan::{self, InsertPlan, InsertSource, OltpPlan};
use freshet_core::types::{value::assignable, DataType, Value};
use freshet_core::{Error, Result, SqlState};
use freshet_olap::datafusion::arrow::record_batch::RecordBatch;
use freshet_olap::types::{sql_type, sql_type_of_arrow};
use freshet_olap::values::scalar;
use freshet_olap::{OlapPlan, QueryRun};
use sqlparser::ast::{self, Statement};

use crate::copy::{copy_columns, CopyFormat, CopyIn, CopyOut};
use crate::database::Database;
use crate::result::{ColumnInfo, Notice, Output, RowStream, StatementResult};
use crate::rewrite::{self, FoundSubquery, SubqueryValue};
use crate::settings::Settings;
use crate::transaction::{self as txn_block, SessionTxn};
use crate::sequences::SessionSequences;
use crate::views;

pub use freshet_core::types::datetime::now_micros;

/// The value a column gets when an INSERT or COPY does not give one.
pub fn default_value(col: &ColumnDef, cx: &EvalContext) -> Result<Value> {
    match &col.default {
        None => Ok(Value::Null),
        Some(ColumnDefault::Value(v)) => Ok(v.clone()),
        Some(ColumnDefault::CurrentTimestamp) => Value::Timestamp(cx.now).cast(col.ty),
        Some(ColumnDefault::RandomUuid) => Value::Text(freshet_core::types::uuid::random()).assign_to(col.ty),
        Some(ColumnDefault::TimeDependent { expr, .. }) => expr.eval(&NoRow, cx)?.assign_to(col.ty),
        Some(d @ (ColumnDefault::Nextval(_) | ColumnDefault::Identity { .. })) => {
            plan::nextval_expr(d.sequence().unwrap_or_default()).eval(&NoRow, cx)?.assign_to(col.ty)
        }
    }
}


/// The arguments of `SELECT [pg_catalog.]set_config(name, value, is_local)`, the whole query.
fn set_config_call(q: &ast::Query) -> Option<Vec<ast::Expr>> {
    let ast::SetExpr::Select(s) = q.body.as_ref() else { return None };
    if !s.from.is_empty() || s.selection.is_some() || q.order_by.is_some() || q.limit_clause.is_some() {
        return None;
    }
    let [ast::SelectItem::UnnamedExpr(ast::Expr::Function(f)) | ast::SelectItem::ExprWithAlias { expr: ast::Expr::Function(f), .. }] = s.projection.as_slice() else {
        return None;
    };
    let names: Vec<String> = f.name.0.iter().filter_map(|p| p.as_ident()).map(fold_ident).collect();
    if !matches!(names.iter().map(String::as_str).collect::<Vec<_>>().as_slice(), ["set_config"] | ["pg_catalog", "set_config"]) {
        return None;
    }
    let ast::FunctionArguments::List(list) = &f.args else { return None };
    let args: Vec<ast::Expr> = list
        .args
        .iter()
        .map(|a| match a {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect::<Option<_>>()?;
    (args.len() == 3).then_some(args)
}

/// The notice for a session time zone other than UTC: it is kept and reported, but
/// `timestamp with time zone` values are read and shown in UTC (there is no time zone
/// database; see ARCHITECTURE.md, "Time zones").
fn zone_not_applied(zone: &str) -> Option<String> {
    let utc = zone.eq_ignore_ascii_case("default") || freshet_core::types::datetime::zone_offset(zone) == Some(0);
    (!utc).then(|| format!("time zone \"{zone}\" is not applied: timestamp with time zone values are read and shown in UTC"))
}

/// The transaction state a PostgreSQL client sees in ReadyForQuery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionStatus {
    Idle,
    InBlock,
    Failed,
}

/// A planned query: short path, analytical path, or both.
struct QueryPlan {
    short: Option<Arc<OltpPlan>>,
    olap: OnceLock<OlapPlan>,
    /// The statement to plan analytically when the short path declines.
    statement: Statement,
    /// A query, or the source query of `INSERT … SELECT`: select items (by position) that call
    /// sequence functions, which the session evaluates for each row
    /// (`sequences::draw_in_session`, `draw_for_select`), and for an INSERT
    /// under `OVERRIDING USER VALUE` the identity columns' defaults that replace the query's
    /// values (`plan::user_overridden`).
    drawn: Vec<(usize, freshet_core::sql::expr::Expr)>,
}

enum Kind {
    Empty,
    /// `SELECT set_config(name, value, is_local)`: its three arguments (constants or
    /// parameters).
    SetConfig(Vec<ast::Expr>),
    /// ALTER SEQUENCE (`freshet_core::sql::parse::alter_sequence`): name, IF EXISTS, action.
    AlterSequence(String, bool, freshet_core::sql::parse::AlterSequence),
    Query(QueryPlan),
    /// INSERT; with `calls`, its source query calls stored functions and its rows come from
    /// that plan (`source` then holds the query planned with the calls' values as NULLs,
    /// for its columns).
    Insert { plan: InsertPlan, source: Option<Arc<(QueryPlan, Vec<ColumnInfo>)>>, calls: Option<Arc<CallsInQueryPlan>> },
    Dml(Arc<OltpPlan>),
    /// INSERT … VALUES, UPDATE or DELETE whose subqueries are evaluated before it is planned
    /// (`statement`: the statement to run, stored-function calls that can be evaluated first
    /// wrapped in subqueries, `procedure::dml_calls`).
    DmlWithSubqueries { verb: &'static str, statement: Arc<Statement> },
    /// UPDATE or DELETE calling stored functions for each target row (`procedure::CallsInDml`).
    DmlCalls(Arc<crate::procedure::CallsInDml>),
    /// INSERT, UPDATE or DELETE whose RETURNING list calls stored functions
    /// (`procedure::returning_calls`): the statement returning the calls' arguments, its
    /// rows' columns, and the items of the output.
    ReturningCalls { inner: Arc<Prepared>, columns: Arc<Vec<ColumnInfo>>, items: Arc<Vec<crate::procedure::RowItem>> },
    /// UPDATE … FROM (`update_from`), planned when it runs.
    UpdateFrom,
    Ddl(DdlPlan),
    CopyFrom { table: Arc<freshet_core::catalog::TableDef>, columns: Vec<usize>, format: CopyFormat },
    CopyTo { query: QueryPlan, format: CopyFormat },
    Explain(Vec<String>),
    /// EXPLAIN ANALYZE of a query: runs it and reports the plan with its metrics.
    ExplainAnalyze(QueryPlan),
    /// EXPLAIN ANALYZE of an INSERT, UPDATE or DELETE: the statement, which it runs, and the
    /// lines of its plan (`Session::describe_dml`), to which the run adds its row count and time.
    ExplainAnalyzeDml { inner: Arc<Prepared>, lines: Vec<String> },
    Utility,
    /// CHECKPOINT: writes a checkpoint now (nothing to do in memory).
    Checkpoint,
    Transaction(TxnStatement),
    /// CALL p(…), or `SELECT f(…)` of a stored function.
    Call(crate::procedure::CallPlan),
    /// A SELECT with stored-function calls as items of its select list
    /// (`procedure::per_row_calls`): the query without them, its columns, and the output.
    CallsPerRow { query: Arc<QueryPlan>, columns: Arc<Vec<ColumnInfo>>, items: Arc<Vec<crate::procedure::RowItem>> },
    /// `DO code`: the anonymous procedure it runs, compiled.
    Do(Arc<freshet_core::sql::plpgsql::Routine>),
    /// A SELECT that calls stored functions inside its expressions
    /// (`procedure::calls_in_query`).
    CallsInQuery(Arc<CallsInQueryPlan>),
    /// A SELECT without FROM that calls sequence functions (`SELECT nextval('s')`): its
    /// items, evaluated in the session.
    SessionSelect(Vec<freshet_core::sql::expr::Expr>),
    /// `PREPARE name [(types)] AS statement`: planned when it runs, kept by the session.
    /// `arrays[i]`: `$i+1` is an array of `declared[i]` (`PREPARE p(int[])`).
    PrepareSql { name: String, statement: Box<Statement>, declared: Vec<Option<DataType>>, arrays: Vec<bool> },
    /// `EXECUTE name [(arguments)]` of a statement PREPARE made.
    ExecuteSql { name: String, args: Vec<ast::Expr> },
    /// `DEALLOCATE [PREPARE] name | ALL` (`None`: all).
    DeallocateSql(Option<String>),
    /// `CREATE TABLE name AS query`: the table, typed from the query's columns, then the INSERT
    /// of the query's rows into it (`INSERT INTO name (columns) query`).
    CreateTableAs { create: DdlPlan, table: String, if_not_exists: bool, insert: String },
    /// `DECLARE name CURSOR FOR query` (see `cursor`).
    DeclareCursor(Arc<crate::cursor::DeclareCursor>),
    /// FETCH or MOVE.
    FetchCursor(freshet_core::sql::parse::FetchStatement),
    /// `CLOSE name` or `CLOSE ALL` (`None`).
    CloseCursor(Option<String>),
    /// A statement with parameters of array type, run in a form for the arrays' lengths
    /// (`array_params`).
    ArrayForms(Arc<crate::array_params::ArrayForms>),
}

/// A query calling stored functions inside its expressions, planned: the split query, and
/// per call site the query of its argument lists (with their columns), the call and its value's
/// column.
struct CallsInQueryPlan {
    split: crate::procedure::CallsInQuery,
    sites: Vec<CallSitePlan>,
}

/// An UPDATE or DELETE calling stored functions per row, planned (`Session::plan_dml_calls`).
struct DmlCallsPlan {
    /// The query of the target rows' keys (and, with `guarded`, the SET calls' arguments).
    rows: Prepared,
    key_len: usize,
    /// The query of the SET list's calls' arguments, under the row's lock, with its columns.
    lock: Option<(QueryPlan, Vec<ColumnInfo>)>,
    /// The parameters' types of `lock`: the statement's, then the key's.
    lock_types: Vec<DataType>,
    /// Per site: the call, its value's column, its arguments' types.
    calls: Vec<(crate::procedure::CallPlan, Arc<Vec<ColumnInfo>>, Vec<DataType>)>,
    per_row: Arc<OltpPlan>,
    /// `CallsInDml::guarded`, planned.
    guarded: Option<Arc<OltpPlan>>,
}

/// Adds one run's result to a per-row statement's count and returned rows.
fn tally(result: OltpResult, count: &mut u64, returned: &mut Vec<Vec<Value>>) -> Result<()> {
    match result {
        OltpResult::Count(n) => *count += n,
        OltpResult::Rows(mut rows) => {
            *count += rows.len() as u64;
            returned.append(&mut rows);
        }
        OltpResult::TooLarge => return Err(Error::internal("one row's change returned too much")),
    }
    Ok(())
}

struct CallSitePlan {
    /// Planned with the earlier sites' relations rowless: run as it is when it needs none of
    /// them (`CallSite::depends`), planned again with their rows otherwise.
    arguments: QueryPlan,
    argument_columns: Vec<ColumnInfo>,
    call: crate::procedure::CallPlan,
    /// The value's column, or for a call in FROM its rows' columns.
    value: Arc<Vec<ColumnInfo>>,
    /// A call in FROM (`CallSite::relation`).
    relation: bool,
}

impl CallSitePlan {
    /// The types of the site relation's columns: the arguments', then the value's (a call in
    /// FROM: its rows' columns).
    fn cell_types(&self) -> Vec<DataType> {
        let arguments = if self.relation { &[][..] } else { &self.argument_columns[..] };
        arguments.iter().chain(self.value.iter()).map(|c| c.ty).collect()
    }

    /// The site's relation without rows, its columns typed.
    fn rowless(&self) -> ast::Query {
        let types = self.cell_types();
        crate::procedure::values_relation(0, types.len(), &mut |_, c| ast::Expr::Cast {
            kind: ast::CastKind::Cast,
            expr: Box::new(ast::Expr::Value(ast::Value::Null.with_empty_span())),
            data_type: rewrite::sql_type_ast(types[c]),
            array: false,
            format: None,
        })
    }
}

/// A statement that starts or ends a transaction block or works with savepoints.
#[derive(Clone, Debug)]
enum TxnStatement {
    Begin { isolation: Option<Isolation>, read_only: Option<bool> },
    Commit,
    Rollback,
    Savepoint(String),
    RollbackTo(String),
    Release(String),
}

/// A prepared statement: planned once, executed many times.
pub struct Prepared {
    pub sql: String,
    /// Types of `$1..$n` (declared by the client or inferred; TEXT if neither).
    pub param_types: Vec<DataType>,
    /// Result columns, or `None` for statements that return no rows.
    pub columns: Option<Arc<Vec<ColumnInfo>>>,
    statement: Option<Statement>,
    declared: Vec<Option<DataType>>,
    kind: Kind,
    catalog_version: u64,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared").field("sql", &self.sql).field("param_types", &self.param_types).finish()
    }
}

impl Prepared {
    /// A statement planned within another's planning (RETURNING calls, a cursor's query, the
    /// target rows of per-row calls): no text or declared types of its own.
    fn nested(statement: Statement, kind: Kind, columns: Vec<ColumnInfo>, param_types: Vec<DataType>, catalog_version: u64) -> Prepared {
        Prepared { sql: String::new(), param_types, columns: Some(Arc::new(columns)), statement: Some(statement), declared: Vec::new(), kind, catalog_version }
    }

    /// Whether executing it can return rows (a client describes it as RowDescription).
    pub fn returns_rows(&self) -> bool {
        self.columns.is_some()
    }

    /// When parameter `i` (`$1` is 0) is an array, its element type: its value is the array's
    /// text form (`'{1,2,3}'`) or NULL. A statement with array parameters has them
    /// (`array_params`), and so has a call that passes `$n` as it is to a routine's array
    /// parameter (`SELECT f($1)` for `f(ids INT[])`), which takes the text form.
    pub fn array_param(&self, i: usize) -> Option<DataType> {
        match &self.kind {
            Kind::ArrayForms(forms) if forms.is_array(i) => self.param_types.get(i).copied(),
            Kind::Call(call) => call.array_params.iter().find(|(n, _)| *n == i).map(|(_, elem)| *elem),
            _ => None,
        }
    }

    /// The type OIDs of the parameters, as ParameterDescription reports them.
    pub fn param_oids(&self) -> Vec<u32> {
        self.param_types.iter().enumerate().map(|(i, t)| self.array_param(i).map_or_else(|| t.oid(), DataType::array_oid)).collect()
    }

    /// A statement with parameters of array type (`array_params`).
    pub(crate) fn with_array_forms(sql: &str, statement: Statement, param_types: Vec<DataType>, columns: Option<Arc<Vec<ColumnInfo>>>, forms: crate::array_params::ArrayForms) -> Prepared {
        Prepared { sql: sql.to_string(), param_types, columns, statement: Some(statement), declared: Vec::new(), kind: Kind::ArrayForms(Arc::new(forms)), catalog_version: 0 }
    }
}

/// A statement's result collected in memory (the embedded API).
#[derive(Debug)]
pub struct QueryResult {
    pub tag: String,
    pub columns: Vec<ColumnInfo>,
    pub batches: Vec<RecordBatch>,
    pub notices: Vec<Notice>,
}

impl QueryResult {
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }

    /// The rows as values (convenient in tests and small programs).
    pub fn rows(&self) -> Vec<Vec<Value>> {
        self.batches.iter().flat_map(|b| crate::result::batch_rows(b, &self.columns)).collect()
    }
}

/// One client's session.
pub struct Session {
    db: Database,
    id: u32,
    settings: Settings,
    /// The open transaction block, if any.
    txn: Option<SessionTxn>,
    /// Procedures' statements prepared for this session.
    pub(crate) procedures: crate::procedure::SessionProcedures,
    /// currval/lastval, and sequence records to wait for.
    pub(crate) sequences: Arc<SessionSequences>,
    /// Statements prepared by the SQL statement PREPARE, by name (the protocol's prepared
    /// statements are the server's).
    prepared_sql: HashMap<String, Arc<Prepared>>,
    /// Cursors DECLARE opened.
    pub(crate) cursors: crate::cursor::Cursors,
    /// Set while DECLARE runs its cursor's query: an analytical stream it starts is read by
    /// later FETCHes, so `statement_timeout` bounds each FETCH rather than the stream.
    pub(crate) cursor_query: bool,
}

impl Drop for Session {
    /// A session that ends inside a transaction block rolls it back.
    fn drop(&mut self) {
        let activity = &self.db.inner.activity;
        activity.sessions.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(mut txn) = self.txn.take() {
            let engine = &self.db.inner.engine;
            // Nothing to report an error to: a put-back that cannot be logged is lost, as the
            // restart itself would be if the database stopped now.
            let _ = txn.undo_restarts(0, &self.sequences);
            engine.rollback_detached(txn.id);
            txn.release(engine);
            activity.transaction_ended(false);
        }
    }
}

/// A savepoint a routine or a statement sets inside the open block: the engine's mark of the
/// block's rows, and the session's of its notifications and advisory locks.
#[derive(Clone, Debug)]
pub(crate) struct RoutineSavepoint {
    rows: freshet_core::engine::Savepoint,
    session: crate::sequences::SessionMark,
}

impl Session {
    pub(crate) fn new(db: Database, id: u32) -> Self {
        let mut defaults = Vec::new();
        let config = db.config();
        if !config.synchronous_commit {
            defaults.push(("synchronous_commit".to_string(), "off".to_string()));
        }
        if !config.max_staleness.is_zero() {
            defaults.push(("freshet.max_staleness".to_string(), crate::snapshots::format_duration(config.max_staleness)));
        }
        if config.snapshot_mode != crate::snapshots::SnapshotMode::Cow {
            defaults.push(("freshet.snapshot_mode".to_string(), config.snapshot_mode.name().to_string()));
        }
        if config.foreign_keys == freshet_core::sql::ddl::ForeignKeys::Ignore {
            defaults.push(("freshet.foreign_keys".to_string(), "ignore".to_string()));
        }
        let settings = Settings::with_defaults(defaults);
        db.inner.activity.sessions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let locks = crate::advisory::SessionLocks::new(db.inner.advisory.clone(), id);
        let notify = crate::notify::SessionNotify::new(db.inner.channels.clone(), id);
        let sequences = Arc::new(SessionSequences::new(db.inner.engine.clone(), locks, notify));
        Session { db, id, settings, txn: None, procedures: Default::default(), sequences, prepared_sql: HashMap::new(), cursors: Default::default(), cursor_query: false }
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn settings_mut(&mut self) -> &mut Settings {
        &mut self.settings
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    /// The notices (RAISE NOTICE, WARNING, INFO) a procedure or function call sent before the
    /// error it ended with: PostgreSQL sends them before the error, and so does the server.
    /// The last failed call's only; taking them empties the list.
    pub fn take_failed_notices(&mut self) -> Vec<crate::result::Notice> {
        std::mem::take(&mut self.procedures.failed_notices)
    }

    /// The notifications this session has received on the channels it listens on (LISTEN) and
    /// not yet taken, oldest first. A notification arrives when its sender's transaction
    /// commits.
    pub fn notifications(&self) -> Vec<crate::Notification> {
        self.sequences.notify.inbox.take()
    }

    /// The inbox of this session's notifications, to wait for one
    /// ([`crate::notify::Inbox::arrived`]) while the session is idle.
    pub fn notification_inbox(&self) -> Arc<crate::notify::Inbox> {
        self.sequences.notify.inbox.clone()
    }

    pub fn transaction_status(&self) -> TransactionStatus {
        match &self.txn {
            None => TransactionStatus::Idle,
            Some(t) if t.failed => TransactionStatus::Failed,
            Some(_) => TransactionStatus::InBlock,
        }
    }

    /// Marks the open transaction block failed (25P02 until ROLLBACK). `execute` does this
    /// for errors it returns; a caller that streams rows calls it when the stream fails.
    pub fn statement_failed(&mut self) {
        if let Some(t) = &mut self.txn {
            t.failed = true;
        }
    }

    /// A savepoint of the open block, for a PL/pgSQL block with an EXCEPTION section.
    pub(crate) async fn routine_savepoint(&mut self) -> Result<RoutineSavepoint> {
        let engine = self.db.inner.engine.clone();
        let Some(t) = &mut self.txn else { return Err(Error::internal("a routine ran outside a transaction")) };
        Ok(RoutineSavepoint { rows: txn_block::savepoint(&engine, t).await?, session: self.sequences.mark() })
    }

    /// Undoes the open block's changes after `savepoint` (its rows, notifications and
    /// transaction-level advisory locks) and clears its failed state: a handler caught the
    /// error.
    pub(crate) async fn routine_rollback_to(&mut self, savepoint: &RoutineSavepoint) -> Result<()> {
        let engine = self.db.inner.engine.clone();
        let Some(t) = &mut self.txn else { return Err(Error::internal("a routine ran outside a transaction")) };
        self.sequences.rollback_to(savepoint.session);
        txn_block::rollback_to(&engine, t, &savepoint.rows).await
    }

    pub(crate) fn in_block(&self) -> bool {
        self.txn.is_some()
    }

    /// Opens a transaction block with the session's defaults (BEGIN).
    pub(crate) fn begin_block(&mut self) {
        let isolation = self.settings.default_isolation().unwrap_or(Isolation::Serializable);
        let read_only = self.settings.default_read_only();
        self.begin_block_as(isolation, read_only);
    }

    /// Opens a transaction block of this isolation level and access mode.
    pub(crate) fn begin_block_as(&mut self, isolation: Isolation, read_only: bool) {
        self.txn = Some(SessionTxn::new(&self.db.inner.engine, isolation, read_only));
    }

    pub(crate) fn take_block(&mut self) -> Option<SessionTxn> {
        self.txn.take()
    }

    /// Calls a procedure (stored or native) from Rust, with scalar arguments (an array
    /// parameter takes its text form, `'{1,2,3}'`), as `CALL` does: atomically outside a
    /// transaction block, inside the block otherwise. Returns its rows: a native procedure's
    /// result, a function's value as one row, or a set-returning function's rows (with their
    /// columns, as `SELECT * FROM f(…)` returns them).
    pub async fn call(&mut self, name: &str, args: Vec<Value>) -> Result<Vec<Vec<Value>>> {
        let catalog = self.db.inner.engine.catalog();
        let placeholders: Vec<ast::Expr> =
            (1..=args.len()).map(|i| ast::Expr::Value(ast::Value::Placeholder(format!("${i}")).with_empty_span())).collect();
        let mut types: Vec<Option<DataType>> = args.iter().map(Value::data_type).collect();
        let names = vec![None; placeholders.len()];
        let arg_types: Vec<_> = types.iter().map(|t| t.map(freshet_core::sql::plpgsql::PlType::Scalar)).collect();
        let select = crate::procedure::resolve_routine(&catalog, name, "routine", &arg_types, &names)?.is_some_and(|(p, _)| p.routine.function);
        let call = crate::procedure::FunctionCall { name: name.to_string(), args: placeholders, names, from: true, alias: None, column_names: Vec::new() };
        let (plan, columns) = crate::procedure::plan_call(&self.db, &catalog, call, select, &mut types)?;
        let param_types: Vec<DataType> = types.iter().map(|t| t.unwrap_or(DataType::Text)).collect();
        let columns = Some(Arc::new(columns.unwrap_or_else(|| vec![ColumnInfo { name: name.to_string(), ty: DataType::Text }])));
        let result = self.run_call(&plan, &param_types, args, columns.clone()).await;
        let rows = match result {
            Err(e) => Err(e),
            Ok(r) => match r.output {
                crate::result::Output::Rows { columns, rows, .. } => rows.collect_values(&columns).await,
                _ => Ok(vec![]),
            },
        };
        if self.txn.is_none() {
            self.db.inner.activity.transaction_ended(rows.is_ok());
        }
        if rows.is_err() {
            self.statement_failed();
        }
        rows
    }

    /// [`call`](Self::call) for callers outside an async runtime.
    pub fn call_blocking(&mut self, name: &str, args: Vec<Value>) -> Result<Vec<Vec<Value>>> {
        futures::executor::block_on(self.call(name, args))
    }

    /// The time `now()` gives in the next statement: the start of the transaction block, or
    /// outside one, now (the statement is a transaction of its own).
    pub(crate) fn statement_time(&self) -> i64 {
        self.txn.as_ref().map_or_else(now_micros, |t| t.began_at)
    }

    /// The transaction context of the next statement (`None` outside a block).
    /// Runs the query of a [`Kind::CallsPerRow`] and each call for each of its rows, all in
    /// one transaction (the block's, or one of their own): the output rows and the calls'
    /// notices.
    async fn run_calls_per_row(
        &mut self,
        (query, columns, items): (Arc<QueryPlan>, Arc<Vec<ColumnInfo>>, Arc<Vec<crate::procedure::RowItem>>),
        param_types: Vec<DataType>,
        params: Vec<Value>,
        now: i64,
    ) -> Result<(Vec<Vec<Value>>, Vec<Notice>)> {
        self.in_call_transaction(|s| {
            Box::pin(async move {
                let txn = s.statement_txn();
                let rows = s.run_query(&query, &columns, &param_types, params, now, txn).await?;
                let rows = rows.collect_values(&columns).await?;
                s.call_items(rows, &columns, &items).await
            })
        })
        .await
    }

    /// The output rows of `rows` (of `columns`) by `items`: a column of the row, or a call of a
    /// stored function with some of its columns as arguments; with the calls' notices.
    async fn call_items(&mut self, rows: Vec<Vec<Value>>, columns: &[ColumnInfo], items: &[crate::procedure::RowItem]) -> Result<(Vec<Vec<Value>>, Vec<Notice>)> {
        use crate::procedure::RowItem;
        let (mut out, mut notices) = (Vec::with_capacity(rows.len()), Vec::new());
        for row in rows {
            let mut values = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    RowItem::Column(i) => values.push(row[*i].clone()),
                    RowItem::Call { plan, args, column } => {
                        let types: Vec<DataType> = args.iter().map(|i| columns[*i].ty).collect();
                        let result = self.run_call(plan, &types, args.iter().map(|i| row[*i].clone()).collect(), Some(column.clone())).await?;
                        notices.extend(result.notices);
                        let Output::Rows { columns: shape, rows, .. } = result.output else {
                            return Err(Error::internal("a function call without a result"));
                        };
                        let value = rows.collect_values(&shape).await?.into_iter().next().and_then(|r| r.into_iter().next());
                        values.push(value.unwrap_or(Value::Null));
                    }
                }
            }
            out.push(values);
        }
        Ok((out, notices))
    }

    /// Plans a [`Kind::CallsInQuery`]: each site's argument query and call, in order, then
    /// the query, with rowless relations of typed NULLs in place of the calls' values (for the
    /// columns and the parameter types).
    async fn plan_calls_in_query(
        &self,
        split: crate::procedure::CallsInQuery,
        catalog: &freshet_core::catalog::Catalog,
        params: &mut Vec<Option<DataType>>,
    ) -> Result<(CallsInQueryPlan, Vec<ColumnInfo>)> {
        let (planned, _, columns) = self.plan_calls_in_query_with_template(split, catalog, params).await?;
        Ok((planned, columns))
    }

    /// Each call site's argument query and call, in order.
    async fn plan_call_sites(
        &self,
        split: &crate::procedure::CallsInQuery,
        catalog: &freshet_core::catalog::Catalog,
        params: &mut Vec<Option<DataType>>,
    ) -> Result<Vec<CallSitePlan>> {
        let mut sites: Vec<CallSitePlan> = Vec::with_capacity(split.sites.len());
        for (k, site) in split.sites.iter().enumerate() {
            let query = split.arguments(k, &mut |j| sites.get(j).map(CallSitePlan::rowless));
            let statement = Statement::Query(Box::new(query.clone()));
            let planned = self.plan_query(&query, &statement, catalog, params).await;
            let (arguments, argument_columns) = planned.map_err(|e| match e.state {
                SqlState::UndefinedColumn if site.relation.is_some() => {
                    e.with_hint(format!("The arguments of {}() in FROM may not name the columns of other relations (LATERAL).", site.name))
                }
                SqlState::UndefinedColumn if site.nested => e.with_hint(format!(
                    "The arguments of {}() in a subquery may name only that subquery's columns, not an outer query's.",
                    site.name
                )),
                _ => e,
            })?;
            let (call, value) = match &site.relation {
                Some(columns) => {
                    let placeholders = (1..=site.names.len()).map(|n| ast::Expr::Value(ast::Value::Placeholder(format!("${n}")).with_empty_span())).collect();
                    let call = crate::procedure::FunctionCall { name: site.name.clone(), args: placeholders, names: site.names.clone(), from: true, alias: None, column_names: Vec::new() };
                    let (call, _) = crate::procedure::plan_call(&self.db, catalog, call, true, &mut site.argument_types(&argument_columns))?;
                    (call, columns.iter().map(|(name, ty)| ColumnInfo { name: name.clone(), ty: *ty }).collect())
                }
                None => {
                    let (call, value) = crate::procedure::plan_value_call(&self.db, catalog, &site.name, &site.names, site.argument_types(&argument_columns))?;
                    (call, vec![value])
                }
            };
            let relation = site.relation.is_some();
            sites.push(CallSitePlan { arguments, argument_columns, call, value: Arc::new(value), relation });
        }
        Ok(sites)
    }

    /// [`Self::plan_calls_in_query`], also returning the plan of the query with rowless
    /// relations (never run: its columns and types stand for the query's).
    async fn plan_calls_in_query_with_template(
        &self,
        split: crate::procedure::CallsInQuery,
        catalog: &freshet_core::catalog::Catalog,
        params: &mut Vec<Option<DataType>>,
    ) -> Result<(CallsInQueryPlan, QueryPlan, Vec<ColumnInfo>)> {
        let sites = self.plan_call_sites(&split, catalog, params).await?;
        let query = split.query(&mut |j| sites.get(j).map(CallSitePlan::rowless));
        let statement = Statement::Query(Box::new(query.clone()));
        let (template, columns) = self.plan_query(&query, &statement, catalog, params).await?;
        Ok((CallsInQueryPlan { split, sites }, template, columns))
    }

    /// Runs a [`Kind::CallsInQuery`] in one transaction: site by site, its argument query and
    /// the function once per argument list; then the query with those values. The values
    /// reach the queries as parameters after the statement's own.
    async fn run_calls_in_query(&mut self, plan: Arc<CallsInQueryPlan>, param_types: Vec<DataType>, params: Vec<Value>, now: i64) -> Result<(Vec<Vec<Value>>, Vec<Notice>)> {
        self.in_call_transaction(|s| {
            Box::pin(async move {
                let catalog = s.catalog();
                let mut notices = Vec::new();
                let (mut types, mut values) = (param_types.clone(), params.clone());
                // Per site done, its relation with its rows.
                let mut relations: Vec<ast::Query> = Vec::with_capacity(plan.sites.len());
                for (k, site) in plan.sites.iter().enumerate() {
                    let rows = if plan.split.sites[k].depends {
                        let query = plan.split.arguments(k, &mut |j| relations.get(j).cloned());
                        s.run_values_query(query, &catalog, &types, values.clone(), now).await?.1
                    } else {
                        let txn = s.statement_txn();
                        let rows = s.run_query(&site.arguments, &site.argument_columns, &param_types, params.clone(), now, txn).await?;
                        rows.collect_values(&site.argument_columns).await?
                    };
                    let arg_types: Vec<DataType> = site.argument_columns.iter().map(|c| c.ty).collect();
                    let cell_types = site.cell_types();
                    let first = values.len();
                    let mut count = 0;
                    for row in rows {
                        let result = s.run_call(&site.call, &arg_types, row.clone(), Some(site.value.clone())).await?;
                        notices.extend(result.notices);
                        let Output::Rows { columns: shape, rows, .. } = result.output else {
                            return Err(Error::internal("a function call without a result"));
                        };
                        let rows = rows.collect_values(&shape).await?;
                        if site.relation {
                            // The function's rows are the relation's.
                            for r in rows {
                                types.extend(cell_types.iter().copied());
                                values.extend(r);
                                count += 1;
                            }
                        } else {
                            let value = rows.into_iter().next().and_then(|r| r.into_iter().next()).unwrap_or(Value::Null);
                            types.extend(cell_types.iter().copied());
                            values.extend(row);
                            values.push(value);
                            count += 1;
                        }
                    }
                    if count == 0 {
                        types.extend(cell_types.iter().copied());
                        values.extend(std::iter::repeat_n(Value::Null, cell_types.len()));
                    }
                    let width = cell_types.len();
                    relations.push(crate::procedure::values_relation(count, width, &mut |r, c| {
                        ast::Expr::Value(ast::Value::Placeholder(format!("${}", first + r * width + c + 1)).with_empty_span())
                    }));
                }
                let query = plan.split.query(&mut |j| relations.get(j).cloned());
                let (_, rows) = s.run_values_query(query, &catalog, &types, values, now).await?;
                Ok((rows, notices))
            })
        })
        .await
    }

    /// Plans and runs a query whose parameters have `types` (declared to the planner).
    async fn run_values_query(
        &mut self,
        query: ast::Query,
        catalog: &freshet_core::catalog::Catalog,
        types: &[DataType],
        values: Vec<Value>,
        now: i64,
    ) -> Result<(Vec<ColumnInfo>, Vec<Vec<Value>>)> {
        let statement = Statement::Query(Box::new(query.clone()));
        let mut declared: Vec<Option<DataType>> = types.iter().copied().map(Some).collect();
        let (planned, columns) = self.plan_query(&query, &statement, catalog, &mut declared).await?;
        let txn = self.statement_txn();
        let rows = self.run_query(&planned, &columns, types, values, now, txn).await?;
        let rows = rows.collect_values(&columns).await?;
        Ok((columns, rows))
    }

    fn statement_txn(&mut self) -> Option<TxnCtx> {
        let engine = &self.db.inner.engine;
        self.txn.as_mut().map(|t| t.statement_ctx(engine))
    }

    /// The catalog this session's statements see: the database's, with the view changes of
    /// its transaction block.
    fn catalog(&self) -> Arc<freshet_core::catalog::Catalog> {
        let global = self.db.inner.engine.catalog();
        match &self.txn {
            Some(t) if !t.views.is_empty() => Arc::new(views::block_catalog(&global, &t.views, t.view_epoch)),
            _ => global,
        }
    }

    /// The version of [`catalog`](Self::catalog), without building it.
    fn catalog_version(&self) -> u64 {
        let global = self.db.inner.engine.catalog().version;
        match &self.txn {
            Some(t) if !t.views.is_empty() => views::block_version(global, t.view_epoch),
            _ => global,
        }
    }

    /// Parses SQL text into statements.
    pub fn parse(&self, sql: &str) -> Result<Vec<Statement>> {
        self.failed_before_running(freshet_core::sql::parse(sql))
    }

    /// Prepares a single statement (the extended protocol's Parse). `declared` holds the
    /// parameter types the client gave (`None`: let the server infer).
    pub async fn prepare(&mut self, sql: &str, declared: &[Option<DataType>]) -> Result<Arc<Prepared>> {
        let mut statements = self.parse(sql)?;
        match statements.len() {
            0 => Ok(Arc::new(self.empty(sql))),
            1 => self.prepare_statement(statements.remove(0), sql, declared).await,
            _ => Err(Error::syntax("cannot insert multiple commands into a prepared statement")),
        }
    }

    /// A statement that failed before it could run (in parsing or planning) ends the
    /// transaction it would have been, outside a block, as a rollback.
    fn failed_before_running<T>(&self, result: Result<T>) -> Result<T> {
        if result.is_err() && self.txn.is_none() {
            self.db.inner.activity.transaction_ended(false);
        }
        result
    }

    fn empty(&self, sql: &str) -> Prepared {
        Prepared {
            sql: sql.to_string(),
            param_types: vec![],
            columns: None,
            statement: None,
            declared: vec![],
            kind: Kind::Empty,
            catalog_version: 0,
        }
    }

    /// Prepares an already parsed statement.
    pub async fn prepare_statement(&mut self, statement: Statement, sql: &str, declared: &[Option<DataType>]) -> Result<Arc<Prepared>> {
        self.prepare_typed(statement, sql, declared, &[]).await
    }

    /// [`Self::prepare_statement`] with the parameters the client declared as arrays
    /// (`arrays[i]`: `$i+1` is an array of `declared[i]`, as `int4[]` is of integers).
    pub async fn prepare_typed(&mut self, statement: Statement, sql: &str, declared: &[Option<DataType>], arrays: &[bool]) -> Result<Arc<Prepared>> {
        if (sql.contains('$') || arrays.contains(&true)) && crate::array_params::applies(&statement) {
            let (found, count) = self.failed_before_running(freshet_core::sql::array_params::find(&statement, declared, arrays))?;
            if !found.is_empty() {
                return Box::pin(self.prepare_array_forms(statement, sql, declared, found, count)).await;
            }
        }
        let catalog = self.catalog();
        let mut params: Vec<Option<DataType>> = declared.to_vec();
        let planned = self.plan(&statement, &catalog, &mut params).await;
        let (kind, columns) = self.failed_before_running(planned)?;
        let param_types = params.iter().map(|t| t.unwrap_or(DataType::Text)).collect();
        Ok(Arc::new(Prepared {
            sql: sql.to_string(),
            param_types,
            columns: columns.map(Arc::new),
            statement: Some(statement),
            declared: declared.to_vec(),
            kind,
            catalog_version: catalog.version,
        }))
    }

    async fn plan(
        &self,
        statement: &Statement,
        catalog: &freshet_core::catalog::Catalog,
        params: &mut Vec<Option<DataType>>,
    ) -> Result<(Kind, Option<Vec<ColumnInfo>>)> {
        if let Statement::CreateView(cv) = statement {
            return Ok((Kind::Ddl(self.plan_create_view(cv, catalog).await?), None));
        }
        // PREPARE keeps its statement as written: its plan expands views again when a view
        // changed since.
        let written = statement;
        let expanded;
        let statement = if catalog.has_views() {
            views::check_not_written(statement, catalog)?;
            let mut s = statement.clone();
            views::expand(&mut s, catalog)?;
            expanded = s;
            &expanded
        } else {
            statement
        };
        if let Statement::Query(q) = statement
            && q.with.as_ref().is_some_and(|w| w.cte_tables.iter().any(|c| matches!(c.query.body.as_ref(), ast::SetExpr::Insert(_) | ast::SetExpr::Update(_) | ast::SetExpr::Delete(_))))
        {
            return Err(Error::unsupported("INSERT, UPDATE or DELETE inside WITH"));
        }
        Ok(match statement {
            Statement::Query(q) if let Some(call) = crate::procedure::select_function_call(q, catalog) => {
                let (call, columns) = crate::procedure::plan_call(&self.db, catalog, call, true, params)?;
                (Kind::Call(call), columns)
            }
            Statement::Query(q) if let Some(split) = crate::procedure::per_row_calls(q, catalog) => {
                let inner = Statement::Query(Box::new(split.query.clone()));
                let (query, columns) = self.plan_query(&split.query, &inner, catalog, params).await?;
                let (items, output) = crate::procedure::per_row_layout(&self.db, catalog, &split, &columns)?;
                (Kind::CallsPerRow { query: Arc::new(query), columns: Arc::new(columns), items: Arc::new(items) }, Some(output))
            }
            Statement::Query(q) if let Some(split) = crate::procedure::calls_in_query(q, catalog)? => {
                let (plan, columns) = self.plan_calls_in_query(split, catalog, params).await?;
                (Kind::CallsInQuery(Arc::new(plan)), Some(columns))
            }
            Statement::Query(q) if let Some(name) = crate::procedure::stored_function_in_query(q, catalog) => {
                return Err(Error::unsupported(format!("function {name}() in this place of a query")).with_hint(
                    "A stored function may be called in FROM, the select list, WHERE, GROUP BY, HAVING and ORDER BY of a SELECT (also in subqueries and WITH queries); not in JOIN … ON, DISTINCT ON, a VALUES list or the ORDER BY of a UNION.",
                ));
            }
            Statement::Call(f) => {
                let name = f.name.0.last().and_then(|p| p.as_ident()).map(fold_ident).ok_or_else(|| Error::syntax("CALL needs a procedure name"))?;
                let (args, names) = crate::procedure::call_arguments(&f.args).ok_or_else(|| Error::unsupported("this form of argument in CALL"))?;
                let call = crate::procedure::FunctionCall { name, args, names, from: false, alias: None, column_names: Vec::new() };
                let (call, columns) = crate::procedure::plan_call(&self.db, catalog, call, false, params)?;
                (Kind::Call(call), columns)
            }
            Statement::Pragma { name, value: Some(v), .. } if name.to_string() == freshet_core::sql::parse::ALTER_SEQUENCE_PRAGMA => {
                let ast::Value::SingleQuotedString(text) = &v.value else { return Err(Error::internal("ALTER SEQUENCE without text")) };
                let (name, if_exists, action) = freshet_core::sql::parse::alter_sequence(text)?;
                (Kind::AlterSequence(name, if_exists, action), None)
            }
            Statement::Pragma { name, value: Some(v), .. } if name.to_string() == freshet_core::sql::parse::ADD_IDENTITY_PRAGMA => {
                let ast::Value::SingleQuotedString(text) = &v.value else { return Err(Error::internal("ADD GENERATED without text")) };
                let (sequence, sql) = text.split_once('\0').ok_or_else(|| Error::internal("ADD GENERATED without a sequence name"))?;
                let parsed = freshet_core::sql::parse::parse(sql)?;
                let [Statement::AlterTable(at)] = parsed.as_slice() else {
                    return Err(Error::syntax("SEQUENCE NAME belongs in ALTER TABLE … ADD GENERATED … AS IDENTITY (…)"));
                };
                let mut plan = ddl::plan_alter_table(at, self.settings.foreign_keys())?;
                match &mut plan {
                    DdlPlan::AddIdentity { name, .. } => *name = Some(sequence.to_string()),
                    _ => return Err(Error::unsupported("SEQUENCE NAME outside ADD GENERATED … AS IDENTITY")),
                }
                (Kind::Ddl(plan), None)
            }
            Statement::Pragma { name, value: Some(v), .. } if name.to_string() == freshet_core::sql::parse::DO_PRAGMA => {
                let ast::Value::SingleQuotedString(text) = &v.value else { return Err(Error::internal("DO without text")) };
                let source = freshet_core::sql::plpgsql::parser::do_as_procedure(text)?;
                (Kind::Do(Arc::new(freshet_core::sql::plpgsql::compile(&source)?)), None)
            }
            Statement::Pragma { name, value: Some(v), .. } if matches!(name.to_string().as_str(), freshet_core::sql::parse::CREATE_ROUTINE_PRAGMA | freshet_core::sql::parse::DROP_ROUTINE_PRAGMA) => {
                let ast::Value::SingleQuotedString(text) = &v.value else { return Err(Error::internal("routine statement without text")) };
                let plan = if name.to_string() == freshet_core::sql::parse::CREATE_ROUTINE_PRAGMA {
                    DdlPlan::CreateProcedure { routine: Arc::new(freshet_core::sql::plpgsql::compile(text)?) }
                } else {
                    let d = freshet_core::sql::plpgsql::parser::parse_drop(text)?;
                    DdlPlan::DropProcedures { function: d.function, names: d.names, if_exists: d.if_exists }
                };
                (Kind::Ddl(plan), None)
            }
            Statement::Query(q) if let Some((items, columns)) = crate::sequences::session_select(q, params)? => (Kind::SessionSelect(items), Some(columns)),
            Statement::Query(q) if let Some(args) = set_config_call(q) => {
                // Parameters are the name and value (text) and is_local (boolean).
                for (k, a) in args.iter().enumerate() {
                    if let Some(i) = placeholder(a) {
                        if params.len() <= i {
                            params.resize(i + 1, None);
                        }
                        params[i].get_or_insert(if k == 2 { DataType::Bool } else { DataType::Text });
                    }
                }
                (Kind::SetConfig(args), Some(vec![ColumnInfo { name: "set_config".into(), ty: DataType::Text }]))
            }
            Statement::AlterTable(at) if matches!(at.operations.as_slice(), [ast::AlterTableOperation::OwnerTo { .. }]) => (Kind::Utility, None),
            Statement::Query(q) if crate::sequences::calls_sequence_functions(q.as_ref()) => {
                let (q, drawn, names) = crate::sequences::draw_for_select(q, params)?;
                let stmt = Statement::Query(Box::new(q.clone()));
                let (mut query, mut columns) = self.plan_query(&q, &stmt, catalog, params).await?;
                for (i, _) in &drawn {
                    if let (Some(column), Some(name)) = (columns.get_mut(*i), names.get(*i)) {
                        column.name = name.clone();
                    }
                }
                query.drawn = drawn;
                (Kind::Query(query), Some(columns))
            }
            Statement::Query(q) if let Some((items, columns)) = crate::sequences::constant_select(q, params) => (Kind::SessionSelect(items), Some(columns)),
            Statement::Query(q) => {
                let (query, columns) = self.plan_query(q, statement, catalog, params).await?;
                (Kind::Query(query), Some(columns))
            }
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) if let Some((inner, split)) = crate::procedure::returning_calls(statement, catalog) => {
                let (kind, columns) = self.plan_boxed(&inner, catalog, params).await?;
                let columns = columns.ok_or_else(|| Error::internal("RETURNING without columns"))?;
                let (items, output) = crate::procedure::per_row_layout(&self.db, catalog, &split, &columns)?;
                let param_types = params.iter().map(|t| t.unwrap_or(DataType::Text)).collect();
                let inner = Prepared::nested(inner, kind, columns.clone(), param_types, catalog.version);
                (Kind::ReturningCalls { inner: Arc::new(inner), columns: Arc::new(columns), items: Arc::new(items) }, Some(output))
            }
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_)
                if let Some(calls) = crate::procedure::dml_calls(statement, catalog, params.len())? =>
            {
                let columns = dml_returning_columns(statement, catalog, params)?;
                match calls {
                    crate::procedure::DmlCalls::First(wrapped) => (Kind::DmlWithSubqueries { verb: verb_of(statement), statement: Arc::new(wrapped) }, columns),
                    crate::procedure::DmlCalls::PerRow(split) => {
                        // Planned again when it runs; now for its parameters' types and errors.
                        Box::pin(self.plan_dml_calls(&split, catalog, params)).await?;
                        (Kind::DmlCalls(Arc::new(split)), columns)
                    }
                }
            }
            Statement::Pragma { name, value: Some(v), .. } if name.to_string() == freshet_core::sql::parse::INSERT_OVERRIDING_PRAGMA => {
                let ast::Value::SingleQuotedString(text) = &v.value else { return Err(Error::internal("OVERRIDING without text")) };
                let (which, sql) = text.split_once('\0').ok_or_else(|| Error::internal("OVERRIDING without its statement"))?;
                let overriding = if which == "USER" { plan::Overriding::User } else { plan::Overriding::System };
                let mut parsed = freshet_core::sql::parse::parse(sql)?;
                let (Some(mut inner @ Statement::Insert(_)), true) = (parsed.pop(), parsed.is_empty()) else {
                    return Err(Error::syntax("OVERRIDING … VALUE belongs in INSERT, after the column list"));
                };
                // What `plan` does with every statement, here with the statement inside.
                if catalog.has_views() {
                    views::check_not_written(&inner, catalog)?;
                    views::expand(&mut inner, catalog)?;
                }
                let Statement::Insert(insert) = &inner else { return Err(Error::internal("an INSERT became another statement")) };
                self.plan_insert_kind(insert, catalog, params, Some(overriding)).await?
            }
            Statement::Insert(insert) if has_values_subqueries(insert) => {
                // Parameters inside subqueries are not typed here; they default to text.
                (Kind::DmlWithSubqueries { verb: "INSERT", statement: Arc::new(statement.clone()) }, dml_returning_columns(statement, catalog, params)?)
            }
            Statement::Insert(insert) => self.plan_insert_kind(insert, catalog, params, None).await?,
            Statement::Update(u) if crate::update_from::applies(u) => {
                // With parameters or RETURNING, planned as it will run, for its parameters'
                // types (those its query and its one-row UPDATE give them) and its RETURNING
                // columns; otherwise there is nothing to learn before it runs (and plans).
                let mut highest = params.len();
                let _ = ast::visit_expressions(u, |e: &ast::Expr| {
                    highest = highest.max(placeholder(e).map_or(0, |i| i + 1));
                    std::ops::ControlFlow::<()>::Continue(())
                });
                params.resize(highest, None);
                let rewritten = crate::update_from::rewrite(u, catalog, params.len())?;
                let columns = if params.is_empty() && !rewritten.returning {
                    None
                } else {
                    let planned = self.plan_update_from(&rewritten, catalog, params).await?;
                    planned.update.returning_columns().filter(|_| rewritten.returning).map(returning_columns)
                };
                (Kind::UpdateFrom, columns)
            }
            Statement::Delete(d) if d.using.is_some() => {
                // Checked now; rewritten again when it runs, against that catalog.
                crate::update_from::delete_using(d, catalog)?;
                (Kind::DmlWithSubqueries { verb: "DELETE", statement: Arc::new(statement.clone()) }, dml_returning_columns(statement, catalog, params)?)
            }
            Statement::Update(_) | Statement::Delete(_) => {
                let mut probe = statement.clone();
                if !rewrite::find_subqueries(&mut probe).is_empty() {
                    // Parameters inside subqueries are not typed here; they default to text.
                    let verb = if matches!(statement, Statement::Update(_)) { "UPDATE" } else { "DELETE" };
                    (Kind::DmlWithSubqueries { verb, statement: Arc::new(statement.clone()) }, dml_returning_columns(statement, catalog, params)?)
                } else {
                    let plan = plan_dml(statement, catalog, params)?;
                    let returning = match &plan {
                        OltpPlan::Update(u) => u.returning.as_ref(),
                        OltpPlan::Delete(d) => d.returning.as_ref(),
                        OltpPlan::Select(_) => None,
                    };
                    let columns = returning.map(returning_columns);
                    (Kind::Dml(Arc::new(plan)), columns)
                }
            }
            Statement::CreateTable(ct) if ct.query.is_some() => (self.plan_create_table_as(ct, catalog, params).await?, None),
            Statement::CreateTable(ct) => (Kind::Ddl(ddl::plan_create_table(ct, self.settings.foreign_keys())?), None),
            Statement::CreateSequence { temporary, if_not_exists, name, data_type, sequence_options, owned_by } => (
                Kind::Ddl(ddl::plan_create_sequence(name, *if_not_exists, *temporary, data_type.as_ref(), sequence_options, owned_by.as_ref())?),
                None,
            ),
            Statement::CreateIndex(ci) => (Kind::Ddl(ddl::plan_create_index(ci)?), None),
            Statement::Drop { object_type, if_exists, names, cascade, .. } => (Kind::Ddl(ddl::plan_drop(object_type, names, *if_exists, *cascade)?), None),
            Statement::AlterTable(at) => (Kind::Ddl(ddl::plan_alter_table(at, self.settings.foreign_keys())?), None),
            Statement::Comment { object_type, object_name, comment, .. } => (Kind::Ddl(ddl::plan_comment(object_type, object_name, comment)?), None),
            Statement::Truncate(t) => (Kind::Ddl(ddl::plan_truncate(t)?), None),
            Statement::Copy { source, to, target, options, legacy_options, values } => {
                if !values.is_empty() {
                    return Err(Error::unsupported("inline COPY data"));
                }
                let format = CopyFormat::from_options(options, legacy_options)?;
                match (to, target) {
                    (false, ast::CopyTarget::Stdin) => {
                        let ast::CopySource::Table { table_name, columns } = source else {
                            return Err(Error::syntax("COPY FROM needs a table"));
                        };
                        let table = catalog.require_table(&user_relation(table_name)?)?.clone();
                        let columns = copy_columns(&table, columns)?;
                        (Kind::CopyFrom { table, columns, format }, None)
                    }
                    (true, ast::CopyTarget::Stdout) => {
                        let query = match source {
                            ast::CopySource::Query(q) => q.clone(),
                            ast::CopySource::Table { table_name, columns } => {
                                // COPY view TO: the view's rows, as its query gives them.
                                let mut stmt = Statement::Query(Box::new(copy_table_query(table_name, columns)?));
                                views::expand(&mut stmt, catalog)?;
                                let Statement::Query(q) = stmt else { return Err(Error::internal("COPY's query is not a query")) };
                                q
                            }
                        };
                        let stmt = Statement::Query(query.clone());
                        let (plan, columns) = self.plan_query(&query, &stmt, catalog, params).await?;
                        (Kind::CopyTo { query: plan, format }, Some(columns))
                    }
                    _ => return Err(Error::unsupported("COPY to or from a file or program (use STDIN/STDOUT, e.g. psql's \\copy)")),
                }
            }
            Statement::Explain { statement: inner, .. } if crate::procedure::calls_stored_functions(inner, catalog) => {
                return Err(Error::unsupported("EXPLAIN of a statement that calls stored functions")
                    .with_hint("The session calls them around the planned statement; EXPLAIN the statement without the calls."));
            }
            Statement::Explain { statement: inner, analyze: true, .. } if is_dml(inner) => {
                let (kind, columns) = self.plan_boxed(inner, catalog, params).await?;
                let lines = Box::pin(self.describe_dml(inner, &kind, catalog, params)).await?;
                let param_types = params.iter().map(|t| t.unwrap_or(DataType::Text)).collect();
                let inner = Prepared { sql: String::new(), param_types, columns: columns.map(Arc::new), statement: Some(Statement::clone(inner)), declared: Vec::new(), kind, catalog_version: catalog.version };
                (Kind::ExplainAnalyzeDml { inner: Arc::new(inner), lines }, Some(vec![ColumnInfo { name: "QUERY PLAN".into(), ty: DataType::Text }]))
            }
            Statement::Explain { statement: inner, analyze: true, .. } => {
                let Statement::Query(q) = inner.as_ref() else { return Err(Error::unsupported("EXPLAIN ANALYZE of anything but a query, INSERT, UPDATE or DELETE")) };
                let (plan, _) = self.plan_query(q, inner, catalog, params).await?;
                (Kind::ExplainAnalyze(plan), Some(vec![ColumnInfo { name: "QUERY PLAN".into(), ty: DataType::Text }]))
            }
            Statement::Explain { statement: inner, .. } => {
                let lines = self.explain(inner, catalog, params).await?;
                (Kind::Explain(lines), Some(vec![ColumnInfo { name: "QUERY PLAN".into(), ty: DataType::Text }]))
            }
            Statement::ShowVariable { variable } => {
                let name = show_name(variable);
                let columns = if name == "all" {
                    ["name", "setting", "description"].iter().map(|n| ColumnInfo { name: n.to_string(), ty: DataType::Text }).collect()
                } else {
                    self.show(&name)?;
                    vec![ColumnInfo { name: show_column(&name).to_string(), ty: DataType::Text }]
                };
                (Kind::Utility, Some(columns))
            }
            Statement::Declare { stmts } => Box::pin(self.plan_declare(stmts, catalog, params)).await?,
            Statement::Pragma { name, value: Some(v), .. } if name.to_string() == freshet_core::sql::parse::FETCH_PRAGMA => {
                let ast::Value::SingleQuotedString(text) = &v.value else { return Err(Error::internal("FETCH without text")) };
                let fetch = freshet_core::sql::parse::fetch_statement(text)?;
                // FETCH returns the cursor's columns: it must be open when FETCH is planned.
                let columns = self.cursors.columns(&fetch.cursor)?;
                (Kind::FetchCursor(fetch.clone()), (!fetch.move_only).then(|| columns.to_vec()))
            }
            Statement::Close { cursor } => (
                Kind::CloseCursor(match cursor {
                    ast::CloseCursor::All => None,
                    ast::CloseCursor::Specific { name } => Some(fold_ident(name)),
                }),
                None,
            ),
            Statement::Prepare { .. } | Statement::Execute { .. } | Statement::Deallocate { .. } | Statement::CreateExtension(_)
                if let Some(planned) = self.plan_session_statement(written)? =>
            {
                planned
            }
            // The public schema exists; Freshet has no other.
            Statement::CreateSchema { schema_name: ast::SchemaName::Simple(name), if_not_exists: true, .. }
                if name.to_string().eq_ignore_ascii_case("public") =>
            {
                (Kind::Utility, None)
            }
            Statement::Set(_)
            | Statement::Reset(_)
            | Statement::Grant(_)
            | Statement::Revoke(_)
            | Statement::CreateRole(_)
            | Statement::AlterRole { .. }
            | Statement::LISTEN { .. }
            | Statement::UNLISTEN { .. }
            | Statement::NOTIFY { .. }
            | Statement::Discard { .. }
            | Statement::Vacuum(_)
            | Statement::Analyze(_) => (Kind::Utility, None),
            Statement::Pragma { name, value: None, .. } if name.to_string() == "checkpoint" => (Kind::Checkpoint, None),
            Statement::Pragma { name, .. } if name.to_string() == freshet_core::sql::parse::SET_CONSTRAINTS_PRAGMA => (Kind::Utility, None),
            Statement::Pragma { name, .. } if name.to_string() == freshet_core::sql::parse::ALTER_ROUTINE_PRAGMA => (Kind::Utility, None),
            Statement::StartTransaction { modes, .. } => {
                let (isolation, read_only) = txn_block::modes(modes);
                (Kind::Transaction(TxnStatement::Begin { isolation, read_only }), None)
            }
            Statement::Commit { chain: false, .. } => (Kind::Transaction(TxnStatement::Commit), None),
            Statement::Rollback { chain: false, savepoint: None } => (Kind::Transaction(TxnStatement::Rollback), None),
            Statement::Rollback { chain: false, savepoint: Some(name) } => {
                (Kind::Transaction(TxnStatement::RollbackTo(fold_ident(name))), None)
            }
            Statement::Savepoint { name } => (Kind::Transaction(TxnStatement::Savepoint(fold_ident(name))), None),
            Statement::ReleaseSavepoint { name } => (Kind::Transaction(TxnStatement::Release(fold_ident(name))), None),
            other => return Err(Error::unsupported(statement_name(other))),
        })
    }

    /// The plan of an INSERT (with its `OVERRIDING` clause, if it had one): the rows' source is
    /// VALUES, or a query planned as any other.
    async fn plan_insert_kind(
        &self,
        insert: &ast::Insert,
        catalog: &freshet_core::catalog::Catalog,
        params: &mut Vec<Option<DataType>>,
        overriding: Option<plan::Overriding>,
    ) -> Result<(Kind, Option<Vec<ColumnInfo>>)> {
        let mut plan = plan::plan_insert_overriding(catalog, insert, params, overriding)?;
        let mut calls = None;
        let source = match &plan.source {
            InsertSource::Query(q) => {
                let (q, drawn) = crate::sequences::draw_in_session(q, params)?;
                let (mut query, columns) = match crate::procedure::calls_in_query(&q, catalog)? {
                    Some(split) => {
                        let (planned, template, columns) = self.plan_calls_in_query_with_template(split, catalog, params).await?;
                        calls = Some(Arc::new(planned));
                        (template, columns)
                    }
                    None => {
                        let stmt = Statement::Query(Box::new(q.clone()));
                        self.plan_query(&q, &stmt, catalog, params).await?
                    }
                };
                // Without a column list, the query's columns fill the table's first columns and
                // the others take their defaults, as in PostgreSQL.
                if insert.columns.is_empty() && columns.len() < plan.columns.len() {
                    plan.columns.truncate(columns.len());
                }
                query.drawn = drawn;
                if overriding == Some(plan::Overriding::User) {
                    query.drawn.extend(plan::user_overridden(&plan));
                }
                // A bare NULL in the query's select list has no type of its own yet (Arrow's
                // Null): as in PostgreSQL it takes the target column's.
                let untyped: Vec<bool> = match query.olap.get() {
                    Some(olap) => olap.schema.fields().iter().map(|f| f.data_type().is_null()).collect(),
                    None => vec![false; columns.len()],
                };
                check_insert_source(&plan, &columns, &untyped)?;
                Some(Arc::new((query, columns)))
            }
            InsertSource::Values(_) => None,
        };
        let columns = plan.returning.as_ref().map(returning_columns);
        Ok((Kind::Insert { plan, source, calls }, columns))
    }

    /// `CREATE TABLE name [(column names)] AS query`: the query is planned to learn its
    /// columns' names and types (a bare NULL is `text`, as in PostgreSQL); the table gets those
    /// columns, without constraints, and the query's rows.
    async fn plan_create_table_as(
        &self,
        ct: &ast::CreateTable,
        catalog: &freshet_core::catalog::Catalog,
        params: &mut Vec<Option<DataType>>,
    ) -> Result<Kind> {
        let query = ct.query.as_deref().ok_or_else(|| Error::internal("CREATE TABLE … AS without its query"))?;
        if ct.columns.iter().any(|c| !matches!(c.data_type, ast::DataType::Unspecified) || !c.options.is_empty())
            || !ct.constraints.is_empty()
        {
            return Err(Error::syntax("CREATE TABLE … AS takes column names, not column definitions or constraints"));
        }
        let stmt = Statement::Query(Box::new(query.clone()));
        // Planned as a query of its own (which may call stored functions) for its columns.
        let (_, columns) = self.plan_boxed(&stmt, catalog, params).await?;
        let columns = columns.ok_or_else(|| Error::internal("CREATE TABLE … AS: a query without columns"))?;
        if !params.is_empty() {
            return Err(Error::unsupported("parameters in CREATE TABLE … AS"));
        }
        if ct.columns.len() > columns.len() {
            return Err(Error::syntax("too many column names were specified"));
        }
        let names: Vec<String> =
            columns.iter().enumerate().map(|(i, c)| ct.columns.get(i).map_or_else(|| c.name.clone(), |n| fold_ident(&n.name))).collect();
        let quoted = |n: &String| ast::Ident::with_quote('"', n.as_str()).to_string();
        let definitions: Vec<String> = names.iter().zip(&columns).map(|(n, c)| format!("{} {}", quoted(n), c.ty)).collect();
        let create = format!("CREATE TABLE {} ({})", ct.name, definitions.join(", "));
        let plain = match freshet_core::sql::parse(&create)?.pop() {
            Some(Statement::CreateTable(plain)) => plain,
            _ => return Err(Error::internal("CREATE TABLE … AS: the table's definition did not parse")),
        };
        let list: Vec<String> = names.iter().map(quoted).collect();
        Ok(Kind::CreateTableAs {
            create: ddl::plan_create_table(&plain, self.settings.foreign_keys())?,
            table: user_relation(&ct.name)?,
            if_not_exists: ct.if_not_exists,
            insert: format!("INSERT INTO {} ({}) {query}", ct.name, list.join(", ")),
        })
    }

    async fn plan_query(
        &self,
        query: &ast::Query,
        statement: &Statement,
        catalog: &freshet_core::catalog::Catalog,
        params: &mut Vec<Option<DataType>>,
    ) -> Result<(QueryPlan, Vec<ColumnInfo>)> {
        if let Some(short) = plan::plan_select(catalog, query, params)? {
            let columns = short.columns.iter().map(|c| ColumnInfo { name: c.name.clone(), ty: c.ty }).collect();
            let plan = QueryPlan { short: Some(Arc::new(OltpPlan::Select(short))), olap: OnceLock::new(), statement: statement.clone(), drawn: Vec::new() };
            return Ok((plan, columns));
        }
        let olap = self.plan_olap(statement, params).await?;
        let names = output_names(query, &olap);
        let columns = olap
            .schema
            .fields()
            .iter()
            .zip(names)
            .map(|(f, name)| ColumnInfo { name, ty: sql_type(f) })
            .collect();
        let cell = OnceLock::new();
        let _ = cell.set(olap);
        Ok((QueryPlan { short: None, olap: cell, statement: statement.clone(), drawn: Vec::new() }, columns))
    }

    /// CREATE VIEW: its query is planned (through the views it names) to check it and type its
    /// columns; the stored text is the query as written.
    async fn plan_create_view(&self, cv: &ast::CreateView, catalog: &freshet_core::catalog::Catalog) -> Result<DdlPlan> {
        if cv.materialized {
            return Err(Error::unsupported("materialized views"));
        }
        if cv.temporary {
            return Err(Error::unsupported("temporary views"));
        }
        if cv.or_alter || cv.secure || cv.if_not_exists || cv.to.is_some() || cv.params.is_some() || !matches!(cv.options, ast::CreateTableOptions::None) {
            return Err(Error::unsupported("CREATE VIEW with options"));
        }
        let name = user_relation(&cv.name)?;
        let mut statement = Statement::Query(cv.query.clone());
        views::expand(&mut statement, catalog)?;
        let mut params = Vec::new();
        let Statement::Query(expanded) = &statement else { return Err(Error::internal("a view query is not a query")) };
        // A query that calls stored functions is planned as it will run (with its calls'
        // values as relations) for its columns.
        let (mut names, types): (Vec<String>, Vec<DataType>) = match crate::procedure::calls_in_query(expanded, catalog)? {
            Some(split) => self.plan_calls_in_query(split, catalog, &mut params).await?.1.into_iter().map(|c| (c.name, c.ty)).unzip(),
            None => {
                let olap = self.plan_olap(&statement, &mut params).await?;
                (output_names(expanded, &olap), olap.schema.fields().iter().map(|f| sql_type(f)).collect())
            }
        };
        if !params.is_empty() {
            return Err(Error::new(SqlState::UndefinedParameter, "there is no parameter $1"));
        }
        if cv.columns.len() > names.len() {
            return Err(Error::syntax("CREATE VIEW specifies more column names than columns"));
        }
        for (slot, c) in names.iter_mut().zip(&cv.columns) {
            *slot = fold_ident(&c.name);
        }
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(Error::new(SqlState::DuplicateColumn, format!("column \"{n}\" specified more than once")));
            }
        }
        let columns = names.into_iter().zip(types).collect();
        let def = freshet_core::catalog::ViewDef { id: 0, name, columns, query: cv.query.to_string(), depends_on: views::dependencies(&cv.query, catalog) };
        Ok(DdlPlan::CreateView { def, or_replace: cv.or_replace })
    }

    async fn plan_olap(&self, statement: &Statement, params: &mut Vec<Option<DataType>>) -> Result<OlapPlan> {
        let mut stmt = statement.clone();
        rewrite::cast_declared_params(&mut stmt, params);
        rewrite::in_subqueries_in_select_lists(&mut stmt);
        let user = self.settings.get("session_authorization").unwrap_or_default();
        rewrite::session_values(&mut stmt, &user, self.id, &|name| self.show(name))?;
        let plan = self.db.inner.olap.plan(stmt).await?;
        if params.len() < plan.param_types.len() {
            params.resize(plan.param_types.len(), None);
        }
        for (slot, inferred) in params.iter_mut().zip(&plan.param_types) {
            if slot.is_none() {
                *slot = inferred.as_ref().map(sql_type_of_arrow);
            }
        }
        Ok(plan)
    }

    /// The analytical plan of a query, planning it now if the short path had it so far.
    async fn olap_plan<'a>(&self, query: &'a QueryPlan, param_types: &[DataType]) -> Result<&'a OlapPlan> {
        if let Some(p) = query.olap.get() {
            return Ok(p);
        }
        let mut params: Vec<Option<DataType>> = param_types.iter().copied().map(Some).collect();
        let plan = self.plan_olap(&query.statement, &mut params).await?;
        let _ = query.olap.set(plan);
        query.olap.get().ok_or_else(|| Error::internal("analytical plan missing"))
    }

    async fn explain(&self, inner: &Statement, catalog: &freshet_core::catalog::Catalog, params: &mut Vec<Option<DataType>>) -> Result<Vec<String>> {
        if is_dml(inner) {
            return Box::pin(self.explain_dml(inner, catalog, params)).await;
        }
        let Statement::Query(q) = inner else { return Err(Error::unsupported("EXPLAIN of anything but a query, INSERT, UPDATE or DELETE")) };
        if self.settings.short_path()
            && let Some(short) = plan::plan_select(catalog, q, params)?
        {
            let mut lines = vec![short_access(&short)];
            if let Some(OltpPlan::Select(sub)) = short.any_from.as_deref() {
                lines.push(format!("  IN list from: {}", short_access(sub)));
            }
            return Ok(lines);
        }
        let plan = self.plan_olap(inner, params).await?;
        let mut lines = vec!["Analytical query on a snapshot (DataFusion):".to_string()];
        let text = self.db.inner.olap.explain(&plan)?;
        lines.extend(text.lines().map(|l| format!("  {l}")));
        Ok(lines)
    }

    /// EXPLAIN of an INSERT, UPDATE or DELETE: planned as it would run (nothing runs), and
    /// described as PostgreSQL's plans are, the statement's node first and the rows it takes
    /// below: all three run on the partition executor; the rows come from an index or a scan
    /// there, VALUES, a query (a short-path lookup or an analytical plan), or, where
    /// subqueries decide them, from a plan made once the subqueries' values are known.
    async fn explain_dml(&self, statement: &Statement, catalog: &freshet_core::catalog::Catalog, params: &mut Vec<Option<DataType>>) -> Result<Vec<String>> {
        let (kind, _) = self.plan_boxed(statement, catalog, params).await?;
        self.describe_dml(statement, &kind, catalog, params).await
    }

    /// The EXPLAIN lines of an INSERT, UPDATE or DELETE planned as `kind` (see
    /// [`Self::explain_dml`]).
    async fn describe_dml(&self, statement: &Statement, kind: &Kind, catalog: &freshet_core::catalog::Catalog, params: &mut Vec<Option<DataType>>) -> Result<Vec<String>> {
        let verb = match statement {
            Statement::Update(_) => "Update",
            Statement::Delete(_) => "Delete",
            _ => "Insert",
        };
        let (table, below): (String, Vec<String>) = match kind {
            Kind::Dml(plan) => {
                let (table, access) = match plan.as_ref() {
                    OltpPlan::Update(u) => (&u.table, &u.access),
                    OltpPlan::Delete(d) => (&d.table, &d.access),
                    OltpPlan::Select(s) => (&s.table, &s.access),
                };
                (table.name.clone(), vec![format!("  ->  {}", access_line(table, access))])
            }
            Kind::Insert { plan, .. } => {
                let mut below = Vec::new();
                if let Some(on) = &plan.on_conflict {
                    let action = match on.action {
                        plan::ConflictAction::Nothing => "NOTHING",
                        plan::ConflictAction::Update { .. } => "UPDATE",
                    };
                    below.push(format!("  Conflict Resolution: {action}"));
                    let arbiters: Vec<&str> = match on.index {
                        Some(i) => vec![plan.table.indexes[i].name.as_str()],
                        None => plan.table.indexes.iter().filter(|i| i.unique).map(|i| i.name.as_str()).collect(),
                    };
                    if !arbiters.is_empty() {
                        below.push(format!("  Conflict Arbiter Indexes: {}", arbiters.join(", ")));
                    }
                }
                match &plan.source {
                    InsertSource::Values(rows) => below.push(format!("  ->  Values ({} row{})", rows.len(), if rows.len() == 1 { "" } else { "s" })),
                    InsertSource::Query(q) => {
                        // Sequence functions in its select list are the session's, per row (as
                        // `plan_insert_kind` plans it): the query's plan is without them.
                        let (q, _) = crate::sequences::draw_in_session(q, params)?;
                        let query = Statement::Query(Box::new(q));
                        below.extend(nested(Box::pin(self.explain(&query, catalog, params)).await?));
                    }
                }
                (plan.table.name.clone(), below)
            }
            Kind::DmlWithSubqueries { statement, .. } => {
                let mut statement = Statement::clone(statement);
                if let Statement::Delete(d) = &statement
                    && d.using.is_some()
                {
                    statement = crate::update_from::delete_using(d, catalog)?;
                }
                // As PostgreSQL's InitPlans: each subquery runs once, first.
                let found = rewrite::find_subqueries(&mut statement);
                let mut below = Vec::new();
                for (n, f) in found.iter().enumerate() {
                    let what = match f {
                        rewrite::FoundSubquery::Scalar(_) => "value",
                        rewrite::FoundSubquery::In(_) => "IN list",
                        rewrite::FoundSubquery::Exists(_) => "EXISTS",
                    };
                    below.push(format!("  Subquery {} ({what}), run first", n + 1));
                    let query = Statement::Query(Box::new(f.query().clone()));
                    below.extend(nested(Box::pin(self.explain(&query, catalog, params)).await?).into_iter().map(|l| format!("  {l}")));
                }
                let values = if found.len() == 1 { "its value" } else { "their values" };
                below.push(match statement {
                    Statement::Insert(_) => format!("  ->  Values, with {values}"),
                    _ => format!("  ->  rows found with {values} (planned once known)"),
                });
                (dml_target(&statement).unwrap_or_default(), below)
            }
            Kind::UpdateFrom => {
                let Statement::Update(u) = statement else { return Err(Error::internal("UPDATE … FROM is not an UPDATE")) };
                let rewritten = crate::update_from::rewrite(u, catalog, params.len())?;
                let mut below = vec!["  ->  one row at a time by its key, the rows and source values from:".to_string()];
                below.extend(nested(Box::pin(self.explain(&rewritten.select, catalog, params)).await?).into_iter().map(|l| format!("  {l}")));
                (dml_target(statement).unwrap_or_default(), below)
            }
            _ => return Err(Error::unsupported(format!("EXPLAIN of this {}", verb.to_uppercase()))),
        };
        let mut lines = vec![format!("{verb} on {table} (partition executor)")];
        lines.extend(below);
        Ok(lines)
    }

    /// Executes a prepared statement with parameter values of its parameter types.
    pub async fn execute(&mut self, prepared: &Arc<Prepared>, params: Vec<Value>) -> Result<StatementResult> {
        if params.len() != prepared.param_types.len() {
            return Err(Error::new(
                SqlState::ProtocolViolation,
                format!(
                    "bind message supplies {} parameters, but prepared statement \"\" requires {}",
                    params.len(),
                    prepared.param_types.len()
                ),
            ));
        }
        if self.txn.as_ref().is_some_and(|t| t.failed) && !matches!(prepared.kind, Kind::Transaction(_)) {
            return Err(txn_block::aborted_error());
        }
        if let Kind::ArrayForms(forms) = &prepared.kind {
            return Box::pin(self.execute_array_forms(forms, params)).await;
        }
        let current = self.catalog_version();
        let replanned;
        let prepared = if prepared.catalog_version != current && needs_catalog(&prepared.kind) {
            // Boxed, like the other rare and large steps below: the future of `execute` is
            // built for every statement and must stay small.
            match Box::pin(self.replan(prepared)).await {
                Ok(p) => {
                    replanned = p;
                    &replanned
                }
                Err(e) => {
                    self.statement_failed();
                    return Err(e);
                }
            }
        } else {
            prepared
        };
        let mut result = loop {
            match Box::pin(self.execute_planned(prepared, params.clone())).await {
                Err(e) if self.settings.lock_wait() && e.blocked_by.is_some() => {
                    // Another transaction has an uncommitted change this statement needs: wait
                    // for it to end, then run the statement again.
                    let holder = e.blocked_by.unwrap_or_default();
                    let waiter = self.txn.as_ref().map(|t| t.id);
                    if let Err(e) = Box::pin(self.db.inner.engine.wait_for(waiter, holder)).await {
                        break Err(e);
                    }
                }
                Err(mut e) => {
                    e.blocked_by = None;
                    break Err(e);
                }
                ok => break ok,
            }
        };
        if let Some(lsn) = self.sequences.take_pending()
            && result.is_ok()
            && let Err(e) = self.db.inner.engine.wait_logged(lsn).await
        {
            result = Err(e);
        }
        if let Err(e) = &result
            && e.state == SqlState::DeadlockDetected
        {
            self.db.inner.activity.deadlocks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if self.txn.is_none() {
            // A statement outside a block, or COMMIT or ROLLBACK, ended a transaction.
            self.sequences.locks.end_transaction();
            self.sequences.notify.end_transaction(committed(&prepared.kind, &result));
        }
        if !matches!(prepared.kind, Kind::Transaction(_)) {
            if self.txn.is_none() {
                // A statement outside a block is a transaction of its own, which ends with its
                // rows when it has some.
                let activity = &self.db.inner.activity;
                match &mut result {
                    Ok(StatementResult { output: Output::Rows { rows, .. }, .. }) => rows.ends_transaction(activity.clone()),
                    _ => activity.transaction_ended(result.is_ok()),
                }
            }
            if result.is_err() {
                self.statement_failed();
            }
        }
        result
    }

    /// The context of expressions the session evaluates itself (INSERT … VALUES, defaults):
    /// sequence and advisory lock functions run there.
    fn eval_context<'a>(&'a self, params: &'a [Value], now: i64) -> EvalContext<'a> {
        EvalContext { params, now, session: Some(&*self.sequences) }
    }

    /// The plan of the statements about the session's own state: PREPARE, EXECUTE and
    /// DEALLOCATE, and CREATE EXTENSION of a built-in one (`None` for other forms). Apart from
    /// `plan`, whose poll frame is on the stack of every nested call's planning.
    fn plan_session_statement(&self, statement: &Statement) -> Result<Option<(Kind, Option<Vec<ColumnInfo>>)>> {
        Ok(Some(match statement {
            Statement::Prepare { name, data_types, statement } => {
                let (declared, arrays) = data_types
                    .iter()
                    .map(|t| match freshet_core::sql::array_params::element_type(t) {
                        Some(elem) => elem.map(|e| (Some(e), true)),
                        None => freshet_core::sql::bind::sql_type(t).map(|t| (Some(t), false)),
                    })
                    .collect::<Result<(Vec<_>, Vec<_>)>>()?;
                (Kind::PrepareSql { name: fold_ident(name), statement: statement.clone(), declared, arrays }, None)
            }
            Statement::Execute { name: Some(name), parameters, immediate: false, into, using, .. } if into.is_empty() && using.is_empty() => {
                let name = name.0.iter().filter_map(|p| p.as_ident()).map(fold_ident).collect::<Vec<_>>().join(".");
                let target = self.prepared_sql.get(&name).ok_or_else(|| no_prepared(&name))?;
                (Kind::ExecuteSql { name, args: parameters.clone() }, target.columns.as_ref().map(|c| c.to_vec()))
            }
            Statement::Deallocate { name, .. } => {
                let name = fold_ident(name);
                (Kind::DeallocateSql((name != "all").then_some(name)), None)
            }
            Statement::CreateExtension(ce) => {
                let name = fold_ident(&ce.name);
                if !BUILT_IN_EXTENSIONS.contains(&name.as_str()) {
                    return Err(Error::new(SqlState::FeatureNotSupported, format!("extension \"{name}\" is not available"))
                        .with_hint(format!("Freshet has the functions of {} built in; other extensions cannot be installed.", BUILT_IN_EXTENSIONS.join(", "))));
                }
                (Kind::Utility, None)
            }
            _ => return Ok(None),
        }))
    }

    /// `DECLARE name [BINARY] [NO SCROLL | SCROLL] CURSOR [WITH | WITHOUT HOLD] FOR query`: the
    /// query planned as a statement of its own.
    async fn plan_declare(
        &self,
        stmts: &[ast::Declare],
        catalog: &freshet_core::catalog::Catalog,
        params: &mut Vec<Option<DataType>>,
    ) -> Result<(Kind, Option<Vec<ColumnInfo>>)> {
        let [declare] = stmts else { return Err(Error::unsupported("DECLARE of several names")) };
        let (Some(ast::DeclareType::Cursor), Some(query), [name]) = (&declare.declare_type, &declare.for_query, declare.names.as_slice()) else {
            return Err(Error::unsupported("DECLARE of anything but a cursor"));
        };
        if declare.binary == Some(true) {
            return Err(Error::unsupported("DECLARE BINARY CURSOR")
                .with_hint("Declare it without BINARY; a client using the extended protocol asks for binary columns when it fetches."));
        }
        let hold = declare.hold == Some(true);
        let locks = !query.locks.is_empty();
        if locks && hold {
            return Err(Error::unsupported("DECLARE CURSOR WITH HOLD ... FOR UPDATE").with_detail("Holdable cursors must be READ ONLY."));
        }
        if locks && declare.scroll == Some(true) {
            return Err(Error::unsupported("DECLARE SCROLL CURSOR ... FOR UPDATE").with_detail("Scrollable cursors must be READ ONLY."));
        }
        let statement = Statement::Query(query.clone());
        let (kind, columns) = self.plan_boxed(&statement, catalog, params).await?;
        let columns = columns.ok_or_else(|| Error::internal("a cursor's query without columns"))?;
        let param_types = params.iter().map(|t| t.unwrap_or(DataType::Text)).collect();
        let query = Prepared::nested(statement, kind, columns, param_types, catalog.version);
        let scroll = declare.scroll != Some(false) && !locks;
        let declare = crate::cursor::DeclareCursor { name: fold_ident(name), query: Arc::new(query), scroll, hold };
        Ok((Kind::DeclareCursor(Arc::new(declare)), None))
    }

    /// `PREPARE name AS statement`: plans the statement and keeps it (42P05 if the name is
    /// taken). (The SQL-level statements run in functions of their own, out of
    /// `execute_planned`, whose poll frame every nested call adds to the stack.)
    async fn prepare_sql(&mut self, name: &str, statement: &Statement, declared: &[Option<DataType>], arrays: &[bool]) -> Result<StatementResult> {
        if self.prepared_sql.contains_key(name) {
            return Err(Error::new(SqlState::DuplicatePreparedStatement, format!("prepared statement \"{name}\" already exists")));
        }
        let sql = statement.to_string();
        let planned = self.prepare_typed(statement.clone(), &sql, declared, arrays).await?;
        self.prepared_sql.insert(name.to_string(), planned);
        Ok(StatementResult::command("PREPARE"))
    }

    /// `DEALLOCATE name` (26000 if there is none) or `DEALLOCATE ALL` (`None`).
    fn deallocate_sql(&mut self, name: Option<&str>) -> Result<StatementResult> {
        match name {
            Some(name) => {
                self.prepared_sql.remove(name).ok_or_else(|| no_prepared(name))?;
                Ok(StatementResult::command("DEALLOCATE"))
            }
            None => {
                self.prepared_sql.clear();
                Ok(StatementResult::command("DEALLOCATE ALL"))
            }
        }
    }

    /// `EXECUTE name (arguments)`: the arguments, constant expressions (or the outer
    /// statement's parameters), are evaluated and assigned to the prepared statement's
    /// parameter types, and the statement runs with them (planned again first if the catalog
    /// changed since it was prepared).
    async fn execute_sql_prepared(&mut self, name: &str, args: &[ast::Expr], outer: &[Value], now: i64) -> Result<StatementResult> {
        let mut target = self.prepared_sql.get(name).cloned().ok_or_else(|| no_prepared(name))?;
        if args.len() != target.param_types.len() {
            return Err(Error::new(
                SqlState::SyntaxError,
                format!("wrong number of parameters for prepared statement \"{name}\"")
            )
            .with_detail(format!("Expected {} parameters but got {}.", target.param_types.len(), args.len())));
        }
        let mut outer_types: Vec<Option<DataType>> = outer.iter().map(|v| v.data_type()).collect();
        let mut values = Vec::with_capacity(args.len());
        for (i, (e, ty)) in args.iter().zip(&target.param_types).enumerate() {
            let mut eval = |e: &ast::Expr, ty: DataType| -> Result<Value> {
                let bound = freshet_core::sql::bind::Binder::new(None, &mut outer_types).bind_expr(e, Some(ty))?;
                bound.eval(&NoRow, &self.eval_context(outer, now))?.assign_to(ty)
            };
            let Some(elem) = target.array_param(i) else {
                values.push(eval(e, *ty)?);
                continue;
            };
            // An array: `ARRAY[…]` of values, or its text form (`'{1,2}'`, also cast).
            let e = match e {
                ast::Expr::Cast { expr, data_type: ast::DataType::Array(_), .. } => expr.as_ref(),
                e => e,
            };
            values.push(match e {
                ast::Expr::Array(array) => {
                    let items = array.elem.iter().map(|item| eval(item, elem)).collect::<Result<Vec<_>>>()?;
                    Value::Text(freshet_core::sql::plpgsql::array_text(&items, elem))
                }
                e => eval(e, DataType::Text)?,
            });
        }
        if let Kind::ArrayForms(forms) = &target.kind {
            return Box::pin(self.execute_array_forms(forms, values)).await;
        }
        if target.catalog_version != self.catalog_version() && needs_catalog(&target.kind) {
            target = self.replan(&target).await?;
            self.prepared_sql.insert(name.to_string(), target.clone());
        }
        self.execute_planned(&target, values).await
    }

    /// Sets each row's items `items` (position, expression) to the expressions' values, row
    /// after row, as [`Self::eval_waiting`] evaluates them; a row shorter than a position grows
    /// to it (a SELECT without FROM starts from one empty row).
    async fn eval_rows<'e>(
        &self,
        mut rows: Vec<Vec<Value>>,
        items: impl Iterator<Item = (usize, &'e freshet_core::sql::expr::Expr)> + Clone,
        params: &[Value],
        now: i64,
    ) -> Result<Vec<Vec<Value>>> {
        let started = std::time::Instant::now();
        for row in &mut rows {
            for (i, e) in items.clone() {
                let v = self.eval_waiting(e, params, now, started).await?;
                if row.len() <= i {
                    row.resize(i + 1, Value::Null);
                }
                row[i] = v;
            }
        }
        Ok(rows)
    }

    /// Evaluates a select item of a SELECT the session answers itself. An advisory lock that
    /// another session holds is waited for (see `advisory`), as is `pg_sleep`'s time, and
    /// then the item is evaluated again. A lock wait ends with an error at `lock_timeout`
    /// (55P03, from the wait's start); either ends at `statement_timeout` (57014, from
    /// `started`).
    async fn eval_waiting(&self, e: &freshet_core::sql::expr::Expr, params: &[Value], now: i64, started: std::time::Instant) -> Result<Value> {
        let (locks, sequences) = (&self.sequences.locks, &self.sequences);
        let statement = || {
            self.settings.statement_timeout().map(|t| (started + t, Error::new(SqlState::QueryCanceled, "canceling statement due to statement timeout")))
        };
        loop {
            locks.take_blocked();
            sequences.take_sleep();
            // Evaluated before the match: the context is not `Send` and must not live across
            // the wait.
            let value = e.eval(&NoRow, &self.eval_context(params, now));
            let Err(err) = value else { return value };
            if let Some(blocked) = locks.take_blocked() {
                let lock = self.settings.lock_timeout().map(|t| {
                    (std::time::Instant::now() + t, Error::new(SqlState::LockNotAvailable, "canceling statement due to lock timeout"))
                });
                let deadline = match (lock, statement()) {
                    (Some(l), Some(s)) => Some(if l.0 <= s.0 { l } else { s }),
                    (l, s) => l.or(s),
                };
                locks.wait(blocked, deadline).await?;
            } else if let Some(d) = sequences.take_sleep() {
                crate::advisory::sleep(d, statement()).await?;
                sequences.slept();
            } else {
                return Err(err);
            }
        }
    }

    async fn replan(&mut self, prepared: &Arc<Prepared>) -> Result<Arc<Prepared>> {
        let Some(statement) = prepared.statement.clone() else { return Ok(prepared.clone()) };
        let fresh = self.prepare_statement(statement, &prepared.sql, &prepared.declared).await?;
        if fresh.columns != prepared.columns {
            return Err(Error::new(SqlState::FeatureNotSupported, "cached plan must not change result type"));
        }
        Ok(fresh)
    }

    async fn execute_planned(&mut self, prepared: &Prepared, params: Vec<Value>) -> Result<StatementResult> {
        let now = self.statement_time();
        if let Some(txn) = &self.txn
            && txn.read_only
            && let Some(what) = changes_a_sequence(&prepared.kind)
        {
            return Err(txn_block::read_only_error(what));
        }
        if let Some(txn) = self.txn.as_mut()
            && let Some(what) = writes(&prepared.kind)
        {
            if txn.read_only {
                return Err(txn_block::read_only_error(what));
            }
            txn.wrote = true;
            txn.pinned.get_mut().take();
        }
        match &prepared.kind {
            Kind::Empty => Ok(StatementResult { output: Output::Empty, notices: vec![], parameter_status: vec![] }),
            Kind::Query(query) => {
                let columns = prepared.columns.clone().unwrap_or_default();
                let txn = self.statement_txn();
                if query.drawn.is_empty() {
                    let rows = self.run_query(query, &columns, &prepared.param_types, params, now, txn).await?;
                    return Ok(StatementResult::rows(columns, rows));
                }
                // Sequence calls in the select list: drawn for each row, in the order the rows
                // come (the whole result is collected first).
                let rows = self.run_query(query, &columns, &prepared.param_types, params.clone(), now, txn).await?;
                let rows = rows.collect_values(&columns).await?;
                let drawn = query.drawn.iter().map(|(i, e)| (*i, e));
                let rows = Box::pin(self.eval_rows(rows, drawn, &params, now)).await?;
                Ok(StatementResult::rows(columns, RowStream::from_values(rows)).with_notices(self.sequences.locks.take_warnings()))
            }
            Kind::Insert { plan, source, calls: None } => {
                let txn = self.statement_txn();
                let (n, returned) = self.run_insert(plan, source.as_deref(), None, &prepared.param_types, params, now, txn).await?;
                match (returned, prepared.columns.clone()) {
                    (Some(rows), Some(columns)) => Ok(StatementResult::returning("INSERT 0", columns, RowStream::from_values(rows))),
                    _ => Ok(StatementResult::command(format!("INSERT 0 {n}"))),
                }
            }
            Kind::Insert { plan, source, calls: Some(calls) } => {
                // The source's calls and the insert are one transaction.
                let (plan, source, calls, types) = (plan.clone(), source.clone(), calls.clone(), prepared.param_types.clone());
                let (n, returned, notices) = self
                    .in_call_transaction(|s| {
                        Box::pin(async move {
                            let (rows, notices) = s.run_calls_in_query(calls, types.clone(), params.clone(), now).await?;
                            let txn = s.statement_txn();
                            let (n, returned) = s.run_insert(&plan, source.as_deref(), Some(rows), &types, params, now, txn).await?;
                            Ok((n, returned, notices))
                        })
                    })
                    .await?;
                match (returned, prepared.columns.clone()) {
                    (Some(rows), Some(columns)) => Ok(StatementResult::returning("INSERT 0", columns, RowStream::from_values(rows)).with_notices(notices)),
                    _ => Ok(StatementResult::command(format!("INSERT 0 {n}")).with_notices(notices)),
                }
            }
            Kind::Dml(plan) => {
                let txn = self.statement_txn();
                self.run_dml(plan.clone(), params, now, txn, prepared.columns.clone()).await
            }
            Kind::DmlWithSubqueries { statement, .. } => {
                let statement = Statement::clone(statement);
                Box::pin(self.run_dml_with_subqueries(statement, &prepared.param_types, params, now, prepared.columns.clone())).await
            }
            Kind::DmlCalls(split) => {
                let (split, types, columns) = (split.clone(), prepared.param_types.clone(), prepared.columns.clone());
                Box::pin(self.atomically(move |s| Box::pin(async move { s.run_dml_calls(&split, &types, params, now, columns).await }))).await
            }
            Kind::UpdateFrom => {
                let statement = prepared.statement.clone().ok_or_else(|| Error::internal("statement missing"))?;
                Box::pin(self.run_update_from(statement, prepared.param_types.clone(), params, now)).await
            }
            Kind::Ddl(DdlPlan::Truncate { tables, restart_identity }) => {
                let result = Box::pin(self.truncate(tables, now)).await?;
                if *restart_identity {
                    let catalog = self.catalog();
                    for t in tables {
                        for seq in catalog.table(t).map(|d| d.sequences.as_slice()).unwrap_or_default() {
                            // In a block, ROLLBACK puts the sequence back (as in PostgreSQL).
                            if let Some(block) = self.txn.as_mut() {
                                block.restarts.push((seq.clone(), seq.last()));
                            }
                            self.sequences.restart(seq)?;
                        }
                    }
                }
                Ok(result)
            }
            Kind::Ddl(plan @ (DdlPlan::CreateView { .. } | DdlPlan::DropViews { .. })) if self.txn.is_some() => {
                let catalog = self.catalog();
                let engine = self.db.inner.engine.clone();
                let (changes, notices) = views::block_changes(plan, &catalog, || engine.allocate_table_id())?;
                let t = self.txn.as_mut().ok_or_else(|| Error::internal("transaction block missing"))?;
                t.views.extend(changes);
                t.view_epoch += 1;
                let tag = if matches!(plan, DdlPlan::CreateView { .. }) { "CREATE VIEW" } else { "DROP VIEW" };
                Ok(StatementResult::command(tag).with_notices(notices))
            }
            Kind::Ddl(plan) => {
                if self.txn.is_some() {
                    return Err(Error::unsupported(format!(
                        "{} inside a transaction block (schema changes commit on their own; run it outside BEGIN … COMMIT)",
                        statement_name(prepared.statement.as_ref().ok_or_else(|| Error::internal("statement missing"))?)
                    )));
                }
                let outcome = Box::pin(self.db.inner.engine.execute_ddl(plan.clone())).await?;
                Ok(StatementResult::command(outcome.tag).with_notices(outcome.notices))
            }
            Kind::CreateTableAs { create, table, if_not_exists, insert } => {
                if self.txn.is_some() {
                    return Err(Error::unsupported(
                        "CREATE TABLE … AS inside a transaction block (schema changes commit on their own; run it outside BEGIN … COMMIT)",
                    ));
                }
                if *if_not_exists && self.catalog().table(table).is_some() {
                    let notice = format!("relation \"{table}\" already exists, skipping");
                    return Ok(StatementResult::command("CREATE TABLE AS").with_notices([notice]));
                }
                Box::pin(self.db.inner.engine.execute_ddl(create.clone())).await?;
                // The rows go in as one INSERT; if it fails, the table it was to fill goes too.
                let filled = Box::pin(async {
                    let prepared = self.prepare(insert, &[]).await?;
                    self.execute(&prepared, Vec::new()).await
                })
                .await;
                match filled {
                    Ok(StatementResult { output: Output::Command { tag }, .. }) => {
                        let rows = tag.rsplit(' ').next().unwrap_or("0").to_string();
                        Ok(StatementResult::command(format!("SELECT {rows}")))
                    }
                    Ok(_) => Err(Error::internal("CREATE TABLE … AS: the INSERT gave rows")),
                    Err(e) => {
                        let drop = DdlPlan::DropTables { names: vec![table.clone()], if_exists: true, cascade: false };
                        let _ = Box::pin(self.db.inner.engine.execute_ddl(drop)).await;
                        Err(e)
                    }
                }
            }
            Kind::CopyFrom { table, columns, format } => {
                let txn = self.statement_txn();
                Ok(StatementResult {
                    output: Output::CopyIn(CopyIn::new(self.db.inner.engine.clone(), table.clone(), columns.clone(), format.clone(), txn, self.settings.synchronous_commit(), crate::copy::CopyDefaults { now, sequences: self.sequences.clone() })),
                    notices: vec![],
                    parameter_status: vec![],
                })
            }
            Kind::Transaction(t) => self.run_transaction_statement(t.clone()).await,
            Kind::AlterSequence(name, if_exists, action) => {
                use freshet_core::sql::parse::AlterSequence;
                let engine = self.db.inner.engine.clone();
                let Some(def) = engine.catalog().sequence(name).cloned() else {
                    if *if_exists {
                        return Ok(StatementResult::command("ALTER SEQUENCE").with_notices(vec![format!("relation \"{name}\" does not exist, skipping")]));
                    }
                    return Err(Error::new(SqlState::UndefinedTable, format!("relation \"{name}\" does not exist")));
                };
                match action {
                    // Freshet has no roles that own objects.
                    AlterSequence::Owner => Ok(StatementResult::command("ALTER SEQUENCE")),
                    AlterSequence::OwnedBy(owner) => {
                        if self.txn.is_some() {
                            return Err(Error::unsupported("ALTER SEQUENCE … OWNED BY inside a transaction block (schema changes commit on their own)"));
                        }
                        let plan = DdlPlan::SequenceOwnedBy { sequence: name.clone(), owner: owner.clone() };
                        let outcome = Box::pin(engine.execute_ddl(plan)).await?;
                        Ok(StatementResult::command(outcome.tag).with_notices(outcome.notices))
                    }
                    AlterSequence::Restart(at) => {
                        let record = def.set(at.unwrap_or(def.start), false)?;
                        if let Some(lsn) = engine.log_sequence(record)? {
                            engine.wait_logged(lsn).await?;
                        }
                        Ok(StatementResult::command("ALTER SEQUENCE"))
                    }
                }
            }
            Kind::SetConfig(args) => {
                let arg = |i: usize| -> Result<Value> {
                    if let Some(p) = placeholder(&args[i]) {
                        return params.get(p).cloned().ok_or_else(|| Error::new(SqlState::UndefinedParameter, format!("there is no parameter ${}", p + 1)));
                    }
                    match &args[i] {
                        ast::Expr::Value(v) => match &v.value {
                            ast::Value::SingleQuotedString(s) => Ok(Value::Text(s.clone())),
                            ast::Value::Boolean(b) => Ok(Value::Bool(*b)),
                            ast::Value::Null => Ok(Value::Null),
                            other => Err(Error::unsupported(format!("set_config argument {other}"))),
                        },
                        other => Err(Error::unsupported(format!("set_config argument {other}"))),
                    }
                };
                let (Value::Text(name), value) = (arg(0)?, arg(1)?) else {
                    return Err(Error::new(SqlState::custom("22004").unwrap_or(SqlState::InvalidParameterValue), "SET requires parameter name"));
                };
                let value = match value {
                    Value::Null => String::new(),
                    v => v.as_str().map(str::to_string).unwrap_or_default(),
                };
                // is_local: as SET LOCAL, which Freshet applies for the session (see README).
                let _ = arg(2)?;
                let status = self.settings.set(&name, &value)?;
                let shown = self.settings.get(&name).unwrap_or(value);
                let mut result = StatementResult::rows(prepared.columns.clone().unwrap_or_default(), RowStream::from_values(vec![vec![Value::Text(shown)]]));
                result.parameter_status.extend(status);
                Ok(result)
            }
            Kind::SessionSelect(items) => {
                // A query, even one that reads no table, takes the block's snapshot (after it
                // SET TRANSACTION ISOLATION LEVEL is too late, as in PostgreSQL).
                let _ = self.statement_txn();
                let columns = prepared.columns.clone().unwrap_or_default();
                let rows = Box::pin(self.eval_rows(vec![Vec::new()], items.iter().enumerate(), &params, now)).await?;
                Ok(StatementResult::rows(columns, RowStream::from_values(rows)).with_notices(self.sequences.locks.take_warnings()))
            }
            Kind::Call(call) => self.run_call(call, &prepared.param_types, params, prepared.columns.clone()).await,
            Kind::Do(routine) => {
                let notices = Box::pin(self.run_anonymous_block(routine.clone())).await?;
                Ok(StatementResult::command("DO").with_notices(notices))
            }
            Kind::CallsInQuery(plan) => {
                let output = prepared.columns.clone().unwrap_or_default();
                let (rows, notices) = Box::pin(self.run_calls_in_query(plan.clone(), prepared.param_types.clone(), params, now)).await?;
                Ok(StatementResult::rows(output, RowStream::from_values(rows)).with_notices(notices))
            }
            Kind::ReturningCalls { inner, columns, items } => {
                let output = prepared.columns.clone().unwrap_or_default();
                let (inner, columns, items) = (inner.clone(), columns.clone(), items.clone());
                Box::pin(self.atomically(move |s| {
                    Box::pin(async move {
                        let mut result = s.execute_planned_boxed(&inner, params).await?;
                        let Output::Rows { rows, verb, .. } = result.output else { return Err(Error::internal("RETURNING without rows")) };
                        let rows = rows.collect_values(&columns).await?;
                        let (rows, mut notices) = s.call_items(rows, &columns, &items).await?;
                        notices.splice(0..0, std::mem::take(&mut result.notices));
                        Ok(StatementResult::returning(verb, output, RowStream::from_values(rows)).with_notices(notices))
                    })
                }))
                .await
            }
            Kind::CallsPerRow { query, columns, items } => {
                let output = prepared.columns.clone().unwrap_or_default();
                let parts = (query.clone(), columns.clone(), items.clone());
                let (rows, notices) = Box::pin(self.run_calls_per_row(parts, prepared.param_types.clone(), params, now)).await?;
                Ok(StatementResult::rows(output, RowStream::from_values(rows)).with_notices(notices))
            }
            Kind::CopyTo { query, format } => {
                let columns = prepared.columns.clone().unwrap_or_default();
                let txn = self.statement_txn();
                let rows = Box::pin(self.run_query(query, &columns, &prepared.param_types, params, now, txn)).await?;
                Ok(StatementResult {
                    output: Output::CopyOut(CopyOut { format: format.clone(), columns, rows }),
                    notices: vec![],
                    parameter_status: vec![],
                })
            }
            Kind::Explain(lines) => {
                let columns = prepared.columns.clone().unwrap_or_default();
                let rows = lines.iter().map(|l| vec![Value::Text(l.clone())]).collect();
                Ok(StatementResult::rows(columns, RowStream::from_values(rows)))
            }
            Kind::ExplainAnalyzeDml { inner, lines } => {
                // As PostgreSQL: the statement runs (in the block, if there is one) and its
                // RETURNING rows are counted, not sent.
                let started = std::time::Instant::now();
                let StatementResult { output, notices, .. } = self.execute_planned_boxed(inner, params).await?;
                let (_, rows) = crate::procedure::output_rows(output).await?;
                let elapsed = started.elapsed().as_secs_f64() * 1000.0;
                let mut lines = lines.clone();
                if let Some(first) = lines.first_mut() {
                    first.push_str(&format!(" (actual rows={rows})"));
                }
                lines.push(format!("Execution Time: {elapsed:.3} ms"));
                let columns = prepared.columns.clone().unwrap_or_default();
                let rows = lines.into_iter().map(|l| vec![Value::Text(l)]).collect();
                Ok(StatementResult { notices, ..StatementResult::rows(columns, RowStream::from_values(rows)) })
            }
            Kind::ExplainAnalyze(query) => {
                let columns = prepared.columns.clone().unwrap_or_default();
                let txn = self.statement_txn();
                let lines = Box::pin(self.explain_analyze(query, &prepared.param_types, params, now, txn)).await?;
                let rows = lines.into_iter().map(|l| vec![Value::Text(l)]).collect();
                Ok(StatementResult::rows(columns, RowStream::from_values(rows)))
            }
            Kind::Utility => {
                let statement = prepared.statement.as_ref().ok_or_else(|| Error::internal("statement missing"))?;
                self.run_utility(statement, prepared.columns.clone())
            }
            Kind::PrepareSql { name, statement, declared, arrays } => Box::pin(self.prepare_sql(name, statement, declared, arrays)).await,
            Kind::ExecuteSql { name, args } => Box::pin(self.execute_sql_prepared(name, args, &params, now)).await,
            Kind::DeallocateSql(name) => self.deallocate_sql(name.as_deref()),
            Kind::DeclareCursor(declare) => Box::pin(self.declare_cursor(declare, params)).await,
            Kind::FetchCursor(fetch) => Box::pin(self.fetch_cursor(fetch, prepared.columns.as_ref())).await,
            Kind::CloseCursor(name) => self.close_cursor(name.as_deref()),
            // `execute` runs the array's form.
            Kind::ArrayForms(_) => Err(Error::internal("a statement with array parameters run without its form")),
            Kind::Checkpoint => {
                // Writing a checkpoint takes seconds on a large database: it runs on a thread
                // of its own while this session waits without holding up its caller's runtime.
                let db = self.db.clone();
                let (tx, rx) = futures::channel::oneshot::channel();
                std::thread::Builder::new()
                    .name("freshet-checkpoint-now".into())
                    .spawn(move || {
                        crate::durability::yield_cpu_to_transactions();
                        let result = db.checkpoint();
                        // The handle goes before the answer, so that a caller that closes the
                        // database next finds it closed.
                        drop(db);
                        let _ = tx.send(result);
                    })
                    .map_err(|e| Error::internal(format!("cannot start the checkpoint: {e}")))?;
                Box::pin(rx).await.map_err(|_| Error::internal("the checkpoint thread ended without an answer"))??;
                Ok(StatementResult::command("CHECKPOINT"))
            }
        }
    }

    async fn run_query(
        &self,
        query: &QueryPlan,
        columns: &[ColumnInfo],
        param_types: &[DataType],
        params: Vec<Value>,
        now: i64,
        txn: Option<TxnCtx>,
    ) -> Result<RowStream> {
        let locks = query.short.as_ref().is_some_and(|s| matches!(s.as_ref(), OltpPlan::Select(p) if p.lock));
        if let Some(rows) = self.run_short(query, &params, now, txn, locks).await? {
            return Ok(RowStream::from_values(rows));
        }
        Box::pin(self.run_analytical(query, columns, param_types, params, now, txn)).await
    }

    /// Runs a query on the short path if it has a short plan and the session uses the short
    /// path (or `force`): its rows, or `None` when the query is for the analytical side.
    async fn run_short(&self, query: &QueryPlan, params: &[Value], now: i64, txn: Option<TxnCtx>, force: bool) -> Result<Option<Vec<Vec<Value>>>> {
        let Some(short) = query.short.as_ref().filter(|_| self.settings.short_path() || force) else { return Ok(None) };
        match self.db.inner.engine.run(short.clone(), params.to_vec(), now, txn, self.settings.synchronous_commit()).await? {
            OltpResult::Rows(rows) => Ok(Some(rows)),
            OltpResult::TooLarge => Ok(None),
            OltpResult::Count(_) => Err(Error::internal("a SELECT returned a count")),
        }
    }

    /// The analytical plan of a query, its table reads recorded for a SERIALIZABLE transaction.
    async fn analytical_plan<'a>(&self, query: &'a QueryPlan, param_types: &[DataType], txn: Option<TxnCtx>) -> Result<&'a OlapPlan> {
        let plan = self.olap_plan(query, param_types).await?;
        if let Some(ctx) = txn {
            self.db.inner.engine.record_table_reads(ctx, &plan.tables).await?;
        }
        Ok(plan)
    }

    /// A query on the analytical side: planned (once per prepared statement), run over the
    /// snapshot [`Self::query_snapshot`] picks.
    async fn run_analytical(
        &self,
        query: &QueryPlan,
        columns: &[ColumnInfo],
        param_types: &[DataType],
        params: Vec<Value>,
        now: i64,
        txn: Option<TxnCtx>,
    ) -> Result<RowStream> {
        let engine = &self.db.inner.engine;
        let plan = self.analytical_plan(query, param_types, txn).await?;
        let scalars = params.iter().zip(param_types).map(|(v, t)| scalar(v, *t)).collect();
        let timeout = if self.cursor_query { None } else { self.settings.statement_timeout() };
        let inner = &self.db.inner;
        if self.settings.snapshot_mode() == SnapshotMode::Fork {
            let view = txn.map(|c| c.view()).unwrap_or_else(TxnView::committed);
            let id = inner.snapshots.next_id();
            inner.activity.tables_scanned(&plan.tables);
            let (stream, process) = inner.olap.execute_forked(engine, plan, scalars, view, id, QueryRun { now, timeout }).await?;
            let weak: std::sync::Weak<ForkProcess> = Arc::downgrade(&process);
            inner.snapshots.register(weak);
            return Ok(RowStream::from_batches(stream, columns));
        }
        let snapshot = self.query_snapshot(&plan.tables, txn, plan.snapshot_tests()).await?;
        inner.activity.tables_scanned(&plan.tables);
        let stream = inner.olap.execute(plan, scalars, snapshot, QueryRun { now, timeout });
        Ok(RowStream::from_batches(stream, columns))
    }

    /// Runs a query as EXPLAIN ANALYZE: which path ran it, the snapshot an analytical query
    /// read (its id, mode, scope and age), the physical plan with its metrics, and the time.
    async fn explain_analyze(&self, query: &QueryPlan, param_types: &[DataType], params: Vec<Value>, now: i64, txn: Option<TxnCtx>) -> Result<Vec<String>> {
        let started = std::time::Instant::now();
        if let Some(rows) = self.run_short(query, &params, now, txn, false).await? {
            return Ok(vec![
                format!("Short path on the partition executor (actual rows={})", rows.len()),
                format!("Execution Time: {:.3} ms", started.elapsed().as_secs_f64() * 1000.0),
            ]);
        }
        let plan = self.analytical_plan(query, param_types, txn).await?;
        let snapshot = self.query_snapshot(&plan.tables, txn, plan.snapshot_tests()).await?;
        let mut taken_at = String::new();
        freshet_core::types::datetime::format_timestamp(snapshot.taken_at, &mut taken_at);
        let mut lines = vec![format!(
            "Snapshot {} (cow, {}): taken at {taken_at}, age {:.3} ms when the query started, {} table(s)",
            snapshot.id,
            snapshot.scope.name(),
            started.saturating_duration_since(snapshot.taken).as_secs_f64() * 1000.0,
            snapshot.tables.len()
        )];
        let scalars = params.iter().zip(param_types).map(|(v, t)| scalar(v, *t)).collect();
        let (text, rows) = self.db.inner.olap.explain_analyze(plan, scalars, snapshot, now).await?;
        lines.push("Analytical query (DataFusion):".into());
        lines.extend(text.lines().map(|l| format!("  {l}")));
        lines.push(format!("Rows: {rows}"));
        lines.push(format!("Execution Time: {:.3} ms", started.elapsed().as_secs_f64() * 1000.0));
        Ok(lines)
    }

    /// The snapshot an analytical query over `tables` reads (see [`crate::snapshots`]): in a
    /// transaction block that has not written (and is not READ COMMITTED), the block's pinned
    /// snapshot; in one that has, a snapshot of this statement's view; outside a block, a
    /// shared snapshot of committed state within the session's `freshet.max_staleness`, or,
    /// with a bound of 0 and a query whose filters rule out chunks (`tests`, from
    /// `OlapPlan::snapshot_tests`), a snapshot of only the chunks it may need.
    async fn query_snapshot(&self, tables: &[Arc<TableDef>], txn: Option<TxnCtx>, tests: Option<Vec<Vec<freshet_core::storage::RangeTest>>>) -> Result<Arc<DbSnapshot>> {
        let inner = &self.db.inner;
        let engine = &inner.engine;
        match (txn, self.txn.as_ref()) {
            (Some(ctx), Some(block)) if ctx.isolation != Isolation::ReadCommitted && !block.wrote => {
                let pinned = block.pinned.lock().clone();
                if let Some(s) = pinned.filter(|s| s.covers(tables) && s.catalog_version == engine.catalog().version) {
                    return Ok(s);
                }
                let all: Vec<Arc<TableDef>> = engine.catalog().tables().cloned().collect();
                let s = inner.snapshots.take(engine, &all, Some(ctx.view()), SnapshotScope::Transaction).await?;
                *block.pinned.lock() = Some(s.clone());
                Ok(s)
            }
            (Some(ctx), _) => inner.snapshots.take(engine, tables, Some(ctx.view()), SnapshotScope::Statement).await,
            (None, _) if self.settings.max_staleness().is_zero() && tests.as_ref().is_some_and(|t| t.iter().any(|t| !t.is_empty())) => {
                inner.snapshots.for_query(engine, tables, tests.unwrap_or_default()).await
            }
            (None, _) => {
                let weak = Arc::downgrade(&self.db.inner);
                let handle = inner.olap.handle().clone();
                let keep = move |id: u64, after: std::time::Duration| {
                    handle.spawn(async move {
                        let mut wait = after;
                        loop {
                            tokio::time::sleep(wait).await;
                            let Some(inner) = weak.upgrade() else { return };
                            match inner.snapshots.expire(id) {
                                Some(more) => wait = more,
                                None => return,
                            }
                        }
                    });
                };
                inner.snapshots.shared(engine, tables, self.settings.max_staleness(), keep).await
            }
        }
    }

    async fn run_insert(
        &self,
        plan: &InsertPlan,
        source: Option<&(QueryPlan, Vec<ColumnInfo>)>,
        computed: Option<Vec<Vec<Value>>>,
        param_types: &[DataType],
        params: Vec<Value>,
        now: i64,
        txn: Option<TxnCtx>,
    ) -> Result<(u64, Option<Vec<Vec<Value>>>)> {
        let table = &plan.table;
        let types: Vec<DataType> = plan.columns.iter().map(|&c| table.columns[c].ty).collect();
        let supplied: Vec<Vec<Value>> = match (&plan.source, source) {
            (InsertSource::Values(_), _) => values_rows(plan, &self.eval_context(&params, now))?,
            (InsertSource::Query(_), Some((query, columns))) => {
                let rows = match computed {
                    // The rows of a source that calls stored functions, already computed.
                    Some(rows) => rows,
                    None => {
                        let stream = Box::pin(self.run_query(query, columns, param_types, params.clone(), now, txn)).await?;
                        Box::pin(stream.collect_values(columns)).await?
                    }
                };
                let cx = self.eval_context(&params, now);
                rows.into_iter()
                    .map(|mut row| {
                        for (i, e) in &query.drawn {
                            row[*i] = e.eval(&NoRow, &cx)?;
                        }
                        freshet_core::try_vec(row.into_iter().zip(&types).map(|(v, ty)| v.assign_to(*ty)))
                    })
                    .collect::<Result<_>>()?
            }
            (InsertSource::Query(_), None) => return Err(Error::internal("INSERT … SELECT without a source plan")),
        };
        if let Some(on) = &plan.on_conflict {
            let full_rows = whole_rows(plan, supplied, &self.eval_context(&params, now))?;
            let engine = &self.db.inner.engine;
            let returning = plan.returning.is_some();
            let (n, written) = engine.upsert_rows(table, full_rows, on.clone(), returning, params.clone(), now, txn, self.settings.synchronous_commit()).await?;
            return Ok((n, returned_rows(plan, &written, &self.eval_context(&params, now))?));
        }
        let (full_rows, returned) = complete_rows(plan, supplied, &self.eval_context(&params, now))?;
        if full_rows.is_empty() {
            return Ok((0, returned));
        }
        let n = self.db.inner.engine.insert_rows(table, full_rows, txn, self.settings.synchronous_commit()).await?;
        Ok((n, returned))
    }

    async fn run_dml(&self, plan: Arc<OltpPlan>, params: Vec<Value>, now: i64, txn: Option<TxnCtx>, columns: Option<Arc<Vec<ColumnInfo>>>) -> Result<StatementResult> {
        let verb = match plan.as_ref() {
            OltpPlan::Update(_) => "UPDATE",
            OltpPlan::Delete(_) => "DELETE",
            OltpPlan::Select(_) => return Err(Error::internal("a SELECT planned as DML")),
        };
        match self.db.inner.engine.run(plan, params, now, txn, self.settings.synchronous_commit()).await? {
            OltpResult::Count(n) => Ok(StatementResult::command(format!("{verb} {n}"))),
            OltpResult::Rows(rows) if columns.is_some() => Ok(StatementResult::returning(verb, columns.unwrap_or_default(), RowStream::from_values(rows))),
            _ => Err(Error::internal("DML returned rows")),
        }
    }

    async fn run_dml_with_subqueries(
        &mut self,
        mut statement: Statement,
        param_types: &[DataType],
        params: Vec<Value>,
        now: i64,
        columns: Option<Arc<Vec<ColumnInfo>>>,
    ) -> Result<StatementResult> {
        if let Statement::Delete(d) = &statement
            && d.using.is_some()
        {
            statement = crate::update_from::delete_using(d, &self.catalog())?;
        }
        let found = rewrite::find_subqueries(&mut statement);
        let catalog = self.catalog();
        if !found.iter().any(|f| crate::procedure::stored_function_in_query(f.query(), &catalog).is_some()) {
            return self.dml_after_subqueries(statement, found, param_types, params, now, columns).await;
        }
        // Stored functions among them: they may change data, so theirs and the statement's
        // changes are one transaction, undone together.
        let types = param_types.to_vec();
        self.atomically(move |s| Box::pin(async move { s.dml_after_subqueries(statement, found, &types, params, now, columns).await })).await
    }

    /// Evaluates `found` (the subqueries of `statement`), puts their values in their places and
    /// runs the statement.
    async fn dml_after_subqueries(
        &mut self,
        mut statement: Statement,
        found: Vec<FoundSubquery>,
        param_types: &[DataType],
        params: Vec<Value>,
        now: i64,
        columns: Option<Arc<Vec<ColumnInfo>>>,
    ) -> Result<StatementResult> {
        let mut values = Vec::with_capacity(found.len());
        let mut notices = Vec::new();
        for f in found {
            let (value, mut more) = self.evaluate_subquery(f, param_types, &params, now).await?;
            values.push(value);
            notices.append(&mut more);
        }
        rewrite::replace_subqueries(&mut statement, values);
        let catalog = self.catalog();
        let mut types: Vec<Option<DataType>> = param_types.iter().copied().map(Some).collect();
        let mut result = if let Statement::Insert(insert) = &statement {
            let (kind, planned) = self.plan_insert_kind(insert, &catalog, &mut types, None).await?;
            let param_types = types.iter().map(|t| t.unwrap_or(DataType::Text)).collect();
            let prepared = Prepared { sql: String::new(), param_types, columns: columns.or(planned.map(Arc::new)), statement: Some(statement), declared: Vec::new(), kind, catalog_version: catalog.version };
            self.execute_planned_boxed(&prepared, params).await?
        } else {
            let plan = plan_dml(&statement, &catalog, &mut types)?;
            let txn = self.statement_txn();
            self.run_dml(Arc::new(plan), params, now, txn, columns).await?
        };
        notices.append(&mut result.notices);
        result.notices = notices;
        Ok(result)
    }

    /// Runs `f` as one transaction (the block's, or one of its own); inside a block, a failure
    /// undoes what it did (so that a statement `execute` runs again after a lock wait starts
    /// afresh).
    async fn atomically<T, F>(&mut self, f: F) -> Result<T>
    where
        F: for<'s> FnOnce(&'s mut Session) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<T>> + Send + 's>>,
    {
        let savepoint = if self.in_block() { Some(self.routine_savepoint().await?) } else { None };
        let result = self.in_call_transaction(f).await;
        if result.is_err()
            && let Some(sp) = savepoint
        {
            self.routine_rollback_to(&sp).await?;
        }
        result
    }

    /// [`Self::execute_planned`] of a statement run inside another (a boxed future of its own:
    /// the two futures contain each other).
    pub(crate) fn execute_planned_boxed<'a>(&'a mut self, prepared: &'a Prepared, params: Vec<Value>) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<StatementResult>> + Send + 'a>> {
        Box::pin(self.execute_planned(prepared, params))
    }

    /// [`Self::plan`] of a statement planned inside another's planning or run.
    fn plan_boxed<'a>(
        &'a self,
        statement: &'a Statement,
        catalog: &'a freshet_core::catalog::Catalog,
        params: &'a mut Vec<Option<DataType>>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(Kind, Option<Vec<ColumnInfo>>)>> + Send + 'a>> {
        Box::pin(self.plan(statement, catalog, params))
    }

    /// Plans `statement` as a client's statement and runs it inside the running one (whose
    /// parameters it shares), collecting its rows.
    async fn inner_rows(&mut self, statement: Statement, param_types: &[DataType], mut params: Vec<Value>) -> Result<(Arc<Vec<ColumnInfo>>, Vec<Vec<Value>>, Vec<Notice>)> {
        let catalog = self.catalog();
        let mut types: Vec<Option<DataType>> = param_types.iter().copied().map(Some).collect();
        let (kind, columns) = self.plan_boxed(&statement, &catalog, &mut types).await?;
        let param_types = types.iter().map(|t| t.unwrap_or(DataType::Text)).collect::<Vec<_>>();
        params.resize(param_types.len(), Value::Null);
        let prepared = Prepared { sql: String::new(), param_types, columns: columns.map(Arc::new), statement: Some(statement), declared: Vec::new(), kind, catalog_version: catalog.version };
        let result = self.execute_planned_boxed(&prepared, params).await?;
        let Output::Rows { columns, rows, .. } = result.output else { return Err(Error::internal("a query without rows")) };
        let rows = rows.collect_values(&columns).await?;
        Ok((columns, rows, result.notices))
    }

    /// Plans the parts of an UPDATE or DELETE that calls stored functions per row (see
    /// `procedure::in_dml`), typing the statement's parameters in `params`.
    async fn plan_dml_calls(
        &self,
        split: &crate::procedure::CallsInDml,
        catalog: &freshet_core::catalog::Catalog,
        params: &mut Vec<Option<DataType>>,
    ) -> Result<DmlCallsPlan> {
        params.resize(params.len().max(split.params), None);
        let rows = Statement::Query(Box::new(split.rows.clone()));
        let (rows_kind, found) = self.plan_boxed(&rows, catalog, params).await?;
        let found = found.ok_or_else(|| Error::internal("the target rows' query has no columns"))?;
        let key_len = found.len() - split.guarded.as_ref().map_or(0, |_| split.sites.iter().map(|s| s.arity).sum::<usize>());
        let mut types: Vec<Option<DataType>> = params[..split.params].to_vec();
        types.extend(found[..key_len].iter().map(|c| Some(c.ty)));
        let lock = match &split.lock {
            Some(q) => {
                let statement = Statement::Query(Box::new(q.clone()));
                let (plan, columns) = self.plan_query(q, &statement, catalog, &mut types).await?;
                Some((plan, columns))
            }
            None => None,
        };
        let mut calls = Vec::with_capacity(split.sites.len());
        let mut offset = 0;
        for site in &split.sites {
            let argument_types: Vec<DataType> = lock.as_ref().map(|(_, c)| c[offset..offset + site.arity].iter().map(|c| c.ty).collect()).unwrap_or_default();
            let known = if argument_types.is_empty() { vec![None; site.arity] } else { argument_types.iter().zip(&site.untyped).map(|(t, u)| (!u).then_some(*t)).collect() };
            let (call, value) = crate::procedure::plan_value_call(&self.db, catalog, &site.name, &site.names, known)?;
            offset += site.arity;
            calls.push((call, Arc::new(vec![value]), argument_types));
        }
        let mut row_types = types.clone();
        row_types.extend(calls.iter().map(|(_, v, _)| Some(v[0].ty)));
        let guarded = match &split.guarded {
            Some(g) => {
                let mut guarded_types = row_types.clone();
                guarded_types.extend(found[key_len..].iter().map(|c| Some(c.ty)));
                Some(Arc::new(plan_dml(g, catalog, &mut guarded_types)?))
            }
            None => None,
        };
        let per_row = Arc::new(plan_dml(&split.per_row, catalog, &mut row_types)?);
        for (p, t) in params.iter_mut().zip(&row_types) {
            *p = p.or(*t);
        }
        let done = |t: &[Option<DataType>]| t.iter().map(|t| t.unwrap_or(DataType::Text)).collect::<Vec<_>>();
        let rows = Prepared::nested(rows, rows_kind, found, done(&params[..split.params]), catalog.version);
        Ok(DmlCallsPlan { rows, key_len, lock, lock_types: done(&types), calls, per_row, guarded })
    }

    /// Runs an UPDATE or DELETE that calls stored functions per row (see `procedure::in_dml`),
    /// inside a transaction: the target rows from their query, then each row's change — in
    /// batches when no row needs reading first (no calls in SET, or calls that change nothing
    /// with the arguments the query read: `guarded`), else the locking way, one by one.
    async fn run_dml_calls(
        &mut self,
        split: &crate::procedure::CallsInDml,
        param_types: &[DataType],
        params: Vec<Value>,
        now: i64,
        columns: Option<Arc<Vec<ColumnInfo>>>,
    ) -> Result<StatementResult> {
        let catalog = self.catalog();
        let mut types: Vec<Option<DataType>> = param_types.iter().copied().map(Some).collect();
        let plan = self.plan_dml_calls(split, &catalog, &mut types).await?;
        let result = self.execute_planned_boxed(&plan.rows, params.clone()).await?;
        let Output::Rows { columns: found_columns, rows: found, .. } = result.output else { return Err(Error::internal("the target rows' query gave no rows")) };
        let found = found.collect_values(&found_columns).await?;
        let mut notices = result.notices;
        // A row the WHERE clause finds several times (a join in a subquery) changes once.
        let mut seen = std::collections::HashSet::new();
        let found: Vec<Vec<Value>> = found.into_iter().filter(|r| seen.insert(format!("{:?}", &r[..plan.key_len]))).collect();
        let txn = self.statement_txn().ok_or_else(|| Error::internal("a per-row change outside a transaction"))?;
        let engine = self.db.inner.engine.clone();
        let with_key = |r: &[Value]| -> Vec<Value> { params.iter().cloned().chain(r[..plan.key_len].iter().cloned()).collect() };
        // The values of functions that change nothing, per site and argument list.
        let mut known: HashMap<(usize, String), Value> = HashMap::new();
        let (mut count, mut returned) = (0, Vec::new());
        let mut one_by_one: Vec<Vec<Value>> = Vec::new();
        if plan.lock.is_none() {
            let lists = found.iter().map(|r| with_key(r)).collect();
            for result in engine.run_each(plan.per_row.clone(), lists, now, txn).await? {
                tally(result, &mut count, &mut returned)?;
            }
        } else if let Some(guarded) = &plan.guarded {
            let mut lists = Vec::with_capacity(found.len());
            for r in &found {
                let arguments = &r[plan.key_len..];
                let values = self.site_values(split, &plan, arguments.to_vec(), &mut known, &mut notices).await?;
                lists.push(with_key(r).into_iter().chain(values).chain(arguments.iter().cloned()).collect());
            }
            let results = engine.run_each(guarded.clone(), lists, now, txn).await?;
            for (r, result) in found.iter().zip(results) {
                match result {
                    // Changed since the query read it, or gone: read it under its lock.
                    OltpResult::Count(0) => one_by_one.push(with_key(r)),
                    OltpResult::Rows(rows) if rows.is_empty() => one_by_one.push(with_key(r)),
                    other => tally(other, &mut count, &mut returned)?,
                }
            }
        } else {
            one_by_one = found.iter().map(|r| with_key(r)).collect();
        }
        for mut all in one_by_one {
            if let Some((lock, lock_columns)) = &plan.lock {
                let txn = self.statement_txn();
                let stream = self.run_query(lock, lock_columns, &plan.lock_types, all.clone(), now, txn).await?;
                // Gone, or no longer matching the WHERE clause: not changed.
                let Some(arguments) = stream.collect_values(lock_columns).await?.into_iter().next() else { continue };
                all.extend(self.site_values(split, &plan, arguments, &mut known, &mut notices).await?);
            }
            let txn = self.statement_txn();
            tally(engine.run(plan.per_row.clone(), all, now, txn, self.settings.synchronous_commit()).await?, &mut count, &mut returned)?;
        }
        let result = match columns {
            Some(columns) => StatementResult::returning(split.verb, columns, RowStream::from_values(returned)),
            None => StatementResult::command(format!("{} {count}", split.verb)),
        };
        Ok(result.with_notices(notices))
    }

    /// The values of the SET list's calls for one row's `arguments` (all sites' in order): a
    /// function that changes nothing is called once per distinct argument list (`known`).
    async fn site_values(
        &mut self,
        split: &crate::procedure::CallsInDml,
        plan: &DmlCallsPlan,
        arguments: Vec<Value>,
        known: &mut HashMap<(usize, String), Value>,
        notices: &mut Vec<Notice>,
    ) -> Result<Vec<Value>> {
        let mut arguments = arguments.into_iter();
        let mut values = Vec::with_capacity(split.sites.len());
        for (k, (site, (call, value, argument_types))) in split.sites.iter().zip(&plan.calls).enumerate() {
            let args: Vec<Value> = arguments.by_ref().take(site.arity).collect();
            let memo = (k, format!("{args:?}"));
            let v = match known.get(&memo) {
                Some(v) if site.reads_only => v.clone(),
                _ => {
                    let result = self.run_call(call, argument_types, args, Some(value.clone())).await?;
                    notices.extend(result.notices);
                    let Output::Rows { columns: shape, rows, .. } = result.output else { return Err(Error::internal("a function call without a result")) };
                    let v = rows.collect_values(&shape).await?.into_iter().next().and_then(|r| r.into_iter().next()).unwrap_or(Value::Null);
                    if site.reads_only {
                        known.insert(memo, v.clone());
                    }
                    v
                }
            };
            values.push(v);
        }
        Ok(values)
    }

    /// UPDATE … FROM: the query that finds the target rows and the source values, then an
    /// UPDATE of each row by its key (`update_from`), all in one transaction; inside a block,
    /// a failure undoes the rows it already changed (a lock wait makes `execute` run it again).
    async fn run_update_from(&mut self, statement: Statement, param_types: Vec<DataType>, params: Vec<Value>, now: i64) -> Result<StatementResult> {
        let Statement::Update(u) = &statement else { return Err(Error::internal("not an UPDATE")) };
        let catalog = self.catalog();
        let rewritten = crate::update_from::rewrite(u, &catalog, param_types.len())?;
        self.atomically(move |s| Box::pin(async move { s.update_from_rows(rewritten, &catalog, &param_types, params, now).await })).await
    }

    /// Plans the statements an UPDATE … FROM runs (`update_from::rewrite`): the query, the
    /// sequence calls of its SET list, and the one-row UPDATE, whose parameters after the
    /// statement's own are typed by the query's columns and the calls'.
    /// The statement's own parameters (`params`) are typed where the two statements give them
    /// a type, and the others left as they were.
    async fn plan_update_from(&self, rewritten: &crate::update_from::Rewritten, catalog: &freshet_core::catalog::Catalog, params: &mut Vec<Option<DataType>>) -> Result<UpdateFromPlan> {
        let mut select = rewritten.select.clone();
        views::expand(&mut select, catalog)?;
        let Statement::Query(query) = &select else { return Err(Error::internal("the rewritten UPDATE … FROM has no query")) };
        let own = params.len();
        let (query, columns) = self.plan_query(query, &select, catalog, params).await?;
        params.truncate(own);
        // The sequence calls, bound as a SELECT without FROM the session evaluates.
        let (draws, drawn_columns) = if rewritten.draws.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            let q = freshet_core::sql::parse::parse(&format!("SELECT {}", rewritten.draws.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")))?;
            let [Statement::Query(q)] = q.as_slice() else { return Err(Error::internal("the sequence calls are not a query")) };
            let mut types = params.clone();
            crate::sequences::session_select(q, &mut types)?.ok_or_else(|| Error::internal("the sequence calls do not bind"))?
        };
        let key_len = rewritten.key_len;
        let mut types = params.clone();
        types.extend(columns[..key_len].iter().map(|c| Some(c.ty)));
        types.extend(drawn_columns.iter().map(|c| Some(c.ty)));
        types.extend(columns[key_len..].iter().map(|c| Some(c.ty)));
        let update = Arc::new(plan_dml(&rewritten.update, catalog, &mut types)?);
        for (param, ty) in params.iter_mut().zip(types) {
            *param = param.or(ty);
        }
        Ok(UpdateFromPlan { query, columns, draws, update })
    }

    async fn update_from_rows(
        &mut self,
        rewritten: crate::update_from::Rewritten,
        catalog: &freshet_core::catalog::Catalog,
        param_types: &[DataType],
        params: Vec<Value>,
        now: i64,
    ) -> Result<StatementResult> {
        let mut types: Vec<Option<DataType>> = param_types.iter().copied().map(Some).collect();
        let UpdateFromPlan { query, columns, draws, update } = self.plan_update_from(&rewritten, catalog, &mut types).await?;
        let txn = self.statement_txn();
        let stream = self.run_query(&query, &columns, param_types, params.clone(), now, txn).await?;
        let rows = stream.collect_values(&columns).await?;
        let key_len = rewritten.key_len;
        let mut seen = std::collections::HashSet::new();
        let mut count = 0;
        let mut returned = Vec::new();
        for row in rows {
            // A target row joined by several source rows is updated once, as in PostgreSQL.
            if !seen.insert(format!("{:?}", &row[..rewritten.key_len])) {
                continue;
            }
            let drawn = {
                let cx = self.eval_context(&params, now);
                freshet_core::try_vec(draws.iter().map(|e| e.eval(&NoRow, &cx)))?
            };
            let mut row = row;
            let references = row.split_off(key_len);
            let all: Vec<Value> = params.iter().cloned().chain(row).chain(drawn).chain(references).collect();
            let txn = self.statement_txn();
            match self.db.inner.engine.run(update.clone(), all, now, txn, self.settings.synchronous_commit()).await? {
                OltpResult::Count(n) => count += n,
                OltpResult::Rows(rows) if rewritten.returning => {
                    count += rows.len() as u64;
                    returned.extend(rows);
                }
                _ => return Err(Error::internal("an UPDATE returned rows")),
            }
        }
        match update.returning_columns() {
            Some(r) if rewritten.returning => Ok(StatementResult::returning("UPDATE", Arc::new(returning_columns(r)), RowStream::from_values(returned))),
            _ => Ok(StatementResult::command(format!("UPDATE {count}"))),
        }
    }

    /// A DML statement's subquery's value, and the notices of the stored functions it called.
    async fn evaluate_subquery(&mut self, found: FoundSubquery, param_types: &[DataType], params: &[Value], now: i64) -> Result<(SubqueryValue, Vec<Notice>)> {
        let (query, kind) = match found {
            FoundSubquery::Scalar(q) => (q, 0),
            FoundSubquery::In(q) => (q, 1),
            FoundSubquery::Exists(q) => (q, 2),
        };
        let catalog = self.catalog();
        let mut statement = Statement::Query(Box::new(query));
        views::expand(&mut statement, &catalog)?;
        let Statement::Query(query) = &statement else { return Err(Error::internal("a subquery is not a query")) };
        let (columns, rows, notices) = if crate::procedure::stored_function_in_query(query, &catalog).is_some() {
            // Planned as a client's query would be, for its calls.
            let (columns, rows, notices) = self.inner_rows(statement, param_types, params.to_vec()).await?;
            (columns.to_vec(), rows, notices)
        } else {
            let mut types: Vec<Option<DataType>> = param_types.iter().copied().map(Some).collect();
            let (plan, columns) = self.plan_query(query, &statement, &catalog, &mut types).await?;
            let param_types: Vec<DataType> = types.iter().map(|t| t.unwrap_or(DataType::Text)).collect();
            let mut params = params.to_vec();
            params.resize(param_types.len(), Value::Null);
            let txn = self.statement_txn();
            let stream = self.run_query(&plan, &columns, &param_types, params, now, txn).await?;
            let rows = stream.collect_values(&columns).await?;
            (columns, rows, Vec::new())
        };
        if kind == 2 {
            return Ok((SubqueryValue::Exists(!rows.is_empty()), notices));
        }
        if columns.len() != 1 {
            return Err(Error::syntax("subquery must return only one column"));
        }
        let ty = columns[0].ty;
        if kind == 1 {
            return Ok((SubqueryValue::List(rows.into_iter().filter_map(|mut r| r.pop()).collect(), ty), notices));
        }
        let value = match rows.len() {
            0 => SubqueryValue::Scalar(Value::Null, ty),
            1 => SubqueryValue::Scalar(rows.into_iter().next().and_then(|mut r| r.pop()).unwrap_or(Value::Null), ty),
            _ => return Err(Error::new(SqlState::CardinalityViolation, "more than one row returned by a subquery used as an expression")),
        };
        Ok((value, notices))
    }

    fn show(&self, name: &str) -> Result<String> {
        match name {
            "transaction_isolation" | "transaction isolation level" => Ok(match &self.txn {
                Some(t) => t.isolation.name().to_string(),
                None => self.settings.get("default_transaction_isolation").unwrap_or_default(),
            }),
            "transaction_read_only" => Ok(match &self.txn {
                Some(t) => if t.read_only { "on" } else { "off" }.to_string(),
                None => self.settings.get("default_transaction_read_only").unwrap_or_default(),
            }),
            "time zone" => Ok(self.settings.get("timezone").unwrap_or_default()),
            _ => self.settings.get(name).ok_or_else(|| {
                Error::new(SqlState::UndefinedObject, format!("unrecognized configuration parameter \"{name}\""))
            }),
        }
    }

    fn run_utility(&mut self, statement: &Statement, columns: Option<Arc<Vec<ColumnInfo>>>) -> Result<StatementResult> {
        match statement {
            Statement::CreateSchema { schema_name, .. } => Ok(StatementResult::command("CREATE SCHEMA")
                .with_notices(vec![format!("schema \"{}\" already exists, skipping", schema_name.to_string().to_lowercase())])),
            // Every session may read and change everything (there is one user, trusted): the
            // statements about roles and privileges are accepted and change nothing, with a
            // notice saying so (migration tools and dumps issue them).
            Statement::Grant(_) | Statement::Revoke(_) | Statement::CreateRole(_) | Statement::AlterRole { .. } => {
                let tag = match statement {
                    Statement::Grant(_) => "GRANT",
                    Statement::Revoke(_) => "REVOKE",
                    Statement::CreateRole(_) => "CREATE ROLE",
                    _ => "ALTER ROLE",
                };
                Ok(StatementResult::command(tag)
                    .with_notices(vec![format!("{tag} has no effect: Freshet has no roles or privileges, and every session may read and change every table")]))
            }
            Statement::LISTEN { channel } => {
                self.sequences.notify.listen(&fold_ident(channel))?;
                Ok(StatementResult::command("LISTEN"))
            }
            Statement::UNLISTEN { channel } => {
                let name = fold_ident(channel);
                self.sequences.notify.unlisten((name != "*").then_some(name.as_str()));
                Ok(StatementResult::command("UNLISTEN"))
            }
            Statement::NOTIFY { channel, payload } => {
                self.sequences.notify.notify(&fold_ident(channel), payload.as_deref().unwrap_or(""))?;
                Ok(StatementResult::command("NOTIFY"))
            }
            // The extensions whose functions Freshet has (gen_random_uuid, uuid_generate_v4,
            // PL/pgSQL) are always there: creating one does nothing, as a second CREATE
            // EXTENSION IF NOT EXISTS does in PostgreSQL.
            Statement::CreateExtension(ce) => {
                let result = StatementResult::command("CREATE EXTENSION");
                Ok(if ce.if_not_exists {
                    result.with_notices(vec![format!("extension \"{}\" already exists, skipping", fold_ident(&ce.name))])
                } else {
                    result
                })
            }
            Statement::ShowVariable { variable } => {
                let name = show_name(variable);
                let rows = if name == "all" {
                    self.settings.all().into_iter().map(|(n, v, d)| vec![Value::Text(n), Value::Text(v), Value::Text(d)]).collect()
                } else {
                    vec![vec![Value::Text(self.show(&name)?)]]
                };
                Ok(StatementResult::rows(columns.unwrap_or_default(), RowStream::from_values(rows)))
            }
            Statement::Set(set) => self.run_set(set),
            Statement::Reset(reset) => {
                let mut result = StatementResult::command("RESET");
                match &reset.reset {
                    ast::Reset::ALL => self.settings.reset_all(),
                    ast::Reset::ConfigurationParameter(name) => {
                        let n = name.0.iter().filter_map(|p| p.as_ident()).map(fold_ident).collect::<Vec<_>>().join(".");
                        result.parameter_status.extend(self.settings.reset(&n));
                    }
                }
                Ok(result)
            }
            // As PostgreSQL's: ALL resets settings, drops SQL prepared statements, stops
            // listening, releases session-level advisory locks and forgets sequence values;
            // SEQUENCES forgets the values only. Plans are re-made when the catalog changes
            // and there are no temporary tables, so PLANS and TEMP have nothing to discard.
            Statement::Discard { object_type } => match object_type {
                ast::DiscardObject::ALL => {
                    if self.txn.is_some() {
                        return Err(Error::new(SqlState::ActiveSqlTransaction, "DISCARD ALL cannot run inside a transaction block"));
                    }
                    self.settings.reset_all();
                    self.prepared_sql.clear();
                    self.cursors.clear();
                    self.sequences.discard();
                    Ok(StatementResult::command("DISCARD ALL"))
                }
                ast::DiscardObject::SEQUENCES => {
                    self.sequences.discard_values();
                    Ok(StatementResult::command("DISCARD SEQUENCES"))
                }
                ast::DiscardObject::PLANS => Ok(StatementResult::command("DISCARD PLANS")),
                ast::DiscardObject::TEMP => Ok(StatementResult::command("DISCARD TEMP")),
            },
            // Nothing to reclaim or collect: deleted slots are reused as soon as the delete
            // commits, and the planners keep no statistics yet.
            // Freshet has no roles that own objects: a change of owner is accepted, once the
            // relation is known (pg_dump writes one for every table and sequence).
            Statement::AlterTable(at) => {
                let name = freshet_core::sql::names::user_relation(&at.name)?;
                if !self.db.inner.engine.catalog().relation_exists(&name) {
                    return Err(Error::new(SqlState::UndefinedTable, format!("relation \"{name}\" does not exist")));
                }
                Ok(StatementResult::command("ALTER TABLE"))
            }
            // Likewise `ALTER FUNCTION | PROCEDURE f(…) OWNER TO role`, once the routine is known
            // (pg_dump writes one after each routine).
            Statement::Pragma { name, value: Some(v), .. } if name.to_string() == freshet_core::sql::parse::ALTER_ROUTINE_PRAGMA => {
                let ast::Value::SingleQuotedString(text) = &v.value else { return Err(Error::internal("ALTER FUNCTION without text")) };
                let alter = freshet_core::sql::plpgsql::parser::parse_alter(text)?;
                let catalog = self.db.inner.engine.catalog();
                if catalog.named_routine(alter.function, &alter.name, alter.types.as_deref())?.is_none() {
                    return Err(freshet_core::catalog::Catalog::missing_routine(alter.function, &alter.name, alter.types.as_deref()));
                }
                Ok(StatementResult::command(if alter.function { "ALTER FUNCTION" } else { "ALTER PROCEDURE" }))
            }
            Statement::Vacuum(_) => Ok(StatementResult::command("VACUUM")),
            Statement::Analyze(_) => Ok(StatementResult::command("ANALYZE")),
            Statement::Pragma { name, value: Some(v), .. } if name.to_string() == freshet_core::sql::parse::SET_CONSTRAINTS_PRAGMA => {
                let ast::Value::SingleQuotedString(text) = &v.value else { return Err(Error::internal("SET CONSTRAINTS without text")) };
                self.set_constraints(text)
            }
            other => Err(Error::unsupported(statement_name(other))),
        }
    }

    /// `SET CONSTRAINTS {ALL | name, …} {IMMEDIATE | DEFERRED}`: every constraint Freshet
    /// checks (primary keys, UNIQUE, CHECK, NOT NULL) is checked at once and none is
    /// deferrable, so the statement changes nothing. As in PostgreSQL, a name must be a
    /// constraint (42704) and naming one with DEFERRED fails (55000); ALL DEFERRED leaves the
    /// non-deferrable ones immediate. Outside a block PostgreSQL warns that it has no effect.
    fn set_constraints(&self, text: &str) -> Result<StatementResult> {
        let syntax = || Error::syntax(format!("syntax error in SET CONSTRAINTS {text}"));
        let (names, mode) = text.trim().rsplit_once(char::is_whitespace).ok_or_else(syntax)?;
        let deferred = match mode.to_ascii_lowercase().as_str() {
            "deferred" => true,
            "immediate" => false,
            _ => return Err(syntax()),
        };
        let names: Vec<String> = names
            .split(',')
            .map(|n| {
                let n = n.trim();
                match n.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
                    Some(quoted) => quoted.replace("\"\"", "\""),
                    None => n.to_lowercase(),
                }
            })
            .collect();
        if names.iter().any(String::is_empty) {
            return Err(syntax());
        }
        if names != ["all"] {
            let catalog = self.catalog();
            for name in &names {
                let exists = catalog.tables().any(|t| t.indexes.iter().any(|i| (i.unique || i.primary) && &i.name == name) || t.checks.iter().any(|k| &k.name == name));
                if !exists {
                    return Err(Error::new(SqlState::UndefinedObject, format!("constraint \"{name}\" does not exist")));
                }
                if deferred {
                    return Err(Error::new(SqlState::ObjectNotInPrerequisiteState, format!("constraint \"{name}\" is not deferrable")));
                }
            }
        }
        let result = StatementResult::command("SET CONSTRAINTS");
        Ok(if self.txn.is_none() { result.with_notices(vec![String::from("SET CONSTRAINTS can only be used in transaction blocks")]) } else { result })
    }

    fn run_set(&mut self, set: &ast::Set) -> Result<StatementResult> {
        let mut result = StatementResult::command("SET");
        match set {
            ast::Set::SingleAssignment { variable, values, .. } => {
                let name = variable.0.iter().filter_map(|p| p.as_ident()).map(fold_ident).collect::<Vec<_>>().join(".");
                let value = values.iter().map(set_value).collect::<Vec<_>>().join(", ");
                if value.eq_ignore_ascii_case("default") {
                    result.parameter_status.extend(self.settings.reset(&name));
                } else {
                    result.parameter_status.extend(self.settings.set(&name, &value)?);
                    if name == "timezone" {
                        result.notices.extend(zone_not_applied(&value).map(Notice::from));
                    }
                }
            }
            ast::Set::SetTimeZone { value, .. } => {
                let value = set_value(value);
                result.parameter_status.extend(self.settings.set("timezone", &value)?);
                result.notices.extend(zone_not_applied(&value).map(Notice::from));
            }
            ast::Set::SetNames { charset_name, .. } => {
                result.parameter_status.extend(self.settings.set("client_encoding", &charset_name.value)?);
            }
            ast::Set::SetTransaction { modes, session: true, .. } => {
                let (isolation, read_only) = txn_block::modes(modes);
                if let Some(i) = isolation {
                    self.settings.set("default_transaction_isolation", i.name())?;
                }
                if let Some(r) = read_only {
                    result.parameter_status.extend(self.settings.set("default_transaction_read_only", if r { "on" } else { "off" })?);
                }
            }
            ast::Set::SetTransaction { modes, session: false, .. } => {
                let (isolation, read_only) = txn_block::modes(modes);
                match &mut self.txn {
                    None => result.notices.push("SET TRANSACTION can only be used in transaction blocks".into()),
                    Some(t) if t.started && isolation.is_some_and(|i| i != t.isolation) => {
                        return Err(Error::new(
                            SqlState::ActiveSqlTransaction,
                            "SET TRANSACTION ISOLATION LEVEL must be called before any query",
                        ))
                    }
                    Some(t) => {
                        t.isolation = isolation.unwrap_or(t.isolation);
                        t.read_only = read_only.unwrap_or(t.read_only);
                    }
                }
            }
            other => return Err(Error::unsupported(format!("SET form {other}"))),
        }
        Ok(result)
    }

    async fn run_transaction_statement(&mut self, statement: TxnStatement) -> Result<StatementResult> {
        let engine = self.db.inner.engine.clone();
        match statement {
            TxnStatement::Begin { isolation, read_only } => {
                if self.txn.is_some() {
                    return Ok(StatementResult::command("BEGIN").with_notices(["there is already a transaction in progress"]));
                }
                let isolation = isolation
                    .or_else(|| self.settings.default_isolation())
                    .unwrap_or(Isolation::Serializable);
                let read_only = read_only.unwrap_or_else(|| self.settings.default_read_only());
                self.txn = Some(SessionTxn::new(&engine, isolation, read_only));
                Ok(StatementResult::command("BEGIN"))
            }
            TxnStatement::Commit => match self.txn.take() {
                None => Ok(StatementResult::command("COMMIT").with_notices(["there is no transaction in progress"])),
                Some(t) => {
                    let failed = t.failed;
                    if !failed && let Err(e) = self.cursors.before_commit().await {
                        self.cursors.block_ended(false);
                        self.db.inner.activity.transaction_ended(false);
                        txn_block::rollback(&engine, t, &self.sequences).await?;
                        return Err(e);
                    }
                    let result = if t.views.is_empty() {
                        txn_block::commit(&engine, t, self.settings.synchronous_commit(), &self.sequences).await
                    } else {
                        Box::pin(self.commit_with_views(t)).await
                    };
                    // COMMIT of a failed block rolls it back, as in PostgreSQL.
                    self.cursors.block_ended(result.is_ok() && !failed);
                    self.db.inner.activity.transaction_ended(result.is_ok() && !failed);
                    result
                }
            },
            TxnStatement::Rollback => match self.txn.take() {
                None => Ok(StatementResult::command("ROLLBACK").with_notices(["there is no transaction in progress"])),
                Some(t) => {
                    self.cursors.block_ended(false);
                    self.db.inner.activity.transaction_ended(false);
                    txn_block::rollback(&engine, t, &self.sequences).await
                }
            },
            TxnStatement::Savepoint(name) => {
                let Some(t) = &mut self.txn else {
                    return Err(Error::new(SqlState::NoActiveSqlTransaction, "SAVEPOINT can only be used in transaction blocks"));
                };
                let mark = txn_block::savepoint(&engine, t).await?;
                t.savepoints.push((name, mark));
                t.marks.push(txn_block::BlockMark {
                    views: t.views.len(),
                    restarts: t.restarts.len(),
                    session: self.sequences.mark(),
                    cursors: self.cursors.mark(),
                });
                Ok(StatementResult::command("SAVEPOINT"))
            }
            TxnStatement::RollbackTo(name) => {
                let Some(t) = &mut self.txn else {
                    return Err(Error::new(SqlState::NoActiveSqlTransaction, "ROLLBACK TO SAVEPOINT can only be used in transaction blocks"));
                };
                let Some(pos) = t.savepoints.iter().rposition(|(n, _)| *n == name) else {
                    t.failed = true;
                    return Err(txn_block::no_savepoint(&name));
                };
                let mark = t.savepoints[pos].1.clone();
                t.savepoints.truncate(pos + 1);
                t.marks.truncate(pos + 1);
                if let Some(&mark) = t.marks.get(pos) {
                    if mark.views < t.views.len() {
                        t.views.truncate(mark.views);
                        t.view_epoch += 1;
                    }
                    t.undo_restarts(mark.restarts, &self.sequences)?;
                    self.sequences.rollback_to(mark.session);
                    self.cursors.rolled_back_to(mark.cursors);
                }
                txn_block::rollback_to(&engine, t, &mark).await?;
                Ok(StatementResult::command("ROLLBACK"))
            }
            TxnStatement::Release(name) => {
                let Some(t) = &mut self.txn else {
                    return Err(Error::new(SqlState::NoActiveSqlTransaction, "RELEASE SAVEPOINT can only be used in transaction blocks"));
                };
                let Some(pos) = t.savepoints.iter().rposition(|(n, _)| *n == name) else {
                    t.failed = true;
                    return Err(txn_block::no_savepoint(&name));
                };
                t.savepoints.truncate(pos);
                t.marks.truncate(pos);
                Ok(StatementResult::command("RELEASE"))
            }
        }
    }

    /// COMMIT of a block that created or dropped views: they are checked against the catalog
    /// as it is now (a failure rolls the block back), the block's rows commit, then the views
    /// change, each as its own DDL.
    async fn commit_with_views(&mut self, mut t: SessionTxn) -> Result<StatementResult> {
        let engine = self.db.inner.engine.clone();
        let changes = match views::to_commit(&engine.catalog(), std::mem::take(&mut t.views)) {
            Ok(c) => c,
            Err(e) => {
                txn_block::rollback(&engine, t, &self.sequences).await?;
                return Err(e);
            }
        };
        let result = txn_block::commit(&engine, t, self.settings.synchronous_commit(), &self.sequences).await?;
        for change in changes {
            engine.execute_ddl(change.ddl()).await?;
        }
        Ok(result)
    }

    /// TRUNCATE: inside a transaction block (or while transactions run) it deletes every row
    /// as part of the transaction; otherwise it drops the storage at once.
    async fn truncate(&mut self, tables: &[String], now: i64) -> Result<StatementResult> {
        let engine = self.db.inner.engine.clone();
        if self.txn.is_none() && !engine.registry().any_active() {
            let outcome = engine.execute_ddl(DdlPlan::Truncate { tables: tables.to_vec(), restart_identity: false }).await?;
            return Ok(StatementResult::command(outcome.tag));
        }
        let catalog = engine.catalog();
        for name in tables {
            let table = catalog.require_table(name)?.clone();
            let plan = OltpPlan::Delete(plan::DeletePlan { table, filter: None, residual: None, residual_within_bounds: None, access: plan::Access::Scan, returning: None, reads: 0 });
            let txn = self.statement_txn();
            engine.run(Arc::new(plan), vec![], now, txn, self.settings.synchronous_commit()).await?;
        }
        Ok(StatementResult::command("TRUNCATE TABLE"))
    }

    /// Runs SQL text (one or more statements) and collects each statement's result: the
    /// embedded API. COPY FROM STDIN is not available here (use [`Session::copy_in`]).
    pub async fn execute_sql(&mut self, sql: &str) -> Result<Vec<QueryResult>> {
        let statements = self.parse(sql)?;
        let mut out = Vec::with_capacity(statements.len());
        for statement in statements {
            let text = statement.to_string();
            let prepared = match self.prepare_statement(statement, &text, &[]).await {
                Ok(p) => p,
                Err(e) => {
                    // A statement that does not plan fails an open block too.
                    self.statement_failed();
                    return Err(e);
                }
            };
            out.push(self.collect(&prepared, vec![]).await?);
        }
        Ok(out)
    }

    /// Executes a prepared statement and collects its result. A failure while its rows are
    /// produced fails an open block, as a failure of `execute` does.
    pub async fn collect(&mut self, prepared: &Arc<Prepared>, params: Vec<Value>) -> Result<QueryResult> {
        let result = self.collect_output(prepared, params).await;
        if result.is_err() {
            self.statement_failed();
        }
        result
    }

    async fn collect_output(&mut self, prepared: &Arc<Prepared>, params: Vec<Value>) -> Result<QueryResult> {
        let result = self.execute(prepared, params).await?;
        let notices = result.notices;
        match result.output {
            Output::Command { tag } => Ok(QueryResult { tag, columns: vec![], batches: vec![], notices }),
            Output::Empty => Ok(QueryResult { tag: String::new(), columns: vec![], batches: vec![], notices }),
            Output::Rows { columns, rows, verb } => {
                let batches = rows.collect_arrow(&columns).await?;
                let n: usize = batches.iter().map(|b| b.num_rows()).sum();
                Ok(QueryResult { tag: format!("{verb} {n}"), columns: columns.to_vec(), batches, notices })
            }
            Output::CopyOut(copy) => {
                let columns = copy.columns.clone();
                let batches = copy.rows.collect_arrow(&columns).await?;
                let n: usize = batches.iter().map(|b| b.num_rows()).sum();
                Ok(QueryResult { tag: format!("COPY {n}"), columns: columns.to_vec(), batches, notices })
            }
            Output::CopyIn(copy) => {
                copy.abort().await;
                Err(Error::unsupported("COPY FROM STDIN through the embedded API (use Session::copy_in)"))
            }
        }
    }

    /// Runs `COPY … FROM STDIN` with `data` as its input; returns the number of rows copied.
    pub async fn copy_in(&mut self, sql: &str, data: &[u8]) -> Result<u64> {
        let prepared = self.prepare(sql, &[]).await?;
        match self.execute(&prepared, vec![]).await?.output {
            Output::CopyIn(mut copy) => {
                if let Err(e) = copy.write(data).await {
                    copy.abort().await;
                    return Err(e);
                }
                copy.finish().await
            }
            _ => Err(Error::syntax("copy_in needs a COPY … FROM STDIN statement")),
        }
    }

    /// [`execute_sql`](Self::execute_sql) for callers outside an async runtime.
    pub fn execute_blocking(&mut self, sql: &str) -> Result<Vec<QueryResult>> {
        futures::executor::block_on(self.execute_sql(sql))
    }
}

/// The parameter a SHOW names: words (`SHOW transaction isolation level`) or, for a custom
/// parameter, a dotted name (`SHOW freshet.max_staleness`, which the parser splits too).
fn show_name(variable: &[ast::Ident]) -> String {
    let words: Vec<String> = variable.iter().map(fold_ident).collect();
    let spaced = words.join(" ");
    if words.len() == 2 && !matches!(spaced.as_str(), "time zone") { words.join(".") } else { spaced }
}

/// The name of SHOW's result column: the parameter's own name, as PostgreSQL spells it
/// (`SHOW transaction isolation level` shows `transaction_isolation`, `SHOW time zone`
/// `TimeZone`).
fn show_column(name: &str) -> &str {
    match name {
        "transaction isolation level" => "transaction_isolation",
        "time zone" | "timezone" => "TimeZone",
        "datestyle" => "DateStyle",
        "intervalstyle" => "IntervalStyle",
        other => other,
    }
}

/// Extensions whose functions Freshet has built in (`CREATE EXTENSION` accepts them): the
/// uuid generators of uuid-ossp (`uuid_generate_v4`) and pgcrypto (`gen_random_uuid`), and
/// PL/pgSQL. Only those functions are there, not the extensions' others.
const BUILT_IN_EXTENSIONS: &[&str] = &["plpgsql", "uuid-ossp", "pgcrypto"];

/// The RETURNING columns of an UPDATE or DELETE planned before its subqueries run (DELETE …
/// USING, DML with subqueries): bound over the target table alone, as RETURNING reads only
/// the target's columns.
/// "INSERT", "UPDATE" or "DELETE": what a data-changing statement does.
/// Whether a statement is an INSERT (with or without `OVERRIDING … VALUE`), UPDATE or DELETE.
fn is_dml(statement: &Statement) -> bool {
    match statement {
        Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => true,
        Statement::Pragma { name, .. } => name.to_string() == freshet_core::sql::parse::INSERT_OVERRIDING_PRAGMA,
        _ => false,
    }
}

fn verb_of(statement: &Statement) -> &'static str {
    match statement {
        Statement::Insert(_) => "INSERT",
        Statement::Update(_) => "UPDATE",
        _ => "DELETE",
    }
}

/// Whether the rows of an INSERT … VALUES hold subqueries (evaluated before it is planned).
fn has_values_subqueries(insert: &ast::Insert) -> bool {
    let mut probe = Statement::Insert(insert.clone());
    matches!(insert.source.as_deref().map(|q| q.body.as_ref()), Some(ast::SetExpr::Values(_))) && !rewrite::find_subqueries(&mut probe).is_empty()
}

fn dml_returning_columns(statement: &Statement, catalog: &freshet_core::catalog::Catalog, params: &mut Vec<Option<DataType>>) -> Result<Option<Vec<ColumnInfo>>> {
    if let Statement::Insert(i) = statement {
        let Some(returning) = &i.returning else { return Ok(None) };
        let ast::TableObject::TableName(name) = &i.table else { return Err(Error::unsupported("INSERT into a table function")) };
        let table = catalog.require_table(&user_relation(name)?)?;
        let bound = plan::bind_returning(table, i.table_alias.as_ref().map(|a| &a.alias), &Some(returning.clone()), params)?;
        return Ok(bound.as_ref().map(returning_columns));
    }
    let (relation, returning) = match statement {
        Statement::Update(u) => (&u.table.relation, &u.returning),
        Statement::Delete(d) => match &d.from {
            ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => match f.as_slice() {
                [t] => (&t.relation, &d.returning),
                _ => return Ok(None),
            },
        },
        _ => return Ok(None),
    };
    if returning.is_none() {
        return Ok(None);
    }
    let ast::TableFactor::Table { name, alias, .. } = relation else { return Err(Error::unsupported("RETURNING from a join")) };
    let table = catalog.require_table(&user_relation(name)?)?;
    let bound = plan::bind_returning(table, alias.as_ref().map(|a| &a.name), returning, params)?;
    Ok(bound.as_ref().map(returning_columns))
}

/// Whether the transaction a statement ended (outside a block: its own; COMMIT or ROLLBACK:
/// the block's) committed: it succeeded and was not a ROLLBACK, or a COMMIT of a failed block,
/// which rolls back.
fn committed(kind: &Kind, result: &Result<StatementResult>) -> bool {
    match (kind, result) {
        (_, Err(_)) | (Kind::Transaction(TxnStatement::Rollback), _) => false,
        (_, Ok(StatementResult { output: Output::Command { tag }, .. })) => tag != "ROLLBACK",
        _ => true,
    }
}

/// 26000, as PostgreSQL reports an unknown prepared statement name.
fn no_prepared(name: &str) -> Error {
    Error::new(SqlState::InvalidSqlStatementName, format!("prepared statement \"{name}\" does not exist"))
}

/// What a statement kind changes, if anything (for read-only transactions).
fn writes(kind: &Kind) -> Option<&'static str> {
    match kind {
        Kind::Insert { .. } => Some("INSERT"),
        Kind::Dml(p) if matches!(p.as_ref(), OltpPlan::Update(_)) => Some("UPDATE"),
        Kind::UpdateFrom => Some("UPDATE"),
        Kind::Dml(_) => Some("DELETE"),
        Kind::DmlWithSubqueries { verb, .. } => Some(verb),
        Kind::DmlCalls(split) => Some(split.verb),
        Kind::ReturningCalls { inner, .. } | Kind::ExplainAnalyzeDml { inner, .. } => writes(&inner.kind),
        Kind::DeclareCursor(d) => writes(&d.query.kind),
        Kind::CopyFrom { .. } => Some("COPY FROM"),
        Kind::Ddl(_) | Kind::CreateTableAs { .. } => Some("DDL"),
        _ => None,
    }
}

/// The sequence function a statement the session evaluates calls that changes a sequence
/// (refused in a read-only transaction, as in PostgreSQL), if any.
fn changes_a_sequence(kind: &Kind) -> Option<&'static str> {
    let Kind::SessionSelect(items) = kind else { return None };
    let mut found = None;
    for e in items {
        e.visit(&mut |n| {
            if let freshet_core::sql::expr::Expr::Func { func, .. } = n {
                found = found.or(match func {
                    freshet_core::sql::expr::Func::Nextval => Some("nextval()"),
                    freshet_core::sql::expr::Func::Setval => Some("setval()"),
                    _ => None,
                });
            }
        });
    }
    found
}

fn needs_catalog(kind: &Kind) -> bool {
    matches!(
        kind,
        Kind::Query(_)
            | Kind::Insert { .. }
            | Kind::Dml(_)
            | Kind::CopyFrom { .. }
            | Kind::CopyTo { .. }
            | Kind::CreateTableAs { .. }
            | Kind::ReturningCalls { .. }
            | Kind::DmlWithSubqueries { .. }
            | Kind::DmlCalls(_)
            | Kind::DeclareCursor(_)
            | Kind::ExplainAnalyzeDml { .. }
    )
}

fn plan_dml(statement: &Statement, catalog: &freshet_core::catalog::Catalog, params: &mut Vec<Option<DataType>>) -> Result<OltpPlan> {
    match statement {
        Statement::Update(u) => Ok(OltpPlan::Update(plan::plan_update(catalog, u, params)?)),
        Statement::Delete(d) => Ok(OltpPlan::Delete(plan::plan_delete(catalog, d, params)?)),
        _ => Err(Error::internal("not an UPDATE or DELETE")),
    }
}

/// An UPDATE … FROM planned ([`Session::plan_update_from`]).
struct UpdateFromPlan {
    query: QueryPlan,
    /// The query's columns: the target's key, then the source references.
    columns: Vec<ColumnInfo>,
    /// The SET list's sequence calls, evaluated by the session for each row.
    draws: Vec<freshet_core::sql::expr::Expr>,
    update: Arc<OltpPlan>,
}

fn returning_columns(r: &plan::Returning) -> Vec<ColumnInfo> {
    r.columns.iter().map(|c| ColumnInfo { name: c.name.clone(), ty: c.ty }).collect()
}

/// Checks that the query's columns can be stored in the INSERT's target columns: as many, and
/// each of a type assignable to its column's, or `untyped` (a bare NULL).
fn check_insert_source(plan: &InsertPlan, columns: &[ColumnInfo], untyped: &[bool]) -> Result<()> {
    if columns.len() > plan.columns.len() {
        return Err(Error::syntax("INSERT has more expressions than target columns"));
    }
    if columns.len() < plan.columns.len() {
        return Err(Error::syntax("INSERT has more target columns than expressions"));
    }
    for (i, (c, &target)) in columns.iter().zip(&plan.columns).enumerate() {
        let col = &plan.table.columns[target];
        if !untyped.get(i).copied().unwrap_or(false) && !assignable(c.ty.family(), col.ty) {
            return Err(Error::mismatch(format!(
                "column \"{}\" is of type {} but expression is of type {}",
                col.name,
                col.ty.pg_name(),
                c.ty.pg_name()
            )));
        }
    }
    Ok(())
}

/// `COPY t (a, b) TO STDOUT` as the query `SELECT a, b FROM t`.
fn copy_table_query(table: &ast::ObjectName, columns: &[ast::Ident]) -> Result<ast::Query> {
    let list = if columns.is_empty() {
        "*".to_string()
    } else {
        columns.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
    };
    let sql = format!("SELECT {list} FROM {table}");
    match freshet_core::sql::parse(&sql)?.pop() {
        Some(Statement::Query(q)) => Ok(*q),
        _ => Err(Error::internal("COPY query did not parse")),
    }
}

/// PostgreSQL's names for the result columns of an analytical query.
fn output_names(query: &ast::Query, plan: &OlapPlan) -> Vec<String> {
    let df_names: Vec<String> = plan.schema.fields().iter().map(|f| f.name().clone()).collect();
    let mut body = query.body.as_ref();
    while let ast::SetExpr::SetOperation { left, .. } = body {
        body = left.as_ref();
    }
    let items = match body {
        ast::SetExpr::Select(s) => &s.projection,
        ast::SetExpr::Query(q) => return output_names(q, plan),
        ast::SetExpr::Values(_) => return (1..=df_names.len()).map(|i| format!("column{i}")).collect(),
        _ => return df_names,
    };
    let item_name = |item: &ast::SelectItem| -> Option<String> {
        match item {
            ast::SelectItem::UnnamedExpr(e) => Some(column_name(e)),
            ast::SelectItem::ExprWithAlias { alias, .. } => Some(fold_ident(alias)),
            _ => None,
        }
    };
    let wildcards = items.iter().filter(|i| item_name(i).is_none()).count();
    if wildcards == 0 && items.len() == df_names.len() {
        return items.iter().filter_map(item_name).collect();
    }
    // Names before the first wildcard and after the last one line up with the plan's columns.
    let mut names = df_names.clone();
    for (i, item) in items.iter().enumerate() {
        match item_name(item) {
            Some(n) if i < names.len() => names[i] = n,
            _ => break,
        }
    }
    for (k, item) in items.iter().rev().enumerate() {
        match item_name(item) {
            Some(n) if k < names.len() => {
                let at = names.len() - 1 - k;
                names[at] = n;
            }
            _ => break,
        }
    }
    names
}

fn set_value(e: &ast::Expr) -> String {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
            ast::Value::Number(n, _) => n.clone(),
            ast::Value::Boolean(b) => if *b { "on".into() } else { "off".into() },
            other => other.to_string(),
        },
        ast::Expr::Identifier(i) => i.value.clone(),
        other => other.to_string(),
    }
}

fn statement_name(s: &Statement) -> String {
    let text = s.to_string();
    let words: Vec<&str> = text.split_whitespace().take(2).collect();
    format!("the statement {}", words.join(" "))
}

/// The rows of `INSERT … VALUES` with their parameters evaluated, in the plan's column order
/// and types.
fn values_rows(plan: &InsertPlan, cx: &EvalContext) -> Result<Vec<Vec<Value>>> {
    let InsertSource::Values(rows) = &plan.source else { return Err(Error::internal("INSERT … SELECT has no VALUES")) };
    let columns = &plan.table.columns;
    freshet_core::try_vec(
        rows.iter().map(|row| freshet_core::try_vec(row.iter().zip(&plan.columns).map(|(e, &c)| e.eval(&NoRow, cx).and_then(|v| v.assign_to(columns[c].ty))))),
    )
}

/// Rows of values.
type Rows = Vec<Vec<Value>>;

/// Whole rows from the supplied columns (defaults for the others), and what RETURNING gives.
fn complete_rows(plan: &InsertPlan, supplied: Rows, cx: &EvalContext) -> Result<(Rows, Option<Rows>)> {
    let full_rows = whole_rows(plan, supplied, cx)?;
    let returned = returned_rows(plan, &full_rows, cx)?;
    Ok((full_rows, returned))
}

/// The rows with every column: the supplied ones, defaults for the others.
fn whole_rows(plan: &InsertPlan, supplied: Rows, cx: &EvalContext) -> Result<Rows> {
    // Every column supplied, in the table's order (as TPC-C's inserts are): the rows are whole.
    let whole = plan.columns.len() == plan.table.columns.len() && plan.columns.iter().enumerate().all(|(i, &c)| i == c);
    // Only the columns the INSERT does not give take their defaults (a sequence is not
    // advanced for a column given a value).
    let defaulted: Vec<usize> = if whole { Vec::new() } else { (0..plan.table.columns.len()).filter(|c| !plan.columns.contains(c)).collect() };
    let rounds = plan.table.rounds();
    freshet_core::try_vec(supplied.into_iter().map(|mut values| {
        if whole && values.len() == plan.columns.len() {
            if rounds {
                plan.table.round_row(&mut values);
            }
            return Ok(values);
        }
        let mut row = vec![Value::Null; plan.table.columns.len()];
        for &c in &defaulted {
            row[c] = default_value(&plan.table.columns[c], cx)?;
        }
        for (v, &c) in values.into_iter().zip(&plan.columns) {
            row[c] = v;
        }
        if rounds {
            plan.table.round_row(&mut row);
        }
        Ok(row)
    }))
}

/// RETURNING of an INSERT over its rows (with ON CONFLICT: the rows it wrote, inserted or
/// updated).
fn returned_rows(plan: &InsertPlan, written: &[Vec<Value>], cx: &EvalContext) -> Result<Option<Rows>> {
    plan.returning.as_ref().map(|r| freshet_core::try_vec(written.iter().map(|row| r.row(row, cx)))).transpose()
}

/// The call a prepared statement makes, if it is a CALL or `SELECT f(…)`.
pub(crate) fn call_plan(prepared: &Prepared) -> Option<&crate::procedure::CallPlan> {
    match &prepared.kind {
        Kind::Call(plan) => Some(plan),
        _ => None,
    }
}

/// The short-path plan of a prepared query, UPDATE or DELETE planned under the catalog
/// version a job runs under (what [`run_in_job`] would run; for prefetch hints).
pub(crate) fn job_plan(prepared: &Prepared, catalog_version: u64) -> Option<&Arc<OltpPlan>> {
    if prepared.catalog_version != catalog_version {
        return None;
    }
    match &prepared.kind {
        Kind::Query(q) => q.short.as_ref(),
        Kind::Dml(plan) => Some(plan),
        _ => None,
    }
}

/// The plan of a prepared single-row `INSERT … VALUES` planned under the catalog version a job
/// runs under, whose row's primary key a hint may look up first (see
/// `InsertPlan::primary_key_exprs`); `None` for anything else, or one that draws from a
/// sequence (what [`run_in_job`] gives up).
pub(crate) fn insert_plan(prepared: &Prepared, catalog_version: u64) -> Option<&InsertPlan> {
    match &prepared.kind {
        Kind::Insert { plan, source: None, .. } if prepared.catalog_version == catalog_version && !plan.draws_sequences => Some(plan),
        _ => None,
    }
}

/// Runs a prepared statement inside a one-job transaction (`freshet_core::engine::JobTxn`): a short-path query,
/// an UPDATE or DELETE, or an INSERT … VALUES. Returns its rows and row count; anything else,
/// or a statement prepared for an older catalog, gives the job up.
pub(crate) fn run_in_job(prepared: &Prepared, params: &[Value], now: i64, catalog_version: u64, job: &mut dyn JobStatements) -> Result<(Vec<Vec<Value>>, u64)> {
    if prepared.catalog_version != catalog_version && needs_catalog(&prepared.kind) {
        return Err(job.give_up());
    }
    if let Kind::Insert { plan, source: None, .. } = &prepared.kind
        && matches!(plan.source, InsertSource::Values(_))
    {
        if plan.draws_sequences {
            return Err(job.give_up());
        }
        let cx = EvalContext { params, now, session: None };
        let supplied = values_rows(plan, &cx)?;
        if let Some(on) = &plan.on_conflict {
            let full_rows = whole_rows(plan, supplied, &cx)?;
            let returning = plan.returning.is_some();
            let (n, written) = if full_rows.is_empty() { (0, Vec::new()) } else { job.upsert(&plan.table, &full_rows, on, returning, params, now)? };
            return Ok((returned_rows(plan, &written, &cx)?.unwrap_or_default(), n));
        }
        let (full_rows, returned) = complete_rows(plan, supplied, &cx)?;
        let n = if full_rows.is_empty() { 0 } else { job.insert(&plan.table, &full_rows)? };
        return Ok((returned.unwrap_or_default(), n));
    }
    let Some(plan) = job_plan(prepared, catalog_version) else { return Err(job.give_up()) };
    match job.run(plan, params, now)? {
        OltpResult::Count(n) => Ok((Vec::new(), n)),
        OltpResult::Rows(rows) => {
            let n = rows.len() as u64;
            Ok((rows, n))
        }
        OltpResult::TooLarge => Err(job.give_up()),
    }
}

/// EXPLAIN's line for a SELECT of the short path: how it finds its rows.
fn short_access(short: &plan::SelectPlan) -> String {
    match &short.access {
        plan::Access::Index { .. } => format!("{} (short path, partition executor)", access_line(&short.table, &short.access)),
        plan::Access::Scan => access_line(&short.table, &short.access),
    }
}

/// How a statement of the partition executor reaches the rows of `table`.
fn access_line(table: &freshet_core::catalog::TableDef, access: &plan::Access) -> String {
    match access {
        plan::Access::Index { index, eq, any, .. } => {
            let def = &table.indexes[*index];
            let whole = eq.len() + usize::from(!any.is_empty()) == def.columns.len();
            let kind = if def.primary && whole { "Hash Lookup" } else { "Ordered Index Scan" };
            format!("{kind} on {} using {}", table.name, def.name)
        }
        plan::Access::Scan => format!("Scan on {}", table.name),
    }
}

/// EXPLAIN lines of a statement's input, under the statement's node: the first after an
/// arrow, the others below it.
fn nested(lines: Vec<String>) -> Vec<String> {
    lines.into_iter().enumerate().map(|(i, l)| if i == 0 { format!("  ->  {l}") } else { format!("      {l}") }).collect()
}

/// The name of the table an INSERT, UPDATE or DELETE writes.
fn dml_target(statement: &Statement) -> Option<String> {
    let name = match statement {
        Statement::Insert(i) => match &i.table {
            ast::TableObject::TableName(name) => name,
            _ => return None,
        },
        Statement::Update(u) => match &u.table.relation {
            ast::TableFactor::Table { name, .. } => name,
            _ => return None,
        },
        Statement::Delete(d) => match &d.from {
            ast::FromTable::WithFromKeyword(t) | ast::FromTable::WithoutKeyword(t) => match &t.first()?.relation {
                ast::TableFactor::Table { name, .. } => name,
                _ => return None,
            },
        },
        _ => return None,
    };
    user_relation(name).ok()
}
