//! PostgreSQL spellings that DataFusion's SQL planner does not know, rewritten into
//! equivalents before planning.
//!
//! - `mod(a, b)` becomes `(a % b)`: both truncate toward zero (the result has the sign of
//!   `a`), and both fail on a zero divisor.
//! - A select list may repeat a result name in PostgreSQL (`SELECT a, a`, `SELECT 1 AS x,
//!   2 AS x`); DataFusion requires unique names, so a repeated one gets an internal alias.
//!   Clients still see PostgreSQL's names: the session takes them from the original AST.
//! - The spellings of the catalog queries clients send (psql's `\d` family, JDBC metadata):
//!   `pg_catalog.`-qualified function names, `OPERATOR(pg_catalog.~)`, `COLLATE
//!   pg_catalog.default` (Freshet compares strings bytewise, which is the C collation),
//!   casts to `regclass`, `oid`, `name`, `"char"` and `pg_catalog.`-qualified types, and
//!   correlated scalar subqueries over catalog relations without an aggregate (see
//!   [`catalog_spellings`]).

use std::collections::HashSet;
use std::ops::ControlFlow;

use freshet_core::sql::names::{column_name, fold_ident};
use sqlparser::ast::{self, Expr, VisitMut, VisitorMut};

/// Gives every select-list item whose PostgreSQL result name repeats an earlier one's in the
/// same SELECT (at any depth of `statement`) an alias of its own.
pub fn unique_output_names(statement: &mut ast::Statement) {
    struct Renamer;
    impl VisitorMut for Renamer {
        type Break = ();
        fn pre_visit_select(&mut self, select: &mut ast::Select) -> ControlFlow<()> {
            let mut seen = HashSet::new();
            for (i, item) in select.projection.iter_mut().enumerate() {
                let name = match item {
                    ast::SelectItem::UnnamedExpr(e) => column_name(e),
                    ast::SelectItem::ExprWithAlias { alias, .. } => fold_ident(alias),
                    _ => continue,
                };
                if seen.insert(name) {
                    continue;
                }
                let alias = ast::Ident::with_quote('"', format!("__freshet_column_{}", i + 1));
                *item = match std::mem::replace(item, ast::SelectItem::Wildcard(Default::default())) {
                    ast::SelectItem::UnnamedExpr(expr) | ast::SelectItem::ExprWithAlias { expr, .. } => {
                        ast::SelectItem::ExprWithAlias { expr, alias }
                    }
                    other => other,
                };
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Renamer);
}

/// The function a string cast to `regclass` becomes: the relation's OID, looked up by name
/// (or the number itself); NULL if there is no such relation.
pub const REGCLASS_FUNCTION: &str = "freshet_regclass";

/// Rewrites the catalog spellings of PostgreSQL clients into what DataFusion plans.
/// `is_catalog` tells whether a relation name (last part, folded) is a catalog relation.
///
/// A scalar subquery that reads only catalog relations and has no aggregate becomes `max(…)`
/// of its single column: DataFusion plans a correlated scalar subquery only when it is
/// aggregated. For catalog lookups (one row at most: a default, a collation) the answer is the
/// same; user tables keep PostgreSQL's semantics (and DataFusion's refusal).
pub fn catalog_spellings(statement: &mut ast::Statement, is_catalog: &dyn Fn(&ast::ObjectName) -> bool) {
    let _ = ast::visit_expressions_mut(statement, |e| {
        match e {
            Expr::Function(f) => {
                if let Some(name) = unqualified(&f.name) {
                    f.name = ast::ObjectName(vec![ast::ObjectNamePart::Identifier(name)]);
                }
            }
            Expr::BinaryOp { op: ast::BinaryOperator::PGCustomBinaryOperator(parts), .. } => {
                if let Some(op) = builtin_operator(parts) {
                    let Expr::BinaryOp { op: slot, .. } = e else { unreachable!() };
                    *slot = op;
                }
            }
            Expr::Collate { collation, expr } if is_c_collation(collation) => {
                *e = Expr::Nested(std::mem::replace(expr, Box::new(Expr::Value(ast::Value::Null.into()))));
            }
            Expr::Cast { expr, data_type, .. } => {
                if let Some(replacement) = catalog_cast(expr, data_type) {
                    *e = replacement;
                }
            }
            Expr::Subquery(q) => aggregate_catalog_lookup(q, is_catalog),
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
}

/// The last part of a `pg_catalog.`-qualified name.
fn unqualified(name: &ast::ObjectName) -> Option<ast::Ident> {
    match name.0.as_slice() {
        [schema, n] if schema.as_ident().is_some_and(|s| fold_ident(s) == "pg_catalog") => n.as_ident().cloned(),
        _ => None,
    }
}

/// `OPERATOR(pg_catalog.op)` as the built-in operator.
fn builtin_operator(parts: &[String]) -> Option<ast::BinaryOperator> {
    use ast::BinaryOperator as B;
    let op = match parts {
        [schema, op] if schema.eq_ignore_ascii_case("pg_catalog") => op.as_str(),
        [op] => op.as_str(),
        _ => return None,
    };
    Some(match op {
        "~" => B::PGRegexMatch,
        "~*" => B::PGRegexIMatch,
        "!~" => B::PGRegexNotMatch,
        "!~*" => B::PGRegexNotIMatch,
        "~~" => B::PGLikeMatch,
        "!~~" => B::PGNotLikeMatch,
        "=" => B::Eq,
        "<>" | "!=" => B::NotEq,
        "<" => B::Lt,
        "<=" => B::LtEq,
        ">" => B::Gt,
        ">=" => B::GtEq,
        "+" => B::Plus,
        "-" => B::Minus,
        "*" => B::Multiply,
        "/" => B::Divide,
        "%" => B::Modulo,
        "||" => B::StringConcat,
        _ => return None,
    })
}

/// The collations that compare as Freshet does (bytewise).
fn is_c_collation(name: &ast::ObjectName) -> bool {
    let last = name.0.last().and_then(|p| p.as_ident()).map(|i| i.value.to_lowercase());
    let qualified_ok = name.0.len() == 1 || unqualified(name).is_some();
    qualified_ok && matches!(last.as_deref(), Some("default" | "c" | "posix" | "ucs_basic"))
}

/// A cast to a catalog type, as something DataFusion plans: OID types are integers (a string
/// cast to `regclass` is looked up by name), `name` and `"char"` are text, and
/// `pg_catalog.`-qualified built-in types lose the qualifier.
fn catalog_cast(expr: &Expr, data_type: &ast::DataType) -> Option<Expr> {
    use ast::DataType as T;
    let type_name = match data_type {
        T::Regclass => "regclass".to_string(),
        T::Custom(name, modifiers) if modifiers.is_empty() => {
            let ident = match name.0.as_slice() {
                [n] => n.as_ident()?.clone(),
                _ => unqualified(name)?,
            };
            if ident.quote_style.is_some() { ident.value.clone() } else { ident.value.to_lowercase() }
        }
        _ => return None,
    };
    let cast = |data_type: T| Some(Expr::Cast { kind: ast::CastKind::DoubleColon, expr: Box::new(expr.clone()), data_type, format: None, array: false });
    match type_name.as_str() {
        "regclass" => match expr {
            Expr::Value(v) if matches!(v.value, ast::Value::SingleQuotedString(_)) => Some(call(REGCLASS_FUNCTION, expr.clone())),
            _ => cast(T::BigInt(None)),
        },
        "oid" | "regtype" | "regnamespace" | "regproc" | "regprocedure" | "regrole" | "regoper" | "xid" | "cid" => cast(T::BigInt(None)),
        "name" | "char" | "bpchar" | "text" => cast(T::Text),
        "varchar" => cast(T::Varchar(None)),
        "int2" | "smallint" => cast(T::SmallInt(None)),
        "int4" | "int" | "integer" => cast(T::Int(None)),
        "int8" | "bigint" => cast(T::BigInt(None)),
        "bool" | "boolean" => cast(T::Boolean),
        "float4" | "real" => cast(T::Real),
        "float8" => cast(T::DoublePrecision),
        "numeric" => cast(T::Numeric(ast::ExactNumberInfo::None)),
        "date" => cast(T::Date),
        "timestamp" => cast(T::Timestamp(None, ast::TimezoneInfo::None)),
        _ => None,
    }
}

/// Wraps the single output of an unaggregated scalar subquery over catalog relations in
/// `max(…)` (see [`catalog_spellings`]).
fn aggregate_catalog_lookup(q: &mut ast::Query, is_catalog: &dyn Fn(&ast::ObjectName) -> bool) {
    let ast::SetExpr::Select(select) = q.body.as_mut() else { return };
    let grouped = !matches!(&select.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty());
    if grouped || select.having.is_some() || select.from.is_empty() || q.limit_clause.is_some() {
        return;
    }
    let catalog_only = select.from.iter().all(|t| {
        std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)).all(|r| matches!(r, ast::TableFactor::Table { name, args: None, .. } if is_catalog(name)))
    });
    let [item] = select.projection.as_mut_slice() else { return };
    let expr = match item {
        ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => e,
        _ => return,
    };
    if !catalog_only || contains_aggregate(expr) {
        return;
    }
    let inner = std::mem::replace(expr, Expr::Value(ast::Value::Null.into()));
    *expr = call("max", inner);
}

/// A call of the one-argument function `name`.
fn call(name: &str, arg: Expr) -> Expr {
    Expr::Function(ast::Function {
        name: ast::ObjectName(vec![ast::ObjectNamePart::Identifier(ast::Ident::new(name))]),
        uses_odbc_syntax: false,
        parameters: ast::FunctionArguments::None,
        args: ast::FunctionArguments::List(ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: vec![ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(arg))],
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

fn contains_aggregate(e: &Expr) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(e, |x| {
        if let Expr::Function(f) = x
            && let Some(name) = f.name.0.last().and_then(|p| p.as_ident())
            && freshet_core::sql::names::is_aggregate(&fold_ident(name))
        {
            found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found
}

/// Rewrites every PostgreSQL-only function call in `statement`.
pub fn postgres_functions(statement: &mut ast::Statement) {
    let _ = ast::visit_expressions_mut(statement, |e| {
        if let Some((a, b)) = mod_call(e) {
            *e = Expr::Nested(Box::new(Expr::BinaryOp { left: Box::new(a), op: ast::BinaryOperator::Modulo, right: Box::new(b) }));
        }
        ControlFlow::<()>::Continue(())
    });
}

/// The arguments of a plain two-argument `mod(…)` call.
fn mod_call(e: &Expr) -> Option<(Expr, Expr)> {
    let Expr::Function(f) = e else { return None };
    let [name] = f.name.0.as_slice() else { return None };
    if !name.as_ident().is_some_and(|i| i.value.eq_ignore_ascii_case("mod")) || f.over.is_some() || f.filter.is_some() {
        return None;
    }
    let ast::FunctionArguments::List(list) = &f.args else { return None };
    if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
        return None;
    }
    match list.args.as_slice() {
        [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(a)), ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(b))] => {
            Some((a.clone(), b.clone()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_result_names_get_aliases_of_their_own() {
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let sql = "SELECT a, t.a, a + 1, 2 AS x, 3 AS x FROM t WHERE b IN (SELECT c, c FROM u)";
        let mut s = sqlparser::parser::Parser::parse_sql(&dialect, sql).unwrap().remove(0);
        unique_output_names(&mut s);
        assert_eq!(
            s.to_string(),
            "SELECT a, t.a AS \"__freshet_column_2\", a + 1, 2 AS x, 3 AS \"__freshet_column_5\" FROM t \
             WHERE b IN (SELECT c, c AS \"__freshet_column_2\" FROM u)"
        );
    }

    #[test]
    fn catalog_spellings_become_what_datafusion_plans() {
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let sql = "SELECT pg_catalog.format_type(a.atttypid, NULL), x::pg_catalog.regclass, 't'::regclass, n::name, \
                   (SELECT d.adbin FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid), \
                   (SELECT u.v FROM u WHERE u.k = a.attrelid) \
                   FROM pg_catalog.pg_attribute a WHERE a.attname OPERATOR(pg_catalog.~) '^(x)$' COLLATE pg_catalog.default";
        let mut s = sqlparser::parser::Parser::parse_sql(&dialect, sql).unwrap().remove(0);
        let is_catalog = |n: &ast::ObjectName| n.0.last().and_then(|p| p.as_ident()).is_some_and(|i| i.value.starts_with("pg_"));
        catalog_spellings(&mut s, &is_catalog);
        assert_eq!(
            s.to_string(),
            "SELECT format_type(a.atttypid, NULL), x::BIGINT, freshet_regclass('t'), n::TEXT, \
             (SELECT max(d.adbin) FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid), \
             (SELECT u.v FROM u WHERE u.k = a.attrelid) \
             FROM pg_catalog.pg_attribute a WHERE a.attname ~ ('^(x)$')"
        );
    }

    #[test]
    fn mod_becomes_the_modulo_operator() {
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let mut s = sqlparser::parser::Parser::parse_sql(&dialect, "SELECT MOD((a * b), 10000), mod(x, 3) + 1 FROM t WHERE mod(a, 2) = 0")
            .unwrap()
            .remove(0);
        postgres_functions(&mut s);
        assert_eq!(s.to_string(), "SELECT ((a * b) % 10000), (x % 3) + 1 FROM t WHERE (a % 2) = 0");
    }
}
