//! CALL and `SELECT f(…)`: resolving the routine, evaluating arguments, the call's
//! transaction, and the PL/pgSQL interpreter loop.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use freshet_core::engine::{JobOutcome, JobStatements};
use futures::FutureExt;
use hashbrown::HashMap;
use smallvec::SmallVec;

use freshet_core::catalog::{Catalog, ProcedureDef};
use freshet_core::sql::bind::Binder;
use freshet_core::sql::exec::RecordRead;
use freshet_core::sql::expr::{EvalContext, Expr, NoRow};
use freshet_core::sql::names::fold_ident;
use freshet_core::sql::plpgsql::parser::RaiseLevel;
use freshet_core::sql::plpgsql::compile::{ArrayPart, ArrayValue, LoopLookup, MAX_PREFETCHED_ITERATIONS};
use freshet_core::sql::parse::{FetchDirection, FETCH_ALL};
use freshet_core::sql::plpgsql::overload::{ArgType, Resolution};
use freshet_core::sql::plpgsql::{self, ExprUnit, FetchStep, Instr, ParamSource, PlType, PlValue};
use freshet_core::types::{DataType, Value};
use freshet_core::{Error, Result, SqlState};
use sqlparser::ast;

use super::{errcode, format_raise, statement_rows, CompiledCall, ContextInner, JobContext, NativeProcedure, ProcedureContext};
use crate::database::Database;
use crate::result::{ColumnInfo, Notice, NoticeSeverity, RowStream, StatementResult};
use crate::session::{now_micros, RoutineSavepoint, Session};
use crate::transaction as txn_block;

/// A planned CALL (or `SELECT f(…)`): the routine is looked up again when it runs, so a
/// prepared CALL follows CREATE OR REPLACE.
#[derive(Clone, Debug)]
pub(crate) struct CallPlan {
    pub name: String,
    /// The input parameter types of the routine the call means, among those of its name
    /// (`None`: a native procedure).
    pub signature: Option<Vec<PlType>>,
    pub args: Vec<ast::Expr>,
    /// `SELECT f(…)` or `SELECT * FROM f(…)`: the function's result is the statement's.
    pub select: bool,
    /// `SELECT * FROM f(…)`: a `RETURNS TABLE` function's rows keep their columns (in the
    /// select list each row is one value of a composite type, shown as text).
    pub from: bool,
    /// A `RETURNS SETOF table` function's column types when the call was planned.
    pub row_types: Vec<DataType>,
    /// The statement's parameters passed as they are to an array parameter (`f($1)` for
    /// `f(ids INT[])`, `$1` is 0), with its element type: a client binds an array there,
    /// whose text form the call takes (`Prepared::array_param`).
    pub array_params: Vec<(usize, DataType)>,
}

impl CallPlan {
    /// The stored routine the call means, as the catalog has it now (`None` for a native
    /// procedure's call, or if the routine was dropped).
    pub fn routine<'c>(&self, catalog: &'c Catalog) -> Option<&'c Arc<ProcedureDef>> {
        catalog.routine(&self.name, self.signature.as_deref()?)
    }

    /// A function's result rows as this form of call returns them.
    fn shape_rows(&self, r: &plpgsql::Routine, rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
        match &r.set {
            Some(set) if (set.table || set.relation.is_some()) && self.select && !self.from => rows
                .into_iter()
                .map(|row| {
                    // (A table's columns are the values' own types.)
                    let types = row.iter().enumerate().map(|(i, v)| {
                        set.columns.get(i).map(|c| c.1).or(self.row_types.get(i).copied()).unwrap_or_else(|| v.data_type().unwrap_or(DataType::Text))
                    });
                    vec![Value::Text(composite_text(row.iter().zip(types)))]
                })
                .collect(),
            _ => rows,
        }
    }
}

/// PostgreSQL's text form of a composite value: `(1,"a b",)`, NULL as nothing, and a field
/// quoted when it is empty or holds a comma, parenthesis, quote, backslash or white space.
fn composite_text<'a>(fields: impl Iterator<Item = (&'a Value, DataType)>) -> String {
    let parts: Vec<String> = fields
        .map(|(v, ty)| match v.to_text(ty) {
            None => String::new(),
            Some(t) if t.is_empty() || t.chars().any(|c| matches!(c, ',' | '(' | ')' | '"' | '\\') || c.is_whitespace()) => {
                format!("\"{}\"", t.replace('\\', "\\\\").replace('"', "\"\""))
            }
            Some(t) => t,
        })
        .collect();
    format!("({})", parts.join(","))
}

enum Target {
    Routine(Arc<ProcedureDef>),
    Native(Arc<NativeProcedure>),
}

fn undefined(kind: &str, name: &str, args: usize) -> Error {
    Error::new(SqlState::UndefinedFunction, format!("{kind} {name}({}) does not exist", vec!["?"; args].join(", ")))
        .with_hint(format!("No {kind} matches the given name and argument count."))
}

/// The type of a call's argument as PostgreSQL's rules for choosing among routines of one name
/// see it: `None` (unknown) for a string literal, NULL, or a `$n` of no declared type.
fn argument_type(e: &ast::Expr, params: &[Option<DataType>]) -> ArgType {
    match e {
        _ if untyped(e) => None,
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Placeholder(p) => {
                let n = p.trim_start_matches('$').parse::<usize>().ok()?;
                params.get(n.checked_sub(1)?).copied().flatten().map(PlType::Scalar)
            }
            _ => bound_type(e, params),
        },
        ast::Expr::Nested(inner) => argument_type(inner, params),
        // `ARRAY[…]`: an array of its first typed element's type (text if none is typed).
        ast::Expr::Array(a) => {
            let elem = a.elem.iter().find_map(|x| argument_type(x, params)).map_or(DataType::Text, |t| match t {
                PlType::Scalar(t) | PlType::Array(t) => t,
            });
            Some(PlType::Array(elem))
        }
        ast::Expr::Cast { data_type, .. } => plpgsql::parser::parse_type(&data_type.to_string()).ok(),
        _ => bound_type(e, params),
    }
}

/// Whether a call's argument is of unknown type however it is evaluated: a string literal or
/// NULL. A query that computes it gives it the type text, but a call chooses among routines
/// of one name as if it had none (`k('2024-01-01')` means `k(timestamptz)` over `k(date)`).
pub(crate) fn untyped(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Nested(inner) => untyped(inner),
        ast::Expr::Value(v) => matches!(
            v.value,
            ast::Value::Null | ast::Value::SingleQuotedString(_) | ast::Value::EscapedStringLiteral(_) | ast::Value::DollarQuotedString(_) | ast::Value::NationalStringLiteral(_)
        ),
        _ => false,
    }
}

/// The types of a call's arguments that a query computed (`columns`), with those written
/// [`untyped`] as unknown.
pub(crate) fn computed_types<'e>(args: impl Iterator<Item = &'e ast::Expr>, columns: &[ColumnInfo]) -> Vec<Option<DataType>> {
    args.zip(columns).map(|(a, c)| (!untyped(a)).then_some(c.ty)).collect()
}

/// [`argument_type`] of each argument.
pub(crate) fn argument_types(args: &[ast::Expr], params: &[Option<DataType>]) -> Vec<ArgType> {
    args.iter().map(|a| argument_type(a, params)).collect()
}

fn bound_type(e: &ast::Expr, params: &[Option<DataType>]) -> ArgType {
    let mut types = params.to_vec();
    Binder::new(None, &mut types).bind_expr(e, None).ok().map(|x| PlType::Scalar(x.ty()))
}

/// `f(integer, unknown)`, or with named arguments `f(a => integer)`: a call as PostgreSQL's
/// messages name it.
fn call_signature(name: &str, args: &[ArgType], names: &[Option<String>]) -> String {
    let shown = args.iter().zip(names.iter().chain(std::iter::repeat(&None))).map(|(a, n)| {
        let ty = a.as_ref().map_or_else(|| "unknown".to_string(), PlType::name);
        n.as_ref().map_or_else(|| ty.clone(), |n| format!("{n} => {ty}"))
    });
    plpgsql::signature_text(name, shown)
}

/// 42883 for a call that no routine (or native procedure) takes, naming its arguments' types.
fn no_such(kind: &str, name: &str, args: &[ArgType], names: &[Option<String>]) -> Error {
    Error::new(SqlState::UndefinedFunction, format!("{kind} {} does not exist", call_signature(name, args, names)))
        .with_hint(format!("No {kind} matches the given name and argument types. You might need to add explicit type casts."))
}

/// The routine of this name that a call with arguments of `args` types (named as `names`
/// says) means, among the routines of the name (overloading: `plpgsql::overload`), and whether
/// the trailing arguments are its VARIADIC parameter's elements; `None` if none has the name;
/// 42883 if none takes these arguments, 42725 if several could.
pub(crate) fn resolve_routine<'c>(catalog: &'c Catalog, name: &str, kind: &str, args: &[ArgType], names: &[Option<String>]) -> Result<Option<(&'c Arc<ProcedureDef>, bool)>> {
    let all = catalog.routines(name);
    if all.is_empty() {
        return Ok(None);
    }
    match plpgsql::overload::resolve(all, args, names) {
        Resolution::Found { index, expanded } => Ok(Some((&all[index], expanded))),
        Resolution::NotFound => Err(no_such(kind, name, args, names)),
        Resolution::Ambiguous => Err(Error::new(SqlState::AmbiguousFunction, format!("{kind} {} is not unique", call_signature(name, args, names)))
            .with_hint(format!("Could not choose a best candidate {kind}. You might need to add explicit type casts."))),
    }
}

