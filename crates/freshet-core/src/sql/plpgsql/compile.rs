//! From the syntax tree to a [`Routine`]: variables become slots, references to them become
//! `$n` parameters, control flow becomes instructions with jumps.
//!
//! Name resolution follows PL/pgSQL's scoping (a nested block's names shadow outer ones; a FOR
//! loop declares its integer variable). An unqualified name in an embedded statement that is
//! a variable is the variable, even if a column has the same name: PostgreSQL raises an
//! ambiguity error there (`plpgsql.variable_conflict = error`); Freshet prefers the variable,
//! which PostgreSQL offers as `use_variable`. Qualify columns (`t.col`) to reach them.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use sqlparser::ast::{self, VisitMut, VisitorMut};

use super::parser::{self, Decl, DeclType, FetchDir, RaiseLevel, SynStmt};
use super::PlType;
use crate::catalog::Catalog;
use crate::error::{Error, Result, SqlState};
use crate::sql::bind::Binder;
use crate::sql::expr::Expr;
use crate::sql::names::{fold_ident, quote_ident};
use crate::types::{DataType, Value};

/// Where the value of one `$n` of an expression or statement comes from.
#[derive(Clone, Debug)]
pub enum ParamSource {
    Var(usize),
    /// `arr[index]` (1-based; NULL outside the array).
    Element { array: usize, index: Box<ExprUnit> },
    /// `array_length(arr, 1)` (NULL for an empty array) or `cardinality(arr)` (0).
    Length { array: usize, cardinality: bool },
    /// A record as a whole: the text form of its fields' values (`(1,ann,100.00)`).
    Row(Vec<(usize, DataType)>),
    /// `arr IS NULL` (`arr IS NOT NULL` when `negated`): whether the array variable is NULL
    /// (an empty array is not).
    ArrayIsNull { array: usize, negated: bool },
    /// `left op ANY (array)` (`all`: `op ALL`) over an array variable, the whole comparison
    /// standing as this one placeholder, whose value is not used: the statement runs in a form
    /// with a parameter per element ([`Routine::spread`]). `left` is rewritten already (its
    /// variables are parameters of the statement).
    Quantified { array: usize, left: Box<ast::Expr>, op: ast::BinaryOperator, all: bool },
    /// An array variable as a whole elsewhere in a statement (`unnest(ids)`, `g(ids)`,
    /// `array_to_string(ids, ',')`): the statement runs in a form with `ARRAY[$a, …]`, one
    /// parameter per element, in its place ([`Routine::spread`]); the placeholder is not used.
    WholeArray { array: usize },
}

impl ParamSource {
    /// Whether the statement runs in a form made for an array's length.
    pub fn spreads(&self) -> bool {
        matches!(self, ParamSource::Quantified { .. } | ParamSource::WholeArray { .. })
    }
}

/// The value an array variable is assigned (`arr := …`, or its DECLARE default), compiled.
#[derive(Clone, Debug)]
pub enum ArrayValue {
    Null,
    /// `ARRAY[e, …]`: each element, of the element type.
    Elements(Vec<ExprUnit>),
    /// Text in an array's text form (`'{1,2}'`), parsed as the array's element type.
    Text(ExprUnit),
    /// Another array variable's value.
    Var(usize),
    /// `a || b …`, `array_cat`, `array_append`, `array_prepend`: the parts in order. A NULL
    /// array adds nothing; a NULL element is an element.
    Concat(Vec<ArrayPart>),
}

#[derive(Clone, Debug)]
pub enum ArrayPart {
    Array(ArrayValue),
    Element(ExprUnit),
}

impl ArrayValue {
    /// Calls `f` with each expression the value evaluates.
    pub fn for_each_unit<'a>(&'a self, f: &mut dyn FnMut(&'a ExprUnit)) {
        match self {
            ArrayValue::Null | ArrayValue::Var(_) => {}
            ArrayValue::Elements(units) => units.iter().for_each(f),
            ArrayValue::Text(unit) => f(unit),
            ArrayValue::Concat(parts) => parts.iter().for_each(|p| match p {
                ArrayPart::Array(a) => a.for_each_unit(f),
                ArrayPart::Element(unit) => f(unit),
            }),
        }
    }
}

/// A bound expression and the sources of its parameters.
#[derive(Clone, Debug)]
pub struct ExprUnit {
    pub expr: Expr,
    pub params: Vec<ParamSource>,
    pub ty: DataType,
    /// When every parameter is a scalar variable: `expr` with `$n` renumbered to the
    /// variable's slot, which the interpreter evaluates over its slots' values as they are
    /// (no copy of each value into a parameter list).
    pub on_slots: Option<Expr>,
}

/// An embedded SQL statement with variables replaced by parameters.
#[derive(Clone, Debug)]
pub struct SqlUnit {
    pub statement: ast::Statement,
    pub text: String,
    pub params: Vec<ParamSource>,
    pub param_types: Vec<DataType>,
    /// Slots that receive the first row (SELECT … INTO, RETURNING … INTO).
    pub into: Vec<usize>,
    /// INTO STRICT: exactly one row, or P0002/P0003.
    pub strict: bool,
    /// An expression with a subquery evaluated as `SELECT e` ([`Compiler::expr`]): it does not
    /// set FOUND.
    pub expression: bool,
    /// False when it reads a field of a record (or a `%TYPE` variable) whose type the compile
    /// did not know: its parameters are incomplete and it must not be prepared.
    pub resolved: bool,
    /// Never run: the session prepares it only to learn its columns (a `%ROWTYPE` record's
    /// table, a `%TYPE` variable's column).
    pub describe_only: bool,
}

/// What identifies a statement for [`Described`]: its text with `$n` parameters and their types.
pub type UnitKey = (String, Vec<DataType>);

impl SqlUnit {
    pub fn key(&self) -> UnitKey {
        let mut text = self.statement.to_string();
        // A placeholder standing for an array, or a comparison with one, is told apart from
        // a scalar parameter of its type, and from another array or comparison.
        for (i, p) in self.params.iter().enumerate() {
            match p {
                ParamSource::Quantified { array, left, op, all } => text += &format!(" /* ${}: {left} {op} {} (array {array}) */", i + 1, if *all { "ALL" } else { "ANY" }),
                ParamSource::WholeArray { array } => text += &format!(" /* ${}: array {array} */", i + 1),
                _ => {}
            }
        }
        (text, self.param_types.clone())
    }
}

/// What the session learned by preparing a routine's statements, for compiling it again
/// ([`compile_with`]): the result columns of each statement it prepared, and the statements
/// that assigned each record variable in the previous compile (by the records' order of
/// declaration, which does not change between compiles of one source).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Described {
    pub columns: HashMap<UnitKey, Vec<(String, DataType)>>,
    pub assigners: Vec<Vec<UnitKey>>,
}

/// A FETCH's or MOVE's direction ([`parser::FetchDir`]) with its counts compiled.
#[derive(Clone, Debug)]
pub enum FetchStep {
    Next,
    Prior,
    First,
    Last,
    Absolute(ExprUnit),
    Relative(ExprUnit),
    Forward(ExprUnit),
    Backward(ExprUnit),
    ForwardAll,
    BackwardAll,
}

#[derive(Clone, Debug)]
pub struct Slot {
    pub name: String,
    pub ty: PlType,
}

#[derive(Clone, Debug)]
pub enum Instr {
    /// A declared variable at its block's start: its default, or NULL.
    Init { slot: usize, value: Option<ExprUnit> },
    Assign { slot: usize, value: ExprUnit },
    /// `arr := …` (also an array's DECLARE default).
    ArrayAssign { slot: usize, value: ArrayValue },
    /// An array built by a query: `arr := ARRAY(SELECT x …)`, `arr := (SELECT array_agg(x) …)`
    /// or `SELECT array_agg(x) INTO arr …` ([`element_query`]). Statement `sql` lists the
    /// elements, one row each; none gives NULL if `null_if_empty` (array_agg), else `{}`. A
    /// SELECT … INTO sets FOUND (`sets_found`).
    ArrayQuery { slot: usize, sql: usize, null_if_empty: bool, sets_found: bool },
    /// `arr[index] := value`: past the end the array grows, with NULLs between; a NULL array
    /// becomes one.
    ElementAssign { array: usize, index: ExprUnit, value: ExprUnit },
    Sql(usize),
    Jump(usize),
    JumpIfNot { cond: ExprUnit, target: usize },
    JumpIf { cond: ExprUnit, target: usize },
    RangeInit { var: usize, hi: usize, step: usize, bounds: Box<RangeBounds> },
    RangeTest { var: usize, hi: usize, reverse: bool, exit: usize },
    RangeNext { var: usize, step: usize, reverse: bool },
    ForeachInit { idx: usize },
    ForeachNext { array: usize, idx: usize, var: usize, exit: usize },
    /// Runs statement `sql` and keeps its rows in cursor `cursor`.
    QueryOpen { sql: usize, cursor: usize },
    /// Runs dynamic SQL and keeps its rows in cursor `cursor` (FOR … IN EXECUTE).
    ExecuteOpen { exec: Box<ExecuteCode>, cursor: usize },
    /// Assigns the cursor's next row to `targets`, or jumps to `exit` when none is left.
    QueryNext { cursor: usize, targets: Vec<usize>, exit: usize },
    /// After a query loop (also reached by EXIT): FOUND is whether it iterated at all.
    QueryClose { cursor: usize },
    /// `OPEN`: runs statement `sql` and keeps its rows in cursor `cursor`, which must not be
    /// open (42P03); `name` is the cursor variable's. A cursor FOR loop's (`in_loop`) stays
    /// open across a COMMIT; an OPENed one closes. A cursor that is not `scroll` refuses to
    /// move back (55000); `None`: declared SCROLL over a query that locks rows, which OPEN
    /// refuses (0A000), as PostgreSQL does when it opens one.
    /// `var`: the cursor variable, whose value names the portal (made up when NULL, and
    /// assigned to it) that stays open when the routine returns.
    CursorOpen { sql: usize, cursor: usize, var: usize, in_loop: bool, scroll: Option<bool> },
    /// `OPEN r [[NO] SCROLL] FOR EXECUTE text [USING …]`: as [`Instr::CursorOpen`], its rows
    /// those of the statement the text holds when it runs (SCROLL unless NO SCROLL is given).
    CursorOpenExecute { exec: Box<ExecuteCode>, cursor: usize, var: usize, scroll: bool },
    /// `FETCH [direction] … INTO targets` (`assign`) or `MOVE [direction]`: the row it moves
    /// to, if any (FOUND and ROW_COUNT say how many rows it passed); FETCH off the rows sets
    /// the targets to NULL. The cursor must be open (34000). A `refcursor` (not `bound`) that
    /// the routine did not open names a cursor of the session by its value (`var`): the
    /// caller's, which it moves (22004 if NULL).
    CursorFetch { cursor: usize, var: usize, targets: Vec<usize>, assign: bool, name: String, bound: bool, direction: Box<FetchStep> },
    /// `CLOSE`: the cursor must be open (34000); a `refcursor` the routine did not open closes
    /// the session's cursor its value names.
    CursorClose { cursor: usize, var: usize, bound: bool, name: String },
    Return(Option<ExprUnit>),
    /// RETURN of a function returning an array: the array in `array` (a hidden slot the
    /// instruction before assigns), as its text form, the form arrays reach clients in.
    ReturnArray { array: usize },
    /// Enters a block with an EXCEPTION section: sets a savepoint and makes
    /// `Routine::handlers[table]` the innermost handlers.
    TryEnter { table: usize },
    /// Leaves the innermost such block normally (also before EXIT/CONTINUE out of it).
    TryExit,
    /// Appends a row to a set-returning function's result: the expression's value (SETOF),
    /// or the values of the `RETURNS TABLE` column variables (`None`).
    ReturnNext(Option<ExprUnit>),
    /// Runs statement `sql` and appends its rows to the result.
    ReturnQuery(usize),
    /// Appends a row of these slots' values (`RETURN NEXT record`).
    ReturnNextRow(Vec<usize>),
    /// Dynamic SQL (`EXECUTE`).
    Execute(Box<ExecuteCode>),
    /// COMMIT or ROLLBACK in a procedure: ends the call's transaction and starts the next
    /// (with the same characteristics when `chain`).
    EndTransaction { rollback: bool, chain: bool },
    Raise { level: RaiseLevel, format: Option<String>, args: Vec<ExprUnit>, options: Vec<(String, ExprUnit)> },
}

impl Instr {
    /// Whether it runs SQL text made when it runs (EXECUTE, FOR … IN EXECUTE, OPEN … FOR
    /// EXECUTE), which may do anything.
    pub fn is_dynamic(&self) -> bool {
        matches!(self, Instr::Execute(_) | Instr::ExecuteOpen { .. } | Instr::CursorOpenExecute { .. })
    }
}

/// `EXECUTE text [INTO …] [USING …]`, compiled: the text is parsed and planned each time it
/// runs (in the session: a call with one gives up running as one executor job).
#[derive(Clone, Debug)]
pub struct ExecuteCode {
    pub text: ExprUnit,
    /// The values of the text's `$1`, `$2`, ….
    pub using: Vec<ExprUnit>,
    pub into: Vec<usize>,
    pub strict: bool,
    /// `RETURN QUERY EXECUTE`: the rows are appended to the result.
    pub query: bool,
}

/// One `WHEN … THEN` of an EXCEPTION section, compiled.
#[derive(Clone, Debug)]
pub struct HandlerCode {
    /// SQLSTATE codes (one ending in `000` matches its whole class), or `OTHERS`.
    pub conditions: Vec<String>,
    /// Where its statements start.
    pub target: usize,
    /// The slots of the handler's SQLSTATE and SQLERRM variables, and of the caught error's
    /// detail, hint and context (for GET STACKED DIAGNOSTICS and `RAISE;`).
    pub sqlstate: usize,
    pub sqlerrm: usize,
    pub detail: usize,
    pub hint: usize,
    pub context: usize,
}

impl HandlerCode {
    /// Whether the handler catches an error with SQLSTATE `code`. (The interpreter never
    /// offers the errors no handler may catch: 57014, 40001, 40P01.)
    pub fn catches(&self, code: &str) -> bool {
        self.conditions.iter().any(|c| match c.as_str() {
            "OTHERS" => true,
            c if c.ends_with("000") => code.get(..2) == c.get(..2),
            c => c == code,
        })
    }
}

/// The bound expressions of `FOR i IN lo..hi BY step`.
#[derive(Clone, Debug)]
pub struct RangeBounds {
    pub lo: ExprUnit,
    pub hi: ExprUnit,
    pub step: Option<ExprUnit>,
    /// Statements of the body some of whose parameters are known for every iteration when the
    /// loop starts ([`loop_prefetch`]): the interpreter may ask for what their lookups (or, for
    /// an INSERT, its primary key's slot) will touch at once, if their key is among those.
    pub prefetch: Vec<LoopLookup>,
}

/// A statement of a range loop's body that may be prefetched when the loop starts (see
/// [`loop_prefetch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopLookup {
    /// The statement (an index into the routine's `sql`).
    pub unit: usize,
    /// Its parameters (bit n: `$n+1`, the first 64) whose value for every iteration is known
    /// when the loop starts: from the loop variable and variables the body never assigns.
    pub known: u64,
    /// Those among `known` that depend on the loop variable.
    pub varies: u64,
}

impl LoopLookup {
    /// Whether a statement whose key is made of the parameters `key` (a bit set, as `known`)
    /// is worth prefetching: its key is known for every iteration and changes with the loop
    /// variable.
    pub fn covers(&self, key: u64) -> bool {
        key & !self.known == 0 && key & self.varies != 0
    }
}

/// The longest range loop whose lookups are prefetched when it starts.
pub const MAX_PREFETCHED_ITERATIONS: i64 = 32;

