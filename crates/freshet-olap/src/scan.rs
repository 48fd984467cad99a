//! Snapshot chunks as Arrow record batches, without copying.
//!
//! Every fixed-width segment becomes an Arrow buffer that points into the segment's own
//! memory and keeps the segment alive through its `Arc` (Arrow's custom allocation). String
//! segments become `StringViewArray`s over the same views and blocks. Validity bitmaps are
//! shared the same way. The only copy is for chunks with deleted slots, or where the scan
//! applies a filter itself ([`selection`]): the rows that pass are copied (the provider
//! gathers them from consecutive chunks into full batches); a chunk whose every slot passes
//! is never copied.
//!
//! A filter on a full chunk's column with few distinct values reads the segment's value
//! bitmaps ([`ColumnSegment::value_bitmaps`]: one bit per slot for each value it accepts)
//! instead of the values; other segments are compared value by value in their own width.
//!
//! Soundness: a snapshot's segments are immutable (the live table copies a segment before it
//! writes to one a snapshot shares), and string blocks never change below their published
//! length, so the memory Arrow sees never changes while Arrow holds it.

use std::ptr::NonNull;
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array, Int16Array, Int32Array,
    Int64Array, StringViewArray, TimestampMicrosecondArray,
};
use datafusion::arrow::buffer::{BooleanBuffer, Buffer, NullBuffer, ScalarBuffer};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::error::Result;
use freshet_core::storage::{Bitmap, ChunkSnapshot, CHUNK_ROWS, ColumnSegment, RangeTest, SegmentValues, StringBlock};
use freshet_core::types::DataType;

/// An Arrow buffer over `len` bytes at `ptr`, kept alive by `owner`.
///
/// # Safety
/// `ptr..ptr+len` must stay valid and unchanged for as long as `owner` lives.
unsafe fn shared_buffer<T: Send + Sync + std::panic::RefUnwindSafe + 'static>(ptr: *const u8, len: usize, owner: Arc<T>) -> Buffer {
    let ptr = NonNull::new(ptr as *mut u8).unwrap_or(NonNull::dangling());
    // SAFETY: guaranteed by the caller.
    unsafe { Buffer::from_custom_allocation(ptr, len, owner) }
}

fn slice_buffer<T: Copy>(values: &[T], owner: &Arc<ColumnSegment>) -> Buffer {
    // SAFETY: `values` lives inside the segment, which `owner` keeps alive, and a segment a
    // snapshot holds is never written again (the live table copies it first).
    unsafe { shared_buffer(values.as_ptr().cast(), std::mem::size_of_val(values), owner.clone()) }
}

fn bitmap_buffer(bits: &Bitmap, owner: &Arc<ColumnSegment>) -> Buffer {
    // SAFETY: as in `slice_buffer`; the bitmap is part of the immutable segment.
    unsafe { shared_buffer(bits.as_bytes().as_ptr(), bits.as_bytes().len(), owner.clone()) }
}

fn block_buffer(block: &Arc<StringBlock>) -> Buffer {
    let bytes = block.bytes();
    // SAFETY: the published prefix of a block never changes and the block lives as long as
    // the Arc that `owner` holds.
    unsafe { shared_buffer(bytes.as_ptr(), bytes.len(), block.clone()) }
}

fn typed<T>(values: &[T], len: usize, owner: &Arc<ColumnSegment>) -> ScalarBuffer<T>
where
    T: Copy + datafusion::arrow::datatypes::ArrowNativeType,
{
    ScalarBuffer::new(slice_buffer(&values[..len], owner), 0, len)
}