/// Plans `CALL name(args)`, `SELECT name(args)` or `SELECT * FROM name(args)`: chooses the
/// routine among those of its name by the arguments' types, checks it takes them, and types
/// `$n` arguments by the parameters they are passed to.
pub(crate) fn plan_call(
    db: &Database,
    catalog: &Catalog,
    call: FunctionCall,
    select: bool,
    params: &mut Vec<Option<DataType>>,
) -> Result<(CallPlan, Option<Vec<ColumnInfo>>)> {
    let FunctionCall { name, mut args, names, from, alias, column_names } = call;
    let kind = if select { "function" } else { "procedure" };
    let mut array_params = Vec::new();
    let arg_types = argument_types(&args, params);
    // `RETURNS SETOF table`: the table's columns now.
    let mut table_columns = Vec::new();
    let mut signature = None;
    let (types, columns): (Vec<DataType>, Option<Vec<ColumnInfo>>) = if let Some((def, expanded)) = resolve_routine(catalog, &name, kind, &arg_types, &names)? {
        if let Some(table) = def.routine.set.as_ref().and_then(|s| s.relation.as_ref()) {
            let def = catalog.table(table).ok_or_else(|| Error::undefined_table(table))?;
            table_columns = def.columns.iter().map(|c| ColumnInfo { name: c.name.clone(), ty: c.ty }).collect();
        }
        let r = &def.routine;
        if r.function != select {
            let shown = call_signature(&name, &arg_types, &names);
            let (message, hint) = if select { (format!("{shown} is a procedure"), "To call a procedure, use CALL.") } else { (format!("{shown} is not a procedure"), "To call a function, use SELECT.") };
            return Err(Error::new(SqlState::WrongObjectType, message).with_hint(hint));
        }
        signature = Some(r.signature.clone());
        if expanded {
            // The trailing arguments are the VARIADIC array's elements: a `$n` among them
            // takes the element type, and they become one ARRAY[…] argument.
            let fixed = r.params.len() - 1;
            if let PlType::Array(elem) = r.params[fixed].1 {
                type_placeholders(&args[fixed..], &vec![elem; args.len() - fixed], params);
            }
            let elem = args.split_off(fixed);
            args.push(ast::Expr::Array(ast::Array { elem, named: true }));
        }
        let names = if expanded { vec![None; args.len()] } else { names };
        args = complete_arguments(r, kind, args, &names)?;
        type_nested_placeholders(&args, &r.params, params);
        for (a, (_, ty)) in args.iter().zip(&r.params) {
            if let (PlType::Array(elem), Some(n)) = (ty, freshet_core::sql::parse::placeholder_index(a))
                && params.get(n).copied().flatten().is_none_or(|t| t == DataType::Text)
            {
                array_params.push((n, *elem));
            }
        }
        let types = r.params.iter().map(|(_, t)| if let PlType::Scalar(t) = t { *t } else { DataType::Text }).collect();
        let columns = if !select {
            // A procedure's OUT parameters: CALL returns their values as a row.
            r.set.as_ref().filter(|s| s.single).map(|set| set.columns.iter().map(|(n, ty)| ColumnInfo { name: n.clone(), ty: *ty }).collect())
        } else {
            let returns_table = r.set.as_ref().is_some_and(|set| set.table);
            let column_names = match alias {
                Some(alias) if column_names.is_empty() && !returns_table => vec![alias],
                _ => column_names,
            };
            let mut columns = match (&r.set, from) {
                (Some(set), true) if set.relation.is_some() => table_columns.clone(),
                (Some(set), true) => set.columns.iter().map(|(n, ty)| ColumnInfo { name: n.clone(), ty: *ty }).collect(),
                (Some(set), false) if set.table || set.relation.is_some() => vec![ColumnInfo { name: name.clone(), ty: DataType::Text }],
                (Some(set), false) => vec![ColumnInfo { name: name.clone(), ty: set.columns[0].1 }],
                (None, _) => {
                    let ty = match r.returns {
                        Some(PlType::Scalar(t)) => t,
                        _ => DataType::Text,
                    };
                    vec![ColumnInfo { name: name.clone(), ty }]
                }
            };
            if column_names.len() > columns.len() {
                return Err(Error::new(
                    SqlState::custom("42P10").unwrap_or(SqlState::SyntaxError),
                    format!("table \"{name}\" has {} columns available but {} columns specified", columns.len(), column_names.len()),
                ));
            }
            for (c, alias) in columns.iter_mut().zip(column_names) {
                c.name = alias;
            }
            Some(columns)
        };
        (types, columns)
    } else if let (false, Some(native), true) = (select, db.native_procedure(&name), names.iter().all(Option::is_none)) {
        if !native.takes(args.len()) {
            return Err(no_such(kind, &name, &arg_types, &names));
        }
        let columns = (!native.columns.is_empty()).then(|| native.columns.clone());
        (native.params.clone().unwrap_or_default(), columns)
    } else {
        return Err(no_such(kind, &name, &arg_types, &names));
    };
    type_placeholders(&args, &types, params);
    // Every `$n` counts, however deep in an argument (`f(ARRAY[$1, $2 + 1])`); one of no type
    // yet is text.
    for a in &args {
        let _ = ast::visit_expressions(a, |e| {
            if let ast::Expr::Value(v) = e
                && let ast::Value::Placeholder(p) = &v.value
                && let Ok(n) = p.trim_start_matches('$').parse::<usize>()
                && params.len() < n
            {
                params.resize(n, None);
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
    }
    let row_types = table_columns.iter().map(|c| c.ty).collect();
    Ok((CallPlan { name, signature, args, select, from, row_types, array_params }, columns))
}

/// Gives each argument that is a `$n` of no type yet the type its parameter has (`types`, in
/// argument order).
fn type_placeholders(args: &[ast::Expr], types: &[DataType], params: &mut Vec<Option<DataType>>) {
    for (a, ty) in args.iter().zip(types) {
        if let ast::Expr::Value(v) = a
            && let ast::Value::Placeholder(p) = &v.value
            && let Ok(n) = p.trim_start_matches('$').parse::<usize>()
            && n > 0
        {
            if params.len() < n {
                params.resize(n, None);
            }
            if params[n - 1].is_none() {
                params[n - 1] = Some(*ty);
            }
        }
    }
}

/// Types the `$n` in a routine's arguments as the binder infers them from the parameters'
/// types: `ARRAY[$1, $2 + 1]` for an `INT[]` parameter types both as integers, `$3 * 2` or
/// `$3` for a numeric one `$3` as numeric. An argument the short path cannot bind is left as
/// it is.
fn type_nested_placeholders(args: &[ast::Expr], params_of: &[(String, PlType)], params: &mut Vec<Option<DataType>>) {
    for (a, (_, ty)) in args.iter().zip(params_of) {
        match (a, ty) {
            (ast::Expr::Array(array), PlType::Array(elem)) => {
                for e in &array.elem {
                    let _ = Binder::new(None, params).bind_expr(e, Some(*elem));
                }
            }
            (_, PlType::Array(_)) => {}
            (a, PlType::Scalar(t)) => {
                let _ = Binder::new(None, params).bind_expr(a, Some(*t));
            }
        }
    }
}

/// The arguments of a call in parameter order: those given by position, then by name
/// (`p => value`), then the defaults of the parameters left out; 42883 if they do not fit.
fn complete_arguments(r: &plpgsql::Routine, kind: &str, args: Vec<ast::Expr>, names: &[Option<String>]) -> Result<Vec<ast::Expr>> {
    let positional = names.iter().take_while(|n| n.is_none()).count();
    if names[positional..].iter().any(Option::is_none) {
        return Err(Error::syntax("positional argument cannot follow named argument"));
    }
    let given = args.len();
    let missing = || undefined(kind, &r.name, given);
    if positional > r.params.len() {
        return Err(missing());
    }
    let mut out: Vec<Option<ast::Expr>> = vec![None; r.params.len()];
    for (i, (arg, name)) in args.into_iter().zip(names.iter().map(Option::as_deref).chain(std::iter::repeat(None))).enumerate() {
        let at = match name {
            None => i,
            Some(name) => r.params.iter().position(|(p, _)| p == name).ok_or_else(missing)?,
        };
        if out[at].replace(arg).is_some() {
            return Err(Error::syntax(format!("argument name \"{}\" used more than once", r.params[at].0)));
        }
    }
    out.into_iter().zip(&r.defaults).map(|(arg, default)| arg.or_else(|| default.clone()).ok_or_else(missing)).collect()
}

/// A call's arguments as written: their expressions and the names of those given by name
/// (`p => value`, or the older `p := value`, which the parser reads as an assignment
/// expression).
pub(crate) fn call_arguments(args: &ast::FunctionArguments) -> Option<(Vec<ast::Expr>, Vec<Option<String>>)> {
    match args {
        ast::FunctionArguments::List(list) => argument_list(&list.args),
        ast::FunctionArguments::None => Some((Vec::new(), Vec::new())),
        ast::FunctionArguments::Subquery(_) => None,
    }
}

/// [`call_arguments`] of a list of arguments (a call's, or a table function's in FROM).
pub(crate) fn argument_list(list: &[ast::FunctionArg]) -> Option<(Vec<ast::Expr>, Vec<Option<String>>)> {
    list.iter()
        .map(|a| match a {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::BinaryOp { left, op: ast::BinaryOperator::Assignment, right }))
                if let ast::Expr::Identifier(name) = left.as_ref() =>
            {
                Some((right.as_ref().clone(), Some(fold_ident(name))))
            }
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some((e.clone(), None)),
            ast::FunctionArg::Named { name, arg: ast::FunctionArgExpr::Expr(e), .. } => Some((e.clone(), Some(fold_ident(name)))),
            ast::FunctionArg::ExprNamed { name: ast::Expr::Identifier(name), arg: ast::FunctionArgExpr::Expr(e), .. } => Some((e.clone(), Some(fold_ident(name)))),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .map(|pairs| pairs.into_iter().unzip())
}

/// A call of a routine as a statement.
pub(crate) struct FunctionCall {
    pub name: String,
    pub args: Vec<ast::Expr>,
    /// Per argument, its name if it is given by name (`p => value`).
    pub names: Vec<Option<String>>,
    /// `SELECT * FROM f(…)` rather than `SELECT f(…)` or `CALL p(…)`.
    pub from: bool,
    /// `FROM f(…) AS t`: for a function of one result column (not `RETURNS TABLE`), the alias
    /// names that column too, as in PostgreSQL.
    pub alias: Option<String>,
    /// Column aliases (`FROM f(…) AS t(a, b)`).
    pub column_names: Vec<String>,
}

/// `SELECT f(args)` or `SELECT * FROM f(args) [AS t[(a, …)]]` as the whole statement, with
/// `f` a stored function.
pub(crate) fn select_function_call(q: &ast::Query, catalog: &Catalog) -> Option<FunctionCall> {
    let ast::SetExpr::Select(s) = q.body.as_ref() else { return None };
    if q.order_by.is_some() || q.limit_clause.is_some() || q.with.is_some() || s.selection.is_some() || s.projection.len() != 1 {
        return None;
    }
    let (name, (args, names), alias, from) = match (&s.projection[0], &s.from[..]) {
        // A call inside the arguments (`SELECT f(g(1))`) is worked out as in any query.
        (ast::SelectItem::UnnamedExpr(ast::Expr::Function(f)), []) if !super::in_query::calls_stored(&f.args, catalog) => {
            (&f.name, call_arguments(&f.args)?, None, false)
        }
        (ast::SelectItem::Wildcard(_), [ast::TableWithJoins { relation: ast::TableFactor::Table { name, alias, args: Some(args), .. }, joins }])
            if joins.is_empty() =>
        {
            (name, argument_list(&args.args)?, alias.as_ref(), true)
        }
        _ => return None,
    };
    let fname = fold_ident(name.0.last()?.as_ident()?);
    if name.0.len() != 1 || !catalog.has_routine(&fname) {
        return None;
    }
    let column_names = alias.map(|a| a.columns.iter().map(|c| fold_ident(&c.name)).collect()).unwrap_or_default();
    Some(FunctionCall { name: fname, args, names, from, alias: alias.map(|a| fold_ident(&a.name)), column_names })
}

/// A SELECT whose select list calls stored functions as whole items (`SELECT id, f(id) AS
/// score FROM t WHERE …`): the query runs without the calls, their arguments appended to its
/// select list, and each function is called once per row of its result with that row's
/// arguments (PostgreSQL too evaluates the select list once per row that is returned).
pub(crate) struct PerRowCalls {
    /// The query without the calls, with every call's arguments appended to its select list
    /// in order.
    pub query: ast::Query,
    pub items: Vec<ItemShape>,
}

/// One item of the original select list.
pub(crate) enum ItemShape {
    /// An item of the query: one column, or (a wildcard) as many as it expands to.
    Columns { wildcard: bool },
    /// A call: the function, the output column's name, how many arguments, and which of them
    /// are [`untyped`].
    Call { name: String, output: String, args: usize, untyped: Vec<bool> },
}

/// One output column of a [`PerRowCalls`] statement, planned.
#[derive(Clone, Debug)]
pub(crate) enum RowItem {
    /// That column of the query's row.
    Column(usize),
    /// The function's value for the query row's columns `args` (the call's `$1`, `$2`, …),
    /// as the column `column`.
    Call { plan: CallPlan, args: Vec<usize>, column: Arc<Vec<ColumnInfo>> },
}

/// [`PerRowCalls`] of `q`, if its stored-function calls are all whole items of its select list
/// and nothing else in it would see them: no DISTINCT, no set operation, at most one
/// wildcard, and ORDER BY / GROUP BY not by a call (its position or output name; positions of
/// other items are renumbered).
pub(crate) fn per_row_calls(q: &ast::Query, catalog: &Catalog) -> Option<PerRowCalls> {
    let ast::SetExpr::Select(s) = q.body.as_ref() else { return None };
    let stored = |e: &ast::Expr| -> Option<(String, Vec<ast::Expr>)> {
        let ast::Expr::Function(f) = e else { return None };
        let [part] = f.name.0.as_slice() else { return None };
        let name = fold_ident(part.as_ident()?);
        if !catalog.has_routine(&name) {
            return None;
        }
        if let ast::FunctionArguments::List(list) = &f.args
            && (list.duplicate_treatment.is_some() || !list.clauses.is_empty())
        {
            return None;
        }
        // Arguments by position only (they become the call's `$1`, `$2`, …).
        let (args, names) = call_arguments(&f.args)?;
        (f.filter.is_none() && f.over.is_none() && names.iter().all(Option::is_none)).then_some((name, args))
    };
    let mut items = Vec::new();
    let mut kept = Vec::new();
    let mut appended = Vec::new();
    for item in &s.projection {
        let call = match item {
            ast::SelectItem::UnnamedExpr(e) => stored(e).map(|(name, args)| (name.clone(), name, args)),
            ast::SelectItem::ExprWithAlias { expr, alias } => stored(expr).map(|(name, args)| (name, fold_ident(alias), args)),
            _ => None,
        };
        match call {
            Some((name, output, args)) => {
                items.push(ItemShape::Call { name, output, args: args.len(), untyped: args.iter().map(untyped).collect() });
                // Named apart from every other column (`SELECT *, f(id)` repeats `id`).
                for expr in args {
                    let alias = ast::Ident::with_quote('"', format!("freshet argument {}", appended.len() + 1));
                    appended.push(ast::SelectItem::ExprWithAlias { expr, alias });
                }
            }
            None => {
                let wildcard = matches!(item, ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..));
                items.push(ItemShape::Columns { wildcard });
                kept.push(item.clone());
            }
        }
    }
    let outputs: Vec<&String> = items.iter().filter_map(|i| if let ItemShape::Call { output, .. } = i { Some(output) } else { None }).collect();
    let wildcards = items.iter().filter(|i| matches!(i, ItemShape::Columns { wildcard: true })).count();
    if outputs.is_empty() || wildcards > 1 || s.distinct.is_some() {
        return None;
    }
    // ORDER BY / GROUP BY by position name the kept items' new positions; by a call (its
    // position or output name) they would need its values first: not done here. Past a
    // wildcard positions are known only if no call follows it.
    let inner_position = |n: usize| -> Option<usize> {
        let (mut out, mut inner) = (1, 1);
        for (i, item) in items.iter().enumerate() {
            match item {
                ItemShape::Columns { wildcard: false } if n == out => return Some(inner),
                ItemShape::Columns { wildcard: false } => (out, inner) = (out + 1, inner + 1),
                ItemShape::Call { .. } if n == out => return None,
                ItemShape::Call { .. } => out += 1,
                ItemShape::Columns { wildcard: true } if n < out => return Some(n),
                ItemShape::Columns { wildcard: true } => {
                    let calls_after = items[i + 1..].iter().any(|i| matches!(i, ItemShape::Call { .. }));
                    return (!calls_after).then(|| n - out + inner);
                }
            }
        }
        // Past the list: left for the planner to report.
        Some(n)
    };
    let renumber = |e: &mut ast::Expr| -> Option<()> {
        match e {
            ast::Expr::Value(v) => {
                if let ast::Value::Number(n, _) = &v.value {
                    let new = inner_position(n.parse().ok()?)?;
                    *e = ast::Expr::Value(ast::Value::Number(new.to_string(), false).with_empty_span());
                }
                Some(())
            }
            ast::Expr::Identifier(id) if outputs.contains(&&fold_ident(id)) => None,
            _ => Some(()),
        }
    };
    let mut query = q.clone();
    if let Some(ob) = &mut query.order_by
        && let ast::OrderByKind::Expressions(exprs) = &mut ob.kind
    {
        for o in exprs.iter_mut() {
            renumber(&mut o.expr)?;
        }
    }
    let ast::SetExpr::Select(select) = query.body.as_mut() else { return None };
    if let ast::GroupByExpr::Expressions(exprs, _) = &mut select.group_by {
        for e in exprs.iter_mut() {
            renumber(e)?;
        }
    }
    select.projection = kept.into_iter().chain(appended).collect();
    // Any other call (in WHERE, in an argument, …) is still refused.
    if stored_function_in_query(&query, catalog).is_some() {
        return None;
    }
    Some(PerRowCalls { query, items })
}

/// The output of a [`PerRowCalls`] statement whose query has `columns`: where each column
/// comes from, and the statement's columns.
pub(crate) fn per_row_layout(db: &Database, catalog: &Catalog, split: &PerRowCalls, columns: &[ColumnInfo]) -> Result<(Vec<RowItem>, Vec<ColumnInfo>)> {
    let arg_total: usize = split.items.iter().map(|i| if let ItemShape::Call { args, .. } = i { *args } else { 0 }).sum();
    let plain = split.items.iter().filter(|i| matches!(i, ItemShape::Columns { wildcard: false })).count();
    let kept = columns.len().checked_sub(arg_total).ok_or_else(|| Error::internal("a query with fewer columns than its calls' arguments"))?;
    let wildcard_width = kept.checked_sub(plain).ok_or_else(|| Error::internal("a select list wider than its columns"))?;
    let (mut next, mut next_arg) = (0, kept);
    let (mut out, mut out_columns) = (Vec::new(), Vec::new());
    for item in &split.items {
        match item {
            ItemShape::Columns { wildcard } => {
                for i in next..next + if *wildcard { wildcard_width } else { 1 } {
                    out.push(RowItem::Column(i));
                    out_columns.push(columns[i].clone());
                }
                next += if *wildcard { wildcard_width } else { 1 };
            }
            ItemShape::Call { name, output, args, untyped } => {
                let types: Vec<Option<DataType>> = columns[next_arg..next_arg + args].iter().zip(untyped).map(|(c, u)| (!u).then_some(c.ty)).collect();
                let (plan, mut column) = plan_value_call(db, catalog, name, &vec![None; *args], types)?;
                column.name = output.clone();
                out.push(RowItem::Call { plan, args: (next_arg..next_arg + args).collect(), column: Arc::new(vec![column.clone()]) });
                out_columns.push(column);
                next_arg += args;
            }
        }
    }
    Ok((out, out_columns))
}

/// Plans a call of the function `name` whose one value a query uses, with `$1`, `$2`, … as
/// its arguments (named as `names` says, of the types of the query's columns that give them):
/// the plan, and the value's column (named after the function). A set-returning function is
/// refused.
pub(crate) fn plan_value_call(db: &Database, catalog: &Catalog, name: &str, names: &[Option<String>], mut types: Vec<Option<DataType>>) -> Result<(CallPlan, ColumnInfo)> {
    let placeholders = (1..=names.len()).map(|n| ast::Expr::Value(ast::Value::Placeholder(format!("${n}")).with_empty_span())).collect();
    let call = FunctionCall { name: name.to_string(), args: placeholders, names: names.to_vec(), from: false, alias: None, column_names: Vec::new() };
    let (plan, planned) = plan_call(db, catalog, call, true, &mut types)?;
    if plan.routine(catalog).is_some_and(|d| d.routine.set.is_some()) {
        return Err(Error::unsupported(format!("set-returning function {name}() inside a larger query"))
            .with_hint(format!("Call it on its own, as SELECT * FROM {name}(…).")));
    }
    let ty = planned.and_then(|c| c.first().map(|c| c.ty)).unwrap_or(DataType::Text);
    Ok((plan, ColumnInfo { name: name.to_string(), ty }))
}

/// The name of a stored function that `q` calls in a FROM clause or inside an expression (forms other than
/// [`select_function_call`]'s: those calls run only on their own).
pub(crate) fn stored_function_in_query(q: &ast::Query, catalog: &Catalog) -> Option<String> {
    use std::ops::ControlFlow;
    struct Finder<'a>(&'a Catalog);
    impl ast::Visitor for Finder<'_> {
        type Break = String;
        fn pre_visit_table_factor(&mut self, factor: &ast::TableFactor) -> ControlFlow<String> {
            if let ast::TableFactor::Table { name, args: Some(_), .. } = factor
                && let [part] = name.0.as_slice()
                && let Some(name) = part.as_ident().map(fold_ident)
                && self.0.has_routine(&name)
            {
                return ControlFlow::Break(name);
            }
            ControlFlow::Continue(())
        }
        // A call inside an expression (`SELECT f() + 1`, `WHERE x = f()`): the analytical
        // side, which runs such queries, does not know routines.
        fn pre_visit_expr(&mut self, e: &ast::Expr) -> ControlFlow<String> {
            if let ast::Expr::Function(f) = e
                && let [part] = f.name.0.as_slice()
                && let Some(name) = part.as_ident().map(fold_ident)
                && self.0.has_routine(&name)
            {
                return ControlFlow::Break(name);
            }
            ControlFlow::Continue(())
        }
    }
    match ast::Visit::visit(q, &mut Finder(catalog)) {
        ControlFlow::Break(name) => Some(name),
        ControlFlow::Continue(()) => None,
    }
}

