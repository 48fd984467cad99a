//! `UPDATE target SET … FROM sources WHERE …`, PostgreSQL's join update.
//!
//! The statement becomes two (`rewrite`):
//! 1. a query over the target and the sources that gives, for each target row the WHERE
//!    clause joins, its primary key and the values of the source columns the statement uses:
//!    `SELECT t.<key>, <source references> FROM target t, sources WHERE …`, run like any
//!    query (on the analytical side when it joins);
//! 2. an UPDATE of one row by its key, with the source references as parameters:
//!    `UPDATE target t SET … WHERE t.<key> = $k … AND (…)`, run on the short path once per
//!    target row the query found (the first of its rows: PostgreSQL also updates a row once,
//!    with one of the source rows that join it).
//!
//! An UPDATE whose SET calls sequence functions (`SET id = nextval('s')`) runs the same way,
//! with or without FROM: each such call is a parameter of the one-row UPDATE, drawn by the
//! session for each row in the order the query gives them (`draws`), as the session draws
//! them for `INSERT … SELECT`.
//!
//! RETURNING goes to the one-row UPDATE, its source references made parameters as in SET
//! (so `RETURNING t.id, s.name` gives, per row changed, its new id and the joined source
//! row's name); `*` lists the target's columns and then each source table's, as in
//! PostgreSQL.
//!
//! The target's own columns are read by the UPDATE, under the row's lock and in its newest
//! version, and the WHERE clause is checked again there, as PostgreSQL re-checks a row that
//! changed under a READ COMMITTED update; only the source values come from the query's
//! snapshot. The statements run in one transaction (the block's, or one of their own), and a
//! failure part-way undoes what the statement did.

use freshet_core::catalog::{Catalog, TableDef};
use freshet_core::sql::names::fold_ident;
use freshet_core::{Error, Result};
use sqlparser::ast::{self, Statement};

/// The two statements an UPDATE … FROM runs.
pub(crate) struct Rewritten {
    /// `SELECT <target key>, <source references> FROM target, sources WHERE …`.
    pub select: Statement,
    /// `UPDATE target SET … WHERE <key> = … AND (…)`: after the statement's own parameters,
    /// the key's values and then the source references', in the order the query gives them.
    pub update: Statement,
    /// How many columns the key has (the query's first columns).
    pub key_len: usize,
    /// The sequence function calls of the SET list, in the order of their parameters (after
    /// the key's, before the source references').
    pub draws: Vec<ast::Expr>,
    /// Whether the UPDATE has RETURNING (its rows are the statement's).
    pub returning: bool,
}

/// Whether an UPDATE runs here: it has FROM, or its SET list calls sequence functions.
pub(crate) fn applies(u: &ast::Update) -> bool {
    u.from.is_some() || u.assignments.iter().any(|a| crate::sequences::calls_sequence_functions(&a.value))
}

/// Whether `e` is a call of a sequence function (nextval, setval, currval, lastval).
fn sequence_call(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Function(_)) && crate::sequences::calls_sequence_functions(e)
}

