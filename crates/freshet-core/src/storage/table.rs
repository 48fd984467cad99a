//! The rows of one table in one partition: chunks of column segments plus the indexes.
//!
//! A [`TableStore`] belongs to its partition's executor thread; every method runs there.
//!
//! Invariants:
//! - every chunk but the last holds [`CHUNK_ROWS`] slots; a slot's [`RowId`] never changes;
//! - a slot is either live or deleted (its bit in the chunk's `deleted` bitmap); deleted slots
//!   keep their old values until reused, so the undo of a delete only clears the bit;
//! - a deleted slot is reused only after [`free_slot`](TableStore::free_slot), which the
//!   transaction layer calls once the delete is committed;
//! - every live row has exactly one entry in every index, and no deleted row has any;
//! - a segment or deleted-bitmap shared with a snapshot is copied before it is written
//!   ([`TableStats::segments_copied`] counts those copies).

use std::sync::Arc;

use super::bitmap::Bitmap;
use super::index::{encode_key, IndexStore, KeyBuf};
use super::segment::ColumnSegment;
use super::snapshot::{ChunkSnapshot, TableSnapshot};
use super::strings::StringArena;
use super::{RowId, CHUNK_ROWS};
use crate::catalog::{IndexDef, TableDef};
use crate::error::{Error, Result, SqlState};
use crate::types::{DataType, Value};

/// Counters of one table partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Column segments (and deleted bitmaps) copied because a snapshot shared them.
    pub segments_copied: u64,
    pub live_rows: u64,
}

#[derive(Debug)]
struct Chunk {
    columns: Vec<Arc<ColumnSegment>>,
    deleted: Option<Arc<Bitmap>>,
    len: usize,
    live: usize,
    /// One arena per column (unused for non-string columns). Never shared with a snapshot.
    arenas: Vec<StringArena>,
}

impl Chunk {
    fn new(types: &[DataType], capacity: usize) -> Self {
        Chunk {
            columns: types.iter().map(|t| Arc::new(ColumnSegment::new(t.physical(), capacity))).collect(),
            deleted: None,
            len: 0,
            live: 0,
            arenas: types.iter().map(|_| StringArena::default()).collect(),
        }
    }

    fn is_deleted(&self, slot: usize) -> bool {
        self.deleted.as_ref().is_some_and(|d| d.get(slot))
    }
}

/// Makes `arc` unique, copying its contents if a snapshot shares them.
#[inline]
fn cow<'a, T: Clone>(arc: &'a mut Arc<T>, copies: &mut u64) -> &'a mut T {
    if Arc::get_mut(arc).is_none() {
        *copies += 1;
    }
    Arc::make_mut(arc)
}

#[derive(Debug)]
pub struct TableStore {
    def: Arc<TableDef>,
    types: Vec<DataType>,
    chunks: Vec<Chunk>,
    free: Vec<RowId>,
    indexes: Vec<IndexStore>,
    stats: TableStats,
}

impl TableStore {
    pub fn new(def: Arc<TableDef>) -> Self {
        let types = def.types();
        let indexes = def.indexes.iter().map(new_index).collect();
        TableStore { def, types, chunks: Vec::new(), free: Vec::new(), indexes, stats: TableStats::default() }
    }

    pub fn def(&self) -> &Arc<TableDef> {
        &self.def
    }

    pub fn stats(&self) -> TableStats {
        self.stats
    }

    pub fn live_rows(&self) -> u64 {
        self.stats.live_rows
    }

    pub fn index_store(&self, position: usize) -> &IndexStore {
        &self.indexes[position]
    }

    #[inline]
    fn locate(&self, row: RowId) -> Option<(&Chunk, usize)> {
        let chunk = self.chunks.get(row.chunk())?;
        let slot = row.slot();
        (slot < chunk.len).then_some((chunk, slot))
    }

    pub fn is_live(&self, row: RowId) -> bool {
        self.locate(row).is_some_and(|(c, s)| !c.is_deleted(s))
    }

    /// The value of column `col` in `row` (live or not).
    pub fn get(&self, row: RowId, col: usize) -> Value {
        match self.locate(row) {
            Some((chunk, slot)) => chunk.columns[col].get(slot, self.types[col]),
            None => Value::Null,
        }
    }

    pub fn row_values(&self, row: RowId) -> Vec<Value> {
        (0..self.types.len()).map(|c| self.get(row, c)).collect()
    }

