//! Running short-statement plans on a partition executor.
//!
//! These functions run inside an executor job, on the thread that owns the partition, so they
//! read and write storage directly. UPDATE and DELETE first collect the rows they will change
//! and only then change them, so a row is never visited twice and index scans never see their
//! own writes. Every change is recorded in the caller's undo log.

use std::cmp::Ordering;
use std::ops::Bound;

use super::expr::{EvalContext, Expr, RowAccess};
use super::plan::{Access, DeletePlan, SelectPlan, UpdatePlan};
use crate::error::{Error, Result};
use crate::storage::index::{encode_value, KeyBuf};
use crate::storage::{RowId, TableStore};
use crate::txn::{UndoEntry, UndoLog};
use crate::types::{DataType, Decimal, TypeFamily, Value};

/// A stored row as expression input.
pub struct StoredRow<'a> {
    pub table: &'a TableStore,
    pub row: RowId,
}

impl RowAccess for StoredRow<'_> {
    fn column(&self, index: usize) -> Value {
        self.table.get(self.row, index)
    }
}

/// The value `v` as a key of a column of type `ty` for an equality lookup, or `None` if no
/// stored value of that type can equal it (then the lookup finds nothing).
pub fn key_value(v: Value, ty: DataType) -> Option<Value> {
    if v.is_null() {
        return None;
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
        TypeFamily::Date => match v {
            Value::Date(d) => Some(Value::Date(d)),
            Value::Timestamp(t) => {
                let day = t.div_euclid(crate::types::datetime::MICROS_PER_DAY);
                (t.rem_euclid(crate::types::datetime::MICROS_PER_DAY) == 0).then_some(Value::Date(day as i32))
            }
            _ => None,
        },
        TypeFamily::Timestamp => match v {
            Value::Timestamp(t) => Some(Value::Timestamp(t)),
            Value::Date(d) => Some(Value::Timestamp(d as i64 * crate::types::datetime::MICROS_PER_DAY)),
            _ => None,
        },
        TypeFamily::Bool => matches!(v, Value::Bool(_)).then_some(v),
    }
}

