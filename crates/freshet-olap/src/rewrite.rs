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
//!   casts to `regclass`, `oid`, `name`, `"char"` and `pg_catalog.`-qualified types,
//!   `information_schema._pg_expandarray`, `(row).field`, `pg_catalog.`-qualified table
//!   functions, and the subqueries over catalog relations that DataFusion would not
//!   decorrelate (see [`catalog_spellings`]).

use std::collections::HashSet;
use std::ops::ControlFlow;

use freshet_core::sql::names::{column_name, fold_ident};
use sqlparser::ast::{self, Expr, VisitMut, VisitorMut};

/// Gives every select-list item whose PostgreSQL result name repeats an earlier one's in the
/// same SELECT (at any depth of `statement`) an alias of its own, and every computed item of
/// the statement's own select list.
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
    // DataFusion names an unnamed expression by its own rendering, which leaves out casts and
    // renames some functions (`position` is `strpos`), so two items PostgreSQL names apart
    // can clash (`3.7::int, 3.7::bigint`). The statement's own result columns are named by
    // the session from the statement as written, so there every computed item gets an
    // alias of its own; inside, items keep the PostgreSQL names `subquery_output_names` gave
    // them (an outer query refers to them).
    own_select_lists(statement, &mut |select| {
        for (i, item) in select.projection.iter_mut().enumerate() {
            if let ast::SelectItem::UnnamedExpr(e) = item
                && !matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_))
            {
                let expr = std::mem::replace(e, null());
                *item = ast::SelectItem::ExprWithAlias { expr, alias: ast::Ident::with_quote('"', format!("__freshet_column_{}", i + 1)) };
            }
        }
    });
}

/// Gives every computed select-list item of a subquery (not of the statement's own select
/// lists, whose names the session takes from the statement) the name PostgreSQL gives it as
/// its alias, so that an outer query finds it by that name (`SELECT count FROM (SELECT
/// count(*) FROM t) s`; DataFusion would name it `count(*)`). Runs before the other rewrites,
/// which change expressions (`1` becomes a cast) but not what PostgreSQL calls them.
pub fn subquery_output_names(statement: &mut ast::Statement) {
    struct Namer {
        depth: usize,
    }
    impl VisitorMut for Namer {
        type Break = ();
        fn pre_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &mut ast::Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_select(&mut self, select: &mut ast::Select) -> ControlFlow<()> {
            if self.depth < 2 {
                return ControlFlow::Continue(());
            }
            for item in select.projection.iter_mut() {
                if let ast::SelectItem::UnnamedExpr(e) = item
                    && !matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_))
                {
                    let alias = ast::Ident::with_quote('"', column_name(e));
                    let expr = std::mem::replace(e, null());
                    *item = ast::SelectItem::ExprWithAlias { expr, alias };
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Namer { depth: 0 });
}

/// Calls `f` on each SELECT whose select list gives the statement's own result columns (both
/// sides of a UNION, a parenthesised query's), not on subqueries'.
fn own_select_lists(statement: &mut ast::Statement, f: &mut dyn FnMut(&mut ast::Select)) {
    fn walk(body: &mut ast::SetExpr, f: &mut dyn FnMut(&mut ast::Select)) {
        match body {
            ast::SetExpr::Select(select) => f(select),
            ast::SetExpr::SetOperation { left, right, .. } => {
                walk(left, f);
                walk(right, f);
            }
            ast::SetExpr::Query(q) => walk(&mut q.body, f),
            _ => {}
        }
    }
    if let ast::Statement::Query(q) = statement {
        walk(&mut q.body, f);
    }
}

/// `ORDER BY n` of a grouped query, where output column `n` is an unnamed expression (not a
/// column): DataFusion resolves the ordinal to the expression's generated name and then
/// refuses it as "not in GROUP BY", where PostgreSQL sorts by that output column. Sorting by
/// the expression itself means the same, and DataFusion matches it to the select list. The
/// other way round for `SELECT DISTINCT`: an ORDER BY expression that is a select-list item
/// becomes that item's position, which DataFusion accepts where it refuses the expression.
pub fn grouped_order_ordinals(statement: &mut ast::Statement) {
    struct Ordinals;
    impl VisitorMut for Ordinals {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut ast::Query) -> ControlFlow<()> {
            let ast::SetExpr::Select(select) = q.body.as_ref() else { return ControlFlow::Continue(()) };
            let grouped = !matches!(&select.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty());
            let Some(ast::OrderBy { kind: ast::OrderByKind::Expressions(items), .. }) = &mut q.order_by else {
                return ControlFlow::Continue(());
            };
            if !grouped {
                // SELECT DISTINCT … ORDER BY <an item's expression>: DataFusion does not match
                // the expression to the item; its position means the same.
                if matches!(select.distinct, Some(ast::Distinct::Distinct)) {
                    for item in items.iter_mut().filter(|i| !matches!(i.expr, Expr::Value(_) | Expr::Identifier(_) | Expr::CompoundIdentifier(_))) {
                        let position = select.projection.iter().position(|p| match p {
                            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => *e == item.expr,
                            _ => false,
                        });
                        if let Some(p) = position {
                            item.expr = Expr::Value(ast::Value::Number((p + 1).to_string(), false).into());
                        }
                    }
                }
                return ControlFlow::Continue(());
            }
            for item in items.iter_mut() {
                let Expr::Value(v) = &item.expr else { continue };
                let ast::Value::Number(n, _) = &v.value else { continue };
                let Some(position) = n.parse::<usize>().ok().and_then(|n| n.checked_sub(1)) else { continue };
                if let Some(ast::SelectItem::UnnamedExpr(e)) = select.projection.get(position)
                    && !matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_))
                {
                    item.expr = e.clone();
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Ordinals);
}

/// The function a cast to `regclass` becomes: the OID of the relation a text names (42P01 if
/// there is none), or the number itself.
pub const REGCLASS_FUNCTION: &str = "freshet_regclass";

/// The function a cast to `regtype` becomes: the OID of the type a text names (42704 if
/// there is none), or the number itself.
pub const REGTYPE_FUNCTION: &str = "freshet_regtype";

/// What a result column `x::regclass` shows: the relation's name (the OID as a number if no
/// relation has it), as PostgreSQL prints a `regclass`.
pub const REGCLASS_NAME_FUNCTION: &str = "freshet_regclass_name";

/// What a result column `x::regtype` shows: the type's name, as PostgreSQL prints a
/// `regtype` (`integer`, `character varying`).
pub const REGTYPE_NAME_FUNCTION: &str = "freshet_regtype_name";

/// Result columns cast to `regclass` or `regtype` show names, as PostgreSQL prints those
/// types (`SELECT attrelid::regclass, atttypid::regtype FROM pg_attribute`), where the cast
/// alone gives the OID as a number (the OID types are integers here, so that comparisons
/// and joins on them are integer ones). Only the statement's own select list is changed:
/// inside, the cast keeps its number for the outer query to compare.
pub fn shown_oid_names(statement: &mut ast::Statement) {
    own_select_lists(statement, &mut |select| {
        for item in select.projection.iter_mut() {
            let (ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. }) = item else { continue };
            let shown = match e {
                Expr::Cast { data_type: ast::DataType::Regclass, .. } => REGCLASS_NAME_FUNCTION,
                Expr::Cast { data_type: ast::DataType::Custom(name, modifiers), .. } if modifiers.is_empty() => {
                    if is_type_name(name, "regtype") {
                        REGTYPE_NAME_FUNCTION
                    } else if is_type_name(name, "regclass") {
                        REGCLASS_NAME_FUNCTION
                    } else {
                        continue;
                    }
                }
                _ => continue,
            };
            // Named as the cast was: the session names result columns from the statement as
            // written.
            let cast = std::mem::replace(e, null());
            *e = call(shown, cast);
        }
    });
}

/// Whether `name` is the catalog type `ty`, bare or `pg_catalog.`-qualified.
fn is_type_name(name: &ast::ObjectName, ty: &str) -> bool {
    let ident = match name.0.as_slice() {
        [n] => n.as_ident().cloned(),
        _ => unqualified(name),
    };
    ident.is_some_and(|i| i.value.eq_ignore_ascii_case(ty))
}

/// `information_schema.tables` as a query over the catalog (the columns PostgreSQL's view has
/// that mean something here; the rest are NULL or their only value).
const INFORMATION_SCHEMA_TABLES: &str = "SELECT current_database() AS table_catalog, n.nspname AS table_schema, c.relname AS table_name, \
     CASE c.relkind WHEN 'v' THEN 'VIEW' ELSE 'BASE TABLE' END AS table_type, \
     CAST(NULL AS TEXT) AS self_referencing_column_name, CAST(NULL AS TEXT) AS reference_generation, \
     CAST(NULL AS TEXT) AS user_defined_type_catalog, CAST(NULL AS TEXT) AS user_defined_type_schema, \
     CAST(NULL AS TEXT) AS user_defined_type_name, CASE c.relkind WHEN 'v' THEN 'NO' ELSE 'YES' END AS is_insertable_into, \
     'NO' AS is_typed, CAST(NULL AS TEXT) AS commit_action \
     FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
     WHERE c.relkind IN ('r', 'v', 'p')";

