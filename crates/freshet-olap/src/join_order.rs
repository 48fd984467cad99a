//! The join order of comma-separated FROM lists.
//!
//! DataFusion keeps the written order of a FROM list: it joins the first relation with the
//! next one in the list that shares an equality with it, and so on (`EliminateCrossJoin`), and
//! only chooses each hash join's build side from statistics. A query that names its large
//! tables first (`FROM order_line, stock, supplier, nation WHERE … n_name = 'Germany'`) then
//! joins millions of rows before the selective filter on the small table takes effect.
//!
//! Before planning, [`order_from_lists`] rewrites each FROM list of three or more relations
//! into a greedy order:
//! - each relation's size is estimated from its live row count times the selectivity of the
//!   WHERE conjuncts that mention only it (PostgreSQL-like default selectivities: equality
//!   0.005, ranges 1/3, `BETWEEN` 1/4, `LIKE` 1/20; an OR of conjunct groups that each filter
//!   the relation counts as the sum of those groups' selectivities);
//! - the list starts with the smallest relation, then repeatedly takes the smallest relation
//!   that shares an equality conjunct with those already taken (the smallest of all when none
//!   does, as a cross join is then unavoidable); ties keep the written order.
//!
//! Inner joins commute, so the answer is the same. A list is left as written when reordering
//! could change anything else or the estimate would be a guess: a select list with `*` (the
//! column order would change), explicit `JOIN`s, `LATERAL` or table functions, or a name that
//! is not a user table (a CTE, a catalog relation). Derived tables count as large; their
//! columns are known when their select list names them all.

use std::collections::HashMap;
use std::ops::ControlFlow;

use freshet_core::sql::names::{column_name, fold_ident};
use sqlparser::ast::{self, BinaryOperator as B, Expr, VisitMut, VisitorMut};

/// What the estimate knows of a user table.
#[derive(Clone, Debug)]
pub struct TableInfo {
    /// Column names, folded.
    pub columns: Vec<String>,
    /// Live rows.
    pub rows: f64,
}

/// How many rows a derived table (a subquery in FROM) is taken to have.
const DERIVED_ROWS: f64 = 1e6;

/// The user table an unqualified or `public.`-qualified name refers to, folded.
fn table_name(name: &ast::ObjectName) -> Option<String> {
    let parts: Vec<String> = name.0.iter().map(|p| p.as_ident().map(fold_ident)).collect::<Option<_>>()?;
    match parts.as_slice() {
        [t] => Some(t.clone()),
        [s, t] if s == "public" => Some(t.clone()),
        _ => None,
    }
}

