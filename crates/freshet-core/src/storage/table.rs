//! The rows of one table in one partition: chunks of column segments plus the indexes.
//!
//! A [`TableStore`] belongs to its partition's executor thread; every method runs there.
//!
//! Invariants:
//! - every chunk but the last holds [`CHUNK_ROWS`] slots; a slot's [`RowId`] never changes;
//! - a slot holds the newest version of its row, committed or not; older versions are
//!   before-images in the row's version chain (`mvcc`);
//! - a deleted slot keeps its values (older readers still see them) and is reused only when
//!   garbage collection drops the delete's version;
//! - every version any transaction may still see has an entry in every index, and an entry
//!   exists only for such versions (see `mvcc`);
//! - a segment or deleted-bitmap shared with a snapshot is copied before it is written
//!   ([`TableStats::segments_copied`] counts those copies).

use std::sync::Arc;

use super::bitmap::Bitmap;
use hashbrown::HashMap;
use smallvec::SmallVec;

use super::index::{encode_key, encode_value, IndexStore, KeyBuf};
use super::mvcc::{Change, TxnView, Version, TXN_ID_BASE};
use super::segment::ColumnSegment;
use super::snapshot::{ChunkSnapshot, TableSnapshot};
use super::strings::StringArena;
use super::{RowId, CHUNK_ROWS};
use crate::catalog::{convert_column_value, ColumnDef, IndexDef, TableDef};
use crate::error::{Error, Result, SqlState};
use crate::types::{DataType, Value};

/// Counters of one table partition, since the database opened (`pg_stat_user_tables`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Column segments (and deleted bitmaps) copied because a snapshot shared them.
    pub segments_copied: u64,
    pub live_rows: u64,
    /// Rows inserted, updated and deleted by statements, whether or not their transactions
    /// committed (as PostgreSQL counts `n_tup_ins`, `n_tup_upd`, `n_tup_del`).
    pub inserted: u64,
    pub updated: u64,
    pub deleted: u64,
    /// Statements of the executor that scanned the whole table, or went through an index.
    pub seq_scans: u64,
    pub index_scans: u64,
    /// Row versions kept for older readers and not yet collected.
    pub versions: u64,
}

/// The counters of several partitions of a table, summed.
impl std::ops::Add for TableStats {
    type Output = TableStats;

    fn add(self, o: TableStats) -> TableStats {
        TableStats {
            segments_copied: self.segments_copied + o.segments_copied,
            live_rows: self.live_rows + o.live_rows,
            inserted: self.inserted + o.inserted,
            updated: self.updated + o.updated,
            deleted: self.deleted + o.deleted,
            seq_scans: self.seq_scans + o.seq_scans,
            index_scans: self.index_scans + o.index_scans,
            versions: self.versions + o.versions,
        }
    }
}

#[derive(Debug)]
struct Chunk {
    /// The column segments. The list itself is shared with snapshots too, so that a snapshot
    /// clones one pointer per chunk, not one per segment (fewer cache misses: measured with
    /// `freshet bench snapshot`); a write copies the list, then the segment, if shared.
    columns: Arc<Vec<Arc<ColumnSegment>>>,
    deleted: Option<Arc<Bitmap>>,
    len: usize,
    live: usize,
    /// One arena per column (unused for non-string columns). Never shared with a snapshot.
    arenas: Vec<StringArena>,
}

impl Chunk {
    fn new(types: &[DataType], capacity: usize) -> Self {
        Chunk {
            columns: Arc::new(types.iter().map(|t| Arc::new(ColumnSegment::new(t.physical(), capacity))).collect()),
            deleted: None,
            len: 0,
            live: 0,
            arenas: types.iter().map(|_| StringArena::default()).collect(),
        }
    }

    /// Appends a live row after the last slot (the chunk has room); returns its slot.
    fn push_row(&mut self, values: &[Value], copies: &mut u64) -> usize {
        let columns = unique_mut(&mut self.columns);
        for (c, v) in values.iter().enumerate() {
            cow(&mut columns[c], copies).push(v, &mut self.arenas[c]);
        }
        if let Some(deleted) = &mut self.deleted {
            cow(deleted, copies).push(false);
        }
        let slot = self.len;
        self.len += 1;
        self.live += 1;
        slot
    }

    fn is_deleted(&self, slot: usize) -> bool {
        self.deleted.as_ref().is_some_and(|d| d.get(slot))
    }
}

/// The segment of column `c`, unique to the live table: the chunk's segment list, and then
/// the segment, are copied first if a snapshot shares them (only the segment copy counts).
#[inline]
fn segment_mut<'a>(columns: &'a mut Arc<Vec<Arc<ColumnSegment>>>, c: usize, copies: &mut u64) -> &'a mut ColumnSegment {
    cow(&mut unique_mut(columns)[c], copies)
}

/// Makes `arc` unique, copying its contents if a snapshot shares them: a copy is told by the
/// contents having moved.
#[inline]
fn cow<'a, T: Clone>(arc: &'a mut Arc<T>, copies: &mut u64) -> &'a mut T {
    let shared = Arc::as_ptr(arc);
    let unique = unique_mut(arc);
    if !std::ptr::eq(shared, unique) {
        *copies += 1;
    }
    unique
}

/// `Arc::make_mut` without its atomic read-modify-write when `arc` is the only reference, as
/// it is on every write but the first after a snapshot. `make_mut` takes the count from one to
/// zero and back with a locked compare-and-swap (about 20 cycles), and an inserted order line
/// takes one per column; two plain loads tell the same here.
#[inline]
fn unique_mut<T: Clone>(arc: &mut Arc<T>) -> &mut T {
    // Storage never makes a `Weak` of a segment, a segment list or a bitmap, and a new strong
    // reference is made only by cloning one that exists: with a strong count of one held
    // through `&mut`, no other reference exists or can appear while the borrow lasts. A
    // snapshot on another thread may have just dropped its reference; its decrement
    // (Release) is ordered before the writes that follow by this fence, as by `make_mut`'s
    // Acquire.
    if Arc::strong_count(arc) == 1 && Arc::weak_count(arc) == 0 {
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        // SAFETY: `arc` is the only reference to its allocation (see above), and the returned
        // borrow keeps `arc` mutably borrowed, so nothing else reads or writes the contents
        // while it lives: what `Arc::get_mut` returns after its own uniqueness check.
        return unsafe { &mut *Arc::as_ptr(arc).cast_mut() };
    }
    Arc::make_mut(arc)
}

#[derive(Debug)]
pub struct TableStore {
    pub(crate) def: Arc<TableDef>,
    types: Vec<DataType>,
    /// `def.rounds()`: some column rounds the values written to it.
    rounds: bool,
    chunks: Vec<Chunk>,
    /// Slots that can take a new row.
    pub(crate) free: Vec<RowId>,
    pub(crate) indexes: Vec<IndexStore>,
    pub(crate) stats: TableStats,
    /// Scans counted by statements that read the table (which hold it shared): whole-table,
    /// and through an index.
    seq_scans: std::cell::Cell<u64>,
    index_scans: std::cell::Cell<u64>,
    /// Scans through each index, by position (beside `indexes`, the counts moving with their
    /// indexes when the definition changes).
    scans_by_index: Vec<std::cell::Cell<u64>>,
    /// The newest version of each row that has versions.
    pub(crate) heads: HashMap<RowId, u32>,
    /// Index entries a detached update moved (see `TxnView::detached`), by its version:
    /// (index position, old key, new key if the update added its entry).
    pub(crate) moved_keys: HashMap<u32, Vec<(usize, KeyBuf, Option<KeyBuf>)>>,
    pub(crate) versions: Vec<Option<Version>>,
    pub(crate) free_versions: Vec<u32>,
}

