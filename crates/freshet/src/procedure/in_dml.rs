//! Stored functions in INSERT … VALUES, UPDATE and DELETE (`INSERT INTO t VALUES (next_id(),
//! 'x')`, `UPDATE acct SET tag = band(balance)`, `DELETE FROM acct WHERE band(balance) =
//! 'low'`).
//!
//! The short path, which runs these statements, does not call routines. Two ways around it:
//! - **Evaluated first.** A call whose arguments name no column has one value for the whole
//!   statement: it is wrapped in a scalar subquery (`(SELECT f(1))`), which the session
//!   evaluates before the statement runs, like any of a DML statement's uncorrelated
//!   subqueries. In a VALUES row every call is such a call, and each is evaluated once per
//!   occurrence, in order, as PostgreSQL evaluates them, so it may change data. In UPDATE and
//!   DELETE, where PostgreSQL calls a function once per row, only functions that change
//!   nothing (`in_query::routines_read_only`) are evaluated once.
//! - **Per row** ([`CallsInDml`]), for the other calls of an UPDATE or DELETE: a query finds
//!   the target rows' primary keys (`SELECT <key> FROM target WHERE <the WHERE as written>`,
//!   whose calls are worked out as in any query: `in_query`); then for each row, the values
//!   of the SET list's calls' arguments are read under the row's lock (`SELECT <arguments>
//!   FROM target WHERE <key> = $k AND <the WHERE's conditions without calls> FOR UPDATE`),
//!   each function is called with them, and the row is changed by its key with the values as
//!   parameters. A function of the SET list is therefore called once per row changed, with
//!   the row's newest values, as in PostgreSQL (one that changes nothing is called once per
//!   distinct argument list). The conditions of the WHERE clause that call functions are
//!   checked on the query's snapshot; the others again on the newest version of the row, as
//!   UPDATE … FROM does (`update_from`). Rows that need no reading first change in batches
//!   (`Engine::run_each`): DELETE, UPDATE without calls in SET, and UPDATE whose SET calls
//!   all change nothing, with their arguments read by the rows query and checked again by
//!   the change (`guarded`).
//! - **In RETURNING** ([`returning_calls`]): a call that is a whole item of the list runs for
//!   each row returned, as a select list's calls do (`call::per_row_calls`).

use std::ops::ControlFlow;

use freshet_core::catalog::Catalog;
use freshet_core::{Error, Result};
use sqlparser::ast::{self, Statement};

use super::call::call_arguments;
use super::in_query::{and_all, calls_stored, conjuncts, outside_subqueries_mut, routines_read_only, stored_call, Order};

/// What a data-changing statement that calls stored functions becomes.
pub(crate) enum DmlCalls {
    /// The statement with each call wrapped in a scalar subquery, evaluated before it runs.
    First(Statement),
    /// An UPDATE or DELETE whose calls run per row.
    PerRow(CallsInDml),
}

/// An UPDATE or DELETE whose calls run per target row (see the module).
#[derive(Clone, Debug)]
pub(crate) struct CallsInDml {
    /// `SELECT <target>.<key> FROM <target> [WHERE <the WHERE as written>]`.
    pub rows: ast::Query,
    /// `SELECT <the sites' arguments> FROM <target> WHERE <key> = $k… [AND <call-free
    /// conditions>] FOR UPDATE`, when the SET list calls functions; parameters after the
    /// statement's own are the key's.
    pub lock: Option<ast::Query>,
    pub sites: Vec<DmlSite>,
    /// The statement for one row: `<key> = $k…` and the WHERE's call-free conditions, each
    /// call of the SET list a parameter after the key's (site `k`: `$<own + key + k + 1>`).
    pub per_row: Statement,
    /// When every call of the SET list changes nothing: `rows` also reads the calls'
    /// arguments (after the key), and this is `per_row` that also checks that the row's
    /// arguments are still those (`IS NOT DISTINCT FROM`, parameters after the sites'), so
    /// that values computed from the query's rows may be used without reading each row
    /// first. A row it does not change goes the locking way (`lock`, `per_row`).
    pub guarded: Option<Statement>,
    /// "UPDATE" or "DELETE".
    pub verb: &'static str,
    /// How many parameters the statement itself has.
    pub params: usize,
}

