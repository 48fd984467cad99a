//! Running short-statement plans on a partition executor.
//!
//! These functions run inside an executor job, on the thread that owns the partition, so they
//! read and write storage directly, as the statement's transaction sees it (`TxnView`).
//! UPDATE and DELETE first collect the rows they will change and only then change them, so a
//! row is never visited twice and index scans never see their own writes. Every change becomes
//! a version recorded in the transaction's [`LocalTxn`].

use std::cmp::Ordering;
use std::ops::Bound;

use super::expr::{EvalContext, Expr, RowAccess};
use super::plan::{Access, Aggregate, AggregateFunc, ConflictAction, DeletePlan, OnConflict, SelectPlan, UpdatePlan};
use crate::error::{Error, Result, SqlState};
use crate::storage::index::{encode_key, encode_value, KeyBuf};
use crate::storage::{IndexStore, RowId, RowVersion, TableStore, TxnView};
use crate::txn::LocalTxn;
use crate::types::{DataType, Decimal, TypeFamily, Value};
use smallvec::SmallVec;

/// The version of a row a statement sees, as expression input.
pub enum StoredRow<'a> {
    /// The version in the slot.
    InPlace { table: &'a TableStore, row: RowId },
    /// An older version, reconstructed.
    Values(Vec<Value>),
}

impl RowAccess for StoredRow<'_> {
    fn column(&self, index: usize) -> Value {
        match self {
            StoredRow::InPlace { table, row } => table.get(*row, index),
            StoredRow::Values(v) => v.get(index).cloned().unwrap_or(Value::Null),
        }
    }
}

impl StoredRow<'_> {
    fn values(&self, n: usize) -> Vec<Value> {
        (0..n).map(|c| self.column(c)).collect()
    }

    /// The values of `columns`, in that order.
    fn columns(&self, columns: &[usize]) -> Vec<Value> {
        match self {
            StoredRow::InPlace { table, row } => table.get_columns(*row, columns),
            StoredRow::Values(_) => columns.iter().map(|&c| self.column(c)).collect(),
        }
    }
}

/// The encoded key of `values` for the leading columns of `index` of `table`; `None` when a
/// value is NULL or has no exact conversion to its column's type (the key matches nothing).
fn encoded_key(table: &crate::catalog::TableDef, index: &crate::catalog::IndexDef, values: &[Value]) -> Option<KeyBuf> {
    let mut key = KeyBuf::new();
    for (v, &col) in values.iter().zip(&index.columns) {
        encode_key_value(v, table.columns.get(col)?.ty, &mut key)?;
    }
    Some(key)
}

/// Appends the encoding of `v` as a key of a column of type `ty` ([`key_value`]); `None`, with
/// nothing appended, if no stored value of that type can equal it. A value already of the
/// column's type (the usual case) is encoded where it is, without a copy.
#[inline]
fn encode_key_value(v: &Value, ty: DataType, out: &mut KeyBuf) -> Option<()> {
    if of_key_type(v, ty) {
        encode_value(v, out);
    } else {
        encode_value(&key_value(v.clone(), ty)?, out);
    }
    Some(())
}

/// `prefix` followed by the key encoding of `v` for a column of type `ty` (see
/// [`encode_key_value`]).
fn extended(prefix: &KeyBuf, v: &Value, ty: DataType) -> Option<KeyBuf> {
    let mut k = prefix.clone();
    encode_key_value(v, ty, &mut k)?;
    Some(k)
}

/// Every entry whose key starts with the whole-column prefix `key`, in key order or reversed;
/// `whole` when `key` has every key column (a hash lookup where the index has a hash table).
fn lookup(store: &IndexStore, key: &[u8], whole: bool, reverse: bool, f: &mut dyn FnMut(&[u8], RowId) -> bool) {
    if whole {
        store.scan_key(key, f);
    } else if reverse {
        store.scan_range(Bound::Included(key), Bound::Included(key), true, f);
    } else {
        store.scan_prefix(key, f);
    }
}

/// The version of `row` that `view` sees, as expression input.
pub fn stored<'a>(table: &'a TableStore, row: RowId, view: &TxnView) -> Option<StoredRow<'a>> {
    table.visible(row, view).map(|v| stored_row(table, row, v))
}

fn stored_row(table: &TableStore, row: RowId, version: RowVersion) -> StoredRow<'_> {
    match version {
        RowVersion::Current => StoredRow::InPlace { table, row },
        RowVersion::Old(values) => StoredRow::Values(values),
    }
}

/// Whether `v` is a key of a column of type `ty` as it is (its encoding is the column's).
fn of_key_type(v: &Value, ty: DataType) -> bool {
    matches!(
        (v, ty),
        (Value::Int32(_), DataType::Int32)
            | (Value::Int64(_), DataType::Int64)
            | (Value::Int16(_), DataType::Int16)
            | (Value::Date(_), DataType::Date)
            | (Value::Timestamp(_), DataType::Timestamp)
            | (Value::TimestampTz(_), DataType::TimestampTz)
            | (Value::Text(_), DataType::Text | DataType::Varchar(_))
    )
}

/// A plan's residual filter, whole and without the range conjuncts that are its access
/// path's bounds (`within_bounds`, see [`super::plan::residual_within_bounds`]).
#[derive(Clone, Copy)]
struct Residual<'p> {
    whole: Option<&'p Expr>,
    within_bounds: Option<&'p Option<Expr>>,
}

impl<'p> Residual<'p> {
    fn of(whole: &'p Option<Expr>, within_bounds: &'p Option<Option<Expr>>) -> Residual<'p> {
        Residual { whole: whole.as_ref(), within_bounds: within_bounds.as_ref() }
    }

    /// What a walk of index `index` after `eq_len` equalities, with these bound values, must
    /// still check: the residual without the bounds when every bound value is a key of the
    /// column's type as it is (not NULL, no conversion), since the walk then yields only rows
    /// within the bounds; the whole residual otherwise.
    fn to_check(self, table: &TableStore, index: usize, eq_len: usize, bounds: [&Option<(Value, bool)>; 2]) -> Option<&'p Expr> {
        let Some(within) = self.within_bounds else { return self.whole };
        let def = table.def();
        let Some(&column) = def.indexes.get(index).and_then(|i| i.columns.get(eq_len)) else { return self.whole };
        let ty = def.columns[column].ty;
        if bounds.into_iter().flatten().all(|(v, _)| of_key_type(v, ty)) { within.as_ref() } else { self.whole }
    }
}

