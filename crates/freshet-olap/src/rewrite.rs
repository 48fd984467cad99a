//! PostgreSQL spellings that DataFusion's SQL planner does not know, rewritten into
//! equivalents before planning.
//!
//! - `mod(a, b)` becomes `(a % b)`: both truncate toward zero (the result has the sign of
//!   `a`), and both fail on a zero divisor.

use std::ops::ControlFlow;

use sqlparser::ast::{self, Expr};

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
    fn mod_becomes_the_modulo_operator() {
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let mut s = sqlparser::parser::Parser::parse_sql(&dialect, "SELECT MOD((a * b), 10000), mod(x, 3) + 1 FROM t WHERE mod(a, 2) = 0")
            .unwrap()
            .remove(0);
        postgres_functions(&mut s);
        assert_eq!(s.to_string(), "SELECT ((a * b) % 10000), (x % 3) + 1 FROM t WHERE (a % 2) = 0");
    }
}
