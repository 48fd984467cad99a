//! Rewrites of the parsed statement before planning.

use std::ops::ControlFlow;

use freshet_core::types::{DataType, Value};
use freshet_core::Result;
use sqlparser::ast::{self, Expr, Query, Statement, VisitMut, VisitorMut};

/// Wraps each `$n` whose type the client declared in `CAST($n AS type)`, so that the
/// analytical planner types it as the client will send it.
pub fn cast_declared_params(statement: &mut Statement, declared: &[Option<DataType>]) {
    if declared.iter().all(Option::is_none) {
        return;
    }
    let _ = ast::visit_expressions_mut(statement, |e| {
        if let Expr::Value(v) = e
            && let ast::Value::Placeholder(p) = &v.value
            && let Some(ty) = p
                .strip_prefix('$')
                .and_then(|d| d.parse::<usize>().ok())
                .and_then(|n| declared.get(n.wrapping_sub(1)).copied().flatten())
        {
            let inner = e.clone();
            *e = Expr::Cast {
                kind: ast::CastKind::Cast,
                expr: Box::new(inner),
                data_type: sql_type_ast(ty),
                array: false,
                format: None,
            };
        }
        ControlFlow::<()>::Continue(())
    });
}

/// Rewrites `x [NOT] IN (subquery)` in select lists (also inside aggregates' FILTER) into
/// EXISTS tests the analytical engine plans there; it plans IN subqueries only in WHERE and
/// HAVING. The result keeps SQL's three-valued answer:
///
/// ```sql
/// CASE WHEN EXISTS (SELECT 1 FROM (subquery) AS s(v) WHERE s.v = x) THEN TRUE
///      WHEN x IS NULL AND EXISTS (SELECT 1 FROM (subquery) AS s(v)) THEN NULL
///      WHEN EXISTS (SELECT 1 FROM (subquery) AS s(v) WHERE s.v IS NULL) THEN NULL
///      ELSE FALSE END
/// ```
///
/// (TRUE and FALSE swapped for NOT IN): true on a match; otherwise NULL if the subquery gave
/// a NULL, or gave any row while `x` is NULL; otherwise false, also for an empty subquery.
/// `x` is evaluated in the subquery, as an outer reference (the subquery is a derived table
/// there, so only its one renamed column can capture a name of `x`). A subquery of other than
/// one column, or one that names a table of the outer query (correlated: a derived table
/// cannot refer outside itself), is left alone and the planner reports it.
pub fn in_subqueries_in_select_lists(statement: &mut Statement) {
    struct SelectLists;
    impl VisitorMut for SelectLists {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            if let ast::SetExpr::Select(select) = query.body.as_mut() {
                for item in &mut select.projection {
                    if let ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } = item {
                        let _ = ast::visit_expressions_mut(e, |e| {
                            if let Expr::InSubquery { expr, subquery, negated } = e
                                && single_column(subquery)
                                && !qualifies_outer_names(subquery)
                                && let Some(rewritten) = in_as_exists(expr, subquery, *negated)
                            {
                                *e = rewritten;
                            }
                            ControlFlow::<()>::Continue(())
                        });
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut SelectLists);
}

/// Whether a query qualifies a column with a name none of its FROM clauses (at any depth)
/// defines: it refers to a table of an enclosing query.
fn qualifies_outer_names(q: &Query) -> bool {
    let mut defined = Vec::new();
    let _ = ast::visit_relations(q, |name| {
        if let Some(last) = name.0.last().and_then(|p| p.as_ident()) {
            defined.push(last.value.to_lowercase());
        }
        ControlFlow::<()>::Continue(())
    });
    struct Aliases<'a>(&'a mut Vec<String>);
    impl ast::Visitor for Aliases<'_> {
        type Break = ();
        fn pre_visit_table_factor(&mut self, t: &ast::TableFactor) -> ControlFlow<()> {
            let alias = match t {
                ast::TableFactor::Table { alias, .. } | ast::TableFactor::Derived { alias, .. } => alias.as_ref(),
                _ => None,
            };
            if let Some(a) = alias {
                self.0.push(a.name.value.to_lowercase());
            }
            ControlFlow::Continue(())
        }
    }
    let _ = ast::Visit::visit(q, &mut Aliases(&mut defined));
    let mut outer = false;
    let _ = ast::visit_expressions(q, |e| {
        if let Expr::CompoundIdentifier(parts) = e
            && parts.len() >= 2
            && !defined.contains(&parts[parts.len() - 2].value.to_lowercase())
        {
            outer = true;
        }
        ControlFlow::<()>::Continue(())
    });
    outer
}

