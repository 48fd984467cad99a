//! Stored functions inside the expressions of a query: in WHERE (`SELECT id FROM orders WHERE
//! is_vip(customer)`), inside other expressions of the select list (`tax(amount) + 1`,
//! `sum(tax(amount))`), under DISTINCT, in GROUP BY, HAVING and ORDER BY, in subqueries, WITH
//! queries and derived tables, and inside another call's arguments (`f(g(x))`).
//!
//! The analytical engine, which plans such queries, does not call routines. So each SELECT
//! of the query that calls them (the statement's own, or one nested in it) has its calls
//! worked out before the statement runs:
//! 1. for each call (a call site: the function and its argument expressions), a query of its
//!    own finds the distinct argument lists: `[WITH …] SELECT DISTINCT <arguments> FROM <that
//!    SELECT's FROM> [WHERE <the conditions of its WHERE that call no stored function>]`;
//! 2. the function runs once for each of those argument lists;
//! 3. the call is replaced by a column of a VALUES relation of (arguments, value) rows, added
//!    to that SELECT's FROM and matched on the arguments (`IS NOT DISTINCT FROM`, so NULL
//!    arguments find their value too: an equi-join for the planner).
//!
//! Sites are numbered in the order their values are needed: those of nested queries before
//! the SELECT around them, an inner call before the call whose argument it is. A site's
//! argument query may contain the relations of earlier sites, never of later ones, so the
//! sites run in order and each finds the values it needs already known.
//!
//! A function is called once per distinct argument list rather than once per row: the same
//! results as PostgreSQL's for a function that changes nothing (one whose value depends on
//! its arguments and the data, what PostgreSQL calls STABLE). A function that may write
//! (INSERT, UPDATE, DELETE, sequence functions, dynamic SQL, or a call of one that does) is
//! therefore refused in these places; as a whole item of a select list it runs per row
//! (`per_row_calls`). A call whose arguments name columns of an outer query (a correlated
//! subquery) is refused too: its argument query cannot be run on its own.
//!
//! A call in FROM (`FROM f(1) AS t(a, b)`, also a set-returning function's) is a site of its
//! own kind: its argument query is `SELECT <arguments>`, the function runs once, as in
//! PostgreSQL (so it may write), and its rows fill a relation that takes the call's place
//! under the call's alias and column names. Its arguments may not name other relations'
//! columns (PostgreSQL's implicit LATERAL).

use std::ops::ControlFlow;

use freshet_core::catalog::{Catalog, ProcedureDef};
use freshet_core::sql::names::{column_name, fold_ident, is_aggregate};
use freshet_core::sql::plpgsql::{ExprUnit, Instr};
use freshet_core::{Error, Result};
use sqlparser::ast::helpers::attached_token::AttachedToken;
use sqlparser::ast::{self, Visit, VisitMut, VisitorMut};

use super::call::call_arguments;

/// A query whose expressions call stored functions, split as the module says.
#[derive(Clone, Debug)]
pub(crate) struct CallsInQuery {
    /// The query with each call replaced by its value column, each site's relation in the
    /// FROM clause of its SELECT (rowless until [`query`](Self::query) gives it its
    /// rows) and the match of its arguments in that SELECT's WHERE.
    rewritten: ast::Query,
    pub sites: Vec<CallSite>,
}

/// One call site: a function with its argument expressions in one SELECT (calls there with
/// the same text share one site).
#[derive(Clone, Debug)]
pub(crate) struct CallSite {
    pub name: String,
    /// Per argument, its name in `name => value` notation.
    pub names: Vec<Option<String>>,
    /// The query of the site's distinct argument lists, with the relations of the earlier
    /// sites it needs (rowless, as in `rewritten`).
    pub arguments: ast::Query,
    pub arity: usize,
    /// Whether `arguments` contains earlier sites' relations.
    pub depends: bool,
    /// Whether the call is in a SELECT nested in another (its arguments cannot name the
    /// outer query's columns).
    pub nested: bool,
    /// A call in FROM (`FROM f(1) AS t`): the columns of its rows. Its argument query is
    /// `SELECT <arguments>` (one row), the function runs once, as in PostgreSQL, and its rows
    /// are the relation's; `None` for a call in an expression (one value per argument list).
    pub relation: Option<Vec<(String, freshet_core::types::DataType)>>,
}

impl CallSite {
    /// The types of the arguments, as the argument query's `columns` give them (those written
    /// as a string literal or NULL unknown, as the call sees them).
    pub fn argument_types(&self, columns: &[crate::result::ColumnInfo]) -> Vec<Option<freshet_core::types::DataType>> {
        match self.arguments.body.as_ref() {
            ast::SetExpr::Select(s) => {
                let args = s.projection.iter().filter_map(|item| if let ast::SelectItem::ExprWithAlias { expr, .. } = item { Some(expr) } else { None });
                super::call::computed_types(args, columns)
            }
            _ => columns.iter().map(|c| Some(c.ty)).collect(),
        }
    }
}