/// `information_schema.columns` as a query over the catalog: names, positions, defaults,
/// nullability, the type as `format_type` spells it without modifiers, and the modifiers'
/// parts (length, precision, scale) as PostgreSQL's view reports them.
const INFORMATION_SCHEMA_COLUMNS: &str = "SELECT current_database() AS table_catalog, n.nspname AS table_schema, c.relname AS table_name, \
     a.attname AS column_name, CAST(a.attnum AS INT) AS ordinal_position, pg_catalog.pg_get_expr(d.adbin, d.adrelid) AS column_default, \
     CASE WHEN a.attnotnull THEN 'NO' ELSE 'YES' END AS is_nullable, \
     pg_catalog.format_type(a.atttypid, NULL) AS data_type, \
     CASE WHEN a.atttypid IN (1042, 1043) AND a.atttypmod > 0 THEN CAST(a.atttypmod - 4 AS INT) END AS character_maximum_length, \
     CASE WHEN a.atttypid IN (1042, 1043, 25) THEN 1073741824 END AS character_octet_length, \
     CASE a.atttypid WHEN 21 THEN 16 WHEN 23 THEN 32 WHEN 20 THEN 64 WHEN 700 THEN 24 WHEN 701 THEN 53 \
       WHEN 1700 THEN CASE WHEN a.atttypmod > 0 THEN CAST(((a.atttypmod - 4) / 65536) AS INT) END END AS numeric_precision, \
     CASE WHEN a.atttypid IN (21, 23, 20, 1700) THEN 10 WHEN a.atttypid IN (700, 701) THEN 2 END AS numeric_precision_radix, \
     CASE WHEN a.atttypid IN (21, 23, 20) THEN 0 \
       WHEN a.atttypid = 1700 AND a.atttypmod > 0 THEN CAST(((a.atttypmod - 4) % 65536) AS INT) END AS numeric_scale, \
     CASE WHEN a.atttypid IN (1082) THEN 0 WHEN a.atttypid IN (1114, 1184) THEN 6 END AS datetime_precision, \
     t.typname AS udt_name, CASE WHEN c.relkind = 'v' THEN 'NO' ELSE 'YES' END AS is_updatable, \
     'NO' AS is_identity, 'NEVER' AS is_generated \
     FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid \
     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace JOIN pg_catalog.pg_type t ON t.oid = a.atttypid \
     LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
     WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'v', 'p')";

/// `information_schema.tables` and `information_schema.columns` (what tools and ORMs read
/// to learn a schema) become their queries over the catalog, under the name or alias the
/// statement gives them.
pub fn information_schema_views(statement: &mut ast::Statement) {
    struct Views;
    impl VisitorMut for Views {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &mut ast::TableFactor) -> ControlFlow<()> {
            let ast::TableFactor::Table { name, args: None, alias, .. } = factor else { return ControlFlow::Continue(()) };
            let parts: Vec<String> = name.0.iter().filter_map(|p| p.as_ident()).map(fold_ident).collect();
            let sql = match parts.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
                ["information_schema", "tables"] => INFORMATION_SCHEMA_TABLES,
                ["information_schema", "columns"] => INFORMATION_SCHEMA_COLUMNS,
                _ => return ControlFlow::Continue(()),
            };
            let parsed = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {}).try_with_sql(sql).and_then(|mut p| p.parse_query());
            let Ok(query) = parsed else { return ControlFlow::Continue(()) };
            let alias = alias.take().unwrap_or_else(|| ast::TableAlias {
                explicit: true,
                at: None,
                name: ast::Ident::new(parts[1].clone()),
                columns: Vec::new(),
            });
            *factor = ast::TableFactor::Derived { lateral: false, subquery: query, alias: Some(alias), sample: None };
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Views);
}

/// The function a cast to `regproc` or `regprocedure` becomes: the OID of the routine a text
/// names (42883 if none), or the number itself.
pub const REGPROC_FUNCTION: &str = "freshet_regproc";

/// The function `information_schema._pg_expandarray(a)` becomes, under `unnest`: the array's
/// elements with their positions, as a list of `{x, n}` structs.
pub const EXPANDARRAY_FUNCTION: &str = "freshet_expandarray";

/// What the rewrite needs to know about relation names.
pub trait CatalogNames {
    /// Whether `name` is a catalog relation.
    fn is_catalog(&self, name: &ast::ObjectName) -> bool;
    /// Whether `name` is a catalog relation that never has rows (a feature Freshet lacks).
    fn is_always_empty(&self, name: &ast::ObjectName) -> bool;
}