impl TableStore {
    pub fn new(def: Arc<TableDef>) -> Self {
        let types = def.types();
        let indexes = def.indexes.iter().map(new_index).collect();
        let def_indexes = def.indexes.len();
        TableStore {
            rounds: def.rounds(),
            def,
            types,
            chunks: Vec::new(),
            free: Vec::new(),
            indexes,
            stats: TableStats::default(),
            seq_scans: std::cell::Cell::new(0),
            index_scans: std::cell::Cell::new(0),
            scans_by_index: (0..def_indexes).map(|_| std::cell::Cell::new(0)).collect(),
            heads: HashMap::new(),
            moved_keys: HashMap::new(),
            versions: Vec::new(),
            free_versions: Vec::new(),
        }
    }

    pub fn def(&self) -> &Arc<TableDef> {
        &self.def
    }

    pub fn stats(&self) -> TableStats {
        TableStats { seq_scans: self.seq_scans.get(), index_scans: self.index_scans.get(), versions: self.version_count() as u64, ..self.stats }
    }

    /// Counts a statement's scan of this table: whole (`None`), or through index `index`.
    pub fn count_scan(&self, index: Option<usize>) {
        let counter = if index.is_some() { &self.index_scans } else { &self.seq_scans };
        counter.set(counter.get() + 1);
        if let Some(c) = index.and_then(|i| self.scans_by_index.get(i)) {
            c.set(c.get() + 1);
        }
    }