/// The relation of site `k`'s values and its columns: the arguments, then the value.
fn relation(k: usize) -> String {
    format!("freshet call {}", k + 1)
}

fn argument_column(k: usize, i: usize) -> String {
    format!("freshet call {} argument {}", k + 1, i + 1)
}

fn value_column(k: usize) -> String {
    format!("freshet call {} value", k + 1)
}

fn quoted(name: String) -> ast::Ident {
    ast::Ident::with_quote('"', name)
}

fn column_of(k: usize, column: String) -> ast::Expr {
    ast::Expr::CompoundIdentifier(vec![quoted(relation(k)), quoted(column)])
}

/// The name of the stored function `e` calls, if it is such a call.
pub(super) fn stored_call<'a>(e: &'a ast::Expr, catalog: &Catalog) -> Option<(String, &'a ast::Function)> {
    let ast::Expr::Function(f) = e else { return None };
    let [part] = f.name.0.as_slice() else { return None };
    let name = fold_ident(part.as_ident()?);
    catalog.has_routine(&name).then_some((name, f))
}

/// The site a relation of the rewritten query belongs to, by its name.
fn site_of(relation_name: &str) -> Option<usize> {
    relation_name.strip_prefix("freshet call ")?.parse::<usize>().ok()?.checked_sub(1)
}

/// Whether `node` calls a stored function anywhere (subqueries included).
pub(super) fn calls_stored<T: Visit>(node: &T, catalog: &Catalog) -> bool {
    ast::visit_expressions(node, |e| if stored_call(e, catalog).is_some() { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }).is_break()
}

/// Whether `statement` calls a stored function anywhere: in an expression or in FROM.
pub(crate) fn calls_stored_functions(statement: &ast::Statement, catalog: &Catalog) -> bool {
    if catalog.procedures().next().is_none() {
        return false;
    }
    calls_stored(statement, catalog) || matches!(statement, ast::Statement::Query(q) if super::call::stored_function_in_query(q, catalog).is_some())
}

/// Whether `node` holds a site's relation.
fn holds_site<T: Visit>(node: &T) -> bool {
    struct Finder;
    impl ast::Visitor for Finder {
        type Break = ();
        fn pre_visit_table_factor(&mut self, f: &ast::TableFactor) -> ControlFlow<()> {
            match f {
                ast::TableFactor::Derived { alias: Some(a), .. } if site_of(&a.name.value).is_some() => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            }
        }
    }
    node.visit(&mut Finder).is_break()
}

/// Whether `e` holds an aggregate or a window function (outside subqueries too: such an
/// argument has no value per row of the FROM clause).
fn aggregates(e: &ast::Expr) -> bool {
    ast::visit_expressions(e, |e| match e {
        ast::Expr::Function(f) if f.over.is_some() || f.name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| is_aggregate(&fold_ident(i))) => {
            ControlFlow::Break(())
        }
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// The conjuncts of a condition (`a AND (b AND c)` → a, b, c).
pub(super) fn conjuncts(e: &ast::Expr, out: &mut Vec<ast::Expr>) {
    match e {
        ast::Expr::BinaryOp { left, op: ast::BinaryOperator::And, right } => {
            conjuncts(left, out);
            conjuncts(right, out);
        }
        ast::Expr::Nested(inner) if matches!(inner.as_ref(), ast::Expr::BinaryOp { op: ast::BinaryOperator::And, .. }) => conjuncts(inner, out),
        other => out.push(other.clone()),
    }
}

pub(super) fn and_all(exprs: impl IntoIterator<Item = ast::Expr>) -> Option<ast::Expr> {
    exprs.into_iter().reduce(|l, r| ast::Expr::BinaryOp { left: Box::new(l), op: ast::BinaryOperator::And, right: Box::new(r) })
}

/// Replaces the stored-function calls of one SELECT's own expressions (not those of its
/// subqueries, already rewritten) with their sites' value columns, collecting the sites.
struct Sites<'a> {
    catalog: &'a Catalog,
    /// The number of the first site of this SELECT.
    first: usize,
    /// (function, argument expressions, argument names) per site of this SELECT.
    found: Vec<(String, Vec<ast::Expr>, Vec<Option<String>>)>,
    error: Option<Error>,
}

impl Sites<'_> {
    fn site(&mut self, e: &ast::Expr) -> Result<Option<usize>> {
        let Some((name, f)) = stored_call(e, self.catalog) else { return Ok(None) };
        if f.over.is_some() || f.filter.is_some() || !f.within_group.is_empty() {
            return Err(Error::unsupported(format!("OVER, FILTER or WITHIN GROUP on the stored function {name}()")));
        }
        if let ast::FunctionArguments::List(list) = &f.args
            && (list.duplicate_treatment.is_some() || !list.clauses.is_empty())
        {
            return Err(Error::unsupported(format!("DISTINCT, ORDER BY or another clause in the arguments of the stored function {name}()")));
        }
        let (mut args, names) = call_arguments(&f.args).ok_or_else(|| Error::unsupported(format!("this form of argument to the stored function {name}()")))?;
        array_arguments_as_text(self.catalog, &name, &mut args, &names);
        if args.iter().any(aggregates) {
            return Err(Error::unsupported(format!("an aggregate or window function in the arguments of the stored function {name}()"))
                .with_hint(format!("Aggregate in a subquery first: SELECT {name}(total) FROM (SELECT sum(…) AS total …) s.")));
        }
        if !routines_read_only(self.catalog, &name, 0) {
            return Err(Error::unsupported(format!("function {name}(), which may change data, inside a larger query")).with_hint(format!(
                "A function that writes runs once per row only as a whole item of a select list (SELECT a, {name}(a) FROM t), or on its own (SELECT {name}(…))."
            )));
        }
        let k = match self.found.iter().position(|(n, a, m)| *n == name && *a == args && *m == names) {
            Some(k) => k,
            None => {
                self.found.push((name, args, names));
                self.found.len() - 1
            }
        };
        Ok(Some(self.first + k))
    }
}