    /// The encoded key of `row` in index `position`, and whether it contains NULL.
    pub fn key_of(&self, position: usize, row: RowId) -> (KeyBuf, bool) {
        let cols = &self.def.indexes[position].columns;
        let values: Vec<Value> = cols.iter().map(|&c| self.get(row, c)).collect();
        let mut key = KeyBuf::new();
        let has_null = encode_key(&values, &mut key);
        (key, has_null)
    }

    /// Calls `f` for every live row, in storage order, until it returns false.
    pub fn for_each_live(&self, f: &mut dyn FnMut(RowId) -> bool) {
        for (ci, chunk) in self.chunks.iter().enumerate() {
            for slot in 0..chunk.len {
                if !chunk.is_deleted(slot) && !f(RowId::new(ci, slot)) {
                    return;
                }
            }
        }
    }

    fn check_not_null(&self, col: usize, v: &Value) -> Result<()> {
        let c = &self.def.columns[col];
        if v.is_null() && !c.nullable {
            return Err(Error::new(
                SqlState::NotNullViolation,
                format!(
                    "null value in column \"{}\" of relation \"{}\" violates not-null constraint",
                    c.name, self.def.name
                ),
            ));
        }
        Ok(())
    }

    fn unique_violation(&self, position: usize, values: &dyn Fn(usize) -> Value) -> Error {
        let index = &self.def.indexes[position];
        let names: Vec<&str> = index.columns.iter().map(|&c| self.def.columns[c].name.as_str()).collect();
        let vals: Vec<String> = index
            .columns
            .iter()
            .map(|&c| values(c).to_text(self.types[c]).unwrap_or_else(|| "null".into()))
            .collect();
        Error::new(
            SqlState::UniqueViolation,
            format!("duplicate key value violates unique constraint \"{}\"", index.name),
        )
        .with_detail(format!("Key ({})=({}) already exists.", names.join(", "), vals.join(", ")))
    }

    /// Inserts a row whose values already have the column types. Checks NOT NULL and
    /// uniqueness before changing anything.
    pub fn insert(&mut self, row: &[Value]) -> Result<RowId> {
        debug_assert_eq!(row.len(), self.types.len());
        for (c, v) in row.iter().enumerate() {
            self.check_not_null(c, v)?;
        }
        let keys = self.index_keys(&|c| row[c].clone());
        for (position, (key, has_null)) in keys.iter().enumerate() {
            if self.indexes[position].conflict(key, *has_null).is_some() {
                return Err(self.unique_violation(position, &|c| row[c].clone()));
            }
        }
        let id = self.write_new_row(row);
        for (position, (key, has_null)) in keys.iter().enumerate() {
            self.indexes[position]
                .insert(key, *has_null, id)
                .map_err(|_| Error::internal("index entry appeared during insert"))?;
        }
        self.stats.live_rows += 1;
        Ok(id)
    }

    fn index_keys(&self, value: &dyn Fn(usize) -> Value) -> Vec<(KeyBuf, bool)> {
        self.def
            .indexes
            .iter()
            .map(|index| {
                let values: Vec<Value> = index.columns.iter().map(|&c| value(c)).collect();
                let mut key = KeyBuf::new();
                let has_null = encode_key(&values, &mut key);
                (key, has_null)
            })
            .collect()
    }

    fn write_new_row(&mut self, row: &[Value]) -> RowId {
        let copies = &mut self.stats.segments_copied;
        if let Some(id) = self.free.pop() {
            let chunk = &mut self.chunks[id.chunk()];
            let slot = id.slot();
            for (c, v) in row.iter().enumerate() {
                cow(&mut chunk.columns[c], copies).set(slot, v, &mut chunk.arenas[c]);
            }
            if let Some(deleted) = &mut chunk.deleted {
                cow(deleted, copies).set(slot, false);
            }
            chunk.live += 1;
            return id;
        }
        if self.chunks.last().is_none_or(|c| c.len == CHUNK_ROWS) {
            // The first chunk of a table starts small so that small tables stay small.
            let capacity = if self.chunks.is_empty() { 64 } else { CHUNK_ROWS };
            self.chunks.push(Chunk::new(&self.types, capacity));
        }
        let ci = self.chunks.len() - 1;
        let chunk = &mut self.chunks[ci];
        for (c, v) in row.iter().enumerate() {
            cow(&mut chunk.columns[c], copies).push(v, &mut chunk.arenas[c]);
        }
        if let Some(deleted) = &mut chunk.deleted {
            cow(deleted, copies).push(false);
        }
        let slot = chunk.len;
        chunk.len += 1;
        chunk.live += 1;
        RowId::new(ci, slot)
    }

