//! The catalog: tables, their columns, constraints and indexes, and stored procedures.
//!
//! The catalog is an immutable value ([`Catalog`]) published through a [`CatalogStore`]; a
//! statement takes the current version (an `Arc` clone) and plans against it without locks.
//! DDL builds a new version and publishes it after the partitions have applied the change, so a
//! statement never sees a table whose storage does not exist yet. Every version has a number;
//! a prepared statement re-plans when the number it was planned with is no longer current.
//!
//! Names are stored as they are after identifier folding (unquoted names in lower case). There
//! is one schema, `public`.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::error::{Error, Result, SqlState};
use crate::sequence::SequenceDef;
use crate::types::{DataType, Value};

pub type TableId = u32;

/// The default of a column.
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnDefault {
    Value(Value),
    /// CURRENT_TIMESTAMP / now(): the statement's start time.
    CurrentTimestamp,
    /// Any other expression whose value depends on the time (`now() + interval '1 day'`,
    /// `current_date`, `CURRENT_TIMESTAMP(0)`): evaluated for each row with the statement's
    /// start time. `sql` is its text as written (what `pg_get_expr` shows, and what the log
    /// keeps); `expr` is that text bound as an assignment to the column's type, without row
    /// or parameters.
    TimeDependent { sql: String, expr: crate::sql::expr::Expr },
    /// `gen_random_uuid()`: a new random uuid for each row.
    RandomUuid,
    /// `nextval('name')` (a SERIAL column's default, or one written out).
    Nextval(String),
    /// An identity column (`GENERATED {ALWAYS | BY DEFAULT} AS IDENTITY`): the next value of
    /// its sequence; with `always`, an INSERT may not give a value of its own.
    Identity { sequence: String, always: bool },
}