/// Evaluates a constant or parameter expression (a CALL argument).
fn eval_arg(e: &ast::Expr, ty: DataType, param_types: &[DataType], params: &[Value], now: i64) -> Result<Value> {
    let mut types: Vec<Option<DataType>> = param_types.iter().copied().map(Some).collect();
    let expr = Binder::new(None, &mut types).bind_expr(e, Some(ty))?;
    expr.eval(&NoRow, &EvalContext { params, now, session: None })?.cast(ty)
}

fn eval_array_arg(e: &ast::Expr, elem: DataType, param_types: &[DataType], params: &[Value], now: i64) -> Result<PlValue> {
    match e {
        ast::Expr::Array(a) => Ok(PlValue::Array(Some(a.elem.iter().map(|x| eval_arg(x, elem, param_types, params, now)).collect::<Result<_>>()?))),
        ast::Expr::Cast { expr, .. } | ast::Expr::Nested(expr) => eval_array_arg(expr, elem, param_types, params, now),
        other => match eval_arg(other, DataType::Text, param_types, params, now)? {
            Value::Null => Ok(PlValue::Array(None)),
            Value::Text(s) => Ok(PlValue::Array(Some(plpgsql::parse_array_text(&s, elem)?))),
            v => Err(Error::mismatch(format!("{v:?} is not an array"))),
        },
    }
}

/// A routine's arguments: each CALL argument evaluated as its parameter's type.
fn routine_args(def: &ProcedureDef, args: &[ast::Expr], param_types: &[DataType], params: &[Value], now: i64) -> Result<Vec<PlValue>> {
    args.iter()
        .zip(&def.routine.params)
        .map(|(a, (_, ty))| match ty {
            PlType::Scalar(t) => Ok(PlValue::Scalar(eval_arg(a, *t, param_types, params, now)?)),
            PlType::Array(elem) => eval_array_arg(a, *elem, param_types, params, now),
        })
        .collect()
}

/// The value of one `$n` of an expression or statement.
/// What a routine's expressions read besides its variables: the call's start time and the
/// session's sequence functions.
#[derive(Clone, Copy)]
struct Clock<'a> {
    at: i64,
    sequences: Option<&'a (dyn freshet_core::sql::expr::SessionFns + Sync)>,
}

/// A running routine's variables, by slot: the value of each scalar slot (NULL in an array
/// slot's place, so that expressions read the slots' values as parameters where they are) and
/// of each array slot.
struct Vars {
    scalars: Vec<Value>,
    /// `Some` only for an array slot holding an array (`None` there: a NULL array).
    arrays: Vec<Option<Vec<Value>>>,
    is_array: Vec<bool>,
}

impl Vars {
    fn new(r: &plpgsql::Routine, args: Vec<PlValue>) -> Vars {
        let n = r.slots.len();
        let mut vars = Vars {
            scalars: vec![Value::Null; n],
            arrays: vec![None; n],
            is_array: r.slots.iter().map(|s| matches!(s.ty, PlType::Array(_))).collect(),
        };
        for (i, a) in args.into_iter().enumerate().take(n) {
            match a {
                PlValue::Scalar(v) => vars.scalars[i] = v,
                PlValue::Array(items) => vars.arrays[i] = items,
            }
        }
        vars
    }

    /// A scalar slot's value (an array slot here is a type error).
    fn scalar(&self, slot: usize) -> Result<&Value> {
        if self.is_array[slot] {
            return Err(Error::mismatch("an array value where a scalar is expected"));
        }
        Ok(&self.scalars[slot])
    }

    /// Sets a slot to a scalar value; an array slot (declared without a value: arrays come
    /// from parameters) becomes a NULL array.
    fn set(&mut self, slot: usize, v: Value) {
        if self.is_array[slot] {
            self.arrays[slot] = None;
        }
        self.scalars[slot] = v;
    }

    /// FOUND and ROW_COUNT after a statement that touched `count` rows (both scalar slots, so
    /// written in place).
    fn set_status(&mut self, r: &plpgsql::Routine, count: u64) {
        self.scalars[r.found] = Value::Bool(count > 0);
        self.scalars[r.row_count] = Value::Int64(count as i64);
    }

    /// An array slot's elements (`None`: NULL, or not an array slot).
    fn array(&self, slot: usize) -> Option<&Vec<Value>> {
        self.arrays[slot].as_ref()
    }
}

fn source_value(p: &ParamSource, vars: &Vars, now: Clock) -> Result<Value> {
    match p {
        ParamSource::Var(slot) => Ok(vars.scalar(*slot)?.clone()),
        ParamSource::Element { array, index } => {
            let i = match &index.on_slots {
                // A variable as the subscript (`arr[i]`, as most are): read where it is.
                Some(Expr::Param { index: slot, .. }) => vars.scalars.get(*slot).and_then(Value::as_i64),
                _ => eval(index, vars, now)?.as_i64(),
            };
            let Some(items) = vars.array(*array) else { return Ok(Value::Null) };
            Ok(match i {
                Some(i) if i >= 1 => items.get(i as usize - 1).cloned().unwrap_or(Value::Null),
                _ => Value::Null,
            })
        }
        ParamSource::Row(fields) => Ok(Value::Text(composite_text(fields.iter().map(|(s, ty)| (&vars.scalars[*s], *ty))))),
        ParamSource::Length { array, cardinality } => Ok(match vars.array(*array) {
            Some(items) if items.is_empty() && !cardinality => Value::Null,
            Some(items) => Value::Int32(items.len() as i32),
            None => Value::Null,
        }),
        ParamSource::ArrayIsNull { array, negated } => Ok(Value::Bool(vars.array(*array).is_none() != *negated)),
        // Stands for what the statement's form for the array's length puts in its place.
        ParamSource::Quantified { .. } | ParamSource::WholeArray { .. } => Ok(Value::Null),
    }
}

/// PostgreSQL's limit on an array's elements (`MaxArraySize`).
const MAX_ARRAY_ELEMENTS: usize = (1 << 27) - 1;

/// The array `value` gives (`None`: NULL), its elements of type `elem`.
fn array_value(value: &ArrayValue, elem: DataType, vars: &Vars, now: Clock) -> Result<Option<Vec<Value>>> {
    let items = match value {
        ArrayValue::Null => None,
        ArrayValue::Elements(units) => Some(units.iter().map(|u| eval(u, vars, now)?.cast(elem)).collect::<Result<Vec<_>>>()?),
        ArrayValue::Text(unit) => match eval(unit, vars, now)? {
            Value::Null => None,
            Value::Text(s) => Some(plpgsql::parse_array_text(&s, elem)?),
            v => match v.cast(DataType::Text)? {
                Value::Text(s) => Some(plpgsql::parse_array_text(&s, elem)?),
                _ => None,
            },
        },
        ArrayValue::Var(slot) => vars.array(*slot).map(|items| items.iter().map(|v| v.clone().cast(elem)).collect::<Result<Vec<_>>>()).transpose()?,
        ArrayValue::Concat(parts) => {
            let mut out: Option<Vec<Value>> = None;
            for part in parts {
                match part {
                    ArrayPart::Element(u) => out.get_or_insert_with(Vec::new).push(eval(u, vars, now)?.cast(elem)?),
                    ArrayPart::Array(a) => {
                        if let Some(items) = array_value(a, elem, vars, now)? {
                            out.get_or_insert_with(Vec::new).extend(items);
                        }
                    }
                }
            }
            out
        }
    };
    if items.as_ref().is_some_and(|i| i.len() > MAX_ARRAY_ELEMENTS) {
        return Err(array_too_large());
    }
    Ok(items)
}

fn array_too_large() -> Error {
    Error::new(SqlState::custom("54000").unwrap_or(SqlState::ProgramLimitExceeded), format!("array size exceeds the maximum allowed ({MAX_ARRAY_ELEMENTS})"))
}

/// `arr[index] := value`: a NULL array becomes one; past the end the array grows, with NULLs
/// between. Arrays here start at subscript 1, so a subscript below 1, or above 1 for an array
/// that has no elements yet (PostgreSQL would start the array there), is refused (0A000).
fn assign_element(items: &mut Option<Vec<Value>>, index: Value, value: Value) -> Result<()> {
    let i = match index {
        Value::Null => return Err(Error::new(SqlState::custom("22004").unwrap_or(SqlState::InvalidParameterValue), "array subscript in assignment must not be null")),
        v => v.as_i64().ok_or_else(|| Error::mismatch("array subscript must have type integer"))?,
    };
    let items = items.get_or_insert_with(Vec::new);
    if i < 1 || (items.is_empty() && i > 1) {
        return Err(Error::unsupported(format!("array subscript {i} (arrays in a routine start at subscript 1 and grow from their end)")));
    }
    let at = i as usize - 1;
    if at >= MAX_ARRAY_ELEMENTS {
        return Err(array_too_large());
    }
    if items.len() <= at {
        items.resize(at + 1, Value::Null);
    }
    items[at] = value;
    Ok(())
}

fn eval(unit: &ExprUnit, vars: &Vars, now: Clock) -> Result<Value> {
    let cx = |params| EvalContext { params, now: now.at, session: now.sequences.map(|s| s as &dyn freshet_core::sql::expr::SessionFns) };
    // Every parameter a scalar variable, as most are: evaluated over the slots' values where
    // they are.
    if let Some(e) = &unit.on_slots {
        return e.eval(&NoRow, &cx(&vars.scalars));
    }
    // A bare array element (`p_items[i]`): its value, which is what evaluating the parameter
    // would give.
    if let (Expr::Param { index: 0, .. }, [source]) = (&unit.expr, unit.params.as_slice()) {
        return source_value(source, vars, now);
    }
    // Filled one by one: collecting fallible items into a SmallVec costs several times more.
    let mut params: SmallVec<[Value; 4]> = SmallVec::with_capacity(unit.params.len());
    for p in &unit.params {
        params.push(source_value(p, vars, now)?);
    }
    unit.expr.eval(&NoRow, &cx(&params))
}

/// A range loop as it starts: its variable's slot, bounds and step (positive; `reverse`
/// counts down).
struct LoopRange {
    var: usize,
    lo: i64,
    hi: i64,
    step: i64,
    reverse: bool,
}

/// Asks for what the lookups of a range loop's statements `units` ([`RangeBounds::prefetch`])
/// will touch over the whole loop (for an INSERT, its primary key's slot), before its first
/// iteration, for those whose key the loop's start determines: the parameters of their keys for each
/// value the loop variable will take (at most [`MAX_PREFETCHED_ITERATIONS`] of them), without
/// the session's functions (nothing with an effect runs; a parameter that needs one leaves
/// its statement out). The loop variable is left at the loop's first value.
///
/// [`RangeBounds::prefetch`]: freshet_core::sql::plpgsql::compile::RangeBounds::prefetch
fn prefetch_loop<S: RoutineStatements>(
    r: &plpgsql::Routine,
    compiled: &CompiledCall,
    units: &[LoopLookup],
    LoopRange { var, lo, hi, step, reverse }: LoopRange,
    vars: &mut Vars,
    at: i64,
    statements: &mut S,
) {
    let iterations = if reverse { lo - hi } else { hi - lo } / step + 1;
    if !(2..=MAX_PREFETCHED_ITERATIONS).contains(&iterations) {
        return;
    }
    // (A statement with an array as a whole runs in a form for the array's length, which
    // the prepared one stands for but is not: it is not prefetched.)
    let units: SmallVec<[(usize, u64); 8]> = units
        .iter()
        .filter(|u| !compiled.routine.sql[u.unit].spreads())
        .filter_map(|u| Some((u.unit, statements.key_params(&compiled.prepared[u.unit]).filter(|&key| u.covers(key))?)))
        .collect();
    if units.is_empty() {
        return;
    }
    let clock = Clock { at, sequences: None };
    // Every lookup's parameters, one after another in one list (a list per lookup was an
    // allocation and a free each), and where each lookup's parameters begin.
    let per_iteration: usize = units.iter().map(|&(u, _)| r.sql[u].params.len()).sum();
    let mut values = Vec::with_capacity(per_iteration * iterations as usize);
    let mut starts: SmallVec<[(usize, usize); 32]> = SmallVec::new();
    for k in 0..iterations {
        let value = if reverse { lo - k * step } else { lo + k * step };
        vars.set(var, Value::Int32(value.clamp(i32::MIN as i64, i32::MAX as i64) as i32));
        'unit: for &(u, key_params) in &units {
            let start = values.len();
            for (n, source) in r.sql[u].params.iter().enumerate() {
                // Only the key's parameters: the others stay NULL, unread.
                let key = n < 64 && key_params & (1 << n) != 0;
                let Ok(v) = (if key { source_value(source, vars, clock) } else { Ok(Value::Null) }) else {
                    values.truncate(start);
                    continue 'unit;
                };
                values.push(v);
            }
            starts.push((u, start));
        }
    }
    vars.set(var, Value::Int32(lo.clamp(i32::MIN as i64, i32::MAX as i64) as i32));
    let batch: SmallVec<[(&Arc<crate::session::Prepared>, &[Value]); 32]> =
        starts.iter().filter_map(|&(u, start)| Some((&compiled.prepared[u], values.get(start..start + r.sql[u].params.len())?))).collect();
    statements.prefetch(&batch);
}