/// The value `v` as a key of a column of type `ty` for an equality lookup, or `None` if no
/// stored value of that type can equal it (then the lookup finds nothing).
pub fn key_value(v: Value, ty: DataType) -> Option<Value> {
    if v.is_null() {
        return None;
    }
    // The usual case: a parameter or literal already of the column's type.
    if of_key_type(&v, ty) {
        return Some(v);
    }
    match ty.family() {
        TypeFamily::Integer => {
            let i = match &v {
                Value::Decimal(d) => {
                    let whole = d.rescale(0).ok()?;
                    (whole.cmp_value(*d) == Ordering::Equal).then_some(whole.value as i64)?
                }
                Value::Float32(_) | Value::Float64(_) => {
                    let f = v.as_f64()?;
                    (f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i64)?
                }
                other => other.as_i64()?,
            };
            Value::Int64(i).cast(ty).ok()
        }
        TypeFamily::Decimal => {
            let DataType::Decimal { scale, .. } = ty else { return None };
            let d = match &v {
                Value::Float32(_) | Value::Float64(_) => Decimal::from_f64(v.as_f64()?, scale).ok()?,
                other => other.as_decimal()?,
            };
            let at = d.rescale(scale).ok()?;
            (at.cmp_value(d) == Ordering::Equal).then_some(Value::Decimal(at))
        }
        TypeFamily::Float => {
            let f = v.as_f64()?;
            match ty {
                DataType::Float32 => ((f as f32) as f64 == f || f.is_nan()).then_some(Value::Float32(f as f32)),
                _ => Some(Value::Float64(f)),
            }
        }
        TypeFamily::String => match v {
            Value::Text(s) if matches!(ty, DataType::Char(_)) => Some(Value::Text(s.trim_end_matches(' ').to_string())),
            Value::Text(s) => Some(Value::Text(s)),
            _ => None,
        },
        TypeFamily::Uuid => match v {
            Value::Text(s) => crate::types::uuid::parse(&s).ok().map(Value::Text),
            _ => None,
        },
        TypeFamily::Date => match v {
            Value::Date(d) => Some(Value::Date(d)),
            Value::Timestamp(t) | Value::TimestampTz(t) => {
                let day = t.div_euclid(crate::types::datetime::MICROS_PER_DAY);
                (t.rem_euclid(crate::types::datetime::MICROS_PER_DAY) == 0).then_some(Value::Date(day as i32))
            }
            _ => None,
        },
        TypeFamily::Timestamp => match v {
            Value::Timestamp(_) | Value::TimestampTz(_) | Value::Date(_) => v.cast(ty).ok(),
            _ => None,
        },
        TypeFamily::Bool => matches!(v, Value::Bool(_)).then_some(v),
    }
}

/// Calls `f` with each row the access path yields and the version `view` sees of it (in
/// index order for index paths), until `f` returns `Ok(false)`. A row reached through an
/// index entry is yielded only if its visible version has that entry's key, so each row comes
/// once even when old versions keep entries under other keys. Rows are candidates: `f` also
/// gets the part of `residual` the caller must still check of them, chosen once the bounds'
/// values are known ([`Residual::to_check`]).
fn for_each_candidate(
    table: &TableStore,
    access: &Access,
    residual: Residual,
    reverse: bool,
    columns: u64,
    view: &TxnView,
    cx: &EvalContext,
    f: &mut dyn FnMut(RowId, StoredRow, Option<&Expr>) -> Result<bool>,
) -> Result<()> {
    match access {
        Access::Scan => {
            table.count_scan(None);
            let f = &mut |row, version: StoredRow| f(row, version, residual.whole);
            visit_rows(table, columns, view, f, &mut |visit, _| table.for_each_slot(&mut |row| visit(row, None)))
        }
        Access::Index { index, eq, lower, upper, any } => {
            let eval = |e: &Expr| e.eval(&super::expr::NoRow, cx);
            let bound = |b: &Option<(Expr, bool)>| b.as_ref().map(|(e, inclusive)| Ok((eval(e)?, *inclusive))).transpose();
            let mut eq_values: SmallVec<[Value; 4]> = SmallVec::with_capacity(eq.len());
            for e in eq {
                eq_values.push(eval(e)?);
            }
            let eq = eq_values;
            let (lower, upper) = (bound(lower)?, bound(upper)?);
            let any: Vec<Value> = crate::try_vec(any.iter().map(eval))?;
            let check = residual.to_check(table, *index, eq.len(), [&lower, &upper]);
            let keys = IndexKeys { index: *index, eq: &eq, lower: &lower, upper: &upper, any: &any };
            for_each_in_index(table, &keys, reverse, columns, view, &mut |row, version: StoredRow| f(row, version, check))
        }
    }
}

/// An index walk with its key values computed: rows of index `index` whose leading key
/// columns equal `eq`, and whose next key column lies within the bounds (`true` = inclusive)
/// or, if `any` is not empty, equals one of `any` (see [`Access::Index`]).
struct IndexKeys<'a> {
    index: usize,
    eq: &'a [Value],
    lower: &'a Option<(Value, bool)>,
    upper: &'a Option<(Value, bool)>,
    any: &'a [Value],
}

/// [`for_each_candidate`] over an index walk whose key values are known (a record read's, or
/// an access path's once evaluated).
fn for_each_in_index(
    table: &TableStore,
    keys: &IndexKeys,
    reverse: bool,
    columns: u64,
    view: &TxnView,
    f: &mut dyn FnMut(RowId, StoredRow) -> Result<bool>,
) -> Result<()> {
    let position = keys.index;
    table.count_scan(Some(position));
    let def = &table.def().indexes[position];
    let Some(prefix) = encoded_key(table.def(), def, keys.eq) else { return Ok(()) };
    let store = table.index_store(position);
    let eq_len = keys.eq.len();
    visit_rows(table, columns, view, f, &mut |visit, stopped| {
        let mut by_entry = |key: &[u8], row: RowId| visit(row, Some((key, position)));
        if !keys.any.is_empty() {
            // One lookup per distinct value, in key order (reversed for a reverse scan);
            // a value with no exact conversion to the column type matches nothing.
            let ty = table.def().columns[def.columns[eq_len]].ty;
            let mut lookups: Vec<KeyBuf> = if ty.family() == TypeFamily::Integer {
                // Integers (most lists) are put in order as integers, which their key
                // encoding keeps, rather than as byte strings.
                let mut ints: Vec<i64> = keys.any.iter().filter_map(|v| key_value(v.clone(), ty)?.as_i64()).collect();
                ints.sort_unstable();
                ints.dedup();
                ints.into_iter()
                    .map(|i| {
                        let mut k = prefix.clone();
                        encode_value(&Value::Int64(i), &mut k);
                        k
                    })
                    .collect()
            } else {
                let mut lookups: Vec<KeyBuf> = keys.any.iter().filter_map(|v| extended(&prefix, v, ty)).collect();
                lookups.sort_unstable();
                lookups.dedup();
                lookups
            };
            if reverse {
                lookups.reverse();
            }
            let whole = eq_len + 1 == def.columns.len();
            if whole && store.has_hash() && lookups.len() > 1 {
                // Every lookup is known before the first (a Stock-Level's two hundred stock
                // rows): the group prefetch's waves make their misses overlap, and the rows
                // are visited from the entries its second wave found, in the lookups' order,
                // rather than found again (the table cannot change meanwhile: it is borrowed
                // for the walk).
                for (i, _, row, _) in prefetch_lookups(lookups.iter().map(|k| (store, k.as_slice(), table, columns))) {
                    by_entry(&lookups[i], row);
                    if stopped.get() {
                        break;
                    }
                }
                return;
            }
            for k in &lookups {
                lookup(store, k, whole, reverse, &mut by_entry);
                if stopped.get() {
                    break;
                }
            }
        } else if keys.lower.is_none() && keys.upper.is_none() {
            lookup(store, &prefix, eq_len == def.columns.len(), reverse, &mut by_entry);
        } else {
            let next_ty = table.def().columns[def.columns[eq_len]].ty;
            // A bound that does not convert exactly is dropped; the filter rechecks it.
            let bound = |b: &Option<(Value, bool)>| b.as_ref().and_then(|(v, inclusive)| Some((extended(&prefix, v, next_ty)?, *inclusive)));
            let (lo, hi) = (bound(keys.lower), bound(keys.upper));
            // NULLs sort last; a range never includes them, so cap the open upper end.
            let mut null_cap = prefix.clone();
            encode_value(&Value::Null, &mut null_cap);
            let lower_b = match &lo {
                Some((k, true)) => Bound::Included(k.as_slice()),
                Some((k, false)) => Bound::Excluded(k.as_slice()),
                None => Bound::Included(prefix.as_slice()),
            };
            let upper_b = match &hi {
                Some((k, true)) => Bound::Included(k.as_slice()),
                Some((k, false)) => Bound::Excluded(k.as_slice()),
                None => Bound::Excluded(null_cap.as_slice()),
            };
            store.scan_range(lower_b, upper_b, reverse, &mut by_entry);
        }
    })
}