impl ColumnDefault {
    /// The sequence whose next value the default is.
    pub fn sequence(&self) -> Option<&str> {
        match self {
            ColumnDefault::Nextval(s) | ColumnDefault::Identity { sequence: s, .. } => Some(s),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ColumnDef {
    pub name: String,
    pub ty: DataType,
    pub nullable: bool,
    pub default: Option<ColumnDefault>,
    /// `timestamp(p)` / `timestamptz(p)` with p below 6: every value written is rounded to p
    /// fractional digits of a second (`TableStore::insert` and `update`, and the session for
    /// INSERT's RETURNING), as PostgreSQL stores it. `None` for microseconds and other types.
    pub precision: Option<u8>,
}

impl ColumnDef {
    /// A column of type `ty`, nullable, without default or precision.
    pub fn new(name: impl Into<String>, ty: DataType) -> ColumnDef {
        ColumnDef { name: name.into(), ty, nullable: true, default: None, precision: None }
    }

    /// Rounds `v` to the column's precision, if it has one and `v` is a timestamp.
    pub fn round(&self, v: &mut Value) {
        if let Some(p) = self.precision {
            if let Value::Timestamp(t) | Value::TimestampTz(t) = v {
                *t = crate::types::datetime::round_to_precision(*t, p as u32);
            }
        }
    }
}

/// An index on a table. The primary key is a hash index, which for a key of several columns
/// also keeps its entries in key order (`IndexStore::HashOrdered`); every other index is
/// ordered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexDef {
    pub name: String,
    /// Positions of the key columns in the table.
    pub columns: Vec<usize>,
    pub unique: bool,
    pub primary: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TableDef {
    pub id: TableId,
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// Indexes; the primary key, if any, comes first.
    pub indexes: Vec<IndexDef>,
    /// The column whose hash picks a row's partition (`PARTITION BY HASH (col)`). A table
    /// without one is replicated: every partition holds all of it, reads go to any one
    /// partition, writes to all of them.
    pub partition_key: Option<usize>,
    /// The sequences the table owns (its SERIAL and identity columns'): created, logged and
    /// dropped with it.
    pub sequences: Vec<Arc<SequenceDef>>,
    /// CHECK constraints, in definition order.
    pub checks: Vec<CheckDef>,
    /// COMMENT ON TABLE (column `None`) and COMMENT ON COLUMN texts.
    pub comments: Vec<(Option<String>, String)>,
}

/// A CHECK constraint: a condition every row of the table satisfies (true or NULL, as in
/// PostgreSQL). The log and checkpoints keep its SQL text; the bound form refers to columns by
/// position, so it is bound again whenever the columns change ([`CheckDef::bind`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CheckDef {
    pub name: String,
    /// The condition as written (what `pg_get_constraintdef` shows).
    pub sql: String,
    pub expr: crate::sql::expr::Expr,
}

impl CheckDef {
    /// The constraint `name` with condition `sql` over the columns of `def`: a boolean
    /// expression of its columns and constants, without parameters, subqueries or functions
    /// whose value changes (now(), sequences, random).
    pub fn bind(name: String, sql: String, def: &TableDef) -> Result<CheckDef> {
        use crate::sql::expr::{Expr, Func};
        let parsed = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
            .try_with_sql(&sql)
            .and_then(|mut p| p.parse_expr())
            .map_err(|e| Error::syntax(format!("{e}")))?;
        let mut params = Vec::new();
        let scope = crate::sql::bind::Scope { table: def, qualifiers: vec![def.name.clone()], excluded: false };
        let expr = crate::sql::bind::Binder::new(Some(scope), &mut params).bind_expr(&parsed, Some(DataType::Bool))?;
        if expr.ty() != DataType::Bool {
            return Err(Error::mismatch(format!("argument of CHECK must be type boolean, not type {}", expr.ty().pg_name())));
        }
        if !params.is_empty() {
            return Err(Error::new(SqlState::FeatureNotSupported, "cannot use parameters in a check constraint"));
        }
        let mut volatile = false;
        expr.visit(&mut |n| {
            volatile |= matches!(n, Expr::Func { func, .. } if func.is_session() || matches!(func, Func::Now | Func::CurrentDate | Func::GenRandomUuid));
        });
        if volatile {
            return Err(Error::new(SqlState::FeatureNotSupported, format!("check constraint \"{name}\" calls a function whose value changes")));
        }
        Ok(CheckDef { name, sql, expr })
    }

    /// The condition's text with the table or a column renamed (`from` → `to`, names as
    /// folded): identifiers that name them are replaced (ALTER TABLE … RENAME).
    pub fn renamed_sql(&self, table: Option<(&str, &str)>, column: Option<(&str, &str)>) -> Result<String> {
        use std::ops::ControlFlow;
        let mut parsed = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
            .try_with_sql(&self.sql)
            .and_then(|mut p| p.parse_expr())
            .map_err(|e| Error::syntax(format!("{e}")))?;
        let fold = crate::sql::names::fold_ident;
        let _ = sqlparser::ast::visit_expressions_mut(&mut parsed, |e| {
            let renamed = |ident: &mut sqlparser::ast::Ident, (from, to): (&str, &str)| {
                if fold(ident) == from {
                    let plain = to.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
                        && to.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                    *ident = if plain { sqlparser::ast::Ident::new(to) } else { sqlparser::ast::Ident::with_quote('"', to) };
                }
            };
            match e {
                sqlparser::ast::Expr::Identifier(i) => {
                    if let Some(c) = column {
                        renamed(i, c);
                    }
                }
                sqlparser::ast::Expr::CompoundIdentifier(parts) => {
                    let n = parts.len();
                    if let (Some(c), Some(last)) = (column, parts.last_mut()) {
                        renamed(last, c);
                    }
                    if let (Some(t), true) = (table, n >= 2) {
                        renamed(&mut parts[n - 2], t);
                    }
                }
                _ => {}
            }
            ControlFlow::<()>::Continue(())
        });
        Ok(parsed.to_string())
    }

    /// Whether the condition reads column `c`.
    pub fn reads(&self, c: usize) -> bool {
        let mut found = false;
        self.expr.visit(&mut |n| found |= matches!(n, crate::sql::expr::Expr::Column { index, .. } if *index == c));
        found
    }
}

/// A value of a column whose type ALTER TABLE … ALTER COLUMN … TYPE changes, as the new type:
/// an assignment cast (as PostgreSQL converts without USING), or with `explicit` (`USING
/// column::type`) an explicit cast first. NULL stays NULL.
pub fn convert_column_value(v: Value, ty: DataType, explicit: bool) -> Result<Value> {
    if v.is_null() {
        return Ok(v);
    }
    if explicit { v.cast(ty)?.assign_to(ty) } else { v.assign_to(ty) }
}

/// Whether PostgreSQL converts a column of type `from` to `to` without USING (an assignment
/// cast exists): between numbers, to a string from anything, between strings, and among
/// dates and timestamps.
pub fn converts_without_using(from: DataType, to: DataType) -> bool {
    use crate::types::TypeFamily as F;
    let number = |f: F| matches!(f, F::Integer | F::Decimal | F::Float);
    let time = |f: F| matches!(f, F::Date | F::Timestamp);
    let (a, b) = (from.family(), to.family());
    a == b || (number(a) && number(b)) || b == F::String || (time(a) && time(b))
}

impl IndexDef {
    /// Whether the index answers prefixes and ranges of its key in key order; a one-column
    /// primary key answers whole keys only.
    pub fn is_ordered(&self) -> bool {
        !self.primary || self.columns.len() > 1
    }
}

impl TableDef {
    /// The definition without column `c` (ALTER TABLE … DROP COLUMN, and its replay): the
    /// indexes that include the column are dropped with it (the primary key too, as in
    /// PostgreSQL), the sequences it owns go, and positions after it move down by one.
    pub fn without_column(&self, c: usize) -> TableDef {
        let shift = |p: usize| if p > c { p - 1 } else { p };
        let column = &self.columns[c].name;
        let mut def = TableDef {
            id: self.id,
            name: self.name.clone(),
            columns: self.columns.iter().enumerate().filter(|(i, _)| *i != c).map(|(_, col)| col.clone()).collect(),
            indexes: self
                .indexes
                .iter()
                .filter(|i| !i.columns.contains(&c))
                .map(|i| IndexDef { columns: i.columns.iter().map(|&p| shift(p)).collect(), ..i.clone() })
                .collect(),
            partition_key: self.partition_key.map(shift),
            sequences: self
                .sequences
                .iter()
                .filter(|s| !s.owned_by.as_ref().is_some_and(|(t, owner)| *t == self.name && owner == column))
                .cloned()
                .collect(),
            checks: Vec::new(),
            comments: self.comments.iter().filter(|(col, _)| col.as_deref() != Some(column.as_str())).cloned().collect(),
        };
        // The checks that read the column go with it (as in PostgreSQL); the others are bound
        // to the new positions.
        def.checks = self.checks.iter().filter(|k| !k.reads(c)).filter_map(|k| CheckDef::bind(k.name.clone(), k.sql.clone(), &def).ok()).collect();
        def
    }

    /// The definition with column `c` of type `ty` (ALTER TABLE … ALTER COLUMN … TYPE, and its
    /// replay): a constant default converted as the column's values are
    /// ([`convert_column_value`]).
    pub fn with_column_type(&self, c: usize, ty: DataType, explicit: bool) -> Result<TableDef> {
        let mut def = self.clone();
        let column = &mut def.columns[c];
        column.ty = ty;
        column.precision = None;
        if let Some(ColumnDefault::Value(v)) = &mut column.default {
            *v = convert_column_value(std::mem::replace(v, Value::Null), ty, explicit)?;
        }
        def.bind_checks()?;
        Ok(def)
    }

    /// Binds the CHECK constraints again over the current columns (after a change of a
    /// column's type or name, or of the table's name).
    pub fn bind_checks(&mut self) -> Result<()> {
        let checks = std::mem::take(&mut self.checks);
        self.checks = checks.into_iter().map(|k| CheckDef::bind(k.name, k.sql, self)).collect::<Result<_>>()?;
        Ok(())
    }

    /// PostgreSQL's name for an unnamed CHECK constraint of this table: the table's, with the
    /// column's if the condition reads exactly one, numbered past names already taken.
    pub fn check_name(&self, check: &CheckDef) -> String {
        let read: Vec<&str> = self.columns.iter().enumerate().filter(|(c, _)| check.reads(*c)).map(|(_, col)| col.name.as_str()).collect();
        let base = match read.as_slice() {
            [column] => format!("{}_{column}_check", self.name),
            _ => format!("{}_check", self.name),
        };
        let mut name = base.clone();
        let mut n = 0;
        while self.checks.iter().any(|k| k.name == name) {
            n += 1;
            name = format!("{base}{n}");
        }
        name
    }

    /// The comment of the table (`None`) or of a column.
    pub fn comment(&self, column: Option<&str>) -> Option<&str> {
        self.comments.iter().find(|(c, _)| c.as_deref() == column).map(|(_, text)| text.as_str())
    }

    /// Sets (or with `None` removes) the comment of the table or of a column.
    pub fn set_comment(&mut self, column: Option<&str>, text: Option<String>) {
        self.comments.retain(|(c, _)| c.as_deref() != column);
        if let Some(text) = text {
            self.comments.push((column.map(str::to_string), text));
        }
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    pub fn primary_key(&self) -> Option<&IndexDef> {
        self.indexes.first().filter(|i| i.primary)
    }

    pub fn types(&self) -> Vec<DataType> {
        self.columns.iter().map(|c| c.ty).collect()
    }

    /// Whether a column rounds the values written to it (`timestamp(p)`, p < 6).
    pub fn rounds(&self) -> bool {
        self.columns.iter().any(|c| c.precision.is_some())
    }

    /// Rounds a whole row's values to their columns' precisions.
    pub fn round_row(&self, row: &mut [Value]) {
        for (c, v) in self.columns.iter().zip(row) {
            c.round(v);
        }
    }

    pub fn index_position(&self, name: &str) -> Option<usize> {
        self.indexes.iter().position(|i| i.name == name)
    }
}

/// A stored procedure or function: its compiled form (whose `source` is what the log and
/// checkpoints keep) and an id that changes with every CREATE OR REPLACE, so that sessions
/// know when their prepared statements for it are stale.
#[derive(Clone, Debug)]
pub struct ProcedureDef {
    pub id: u64,
    pub routine: Arc<crate::sql::plpgsql::Routine>,
}

/// A view: a named query, expanded into the queries that name it when they are planned.
/// Views hold no data; they share the relation namespace and the id space of tables.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewDef {
    pub id: TableId,
    pub name: String,
    /// Output columns, named as the view names them, typed as its query gives them when the
    /// view was created.
    pub columns: Vec<(String, DataType)>,
    /// The defining query, as SQL text (what the log and checkpoints keep, and what
    /// `pg_views.definition` shows).
    pub query: String,
    /// The tables and views its query names: they cannot be dropped while the view exists
    /// (except with CASCADE, which drops the view too).
    pub depends_on: Vec<String>,
}

/// One version of the catalog.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    pub version: u64,
    tables: BTreeMap<String, Arc<TableDef>>,
    /// By name, the routines of that name (several, of different input parameter types:
    /// overloading).
    procedures: BTreeMap<String, Vec<Arc<ProcedureDef>>>,
    views: BTreeMap<String, Arc<ViewDef>>,
    /// Sequences of their own (CREATE SEQUENCE); a table's are in its definition.
    sequences: BTreeMap<String, Arc<SequenceDef>>,
}

impl Catalog {
    pub fn table(&self, name: &str) -> Option<&Arc<TableDef>> {
        self.tables.get(name)
    }

