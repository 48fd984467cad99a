//! Which partitions a statement runs on.
//!
//! A partitioned table's rows live on the partition given by a stable hash (FNV-1a) of the
//! partition key's order-preserving encoding, so all integer widths of one value land on the
//! same partition. A replicated table is on every partition: reads go to one, writes to all.

use super::Engine;
use crate::catalog::TableDef;
use crate::error::Result;
use crate::sql::exec::key_value;
use crate::sql::expr::{EvalContext, NoRow};
use crate::sql::plan::{pinned_key, OltpPlan};
use crate::storage::index::{encode_value, KeyBuf};
use crate::types::Value;

/// FNV-1a: stable across runs and builds (placement must not change under a restart).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3))
}

impl Engine {
    /// The partition of a row of a partitioned table (partition 0 for a replicated one).
    pub(super) fn partition_of_row(&self, table: &TableDef, row: &[Value]) -> usize {
        partition_of_row(self.executors.len(), table, row)
    }

    /// The partition a partition key value `v` names, hashed as a key of its own type (every
    /// integer width, and text of any declared length, hashes alike): where a one-job call
    /// whose home parameter has that value runs (`plpgsql::home_parameter`).
    pub fn partition_of_value(&self, v: &Value) -> usize {
        partition_of_encoded(self.executors.len(), v)
    }

    /// The partitions a short statement runs on. `reader` is the partition a read of a
    /// replicated table uses.
    pub(super) fn plan_partitions(&self, plan: &OltpPlan, params: &[Value], now: i64, reader: usize) -> Result<Vec<usize>> {
        plan_partitions(self.executors.len(), plan, params, now, reader)
    }
}

/// The partition among `n` of a key value already of the key column's type: the hash of its
/// key encoding.
fn partition_of_encoded(n: usize, v: &Value) -> usize {
    if n == 1 {
        return 0;
    }
    let mut key = KeyBuf::new();
    encode_value(v, &mut key);
    (fnv1a(&key) % n as u64) as usize
}

/// The partition of a row of a partitioned table among `n` (partition 0 for a replicated one).
pub(super) fn partition_of_row(n: usize, table: &TableDef, row: &[Value]) -> usize {
    match table.partition_key {
        Some(k) => partition_of_key(n, table, &row[k]),
        None => 0,
    }
}

/// The partition among `n` of the row of a partitioned table whose partition key is `v`.
pub(super) fn partition_of_key(n: usize, table: &TableDef, v: &Value) -> usize {
    if n == 1 {
        return 0;
    }
    let ty = table.partition_key.map(|k| table.columns[k].ty);
    partition_of_encoded(n, &ty.and_then(|ty| key_value(v.clone(), ty)).unwrap_or(Value::Null))
}

/// The partitions among `n` a short statement runs on (see [`Engine::plan_partitions`]).
pub(super) fn plan_partitions(n: usize, plan: &OltpPlan, params: &[Value], now: i64, reader: usize) -> Result<Vec<usize>> {
    if n == 1 {
        return Ok(vec![0]);
    }
    let table = plan.table();
    let all = || (0..n).collect();
    let Some(key) = table.partition_key else {
        return Ok(match plan {
            OltpPlan::Select(s) if !s.lock => vec![reader],
            _ => all(),
        });
    };
    let filter = match plan {
        OltpPlan::Select(s) => s.filter.as_ref(),
        OltpPlan::Update(u) => u.filter.as_ref(),
        OltpPlan::Delete(d) => d.filter.as_ref(),
    };
    let cx = EvalContext { params, now, session: None };
    if let Some(v) = filter.and_then(|f| pinned_key(f, key)) {
        return Ok(vec![partition_of_key(n, table, &v.eval(&NoRow, &cx)?)]);
    }
    Ok(all())
}
