//! `WITH … INSERT | UPDATE | DELETE …`: a WITH clause in front of a data-changing statement,
//! its common table expressions read-only (PostgreSQL's `WITH … AS (DELETE … RETURNING …)`
//! is refused, 0A000, here as where a query's plan meets it).
//!
//! sqlparser parses such a statement as a query whose body is the statement. Nothing below
//! the statement plans queries with outer CTEs in scope, so the WITH is handed down to where
//! its names can be read: every outermost query inside the statement (an INSERT's source, the
//! subqueries of SET, WHERE and RETURNING, derived tables in FROM or USING) gets the clause
//! as its own, and a table of UPDATE … FROM or DELETE … USING that names a CTE becomes the
//! derived table `(WITH … SELECT * FROM name) AS name`. The statement's target is never a
//! CTE: PostgreSQL resolves it among tables only.
//!
//! INVARIANT: every reference to a CTE name the statement can see lies inside a query that
//! now carries the clause, so it resolves to the same CTE as before. A query that already had
//! a WITH of its own gets the outer CTEs in front of its own (its own may refer to them); a
//! name defined in both is refused (0A000) rather than resolved in a different scope.
//! A CTE read by several of those queries is computed once for each; a read-only query reads
//! the statement's one snapshot each time, so only volatile functions (random()) can tell.

use std::ops::ControlFlow;

use sqlparser::ast::{
    Delete, Ident, Query, SetExpr, Statement, TableAlias, TableFactor, TableWithJoins, Update, UpdateTableFromKind, VisitMut, VisitorMut, With,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::error::{Error, Result};

/// The statement a `WITH … INSERT | UPDATE | DELETE` query stands for, with its WITH handed
/// down (see the module's documentation); any other statement as it is.
pub fn distribute(statement: Statement) -> Result<Statement> {
    let Statement::Query(query) = statement else { return Ok(statement) };
    if query.with.is_none() || !matches!(*query.body, SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_)) {
        return Ok(Statement::Query(query));
    }
    let Query { with: Some(with), body, order_by: None, limit_clause: None, fetch: None, locks, for_clause: None, settings: None, format_clause: None, pipe_operators } = *query
    else {
        return Err(Error::syntax("ORDER BY, LIMIT and FETCH do not follow INSERT, UPDATE or DELETE"));
    };
    let (SetExpr::Insert(mut inner) | SetExpr::Update(mut inner) | SetExpr::Delete(mut inner)) = *body else {
        return Err(Error::internal("a data-changing statement became another"));
    };
    if !locks.is_empty() || !pipe_operators.is_empty() {
        return Err(Error::syntax("FOR UPDATE does not follow INSERT, UPDATE or DELETE"));
    }
    // A data-changing CTE runs whether or not the statement reads it: refused here, since a
    // statement that never reads it would otherwise drop it unseen.
    if with.cte_tables.iter().any(|c| matches!(*c.query.body, SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_))) {
        return Err(Error::unsupported("INSERT, UPDATE or DELETE inside WITH"));
    }
    let names: Vec<String> = with.cte_tables.iter().map(|c| normal(&c.alias.name)).collect();
    let mut attach = Attach { with: &with, names: &names, depth: 0, counted: Vec::new(), failure: None };
    let _ = inner.visit(&mut attach);
    if let Some(e) = attach.failure {
        return Err(e);
    }
    // The targets (UPDATE's table, DELETE's FROM list) are left alone.
    match &mut inner {
        Statement::Update(Update { from: Some(UpdateTableFromKind::AfterSet(from) | UpdateTableFromKind::BeforeSet(from)), .. }) => replace_tables(from, &with, &names)?,
        Statement::Delete(Delete { using: Some(using), .. }) => replace_tables(using, &with, &names)?,
        _ => {}
    }
    Ok(inner)
}

/// A name as PostgreSQL compares it: unquoted identifiers fold to lower case.
fn normal(ident: &Ident) -> String {
    if ident.quote_style.is_some() { ident.value.clone() } else { ident.value.to_lowercase() }
}

/// `query` with the outer CTEs in front of its own.
fn attach(query: &mut Query, with: &With, names: &[String]) -> Result<()> {
    match &mut query.with {
        None => query.with = Some(with.clone()),
        Some(own) => {
            if let Some(clash) = own.cte_tables.iter().find(|c| names.contains(&normal(&c.alias.name))) {
                return Err(Error::unsupported(format!(
                    "WITH query name \"{}\" defined again inside a data-changing statement's WITH",
                    clash.alias.name.value
                )));
            }
            let mut ctes = with.cte_tables.clone();
            ctes.append(&mut own.cte_tables);
            own.cte_tables = ctes;
            own.recursive |= with.recursive;
        }
    }
    Ok(())
}

/// Gives the clause to every outermost query of a statement. An INSERT's VALUES list is not
/// planned as a query (its rows are evaluated, their subqueries each planned on its own), so
/// the clause goes to the subqueries inside it instead.
struct Attach<'a> {
    with: &'a With,
    names: &'a [String],
    /// How many queries enclose the one being visited (a VALUES list passed through not
    /// counted).
    depth: usize,
    /// For each query being visited, whether it counted in `depth`.
    counted: Vec<bool>,
    failure: Option<Error>,
}

