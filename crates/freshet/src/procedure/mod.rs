//! Running stored procedures: PL/pgSQL routines from the catalog and native Rust procedures
//! registered by an embedding program.
//!
//! A CALL (or `SELECT f(…)` of a function) runs in the session that issued it:
//! - outside a transaction block, as one transaction of its own: BEGIN, the routine, COMMIT;
//!   any error — a failing statement, RAISE EXCEPTION, a failed commit — rolls all of it back
//!   and reaches the client with its SQLSTATE;
//! - inside a block, as part of that transaction (an error fails the block, as any statement's
//!   error does).
//!
//! PL/pgSQL: the routine's instructions (`freshet_core::sql::plpgsql::Instr`) run in one loop
//! over a vector of variable slots. Embedded statements are prepared once per session and
//! catalog version (`CompiledCall`) with their variables as typed `$n` parameters, and run
//! through `Session::execute`, so they take the same short or analytical path, lock waits and
//! read-only checks as statements a client sends. Expressions run on the short path's
//! evaluator. Nothing is parsed or planned per call.
//!
//! NATIVE procedures ([`NativeProcedure`]) are Rust closures registered with
//! `Database::register_procedure`; their [`ProcedureContext`] runs SQL (prepared once per
//! session, cached by text) inside the call's transaction, or reads and writes rows without SQL
//! (`records.rs`: `read`, `modify`, `update`, `insert`, `delete` through an index). They live in the `Database` only:
//! they are not logged and the embedding program registers them again after every start.
//! Their statements block the calling thread while they run.
//!
//! ONE JOB. Outside a transaction block a call first runs whole inside one executor job
//! (`Engine::run_as_one_job`): the interpreter or the native body runs on the partition thread
//! and its statements go straight to the partition. If the job gives up (a statement not yet
//! prepared in this session, not on the short path, or waiting for a lock; several
//! partitions), it is rolled back and the call runs again as described above. See
//! ARCHITECTURE.md, "Stored procedures".

mod call;
mod in_dml;
mod in_query;
mod records;
mod view;

pub(crate) use in_dml::{dml_calls, returning_calls, CallsInDml, DmlCalls};
pub(crate) use in_query::{calls_in_query, calls_stored_functions, values as values_relation, CallsInQuery};
pub(crate) use call::{call_arguments, per_row_calls, per_row_layout, plan_call, plan_value_call, resolve_routine, select_function_call, stored_function_in_query, CallPlan, FunctionCall, RowItem};
pub use records::{Resolved, TableRef};
pub(crate) use view::{argument_list, body, definition, identity_arguments, in_sql, result_type, CallCounts, Natives, ProceduresView};

use hashbrown::HashMap;
use std::sync::Arc;

use freshet_core::engine::JobStatements;
use freshet_core::types::Value;
use freshet_core::{Error, Result};

use crate::result::{ColumnInfo, Output};
use crate::session::{Prepared, Session};

/// The body of a native procedure: called with its context and arguments, it returns rows
/// (empty for a procedure without a result).
pub type NativeBody = dyn Fn(&mut ProcedureContext<'_>, &[Value]) -> Result<Vec<Vec<Value>>> + Send + Sync;

/// A native procedure: a name, its parameters' types if it declares them, the columns its
/// rows have (none: CALL returns no rows), and its body.
pub struct NativeProcedure {
    pub name: String,
    pub params: Option<Vec<freshet_core::types::DataType>>,
    pub columns: Vec<ColumnInfo>,
    pub body: Arc<NativeBody>,
    /// The argument whose value names the partition a call runs on as one job, on a database
    /// with several partitions ([`crate::Database::register_partitioned_procedure`]); `None`:
    /// such calls run the ordinary way there.
    pub home: Option<usize>,
}

impl NativeProcedure {
    /// Whether a call may pass `n` arguments: any number, unless the parameters are declared.
    pub(crate) fn takes(&self, n: usize) -> bool {
        self.params.as_ref().is_none_or(|p| p.len() == n)
    }
}

impl std::fmt::Debug for NativeProcedure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeProcedure").field("name", &self.name).field("params", &self.params).field("columns", &self.columns).field("home", &self.home).finish()
    }
}

/// What a native procedure's body works with: the session running the call, inside the
/// call's transaction — or, for a call that runs as one executor job, that job's transaction.
pub struct ProcedureContext<'a> {
    pub(crate) inner: ContextInner<'a>,
}