/// The statements of a `FOR var IN lo..hi` loop whose body is `body` that may be prefetched
/// when the loop starts, with their parameters whose values are then known for every
/// iteration: a parameter that is the loop variable, a variable the body never assigns, or an
/// element or length of such an array indexed by expressions of those. A statement is listed
/// when at least one of those depends on the loop variable (a New-Order's item and stock
/// lookups by `p_items[i]`, its order lines' keys by `i`); the interpreter prefetches it if its
/// key is among them ([`LoopLookup::covers`]). Prefetching is a hint only: a guess made wrong
/// by control flow (an EXIT) costs a wasted memory request, never a different result. A body
/// with an EXCEPTION block, or one that assigns the loop variable, gets none.
fn loop_prefetch(body: &[Instr], sql: &[SqlUnit], var: usize) -> Vec<LoopLookup> {
    let mut assigned = Vec::new();
    for instr in body {
        match instr {
            Instr::TryEnter { .. } => return Vec::new(),
            Instr::Init { slot, .. } | Instr::Assign { slot, .. } | Instr::ArrayAssign { slot, .. } | Instr::ArrayQuery { slot, .. } | Instr::ElementAssign { array: slot, .. } => {
                assigned.push(*slot)
            }
            Instr::Sql(i) => assigned.extend(&sql[*i].into),
            Instr::RangeInit { var, hi, step, .. } => assigned.extend([*var, *hi, *step]),
            Instr::RangeNext { var, .. } => assigned.push(*var),
            Instr::ForeachInit { idx } => assigned.push(*idx),
            Instr::ForeachNext { idx, var, .. } => assigned.extend([*idx, *var]),
            Instr::QueryNext { targets, .. } | Instr::CursorFetch { targets, .. } => assigned.extend(targets),
            Instr::CursorOpen { var, .. } | Instr::CursorOpenExecute { var, .. } => assigned.push(*var),
            _ => {}
        }
    }
    if assigned.contains(&var) {
        return Vec::new();
    }
    body.iter()
        .filter_map(|instr| if let Instr::Sql(i) = instr { Some(*i) } else { None })
        .filter(|&i| !sql[i].expression)
        .filter_map(|unit| {
            let (mut known, mut varies) = (0u64, 0u64);
            for (n, source) in sql[unit].params.iter().enumerate().take(64) {
                let (mut invariant, mut with_var) = (true, false);
                for_each_source_slot(std::slice::from_ref(source), &mut |slot| {
                    with_var |= slot == var;
                    invariant &= slot == var || !assigned.contains(&slot);
                });
                if invariant {
                    known |= 1 << n;
                    varies |= (with_var as u64) << n;
                }
            }
            (varies != 0).then_some(LoopLookup { unit, known, varies })
        })
        .collect()
}

/// A function call's arguments, when all are plain (unnamed) expressions.
fn unnamed_args(f: &ast::Function) -> Option<Vec<&ast::Expr>> {
    let ast::FunctionArguments::List(list) = &f.args else { return None };
    list.args
        .iter()
        .map(|a| match a {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect()
}

/// The query listing the elements of the array that `e` builds with a query, and whether no
/// rows make it NULL: `ARRAY(SELECT x …)` is that query (no rows: `{}`), `(SELECT array_agg(x
/// [ORDER BY …]) …)` is [`aggregated_elements`] (no rows: NULL, as array_agg gives).
fn element_query(e: &ast::Expr) -> Option<(ast::Query, bool)> {
    match e {
        ast::Expr::Nested(inner) => element_query(inner),
        ast::Expr::Subquery(q) => aggregated_elements(q).map(|q| (q, true)),
        ast::Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("array") => match &f.args {
            ast::FunctionArguments::Subquery(q) => Some((q.as_ref().clone(), false)),
            _ => None,
        },
        _ => None,
    }
}

/// `SELECT array_agg(x [ORDER BY o]) FROM … [WHERE …]` (one item, no grouping, DISTINCT,
/// FILTER or window) as the query of its elements: `SELECT x FROM … [WHERE …] [ORDER BY o]`.
fn aggregated_elements(q: &ast::Query) -> Option<ast::Query> {
    let ast::SetExpr::Select(s) = q.body.as_ref() else { return None };
    let [item] = s.projection.as_slice() else { return None };
    let (ast::SelectItem::UnnamedExpr(ast::Expr::Function(f)) | ast::SelectItem::ExprWithAlias { expr: ast::Expr::Function(f), .. }) = item else { return None };
    let ast::FunctionArguments::List(list) = &f.args else { return None };
    let [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(element))] = list.args.as_slice() else { return None };
    let grouped = !matches!(&s.group_by, ast::GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty());
    if !f.name.to_string().eq_ignore_ascii_case("array_agg")
        || f.filter.is_some()
        || f.over.is_some()
        || list.duplicate_treatment.is_some()
        || grouped
        || s.having.is_some()
        || s.distinct.is_some()
        || q.order_by.is_some()
        || q.limit_clause.is_some()
        || q.fetch.is_some()
    {
        return None;
    }
    let mut order = None;
    for clause in &list.clauses {
        match clause {
            ast::FunctionArgumentClause::OrderBy(by) => order = Some(by.clone()),
            _ => return None,
        }
    }
    let mut select = s.as_ref().clone();
    select.projection = vec![ast::SelectItem::UnnamedExpr(element.clone())];
    let mut query = q.clone();
    query.body = Box::new(ast::SetExpr::Select(Box::new(select)));
    query.order_by = order.map(|exprs| ast::OrderBy { kind: ast::OrderByKind::Expressions(exprs), interpolate: None });
    Some(query)
}

/// Whether `e` builds an array with a query: `ARRAY(SELECT …)` or a scalar subquery (whose
/// value, an `array_agg`, would be an array).
fn array_subquery(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Subquery(_) => true,
        ast::Expr::Function(f) => matches!(f.args, ast::FunctionArguments::Subquery(_)),
        _ => false,
    }
}

/// Calls `f` with every slot the parameter sources read (arrays and the slots of their index
/// expressions).
fn for_each_source_slot(sources: &[ParamSource], f: &mut dyn FnMut(usize)) {
    for source in sources {
        match source {
            ParamSource::Var(slot)
            | ParamSource::Length { array: slot, .. }
            | ParamSource::ArrayIsNull { array: slot, .. }
            | ParamSource::Quantified { array: slot, .. }
            | ParamSource::WholeArray { array: slot } => f(*slot),
            ParamSource::Row(fields) => fields.iter().for_each(|(s, _)| f(*s)),
            ParamSource::Element { array, index } => {
                f(*array);
                for_each_source_slot(&index.params, f);
            }
        }
    }
}

/// A compiled procedure or function.
#[derive(Clone, Debug)]
pub struct Routine {
    pub name: String,
    pub function: bool,
    /// The parameters are slots `0..params.len()`.
    pub params: Vec<(String, PlType)>,
    /// The input parameters' types, which with the name identify the routine
    /// ([`parser::Header::signature`]).
    pub signature: Vec<PlType>,
    /// Its name and input parameters' types as PostgreSQL shows them: `f(integer, text)`.
    pub identity: String,
    /// Per parameter, whether it is a procedure's OUT parameter ([`parser::Header::out_only`]).
    pub out_only: Vec<bool>,
    /// The last parameter is VARIADIC ([`parser::Header::variadic`]).
    pub variadic: bool,
    /// Per parameter, its default, if it has one (see [`parser::Header::defaults`]).
    pub defaults: Vec<Option<ast::Expr>>,
    /// The OUT and INOUT parameters ([`parser::Header::outs`]).
    pub outs: Vec<(String, DataType)>,
    pub returns: Option<PlType>,
    /// A set-returning function's result columns; its rows are what RETURN NEXT and RETURN
    /// QUERY appended when it ends (or reaches `RETURN;`).
    pub set: Option<parser::SetResult>,
    /// The slots of the `RETURNS TABLE` columns (after the parameters), in column order.
    pub table_slots: Vec<usize>,
    /// Per block with an EXCEPTION section, its handlers in order.
    pub handlers: Vec<Vec<HandlerCode>>,
    /// The CREATE statement as written (what the log and checkpoints keep).
    pub source: String,
    pub slots: Vec<Slot>,
    /// The slot of FOUND.
    pub found: usize,
    /// The slot of the last SQL statement's row count (`GET DIAGNOSTICS … = ROW_COUNT`),
    /// an int8.
    pub row_count: usize,
    /// How many `FOR … IN query` loops the code has (each keeps its rows in a cursor).
    pub cursors: usize,
    pub code: Vec<Instr>,
    pub sql: Vec<SqlUnit>,
    pub or_replace: bool,
    /// STRICT (`RETURNS NULL ON NULL INPUT`): a call with a NULL argument returns NULL (no
    /// rows, for a set-returning function) without running the body.
    pub strict: bool,
    /// Per record variable (`record` or `%ROWTYPE`, in order of declaration): the statements
    /// that assign it.
    pub record_assigners: Vec<Vec<UnitKey>>,
    /// Per instruction of `code`: the line of the body and the kind of the statement it comes
    /// from (for the CONTEXT of an error; `None` for the body's own declarations).
    pub lines: Vec<Option<(u32, &'static str)>>,
    /// Why the routine cannot run as compiled: a record's fields or a `%TYPE` variable's type
    /// were not known ([`Described`]). `None`: complete.
    pub unresolved: Option<Error>,
}

impl Routine {
    pub fn kind(&self) -> &'static str {
        if self.function { "function" } else { "procedure" }
    }

    /// Whether its input parameters have these types (type modifiers aside).
    pub fn has_signature(&self, types: &[PlType]) -> bool {
        super::same_types(&self.signature, types)
    }

    /// Whether its code has COMMIT or ROLLBACK.
    pub fn ends_transactions(&self) -> bool {
        self.code.iter().any(|i| matches!(i, Instr::EndTransaction { .. }))
    }

    /// A set-returning function's result columns (none for other routines).
    pub fn set_columns(&self) -> &[(String, DataType)] {
        self.set.as_ref().map_or(&[], |s| &s.columns)
    }
}

/// Parses and compiles a CREATE PROCEDURE/FUNCTION statement. Errors in the body are 42601
/// (or 0A000 for constructs outside the subset).
///
/// A routine with `record`, `%ROWTYPE` or `%TYPE` variables compiles without their types
/// (`Routine::unresolved` says what is missing): the session learns them by preparing the
/// statements that assign those variables, and compiles the routine again with what it
/// learned ([`compile_with`]) until it is complete, as PostgreSQL too learns a record's
/// fields only when the routine runs.
pub fn compile(source: &str) -> Result<Routine> {
    compile_with(source, &Described::default())
}

/// [`compile`] knowing the columns of statements the session prepared.
pub fn compile_with(source: &str, described: &Described) -> Result<Routine> {
    let header = parser::parse_header(source)?;
    let body = parser::parse_body(&header.body)?;
    let mut c = Compiler {
        scopes: vec![Vec::new()],
        slots: Vec::new(),
        code: Vec::new(),
        sql: Vec::new(),
        loops: Vec::new(),
        label: None,
        header: &header,
        constants: Vec::new(),
        cursors: 0,
        handlers: Vec::new(),
        open: Vec::new(),
        described,
        records: Vec::new(),
        cursor_vars: Vec::new(),
        pending: HashSet::new(),
        unresolved: RefCell::new(None),
        in_handlers: Vec::new(),
        row_count: 0,
        lines: Vec::new(),
        out_slot: None,
    };
    for (name, ty) in &header.params {
        if header.params.iter().filter(|(n, _)| n == name).count() > 1 {
            return Err(duplicate_parameter(name));
        }
        let slot = c.declare(name, *ty);
        if header.refcursors.contains(name) {
            c.cursor_slot(slot, None, None);
        }
    }
    let mut table_slots = Vec::new();
    if let Some(set) = header.set.as_ref().filter(|s| s.table) {
        for (name, ty) in &set.columns {
            if set.columns.iter().filter(|(n, _)| n == name).count() > 1 {
                return Err(duplicate_parameter(name));
            }
            // An INOUT parameter (or a procedure's OUT one) is its input's slot.
            match c.lookup(name) {
                Some(slot) if set.single => table_slots.push(slot),
                Some(_) => return Err(duplicate_parameter(name)),
                None => table_slots.push(c.declare(name, PlType::Scalar(*ty))),
            }
        }
    }
    // A function's one OUT parameter: a variable whose value RETURN returns.
    if let ([(name, ty)], true) = (header.outs.as_slice(), header.function) {
        c.out_slot = Some(c.lookup(name).unwrap_or_else(|| c.declare(name, PlType::Scalar(*ty))));
    }
    // `RETURNS SETOF table`: its columns, once the session has described the table.
    let mut set = header.set.clone();
    if let Some(s) = set.as_mut()
        && let Some(table) = s.relation.clone()
    {
        let key = c.describe_only(&format!("SELECT * FROM {}", quote_ident(&table)))?;
        match described.columns.get(&key) {
            Some(columns) => s.columns = columns.clone(),
            None => c.unresolve(|| Error::internal(format!("the columns of {table} are not known yet"))),
        }
    }
    let found = c.declare("found", PlType::Scalar(DataType::Bool));
    c.code.push(Instr::Init { slot: found, value: None });
    c.row_count = c.hidden();
    let zero = Expr::literal(Value::Int64(0), DataType::Int64);
    c.code.push(Instr::Init { slot: c.row_count, value: Some(ExprUnit { expr: zero.clone(), params: Vec::new(), ty: DataType::Int64, on_slots: Some(zero) }) });
    c.statement(&body)?;
    // OUT parameters: falling off the end returns them.
    if let Some(slot) = c.out_slot {
        let value = c.slot_expr(slot);
        c.code.push(Instr::Return(Some(value)));
    } else if header.set.as_ref().is_some_and(|s| s.single) {
        c.code.push(Instr::ReturnNext(None));
    }
    c.lines.resize(c.code.len(), None);
    Ok(Routine {
        name: header.name.clone(),
        function: header.function,
        params: header.params.clone(),
        signature: header.signature.clone(),
        identity: super::signature_text(&header.name, header.signature.iter().map(PlType::name)),
        out_only: header.out_only.clone(),
        variadic: header.variadic,
        defaults: header.defaults.clone(),
        outs: header.outs.clone(),
        returns: header.returns,
        set,
        table_slots,
        handlers: c.handlers,
        source: source.trim().trim_end_matches(';').to_string(),
        slots: c.slots,
        found,
        row_count: c.row_count,
        cursors: c.cursors,
        code: c.code,
        sql: c.sql,
        or_replace: header.or_replace,
        strict: header.strict,
        record_assigners: c.records.into_iter().map(|r| r.assigners).collect(),
        lines: c.lines,
        unresolved: c.unresolved.into_inner(),
    })
}

/// A record variable while compiling.
/// A cursor variable (`CURSOR FOR query` or `refcursor`).
struct CursorVar {
    /// The slot its name resolves to: the name of the portal OPEN opens.
    slot: usize,
    /// The interpreter's cursor that holds its rows.
    cursor: usize,
    /// A bound cursor's query (an index into `sql`) and its arguments' slots.
    bound: Option<(usize, Vec<usize>)>,
    /// Its declaration's `SCROLL` or `NO SCROLL`.
    scroll: Option<bool>,
    /// An unbound one's query of the last `OPEN … FOR` compiled (whose columns a record
    /// FETCH assigns).
    opened: Option<usize>,
}

struct RecordVar {
    name: String,
    /// The slot its name resolves to (never read: only its fields hold values).
    slot: usize,
    /// Its fields and their slots, when some statement assigning it was described.
    fields: Option<Vec<(String, usize)>>,
    /// Declared `table%ROWTYPE`: its fields are the table's columns.
    rowtype: bool,
    /// The statements assigning it in this compile.
    assigners: Vec<UnitKey>,
}

/// 42P13 (invalid_function_definition), as PostgreSQL reports it.
fn duplicate_parameter(name: &str) -> Error {
    Error::new(SqlState::InvalidFunctionDefinition, format!("parameter name \"{name}\" used more than once"))
}