fn slot_type(ty: PlType) -> DataType {
    match ty {
        PlType::Scalar(t) | PlType::Array(t) => t,
    }
}

fn int_value(v: Value, what: &str) -> Result<i64> {
    match v {
        Value::Null => Err(Error::new(SqlState::custom("22004").unwrap_or(SqlState::InvalidParameterValue), format!("{what} of FOR loop cannot be null"))),
        v => v.cast(DataType::Int64)?.as_i64().ok_or_else(|| Error::internal("integer cast")),
    }
}

impl Session {
    /// Runs a planned call. Boxed with an explicit `Send` type: a routine's statements run
    /// through `execute`, which may run a CALL again.
    pub(crate) fn run_call<'a>(
        &'a mut self,
        plan: &'a CallPlan,
        param_types: &'a [DataType],
        params: Vec<Value>,
        columns: Option<Arc<Vec<ColumnInfo>>>,
    ) -> Pin<Box<dyn Future<Output = Result<StatementResult>> + Send + 'a>> {
        Box::pin(async move {
            self.check_call_depth()?;
            self.procedures.depth += 1;
            let result = GrowStack(Box::pin(self.run_call_inner(plan, param_types, params, columns))).await;
            self.procedures.depth -= 1;
            result
        })
    }

    async fn run_call_inner(
        &mut self,
        plan: &CallPlan,
        param_types: &[DataType],
        params: Vec<Value>,
        columns: Option<Arc<Vec<ColumnInfo>>>,
    ) -> Result<StatementResult> {
        {
            let now = self.statement_time();
            let catalog = self.database().inner.engine.catalog();
            let target = match (plan.routine(&catalog), &plan.signature) {
                (Some(def), _) => Target::Routine(def.clone()),
                (None, None) => match self.database().native_procedure(&plan.name) {
                    Some(n) => Target::Native(n),
                    None => return Err(undefined("procedure", &plan.name, plan.args.len())),
                },
                // Dropped since the call was planned.
                (None, Some(signature)) => {
                    let kind = if plan.select { "function" } else { "procedure" };
                    return Err(Error::new(SqlState::UndefinedFunction, format!("{kind} {} does not exist", plpgsql::signature_text(&plan.name, signature.iter().map(PlType::name)))));
                }
            };
            drop(catalog);
            let (rows, notices) = match target {
                Target::Routine(def) => {
                    let r = &def.routine;
                    if r.params.len() != plan.args.len() {
                        return Err(undefined(r.kind(), &plan.name, plan.args.len()));
                    }
                    let args = routine_args(&def, &plan.args, param_types, &params, now)?;
                    let (rows, notices) = if computes_only(&def, &self.database().inner.engine.catalog()) {
                        // Nothing to run on a partition and nothing to undo: interpreted here.
                        self.count_call(&r.identity, false);
                        self.run_routine(def.clone(), args).await?
                    } else {
                        let one_job = self.run_routine_as_one_job(&def, &args).await;
                        self.count_call(&r.identity, !matches!(one_job, Ok(None)));
                        match one_job? {
                            Some(done) => done,
                            None => {
                                // A call nested in a controlling one controls too.
                                let controls = if self.in_block() { self.procedures.transaction_control } else { !r.function && !plan.select };
                                let def = def.clone();
                                self.controlling_transactions(controls, move |s| Box::pin(s.in_call_transaction(move |s| Box::pin(s.run_routine(def, args))))).await?
                            }
                        }
                    };
                    let returns_rows = plan.select || r.set.as_ref().is_some_and(|s| s.single);
                    (returns_rows.then(|| plan.shape_rows(r, rows)), notices)
                }
                Target::Native(native) => {
                    // Checked again: the procedure may have been registered anew since the plan.
                    if !native.takes(plan.args.len()) {
                        return Err(undefined("procedure", &plan.name, plan.args.len()));
                    }
                    let declared = native.params.as_deref().unwrap_or_default();
                    let args = plan
                        .args
                        .iter()
                        .enumerate()
                        .map(|(i, a)| native_arg(a, declared.get(i).copied(), param_types, &params, now))
                        .collect::<Result<Vec<_>>>()?;
                    let shape = native.clone();
                    let one_job = self.run_native_as_one_job(&native, &args).await;
                    self.count_call(&native.name, !matches!(one_job, Ok(None)));
                    let mut rows = match one_job? {
                        Some(rows) => rows,
                        None => self.in_call_transaction(|s| Box::pin(async move { s.run_native(&native, &args) })).await?,
                    };
                    if !shape.columns.is_empty() {
                        typed_rows(&plan.name, &mut rows, &shape.columns)?;
                    }
                    (columns.is_some().then_some(rows), vec![])
                }
            };
            Ok(match (rows, columns) {
                (Some(rows), Some(columns)) => StatementResult::rows(columns, RowStream::from_values(rows)).with_notices(notices),
                _ => StatementResult::command("CALL").with_notices(notices),
            })
        }
    }

    /// Runs `f` as one transaction if no block is open (committing it, or rolling it back on
    /// any error), or inside the open block.
    pub(crate) async fn in_call_transaction<T, F>(&mut self, f: F) -> Result<T>
    where
        F: for<'s> FnOnce(&'s mut Session) -> Pin<Box<dyn Future<Output = Result<T>> + Send + 's>>,
    {
        if self.in_block() {
            return f(self).await;
        }
        self.begin_block();
        let result = f(self).await;
        let Some(txn) = self.take_block() else { return Err(Error::internal("the call's transaction disappeared")) };
        let engine = self.database().inner.engine.clone();
        let sequences = self.sequences.clone();
        // A cursor a statement of the call declared closes with the call's transaction.
        self.cursors.block_ended(false);
        match result {
            Ok(v) => {
                txn_block::commit(&engine, txn, self.settings().synchronous_commit(), &sequences).await?;
                Ok(v)
            }
            Err(e) => {
                let _ = txn_block::rollback(&engine, txn, &sequences).await;
                Err(e)
            }
        }
    }

    fn run_native(&mut self, native: &NativeProcedure, args: &[Value]) -> Result<Vec<Vec<Value>>> {
        let body = native.body.clone();
        let mut cx = ProcedureContext { inner: ContextInner::Session(self) };
        body(&mut cx, args)
    }

    /// Counts an outermost call for `freshet_procedures` (nested calls are part of theirs).
    /// `one_job`: the call did not run statement by statement — it ran as one job, to its end
    /// or to an error that rolled the job back (an error is not retried the other way).
    fn count_call(&self, name: &str, one_job: bool) {
        if self.procedures.depth == 1 {
            let mut counts = self.database().inner.call_counts.lock();
            let c = counts.entry_ref(name).or_default();
            c.0 += 1;
            c.1 += one_job as u64;
        }
    }

    /// Whether a call may run as one executor job: outside a transaction block, in a session
    /// that uses the short path and does not default to read-only transactions.
    fn may_run_as_one_job(&self) -> bool {
        let settings = self.settings();
        !self.in_block() && settings.short_path() && !settings.default_read_only()
    }

    /// Whether a call whose job met another transaction's change may wait for it and run as
    /// a job again: with lock waits on (`freshet.lock_wait`) and no `lock_timeout`; otherwise
    /// it runs the ordinary way, whose statements wait (or not) as those settings say.
    fn may_wait_between_jobs(&self) -> bool {
        let settings = self.settings();
        settings.lock_wait() && settings.lock_timeout().is_none()
    }

    /// Runs a native call outside a transaction block as one executor job (see
    /// `freshet_core::engine::JobTxn`): `None` if it cannot — a block is open, the session
    /// defaults to read-only transactions or keeps to the analytical path, or the body gave
    /// up (a statement not prepared in this session yet, one that is not a short-path
    /// statement, one that would wait for a lock in every one of [`MAX_JOB_ATTEMPTS`]
    /// attempts, waiting for the lock's holder between them); the caller then runs it
    /// statement by statement, from the start.
    async fn run_native_as_one_job(&mut self, native: &Arc<NativeProcedure>, args: &[Value]) -> Result<Option<Vec<Vec<Value>>>> {
        if !self.may_run_as_one_job() {
            return Ok(None);
        }
        let sync = self.settings().synchronous_commit();
        let engine = self.database().inner.engine.clone();
        let now = now_micros();
        // With several partitions, the one the home argument names; without a home (or with
        // a NULL there) the job gives up at once and the call runs the ordinary way.
        let partition = native.home.and_then(|h| args.get(h)).filter(|v| !v.is_null()).map(|v| engine.partition_of_value(v));
        for attempt in 1.. {
            let statements = self.procedures.native_statements.clone();
            let catalog = engine.catalog();
            let (native, args) = (native.clone(), args.to_vec());
            let outcome = engine
                .run_as_one_job(sync, partition, move |job| {
                    let mut cx = ProcedureContext { inner: ContextInner::Job(JobContext { statements: &statements, job, now, catalog }) };
                    (native.body)(&mut cx, &args)
                })
                .await?;
            match self.after_job_attempt(outcome, attempt) {
                Ok(done) => return Ok(done),
                Err(holder) => engine.wait_for(None, holder).await?,
            }
        }
        Ok(None)
    }

    /// What follows attempt number `attempt` of a one-job call: `Ok` with its result (`None`:
    /// run the call the ordinary way), or `Err(holder)` to wait for the transaction `holder`
    /// its job met and run it as one job again ([`MAX_JOB_ATTEMPTS`] attempts in all).
    fn after_job_attempt<T>(&self, outcome: JobOutcome<T>, attempt: u32) -> std::result::Result<Option<T>, u64> {
        match outcome {
            JobOutcome::Blocked { holder } if attempt < MAX_JOB_ATTEMPTS && self.may_wait_between_jobs() => Err(holder),
            outcome => Ok(outcome.done()),
        }
    }

    /// The statement a native procedure runs, prepared once per session and text.
    pub(crate) async fn native_statement(&mut self, sql: &str, params: &[Value]) -> Result<Arc<crate::session::Prepared>> {
        if let Some(p) = self.procedures.native_statements.get(sql) {
            return Ok(p.clone());
        }
        let declared: Vec<Option<DataType>> = params.iter().map(Value::data_type).collect();
        let prepared = Box::pin(self.prepare(sql, &declared)).await?;
        Arc::make_mut(&mut self.procedures.native_statements).insert(sql.to_string(), prepared.clone());
        Ok(prepared)
    }

    /// The routine's statements prepared for this session (again after any catalog change).
    async fn compiled_call(&mut self, def: &ProcedureDef) -> Result<Arc<CompiledCall>> {
        let catalog = self.database().inner.engine.catalog();
        let version = catalog.version;
        if let Some(c) = self.procedures.routines.get(&def.id)
            && c.catalog_version == version
        {
            return Ok(c.clone());
        }
        // A routine with record or %TYPE variables is compiled again knowing the columns of
        // the statements that assign them, until every type is known (each round learns the
        // columns of statements whose own parameters became known in the round before).
        let mut routine = def.routine.clone();
        let mut prepared: HashMap<plpgsql::UnitKey, Arc<crate::session::Prepared>> = HashMap::new();
        let mut described = plpgsql::Described::default();
        let mut columns_of = std::collections::HashMap::new();
        loop {
            for (i, unit) in routine.sql.iter().enumerate().filter(|(_, u)| u.resolved) {
                let key = unit.key();
                if prepared.contains_key(&key) {
                    continue;
                }
                let p = if unit.spreads() {
                    // A statement with an array as a whole: its form for arrays of one element
                    // stands for it (its columns, the keys a loop prefetches).
                    let spreads = unit.params.iter().filter(|p| p.spreads()).count();
                    let form = routine.spread(i, &vec![Some(1); spreads])?;
                    let declared: Vec<Option<DataType>> = form.param_types.iter().copied().map(Some).collect();
                    Box::pin(self.prepare(&form.text, &declared)).await
                } else {
                    let declared: Vec<Option<DataType>> = unit.param_types.iter().copied().map(Some).collect();
                    Box::pin(self.prepare_statement(unit.statement.clone(), &key.0, &declared)).await
                };
                let p = p.map_err(|e| {
                    let message = format!("{} (in statement \"{}\" of {} {})", e.message, unit.text, routine.kind(), routine.name);
                    let mut e = e;
                    e.message = message;
                    e
                })?;
                let columns = p.columns.as_ref().map_or_else(Vec::new, |c| c.iter().map(|c| (c.name.clone(), c.ty)).collect());
                columns_of.insert(key.clone(), columns);
                prepared.insert(key, p);
            }
            let Some(why) = &routine.unresolved else { break };
            let learned = plpgsql::Described { columns: columns_of.clone(), assigners: routine.record_assigners.clone() };
            if learned == described {
                return Err(why.clone());
            }
            described = learned;
            routine = Arc::new(plpgsql::compile_with(&routine.source, &described)?);
        }
        let prepared = freshet_core::try_vec(
            routine.sql.iter().map(|u| prepared.get(&u.key()).cloned().ok_or_else(|| Error::internal(format!("statement \"{}\" of {} was not prepared", u.text, routine.name)))),
        )?;
        let home = plpgsql::home_parameter(&routine, &catalog);
        let anywhere = plpgsql::classify(&routine, &catalog) == plpgsql::Classification::Constrained { parameter: None };
        let call_outputs = routine.sql.iter().zip(&prepared).map(|(unit, p)| call_outputs(unit, p, &catalog)).collect();
        let compiled = Arc::new(CompiledCall { catalog_version: version, routine, prepared, home, anywhere, spread: Default::default(), call_outputs });
        let routines = Arc::make_mut(&mut self.procedures.routines);
        // What was prepared for an older catalog is prepared again when next called.
        routines.retain(|_, c| c.catalog_version == version);
        routines.insert(def.id, compiled.clone());
        Ok(compiled)
    }

    /// 54001 when calls already nest [`super::MAX_CALL_DEPTH`] deep.
    fn check_call_depth(&self) -> Result<()> {
        if self.procedures.depth >= super::MAX_CALL_DEPTH {
            return Err(Error::new(
                SqlState::custom("54001").unwrap_or(SqlState::ProgramLimitExceeded),
                format!("stack depth limit exceeded: calls nest more than {} deep", super::MAX_CALL_DEPTH),
            ));
        }
        Ok(())
    }

    /// Runs a `DO` block's routine (no parameters, no result) in the transaction block, or in
    /// a transaction of its own outside one; its notices.
    /// Boxed with an explicit `Send` type, as [`Self::run_call`] (the block's statements may
    /// run DO again).
    pub(crate) fn run_anonymous_block(&mut self, routine: Arc<plpgsql::Routine>) -> Pin<Box<dyn Future<Output = Result<Vec<Notice>>> + Send + '_>> {
        Box::pin(async move {
            self.check_call_depth()?;
            // An id no stored routine has: the session's compiled form of the previous block,
            // filed under the same name, is not taken for this one.
            self.procedures.anonymous_blocks += 1;
            let def = Arc::new(ProcedureDef { id: u64::MAX - self.procedures.anonymous_blocks, routine });
            self.procedures.depth += 1;
            let controls = !self.in_block() || self.procedures.transaction_control;
            let result =
                GrowStack(Box::pin(self.controlling_transactions(controls, move |s| Box::pin(s.in_call_transaction(move |s| Box::pin(s.run_routine(def, Vec::new()))))))).await;
            self.procedures.depth -= 1;
            Ok(result?.1)
        })
    }

    /// Runs `f` with [`SessionProcedures::transaction_control`] set to `controls` (put back
    /// after): whether COMMIT and ROLLBACK in the call's body may end the transaction it runs in.
    ///
    /// [`SessionProcedures::transaction_control`]: super::SessionProcedures::transaction_control
    async fn controlling_transactions<T, F>(&mut self, controls: bool, f: F) -> Result<T>
    where
        F: for<'s> FnOnce(&'s mut Session) -> Pin<Box<dyn Future<Output = Result<T>> + Send + 's>>,
    {
        let outer = std::mem::replace(&mut self.procedures.transaction_control, controls);
        let result = f(self).await;
        self.procedures.transaction_control = outer;
        result
    }

    /// COMMIT or ROLLBACK in a procedure's body (run statement by statement): ends the
    /// call's transaction and begins the next, with the session's defaults or, with `chain`,
    /// the characteristics of the one ended. Only a CALL or DO block that began its
    /// transaction, or a CALL it made outside its blocks with an EXCEPTION section, may (2D000
    /// otherwise, as in PostgreSQL).
    pub(crate) async fn end_call_transaction(&mut self, rollback: bool, chain: bool) -> Result<()> {
        // A CALL made inside a block with an EXCEPTION section runs atomically, as in
        // PostgreSQL: the same error.
        if !self.procedures.transaction_control || self.procedures.caller_in_subtransaction {
            return Err(invalid_termination("invalid transaction termination"));
        }
        let Some(txn) = self.take_block() else { return Ok(()) };
        let (isolation, read_only) = (txn.isolation, txn.read_only);
        let engine = self.database().inner.engine.clone();
        let sequences = self.sequences.clone();
        // A cursor a statement of the call declared closes with the transaction.
        self.cursors.block_ended(false);
        if rollback || txn.failed {
            txn_block::rollback(&engine, txn, &sequences).await?;
        } else {
            txn_block::commit(&engine, txn, self.settings().synchronous_commit(), &sequences).await?;
        }
        if chain {
            self.begin_block_as(isolation, read_only);
        } else {
            self.begin_block();
        }
        Ok(())
    }

    /// Runs a routine in this session, statement by statement.
    async fn run_routine(&mut self, def: Arc<ProcedureDef>, args: Vec<PlValue>) -> Result<(Vec<Vec<Value>>, Vec<Notice>)> {
        let compiled = self.compiled_call(&def).await?;
        let deadline = self.settings().statement_timeout().map(|t| std::time::Instant::now() + t);
        let now = self.statement_time();
        let sequences = self.sequences.clone();
        let mut failed = Vec::new();
        let result = interpret(&compiled, args, deadline, now, sequences, &mut InSession { session: self, in_try: false }, &mut failed).await;
        if result.is_err() {
            self.procedures.failed_notices = failed;
        }
        result
    }

    /// Runs a routine's call outside a transaction block as one executor job (see
    /// `freshet_core::engine::JobTxn`): `None` if it cannot (see
    /// [`Self::run_native_as_one_job`]; also a nested call gives the job up).
    async fn run_routine_as_one_job(&mut self, def: &Arc<ProcedureDef>, args: &[PlValue]) -> Result<Option<(Vec<Vec<Value>>, Vec<Notice>)>> {
        // A transaction a body ends runs statement by statement.
        if !self.may_run_as_one_job() || def.routine.ends_transactions() {
            return Ok(None);
        }
        let compiled = self.compiled_call(def).await?;
        let settings = self.settings();
        let (sync, deadline) = (settings.synchronous_commit(), settings.statement_timeout().map(|t| std::time::Instant::now() + t));
        let engine = self.database().inner.engine.clone();
        let now = now_micros();
        for attempt in 1.. {
            let outcome = self.run_routine_job(&engine, &compiled, args, sync, deadline, now).await?;
            match self.after_job_attempt(outcome, attempt) {
                Ok(done) => return Ok(done),
                Err(holder) => engine.wait_for(None, holder).await?,
            }
        }
        Ok(None)
    }

    /// One attempt of [`Self::run_routine_as_one_job`].
    async fn run_routine_job(
        &mut self,
        engine: &Arc<freshet_core::engine::Engine>,
        compiled: &Arc<CompiledCall>,
        args: &[PlValue],
        sync: bool,
        deadline: Option<std::time::Instant>,
        now: i64,
    ) -> Result<JobOutcome<(Vec<Vec<Value>>, Vec<Notice>)>> {
        let compiled = compiled.clone();
        let catalog = engine.catalog();
        let routines = self.procedures.routines.clone();
        let args = args.to_vec();
        let sequences = self.sequences.clone();
        // The notices of a call that fails (kept only if the job ends with its error rather
        // than giving up).
        let failed = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let failed_in_job = failed.clone();
        // On an engine with several partitions, the one the home parameter's value names; a
        // routine that reads replicated tables only runs on any, each session on its own.
        let partition = match compiled.home.and_then(|slot| args.get(slot)) {
            Some(PlValue::Scalar(v)) if !v.is_null() => Some(engine.partition_of_value(v)),
            _ if compiled.anywhere => Some(self.id() as usize % engine.partitions()),
            _ => None,
        };
        let outcome = engine
            .run_as_one_job(sync, partition, move |job| {
                let started = std::time::Instant::now();
                let mut statements = InJob { job, started, now, catalog, routines, deadline, depth: 1, sequences: sequences.clone() };
                sequences.enter_job();
                let mut notices = Vec::new();
                let result = interpret(&compiled, args, deadline, now, sequences.clone(), &mut statements, &mut notices).now_or_never();
                *failed_in_job.lock() = notices;
                // A call of an advisory lock function or pg_sleep gives the job up too.
                match (result, sequences.leave_job()) {
                    (Some(result), false) => result,
                    _ => Err(statements.job.give_up()),
                }
            })
            .await;
        if outcome.is_err() {
            self.procedures.failed_notices = std::mem::take(&mut *failed.lock());
        }
        outcome
    }
}