/// A row an index or scan yields, and the entry (key, index position) it came through.
type Visit<'v> = dyn FnMut(RowId, Option<(&[u8], usize)>) -> bool + 'v;

/// Runs `walk`, which yields rows to its visitor (until the visitor returns false, also
/// flagged in its second argument), and calls `f` with the version `view` sees of each.
fn visit_rows(
    table: &TableStore,
    columns: u64,
    view: &TxnView,
    f: &mut dyn FnMut(RowId, StoredRow) -> Result<bool>,
    walk: &mut dyn FnMut(&mut Visit<'_>, &std::cell::Cell<bool>),
) -> Result<()> {
    let mut failure = None;
    let stopped = std::cell::Cell::new(false);
    let mut visit = |row: RowId, entry_key: Option<(&[u8], usize)>| -> bool {
        if entry_key.is_some() {
            // A row reached through an index is somewhere random in memory: ask for the
            // columns the statement reads at once rather than miss the cache once per read.
            table.prefetch(row, columns);
        }
        let (version, versioned) = table.visible_versioned(row, view);
        let Some(version) = version.map(|v| stored_row(table, row, v)) else { return true };
        if let Some((key, position)) = entry_key
            && versioned
            && version_key(table, position, &version).as_slice() != key
        {
            return true;
        }
        match f(row, version) {
            Ok(true) => true,
            Ok(false) => {
                stopped.set(true);
                false
            }
            Err(e) => {
                failure = Some(e);
                stopped.set(true);
                false
            }
        }
    };
    walk(&mut visit, &stopped);
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The key of a row version in index `position`.
fn version_key(table: &TableStore, position: usize, version: &StoredRow) -> KeyBuf {
    let mut key = KeyBuf::new();
    for &c in &table.def().indexes[position].columns {
        encode_value(&version.column(c), &mut key);
    }
    key
}

fn matches(row: &StoredRow, filter: Option<&Expr>, cx: &EvalContext) -> Result<bool> {
    match filter {
        Some(f) => f.eval_predicate(row, cx),
        None => Ok(true),
    }
}

/// The rows an UPDATE or DELETE changes (most change one, kept inline), each with its
/// values unless they are read in place.
type Targets = SmallVec<[(RowId, Option<Vec<Value>>); 2]>;

/// The rows a statement changes. A row whose visible version is the one stored comes without
/// values (the statement reads it in place); an older version it sees comes reconstructed.
/// `columns` are those the statement reads of each row (a plan's `reads`).
fn collect_targets(table: &TableStore, access: &Access, residual: Residual, columns: u64, view: &TxnView, cx: &EvalContext) -> Result<Targets> {
    let mut rows = Targets::new();
    for_each_candidate(table, access, residual, false, columns, view, cx, &mut |row, version, filter| {
        if matches(&version, filter, cx)? {
            rows.push((row, match version {
                StoredRow::InPlace { .. } => None,
                StoredRow::Values(values) => Some(values),
            }));
        }
        Ok(true)
    })?;
    Ok(rows)
}

/// A target row as its statement sees it.
fn seen(table: &TableStore, row: RowId, old: Option<Vec<Value>>) -> StoredRow<'_> {
    match old {
        None => StoredRow::InPlace { table, row },
        Some(values) => StoredRow::Values(values),
    }
}

/// `v` assigned to `column`: converted to its type and rounded to its precision, as stored
/// (so RETURNING shows what the row holds).
fn assigned(v: Value, column: &crate::catalog::ColumnDef) -> Result<Value> {
    let mut v = v.assign_to(column.ty)?;
    column.round(&mut v);
    Ok(v)
}

/// Inserts rows (already of the column types) for transaction `txn`; returns how many.
pub fn insert_rows(table: &mut TableStore, rows: &[Vec<Value>], txn: &mut LocalTxn) -> Result<u64> {
    let id = table.def().id;
    for row in rows {
        let (_, version) = table.insert(row, &txn.view)?;
        txn.versions.push((id, version));
    }
    Ok(rows.len() as u64)
}

/// Inserts rows (already of the column types) for transaction `txn` with `ON CONFLICT`: a row
/// whose key a row of the table already holds is skipped (DO NOTHING) or changes that row
/// (DO UPDATE, where its condition holds). Returns how many rows were inserted or updated,
/// and (with `returning`) each one's new values, in order: read only for RETURNING. A row this statement inserted or
/// updated cannot be updated again by it (21000, as in PostgreSQL).
pub fn upsert_rows(table: &mut TableStore, rows: &[Vec<Value>], on: &OnConflict, returning: bool, cx: &EvalContext, txn: &mut LocalTxn) -> Result<(u64, Vec<Vec<Value>>)> {
    let id = table.def().id;
    let width = table.def().columns.len();
    let mut count = 0;
    let mut written = Vec::new();
    let mut touched = std::collections::HashSet::new();
    for row in rows {
        let Some(existing) = table.conflicting_row(row, on.index, &txn.view)? else {
            let (new, version) = table.insert(row, &txn.view)?;
            txn.versions.push((id, version));
            touched.insert(new);
            count += 1;
            if returning {
                written.push(row.clone());
            }
            continue;
        };
        let ConflictAction::Update { assignments, filter } = &on.action else { continue };
        if !touched.insert(existing) {
            return Err(Error::new(
                SqlState::custom("21000").unwrap_or(SqlState::Internal),
                "ON CONFLICT DO UPDATE command cannot affect row a second time",
            )
            .with_hint("Ensure that no rows proposed for insertion within the same command have duplicate constrained values."));
        }
        table.check_writable(existing, &txn.view)?;
        let changes = {
            let both = WithExcluded { existing: StoredRow::InPlace { table, row: existing }, excluded: row, width };
            if let Some(f) = filter
                && f.eval(&both, cx)? != Value::Bool(true)
            {
                continue;
            }
            let mut changes = Vec::with_capacity(assignments.len());
            for (col, e) in assignments {
                changes.push((*col, assigned(e.eval(&both, cx)?, &table.def().columns[*col])?));
            }
            changes
        };
        if returning {
            let mut new: Vec<Value> = (0..width).map(|c| table.get(existing, c)).collect();
            for (c, v) in &changes {
                new[*c] = v.clone();
            }
            written.push(new);
        }
        let version = table.update(existing, &changes, &txn.view)?;
        txn.versions.push((id, version));
        count += 1;
    }
    Ok((count, written))
}

/// A stored row followed by a proposed one: ON CONFLICT DO UPDATE's input, where column
/// `width + c` is `excluded.c`.
struct WithExcluded<'a> {
    existing: StoredRow<'a>,
    excluded: &'a [Value],
    width: usize,
}