/// An array argument travels as its text form (`{1,2}`), which the call takes as it takes
/// `'{1,2}'`: the analytical side's arrays are lists, and the site's relation, typed from the
/// calls' values (`CallSitePlan::rowless`), has no list columns to match them with. An
/// argument is cast to text where every routine of that name takes an array for it (none is
/// VARIADIC).
fn array_arguments_as_text(catalog: &Catalog, name: &str, args: &mut [ast::Expr], names: &[Option<String>]) {
    use freshet_core::sql::plpgsql::{PlType, Routine};
    let overloads = catalog.routines(name);
    if overloads.iter().any(|d| d.routine.variadic) {
        return;
    }
    // The type of the input parameter argument `i` is for, in routine `r`.
    let parameter = |r: &Routine, i: usize| -> Option<PlType> {
        let inputs = r.params.iter().zip(&r.out_only).filter(|(_, out)| !**out).map(|(p, _)| p);
        match names.get(i).cloned().flatten() {
            Some(n) => inputs.zip(&r.signature).find(|((p, _), _)| *p == n).map(|(_, t)| *t),
            None => r.signature.get(i).copied(),
        }
    };
    for (i, arg) in args.iter_mut().enumerate() {
        let arrays = overloads.iter().all(|d| matches!(parameter(&d.routine, i), Some(PlType::Array(_))));
        if arrays && !overloads.is_empty() && !matches!(arg, ast::Expr::Value(_)) {
            let written = std::mem::replace(arg, ast::Expr::Value(ast::Value::Null.with_empty_span()));
            *arg = ast::Expr::Cast { kind: ast::CastKind::Cast, expr: Box::new(written), data_type: ast::DataType::Text, array: false, format: None };
        }
    }
}

/// Calls `f` on each expression of `e` outside the subqueries inside it: before its own
/// sub-expressions are visited (`Order::Before`; an `f` that replaces the expression has the
/// walk go on inside the replacement) or after them (`Order::After`, bottom-up). Stops at the
/// first `Break`.
pub(super) fn outside_subqueries_mut(e: &mut ast::Expr, order: Order, f: &mut dyn FnMut(&mut ast::Expr) -> ControlFlow<()>) -> ControlFlow<()> {
    struct Walk<'f> {
        f: &'f mut dyn FnMut(&mut ast::Expr) -> ControlFlow<()>,
        order: Order,
        depth: usize,
    }
    impl VisitorMut for Walk<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
            if self.depth == 0 && self.order == Order::Before { (self.f)(e) } else { ControlFlow::Continue(()) }
        }
        fn post_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
            if self.depth == 0 && self.order == Order::After { (self.f)(e) } else { ControlFlow::Continue(()) }
        }
    }
    VisitMut::visit(e, &mut Walk { f, order, depth: 0 })
}

/// When [`outside_subqueries_mut`] calls its function on an expression.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Order {
    Before,
    After,
}

impl Sites<'_> {
    // Bottom-up (`Order::After`): a call inside another's arguments becomes a site first, and
    // the outer call's arguments then name its value.
    fn replace(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
        match self.site(e) {
            Ok(Some(k)) => {
                *e = column_of(k, value_column(k));
                ControlFlow::Continue(())
            }
            Ok(None) => ControlFlow::Continue(()),
            Err(err) => {
                self.error = Some(err);
                ControlFlow::Break(())
            }
        }
    }
}