/// A function of the SET list with its arguments (calls of the same text share one).
#[derive(Clone, Debug)]
pub(crate) struct DmlSite {
    pub name: String,
    pub names: Vec<Option<String>>,
    pub arity: usize,
    /// Per argument, whether it is a string literal or NULL (of unknown type to the call).
    pub untyped: Vec<bool>,
    /// It changes nothing: called once per distinct argument list.
    pub reads_only: bool,
}

/// Whether `found` holds for an expression of `e` outside the subqueries inside it.
fn outside_subqueries(e: &ast::Expr, found: &dyn Fn(&ast::Expr) -> bool) -> bool {
    struct Finder<'a> {
        found: &'a dyn Fn(&ast::Expr) -> bool,
        depth: usize,
    }
    impl ast::Visitor for Finder<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, _: &ast::Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &ast::Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &ast::Expr) -> ControlFlow<()> {
            if self.depth == 0 && (self.found)(e) { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        }
    }
    ast::Visit::visit(e, &mut Finder { found, depth: 0 }).is_break()
}

/// Whether an expression names a column outside the subqueries inside it.
fn names_columns(e: &ast::Expr) -> bool {
    outside_subqueries(e, &|e| matches!(e, ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)))
}

fn scalar_subquery(e: ast::Expr) -> ast::Expr {
    let mut s = super::in_query::empty_select();
    s.projection = vec![ast::SelectItem::UnnamedExpr(e)];
    ast::Expr::Subquery(Box::new(super::in_query::query_of(ast::SetExpr::Select(Box::new(s)))))
}

/// Wraps the outermost calls of `e` (outside its subqueries) that `eligible` accepts, whose
/// arguments name no column, in scalar subqueries.
fn wrap_calls(e: &mut ast::Expr, catalog: &Catalog, eligible: &dyn Fn(&str) -> bool) {
    // Before a call's arguments are visited: the walk then goes on inside the new subquery,
    // where nothing is wrapped.
    let _ = outside_subqueries_mut(e, Order::Before, &mut |e| {
        if let Some((name, f)) = stored_call(e, catalog)
            && eligible(&name)
            && call_arguments(&f.args).is_some_and(|(args, _)| !args.iter().any(names_columns))
        {
            *e = scalar_subquery(e.clone());
        }
        ControlFlow::Continue(())
    });
}

/// Whether `e` calls a stored function outside its subqueries.
fn calls_outside_subqueries(e: &ast::Expr, catalog: &Catalog) -> bool {
    outside_subqueries(e, &|e| stored_call(e, catalog).is_some())
}

/// The cells of an INSERT's VALUES rows, if that is its source.
fn values_cells(insert: &mut ast::Insert) -> Option<impl Iterator<Item = &mut ast::Expr>> {
    match insert.source.as_deref_mut().map(|q| q.body.as_mut()) {
        Some(ast::SetExpr::Values(v)) => Some(v.rows.iter_mut().flat_map(|r| r.content.iter_mut())),
        _ => None,
    }
}