/// Whether a subquery's select list is one expression (not `*`, not several).
fn single_column(q: &Query) -> bool {
    match q.body.as_ref() {
        ast::SetExpr::Select(s) => matches!(s.projection.as_slice(), [ast::SelectItem::UnnamedExpr(_) | ast::SelectItem::ExprWithAlias { .. }]),
        _ => false,
    }
}

/// The CASE of [`in_subqueries_in_select_lists`]; `None` if its text does not parse again
/// (the statement is then planned as written).
fn in_as_exists(x: &Expr, subquery: &Query, negated: bool) -> Option<Expr> {
    const ALIAS: &str = "freshet_in_subquery";
    const COLUMN: &str = "freshet_in_value";
    let value = || Expr::CompoundIdentifier(vec![ast::Ident::new(ALIAS), ast::Ident::new(COLUMN)]);
    // Only the first test refers to the outer row: the planner decorrelates an equality, not
    // a disjunction with an outer reference.
    let exists = |condition: Option<Expr>| {
        let filter = condition.map(|c| format!(" WHERE {c}")).unwrap_or_default();
        let sql = format!("SELECT 1 FROM ({subquery}) AS {ALIAS}({COLUMN}){filter}");
        let query = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {}).try_with_sql(&sql).and_then(|mut p| p.parse_query()).ok()?;
        Some(Expr::Exists { subquery: query, negated: false })
    };
    let grouped = |e: &Expr| Expr::Nested(Box::new(e.clone()));
    let matches = exists(Some(Expr::BinaryOp { left: Box::new(value()), op: ast::BinaryOperator::Eq, right: Box::new(grouped(x)) }))?;
    let null_against_rows =
        Expr::BinaryOp { left: Box::new(Expr::IsNull(Box::new(grouped(x)))), op: ast::BinaryOperator::And, right: Box::new(exists(None)?) };
    let null_in_rows = exists(Some(Expr::IsNull(Box::new(value()))))?;
    let boolean = |b: bool| Expr::Value(ast::Value::Boolean(b).into());
    Some(Expr::Case {
        case_token: ast::helpers::attached_token::AttachedToken::empty(),
        end_token: ast::helpers::attached_token::AttachedToken::empty(),
        operand: None,
        conditions: vec![
            ast::CaseWhen { condition: matches, result: boolean(!negated) },
            ast::CaseWhen { condition: null_against_rows, result: Expr::Value(ast::Value::Null.into()) },
            ast::CaseWhen { condition: null_in_rows, result: Expr::Value(ast::Value::Null.into()) },
        ],
        else_result: Some(Box::new(boolean(negated))),
    })
}