/// A loop, or a labelled block, that EXIT (and for a loop CONTINUE) can leave: the jumps
/// to patch at its end and at its next iteration.
struct LoopPatches {
    breaks: Vec<usize>,
    continues: Vec<usize>,
    /// How many [`Open`] frames were open where it began: an EXIT or CONTINUE closes the ones
    /// opened since, innermost first.
    depth: usize,
    label: Option<String>,
    /// False for a labelled block, which EXIT with its label leaves and CONTINUE cannot name.
    is_loop: bool,
}

/// What a jump out of a loop or block must close on its way, as falling off its end would:
/// a block with an EXCEPTION section (its savepoint: `TryExit`) or the rows of a `FOR … IN
/// query` loop (`QueryClose`, which also sets FOUND as the loop's end does).
#[derive(Clone, Copy)]
enum Open {
    Try,
    Cursor(usize),
}

struct Compiler<'a> {
    scopes: Vec<Vec<(String, usize)>>,
    slots: Vec<Slot>,
    code: Vec<Instr>,
    sql: Vec<SqlUnit>,
    loops: Vec<LoopPatches>,
    /// The label of the loop being compiled, from its `<<label>>` until its body begins.
    label: Option<String>,
    header: &'a parser::Header,
    /// Slots declared CONSTANT.
    constants: Vec<usize>,
    cursors: usize,
    handlers: Vec<Vec<HandlerCode>>,
    /// What is open at this point of the code, innermost last: blocks with an EXCEPTION
    /// section and `FOR … IN query` loops.
    open: Vec<Open>,
    described: &'a Described,
    records: Vec<RecordVar>,
    cursor_vars: Vec<CursorVar>,
    /// Slots of `%TYPE` variables whose type is not known yet.
    pending: HashSet<usize>,
    /// The first thing found that the compile could not resolve ([`Routine::unresolved`]).
    unresolved: RefCell<Option<Error>>,
    /// Exception handlers whose statements are being compiled, innermost last.
    in_handlers: Vec<HandlerCode>,
    /// The slot that holds the row count of the last SQL statement (GET DIAGNOSTICS).
    row_count: usize,
    /// Per instruction so far, the statement it belongs to (see [`Routine::lines`]).
    lines: Vec<Option<(u32, &'static str)>>,
    /// The slot of a function's one OUT parameter.
    out_slot: Option<usize>,
}

const PATCH: usize = usize::MAX;