    pub fn table_by_id(&self, id: TableId) -> Option<&Arc<TableDef>> {
        self.tables.values().find(|t| t.id == id)
    }

    pub fn require_table(&self, name: &str) -> Result<&Arc<TableDef>> {
        self.table(name).ok_or_else(|| match self.views.get(name) {
            // A view where only a table will do: COPY FROM, CREATE INDEX, ALTER TABLE, TRUNCATE.
            Some(_) => Error::new(SqlState::WrongObjectType, format!("\"{name}\" is not a table")),
            None => Error::undefined_table(name),
        })
    }

    pub fn tables(&self) -> impl Iterator<Item = &Arc<TableDef>> {
        self.tables.values()
    }

    /// The table that owns the index called `name`.
    pub fn index_owner(&self, name: &str) -> Option<(&Arc<TableDef>, usize)> {
        self.tables.values().find_map(|t| t.index_position(name).map(|i| (t, i)))
    }

    /// The routines called `name` (none, one, or several of different parameter types).
    pub fn routines(&self, name: &str) -> &[Arc<ProcedureDef>] {
        self.procedures.get(name).map_or(&[], Vec::as_slice)
    }

    /// Whether a stored procedure or function is called `name`.
    pub fn has_routine(&self, name: &str) -> bool {
        self.procedures.contains_key(name)
    }

