//! Snapshot chunks as Arrow record batches, without copying.
//!
//! Every fixed-width segment becomes an Arrow buffer that points into the segment's own
//! memory and keeps the segment alive through its `Arc` (Arrow's custom allocation). String
//! segments become `StringViewArray`s over the same views and blocks. Validity bitmaps are
//! shared the same way. The only copy is for chunks with deleted slots: those rows are
//! filtered out (a chunk without deletions is never copied).
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
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::error::Result;
use freshet_core::storage::{Bitmap, ChunkSnapshot, ColumnSegment, SegmentValues, StringBlock};
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

/// A snapshot chunk as a record batch of the projected columns; deleted slots are removed.
pub fn chunk_batch(
    chunk: &ChunkSnapshot,
    types: &[DataType],
    projection: &[usize],
    schema: SchemaRef,
) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> =
        projection.iter().map(|&c| segment_array(&chunk.columns[c], types[c], chunk.len)).collect();
    let options = RecordBatchOptions::new().with_row_count(Some(chunk.len));
    let batch = RecordBatch::try_new_with_options(schema, columns, &options)?;
    match &chunk.deleted {
        Some(deleted) if chunk.live < chunk.len => {
            let keep: BooleanArray = (0..chunk.len).map(|i| Some(!deleted.get(i))).collect();
            Ok(filter_record_batch(&batch, &keep)?)
        }
        _ => Ok(batch),
    }
}