    /// Deletes a live row: marks its slot and removes its index entries. The values stay, so
    /// [`undelete`](Self::undelete) can restore it; the slot is reused after
    /// [`free_slot`](Self::free_slot).
    pub fn delete(&mut self, row: RowId) {
        if !self.is_live(row) {
            return;
        }
        for position in 0..self.indexes.len() {
            let (key, has_null) = self.key_of(position, row);
            self.indexes[position].remove(&key, has_null, row);
        }
        self.set_deleted(row, true);
        self.stats.live_rows -= 1;
    }

    fn set_deleted(&mut self, row: RowId, deleted: bool) {
        let copies = &mut self.stats.segments_copied;
        let chunk = &mut self.chunks[row.chunk()];
        let len = chunk.len;
        let bits = chunk.deleted.get_or_insert_with(|| Arc::new(Bitmap::filled(len, false)));
        let bits = cow(bits, copies);
        if bits.get(row.slot()) != deleted {
            bits.set(row.slot(), deleted);
            if deleted {
                chunk.live -= 1;
            } else {
                chunk.live += 1;
            }
        }
    }

    /// Undoes [`delete`](Self::delete) of a row whose slot has not been freed.
    pub fn undelete(&mut self, row: RowId) -> Result<()> {
        if self.is_live(row) {
            return Ok(());
        }
        self.set_deleted(row, false);
        for position in 0..self.indexes.len() {
            let (key, has_null) = self.key_of(position, row);
            self.indexes[position]
                .insert(&key, has_null, row)
                .map_err(|_| Error::internal("undo of a delete found its key taken"))?;
        }
        self.stats.live_rows += 1;
        Ok(())
    }

    /// Makes the slot of a deleted row available for new rows.
    pub fn free_slot(&mut self, row: RowId) {
        if !self.is_live(row) && self.locate(row).is_some() {
            self.free.push(row);
        }
    }

    /// Undoes an insert: the row disappears and its slot is free again at once.
    pub fn remove_inserted(&mut self, row: RowId) {
        self.delete(row);
        self.free.push(row);
    }

    /// Sets columns of a live row to new values (already of the column types) and maintains
    /// the indexes. Returns the old values in the order of `changes`. Checks NOT NULL and
    /// uniqueness before changing anything.
    pub fn update(&mut self, row: RowId, changes: &[(usize, Value)]) -> Result<Vec<Value>> {
        for (c, v) in changes {
            self.check_not_null(*c, v)?;
        }
        let old: Vec<Value> = changes.iter().map(|(c, _)| self.get(row, *c)).collect();
        let new_value = |c: usize| -> Value {
            match changes.iter().rposition(|(col, _)| *col == c) {
                Some(i) => changes[i].1.clone(),
                None => self.get(row, c),
            }
        };
        // Indexes whose key changes: (position, old key, new key).
        let mut moved = Vec::new();
        for (position, index) in self.def.indexes.iter().enumerate() {
            if !index.columns.iter().any(|c| changes.iter().any(|(col, _)| col == c)) {
                continue;
            }
            let (old_key, old_null) = self.key_of(position, row);
            let values: Vec<Value> = index.columns.iter().map(|&c| new_value(c)).collect();
            let mut new_key = KeyBuf::new();
            let new_null = encode_key(&values, &mut new_key);
            if old_key == new_key && old_null == new_null {
                continue;
            }
            if let Some(other) = self.indexes[position].conflict(&new_key, new_null)
                && other != row {
                    return Err(self.unique_violation(position, &new_value));
                }
            moved.push((position, old_key, old_null, new_key, new_null));
        }
        self.write_values(row, changes);
        for (position, old_key, old_null, new_key, new_null) in moved {
            self.indexes[position].remove(&old_key, old_null, row);
            self.indexes[position]
                .insert(&new_key, new_null, row)
                .map_err(|_| Error::internal("index entry appeared during update"))?;
        }
        Ok(old)
    }

