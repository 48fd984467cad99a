//! What a snapshot of a table holds: for every chunk, its segment pointers, its deleted-slot
//! bitmap and its length at the moment the snapshot was taken. All of it is immutable; the
//! live table copies a segment before writing to one a snapshot shares.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bitmap::Bitmap;
use super::segment::ColumnSegment;
use super::Ts;
use crate::catalog::{TableDef, TableId};
use crate::types::Value;

#[derive(Clone, Debug)]
pub struct ChunkSnapshot {
    /// The column segments (the list is shared with the live chunk until it writes).
    pub columns: Arc<Vec<Arc<ColumnSegment>>>,
    /// Deleted slots (`None`: none deleted).
    pub deleted: Option<Arc<Bitmap>>,
    /// Slots in use; slots at and past `len` do not exist in this snapshot.
    pub len: usize,
    /// Slots in use and not deleted.
    pub live: usize,
}

impl ChunkSnapshot {
    pub fn is_deleted(&self, slot: usize) -> bool {
        self.deleted.as_ref().is_some_and(|d| d.get(slot))
    }
}

/// A zone-map test: rows can pass a query's filter only if column `column` (its position in
/// the table) lies in `lo..=hi`. An integer, date or timestamp segment knows the smallest and
/// largest value it holds ([`ColumnSegment::int_range`]); a chunk whose range lies outside
/// holds no row the filter lets through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeTest {
    pub column: usize,
    pub lo: i64,
    pub hi: i64,
}

impl RangeTest {
    /// Whether a chunk with these segments may hold a row this test lets through (a column
    /// without a range, or not there, may).
    pub fn may_match(&self, columns: &[Arc<ColumnSegment>]) -> bool {
        match columns.get(self.column).and_then(|c| c.int_range()) {
            Some((min, max)) => max >= self.lo && min <= self.hi,
            None => true,
        }
    }
}

/// A transaction-consistent image of one table, across all its partitions.
#[derive(Clone, Debug)]
pub struct TableSnapshot {
    pub def: Arc<TableDef>,
    pub chunks: Vec<ChunkSnapshot>,
}

impl TableSnapshot {
    pub fn live_rows(&self) -> usize {
        self.chunks.iter().map(|c| c.live).sum()
    }

    /// Every live row as values, in storage order (for tests and small tables).
    pub fn rows(&self) -> Vec<Vec<Value>> {
        let types = self.def.types();
        let mut out = Vec::with_capacity(self.live_rows());
        for chunk in &self.chunks {
            for slot in (0..chunk.len).filter(|s| !chunk.is_deleted(*s)) {
                out.push(chunk.columns.iter().zip(&types).map(|(seg, ty)| seg.get(slot, *ty)).collect());
            }
        }
        out
    }
}

impl TableSnapshot {
    /// How much of this snapshot's segment memory the live table still shares, and how much
    /// only snapshots hold: a segment the table has since copied (written after the snapshot
    /// took it) or dropped is held by snapshots alone.
    pub fn memory(&self) -> SnapshotMemory {
        let mut m = SnapshotMemory::default();
        for chunk in &self.chunks {
            // A shared list shares all its segments.
            let list_shared = Arc::strong_count(&chunk.columns) > 1;
            for seg in chunk.columns.iter() {
                let bytes = seg.heap_bytes() as u64;
                if list_shared || Arc::strong_count(seg) > 1 {
                    m.shared_bytes += bytes;
                } else {
                    m.copied_bytes += bytes;
                }
            }
        }
        m
    }
}

/// Segment memory of a snapshot (see [`TableSnapshot::memory`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotMemory {
    /// Bytes still shared with the live tables (or with another snapshot).
    pub shared_bytes: u64,
    /// Bytes held only by this snapshot: what the live tables copied or dropped since.
    pub copied_bytes: u64,
}