/// Rewrites the catalog spellings of PostgreSQL clients into what DataFusion plans.
///
/// Scalar subqueries that read only catalog relations are made plannable:
/// - one without an aggregate becomes `max(…)` of its single column (DataFusion plans a
///   correlated scalar subquery only when it is aggregated; a catalog lookup returns one row
///   at most);
/// - an outer column that the subquery equates with one of its own (`c.oid = a.attcollation`)
///   is replaced by that column in its other predicates, so only equalities correlate;
/// - a predicate on outer columns only (`… AND a.atthasdef`) moves out of the subquery:
///   `CASE WHEN a.atthasdef THEN (SELECT max(…) …) END`, the same value, since `max` over no
///   rows is NULL.
///
/// A query block whose rows come from a relation that is always empty (joined by an inner
/// join) has no rows, whatever its select list computes: its select-list items that contain
/// subqueries become NULL and its WHERE clause FALSE, so that clients' queries about triggers,
/// policies or publications plan (they use `ARRAY(SELECT …)` and lateral set-returning
/// functions). A block with an aggregate or HAVING is left alone (it returns a row even over
/// no rows).
///
/// User tables keep PostgreSQL's semantics (and DataFusion's refusals).
pub fn catalog_spellings(statement: &mut ast::Statement, names: &dyn CatalogNames) {
    struct Blocks<'a>(&'a dyn CatalogNames);
    impl VisitorMut for Blocks<'_> {
        type Break = ();
        fn pre_visit_select(&mut self, select: &mut ast::Select) -> ControlFlow<()> {
            blank_empty_block(select, self.0);
            ControlFlow::Continue(())
        }

        fn pre_visit_table_factor(&mut self, factor: &mut ast::TableFactor) -> ControlFlow<()> {
            // `FROM pg_catalog.generate_series(…)`: a table function by its plain name.
            if let ast::TableFactor::Table { name, args: Some(_), .. } = factor
                && let Some(plain) = unqualified(name)
            {
                *name = ast::ObjectName(vec![ast::ObjectNamePart::Identifier(plain)]);
            }
            // `FROM generate_series(1, 3) g`: PostgreSQL names a scalar function's one column
            // after the alias (`SELECT g FROM …`); DataFusion would call it `value`.
            if let ast::TableFactor::Table { name, args: Some(_), alias: Some(alias), .. } = factor
                && alias.columns.is_empty()
                && name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| fold_ident(i) == "generate_series")
            {
                alias.columns = vec![ast::TableAliasColumnDef { name: alias.name.clone(), data_type: None }];
            }
            // `FROM unnest(a, …) WITH ORDINALITY`: the element numbers are one more array to
            // unnest beside the others, `generate_series(1, <the longest one's length>)`
            // (DataFusion has no ordinality; its unnest, as PostgreSQL's, pads the shorter
            // arrays with NULLs). Its column is `ordinality` unless the alias names it.
            if let ast::TableFactor::UNNEST { alias, array_exprs, with_offset: false, with_ordinality: with_ordinality @ true, .. } = factor {
                let lengths = array_exprs.iter().map(|a| call("cardinality", a.clone())).collect();
                let longest = call_with("coalesce", vec![call_with("greatest", lengths), Expr::value(ast::Value::Number("0".into(), false))]);
                array_exprs.push(call_with("generate_series", vec![Expr::value(ast::Value::Number("1".into(), false)), cast_to(longest, ast::DataType::BigInt(None))]));
                *with_ordinality = false;
                if let Some(alias) = alias
                    && alias.columns.is_empty()
                    && array_exprs.len() == 2
                {
                    alias.columns = [alias.name.clone(), ast::Ident::new("ordinality")].into_iter().map(|name| ast::TableAliasColumnDef { name, data_type: None }).collect();
                }
            }
            // `FROM unnest(a) u` likewise names its column `u`.
            if let ast::TableFactor::UNNEST { alias: Some(alias), array_exprs, with_offset: false, with_ordinality: false, .. } = factor
                && alias.columns.is_empty()
                && array_exprs.len() == 1
            {
                alias.columns = vec![ast::TableAliasColumnDef { name: alias.name.clone(), data_type: None }];
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Blocks(names));
    let _ = ast::visit_expressions_mut(statement, |e| {
        match e {
            Expr::Function(f) if is_expandarray(&f.name) => {
                // A set-returning function of (x, n) rows: the unnest of their list.
                f.name = ast::ObjectName(vec![ast::ObjectNamePart::Identifier(ast::Ident::new(EXPANDARRAY_FUNCTION))]);
                let list = std::mem::replace(e, null());
                *e = call("unnest", list);
            }
            Expr::Function(f) => {
                if let Some(name) = unqualified(&f.name) {
                    f.name = ast::ObjectName(vec![ast::ObjectNamePart::Identifier(name)]);
                }
                if let Some(mapped) = array_of_unnest(f).or_else(|| array_of_query(f)) {
                    *e = mapped;
                }
            }
            // `x = ANY('{1,2}')`, `x <> ALL('{a,b}'::text[])`: the text's elements as an
            // `ARRAY[…]` (DataFusion reads the text as one element); no element: false (ANY) or
            // true (ALL). Malformed text is left for the planner to refuse.
            Expr::AnyOp { right, .. } | Expr::AllOp { right, .. } if let Ok(Some(elements)) = freshet_core::sql::bind::array_text_elements(right) => {
                if elements.is_empty() {
                    *e = Expr::value(ast::Value::Boolean(matches!(e, Expr::AllOp { .. })));
                } else {
                    **right = Expr::Array(ast::Array { elem: elements, named: true });
                }
            }
            Expr::CompoundFieldAccess { root, access_chain } if matches!(root.as_ref(), Expr::Nested(_)) => {
                // `(row).field`: DataFusion takes the field's name as a string.
                for access in access_chain {
                    if let ast::AccessExpr::Dot(Expr::Identifier(field)) = access {
                        *access = ast::AccessExpr::Dot(Expr::Value(ast::Value::SingleQuotedString(fold_ident(field)).into()));
                    }
                }
            }
            Expr::BinaryOp { op: ast::BinaryOperator::PGCustomBinaryOperator(parts), .. } => {
                if let Some(op) = builtin_operator(parts) {
                    let Expr::BinaryOp { op: slot, .. } = e else { unreachable!() };
                    *slot = op;
                }
            }
            Expr::Collate { collation, expr } if is_c_collation(collation) => {
                *e = Expr::Nested(std::mem::replace(expr, Box::new(null())));
            }
            Expr::Cast { expr, data_type, .. } => {
                if let Some(replacement) = catalog_cast(expr, data_type) {
                    *e = replacement;
                }
            }
            Expr::Subquery(q) => {
                if let Some(Some(condition)) = aggregate_catalog_lookup(q, names) {
                    let subquery = std::mem::replace(e, null());
                    *e = case_when(condition, subquery, None);
                }
            }
            Expr::Exists { subquery, negated } => {
                // EXISTS over catalog relations as a lookup that is NULL when nothing matches.
                let negated = *negated;
                if let ast::SetExpr::Select(select) = subquery.body.as_mut()
                    && catalog_labels(select, names).is_some()
                {
                    select.projection = vec![ast::SelectItem::UnnamedExpr(Expr::Value(ast::Value::Number("1".into(), false).into()))];
                }
                if let Some(condition) = aggregate_catalog_lookup(subquery, names) {
                    let lookup = Box::new(Expr::Subquery(subquery.clone()));
                    let found = Expr::IsNotNull(lookup);
                    let found = match condition {
                        Some(c) => case_when(c, found, Some(Expr::Value(ast::Value::Boolean(false).into()))),
                        None => found,
                    };
                    *e = if negated { Expr::UnaryOp { op: ast::UnaryOperator::Not, expr: Box::new(Expr::Nested(Box::new(found))) } } else { found };
                }
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
}

fn case_when(condition: Expr, result: Expr, else_result: Option<Expr>) -> Expr {
    Expr::Case {
        case_token: ast::helpers::attached_token::AttachedToken::empty(),
        end_token: ast::helpers::attached_token::AttachedToken::empty(),
        operand: None,
        conditions: vec![ast::CaseWhen { condition, result }],
        else_result: else_result.map(Box::new),
    }
}

/// `ARRAY(SELECT e FROM unnest(a) x)` as `array_transform(a, x -> e)` (or `a` itself when `e`
/// is `x`): the same elements in the same order. One difference: over a NULL array
/// PostgreSQL gives an empty array, this gives NULL.
fn array_of_unnest(f: &ast::Function) -> Option<Expr> {
    let name = f.name.0.last()?.as_ident()?;
    let ast::FunctionArguments::Subquery(q) = &f.args else { return None };
    if f.name.0.len() != 1 || !name.value.eq_ignore_ascii_case("array") || q.order_by.is_some() || q.limit_clause.is_some() || q.with.is_some() {
        return None;
    }
    let ast::SetExpr::Select(select) = q.body.as_ref() else { return None };
    let plain = select.selection.is_none()
        && select.having.is_none()
        && select.distinct.is_none()
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty());
    let ([from], [item]) = (select.from.as_slice(), select.projection.as_slice()) else { return None };
    if !plain || !from.joins.is_empty() {
        return None;
    }
    let (array, alias) = match &from.relation {
        ast::TableFactor::UNNEST { alias, array_exprs, with_offset: false, with_ordinality: false, .. } => match array_exprs.as_slice() {
            [a] => (a.clone(), alias.as_ref()?),
            _ => return None,
        },
        ast::TableFactor::Table { name, args: Some(args), alias: Some(alias), with_ordinality: false, .. }
            if name.0.last().and_then(|p| p.as_ident()).is_some_and(|n| n.value.eq_ignore_ascii_case("unnest")) =>
        {
            match args.args.as_slice() {
                [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(a))] => (a.clone(), alias),
                _ => return None,
            }
        }
        _ => return None,
    };
    let variable = match alias.columns.as_slice() {
        [] => alias.name.clone(),
        [column] => column.name.clone(),
        _ => return None,
    };
    let (ast::SelectItem::UnnamedExpr(element) | ast::SelectItem::ExprWithAlias { expr: element, .. }) = item else { return None };
    if matches!(element, Expr::Identifier(i) if fold_ident(i) == fold_ident(&variable)) {
        return Some(array);
    }
    let lambda = Expr::Lambda(ast::LambdaFunction {
        params: ast::OneOrManyWithParens::One(ast::LambdaFunctionParameter { name: variable, data_type: None }),
        body: Box::new(element.clone()),
        syntax: ast::LambdaSyntax::Arrow,
    });
    Some(call_with("array_transform", vec![array, lambda]))
}

/// `ARRAY(SELECT e FROM … [ORDER BY …])` as the scalar subquery
/// `(SELECT coalesce(array_agg(e ORDER BY …), make_array()) FROM …)`: the rows' values in the
/// query's order, an empty array when there are none, as PostgreSQL gives. (psql's `\du`
/// lists each role's memberships so.) A query with grouping, DISTINCT, LIMIT or an aggregate
/// in its select item is left as it is.
fn array_of_query(f: &ast::Function) -> Option<Expr> {
    let name = f.name.0.last()?.as_ident()?;
    let ast::FunctionArguments::Subquery(q) = &f.args else { return None };
    if f.name.0.len() != 1 || name.quote_style.is_some() || !name.value.eq_ignore_ascii_case("array") || q.limit_clause.is_some() || q.fetch.is_some() {
        return None;
    }
    let mut q = q.as_ref().clone();
    let order = match q.order_by.take() {
        None => vec![],
        Some(ast::OrderBy { kind: ast::OrderByKind::Expressions(items), .. }) => items,
        Some(_) => return None,
    };
    let ast::SetExpr::Select(select) = q.body.as_mut() else { return None };
    let plain = select.having.is_none()
        && select.distinct.is_none()
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty());
    let [ast::SelectItem::UnnamedExpr(element) | ast::SelectItem::ExprWithAlias { expr: element, .. }] = select.projection.as_slice() else {
        return None;
    };
    if !plain || contains_aggregate(element) {
        return None;
    }
    let mut aggregate = call("array_agg", element.clone());
    if let Expr::Function(agg) = &mut aggregate
        && let ast::FunctionArguments::List(list) = &mut agg.args
        && !order.is_empty()
    {
        list.clauses.push(ast::FunctionArgumentClause::OrderBy(order));
    }
    let whole = call_with("coalesce", vec![aggregate, call_with("make_array", vec![])]);
    select.projection = vec![ast::SelectItem::UnnamedExpr(whole)];
    Some(Expr::Subquery(Box::new(q)))
}

fn null() -> Expr {
    Expr::Value(ast::Value::Null.into())
}

/// Blanks a query block that reads an always-empty relation (see [`catalog_spellings`]).
fn blank_empty_block(select: &mut ast::Select, names: &dyn CatalogNames) {
    let empty = |r: &ast::TableFactor| matches!(r, ast::TableFactor::Table { name, args: None, .. } if names.is_always_empty(name));
    let inner = |op: &ast::JoinOperator| matches!(op, ast::JoinOperator::Join(_) | ast::JoinOperator::Inner(_) | ast::JoinOperator::CrossJoin(_));
    let reads_empty = select.from.iter().any(|t| empty(&t.relation) || t.joins.iter().any(|j| inner(&j.join_operator) && empty(&j.relation)));
    let aggregated = select.having.is_some()
        || select.projection.iter().any(|item| matches!(item, ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } if contains_aggregate(e)));
    if !reads_empty || aggregated {
        return;
    }
    for item in &mut select.projection {
        if let ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } = item
            && has_subquery(e)
        {
            *e = null();
        }
    }
    select.selection = Some(Expr::Value(ast::Value::Boolean(false).into()));
}