/// How `statement` (INSERT … VALUES, UPDATE or DELETE) runs its stored-function calls;
/// `None` when it calls none where this module handles them.
/// `params`: how many parameters the statement has (its own come first in the per-row
/// statements).
pub(crate) fn dml_calls(statement: &Statement, catalog: &Catalog, params: usize) -> Result<Option<DmlCalls>> {
    // Most statements call none: found without copying the statement.
    if catalog.procedures().next().is_none() || !calls_stored(statement, catalog) {
        return Ok(None);
    }
    let returning = match statement {
        Statement::Insert(i) => i.returning.as_ref(),
        Statement::Update(u) => u.returning.as_ref(),
        Statement::Delete(d) => d.returning.as_ref(),
        _ => None,
    };
    refuse_in_returning(returning, catalog)?;
    let mut wrapped = statement.clone();
    let any = |_: &str| true;
    let unchanging = |name: &str| routines_read_only(catalog, name, 0);
    let mut own: Vec<&mut ast::Expr> = Vec::new();
    let eligible: &dyn Fn(&str) -> bool = match &mut wrapped {
        Statement::Insert(i) => {
            own.extend(values_cells(i).into_iter().flatten());
            &any
        }
        Statement::Update(u) => {
            own.extend(u.assignments.iter_mut().map(|a| &mut a.value));
            own.extend(u.selection.as_mut());
            &unchanging
        }
        Statement::Delete(d) => {
            own.extend(d.selection.as_mut());
            &unchanging
        }
        _ => return Ok(None),
    };
    if !own.iter().any(|e| calls_stored(&**e, catalog)) {
        return Ok(None);
    }
    let mut left = false;
    for e in own {
        wrap_calls(e, catalog, eligible);
        left |= calls_outside_subqueries(e, catalog);
    }
    if !left {
        return Ok(Some(DmlCalls::First(wrapped)));
    }
    Ok(match statement {
        Statement::Update(u) => Some(DmlCalls::PerRow(per_row_update(u, catalog, params)?)),
        Statement::Delete(d) => Some(DmlCalls::PerRow(per_row_delete(d, catalog, params)?)),
        _ => None,
    })
}

/// An INSERT, UPDATE or DELETE whose RETURNING list calls stored functions as whole items
/// (`RETURNING id, band(balance)`): the statement returning, in their places, the calls'
/// arguments after its other items, and the split the session computes the items by (as
/// for a select list's calls, `per_row_calls`): each function is called for each row
/// returned, in the statement's transaction.
pub(crate) fn returning_calls(statement: &Statement, catalog: &Catalog) -> Option<(Statement, super::call::PerRowCalls)> {
    let returning = match statement {
        Statement::Insert(i) => i.returning.as_ref(),
        Statement::Update(u) => u.returning.as_ref(),
        Statement::Delete(d) => d.returning.as_ref(),
        _ => None,
    }?;
    if catalog.procedures().next().is_none() || !calls_stored(returning, catalog) {
        return None;
    }
    let mut select = super::in_query::empty_select();
    select.projection = returning.clone();
    let split = super::call::per_row_calls(&super::in_query::query_of(ast::SetExpr::Select(Box::new(select))), catalog)?;
    let ast::SetExpr::Select(inner) = split.query.body.as_ref() else { return None };
    let items = Some(inner.projection.clone());
    let mut statement = statement.clone();
    match &mut statement {
        Statement::Insert(i) => i.returning = items,
        Statement::Update(u) => u.returning = items,
        Statement::Delete(d) => d.returning = items,
        _ => return None,
    }
    Some((statement, split))
}

/// The target of an UPDATE or DELETE whose rows change one by one: the qualifier its
/// columns take and its primary key's columns.
fn target(relation: &ast::TableWithJoins, catalog: &Catalog, verb: &str) -> Result<(String, Vec<String>)> {
    let (_, qualifier, key) = crate::update_from::target_key(relation, catalog, verb, &|table| {
        Error::unsupported(format!("{verb} of \"{table}\", which has no primary key, with a stored function called for each row"))
    })?;
    Ok((qualifier, key))
}

fn quoted(n: &str) -> String {
    ast::Ident::with_quote('"', n).to_string()
}

