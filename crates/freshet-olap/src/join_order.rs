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
//! - from each relation in turn, the list repeatedly takes the relation whose join to those
//!   already taken gives the fewest rows (among those an equality joins to
//!   them; among all when none is, as a cross join is then unavoidable). A join's size is
//!   estimated from unique keys: when the equalities bind a key of the new relation, each row
//!   so far meets at most one of its rows; when they bind a key of a relation already taken
//!   (a foreign key), each new row meets at most one; otherwise the join column is taken to
//!   have 200 distinct values (PostgreSQL's default without statistics). This keeps a join
//!   on a shared non-key column (customers and suppliers of one nation) after the joins that
//!   narrow both sides;
//! - of those orders, the one whose first relation and joins give the fewest rows in all is
//!   kept: DataFusion builds each hash join's table from the rows so far, so they should
//!   stay few.
//!
//! Inner joins commute, so the answer is the same. A list is left as written when reordering
//! could change anything else or the estimate would be a guess: a select list with `*` (the
//! column order would change), explicit `JOIN`s, `LATERAL` or table functions, or a name that
//! is not a user table (a CTE, a catalog relation). Derived tables count as large; their
//! columns are known when their select list names them all.

use std::collections::HashMap;
use std::ops::ControlFlow;

use freshet_core::sql::names::{column_name, fold_ident};
use sqlparser::ast::{self, BinaryOperator as B, Expr, Visit, VisitMut, Visitor, VisitorMut};

/// What the estimate knows of a user table.
#[derive(Clone, Debug)]
pub struct TableInfo {
    /// Column names, folded.
    pub columns: Vec<String>,
    /// Live rows.
    pub rows: f64,
    /// The column sets of its primary key and unique indexes, folded.
    pub keys: Vec<Vec<String>>,
}

/// The shortest FROM list that is reordered: with two relations DataFusion's choice of the
/// hash join's build side is all there is to choose.
const MIN_RELATIONS: usize = 3;

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
pub fn from_list_tables(statement: &ast::Statement) -> Vec<String> {
    struct Names(Vec<String>);
    impl Visitor for Names {
        type Break = ();
        fn pre_visit_select(&mut self, select: &ast::Select) -> ControlFlow<()> {
            if select.from.len() >= MIN_RELATIONS {
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
    keys: Vec<Vec<String>>,
}

/// An equality conjunct between relations: the relations each side mentions, and each side's
/// column when it is a plain column of one relation.
struct Equality {
    sides: [(u64, Option<(usize, String)>); 2],
}

/// The number of distinct values a join column is taken to have when no key says more
/// (PostgreSQL's default, `DEFAULT_NUM_DISTINCT`).
const DEFAULT_DISTINCT: f64 = 200.0;

/// The new order of `select`'s FROM list as positions in the written one, or `None` to keep it.
fn greedy_order(select: &ast::Select, tables: &HashMap<String, TableInfo>) -> Option<Vec<usize>> {
    let n = select.from.len();
    if !(MIN_RELATIONS..=64).contains(&n) {
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
                Rel { label, columns: Some(info.columns.clone()), rows: info.rows, keys: info.keys.clone() }
            }
            ast::TableFactor::Derived { lateral: false, alias: Some(alias), subquery, .. } => {
                let columns = if alias.columns.is_empty() {
                    derived_columns(subquery)
                } else {
                    Some(alias.columns.iter().map(|c| fold_ident(&c.name)).collect())
                };
                Rel { label: fold_ident(&alias.name), columns, rows: DERIVED_ROWS, keys: Vec::new() }
            }
            _ => return None,
        });
    }
    let mut conjuncts = Vec::new();
    if let Some(w) = &select.selection {
        split_and(w, &mut conjuncts);
    }
    let mut selectivity = vec![1.0f64; n];
    let mut equalities = Vec::new();
    for c in &conjuncts {
        if crate::rewrite::has_subquery(c) {
            continue;
        }
        // Which relations the conjunct mentions (a bit per relation); `None`: not known.
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
            equalities.push(Equality { sides: [(l, plain_column(left, &rels)), (r, plain_column(right, &rels))] });
        }
        if let Expr::BinaryOp { op: B::Or, .. } | Expr::Nested(_) = c {
            for (r, s) in or_selectivity(c, &rels) {
                selectivity[r] *= s;
            }
        }
    }
    let size: Vec<f64> = rels.iter().zip(&selectivity).map(|(r, s)| (r.rows * s).max(1.0)).collect();
    // Relation `x`'s columns equated to expressions over `over` only.
    let bound_columns = |x: usize, over: u64| -> Vec<&str> {
        let mut cols = Vec::new();
        for e in &equalities {
            for (side, other) in [(0, 1), (1, 0)] {
                if let (_, Some((r, c))) = &e.sides[side]
                    && *r == x
                    && e.sides[other].0 & !over == 0
                {
                    cols.push(c.as_str());
                }
            }
        }
        cols
    };
    // Whether an equality joins `x` to the relations `placed` (and mentions no other).
    let connected = |placed: u64, x: usize| {
        equalities.iter().any(|e| {
            let all = e.sides[0].0 | e.sides[1].0;
            all & (1 << x) != 0 && all & !(placed | (1 << x)) == 0 && all & placed != 0
        })
    };
    let key_covered = |x: usize, cols: &[&str]| rels[x].keys.iter().any(|k| !k.is_empty() && k.iter().all(|c| cols.contains(&c.as_str())));
    // The estimated rows of joining `x` to the relations `placed`, which give `rows` rows.
    let join_size = |placed: u64, rows: f64, x: usize| -> f64 {
        if !connected(placed, x) {
            return rows * size[x];
        }
        // Each row so far meets at most one row of `x`, which its filters keep with their
        // selectivity.
        if key_covered(x, &bound_columns(x, placed)) {
            return rows * size[x] / rels[x].rows.max(1.0);
        }
        // Each row of `x` meets at most one row of a placed relation `p`, present in the rows
        // so far about as often as they are a fraction of `p`.
        let by_foreign_key = (0..n)
            .filter(|&p| placed & (1 << p) != 0 && key_covered(p, &bound_columns(p, 1 << x)))
            .map(|p| size[x] * (rows / rels[p].rows.max(1.0)).min(1.0))
            .reduce(f64::min);
        by_foreign_key.unwrap_or(rows * size[x] / DEFAULT_DISTINCT)
    };
    // The greedy order from relation `first`, and its cost: the rows of the first relation
    // and of all the joins (each the build side of the next hash join).
    let from = |first: usize| -> (Vec<usize>, f64) {
        let mut placed = 1u64 << first;
        let mut rows = size[first];
        let mut cost = rows;
        let mut order = vec![first];
        while order.len() < n {
            let unplaced = || (0..n).filter(|&i| placed & (1 << i) == 0);
            let best = |candidates: &mut dyn Iterator<Item = usize>| {
                candidates.map(|i| (join_size(placed, rows, i), i)).reduce(|b, c| if c.0 < b.0 { c } else { b })
            };
            let Some((estimate, next)) = best(&mut unplaced().filter(|&i| connected(placed, i))).or_else(|| best(&mut unplaced())) else {
                break;
            };
            placed |= 1 << next;
            rows = estimate.max(1.0);
            cost += rows;
            order.push(next);
        }
        (order, cost)
    };
    let (order, _) = (0..n).map(from).reduce(|b, c| if c.1 < b.1 { c } else { b })?;
    (order.iter().enumerate().any(|(i, &o)| i != o)).then_some(order)
}