/// One segment of a snapshot chunk as an Arrow array of its first `len` slots.
pub fn segment_array(segment: &Arc<ColumnSegment>, ty: DataType, len: usize) -> ArrayRef {
    let nulls = segment
        .validity()
        .map(|v| NullBuffer::new(BooleanBuffer::new(bitmap_buffer(v, segment), 0, len)));
    match (segment.values(), ty) {
        (SegmentValues::Bool(bits), _) => {
            Arc::new(BooleanArray::new(BooleanBuffer::new(bitmap_buffer(bits, segment), 0, len), nulls))
        }
        (SegmentValues::I16(v), _) => Arc::new(Int16Array::new(typed(v, len, segment), nulls)),
        (SegmentValues::I32(v), DataType::Date) => Arc::new(Date32Array::new(typed(v, len, segment), nulls)),
        (SegmentValues::I32(v), _) => Arc::new(Int32Array::new(typed(v, len, segment), nulls)),
        (SegmentValues::I64(v), DataType::Timestamp) => {
            Arc::new(TimestampMicrosecondArray::new(typed(v, len, segment), nulls))
        }
        (SegmentValues::I64(v), DataType::TimestampTz) => {
            Arc::new(TimestampMicrosecondArray::new(typed(v, len, segment), nulls).with_timezone(crate::types::UTC))
        }
        (SegmentValues::I64(v), _) => Arc::new(Int64Array::new(typed(v, len, segment), nulls)),
        (SegmentValues::F32(v), _) => Arc::new(Float32Array::new(typed(v, len, segment), nulls)),
        (SegmentValues::F64(v), _) => Arc::new(Float64Array::new(typed(v, len, segment), nulls)),
        (SegmentValues::I128(v), ty) => {
            let (p, s) = match ty {
                DataType::Decimal { precision, scale } => (precision, scale as i8),
                _ => (38, 0),
            };
            let array = Decimal128Array::new(typed(v, len, segment), nulls);
            Arc::new(array.with_precision_and_scale(p, s).unwrap_or_else(|_| Decimal128Array::new_null(len)))
        }
        (SegmentValues::Utf8(s), _) => {
            let views = ScalarBuffer::new(slice_buffer(&s.views[..len], segment), 0, len);
            let buffers: Vec<Buffer> = s.blocks.iter().map(block_buffer).collect();
            // SAFETY: every view was built by storage from a valid UTF-8 string: inline views
            // hold the string and its length, others point at published block bytes with the
            // right prefix, block index and offset.
            Arc::new(unsafe { StringViewArray::new_unchecked(views, buffers, nulls) })
        }
    }
}

/// A snapshot chunk as a record batch of the projected columns, over all its slots (deleted
/// ones included: [`selection`] leaves them out).
pub fn chunk_batch(chunk: &ChunkSnapshot, types: &[DataType], projection: &[usize], schema: SchemaRef) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> =
        projection.iter().map(|&c| segment_array(&chunk.columns[c], types[c], chunk.len)).collect();
    let options = RecordBatchOptions::new().with_row_count(Some(chunk.len));
    Ok(RecordBatch::try_new_with_options(schema, columns, &options)?)
}

/// The slots of `chunk` that are not deleted and whose values pass every test (not NULL and
/// inside the test's range), as a bitmap of `chunk.len` bits, and how many they are. A test
/// on a column that is not a 16/32/64-bit integer segment keeps no row (the planner hands the
/// scan only tests on such columns: integers, dates and timestamps).
///
/// A full chunk is not appended to any more, so its value bitmaps, built by the first query
/// that filters the column, serve every later one; the chunk being filled is copied after each
/// snapshot that shares it (the copy drops them), so its values are compared directly.
pub fn selection(chunk: &ChunkSnapshot, tests: &[RangeTest]) -> (BooleanBuffer, usize) {
    let len = chunk.len;
    let mut words = vec![u64::MAX; len.div_ceil(64)];
    if let Some(deleted) = &chunk.deleted {
        words.iter_mut().zip(deleted.words()).for_each(|(w, d)| *w &= !d);
    }
    for test in tests {
        let Some(segment) = chunk.columns.get(test.column) else {
            words.fill(0);
            break;
        };
        match (segment.len() == CHUNK_ROWS).then(|| segment.value_bitmaps()).flatten() {
            Some(bitmaps) => bitmaps.keep_in_range(&mut words, test.lo, test.hi),
            None => match segment.values() {
                SegmentValues::I16(v) => keep_in_range(&mut words, &v[..len], test),
                SegmentValues::I32(v) => keep_in_range(&mut words, &v[..len], test),
                SegmentValues::I64(v) => keep_in_range(&mut words, &v[..len], test),
                _ => words.fill(0),
            },
        }
        if let Some(valid) = segment.validity() {
            words.iter_mut().zip(valid.words()).for_each(|(w, v)| *w &= v);
        }
    }
    if !len.is_multiple_of(64)
        && let Some(last) = words.last_mut()
    {
        *last &= (1u64 << (len % 64)) - 1;
    }
    let kept = words.iter().map(|w| w.count_ones() as usize).sum();
    (BooleanBuffer::new(Buffer::from_vec(words), 0, len), kept)
}