impl RowAccess for WithExcluded<'_> {
    fn column(&self, index: usize) -> Value {
        match index.checked_sub(self.width) {
            Some(c) => self.excluded.get(c).cloned().unwrap_or(Value::Null),
            None => self.existing.column(index),
        }
    }
}

/// Runs an UPDATE; the RETURNING rows, if it has that clause, go to `returned`.
///
/// Each row's new values are computed from the version the statement sees of it, read in
/// place: the rows changed before it in this statement are other rows, so it is unchanged.
pub fn run_update(table: &mut TableStore, plan: &UpdatePlan, cx: &EvalContext, txn: &mut LocalTxn, returned: &mut Vec<Vec<Value>>) -> Result<u64> {
    let targets = collect_targets(table, &plan.access, Residual::of(&plan.residual, &plan.residual_within_bounds), plan.reads, &txn.view, cx)?;
    let count = targets.len() as u64;
    let id = table.def().id;
    if plan.returning.is_some() {
        returned.reserve(targets.len());
    }
    for (row, old) in targets {
        let changes = {
            let version = seen(table, row, old);
            // Inline for up to four assignments (TPC-C's updates set one to four columns).
            let mut changes: SmallVec<[(usize, Value); 4]> = SmallVec::with_capacity(plan.assignments.len());
            for (col, e) in &plan.assignments {
                let v = assigned(e.eval(&version, cx)?, &table.def().columns[*col])?;
                changes.push((*col, v));
            }
            if let Some(r) = &plan.returning {
                // The new version: the changed columns, the others as seen. Only the columns
                // RETURNING names are read (not every string of a wide row).
                returned.push(r.row_of(&Changed { base: &version, changes: &changes }, cx)?);
            }
            changes
        };
        let version = table.update(row, &changes, &txn.view)?;
        txn.versions.push((id, version));
    }
    Ok(count)
}

/// A row version with some columns replaced: an UPDATE's new version, for RETURNING.
struct Changed<'a> {
    base: &'a StoredRow<'a>,
    changes: &'a [(usize, Value)],
}

impl RowAccess for Changed<'_> {
    fn column(&self, index: usize) -> Value {
        match self.changes.iter().find(|(c, _)| *c == index) {
            Some((_, v)) => v.clone(),
            None => self.base.column(index),
        }
    }
}

/// Runs a DELETE; the RETURNING rows, if it has that clause, go to `returned`.
pub fn run_delete(table: &mut TableStore, plan: &DeletePlan, cx: &EvalContext, txn: &mut LocalTxn, returned: &mut Vec<Vec<Value>>) -> Result<u64> {
    let targets = collect_targets(table, &plan.access, Residual::of(&plan.residual, &plan.residual_within_bounds), plan.reads, &txn.view, cx)?;
    let count = targets.len() as u64;
    let id = table.def().id;
    let n = table.def().columns.len();
    for (row, old) in targets {
        if let Some(r) = &plan.returning {
            returned.push(r.row(&seen(table, row, old).values(n), cx)?);
        }
        let version = table.delete(row, &txn.view)?;
        txn.versions.push((id, version));
    }
    Ok(count)
}

/// What an index-driven SELECT produced.
#[derive(Debug)]
pub enum SelectOutcome {
    /// The result rows, the rows they came from (for FOR UPDATE; empty for any other
    /// SELECT), and where the index scan stopped if a LIMIT ended it early (see
    /// [`ScanBound`]).
    Rows(Vec<Vec<Value>>, Vec<RowId>, Option<ScanBound>),
    /// More rows qualified than the short path handles; run the query on the analytical side.
    TooLarge,
}

fn row_count(e: Option<&Expr>, cx: &EvalContext, what: &str) -> Result<Option<u64>> {
    let Some(e) = e else { return Ok(None) };
    match e.eval(&super::expr::NoRow, cx)? {
        Value::Null => Ok(None),
        v => {
            let n = v.as_i64().unwrap_or(0);
            if n < 0 {
                return Err(Error::new(crate::error::SqlState::InvalidParameterValue, format!("{what} must not be negative")));
            }
            Ok(Some(n as u64))
        }
    }
}

/// Where an ordered index scan that a LIMIT ended early stopped: the key (in index
/// `index`) of the last row it took. Rows past it in scan order (keys above it, or below it
/// when `descending`) could not have changed the statement's result.
#[derive(Clone, Debug)]
pub struct ScanBound {
    pub index: usize,
    pub key: KeyBuf,
    pub descending: bool,
}

impl ScanBound {
    /// Whether a row with these values lies within the part of the index the scan read.
    pub fn covers(&self, table: &crate::catalog::TableDef, row: &[Value]) -> bool {
        let mut key = KeyBuf::new();
        encode_key(table.indexes[self.index].columns.iter().map(|&c| &row[c]), &mut key);
        if self.descending { key.as_slice() >= self.key.as_slice() } else { key.as_slice() <= self.key.as_slice() }
    }
}