/// Rewrites every SELECT of a query, innermost first (see the module).
struct Rewriter<'a> {
    catalog: &'a Catalog,
    sites: Vec<CallSite>,
    /// The WITH clauses around the SELECT being rewritten, outermost first: its argument
    /// queries may read their tables.
    withs: Vec<ast::With>,
    /// How many queries enclose the SELECT being rewritten (1: the statement's own).
    depth: usize,
}

impl Rewriter<'_> {
    fn query(&mut self, q: &mut ast::Query) -> Result<()> {
        self.depth += 1;
        let result = self.query_inner(q);
        self.depth -= 1;
        result
    }

    fn query_inner(&mut self, q: &mut ast::Query) -> Result<()> {
        let pushed = match &mut q.with {
            Some(w) => {
                for cte in &mut w.cte_tables {
                    self.query(&mut cte.query)?;
                }
                self.withs.push(w.clone());
                true
            }
            None => false,
        };
        let result = match q.body.as_mut() {
            ast::SetExpr::Select(s) => self.select(s, q.order_by.as_mut()),
            body => self.set_expr(body),
        };
        if pushed {
            self.withs.pop();
        }
        result
    }

    fn set_expr(&mut self, body: &mut ast::SetExpr) -> Result<()> {
        match body {
            ast::SetExpr::Select(s) => self.select(s, None),
            ast::SetExpr::Query(q) => self.query(q),
            ast::SetExpr::SetOperation { left, right, .. } => {
                self.set_expr(left)?;
                self.set_expr(right)
            }
            _ => Ok(()),
        }
    }

    fn table_factor(&mut self, f: &mut ast::TableFactor) -> Result<()> {
        match f {
            ast::TableFactor::Table { name, args: Some(args), alias, with_ordinality, .. }
                if let [part] = name.0.as_slice()
                    && let Some(fname) = part.as_ident().map(fold_ident)
                    && self.catalog.has_routine(&fname) =>
            {
                if *with_ordinality {
                    return Err(Error::unsupported(format!("WITH ORDINALITY on the stored function {fname}()")));
                }
                let (call_args, names) = super::call::argument_list(&args.args)
                    .ok_or_else(|| Error::unsupported(format!("this form of argument to the stored function {fname}()")))?;
                let columns = relation_columns(self.catalog, &fname, &call_args, &names, alias.as_ref())?;
                let k = self.sites.len();
                let mut s = empty_select();
                s.projection = call_args.iter().enumerate().map(|(i, a)| ast::SelectItem::ExprWithAlias { expr: a.clone(), alias: quoted(argument_column(k, i)) }).collect();
                let mut arguments = query_of(ast::SetExpr::Select(Box::new(s)));
                arguments.with = self.with();
                let depends = holds_site(&arguments);
                let arity = call_args.len();
                // `(SELECT * FROM <the site's relation>) AS alias`: the query keeps naming the
                // call's columns as it did.
                let width = columns.len();
                let defs = columns.iter().map(|(c, _)| ast::TableAliasColumnDef { name: quoted(c.clone()), data_type: None }).collect();
                let mut inner = empty_select();
                inner.projection = vec![ast::SelectItem::Wildcard(ast::WildcardAdditionalOptions::default())];
                inner.from = vec![ast::TableWithJoins { relation: derived(values(0, width, &mut |_, _| null()), &relation(k), defs), joins: Vec::new() }];
                let outer_alias = ast::TableAlias { explicit: true, at: None, name: alias.as_ref().map_or_else(|| quoted(fname.clone()), |a| a.name.clone()), columns: Vec::new() };
                *f = ast::TableFactor::Derived { lateral: false, subquery: Box::new(query_of(ast::SetExpr::Select(Box::new(inner)))), alias: Some(outer_alias), sample: None };
                self.sites.push(CallSite { name: fname, names, arguments, arity, depends, nested: self.depth > 1, relation: Some(columns) });
                Ok(())
            }
            ast::TableFactor::Derived { subquery, .. } => self.query(subquery),
            ast::TableFactor::NestedJoin { table_with_joins, .. } => self.from_item(table_with_joins),
            _ => Ok(()),
        }
    }

    fn from_item(&mut self, item: &mut ast::TableWithJoins) -> Result<()> {
        self.table_factor(&mut item.relation)?;
        for j in &mut item.joins {
            self.table_factor(&mut j.relation)?;
        }
        Ok(())
    }

    /// Rewrites each outermost subquery of `e` whole.
    fn subqueries(&mut self, e: &mut ast::Expr) -> Result<()> {
        struct Outer<'r, 'a> {
            rewriter: &'r mut Rewriter<'a>,
            depth: usize,
            error: Option<Error>,
        }
        impl VisitorMut for Outer<'_, '_> {
            type Break = ();
            fn pre_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<()> {
                self.depth += 1;
                ControlFlow::Continue(())
            }
            fn post_visit_query(&mut self, q: &mut ast::Query) -> ControlFlow<()> {
                self.depth -= 1;
                if self.depth == 0
                    && let Err(e) = self.rewriter.query(q)
                {
                    self.error = Some(e);
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            }
        }
        let mut outer = Outer { rewriter: self, depth: 0, error: None };
        let _ = VisitMut::visit(e, &mut outer);
        outer.error.map_or(Ok(()), Err)
    }

    fn select(&mut self, select: &mut ast::Select, mut order_by: Option<&mut ast::OrderBy>) -> Result<()> {
        for item in &mut select.from {
            self.from_item(item)?;
        }
        let mut own: Vec<&mut ast::Expr> = Vec::new();
        for item in &mut select.projection {
            if let ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } = item {
                own.push(e);
            }
        }
        own.extend(select.selection.as_mut());
        if let ast::GroupByExpr::Expressions(exprs, _) = &mut select.group_by {
            own.extend(exprs.iter_mut());
        }
        own.extend(select.having.as_mut());
        if let Some(ob) = order_by.as_deref_mut()
            && let ast::OrderByKind::Expressions(exprs) = &mut ob.kind
        {
            own.extend(exprs.iter_mut().map(|o| &mut o.expr));
        }
        for e in own {
            self.subqueries(e)?;
        }
        if !calls_stored(&*select, self.catalog) && !order_by.as_deref().is_some_and(|o| calls_stored(o, self.catalog)) {
            return Ok(());
        }
        // This SELECT's own calls. Its result columns keep the names PostgreSQL gives them
        // (`tax(amount)` is `tax`).
        let original = select.clone();
        for item in &mut select.projection {
            if let ast::SelectItem::UnnamedExpr(e) = item
                && calls_stored(e, self.catalog)
            {
                let alias = quoted(column_name(e));
                *item = ast::SelectItem::ExprWithAlias { expr: e.clone(), alias };
            }
        }
        let mut sites = Sites { catalog: self.catalog, first: self.sites.len(), found: Vec::new(), error: None };
        let mut walk = |e: &mut ast::Expr| {
            let _ = outside_subqueries_mut(e, Order::After, &mut |e| sites.replace(e));
        };
        for item in &mut select.projection {
            if let ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } = item {
                walk(e);
            }
        }
        if let Some(e) = &mut select.selection {
            walk(e);
        }
        if let ast::GroupByExpr::Expressions(exprs, _) = &mut select.group_by {
            exprs.iter_mut().for_each(&mut walk);
        }
        if let Some(e) = &mut select.having {
            walk(e);
        }
        if let Some(ob) = order_by
            && let ast::OrderByKind::Expressions(exprs) = &mut ob.kind
        {
            for o in exprs.iter_mut() {
                walk(&mut o.expr);
            }
        }
        let Sites { found, error, first, .. } = sites;
        if let Some(e) = error {
            return Err(e);
        }
        // The argument queries: the FROM clause and the conditions that call no stored
        // function (a row they reject is not one whose calls PostgreSQL would make either),
        // and for a call inside another's arguments, the inner call's relation and match.
        let mut plain = Vec::new();
        if let Some(w) = &original.selection {
            conjuncts(w, &mut plain);
        }
        plain.retain(|c| !calls_stored(c, self.catalog));
        let with = self.with();
        let mut matches: Vec<ast::Expr> = Vec::new();
        let mut relations: Vec<ast::TableWithJoins> = Vec::new();
        for (n, (name, args, names)) in found.into_iter().enumerate() {
            let k = first + n;
            // The earlier sites of this SELECT that the arguments name (`f(g(x))`).
            let inner: Vec<usize> = (first..k).filter(|j| args.iter().any(|a| a.to_string().contains(&format!("\"{}\"", relation(*j))))).collect();
            let mut s = original.clone();
            s.distinct = Some(ast::Distinct::Distinct);
            s.projection = args.iter().enumerate().map(|(i, a)| ast::SelectItem::ExprWithAlias { expr: a.clone(), alias: quoted(argument_column(k, i)) }).collect();
            s.from.extend(inner.iter().map(|&j| relations[j - first].clone()));
            s.selection = and_all(plain.iter().cloned().chain(inner.iter().flat_map(|&j| site_matches(&self.sites[j], j))));
            s.group_by = ast::GroupByExpr::Expressions(Vec::new(), Vec::new());
            s.having = None;
            s.named_window = Vec::new();
            s.qualify = None;
            s.sort_by = Vec::new();
            let mut arguments = query_of(ast::SetExpr::Select(Box::new(s)));
            arguments.with = with.clone();
            let depends = holds_site(&arguments);
            let arity = args.len();
            let site = CallSite { name, names, arguments, arity, depends, nested: self.depth > 1, relation: None };
            matches.extend(site_matches_of(&args, k));
            relations.push(ast::TableWithJoins { relation: derived(rowless(arity), &relation(k), site_columns(k, arity)), joins: Vec::new() });
            self.sites.push(site);
        }
        let added = self.sites.len() - first;
        select.selection = and_all(select.selection.take().map(|w| ast::Expr::Nested(Box::new(w))).into_iter().chain(matches));
        select.from.extend(relations);
        // In a grouped query, the value of a call whose arguments are all grouping expressions
        // is one per group too (HAVING max(x) > f(region) … GROUP BY region).
        if let (ast::GroupByExpr::Expressions(original_keys, _), ast::GroupByExpr::Expressions(keys, _)) = (&original.group_by, &mut select.group_by)
            && !original_keys.is_empty()
        {
            for k in first..first + added {
                let ast::SetExpr::Select(s) = self.sites[k].arguments.body.as_ref() else { continue };
                let grouped = s.projection.iter().all(|item| matches!(item, ast::SelectItem::ExprWithAlias { expr, .. } if grouped_by(expr, original_keys)));
                if grouped {
                    keys.push(column_of(k, value_column(k)));
                }
            }
        }
        // `*` stays the FROM clause's columns.
        let columns: Vec<ast::ObjectName> = (first..first + added)
            .flat_map(|k| site_columns(k, self.sites[k].arity))
            .map(|c| ast::ObjectName::from(vec![c.name]))
            .collect();
        for item in &mut select.projection {
            if let ast::SelectItem::Wildcard(options) = item {
                if options.opt_exclude.is_some() {
                    return Err(Error::unsupported("EXCLUDE in a query that calls stored functions"));
                }
                options.opt_exclude = Some(ast::ExcludeSelectItem::Multiple(columns.clone()));
            }
        }
        Ok(())
    }

    /// The WITH clauses around the current SELECT as one.
    fn with(&self) -> Option<ast::With> {
        let mut all = self.withs.iter();
        let mut with = all.next()?.clone();
        for w in all {
            with.recursive |= w.recursive;
            with.cte_tables.extend(w.cte_tables.iter().cloned());
        }
        Some(with)
    }
}

