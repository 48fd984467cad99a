//! Record-level access for native procedures: a body reads, locks, updates, inserts and
//! deletes rows of a table through one of its indexes, with values in and values out — no SQL
//! text, no parameters to convert, no expressions to evaluate per column.
//!
//! Each operation means exactly what one SQL statement means (the statement is given with
//! each method), and that is how it runs when the call does not run as one executor job
//! (inside a transaction block, several partitions, a lock to wait for, more rows than the
//! short path's budget): as
//! that statement, generated from the table's definition and prepared once per session. In
//! a call that runs as one job it goes straight to the partition's storage, on the same
//! candidate walk, visibility rules, locks and uniqueness checks as the statement.

use std::sync::Arc;

use freshet_core::catalog::TableDef;
use freshet_core::sql::exec::{RecordChanges, RecordRead, RecordRow, RecordRowChanges};
use freshet_core::types::Value;
use freshet_core::{Error, Result, SqlState};
use sqlparser::ast::Ident;

use super::{ContextInner, ProcedureContext};

/// A table a native procedure works with, resolved by name ([`ProcedureContext::table`]).
/// Column and index positions it hands out hold while the table's definition does; a body
/// that resolves its tables on each call always sees the current definition.
#[derive(Clone, Debug)]
pub struct TableRef {
    def: Arc<TableDef>,
}

impl TableRef {
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The position of a column (42703 if the table has none of that name).
    pub fn column(&self, name: &str) -> Result<usize> {
        self.def
            .column_index(name)
            .ok_or_else(|| Error::new(SqlState::UndefinedColumn, format!("column \"{name}\" of relation \"{}\" does not exist", self.def.name)))
    }

    /// How many columns the table has: the length of a row for [`ProcedureContext::insert`].
    pub fn width(&self) -> usize {
        self.def.columns.len()
    }

    /// A row for [`ProcedureContext::insert`] from named values, NULL in the other columns.
    pub fn row(&self, values: Vec<(&str, Value)>) -> Result<Vec<Value>> {
        let mut row = vec![Value::Null; self.def.columns.len()];
        for (name, v) in values {
            row[self.column(name)?] = v;
        }
        Ok(row)
    }

    /// The positions of several columns, in order.
    pub fn columns(&self, names: &[&str]) -> Result<Vec<usize>> {
        names.iter().map(|n| self.column(n)).collect()
    }

    /// The position of the index whose key columns are `columns`, in that order (42704 if
    /// there is none). The primary key, if the table has one, is index 0.
    pub fn index(&self, columns: &[&str]) -> Result<usize> {
        let wanted = self.columns(columns)?;
        self.def.indexes.iter().position(|i| i.columns == wanted).ok_or_else(|| {
            Error::new(SqlState::UndefinedObject, format!("relation \"{}\" has no index on ({})", self.def.name, columns.join(", ")))
        })
    }

    /// A read of the rows whose primary key is `key`, giving `columns` (42P10 without a
    /// primary key — a read on another index is [`RecordRead`] with that index).
    pub fn key(&self, key: Vec<Value>, columns: Vec<usize>) -> Result<RecordRead> {
        primary_key(&self.def)?;
        Ok(RecordRead { index: 0, eq: key, columns, ..RecordRead::default() })
    }
}

/// What a native procedure resolves from the catalog — its [`TableRef`]s, column and index
/// positions — kept from one call to the next while the catalog does not change, so a body
/// looks up its tables and columns by name once, not on every call:
///
/// ```ignore
/// struct Tables { stock: TableRef, quantity: usize }
/// let tables = Arc::new(Resolved::new());
/// db.register_procedure("p", move |cx, args| {
///     let t = tables.get(cx, |cx| {
///         let stock = cx.table("stock")?;
///         Ok(Tables { quantity: stock.column("s_quantity")?, stock })
///     })?;
///     …
/// });
/// ```
///
/// Any DDL makes a new catalog version, and the next call resolves again (under a changed
/// definition a kept position could name another column). Shared by the executors and
/// sessions that call the procedure: the kept value is behind a lock held only to clone it.
pub struct Resolved<T> {
    kept: std::sync::Mutex<Option<(Arc<freshet_core::catalog::Catalog>, Arc<T>)>>,
}

impl<T> Default for Resolved<T> {
    fn default() -> Self {
        Resolved { kept: std::sync::Mutex::new(None) }
    }
}

