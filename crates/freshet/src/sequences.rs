//! The sequence functions as a session evaluates them: `nextval`, `currval`, `setval`,
//! `lastval` and `pg_get_serial_sequence` (`freshet_core::sequence` holds the counters).
//!
//! A session remembers the last value it took from each sequence (`currval`) and which
//! sequence that was last (`lastval`), as PostgreSQL sessions do. A value whose log-ahead
//! record was queued is reported only once that record is durable: the session waits for it
//! at the end of the statement ([`SessionSequences::take_pending`]).

use std::collections::HashMap;
use std::sync::Arc;

use freshet_core::catalog::TableId;
use freshet_core::engine::Engine;
use freshet_core::sequence::SequenceDef;
use freshet_core::sql::expr::{Func, SessionFns};
use freshet_core::types::Value;
use freshet_core::wal::Lsn;
use freshet_core::{Error, Result, SqlState};
use parking_lot::Mutex;

/// A savepoint's position in a session's notifications and advisory locks
/// ([`SessionSequences::mark`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SessionMark {
    notify: usize,
    xact_locks: usize,
}

/// One session's sequence state, and the advisory locks it holds: the state of the
/// functions only the session evaluates ([`SessionFns`]).
pub(crate) struct SessionSequences {
    engine: Arc<Engine>,
    state: Mutex<State>,
    pub(crate) locks: crate::advisory::SessionLocks,
    /// LISTEN/NOTIFY: the channels listened on, the inbox, the notifications to send.
    pub(crate) notify: crate::notify::SessionNotify,
    sleep: Mutex<Sleep>,
    /// Set while a routine of this session runs as one executor job, which must not take or
    /// release advisory locks or sleep: a job that gives up runs again statement by statement,
    /// and would take a lock twice.
    in_job: std::sync::atomic::AtomicBool,
    /// A call refused because a job ran it (the job gives up).
    refused_in_job: std::sync::atomic::AtomicBool,
}

/// `pg_sleep`'s state: the sleep a call asked for, which the session then waits out, and
/// whether it has (so that the call, evaluated again, returns).
#[derive(Default)]
struct Sleep {
    asked: Option<std::time::Duration>,
    slept: bool,
}

#[derive(Default)]
struct State {
    /// The last value taken from each sequence (by id).
    last: HashMap<TableId, i64>,
    /// The sequence of the newest nextval (its id and name).
    newest: Option<(TableId, String)>,
    /// The newest log-ahead record this session queued and has not yet waited for.
    pending: Option<Lsn>,
}

impl SessionSequences {
    pub(crate) fn new(engine: Arc<Engine>, locks: crate::advisory::SessionLocks, notify: crate::notify::SessionNotify) -> Self {
        SessionSequences {
            engine,
            state: Mutex::new(State::default()),
            locks,
            notify,
            sleep: Mutex::default(),
            in_job: Default::default(),
            refused_in_job: Default::default(),
        }
    }

    /// What the open transaction has queued or taken outside its rows (notifications, LISTEN,
    /// transaction-level advisory locks): a savepoint set now keeps it on a rollback to it.
    pub(crate) fn mark(&self) -> SessionMark {
        SessionMark { notify: self.notify.mark(), xact_locks: self.locks.mark() }
    }

    /// The transaction rolled back to a savepoint set at `mark`: what was queued or taken
    /// after it goes.
    pub(crate) fn rollback_to(&self, mark: SessionMark) {
        self.notify.rollback_to(mark.notify);
        self.locks.rollback_to(mark.xact_locks);
    }

    /// DISCARD SEQUENCES: currval and lastval are undefined again.
    pub(crate) fn discard_values(&self) {
        let mut state = self.state.lock();
        state.last.clear();
        state.newest = None;
    }

    /// DISCARD ALL's part here: the sequence values, every channel listened to (once the
    /// statement ends) and every session-level advisory lock.
    pub(crate) fn discard(&self) {
        self.discard_values();
        self.notify.unlisten(None);
        self.locks.unlock_all();
    }