/// Where a routine's statement `unit`, if it is a CALL of a procedure with OUT or INOUT
/// parameters, puts their values: the variables given as those arguments.
fn call_outputs(unit: &plpgsql::SqlUnit, prepared: &crate::session::Prepared, catalog: &Catalog) -> super::CallOutputs {
    let Some(plan) = crate::session::call_plan(prepared).filter(|plan| !plan.select) else { return super::CallOutputs::None };
    let Some(def) = plan.routine(catalog) else { return super::CallOutputs::None };
    let r = &def.routine;
    let mut slots = Vec::with_capacity(r.outs.len());
    for (name, _) in &r.outs {
        let variable = r.params.iter().position(|(p, _)| p == name).and_then(|at| match plan.args.get(at) {
            Some(ast::Expr::Value(v)) => match &v.value {
                ast::Value::Placeholder(p) => match unit.params.get(p.trim_start_matches('$').parse::<usize>().ok()?.checked_sub(1)?) {
                    Some(&ParamSource::Var(slot)) => Some(slot),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        });
        match variable {
            Some(slot) => slots.push(slot),
            None => return super::CallOutputs::NotWritable(name.clone()),
        }
    }
    if slots.is_empty() { super::CallOutputs::None } else { super::CallOutputs::Slots(slots) }
}

/// Whether a function only computes: it runs no SQL (no statements, no dynamic SQL), has no
/// EXCEPTION blocks (their savepoints belong to a transaction) and calls no session function
/// (`in_query::reads_only` checks the last two). Such a call needs no executor job and no
/// transaction: the session interprets it where it is (a stored function in a query runs
/// once per argument list this way).
fn computes_only(def: &ProcedureDef, catalog: &Catalog) -> bool {
    let r = &def.routine;
    r.sql.is_empty() && r.handlers.is_empty() && r.unresolved.is_none() && super::in_query::reads_only(def, catalog, 0)
}

/// A call's future polled with room on the stack: a nested call polls the whole statement
/// path again inside its caller's poll, and in a debug build each level takes about half a
/// MiB of a thread's 2 MiB. When less than [`STACK_RED_ZONE`] is left, the poll runs on a new
/// stack segment of [`STACK_SEGMENT`] (`stacker`), so the depth a session can nest to does not
/// depend on the thread that polls it.
struct GrowStack<F>(Pin<Box<F>>);

const STACK_RED_ZONE: usize = 1024 * 1024;
const STACK_SEGMENT: usize = 4 * 1024 * 1024;

impl<F: Future> Future for GrowStack<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || self.0.as_mut().poll(cx))
    }
}

/// Where a routine's statements run: in the session, or in a one-job transaction.
trait RoutineStatements {
    async fn run(&mut self, prepared: &Arc<crate::session::Prepared>, params: &[Value]) -> Result<(Vec<Vec<Value>>, u64)>;

    /// Parses, plans and runs SQL text with `$n` parameters of these types (EXECUTE): its rows,
    /// row count and result columns.
    async fn run_text(&mut self, sql: &str, types: &[DataType], params: Vec<Value>) -> Result<TextResult>;

    /// Parses and plans SQL text with `$n` parameters of these types, to run with
    /// [`run`](Self::run).
    async fn prepare_text(&mut self, sql: &str, types: &[DataType]) -> Result<Arc<crate::session::Prepared>>;

    /// FETCH (`fetch`) or MOVE on the session's cursor `name`, a `refcursor` the routine did
    /// not open: the row a FETCH returns, and how many rows it passed.
    async fn fetch_portal(&mut self, name: &str, direction: FetchDirection, fetch: bool) -> Result<(Option<Vec<Value>>, u64)>;

    /// CLOSE of the session's cursor `name`.
    async fn close_portal(&mut self, name: &str) -> Result<()>;

    /// A savepoint for a block with an EXCEPTION section.
    async fn savepoint(&mut self) -> Result<RoutineSavepoint>;

    /// Undoes everything after `savepoint`: a handler caught an error.
    async fn rollback_to(&mut self, savepoint: &RoutineSavepoint) -> Result<()>;

    /// COMMIT or ROLLBACK in the body: ends the call's transaction and begins the next.
    async fn end_transaction(&mut self, rollback: bool, chain: bool) -> Result<()>;

    /// Whether the routine is now inside a block with an EXCEPTION section (told after each
    /// change).
    fn in_subtransaction(&mut self, _open: bool) {}

    /// The cursors the routine left open when it returned ([`Session::keep_portals`]). A job
    /// runs outside a transaction block, whose end closes them.
    fn keep_portals(&mut self, _portals: Vec<crate::cursor::Portal>) -> Result<()> {
        Ok(())
    }

    /// An error that ends the routine now, checked every 1,024 instructions.
    fn over_budget(&mut self) -> Option<Error> {
        None
    }

    /// Which parameters of `prepared` a [`prefetch`](Self::prefetch) of it would use (see
    /// `OltpPlan::key_params`): `None` if it would not prefetch it. The interpreter computes
    /// only those.
    fn key_params(&self, _prepared: &crate::session::Prepared) -> Option<u64> {
        None
    }

    /// A hint that these statements will run next with these parameters.
    fn prefetch(&mut self, _statements: &[(&Arc<crate::session::Prepared>, &[Value])]) {}
}

/// How many times a call runs as one job when each attempt meets another transaction's change
/// (waiting for that transaction to end in between) before it runs the ordinary way, statement
/// by statement, where its statements wait for locks themselves. Running the ordinary way
/// holds locks across several executor jobs, so under contention on one row the jobs of other
/// calls met them and gave up in turn; waiting and trying again keeps them jobs.
const MAX_JOB_ATTEMPTS: u32 = 4;

/// How long a routine may hold its partition inside one job before the job gives up and the
/// call runs statement by statement (where a long or endless loop holds only its session).
const JOB_BUDGET: std::time::Duration = std::time::Duration::from_millis(50);

struct InSession<'a> {
    session: &'a mut Session,
    /// Whether the routine is inside a block with an EXCEPTION section: a call it makes then
    /// may not end the transaction ([`RoutineStatements::in_subtransaction`]).
    in_try: bool,
}

impl InSession<'_> {
    /// Runs a statement of the routine, telling a routine it calls whether this one (or one
    /// that called it) is inside a block with an EXCEPTION section.
    async fn nested<T>(&mut self, f: impl for<'s> FnOnce(&'s mut Session) -> Pin<Box<dyn Future<Output = Result<T>> + Send + 's>>) -> Result<T> {
        let outer = self.session.procedures.caller_in_subtransaction;
        self.session.procedures.caller_in_subtransaction = outer || self.in_try;
        let result = f(self.session).await;
        self.session.procedures.caller_in_subtransaction = outer;
        result
    }
}