/// Whether `e` has one value per group of `keys`: it is a key, or every column it names is
/// one (`length(v)` under `GROUP BY v`).
fn grouped_by(e: &ast::Expr, keys: &[ast::Expr]) -> bool {
    let name = |e: &ast::Expr| match e {
        ast::Expr::Identifier(i) => Some(fold_ident(i)),
        ast::Expr::CompoundIdentifier(parts) => parts.last().map(fold_ident),
        _ => None,
    };
    keys.contains(e)
        || ast::visit_expressions(e, |x| match name(x) {
            Some(n) if !keys.iter().any(|k| name(k).as_ref() == Some(&n)) => ControlFlow::Break(()),
            _ => ControlFlow::Continue(()),
        })
        .is_continue()
}

/// The conditions that match a row's arguments `args` with site `k`'s relation.
fn site_matches_of(args: &[ast::Expr], k: usize) -> Vec<ast::Expr> {
    args.iter().enumerate().map(|(i, a)| ast::Expr::IsNotDistinctFrom(Box::new(a.clone()), Box::new(column_of(k, argument_column(k, i))))).collect()
}

fn site_matches(site: &CallSite, k: usize) -> Vec<ast::Expr> {
    match site.arguments.body.as_ref() {
        ast::SetExpr::Select(s) => {
            let args: Vec<ast::Expr> = s.projection.iter().filter_map(|item| if let ast::SelectItem::ExprWithAlias { expr, .. } = item { Some(expr.clone()) } else { None }).collect();
            site_matches_of(&args, k)
        }
        _ => Vec::new(),
    }
}