    /// The routine called `name` whose input parameters have these types.
    pub fn routine(&self, name: &str, signature: &[crate::sql::plpgsql::PlType]) -> Option<&Arc<ProcedureDef>> {
        self.routines(name).iter().find(|d| d.routine.has_signature(signature))
    }

    pub fn procedures(&self) -> impl Iterator<Item = &Arc<ProcedureDef>> {
        self.procedures.values().flatten()
    }

    /// The routine a DROP or ALTER FUNCTION (`function`) or PROCEDURE names: by name and input
    /// types, or by name alone among the routines of its kind (42725 if several have it);
    /// 42809 if the one named is of the other kind. `None` if there is none.
    pub fn named_routine(&self, function: bool, name: &str, types: Option<&[crate::sql::plpgsql::PlType]>) -> Result<Option<&Arc<ProcedureDef>>> {
        let kind = if function { "function" } else { "procedure" };
        let found = match types {
            Some(types) => self.routine(name, types),
            None => {
                let mut of_kind = self.routines(name).iter().filter(|p| p.routine.function == function);
                let first = of_kind.next();
                if of_kind.next().is_some() {
                    return Err(Error::new(SqlState::AmbiguousFunction, format!("{kind} name \"{name}\" is not unique"))
                        .with_hint(format!("Specify the argument list to select the {kind} unambiguously.")));
                }
                first
            }
        };
        match found {
            Some(p) if p.routine.function != function => Err(Error::new(SqlState::WrongObjectType, format!("{} is not a {kind}", p.routine.identity))),
            found => Ok(found),
        }
    }