    fn write_values(&mut self, row: RowId, changes: &[(usize, Value)]) {
        let copies = &mut self.stats.segments_copied;
        let chunk = &mut self.chunks[row.chunk()];
        for (c, v) in changes {
            cow(&mut chunk.columns[*c], copies).set(row.slot(), v, &mut chunk.arenas[*c]);
        }
    }

    /// The snapshot of this table partition: the segment lists, no data copied.
    pub fn snapshot(&self) -> Vec<ChunkSnapshot> {
        self.chunks
            .iter()
            .map(|c| ChunkSnapshot {
                columns: c.columns.clone(),
                deleted: c.deleted.clone(),
                len: c.len,
                live: c.live,
            })
            .collect()
    }

    pub fn snapshot_table(&self) -> TableSnapshot {
        TableSnapshot { def: self.def.clone(), chunks: self.snapshot() }
    }

    /// Installs a new definition (same columns) and builds or drops indexes to match it.
    pub fn set_def(&mut self, def: Arc<TableDef>) -> Result<()> {
        debug_assert_eq!(def.columns.len(), self.def.columns.len());
        let mut indexes = Vec::with_capacity(def.indexes.len());
        let mut old: Vec<Option<IndexStore>> = std::mem::take(&mut self.indexes).into_iter().map(Some).collect();
        for index in &def.indexes {
            let existing = self.def.indexes.iter().position(|i| i == index);
            match existing.and_then(|p| old[p].take()) {
                Some(store) => indexes.push(store),
                None => indexes.push(self.build_index(index)?),
            }
        }
        self.indexes = indexes;
        self.def = def;
        Ok(())
    }

    fn build_index(&self, index: &IndexDef) -> Result<IndexStore> {
        let mut store = new_index(index);
        let mut failure = None;
        self.for_each_live(&mut |row| {
            let values: Vec<Value> = index.columns.iter().map(|&c| self.get(row, c)).collect();
            if index.primary
                && let Some(c) = values.iter().position(Value::is_null) {
                    failure = Some(Error::new(
                        SqlState::NotNullViolation,
                        format!(
                            "column \"{}\" of relation \"{}\" contains null values",
                            self.def.columns[index.columns[c]].name, self.def.name
                        ),
                    ));
                    return false;
                }
            let mut key = KeyBuf::new();
            let has_null = encode_key(&values, &mut key);
            if store.insert(&key, has_null, row).is_err() {
                let names: Vec<&str> = index.columns.iter().map(|&c| self.def.columns[c].name.as_str()).collect();
                let vals: Vec<String> = index
                    .columns
                    .iter()
                    .map(|&c| self.get(row, c).to_text(self.types[c]).unwrap_or_default())
                    .collect();
                failure = Some(
                    Error::new(
                        SqlState::UniqueViolation,
                        format!("could not create unique index \"{}\"", index.name),
                    )
                    .with_detail(format!("Key ({})=({}) is duplicated.", names.join(", "), vals.join(", "))),
                );
                return false;
            }
            true
        });
        match failure {
            Some(e) => Err(e),
            None => Ok(store),
        }
    }

    /// Removes every row (TRUNCATE).
    pub fn truncate(&mut self) {
        self.chunks.clear();
        self.free.clear();
        self.indexes = self.def.indexes.iter().map(new_index).collect();
        self.stats.live_rows = 0;
    }

    /// Bytes held by segments and indexes' row references (an estimate for monitoring).
    pub fn heap_bytes(&self) -> usize {
        self.chunks.iter().flat_map(|c| c.columns.iter()).map(|s| s.heap_bytes()).sum()
    }
}