/// The table names of the FROM lists [`order_from_lists`] may reorder (at any depth).
pub fn from_list_tables(statement: &mut ast::Statement) -> Vec<String> {
    struct Names(Vec<String>);
    impl VisitorMut for Names {
        type Break = ();
        fn pre_visit_select(&mut self, select: &mut ast::Select) -> ControlFlow<()> {
            if select.from.len() >= 3 {
                for t in &select.from {
                    if let ast::TableFactor::Table { name, .. } = &t.relation
                        && let Some(n) = table_name(name)
                        && !self.0.contains(&n)
                    {
                        self.0.push(n);
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut names = Names(Vec::new());
    let _ = statement.visit(&mut names);
    names.0
}

/// Reorders every FROM list of `statement` that it can (see the module documentation);
/// `tables` describes the user tables by folded name.
pub fn order_from_lists(statement: &mut ast::Statement, tables: &HashMap<String, TableInfo>) {
    struct Orderer<'a>(&'a HashMap<String, TableInfo>);
    impl VisitorMut for Orderer<'_> {
        type Break = ();
        fn pre_visit_select(&mut self, select: &mut ast::Select) -> ControlFlow<()> {
            if let Some(order) = greedy_order(select, self.0) {
                let mut items: Vec<Option<ast::TableWithJoins>> = std::mem::take(&mut select.from).into_iter().map(Some).collect();
                select.from = order.into_iter().filter_map(|i| items[i].take()).collect();
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Orderer(tables));
}

/// One relation of a FROM list: the label columns are qualified with, its columns (`None`:
/// unknown, a derived table) and its estimated size before joins.
struct Rel {
    label: String,
    columns: Option<Vec<String>>,
    rows: f64,
}

/// The new order of `select`'s FROM list as positions in the written one, or `None` to keep it.
fn greedy_order(select: &ast::Select, tables: &HashMap<String, TableInfo>) -> Option<Vec<usize>> {
    let n = select.from.len();
    if !(3..=64).contains(&n) {
        return None;
    }
    if select.projection.iter().any(|p| matches!(p, ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..))) {
        return None;
    }
    let mut rels = Vec::with_capacity(n);
    for item in &select.from {
        if !item.joins.is_empty() {
            return None;
        }
        rels.push(match &item.relation {
            ast::TableFactor::Table { name, alias, args: None, with_ordinality: false, .. } => {
                let info = tables.get(&table_name(name)?)?;
                let label = alias.as_ref().map(|a| fold_ident(&a.name)).unwrap_or_else(|| table_name(name).unwrap_or_default());
                Rel { label, columns: Some(info.columns.clone()), rows: info.rows }
            }
            ast::TableFactor::Derived { lateral: false, alias: Some(alias), subquery, .. } => {
                let columns = if alias.columns.is_empty() {
                    derived_columns(subquery)
                } else {
                    Some(alias.columns.iter().map(|c| fold_ident(&c.name)).collect())
                };
                Rel { label: fold_ident(&alias.name), columns, rows: DERIVED_ROWS }
            }
            _ => return None,
        });
    }
    let mut conjuncts = Vec::new();
    if let Some(w) = &select.selection {
        split_and(w, &mut conjuncts);
    }
    // Which relations each conjunct mentions (a bit per relation); `None`: not known.
    let mut selectivity = vec![1.0f64; n];
    let mut edges = vec![0u64; n];
    for c in &conjuncts {
        if crate::rewrite::has_subquery(c) {
            continue;
        }
        let Some(mask) = mentioned(c, &rels) else { continue };
        if mask.count_ones() == 1 {
            let r = mask.trailing_zeros() as usize;
            selectivity[r] *= estimate(c);
            continue;
        }
        if let Expr::BinaryOp { left, op: B::Eq, right } = c
            && let (Some(l), Some(r)) = (mentioned(left, &rels), mentioned(right, &rels))
            && l != 0
            && r != 0
            && l & r == 0
        {
            for (i, e) in edges.iter_mut().enumerate() {
                if mask & (1 << i) != 0 {
                    *e |= mask & !(1 << i);
                }
            }
        }
        if let Expr::BinaryOp { op: B::Or, .. } | Expr::Nested(_) = c {
            for (r, s) in or_selectivity(c, &rels) {
                selectivity[r] *= s;
            }
        }
    }
    let size: Vec<f64> = rels.iter().zip(&selectivity).map(|(r, s)| (r.rows * s).max(1.0)).collect();
    let smallest = |candidates: &mut dyn Iterator<Item = usize>| {
        candidates.fold(None, |best: Option<usize>, i| match best {
            Some(b) if size[b] <= size[i] => Some(b),
            _ => Some(i),
        })
    };
    let mut placed = 0u64;
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        let connected = smallest(&mut (0..n).filter(|&i| placed & (1 << i) == 0 && edges[i] & placed != 0));
        let next = connected.or_else(|| smallest(&mut (0..n).filter(|&i| placed & (1 << i) == 0)))?;
        placed |= 1 << next;
        order.push(next);
    }
    (order.iter().enumerate().any(|(i, &o)| i != o)).then_some(order)
}

/// The column names of a subquery whose select list names every column (no `*`).
fn derived_columns(q: &ast::Query) -> Option<Vec<String>> {
    let ast::SetExpr::Select(select) = q.body.as_ref() else { return None };
    select
        .projection
        .iter()
        .map(|item| match item {
            ast::SelectItem::UnnamedExpr(e) => Some(column_name(e)),
            ast::SelectItem::ExprWithAlias { alias, .. } => Some(fold_ident(alias)),
            _ => None,
        })
        .collect()
}

/// The relations `e` mentions, as a bit set; `None` if one of its column references is not
/// known to belong to exactly one relation.
fn mentioned(e: &Expr, rels: &[Rel]) -> Option<u64> {
    let mut mask = 0u64;
    let flow = ast::visit_expressions(e, |x| {
        let r = match x {
            Expr::Identifier(id) => {
                let col = fold_ident(id);
                let mut owners = rels.iter().enumerate().filter(|(_, r)| r.columns.as_ref().is_none_or(|c| c.contains(&col)));
                match (owners.next(), owners.next()) {
                    (Some((i, r)), None) if r.columns.is_some() => Some(i),
                    _ => None,
                }
            }
            Expr::CompoundIdentifier(ids) if ids.len() >= 2 => {
                let label = fold_ident(&ids[ids.len() - 2]);
                let mut owners = rels.iter().enumerate().filter(|(_, r)| r.label == label);
                match (owners.next(), owners.next()) {
                    (Some((i, _)), None) => Some(i),
                    _ => None,
                }
            }
            _ => return ControlFlow::Continue(()),
        };
        match r {
            Some(i) => {
                mask |= 1 << i;
                ControlFlow::Continue(())
            }
            None => ControlFlow::Break(()),
        }
    });
    (!flow.is_break()).then_some(mask)
}

/// For an OR of conjunct groups mentioning several relations (`(n1.x = 'a' AND n2.x = 'b')
/// OR (n1.x = 'b' AND n2.x = 'a')`): each relation that every group filters on its own, with
/// the selectivity that implies (the sum of the groups' own selectivities for it).
fn or_selectivity(e: &Expr, rels: &[Rel]) -> Vec<(usize, f64)> {
    let mut branches = Vec::new();
    split_or(e, &mut branches);
    if branches.len() < 2 {
        return Vec::new();
    }
    let mut total = vec![0.0f64; rels.len()];
    let mut filtered_in_all = u64::MAX;
    for b in branches {
        let mut parts = Vec::new();
        split_and(b, &mut parts);
        let mut own = 0u64;
        let mut sel = vec![1.0f64; rels.len()];
        for p in parts {
            if let Some(m) = mentioned(p, rels)
                && m.count_ones() == 1
            {
                let r = m.trailing_zeros() as usize;
                own |= m;
                sel[r] *= estimate(p);
            }
        }
        filtered_in_all &= own;
        for (t, s) in total.iter_mut().zip(sel) {
            *t += s;
        }
    }
    (0..rels.len()).filter(|&r| filtered_in_all & (1 << r) != 0).map(|r| (r, total[r].min(1.0))).collect()
}

/// The fraction of rows a predicate on one relation is taken to keep.
fn estimate(e: &Expr) -> f64 {
    const EQ: f64 = 0.005;
    match e {
        Expr::Nested(inner) => estimate(inner),
        Expr::BinaryOp { left, op: B::And, right } => estimate(left) * estimate(right),
        Expr::BinaryOp { left, op: B::Or, right } => (estimate(left) + estimate(right)).min(1.0),
        Expr::BinaryOp { op: B::Eq, .. } => EQ,
        Expr::BinaryOp { op: B::NotEq, .. } => 1.0 - EQ,
        Expr::BinaryOp { op: B::Lt | B::LtEq | B::Gt | B::GtEq, .. } => 1.0 / 3.0,
        Expr::Between { negated: false, .. } => 0.25,
        Expr::InList { list, negated: false, .. } => (EQ * list.len() as f64).min(0.5),
        Expr::Like { negated: false, .. } | Expr::ILike { negated: false, .. } => 0.05,
        Expr::IsNull(_) => EQ,
        Expr::IsNotNull(_) => 1.0 - EQ,
        Expr::UnaryOp { op: ast::UnaryOperator::Not, expr } => 1.0 - estimate(expr),
        _ => 0.5,
    }
}

fn split_and<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryOp { left, op: B::And, right } => {
            split_and(left, out);
            split_and(right, out);
        }
        Expr::Nested(inner) => split_and(inner, out),
        other => out.push(other),
    }
}

fn split_or<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryOp { left, op: B::Or, right } => {
            split_or(left, out);
            split_or(right, out);
        }
        Expr::Nested(inner) => split_or(inner, out),
        other => out.push(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;

    fn tables() -> HashMap<String, TableInfo> {
        let t = |cols: &[&str], rows: f64| TableInfo { columns: cols.iter().map(|c| c.to_string()).collect(), rows };
        HashMap::from([
            ("nation".to_string(), t(&["n_nationkey", "n_name"], 62.0)),
            ("supplier".to_string(), t(&["su_suppkey", "su_nationkey", "su_name"], 10_000.0)),
            ("stock".to_string(), t(&["s_i_id", "s_w_id", "s_quantity"], 500_000.0)),
            ("order_line".to_string(), t(&["ol_i_id", "ol_supply_w_id", "ol_amount", "ol_o_id"], 1_500_000.0)),
        ])
    }

    fn reordered(sql: &str) -> String {
        let mut s = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap().remove(0);
        order_from_lists(&mut s, &tables());
        s.to_string()
    }

    fn from_of(sql: &str) -> String {
        let s = reordered(sql);
        let from = s.split(" FROM ").nth(1).unwrap();
        from.split(" WHERE ").next().unwrap().to_string()
    }

    #[test]
    fn the_list_starts_at_the_most_selective_relation_and_follows_equalities() {
        let q = "SELECT su_name, sum(ol_amount) FROM order_line, stock, supplier, nation \
                 WHERE ol_i_id = s_i_id AND ol_supply_w_id = s_w_id AND mod(s_w_id * s_i_id, 10000) = su_suppkey \
                 AND su_nationkey = n_nationkey AND n_name = 'Germany' GROUP BY su_name";
        assert_eq!(from_of(q), "nation, supplier, stock, order_line");
    }

    #[test]
    fn an_or_that_filters_a_relation_in_every_branch_counts_as_its_filter() {
        let q = "SELECT 1 AS x FROM supplier, stock, nation n1, nation n2 \
                 WHERE mod(s_w_id * s_i_id, 10000) = su_suppkey AND su_nationkey = n1.n_nationkey \
                 AND s_quantity = n2.n_nationkey \
                 AND ((n1.n_name = 'a' AND n2.n_name = 'b') OR (n1.n_name = 'b' AND n2.n_name = 'a'))";
        assert_eq!(from_of(q), "nation n1, supplier, stock, nation n2");
    }

    #[test]
    fn lists_that_reordering_could_change_are_kept() {
        // `*` would change its column order; an unknown name (a CTE, a catalog relation) has no
        // estimate; explicit joins are kept as written.
        for q in [
            "SELECT * FROM order_line, stock, nation WHERE ol_i_id = s_i_id AND n_name = 'x'",
            "SELECT 1 FROM order_line, stock, somewhere WHERE ol_i_id = s_i_id",
            "SELECT 1 FROM order_line JOIN stock ON ol_i_id = s_i_id, nation, supplier WHERE n_name = 'x'",
            "SELECT 1 FROM order_line, stock WHERE ol_i_id = s_i_id AND s_quantity = 1",
        ] {
            let mut s = Parser::parse_sql(&PostgreSqlDialect {}, q).unwrap().remove(0);
            let before = s.to_string();
            order_from_lists(&mut s, &tables());
            assert_eq!(s.to_string(), before, "{q}");
        }
    }

    #[test]
    fn a_derived_table_is_large_and_joined_through_its_named_columns() {
        let q = "SELECT su_name FROM stock, (SELECT s_i_id AS m_i_id, min(s_quantity) AS m_q FROM stock GROUP BY s_i_id) m, \
                 supplier, nation WHERE s_i_id = m_i_id AND s_quantity = m_q AND mod(s_w_id * s_i_id, 10000) = su_suppkey \
                 AND su_nationkey = n_nationkey AND n_name = 'x'";
        let s = reordered(q);
        assert!(s.contains("FROM nation, supplier, stock, (SELECT"), "{s}");
    }

    #[test]
    fn subqueries_are_ordered_too_and_unresolvable_columns_are_ignored() {
        let q = "SELECT su_name FROM supplier WHERE EXISTS (SELECT 1 AS y FROM order_line, stock, nation \
                 WHERE ol_i_id = s_i_id AND s_w_id = n_nationkey AND n_name = 'x' AND unknown_col = 1)";
        let s = reordered(q);
        assert!(s.contains("FROM nation, stock, order_line"), "{s}");
    }
}