fn is_subquery(e: &Expr) -> bool {
    match e {
        Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => true,
        Expr::Function(f) => matches!(f.args, ast::FunctionArguments::Subquery(_)),
        _ => false,
    }
}

pub(crate) fn has_subquery(e: &Expr) -> bool {
    ast::visit_expressions(e, |x| if is_subquery(x) { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }).is_break()
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
        T::Uuid => "uuid".to_string(),
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
        // A name, a number, or a parameter holding either: looked up.
        "regclass" => Some(call(REGCLASS_FUNCTION, expr.clone())),
        "uuid" => Some(call(crate::uuid::CAST_FUNCTION, expr.clone())),
        "regproc" | "regprocedure" => Some(call(REGPROC_FUNCTION, expr.clone())),
        "regtype" => Some(call(REGTYPE_FUNCTION, expr.clone())),
        "oid" | "regnamespace" | "regrole" | "regoper" | "xid" | "cid" => cast(T::BigInt(None)),
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
        "timestamptz" => cast(T::Timestamp(None, ast::TimezoneInfo::Tz)),
        _ => None,
    }
}

/// Makes a scalar subquery over catalog relations plannable (see [`catalog_spellings`]).
/// `None` if it does not apply; otherwise the condition on outer columns moved out of the
/// subquery, if any.
fn aggregate_catalog_lookup(q: &mut ast::Query, names: &dyn CatalogNames) -> Option<Option<Expr>> {
    let ast::SetExpr::Select(select) = q.body.as_mut() else { return None };
    let grouped = !matches!(&select.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty());
    if grouped || select.having.is_some() || q.limit_clause.is_some() {
        return None;
    }
    let own = catalog_labels(select, names)?;
    let [item] = select.projection.as_mut_slice() else { return None };
    let (ast::SelectItem::UnnamedExpr(expr) | ast::SelectItem::ExprWithAlias { expr, .. }) = item else { return None };
    if contains_aggregate(expr) {
        return None;
    }
    let inner = std::mem::replace(expr, null());
    *expr = call("max", inner);
    let Some(selection) = select.selection.take() else { return Some(None) };
    let mut conjuncts = Vec::new();
    split_and(selection, &mut conjuncts);
    // Outer columns the subquery equates with its own.
    let same: Vec<(String, Expr)> = conjuncts.iter().filter_map(|c| correlation(c, &own)).collect();
    let mut outer_only = Vec::new();
    let mut kept = Vec::new();
    for mut c in conjuncts {
        if correlation(&c, &own).is_none() && !has_subquery(&c) {
            let _ = ast::visit_expressions_mut(&mut c, |x| {
                if let Some((_, own_column)) = same.iter().find(|(outer, _)| side(x, &own) == Side::Outer && x.to_string() == *outer) {
                    *x = own_column.clone();
                }
                ControlFlow::<()>::Continue(())
            });
            if references(&c, &own) == (false, true) {
                outer_only.push(c);
                continue;
            }
        }
        kept.push(c);
    }
    select.selection = join_and(kept);
    Some(join_and(outer_only))
}

/// The names (aliases, or else table names) of the relations a query block reads, if it
/// reads only catalog relations.
fn catalog_labels(select: &ast::Select, names: &dyn CatalogNames) -> Option<HashSet<String>> {
    let mut own = HashSet::new();
    for t in &select.from {
        for r in std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)) {
            let ast::TableFactor::Table { name, args: None, alias, .. } = r else { return None };
            if !names.is_catalog(name) {
                return None;
            }
            own.insert(alias.as_ref().map(|a| fold_ident(&a.name)).or_else(|| name.0.last().and_then(|p| p.as_ident()).map(fold_ident))?);
        }
    }
    (!own.is_empty()).then_some(own)
}

/// For `outer = own` (either way round): the outer column's text and the subquery's column.
fn correlation(c: &Expr, own: &HashSet<String>) -> Option<(String, Expr)> {
    let Expr::BinaryOp { left, op: ast::BinaryOperator::Eq, right } = c else { return None };
    match (side(left, own), side(right, own)) {
        (Side::Outer, Side::Own) => Some((left.to_string(), (**right).clone())),
        (Side::Own, Side::Outer) => Some((right.to_string(), (**left).clone())),
        _ => None,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Own,
    Outer,
    Other,
}

/// Whether `e` is a column of the subquery's own relations, an outer column, or neither.
fn side(e: &Expr, own: &HashSet<String>) -> Side {
    match e {
        Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
            if own.contains(&fold_ident(&parts[parts.len() - 2])) { Side::Own } else { Side::Outer }
        }
        // An unqualified column is taken to be the subquery's own.
        Expr::Identifier(_) => Side::Own,
        _ => Side::Other,
    }
}

/// Whether `e` references the subquery's own columns, and outer columns.
fn references(e: &Expr, own: &HashSet<String>) -> (bool, bool) {
    let (mut has_own, mut has_outer) = (false, false);
    let _ = ast::visit_expressions(e, |x| {
        match side(x, own) {
            Side::Own => has_own = true,
            Side::Outer => has_outer = true,
            Side::Other => {}
        }
        ControlFlow::<()>::Continue(())
    });
    (has_own, has_outer)
}

fn split_and(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::BinaryOp { left, op: ast::BinaryOperator::And, right } => {
            split_and(*left, out);
            split_and(*right, out);
        }
        Expr::Nested(inner) if matches!(*inner, Expr::BinaryOp { op: ast::BinaryOperator::And, .. }) => split_and(*inner, out),
        other => out.push(other),
    }
}

fn join_and(conjuncts: Vec<Expr>) -> Option<Expr> {
    conjuncts.into_iter().reduce(|a, b| Expr::BinaryOp { left: Box::new(a), op: ast::BinaryOperator::And, right: Box::new(b) })
}

/// Whether `name` is `_pg_expandarray`, qualified with `information_schema` or not.
fn is_expandarray(name: &ast::ObjectName) -> bool {
    let parts: Vec<String> = name.0.iter().filter_map(|p| p.as_ident()).map(fold_ident).collect();
    matches!(parts.iter().map(String::as_str).collect::<Vec<_>>().as_slice(), ["_pg_expandarray"] | ["information_schema", "_pg_expandarray"])
}