/// Calls `f` with each row the access path yields (in index order for index paths), until `f`
/// returns `Ok(false)`. Rows are candidates: the caller still applies the whole filter.
fn for_each_candidate(
    table: &TableStore,
    access: &Access,
    reverse: bool,
    cx: &EvalContext,
    f: &mut dyn FnMut(RowId) -> Result<bool>,
) -> Result<()> {
    let mut failure = None;
    let mut visit = |row: RowId| match f(row) {
        Ok(go_on) => go_on,
        Err(e) => {
            failure = Some(e);
            false
        }
    };
    match access {
        Access::Scan => table.for_each_live(&mut visit),
        Access::Index { index, eq, lower, upper } => {
            let def = &table.def().indexes[*index];
            let mut prefix = KeyBuf::new();
            for (e, &col) in eq.iter().zip(&def.columns) {
                let ty = table.def().columns[col].ty;
                let Some(v) = key_value(e.eval(&super::expr::NoRow, cx)?, ty) else { return Ok(()) };
                encode_value(&v, &mut prefix);
            }
            let store = table.index_store(*index);
            if lower.is_none() && upper.is_none() {
                if reverse {
                    store.scan_range(Bound::Included(&prefix), Bound::Included(&prefix), true, &mut visit);
                } else {
                    store.scan_prefix(&prefix, &mut visit);
                }
            } else {
                let next_ty = table.def().columns[def.columns[eq.len()]].ty;
                let bound = |b: &Option<(Expr, bool)>| -> Result<Option<(KeyBuf, bool)>> {
                    let Some((e, inclusive)) = b else { return Ok(None) };
                    let v = e.eval(&super::expr::NoRow, cx)?;
                    // A bound that does not convert exactly is dropped; the filter rechecks it.
                    Ok(key_value(v, next_ty).map(|v| {
                        let mut k = prefix.clone();
                        encode_value(&v, &mut k);
                        (k, *inclusive)
                    }))
                };
                let (lo, hi) = (bound(lower)?, bound(upper)?);
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
                store.scan_range(lower_b, upper_b, reverse, &mut visit);
            }
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn matches(table: &TableStore, row: RowId, filter: Option<&Expr>, cx: &EvalContext) -> Result<bool> {
    match filter {
        Some(f) => f.eval_predicate(&StoredRow { table, row }, cx),
        None => Ok(true),
    }
}

fn collect_targets(table: &TableStore, access: &Access, filter: Option<&Expr>, cx: &EvalContext) -> Result<Vec<RowId>> {
    let mut rows = Vec::new();
    for_each_candidate(table, access, false, cx, &mut |row| {
        if matches(table, row, filter, cx)? {
            rows.push(row);
        }
        Ok(true)
    })?;
    Ok(rows)
}

/// Inserts rows (already of the column types); returns how many.
pub fn insert_rows(table: &mut TableStore, rows: &[Vec<Value>], undo: &mut UndoLog) -> Result<u64> {
    let id = table.def().id;
    for row in rows {
        let rid = table.insert(row)?;
        undo.push(UndoEntry::Inserted { table: id, row: rid });
    }
    Ok(rows.len() as u64)
}

pub fn run_update(table: &mut TableStore, plan: &UpdatePlan, cx: &EvalContext, undo: &mut UndoLog) -> Result<u64> {
    let targets = collect_targets(table, &plan.access, plan.filter.as_ref(), cx)?;
    let id = table.def().id;
    let types: Vec<DataType> = plan.assignments.iter().map(|(c, _)| table.def().columns[*c].ty).collect();
    for &row in &targets {
        let mut changes = Vec::with_capacity(plan.assignments.len());
        for ((col, e), ty) in plan.assignments.iter().zip(&types) {
            let v = e.eval(&StoredRow { table, row }, cx)?.assign_to(*ty)?;
            changes.push((*col, v));
        }
        let old = table.update(row, &changes)?;
        let old = changes.iter().map(|(c, _)| *c).zip(old).collect();
        undo.push(UndoEntry::Updated { table: id, row, old });
    }
    Ok(targets.len() as u64)
}

pub fn run_delete(table: &mut TableStore, plan: &DeletePlan, cx: &EvalContext, undo: &mut UndoLog) -> Result<u64> {
    let targets = collect_targets(table, &plan.access, plan.filter.as_ref(), cx)?;
    let id = table.def().id;
    for &row in &targets {
        table.delete(row);
        undo.push(UndoEntry::Deleted { table: id, row });
    }
    Ok(targets.len() as u64)
}

/// What an index-driven SELECT produced.
#[derive(Debug)]
pub enum SelectOutcome {
    Rows(Vec<Vec<Value>>),
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

/// Runs an index-driven SELECT, examining at most `budget` rows.
pub fn run_select(table: &TableStore, plan: &SelectPlan, cx: &EvalContext, budget: usize) -> Result<SelectOutcome> {
    let limit = row_count(plan.limit.as_ref(), cx, "LIMIT")?;
    let offset = row_count(plan.offset.as_ref(), cx, "OFFSET")?.unwrap_or(0);
    let in_order = plan.ordered_by_index;
    let stop_at = match (in_order, limit) {
        (Some(_), Some(l)) => Some(l.saturating_add(offset)),
        _ => None,
    };
    let mut rows: Vec<RowId> = Vec::new();
    let mut examined = 0usize;
    let mut too_large = false;
    for_each_candidate(table, &plan.access, in_order == Some(true), cx, &mut |row| {
        examined += 1;
        if examined > budget {
            too_large = true;
            return Ok(false);
        }
        if matches(table, row, plan.filter.as_ref(), cx)? {
            rows.push(row);
        }
        Ok(stop_at.is_none_or(|n| (rows.len() as u64) < n))
    })?;
    if too_large {
        return Ok(SelectOutcome::TooLarge);
    }
    if in_order.is_none() && !plan.order_by.is_empty() {
        sort_rows(table, &mut rows, &plan.order_by, cx)?;
    }
    let take = limit.unwrap_or(u64::MAX);
    let mut out = Vec::new();
    for &row in rows.iter().skip(offset.min(usize::MAX as u64) as usize).take(take.min(usize::MAX as u64) as usize) {
        let stored = StoredRow { table, row };
        out.push(plan.projection.iter().map(|e| e.eval(&stored, cx)).collect::<Result<Vec<_>>>()?);
    }
    Ok(SelectOutcome::Rows(out))
}

fn sort_rows(table: &TableStore, rows: &mut Vec<RowId>, order_by: &[(Expr, bool, bool)], cx: &EvalContext) -> Result<()> {
    let mut keyed: Vec<(Vec<Value>, RowId)> = Vec::with_capacity(rows.len());
    for &row in rows.iter() {
        let stored = StoredRow { table, row };
        let key = order_by.iter().map(|(e, _, _)| e.eval(&stored, cx)).collect::<Result<Vec<_>>>()?;
        keyed.push((key, row));
    }
    let mut failure = None;
    keyed.sort_by(|(a, _), (b, _)| {
        for ((x, y), (_, desc, nulls_first)) in a.iter().zip(b).zip(order_by) {
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
    if let Some(e) = failure {
        return Err(e);
    }
    *rows = keyed.into_iter().map(|(_, r)| r).collect();
    Ok(())
}
