//! Columnar in-memory storage with copy-on-write column segments.
//!
//! A table is split into partitions; in each partition its rows live in [`CHUNK_ROWS`]-slot
//! chunks, and inside a chunk each column is a [`ColumnSegment`]: a contiguous typed array with
//! a validity bitmap, or 16-byte string views over append-only blocks. Segments are
//! reference-counted; a snapshot ([`TableSnapshot`]) is a copy of the lists of segment
//! pointers, and the executor copies a segment before its first write after a snapshot shares
//! it. Nothing here locks: a [`TableStore`] belongs to one executor thread, and what a snapshot
//! holds is immutable.
//!
//! Non-goals here: MVCC versions (the transaction layer keeps before-images), durability (the
//! log and checkpoints), and compaction of string blocks (dead bytes are counted, not yet
//! reclaimed).

pub mod bitmap;
pub mod index;
pub mod keytable;
pub mod mvcc;
pub mod segment;
pub mod snapshot;
pub mod strings;
pub mod table;

pub use bitmap::Bitmap;
pub use index::{IndexStore, KeyBuf};
pub use segment::{ColumnSegment, SegmentValues, ValueBitmaps, BITMAP_VALUES};
pub use snapshot::{ChunkSnapshot, DbSnapshot, RangeTest, LiveSnapshot, SnapshotInfo, SnapshotMemory, SnapshotMode, SnapshotScope, TableSnapshot};
pub use strings::{StringBlock, StringColumn};
pub use mvcc::{Change, RowVersion, Ts, TxnView, TXN_ID_BASE};
pub use table::{TableStats, TableStore};

#[cfg(not(target_endian = "little"))]
compile_error!("storage hands its arrays to Arrow as little-endian bytes");

/// Slots per chunk. A segment of 8-byte values is 64 KiB: cheap to copy on write, and one
/// chunk is one analytical scan batch (DataFusion's default batch size).
pub const CHUNK_ROWS: usize = 8192;

/// A stable row address: chunk number and slot within the chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowId(pub u64);

impl RowId {
    #[inline]
    pub fn new(chunk: usize, slot: usize) -> Self {
        RowId(((chunk as u64) << 32) | slot as u64)
    }

    #[inline]
    pub fn chunk(self) -> usize {
        (self.0 >> 32) as usize
    }

    #[inline]
    pub fn slot(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }
}

/// Asks the processor to bring the cache line holding `at` into its caches. A hint: it never
/// faults and changes nothing the program can observe, whatever the address.
#[inline]
pub(crate) fn prefetch_address<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` only hints; it reads nothing and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}
