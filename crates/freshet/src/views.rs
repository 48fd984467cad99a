//! Views: expansion into the statements that name them, and the view changes of a transaction
//! block.
//!
//! EXPANSION. Before a statement is planned, every `FROM`/`JOIN` reference to a view becomes a
//! derived table holding the view's query (itself expanded), named like the reference — its
//! alias, or the view's name — with the view's column names. Both planners therefore see only
//! tables: a view costs its query's planning and nothing at run time, and a query through a
//! view reads the same snapshot as every other relation of its statement. A name defined by a
//! `WITH` clause of an enclosing query shadows a view of that name, as in PostgreSQL.
//!
//! TRANSACTION BLOCKS. CREATE VIEW and DROP VIEW inside BEGIN … COMMIT are the block's own
//! until it commits: its statements see them (the session plans against the database's catalog
//! with the block's [`ViewChange`]s applied), other sessions do not, and ROLLBACK (or ROLLBACK
//! TO a savepoint set before them) forgets them. COMMIT checks them against the catalog as it is
//! then, commits the block's rows, and then applies them as DDL in order; changes that cancel
//! out (a view created and dropped in the block, as CH-benCHmark's Q15 does) touch nothing.

use std::ops::ControlFlow;
use std::sync::Arc;

use freshet_core::catalog::{Catalog, ViewDef};
use freshet_core::sql::ddl::DdlPlan;
use freshet_core::sql::names::{relation_name, RelationName};
use freshet_core::{Error, Result, SqlState};
use sqlparser::ast::{self, Query, Statement, TableFactor, Visit, VisitMut, VisitorMut};

/// How deeply views may name views; deeper is a definition cycle.
const MAX_DEPTH: usize = 32;

/// Replaces every reference to a view in `statement` by the view's query.
pub fn expand(statement: &mut Statement, catalog: &Catalog) -> Result<()> {
    if !catalog.has_views() {
        return Ok(());
    }
    expand_in(statement, catalog, 0)
}

fn expand_in<V: VisitMut>(node: &mut V, catalog: &Catalog, depth: usize) -> Result<()> {
    let mut expander = Expander { catalog, depth, ctes: Vec::new(), error: None };
    let _ = node.visit(&mut expander);
    expander.error.map_or(Ok(()), Err)
}

struct Expander<'a> {
    catalog: &'a Catalog,
    depth: usize,
    /// The names `WITH` clauses define, innermost last.
    ctes: Vec<Vec<String>>,
    error: Option<Error>,
}

impl VisitorMut for Expander<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        self.ctes.push(cte_names(query).collect());
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        self.ctes.pop();
        ControlFlow::Continue(())
    }

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table { name, alias, args: None, .. } = factor else { return ControlFlow::Continue(()) };
        let Ok(RelationName::User(n)) = relation_name(name) else { return ControlFlow::Continue(()) };
        if self.ctes.iter().any(|names| names.contains(&n)) {
            return ControlFlow::Continue(());
        }
        let Some(view) = self.catalog.view(&n) else { return ControlFlow::Continue(()) };
        match self.derived(view, alias.take()) {
            Ok(derived) => {
                *factor = derived;
                ControlFlow::Continue(())
            }
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

impl Expander<'_> {
    fn derived(&self, view: &ViewDef, alias: Option<ast::TableAlias>) -> Result<TableFactor> {
        if self.depth >= MAX_DEPTH {
            return Err(freshet_core::catalog::view_recursion(&view.name));
        }
        let mut query = parse_query(&view.query)?;
        expand_in(&mut query, self.catalog, self.depth + 1)?;
        let view_columns = || view.columns.iter().map(|(c, _)| ast::TableAliasColumnDef { name: quoted(c), data_type: None }).collect::<Vec<_>>();
        let alias = match alias {
            Some(mut a) => {
                // Column aliases of the reference rename the view's first columns; the rest
                // keep the view's names.
                let given = a.columns.len();
                if given > view.columns.len() {
                    return Err(Error::new(
                        SqlState::InvalidColumnReference,
                        format!("table \"{}\" has {} columns available but {given} columns specified", a.name.value, view.columns.len()),
                    ));
                }
                a.columns.extend(view_columns().into_iter().skip(given));
                a
            }
            None => ast::TableAlias { explicit: true, name: quoted(&view.name), columns: view_columns(), at: None },
        };
        Ok(TableFactor::Derived { lateral: false, subquery: Box::new(query), alias: Some(alias), sample: None })
    }
}

/// An identifier that keeps its exact spelling.
fn quoted(name: &str) -> ast::Ident {
    ast::Ident::with_quote('"', name)
}

/// The names a query's own `WITH` clause defines.
fn cte_names(query: &Query) -> impl Iterator<Item = String> + '_ {
    query.with.iter().flat_map(|w| w.cte_tables.iter().map(|c| freshet_core::sql::names::fold_ident(&c.alias.name)))
}

/// A view's stored query text, parsed.
fn parse_query(text: &str) -> Result<Query> {
    match freshet_core::sql::parse::parse(text)?.pop() {
        Some(Statement::Query(q)) => Ok(*q),
        _ => Err(Error::internal(format!("the stored query of a view is not a query: {text}"))),
    }
}

/// The relations a view's query names (tables and views of `catalog`, not `WITH` names), in
/// order of first mention.
pub fn dependencies(query: &Query, catalog: &Catalog) -> Vec<String> {
    let mut ctes: Vec<String> = Vec::new();
    let _ = query.visit(&mut CteNames(&mut ctes));
    let mut out: Vec<String> = Vec::new();
    let _ = ast::visit_relations(query, |name| {
        if let Ok(RelationName::User(n)) = relation_name(name)
            && !ctes.contains(&n)
            && (catalog.table(&n).is_some() || catalog.view(&n).is_some())
            && !out.contains(&n)
        {
            out.push(n);
        }
        ControlFlow::<()>::Continue(())
    });
    out
}