/// The relation and column `e` is, when it is a plain column reference.
fn plain_column(e: &Expr, rels: &[Rel]) -> Option<(usize, String)> {
    let col = match e {
        Expr::Identifier(id) => fold_ident(id),
        Expr::CompoundIdentifier(ids) if ids.len() >= 2 => fold_ident(&ids[ids.len() - 1]),
        Expr::Nested(inner) => return plain_column(inner, rels),
        _ => return None,
    };
    let mask = mentioned(e, rels)?;
    (mask.count_ones() == 1).then(|| (mask.trailing_zeros() as usize, col))
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

/// The operands of a chain of `op` (AND or OR), looking through parentheses.
fn split<'a>(e: &'a Expr, op: &B, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryOp { left, op: o, right } if o == op => {
            split(left, op, out);
            split(right, op, out);
        }
        Expr::Nested(inner) => split(inner, op, out),
        other => out.push(other),
    }
}

fn split_and<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    split(e, &B::And, out)
}

fn split_or<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    split(e, &B::Or, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;

    fn tables() -> HashMap<String, TableInfo> {
        let strings = |s: &[&str]| s.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        let t = |cols: &[&str], key: &[&str], rows: f64| TableInfo { columns: strings(cols), rows, keys: vec![strings(key)] };
        HashMap::from([
            ("nation".to_string(), t(&["n_nationkey", "n_name"], &["n_nationkey"], 62.0)),
            ("supplier".to_string(), t(&["su_suppkey", "su_nationkey", "su_name"], &["su_suppkey"], 10_000.0)),
            ("stock".to_string(), t(&["s_i_id", "s_w_id", "s_quantity"], &["s_w_id", "s_i_id"], 500_000.0)),
            ("order_line".to_string(), t(&["ol_i_id", "ol_supply_w_id", "ol_amount", "ol_o_id", "ol_number"], &["ol_o_id", "ol_number"], 1_500_000.0)),
            ("customer".to_string(), t(&["c_id", "c_state"], &["c_id"], 150_000.0)),
            ("item".to_string(), t(&["i_id", "i_data"], &["i_id"], 100_000.0)),
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
    fn a_join_on_no_key_waits_for_the_joins_through_keys() {
        // Customers share nation keys with suppliers: joining them first would pair every
        // supplier of a nation with every customer of it.
        let q = "SELECT count(ol_amount) AS c FROM customer, order_line, stock, supplier, nation \
                 WHERE ol_o_id = c_id AND ol_supply_w_id = s_w_id AND ol_i_id = s_i_id \
                 AND mod(s_w_id * s_i_id, 10000) = su_suppkey AND ascii(c_state) = su_nationkey \
                 AND su_nationkey = n_nationkey AND n_name = 'Germany'";
        assert_eq!(from_of(q), "nation, supplier, stock, order_line, customer");
    }

    #[test]
    fn the_order_starts_where_the_joins_stay_smallest() {
        // Starting at the smallest table (nation) would join all of stock before the filtered
        // items narrow it; starting at the items keeps every intermediate result small.
        let q = "SELECT n_name, sum(ol_amount) AS s FROM item, stock, supplier, order_line, nation \
                 WHERE ol_i_id = s_i_id AND ol_supply_w_id = s_w_id AND mod(s_w_id * s_i_id, 10000) = su_suppkey \
                 AND ol_i_id = i_id AND s_i_id = i_id AND su_nationkey = n_nationkey AND i_data LIKE '%bb' GROUP BY n_name";
        assert_eq!(from_of(q), "item, stock, supplier, nation, order_line");
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
