//! What a snapshot of a table holds: for every chunk, its segment pointers, its deleted-slot
//! bitmap and its length at the moment the snapshot was taken. All of it is immutable; the
//! live table copies a segment before writing to one a snapshot shares.

use std::sync::Arc;

use super::bitmap::Bitmap;
use super::segment::ColumnSegment;
use crate::catalog::TableDef;
use crate::types::Value;

#[derive(Clone, Debug)]
pub struct ChunkSnapshot {
    pub columns: Vec<Arc<ColumnSegment>>,
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