/// Runs an index-driven SELECT as `view` sees the table, examining at most `budget` rows.
pub fn run_select(table: &TableStore, plan: &SelectPlan, view: &TxnView, cx: &EvalContext, budget: usize) -> Result<SelectOutcome> {
    let limit = row_count(plan.limit.as_ref(), cx, "LIMIT")?;
    let offset = row_count(plan.offset.as_ref(), cx, "OFFSET")?.unwrap_or(0);
    let in_order = plan.ordered_by_index;
    let stop_at = match (in_order, limit) {
        (Some(_), Some(l)) => Some(l.saturating_add(offset)),
        _ => None,
    };
    if !plan.aggregates.is_empty() {
        return run_aggregates(table, plan, view, cx, budget, limit, offset);
    }
    let sorting = in_order.is_none() && !plan.order_by.is_empty();
    // Sort keys that are output columns (`ORDER BY` an output, as most are) are read from the
    // output rather than evaluated and kept again.
    let key_outputs: Option<SmallVec<[usize; 4]>> =
        if sorting { plan.order_by.iter().map(|(e, _, _)| plan.projection.iter().position(|p| p == e)).collect() } else { None };
    // Each qualifying row's output and, when sorting here, its sort key (unless it is in the
    // output): computed from the version seen, without materialising the whole row. Rows
    // that need no sorting go straight into the result (`ids`, `out`); sorted ones through
    // `hits`.
    let mut hits: Vec<(RowId, Vec<Value>, Vec<Value>)> = Vec::new();
    // A lookup of a whole unique key (most short SELECTs) finds at most one row: its result
    // is allocated at that size rather than grown to four. The rows' ids are kept only for
    // FOR UPDATE, which locks them.
    let point = plan.access.is_point(table.def());
    let keep_ids = plan.lock;
    let (mut ids, mut out): (Vec<RowId>, Vec<Vec<Value>>) = (Vec::with_capacity((point && keep_ids) as usize), Vec::with_capacity(point as usize));
    let mut examined = 0usize;
    let mut too_large = false;
    let mut bound = None;
    let skip_locked = plan.lock_wait == crate::sql::plan::LockWait::SkipLocked;
    let residual = Residual::of(&plan.residual, &plan.residual_within_bounds);
    for_each_candidate(table, &plan.access, residual, in_order == Some(true), plan.reads, view, cx, &mut |row, version, residual| {
        examined += 1;
        if examined > budget {
            too_large = true;
            return Ok(false);
        }
        // SKIP LOCKED: a row another running transaction holds (changed or claimed) is left
        // out before LIMIT counts it.
        if skip_locked && table.head(row).is_some_and(|v| v.ts >= crate::storage::TXN_ID_BASE && v.ts != view.id) {
            return Ok(true);
        }
        if matches(&version, residual, cx)? {
            let output = crate::try_vec(plan.projection.iter().map(|e| e.eval(&version, cx)))?;
            let found = if sorting {
                let key = if key_outputs.is_none() { crate::try_vec(plan.order_by.iter().map(|(e, _, _)| e.eval(&version, cx)))? } else { Vec::new() };
                hits.push((row, output, key));
                hits.len()
            } else {
                if keep_ids {
                    ids.push(row);
                }
                out.push(output);
                out.len()
            };
            if stop_at.is_some_and(|n| found as u64 >= n) {
                if let (Access::Index { index, .. }, Some(descending)) = (&plan.access, in_order) {
                    bound = Some(ScanBound { index: *index, key: version_key(table, *index, &version), descending });
                }
                return Ok(false);
            }
        }
        Ok(true)
    })?;
    if too_large {
        return Ok(SelectOutcome::TooLarge);
    }
    let take = limit.unwrap_or(u64::MAX).min(usize::MAX as u64) as usize;
    let skip = offset.min(usize::MAX as u64) as usize;
    if sorting {
        sort_hits(&mut hits, &plan.order_by, key_outputs.as_deref())?;
        let kept = hits.len().saturating_sub(skip).min(take);
        (ids, out) = (Vec::with_capacity(if keep_ids { kept } else { 0 }), Vec::with_capacity(kept));
        for (r, o, _) in hits.into_iter().skip(skip).take(take) {
            if keep_ids {
                ids.push(r);
            }
            out.push(o);
        }
    } else if skip > 0 || out.len() > take {
        let end = out.len().min(skip.saturating_add(take));
        let start = skip.min(end);
        out.truncate(end);
        out.drain(..start);
        if keep_ids {
            ids.truncate(end);
            ids.drain(..start);
        }
    }
    Ok(SelectOutcome::Rows(out, ids, bound))
}

/// An aggregate's running state.
enum Accumulator {
    Count(i64),
    Int(Option<i64>),
    Float(Option<f64>),
    Decimal(Option<Decimal>),
    /// MIN or MAX: the best value so far.
    Extreme(Option<Value>),
}

impl Accumulator {
    fn new(a: &Aggregate) -> Accumulator {
        match (a.func, a.ty) {
            (AggregateFunc::Count, _) => Accumulator::Count(0),
            (AggregateFunc::Sum, DataType::Int64) => Accumulator::Int(None),
            (AggregateFunc::Sum, DataType::Float64) => Accumulator::Float(None),
            (AggregateFunc::Sum, _) => Accumulator::Decimal(None),
            (AggregateFunc::Min | AggregateFunc::Max, _) => Accumulator::Extreme(None),
        }
    }

    /// Adds one row's argument value (`None` for `count(*)`); NULLs count for nothing.
    fn add(&mut self, func: AggregateFunc, v: Option<Value>) -> Result<()> {
        let Some(v) = v else {
            if let Accumulator::Count(n) = self {
                *n += 1;
            }
            return Ok(());
        };
        if v.is_null() {
            return Ok(());
        }
        match self {
            Accumulator::Count(n) => *n += 1,
            Accumulator::Int(sum) => {
                let x = v.as_i64().ok_or_else(|| Error::internal("sum of a non-integer"))?;
                *sum = Some(sum.unwrap_or(0).checked_add(x).ok_or_else(|| Error::out_of_range("bigint"))?);
            }
            Accumulator::Float(sum) => *sum = Some(sum.unwrap_or(0.0) + v.as_f64().ok_or_else(|| Error::internal("sum of a non-number"))?),
            Accumulator::Decimal(sum) => {
                let x = v.as_decimal().ok_or_else(|| Error::internal("sum of a non-decimal"))?;
                *sum = Some(match sum.take() {
                    Some(acc) => acc.checked_add(x)?,
                    None => x,
                });
            }
            Accumulator::Extreme(best) => {
                let wanted = if func == AggregateFunc::Min { Ordering::Less } else { Ordering::Greater };
                let better = match best {
                    None => true,
                    Some(b) => v.sql_cmp(b)? == Some(wanted),
                };
                if better {
                    *best = Some(v);
                }
            }
        }
        Ok(())
    }

    fn finish(self, ty: DataType) -> Result<Value> {
        Ok(match self {
            Accumulator::Count(n) => Value::Int64(n),
            Accumulator::Int(sum) => sum.map_or(Value::Null, Value::Int64),
            Accumulator::Float(sum) => sum.map_or(Value::Null, Value::Float64),
            Accumulator::Decimal(sum) => match sum {
                Some(d) => Value::Decimal(d).cast(ty)?,
                None => Value::Null,
            },
            Accumulator::Extreme(best) => match best {
                Some(v) => v.cast(ty)?,
                None => Value::Null,
            },
        })
    }
}

/// An aggregate SELECT without GROUP BY: one row of aggregates over the qualifying rows
/// (none when LIMIT 0 or an OFFSET skips it).
fn run_aggregates(
    table: &TableStore,
    plan: &SelectPlan,
    view: &TxnView,
    cx: &EvalContext,
    budget: usize,
    limit: Option<u64>,
    offset: u64,
) -> Result<SelectOutcome> {
    let mut state: Vec<Accumulator> = plan.aggregates.iter().map(Accumulator::new).collect();
    let mut examined = 0usize;
    let mut too_large = false;
    let residual = Residual::of(&plan.residual, &plan.residual_within_bounds);
    for_each_candidate(table, &plan.access, residual, false, plan.reads, view, cx, &mut |_, version, residual| {
        examined += 1;
        if examined > budget {
            too_large = true;
            return Ok(false);
        }
        if matches(&version, residual, cx)? {
            for (acc, a) in state.iter_mut().zip(&plan.aggregates) {
                let v = a.arg.as_ref().map(|e| e.eval(&version, cx)).transpose()?;
                acc.add(a.func, v)?;
            }
        }
        Ok(true)
    })?;
    if too_large {
        return Ok(SelectOutcome::TooLarge);
    }
    if limit == Some(0) || offset > 0 {
        return Ok(SelectOutcome::Rows(Vec::new(), Vec::new(), None));
    }
    let row = crate::try_vec(state.into_iter().zip(&plan.aggregates).map(|(acc, a)| acc.finish(a.ty)))?;
    Ok(SelectOutcome::Rows(vec![row], Vec::new(), None))
}