/// The columns of site `k`'s relation: its arguments, then the value.
fn site_columns(k: usize, arity: usize) -> Vec<ast::TableAliasColumnDef> {
    (0..arity).map(|i| argument_column(k, i)).chain(std::iter::once(value_column(k))).map(|c| ast::TableAliasColumnDef { name: quoted(c), data_type: None }).collect()
}

fn null() -> ast::Expr {
    ast::Expr::Value(ast::Value::Null.with_empty_span())
}

/// The columns of the rows the stored function `name` gives in FROM, renamed by the alias's
/// column list (its first columns; for a function of one value, the alias names it).
fn relation_columns(catalog: &Catalog, name: &str, args: &[ast::Expr], names: &[Option<String>], alias: Option<&ast::TableAlias>) -> Result<Vec<(String, freshet_core::types::DataType)>> {
    use freshet_core::sql::plpgsql::PlType;
    // The arguments may not name columns (no LATERAL): typed as written.
    let types = super::call::argument_types(args, &[]);
    let (def, _) = super::call::resolve_routine(catalog, name, "function", &types, names)?.ok_or_else(|| Error::internal("a stored function disappeared"))?;
    let r = &def.routine;
    if !r.function {
        return Err(Error::new(freshet_core::SqlState::WrongObjectType, format!("{} is a procedure", r.identity)).with_hint("To call a procedure, use CALL."));
    }
    let mut columns: Vec<(String, freshet_core::types::DataType)> = match &r.set {
        Some(set) if let Some(table) = &set.relation => {
            let t = catalog.table(table).ok_or_else(|| Error::undefined_table(table))?;
            t.columns.iter().map(|c| (c.name.clone(), c.ty)).collect()
        }
        // SETOF a scalar type: one column, named after the function or its alias.
        Some(set) if !set.table && !set.single => {
            set.columns.iter().map(|(c, ty)| (alias.map_or_else(|| c.clone(), |a| fold_ident(&a.name)), *ty)).collect()
        }
        Some(set) => set.columns.clone(),
        None => {
            let ty = match r.returns {
                Some(PlType::Scalar(t)) => t,
                _ => freshet_core::types::DataType::Text,
            };
            vec![(alias.map_or_else(|| name.to_string(), |a| fold_ident(&a.name)), ty)]
        }
    };
    let renamed = alias.map(|a| a.columns.as_slice()).unwrap_or_default();
    if renamed.len() > columns.len() {
        return Err(Error::new(
            freshet_core::SqlState::custom("42P10").unwrap_or(freshet_core::SqlState::SyntaxError),
            format!("table \"{name}\" has {} columns available but {} columns specified", columns.len(), renamed.len()),
        ));
    }
    for (c, new) in columns.iter_mut().zip(renamed) {
        c.0 = fold_ident(&new.name);
    }
    Ok(columns)
}