/// `generate_subscripts(a, 1 [, reverse])` as a select item: the subscripts of the
/// (one-dimensional) array's elements, as `generate_series(1, cardinality(a))` (counting down
/// with `reverse` true), which the caller turns into rows. Arrays here subscript from 1, also
/// `int2vector` catalog columns (so Rails' primary-key query, which reads `indkey[idx]` for
/// each subscript, pairs them as PostgreSQL does). Another dimension is left as it is.
fn subscripts_series(e: &Expr) -> Option<Expr> {
    let Expr::Function(f) = e else { return None };
    if f.over.is_some() || !f.name.0.last().and_then(|p| p.as_ident()).is_some_and(|n| fold_ident(n) == "generate_subscripts") {
        return None;
    }
    let ast::FunctionArguments::List(list) = &f.args else { return None };
    let args: Vec<&Expr> = list
        .args
        .iter()
        .map(|a| match a {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let number = |e: &Expr| matches!(e, Expr::Value(v) if matches!(&v.value, ast::Value::Number(n, _) if n == "1"));
    let (array, reverse) = match args.as_slice() {
        [a, d] if number(d) => (*a, false),
        [a, d, Expr::Value(v)] if number(d) => (*a, matches!(v.value, ast::Value::Boolean(true))),
        _ => return None,
    };
    let one = Expr::Value(ast::Value::Number("1".into(), false).into());
    let count = call("cardinality", array.clone());
    Some(if reverse {
        call_with("generate_series", vec![count, one, Expr::Value(ast::Value::Number("-1".into(), false).into())])
    } else {
        call_with("generate_series", vec![one, count])
    })
}

/// Makes the value of every scalar subquery that may find no row possibly NULL: its one
/// column is wrapped in `freshet_nullable` (see [`crate::functions`]), keeping its name. A
/// column that aggregates is left as it is: without GROUP BY the subquery always has a row,
/// and the planner's decorrelation must see a COUNT as it is (its value on no rows is 0).
pub fn nullable_scalar_subqueries(statement: &mut ast::Statement) {
    struct Wrapper;
    impl VisitorMut for Wrapper {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            if let Expr::Subquery(q) = e
                && let ast::SetExpr::Select(s) = q.body.as_mut()
                && let [item] = s.projection.as_mut_slice()
            {
                let aggregates = |x: &Expr| {
                    ast::visit_expressions(x, |f| match f {
                        Expr::Function(f) if f.over.is_none() && f.name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| freshet_core::sql::names::is_aggregate(&fold_ident(i))) => ControlFlow::Break(()),
                        _ => ControlFlow::Continue(()),
                    })
                    .is_break()
                };
                match item {
                    ast::SelectItem::UnnamedExpr(x) if !aggregates(x) => {
                        let alias = ast::Ident::with_quote('"', column_name(x));
                        *item = ast::SelectItem::ExprWithAlias { expr: call(crate::functions::NULLABLE, x.clone()), alias };
                    }
                    ast::SelectItem::ExprWithAlias { expr, .. } if !aggregates(expr) => *expr = call(crate::functions::NULLABLE, expr.clone()),
                    _ => {}
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Wrapper);
}

/// Types the plain string literals of a VALUES list's column as PostgreSQL resolves an
/// unknown literal: by the type a cast or typed literal gives the column in another row
/// (`VALUES ('2024-01-01'::timestamp), ('2024-01-02')` is two timestamps). DataFusion would
/// refuse the list (its rows' types differ).
pub fn typed_values_literals(statement: &mut ast::Statement) {
    struct Typer;
    impl VisitorMut for Typer {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut ast::Query) -> ControlFlow<()> {
            let ast::SetExpr::Values(values) = q.body.as_mut() else { return ControlFlow::Continue(()) };
            let width = values.rows.first().map_or(0, |row| row.content.len());
            for c in 0..width {
                let typed = values.rows.iter().find_map(|row| match row.get(c) {
                    Some(Expr::Cast { data_type, .. }) => Some(data_type.clone()),
                    Some(Expr::TypedString(t)) => Some(t.data_type.clone()),
                    _ => None,
                });
                let Some(ty) = typed else { continue };
                for row in &mut values.rows {
                    if let Some(cell) = row.get_mut(c)
                        && matches!(cell, Expr::Value(v) if matches!(v.value, ast::Value::SingleQuotedString(_)))
                    {
                        *cell = cast_to(cell.clone(), ty.clone());
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Typer);
}

/// A call of the one-argument function `name`.
fn call(name: &str, arg: Expr) -> Expr {
    call_with(name, vec![arg])
}

/// `CAST(e AS ty)`.
fn cast_to(e: Expr, ty: ast::DataType) -> Expr {
    Expr::Cast { kind: ast::CastKind::Cast, expr: Box::new(e), data_type: ty, array: false, format: None }
}

/// The UTC time of an instant as a timestamp without time zone, in microseconds (SQL's
/// `CAST(… AS TIMESTAMP)` gives nanoseconds, which end in 1677 and 2262).
fn without_zone(instant: Expr) -> Expr {
    call_with("arrow_cast", vec![instant, Expr::Value(ast::Value::SingleQuotedString("Timestamp(Microsecond, None)".into()).into())])
}

/// PostgreSQL's timestamp input (`'2024-03-05 10:00'` has no seconds, which Arrow's parser
/// requires), and any year (Arrow's literal counts nanoseconds, which end in 1677 and 2262):
/// the value parsed by Freshet, as microseconds. The function gives an instant in the
/// session's zone (UTC); a timestamp without time zone is that instant's UTC time.
fn timestamp_constant(micros: i64, zoned: bool) -> Expr {
    let instant = call("to_timestamp_micros", Expr::Value(ast::Value::Number(micros.to_string(), false).into()));
    if zoned { instant } else { without_zone(instant) }
}

/// `e` (a timestamp) rounded to `digits` fractional digits, if that is coarser than the
/// microsecond.
fn with_precision(e: Expr, digits: u64) -> Expr {
    if digits >= 6 {
        return e;
    }
    call_with(crate::functions::TIME_PRECISION, vec![e, Expr::Value(ast::Value::Number(digits.to_string(), false).into())])
}

/// A call of function `name`.
fn call_with(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(ast::Function {
        name: ast::ObjectName(vec![ast::ObjectNamePart::Identifier(ast::Ident::new(name))]),
        uses_odbc_syntax: false,
        parameters: ast::FunctionArguments::None,
        args: ast::FunctionArguments::List(ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: args.into_iter().map(|a| ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(a))).collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

/// Whether `e` calls an aggregate at its own level (not inside a subquery).
fn contains_aggregate(e: &Expr) -> bool {
    let mut outer_level = e.clone();
    let _ = ast::visit_expressions_mut(&mut outer_level, |x| {
        if is_subquery(x) {
            *x = null();
        }
        ControlFlow::<()>::Continue(())
    });
    ast::visit_expressions(&outer_level, |x| match x {
        Expr::Function(f) if f.name.0.last().and_then(|p| p.as_ident()).is_some_and(|n| freshet_core::sql::names::is_aggregate(&fold_ident(n))) => {
            ControlFlow::Break(())
        }
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// Rewrites every PostgreSQL-only function call in `statement`: `mod(a, b)`, the functions
/// DataFusion knows by another name ([`other_name`]), timestamp constants
/// ([`timestamp_literal`]), interval constants (PostgreSQL's input forms), `LOCALTIMESTAMP`,
/// `CURRENT_TIMESTAMP(p)`, `LOCALTIMESTAMP(p)` and casts to `timestamp(p)` (rounded by
/// `freshet_time_precision`), row comparisons ([`row_comparison`]),
/// `op ANY/ALL (subquery)` ([`quantified_subquery`]), `FETCH FIRST n ROWS ONLY` (LIMIT),
/// `SIMILAR TO` (see [`crate::similar`]), EXISTS outside WHERE ([`ExistsAsCount`])
/// and `generate_series(…)` as a whole select-list item, which PostgreSQL expands into rows
/// (DataFusion's gives one array): it becomes `unnest(generate_series(…))`. The select list
/// keeps PostgreSQL's result names (the session takes them from the statement as written).
pub fn postgres_functions(statement: &mut ast::Statement) {
    let _ = ast::visit_expressions_mut(statement, |e| {
        if let Some((a, b)) = mod_call(e) {
            *e = Expr::Nested(Box::new(Expr::BinaryOp { left: Box::new(a), op: ast::BinaryOperator::Modulo, right: Box::new(b) }));
        } else if let Expr::Function(f) = e
            && let [ast::ObjectNamePart::Identifier(name)] = f.name.0.as_mut_slice()
            && name.quote_style.is_none()
            && let Some(other) = other_name(&name.value.to_ascii_lowercase())
        {
            *name = ast::Ident::new(other);
        } else if let Expr::Function(f) = e
            && f.name.0.len() == 1
            && f.name.0[0].as_ident().is_some_and(|n| n.quote_style.is_none() && n.value.eq_ignore_ascii_case("age"))
            && let ast::FunctionArguments::List(list) = &mut f.args
            && list.args.len() == 1
        {
            // age(t) is the age at midnight today: age(current_date, t).
            let today = cast_to(call_with("current_date", vec![]), ast::DataType::Timestamp(None, ast::TimezoneInfo::None));
            list.args.insert(0, ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(today)));
        } else if let Expr::Function(f) = e
            && let [ast::ObjectNamePart::Identifier(i)] = f.name.0.as_slice()
            && i.quote_style.is_none()
            && (i.value.eq_ignore_ascii_case("current_timestamp") || i.value.eq_ignore_ascii_case("localtimestamp"))
            && let Ok(Some(digits)) = freshet_core::sql::bind::current_time_precision(&f.args)
        {
            // CURRENT_TIMESTAMP(p) / LOCALTIMESTAMP(p): the time now, rounded.
            let now = call_with("now", vec![]);
            let local = i.value.eq_ignore_ascii_case("localtimestamp");
            *e = with_precision(if local { without_zone(now) } else { now }, digits);
        } else if let Expr::Cast { expr, data_type, format: None, array: false, .. } = e
            && let Some((ty, digits)) = freshet_core::sql::bind::timestamp_precision(data_type)
        {
            // CAST(… AS timestamp(p)): the cast without the precision (a constant parsed as
            // below), then rounded.
            let zone = if ty == freshet_core::types::DataType::TimestampTz { ast::TimezoneInfo::WithTimeZone } else { ast::TimezoneInfo::None };
            let plain = cast_to(std::mem::replace(expr.as_mut(), null()), ast::DataType::Timestamp(None, zone));
            let plain = timestamp_literal(&plain).map_or(plain, |(micros, zoned)| timestamp_constant(micros, zoned));
            *e = with_precision(plain, digits);
        } else if let Some((micros, zoned)) = timestamp_literal(e) {
            *e = timestamp_constant(micros, zoned);
        } else if let Expr::Function(f) = e
            && matches!(f.args, ast::FunctionArguments::None)
            && let [ast::ObjectNamePart::Identifier(i)] = f.name.0.as_slice()
            && i.quote_style.is_none()
            && i.value.eq_ignore_ascii_case("localtimestamp")
        {
            // A keyword without parentheses, which DataFusion would look up as a column; the
            // time now without a zone.
            *e = without_zone(call_with("now", vec![]));
        } else if let Expr::Function(f) = e
            && let [ast::ObjectNamePart::Identifier(i)] = f.name.0.as_slice()
            && i.quote_style.is_none()
            && i.value.eq_ignore_ascii_case("transaction_timestamp")
            && matches!(&f.args, ast::FunctionArguments::List(l) if l.args.is_empty())
        {
            // The transaction's start: now().
            *e = call_with("now", vec![]);
        } else if let Some(rows) = row_comparison(e) {
            *e = rows;
        } else if let Some(exists) = match e {
            Expr::AnyOp { left, compare_op, right, .. } => quantified_subquery(left, compare_op, right, false),
            Expr::AllOp { left, compare_op, right } => quantified_subquery(left, compare_op, right, true),
            _ => None,
        } {
            *e = exists;
        } else if !matches!(e, Expr::Nested(_))
            && let Some(Ok(iv)) = freshet_core::sql::bind::interval_constant(e)
        {
            // PostgreSQL's interval input (`'1 mon 3 days 10:00'`, `'@ 2 hours ago'`, which
            // Arrow's parser refuses), parsed by Freshet and spelled as Arrow reads it.
            let text = format!("{} months {} days {} microseconds", iv.months, iv.days, iv.micros);
            *e = Expr::Interval(ast::Interval {
                value: Box::new(Expr::Value(ast::Value::SingleQuotedString(text).into())),
                leading_field: None,
                leading_precision: None,
                last_field: None,
                fractional_seconds_precision: None,
            });
        } else if let Expr::SimilarTo { negated, expr, pattern, escape_char } = e {
            let escape = match escape_char.take() {
                Some(v) => Expr::Value(v),
                None => Expr::Value(ast::Value::SingleQuotedString("\\".into()).into()),
            };
            let regex = call_with(crate::similar::SIMILAR_REGEX_FUNCTION, vec![std::mem::replace(pattern.as_mut(), null()), escape]);
            let op = if *negated { ast::BinaryOperator::PGRegexNotMatch } else { ast::BinaryOperator::PGRegexMatch };
            let left = Box::new(std::mem::replace(expr.as_mut(), null()));
            *e = Expr::Nested(Box::new(Expr::BinaryOp { left, op, right: Box::new(regex) }));
        }
        ControlFlow::<()>::Continue(())
    });
    struct SeriesRows;
    impl VisitorMut for SeriesRows {
        type Break = ();
        fn pre_visit_select(&mut self, select: &mut ast::Select) -> ControlFlow<()> {
            for item in &mut select.projection {
                let (ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. }) = item else { continue };
                if let Some(series) = subscripts_series(e) {
                    *e = series;
                }
                if let Expr::Function(f) = e
                    && f.over.is_none()
                    && f.name.0.last().and_then(|p| p.as_ident()).is_some_and(|n| fold_ident(n) == "generate_series")
                {
                    *e = call("unnest", std::mem::replace(e, null()));
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut SeriesRows);
    // `FETCH FIRST n ROWS ONLY` (without WITH TIES or PERCENT) is `LIMIT n`, which
    // DataFusion plans (it refuses FETCH).
    struct FetchFirst;
    impl VisitorMut for FetchFirst {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut ast::Query) -> ControlFlow<()> {
            let Some(ast::Fetch { with_ties: false, percent: false, .. }) = &q.fetch else { return ControlFlow::Continue(()) };
            let count = q.fetch.take().and_then(|f| f.quantity).unwrap_or_else(|| Expr::Value(ast::Value::Number("1".into(), false).into()));
            match &mut q.limit_clause {
                Some(ast::LimitClause::LimitOffset { limit: limit @ None, .. }) => *limit = Some(count),
                None => q.limit_clause = Some(ast::LimitClause::LimitOffset { limit: Some(count), offset: None, limit_by: vec![] }),
                // Both LIMIT and FETCH: PostgreSQL refuses it too; DataFusion will.
                Some(_) => q.fetch = Some(ast::Fetch { with_ties: false, percent: false, quantity: Some(count) }),
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut FetchFirst);
    let _ = statement.visit(&mut ExistsAsCount);
}

/// `EXISTS (SELECT … FROM … WHERE …)` in a select list (or an ORDER BY), which DataFusion plans
/// only in WHERE (as a semi-join; elsewhere its physical planner refuses it): the same rows
/// counted, `((SELECT count(*) FROM … WHERE …) > 0)`, a scalar subquery it plans correlated or
/// not. The subquery's own select list, ORDER BY, LIMIT and OFFSET do not change whether a row
/// exists (a LIMIT of 0 aside, which keeps its EXISTS); one with GROUP BY, HAVING, DISTINCT or
/// a set operation keeps its EXISTS.
struct ExistsAsCount;

impl VisitorMut for ExistsAsCount {
    type Break = ();
    fn pre_visit_query(&mut self, q: &mut ast::Query) -> ControlFlow<()> {
        let ast::SetExpr::Select(select) = q.body.as_mut() else { return ControlFlow::Continue(()) };
        for item in &mut select.projection {
            if let ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } = item {
                exists_as_count(e);
            }
        }
        if let Some(ast::OrderBy { kind: ast::OrderByKind::Expressions(exprs), .. }) = &mut q.order_by {
            for o in exprs {
                exists_as_count(&mut o.expr);
            }
        }
        ControlFlow::Continue(())
    }
}

/// Rewrites the EXISTS of one select-list or ORDER BY expression, through the operators,
/// CASE, casts and function calls around it but not into subqueries: a subquery's own select
/// list is its own query's (EXISTS in a subquery's WHERE is a semi-join there, which
/// DataFusion plans, also when correlated).
fn exists_as_count(e: &mut Expr) {
    match e {
        Expr::Exists { subquery, negated } => {
            if let Some(counted) = counted(subquery) {
                let test = Expr::BinaryOp {
                    left: Box::new(Expr::Subquery(Box::new(counted))),
                    op: ast::BinaryOperator::Gt,
                    right: Box::new(Expr::Value(ast::Value::Number("0".into(), false).into())),
                };
                let test = Expr::Nested(Box::new(test));
                *e = if *negated { Expr::UnaryOp { op: ast::UnaryOperator::Not, expr: Box::new(test) } } else { test };
            }
        }
        Expr::Nested(inner) | Expr::UnaryOp { expr: inner, .. } | Expr::Cast { expr: inner, .. } => exists_as_count(inner),
        Expr::IsNull(inner) | Expr::IsNotNull(inner) | Expr::IsTrue(inner) | Expr::IsFalse(inner) | Expr::IsNotTrue(inner) | Expr::IsNotFalse(inner) => {
            exists_as_count(inner)
        }
        Expr::BinaryOp { left, right, .. } => {
            exists_as_count(left);
            exists_as_count(right);
        }
        Expr::Case { operand, conditions, else_result, .. } => {
            for x in operand.iter_mut().map(|o| o.as_mut()).chain(else_result.iter_mut().map(|o| o.as_mut())) {
                exists_as_count(x);
            }
            for w in conditions {
                exists_as_count(&mut w.condition);
                exists_as_count(&mut w.result);
            }
        }
        Expr::Function(f) => {
            if let ast::FunctionArguments::List(list) = &mut f.args {
                for a in &mut list.args {
                    if let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) | ast::FunctionArg::Named { arg: ast::FunctionArgExpr::Expr(x), .. } = a {
                        exists_as_count(x);
                    }
                }
            }
        }
        _ => {}
    }
}

/// The query counting the rows of an EXISTS subquery, if it is a plain SELECT.
fn counted(q: &ast::Query) -> Option<ast::Query> {
    let ast::SetExpr::Select(select) = q.body.as_ref() else { return None };
    let plain = q.with.is_none()
        && q.fetch.is_none()
        && select.distinct.is_none()
        && select.having.is_none()
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty())
        && !select.projection.iter().any(|item| matches!(item, ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } if contains_aggregate(e)));
    let limit_zero = matches!(&q.limit_clause, Some(ast::LimitClause::LimitOffset { limit: Some(Expr::Value(v)), .. }) if v.value == ast::Value::Number("0".into(), false));
    if !plain || limit_zero {
        return None;
    }
    let mut counted = q.clone();
    counted.order_by = None;
    counted.limit_clause = None;
    if let ast::SetExpr::Select(select) = counted.body.as_mut() {
        let mut count = call_with("count", vec![]);
        if let Expr::Function(ast::Function { args: ast::FunctionArguments::List(list), .. }) = &mut count {
            list.args.push(ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard));
        }
        select.projection = vec![ast::SelectItem::UnnamedExpr(count)];
    }
    Some(counted)
}

/// Integer literals that fit in 32 bits are `integer`, as PostgreSQL types them (DataFusion
/// makes every one `bigint`): each becomes `CAST(n AS INTEGER)`, so `SELECT 1` is an int4
/// column, `int_col + 1` is integer arithmetic (failing past int4's range, as PostgreSQL's
/// does) and `sum(1)` is bigint. Numbers that are positions, not values, stay as they are:
/// `ORDER BY n`, `GROUP BY n`, LIMIT, OFFSET, FETCH and window frame offsets; so do the
/// arguments of a table function in FROM (DataFusion's `generate_series` takes bigints there)
/// and the places of `round` and `trunc` (DataFusion sets a numeric result's scale from them).
/// A number too large for NUMERIC(38) becomes double precision, as on the short path.
pub fn integer_literals(statement: &mut ast::Statement) {
    /// Marks a bare number as a position (the `long` flag, which PostgreSQL's syntax never
    /// sets; cleared again before planning).
    fn keep(e: &mut Expr) {
        if let Expr::Value(v) = e
            && let ast::Value::Number(_, long) = &mut v.value
        {
            *long = true;
        }
    }
    struct Literals;
    impl VisitorMut for Literals {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut ast::Query) -> ControlFlow<()> {
            if let Some(ast::OrderBy { kind: ast::OrderByKind::Expressions(items), .. }) = &mut q.order_by {
                items.iter_mut().for_each(|o| keep(&mut o.expr));
            }
            match &mut q.limit_clause {
                Some(ast::LimitClause::LimitOffset { limit, offset, .. }) => {
                    limit.iter_mut().for_each(keep);
                    offset.iter_mut().for_each(|o| keep(&mut o.value));
                }
                Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => {
                    keep(offset);
                    keep(limit);
                }
                None => {}
            }
            if let Some(fetch) = &mut q.fetch {
                fetch.quantity.iter_mut().for_each(keep);
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_select(&mut self, select: &mut ast::Select) -> ControlFlow<()> {
            if let ast::GroupByExpr::Expressions(items, _) = &mut select.group_by {
                items.iter_mut().for_each(keep);
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_table_factor(&mut self, factor: &mut ast::TableFactor) -> ControlFlow<()> {
            // Table functions' arguments (`generate_series(1, 3)` in FROM takes bigints).
            if let ast::TableFactor::Table { args: Some(args), .. } = factor {
                for arg in &mut args.args {
                    if let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) = arg {
                        keep(e);
                    }
                }
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            // DataFusion takes a numeric's result scale from round's and trunc's places only
            // when they are a literal of its own.
            if let Expr::Function(f) = e
                && f.name.0.last().and_then(|p| p.as_ident()).is_some_and(|n| matches!(fold_ident(n).as_str(), "round" | "trunc"))
                && let ast::FunctionArguments::List(list) = &mut f.args
                && let Some(ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(places))) = list.args.get_mut(1)
            {
                keep(places);
            }
            if let Expr::Function(ast::Function { over: Some(ast::WindowType::WindowSpec(spec)), .. }) = e
                && let Some(frame) = &mut spec.window_frame
            {
                for bound in std::iter::once(&mut frame.start_bound).chain(frame.end_bound.as_mut()) {
                    if let ast::WindowFrameBound::Preceding(Some(n)) | ast::WindowFrameBound::Following(Some(n)) = bound {
                        keep(n);
                    }
                }
            }
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            // A number beyond NUMERIC(38) (`1e300`) is double precision, as the short path's
            // binder types it (`number_literal`); DataFusion would fail to make it a decimal.
            if let Expr::Value(v) = e
                && let ast::Value::Number(n, false) = &v.value
                && n.parse::<i64>().is_err()
                && freshet_core::sql::bind::number_literal(n).is_ok_and(|l| l.ty() == freshet_core::types::DataType::Float64)
            {
                let text = Expr::Value(ast::Value::SingleQuotedString(n.clone()).into());
                *e = Expr::Cast { kind: ast::CastKind::Cast, expr: Box::new(text), data_type: ast::DataType::DoublePrecision, array: false, format: None };
                return ControlFlow::Continue(());
            }
            if let Expr::Value(v) = e
                && let ast::Value::Number(n, false) = &v.value
                && n.parse::<i32>().is_ok()
            {
                let mut literal = std::mem::replace(e, null());
                keep(&mut literal);
                *e = Expr::Cast {
                    kind: ast::CastKind::Cast,
                    expr: Box::new(literal),
                    data_type: ast::DataType::Integer(None),
                    array: false,
                    format: None,
                };
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Literals);
    let _ = ast::visit_expressions_mut(statement, |e| {
        if let Expr::Value(v) = e
            && let ast::Value::Number(_, long) = &mut v.value
        {
            *long = false;
        }
        ControlFlow::<()>::Continue(())
    });
}

/// A comparison of row constructors, `(a, b) op (x, y)` or `(a, b) [NOT] IN ((x, y), …)`,
/// as comparisons of their elements, which DataFusion plans (it refuses the rows): `=` is
/// every pair equal, `<>` some pair different, `<`, `<=`, `>`, `>=` compare the rows
/// lexicographically, as PostgreSQL does.
fn row_comparison(e: &Expr) -> Option<Expr> {
    use ast::BinaryOperator as Op;
    fn nested(e: Expr) -> Expr {
        Expr::Nested(Box::new(e))
    }
    fn binary(left: Expr, op: Op, right: Expr) -> Expr {
        Expr::BinaryOp { left: Box::new(left), op, right: Box::new(right) }
    }
    fn compare(left: &[Expr], op: &Op, right: &[Expr]) -> Option<Expr> {
        if left.len() != right.len() || left.is_empty() {
            return None;
        }
        let pairs = left.iter().cloned().zip(right.iter().cloned());
        match op {
            Op::Eq => pairs.map(|(l, r)| nested(binary(l, Op::Eq, r))).reduce(|a, b| binary(a, Op::And, b)),
            Op::NotEq => pairs.map(|(l, r)| nested(binary(l, Op::NotEq, r))).reduce(|a, b| binary(a, Op::Or, b)),
            Op::Lt | Op::LtEq | Op::Gt | Op::GtEq => {
                // From the last pair back: last `op` itself, each earlier `l strict r OR (l = r AND rest)`.
                let strict = if matches!(op, Op::Lt | Op::LtEq) { Op::Lt } else { Op::Gt };
                let mut pairs: Vec<(Expr, Expr)> = pairs.collect();
                let (l, r) = pairs.pop()?;
                let mut rest = nested(binary(l, op.clone(), r));
                while let Some((l, r)) = pairs.pop() {
                    let tie = binary(nested(binary(l.clone(), Op::Eq, r.clone())), Op::And, rest);
                    rest = nested(binary(nested(binary(l, strict.clone(), r)), Op::Or, nested(tie)));
                }
                Some(rest)
            }
            _ => None,
        }
    }
    match e {
        Expr::BinaryOp { left, op, right } => match (left.as_ref(), right.as_ref()) {
            (Expr::Tuple(l), Expr::Tuple(r)) => compare(l, op, r).map(nested),
            _ => None,
        },
        Expr::InList { expr, list, negated } => {
            let Expr::Tuple(l) = expr.as_ref() else { return None };
            let any = list
                .iter()
                .map(|item| match item {
                    Expr::Tuple(r) => compare(l, &Op::Eq, r).map(nested),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?
                .into_iter()
                .reduce(|a, b| binary(a, Op::Or, b))?;
            Some(nested(if *negated { Expr::UnaryOp { op: ast::UnaryOperator::Not, expr: Box::new(nested(any)) } } else { any }))
        }
        _ => None,
    }
}

/// `x op ANY (subquery)` as an EXISTS and `x op ALL (subquery)` as a NOT EXISTS: DataFusion
/// answered both wrongly (no rows where PostgreSQL finds some). A plain subquery
/// `SELECT v FROM … WHERE c` becomes `EXISTS (SELECT 1 FROM … WHERE c AND x op v)` (for ALL:
/// `NOT EXISTS (… WHERE c AND (x op v) IS NOT TRUE)`), so a correlated one stays correlated
/// at the same depth, when `x` names only columns qualified by names the subquery's FROM
/// does not use (moved inside, `qty` would mean the inner table's column); any other is
/// read as a derived table, `EXISTS (SELECT 1 FROM (subquery) s(v) WHERE x op s.v)`, which
/// cannot be correlated (DataFusion then reports the outer column missing). The forms are true exactly
/// when PostgreSQL's are; where PostgreSQL's would be NULL (no comparison true, one NULL)
/// they are false, which a WHERE clause treats alike.
fn quantified_subquery(left: &mut Box<Expr>, op: &ast::BinaryOperator, right: &mut Expr, all: bool) -> Option<Expr> {
    let Expr::Subquery(subquery) = right else { return None };
    let condition = |value: Expr, left: Box<Expr>| {
        let comparison = Expr::BinaryOp { left, op: op.clone(), right: Box::new(Expr::Nested(Box::new(value))) };
        if all { Expr::IsNotTrue(Box::new(Expr::Nested(Box::new(comparison)))) } else { comparison }
    };
    let plain = subquery.with.is_none() && subquery.limit_clause.is_none() && subquery.fetch.is_none();
    if plain
        && let ast::SetExpr::Select(select) = subquery.body.as_mut()
        && let [ast::SelectItem::UnnamedExpr(value) | ast::SelectItem::ExprWithAlias { expr: value, .. }] = select.projection.as_slice()
        && select.having.is_none()
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty())
        && !contains_aggregate(value)
        && !matches!(value, Expr::Function(f) if f.over.is_some())
        && cannot_be_captured(left, &select.from)
    {
        let placeholder = empty_query()?;
        let value = value.clone();
        let condition = condition(value, std::mem::replace(left, Box::new(null())));
        select.selection = Some(match select.selection.take() {
            Some(c) => Expr::BinaryOp { left: Box::new(Expr::Nested(Box::new(c))), op: ast::BinaryOperator::And, right: Box::new(condition) },
            None => condition,
        });
        select.projection = vec![ast::SelectItem::UnnamedExpr(Expr::Value(ast::Value::Number("1".into(), false).into()))];
        return Some(Expr::Exists { subquery: std::mem::replace(subquery, Box::new(placeholder)), negated: all });
    }
    let template = "EXISTS (SELECT 1 FROM (SELECT 1) AS __freshet_set (__freshet_value))";
    let mut exists = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {}).try_with_sql(template).ok()?.parse_expr().ok()?;
    let Expr::Exists { subquery: inner, negated } = &mut exists else { return None };
    let ast::SetExpr::Select(select) = inner.body.as_mut() else { return None };
    let ast::TableFactor::Derived { subquery: set, .. } = &mut select.from.first_mut()?.relation else { return None };
    std::mem::swap(set, subquery);
    let value = Expr::CompoundIdentifier(vec![ast::Ident::new("__freshet_set"), ast::Ident::new("__freshet_value")]);
    select.selection = Some(condition(value, std::mem::replace(left, Box::new(null()))));
    *negated = all;
    Some(exists)
}

/// Whether every column `e` names is qualified by a name no relation of `from` has, so that
/// moved into a query over `from` it still means the outer column.
fn cannot_be_captured(e: &Expr, from: &[ast::TableWithJoins]) -> bool {
    let mut inner = HashSet::new();
    for factor in from.iter().flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation))) {
        let name = match factor {
            ast::TableFactor::Table { alias: Some(a), .. } | ast::TableFactor::Derived { alias: Some(a), .. } => fold_ident(&a.name),
            ast::TableFactor::Table { name, alias: None, .. } => match name.0.last().and_then(|p| p.as_ident()) {
                Some(n) => fold_ident(n),
                None => return false,
            },
            _ => return false,
        };
        inner.insert(name);
    }
    ast::visit_expressions(e, |x| match x {
        Expr::Identifier(_) | Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => ControlFlow::Break(()),
        Expr::CompoundIdentifier(parts) if parts.len() < 2 || inner.contains(&fold_ident(&parts[parts.len() - 2])) => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_continue()
}

/// `SELECT 1`, to leave where a query was taken.
fn empty_query() -> Option<ast::Query> {
    let statement = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::PostgreSqlDialect {}, "SELECT 1").ok()?.pop()?;
    match statement {
        ast::Statement::Query(q) => Some(*q),
        _ => None,
    }
}

/// The microseconds of a constant `TIMESTAMP 'text'` or `'text'::timestamp` whose text
/// Freshet's input function accepts, and whether it is a `timestamp with time zone`.
fn timestamp_literal(e: &Expr) -> Option<(i64, bool)> {
    let (ty, text) = match e {
        Expr::TypedString(t) => (&t.data_type, &t.value.value),
        Expr::Cast { expr, data_type, format: None, .. } => match expr.as_ref() {
            Expr::Value(v) => (data_type, &v.value),
            _ => return None,
        },
        _ => return None,
    };
    use freshet_core::types::{DataType, Value};
    let ty = match ty {
        ast::DataType::Timestamp(_, ast::TimezoneInfo::None | ast::TimezoneInfo::WithoutTimeZone) => DataType::Timestamp,
        ast::DataType::Timestamp(_, ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz) => DataType::TimestampTz,
        _ => return None,
    };
    let ast::Value::SingleQuotedString(text) = text else { return None };
    match Value::parse(text, ty).ok()? {
        Value::Timestamp(micros) => Some((micros, false)),
        Value::TimestampTz(micros) => Some((micros, true)),
        _ => None,
    }
}

/// DataFusion's name for a PostgreSQL function it knows by another.
fn other_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "variance" => "var_samp",
        "every" => "bool_and",
        "sign" => "signum",
        "gen_random_uuid" => "uuid",
        _ => return None,
    })
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
        // Repeats at any depth; the statement's own computed items (`a + 1`) too.
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let sql = "SELECT a, t.a, a + 1, 2 AS x, 3 AS x FROM t WHERE b IN (SELECT c, c FROM u)";
        let mut s = sqlparser::parser::Parser::parse_sql(&dialect, sql).unwrap().remove(0);
        unique_output_names(&mut s);
        assert_eq!(
            s.to_string(),
            "SELECT a, t.a AS \"__freshet_column_2\", a + 1 AS \"__freshet_column_3\", 2 AS x, 3 AS \"__freshet_column_5\" FROM t \
             WHERE b IN (SELECT c, c AS \"__freshet_column_2\" FROM u)"
        );
    }

    /// Catalog relations are the `pg_` names; triggers and policies are always empty.
    struct Names;

    impl CatalogNames for Names {
        fn is_catalog(&self, name: &ast::ObjectName) -> bool {
            name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| i.value.starts_with("pg_"))
        }

        fn is_always_empty(&self, name: &ast::ObjectName) -> bool {
            name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| i.value == "pg_trigger" || i.value == "pg_policy")
        }
    }

    #[test]
    fn catalog_spellings_become_what_datafusion_plans() {
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let sql = "SELECT pg_catalog.format_type(a.atttypid, NULL), x::pg_catalog.regclass, 't'::regclass, n::name, \
                   (SELECT d.adbin FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid), \
                   (SELECT u.v FROM u WHERE u.k = a.attrelid) \
                   FROM pg_catalog.pg_attribute a WHERE a.attname OPERATOR(pg_catalog.~) '^(x)$' COLLATE pg_catalog.default";
        let mut s = sqlparser::parser::Parser::parse_sql(&dialect, sql).unwrap().remove(0);
        catalog_spellings(&mut s, &Names);
        assert_eq!(
            s.to_string(),
            "SELECT format_type(a.atttypid, NULL), freshet_regclass(x), freshet_regclass('t'), n::TEXT, \
             (SELECT max(d.adbin) FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid), \
             (SELECT u.v FROM u WHERE u.k = a.attrelid) \
             FROM pg_catalog.pg_attribute a WHERE a.attname ~ ('^(x)$')"
        );
    }

    #[test]
    fn catalog_subqueries_correlate_only_through_equalities() {
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let sql = "SELECT (SELECT c.collname FROM pg_collation c, pg_type t \
                   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation AND a.atthasdef), \
                   EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = a.attrelid), \
                   NOT EXISTS (SELECT x FROM u WHERE u.k = a.attrelid) \
                   FROM pg_attribute a";
        let mut s = sqlparser::parser::Parser::parse_sql(&dialect, sql).unwrap().remove(0);
        catalog_spellings(&mut s, &Names);
        assert_eq!(
            s.to_string(),
            "SELECT CASE WHEN a.atthasdef THEN (SELECT max(c.collname) FROM pg_collation c, pg_type t \
             WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND c.oid <> t.typcollation) END, \
             (SELECT max(1) FROM pg_constraint WHERE conindid = a.attrelid) IS NOT NULL, \
             NOT EXISTS (SELECT x FROM u WHERE u.k = a.attrelid) \
             FROM pg_attribute a"
        );
    }

    #[test]
    fn blocks_over_always_empty_relations_drop_what_cannot_plan() {
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let sql = "SELECT t.tgname, (SELECT 1 FROM f(t.tgrelid) x) FROM pg_trigger t WHERE t.tgrelid IN (SELECT 1) \
                   UNION SELECT p.polname, array(SELECT 1) FROM pg_class c LEFT JOIN pg_policy p ON p.polrelid = c.oid \
                   UNION SELECT 'n', (SELECT count(*) FROM pg_policy) FROM pg_class JOIN pg_policy ON true \
                   UNION SELECT 'm', count(*) FROM pg_trigger";
        let mut s = sqlparser::parser::Parser::parse_sql(&dialect, sql).unwrap().remove(0);
        catalog_spellings(&mut s, &Names);
        assert_eq!(
            s.to_string(),
            "SELECT t.tgname, NULL FROM pg_trigger t WHERE false \
             UNION SELECT p.polname, (SELECT coalesce(array_agg(1), make_array())) FROM pg_class c LEFT JOIN pg_policy p ON p.polrelid = c.oid \
             UNION SELECT 'n', NULL FROM pg_class JOIN pg_policy ON true WHERE false \
             UNION SELECT 'm', count(*) FROM pg_trigger"
        );
    }

    #[test]
    fn set_returning_catalog_functions_become_unnests() {
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let sql = "SELECT (information_schema._pg_expandarray(i.indkey)).n, r.k[1], (r.k).x, \
                   ARRAY(SELECT 't.' || o FROM pg_catalog.unnest(r.k) o), ARRAY(SELECT y FROM unnest(r.k) AS u(y)), \
                   ARRAY(SELECT y FROM unnest(r.k) AS u(y) WHERE y > 1) \
                   FROM pg_index i, pg_catalog.generate_series(1, 32) pos(n), r";
        let mut s = sqlparser::parser::Parser::parse_sql(&dialect, sql).unwrap().remove(0);
        catalog_spellings(&mut s, &Names);
        assert_eq!(
            s.to_string(),
            "SELECT (unnest(freshet_expandarray(i.indkey))).'n', r.k[1], (r.k).'x', \
             array_transform(r.k, o -> 't.' || o), r.k, \
             (SELECT coalesce(array_agg(y), make_array()) FROM UNNEST(r.k) AS u (y) WHERE y > 1) \
             FROM pg_index i, generate_series(1, 32) pos (n), r"
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