    /// 42883 for a routine [`named_routine`](Self::named_routine) did not find.
    pub fn missing_routine(function: bool, name: &str, types: Option<&[crate::sql::plpgsql::PlType]>) -> Error {
        let kind = if function { "function" } else { "procedure" };
        match types {
            None => Error::new(SqlState::UndefinedFunction, format!("could not find a {kind} named \"{name}\"")),
            Some(types) => Error::new(SqlState::UndefinedFunction, format!("{kind} {} does not exist", crate::sql::plpgsql::signature_text(name, types.iter().map(|t| t.name())))),
        }
    }

    /// Whether `name` is taken by a table, an index, a view or a sequence (they share one
    /// namespace).
    pub fn relation_exists(&self, name: &str) -> bool {
        self.tables.contains_key(name) || self.views.contains_key(name) || self.index_owner(name).is_some() || self.sequence(name).is_some()
    }

    /// The sequence called `name`: one of its own, or one a table owns.
    pub fn sequence(&self, name: &str) -> Option<&Arc<SequenceDef>> {
        self.sequences.get(name).or_else(|| self.tables.values().flat_map(|t| &t.sequences).find(|s| s.name == name))
    }

    /// Every sequence, its own ones first.
    pub fn all_sequences(&self) -> impl Iterator<Item = &Arc<SequenceDef>> {
        self.sequences.values().chain(self.tables.values().flat_map(|t| &t.sequences))
    }