/// What a database snapshot was taken for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotScope {
    /// Committed state, shared by analytical queries that accept its age (a query session).
    Shared,
    /// What one transaction sees, pinned for the queries of its block.
    Transaction,
    /// What one statement of a transaction that has written sees (its own changes included).
    Statement,
    /// Committed state for one query outside a transaction block: only the chunks its
    /// filters may need, so that no other query shares it.
    Query,
}

impl SnapshotScope {
    pub fn name(self) -> &'static str {
        match self {
            SnapshotScope::Shared => "shared",
            SnapshotScope::Transaction => "transaction",
            SnapshotScope::Statement => "statement",
            SnapshotScope::Query => "query",
        }
    }
}

/// A transaction-consistent snapshot of several tables, taken at one moment and shared (by
/// `Arc`) by every query that reads it; it is freed when the last of them ends.
#[derive(Debug)]
pub struct DbSnapshot {
    /// Unique in the process, increasing.
    pub id: u64,
    pub scope: SnapshotScope,
    /// When it was taken: microseconds since 1970 (for display) and the monotonic instant
    /// (for ages).
    pub taken_at: i64,
    pub taken: Instant,
    /// The commit clock when it was taken: a committed snapshot holds every commit stamped
    /// at or below it.
    pub clock: Ts,
    /// The catalog version its tables belong to.
    pub catalog_version: u64,
    pub tables: HashMap<TableId, TableSnapshot>,
}

impl DbSnapshot {
    pub fn age(&self) -> Duration {
        self.taken.elapsed()
    }

    /// Whether it holds every table of `tables`, with the same definitions.
    pub fn covers(&self, tables: &[Arc<TableDef>]) -> bool {
        tables.iter().all(|t| self.tables.get(&t.id).is_some_and(|s| Arc::ptr_eq(&s.def, t) || s.def.as_ref() == t.as_ref()))
    }

    pub fn memory(&self) -> SnapshotMemory {
        self.tables.values().map(TableSnapshot::memory).fold(SnapshotMemory::default(), |a, b| SnapshotMemory {
            shared_bytes: a.shared_bytes + b.shared_bytes,
            copied_bytes: a.copied_bytes + b.copied_bytes,
        })
    }
}

/// How a snapshot was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotMode {
    /// Software copy-on-write of column segments (the default).
    Cow,
    /// A fork()ed child process holding the memory image (HyPer's original mechanism).
    Fork,
}

impl SnapshotMode {
    pub fn name(self) -> &'static str {
        match self {
            SnapshotMode::Cow => "cow",
            SnapshotMode::Fork => "fork",
        }
    }

    pub fn parse(s: &str) -> Option<SnapshotMode> {
        match s.trim().to_lowercase().as_str() {
            "cow" => Some(SnapshotMode::Cow),
            "fork" => Some(SnapshotMode::Fork),
            _ => None,
        }
    }
}

/// One row of `freshet_snapshots`.
#[derive(Clone, Debug)]
pub struct SnapshotInfo {
    pub id: u64,
    pub mode: SnapshotMode,
    pub scope: &'static str,
    /// Microseconds since 1970.
    pub created_at: i64,
    pub age: Duration,
    pub tables: usize,
    /// Bytes the snapshot still shares with the live database, and bytes that were copied
    /// (written by transactions) since it was taken and are now held for it alone.
    pub shared_bytes: u64,
    pub copied_bytes: u64,
    /// The child process of a fork-mode snapshot.
    pub pid: Option<i32>,
}

/// A snapshot the registry can list.
pub trait LiveSnapshot: Send + Sync {
    fn info(&self) -> SnapshotInfo;
}

impl LiveSnapshot for DbSnapshot {
    fn info(&self) -> SnapshotInfo {
        let memory = self.memory();
        SnapshotInfo {
            id: self.id,
            mode: SnapshotMode::Cow,
            scope: self.scope.name(),
            created_at: self.taken_at,
            age: self.age(),
            tables: self.tables.len(),
            shared_bytes: memory.shared_bytes,
            copied_bytes: memory.copied_bytes,
            pid: None,
        }
    }
}