/// A site's relation before it has rows.
fn rowless(arity: usize) -> ast::Query {
    values(0, arity + 1, &mut |_, _| ast::Expr::Value(ast::Value::Null.with_empty_span()))
}

/// `q` split as the module says, if it calls stored functions where it can be (`None`: it
/// does not, or it calls one elsewhere — in JOIN … ON, DISTINCT ON, a VALUES list or the
/// ORDER BY of a set operation — which the caller refuses).
pub(crate) fn calls_in_query(q: &ast::Query, catalog: &Catalog) -> Result<Option<CallsInQuery>> {
    // Most queries call none: found without copying the query.
    if catalog.procedures().next().is_none() || super::call::stored_function_in_query(q, catalog).is_none() {
        return Ok(None);
    }
    let mut query = q.clone();
    let mut rewriter = Rewriter { catalog, sites: Vec::new(), withs: Vec::new(), depth: 0 };
    rewriter.query(&mut query)?;
    if rewriter.sites.is_empty() || super::call::stored_function_in_query(&query, catalog).is_some() {
        return Ok(None);
    }
    Ok(Some(CallsInQuery { rewritten: query, sites: rewriter.sites }))
}

impl CallsInQuery {
    /// The query to run, each site's relation given its rows by `rows(k)`.
    pub(crate) fn query(&self, rows: &mut dyn FnMut(usize) -> Option<ast::Query>) -> ast::Query {
        with_rows(&self.rewritten, rows)
    }

    /// Site `k`'s argument query, each earlier site's relation given its rows by `rows(j)`.
    pub(crate) fn arguments(&self, k: usize, rows: &mut dyn FnMut(usize) -> Option<ast::Query>) -> ast::Query {
        with_rows(&self.sites[k].arguments, rows)
    }
}

/// `query` with the relation of each site `k` given the rows `rows(k)` (`None`: left as it is).
fn with_rows(query: &ast::Query, rows: &mut dyn FnMut(usize) -> Option<ast::Query>) -> ast::Query {
    struct Filler<'f> {
        rows: &'f mut dyn FnMut(usize) -> Option<ast::Query>,
    }
    impl VisitorMut for Filler<'_> {
        type Break = ();
        fn pre_visit_table_factor(&mut self, f: &mut ast::TableFactor) -> ControlFlow<()> {
            if let ast::TableFactor::Derived { alias: Some(a), subquery, .. } = f
                && let Some(k) = site_of(&a.name.value)
                && let Some(q) = (self.rows)(k)
            {
                **subquery = q;
            }
            ControlFlow::Continue(())
        }
    }
    let mut query = query.clone();
    let _ = VisitMut::visit(&mut query, &mut Filler { rows });
    query
}

