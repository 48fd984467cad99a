//! PostgreSQL spellings that DataFusion's SQL planner does not know, rewritten into
//! equivalents before planning.
//!
//! - `mod(a, b)` becomes `(a % b)`: both truncate toward zero (the result has the sign of
//!   `a`), and both fail on a zero divisor.
//! - A select list may repeat a result name in PostgreSQL (`SELECT a, a`, `SELECT 1 AS x,
//!   2 AS x`); DataFusion requires unique names, so a repeated one gets an internal alias.
//!   Clients still see PostgreSQL's names: the session takes them from the original AST.

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
    fn mod_becomes_the_modulo_operator() {
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let mut s = sqlparser::parser::Parser::parse_sql(&dialect, "SELECT MOD((a * b), 10000), mod(x, 3) + 1 FROM t WHERE mod(a, 2) = 0")
            .unwrap()
            .remove(0);
        postgres_functions(&mut s);
        assert_eq!(s.to_string(), "SELECT ((a * b) % 10000), (x % 3) + 1 FROM t WHERE (a % 2) = 0");
    }
}