impl Compiler<'_> {
    fn declare(&mut self, name: &str, ty: PlType) -> usize {
        let slot = self.slots.len();
        self.slots.push(Slot { name: name.to_string(), ty });
        if let Some(scope) = self.scopes.last_mut() {
            scope.push((name.to_string(), slot));
        }
        slot
    }

    fn hidden_text(&mut self) -> usize {
        let slot = self.hidden();
        self.slots[slot].ty = PlType::Scalar(DataType::Text);
        slot
    }

    /// The innermost exception handler being compiled (its caught error's slots).
    fn handler(&self, what: &str) -> Result<&HandlerCode> {
        self.in_handlers.last().ok_or_else(|| {
            Error::new(SqlState::custom("0Z002").unwrap_or(SqlState::SyntaxError), format!("{what} cannot be used outside an exception handler"))
        })
    }

    /// An expression that reads one slot as it is.
    fn slot_expr(&self, slot: usize) -> ExprUnit {
        let ty = hint(self.slots[slot].ty).unwrap_or(DataType::Text);
        ExprUnit { expr: Expr::Param { index: 0, ty }, params: vec![ParamSource::Var(slot)], ty, on_slots: Some(Expr::Param { index: slot, ty }) }
    }

    fn hidden(&mut self) -> usize {
        let slot = self.slots.len();
        self.slots.push(Slot { name: String::new(), ty: PlType::Scalar(DataType::Int64) });
        slot
    }

    fn lookup(&self, name: &str) -> Option<usize> {
        self.scopes.iter().rev().find_map(|s| s.iter().rev().find(|(n, _)| n == name).map(|(_, slot)| *slot))
    }

    fn scalar_slot(&self, name: &str) -> Result<usize> {
        let slot = self.lookup(name).ok_or_else(|| Error::syntax(format!("\"{name}\" is not a known variable")))?;
        if self.record_of(slot).is_some() {
            return Err(Error::unsupported(format!("assigning to the record \"{name}\" as a whole (assign it with SELECT … INTO {name}, or assign its fields' values to variables)")));
        }
        if matches!(self.slots[slot].ty, PlType::Array(_)) {
            return Err(Error::unsupported(format!("assigning to the array variable \"{name}\"")));
        }
        Ok(slot)
    }

    fn here(&self) -> usize {
        self.code.len()
    }

    fn check_not_constant(&self, slot: usize, name: &str) -> Result<()> {
        if self.constants.contains(&slot) {
            return Err(Error::new(SqlState::custom("22005").unwrap_or(SqlState::SyntaxError), format!("variable \"{name}\" is declared CONSTANT")));
        }
        Ok(())
    }

    /// The instruction that assigns `e` to the array variable in `slot`: [`Instr::ArrayQuery`]
    /// for an array a query builds, else [`Instr::ArrayAssign`].
    fn array_assignment(&mut self, slot: usize, e: &ast::Expr, elem: DataType) -> Result<Instr> {
        if let Some((query, null_if_empty)) = element_query(e) {
            let statement = ast::Statement::Query(Box::new(query));
            let unit = self.sql_unit(&statement, &statement.to_string(), Vec::new(), false)?;
            self.sql.push(unit);
            return Ok(Instr::ArrayQuery { slot, sql: self.sql.len() - 1, null_if_empty, sets_found: false });
        }
        Ok(Instr::ArrayAssign { slot, value: self.array_value(e, elem)? })
    }

    /// The value `e` gives an array variable of element type `elem`: NULL, `ARRAY[…]`, another
    /// array variable, concatenations of arrays and elements (`||`, `array_cat`,
    /// `array_append`, `array_prepend`), or any other expression as the array's text form.
    fn array_value(&mut self, e: &ast::Expr, elem: DataType) -> Result<ArrayValue> {
        match e {
            ast::Expr::Nested(inner) => self.array_value(inner, elem),
            ast::Expr::Cast { expr, data_type: ast::DataType::Array(_), .. } => self.array_value(expr, elem),
            ast::Expr::Value(v) if matches!(v.value, ast::Value::Null) => Ok(ArrayValue::Null),
            ast::Expr::Array(a) => Ok(ArrayValue::Elements(a.elem.iter().map(|x| self.expr(x, Some(elem))).collect::<Result<_>>()?)),
            ast::Expr::Identifier(id) if self.array_slot(e).is_some() => {
                let slot = self.array_slot(e).expect("checked");
                match self.slots[slot].ty {
                    PlType::Array(t) if t.family() == elem.family() => Ok(ArrayValue::Var(slot)),
                    other => Err(Error::mismatch(format!("\"{}\" is {} where an array of {} is expected", id.value, other.name(), elem.pg_name()))),
                }
            }
            ast::Expr::Subquery(_) | ast::Expr::Function(_) if array_subquery(e) => {
                Err(Error::unsupported("this array built by a query").with_hint(
                    "ARRAY(SELECT x …) and a subquery or SELECT … INTO of array_agg(x [ORDER BY …]) alone, without GROUP BY, DISTINCT or FILTER, build arrays.",
                ))
            }
            _ => match self.array_parts(e, elem)? {
                Some(parts) => Ok(ArrayValue::Concat(parts)),
                None => Ok(ArrayValue::Text(self.expr(e, Some(DataType::Text))?)),
            },
        }
    }

    /// The parts of a concatenation that makes an array, or `None` if `e` is none.
    fn array_parts(&mut self, e: &ast::Expr, elem: DataType) -> Result<Option<Vec<ArrayPart>>> {
        let operands: Vec<&ast::Expr> = match e {
            ast::Expr::BinaryOp { left, op: ast::BinaryOperator::StringConcat, right } if self.is_array(left) || self.is_array(right) => vec![left, right],
            ast::Expr::Function(f) => {
                let name = f.name.to_string().to_lowercase();
                if !["array_append", "array_prepend", "array_cat"].contains(&name.as_str()) {
                    return Ok(None);
                }
                let args = unnamed_args(f).filter(|a| a.len() == 2).ok_or_else(|| Error::syntax(format!("{name} takes two arguments")))?;
                // array_prepend(element, array); the others (array, array or element).
                if name == "array_prepend" {
                    return Ok(Some(vec![ArrayPart::Element(self.expr(args[0], Some(elem))?), ArrayPart::Array(self.array_value(args[1], elem)?)]));
                }
                let last = if name == "array_append" { ArrayPart::Element(self.expr(args[1], Some(elem))?) } else { ArrayPart::Array(self.array_value(args[1], elem)?) };
                return Ok(Some(vec![ArrayPart::Array(self.array_value(args[0], elem)?), last]));
            }
            _ => return Ok(None),
        };
        let mut parts = Vec::new();
        for operand in operands {
            if !self.is_array(operand) {
                parts.push(ArrayPart::Element(self.expr(operand, Some(elem))?));
                continue;
            }
            // `a || b || c` parses as `(a || b) || c`: one flat list of parts.
            match self.array_value(operand, elem)? {
                ArrayValue::Concat(inner) => parts.extend(inner),
                value => parts.push(ArrayPart::Array(value)),
            }
        }
        Ok(Some(parts))
    }

    /// Whether `e`, an operand of `||`, is an array, as PostgreSQL resolves the operator: an
    /// array variable, `ARRAY[…]`, a cast to an array type, an array function, or a NULL or
    /// quoted literal (of unknown type, taken as the array's).
    fn is_array(&self, e: &ast::Expr) -> bool {
        match e {
            ast::Expr::Nested(inner) => self.is_array(inner),
            ast::Expr::Cast { data_type, .. } => matches!(data_type, ast::DataType::Array(_)),
            ast::Expr::Array(_) => true,
            ast::Expr::Value(v) => matches!(v.value, ast::Value::Null | ast::Value::SingleQuotedString(_)),
            ast::Expr::Identifier(_) => self.array_slot(e).is_some(),
            ast::Expr::BinaryOp { left, op: ast::BinaryOperator::StringConcat, right } => self.is_array(left) || self.is_array(right),
            ast::Expr::Function(f) => ["array_append", "array_prepend", "array_cat"].contains(&f.name.to_string().to_lowercase().as_str()),
            _ => false,
        }
    }

    /// The array variable `e` names: a variable, or `$n` naming an array parameter.
    fn array_slot(&self, e: &ast::Expr) -> Option<usize> {
        let slot = match e {
            ast::Expr::Identifier(id) => self.lookup(&fold_ident(id))?,
            ast::Expr::Value(v) => {
                let ast::Value::Placeholder(p) = &v.value else { return None };
                let n: usize = p.trim_start_matches('$').parse().ok()?;
                n.checked_sub(1).filter(|&s| s < self.header.params.len())?
            }
            _ => return None,
        };
        matches!(self.slots[slot].ty, PlType::Array(_)).then_some(slot)
    }

    /// The array variable `ANY (…)` or `ALL (…)` compares with (in parentheses or not).
    fn quantified_array(&self, e: &ast::Expr) -> Option<usize> {
        match e {
            ast::Expr::Nested(inner) => self.quantified_array(inner),
            e => self.array_slot(e),
        }
    }

    /// Whether an expression uses an array variable as a whole (`x = ANY(ids)`, `g(ids)`),
    /// which only a statement's form for the array's length can ([`Routine::spread`]).
    fn spreads_array(&self, e: &ast::Expr) -> bool {
        let mut e = e.clone();
        self.rewrite(&mut e).is_ok_and(|(params, _)| params.iter().any(ParamSource::spreads))
    }

    fn patch(&mut self, at: usize, target: usize) {
        match &mut self.code[at] {
            Instr::Jump(t) | Instr::JumpIfNot { target: t, .. } | Instr::JumpIf { target: t, .. } => *t = target,
            Instr::RangeTest { exit, .. } | Instr::ForeachNext { exit, .. } | Instr::QueryNext { exit, .. } => *exit = target,
            _ => {}
        }
    }

    fn block(&mut self, decls: &[Decl], body: &[SynStmt], handlers: &[parser::Handler]) -> Result<()> {
        self.scopes.push(Vec::new());
        for d in decls {
            // `pending`: a %TYPE whose type is not known yet (see `compile_with`).
            let (ty, pending) = match &d.ty {
                DeclType::Plain(ty) => (*ty, false),
                DeclType::Record | DeclType::RowType(_) => {
                    self.declare_record(d)?;
                    continue;
                }
                DeclType::Cursor(decl) => {
                    self.declare_cursor(&d.name, Some(decl), None)?;
                    continue;
                }
                DeclType::RefCursor => {
                    self.declare_cursor(&d.name, None, d.default.as_ref())?;
                    continue;
                }
                DeclType::ColumnType { table, column } => {
                    let key = self.describe_only(&format!("SELECT {} FROM {}", quote_ident(column), quote_ident(table)))?;
                    match self.described.columns.get(&key).and_then(|c| c.first()) {
                        Some((_, t)) => (PlType::Scalar(*t), false),
                        None => {
                            self.unresolve(|| Error::internal(format!("the type of {table}.{column} is not known yet")));
                            (PlType::Scalar(DataType::Text), true)
                        }
                    }
                }
                DeclType::VariableType(name) => {
                    let slot = self.lookup(name).ok_or_else(|| Error::syntax(format!("\"{name}\" is not a known variable (in {name}%TYPE)")))?;
                    if self.record_of(slot).is_some() {
                        return Err(Error::unsupported(format!("%TYPE of the record \"{name}\"")));
                    }
                    (self.slots[slot].ty, self.pending.contains(&slot))
                }
            };
            // An array's default is assigned after the NULL its Init gives. Either is compiled
            // before the variable is declared, so that it cannot read itself.
            let (value, array_default) = match (ty, &d.default) {
                (PlType::Array(elem), Some(e)) => (None, Some(self.array_assignment(usize::MAX, e, elem)?)),
                (_, Some(e)) if pending => (Some(self.expr(e, None).unwrap_or_else(|_| unresolved_expr())), None),
                (_, Some(e)) => (Some(self.expr(e, hint(ty))?), None),
                (_, None) => (None, None),
            };
            let slot = self.declare(&d.name, ty);
            if pending {
                self.pending.insert(slot);
            }
            if d.constant {
                self.constants.push(slot);
            }
            self.code.push(Instr::Init { slot, value });
            if let Some(mut assign) = array_default {
                // Compiled before the variable had its slot.
                if let Instr::ArrayAssign { slot: s, .. } | Instr::ArrayQuery { slot: s, .. } = &mut assign {
                    *s = slot;
                }
                self.code.push(assign);
            }
        }
        // With an EXCEPTION section: TryEnter; body; TryExit; jump to the end; then each
        // handler, ending with a jump to the end. An error inside the body rolls back to the
        // savepoint and jumps to the handler that catches it (the interpreter pops the block
        // first).
        let table = (!handlers.is_empty()).then(|| {
            let table = self.handlers.len();
            self.handlers.push(Vec::new());
            self.code.push(Instr::TryEnter { table });
            self.open.push(Open::Try);
            table
        });
        for s in body {
            self.statement(s)?;
        }
        if let Some(table) = table {
            self.open.pop();
            self.code.push(Instr::TryExit);
            let mut to_end = vec![self.here()];
            self.code.push(Instr::Jump(PATCH));
            for h in handlers {
                self.scopes.push(Vec::new());
                let sqlstate = self.declare("sqlstate", PlType::Scalar(DataType::Text));
                let sqlerrm = self.declare("sqlerrm", PlType::Scalar(DataType::Text));
                let (detail, hint, context) = (self.hidden_text(), self.hidden_text(), self.hidden_text());
                let target = self.here();
                let code = HandlerCode { conditions: h.conditions.clone(), target, sqlstate, sqlerrm, detail, hint, context };
                self.handlers[table].push(code.clone());
                self.in_handlers.push(code);
                for s in &h.body {
                    self.statement(s)?;
                }
                self.in_handlers.pop();
                self.scopes.pop();
                to_end.push(self.here());
                self.code.push(Instr::Jump(PATCH));
            }
            let end = self.here();
            for at in to_end {
                self.patch(at, end);
            }
        }
        self.scopes.pop();
        Ok(())
    }

    /// Declares a `record` or `%ROWTYPE` variable: a slot for its name and, when the columns
    /// of the statements assigning it are known, one slot per field (set to NULL here, as the
    /// block starts).
    fn declare_record(&mut self, d: &Decl) -> Result<()> {
        if d.default.is_some() || d.constant {
            return Err(Error::unsupported(format!("a default or CONSTANT for the record variable \"{}\"", d.name)));
        }
        let (assigners, own) = match &d.ty {
            DeclType::RowType(table) => {
                let key = self.describe_only(&format!("SELECT * FROM {}", quote_ident(table)))?;
                (vec![key.clone()], vec![key])
            }
            _ => (self.described.assigners.get(self.records.len()).cloned().unwrap_or_default(), Vec::new()),
        };
        let slot = self.declare(&d.name, PlType::Scalar(DataType::Bool));
        let mut fields: Vec<(String, usize)> = Vec::new();
        let mut known = false;
        for key in &assigners {
            let Some(columns) = self.described.columns.get(key) else { continue };
            known = true;
            for (name, ty) in columns {
                if fields.iter().all(|(f, _)| f != name) {
                    let field = self.slots.len();
                    self.slots.push(Slot { name: format!("{}.{name}", d.name), ty: PlType::Scalar(*ty) });
                    self.code.push(Instr::Init { slot: field, value: None });
                    fields.push((name.clone(), field));
                }
            }
        }
        let rowtype = matches!(d.ty, DeclType::RowType(_));
        self.records.push(RecordVar { name: d.name.clone(), slot, fields: known.then_some(fields), rowtype, assigners: own });
        Ok(())
    }

    /// Declares a cursor variable: a bound one's query is compiled here, with its arguments as
    /// variables of their own that OPEN assigns. Its value is the name of the portal OPEN
    /// opens: a bound cursor's own name, as in PostgreSQL, a `refcursor`'s default or NULL
    /// (OPEN makes up a name then).
    fn declare_cursor(&mut self, name: &str, decl: Option<&parser::CursorDecl>, default: Option<&ast::Expr>) -> Result<()> {
        let bound = match decl {
            Some(d) => {
                self.scopes.push(Vec::new());
                let args: Vec<usize> = d.args.iter().map(|(arg, ty)| self.declare(arg, *ty)).collect();
                let unit = self.sql_unit(&d.statement, &d.text, Vec::new(), false);
                self.scopes.pop();
                self.sql.push(unit?);
                Some((self.sql.len() - 1, args))
            }
            None => None,
        };
        let value = match (decl, default) {
            (Some(_), _) => Some(self.expr(&ast::Expr::value(ast::Value::SingleQuotedString(name.to_string())), Some(DataType::Text))?),
            (None, Some(e)) => Some(self.expr(e, Some(DataType::Text))?),
            (None, None) => None,
        };
        let slot = self.declare(name, PlType::Scalar(DataType::Text));
        self.code.push(Instr::Init { slot, value });
        self.cursor_slot(slot, bound, decl.and_then(|d| d.scroll));
        Ok(())
    }

    /// Makes variable `slot` a cursor variable (a declared one, or a `refcursor` parameter).
    fn cursor_slot(&mut self, slot: usize, bound: Option<(usize, Vec<usize>)>, scroll: Option<bool>) {
        let cursor = self.cursors;
        self.cursors += 1;
        self.cursor_vars.push(CursorVar { slot, cursor, bound, scroll, opened: None });
    }

    /// Whether a cursor over statement `sql` may move back: as declared, and otherwise unless
    /// its query locks rows (PostgreSQL's plans for SELECT … FOR UPDATE scan forward only);
    /// `None` for SCROLL with FOR UPDATE ([`Instr::CursorOpen`]).
    fn cursor_scroll(&self, sql: usize, declared: Option<bool>) -> Option<bool> {
        let locks = matches!(&self.sql[sql].statement, ast::Statement::Query(q) if !q.locks.is_empty());
        match declared {
            Some(true) if locks => None,
            Some(scroll) => Some(scroll),
            None => Some(!locks),
        }
    }

    /// The cursor variable `name` names (42804 for another variable).
    fn cursor_var(&self, name: &str) -> Result<usize> {
        let slot = self.lookup(name).ok_or_else(|| Error::syntax(format!("\"{name}\" is not a known variable")))?;
        self.cursor_vars
            .iter()
            .position(|c| c.slot == slot)
            .ok_or_else(|| Error::new(SqlState::DatatypeMismatch, format!("variable \"{name}\" must be of type cursor or refcursor")))
    }

    /// Assigns a bound cursor's arguments (its query and argument slots given), as OPEN and a
    /// cursor FOR loop do.
    fn cursor_args(&mut self, name: &str, slots: &[usize], args: &[ast::Expr]) -> Result<()> {
        if slots.len() != args.len() {
            return Err(Error::syntax(match (slots.is_empty(), args.is_empty()) {
                (true, _) => format!("cursor \"{name}\" has no arguments"),
                (_, true) => format!("cursor \"{name}\" has arguments"),
                _ => format!("wrong number of arguments for cursor \"{name}\""),
            }));
        }
        for (&slot, e) in slots.iter().zip(args) {
            let value = self.expr(e, hint(self.slots[slot].ty))?;
            self.code.push(Instr::Assign { slot, value });
        }
        Ok(())
    }

    /// Adds a statement run only to learn its columns; its key.
    fn describe_only(&mut self, text: &str) -> Result<UnitKey> {
        let statement = crate::sql::parse::parse(text)?.pop().ok_or_else(|| Error::internal("an empty statement"))?;
        let mut unit = self.sql_unit(&statement, text, Vec::new(), false)?;
        unit.describe_only = true;
        let key = unit.key();
        self.sql.push(unit);
        Ok(key)
    }

    /// Notes the first thing the compile could not resolve.
    fn unresolve(&self, why: impl FnOnce() -> Error) {
        let mut first = self.unresolved.borrow_mut();
        if first.is_none() {
            *first = Some(why());
        }
    }

    fn record_of(&self, slot: usize) -> Option<&RecordVar> {
        self.records.iter().find(|r| r.slot == slot)
    }

    /// The slots a statement's row is assigned to (`INTO targets`, `FOR targets IN`): a list
    /// of scalar variables, or one record variable, whose fields get the columns by name.
    fn row_targets(&mut self, names: &[String], unit: &SqlUnit) -> Result<Vec<usize>> {
        let record = match names {
            [name] => self.lookup(name).and_then(|slot| self.records.iter().position(|r| r.slot == slot)),
            _ => None,
        };
        let Some(record) = record else {
            let slots = names.iter().map(|n| self.scalar_slot(n)).collect::<Result<Vec<_>>>()?;
            if let Some(slot) = slots.iter().find(|s| self.pending.contains(s)) {
                let name = self.slots[*slot].name.clone();
                self.unresolve(|| Error::internal(format!("the type of \"{name}\" is not known yet")));
            }
            return Ok(slots);
        };
        let key = unit.key();
        if unit.resolved && !self.records[record].assigners.contains(&key) {
            self.records[record].assigners.push(key.clone());
        }
        let r = &self.records[record];
        let targets = match (self.described.columns.get(&key), &r.fields) {
            (Some(columns), Some(fields)) if unit.resolved => columns
                .iter()
                .map(|(name, _)| fields.iter().find(|(f, _)| f == name).map(|(_, slot)| *slot))
                .collect::<Option<Vec<_>>>(),
            _ => None,
        };
        match targets {
            Some(targets) => Ok(targets),
            None => {
                let name = r.name.clone();
                self.unresolve(|| not_assigned(&name));
                Ok(Vec::new())
            }
        }
    }

    fn statement(&mut self, s: &SynStmt) -> Result<()> {
        match s {
            SynStmt::At { line, kind, statement } => {
                let start = self.here();
                self.statement(statement)?;
                // The instructions of inner statements keep their own place.
                self.lines.resize(self.here(), None);
                for place in &mut self.lines[start..] {
                    place.get_or_insert((*line, kind));
                }
            }
            SynStmt::Block { decls, body, handlers } => self.block(decls, body, handlers)?,
            SynStmt::Labeled { label, statement } => {
                let inner = match statement.as_ref() {
                    SynStmt::At { statement, .. } => statement.as_ref(),
                    other => other,
                };
                if let SynStmt::Block { decls, body, handlers } = inner {
                    // EXIT with the block's label jumps past the block's end (and its handlers).
                    self.loops.push(LoopPatches { breaks: Vec::new(), continues: Vec::new(), depth: self.open.len(), label: Some(label.clone()), is_loop: false });
                    self.block(decls, body, handlers)?;
                    let patches = self.loops.pop().expect("pushed above");
                    let end = self.here();
                    self.close_loop(patches, end, end);
                } else {
                    // A loop (the parser allows nothing else): its body takes the label.
                    self.label = Some(label.clone());
                    self.statement(statement)?;
                    self.label = None;
                }
            }
            SynStmt::Null => {}
            SynStmt::EndTransaction { rollback, chain } => self.code.push(Instr::EndTransaction { rollback: *rollback, chain: *chain }),
            SynStmt::Open { cursor, args, query: None, execute: Some(exec), scroll } => {
                let k = self.cursor_var(cursor)?;
                if self.cursor_vars[k].bound.is_some() {
                    return Err(Error::syntax(format!("OPEN … FOR EXECUTE of the bound cursor \"{cursor}\"")));
                }
                if !args.is_empty() {
                    return Err(Error::syntax(format!("arguments for the unbound cursor \"{cursor}\"")));
                }
                let text = self.expr(&exec.text, Some(DataType::Text))?;
                let using = exec.using.iter().map(|e| self.expr(e, None)).collect::<Result<Vec<_>>>()?;
                let exec = Box::new(ExecuteCode { text, using, into: Vec::new(), strict: false, query: true });
                // Its columns are known only when it runs: FETCH assigns them by position.
                self.cursor_vars[k].opened = None;
                let scroll = scroll.or(self.cursor_vars[k].scroll).unwrap_or(true);
                self.code.push(Instr::CursorOpenExecute { exec, cursor: self.cursor_vars[k].cursor, var: self.cursor_vars[k].slot, scroll });
            }
            SynStmt::Open { cursor, args, query, scroll, .. } => {
                let k = self.cursor_var(cursor)?;
                let scroll = scroll.or(self.cursor_vars[k].scroll);
                let (sql, slots) = match (&self.cursor_vars[k].bound, query) {
                    (Some(_), Some(_)) => return Err(Error::syntax(format!("OPEN … FOR of the bound cursor \"{cursor}\""))),
                    (Some((sql, slots)), None) => (*sql, slots.clone()),
                    (None, Some((statement, text))) => {
                        let unit = self.sql_unit(statement, text, Vec::new(), false)?;
                        self.sql.push(unit);
                        self.cursor_vars[k].opened = Some(self.sql.len() - 1);
                        (self.sql.len() - 1, Vec::new())
                    }
                    (None, None) => return Err(Error::syntax(format!("OPEN of the unbound cursor \"{cursor}\" needs FOR and a query"))),
                };
                self.cursor_args(cursor, &slots, args)?;
                let scroll = self.cursor_scroll(sql, scroll);
                self.code.push(Instr::CursorOpen { sql, cursor: self.cursor_vars[k].cursor, var: self.cursor_vars[k].slot, in_loop: false, scroll });
            }
            SynStmt::Fetch { cursor, into, direction } => {
                let k = self.cursor_var(cursor)?;
                let (bound, query) = (self.cursor_vars[k].bound.is_some(), self.cursor_vars[k].bound.as_ref().map(|(sql, _)| *sql).or(self.cursor_vars[k].opened));
                let targets = match (into, query) {
                    (Some(names), Some(sql)) => {
                        let unit = self.sql[sql].clone();
                        self.row_targets(names, &unit)?
                    }
                    (Some(names), None) => names.iter().map(|n| self.scalar_slot(n)).collect::<Result<Vec<_>>>()?,
                    (None, _) => Vec::new(),
                };
                let count = |c: &mut Self, e: &ast::Expr| c.expr(e, Some(DataType::Int64));
                let direction = Box::new(match direction {
                    FetchDir::Next => FetchStep::Next,
                    FetchDir::Prior => FetchStep::Prior,
                    FetchDir::First => FetchStep::First,
                    FetchDir::Last => FetchStep::Last,
                    FetchDir::Absolute(e) => FetchStep::Absolute(count(self, e)?),
                    FetchDir::Relative(e) => FetchStep::Relative(count(self, e)?),
                    FetchDir::Forward(e) => FetchStep::Forward(count(self, e)?),
                    FetchDir::Backward(e) => FetchStep::Backward(count(self, e)?),
                    FetchDir::ForwardAll => FetchStep::ForwardAll,
                    FetchDir::BackwardAll => FetchStep::BackwardAll,
                });
                self.code.push(Instr::CursorFetch { cursor: self.cursor_vars[k].cursor, var: self.cursor_vars[k].slot, targets, assign: into.is_some(), name: cursor.clone(), bound, direction });
            }
            SynStmt::Close { cursor } => {
                let k = self.cursor_var(cursor)?;
                let bound = self.cursor_vars[k].bound.is_some();
                self.code.push(Instr::CursorClose { cursor: self.cursor_vars[k].cursor, var: self.cursor_vars[k].slot, bound, name: cursor.clone() });
            }
            SynStmt::ForCursor { target, cursor, args, body } => {
                let k = self.cursor_var(cursor)?;
                let Some((sql, slots)) = self.cursor_vars[k].bound.clone() else {
                    return Err(Error::syntax("cursor FOR loop must use a bound cursor variable"));
                };
                self.cursor_args(cursor, &slots, args)?;
                // The loop declares its record, in a scope of its own.
                self.scopes.push(Vec::new());
                self.declare_record(&Decl { name: target.clone(), ty: DeclType::Record, default: None, constant: false })?;
                let unit = self.sql[sql].clone();
                let targets = self.row_targets(std::slice::from_ref(target), &unit)?;
                let at = self.cursor_vars[k].cursor;
                let scroll = self.cursor_scroll(sql, self.cursor_vars[k].scroll);
                let var = self.cursor_vars[k].slot;
                self.loop_over(at, Instr::CursorOpen { sql, cursor: at, var, in_loop: true, scroll }, targets, body)?;
                self.scopes.pop();
            }
            SynStmt::Assign { target, value } if target.contains('.') => {
                // A record's field: its slot, once the record's fields are known.
                let (name, field) = target.split_once('.').expect("checked");
                let record = self.lookup(name).and_then(|s| self.record_of(s)).ok_or_else(|| Error::syntax(format!("\"{name}\" is not a known record variable")))?;
                match record.fields.as_ref().map(|f| f.iter().find(|(n, _)| n == field).map(|(_, s)| *s)) {
                    Some(Some(slot)) => {
                        let value = self.expr(value, hint(self.slots[slot].ty))?;
                        self.code.push(Instr::Assign { slot, value });
                    }
                    Some(None) => {
                        let (name, field) = (name.to_string(), field.to_string());
                        self.unresolve(|| Error::new(SqlState::UndefinedColumn, format!("record \"{name}\" has no field \"{field}\"")));
                    }
                    None => {
                        let name = name.to_string();
                        self.unresolve(|| not_assigned(&name));
                    }
                }
            }
            SynStmt::Assign { target, value } if self.lookup(target).is_some_and(|s| matches!(self.slots[s].ty, PlType::Array(_))) => {
                let slot = self.lookup(target).expect("checked");
                self.check_not_constant(slot, target)?;
                let PlType::Array(elem) = self.slots[slot].ty else { unreachable!("checked") };
                let value = self.array_assignment(slot, value, elem)?;
                self.code.push(value);
            }
            SynStmt::AssignElement { target, index, value } => {
                let slot = self.lookup(target).ok_or_else(|| Error::syntax(format!("\"{target}\" is not a known variable")))?;
                let PlType::Array(elem) = self.slots[slot].ty else {
                    return Err(Error::new(
                        SqlState::custom("42804").unwrap_or(SqlState::DatatypeMismatch),
                        format!("cannot subscript type {} because it does not support subscripting", self.slots[slot].ty.name()),
                    ));
                };
                self.check_not_constant(slot, target)?;
                let index = self.expr(index, Some(DataType::Int32))?;
                let value = self.expr(value, Some(elem))?;
                self.code.push(Instr::ElementAssign { array: slot, index, value });
            }
            SynStmt::Assign { target, value } => {
                let slot = self.scalar_slot(target)?;
                self.check_not_constant(slot, target)?;
                let value = if self.pending.contains(&slot) {
                    self.unresolve(|| Error::internal(format!("the type of \"{target}\" is not known yet")));
                    self.expr(value, None).unwrap_or_else(|_| unresolved_expr())
                } else {
                    self.expr(value, hint(self.slots[slot].ty))?
                };
                self.code.push(Instr::Assign { slot, value });
            }
            // `SELECT array_agg(x) INTO arr …`: the array's elements, one row each.
            SynStmt::Sql { statement, into, .. }
                if let [target] = into.as_slice()
                    && let Some(slot) = self.lookup(target).filter(|s| matches!(self.slots[*s].ty, PlType::Array(_)))
                    && let ast::Statement::Query(q) = statement.as_ref()
                    && let Some(query) = aggregated_elements(q) =>
            {
                self.check_not_constant(slot, target)?;
                let statement = ast::Statement::Query(Box::new(query));
                let unit = self.sql_unit(&statement, &statement.to_string(), Vec::new(), false)?;
                self.sql.push(unit);
                self.code.push(Instr::ArrayQuery { slot, sql: self.sql.len() - 1, null_if_empty: true, sets_found: true });
            }
            SynStmt::Sql { statement, text, into, strict } => {
                let mut unit = self.sql_unit(statement, text, Vec::new(), *strict)?;
                unit.into = self.row_targets(into, &unit)?;
                self.sql.push(unit);
                self.code.push(Instr::Sql(self.sql.len() - 1));
            }
            SynStmt::If { branches, otherwise } => {
                let mut to_end = Vec::new();
                for (cond, body) in branches {
                    let cond = self.expr(cond, Some(DataType::Bool))?;
                    let test = self.here();
                    self.code.push(Instr::JumpIfNot { cond, target: PATCH });
                    for s in body {
                        self.statement(s)?;
                    }
                    to_end.push(self.here());
                    self.code.push(Instr::Jump(PATCH));
                    let next = self.here();
                    self.patch(test, next);
                }
                for s in otherwise {
                    self.statement(s)?;
                }
                let end = self.here();
                for at in to_end {
                    self.patch(at, end);
                }
            }
            SynStmt::ForRange { var, reverse, bounds, body } => {
                let (lo, hi, step) = bounds.as_ref();
                let lo_e = self.expr(lo, Some(DataType::Int32))?;
                let hi_e = self.expr(hi, Some(DataType::Int32))?;
                let step_e = step.as_ref().map(|s| self.expr(s, Some(DataType::Int32))).transpose()?;
                self.scopes.push(Vec::new());
                let v = self.declare(var, PlType::Scalar(DataType::Int32));
                let (h, st) = (self.hidden(), self.hidden());
                let bounds = Box::new(RangeBounds { lo: lo_e, hi: hi_e, step: step_e, prefetch: Vec::new() });
                self.code.push(Instr::RangeInit { var: v, hi: h, step: st, bounds });
                let test = self.here();
                self.code.push(Instr::RangeTest { var: v, hi: h, reverse: *reverse, exit: PATCH });
                let patches = self.loop_body(body)?;
                let next = self.here();
                let prefetch = loop_prefetch(&self.code[test + 1..next], &self.sql, v);
                if let Instr::RangeInit { bounds, .. } = &mut self.code[test - 1] {
                    bounds.prefetch = prefetch;
                }
                self.code.push(Instr::RangeNext { var: v, step: st, reverse: *reverse });
                self.code.push(Instr::Jump(test));
                let end = self.here();
                self.patch(test, end);
                self.close_loop(patches, next, end);
                self.scopes.pop();
            }
            SynStmt::Foreach { var, array, body } => {
                let v = self.scalar_slot(var)?;
                let a = match array {
                    ast::Expr::Identifier(name) => self.lookup(&fold_ident(name)).ok_or_else(|| Error::syntax(format!("\"{}\" is not a known variable", name.value)))?,
                    // Another array expression (`ARRAY(SELECT …)`, `ARRAY[…]`, `a || b`): into
                    // a hidden array of the loop variable's type first.
                    other => {
                        let PlType::Scalar(elem) = self.slots[v].ty else { return Err(Error::internal("a FOREACH variable that is an array")) };
                        let hidden = self.slots.len();
                        self.slots.push(Slot { name: String::new(), ty: PlType::Array(elem) });
                        let assign = self.array_assignment(hidden, other, elem)?;
                        self.code.push(assign);
                        hidden
                    }
                };
                let PlType::Array(elem) = self.slots[a].ty else {
                    return Err(Error::mismatch(format!("FOREACH expression must yield an array, not type {}", self.slots[a].ty.name())));
                };
                if let PlType::Scalar(t) = self.slots[v].ty
                    && t.family() != elem.family()
                {
                    return Err(Error::mismatch(format!("FOREACH loop variable \"{var}\" is {} but the array holds {}", t.pg_name(), elem.pg_name())));
                }
                let idx = self.hidden();
                self.code.push(Instr::ForeachInit { idx });
                let next = self.here();
                self.code.push(Instr::ForeachNext { array: a, idx, var: v, exit: PATCH });
                let patches = self.loop_body(body)?;
                self.code.push(Instr::Jump(next));
                let end = self.here();
                self.patch(next, end);
                self.close_loop(patches, next, end);
            }
            SynStmt::ForQuery { targets, statement, text, body } => {
                let unit = self.sql_unit(statement, text, Vec::new(), false)?;
                let targets = self.row_targets(targets, &unit)?;
                self.sql.push(unit);
                let sql = self.sql.len() - 1;
                self.cursor_loop(|cursor| Instr::QueryOpen { sql, cursor }, targets, body)?;
            }
            SynStmt::ForExecute { targets, exec, body } => {
                // The targets: scalar variables, or a record whose fields are known without
                // the query (`%ROWTYPE`), by position.
                let targets = match targets.as_slice() {
                    [name] if self.lookup(name).and_then(|s| self.record_of(s)).is_some() => {
                        let record = self.lookup(name).and_then(|s| self.record_of(s)).expect("checked");
                        if !record.rowtype {
                            return Err(Error::unsupported(format!("FOR … IN EXECUTE over the record \"{name}\" (declare it table%ROWTYPE, or use scalar variables)")));
                        }
                        match &record.fields {
                            Some(fields) => fields.iter().map(|(_, s)| *s).collect(),
                            None => {
                                self.unresolve(|| not_assigned(name));
                                Vec::new()
                            }
                        }
                    }
                    names => names.iter().map(|n| self.scalar_slot(n)).collect::<Result<Vec<_>>>()?,
                };
                let text = self.expr(&exec.text, Some(DataType::Text))?;
                let using = exec.using.iter().map(|e| self.expr(e, None)).collect::<Result<Vec<_>>>()?;
                let exec = Box::new(ExecuteCode { text, using, into: Vec::new(), strict: false, query: false });
                self.cursor_loop(|cursor| Instr::ExecuteOpen { exec, cursor }, targets, body)?;
            }
            SynStmt::While { cond, body } => {
                let start = self.here();
                let cond = self.expr(cond, Some(DataType::Bool))?;
                // After the statement that evaluates a condition with a subquery, if any.
                let test = self.here();
                self.code.push(Instr::JumpIfNot { cond, target: PATCH });
                let patches = self.loop_body(body)?;
                self.code.push(Instr::Jump(start));
                let end = self.here();
                self.patch(test, end);
                self.close_loop(patches, start, end);
            }
            SynStmt::Loop { body } => {
                let start = self.here();
                let patches = self.loop_body(body)?;
                self.code.push(Instr::Jump(start));
                let end = self.here();
                self.close_loop(patches, start, end);
            }
            SynStmt::Exit { label, cond } | SynStmt::Continue { label, cond } => {
                let is_exit = matches!(s, SynStmt::Exit { .. });
                let target = match label {
                    None => self.loops.iter().rposition(|l| l.is_loop).ok_or_else(|| {
                        Error::syntax(if is_exit { "EXIT cannot be used outside a loop, unless it has a label" } else { "CONTINUE cannot be used outside a loop" })
                    })?,
                    Some(name) => self.loops.iter().rposition(|l| l.label.as_ref() == Some(name)).ok_or_else(|| {
                        Error::syntax(format!("there is no label \"{name}\" attached to any block or loop enclosing this statement"))
                    })?,
                };
                if !is_exit && !self.loops[target].is_loop {
                    return Err(Error::syntax(format!("block label \"{}\" cannot be used in CONTINUE", label.as_deref().unwrap_or(""))));
                }
                // Leaving blocks with an EXCEPTION section and query loops opened inside the
                // target closes them, innermost first.
                let close: Vec<Open> = self.open[self.loops[target].depth..].iter().rev().copied().collect();
                let cond = cond.as_ref().map(|c| self.expr(c, Some(DataType::Bool))).transpose()?;
                let at = if close.is_empty() {
                    let at = self.here();
                    self.code.push(match cond {
                        Some(cond) => Instr::JumpIf { cond, target: PATCH },
                        None => Instr::Jump(PATCH),
                    });
                    at
                } else {
                    // [JumpIfNot cond → past]; TryExit or QueryClose for each; Jump target; past:
                    let skip = cond.map(|cond| {
                        let at = self.here();
                        self.code.push(Instr::JumpIfNot { cond, target: PATCH });
                        at
                    });
                    self.code.extend(close.iter().map(|open| match *open {
                        Open::Try => Instr::TryExit,
                        Open::Cursor(cursor) => Instr::QueryClose { cursor },
                    }));
                    let at = self.here();
                    self.code.push(Instr::Jump(PATCH));
                    if let Some(skip) = skip {
                        let past = self.here();
                        self.patch(skip, past);
                    }
                    at
                };
                let patches = &mut self.loops[target];
                if is_exit { patches.breaks.push(at) } else { patches.continues.push(at) }
            }
            SynStmt::Return(Some(_)) if !self.header.outs.is_empty() => {
                return Err(Error::mismatch("RETURN cannot have a parameter in function with OUT parameters"));
            }
            SynStmt::Return(None) if self.out_slot.is_some() => {
                let value = self.slot_expr(self.out_slot.expect("checked"));
                self.code.push(Instr::Return(Some(value)));
            }
            SynStmt::Return(None) if self.header.set.as_ref().is_some_and(|s| s.single) => {
                self.code.push(Instr::ReturnNext(None));
                self.code.push(Instr::Return(None));
            }
            SynStmt::ReturnNext(_) | SynStmt::ReturnQuery { .. } if self.header.set.as_ref().is_some_and(|s| s.single) => {
                return Err(Error::mismatch("cannot use RETURN NEXT or RETURN QUERY in a function that is not SETOF"));
            }
            SynStmt::Return(Some(_)) if self.header.set.is_some() => {
                return Err(Error::mismatch("RETURN cannot have a parameter in function returning set").with_hint("Use RETURN NEXT or RETURN QUERY."));
            }
            SynStmt::ReturnNext(Some(ast::Expr::Identifier(id)))
                if self.header.set.as_ref().is_some_and(|s| s.relation.is_some()) && self.lookup(&fold_ident(id)).and_then(|s| self.record_of(s)).is_some() =>
            {
                // `RETURN NEXT r` of a record: its fields, in order, are the row.
                let record = self.lookup(&fold_ident(id)).and_then(|s| self.record_of(s)).expect("checked");
                match &record.fields {
                    Some(fields) => {
                        let slots = fields.iter().map(|(_, slot)| *slot).collect();
                        self.code.push(Instr::ReturnNextRow(slots));
                    }
                    None => {
                        let name = record.name.clone();
                        self.unresolve(|| not_assigned(&name));
                    }
                }
            }
            SynStmt::ReturnNext(_) if self.header.set.as_ref().is_some_and(|s| s.relation.is_some()) => {
                return Err(Error::unsupported("RETURN NEXT of anything but a record variable in a function returning SETOF a table"));
            }
            SynStmt::ReturnNext(value) => {
                let Some(set) = &self.header.set else { return Err(Error::mismatch("cannot use RETURN NEXT in a non-SETOF function")) };
                let value = match (value, set.table) {
                    (Some(_), true) => return Err(Error::mismatch("RETURN NEXT cannot have a parameter in function with OUT parameters")),
                    (None, false) => return Err(Error::syntax("RETURN NEXT must have a parameter")),
                    (Some(e), false) => Some(self.expr(e, Some(set.columns[0].1))?),
                    (None, true) => None,
                };
                self.code.push(Instr::ReturnNext(value));
            }
            SynStmt::ReturnQuery { statement, text } => {
                if self.header.set.is_none() {
                    return Err(Error::mismatch("cannot use RETURN QUERY in a non-SETOF function"));
                }
                let unit = self.sql_unit(statement, text, Vec::new(), false)?;
                self.sql.push(unit);
                self.code.push(Instr::ReturnQuery(self.sql.len() - 1));
            }
            SynStmt::Return(value) => {
                let value = match (value, self.header.function, self.header.returns) {
                    (Some(_), false, _) => return Err(Error::syntax("RETURN cannot have a parameter in a procedure")),
                    (Some(_), true, None) => return Err(Error::syntax("RETURN cannot have a parameter in function returning void")),
                    (None, true, Some(_)) => return Err(Error::syntax("missing expression at or near \";\" (RETURN needs a value)")),
                    (Some(e), true, Some(PlType::Array(elem))) => {
                        let hidden = self.slots.len();
                        self.slots.push(Slot { name: String::new(), ty: PlType::Array(elem) });
                        let assign = self.array_assignment(hidden, e, elem)?;
                        self.code.push(assign);
                        self.code.push(Instr::ReturnArray { array: hidden });
                        return Ok(());
                    }
                    (Some(e), true, Some(t)) => Some(self.expr(e, hint(t))?),
                    (None, _, _) => None,
                };
                self.code.push(Instr::Return(value));
            }
            SynStmt::Execute(exec) => {
                if exec.query && self.header.set.is_none() {
                    return Err(Error::mismatch("cannot use RETURN QUERY in a non-SETOF function"));
                }
                let text = self.expr(&exec.text, Some(DataType::Text))?;
                let using = exec.using.iter().map(|e| self.expr(e, None)).collect::<Result<Vec<_>>>()?;
                let into = exec.into.iter().map(|n| self.scalar_slot(n)).collect::<Result<Vec<_>>>()?;
                self.code.push(Instr::Execute(Box::new(ExecuteCode { text, using, into, strict: exec.strict, query: exec.query })));
            }
            SynStmt::Reraise => {
                let h = self.handler("RAISE without parameters")?;
                let options = [("errcode", h.sqlstate), ("message", h.sqlerrm), ("detail", h.detail), ("hint", h.hint), ("context", h.context)]
                    .into_iter()
                    .map(|(name, slot)| (name.to_string(), self.slot_expr(slot)))
                    .collect();
                self.code.push(Instr::Raise { level: RaiseLevel::Exception, format: None, args: Vec::new(), options });
            }
            SynStmt::GetDiagnostics { stacked, items } => {
                for (target, item) in items {
                    let slot = self.scalar_slot(target)?;
                    let value = match (*stacked, item.as_str()) {
                        (false, "row_count") => self.slot_expr(self.row_count),
                        (true, _) => {
                            let h = self.handler("GET STACKED DIAGNOSTICS")?;
                            match item.as_str() {
                                "returned_sqlstate" => self.slot_expr(h.sqlstate),
                                "message_text" => self.slot_expr(h.sqlerrm),
                                // Empty, not NULL, when the error has none.
                                "pg_exception_detail" => empty_if_null(self.slot_expr(h.detail)),
                                "pg_exception_hint" => empty_if_null(self.slot_expr(h.hint)),
                                "pg_exception_context" => empty_if_null(self.slot_expr(h.context)),
                                // Freshet does not keep these for an error: empty, as
                                // PostgreSQL gives them when the error has none.
                                "column_name" | "constraint_name" | "pg_datatype_name" | "table_name" | "schema_name" => {
                                    ExprUnit { expr: Expr::literal(Value::Text(String::new()), DataType::Text), params: Vec::new(), ty: DataType::Text, on_slots: Some(Expr::literal(Value::Text(String::new()), DataType::Text)) }
                                }
                                other => return Err(Error::syntax(format!("unrecognized GET STACKED DIAGNOSTICS item \"{other}\""))),
                            }
                        }
                        (false, "pg_context" | "pg_routine_oid") => return Err(Error::unsupported(format!("GET DIAGNOSTICS {}", item.to_uppercase()))),
                        (false, other) => return Err(Error::syntax(format!("unrecognized GET DIAGNOSTICS item \"{other}\""))),
                    };
                    self.code.push(Instr::Assign { slot, value });
                }
            }
            SynStmt::Assert { cond, message } => {
                let cond = self.expr(cond, Some(DataType::Bool))?;
                let at = self.here();
                self.code.push(Instr::JumpIf { cond, target: PATCH });
                let message = match message {
                    Some(m) => self.expr(m, Some(DataType::Text))?,
                    None => text_expr("assertion failed"),
                };
                let options = vec![("errcode".to_string(), text_expr("P0004")), ("message".to_string(), message)];
                self.code.push(Instr::Raise { level: RaiseLevel::Exception, format: None, args: Vec::new(), options });
                let past = self.here();
                self.patch(at, past);
            }
            SynStmt::Case { subject, branches, otherwise } => {
                // Lowered to IF … ELSIF …: with a subject, it is evaluated once into a hidden
                // variable (named so that no identifier can name it) and each WHEN value is
                // compared with it.
                self.scopes.push(Vec::new());
                const SUBJECT: &str = " case subject";
                if let Some(subject) = subject {
                    let unit = self.expr(subject, None)?;
                    let slot = self.declare(SUBJECT, PlType::Scalar(unit.ty));
                    self.code.push(Instr::Assign { slot, value: unit });
                }
                let subject_ident = || ast::Expr::Identifier(ast::Ident::with_quote('"', SUBJECT));
                let ifs = branches
                    .iter()
                    .map(|(values, body)| {
                        let cond = match subject {
                            None => values[0].clone(),
                            Some(_) => values
                                .iter()
                                .map(|v| ast::Expr::BinaryOp { left: Box::new(subject_ident()), op: ast::BinaryOperator::Eq, right: Box::new(ast::Expr::Nested(Box::new(v.clone()))) })
                                .reduce(|a, b| ast::Expr::BinaryOp { left: Box::new(a), op: ast::BinaryOperator::Or, right: Box::new(b) })
                                .expect("a WHEN has a value"),
                        };
                        (cond, body.clone())
                    })
                    .collect();
                let otherwise = otherwise.clone().unwrap_or_else(|| {
                    let literal = |s: &str| ast::Expr::Value(ast::Value::SingleQuotedString(s.to_string()).with_empty_span());
                    let options = [("errcode", "20000"), ("message", "case not found"), ("hint", "CASE statement is missing ELSE part.")];
                    vec![SynStmt::Raise { level: RaiseLevel::Exception, format: None, args: Vec::new(), options: options.iter().map(|(n, v)| (n.to_string(), literal(v))).collect() }]
                });
                self.statement(&SynStmt::If { branches: ifs, otherwise })?;
                self.scopes.pop();
            }
            SynStmt::Raise { level, format, args, options } => {
                let args = args.iter().map(|a| self.expr(a, Some(DataType::Text))).collect::<Result<Vec<_>>>()?;
                let mut opts = Vec::new();
                for (name, e) in options {
                    if !["errcode", "message", "detail", "hint"].contains(&name.as_str()) {
                        return Err(Error::syntax(format!("unrecognized RAISE statement option \"{name}\"")));
                    }
                    opts.push((name.clone(), self.expr(e, Some(DataType::Text))?));
                }
                self.code.push(Instr::Raise { level: *level, format: format.clone(), args, options: opts });
            }
        }
        Ok(())
    }

    /// A loop over the rows of a cursor: `open` (given the cursor) fills it, each row goes to
    /// `targets`, then `body`; FOUND after it says whether it iterated.
    fn cursor_loop(&mut self, open: impl FnOnce(usize) -> Instr, targets: Vec<usize>, body: &[SynStmt]) -> Result<()> {
        let cursor = self.cursors;
        self.cursors += 1;
        self.loop_over(cursor, open(cursor), targets, body)
    }

    /// A loop over the rows `open` puts in cursor `cursor`.
    fn loop_over(&mut self, cursor: usize, open: Instr, targets: Vec<usize>, body: &[SynStmt]) -> Result<()> {
        self.code.push(open);
        let next = self.here();
        self.code.push(Instr::QueryNext { cursor, targets, exit: PATCH });
        // An EXIT or CONTINUE of this loop keeps its rows (its end closes them); one of an
        // outer loop closes them on its way.
        self.open.push(Open::Cursor(cursor));
        let patches = self.loop_body(body);
        self.open.pop();
        let patches = patches?;
        self.code.push(Instr::Jump(next));
        let end = self.here();
        self.code.push(Instr::QueryClose { cursor });
        self.patch(next, end);
        self.close_loop(patches, next, end);
        Ok(())
    }

    fn loop_body(&mut self, body: &[SynStmt]) -> Result<LoopPatches> {
        let label = self.label.take();
        self.loops.push(LoopPatches { breaks: Vec::new(), continues: Vec::new(), depth: self.open.len(), label, is_loop: true });
        for s in body {
            self.statement(s)?;
        }
        Ok(self.loops.pop().expect("pushed above"))
    }

    fn close_loop(&mut self, patches: LoopPatches, continue_at: usize, end: usize) {
        for at in patches.breaks {
            self.patch(at, end);
        }
        for at in patches.continues {
            self.patch(at, continue_at);
        }
    }

    /// Replaces variable references in `node` by `$n` parameters; returns their sources, and
    /// whether it read something of unknown type (a record's field, a `%TYPE` variable, each
    /// replaced by NULL: the result is not to be run).
    fn rewrite<T: VisitMut>(&self, node: &mut T) -> Result<(Vec<ParamSource>, bool)> {
        let mut rewriter = Rewriter { c: self, params: Vec::new(), shared: HashMap::new(), error: None, unresolved: false };
        let _ = node.visit(&mut rewriter);
        match rewriter.error {
            Some(err) => Err(err),
            None => Ok((rewriter.params, rewriter.unresolved)),
        }
    }

    /// Replaces variable references in `e` and binds it. An expression of a known type (`hint`)
    /// with a subquery (`IF EXISTS (SELECT …)`, `x := (SELECT max(…) FROM …)`), or calling a
    /// function the short path does not have (`n := other_function(x)`, `s := md5(s)`), runs as
    /// the statement `SELECT e` ([`Self::statement_expr`]); it leaves FOUND as it was, as
    /// PostgreSQL's expressions do.
    fn expr(&mut self, e: &ast::Expr, hint: Option<DataType>) -> Result<ExprUnit> {
        let Some(ty) = hint else { return self.bound_expr(e, hint) };
        // An array as a whole needs a statement, unless it is only in the arguments of calls
        // the short path hoists anyway (`n := total(ids) + 1`, see below).
        if has_subquery(e) || (self.spreads_array(e) && (foreign_calls(e) != Some(false) || self.spreads_array(&without_foreign_calls(e)))) {
            return self.statement_expr(e, ty);
        }
        match self.bound_expr(e, hint) {
            // A function the short path does not evaluate (a stored function, or one only the
            // analytical side has): each such call runs as a statement of its own, its value
            // in a hidden variable, and the rest of the expression on the short path; where a
            // call sits under CASE, AND, OR, COALESCE or NULLIF (which may not evaluate it)
            // the whole expression runs as a statement.
            Err(err) if err.state == SqlState::FeatureNotSupported && calls_function(e) => {
                if foreign_calls(e).is_some_and(|conditional| !conditional) {
                    let mut hoisted = e.clone();
                    let mut hoister = Hoister { c: self, error: None };
                    let _ = VisitMut::visit(&mut hoisted, &mut hoister);
                    if let Some(err) = hoister.error {
                        return Err(err);
                    }
                    return self.bound_expr(&hoisted, hint);
                }
                self.statement_expr(e, ty)
            }
            bound => bound,
        }
    }

    /// Compiles a call as the statement `SELECT call` into a hidden variable (typed by what the
    /// session learns of the statement's column, see [`compile_with`]); the identifier that
    /// names the variable.
    fn hoist_call(&mut self, call: &ast::Expr) -> Result<ast::Expr> {
        let text = format!("SELECT {call}");
        let statement = crate::sql::parse::parse(&text)?.pop().ok_or_else(|| Error::internal("an empty statement"))?;
        let mut unit = self.sql_unit(&statement, &text, Vec::new(), false)?;
        unit.expression = true;
        let ty = self.described.columns.get(&unit.key()).and_then(|c| c.first()).map(|(_, t)| *t);
        let name = format!(" call {}", self.slots.len());
        let slot = self.declare(&name, PlType::Scalar(ty.unwrap_or(DataType::Text)));
        if ty.is_none() {
            self.pending.insert(slot);
            self.unresolve(|| Error::internal(format!("the type of {call} is not known yet")));
        }
        unit.into = vec![slot];
        self.sql.push(unit);
        self.code.push(Instr::Sql(self.sql.len() - 1));
        Ok(ast::Expr::Identifier(ast::Ident::with_quote('"', name)))
    }

    /// Compiles `e` as the statement `SELECT e` into a hidden variable of type `ty`, placed
    /// right before the instruction that uses it, which reads that variable.
    fn statement_expr(&mut self, e: &ast::Expr, ty: DataType) -> Result<ExprUnit> {
        let slot = self.slots.len();
        self.slots.push(Slot { name: String::new(), ty: PlType::Scalar(ty) });
        let text = format!("SELECT {e}");
        let mut parsed = crate::sql::parse::parse("SELECT NULL")?;
        let Some(mut statement) = parsed.pop() else { return Err(Error::internal("SELECT NULL did not parse")) };
        if let ast::Statement::Query(q) = &mut statement
            && let ast::SetExpr::Select(select) = q.body.as_mut()
        {
            select.projection = vec![ast::SelectItem::UnnamedExpr(e.clone())];
        }
        let mut unit = self.sql_unit(&statement, &text, vec![slot], false)?;
        unit.expression = true;
        self.sql.push(unit);
        self.code.push(Instr::Sql(self.sql.len() - 1));
        Ok(ExprUnit { expr: Expr::Param { index: 0, ty }, params: vec![ParamSource::Var(slot)], ty, on_slots: Some(Expr::Param { index: slot, ty }) })
    }

    /// [`expr`](Self::expr) of an expression without a subquery.
    fn bound_expr(&self, e: &ast::Expr, hint: Option<DataType>) -> Result<ExprUnit> {
        let mut e = e.clone();
        let (params, unresolved) = self.rewrite(&mut e)?;
        if unresolved {
            return Ok(unresolved_expr());
        }
        if let Some(ParamSource::Quantified { array, .. } | ParamSource::WholeArray { array }) = params.iter().find(|p| p.spreads()) {
            return Err(Error::unsupported(format!("the array \"{}\" as a whole here", self.slots[*array].name)));
        }
        let mut types: Vec<Option<DataType>> = params.iter().map(|p| Some(self.source_type(p))).collect();
        let mut binder = Binder::new(None, &mut types);
        let expr = binder.bind_expr(&e, hint).map_err(|err| {
            if err.state == SqlState::UndefinedColumn {
                Error::syntax(format!("{} (in expression \"{e}\")", err.message))
            } else {
                err
            }
        })?;
        let ty = expr.ty();
        let slots: Option<Vec<usize>> = params
            .iter()
            .map(|p| match p {
                ParamSource::Var(slot) if matches!(self.slots[*slot].ty, PlType::Scalar(_)) => Some(*slot),
                _ => None,
            })
            .collect();
        let on_slots = slots.map(|slots| {
            let mut e = expr.clone();
            e.renumber_params(&|n| slots[n]);
            e
        });
        Ok(ExprUnit { expr, params, ty, on_slots })
    }

    fn sql_unit(&self, statement: &ast::Statement, text: &str, into: Vec<usize>, strict: bool) -> Result<SqlUnit> {
        let mut statement = statement.clone();
        let (params, unresolved) = self.rewrite(&mut statement)?;
        let param_types = params.iter().map(|p| self.source_type(p)).collect();
        Ok(SqlUnit { statement, text: text.to_string(), params, param_types, into, strict, expression: false, resolved: !unresolved, describe_only: false })
    }

    fn source_type(&self, p: &ParamSource) -> DataType {
        match p {
            ParamSource::Var(slot) => match self.slots[*slot].ty {
                PlType::Scalar(t) | PlType::Array(t) => t,
            },
            ParamSource::Element { array, .. } => match self.slots[*array].ty {
                PlType::Scalar(t) | PlType::Array(t) => t,
            },
            ParamSource::Length { .. } => DataType::Int32,
            ParamSource::Row(_) => DataType::Text,
            ParamSource::ArrayIsNull { .. } | ParamSource::Quantified { .. } | ParamSource::WholeArray { .. } => DataType::Bool,
        }
    }
}