pub(crate) enum ContextInner<'a> {
    Session(&'a mut Session),
    Job(JobContext<'a>),
}

/// A call running as one executor job: the session's prepared statements (a statement it has
/// not prepared yet gives the job up), and the job's transaction.
pub(crate) struct JobContext<'a> {
    pub statements: &'a HashMap<String, Arc<Prepared>>,
    pub job: &'a mut dyn JobStatements,
    pub now: i64,
    /// The catalog when the call began.
    pub catalog: Arc<freshet_core::catalog::Catalog>,
}

impl ProcedureContext<'_> {
    /// Runs `sql` with `params` (`$1…`) and returns its rows (none for a command). The
    /// statement is prepared the first time this session runs that text.
    pub fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>> {
        Ok(self.run(sql, params)?.0)
    }

    /// Runs a command and returns its row count (INSERT, UPDATE, DELETE).
    pub fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        Ok(self.run(sql, params)?.1)
    }

    fn run(&mut self, sql: &str, params: &[Value]) -> Result<(Vec<Vec<Value>>, u64)> {
        let cast = |prepared: &Prepared| params.iter().zip(&prepared.param_types).map(|(v, t)| v.clone().cast(*t)).collect::<Result<Vec<_>>>();
        match &mut self.inner {
            ContextInner::Session(session) => wait(async {
                let prepared = session.native_statement(sql, params).await?;
                let params = cast(&prepared)?;
                statement_rows(session, &prepared, params).await
            }),
            ContextInner::Job(cx) => {
                let Some(prepared) = cx.statements.get(sql) else { return Err(cx.job.give_up()) };
                crate::session::run_in_job(prepared, &cast(prepared)?, cx.now, cx.catalog.version, cx.job)
            }
        }
    }
}

/// Waits for `f` on this thread. Unlike `futures::executor::block_on` it may run inside
/// another executor's task (a native procedure's body is synchronous code called from the
/// session's async call): the thread parks until the future's waker unparks it.
fn wait<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Runs a prepared statement and gathers its rows and row count.
pub(crate) async fn statement_rows(session: &mut Session, prepared: &Arc<Prepared>, params: Vec<Value>) -> Result<(Vec<Vec<Value>>, u64)> {
    let result = session.execute(prepared, params).await?;
    output_rows(result.output).await
}

/// The rows of a statement's output and its row count (a command's is its tag's).
pub(crate) async fn output_rows(output: Output) -> Result<(Vec<Vec<Value>>, u64)> {
    match output {
        Output::Rows { columns, rows, .. } => {
            let rows = rows.collect_values(&columns).await?;
            let n = rows.len() as u64;
            Ok((rows, n))
        }
        Output::Command { tag } => Ok((vec![], tag.rsplit(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0))),
        Output::Empty => Ok((vec![], 0)),
        Output::CopyIn(c) => {
            c.abort().await;
            Err(Error::unsupported("COPY inside a procedure"))
        }
        Output::CopyOut(_) => Err(Error::unsupported("COPY inside a procedure")),
    }
}

/// A PL/pgSQL routine's statements, prepared for one session.
pub(crate) struct CompiledCall {
    /// The catalog version they were prepared for (`SessionProcedures::routines` keeps them
    /// by the routine's id).
    pub catalog_version: u64,
    /// The routine as it runs: the catalog's, or one compiled again knowing the types of
    /// its record and `%TYPE` variables.
    pub routine: Arc<freshet_core::sql::plpgsql::Routine>,
    /// Per statement of `routine.sql`.
    pub prepared: Vec<Arc<Prepared>>,
    /// The parameter whose value picks the partition a one-job call runs on
    /// (`plpgsql::home_parameter`, against the catalog it was prepared for).
    pub home: Option<usize>,
    /// The routine writes nothing partitioned and reads only replicated tables (classified
    /// partition-constrained without a parameter): any partition can run its call.
    pub anywhere: bool,
    /// The forms planned so far of statements that compare with an array variable's elements
    /// (`plpgsql::spread`), by statement and the arrays' lengths. Filled by calls that run the
    /// ordinary way; a call running as one job that needs a form not here gives the job up.
    pub spread: std::sync::Mutex<HashMap<SpreadKey, Arc<SpreadForm>>>,
    /// Per statement of `routine.sql`: for a CALL of a procedure with OUT or INOUT
    /// parameters, the variables that receive their values.
    pub call_outputs: Vec<CallOutputs>,
}