/// A relation of `count` rows of `width` cells, each `cell(row, column)`; without rows, one
/// row of cells and a condition that rejects it (so that the cells still type its columns).
pub(crate) fn values(count: usize, width: usize, cell: &mut dyn FnMut(usize, usize) -> ast::Expr) -> ast::Query {
    let rows = (0..count.max(1))
        .map(|r| ast::Parens { opening_token: AttachedToken::empty(), content: (0..width).map(|c| cell(r, c)).collect(), closing_token: AttachedToken::empty() })
        .collect();
    let values = ast::SetExpr::Values(ast::Values { explicit_row: false, value_keyword: false, rows });
    if count > 0 {
        return query_of(values);
    }
    // SELECT * FROM (VALUES (…)) AS v WHERE false
    let mut s = empty_select();
    s.projection = vec![ast::SelectItem::Wildcard(ast::WildcardAdditionalOptions::default())];
    s.from = vec![ast::TableWithJoins { relation: derived(query_of(values), "v", Vec::new()), joins: Vec::new() }];
    s.selection = Some(ast::Expr::Value(ast::Value::Boolean(false).with_empty_span()));
    query_of(ast::SetExpr::Select(Box::new(s)))
}

pub(super) fn query_of(body: ast::SetExpr) -> ast::Query {
    ast::Query {
        with: None,
        body: Box::new(body),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: Vec::new(),
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: Vec::new(),
    }
}

fn derived(subquery: ast::Query, name: &str, columns: Vec<ast::TableAliasColumnDef>) -> ast::TableFactor {
    ast::TableFactor::Derived {
        lateral: false,
        subquery: Box::new(subquery),
        alias: Some(ast::TableAlias { explicit: true, at: None, name: quoted(name.to_string()), columns }),
        sample: None,
    }
}

pub(super) fn empty_select() -> ast::Select {
    let parsed = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {}).try_with_sql("SELECT 1").and_then(|mut p| p.parse_query());
    match parsed.map(|q| *q.body) {
        Ok(ast::SetExpr::Select(s)) => *s,
        _ => unreachable!("SELECT 1 parses as a SELECT"),
    }
}

/// Whether every routine called `name` changes nothing ([`reads_only`]): a call's arguments
/// are not typed yet where this is asked, so any of them might be the one called.
pub(crate) fn routines_read_only(catalog: &Catalog, name: &str, depth: usize) -> bool {
    let all = catalog.routines(name);
    !all.is_empty() && all.iter().all(|d| reads_only(d, catalog, depth))
}

/// Whether calling `def` changes nothing: its statements are queries without data-changing
/// WITH parts or sequence functions, it runs no dynamic SQL, its expressions call no session
/// functions (sequences, advisory locks, pg_sleep, pg_notify), and the stored functions its
/// queries call change nothing either (checked to a depth of 16 calls).
pub(crate) fn reads_only(def: &ProcedureDef, catalog: &Catalog, depth: usize) -> bool {
    let r = &def.routine;
    if depth > 16 || !r.function {
        return false;
    }
    let unit_exprs = |u: &ExprUnit| {
        let mut session = false;
        u.expr.visit(&mut |n| session |= matches!(n, freshet_core::sql::expr::Expr::Func { func, .. } if func.is_session()));
        !session
    };
    let code_reads = r.code.iter().all(|i| match i {
        i if i.is_dynamic() => false,
        Instr::Init { value: Some(u), .. } | Instr::Assign { value: u, .. } | Instr::JumpIfNot { cond: u, .. } | Instr::JumpIf { cond: u, .. } => unit_exprs(u),
        Instr::Return(Some(u)) | Instr::ReturnNext(Some(u)) => unit_exprs(u),
        Instr::ElementAssign { index, value, .. } => unit_exprs(index) && unit_exprs(value),
        Instr::ArrayAssign { value, .. } => {
            let mut reads = true;
            value.for_each_unit(&mut |u| reads &= unit_exprs(u));
            reads
        }
        Instr::RangeInit { bounds, .. } => [Some(&bounds.lo), Some(&bounds.hi), bounds.step.as_ref()].into_iter().flatten().all(unit_exprs),
        Instr::Raise { args, options, .. } => args.iter().chain(options.iter().map(|(_, u)| u)).all(unit_exprs),
        _ => true,
    });
    code_reads
        && r.sql.iter().all(|u| match &u.statement {
            ast::Statement::Query(q) => {
                let writes = q.with.as_ref().is_some_and(|w| {
                    w.cte_tables.iter().any(|c| matches!(c.query.body.as_ref(), ast::SetExpr::Insert(_) | ast::SetExpr::Update(_) | ast::SetExpr::Delete(_)))
                });
                let mut calls_writer = false;
                let _ = ast::visit_expressions(q.as_ref(), |e| {
                    if let Some((name, _)) = stored_call(e, catalog) {
                        calls_writer |= !routines_read_only(catalog, &name, depth + 1);
                    }
                    ControlFlow::<()>::Continue(())
                });
                !writes && !calls_writer && !crate::sequences::calls_sequence_functions(q.as_ref())
            }
            _ => false,
        })
}