fn new_index(def: &IndexDef) -> IndexStore {
    if def.primary { IndexStore::new_hash() } else { IndexStore::new_ordered(def.unique) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ColumnDef;

    fn table() -> TableStore {
        let col = |name: &str, ty, nullable| ColumnDef { name: name.into(), ty, nullable, default: None };
        TableStore::new(Arc::new(TableDef {
            id: 1,
            name: "t".into(),
            columns: vec![col("id", DataType::Int32, false), col("name", DataType::Text, true), col("v", DataType::Int64, true)],
            indexes: vec![
                IndexDef { name: "t_pkey".into(), columns: vec![0], unique: true, primary: true },
                IndexDef { name: "t_name".into(), columns: vec![1], unique: false, primary: false },
            ],
        }))
    }

    fn row(id: i32, name: &str, v: i64) -> Vec<Value> {
        vec![Value::Int32(id), Value::Text(name.into()), Value::Int64(v)]
    }

    fn pk(t: &TableStore, id: i32) -> Option<RowId> {
        let mut k = KeyBuf::new();
        encode_key(&[Value::Int32(id)], &mut k);
        t.index_store(0).get_unique(&k)
    }

    #[test]
    fn insert_enforces_keys_and_not_null() {
        let mut t = table();
        t.insert(&row(1, "a", 10)).unwrap();
        let dup = t.insert(&row(1, "b", 20)).unwrap_err();
        assert_eq!(dup.state, SqlState::UniqueViolation);
        assert_eq!(dup.detail.as_deref(), Some("Key (id)=(1) already exists."));
        let null = t.insert(&[Value::Null, Value::Null, Value::Null]).unwrap_err();
        assert_eq!(null.state, SqlState::NotNullViolation);
        assert_eq!(t.live_rows(), 1);
        assert_eq!(t.index_store(1).len(), 1);
    }

    #[test]
    fn update_moves_index_entries_and_checks_uniqueness() {
        let mut t = table();
        let r1 = t.insert(&row(1, "a", 10)).unwrap();
        t.insert(&row(2, "b", 20)).unwrap();
        assert_eq!(t.update(r1, &[(0, Value::Int32(2))]).unwrap_err().state, SqlState::UniqueViolation);
        assert_eq!(t.get(r1, 0), Value::Int32(1));
        let old = t.update(r1, &[(0, Value::Int32(3)), (2, Value::Int64(11))]).unwrap();
        assert_eq!(old, vec![Value::Int32(1), Value::Int64(10)]);
        assert_eq!(pk(&t, 1), None);
        assert_eq!(pk(&t, 3), Some(r1));
    }

    #[test]
    fn delete_undelete_and_slot_reuse() {
        let mut t = table();
        let r1 = t.insert(&row(1, "a", 10)).unwrap();
        t.delete(r1);
        assert!(!t.is_live(r1));
        assert_eq!(pk(&t, 1), None);
        t.undelete(r1).unwrap();
        assert_eq!(pk(&t, 1), Some(r1));
        t.delete(r1);
        t.free_slot(r1);
        let r2 = t.insert(&row(5, "e", 50)).unwrap();
        assert_eq!(r2, r1, "the freed slot is reused");
        assert_eq!(t.row_values(r2), row(5, "e", 50));
    }

    #[test]
    fn snapshot_keeps_its_state_and_segments_copy_once() {
        let mut t = table();
        let ids: Vec<RowId> = (0..3 * CHUNK_ROWS as i32)
            .map(|i| t.insert(&row(i, "some longer name value", i as i64)).unwrap())
            .collect();
        let snap = t.snapshot();
        let copies_before = t.stats().segments_copied;
        // Two writes to the same segment of chunk 0, one to chunk 2.
        t.update(ids[0], &[(2, Value::Int64(-1))]).unwrap();
        t.update(ids[1], &[(2, Value::Int64(-2))]).unwrap();
        t.update(ids[2 * CHUNK_ROWS], &[(2, Value::Int64(-3))]).unwrap();
        assert_eq!(t.stats().segments_copied - copies_before, 2);
        assert_eq!(snap[0].columns[2].get(0, DataType::Int64), Value::Int64(0));
        assert_eq!(t.get(ids[0], 2), Value::Int64(-1));
        // A delete copies the chunk's deleted bitmap? No: it did not exist; creating it is new.
        t.delete(ids[5]);
        assert!(snap[0].deleted.is_none());
        drop(snap);
        t.update(ids[3], &[(2, Value::Int64(-4))]).unwrap();
        assert_eq!(t.stats().segments_copied - copies_before, 2, "no copy once the snapshot is gone");
    }

    #[test]
    fn building_a_unique_index_reports_duplicates() {
        let mut t = table();
        t.insert(&row(1, "same", 1)).unwrap();
        t.insert(&row(2, "same", 2)).unwrap();
        let mut def = (**t.def()).clone();
        def.indexes.push(IndexDef { name: "u".into(), columns: vec![1], unique: true, primary: false });
        let err = t.set_def(Arc::new(def)).unwrap_err();
        assert_eq!(err.state, SqlState::UniqueViolation);
        assert_eq!(err.detail.as_deref(), Some("Key (name)=(same) is duplicated."));
    }
}