/// An integer lane of a segment, compared in its own width (so that a vector register holds
/// as many as it can): `v - lo` as the unsigned type of the same width is at most the span
/// exactly when `lo <= v <= hi`.
trait Lane: Copy + TryFrom<i64> {
    type Unsigned: Copy + PartialOrd;
    const MIN: i64;
    const MAX: i64;
    fn offset(self, lo: Self) -> Self::Unsigned;
}

macro_rules! lane {
    ($t:ty, $u:ty) => {
        impl Lane for $t {
            type Unsigned = $u;
            const MIN: i64 = <$t>::MIN as i64;
            const MAX: i64 = <$t>::MAX as i64;
            #[inline(always)]
            fn offset(self, lo: Self) -> $u {
                self.wrapping_sub(lo) as $u
            }
        }
    };
}
lane!(i16, u16);
lane!(i32, u32);
lane!(i64, u64);

/// Clears in `words` the bit of every value outside `test.lo..=test.hi`, 64 values per word;
/// words already clear are not looked at.
fn keep_in_range<T: Lane>(words: &mut [u64], values: &[T], test: &RangeTest) {
    // The test's range within what the type can hold (none if it lies outside, or is empty).
    let (Ok(lo), Ok(hi)) = (T::try_from(test.lo.max(T::MIN)), T::try_from(test.hi.min(T::MAX))) else {
        words.fill(0);
        return;
    };
    if test.lo > test.hi {
        words.fill(0);
        return;
    }
    let span = hi.offset(lo);
    let mut full = values.chunks_exact(64);
    for (word, values) in words.iter_mut().zip(&mut full) {
        if *word == 0 {
            continue;
        }
        // One byte per value, then eight bytes to eight bits by one multiplication (byte j
        // lands on bit 56 + j): the comparisons vectorize, a bit-by-bit shift loop does not.
        let mut bytes = [0u8; 64];
        for (b, v) in bytes.iter_mut().zip(values) {
            *b = u8::from(v.offset(lo) <= span);
        }
        let mut bits = 0u64;
        for (j, eight) in bytes.chunks_exact(8).enumerate() {
            let x = u64::from_le_bytes(eight.try_into().expect("eight bytes"));
            bits |= (x.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * j);
        }
        *word &= bits;
    }
    let rest = full.remainder();
    if let Some(word) = words.get_mut(values.len() / 64) {
        let mut bits = 0u64;
        for (i, v) in rest.iter().enumerate() {
            bits |= u64::from(v.offset(lo) <= span) << i;
        }
        *word &= bits;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every width, ranges inside, across and outside the type's, at every position of a
    /// word and in the last, partial word: the bits are exactly the values in range.
    #[test]
    fn keep_in_range_keeps_exactly_the_values_in_range() {
        fn check<T: Lane + Into<i64>>(values: &[T]) {
            for (lo, hi) in [(3, 3), (i64::MIN, 0), (-5, 40), (40, -5), (i64::MIN, i64::MAX), (70_000, 80_000), (-70_000, 2)] {
                let mut words = vec![u64::MAX; values.len().div_ceil(64)];
                keep_in_range(&mut words, values, &RangeTest { column: 0, lo, hi });
                for (i, &v) in values.iter().enumerate() {
                    let v: i64 = v.into();
                    assert_eq!(words[i / 64] >> (i % 64) & 1 == 1, lo <= v && v <= hi, "{v} in {lo}..={hi}");
                }
            }
        }
        let ints: Vec<i64> = (0..200).map(|i| (i * 37 % 61) - 20).collect();
        check(&ints.iter().map(|&v| v as i16).collect::<Vec<_>>());
        check(&ints.iter().map(|&v| v as i32).collect::<Vec<_>>());
        check(&ints);
        check(&[i16::MIN, i16::MAX, 0]);
    }
}