/// Whether an expression contains a subquery (which the short path's binder does not bind).
fn has_subquery(e: &ast::Expr) -> bool {
    ast::visit_expressions(e, |e| match e {
        ast::Expr::Subquery(_) | ast::Expr::Exists { .. } | ast::Expr::InSubquery { .. } => std::ops::ControlFlow::Break(()),
        _ => std::ops::ControlFlow::Continue(()),
    })
    .is_break()
}

/// Hoists the calls the short path does not know, innermost first ([`Compiler::hoist_call`]).
struct Hoister<'c, 'a> {
    c: &'c mut Compiler<'a>,
    error: Option<Error>,
}

impl VisitorMut for Hoister<'_, '_> {
    type Break = ();

    fn post_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
        if foreign_call(e) {
            match self.c.hoist_call(e) {
                Ok(name) => *e = name,
                Err(err) => {
                    self.error = Some(err);
                    return ControlFlow::Break(());
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// `e` with its calls of functions the short path does not evaluate replaced by NULL.
fn without_foreign_calls(e: &ast::Expr) -> ast::Expr {
    let mut e = e.clone();
    let _ = ast::visit_expressions_mut(&mut e, |e| {
        if foreign_call(e) {
            *e = ast::Expr::Value(ast::Value::Null.with_empty_span());
        }
        ControlFlow::<()>::Continue(())
    });
    e
}

/// A call of a function the short path does not evaluate (and not an aggregate).
fn foreign_call(e: &ast::Expr) -> bool {
    let ast::Expr::Function(f) = e else { return false };
    let name = f.name.0.last().and_then(|p| p.as_ident()).map(fold_ident).unwrap_or_default();
    !crate::sql::names::is_aggregate(&name) && f.over.is_none() && !Binder::knows_function(&name)
}

/// Whether `e` calls functions the short path does not evaluate (`None` if not), and whether
/// one of those calls sits where it may not be evaluated (under CASE, AND, OR, COALESCE or
/// NULLIF).
fn foreign_calls(e: &ast::Expr) -> Option<bool> {
    fn conditional(e: &ast::Expr) -> bool {
        match e {
            ast::Expr::Case { .. } | ast::Expr::BinaryOp { op: ast::BinaryOperator::And | ast::BinaryOperator::Or, .. } => true,
            ast::Expr::Function(f) => f.name.0.last().and_then(|p| p.as_ident()).map(fold_ident).is_some_and(|n| n == "coalesce" || n == "nullif"),
            _ => false,
        }
    }
    struct Finder {
        depth: usize,
        found: Option<bool>,
    }
    impl ast::Visitor for Finder {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &ast::Expr) -> ControlFlow<()> {
            if foreign_call(e) {
                self.found = Some(self.found.unwrap_or(false) || self.depth > 0);
            }
            self.depth += usize::from(conditional(e));
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, e: &ast::Expr) -> ControlFlow<()> {
            self.depth -= usize::from(conditional(e));
            ControlFlow::Continue(())
        }
    }
    let mut finder = Finder { depth: 0, found: None };
    let _ = ast::Visit::visit(e, &mut finder);
    finder.found
}

/// Whether an expression calls a function.
fn calls_function(e: &ast::Expr) -> bool {
    ast::visit_expressions(e, |e| if matches!(e, ast::Expr::Function(_)) { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }).is_break()
}

/// The variable an expression is, if it is a bare variable.
fn bare_var(unit: &ExprUnit) -> Option<usize> {
    match (&unit.expr, unit.params.as_slice()) {
        (Expr::Param { index: 0, .. }, [ParamSource::Var(slot)]) => Some(*slot),
        _ => None,
    }
}

/// `coalesce(e, '')` of a text expression.
fn empty_if_null(e: ExprUnit) -> ExprUnit {
    let wrap = |x: Expr| Expr::Func { func: crate::sql::expr::Func::Coalesce, args: vec![x, Expr::literal(Value::Text(String::new()), DataType::Text)], ty: DataType::Text };
    ExprUnit { expr: wrap(e.expr), params: e.params, ty: DataType::Text, on_slots: e.on_slots.map(wrap) }
}

/// A text constant as an expression.
fn text_expr(text: &str) -> ExprUnit {
    let e = Expr::literal(Value::Text(text.to_string()), DataType::Text);
    ExprUnit { expr: e.clone(), params: Vec::new(), ty: DataType::Text, on_slots: Some(e) }
}

/// What stands for an expression that reads something of unknown type (never evaluated: the
/// routine is compiled again before it runs).
fn unresolved_expr() -> ExprUnit {
    ExprUnit { expr: Expr::Literal { value: Value::Null, ty: DataType::Text }, params: Vec::new(), ty: DataType::Text, on_slots: None }
}

/// 55000, as PostgreSQL reports reading a field of a record no statement assigned.
fn not_assigned(name: &str) -> Error {
    Error::new(SqlState::custom("55000").unwrap_or(SqlState::FeatureNotSupported), format!("record \"{name}\" is not assigned yet"))
        .with_detail("The tuple structure of a not-yet-assigned record is indeterminate.")
}

fn hint(ty: PlType) -> Option<DataType> {
    match ty {
        PlType::Scalar(t) => Some(t),
        PlType::Array(_) => None,
    }
}

/// Rewrites variable references of one expression or statement into `$n` parameters.
struct Rewriter<'a, 'b> {
    c: &'a Compiler<'b>,
    params: Vec<ParamSource>,
    /// Sources already given a parameter: a variable, or an element `array[var]`, at two places
    /// of a statement is one parameter, evaluated once.
    shared: HashMap<SharedSource, usize>,
    error: Option<Error>,
    /// Something of unknown type was read (and replaced by NULL).
    unresolved: bool,
}

/// A parameter source that always gives the same value within one statement's evaluation.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum SharedSource {
    Var(usize),
    /// (array slot, index variable slot).
    Element(usize, usize),
}

impl<'a> Rewriter<'a, '_> {
    fn placeholder(&mut self, source: ParamSource) -> ast::Expr {
        let key = match &source {
            ParamSource::Var(slot) => Some(SharedSource::Var(*slot)),
            ParamSource::Element { array, index } => bare_var(index).map(|i| SharedSource::Element(*array, i)),
            ParamSource::Length { .. } | ParamSource::Row(_) | ParamSource::ArrayIsNull { .. } | ParamSource::Quantified { .. } | ParamSource::WholeArray { .. } => None,
        };
        let n = match key.and_then(|k| self.shared.get(&k)) {
            Some(n) => *n,
            None => {
                self.params.push(source);
                if let Some(k) = key {
                    self.shared.insert(k, self.params.len());
                }
                self.params.len()
            }
        };
        ast::Expr::Value(ast::Value::Placeholder(format!("${n}")).with_empty_span())
    }

    fn array_var(&self, e: &ast::Expr) -> Option<usize> {
        self.c.array_slot(e)
    }

    /// The record an expression names, if it names one.
    fn record(&self, e: &ast::Expr) -> Option<&'a RecordVar> {
        let ast::Expr::Identifier(id) = e else { return None };
        let c = self.c;
        c.lookup(&fold_ident(id)).and_then(|slot| c.record_of(slot))
    }