impl VisitorMut for Attach<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if self.depth == 0 && query.with.is_none() && matches!(*query.body, SetExpr::Values(_)) {
            self.counted.push(false);
            return ControlFlow::Continue(());
        }
        if self.depth == 0
            && let Err(e) = attach(query, self.with, self.names)
        {
            self.failure = Some(e);
            return ControlFlow::Break(());
        }
        self.depth += 1;
        self.counted.push(true);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        if self.counted.pop() == Some(true) {
            self.depth -= 1;
        }
        ControlFlow::Continue(())
    }
}

/// Turns each table of a FROM or USING list that names one of the CTEs (an unqualified name)
/// into the derived table reading it.
fn replace_tables(tables: &mut [TableWithJoins], with: &With, names: &[String]) -> Result<()> {
    for t in tables {
        replace_factor(&mut t.relation, with, names)?;
        for join in &mut t.joins {
            replace_factor(&mut join.relation, with, names)?;
        }
    }
    Ok(())
}

fn replace_factor(factor: &mut TableFactor, with: &With, names: &[String]) -> Result<()> {
    match factor {
        TableFactor::NestedJoin { table_with_joins, .. } => replace_tables(std::slice::from_mut(&mut **table_with_joins), with, names),
        TableFactor::Table { name, alias, args: None, .. } if name.0.len() == 1 => {
            let Some(ident) = name.0[0].as_ident().cloned() else { return Ok(()) };
            if !names.contains(&normal(&ident)) {
                return Ok(());
            }
            let mut parsed = Parser::new(&PostgreSqlDialect {})
                .try_with_sql(&format!("SELECT * FROM {ident}"))
                .and_then(|mut p| p.parse_query())
                .map_err(|e| Error::internal(format!("reading WITH query {ident}: {e}")))?;
            attach(&mut parsed, with, names)?;
            let alias = alias.take().unwrap_or(TableAlias { explicit: true, name: ident, columns: Vec::new(), at: None });
            *factor = TableFactor::Derived { lateral: false, subquery: parsed, alias: Some(alias), sample: None };
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use crate::sql::parse::parse;

    fn one(sql: &str) -> String {
        let mut parsed = parse(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(parsed.len(), 1);
        parsed.remove(0).to_string()
    }

    #[test]
    fn the_clause_goes_to_the_queries_that_read_it() {
        // An INSERT's source query takes it, in front of its own WITH.
        assert_eq!(one("WITH a AS (SELECT 1 AS x) INSERT INTO t SELECT x FROM a"), "INSERT INTO t WITH a AS (SELECT 1 AS x) SELECT x FROM a");
        assert_eq!(
            one("WITH a AS (SELECT 1 AS x) INSERT INTO t WITH b AS (SELECT x FROM a) SELECT x FROM b"),
            "INSERT INTO t WITH a AS (SELECT 1 AS x), b AS (SELECT x FROM a) SELECT x FROM b"
        );
        // A VALUES list's subqueries take it, not the list.
        assert_eq!(one("WITH a AS (SELECT 1 AS x) INSERT INTO t VALUES ((SELECT x FROM a), 2)"), "INSERT INTO t VALUES ((WITH a AS (SELECT 1 AS x) SELECT x FROM a), 2)");
        // UPDATE … FROM and DELETE … USING read a CTE as a derived table; the targets stay tables.
        assert_eq!(
            one("WITH a AS (SELECT 1 AS x) UPDATE a SET y = 1 FROM a AS s WHERE a.x = s.x"),
            "UPDATE a SET y = 1 FROM (WITH a AS (SELECT 1 AS x) SELECT * FROM a) AS s WHERE a.x = s.x"
        );
        assert_eq!(
            one("WITH a AS (SELECT 1 AS x) DELETE FROM t USING a WHERE t.x IN (SELECT x FROM a)"),
            "DELETE FROM t USING (WITH a AS (SELECT 1 AS x) SELECT * FROM a) AS a WHERE t.x IN (WITH a AS (SELECT 1 AS x) SELECT x FROM a)"
        );
        // Nested subqueries see it through the outermost one; other statements are left alone.
        assert_eq!(
            one("WITH a AS (SELECT 1 AS x) DELETE FROM t WHERE x IN (SELECT x FROM u WHERE EXISTS (SELECT 1 FROM a))"),
            "DELETE FROM t WHERE x IN (WITH a AS (SELECT 1 AS x) SELECT x FROM u WHERE EXISTS (SELECT 1 FROM a))"
        );
        assert_eq!(one("WITH a AS (SELECT 1 AS x) SELECT x FROM a"), "WITH a AS (SELECT 1 AS x) SELECT x FROM a");
        assert!(one("EXPLAIN WITH a AS (SELECT 1 AS x) INSERT INTO t SELECT x FROM a").starts_with("EXPLAIN INSERT INTO t WITH a"));
    }

    #[test]
    fn a_data_changing_cte_is_refused_even_unread() {
        let e = parse("WITH d AS (DELETE FROM u RETURNING *) UPDATE t SET v = 1 WHERE id = 1").unwrap_err();
        assert_eq!(e.state.code(), "0A000");
    }

    #[test]
    fn a_name_defined_again_is_refused() {
        let e = parse("WITH a AS (SELECT 1 AS x) INSERT INTO t WITH A AS (SELECT 2 AS x) SELECT x FROM a").unwrap_err();
        assert_eq!(e.state.code(), "0A000");
        // A quoted name differs from the folded one.
        assert!(parse("WITH a AS (SELECT 1 AS x) INSERT INTO t WITH \"A\" AS (SELECT 2 AS x) SELECT x FROM a").is_ok());
    }
}
