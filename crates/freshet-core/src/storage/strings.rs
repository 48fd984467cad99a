//! Strings in Arrow's view layout: 16-byte views, short strings inline, long ones in
//! append-only byte blocks.
//!
//! A view is a `u128` (little endian): bytes 0..4 the length; for strings of at most 12 bytes,
//! bytes 4..16 hold the string itself; otherwise bytes 4..8 hold its first four bytes, 8..12
//! the index of its block in the segment's block list, 12..16 its offset in that block. An
//! update writes a new view, so the column never moves; the bytes of the old string stay in
//! their block until the chunk is rewritten.
//!
//! # Blocks and their one writer
//!
//! A [`StringBlock`] is a fixed-capacity allocation that only grows at its end. Its bytes below
//! the published length never change again, so any number of snapshots may read that prefix
//! while the partition's executor appends past it. Exactly one [`StringArena`] (owned by the
//! live chunk, never by a snapshot, and not `Clone`) appends to a block; that is the invariant
//! that makes the unsynchronised writes sound. The published length is stored with `Release`
//! after the bytes are written and read with `Acquire`, so a reader on another thread that
//! sees a length also sees the bytes below it.

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Strings up to this many bytes live inside their view.
pub const INLINE_LEN: usize = 12;
const MIN_BLOCK: usize = 4 * 1024;
const MAX_BLOCK: usize = 1024 * 1024;

/// A fixed-capacity, append-only byte buffer shared between the live chunk and snapshots.
pub struct StringBlock {
    ptr: NonNull<u8>,
    capacity: usize,
    len: AtomicUsize,
}

// SAFETY: the block owns its allocation. Bytes below `len` are immutable once published and
// may be read from any thread; bytes at and above `len` are written only by the single
// `StringArena` that created the block (see the module documentation).
unsafe impl Send for StringBlock {}
// SAFETY: as above; shared access only ever reads the published prefix.
unsafe impl Sync for StringBlock {}

impl StringBlock {
    fn with_capacity(capacity: usize) -> Arc<StringBlock> {
        let layout = Layout::array::<u8>(capacity.max(1)).expect("block size fits a layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        Arc::new(StringBlock { ptr, capacity: capacity.max(1), len: AtomicUsize::new(0) })
    }

    /// The published bytes. They never change once published.
    pub fn bytes(&self) -> &[u8] {
        let len = self.len.load(Ordering::Acquire);
        // SAFETY: bytes below the published length were fully written before the length was
        // stored with Release (seen here through Acquire) and are never written again.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), len) }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Appends `data` if it fits. Must only be called by the block's one `StringArena`.
    fn append(&self, data: &[u8]) -> Option<u32> {
        let len = self.len.load(Ordering::Relaxed);
        if self.capacity - len < data.len() {
            return None;
        }
        // SAFETY: [len, len + data.len()) lies inside the allocation and above the published
        // length, so no reader looks at it; the single-writer invariant means no other thread
        // writes it either.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(len), data.len()) };
        self.len.store(len + data.len(), Ordering::Release);
        Some(len as u32)
    }
}

impl Drop for StringBlock {
    fn drop(&mut self) {
        let layout = Layout::array::<u8>(self.capacity).expect("layout was valid at allocation");
        // SAFETY: allocated in `with_capacity` with this layout; dropped once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
    }
}

impl std::fmt::Debug for StringBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StringBlock({}/{})", self.len.load(Ordering::Relaxed), self.capacity)
    }
}

/// The views and blocks of one string column segment. Cloning copies the views and shares
/// the blocks (the copy-on-write of a string segment).
#[derive(Clone, Debug, Default)]
pub struct StringColumn {
    pub views: Vec<u128>,
    pub blocks: Vec<Arc<StringBlock>>,
}

impl StringColumn {
    pub fn with_capacity(rows: usize) -> Self {
        StringColumn { views: Vec::with_capacity(rows), blocks: Vec::new() }
    }