    fn rewrite(&mut self, expr: &mut ast::Expr) -> Result<()> {
        match expr {
            // A record IS [NOT] NULL: whether all its fields are (not) NULL, as for a row.
            ast::Expr::IsNull(inner) | ast::Expr::IsNotNull(inner) if self.record(inner).is_some() => {
                let record = self.record(inner).expect("checked");
                let null = matches!(expr, ast::Expr::IsNull(_));
                let Some(fields) = &record.fields else {
                    let name = record.name.clone();
                    self.c.unresolve(|| not_assigned(&name));
                    self.unresolved = true;
                    *expr = ast::Expr::Value(ast::Value::Null.with_empty_span());
                    return Ok(());
                };
                // Fields named as `record.field`, which the visit rewrites next.
                let tests = fields.iter().map(|(name, _)| {
                    let field = Box::new(ast::Expr::CompoundIdentifier(vec![ast::Ident::with_quote('"', &record.name), ast::Ident::with_quote('"', name)]));
                    if null { ast::Expr::IsNull(field) } else { ast::Expr::IsNotNull(field) }
                });
                *expr = tests
                    .reduce(|a, b| ast::Expr::BinaryOp { left: Box::new(a), op: ast::BinaryOperator::And, right: Box::new(b) })
                    .unwrap_or(ast::Expr::Value(ast::Value::Boolean(true).with_empty_span()));
            }
            // An array IS [NOT] NULL: whether the variable holds no array at all. (One
            // placeholder in the node's place: the visit goes on into what replaced the node,
            // where a `$n` would be read as the routine's n-th parameter.)
            ast::Expr::IsNull(inner) | ast::Expr::IsNotNull(inner) if self.array_var(inner).is_some() => {
                let array = self.array_var(inner).expect("checked");
                let negated = matches!(expr, ast::Expr::IsNotNull(_));
                *expr = self.placeholder(ParamSource::ArrayIsNull { array, negated });
            }
            // A comparison with an array variable's elements: one placeholder for all of it,
            // whose children the visit does not reach, so `left` is rewritten here first.
            ast::Expr::AnyOp { left, compare_op, right, .. } | ast::Expr::AllOp { left, compare_op, right } if self.c.quantified_array(right).is_some() => {
                let array = self.c.quantified_array(right).expect("checked");
                let (mut left, op) = (left.clone(), compare_op.clone());
                let all = matches!(expr, ast::Expr::AllOp { .. });
                let _ = VisitMut::visit(&mut *left, &mut *self);
                if let Some(e) = self.error.take() {
                    return Err(e);
                }
                *expr = self.placeholder(ParamSource::Quantified { array, left, op, all });
            }
            ast::Expr::CompoundFieldAccess { root, access_chain } if self.array_var(root).is_some() => {
                let array = self.array_var(root).expect("checked");
                let [ast::AccessExpr::Subscript(ast::Subscript::Index { index })] = access_chain.as_slice() else {
                    return Err(Error::unsupported("array slices and multi-dimensional subscripts"));
                };
                let index = Box::new(self.c.bound_expr(index, Some(DataType::Int32))?);
                *expr = self.placeholder(ParamSource::Element { array, index });
            }
            ast::Expr::Function(f) => {
                let name = f.name.to_string().to_lowercase();
                if name != "array_length" && name != "cardinality" {
                    return Ok(());
                }
                let Some(args) = unnamed_args(f) else { return Ok(()) };
                let Some(array) = args.first().and_then(|a| self.array_var(a)) else { return Ok(()) };
                let cardinality = name == "cardinality";
                if !cardinality && (args.len() != 2 || args[1].to_string() != "1") {
                    return Err(Error::unsupported("array_length of a dimension other than 1"));
                }
                *expr = self.placeholder(ParamSource::Length { array, cardinality });
            }
            ast::Expr::CompoundIdentifier(parts) if parts.len() == 2 && self.c.lookup(&fold_ident(&parts[0])).and_then(|s| self.c.record_of(s)).is_some() => {
                let record = self.c.lookup(&fold_ident(&parts[0])).and_then(|s| self.c.record_of(s)).expect("checked");
                let field = fold_ident(&parts[1]);
                match record.fields.as_ref().and_then(|f| f.iter().find(|(n, _)| *n == field)) {
                    Some((_, slot)) => *expr = self.placeholder(ParamSource::Var(*slot)),
                    None => {
                        let name = record.name.clone();
                        match &record.fields {
                            Some(_) => self.c.unresolve(|| Error::new(SqlState::UndefinedColumn, format!("record \"{name}\" has no field \"{field}\""))),
                            None => self.c.unresolve(|| not_assigned(&name)),
                        }
                        self.unresolved = true;
                        *expr = ast::Expr::Value(ast::Value::Null.with_empty_span());
                    }
                }
            }
            ast::Expr::Identifier(id) => {
                let name = fold_ident(id);
                if let Some(slot) = self.c.lookup(&name) {
                    if let Some(record) = self.c.record_of(slot) {
                        match &record.fields {
                            Some(fields) => {
                                let fields = fields.iter().map(|(_, s)| (*s, hint(self.c.slots[*s].ty).unwrap_or(DataType::Text))).collect();
                                *expr = self.placeholder(ParamSource::Row(fields));
                            }
                            None => {
                                self.c.unresolve(|| not_assigned(&name));
                                self.unresolved = true;
                                *expr = ast::Expr::Value(ast::Value::Null.with_empty_span());
                            }
                        }
                        return Ok(());
                    }
                    if self.c.pending.contains(&slot) {
                        self.unresolved = true;
                        *expr = ast::Expr::Value(ast::Value::Null.with_empty_span());
                        return Ok(());
                    }
                    *expr = self.placeholder(if matches!(self.c.slots[slot].ty, PlType::Array(_)) { ParamSource::WholeArray { array: slot } } else { ParamSource::Var(slot) });
                }
            }
            ast::Expr::CompoundIdentifier(parts) if parts.len() == 2 && fold_ident(&parts[0]) == self.c.header.name => {
                // `routine_name.parameter`, PostgreSQL's way to name a parameter a column hides.
                let name = fold_ident(&parts[1]);
                let slot = self.c.lookup(&name).ok_or_else(|| Error::syntax(format!("\"{}.{name}\" is not a known variable", self.c.header.name)))?;
                *expr = self.placeholder(if matches!(self.c.slots[slot].ty, PlType::Array(_)) { ParamSource::WholeArray { array: slot } } else { ParamSource::Var(slot) });
            }
            ast::Expr::Value(v) => {
                if let ast::Value::Placeholder(p) = &v.value {
                    // `$n` in a body names the n-th parameter.
                    let n: usize = p.trim_start_matches('$').parse().map_err(|_| Error::syntax(format!("bad parameter {p}")))?;
                    if n == 0 || n > self.c.header.params.len() {
                        return Err(Error::new(SqlState::UndefinedParameter, format!("there is no parameter ${n}")));
                    }
                    let slot = n - 1;
                    *expr = self.placeholder(if matches!(self.c.slots[slot].ty, PlType::Array(_)) { ParamSource::WholeArray { array: slot } } else { ParamSource::Var(slot) });
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl VisitorMut for Rewriter<'_, '_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut ast::Expr) -> ControlFlow<()> {
        match self.rewrite(expr) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

/// How a routine's statements reach the partitions (HyPer §4.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Classification {
    /// Every statement on a partitioned table fixes its partition key with the same
    /// parameter, and no statement writes a replicated table: with that parameter's value
    /// known, the whole call runs on one partition.
    Constrained { parameter: Option<String> },
    /// Some statement may touch several partitions; the reason names the first one.
    Crossing { reason: String },
}

impl Classification {
    pub fn describe(&self, routine: &Routine) -> String {
        match self {
            Classification::Constrained { parameter: Some(p) } => {
                format!("{} \"{}\" is partition-constrained on parameter \"{p}\"", routine.kind(), routine.name)
            }
            Classification::Constrained { parameter: None } => {
                format!("{} \"{}\" is partition-constrained (it reads replicated tables only)", routine.kind(), routine.name)
            }
            Classification::Crossing { reason } => format!("{} \"{}\" is partition-crossing: {reason}", routine.kind(), routine.name),
        }
    }
}

/// Classifies `routine` against the tables of `catalog`.
pub fn classify(routine: &Routine, catalog: &Catalog) -> Classification {
    if routine.code.iter().any(Instr::is_dynamic) {
        return Classification::Crossing { reason: "it runs dynamic SQL (EXECUTE)".to_string() };
    }
    let mut key: Option<usize> = None;
    for unit in routine.sql.iter().filter(|u| !u.describe_only) {
        match unit_partitioning(unit, catalog, routine) {
            Ok(None) => {}
            Ok(Some(slot)) => match key {
                None => key = Some(slot),
                Some(k) if k == slot => {}
                Some(_) => return Classification::Crossing { reason: format!("\"{}\" uses another partition key value", unit.text) },
            },
            Err(reason) => return Classification::Crossing { reason },
        }
    }
    Classification::Constrained { parameter: key.map(|k| routine.slots[k].name.clone()) }
}

/// The parameter whose value names the partition a call of `routine` runs on as one job
/// (HyPer §4.3): the one that fixes the partition key of the most of its statements. A
/// partition-crossing routine has one too when most of its statements stay on one partition
/// (TPC-C's New-Order and Payment reach another warehouse's rows now and then): each
/// statement is checked where it runs, and a call that leaves the partition runs again the
/// ordinary way. `None` when no statement fixes a partition key with a parameter.
pub fn home_parameter(routine: &Routine, catalog: &Catalog) -> Option<usize> {
    let mut counts = vec![0usize; routine.params.len()];
    for unit in routine.sql.iter().filter(|u| !u.describe_only) {
        if let Ok(Some(slot)) = unit_partitioning(unit, catalog, routine)
            && let Some(c) = counts.get_mut(slot)
        {
            *c += 1;
        }
    }
    // The first of equally many: `max_by_key` would take the last.
    let best = counts.iter().copied().max().filter(|&n| n > 0)?;
    counts.iter().position(|&n| n == best)
}

/// The parameter slot that fixes the statement's partition, `None` if it touches only
/// replicated tables for reading, or why it crosses partitions.
fn unit_partitioning(unit: &SqlUnit, catalog: &Catalog, routine: &Routine) -> std::result::Result<Option<usize>, String> {
    let crossing = |why: &str| Err(format!("\"{}\" {why}", unit.text));
    let param_slot = |e: &ast::Expr| -> Option<usize> {
        let ast::Expr::Value(v) = e else { return None };
        let ast::Value::Placeholder(p) = &v.value else { return None };
        let n: usize = p.trim_start_matches('$').parse().ok()?;
        match unit.params.get(n.checked_sub(1)?)? {
            ParamSource::Var(slot) if *slot < routine.params.len() => Some(*slot),
            _ => None,
        }
    };
    let (table, filter, write): (String, Option<&ast::Expr>, bool) = match &unit.statement {
        ast::Statement::Insert(i) => {
            let name = match &i.table {
                ast::TableObject::TableName(n) => n.to_string().to_lowercase(),
                _ => return crossing("inserts into a table function"),
            };
            let Some(def) = catalog.table(&name) else { return crossing("names an unknown table") };
            let Some(k) = def.partition_key else { return crossing("writes a replicated table (every partition)") };
            let position = if i.columns.is_empty() {
                Some(k)
            } else {
                i.columns.iter().position(|c| c.to_string().trim_matches('"').to_lowercase() == def.columns[k].name)
            };
            let rows = match i.source.as_ref().map(|s| s.body.as_ref()) {
                Some(ast::SetExpr::Values(v)) => &v.rows,
                _ => return crossing("inserts the result of a query"),
            };
            let slots: Vec<Option<usize>> = rows.iter().map(|r| position.and_then(|p| r.get(p)).and_then(param_slot)).collect();
            return match slots.as_slice() {
                [Some(s)] => Ok(Some(*s)),
                _ => crossing("does not fix the partition key with a parameter"),
            };
        }
        ast::Statement::Update(u) => match &u.table.relation {
            ast::TableFactor::Table { name, .. } => (name.to_string().to_lowercase(), u.selection.as_ref(), true),
            _ => return crossing("updates a derived table"),
        },
        ast::Statement::Delete(d) => {
            let tables = match &d.from {
                ast::FromTable::WithFromKeyword(t) | ast::FromTable::WithoutKeyword(t) => t,
            };
            match tables.first().map(|t| &t.relation) {
                Some(ast::TableFactor::Table { name, .. }) if tables.len() == 1 => (name.to_string().to_lowercase(), d.selection.as_ref(), true),
                _ => return crossing("deletes from several tables"),
            }
        }
        ast::Statement::Query(q) if q.with.is_some() => return crossing("has a WITH clause (the query runs on the analytical side)"),
        ast::Statement::Query(q) => match q.body.as_ref() {
            ast::SetExpr::Select(s) if s.from.is_empty() => return Ok(None),
            ast::SetExpr::Select(s) if s.from.len() == 1 && s.from[0].joins.is_empty() => match &s.from[0].relation {
                ast::TableFactor::Table { name, .. } => (name.to_string().to_lowercase(), s.selection.as_ref(), false),
                _ => return crossing("reads a derived table"),
            },
            _ => return crossing("is a join or a set operation"),
        },
        _ => return crossing("is not a single-table statement"),
    };
    if catalog.view(&table).is_some() {
        return crossing("reads a view (its query runs on the analytical side)");
    }
    let Some(def) = catalog.table(&table) else { return crossing("names an unknown table") };
    let Some(k) = def.partition_key else {
        return if write { crossing("writes a replicated table (every partition)") } else { Ok(None) };
    };
    let key = &def.columns[k].name;
    let mut found = None;
    if let Some(f) = filter {
        conjuncts(f, &mut |e| {
            if let ast::Expr::BinaryOp { left, op: ast::BinaryOperator::Eq, right } = e {
                let column = |x: &ast::Expr| match x {
                    ast::Expr::Identifier(i) => fold_ident(i) == *key,
                    ast::Expr::CompoundIdentifier(parts) => parts.last().is_some_and(|i| fold_ident(i) == *key),
                    _ => false,
                };
                if column(left) {
                    found = found.or(param_slot(right));
                } else if column(right) {
                    found = found.or(param_slot(left));
                }
            }
        });
    }
    match found {
        Some(slot) => Ok(Some(slot)),
        None => crossing("does not fix the partition key with a parameter"),
    }
}

fn conjuncts(e: &ast::Expr, f: &mut dyn FnMut(&ast::Expr)) {
    match e {
        ast::Expr::BinaryOp { left, op: ast::BinaryOperator::And, right } => {
            conjuncts(left, f);
            conjuncts(right, f);
        }
        ast::Expr::Nested(inner) => conjuncts(inner, f),
        other => f(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_resolve_one_dependency_per_compile() {
        let source = "CREATE FUNCTION f() RETURNS INT LANGUAGE plpgsql AS $$
             DECLARE o record; l record; n INT := 0;
             BEGIN
               FOR o IN SELECT id, total FROM orders LOOP
                 FOR l IN SELECT qty FROM lines WHERE order_id = o.id LOOP n := n + l.qty + o.total; END LOOP;
               END LOOP;
               RETURN n;
             END $$";
        // Without columns: only the outer query can be prepared.
        let first = compile(source).unwrap();
        assert!(first.unresolved.as_ref().is_some_and(|e| e.message.contains("record \"o\" is not assigned yet")), "{:?}", first.unresolved);
        assert_eq!(first.sql.iter().filter(|u| u.resolved).count(), 1);
        let outer = first.sql[0].key();
        assert_eq!(first.record_assigners[0], vec![outer.clone()]);
        // Knowing the outer query's columns, the inner one gets `o.id` as an INT parameter.
        let mut described = Described { columns: HashMap::new(), assigners: first.record_assigners.clone() };
        described.columns.insert(outer.clone(), vec![("id".into(), DataType::Int32), ("total".into(), DataType::Int64)]);
        let second = compile_with(source, &described).unwrap();
        let inner = second.sql.iter().find(|u| u.text.contains("lines")).unwrap();
        assert!(inner.resolved);
        assert_eq!(inner.param_types, vec![DataType::Int32]);
        assert!(second.unresolved.is_some(), "l's fields are not known yet");
        // Then everything.
        described.assigners = second.record_assigners.clone();
        described.columns.insert(inner.key(), vec![("qty".into(), DataType::Int32)]);
        let third = compile_with(source, &described).unwrap();
        assert!(third.unresolved.is_none(), "{:?}", third.unresolved);
        assert!(third.sql.iter().all(|u| u.resolved));
        // A field the row does not have.
        let missing = compile_with(&source.replace("l.qty", "l.price"), &described).unwrap();
        assert!(missing.unresolved.is_some_and(|e| e.state == SqlState::UndefinedColumn));
    }

    #[test]
    fn loops_and_conditions_compile_to_jumps() {
        let r = compile(
            "CREATE PROCEDURE p(n INT, xs INT[]) LANGUAGE plpgsql AS $$
             DECLARE s INT := 0; x INT;
             BEGIN
               FOR i IN 1..n LOOP s := s + i; EXIT WHEN s > 100; END LOOP;
               FOREACH x IN ARRAY xs LOOP CONTINUE WHEN x IS NULL; s := s + x; END LOOP;
               IF s > 10 THEN s := 10; ELSIF s < 0 THEN s := 0; ELSE NULL; END IF;
               SELECT count(*) INTO s FROM t WHERE a = xs[2] AND b = array_length(xs, 1);
               IF NOT FOUND THEN RAISE EXCEPTION 'none for %', n USING ERRCODE = 'P0002'; END IF;
             END $$",
        )
        .unwrap();
        assert_eq!(r.params.len(), 2);
        assert_eq!(r.sql.len(), 1);
        let unit = &r.sql[0];
        assert!(unit.text.to_lowercase().starts_with("select count(*)"), "{}", unit.text);
        assert!(matches!(unit.params[0], ParamSource::Element { array: 1, .. }));
        assert!(matches!(unit.params[1], ParamSource::Length { array: 1, cardinality: false }));
        assert_eq!(unit.into.len(), 1);
        for i in &r.code {
            if let Instr::Jump(t) | Instr::JumpIf { target: t, .. } | Instr::JumpIfNot { target: t, .. } = i {
                assert!(*t <= r.code.len(), "unpatched jump");
            }
        }
    }

    #[test]
    fn a_range_loop_prefetches_the_lookups_its_start_determines() {
        let prefetched = |body: &str| {
            let r = compile(&format!(
                "CREATE PROCEDURE p(w INT, xs INT[], ys INT[]) LANGUAGE plpgsql AS $$
                 DECLARE s INT; o INT := 0;
                 BEGIN {body} END $$"
            ))
            .unwrap();
            let texts: Vec<Vec<String>> = r
                .code
                .iter()
                .filter_map(|i| match i {
                    Instr::RangeInit { bounds, .. } => Some(bounds.prefetch.iter().map(|u| r.sql[u.unit].text.to_lowercase()).collect()),
                    _ => None,
                })
                .collect();
            texts
        };
        // By the loop variable, elements indexed by it and unassigned variables: both; by a
        // variable the body assigns, or by nothing that varies: neither of those.
        let chosen = prefetched(
            "FOR i IN 1..array_length(xs, 1) LOOP
               SELECT a INTO s FROM t WHERE k = xs[i];
               UPDATE u SET n = n + 1 WHERE c = w AND k = ys[i] AND j = i;
               SELECT a INTO o FROM t WHERE k = s;
               SELECT a INTO s FROM t WHERE k = w;
               INSERT INTO v VALUES (xs[i]);
               o := o + 1;
             END LOOP;",
        );
        assert_eq!(chosen.len(), 1);
        assert_eq!(chosen[0].len(), 3, "{chosen:?}");
        assert!(chosen[0][0].starts_with("select a from t where k = xs[i]"), "{chosen:?}");
        assert!(chosen[0][1].starts_with("update u"), "{chosen:?}");
        assert!(chosen[0][2].starts_with("insert into v"), "the interpreter leaves out what has no lookup: {chosen:?}");
        // A statement with a parameter the body assigns is listed for the parameters the start
        // determines (an order line's key, by `i`, but not its amount): a key among them is
        // prefetched ([`LoopLookup::covers`]).
        let r = compile(
            "CREATE PROCEDURE p(w INT, xs INT[]) LANGUAGE plpgsql AS $$
             DECLARE s INT; o INT := 7;
             BEGIN
               FOR i IN 1..2 LOOP
                 SELECT a INTO s FROM t WHERE k = xs[i];
                 INSERT INTO v VALUES (w, o, i, s);
               END LOOP;
             END $$",
        )
        .unwrap();
        let lookups = r.code.iter().find_map(|i| if let Instr::RangeInit { bounds, .. } = i { Some(bounds.prefetch.clone()) } else { None }).unwrap();
        assert_eq!(lookups.len(), 2, "{lookups:?}");
        let insert = lookups[1];
        assert!(r.sql[insert.unit].text.to_lowercase().starts_with("insert into v"), "{lookups:?}");
        assert_eq!((insert.known, insert.varies), (0b0111, 0b0100), "w, o and i are known at the start, s is not; i varies");
        assert!(insert.covers(0b0111) && insert.covers(0b0100), "a key of w, o and i");
        assert!(!insert.covers(0b1111), "a key with s is not known at the start");
        assert!(!insert.covers(0b0011), "a key of w and o is the same in every iteration");
        // An element of an array the body assigns (one element, or the whole array) is not
        // known at the start: its lookup is not prefetched.
        for assign in ["xs[i] := i;", "xs := xs || i;"] {
            let chosen = prefetched(&format!("FOR i IN 1..3 LOOP SELECT a INTO s FROM t WHERE k = xs[i]; {assign} END LOOP;"));
            assert_eq!(chosen, vec![Vec::<String>::new()], "{assign}");
        }
        assert_eq!(prefetched("FOR i IN 1..3 LOOP SELECT a INTO s FROM t WHERE k = xs[i]; ys[i] := i; END LOOP;").concat().len(), 1);
        // A loop that assigns its variable, or has an EXCEPTION block, prefetches nothing; an
        // inner loop's statements count for the outer loop when its parameters allow.
        assert_eq!(prefetched("FOR i IN 1..3 LOOP SELECT a INTO s FROM t WHERE k = xs[i]; i := i + 1; END LOOP;"), vec![Vec::<String>::new()]);
        assert_eq!(
            prefetched("FOR i IN 1..3 LOOP BEGIN SELECT a INTO s FROM t WHERE k = xs[i]; EXCEPTION WHEN OTHERS THEN NULL; END; END LOOP;"),
            vec![Vec::<String>::new()]
        );
        let nested = compile(
            "CREATE PROCEDURE p(xs INT[]) LANGUAGE plpgsql AS $$
             DECLARE s INT;
             BEGIN FOR i IN 1..3 LOOP FOR j IN 1..2 LOOP SELECT a INTO s FROM t WHERE k = xs[i] AND m = j; END LOOP; END LOOP; END $$",
        )
        .unwrap();
        let loops: Vec<Vec<LoopLookup>> =
            nested.code.iter().filter_map(|i| if let Instr::RangeInit { bounds, .. } = i { Some(bounds.prefetch.clone()) } else { None }).collect();
        assert_eq!(loops.len(), 2);
        // The outer loop knows xs[i] at its start but not j, which its body (the inner loop)
        // assigns: the key of both is not covered; the inner loop knows both, and j varies.
        assert_eq!(loops[0].iter().map(|u| (u.known, u.varies)).collect::<Vec<_>>(), vec![(0b01, 0b01)], "{loops:?}");
        assert!(!loops[0][0].covers(0b11));
        assert_eq!(loops[1].iter().map(|u| (u.known, u.varies)).collect::<Vec<_>>(), vec![(0b11, 0b10)], "{loops:?}");
        assert!(loops[1][0].covers(0b11));
    }

    #[test]
    fn an_element_used_twice_in_a_statement_is_one_parameter() {
        let r = compile(
            "CREATE PROCEDURE p(xs INT[], ys INT[]) LANGUAGE plpgsql AS $$
             DECLARE s INT; j INT := 1;
             BEGIN
               FOR i IN 1..2 LOOP
                 SELECT count(*) INTO s FROM t WHERE a = xs[i] AND b = xs[i] + ys[i] AND c = xs[j] AND d = xs[i + 1] AND e = xs[i + 1];
               END LOOP;
             END $$",
        )
        .unwrap();
        let unit = &r.sql[0];
        // xs[i] once, ys[i], xs[j]; an element at a computed index is evaluated where it is used.
        let elements = unit.params.iter().filter(|p| matches!(p, ParamSource::Element { .. })).count();
        assert_eq!(elements, 5, "{:?}", unit.params);
        assert_eq!(unit.statement.to_string().matches("$1").count(), 2, "{}", unit.statement);
    }

    #[test]
    fn body_errors_are_syntax_errors() {
        let e = compile("CREATE PROCEDURE p() LANGUAGE plpgsql AS $$ BEGIN x := ; END $$").unwrap_err();
        assert_eq!(e.state, SqlState::SyntaxError);
        let e = compile("CREATE PROCEDURE p() LANGUAGE plpgsql AS $$ BEGIN IF true THEN NULL; END $$").unwrap_err();
        assert_eq!(e.state, SqlState::SyntaxError);
        let e = compile("CREATE PROCEDURE p() LANGUAGE plpgsql AS $$ BEGIN y := 1; END $$").unwrap_err();
        assert_eq!(e.state, SqlState::SyntaxError);
        let e = compile("CREATE PROCEDURE p() LANGUAGE plpgsql AS $$ DECLARE c CONSTANT INT := 1; BEGIN c := 2; END $$").unwrap_err();
        assert_eq!(e.state.code(), "22005");
        let e = compile("CREATE PROCEDURE p() LANGUAGE plpgsql AS $$ BEGIN EXIT; END $$").unwrap_err();
        assert_eq!(e.state, SqlState::SyntaxError);
    }
}