struct CteNames<'a>(&'a mut Vec<String>);

impl ast::Visitor for CteNames<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        self.0.extend(cte_names(query));
        ControlFlow::Continue(())
    }
}

/// One view change of a transaction block, checked when its statement ran.
#[derive(Clone, Debug)]
pub enum ViewChange {
    Put { def: Arc<ViewDef>, or_replace: bool },
    Drop(String),
}

impl ViewChange {
    fn name(&self) -> &str {
        match self {
            ViewChange::Put { def, .. } => &def.name,
            ViewChange::Drop(n) => n,
        }
    }

    /// `catalog` with this change made.
    fn apply(&self, catalog: &Catalog) -> Catalog {
        match self {
            ViewChange::Put { def, .. } => catalog.with_view(def.clone()),
            ViewChange::Drop(n) => catalog.without_view(n),
        }
    }

    /// `catalog` with this change made, if it can be: what COMMIT checks before the block's
    /// rows commit.
    fn check_and_apply(&self, catalog: &Catalog) -> Result<Catalog> {
        match self {
            ViewChange::Put { def, or_replace } => {
                catalog.check_create_view(def, *or_replace)?;
                Ok(catalog.with_view(def.clone()))
            }
            ViewChange::Drop(n) => {
                catalog.views_to_drop(std::slice::from_ref(n), false, false)?;
                Ok(catalog.without_view(n))
            }
        }
    }

    /// The DDL that makes this change in the database's catalog.
    pub fn ddl(&self) -> DdlPlan {
        match self {
            ViewChange::Put { def, or_replace } => DdlPlan::CreateView { def: (**def).clone(), or_replace: *or_replace },
            ViewChange::Drop(n) => DdlPlan::DropViews { names: vec![n.clone()], if_exists: false, cascade: false },
        }
    }
}

/// The catalog a transaction block sees: `global` with its view changes; its version is one no
/// published catalog has (the top bit set), and changes with `epoch`, so that statements
/// prepared in the block are planned again when either changes.
pub fn block_catalog(global: &Catalog, changes: &[ViewChange], epoch: u64) -> Catalog {
    let mut catalog = changes.iter().fold(global.clone(), |c, change| change.apply(&c));
    catalog.version = block_version(global.version, epoch);
    catalog
}

/// The version of [`block_catalog`], without building it.
pub fn block_version(global: u64, epoch: u64) -> u64 {
    (1 << 63) | (global << 24) | (epoch & 0xff_ffff)
}

/// The view changes a CREATE VIEW or DROP VIEW inside a block makes, checked against the
/// catalog the block sees, and its notices.
pub fn block_changes(plan: &DdlPlan, catalog: &Catalog, allocate_id: impl FnOnce() -> u32) -> Result<(Vec<ViewChange>, Vec<String>)> {
    match plan {
        DdlPlan::CreateView { def, or_replace } => {
            catalog.check_create_view(def, *or_replace)?;
            let mut def = def.clone();
            def.id = catalog.view(&def.name).map_or_else(allocate_id, |old| old.id);
            Ok((vec![ViewChange::Put { def: Arc::new(def), or_replace: *or_replace }], vec![]))
        }
        DdlPlan::DropViews { names, if_exists, cascade } => {
            let (doomed, notices) = catalog.views_to_drop(names, *if_exists, *cascade)?;
            Ok((doomed.into_iter().map(ViewChange::Drop).collect(), notices))
        }
        _ => Err(Error::internal("not a view statement")),
    }
}

/// What COMMIT of a block applies: nothing when its changes cancel out against `global`, else
/// the changes, once checked against `global` as it is now.
pub fn to_commit(global: &Catalog, changes: Vec<ViewChange>) -> Result<Vec<ViewChange>> {
    let after = changes.iter().fold(global.clone(), |c, change| change.apply(&c));
    if changes.iter().all(|c| after.view(c.name()) == global.view(c.name())) {
        return Ok(Vec::new());
    }
    changes.iter().try_fold(global.clone(), |c, change| change.check_and_apply(&c))?;
    Ok(changes)
}

/// The target of INSERT, UPDATE or DELETE, when it is a view: Freshet's views are read-only.
pub fn check_not_written(statement: &Statement, catalog: &Catalog) -> Result<()> {
    let (verb, name) = match statement {
        Statement::Insert(i) => match &i.table {
            ast::TableObject::TableName(n) => ("insert into", n),
            _ => return Ok(()),
        },
        Statement::Update(u) => match &u.table.relation {
            TableFactor::Table { name, .. } => ("update", name),
            _ => return Ok(()),
        },
        Statement::Delete(d) => {
            let tables = match &d.from {
                ast::FromTable::WithFromKeyword(t) | ast::FromTable::WithoutKeyword(t) => t,
            };
            match tables.first().map(|t| &t.relation) {
                Some(TableFactor::Table { name, .. }) => ("delete from", name),
                _ => return Ok(()),
            }
        }
        _ => return Ok(()),
    };
    match relation_name(name) {
        Ok(RelationName::User(n)) if catalog.view(&n).is_some() => Err(Error::new(SqlState::FeatureNotSupported, format!("cannot {verb} view \"{n}\""))
            .with_hint("Freshet's views are read-only: change the tables the view selects from.")),
        _ => Ok(()),
    }
}