fn refuse_in_returning(returning: Option<&Vec<ast::SelectItem>>, catalog: &Catalog) -> Result<()> {
    if let Some(items) = returning
        && items.iter().any(|i| calls_stored(i, catalog))
    {
        return Err(Error::unsupported("a stored function inside an expression of RETURNING")
            .with_hint("Call it as a whole item of the list, with its arguments by position (RETURNING id, f(x))."));
    }
    Ok(())
}

/// The query of the target rows' keys (and `more` items after them) and the per-row
/// condition on the key.
fn rows_and_key(
    relation: &ast::TableWithJoins,
    selection: Option<&ast::Expr>,
    qualifier: &str,
    key: &[String],
    more: &[ast::Expr],
    own_params: usize,
) -> Result<(ast::Query, String)> {
    let q = quoted(qualifier);
    let mut items: Vec<String> = key.iter().map(|k| format!("{q}.{}", quoted(k))).collect();
    items.extend(more.iter().map(ToString::to_string));
    let filter = selection.map_or(String::new(), |w| format!(" WHERE {w}"));
    let rows = parse_query(&format!("SELECT {} FROM {relation}{filter}", items.join(", ")))?;
    let on_key: Vec<String> = key.iter().enumerate().map(|(i, k)| format!("{q}.{} = ${}", quoted(k), own_params + i + 1)).collect();
    Ok((rows, on_key.join(" AND ")))
}

/// The conditions of a WHERE clause that call no stored function, as one.
fn call_free(selection: Option<&ast::Expr>, catalog: &Catalog) -> Option<ast::Expr> {
    let mut all = Vec::new();
    if let Some(w) = selection {
        conjuncts(w, &mut all);
    }
    and_all(all.into_iter().filter(|c| !calls_stored(c, catalog)).map(|c| ast::Expr::Nested(Box::new(c))))
}

fn parse_query(sql: &str) -> Result<ast::Query> {
    match crate::update_from::one_statement(sql)? {
        Statement::Query(q) => Ok(*q),
        _ => Err(Error::internal(format!("not a query: {sql}"))),
    }
}

/// The number of the highest `$n` parameter in a statement (0: none).
fn own_params(statement: &Statement) -> usize {
    let mut n = 0;
    let _ = ast::visit_expressions(statement, |e| {
        if let ast::Expr::Value(v) = e
            && let ast::Value::Placeholder(p) = &v.value
            && let Some(k) = p.strip_prefix('$').and_then(|k| k.parse::<usize>().ok())
        {
            n = n.max(k);
        }
        ControlFlow::<()>::Continue(())
    });
    n
}