    /// The sequences of their own (not owned by a table).
    pub fn free_sequences(&self) -> impl Iterator<Item = &Arc<SequenceDef>> {
        self.sequences.values()
    }

    pub fn view(&self, name: &str) -> Option<&Arc<ViewDef>> {
        self.views.get(name)
    }

    pub fn views(&self) -> impl Iterator<Item = &Arc<ViewDef>> {
        self.views.values()
    }

    pub fn has_views(&self) -> bool {
        !self.views.is_empty()
    }

    /// The views whose queries name `relation`.
    pub fn dependents(&self, relation: &str) -> impl Iterator<Item = &Arc<ViewDef>> {
        self.views.values().filter(move |v| v.depends_on.iter().any(|d| d == relation))
    }

    /// Checks that `def` can be created (`or_replace`: or replace the view of its name): the
    /// name is free, or names a view whose columns the new one keeps, by name and type, in
    /// their order (PostgreSQL's rule: a replacement may only add columns at the end); and the
    /// views it names do not lead back to it (42P17), which a replacement could otherwise do.
    pub fn check_create_view(&self, def: &ViewDef, or_replace: bool) -> Result<()> {
        match self.views.get(&def.name) {
            Some(old) if or_replace => {
                if def.columns.len() < old.columns.len() {
                    return Err(Error::new(SqlState::InvalidTableDefinition, "cannot drop columns from view"));
                }
                for ((old_name, old_ty), (name, ty)) in old.columns.iter().zip(&def.columns) {
                    if old_name != name {
                        return Err(Error::new(
                            SqlState::InvalidTableDefinition,
                            format!("cannot change name of view column \"{old_name}\" to \"{name}\""),
                        ));
                    }
                    if old_ty != ty {
                        return Err(Error::new(
                            SqlState::InvalidTableDefinition,
                            format!("cannot change data type of view column \"{name}\" from {old_ty} to {ty}"),
                        ));
                    }
                }
            }
            _ if self.relation_exists(&def.name) => {
                return Err(Error::new(SqlState::DuplicateTable, format!("relation \"{}\" already exists", def.name)));
            }
            _ => {}
        }
        let mut stack: Vec<&str> = def.depends_on.iter().map(String::as_str).collect();
        let mut seen: Vec<&str> = Vec::new();
        while let Some(n) = stack.pop() {
            if n == def.name {
                return Err(view_recursion(&def.name));
            }
            if !seen.contains(&n) {
                seen.push(n);
                if let Some(v) = self.views.get(n) {
                    stack.extend(v.depends_on.iter().map(String::as_str));
                }
            }
        }
        Ok(())
    }

    /// What DROP of the relations `names` removes besides them: every view that depends on
    /// one of them, directly or through other views, in an order that drops dependents first.
    /// Without `cascade`, any such view is an error (2BP01), as in PostgreSQL.
    pub fn dependent_views(&self, names: &[String], kind: &str, cascade: bool) -> Result<Vec<String>> {
        let mut out: Vec<String> = Vec::new();
        let mut frontier: Vec<String> = names.to_vec();
        while let Some(name) = frontier.pop() {
            for v in self.dependents(&name) {
                if names.contains(&v.name) || out.contains(&v.name) {
                    continue;
                }
                if !cascade {
                    return Err(Error::new(
                        SqlState::DependentObjectsStillExist,
                        format!("cannot drop {kind} {name} because other objects depend on it"),
                    )
                    .with_detail(format!("view {} depends on {kind} {name}", v.name))
                    .with_hint("Use DROP ... CASCADE to drop the dependent objects too."));
                }
                out.push(v.name.clone());
                frontier.push(v.name.clone());
            }
        }
        // Found outward from the dropped relations; dropping in reverse removes the views
        // that depend on others first.
        out.reverse();
        Ok(out)
    }