pub(crate) fn rewrite(u: &ast::Update, catalog: &Catalog, user_params: usize) -> Result<Rewritten> {
    let sources: &[ast::TableWithJoins] = match &u.from {
        Some(ast::UpdateTableFromKind::AfterSet(sources) | ast::UpdateTableFromKind::BeforeSet(sources)) => sources,
        None => &[],
    };
    if !u.order_by.is_empty() || u.limit.is_some() {
        return Err(Error::unsupported("ORDER BY or LIMIT in UPDATE"));
    }
    let (def, qualifier, key) = target_key(&u.table, catalog, "UPDATE", &|table| {
        Error::unsupported(format!("UPDATE … FROM (or with sequence functions in SET) of \"{table}\", which has no primary key"))
    })?;

    // The sequence function calls, each a parameter after the key's.
    let mut assignments = u.assignments.clone();
    let mut draws: Vec<ast::Expr> = Vec::new();
    let first_draw = user_params + key.len() + 1;
    for a in &mut assignments {
        let _ = ast::visit_expressions_mut(&mut a.value, |e: &mut ast::Expr| {
            if sequence_call(e) {
                draws.push(std::mem::replace(e, ast::Expr::value(ast::Value::Placeholder(format!("${}", first_draw + draws.len())))));
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
    }
    if u.selection.as_ref().is_some_and(crate::sequences::calls_sequence_functions) {
        return Err(crate::sequences::not_in_queries());
    }
    // The source references, each once, replaced by parameters after the draws'.
    let mut references: Vec<String> = Vec::new();
    let first = first_draw + draws.len();
    let mut subquery = false;
    let mut replace = |e: &mut ast::Expr| {
        let source = match e {
            ast::Expr::CompoundIdentifier(parts) if parts.len() >= 2 => fold_ident(&parts[parts.len() - 2]) != qualifier,
            ast::Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default") => false,
            ast::Expr::Identifier(i) => def.column_index(&fold_ident(i)).is_none(),
            ast::Expr::Subquery(_) | ast::Expr::Exists { .. } | ast::Expr::InSubquery { .. } => {
                subquery = true;
                false
            }
            _ => false,
        };
        if source {
            let text = e.to_string();
            let n = references.iter().position(|r| *r == text).unwrap_or_else(|| {
                references.push(text);
                references.len() - 1
            });
            *e = ast::Expr::value(ast::Value::Placeholder(format!("${}", first + n)));
        }
        std::ops::ControlFlow::<()>::Continue(())
    };
    for a in &mut assignments {
        let _ = ast::visit_expressions_mut(&mut a.value, &mut replace);
    }
    let mut selection = u.selection.clone();
    if let Some(s) = &mut selection {
        let _ = ast::visit_expressions_mut(s, &mut replace);
    }
    // RETURNING: wildcards listed column by column, then source references replaced as in
    // SET; a column of a source keeps its name.
    let mut returning = Vec::new();
    for item in returning_items(u, def, &qualifier, sources, catalog)? {
        let (mut e, alias) = match item {
            ast::SelectItem::UnnamedExpr(e) => (e, None),
            ast::SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias)),
            other => return Err(Error::unsupported(format!("RETURNING {other} in UPDATE … FROM"))),
        };
        let name = match &e {
            ast::Expr::Identifier(i) => Some(i.clone()),
            ast::Expr::CompoundIdentifier(parts) => parts.last().cloned(),
            _ => None,
        };
        let _ = ast::visit_expressions_mut(&mut e, &mut replace);
        returning.push(match alias.or(name.filter(|_| matches!(e, ast::Expr::Value(_)))) {
            Some(alias) => format!("{e} AS {}", ast::Ident::with_quote('"', fold_ident(&alias))),
            None => e.to_string(),
        });
    }
    if subquery {
        return Err(Error::unsupported("subqueries in UPDATE … FROM"));
    }

    let quoted = |n: &str| ast::Ident::with_quote('"', n).to_string();
    let q = quoted(&qualifier);
    let mut items: Vec<String> = key.iter().map(|k| format!("{q}.{}", quoted(k))).collect();
    items.extend(references.iter().cloned());
    let froms: String = sources.iter().map(|s| format!(", {s}")).collect();
    let filter = u.selection.as_ref().map_or(String::new(), |w| format!(" WHERE {w}"));
    let select = format!("SELECT {} FROM {}{froms}{filter}", items.join(", "), u.table);

    let set = assignments.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let mut conditions: Vec<String> = key.iter().enumerate().map(|(i, k)| format!("{q}.{} = ${}", quoted(k), user_params + i + 1)).collect();
    if let Some(s) = &selection {
        conditions.push(format!("({s})"));
    }
    let returning_clause = if u.returning.is_some() { format!(" RETURNING {}", returning.join(", ")) } else { String::new() };
    let update = format!("UPDATE {} SET {set} WHERE {}{returning_clause}", u.table, conditions.join(" AND "));
    Ok(Rewritten { select: one_statement(&select)?, update: one_statement(&update)?, key_len: key.len(), draws, returning: u.returning.is_some() })
}

/// The RETURNING list of an UPDATE … FROM with its wildcards listed column by column, each
/// qualified: `*` is the target's columns and then each source's, `t.*` one relation's. A
/// source that is not a table (a subquery, a join) cannot be listed so (0A000).
fn returning_items(u: &ast::Update, target: &TableDef, qualifier: &str, sources: &[ast::TableWithJoins], catalog: &Catalog) -> Result<Vec<ast::SelectItem>> {
    let Some(items) = &u.returning else { return Ok(Vec::new()) };
    // Each relation's qualifier and columns: the target's, then the sources'.
    let columns_of = |def: &TableDef, qualifier: &str| -> Vec<ast::SelectItem> {
        def.columns
            .iter()
            .map(|c| ast::SelectItem::UnnamedExpr(ast::Expr::CompoundIdentifier(vec![ast::Ident::with_quote('"', qualifier), ast::Ident::with_quote('"', &c.name)])))
            .collect()
    };
    let source_tables = || -> Result<Vec<(&TableDef, String)>> {
        let mut out = Vec::new();
        for source in sources {
            let ast::TableFactor::Table { name, alias, .. } = &source.relation else {
                return Err(Error::unsupported("RETURNING * in UPDATE … FROM a source other than a table"));
            };
            if !source.joins.is_empty() {
                return Err(Error::unsupported("RETURNING * in UPDATE … FROM a join"));
            }
            let table = freshet_core::sql::names::user_relation(name)?;
            let def = catalog.require_table(&table)?;
            out.push((def.as_ref(), alias.as_ref().map_or(table, |a| fold_ident(&a.name))));
        }
        Ok(out)
    };
    let mut out = Vec::new();
    for item in items {
        match item {
            ast::SelectItem::Wildcard(_) => {
                out.extend(columns_of(target, qualifier));
                for (def, q) in source_tables()? {
                    out.extend(columns_of(def, &q));
                }
            }
            ast::SelectItem::QualifiedWildcard(ast::SelectItemQualifiedWildcardKind::ObjectName(name), _) => {
                let q = name.0.last().and_then(|p| p.as_ident()).map(fold_ident).unwrap_or_default();
                if q == qualifier {
                    out.extend(columns_of(target, qualifier));
                    continue;
                }
                let (def, q) = source_tables()?
                    .into_iter()
                    .find(|(_, sq)| *sq == q)
                    .ok_or_else(|| Error::new(freshet_core::SqlState::UndefinedTable, format!("missing FROM-clause entry for table \"{q}\"")))?;
                out.extend(columns_of(def, &q));
            }
            other => out.push(other.clone()),
        }
    }
    Ok(out)
}

/// The target of an UPDATE or DELETE that is changed row by row by its primary key: its
/// table, the qualifier its columns take (its alias, or its name) and its primary key's
/// columns; `no_key(table name)` is the error for a table without one.
pub(crate) fn target_key<'c>(
    relation: &ast::TableWithJoins,
    catalog: &'c Catalog,
    verb: &str,
    no_key: &dyn Fn(&str) -> Error,
) -> Result<(&'c TableDef, String, Vec<String>)> {
    let ast::TableFactor::Table { name, alias, .. } = &relation.relation else { return Err(Error::unsupported(format!("{verb} of a join"))) };
    if !relation.joins.is_empty() {
        return Err(Error::unsupported(format!("{verb} of a join")));
    }
    let table = freshet_core::sql::names::user_relation(name)?;
    let def = catalog.require_table(&table)?;
    let key = def.primary_key().ok_or_else(|| no_key(&table))?.columns.iter().map(|&c| def.columns[c].name.clone()).collect();
    let qualifier = alias.as_ref().map_or(table, |a| fold_ident(&a.name));
    Ok((def, qualifier, key))
}