fn per_row_update(u: &ast::Update, catalog: &Catalog, params: usize) -> Result<CallsInDml> {
    if u.from.is_some() {
        return Err(Error::unsupported("a stored function called for each row of UPDATE … FROM"));
    }
    if !u.order_by.is_empty() || u.limit.is_some() {
        return Err(Error::unsupported("ORDER BY or LIMIT in UPDATE"));
    }
    let (qualifier, key) = target(&u.table, catalog, "UPDATE")?;
    let own = own_params(&Statement::Update(u.clone())).max(params);
    // The SET list's calls, each a parameter after the key's.
    let first = own + key.len() + 1;
    let mut sites: Vec<DmlSite> = Vec::new();
    let mut arguments: Vec<Vec<ast::Expr>> = Vec::new();
    let mut assignments = u.assignments.clone();
    let mut error = None;
    for a in &mut assignments {
        let _ = ast::visit_expressions_mut(&mut a.value, |e: &mut ast::Expr| {
            let Some((name, f)) = stored_call(e, catalog) else { return ControlFlow::Continue(()) };
            let Some((args, names)) = call_arguments(&f.args) else {
                error = Some(Error::unsupported(format!("this form of argument to the stored function {name}()")));
                return ControlFlow::Break(());
            };
            if args.iter().any(|a| calls_stored(a, catalog)) {
                error = Some(Error::unsupported(format!("a stored function in the arguments of {name}() in UPDATE"))
                    .with_hint("Compute the inner call's value in a query first, or in a function that makes both calls."));
                return ControlFlow::Break(());
            }
            let k = match sites.iter().zip(&arguments).position(|(s, a)| s.name == name && s.names == names && *a == args) {
                Some(k) => k,
                None => {
                    let unchanging = routines_read_only(catalog, &name, 0);
                    sites.push(DmlSite { name, names, arity: args.len(), untyped: args.iter().map(super::call::untyped).collect(), reads_only: unchanging });
                    arguments.push(args);
                    sites.len() - 1
                }
            };
            *e = ast::Expr::value(ast::Value::Placeholder(format!("${}", first + k)));
            ControlFlow::Continue(())
        });
        if let Some(e) = error.take() {
            return Err(e);
        }
    }
    let unchanging = !sites.is_empty() && sites.iter().all(|s| s.reads_only);
    let read_ahead: Vec<ast::Expr> = if unchanging { arguments.iter().flatten().cloned().collect() } else { Vec::new() };
    let (rows, on_key) = rows_and_key(&u.table, u.selection.as_ref(), &qualifier, &key, &read_ahead, own)?;
    let recheck = call_free(u.selection.as_ref(), catalog).map_or(String::new(), |c| format!(" AND {c}"));
    let lock = if sites.is_empty() {
        None
    } else {
        let items: Vec<String> = arguments.iter().flatten().map(ToString::to_string).collect();
        let items = if items.is_empty() { "true".to_string() } else { items.join(", ") };
        Some(parse_query(&format!("SELECT {items} FROM {} WHERE {on_key}{recheck} FOR UPDATE", u.table))?)
    };
    let set = assignments.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let returning = u.returning.as_ref().map_or(String::new(), |r| format!(" RETURNING {}", r.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")));
    let per_row = crate::update_from::one_statement(&format!("UPDATE {} SET {set} WHERE {on_key}{recheck}{returning}", u.table))?;
    if calls_stored(&per_row, catalog) {
        return Err(Error::unsupported("a stored function in this place of UPDATE"));
    }
    let guarded = if unchanging {
        let after = first + sites.len();
        let same: String = read_ahead.iter().enumerate().map(|(j, a)| format!(" AND (({a}) IS NOT DISTINCT FROM ${})", after + j)).collect();
        Some(crate::update_from::one_statement(&format!("UPDATE {} SET {set} WHERE {on_key}{recheck}{same}{returning}", u.table))?)
    } else {
        None
    };
    Ok(CallsInDml { rows, lock, sites, per_row, guarded, verb: "UPDATE", params: own })
}

fn per_row_delete(d: &ast::Delete, catalog: &Catalog, params: usize) -> Result<CallsInDml> {
    if d.using.is_some() || !d.tables.is_empty() || d.limit.is_some() || !d.order_by.is_empty() {
        return Err(Error::unsupported("a stored function called for each row of DELETE … USING, or with ORDER BY or LIMIT"));
    }
    let from = match &d.from {
        ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
    };
    let [relation] = from.as_slice() else { return Err(Error::unsupported("DELETE from several tables")) };
    let (qualifier, key) = target(relation, catalog, "DELETE")?;
    let own = own_params(&Statement::Delete(d.clone())).max(params);
    let (rows, on_key) = rows_and_key(relation, d.selection.as_ref(), &qualifier, &key, &[], own)?;
    let recheck = call_free(d.selection.as_ref(), catalog).map_or(String::new(), |c| format!(" AND {c}"));
    let returning = d.returning.as_ref().map_or(String::new(), |r| format!(" RETURNING {}", r.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")));
    let per_row = crate::update_from::one_statement(&format!("DELETE FROM {relation} WHERE {on_key}{recheck}{returning}"))?;
    Ok(CallsInDml { rows, lock: None, sites: Vec::new(), per_row, guarded: None, verb: "DELETE", params: own })
}