impl RoutineStatements for InSession<'_> {
    async fn run(&mut self, prepared: &Arc<crate::session::Prepared>, params: &[Value]) -> Result<(Vec<Vec<Value>>, u64)> {
        if !self.in_try {
            // Nothing to tell a routine this statement may call.
            return statement_rows(self.session, prepared, params.to_vec()).await;
        }
        let (prepared, params) = (prepared.clone(), params.to_vec());
        self.nested(move |s| Box::pin(async move { statement_rows(s, &prepared, params).await })).await
    }

    async fn run_text(&mut self, sql: &str, types: &[DataType], params: Vec<Value>) -> Result<TextResult> {
        let declared: Vec<Option<DataType>> = types.iter().copied().map(Some).collect();
        let sql = sql.to_string();
        self.nested(move |s| {
            Box::pin(async move {
                let prepared = Box::pin(s.prepare(&sql, &declared)).await?;
                let (rows, count) = Box::pin(statement_rows(s, &prepared, params)).await?;
                Ok((rows, count, prepared.columns.clone()))
            })
        })
        .await
    }

    fn in_subtransaction(&mut self, open: bool) {
        self.in_try = open;
    }

    async fn prepare_text(&mut self, sql: &str, types: &[DataType]) -> Result<Arc<crate::session::Prepared>> {
        let declared: Vec<Option<DataType>> = types.iter().copied().map(Some).collect();
        Box::pin(self.session.prepare(sql, &declared)).await
    }

    async fn fetch_portal(&mut self, name: &str, direction: FetchDirection, fetch: bool) -> Result<(Option<Vec<Value>>, u64)> {
        let statement = freshet_core::sql::parse::FetchStatement { move_only: !fetch, direction, cursor: name.to_string() };
        let result = self.session.fetch_cursor(&statement, None).await?;
        let (rows, passed) = super::output_rows(result.output).await?;
        Ok((rows.into_iter().next(), passed))
    }

    async fn close_portal(&mut self, name: &str) -> Result<()> {
        self.session.close_cursor(Some(name)).map(|_| ())
    }

    fn keep_portals(&mut self, portals: Vec<crate::cursor::Portal>) -> Result<()> {
        self.session.keep_portals(portals)
    }

    async fn savepoint(&mut self) -> Result<RoutineSavepoint> {
        self.session.routine_savepoint().await
    }

    async fn rollback_to(&mut self, savepoint: &RoutineSavepoint) -> Result<()> {
        self.session.routine_rollback_to(savepoint).await
    }

    async fn end_transaction(&mut self, rollback: bool, chain: bool) -> Result<()> {
        self.session.end_call_transaction(rollback, chain).await
    }
}

/// A routine's statements inside a one-job transaction. A nested call of a routine this
/// session has compiled runs inside the same job; any other gives the job up.
struct InJob<'a> {
    job: &'a mut dyn JobStatements,
    /// When the job started ([`JOB_BUDGET`]).
    started: std::time::Instant,
    now: i64,
    catalog: Arc<Catalog>,
    routines: Arc<HashMap<u64, Arc<CompiledCall>>>,
    deadline: Option<std::time::Instant>,
    /// Calls running, nested (the outermost is 1).
    depth: u32,
    sequences: Arc<crate::sequences::SessionSequences>,
}

impl RoutineStatements for InJob<'_> {
    fn over_budget(&mut self) -> Option<Error> {
        (self.started.elapsed() > JOB_BUDGET).then(|| self.job.give_up())
    }

    /// A job has no savepoints: a block with an EXCEPTION section runs the ordinary way.
    async fn savepoint(&mut self) -> Result<RoutineSavepoint> {
        Err(self.job.give_up())
    }

    async fn rollback_to(&mut self, _savepoint: &RoutineSavepoint) -> Result<()> {
        Err(self.job.give_up())
    }

    /// A job is one transaction: the call runs the ordinary way. (A routine that ends
    /// transactions does not start as a job; one it calls may.)
    async fn end_transaction(&mut self, _rollback: bool, _chain: bool) -> Result<()> {
        Err(self.job.give_up())
    }

    /// Dynamic SQL is parsed and planned by the session: the call runs the ordinary way.
    async fn run_text(&mut self, _sql: &str, _types: &[DataType], _params: Vec<Value>) -> Result<TextResult> {
        Err(self.job.give_up())
    }

    async fn prepare_text(&mut self, _sql: &str, _types: &[DataType]) -> Result<Arc<crate::session::Prepared>> {
        Err(self.job.give_up())
    }

    /// The session's cursors are the session's: the call runs the ordinary way.
    async fn fetch_portal(&mut self, _name: &str, _direction: FetchDirection, _fetch: bool) -> Result<(Option<Vec<Value>>, u64)> {
        Err(self.job.give_up())
    }

    async fn close_portal(&mut self, _name: &str) -> Result<()> {
        Err(self.job.give_up())
    }

    fn key_params(&self, prepared: &crate::session::Prepared) -> Option<u64> {
        let version = self.catalog.version;
        match crate::session::job_plan(prepared, version) {
            Some(plan) => plan.key_params(),
            None => crate::session::insert_plan(prepared, version)?.primary_key_exprs().map(|(_, params)| params),
        }
    }

    fn prefetch(&mut self, statements: &[(&Arc<crate::session::Prepared>, &[Value])]) {
        let version = self.catalog.version;
        let lookups: SmallVec<[(&Arc<freshet_core::sql::plan::OltpPlan>, &[Value]); 32]> = statements
            .iter()
            .filter_map(|&(prepared, params)| Some((crate::session::job_plan(prepared, version)?, params)))
            .collect();
        if !lookups.is_empty() {
            self.job.prefetch_plans(&lookups, self.now);
        }
        // The rows INSERTs will add: their primary keys' slots, which the uniqueness check
        // reads (a New-Order's order lines), looked up at once. A key that does not evaluate
        // without the session is left out. A loop's inserts repeat a statement or two: each
        // one's key expressions are found once.
        type KeyExprs<'e> = Option<SmallVec<[&'e Expr; 4]>>;
        let mut keys_of: SmallVec<[(*const crate::session::Prepared, KeyExprs); 4]> = SmallVec::new();
        let keys: SmallVec<[(&Arc<freshet_core::catalog::TableDef>, RecordRead); 16]> = statements
            .iter()
            .filter_map(|&(prepared, params)| {
                let plan = crate::session::insert_plan(prepared, version)?;
                let at = match keys_of.iter().position(|(p, _)| std::ptr::eq(*p, prepared.as_ref())) {
                    Some(at) => at,
                    None => {
                        keys_of.push((prepared.as_ref(), plan.primary_key_exprs().map(|(exprs, _)| exprs)));
                        keys_of.len() - 1
                    }
                };
                let exprs = keys_of[at].1.as_ref()?;
                let cx = EvalContext { params, now: self.now, session: None };
                let eq = exprs.iter().map(|e| e.eval(&NoRow, &cx).ok()).collect::<Option<Vec<_>>>()?;
                Some((&plan.table, RecordRead { eq, ..RecordRead::default() }))
            })
            .collect();
        if !keys.is_empty() {
            let reads: SmallVec<[(&Arc<freshet_core::catalog::TableDef>, &[RecordRead]); 16]> = keys.iter().map(|(table, read)| (*table, std::slice::from_ref(read))).collect();
            self.job.prefetch_records(&reads);
        }
    }

    async fn run(&mut self, prepared: &Arc<crate::session::Prepared>, params: &[Value]) -> Result<(Vec<Vec<Value>>, u64)> {
        let Some(plan) = crate::session::call_plan(prepared) else {
            return crate::session::run_in_job(prepared, params, self.now, self.catalog.version, self.job);
        };
        let def = plan.routine(&self.catalog).cloned();
        let compiled = def.as_ref().and_then(|d| self.routines.get(&d.id).filter(|c| c.catalog_version == self.catalog.version).cloned());
        let (Some(def), Some(compiled)) = (def, compiled) else { return Err(self.job.give_up()) };
        if self.depth >= super::MAX_CALL_DEPTH || def.routine.params.len() != plan.args.len() {
            // The ordinary path reports it.
            return Err(self.job.give_up());
        }
        let args = routine_args(&def, &plan.args, &prepared.param_types, params, self.now)?;
        self.depth += 1;
        let deadline = self.deadline;
        let sequences = self.sequences.clone();
        let result = Box::pin(interpret(&compiled, args, deadline, self.now, sequences, self, &mut Vec::new())).await;
        self.depth -= 1;
        // Notices of a nested call are dropped, as the ordinary path drops them.
        let (rows, _) = result?;
        let rows = match () {
            _ if plan.select => plan.shape_rows(&def.routine, rows),
            // A procedure's OUT and INOUT values, for the caller's variables.
            _ if !def.routine.outs.is_empty() => rows,
            _ => Vec::new(),
        };
        let count = rows.len() as u64;
        Ok((rows, count))
    }
}

/// The interpreter: runs the routine's instructions with its statements prepared in
/// `compiled`; returns the function's result rows (see [`result_rows`]) and the notices RAISE
/// NOTICE produced.
async fn interpret<S: RoutineStatements>(
    compiled: &CompiledCall,
    args: Vec<PlValue>,
    deadline: Option<std::time::Instant>,
    now: i64,
    sequences: Arc<crate::sequences::SessionSequences>,
    statements: &mut S,
    failed: &mut Vec<Notice>,
) -> Result<(Vec<Vec<Value>>, Vec<Notice>)> {
    let r = &compiled.routine;
    if r.strict && args.iter().any(|a| matches!(a, PlValue::Scalar(Value::Null) | PlValue::Array(None))) {
        // STRICT: NULL in, NULL out, the body not run.
        let nulls = match &r.set {
            Some(set) if set.single => vec![vec![Value::Null; set.columns.len()]],
            Some(_) => Vec::new(),
            None => result_rows(r, None, Vec::new()),
        };
        return Ok((nulls, Vec::new()));
    }
    let vars = Vars::new(r, args);
    let mut st = Interp {
        vars,
        notices: Vec::new(),
        out: Vec::new(),
        cursors: (0..r.cursors).map(|_| Rows::default()).collect(),
        opened: vec![CursorState::Never; r.cursors],
        pc: 0,
        steps: 0,
        now,
        tries: Vec::new(),
        sequences,
        params: Vec::new(),
    };
    let ran = match run_with_handlers(compiled, deadline, statements, &mut st).await {
        // The cursors OPEN left open stay open for the caller.
        Ok(rows) => statements.keep_portals(open_portals(&mut st)).map(|()| rows),
        Err(e) => Err(e),
    };
    match ran {
        Ok(rows) => Ok((rows, st.notices)),
        Err(e) => {
            // What was raised before the error still reaches the client, before it.
            *failed = std::mem::take(&mut st.notices);
            let pc = st.pc.saturating_sub(1);
            // `RAISE;` raises the caught error with the context it had.
            if matches!(r.code.get(pc), Some(Instr::Raise { .. })) && e.context.is_some() {
                return Err(e);
            }
            Err(in_context(r, pc, e))
        }
    }
}

/// `e` with the CONTEXT lines of the instruction `pc` it came from: the SQL statement, if it is
/// one, then the routine and the line, as PostgreSQL writes them.
fn in_context(r: &plpgsql::Routine, pc: usize, e: Error) -> Error {
    let e = match r.code.get(pc) {
        // (A CALL's line says CALL, as PostgreSQL's does, without the statement.)
        Some(Instr::Sql(i) | Instr::QueryOpen { sql: i, .. } | Instr::CursorOpen { sql: i, .. } | Instr::ReturnQuery(i))
            if !r.sql[*i].expression && !matches!(r.sql[*i].statement, ast::Statement::Call(_)) =>
        {
            e.within(format!("SQL statement \"{}\"", r.sql[*i].text.trim()))
        }
        _ => e,
    };
    let types: Vec<String> = r.params.iter().map(|(_, t)| t.name()).collect();
    let function = if r.name == plpgsql::parser::ANONYMOUS_BLOCK && !r.function && r.params.is_empty() {
        // A DO block, as PostgreSQL names it.
        format!("PL/pgSQL function {}", r.name)
    } else {
        format!("PL/pgSQL function {}({})", r.name, types.join(","))
    };
    match r.lines.get(pc).copied().flatten() {
        Some((line, kind)) => e.within(format!("{function} line {line} at {kind}")),
        None => e.within(function),
    }
}

/// Runs the routine from the start, continuing in the handler that catches an error.
async fn run_with_handlers<S: RoutineStatements>(
    compiled: &CompiledCall,
    deadline: Option<std::time::Instant>,
    statements: &mut S,
    st: &mut Interp,
) -> Result<Vec<Vec<Value>>> {
    let r = &compiled.routine;
    loop {
        let e = match run_instructions(r, compiled, deadline, statements, st).await {
            Ok(rows) => return Ok(rows),
            Err(e) => e,
        };
        // Cancellation (a timeout, or a one-job run giving up), serialization failures and
        // deadlocks end the call: the client retries it whole.
        if matches!(e.state.code(), "57014" | "40001" | "40P01") {
            return Err(e);
        }
        let code = e.state.code().to_string();
        let mut caught = None;
        while let Some((savepoint, table)) = st.tries.pop() {
            statements.rollback_to(&savepoint).await?;
            if let Some(h) = r.handlers[table].iter().find(|h| h.catches(&code)) {
                caught = Some(h);
                break;
            }
        }
        statements.in_subtransaction(!st.tries.is_empty());
        let Some(h) = caught else { return Err(e) };
        let context = in_context(r, st.pc.saturating_sub(1), Error::new(e.state, "")).into_fields().context;
        let e = e.into_fields();
        let context = match (e.context, context) {
            (Some(inner), Some(here)) => Some(format!("{inner}\n{here}")),
            (inner, here) => inner.or(here),
        };
        st.vars.set(h.context, context.map_or(Value::Null, Value::Text));
        st.vars.set(h.sqlstate, Value::Text(code));
        st.vars.set(h.sqlerrm, Value::Text(e.message));
        st.vars.set(h.detail, e.detail.map_or(Value::Null, Value::Text));
        st.vars.set(h.hint, e.hint.map_or(Value::Null, Value::Text));
        st.pc = h.target;
    }
}

/// Whether a cursor variable's cursor is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CursorState {
    Never,
    /// By OPEN: a COMMIT or ROLLBACK closes it.
    Open,
    /// By a cursor FOR loop, which holds it across a COMMIT.
    InLoop,
    Closed,
}

impl CursorState {
    fn is_open(self) -> bool {
        matches!(self, CursorState::Open | CursorState::InLoop)
    }
}