/// Where a CALL inside a routine puts its procedure's OUT and INOUT values, as PostgreSQL's
/// PL/pgSQL does: into the variables given as those arguments.
#[derive(Clone, Debug, Default)]
pub(crate) enum CallOutputs {
    /// Not a CALL, or one of a procedure without OUT or INOUT parameters.
    #[default]
    None,
    /// The slots, in the order of the procedure's result columns.
    Slots(Vec<usize>),
    /// The argument for this output parameter is not a variable: 42601 when the CALL runs.
    NotWritable(String),
}

/// A statement of a routine and the lengths of its arrays' forms (`plpgsql::spread::form_length`;
/// `None` for a NULL array).
pub(crate) type SpreadKey = (usize, Vec<Option<usize>>);

/// A statement planned for arrays of given lengths (`plpgsql::spread::Spread`).
pub(crate) struct SpreadForm {
    pub prepared: Arc<Prepared>,
    pub blocks: Vec<(usize, usize)>,
}

/// At most this many forms of one routine's statements are kept ([`CompiledCall::spread`]);
/// beyond them a form is planned for the call that needs it and dropped after.
pub(crate) const MAX_SPREAD_FORMS: usize = 256;

/// Per-session state of procedures: prepared routines and native statements.
#[derive(Default)]
pub(crate) struct SessionProcedures {
    /// By the routine's catalog id (`ProcedureDef::id`). Shared with a call running as one job
    /// (its nested calls find their statements here).
    pub routines: Arc<HashMap<u64, Arc<CompiledCall>>>,
    /// Shared with a call running as one job, which reads them on the executor thread.
    pub native_statements: Arc<HashMap<String, Arc<Prepared>>>,
    /// Calls running in this session, nested (a routine that calls a routine).
    pub depth: u32,
    /// What RAISE NOTICE (WARNING, INFO) sent in the last call that failed: PostgreSQL sends
    /// them before the error ([`crate::Session::take_failed_notices`]).
    pub failed_notices: Vec<crate::result::Notice>,
    /// DO blocks this session ran (each one's routine gets an id of its own).
    pub anonymous_blocks: u64,
    /// Whether the running call may end its transaction (COMMIT or ROLLBACK in its body): it
    /// is a CALL of a procedure or a DO block that began the transaction it runs in, no block
    /// being open, or a CALL such a procedure made, as PostgreSQL allows.
    pub transaction_control: bool,
    /// Whether a routine that made the running call is inside a block with an EXCEPTION
    /// section (a savepoint of the transaction), which no COMMIT or ROLLBACK may end.
    pub caller_in_subtransaction: bool,
}

/// How deeply calls may nest. A nested call re-enters `Session::execute`, so each level adds
/// the poll frames of the whole statement path to the stack (about half a MiB per level in a
/// debug build; a call that finds little stack left continues on a new segment,
/// `call::GrowStack`). PostgreSQL's equivalent guard is `max_stack_depth` (54001). Lifting it
/// needs nested PL/pgSQL calls to push a frame in the interpreter instead of recursing.
pub(crate) const MAX_CALL_DEPTH: u32 = 4;

/// RAISE's message: each `%` replaced by the next argument's text (NULL as `<NULL>`), `%%` by `%`.
pub(crate) fn format_raise(format: &str, args: &[String]) -> String {
    let mut out = String::with_capacity(format.len());
    let mut args = args.iter();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '%' {
            if chars.peek() == Some(&'%') {
                chars.next();
                out.push('%');
            } else if let Some(a) = args.next() {
                out.push_str(a);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The SQLSTATE of `RAISE … USING ERRCODE = …`: a five-character code or one of the
/// condition names Freshet knows (`plpgsql::parser::condition_code`).
pub(crate) fn errcode(text: &str) -> Result<freshet_core::SqlState> {
    use freshet_core::SqlState;
    let named = freshet_core::sql::plpgsql::parser::condition_code(text).filter(|c| *c != "OTHERS");
    SqlState::custom(named.unwrap_or(text))
        .ok_or_else(|| Error::new(SqlState::UndefinedObject, format!("unrecognized exception condition \"{text}\"")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raise_formats() {
        assert_eq!(format_raise("a % b %% c %", &["1".into(), "2".into()]), "a 1 b % c 2");
        assert_eq!(errcode("22012").unwrap().code(), "22012");
        assert_eq!(errcode("XY123").unwrap().code(), "XY123");
        assert_eq!(errcode("no_data_found").unwrap().code(), "P0002");
        assert!(errcode("nonsense").is_err());
    }
}