/// Sorts rows by their ORDER BY key values (PostgreSQL's NULL placement per key), stably:
/// each hit's `i`-th key is its output column `outputs[i]`, or its own `i`-th key value
/// without `outputs`.
fn sort_hits(hits: &mut Vec<(RowId, Vec<Value>, Vec<Value>)>, order_by: &[(Expr, bool, bool)], outputs: Option<&[usize]>) -> Result<()> {
    fn key<'h>(hit: &'h (RowId, Vec<Value>, Vec<Value>), i: usize, outputs: Option<&[usize]>) -> Option<&'h Value> {
        match outputs {
            Some(outputs) => outputs.get(i).and_then(|&o| hit.1.get(o)),
            None => hit.2.get(i),
        }
    }
    // One integer key without NULLs (an id, as short statements mostly sort by): the hits'
    // positions are sorted by (key as a machine integer, position), which keeps equal keys
    // in order, and the hits are then taken in that order. `!k` orders as `k` reversed.
    let int = |v: Option<&Value>| match v {
        Some(Value::Int16(i)) => Some(*i as i64),
        Some(Value::Int32(i)) => Some(*i as i64),
        Some(Value::Int64(i)) => Some(*i),
        _ => None,
    };
    if let [(_, descending, _)] = order_by
        && let Some(mut order) = hits
            .iter()
            .enumerate()
            .map(|(n, hit)| int(key(hit, 0, outputs)).map(|i| (if *descending { !i } else { i }, n)))
            .collect::<Option<Vec<(i64, usize)>>>()
    {
        order.sort_unstable();
        let mut taken: Vec<Option<(RowId, Vec<Value>, Vec<Value>)>> = hits.drain(..).map(Some).collect();
        hits.extend(order.iter().filter_map(|&(_, n)| taken[n].take()));
        return Ok(());
    }
    let mut failure = None;
    hits.sort_by(|a, b| {
        for (i, (_, desc, nulls_first)) in order_by.iter().enumerate() {
            let (Some(x), Some(y)) = (key(a, i, outputs), key(b, i, outputs)) else { continue };
            let ord = match (x.is_null(), y.is_null()) {
                (true, true) => Ordering::Equal,
                (true, false) => if *nulls_first { Ordering::Less } else { Ordering::Greater },
                (false, true) => if *nulls_first { Ordering::Greater } else { Ordering::Less },
                _ => {
                    let o = x.sql_cmp(y).unwrap_or_else(|e| {
                        failure = Some(e);
                        None
                    });
                    let o = o.unwrap_or(Ordering::Equal);
                    if *desc { o.reverse() } else { o }
                }
            };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        Ordering::Equal
    });
    failure.map_or(Ok(()), Err)
}

/// A record-level read of one table (native procedures' row access, `JobStatements`): the
/// rows of index `index` whose leading key columns equal `eq`, and whose next key column (if
/// bounds are given) lies between `lower` and `upper` (`true` = inclusive) or (if `any` is not
/// empty) equals one of `any`, in key order or reversed, at most `limit` of them. `columns`
/// are the columns each row gives.
///
/// It means what the SELECT with those conditions (`any` as `IN (…)`), `ORDER BY` the index's columns and `LIMIT`
/// means (see `freshet::ProcedureContext::read`), and runs on the same candidate walk as
/// short statements, without an expression per column.
#[derive(Clone, Debug, Default)]
pub struct RecordRead {
    pub index: usize,
    pub eq: Vec<Value>,
    pub lower: Option<(Value, bool)>,
    pub upper: Option<(Value, bool)>,
    pub reverse: bool,
    pub limit: Option<usize>,
    pub columns: Vec<usize>,
    /// Values for the next key column (an IN list, one lookup per distinct value); not with
    /// bounds.
    pub any: Vec<Value>,
}

impl RecordRead {
    /// Checks the read against the table: the index and columns exist, the key has no more
    /// values than the index has columns, and an index that answers whole keys only (a
    /// one-column primary key) gets a whole key.
    pub fn check(&self, def: &crate::catalog::TableDef) -> Result<()> {
        use crate::error::SqlState;
        let Some(index) = def.indexes.get(self.index) else {
            return Err(Error::new(SqlState::UndefinedObject, format!("table \"{}\" has no index {}", def.name, self.index)));
        };
        let bounded = self.lower.is_some() || self.upper.is_some();
        if bounded && !self.any.is_empty() {
            return Err(Error::new(SqlState::InvalidParameterValue, "a record read gives its next key column bounds or values, not both"));
        }
        let next = bounded || !self.any.is_empty();
        if self.eq.len() + next as usize > index.columns.len() {
            return Err(Error::new(SqlState::InvalidParameterValue, format!("index \"{}\" has {} columns", index.name, index.columns.len())));
        }
        if !index.is_ordered() && (bounded || self.eq.len() + (next as usize) < index.columns.len()) {
            return Err(Error::unsupported(format!("index \"{}\" answers whole keys only", index.name)));
        }
        if let Some(c) = self.columns.iter().find(|&&c| c >= def.columns.len()) {
            return Err(Error::new(SqlState::UndefinedColumn, format!("table \"{}\" has no column {c}", def.name)));
        }
        Ok(())
    }

    fn reads(&self) -> u64 {
        self.columns.iter().fold(0, |m, &c| if c < 64 { m | 1 << c } else { m })
    }
}

/// What a record read found: the rows, and in the same order each one's values of the read's
/// columns (kept apart so the values go back to a caller as they are).
#[derive(Debug, Default)]
pub struct Found {
    pub rows: SmallVec<[RowId; 2]>,
    pub values: Vec<Vec<Value>>,
}

/// What a record read found; `None` if it examined more than `budget` rows.
pub type RecordRows = Option<Found>;

/// Asks the processor for the memory the whole-key hash lookups among `reads` (reads of
/// several tables) will touch — first every key's hash slot, then the columns each read wants
/// of the row its slot names, then the bytes of their long strings — so that the cache misses
/// of all those lookups overlap instead of following one another. A hint for a caller that
/// knows its next reads (a New-Order's customer, items, stock rows and order lines): it
/// changes nothing, and reads that are not whole-key lookups on a hash index, or whose key
/// does not convert to the column types, are skipped.
pub fn prefetch_records(reads: &[(&TableStore, &[RecordRead])]) {
    let mut keys: SmallVec<[(&IndexStore, KeyBuf, &TableStore, u64); 32]> = SmallVec::new();
    for &(table, reads) in reads {
        let def = table.def();
        keys.extend(reads.iter().filter_map(|read| {
            let index = def.indexes.get(read.index)?;
            let store = table.index_store(read.index);
            if !store.has_hash() || read.eq.len() != index.columns.len() {
                return None;
            }
            Some((store, encoded_key(def, index, &read.eq)?, table, read.reads()))
        }));
    }
    prefetch_lookups(keys.iter().map(|(store, key, table, columns)| (*store, key.as_slice(), *table, *columns)));
}