    /// A routine of this session starts running as one executor job.
    pub(crate) fn enter_job(&self) {
        self.refused_in_job.store(false, std::sync::atomic::Ordering::Relaxed);
        self.in_job.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The job ended; returns whether it called a function a job cannot run (it must give up).
    pub(crate) fn leave_job(&self) -> bool {
        self.in_job.store(false, std::sync::atomic::Ordering::Relaxed);
        self.refused_in_job.swap(false, std::sync::atomic::Ordering::Relaxed)
    }

    /// Fails (and marks the job to give up) inside a routine running as one executor job: the
    /// function waits, or has effects outside the transaction's rows, which a job cannot have.
    fn refuse_in_job(&self) -> Result<()> {
        if self.in_job.load(std::sync::atomic::Ordering::Relaxed) {
            self.refused_in_job.store(true, std::sync::atomic::Ordering::Relaxed);
            return Err(Error::new(SqlState::QueryCanceled, "the transaction cannot run as one job"));
        }
        Ok(())
    }

    /// `pg_notify(channel, payload)`: queued until the transaction ends.
    fn call_notify(&self, channel: Value, payload: Value) -> Result<Value> {
        self.refuse_in_job()?;
        let text = |v: &Value| v.as_str().map(str::to_string).ok_or_else(|| Error::mismatch("pg_notify takes text"));
        self.notify.notify(&text(&channel)?, &text(&payload)?)?;
        Ok(Value::Text(String::new()))
    }

    /// The sleep the last `pg_sleep` call asked for and could not take where it ran, if any
    /// (and forgets it).
    pub(crate) fn take_sleep(&self) -> Option<std::time::Duration> {
        self.sleep.lock().asked.take()
    }

    /// The session slept as asked: the call, evaluated again, returns.
    pub(crate) fn slept(&self) {
        self.sleep.lock().slept = true;
    }

    /// `pg_sleep(seconds)`: returns if the session has slept for this call; otherwise asks for
    /// the sleep and fails (0A000), which a caller that cannot wait (anything but a SELECT
    /// without FROM) reports.
    fn pg_sleep(&self, seconds: &Value) -> Result<Value> {
        let seconds = seconds.as_f64().ok_or_else(|| Error::mismatch("pg_sleep takes a number of seconds"))?;
        let mut sleep = self.sleep.lock();
        if std::mem::take(&mut sleep.slept) || seconds.is_nan() || seconds <= 0.0 {
            return Ok(Value::Text(String::new()));
        }
        sleep.asked = Some(std::time::Duration::try_from_secs_f64(seconds).unwrap_or(std::time::Duration::MAX));
        Err(Error::unsupported("pg_sleep here").with_hint("It waits in SELECT without FROM (PERFORM pg_sleep(…) in a function)."))
    }

    /// The LSN of the newest sequence record the session queued since it last asked: it must
    /// be durable before the statement's success is reported.
    pub(crate) fn take_pending(&self) -> Option<Lsn> {
        self.state.lock().pending.take()
    }

    fn sequence(&self, name: &Value) -> Result<Arc<SequenceDef>> {
        let text = name.as_str().ok_or_else(|| Error::mismatch("a sequence is named by text"))?;
        let name = freshet_core::sql::ddl::sequence_name(text)?;
        let catalog = self.engine.catalog();
        match catalog.sequence(&name) {
            Some(s) => Ok(s.clone()),
            None if catalog.relation_exists(&name) => Err(Error::new(SqlState::WrongObjectType, format!("\"{name}\" is not a sequence"))),
            None => Err(Error::undefined_table(&name)),
        }
    }

    /// TRUNCATE … RESTART IDENTITY: the sequence starts again at its start value.
    pub(crate) fn restart(&self, seq: &SequenceDef) -> Result<()> {
        self.logged(seq.set(seq.start, false)?)
    }

    /// A block that restarted the sequence ended without committing: it resumes where it
    /// was before the restart.
    pub(crate) fn put_back(&self, seq: &SequenceDef, last: i64, called: bool) -> Result<()> {
        self.logged(seq.set(last, called)?)
    }

    fn logged(&self, record: freshet_core::sequence::SequenceRecord) -> Result<()> {
        if let Some(lsn) = self.engine.log_sequence(record)? {
            let mut state = self.state.lock();
            state.pending = Some(state.pending.map_or(lsn, |p| p.max(lsn)));
        }
        Ok(())
    }

    fn nextval(&self, name: &Value) -> Result<Value> {
        let seq = self.sequence(name)?;
        let (v, record) = seq.next()?;
        if let Some(r) = record {
            self.logged(r)?;
        }
        let mut state = self.state.lock();
        state.last.insert(seq.id, v);
        state.newest = Some((seq.id, seq.name.clone()));
        Ok(Value::Int64(v))
    }

    fn currval(&self, name: &Value) -> Result<Value> {
        let seq = self.sequence(name)?;
        match self.state.lock().last.get(&seq.id) {
            Some(v) => Ok(Value::Int64(*v)),
            None => Err(Error::new(
                SqlState::ObjectNotInPrerequisiteState,
                format!("currval of sequence \"{}\" is not yet defined in this session", seq.name),
            )),
        }
    }

    fn setval(&self, name: &Value, value: &Value, called: Option<&Value>) -> Result<Value> {
        let seq = self.sequence(name)?;
        let v = value.as_i64().ok_or_else(|| Error::mismatch("setval needs a bigint"))?;
        let called = match called {
            Some(Value::Bool(b)) => *b,
            _ => true,
        };
        let record = seq.set(v, called)?;
        self.logged(record)?;
        if called {
            self.state.lock().last.insert(seq.id, v);
        }
        Ok(Value::Int64(v))
    }

    fn lastval(&self) -> Result<Value> {
        let not_yet = || Error::new(SqlState::ObjectNotInPrerequisiteState, "lastval is not yet defined in this session");
        let state = self.state.lock();
        let (id, name) = state.newest.clone().ok_or_else(not_yet)?;
        if self.engine.catalog().sequence(&name).is_none_or(|s| s.id != id) {
            return Err(not_yet());
        }
        state.last.get(&id).map(|v| Value::Int64(*v)).ok_or_else(not_yet)
    }

    /// The sequence a column's default takes its values from, as `public.name`; NULL if none.
    fn serial_sequence(&self, table: &Value, column: &Value) -> Result<Value> {
        let table = freshet_core::sql::ddl::sequence_name(table.as_str().unwrap_or_default())?;
        let catalog = self.engine.catalog();
        let def = catalog.require_table(&table)?;
        // The column's name is taken as written (PostgreSQL does not fold it); the table's is
        // read as SQL reads a name.
        let column = column.as_str().unwrap_or_default().to_string();
        let col = def.columns.iter().find(|c| c.name == column).ok_or_else(|| {
            Error::new(SqlState::UndefinedColumn, format!("column \"{column}\" of relation \"{table}\" does not exist"))
        })?;
        Ok(match col.default.as_ref().and_then(|d| d.sequence()) {
            Some(s) => Value::Text(freshet_core::sql::names::qualified_sequence(s)),
            None => Value::Null,
        })
    }
}

/// Whether a statement or query calls a function that reads or changes a sequence's counter
/// (nextval, currval, setval, lastval) or an advisory lock function anywhere.
pub(crate) fn calls_sequence_functions<T: sqlparser::ast::Visit>(node: &T) -> bool {
    calls(node, |f| f.is_session() && f != Func::PgGetSerialSequence)
}

fn calls<T: sqlparser::ast::Visit>(node: &T, wanted: impl Fn(Func) -> bool) -> bool {
    use std::ops::ControlFlow;
    sqlparser::ast::visit_expressions(node, |e| match e {
        sqlparser::ast::Expr::Function(f)
            if f.name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| {
                freshet_core::sql::functions::lookup(&i.value.to_lowercase()).is_some_and(&wanted)
            }) =>
        {
            ControlFlow::Break(())
        }
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// A query the session evaluates itself ([`plan_select`]): a SELECT without FROM that calls
/// nextval, currval, setval or lastval (one with FROM draws them for its rows:
/// [`draw_in_session`]), or one that calls pg_get_serial_sequence and binds on the short path
/// (otherwise the analytical side answers it: `pg_catalog` has the function too).
pub(crate) fn session_select(
    q: &sqlparser::ast::Query,
    params: &mut Vec<Option<freshet_core::types::DataType>>,
) -> Result<Option<(Vec<freshet_core::sql::expr::Expr>, Vec<crate::result::ColumnInfo>)>> {
    if calls_sequence_functions(q) {
        return if is_plain_select(q) { plan_select(q, params).map(Some) } else { Ok(None) };
    }
    if !calls(q, |f| f == Func::PgGetSerialSequence) {
        return Ok(None);
    }
    let mut tried = params.clone();
    Ok(plan_select(q, &mut tried).ok().inspect(|_| *params = tried))
}

/// A SELECT without FROM, WHERE or any other clause whose items all bind on the short path
/// (`SELECT 1`, `SELECT now()`, `SELECT $1::int + 1`): the items for the session to evaluate
/// and the result columns ([`bind_items`]). A pool's `SELECT 1` thus costs an evaluation,
/// not an analytical plan. `None` for any other query, or if an item does not bind (a stored
/// function, a function only the analytical side has): that side answers it.
pub(crate) fn constant_select(
    q: &sqlparser::ast::Query,
    params: &mut Vec<Option<freshet_core::types::DataType>>,
) -> Option<(Vec<freshet_core::sql::expr::Expr>, Vec<crate::result::ColumnInfo>)> {
    use sqlparser::ast;
    let ast::SetExpr::Select(select) = q.body.as_ref() else { return None };
    if !is_plain_select(q) || select.projection.is_empty() || select.into.is_some() || !q.locks.is_empty() {
        return None;
    }
    // Casts to the catalog's types (`'t'::regclass` looks the relation up) are the analytical
    // side's.
    let catalog_cast = ast::visit_expressions(q, |e| match e {
        ast::Expr::Cast { data_type: ast::DataType::Regclass | ast::DataType::Custom(..), .. } => std::ops::ControlFlow::Break(()),
        _ => std::ops::ControlFlow::Continue(()),
    });
    if catalog_cast.is_break() {
        return None;
    }
    let mut tried = params.clone();
    let bound = bind_items(select, &mut tried).ok()?;
    *params = tried;
    Some(bound)
}

/// Sequence functions where they cannot run: in a query over tables (which runs on the
/// analytical side or on an executor, away from the session).
pub(crate) fn not_in_queries() -> Error {
    Error::unsupported("sequence functions (nextval, currval, setval, lastval) or advisory lock functions in a query that reads tables")
        .with_hint("Call them in SELECT without FROM (sequence functions also in INSERT … VALUES and column defaults).")
}

/// Select items (by position) the session evaluates for each row a query gives.
pub(crate) type Drawn = Vec<(usize, freshet_core::sql::expr::Expr)>;

/// `INSERT … SELECT nextval('s'), … FROM t`: the query that feeds the INSERT with each select
/// item that calls sequence functions (and reads no column) replaced by a NULL of its type,
/// and those items bound, by position, for the session to evaluate for each row the query
/// gives (in row order, as PostgreSQL draws them). Sequence functions anywhere else in the
/// query are refused as in any query over tables.
pub(crate) fn draw_in_session(
    q: &sqlparser::ast::Query,
    params: &mut Vec<Option<freshet_core::types::DataType>>,
) -> Result<(sqlparser::ast::Query, Drawn)> {
    use sqlparser::ast;
    let mut q = q.clone();
    let mut drawn = Vec::new();
    if let ast::SetExpr::Select(select) = q.body.as_mut() {
        for (i, item) in select.projection.iter_mut().enumerate() {
            let e = match item {
                ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => e,
                _ => continue,
            };
            if !calls_sequence_functions(&*e) {
                continue;
            }
            let bound = freshet_core::sql::bind::Binder::new(None, params).bind_expr(e, None).map_err(|_| not_in_queries())?;
            let null = format!("CAST(NULL AS {})", bound.ty().pg_name());
            *e = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
                .try_with_sql(&null)
                .and_then(|mut p| p.parse_expr())
                .map_err(|e| Error::internal(format!("{null}: {e}")))?;
            drawn.push((i, bound));
        }
    }
    if calls_sequence_functions(&q) {
        return Err(not_in_queries());
    }
    Ok((q, drawn))
}

/// A SELECT without FROM and without any clause but its select list.
fn is_plain_select(q: &sqlparser::ast::Query) -> bool {
    use sqlparser::ast;
    let ast::SetExpr::Select(select) = q.body.as_ref() else { return false };
    q.with.is_none()
        && q.order_by.is_none()
        && q.limit_clause.is_none()
        && q.fetch.is_none()
        && select.from.is_empty()
        && select.selection.is_none()
        && select.having.is_none()
        && select.distinct.is_none()
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(e, _) if e.is_empty())
}

/// `SELECT nextval('s'), … FROM t`: as [`draw_in_session`], which the session then applies to
/// the rows the query gives, after its ORDER BY and LIMIT (as PostgreSQL evaluates volatile
/// select items since 9.6). Refused with DISTINCT, which PostgreSQL applies to the drawn values
/// and the session cannot. The drawn items keep their PostgreSQL result names.
pub(crate) fn draw_for_select(
    q: &sqlparser::ast::Query,
    params: &mut Vec<Option<freshet_core::types::DataType>>,
) -> Result<(sqlparser::ast::Query, Drawn, Vec<String>)> {
    use sqlparser::ast;
    let ast::SetExpr::Select(select) = q.body.as_ref() else { return Err(not_in_queries()) };
    if select.distinct.is_some() {
        return Err(not_in_queries());
    }
    let names = select
        .projection
        .iter()
        .map(|item| match item {
            ast::SelectItem::ExprWithAlias { alias, .. } => freshet_core::sql::names::fold_ident(alias),
            ast::SelectItem::UnnamedExpr(e) => freshet_core::sql::names::column_name(e),
            _ => String::new(),
        })
        .collect();
    let (q, drawn) = draw_in_session(q, params)?;
    Ok((q, drawn, names))
}

/// A SELECT without FROM whose items call sequence functions: the items bound for the
/// session to evaluate, and the result columns.
pub(crate) fn plan_select(
    q: &sqlparser::ast::Query,
    params: &mut Vec<Option<freshet_core::types::DataType>>,
) -> Result<(Vec<freshet_core::sql::expr::Expr>, Vec<crate::result::ColumnInfo>)> {
    use sqlparser::ast;
    let ast::SetExpr::Select(select) = q.body.as_ref() else { return Err(not_in_queries()) };
    if !is_plain_select(q) {
        return Err(not_in_queries());
    }
    bind_items(select, params)
}

/// The select list of a SELECT without FROM bound on the short path, and its columns, named
/// as PostgreSQL names them (`names::column_name`).
fn bind_items(
    select: &sqlparser::ast::Select,
    params: &mut Vec<Option<freshet_core::types::DataType>>,
) -> Result<(Vec<freshet_core::sql::expr::Expr>, Vec<crate::result::ColumnInfo>)> {
    use sqlparser::ast;
    let mut items = Vec::with_capacity(select.projection.len());
    let mut columns = Vec::with_capacity(select.projection.len());
    for item in &select.projection {
        let (e, name) = match item {
            ast::SelectItem::UnnamedExpr(e) => (e, freshet_core::sql::names::column_name(e)),
            ast::SelectItem::ExprWithAlias { expr, alias } => (expr, freshet_core::sql::names::fold_ident(alias)),
            _ => return Err(Error::syntax("SELECT * with no tables specified is not valid")),
        };
        let bound = freshet_core::sql::bind::Binder::new(None, params).bind_expr(e, None)?;
        columns.push(crate::result::ColumnInfo { name, ty: bound.ty() });
        items.push(bound);
    }
    Ok((items, columns))
}

impl SessionFns for SessionSequences {
    fn call(&self, func: Func, args: &[Value]) -> Result<Value> {
        if func == Func::PgNotify {
            // Not strict: a NULL channel is an empty one (an error), a NULL payload is empty.
            let or_empty = |v: Option<&Value>| v.filter(|v| !v.is_null()).cloned().unwrap_or(Value::Text(String::new()));
            return self.call_notify(or_empty(args.first()), or_empty(args.get(1)));
        }
        // The functions are strict: a NULL argument gives NULL.
        if args.iter().any(Value::is_null) {
            return Ok(Value::Null);
        }
        if matches!(func, Func::Advisory(_) | Func::PgSleep) {
            self.refuse_in_job()?;
        }
        if let Func::Advisory(f) = func {
            return self.locks.call(f, args);
        }
        let arg = |i: usize| args.get(i).ok_or_else(|| Error::internal("session function argument missing"));
        match func {
            Func::PgSleep => self.pg_sleep(arg(0)?),

            Func::Nextval => self.nextval(arg(0)?),
            Func::Currval => self.currval(arg(0)?),
            Func::Setval => self.setval(arg(0)?, arg(1)?, args.get(2)),
            Func::Lastval => self.lastval(),
            Func::PgGetSerialSequence => self.serial_sequence(arg(0)?, arg(1)?),
            _ => Err(Error::internal("not a sequence function")),
        }
    }
}