    /// What DROP VIEW `names` removes, in the order to remove them (the views that depend on
    /// them first, with CASCADE), and the notices for names missing under IF EXISTS.
    pub fn views_to_drop(&self, names: &[String], if_exists: bool, cascade: bool) -> Result<(Vec<String>, Vec<String>)> {
        let mut notices = Vec::new();
        let mut doomed = Vec::new();
        for n in names {
            if self.views.contains_key(n) {
                if !doomed.contains(n) {
                    doomed.push(n.clone());
                }
            } else if self.tables.contains_key(n) {
                return Err(Error::new(SqlState::WrongObjectType, format!("\"{n}\" is not a view"))
                    .with_hint("Use DROP TABLE to remove a table."));
            } else if if_exists {
                notices.push(format!("view \"{n}\" does not exist, skipping"));
            } else {
                return Err(Error::undefined_table(n));
            }
        }
        let mut all = self.dependent_views(&doomed, "view", cascade)?;
        notices.extend(all.iter().map(|v| format!("drop cascades to view {v}")));
        all.extend(doomed);
        Ok((all, notices))
    }

    /// This catalog with `view` added or replaced (a transaction's own view changes, which
    /// other sessions do not see until it commits).
    pub fn with_view(&self, view: Arc<ViewDef>) -> Catalog {
        let mut next = self.clone();
        next.views.insert(view.name.clone(), view);
        next
    }

    /// This catalog without view `name`.
    pub fn without_view(&self, name: &str) -> Catalog {
        let mut next = self.clone();
        next.views.remove(name);
        next
    }
}

/// Publishes catalog versions; serialises DDL.
#[derive(Debug, Default)]
pub struct CatalogStore {
    current: RwLock<Arc<Catalog>>,
    next_table_id: Mutex<TableId>,
    /// Held for the whole of a DDL statement, so that DDL runs one at a time. An async lock:
    /// it is held across the executors' replies, and waiting for it must not block a thread.
    pub ddl_lock: futures::lock::Mutex<()>,
}

impl CatalogStore {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn current(&self) -> Arc<Catalog> {
        self.current.read().clone()
    }

    pub fn allocate_table_id(&self) -> TableId {
        let mut next = self.next_table_id.lock();
        *next += 1;
        *next
    }

    /// Makes sure table ids handed out later are above `id` (recovery).
    pub fn ensure_next_table_id(&self, id: TableId) {
        let mut next = self.next_table_id.lock();
        *next = (*next).max(id);
    }

    /// Publishes a catalog with `table` added or replaced.
    /// A sequence the table owns stops being one of its own (ALTER SEQUENCE … OWNED BY moves
    /// it into the table): every sequence is either free or owned by one table.
    pub fn put_table(&self, table: Arc<TableDef>) {
        self.put_table_renamed(None, table);
    }

    /// Publishes `table`, dropping the name it had before (`renamed_from`, ALTER TABLE …
    /// RENAME TO) in the same catalog version.
    pub fn put_table_renamed(&self, renamed_from: Option<&str>, table: Arc<TableDef>) {
        let mut cur = self.current.write();
        let mut next = (**cur).clone();
        next.version += 1;
        if let Some(old) = renamed_from {
            next.tables.remove(old);
        }
        for s in &table.sequences {
            next.sequences.retain(|_, free| free.id != s.id);
        }
        next.tables.insert(table.name.clone(), table);
        *cur = Arc::new(next);
    }