/// A hint that each statement will run next with its parameters (a PL/pgSQL loop's lookups,
/// known when the loop starts): for those whose access path is a whole-key lookup in a hash
/// index, the slots and rows they will touch are requested at once, as
/// [`prefetch_records`] does for record reads. A key that does not evaluate (an error, a
/// function that needs the session) is left out; nothing is read or changed.
pub fn prefetch_plans(lookups: &[(&TableStore, &super::plan::OltpPlan, &[Value])], now: i64) {
    let mut keys: SmallVec<[(&IndexStore, KeyBuf, &TableStore, u64); 32]> = SmallVec::new();
    // A loop's lookups repeat a few plans, one per statement (interleaved: an item's, then a
    // stock row's): each plan's columns are worked out once.
    let mut columns_of: SmallVec<[(*const super::plan::OltpPlan, u64); 4]> = SmallVec::new();
    'lookup: for &(table, plan, params) in lookups {
        let Access::Index { index, eq, lower: None, upper: None, any } = plan.access() else { continue };
        let def = table.def();
        let (Some(index_def), store) = (def.indexes.get(*index), table.index_store(*index)) else { continue };
        if !any.is_empty() || !store.has_hash() || eq.len() != index_def.columns.len() {
            continue;
        }
        let cx = EvalContext { params, now, session: None };
        let mut values: SmallVec<[Value; 4]> = SmallVec::with_capacity(eq.len());
        for e in eq {
            let Ok(v) = e.eval(&super::expr::NoRow, &cx) else { continue 'lookup };
            values.push(v);
        }
        let Some(key) = encoded_key(def, index_def, &values) else { continue };
        let columns = match columns_of.iter().find(|(p, _)| std::ptr::eq(*p, plan)) {
            Some(&(_, columns)) => columns,
            None => {
                let columns = plan.columns_depended_on();
                columns_of.push((plan, columns));
                columns
            }
        };
        keys.push((store, key, table, columns));
    }
    prefetch_lookups(keys.iter().map(|(store, key, table, columns)| (*store, key.as_slice(), *table, *columns)));
}