/// A query loop's or cursor variable's rows (all of them, read when it opened) and its
/// position: 0 before the first row, k on row k, `rows.len() + 1` after the last; a query
/// loop's stays on its last row at the end, so that it is the number of rows it assigned.
#[derive(Default)]
struct Rows {
    rows: Vec<Vec<Value>>,
    pos: usize,
    /// A cursor variable's: FETCH may read a row again, so the loop over it copies each
    /// row; a query loop's takes them.
    keep: bool,
    /// A cursor variable may move back.
    scroll: bool,
    /// A cursor variable's portal name (the variable's value when it opened) and its
    /// statement's columns: what it stays open as when the routine returns.
    portal: String,
    columns: Option<Arc<Vec<ColumnInfo>>>,
}

/// Dynamic SQL's rows, row count and result columns.
type TextResult = (Vec<Vec<Value>>, u64, Option<Arc<Vec<ColumnInfo>>>);

impl Rows {
    fn new(rows: Vec<Vec<Value>>) -> Rows {
        Rows { rows, ..Rows::default() }
    }

    /// The next row, for a loop.
    fn next(&mut self) -> Option<Vec<Value>> {
        let row = self.rows.get_mut(self.pos)?;
        self.pos += 1;
        Some(if self.keep { row.clone() } else { std::mem::take(row) })
    }
}

/// The cursor move a FETCH or MOVE's direction means, its count evaluated: a count that is
/// NULL is 22004; a negative one turns the direction around, and 0 stays on the row (as
/// PostgreSQL's portals take them).
fn fetch_direction(step: &FetchStep, vars: &Vars, now: Clock<'_>) -> Result<FetchDirection> {
    use FetchDirection::{Absolute, Backward, Forward, Relative};
    let count = |e: &ExprUnit| -> Result<i64> {
        match eval(e, vars, now)? {
            Value::Null => Err(Error::new(SqlState::custom("22004").unwrap_or(SqlState::InvalidParameterValue), "relative or absolute cursor position is null")),
            v => v.as_i64().ok_or_else(|| Error::mismatch(format!("a cursor position must be an integer, not {v:?}"))),
        }
    };
    Ok(match step {
        FetchStep::Next => Forward(1),
        FetchStep::Prior => Backward(1),
        FetchStep::First => Absolute(1),
        FetchStep::Last => Absolute(-1),
        FetchStep::Absolute(e) => Absolute(count(e)?),
        FetchStep::Relative(e) => Relative(count(e)?),
        FetchStep::Forward(e) => FetchDirection::ahead(count(e)?),
        FetchStep::Backward(e) => FetchDirection::back(count(e)?),
        FetchStep::ForwardAll => Forward(FETCH_ALL),
        FetchStep::BackwardAll => Backward(FETCH_ALL),
    })
}

/// The numbers of the portal names OPEN makes up for a `refcursor` that is NULL.
static UNNAMED_PORTALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The cursors OPEN opened that are open still, as portals ([`crate::cursor::Portal`]).
fn open_portals(st: &mut Interp) -> Vec<crate::cursor::Portal> {
    let mut portals = Vec::new();
    for (state, rows) in st.opened.iter().zip(st.cursors.iter_mut()) {
        if *state != CursorState::Open {
            continue;
        }
        let rows = std::mem::take(rows);
        let Some(columns) = rows.columns else { continue };
        portals.push(crate::cursor::Portal { name: rows.portal, columns, rows: rows.rows, pos: rows.pos as u64, scroll: rows.scroll });
    }
    portals
}

/// The portal an OPEN of cursor variable `var` (the interpreter's cursor `cursor`) opens: the
/// variable's value, or a name made up and assigned to it; 42P03 naming it if the variable's
/// cursor is open, or another open one has the name.
fn portal_name(opened: &[CursorState], cursors: &[Rows], cursor: usize, var: usize, vars: &mut Vars) -> Result<String> {
    let portal = match vars.scalar(var)? {
        Value::Null => {
            let made = format!("<unnamed portal {}>", UNNAMED_PORTALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1);
            vars.set(var, Value::Text(made.clone()));
            made
        }
        v => v.as_str().map(str::to_string).ok_or_else(|| Error::internal("a cursor variable holds no text"))?,
    };
    if opened[cursor].is_open() || opened.iter().zip(cursors).any(|(state, rows)| state.is_open() && rows.portal == portal) {
        return Err(Error::new(SqlState::DuplicateCursor, format!("cursor \"{portal}\" already in use")));
    }
    Ok(portal)
}

/// The name of the session's cursor that a `refcursor` the routine did not open names (22004
/// if it is NULL).
fn session_portal(vars: &Vars, var: usize, name: &str) -> Result<String> {
    match vars.scalar(var)? {
        Value::Null => Err(Error::new(SqlState::custom("22004").unwrap_or(SqlState::InvalidParameterValue), format!("cursor variable \"{name}\" is null"))),
        v => v.as_str().map(str::to_string).ok_or_else(|| Error::internal("a cursor variable holds no text")),
    }
}

/// 34000: FETCH, MOVE or CLOSE of a cursor that is not open.
fn cursor_missing(name: &str) -> Error {
    Error::new(SqlState::custom("34000").unwrap_or(SqlState::InvalidParameterValue), format!("cursor \"{name}\" does not exist"))
}

/// 2D000: COMMIT or ROLLBACK where the transaction may not end.
fn invalid_termination(message: &str) -> Error {
    Error::new(SqlState::custom("2D000").unwrap_or(SqlState::InvalidTransactionState), message)
}

/// A running routine's state, kept across an error that a handler catches.
struct Interp {
    vars: Vars,
    notices: Vec<Notice>,
    /// A set-returning function's rows so far.
    out: Vec<Vec<Value>>,
    /// Per query loop and cursor variable: its rows and where it is among them.
    cursors: Vec<Rows>,
    /// Per cursor: whether OPEN (or a cursor loop) opened it and it is open still
    /// ([`CursorState`]).
    opened: Vec<CursorState>,
    pc: usize,
    steps: u32,
    now: i64,
    /// Blocks with an EXCEPTION section entered and not left: savepoint and handler table.
    tries: Vec<(RoutineSavepoint, usize)>,
    sequences: Arc<crate::sequences::SessionSequences>,
    /// The parameters of the statement about to run, filled again for each (one list for
    /// the whole call rather than one per statement).
    params: Vec<Value>,
}

/// Fills `params` with the values of a statement's parameters.
fn fill_params(params: &mut Vec<Value>, sources: &[ParamSource], vars: &Vars, now: Clock) -> Result<()> {
    params.clear();
    params.reserve(sources.len());
    for p in sources {
        params.push(match p {
            // A scalar variable, as most parameters are: its value, read where it is.
            &ParamSource::Var(slot) if !vars.is_array[slot] => vars.scalars[slot].clone(),
            p => source_value(p, vars, now)?,
        });
    }
    Ok(())
}

/// Runs statement `i` of the routine with its parameters' values (filled into `params`): as
/// prepared, or if it compares with an array variable's elements (`x = ANY(ids)`), in its
/// form for the arrays' lengths now, planned the first time a length needs it
/// ([`plpgsql::Routine::spread`]).
async fn run_unit<S: RoutineStatements>(
    compiled: &CompiledCall,
    i: usize,
    vars: &Vars,
    now: Clock<'_>,
    params: &mut Vec<Value>,
    statements: &mut S,
) -> Result<(Vec<Vec<Value>>, u64)> {
    let unit = &compiled.routine.sql[i];
    fill_params(params, &unit.params, vars, now)?;
    if !unit.spreads() {
        return statements.run(&compiled.prepared[i], params).await;
    }
    let lengths: Vec<Option<usize>> = unit
        .params
        .iter()
        .filter_map(|p| match p {
            ParamSource::Quantified { array, .. } | ParamSource::WholeArray { array } => Some(vars.array(*array).map(|items| plpgsql::spread::form_length(p, items.len()))),
            _ => None,
        })
        .collect();
    let key = (i, lengths);
    let known = compiled.spread.lock().unwrap_or_else(|e| e.into_inner()).get(&key).cloned();
    let form = match known {
        Some(form) => form,
        None => {
            let spread = compiled.routine.spread(i, &key.1)?;
            let prepared = statements.prepare_text(&spread.text, &spread.param_types).await?;
            let form = Arc::new(super::SpreadForm { prepared, blocks: spread.blocks });
            let mut forms = compiled.spread.lock().unwrap_or_else(|e| e.into_inner());
            if forms.len() < super::MAX_SPREAD_FORMS {
                forms.insert(key, form.clone());
            }
            form
        }
    };
    for &(array, count) in &form.blocks {
        let items = vars.array(array).map(Vec::as_slice).unwrap_or_default();
        params.extend((0..count).map(|k| items.get(k).or(items.last()).cloned().unwrap_or(Value::Null)));
    }
    statements.run(&form.prepared, params).await
}