impl<T> Resolved<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// The value `resolve` gives under the catalog this call sees: the kept one if it was
    /// resolved under the same catalog version, otherwise resolved now and kept.
    pub fn get(&self, cx: &mut ProcedureContext, resolve: impl FnOnce(&mut ProcedureContext) -> Result<T>) -> Result<Arc<T>> {
        let catalog = cx.catalog();
        if let Some((at, value)) = self.kept().as_ref()
            && Arc::ptr_eq(at, &catalog)
        {
            return Ok(value.clone());
        }
        let value = Arc::new(resolve(cx)?);
        *self.kept() = Some((catalog, value.clone()));
        Ok(value)
    }

    /// The kept value (a panic while it was held left nothing half-written: it is one
    /// assignment).
    fn kept(&self) -> std::sync::MutexGuard<'_, Option<(Arc<freshet_core::catalog::Catalog>, Arc<T>)>> {
        self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The table's primary key (42P10 if it has none).
fn primary_key(def: &TableDef) -> Result<&freshet_core::catalog::IndexDef> {
    def.primary_key().ok_or_else(|| Error::new(SqlState::InvalidColumnReference, format!("relation \"{}\" has no primary key", def.name)))
}

/// What a record operation does, for its SQL form.
enum Op<'a> {
    Read { lock: bool },
    Update(&'a [(usize, Value)]),
    Delete,
}