/// Replaces what a session knows before the query runs: `current_user`, `session_user`,
/// `user` and `current_role` (the session user), `pg_backend_pid()` (the session's id, which
/// is also its cancel key's process id) and `current_setting('name'[, missing_ok])` (the
/// setting's value when the statement is planned; a prepared statement keeps it).
pub fn session_values(statement: &mut Statement, user: &str, backend_pid: u32, setting: &dyn Fn(&str) -> Result<String>) -> Result<()> {
    let text = |s: String| Expr::Value(ast::Value::SingleQuotedString(s).into());
    let mut failure = None;
    let _ = ast::visit_expressions_mut(statement, |e| {
        let replacement = match e {
            Expr::Identifier(i) if i.quote_style.is_none() && is_user_keyword(&i.value) => Some(text(user.to_string())),
            Expr::Function(f) => {
                let name = f.name.0.last().and_then(|p| p.as_ident()).map(|i| i.value.to_lowercase()).unwrap_or_default();
                let args: Vec<&Expr> = match &f.args {
                    ast::FunctionArguments::None => Vec::new(),
                    ast::FunctionArguments::List(l) => l
                        .args
                        .iter()
                        .filter_map(|a| match a {
                            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => Some(x),
                            _ => None,
                        })
                        .collect(),
                    ast::FunctionArguments::Subquery(_) => return ControlFlow::Continue(()),
                };
                match (name.as_str(), args.as_slice()) {
                    (n, []) if is_user_keyword(n) => Some(text(user.to_string())),
                    ("pg_backend_pid", []) => Some(Expr::Value(ast::Value::Number(backend_pid.to_string(), false).into())),
                    ("current_setting", [Expr::Value(v), rest @ ..]) if rest.len() <= 1 => {
                        let ast::Value::SingleQuotedString(setting_name) = &v.value else { return ControlFlow::Continue(()) };
                        let missing_ok = matches!(rest, [Expr::Value(m)] if matches!(m.value, ast::Value::Boolean(true)));
                        match setting(&setting_name.to_lowercase()) {
                            Ok(value) => Some(text(value)),
                            Err(_) if missing_ok => Some(Expr::Value(ast::Value::Null.into())),
                            Err(err) => {
                                failure = Some(err);
                                return ControlFlow::Break(());
                            }
                        }
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(r) = replacement {
            *e = r;
        }
        ControlFlow::Continue(())
    });
    failure.map_or(Ok(()), Err)
}

/// The keywords that name the session user in PostgreSQL.
fn is_user_keyword(word: &str) -> bool {
    ["user", "current_user", "session_user", "current_role"].iter().any(|k| word.eq_ignore_ascii_case(k))
}

/// The parser's spelling of a SQL type.
pub fn sql_type_ast(ty: DataType) -> ast::DataType {
    use ast::DataType as T;
    match ty {
        DataType::Bool => T::Boolean,
        DataType::Int16 => T::SmallInt(None),
        DataType::Int32 => T::Integer(None),
        DataType::Int64 => T::BigInt(None),
        DataType::Float32 => T::Real,
        DataType::Float64 => T::DoublePrecision,
        DataType::Decimal { precision, scale } => {
            T::Numeric(ast::ExactNumberInfo::PrecisionAndScale(precision as u64, scale as i64))
        }
        // A uuid value is its canonical text, which compares with a uuid column as it is.
        DataType::Char(_) | DataType::Varchar(_) | DataType::Text | DataType::Uuid => T::Text,
        DataType::Date => T::Date,
        DataType::Timestamp => T::Timestamp(None, ast::TimezoneInfo::None),
        DataType::TimestampTz => T::Timestamp(None, ast::TimezoneInfo::WithTimeZone),
    }
}

/// A subquery found at the top level of a statement's expressions.
#[derive(Clone, Debug)]
pub enum FoundSubquery {
    Scalar(Query),
    In(Query),
    Exists(Query),
}

impl FoundSubquery {
    pub fn query(&self) -> &Query {
        match self {
            FoundSubquery::Scalar(q) | FoundSubquery::In(q) | FoundSubquery::Exists(q) => q,
        }
    }
}

/// What a subquery evaluated to.
pub enum SubqueryValue {
    Scalar(Value, DataType),
    List(Vec<Value>, DataType),
    Exists(bool),
}

/// Visits subqueries that are not inside another query, in a fixed order.
struct TopLevel<'a> {
    depth: usize,
    found: &'a mut Vec<FoundSubquery>,
    replace: Option<std::vec::IntoIter<SubqueryValue>>,
}

impl VisitorMut for TopLevel<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if self.depth != 0 {
            return ControlFlow::Continue(());
        }
        let found = match e {
            Expr::Subquery(q) => FoundSubquery::Scalar((**q).clone()),
            Expr::InSubquery { subquery, .. } => FoundSubquery::In((**subquery).clone()),
            Expr::Exists { subquery, .. } => FoundSubquery::Exists((**subquery).clone()),
            _ => return ControlFlow::Continue(()),
        };
        match &mut self.replace {
            None => self.found.push(found),
            Some(values) => {
                let Some(value) = values.next() else { return ControlFlow::Break(()) };
                *e = substitute(e, value);
            }
        }
        ControlFlow::Continue(())
    }
}

/// The subqueries of a DML statement (outside any other query), in visiting order.
pub fn find_subqueries(statement: &mut Statement) -> Vec<FoundSubquery> {
    let mut found = Vec::new();
    visit_top_level(statement, &mut TopLevel { depth: 0, found: &mut found, replace: None });
    found
}

/// Walks the expressions whose subqueries are a statement's top level: an INSERT's VALUES
/// cells (its source is a query, the cells' subqueries are inside it), or the whole statement.
fn visit_top_level(statement: &mut Statement, visitor: &mut TopLevel) {
    if let Statement::Insert(i) = statement
        && let Some(source) = i.source.as_deref_mut()
        && let ast::SetExpr::Values(values) = source.body.as_mut()
    {
        for cell in values.rows.iter_mut().flat_map(|r| r.content.iter_mut()) {
            let _ = cell.visit(visitor);
        }
        return;
    }
    let _ = statement.visit(visitor);
}

/// Replaces the subqueries [`find_subqueries`] found by their values.
pub fn replace_subqueries(statement: &mut Statement, values: Vec<SubqueryValue>) {
    let mut sink = Vec::new();
    visit_top_level(statement, &mut TopLevel { depth: 0, found: &mut sink, replace: Some(values.into_iter()) });
}

fn substitute(e: &Expr, value: SubqueryValue) -> Expr {
    match (e, value) {
        (_, SubqueryValue::Scalar(v, ty)) => literal(&v, ty),
        (Expr::InSubquery { expr, negated, .. }, SubqueryValue::List(values, ty)) => {
            if values.is_empty() {
                // x IN (empty) is false and x NOT IN (empty) is true, even for NULL x.
                return Expr::Value(ast::Value::Boolean(*negated).into());
            }
            Expr::InList { expr: expr.clone(), list: values.iter().map(|v| literal(v, ty)).collect(), negated: *negated }
        }
        (Expr::Exists { negated, .. }, SubqueryValue::Exists(found)) => {
            Expr::Value(ast::Value::Boolean(found != *negated).into())
        }
        (other, _) => other.clone(),
    }
}

/// A literal expression that binds to exactly `v` of type `ty`.
fn literal(v: &Value, ty: DataType) -> Expr {
    let text = v.to_text(ty);
    let value = match (v, text) {
        (Value::Null, _) | (_, None) => ast::Value::Null,
        (Value::Bool(b), _) => ast::Value::Boolean(*b),
        (_, Some(s)) => ast::Value::SingleQuotedString(s),
    };
    Expr::Cast {
        kind: ast::CastKind::Cast,
        expr: Box::new(Expr::Value(value.into())),
        data_type: sql_type_ast(ty),
        array: false,
        format: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sql: &str) -> Statement {
        freshet_core::sql::parse(sql).unwrap().remove(0)
    }

    #[test]
    fn top_level_subqueries_are_replaced_in_order() {
        let mut s = parse("DELETE FROM t WHERE a IN (SELECT x FROM u WHERE EXISTS (SELECT 1 FROM v)) AND b = (SELECT max(y) FROM w)");
        let found = find_subqueries(&mut s);
        assert_eq!(found.len(), 2, "the nested EXISTS belongs to the first subquery");
        assert!(matches!(found[0], FoundSubquery::In(_)));
        replace_subqueries(
            &mut s,
            vec![
                SubqueryValue::List(vec![Value::Int32(1), Value::Int32(2)], DataType::Int32),
                SubqueryValue::Scalar(Value::Int64(7), DataType::Int64),
            ],
        );
        assert_eq!(
            s.to_string(),
            "DELETE FROM t WHERE a IN (CAST('1' AS INTEGER), CAST('2' AS INTEGER)) AND b = CAST('7' AS BIGINT)"
        );
    }

    #[test]
    fn declared_parameters_get_casts() {
        let mut s = parse("SELECT * FROM t WHERE a = $1 AND b = $2");
        cast_declared_params(&mut s, &[Some(DataType::Int64), None]);
        assert_eq!(s.to_string(), "SELECT * FROM t WHERE a = CAST($1 AS BIGINT) AND b = $2");
    }
}

#[cfg(test)]
mod in_subquery_tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut st = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::PostgreSqlDialect {}, sql).unwrap().remove(0);
        in_subqueries_in_select_lists(&mut st);
        st.to_string()
    }

    #[test]
    fn in_subqueries_of_select_lists_become_exists_tests() {
        let out = rewritten("SELECT v NOT IN (SELECT k FROM b AS bb WHERE bb.k > 1) FROM a WHERE v IN (SELECT k FROM b)");
        assert!(out.starts_with("SELECT CASE WHEN EXISTS (SELECT 1 FROM (SELECT k FROM b AS bb WHERE bb.k > 1)"), "{out}");
        assert!(out.ends_with("ELSE true END FROM a WHERE v IN (SELECT k FROM b)"), "WHERE keeps its IN: {out}");
        // Left as written: correlated, several columns, `*`.
        for sql in [
            "SELECT v IN (SELECT k FROM b WHERE b.k = a.v) FROM a",
            "SELECT (v, v) IN (SELECT k, k FROM b) FROM a",
            "SELECT v IN (SELECT * FROM b) FROM a",
        ] {
            assert_eq!(rewritten(sql), sql);
        }
    }
}