    /// Scans through each index since the database opened, by position.
    pub fn index_scan_counts(&self) -> Vec<u64> {
        self.scans_by_index.iter().map(std::cell::Cell::get).collect()
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

    #[inline]
    pub fn is_live(&self, row: RowId) -> bool {
        self.locate(row).is_some_and(|(c, s)| !c.is_deleted(s))
    }

    /// Starts loading columns of `row` into the cache (see [`ColumnSegment::prefetch`]):
    /// column i if bit i of `columns` is set; every column past 63 if bit 63 is.
    #[inline]
    pub fn prefetch(&self, row: RowId, columns: u64) {
        if let Some((chunk, slot)) = self.locate(row) {
            for_each_selected(&chunk.columns, columns, |segment| segment.prefetch(slot));
        }
    }

    /// As [`prefetch`](Self::prefetch), for the out-of-line bytes of the string columns among
    /// `columns` (their views are read: best once a prefetch of them had time to arrive).
    pub fn prefetch_strings(&self, row: RowId, columns: u64) {
        if let Some((chunk, slot)) = self.locate(row) {
            for_each_selected(&chunk.columns, columns, |segment| segment.prefetch_string(slot));
        }
    }

    /// The value of column `col` in `row` (live or not).
    pub fn get(&self, row: RowId, col: usize) -> Value {
        match self.locate(row) {
            Some((chunk, slot)) => chunk.columns[col].get(slot, self.types[col]),
            None => Value::Null,
        }
    }

    /// The integer in column `col` of `row` where it is stored; `None` for NULL, a column that
    /// is not an integer, or a slot that holds no row.
    pub fn get_int(&self, row: RowId, col: usize) -> Option<i64> {
        let (chunk, slot) = self.locate(row)?;
        // As `Value::as_i64`: a date or timestamp (stored as integers too) is not one.
        if !matches!(self.types.get(col)?, DataType::Int16 | DataType::Int32 | DataType::Int64) {
            return None;
        }
        chunk.columns.get(col)?.get_int(slot)
    }

    /// The string in column `col` of `row` where it is stored, without a copy; `None` for NULL,
    /// a column of another type, or a slot that holds no row.
    pub fn get_str(&self, row: RowId, col: usize) -> Option<&str> {
        let (chunk, slot) = self.locate(row)?;
        chunk.columns.get(col)?.get_str(slot)
    }

    /// The values of `columns` of `row` (live or not), in that order: the row is located once.
    pub fn get_columns(&self, row: RowId, columns: &[usize]) -> Vec<Value> {
        match self.locate(row) {
            Some((chunk, slot)) => columns.iter().map(|&c| chunk.columns[c].get(slot, self.types[c])).collect(),
            None => vec![Value::Null; columns.len()],
        }
    }

    pub fn row_values(&self, row: RowId) -> Vec<Value> {
        (0..self.types.len()).map(|c| self.get(row, c)).collect()
    }

    /// The encoded key of `row` in index `position`, and whether it contains NULL.
    pub fn key_of(&self, position: usize, row: RowId) -> (KeyBuf, bool) {
        let mut key = KeyBuf::new();
        let mut has_null = false;
        for &c in &self.def.indexes[position].columns {
            let v = self.get(row, c);
            has_null |= v.is_null();
            encode_value(&v, &mut key);
        }
        (key, has_null)
    }

    /// Calls `f` for every slot that holds a row some transaction may see (live rows, and
    /// deleted rows whose delete is not yet collected), in storage order, until it returns
    /// false.
    pub fn for_each_slot(&self, f: &mut dyn FnMut(RowId) -> bool) {
        for (ci, chunk) in self.chunks.iter().enumerate() {
            for slot in 0..chunk.len {
                let row = RowId::new(ci, slot);
                if chunk.is_deleted(slot) && !self.heads.contains_key(&row) {
                    continue;
                }
                if !f(row) {
                    return;
                }
            }
        }
    }

    pub(crate) fn slot_in_use(&self, row: RowId) -> bool {
        self.locate(row).is_some()
    }

    pub(crate) fn slot_deleted(&self, row: RowId) -> bool {
        self.locate(row).is_some_and(|(c, s)| c.is_deleted(s))
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

    /// Checks that no other row's newest version holds `key` in unique index `position`.
    /// A row whose newest version is not committed yet (by another transaction) is a conflict
    /// (40001): it could still commit or roll back.
    fn check_unique(&self, position: usize, key: &[u8], except: Option<RowId>, view: &TxnView, values: &dyn Fn(usize) -> Value) -> Result<()> {
        match self.key_holder(position, key, except, view)? {
            Some(_) => Err(self.unique_violation(position, values)),
            None => Ok(()),
        }
    }

    /// The row (other than `except`) that holds `key` in unique index `position`, or none; a
    /// row another transaction is changing is a conflict (the caller waits for it), whether
    /// or not it will hold the key.
    fn key_holder(&self, position: usize, key: &[u8], except: Option<RowId>, view: &TxnView) -> Result<Option<RowId>> {
        let mut found = Ok(None);
        self.indexes[position].scan_key(key, &mut |_, other| {
            if Some(other) == except {
                return true;
            }
            if let Some(v) = self.head(other).filter(|v| v.ts >= TXN_ID_BASE && v.ts != view.id) {
                found = Err(super::mvcc::conflict(v));
                return false;
            }
            if !self.slot_deleted(other) && self.key_of(position, other).0.as_slice() == key {
                found = Ok(Some(other));
                return false;
            }
            true
        });
        found
    }

    /// The row whose key in unique index `index` (or, with `None`, in any unique index) is
    /// `row`'s: what `INSERT … ON CONFLICT` meets instead of a unique violation. A key with a
    /// NULL conflicts with nothing.
    pub fn conflicting_row(&self, row: &[Value], index: Option<usize>, view: &TxnView) -> Result<Option<RowId>> {
        for (position, def) in self.def.indexes.iter().enumerate() {
            if !def.unique || index.is_some_and(|i| i != position) {
                continue;
            }
            let mut key = KeyBuf::new();
            if encode_key(def.columns.iter().map(|&c| &row[c]), &mut key) {
                continue;
            }
            if let Some(holder) = self.key_holder(position, &key, None, view)? {
                return Ok(Some(holder));
            }
        }
        Ok(None)
    }

    /// Inserts a row whose values already have the column types, as a change of transaction
    /// `view`; a `timestamp(p)` column's value is rounded here (before its index keys are
    /// made). Checks NOT NULL and uniqueness before changing anything. Returns the row and
    /// its version.
    pub fn insert(&mut self, row: &[Value], view: &TxnView) -> Result<(RowId, u32)> {
        let rounded;
        let row = if self.rounds {
            rounded = {
                let mut r = row.to_vec();
                self.def.round_row(&mut r);
                r
            };
            &rounded[..]
        } else {
            row
        };
        if row.len() != self.types.len() {
            // Made for the table before a column was added (ALTER TABLE ran meanwhile).
            return Err(Error::new(
                SqlState::SerializationFailure,
                format!("could not serialize access: relation \"{}\" changed during the statement", self.def.name),
            ));
        }
        for (c, v) in row.iter().enumerate() {
            self.check_not_null(c, v)?;
        }
        if !self.def.checks.is_empty() {
            self.check_constraints(&crate::sql::expr::SliceRow(row))?;
        }
        let keys: SmallVec<[(KeyBuf, bool); 4]> = self
            .def
            .indexes
            .iter()
            .map(|index| {
                let mut key = KeyBuf::new();
                let has_null = encode_key(index.columns.iter().map(|&c| &row[c]), &mut key);
                (key, has_null)
            })
            .collect();
        for (position, (key, has_null)) in keys.iter().enumerate() {
            if self.def.indexes[position].unique && !has_null {
                self.check_unique(position, key, None, view, &|c| row[c].clone())?;
            }
        }
        let id = self.write_new_row(row);
        for (position, (key, _)) in keys.iter().enumerate() {
            self.indexes[position].insert(key, id);
        }
        self.stats.live_rows += 1;
        self.stats.inserted += 1;
        let detached = self.detaches(id, view);
        let version = self.push_version(id, view, Change::Inserted, detached);
        Ok((id, version))
    }

    fn write_new_row(&mut self, row: &[Value]) -> RowId {
        let copies = &mut self.stats.segments_copied;
        if let Some(id) = self.free.pop() {
            let chunk = &mut self.chunks[id.chunk()];
            let slot = id.slot();
            let columns = unique_mut(&mut chunk.columns);
            for (c, v) in row.iter().enumerate() {
                cow(&mut columns[c], copies).set(slot, v, &mut chunk.arenas[c]);
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
        RowId::new(ci, self.chunks[ci].push_row(row, copies))
    }

    /// Deletes a row as a change of transaction `view`, which must see its newest version.
    /// The values and index entries stay for older readers.
    pub fn delete(&mut self, row: RowId, view: &TxnView) -> Result<u32> {
        self.check_writable(row, view)?;
        if self.slot_deleted(row) || !self.slot_in_use(row) {
            return Err(Error::internal("delete of a row that does not exist"));
        }
        self.set_deleted(row, true);
        self.stats.live_rows -= 1;
        self.stats.deleted += 1;
        let detached = self.detaches(row, view);
        Ok(self.push_version(row, view, Change::Deleted, detached))
    }

    /// Claims a row for transaction `view` without changing it (SELECT … FOR UPDATE).
    pub fn lock(&mut self, row: RowId, view: &TxnView) -> Result<Option<u32>> {
        self.check_writable(row, view)?;
        // A detached transaction runs alone: nobody else could take the row meanwhile.
        if self.detaches(row, view) || self.head(row).is_some_and(|v| v.ts == view.id) {
            return Ok(None);
        }
        Ok(Some(self.push_version(row, view, Change::Locked, false)))
    }

    pub(crate) fn set_deleted(&mut self, row: RowId, deleted: bool) {
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

    /// Sets columns of a row to new values (already of the column types; rounded here for a
    /// `timestamp(p)` column) as a change of transaction `view`, which must see the row's
    /// newest version. Checks NOT NULL and uniqueness before changing anything; adds index
    /// entries for new keys.
    pub fn update(&mut self, row: RowId, changes: &[(usize, Value)], view: &TxnView) -> Result<u32> {
        self.check_writable(row, view)?;
        let rounded;
        let changes = if self.rounds {
            rounded = changes
                .iter()
                .map(|(c, v)| {
                    let mut v = v.clone();
                    if let Some(column) = self.def.columns.get(*c) {
                        column.round(&mut v);
                    }
                    (*c, v)
                })
                .collect::<Vec<_>>();
            &rounded[..]
        } else {
            changes
        };
        for (c, v) in changes {
            self.check_not_null(*c, v)?;
        }
        let new_value = |c: usize| -> Value {
            match changes.iter().rposition(|(col, _)| *col == c) {
                Some(i) => changes[i].1.clone(),
                None => self.get(row, c),
            }
        };
        if self.def.checks.iter().any(|k| changes.iter().any(|(c, _)| k.reads(*c))) {
            let values: Vec<Value> = (0..self.types.len()).map(new_value).collect();
            self.check_constraints(&crate::sql::expr::SliceRow(&values))?;
        }
        // Indexes whose key changes, with the new key.
        let mut rekeyed = Vec::new();
        for (position, index) in self.def.indexes.iter().enumerate() {
            if !index.columns.iter().any(|c| changes.iter().any(|(col, _)| col == c)) {
                continue;
            }
            let (old_key, _) = self.key_of(position, row);
            let values: Vec<Value> = index.columns.iter().map(|&c| new_value(c)).collect();
            let mut new_key = KeyBuf::new();
            let has_null = encode_key(&values, &mut new_key);
            if old_key == new_key {
                continue;
            }
            if index.unique && !has_null {
                self.check_unique(position, &new_key, Some(row), view, &new_value)?;
            }
            rekeyed.push((position, old_key, new_key));
        }
        let mut before: Vec<(usize, Value)> = Vec::with_capacity(changes.len());
        for (c, _) in changes {
            if !before.iter().any(|(b, _)| b == c) {
                before.push((*c, self.get(row, *c)));
            }
        }
        self.write_values(row, changes);
        self.stats.updated += 1;
        let detached = self.detaches(row, view);
        if detached && !rekeyed.is_empty() {
            // Readers trust the entries of rows without versions: the entry moves to the new
            // key now (rollback and attaching put the old one back).
            let mut moved = Vec::with_capacity(rekeyed.len());
            for (position, old, key) in rekeyed {
                self.indexes[position].remove(&old, row);
                let added = self.indexes[position].insert(&key, row).then_some(key);
                moved.push((position, old, added));
            }
            let version = self.push_version(row, view, Change::Updated { before }, true);
            self.moved_keys.insert(version, moved);
            return Ok(version);
        }
        for (position, _, key) in rekeyed {
            self.indexes[position].insert(&key, row);
        }
        Ok(self.push_version(row, view, Change::Updated { before }, detached))
    }

    /// 23514 if a row of the table (its newest version) violates `check` (ALTER TABLE … ADD
    /// CHECK, before the constraint is installed).
    pub fn check_rows(&self, check: &crate::catalog::CheckDef) -> Result<()> {
        let cx = crate::sql::expr::EvalContext { params: &[], now: 0, session: None };
        let mut failed = Ok(());
        self.for_each_slot(&mut |row| {
            let values: Vec<Value> = (0..self.types.len()).map(|c| self.get(row, c)).collect();
            match check.expr.eval(&crate::sql::expr::SliceRow(&values), &cx) {
                Ok(Value::Bool(false)) => {
                    failed = Err(Error::new(
                        SqlState::CheckViolation,
                        format!("check constraint \"{}\" of relation \"{}\" is violated by some row", check.name, self.def.name),
                    ));
                    false
                }
                Err(e) => {
                    failed = Err(e);
                    false
                }
                Ok(_) => true,
            }
        });
        failed
    }

    /// 23514 unless every CHECK constraint holds for the row (true or NULL).
    fn check_constraints(&self, row: &dyn crate::sql::expr::RowAccess) -> Result<()> {
        let cx = crate::sql::expr::EvalContext { params: &[], now: 0, session: None };
        for check in &self.def.checks {
            if check.expr.eval(row, &cx)? == Value::Bool(false) {
                let values: Vec<String> = (0..self.types.len()).map(|c| row.column(c).to_text(self.types[c]).unwrap_or_else(|| "null".into())).collect();
                return Err(Error::new(
                    SqlState::CheckViolation,
                    format!("new row for relation \"{}\" violates check constraint \"{}\"", self.def.name, check.name),
                )
                .with_detail(format!("Failing row contains ({}).", values.join(", "))));
            }
        }
        Ok(())
    }

    pub(crate) fn write_values(&mut self, row: RowId, changes: &[(usize, Value)]) {
        let copies = &mut self.stats.segments_copied;
        let chunk = &mut self.chunks[row.chunk()];
        let columns = unique_mut(&mut chunk.columns);
        for (c, v) in changes {
            cow(&mut columns[*c], copies).set(row.slot(), v, &mut chunk.arenas[*c]);
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

    /// The snapshot of this table partition as `view` sees it: the segment lists, with every
    /// row whose stored version `view` does not see patched, in the snapshot's own copies of
    /// the segments, to the version it does see. This is how an analytical query sees no
    /// uncommitted change of a running transaction (HyPer §4.6) without the transaction
    /// having to finish first. Cost: proportional to the rows that have versions.
    ///
    /// With `tests` (a query's filters on this table as zone-map tests, [`RangeTest`]) it
    /// leaves out every chunk whose segment ranges show that no row it sees passes them, so
    /// that the live table never copies those chunks' segments for this snapshot.
    pub fn snapshot_for(&self, view: &TxnView, tests: &[super::RangeTest]) -> TableSnapshot {
        let mut chunks = self.snapshot();
        let mut arenas: HashMap<(usize, usize), StringArena> = HashMap::new();
        for &row in self.heads.keys() {
            let stored_deleted = self.slot_deleted(row);
            let (ci, slot) = (row.chunk(), row.slot());
            let chunk = &mut chunks[ci];
            match self.visible(row, view) {
                None if !stored_deleted => patch_deleted(chunk, slot, true),
                None => {}
                Some(version) => {
                    if stored_deleted {
                        patch_deleted(chunk, slot, false);
                    }
                    if let super::mvcc::RowVersion::Old(values) = version {
                        for (c, v) in values.iter().enumerate() {
                            if chunk.columns[c].get(slot, self.types[c]) != *v {
                                let arena = arenas.entry((ci, c)).or_default();
                                Arc::make_mut(&mut Arc::make_mut(&mut chunk.columns)[c]).set(slot, v, arena);
                            }
                        }
                    }
                }
            }
        }
        // On the snapshot's own segments: a patched column is the snapshot's copy holding
        // the values it sees, so its range is theirs.
        chunks.retain(|c| tests.iter().all(|t| t.may_match(&c.columns)));
        TableSnapshot { def: self.def.clone(), chunks }
    }

    /// Whether a slot some transaction may still read holds NULL in column `c` (the check of
    /// SET NOT NULL): a live row's newest version, including those of transactions still
    /// running, or a deleted row an older transaction still sees.
    pub fn has_null(&self, c: usize) -> bool {
        let mut found = false;
        self.for_each_slot(&mut |row| {
            found = self.get(row, c).is_null();
            !found
        });
        found
    }

    /// Installs a definition in which column `c` became NOT NULL: slots that hold no row
    /// any more get a value of the column's type in place of NULL, so that no slot of a NOT
    /// NULL column holds NULL ([`Self::has_null`] has checked the others).
    pub fn set_not_null(&mut self, def: Arc<TableDef>, c: usize) -> Result<()> {
        self.fill_dead_nulls(c);
        self.set_def(def)
    }

    /// Puts a value of column `c`'s type in place of NULL in every slot that holds no row.
    fn fill_dead_nulls(&mut self, c: usize) {
        let value = placeholder(self.types[c]);
        let copies = &mut self.stats.segments_copied;
        for chunk in &mut self.chunks {
            for slot in 0..chunk.len {
                if chunk.is_deleted(slot) && !chunk.columns[c].is_valid(slot) {
                    segment_mut(&mut chunk.columns, c, copies).set(slot, &value, &mut chunk.arenas[c]);
                }
            }
        }
    }

    /// Installs a new definition (same columns) and builds or drops indexes to match it.
    pub fn set_def(&mut self, def: Arc<TableDef>) -> Result<()> {
        debug_assert_eq!(def.columns.len(), self.def.columns.len());
        let mut indexes = Vec::with_capacity(def.indexes.len());
        let mut scans = Vec::with_capacity(def.indexes.len());
        let mut old: Vec<Option<IndexStore>> = std::mem::take(&mut self.indexes).into_iter().map(Some).collect();
        for index in &def.indexes {
            let existing = self.def.indexes.iter().position(|i| i == index);
            match existing.and_then(|p| old[p].take().map(|store| (p, store))) {
                Some((p, store)) => {
                    indexes.push(store);
                    scans.push(std::cell::Cell::new(self.scans_by_index.get(p).map_or(0, std::cell::Cell::get)));
                }
                None => {
                    indexes.push(self.build_index(index, true)?);
                    scans.push(std::cell::Cell::new(0));
                }
            }
        }
        self.indexes = indexes;
        self.scans_by_index = scans;
        self.def = def;
        self.rounds = self.def.rounds();
        Ok(())
    }

    /// Builds an index over every row version some transaction may see, checking
    /// uniqueness (and NOT NULL for a primary key) on the newest versions.
    /// Builds `index` from the rows; with `verify`, fails on a NULL primary key or a
    /// duplicate unique key among the newest live rows.
    fn build_index(&self, index: &IndexDef, verify: bool) -> Result<IndexStore> {
        let mut store = new_index(index);
        store.reserve(self.stats.live_rows as usize);
        let mut failure = None;
        let mut seen: HashMap<KeyBuf, RowId> = HashMap::new();
        self.for_each_slot(&mut |row| {
            let newest_live = verify && !self.slot_deleted(row);
            let values: Vec<Value> = index.columns.iter().map(|&c| self.get(row, c)).collect();
            if newest_live
                && index.primary
                && let Some(c) = values.iter().position(Value::is_null)
            {
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
            if newest_live && index.unique && !has_null && seen.insert(key.clone(), row).is_some() {
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
            store.insert(&key, row);
            // Older versions with other keys keep entries too, for their readers.
            for old in self.old_versions(row) {
                let mut k = KeyBuf::new();
                encode_key(index.columns.iter().map(|&c| &old[c]), &mut k);
                store.insert(&k, row);
            }
            true
        });
        match failure {
            Some(e) => Err(e),
            None => Ok(store),
        }
    }

    /// The states of a row older than the stored one (reconstructed from its versions).
    fn old_versions(&self, row: RowId) -> Vec<Vec<Value>> {
        let mut out = Vec::new();
        let Some(&head) = self.heads.get(&row) else { return out };
        let mut state = self.row_values(row);
        let mut idx = head;
        while idx != super::mvcc::NO_VERSION {
            let v = self.version(idx);
            if let Change::Updated { before, .. } = &v.change {
                for (c, val) in before {
                    state[*c] = val.clone();
                }
                out.push(state.clone());
            }
            idx = v.older;
        }
        out
    }

    /// Recovery: installs a new definition (same columns); indexes are rebuilt by
    /// [`finish_restore`](Self::finish_restore).
    pub fn restore_def(&mut self, def: Arc<TableDef>) {
        // A column that became NOT NULL (SET NOT NULL): as the live change did.
        let tightened: Vec<usize> = (0..def.columns.len().min(self.def.columns.len())).filter(|&c| self.def.columns[c].nullable && !def.columns[c].nullable).collect();
        for c in tightened {
            self.fill_dead_nulls(c);
        }
        self.indexes = def.indexes.iter().map(new_index).collect();
        self.scans_by_index = def.indexes.iter().map(|_| std::cell::Cell::new(0)).collect();
        self.def = def;
        self.rounds = self.def.rounds();
    }

    /// ALTER TABLE … ADD COLUMN: `def` is the table's definition with one more column, at the
    /// end; every slot, live or not, gets `fill` in it (the column's default, or NULL). The
    /// chunks' segment lists are copied if a snapshot shares them, so snapshots keep the
    /// columns they had.
    pub fn add_column(&mut self, def: Arc<TableDef>, fill: &Value) {
        debug_assert_eq!(def.columns.len(), self.types.len() + 1);
        let Some(column) = def.columns.last() else { return };
        let ty = column.ty;
        // A NOT NULL column never holds NULL, not even in slots without a row (the engine
        // refuses the change if a live row would get NULL).
        let placeholder_value;
        let fill = if fill.is_null() && !column.nullable {
            placeholder_value = placeholder(ty);
            &placeholder_value
        } else {
            fill
        };
        let copies = &mut self.stats.segments_copied;
        for chunk in &mut self.chunks {
            let mut arena = StringArena::default();
            let mut segment = ColumnSegment::new(ty.physical(), chunk.len.max(1));
            for _ in 0..chunk.len {
                segment.push(fill, &mut arena);
            }
            if Arc::strong_count(&chunk.columns) > 1 {
                *copies += 1;
            }
            Arc::make_mut(&mut chunk.columns).push(Arc::new(segment));
            chunk.arenas.push(arena);
        }
        self.types.push(ty);
        self.def = def;
        self.rounds = self.def.rounds();
    }

    /// ALTER TABLE … DROP COLUMN: column `c`'s segment leaves every chunk (a snapshot that
    /// shares a chunk's segment list keeps its own), the indexes `def` no longer has are
    /// dropped (the others keep their entries: keys hold values, not positions), and the
    /// before-images of the row versions lose the column and renumber the columns after it.
    /// `def` is [`TableDef::without_column`] of the current definition.
    pub fn drop_column(&mut self, def: Arc<TableDef>, c: usize) {
        debug_assert_eq!(def.columns.len() + 1, self.types.len());
        for chunk in &mut self.chunks {
            Arc::make_mut(&mut chunk.columns).remove(c);
            chunk.arenas.remove(c);
        }
        self.types.remove(c);
        let shift = |p: usize| if p > c { p - 1 } else { p };
        let mut old: Vec<Option<(IndexDef, IndexStore, u64)>> = self
            .def
            .indexes
            .iter()
            .cloned()
            .zip(std::mem::take(&mut self.indexes))
            .enumerate()
            .map(|(p, (d, store))| Some((d, store, self.scans_by_index.get(p).map_or(0, std::cell::Cell::get))))
            .collect();
        let mut indexes = Vec::with_capacity(def.indexes.len());
        let mut scans = Vec::with_capacity(def.indexes.len());
        for index in &def.indexes {
            let found = old.iter_mut().find(|o| {
                o.as_ref().is_some_and(|(d, _, _)| {
                    d.name == index.name && !d.columns.contains(&c) && d.columns.iter().map(|&p| shift(p)).eq(index.columns.iter().copied())
                })
            });
            match found.and_then(Option::take) {
                Some((_, store, n)) => {
                    indexes.push(store);
                    scans.push(std::cell::Cell::new(n));
                }
                // Not reached (`def` keeps exactly the indexes without the column); built
                // from the rows if it were.
                None => {
                    indexes.push(self.build_index(index, false).unwrap_or_else(|_| new_index(index)));
                    scans.push(std::cell::Cell::new(0));
                }
            }
        }
        self.indexes = indexes;
        self.scans_by_index = scans;
        for version in self.versions.iter_mut().flatten() {
            if let super::mvcc::Change::Updated { before } = &mut version.change {
                before.retain(|(col, _)| *col != c);
                for (col, _) in before.iter_mut() {
                    *col = shift(*col);
                }
            }
        }
        self.def = def;
        self.rounds = self.def.rounds();
    }

    /// ALTER TABLE … ALTER COLUMN … TYPE, first part (on every partition before any changes):
    /// every value of column `c` some transaction may read (the rows, including deleted ones
    /// an older transaction still sees, and the column's before-images) converts to `ty`, and
    /// each unique index on the column stays unique among the newest live rows (23505 as
    /// CREATE UNIQUE INDEX says it).
    pub fn check_column_type(&self, c: usize, ty: DataType, explicit: bool) -> Result<()> {
        let mut failure = None;
        self.for_each_slot(&mut |row| match convert_column_value(self.get(row, c), ty, explicit) {
            Ok(_) => true,
            Err(e) => {
                failure = Some(e);
                false
            }
        });
        if let Some(e) = failure {
            return Err(e);
        }
        for version in self.versions.iter().flatten() {
            if let Change::Updated { before } = &version.change {
                for (_, v) in before.iter().filter(|(col, _)| *col == c) {
                    convert_column_value(v.clone(), ty, explicit)?;
                }
            }
        }
        for index in self.def.indexes.iter().filter(|i| i.unique && i.columns.contains(&c)) {
            let mut seen: hashbrown::HashSet<KeyBuf> = hashbrown::HashSet::new();
            let mut duplicate = None;
            self.for_each_slot(&mut |row| {
                if self.slot_deleted(row) {
                    return true;
                }
                let values: Vec<Value> = index
                    .columns
                    .iter()
                    .map(|&k| if k == c { convert_column_value(self.get(row, k), ty, explicit).unwrap_or(Value::Null) } else { self.get(row, k) })
                    .collect();
                let mut key = KeyBuf::new();
                if encode_key(&values, &mut key) || seen.insert(key) {
                    return true;
                }
                duplicate = Some(values);
                false
            });
            if let Some(values) = duplicate {
                let names: Vec<&str> = index.columns.iter().map(|&k| self.def.columns[k].name.as_str()).collect();
                let texts: Vec<String> = index
                    .columns
                    .iter()
                    .zip(&values)
                    .map(|(&k, v)| v.to_text(if k == c { ty } else { self.types[k] }).unwrap_or_default())
                    .collect();
                return Err(Error::new(SqlState::UniqueViolation, format!("could not create unique index \"{}\"", index.name))
                    .with_detail(format!("Key ({})=({}) is duplicated.", names.join(", "), texts.join(", "))));
            }
        }
        Ok(())
    }

    /// ALTER TABLE … ALTER COLUMN … TYPE, second part: column `c`'s segments are rewritten as
    /// `def`'s type (a snapshot sharing a chunk's segment list keeps the old one), its
    /// before-images converted, and the indexes that include it rebuilt. A value that does not
    /// convert ([`check_column_type`](Self::check_column_type) found none that anyone may read)
    /// is in a slot nobody sees: it gets NULL, or a value of the type in a NOT NULL column.
    pub fn alter_column_type(&mut self, def: Arc<TableDef>, c: usize, explicit: bool) {
        let ty = def.columns[c].ty;
        let unreadable = if def.columns[c].nullable { Value::Null } else { placeholder(ty) };
        let convert = |v: Value| convert_column_value(v, ty, explicit).unwrap_or_else(|_| unreadable.clone());
        for ci in 0..self.chunks.len() {
            let len = self.chunks[ci].len;
            let mut arena = StringArena::default();
            let mut segment = ColumnSegment::new(ty.physical(), len.max(1));
            for slot in 0..len {
                segment.push(&convert(self.get(RowId::new(ci, slot), c)), &mut arena);
            }
            let chunk = &mut self.chunks[ci];
            Arc::make_mut(&mut chunk.columns)[c] = Arc::new(segment);
            chunk.arenas[c] = arena;
        }
        for version in self.versions.iter_mut().flatten() {
            if let Change::Updated { before } = &mut version.change {
                for (_, v) in before.iter_mut().filter(|(col, _)| *col == c) {
                    *v = convert(std::mem::replace(v, Value::Null));
                }
            }
        }
        self.types[c] = ty;
        self.def = def;
        self.rounds = self.def.rounds();
        let rebuilt: Vec<(usize, IndexStore)> = (0..self.def.indexes.len())
            .filter(|&p| self.def.indexes[p].columns.contains(&c))
            .map(|p| (p, self.build_index(&self.def.indexes[p], false).unwrap_or_else(|_| new_index(&self.def.indexes[p]))))
            .collect();
        for (p, store) in rebuilt {
            self.indexes[p] = store;
        }
    }

    /// Recovery: puts a row into its logged slot, creating chunks and slots up to it (slots
    /// in between start deleted). Indexes are rebuilt by [`finish_restore`](Self::finish_restore).
    pub fn restore_insert(&mut self, row: RowId, values: &[Value]) {
        if self.chunks.len() == row.chunk() + 1 && self.chunks[row.chunk()].len == row.slot() && values.len() == self.types.len() {
            // The common case, rows appended in order: push instead of filling and setting.
            self.chunks[row.chunk()].push_row(values, &mut self.stats.segments_copied);
            return;
        }
        self.extend_to(row);
        let copies = &mut self.stats.segments_copied;
        let chunk = &mut self.chunks[row.chunk()];
        for (c, v) in values.iter().enumerate().take(self.types.len()) {
            segment_mut(&mut chunk.columns, c, copies).set(row.slot(), v, &mut chunk.arenas[c]);
        }
        self.set_deleted(row, false);
    }

    /// Recovery: sets columns of a restored row.
    pub fn restore_update(&mut self, row: RowId, columns: &[(usize, Value)]) {
        if self.slot_in_use(row) {
            self.write_values(row, columns);
        }
    }

    /// Recovery: deletes a restored row.
    pub fn restore_delete(&mut self, row: RowId) {
        if self.slot_in_use(row) {
            self.set_deleted(row, true);
        }
    }

    /// Makes `row` an existing slot: chunks up to its chunk, slots up to it (new ones deleted).
    fn extend_to(&mut self, row: RowId) {
        while self.chunks.len() <= row.chunk() {
            if let Some(last) = self.chunks.last_mut() {
                let fill = CHUNK_ROWS - last.len;
                push_deleted_slots(last, &self.def.columns, fill);
            }
            self.chunks.push(Chunk::new(&self.types, CHUNK_ROWS));
        }
        let chunk = &mut self.chunks[row.chunk()];
        if chunk.len <= row.slot() {
            let fill = row.slot() + 1 - chunk.len;
            push_deleted_slots(chunk, &self.def.columns, fill);
        }
    }

    /// Ends recovery of this table: live counts, free slots and every index are rebuilt from
    /// the rows; no versions remain (everything restored is committed and visible to all).
    pub fn finish_restore(&mut self) -> Result<()> {
        self.heads.clear();
        self.moved_keys.clear();
        self.versions.clear();
        self.free_versions.clear();
        self.free.clear();
        let mut live = 0;
        for (ci, chunk) in self.chunks.iter().enumerate() {
            for slot in 0..chunk.len {
                if chunk.is_deleted(slot) {
                    self.free.push(RowId::new(ci, slot));
                } else {
                    live += 1;
                }
            }
        }
        self.free.reverse();
        self.stats.live_rows = live;
        // Restored rows were checked when they were first written.
        let indexes = self.def.indexes.iter().map(|i| self.build_index(i, false)).collect::<Result<Vec<_>>>()?;
        self.indexes = indexes;
        Ok(())
    }

    /// Removes every row and version (TRUNCATE; not transactional).
    pub fn truncate(&mut self) {
        self.chunks.clear();
        self.free.clear();
        self.indexes = self.def.indexes.iter().map(new_index).collect();
        self.stats.live_rows = 0;
        self.heads.clear();
        self.moved_keys.clear();
        self.versions.clear();
        self.free_versions.clear();
    }

    /// Bytes held by segments and indexes' row references (an estimate for monitoring).
    pub fn heap_bytes(&self) -> usize {
        self.chunks.iter().flat_map(|c| c.columns.iter()).map(|s| s.heap_bytes()).sum()
    }
}

/// Appends `n` deleted slots (NULL values) to a live chunk.
/// INVARIANT: a NOT NULL column holds no NULL in any slot, deleted ones included (scans hand
/// whole segments to the analytical engine, whose schema says the column has no nulls), so
/// such a column gets a placeholder of its type.
/// Calls `f` with the segments a column mask selects: column i if bit i is set (i < 63), and
/// every column from 63 on if bit 63 is. Visits the set bits only: a read of one column of a
/// wide table does not test every column.
#[inline]
fn for_each_selected(segments: &[Arc<ColumnSegment>], columns: u64, mut f: impl FnMut(&ColumnSegment)) {
    let mut bits = columns & !(1 << 63);
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        if let Some(segment) = segments.get(i) {
            f(segment);
        }
    }
    if columns & (1 << 63) != 0 {
        segments.iter().skip(63).for_each(|s| f(s));
    }
}

fn push_deleted_slots(chunk: &mut Chunk, columns: &[ColumnDef], n: usize) {
    if n == 0 {
        return;
    }
    let mut copies = 0;
    for (c, column) in columns.iter().enumerate() {
        let filler = if column.nullable { Value::Null } else { placeholder(column.ty) };
        let seg = segment_mut(&mut chunk.columns, c, &mut copies);
        for _ in 0..n {
            seg.push(&filler, &mut chunk.arenas[c]);
        }
    }
    let len = chunk.len;
    let bits = cow(chunk.deleted.get_or_insert_with(|| Arc::new(Bitmap::filled(len, false))), &mut copies);
    for _ in 0..n {
        bits.push(true);
    }
    chunk.len += n;
}

fn patch_deleted(chunk: &mut ChunkSnapshot, slot: usize, deleted: bool) {
    let len = chunk.len;
    let bits = Arc::make_mut(chunk.deleted.get_or_insert_with(|| Arc::new(Bitmap::filled(len, false))));
    if bits.get(slot) != deleted {
        bits.set(slot, deleted);
        if deleted {
            chunk.live -= 1;
        } else {
            chunk.live += 1;
        }
    }
}

fn new_index(def: &IndexDef) -> IndexStore {
    match (def.primary, def.columns.len()) {
        (true, 1) => IndexStore::new_hash(),
        (true, _) => IndexStore::new_hash_ordered(),
        (false, _) => IndexStore::new_ordered(),
    }
}

/// A value of type `ty` for slots that hold no row.
fn placeholder(ty: DataType) -> Value {
    match ty {
        DataType::Bool => Value::Bool(false),
        DataType::Int16 => Value::Int16(0),
        DataType::Int32 => Value::Int32(0),
        DataType::Int64 => Value::Int64(0),
        DataType::Float32 => Value::Float32(0.0),
        DataType::Float64 => Value::Float64(0.0),
        DataType::Decimal { scale, .. } => Value::Decimal(crate::types::Decimal { value: 0, scale }),
        DataType::Char(_) | DataType::Varchar(_) | DataType::Text => Value::Text(String::new()),
        DataType::Uuid => Value::Text(crate::types::uuid::format(&[0; 16])),
        DataType::Date => Value::Date(0),
        DataType::Timestamp => Value::Timestamp(0),
        DataType::TimestampTz => Value::TimestampTz(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ColumnDef;
    use crate::storage::mvcc::RowVersion;

    fn table() -> TableStore {
        let col = |name: &str, ty, nullable| ColumnDef { nullable, ..ColumnDef::new(name, ty) };
        TableStore::new(Arc::new(TableDef {
            id: 1,
            name: "t".into(),
            columns: vec![col("id", DataType::Int32, false), col("name", DataType::Text, true), col("v", DataType::Int64, true)],
            indexes: vec![
                IndexDef { name: "t_pkey".into(), columns: vec![0], unique: true, primary: true },
                IndexDef { name: "t_name".into(), columns: vec![1], unique: false, primary: false },
            ],
            partition_key: None,
            sequences: Vec::new(),
            checks: Vec::new(),
            comments: Vec::new(),
        }))
    }

    fn row(id: i32, name: &str, v: i64) -> Vec<Value> {
        vec![Value::Int32(id), Value::Text(name.into()), Value::Int64(v)]
    }

    /// A transaction view: id `TXN_ID_BASE + n`, snapshot `start`.
    fn txn(n: u64, start: u64) -> TxnView {
        TxnView::new(TXN_ID_BASE + n, start)
    }

    /// Inserts and commits at `ts`.
    fn committed_insert(t: &mut TableStore, values: &[Value], ts: u64) -> RowId {
        let (r, v) = t.insert(values, &txn(999, ts - 1)).unwrap();
        t.commit_version(v, ts);
        r
    }

    fn pk_rows(t: &TableStore, id: i32) -> Vec<RowId> {
        let mut k = KeyBuf::new();
        encode_key(&[Value::Int32(id)], &mut k);
        let mut rows = vec![];
        t.index_store(0).scan_prefix(&k, &mut |_, r| {
            rows.push(r);
            true
        });
        rows
    }

    #[test]
    fn insert_enforces_keys_and_not_null() {
        let mut t = table();
        committed_insert(&mut t, &row(1, "a", 10), 1);
        let dup = t.insert(&row(1, "b", 20), &txn(1, 1)).unwrap_err();
        assert_eq!(dup.state, SqlState::UniqueViolation);
        assert_eq!(dup.detail.as_deref(), Some("Key (id)=(1) already exists."));
        let null = t.insert(&[Value::Null, Value::Null, Value::Null], &txn(1, 1)).unwrap_err();
        assert_eq!(null.state, SqlState::NotNullViolation);
        assert_eq!(t.live_rows(), 1);
    }

    #[test]
    fn uncommitted_key_is_a_conflict_for_others() {
        let mut t = table();
        t.insert(&row(1, "a", 10), &txn(1, 0)).unwrap();
        let e = t.insert(&row(1, "b", 20), &txn(2, 0)).unwrap_err();
        assert_eq!(e.state, SqlState::SerializationFailure);
    }

    #[test]
    fn readers_see_their_snapshot() {
        let mut t = table();
        let r = committed_insert(&mut t, &row(1, "a", 10), 5);
        let before = txn(1, 5);
        assert_eq!(t.visible(r, &txn(2, 4)), None, "inserted after that snapshot");
        let writer = txn(3, 5);
        let v = t.update(r, &[(2, Value::Int64(11))], &writer).unwrap();
        assert_eq!(t.visible(r, &writer), Some(RowVersion::Current));
        assert_eq!(t.visible_values(r, &before).unwrap()[2], Value::Int64(10), "uncommitted change undone");
        t.commit_version(v, 6);
        assert_eq!(t.visible_values(r, &before).unwrap()[2], Value::Int64(10), "committed after the snapshot");
        assert_eq!(t.visible_values(r, &txn(4, 6)).unwrap()[2], Value::Int64(11));
        // The old reader may not write the row any more: first updater wins.
        let e = t.update(r, &[(2, Value::Int64(12))], &before).unwrap_err();
        assert_eq!(e.state, SqlState::SerializationFailure);
    }

    #[test]
    fn rollback_restores_rows_and_index_entries() {
        let mut t = table();
        let r = committed_insert(&mut t, &row(1, "a", 10), 1);
        let w = txn(1, 1);
        let v1 = t.update(r, &[(0, Value::Int32(7)), (1, Value::Text("z".into()))], &w).unwrap();
        let (r2, v2) = t.insert(&row(2, "b", 20), &w).unwrap();
        let (r3, v3) = t.insert(&row(3, "c", 30), &w).unwrap();
        let v4 = t.delete(r3, &w).unwrap();
        assert_eq!(pk_rows(&t, 7), vec![r]);
        for v in [v4, v3, v2, v1] {
            t.rollback_version(v).unwrap();
        }
        assert_eq!(t.row_values(r), row(1, "a", 10));
        assert_eq!(pk_rows(&t, 1), vec![r]);
        assert!(pk_rows(&t, 7).is_empty() && pk_rows(&t, 2).is_empty() && pk_rows(&t, 3).is_empty());
        assert_eq!(t.index_store(1).len(), 1);
        assert!(!t.is_live(r2) && !t.is_live(r3));
        assert_eq!(t.live_rows(), 1);
        assert_eq!(t.version_count(), 1, "only the committed insert's version is left");
    }

    /// The rows index `position` holds under the one-column key `v`.
    fn rows_under(t: &TableStore, position: usize, v: Value) -> Vec<RowId> {
        let mut k = KeyBuf::new();
        encode_key(&[v], &mut k);
        let mut rows = vec![];
        t.index_store(position).scan_prefix(&k, &mut |_, r| {
            rows.push(r);
            true
        });
        rows.sort();
        rows
    }

    #[test]
    fn a_detached_transaction_rolls_back_to_where_it_began() {
        let mut t = table();
        let a = committed_insert(&mut t, &row(1, "a", 10), 1);
        let b = committed_insert(&mut t, &row(2, "b", 20), 2);
        for v in t.versions.iter().flatten().map(|v| v.row).collect::<Vec<_>>() {
            let idx = t.heads[&v];
            t.collect_version(idx);
        }
        assert!(t.heads.is_empty());
        let w = TxnView::detached(TXN_ID_BASE + 1, 2);
        // Rekeys in both indexes, back and forth, a second change of the same row, an insert
        // and a delete.
        let undo = vec![
            t.update(a, &[(0, Value::Int32(7)), (1, Value::Text("z".into()))], &w).unwrap(),
            t.update(a, &[(1, Value::Text("a".into()))], &w).unwrap(),
            t.update(a, &[(2, Value::Int64(11))], &w).unwrap(),
            t.insert(&row(3, "c", 30), &w).unwrap().1,
            t.delete(b, &w).unwrap(),
        ];
        assert!(t.heads.is_empty(), "detached versions stay out of the chains");
        assert_eq!(t.lock(a, &w).unwrap(), None);
        // While it runs, the old key finds nothing: the entry moved.
        assert!(rows_under(&t, 0, Value::Int32(1)).is_empty());
        assert_eq!(rows_under(&t, 0, Value::Int32(7)), vec![a]);
        assert_eq!(rows_under(&t, 1, Value::Text("a".into())), vec![a]);
        assert!(rows_under(&t, 1, Value::Text("z".into())).is_empty());
        assert_eq!(t.visible_values(a, &w).unwrap(), row(7, "a", 11));
        assert_eq!(t.visible(b, &w), None);
        for v in undo.into_iter().rev() {
            t.rollback_version(v).unwrap();
        }
        assert_eq!(t.row_values(a), row(1, "a", 10));
        assert_eq!(rows_under(&t, 0, Value::Int32(1)), vec![a]);
        assert!(rows_under(&t, 0, Value::Int32(7)).is_empty());
        assert_eq!(rows_under(&t, 1, Value::Text("a".into())), vec![a]);
        assert!(rows_under(&t, 1, Value::Text("z".into())).is_empty());
        assert!(t.is_live(b) && rows_under(&t, 0, Value::Int32(3)).is_empty());
        assert_eq!((t.index_store(0).len(), t.index_store(1).len()), (2, 2));
        assert_eq!(t.live_rows(), 2);
        assert_eq!(t.version_count(), 0);
        assert!(t.moved_keys.is_empty());
    }

    #[test]
    fn a_detached_commit_is_forgotten_or_attached_for_older_readers() {
        for attach in [false, true] {
            let mut t = table();
            let a = committed_insert(&mut t, &row(1, "a", 10), 1);
            let b = committed_insert(&mut t, &row(2, "b", 20), 2);
            for r in [a, b] {
                let idx = t.heads[&r];
                t.collect_version(idx);
            }
            let w = TxnView::detached(TXN_ID_BASE + 1, 2);
            let undo = [
                t.update(a, &[(0, Value::Int32(7))], &w).unwrap(),
                t.update(a, &[(0, Value::Int32(8))], &w).unwrap(),
                t.delete(b, &w).unwrap(),
                t.insert(&row(3, "c", 30), &w).unwrap().1,
            ];
            if !attach {
                undo.iter().for_each(|&v| t.forget_version(v));
                assert_eq!(t.version_count(), 0);
                assert!(rows_under(&t, 0, Value::Int32(1)).is_empty() && rows_under(&t, 0, Value::Int32(2)).is_empty());
                assert_eq!(rows_under(&t, 0, Value::Int32(8)), vec![a]);
                assert_eq!(t.free, vec![b], "the deleted row's slot is free");
                continue;
            }
            // A reader whose snapshot is older than the commit: the versions join the chains,
            // and the old keys' entries come back for it.
            undo.iter().for_each(|&v| t.attach_version(v));
            undo.iter().for_each(|&v| t.commit_version(v, 3));
            let old = txn(5, 2);
            assert_eq!(t.visible_values(a, &old).unwrap(), row(1, "a", 10));
            assert_eq!(t.visible_values(b, &old).unwrap(), row(2, "b", 20));
            assert_eq!(rows_under(&t, 0, Value::Int32(1)), vec![a]);
            assert_eq!(rows_under(&t, 0, Value::Int32(7)), vec![a]);
            assert_eq!(t.visible_values(a, &txn(6, 3)).unwrap(), row(8, "a", 10));
            // Once the reader is gone, collection leaves the newest state's entries only.
            undo.iter().for_each(|&v| t.collect_version(v));
            assert_eq!(t.version_count(), 0);
            assert!(rows_under(&t, 0, Value::Int32(1)).is_empty() && rows_under(&t, 0, Value::Int32(7)).is_empty());
            assert!(rows_under(&t, 0, Value::Int32(2)).is_empty());
            assert_eq!(rows_under(&t, 0, Value::Int32(8)), vec![a]);
        }
    }

    #[test]
    fn a_row_with_versions_gets_a_linked_change_from_a_detached_transaction() {
        let mut t = table();
        let a = committed_insert(&mut t, &row(1, "a", 10), 1);
        // The insert's version is still kept (an older reader, or its redo record).
        let w = TxnView::detached(TXN_ID_BASE + 1, 1);
        let v = t.update(a, &[(0, Value::Int32(7))], &w).unwrap();
        assert!(!t.is_detached(v));
        assert_eq!(t.heads[&a], v);
        assert_eq!(rows_under(&t, 0, Value::Int32(1)), vec![a], "a linked update keeps the old key's entry");
        t.rollback_version(v).unwrap();
        assert_eq!(t.row_values(a), row(1, "a", 10));
        assert!(rows_under(&t, 0, Value::Int32(7)).is_empty());
    }

    #[test]
    fn garbage_collection_drops_old_keys_and_frees_deleted_slots() {
        let mut t = table();
        let r = committed_insert(&mut t, &row(1, "a", 10), 1);
        let v = t.update(r, &[(0, Value::Int32(2))], &txn(1, 1)).unwrap();
        t.commit_version(v, 2);
        assert_eq!(pk_rows(&t, 1), vec![r], "the old key stays for older readers");
        // Collect in commit order: the insert, then the update.
        let insert_version = t.version(t.heads[&r]).older;
        t.collect_version(insert_version);
        t.collect_version(v);
        assert!(pk_rows(&t, 1).is_empty());
        assert_eq!(pk_rows(&t, 2), vec![r]);
        let d = t.delete(r, &txn(2, 2)).unwrap();
        t.commit_version(d, 3);
        t.collect_version(d);
        assert!(pk_rows(&t, 2).is_empty());
        let r2 = committed_insert(&mut t, &row(5, "e", 50), 4);
        assert_eq!(r2, r, "the freed slot is reused");
        assert_eq!(t.version_count(), 1);
    }

    #[test]
    fn snapshot_keeps_its_state_and_segments_copy_once() {
        let mut t = table();
        let w = txn(1, 0);
        let ids: Vec<RowId> = (0..3 * CHUNK_ROWS as i32).map(|i| t.insert(&row(i, "some longer name value", i as i64), &w).unwrap().0).collect();
        let snap = t.snapshot();
        let copies_before = t.stats().segments_copied;
        // Two writes to the same segment of chunk 0, one to chunk 2.
        t.update(ids[0], &[(2, Value::Int64(-1))], &w).unwrap();
        t.update(ids[1], &[(2, Value::Int64(-2))], &w).unwrap();
        t.update(ids[2 * CHUNK_ROWS], &[(2, Value::Int64(-3))], &w).unwrap();
        assert_eq!(t.stats().segments_copied - copies_before, 2);
        assert_eq!(snap[0].columns[2].get(0, DataType::Int64), Value::Int64(0));
        assert_eq!(t.get(ids[0], 2), Value::Int64(-1));
        drop(snap);
        t.update(ids[3], &[(2, Value::Int64(-4))], &w).unwrap();
        assert_eq!(t.stats().segments_copied - copies_before, 2, "no copy once the snapshot is gone");
    }

    #[test]
    fn snapshot_for_a_view_reverts_what_it_does_not_see() {
        let mut t = table();
        let a = committed_insert(&mut t, &row(1, "a", 10), 1);
        let b = committed_insert(&mut t, &row(2, "a long name for the string blocks", 20), 2);
        let w = txn(1, 2);
        t.update(a, &[(1, Value::Text("changed to a longer string value".into()))], &w).unwrap();
        t.delete(b, &w).unwrap();
        t.insert(&row(3, "c", 30), &w).unwrap();
        let others = t.snapshot_for(&TxnView::committed(), &[]);
        assert_eq!(others.rows(), vec![row(1, "a", 10), row(2, "a long name for the string blocks", 20)]);
        let own = t.snapshot_for(&w, &[]);
        assert_eq!(own.rows(), vec![row(1, "changed to a longer string value", 10), row(3, "c", 30)]);
    }

    #[test]
    fn building_a_unique_index_reports_duplicates() {
        let mut t = table();
        committed_insert(&mut t, &row(1, "same", 1), 1);
        committed_insert(&mut t, &row(2, "same", 2), 2);
        let mut def = (**t.def()).clone();
        def.indexes.push(IndexDef { name: "u".into(), columns: vec![1], unique: true, primary: false });
        let err = t.set_def(Arc::new(def)).unwrap_err();
        assert_eq!(err.state, SqlState::UniqueViolation);
        assert_eq!(err.detail.as_deref(), Some("Key (name)=(same) is duplicated."));
    }
}