/// The waves of a group prefetch over whole-key lookups (index, key, table, columns wanted):
/// every key's hash slot, then the wanted columns of the rows each key's entries name, then
/// the bytes of their long strings. Returns the entries found, in the lookups' order: the
/// position of the lookup, its table, the row and the columns.
fn prefetch_lookups<'a>(
    lookups: impl Iterator<Item = (&'a IndexStore, &'a [u8], &'a TableStore, u64)> + Clone,
) -> SmallVec<[(usize, &'a TableStore, RowId, u64); 32]> {
    for (store, key, _, _) in lookups.clone() {
        store.prefetch_key(key);
    }
    let mut rows: SmallVec<[(usize, &TableStore, RowId, u64); 32]> = SmallVec::new();
    for (i, (store, key, table, columns)) in lookups.enumerate() {
        store.scan_key(key, &mut |_, row| {
            table.prefetch(row, columns);
            rows.push((i, table, row, columns));
            true
        });
    }
    // By now the first rows' string views have arrived: ask for the bytes they point to.
    for &(_, table, row, columns) in &rows {
        table.prefetch_strings(row, columns);
    }
    rows
}

/// The rows a record read finds, as `view` sees them (see [`RecordRead`]).
pub fn read_records(table: &TableStore, read: &RecordRead, view: &TxnView, budget: usize) -> Result<RecordRows> {
    find_records(table, read, &read.columns, view, budget)
}

/// [`read_records`] giving `columns` of each row instead of the read's own (none: the rows
/// an update or delete changes).
fn find_records(table: &TableStore, read: &RecordRead, columns: &[usize], view: &TxnView, budget: usize) -> Result<RecordRows> {
    let mut found = Found::default();
    let within = walk_records(table, read, view, budget, &mut |row, version| {
        found.rows.push(row);
        found.values.push(version.columns(columns));
        Ok(true)
    })?;
    Ok(within.then_some(found))
}

/// Calls `f` with each row a record read finds and the version `view` sees of it, in the
/// read's order, until `f` returns false or the read's limit is reached; false if the read
/// examined more than `budget` rows (it stops there).
fn walk_records(table: &TableStore, read: &RecordRead, view: &TxnView, budget: usize, f: &mut dyn FnMut(RowId, StoredRow) -> Result<bool>) -> Result<bool> {
    read.check(table.def())?;
    if read.limit == Some(0) {
        return Ok(true);
    }
    let (mut examined, mut taken, mut too_large) = (0usize, 0usize, false);
    let recheck = bounds_recheck(table, read);
    let keys = IndexKeys { index: read.index, eq: &read.eq, lower: &read.lower, upper: &read.upper, any: &read.any };
    for_each_in_index(table, &keys, read.reverse, read.reads(), view, &mut |row, version| {
        examined += 1;
        if examined > budget {
            too_large = true;
            return Ok(false);
        }
        // Candidates of a bounded walk may lie outside a bound that did not convert exactly
        // to the column's type; the key comparison below keeps the read exact.
        if recheck && !within_bounds(table, read, &version)? {
            return Ok(true);
        }
        taken += 1;
        Ok(f(row, version)? && read.limit.is_none_or(|n| taken < n))
    })?;
    Ok(!too_large)
}

/// A row a record read found, as the reading transaction sees it, given to a visitor
/// ([`visit_records`], [`modify_each`]): the read's columns, by their position in the read,
/// read where they are stored — a string is borrowed, not copied, and no row is built.
pub enum RecordRow<'a> {
    /// The row in its slot.
    Stored { table: &'a TableStore, row: RowId, columns: &'a [usize] },
    /// An older version, reconstructed: every column of the table.
    Full { values: &'a [Value], columns: &'a [usize] },
    /// The read's columns' values, in the read's order.
    Listed(&'a [Value]),
}

impl RecordRow<'_> {
    /// How many columns the read gives.
    pub fn len(&self) -> usize {
        match self {
            RecordRow::Stored { columns, .. } | RecordRow::Full { columns, .. } => columns.len(),
            RecordRow::Listed(values) => values.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of the read's `i`-th column (NULL past the last).
    pub fn value(&self, i: usize) -> Value {
        match self {
            RecordRow::Stored { table, row, columns } => columns.get(i).map_or(Value::Null, |&c| table.get(*row, c)),
            RecordRow::Full { values, columns } => columns.get(i).and_then(|&c| values.get(c)).cloned().unwrap_or(Value::Null),
            RecordRow::Listed(values) => values.get(i).cloned().unwrap_or(Value::Null),
        }
    }

    /// The read's `i`-th column as a string where it is stored; `None` for NULL or a column
    /// that is not a string.
    pub fn str(&self, i: usize) -> Option<&str> {
        match self {
            RecordRow::Stored { table, row, columns } => table.get_str(*row, *columns.get(i)?),
            RecordRow::Full { values, columns } => values.get(*columns.get(i)?)?.as_str(),
            RecordRow::Listed(values) => values.get(i)?.as_str(),
        }
    }

    /// The read's `i`-th column as an integer; `None` for NULL or a column that is not one.
    pub fn int(&self, i: usize) -> Option<i64> {
        match self {
            RecordRow::Stored { table, row, columns } => table.get_int(*row, *columns.get(i)?),
            _ => self.value(i).as_i64(),
        }
    }

    /// The read's `i`-th column as a decimal (integers too); `None` for NULL or another type.
    pub fn decimal(&self, i: usize) -> Option<Decimal> {
        self.value(i).as_decimal()
    }
}

impl<'a> RecordRow<'a> {
    fn of(table: &'a TableStore, row: RowId, version: &'a StoredRow<'a>, columns: &'a [usize]) -> RecordRow<'a> {
        match version {
            StoredRow::InPlace { .. } => RecordRow::Stored { table, row, columns },
            StoredRow::Values(values) => RecordRow::Full { values, columns },
        }
    }
}

/// Calls `f` with each row a record read finds, as `view` sees it, in the read's order, until
/// it returns false: what [`read_records`] gives, without building each row's values.
/// Returns how many rows `f` saw; `None` if the read examined more than `budget` rows.
pub fn visit_records(table: &TableStore, read: &RecordRead, view: &TxnView, budget: usize, f: &mut dyn FnMut(&RecordRow) -> Result<bool>) -> Result<Option<usize>> {
    let mut seen = 0;
    let within = walk_records(table, read, view, budget, &mut |row, version| {
        seen += 1;
        f(&RecordRow::of(table, row, &version, &read.columns))
    })?;
    Ok(within.then_some(seen))
}

/// What a record read-modify-write computes from each row it finds, read in place: the
/// changes to make, already of the column types.
pub type RecordRowChanges<'a> = dyn FnMut(&RecordRow) -> Result<Vec<(usize, Value)>> + 'a;

/// [`modify_records`] with each row given to `f` where it is stored (see [`RecordRow`]).
/// Returns how many rows were changed; `None` if the read examined more than `budget` rows.
pub fn modify_each(table: &mut TableStore, read: &RecordRead, txn: &mut LocalTxn, budget: usize, f: &mut RecordRowChanges) -> Result<Option<usize>> {
    // The rows first (an older version the transaction sees comes reconstructed), so that no
    // row is visited twice.
    let mut targets: SmallVec<[(RowId, Option<Vec<Value>>); 2]> = SmallVec::new();
    let within = walk_records(table, read, &txn.view, budget, &mut |row, version| {
        targets.push((row, match version {
            StoredRow::InPlace { .. } => None,
            StoredRow::Values(values) => Some(values),
        }));
        Ok(true)
    })?;
    if !within {
        return Ok(None);
    }
    let id = table.def().id;
    for (row, older) in &targets {
        let changes = match older {
            Some(values) => f(&RecordRow::Full { values, columns: &read.columns })?,
            None => f(&RecordRow::Stored { table, row: *row, columns: &read.columns })?,
        };
        keeps_partition_key(table.def(), changes.iter().map(|(c, _)| *c))?;
        let version = table.update(*row, &changes, &txn.view)?;
        txn.versions.push((id, version));
    }
    Ok(Some(targets.len()))
}

/// Whether the read's candidates need [`within_bounds`]: a bound of the key column's own
/// type bounds the index walk exactly; any other may have been converted or dropped.
fn bounds_recheck(table: &TableStore, read: &RecordRead) -> bool {
    if read.lower.is_none() && read.upper.is_none() {
        return false;
    }
    let def = table.def();
    let ty = def.columns[def.indexes[read.index].columns[read.eq.len()]].ty;
    [&read.lower, &read.upper].into_iter().flatten().any(|(v, _)| !of_key_type(v, ty))
}

/// Whether a candidate's next key column lies within the read's bounds (SQL comparison); only
/// for a read with a bound (see [`bounds_recheck`]).
fn within_bounds(table: &TableStore, read: &RecordRead, version: &StoredRow) -> Result<bool> {
    let column = table.def().indexes[read.index].columns[read.eq.len()];
    let v = version.column(column);
    let ok = |b: &Option<(Value, bool)>, want: Ordering| -> Result<bool> {
        let Some((bound, inclusive)) = b else { return Ok(true) };
        Ok(match v.sql_cmp(bound)? {
            Some(Ordering::Equal) => *inclusive,
            Some(o) => o == want,
            None => false,
        })
    };
    Ok(ok(&read.lower, Ordering::Greater)? && ok(&read.upper, Ordering::Less)?)
}

/// What a record read-modify-write computes from each row it finds (the read's columns):
/// the changes to make, already of the column types.
pub type RecordChanges<'a> = dyn FnMut(&[Value]) -> Result<Vec<(usize, Value)>> + 'a;

/// Changes every row a record read finds by what `f` computes from the row's values of the
/// read's columns, as the version this transaction sees (the row is locked and changed in
/// one visit: SELECT … FOR UPDATE and UPDATE of that row). Returns each row and the values
/// `f` was given.
pub fn modify_records(table: &mut TableStore, read: &RecordRead, txn: &mut LocalTxn, budget: usize, f: &mut RecordChanges) -> Result<RecordRows> {
    modify_found(table, read, &read.columns, txn, budget, f)
}

/// [`modify_records`] giving `f` the values of `columns`.
fn modify_found(table: &mut TableStore, read: &RecordRead, columns: &[usize], txn: &mut LocalTxn, budget: usize, f: &mut RecordChanges) -> Result<RecordRows> {
    let Some(targets) = find_records(table, read, columns, &txn.view, budget)? else { return Ok(None) };
    let id = table.def().id;
    for (row, values) in targets.rows.iter().zip(&targets.values) {
        let changes = f(values)?;
        keeps_partition_key(table.def(), changes.iter().map(|(c, _)| *c))?;
        let version = table.update(*row, &changes, &txn.view)?;
        txn.versions.push((id, version));
    }
    Ok(Some(targets))
}

/// Sets `changes` (already of the column types) on every row a record read finds, as one
/// UPDATE would; returns the read's columns of each new version.
pub fn update_records(table: &mut TableStore, read: &RecordRead, changes: &[(usize, Value)], txn: &mut LocalTxn, budget: usize) -> Result<Option<Vec<Vec<Value>>>> {
    // Refused even when no row matches, as the UPDATE is.
    keeps_partition_key(table.def(), changes.iter().map(|(c, _)| *c))?;
    let Some(rows) = modify_found(table, read, &[], txn, budget, &mut |_| Ok(changes.to_vec()))? else { return Ok(None) };
    Ok(Some(rows.rows.iter().map(|&row| table.get_columns(row, &read.columns)).collect()))
}

/// Deletes every row a record read finds, as one DELETE would; returns how many.
pub fn delete_records(table: &mut TableStore, read: &RecordRead, txn: &mut LocalTxn, budget: usize) -> Result<Option<u64>> {
    let Some(targets) = find_records(table, read, &[], &txn.view, budget)? else { return Ok(None) };
    let id = table.def().id;
    for &row in &targets.rows {
        let version = table.delete(row, &txn.view)?;
        txn.versions.push((id, version));
    }
    Ok(Some(targets.rows.len() as u64))
}

/// Refuses a change of a partitioned table's partition key column (a row would have to move
/// to another partition).
pub fn keeps_partition_key(def: &crate::catalog::TableDef, mut changed: impl Iterator<Item = usize>) -> Result<()> {
    match def.partition_key {
        Some(k) if changed.any(|c| c == k) => Err(Error::unsupported("updating the partition key column of a partitioned table")),
        _ => Ok(()),
    }
}