/// Runs instructions from `st.pc` until the routine returns (its result rows) or fails.
async fn run_instructions<S: RoutineStatements>(
    r: &plpgsql::Routine,
    compiled: &CompiledCall,
    deadline: Option<std::time::Instant>,
    statements: &mut S,
    st: &mut Interp,
) -> Result<Vec<Vec<Value>>> {
    let Interp { vars, notices, out, cursors, opened, pc, steps, now, tries, sequences, params } = st;
    let sequences = sequences.clone();
    let now = Clock { at: *now, sequences: Some(&*sequences) };
    while let Some(instr) = r.code.get(*pc) {
        *pc += 1;
        *steps = steps.wrapping_add(1);
        if steps.is_multiple_of(1024) && let Some(e) = statements.over_budget() {
            return Err(e);
        }
        if steps.is_multiple_of(1024) && deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(Error::new(SqlState::QueryCanceled, "canceling statement due to statement timeout"));
        }
        match instr {
            Instr::Init { slot, value } => {
                let v = match value {
                    Some(e) => eval(e, vars, now)?.cast(slot_type(r.slots[*slot].ty))?,
                    None if *slot == r.found => Value::Bool(false),
                    None => Value::Null,
                };
                vars.set(*slot, v);
            }
            Instr::Assign { slot, value } => {
                let v = eval(value, vars, now)?.cast(slot_type(r.slots[*slot].ty))?;
                vars.set(*slot, v);
            }
            Instr::ArrayAssign { slot, value } => {
                vars.arrays[*slot] = array_value(value, slot_type(r.slots[*slot].ty), vars, now)?;
            }
            Instr::ElementAssign { array, index, value } => {
                let index = eval(index, vars, now)?;
                let value = eval(value, vars, now)?.cast(slot_type(r.slots[*array].ty))?;
                assign_element(&mut vars.arrays[*array], index, value)?;
            }
            Instr::Sql(i) => {
                let unit = &r.sql[*i];
                let outputs = &compiled.call_outputs[*i];
                if let super::CallOutputs::NotWritable(name) = outputs {
                    return Err(Error::syntax(format!("procedure parameter \"{name}\" is an output parameter but corresponding argument is not writable")));
                }
                let (rows, count) = run_unit(compiled, *i, vars, now, params, statements).await?;
                if !unit.expression {
                    vars.set_status(r, count);
                }
                if !unit.into.is_empty() {
                    assign_into(r, vars, rows, &unit.into, unit.strict)?;
                } else if let super::CallOutputs::Slots(slots) = outputs
                    && let Some(row) = rows.into_iter().next()
                {
                    // A CALL's OUT and INOUT values, into the variables given for them.
                    for (slot, v) in slots.iter().zip(row) {
                        vars.set(*slot, v.cast(slot_type(r.slots[*slot].ty))?);
                    }
                }
            }
            Instr::Execute(x) => {
                let (rows, count, _) = run_dynamic(x, vars, now, statements).await?;
                // EXECUTE changes ROW_COUNT, not FOUND (as in PostgreSQL).
                vars.set(r.row_count, Value::Int64(count as i64));
                if x.query {
                    append_query_rows(r, out, rows)?;
                    vars.set(r.found, Value::Bool(count > 0));
                } else if !x.into.is_empty() {
                    assign_into(r, vars, rows, &x.into, x.strict)?;
                }
            }
            Instr::Jump(t) => *pc = *t,
            Instr::JumpIfNot { cond, target } => {
                if eval(cond, vars, now)? != Value::Bool(true) {
                    *pc = *target;
                }
            }
            Instr::JumpIf { cond, target } => {
                if eval(cond, vars, now)? == Value::Bool(true) {
                    *pc = *target;
                }
            }
            Instr::RangeInit { var, hi, step, bounds } => {
                let lo = int_value(eval(&bounds.lo, vars, now)?, "lower bound")?;
                let h = int_value(eval(&bounds.hi, vars, now)?, "upper bound")?;
                let s = match &bounds.step {
                    Some(e) => int_value(eval(e, vars, now)?, "BY value")?,
                    None => 1,
                };
                if s <= 0 {
                    return Err(Error::new(SqlState::InvalidParameterValue, "BY value of FOR loop must be greater than zero"));
                }
                vars.set(*var, Value::Int32(lo.clamp(i32::MIN as i64, i32::MAX as i64) as i32));
                vars.set(*hi, Value::Int64(h));
                vars.set(*step, Value::Int64(s));
                if !bounds.prefetch.is_empty() {
                    // The compiler puts the loop's test right after its start.
                    let reverse = matches!(r.code.get(*pc), Some(Instr::RangeTest { reverse: true, .. }));
                    let range = LoopRange { var: *var, lo, hi: h, step: s, reverse };
                    prefetch_loop(r, compiled, &bounds.prefetch, range, vars, now.at, statements);
                }
            }
            Instr::RangeTest { var, hi, reverse, exit } => {
                let v = vars.scalar(*var)?.as_i64().unwrap_or(0);
                let h = vars.scalar(*hi)?.as_i64().unwrap_or(0);
                if (!reverse && v > h) || (*reverse && v < h) {
                    *pc = *exit;
                }
            }
            Instr::RangeNext { var, step, reverse } => {
                let v = vars.scalar(*var)?.as_i64().unwrap_or(0);
                let s = vars.scalar(*step)?.as_i64().unwrap_or(1);
                let next = if *reverse { v - s } else { v + s };
                vars.set(*var, Value::Int32(next.clamp(i32::MIN as i64, i32::MAX as i64) as i32));
            }
            Instr::ForeachInit { idx } => vars.set(*idx, Value::Int64(0)),
            Instr::ForeachNext { array, idx, var, exit } => {
                let i = vars.scalar(*idx)?.as_i64().unwrap_or(0) as usize;
                if !vars.is_array[*array] {
                    return Err(Error::mismatch("FOREACH expression must yield an array"));
                }
                let item = match vars.array(*array) {
                    None => {
                        return Err(Error::new(SqlState::custom("22004").unwrap_or(SqlState::InvalidParameterValue), "FOREACH expression must not be null"))
                    }
                    Some(items) => items.get(i).cloned(),
                };
                match item {
                    None => *pc = *exit,
                    Some(v) => {
                        vars.set(*var, v.cast(slot_type(r.slots[*var].ty))?);
                        vars.set(*idx, Value::Int64(i as i64 + 1));
                    }
                }
            }
            Instr::ArrayQuery { slot, sql, null_if_empty, sets_found } => {
                let (rows, _) = run_unit(compiled, *sql, vars, now, params, statements).await?;
                let PlType::Array(elem) = r.slots[*slot].ty else { return Err(Error::internal("an array query into a scalar variable")) };
                if rows.first().is_some_and(|row| row.len() != 1) {
                    return Err(Error::syntax("subquery must return only one column"));
                }
                let elements = rows.into_iter().map(|row| row.into_iter().next().unwrap_or(Value::Null).cast(elem)).collect::<Result<Vec<_>>>()?;
                vars.arrays[*slot] = if elements.is_empty() && *null_if_empty { None } else { Some(elements) };
                if *sets_found {
                    vars.set_status(r, 1);
                }
            }
            Instr::ExecuteOpen { exec, cursor } => {
                let (rows, _, _) = run_dynamic(exec, vars, now, statements).await?;
                cursors[*cursor] = Rows::new(rows);
            }
            Instr::QueryOpen { sql, cursor } => {
                let (rows, _) = run_unit(compiled, *sql, vars, now, params, statements).await?;
                cursors[*cursor] = Rows::new(rows);
            }
            Instr::QueryNext { cursor, targets, exit } => {
                match cursors[*cursor].next() {
                    None => *pc = *exit,
                    Some(row) => {
                        let mut row = row.into_iter();
                        for slot in targets {
                            let v = row.next().unwrap_or(Value::Null);
                            vars.set(*slot, v.cast(slot_type(r.slots[*slot].ty))?);
                        }
                    }
                }
            }
            Instr::QueryClose { cursor } => {
                let seen = std::mem::take(&mut cursors[*cursor]).pos;
                vars.set(r.found, Value::Bool(seen > 0));
                if opened[*cursor].is_open() {
                    opened[*cursor] = CursorState::Closed;
                }
            }
            Instr::CursorOpen { sql, cursor, var, in_loop, scroll } => {
                let Some(scroll) = *scroll else {
                    return Err(Error::new(SqlState::FeatureNotSupported, "DECLARE SCROLL CURSOR ... FOR UPDATE/SHARE is not supported").with_detail("Scrollable cursors must be READ ONLY."));
                };
                let portal = portal_name(opened, cursors, *cursor, *var, vars)?;
                let (rows, _) = run_unit(compiled, *sql, vars, now, params, statements).await?;
                cursors[*cursor] = Rows { rows, pos: 0, keep: true, scroll, portal, columns: compiled.prepared[*sql].columns.clone() };
                opened[*cursor] = if *in_loop { CursorState::InLoop } else { CursorState::Open };
            }
            Instr::CursorOpenExecute { exec, cursor, var, scroll } => {
                let portal = portal_name(opened, cursors, *cursor, *var, vars)?;
                let (rows, _, columns) = run_dynamic(exec, vars, now, statements).await?;
                cursors[*cursor] = Rows { rows, pos: 0, keep: true, scroll: *scroll, portal, columns };
                opened[*cursor] = CursorState::Open;
            }
            Instr::CursorFetch { cursor, var, targets, assign, name, bound, direction } => {
                match opened[*cursor] {
                    CursorState::Open | CursorState::InLoop => {}
                    CursorState::Never if !bound => {
                        // The session's cursor the refcursor's value names (the caller's).
                        let portal = session_portal(vars, *var, name)?;
                        let direction = fetch_direction(direction, vars, now)?;
                        let (row, passed) = statements.fetch_portal(&portal, direction, *assign).await?;
                        vars.set_status(r, passed);
                        let mut row = row.unwrap_or_default().into_iter();
                        for slot in targets {
                            let v = row.next().unwrap_or(Value::Null);
                            vars.set(*slot, v.cast(slot_type(r.slots[*slot].ty))?);
                        }
                        continue;
                    }
                    _ => return Err(cursor_missing(name)),
                }
                let direction = fetch_direction(direction, vars, now)?;
                let rows = &mut cursors[*cursor];
                let (pos, len) = (rows.pos as u64, rows.rows.len() as u64);
                if !rows.scroll && crate::cursor::goes_back(pos, pos >= 1 && pos <= len, direction) {
                    return Err(crate::cursor::only_forward());
                }
                let (pos, passed) = crate::cursor::step(pos, len, direction);
                rows.pos = pos as usize;
                vars.set_status(r, passed);
                if *assign {
                    let row = if passed > 0 { rows.rows.get(rows.pos.wrapping_sub(1)).cloned() } else { None };
                    let mut row = row.unwrap_or_default().into_iter();
                    for slot in targets {
                        let v = row.next().unwrap_or(Value::Null);
                        vars.set(*slot, v.cast(slot_type(r.slots[*slot].ty))?);
                    }
                }
            }
            Instr::CursorClose { cursor, var, bound, name } => {
                if opened[*cursor] == CursorState::Never && !bound {
                    let portal = session_portal(vars, *var, name)?;
                    statements.close_portal(&portal).await?;
                    continue;
                }
                if !opened[*cursor].is_open() {
                    return Err(cursor_missing(name));
                }
                cursors[*cursor] = Rows::default();
                opened[*cursor] = CursorState::Closed;
            }
            Instr::Return(value) => {
                let v = match (value, r.returns) {
                    (Some(e), Some(t)) => Some(eval(e, vars, now)?.cast(slot_type(t))?),
                    _ => None,
                };
                return Ok(result_rows(r, v, std::mem::take(out)));
            }
            Instr::ReturnArray { array } => {
                let PlType::Array(elem) = r.slots[*array].ty else { return Err(Error::internal("RETURN of an array from a scalar slot")) };
                let v = vars.array(*array).map_or(Value::Null, |items| Value::Text(plpgsql::array_text(items, elem)));
                return Ok(result_rows(r, Some(v), std::mem::take(out)));
            }
            Instr::TryEnter { table } => {
                let savepoint = statements.savepoint().await?;
                tries.push((savepoint, *table));
                statements.in_subtransaction(true);
            }
            Instr::TryExit => {
                tries.pop();
                statements.in_subtransaction(!tries.is_empty());
            }
            Instr::EndTransaction { rollback, chain } => {
                if r.function {
                    return Err(invalid_termination("invalid transaction termination"));
                }
                if !tries.is_empty() {
                    return Err(invalid_termination(if *rollback { "cannot roll back while a subtransaction is active" } else { "cannot commit while a subtransaction is active" }));
                }
                statements.end_transaction(*rollback, *chain).await?;
                // The cursors OPEN opened close with the transaction, as PostgreSQL's portals do
                // (a cursor FOR loop's are held open).
                for (state, rows) in opened.iter_mut().zip(cursors.iter_mut()) {
                    if *state == CursorState::Open {
                        *state = CursorState::Closed;
                        *rows = Rows::default();
                    }
                }
            }
            Instr::ReturnNext(value) => {
                let columns = r.set_columns();
                let row = match value {
                    Some(e) => vec![eval(e, vars, now)?.cast(columns.first().map_or(DataType::Text, |c| c.1))?],
                    None => r.table_slots.iter().map(|&slot| vars.scalar(slot).cloned()).collect::<Result<Vec<_>>>()?,
                };
                out.push(row);
            }
            Instr::ReturnNextRow(slots) => {
                let columns = r.set_columns();
                if slots.len() != columns.len() {
                    return Err(Error::mismatch("wrong record type supplied in RETURN NEXT").with_detail(format!(
                        "Number of returned columns ({}) does not match expected column count ({}).",
                        slots.len(),
                        columns.len()
                    )));
                }
                out.push(freshet_core::try_vec(slots.iter().zip(columns).map(|(s, (_, ty))| vars.scalar(*s)?.clone().cast(*ty)))?);
            }
            Instr::ReturnQuery(sql) => {
                let (rows, count) = run_unit(compiled, *sql, vars, now, params, statements).await?;
                append_query_rows(r, out, rows)?;
                vars.set(r.found, Value::Bool(count > 0));
            }
            Instr::Raise { level, format, args, options } => {
                let texts = args
                    .iter()
                    .map(|a| Ok(eval(a, vars, now)?.to_text(a.ty).unwrap_or_else(|| "<NULL>".into())))
                    .collect::<Result<Vec<_>>>()?;
                let mut message = format.as_deref().map(|f| format_raise(f, &texts));
                let mut state = SqlState::RaiseException;
                let (mut detail, mut hint, mut context) = (None, None, None);
                for (name, e) in options {
                    // A NULL option is as if not given (`RAISE;` of an error without detail).
                    let Some(text) = eval(e, vars, now)?.to_text(e.ty) else { continue };
                    match name.as_str() {
                        "errcode" => state = errcode(&text)?,
                        "message" => message = Some(text),
                        "detail" => detail = Some(text),
                        "context" => context = Some(text),
                        _ => hint = Some(text),
                    }
                }
                let message = message.unwrap_or_else(|| state.code().to_string());
                let severity = match level {
                    RaiseLevel::Exception => None,
                    RaiseLevel::Warning => Some(NoticeSeverity::Warning),
                    RaiseLevel::Notice => Some(NoticeSeverity::Notice),
                    RaiseLevel::Info => Some(NoticeSeverity::Info),
                    RaiseLevel::Quiet => continue,
                };
                if let Some(severity) = severity {
                    notices.push(Notice { severity, message });
                    continue;
                }
                let mut err = Error::new(state, message);
                err.detail = detail;
                err.hint = hint;
                err.context = context;
                return Err(err);
            }
        }
    }
    if r.function && r.returns.is_some() {
        return Err(Error::new(
            SqlState::custom("2F005").unwrap_or(SqlState::RaiseException),
            format!("control reached end of function \"{}\" without RETURN", r.name),
        ));
    }
    Ok(result_rows(r, None, std::mem::take(out)))
}

/// Runs dynamic SQL: its text and USING values evaluated now.
async fn run_dynamic<S: RoutineStatements>(x: &plpgsql::ExecuteCode, vars: &Vars, now: Clock<'_>, statements: &mut S) -> Result<TextResult> {
    let text = match eval(&x.text, vars, now)? {
        Value::Null => return Err(Error::new(SqlState::custom("22004").unwrap_or(SqlState::InvalidParameterValue), "query string argument of EXECUTE is null")),
        v => v.to_text(DataType::Text).unwrap_or_default(),
    };
    let types: Vec<DataType> = x.using.iter().map(|u| u.ty).collect();
    let params = freshet_core::try_vec(x.using.iter().map(|u| eval(u, vars, now)))?;
    statements.run_text(&text, &types, params).await
}

/// Assigns a statement's first row to `into` (SELECT … INTO, RETURNING … INTO, EXECUTE …
/// INTO); with STRICT exactly one row, or P0002/P0003.
fn assign_into(r: &plpgsql::Routine, vars: &mut Vars, rows: Vec<Vec<Value>>, into: &[usize], strict: bool) -> Result<()> {
    if strict && rows.len() != 1 {
        return Err(if rows.is_empty() {
            Error::new(SqlState::custom("P0002").unwrap_or(SqlState::RaiseException), "query returned no rows")
        } else {
            Error::new(SqlState::custom("P0003").unwrap_or(SqlState::RaiseException), "query returned more than one row")
                .with_hint("Make sure the query returns a single row, or use LIMIT 1.")
        });
    }
    let mut first = rows.into_iter().next();
    for (k, slot) in into.iter().enumerate() {
        // Moved out of the row, which is dropped after (each target is a column of its own).
        let v = first.as_mut().and_then(|row| row.get_mut(k)).map_or(Value::Null, |v| std::mem::replace(v, Value::Null));
        vars.set(*slot, v.cast(slot_type(r.slots[*slot].ty))?);
    }
    Ok(())
}

/// Appends a query's rows to a set-returning function's result (RETURN QUERY [EXECUTE]),
/// checked against and cast to its columns.
fn append_query_rows(r: &plpgsql::Routine, out: &mut Vec<Vec<Value>>, rows: Vec<Vec<Value>>) -> Result<()> {
    let columns = r.set_columns();
    for row in rows {
        if row.len() != columns.len() {
            return Err(Error::mismatch("structure of query does not match function result type").with_detail(format!(
                "Number of returned columns ({}) does not match expected column count ({}).",
                row.len(),
                columns.len()
            )));
        }
        out.push(freshet_core::try_vec(row.into_iter().zip(columns).map(|(v, (_, ty))| v.cast(*ty)))?);
    }
    Ok(())
}

/// What a routine's run yields: a set-returning function's rows; one row holding a
/// function's value (NULL for a void function); nothing for a procedure.
fn result_rows(r: &plpgsql::Routine, value: Option<Value>, set_rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    if r.set.is_some() {
        set_rows
    } else if r.function {
        vec![vec![value.unwrap_or(Value::Null)]]
    } else {
        Vec::new()
    }
}

/// A native procedure's rows as its columns say: each value converted to its column's type
/// (a value already of that type as it is); 42804 for a row of another width.
fn typed_rows(name: &str, rows: &mut [Vec<Value>], columns: &[ColumnInfo]) -> Result<()> {
    for row in rows {
        if row.len() != columns.len() {
            return Err(Error::new(
                SqlState::DatatypeMismatch,
                format!("procedure {name} returned a row of {} values for its {} columns", row.len(), columns.len()),
            ));
        }
        for (v, c) in row.iter_mut().zip(columns) {
            *v = std::mem::replace(v, Value::Null).assign_to(c.ty)?;
        }
    }
    Ok(())
}

/// A native procedure's argument: an array literal becomes its text form (`{1,2}`), anything
/// else its value; converted to the parameter's type where the procedure declares one.
fn native_arg(e: &ast::Expr, declared: Option<DataType>, param_types: &[DataType], params: &[Value], now: i64) -> Result<Value> {
    if let ast::Expr::Array(a) = e {
        let items = a.elem.iter().map(|x| eval_arg(x, DataType::Text, param_types, params, now)).collect::<Result<Vec<_>>>()?;
        return Value::Text(plpgsql::array_text(&items, DataType::Text)).cast(declared.unwrap_or(DataType::Text));
    }
    if let Some(ty) = declared {
        return eval_arg(e, ty, param_types, params, now);
    }
    // Typed as the expression is (a number stays a number; a quoted literal is text).
    let mut types: Vec<Option<DataType>> = param_types.iter().copied().map(Some).collect();
    Binder::new(None, &mut types).bind_expr(e, None)?.eval(&NoRow, &EvalContext { params, now, session: None })
}