impl ProcedureContext<'_> {
    /// The table called `name` (42P01 if there is none).
    pub fn table(&mut self, name: &str) -> Result<TableRef> {
        Ok(TableRef { def: self.catalog().require_table(name)?.clone() })
    }

    /// The catalog version the call sees: the job's, or the session's current one.
    fn catalog(&self) -> Arc<freshet_core::catalog::Catalog> {
        match &self.inner {
            ContextInner::Session(s) => s.database().inner.engine.catalog(),
            ContextInner::Job(cx) => cx.catalog.clone(),
        }
    }

    /// The rows `read` finds, each as the values of its columns: `SELECT columns FROM table
    /// WHERE <index columns> = eq [AND next BETWEEN bounds | AND next IN (any)] ORDER BY <index columns> [DESC]
    /// [LIMIT n]`.
    pub fn read(&mut self, table: &TableRef, read: &RecordRead) -> Result<Vec<Vec<Value>>> {
        self.record(table, read, Op::Read { lock: false })
    }

    /// As [`read`](Self::read), locking the rows found: `… FOR UPDATE`.
    pub fn read_for_update(&mut self, table: &TableRef, read: &RecordRead) -> Result<Vec<Vec<Value>>> {
        self.record(table, read, Op::Read { lock: true })
    }

    /// Sets columns of the rows `read` finds (`changes`: column positions and values,
    /// assigned to the column types as UPDATE assigns them) and returns the read's columns of
    /// each changed row: `UPDATE table SET … WHERE … RETURNING columns`. A read with a limit
    /// or in reverse order is refused (0A000): UPDATE has neither.
    pub fn update(&mut self, table: &TableRef, read: &RecordRead, changes: &[(usize, Value)]) -> Result<Vec<Vec<Value>>> {
        let changes = assigned(&table.def, changes.to_vec())?;
        self.record(table, read, Op::Update(&changes))
    }

    /// Changes each row `read` finds by what `f` computes from the row's values of the read's
    /// columns (column positions and values, assigned as [`update`](Self::update) assigns
    /// them), and returns those values: one visit per row in a job, where the row is locked
    /// and changed at once; as statements, `SELECT columns, <primary key> … FOR UPDATE` and
    /// an `UPDATE … WHERE <primary key> = …` per row. The table needs a primary key (42P10).
    pub fn modify(&mut self, table: &TableRef, read: &RecordRead, f: &mut RecordChanges) -> Result<Vec<Vec<Value>>> {
        let def = &table.def;
        let key = primary_key(def)?;
        match &mut self.inner {
            // The read is checked where it runs (as in `record`).
            ContextInner::Job(cx) => cx.job.modify_records(def, read, &mut |values| assigned(def, f(values)?)),
            ContextInner::Session(_) => {
                // Checked as the read with the key columns added (`record`).
                let n = read.columns.len();
                let with_key = RecordRead { columns: read.columns.iter().chain(&key.columns).copied().collect(), ..read.clone() };
                let rows = self.record(table, &with_key, Op::Read { lock: true })?;
                let mut seen = Vec::with_capacity(rows.len());
                for mut row in rows {
                    let changes = assigned(def, f(&row[..n])?)?;
                    let by_key = RecordRead { index: 0, eq: row.split_off(n), ..RecordRead::default() };
                    self.record(table, &by_key, Op::Update(&changes))?;
                    seen.push(row);
                }
                Ok(seen)
            }
        }
    }

    /// As [`read`](Self::read), handing each row to `f` instead of returning it, until `f`
    /// returns false: the row's columns are read where they are stored ([`RecordRow`]: a
    /// string is borrowed, not copied, and no row of values is built). Returns how many rows
    /// `f` saw. As statements, the rows are read as `read` reads them and handed over in turn.
    pub fn read_each(&mut self, table: &TableRef, read: &RecordRead, f: &mut dyn FnMut(&RecordRow) -> Result<bool>) -> Result<usize> {
        match &mut self.inner {
            ContextInner::Job(cx) => cx.job.visit_records(&table.def, read, f),
            ContextInner::Session(_) => {
                let rows = self.read(table, read)?;
                let mut seen = 0;
                for row in &rows {
                    seen += 1;
                    if !f(&RecordRow::Listed(row))? {
                        break;
                    }
                }
                Ok(seen)
            }
        }
    }

    /// As [`modify`](Self::modify), with each row handed to `f` as it is stored
    /// ([`RecordRow`]) rather than as values; returns how many rows were changed.
    pub fn modify_each(&mut self, table: &TableRef, read: &RecordRead, f: &mut RecordRowChanges) -> Result<usize> {
        let def = table.def.clone();
        primary_key(&def)?;
        match &mut self.inner {
            ContextInner::Job(cx) => cx.job.modify_each(&def, read, &mut |row| assigned(&def, f(row)?)),
            ContextInner::Session(_) => Ok(self.modify(table, read, &mut |values| f(&RecordRow::Listed(values)))?.len()),
        }
    }

    /// A hint that the body will make `reads` next: where the call runs as one executor job,
    /// the memory their whole-key lookups touch is requested from the processor at once, so
    /// that their cache misses overlap rather than follow one another (a New-Order's items
    /// and stock rows). It changes nothing the body sees, and does nothing outside a job.
    pub fn prefetch(&mut self, table: &TableRef, reads: &[RecordRead]) {
        self.prefetch_tables(&[(table, reads)]);
    }

    /// [`prefetch`](Self::prefetch) for reads of several tables at once: the misses of all of
    /// them overlap (a New-Order's customer, items and stock rows).
    pub fn prefetch_tables(&mut self, reads: &[(&TableRef, &[RecordRead])]) {
        if let ContextInner::Job(cx) = &mut self.inner {
            let reads: smallvec::SmallVec<[(&Arc<TableDef>, &[RecordRead]); 4]> = reads.iter().map(|&(t, r)| (&t.def, r)).collect();
            cx.job.prefetch_records(&reads);
        }
    }

    /// Deletes the rows `read` finds and returns how many: `DELETE FROM table WHERE …`.
    /// A read with a limit or in reverse order is refused (0A000).
    pub fn delete(&mut self, table: &TableRef, read: &RecordRead) -> Result<u64> {
        Ok(self.record(table, read, Op::Delete)?.len() as u64)
    }

    /// Inserts one row given as every column's value in table order (NULL where there is
    /// none; column defaults are not applied): `INSERT INTO table (<every column>) VALUES (…)`.
    pub fn insert(&mut self, table: &TableRef, row: Vec<Value>) -> Result<()> {
        let def = &table.def;
        if row.len() != def.columns.len() {
            return Err(Error::new(SqlState::SyntaxError, format!("INSERT into \"{}\" has {} values for {} columns", def.name, row.len(), def.columns.len())));
        }
        match &mut self.inner {
            ContextInner::Job(cx) => {
                let mut row = row;
                for (v, c) in row.iter_mut().zip(&def.columns) {
                    *v = std::mem::replace(v, Value::Null).assign_to(c.ty)?;
                }
                cx.job.insert(def, std::slice::from_ref(&row))?;
                Ok(())
            }
            ContextInner::Session(_) => {
                // Columns by name: the statement means the same if the table was re-created
                // since the `TableRef` was resolved.
                let names: Vec<String> = def.columns.iter().map(|c| quoted(&c.name)).collect();
                let marks: Vec<String> = (1..=row.len()).map(|i| format!("${i}")).collect();
                let sql = format!("INSERT INTO {} ({}) VALUES ({})", quoted(&def.name), names.join(", "), marks.join(", "));
                self.execute(&sql, &row)?;
                Ok(())
            }
        }
    }

    fn record(&mut self, table: &TableRef, read: &RecordRead, op: Op) -> Result<Vec<Vec<Value>>> {
        let def = &table.def;
        if matches!(op, Op::Update(_) | Op::Delete) && (read.limit.is_some() || read.reverse) {
            return Err(Error::unsupported("a record update or delete with a limit or an order"));
        }
        match &mut self.inner {
            // In a job the storage-level read checks the read against the table as it finds
            // the rows (`RecordRead::check`); as SQL it is checked before the text is made.
            ContextInner::Job(cx) => match op {
                Op::Read { lock } => cx.job.read_records(def, read, lock),
                Op::Update(changes) => cx.job.update_records(def, read, changes),
                Op::Delete => Ok(vec![Vec::new(); cx.job.delete_records(def, read)? as usize]),
            },
            ContextInner::Session(_) => {
                read.check(def)?;
                let (sql, params) = record_sql(def, read, &op);
                let (rows, count) = self.run(&sql, &params)?;
                // A read of no columns selects a constant, and an UPDATE without RETURNING
                // gives a count: either way, one empty row per row.
                Ok(if read.columns.is_empty() { vec![Vec::new(); count as usize] } else { rows })
            }
        }
    }
}