    /// The string of view `i`.
    #[inline]
    pub fn get(&self, i: usize) -> &str {
        let view = &self.views[i];
        let len = (*view as u32) as usize;
        let bytes: &[u8] = if len <= INLINE_LEN {
            // SAFETY: a view is 16 plain bytes; inline strings occupy bytes 4..4+len.
            let raw = unsafe { std::slice::from_raw_parts((view as *const u128).cast::<u8>(), 16) };
            &raw[4..4 + len]
        } else {
            let block = (*view >> 64) as u32 as usize;
            let offset = (*view >> 96) as u32 as usize;
            &self.blocks[block].bytes()[offset..offset + len]
        };
        // SAFETY: only `&str` data is ever written into views and blocks.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    /// Asks for the bytes of string `i` when they are not in its view (the first and last
    /// cache line they touch); nothing for a slot past the end.
    pub fn prefetch_bytes(&self, i: usize) {
        let Some(view) = self.views.get(i) else { return };
        let len = (*view as u32) as usize;
        if len <= INLINE_LEN {
            return;
        }
        let block = (*view >> 64) as u32 as usize;
        let offset = (*view >> 96) as u32 as usize;
        if let Some(b) = self.blocks.get(block) {
            let start = b.ptr.as_ptr().wrapping_add(offset);
            super::prefetch_address(start);
            super::prefetch_address(start.wrapping_add(len - 1));
        }
    }

    pub fn heap_bytes(&self) -> usize {
        self.views.capacity() * 16
    }
}

/// Builds the view of a string; long strings are appended to the arena's current block.
fn make_view(s: &str, arena: &mut StringArena, column: &mut StringColumn) -> u128 {
    let bytes = s.as_bytes();
    let len = bytes.len();
    if len <= INLINE_LEN {
        let mut raw = [0u8; 16];
        raw[..4].copy_from_slice(&(len as u32).to_le_bytes());
        raw[4..4 + len].copy_from_slice(bytes);
        return u128::from_le_bytes(raw);
    }
    let (block, offset) = arena.append(bytes, column);
    let mut prefix = [0u8; 4];
    prefix.copy_from_slice(&bytes[..4]);
    (len as u32 as u128)
        | (u32::from_le_bytes(prefix) as u128) << 32
        | (block as u128) << 64
        | (offset as u128) << 96
}

/// The single writer of a chunk column's blocks. Lives in the live chunk only.
#[derive(Debug, Default)]
pub struct StringArena {
    /// Index in the column's block list and the block itself.
    current: Option<(u32, Arc<StringBlock>)>,
    /// Bytes of long strings that no view references any more.
    pub dead_bytes: usize,
}

impl StringArena {
    fn append(&mut self, bytes: &[u8], column: &mut StringColumn) -> (u32, u32) {
        if let Some((index, block)) = &self.current
            && let Some(offset) = block.append(bytes) {
                return (*index, offset);
            }
        let last = self.current.as_ref().map_or(0, |(_, b)| b.capacity());
        let capacity = (last * 2).clamp(MIN_BLOCK, MAX_BLOCK).max(bytes.len());
        let block = StringBlock::with_capacity(capacity);
        let index = column.blocks.len() as u32;
        column.blocks.push(block.clone());
        let offset = block.append(bytes).expect("a new block holds the string");
        self.current = Some((index, block));
        (index, offset)
    }

    pub fn push(&mut self, column: &mut StringColumn, s: &str) {
        let view = make_view(s, self, column);
        column.views.push(view);
    }

    pub fn set(&mut self, column: &mut StringColumn, i: usize, s: &str) {
        let old_len = (column.views[i] as u32) as usize;
        if old_len > INLINE_LEN {
            self.dead_bytes += old_len;
        }
        column.views[i] = make_view(s, self, column);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_strings_round_trip() {
        let mut col = StringColumn::default();
        let mut arena = StringArena::default();
        let long = "a string that is longer than twelve bytes";
        arena.push(&mut col, "short");
        arena.push(&mut col, long);
        arena.push(&mut col, "");
        arena.push(&mut col, "exactly12byt");
        assert_eq!(col.get(0), "short");
        assert_eq!(col.get(1), long);
        assert_eq!(col.get(2), "");
        assert_eq!(col.get(3), "exactly12byt");
        assert_eq!(col.blocks.len(), 1);
        // The view carries the prefix where Arrow expects it.
        assert_eq!(&((col.views[1] >> 32) as u32).to_le_bytes(), b"a st");
    }

    #[test]
    fn a_copy_keeps_its_strings_while_the_writer_appends() {
        let mut col = StringColumn::default();
        let mut arena = StringArena::default();
        for i in 0..2000 {
            arena.push(&mut col, &format!("value number {i} with padding"));
        }
        let snapshot = col.clone();
        for i in 0..2000 {
            arena.set(&mut col, i, &format!("updated value {i} with more padding"));
        }
        assert!(col.blocks.len() > snapshot.blocks.len());
        assert_eq!(snapshot.get(1999), "value number 1999 with padding");
        assert_eq!(col.get(1999), "updated value 1999 with more padding");
        assert!(arena.dead_bytes > 0);
    }
}