/// The one statement of a rewrite's text.
pub(crate) fn one_statement(sql: &str) -> Result<Statement> {
    let mut statements = freshet_core::sql::parse::parse(sql)?;
    match (statements.pop(), statements.is_empty()) {
        (Some(s), true) => Ok(s),
        _ => Err(Error::internal(format!("a rewrite gave other than one statement: {sql}"))),
    }
}

/// `DELETE FROM target [AS a] USING sources WHERE …`, PostgreSQL's join delete, as the
/// DELETE of the target rows the join finds: `DELETE FROM target [AS a] WHERE a.key IN
/// (SELECT a.key FROM target [AS a], sources WHERE …)`, whose subquery the session evaluates
/// first (as for any DELETE with an uncorrelated subquery). The target needs a one-column
/// primary key. As with UPDATE … FROM, the join is evaluated on the statement's snapshot; a
/// row found there is deleted even if a concurrent commit changed it since (PostgreSQL
/// re-checks the join on the newest version).
pub(crate) fn delete_using(d: &ast::Delete, catalog: &Catalog) -> Result<Statement> {
    let Some(using) = &d.using else { return Ok(Statement::Delete(d.clone())) };
    if !d.tables.is_empty() || d.limit.is_some() || !d.order_by.is_empty() {
        return Err(Error::unsupported("DELETE … USING with several targets, ORDER BY or LIMIT"));
    }
    let from = match &d.from {
        ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
    };
    let [target] = from.as_slice() else { return Err(Error::unsupported("DELETE from several tables")) };
    let ast::TableFactor::Table { name, alias, .. } = &target.relation else { return Err(Error::unsupported("DELETE from a join")) };
    if !target.joins.is_empty() {
        return Err(Error::unsupported("DELETE from a join"));
    }
    let table = freshet_core::sql::names::user_relation(name)?;
    let def = catalog.require_table(&table)?;
    let key = match def.primary_key().map(|k| k.columns.as_slice()) {
        Some([c]) => def.columns[*c].name.clone(),
        _ => return Err(Error::unsupported(format!("DELETE … USING on \"{table}\", which has no one-column primary key"))),
    };
    let quoted = |n: &str| ast::Ident::with_quote('"', n).to_string();
    let qualifier = alias.as_ref().map_or(table.clone(), |a| fold_ident(&a.name));
    let column = format!("{}.{}", quoted(&qualifier), quoted(&key));
    let sources: Vec<String> = using.iter().map(ToString::to_string).collect();
    let filter = d.selection.as_ref().map_or(String::new(), |w| format!(" WHERE {w}"));
    let select = format!("SELECT {column} FROM {target}, {}{filter}", sources.join(", "));
    let parsed = freshet_core::sql::parse::parse(&select)?;
    let [Statement::Query(subquery)] = parsed.as_slice() else {
        return Err(Error::internal(format!("not a query: {select}")));
    };
    let key_expr = ast::Expr::CompoundIdentifier(vec![ast::Ident::with_quote('"', qualifier), ast::Ident::with_quote('"', key)]);
    let mut rewritten = d.clone();
    rewritten.using = None;
    rewritten.selection = Some(ast::Expr::InSubquery { expr: Box::new(key_expr), subquery: subquery.clone(), negated: false });
    Ok(Statement::Delete(rewritten))
}