    /// Publishes a catalog without table `name`.
    pub fn remove_table(&self, name: &str) -> Result<Arc<TableDef>> {
        let mut cur = self.current.write();
        let mut next = (**cur).clone();
        let removed = next.tables.remove(name).ok_or_else(|| Error::undefined_table(name))?;
        next.version += 1;
        *cur = Arc::new(next);
        Ok(removed)
    }
}

impl CatalogStore {
    /// Publishes a catalog with the procedure `routine` added or replaced.
    pub fn put_procedure(&self, routine: Arc<crate::sql::plpgsql::Routine>) {
        let mut cur = self.current.write();
        let mut next = (**cur).clone();
        next.version += 1;
        let def = Arc::new(ProcedureDef { id: next.version, routine });
        let same = next.procedures.entry(def.routine.name.clone()).or_default();
        match same.iter_mut().find(|d| d.routine.has_signature(&def.routine.signature)) {
            Some(old) => *old = def,
            None => same.push(def),
        }
        *cur = Arc::new(next);
    }

    /// Publishes a catalog without the routine `name` of input parameter types `signature`
    /// (`None`: every routine of the name); whether there was one.
    pub fn remove_procedure(&self, name: &str, signature: Option<&[crate::sql::plpgsql::PlType]>) -> bool {
        let mut cur = self.current.write();
        let doomed = |d: &Arc<ProcedureDef>| signature.is_none_or(|s| d.routine.has_signature(s));
        if !cur.routines(name).iter().any(doomed) {
            return false;
        }
        let mut next = (**cur).clone();
        if let Some(same) = next.procedures.get_mut(name) {
            same.retain(|d| !doomed(d));
            if same.is_empty() {
                next.procedures.remove(name);
            }
        }
        next.version += 1;
        *cur = Arc::new(next);
        true
    }
}

impl CatalogStore {
    /// Publishes a catalog with sequence `def` added.
    pub fn put_sequence(&self, def: Arc<SequenceDef>) {
        let mut cur = self.current.write();
        let mut next = (**cur).clone();
        next.version += 1;
        next.sequences.insert(def.name.clone(), def);
        *cur = Arc::new(next);
    }

    /// Publishes a catalog without sequence `name`; whether it was there.
    pub fn remove_sequence(&self, name: &str) -> bool {
        let mut cur = self.current.write();
        if !cur.sequences.contains_key(name) {
            return false;
        }
        let mut next = (**cur).clone();
        next.sequences.remove(name);
        next.version += 1;
        *cur = Arc::new(next);
        true
    }
}

impl CatalogStore {
    /// Publishes a catalog with `view` added or replaced.
    pub fn put_view(&self, view: Arc<ViewDef>) {
        let mut cur = self.current.write();
        let mut next = cur.with_view(view);
        next.version += 1;
        *cur = Arc::new(next);
    }

    /// Publishes a catalog without view `name`; whether it was there.
    pub fn remove_view(&self, name: &str) -> bool {
        let mut cur = self.current.write();
        if !cur.views.contains_key(name) {
            return false;
        }
        let mut next = cur.without_view(name);
        next.version += 1;
        *cur = Arc::new(next);
        true
    }
}

/// A view that reaches itself through the views it names (42P17, PostgreSQL's wording).
pub fn view_recursion(name: &str) -> Error {
    Error::new(SqlState::Custom("42P17"), format!("infinite recursion detected in rules for relation \"{name}\""))
}

/// Checks a new table definition: unique column names, key columns not null.
pub fn validate_table(def: &TableDef) -> Result<()> {
    for (i, c) in def.columns.iter().enumerate() {
        if def.columns[..i].iter().any(|d| d.name == c.name) {
            return Err(Error::new(
                SqlState::DuplicateColumn,
                format!("column \"{}\" specified more than once", c.name),
            ));
        }
    }
    if def.columns.is_empty() {
        return Err(Error::unsupported("a table without columns"));
    }
    Ok(())
}