/// Changes with their values assigned to the column types (as UPDATE assigns them).
fn assigned(def: &TableDef, mut changes: Vec<(usize, Value)>) -> Result<Vec<(usize, Value)>> {
    for (c, v) in changes.iter_mut() {
        let column = def.columns.get(*c).ok_or_else(|| Error::new(SqlState::UndefinedColumn, format!("relation \"{}\" has no column {c}", def.name)))?;
        *v = std::mem::replace(v, Value::Null).assign_to(column.ty)?;
    }
    Ok(changes)
}

fn quoted(name: &str) -> String {
    Ident::with_quote('"', name).to_string()
}

/// The statement a record operation is, with its parameters: the same text for the same
/// shape of operation, so a session prepares it once.
fn record_sql(def: &TableDef, read: &RecordRead, op: &Op) -> (String, Vec<Value>) {
    let column = |c: usize| quoted(&def.columns[c].name);
    let mut params: Vec<Value> = Vec::new();
    let mut param = |v: &Value| {
        params.push(v.clone());
        format!("${}", params.len())
    };
    let set = match op {
        Op::Update(changes) => changes.iter().map(|(c, v)| format!("{} = {}", column(*c), param(v))).collect::<Vec<_>>().join(", "),
        _ => String::new(),
    };
    let key = &def.indexes[read.index].columns;
    let mut conditions: Vec<String> = read.eq.iter().zip(key).map(|(v, &c)| format!("{} = {}", column(c), param(v))).collect();
    if let Some(&next) = key.get(read.eq.len()) {
        if !read.any.is_empty() {
            let values: Vec<String> = read.any.iter().map(&mut param).collect();
            conditions.push(format!("{} IN ({})", column(next), values.join(", ")));
        }
        for (bound, lower) in [(&read.lower, true), (&read.upper, false)] {
            if let Some((v, inclusive)) = bound {
                let op = match (lower, inclusive) {
                    (true, true) => ">=",
                    (true, false) => ">",
                    (false, true) => "<=",
                    (false, false) => "<",
                };
                conditions.push(format!("{} {op} {}", column(next), param(v)));
            }
        }
    }
    let filter = if conditions.is_empty() { String::new() } else { format!(" WHERE {}", conditions.join(" AND ")) };
    let columns = read.columns.iter().map(|&c| column(c)).collect::<Vec<_>>().join(", ");
    let table = quoted(&def.name);
    let sql = match op {
        Op::Read { lock } => {
            let direction = if read.reverse { " DESC" } else { "" };
            let order = key.iter().map(|&c| format!("{}{direction}", column(c))).collect::<Vec<_>>().join(", ");
            let limit = read.limit.map_or(String::new(), |n| format!(" LIMIT {n}"));
            let lock = if *lock { " FOR UPDATE" } else { "" };
            let columns = if columns.is_empty() { "1".to_string() } else { columns };
            format!("SELECT {columns} FROM {table}{filter} ORDER BY {order}{limit}{lock}")
        }
        Op::Update(_) => {
            let returning = if columns.is_empty() { String::new() } else { format!(" RETURNING {columns}") };
            format!("UPDATE {table} SET {set}{filter}{returning}")
        }
        Op::Delete => format!("DELETE FROM {table}{filter}"),
    };
    (sql, params)
}
