//! Column segments: one column of one chunk, the unit of copy-on-write.
//!
//! A segment is a typed array plus a validity bitmap (`None` while every value is valid). The
//! chunk holds each segment behind an `Arc`; a snapshot clones the `Arc`s. Before its first write
//! after a snapshot took a reference, the executor copies the segment (`Arc::make_mut`), so the
//! snapshot keeps the old contents and the live table gets its own. A segment has at most
//! [`CHUNK_ROWS`](super::CHUNK_ROWS) values, so a copy costs tens of kilobytes.

use std::sync::{Arc, OnceLock};

use super::bitmap::Bitmap;
use super::strings::{StringArena, StringColumn};
use crate::types::{DataType, Decimal, PhysicalType, Value};

/// The values of a segment, by physical type.
#[derive(Debug)]
pub enum SegmentValues {
    Bool(Bitmap),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    I128(Vec<i128>),
    Utf8(StringColumn),
}

/// A copy keeps the original's capacity. The live table copies a segment a snapshot shares
/// before writing to it, which for the chunk being appended to happens after every snapshot:
/// a copy sized to its length would be reallocated, and copied a second time, by the next
/// append.
impl Clone for SegmentValues {
    fn clone(&self) -> Self {
        fn keep<T: Copy>(v: &Vec<T>) -> Vec<T> {
            let mut copy = Vec::with_capacity(v.capacity());
            copy.extend_from_slice(v);
            copy
        }
        match self {
            SegmentValues::Bool(b) => SegmentValues::Bool(b.clone()),
            SegmentValues::I16(v) => SegmentValues::I16(keep(v)),
            SegmentValues::I32(v) => SegmentValues::I32(keep(v)),
            SegmentValues::I64(v) => SegmentValues::I64(keep(v)),
            SegmentValues::F32(v) => SegmentValues::F32(keep(v)),
            SegmentValues::F64(v) => SegmentValues::F64(keep(v)),
            SegmentValues::I128(v) => SegmentValues::I128(keep(v)),
            SegmentValues::Utf8(s) => SegmentValues::Utf8(StringColumn { views: keep(&s.views), blocks: s.blocks.clone() }),
        }
    }
}

/// The most distinct values (from the smallest to the largest) an integer segment may span
/// for [`ColumnSegment::value_bitmaps`] to describe it: 32 bitmaps of a full chunk take 32 KiB,
/// as much as its 32-bit values.
pub const BITMAP_VALUES: i64 = 32;

/// Where each value of an integer segment with few distinct values lies: one bitmap of the
/// segment's slots per value from its smallest to its largest. A range filter on the column
/// then reads one bit per slot for each value it accepts instead of each slot's value (an
/// equality on a 32-bit column reads 1/32 of the bytes).
#[derive(Debug)]
pub struct ValueBitmaps {
    min: i64,
    max: i64,
    /// Words per bitmap: the segment's slots / 64, rounded up.
    stride: usize,
    /// The bitmap of value `min + k` is `words[k * stride..(k + 1) * stride]`.
    words: Vec<u64>,
}

impl ValueBitmaps {
    fn build<T: Copy + Into<i64>>(values: &[T], min: i64, max: i64) -> Self {
        let stride = values.len().div_ceil(64);
        let mut words = vec![0u64; stride * (max - min + 1) as usize];
        for (i, &v) in values.iter().enumerate() {
            words[(v.into() - min) as usize * stride + i / 64] |= 1 << (i % 64);
        }
        ValueBitmaps { min, max, stride, words }
    }

    /// Clears in `keep` (one bit per slot, from slot 0) every slot whose value lies outside
    /// `lo..=hi`. NULL slots count with the value they store (the caller applies validity).
    pub fn keep_in_range(&self, keep: &mut [u64], lo: i64, hi: i64) {
        let (lo, hi) = (lo.max(self.min), hi.min(self.max));
        if lo > hi {
            keep.fill(0);
            return;
        }
        let first = (lo - self.min) as usize;
        let count = (hi - lo + 1) as usize;
        let bitmaps = &self.words[first * self.stride..(first + count) * self.stride];
        if count == 1 {
            keep.iter_mut().zip(bitmaps).for_each(|(k, b)| *k &= b);
            return;
        }
        for (i, word) in keep.iter_mut().enumerate().take(self.stride) {
            if *word != 0 {
                *word &= bitmaps.iter().skip(i).step_by(self.stride).fold(0, |acc, w| acc | w);
            }
        }
    }

    pub fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8
    }
}

/// One column of one chunk.
///
/// Invariant: `range` and `bitmaps`, once computed, describe every value the segment holds.
/// Every write goes through a `&mut self` method, which clears them; a segment a snapshot
/// shares is never written (the live table copies it first), so they are computed at most
/// once and stay valid for every later snapshot that shares the segment.
#[derive(Clone, Debug)]
pub struct ColumnSegment {
    values: SegmentValues,
    /// `None` while no value is NULL; a set bit means the value is valid.
    validity: Option<Bitmap>,
    /// The smallest and largest value of an integer segment (16-, 32- or 64-bit: integers,
    /// dates, timestamps) over all its slots, computed on first use ([`Self::int_range`]).
    /// NULL and deleted slots count with the value they store, which only widens the range.
    range: OnceLock<Option<(i64, i64)>>,
    /// Built on first use ([`Self::value_bitmaps`]); shared by the copies of the segment
    /// (a copy is made to be written, which drops it).
    bitmaps: OnceLock<Option<Arc<ValueBitmaps>>>,
}

impl ColumnSegment {
    pub fn new(physical: PhysicalType, capacity: usize) -> Self {
        let values = match physical {
            PhysicalType::Bool => SegmentValues::Bool(Bitmap::with_capacity(capacity)),
            PhysicalType::I16 => SegmentValues::I16(Vec::with_capacity(capacity)),
            PhysicalType::I32 => SegmentValues::I32(Vec::with_capacity(capacity)),
            PhysicalType::I64 => SegmentValues::I64(Vec::with_capacity(capacity)),
            PhysicalType::F32 => SegmentValues::F32(Vec::with_capacity(capacity)),
            PhysicalType::F64 => SegmentValues::F64(Vec::with_capacity(capacity)),
            PhysicalType::I128 => SegmentValues::I128(Vec::with_capacity(capacity)),
            PhysicalType::Utf8 => SegmentValues::Utf8(StringColumn::with_capacity(capacity)),
        };
        ColumnSegment { values, validity: None, range: OnceLock::new(), bitmaps: OnceLock::new() }
    }

    /// The typed values (every slot, including NULL and deleted ones).
    pub fn values(&self) -> &SegmentValues {
        &self.values
    }

    /// The validity bitmap: `None` while no value is NULL; a set bit means the value is valid.
    pub fn validity(&self) -> Option<&Bitmap> {
        self.validity.as_ref()
    }

    /// The smallest and largest value of an integer segment, for skipping segments a range
    /// predicate cannot match (a zone map). `None` for other types and for empty segments.
    /// Computed once per segment contents: O(slots) the first time, then free.
    pub fn int_range(&self) -> Option<(i64, i64)> {
        fn min_max<T: Copy + Into<i64>>(v: &[T]) -> Option<(i64, i64)> {
            let mut it = v.iter().map(|&x| x.into());
            let first = it.next()?;
            Some(it.fold((first, first), |(lo, hi), x| (lo.min(x), hi.max(x))))
        }
        *self.range.get_or_init(|| match &self.values {
            SegmentValues::I16(v) => min_max(v),
            SegmentValues::I32(v) => min_max(v),
            SegmentValues::I64(v) => min_max(v),
            _ => None,
        })
    }

    /// One bitmap per value, for an integer segment whose values span at most
    /// [`BITMAP_VALUES`] distinct values (NULL slots count with the value they store); `None`
    /// for other segments. Built once per segment contents in one pass over the values; worth
    /// it for segments that are read more often than written (full chunks).
    pub fn value_bitmaps(&self) -> Option<&ValueBitmaps> {
        let (min, max) = self.int_range()?;
        if (max as i128 - min as i128) >= BITMAP_VALUES as i128 {
            return None;
        }
        self.bitmaps
            .get_or_init(|| match &self.values {
                SegmentValues::I16(v) => Some(Arc::new(ValueBitmaps::build(v, min, max))),
                SegmentValues::I32(v) => Some(Arc::new(ValueBitmaps::build(v, min, max))),
                SegmentValues::I64(v) => Some(Arc::new(ValueBitmaps::build(v, min, max))),
                _ => None,
            })
            .as_deref()
    }

    pub fn len(&self) -> usize {
        match &self.values {
            SegmentValues::Bool(b) => b.len(),
            SegmentValues::I16(v) => v.len(),
            SegmentValues::I32(v) => v.len(),
            SegmentValues::I64(v) => v.len(),
            SegmentValues::F32(v) => v.len(),
            SegmentValues::F64(v) => v.len(),
            SegmentValues::I128(v) => v.len(),
            SegmentValues::Utf8(s) => s.views.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn is_valid(&self, slot: usize) -> bool {
        self.validity.as_ref().is_none_or(|v| v.get(slot))
    }

    /// The value at `slot`, typed as `ty` (which must be the column's type).
    /// The integer at `slot` of a segment of integers (dates and timestamps are stored so too),
    /// read in place; `None` for NULL, a slot past the end, or a segment of another kind.
    #[inline]
    pub fn get_int(&self, slot: usize) -> Option<i64> {
        if slot >= self.len() || !self.is_valid(slot) {
            return None;
        }
        match &self.values {
            SegmentValues::I16(v) => v.get(slot).map(|&i| i as i64),
            SegmentValues::I32(v) => v.get(slot).map(|&i| i as i64),
            SegmentValues::I64(v) => v.get(slot).copied(),
            _ => None,
        }
    }

    pub fn get(&self, slot: usize, ty: DataType) -> Value {
        if !self.is_valid(slot) {
            return Value::Null;
        }
        match (&self.values, ty) {
            (SegmentValues::Bool(b), _) => Value::Bool(b.get(slot)),
            (SegmentValues::I16(v), _) => Value::Int16(v[slot]),
            (SegmentValues::I32(v), DataType::Date) => Value::Date(v[slot]),
            (SegmentValues::I32(v), _) => Value::Int32(v[slot]),
            (SegmentValues::I64(v), DataType::Timestamp) => Value::Timestamp(v[slot]),
            (SegmentValues::I64(v), DataType::TimestampTz) => Value::TimestampTz(v[slot]),
            (SegmentValues::I64(v), _) => Value::Int64(v[slot]),
            (SegmentValues::F32(v), _) => Value::Float32(v[slot]),
            (SegmentValues::F64(v), _) => Value::Float64(v[slot]),
            (SegmentValues::I128(v), DataType::Decimal { scale, .. }) => {
                Value::Decimal(Decimal::new(v[slot], scale))
            }
            (SegmentValues::I128(v), _) => Value::Decimal(Decimal::new(v[slot], 0)),
            (SegmentValues::Utf8(s), _) => Value::Text(s.get(slot).to_string()),
        }
    }

    /// Starts loading the value at `slot` into the cache without waiting for it, so that the
    /// reads of several columns of one row overlap their cache misses instead of taking them
    /// one after another. A string's bytes are a second miss that this does not cover.
    #[inline]
    pub fn prefetch(&self, slot: usize) {
        let at: *const u8 = match &self.values {
            SegmentValues::Bool(_) => return,
            SegmentValues::I16(v) => v.as_ptr().wrapping_add(slot).cast(),
            SegmentValues::I32(v) => v.as_ptr().wrapping_add(slot).cast(),
            SegmentValues::I64(v) => v.as_ptr().wrapping_add(slot).cast(),
            SegmentValues::F32(v) => v.as_ptr().wrapping_add(slot).cast(),
            SegmentValues::F64(v) => v.as_ptr().wrapping_add(slot).cast(),
            SegmentValues::I128(v) => v.as_ptr().wrapping_add(slot).cast(),
            SegmentValues::Utf8(s) => s.views.as_ptr().wrapping_add(slot).cast(),
        };
        super::prefetch_address(at);
    }

    /// For a string column, asks for the bytes of the string at `slot` when they are not in
    /// its view: reads the view (best after [`prefetch`](Self::prefetch) had time to load it).
    pub fn prefetch_string(&self, slot: usize) {
        if let SegmentValues::Utf8(s) = &self.values {
            s.prefetch_bytes(slot);
        }
    }

    /// The string at `slot` without copying it, for string columns.
    pub fn get_str(&self, slot: usize) -> Option<&str> {
        match &self.values {
            SegmentValues::Utf8(s) if self.is_valid(slot) => Some(s.get(slot)),
            _ => None,
        }
    }

    /// Appends a value already converted to the column's type.
    pub fn push(&mut self, value: &Value, arena: &mut StringArena) {
        self.range.take();
        self.bitmaps.take();
        let slot = self.len();
        let valid = !value.is_null();
        match &mut self.values {
            SegmentValues::Bool(b) => b.push(value.as_bool().unwrap_or(false)),
            SegmentValues::I16(v) => v.push(if let Value::Int16(x) = value { *x } else { 0 }),
            SegmentValues::I32(v) => v.push(match value {
                Value::Int32(x) | Value::Date(x) => *x,
                _ => 0,
            }),
            SegmentValues::I64(v) => v.push(match value {
                Value::Int64(x) | Value::Timestamp(x) | Value::TimestampTz(x) => *x,
                _ => 0,
            }),
            SegmentValues::F32(v) => v.push(if let Value::Float32(x) = value { *x } else { 0.0 }),
            SegmentValues::F64(v) => v.push(if let Value::Float64(x) = value { *x } else { 0.0 }),
            SegmentValues::I128(v) => v.push(if let Value::Decimal(d) = value { d.value } else { 0 }),
            SegmentValues::Utf8(s) => arena.push(s, value.as_str().unwrap_or("")),
        }
        self.set_validity(slot, valid, true);
    }

    /// Overwrites the value at `slot` with a value already converted to the column's type.
    pub fn set(&mut self, slot: usize, value: &Value, arena: &mut StringArena) {
        self.range.take();
        self.bitmaps.take();
        let valid = !value.is_null();
        match &mut self.values {
            SegmentValues::Bool(b) => b.set(slot, value.as_bool().unwrap_or(false)),
            SegmentValues::I16(v) => v[slot] = if let Value::Int16(x) = value { *x } else { 0 },
            SegmentValues::I32(v) => {
                v[slot] = match value {
                    Value::Int32(x) | Value::Date(x) => *x,
                    _ => 0,
                }
            }
            SegmentValues::I64(v) => {
                v[slot] = match value {
                    Value::Int64(x) | Value::Timestamp(x) | Value::TimestampTz(x) => *x,
                    _ => 0,
                }
            }
            SegmentValues::F32(v) => v[slot] = if let Value::Float32(x) = value { *x } else { 0.0 },
            SegmentValues::F64(v) => v[slot] = if let Value::Float64(x) = value { *x } else { 0.0 },
            SegmentValues::I128(v) => v[slot] = if let Value::Decimal(d) = value { d.value } else { 0 },
            SegmentValues::Utf8(s) => arena.set(s, slot, value.as_str().unwrap_or("")),
        }
        self.set_validity(slot, valid, false);
    }

    /// Inlined: most columns have no NULL, and then a valid value costs one test.
    #[inline]
    fn set_validity(&mut self, slot: usize, valid: bool, appended: bool) {
        match &mut self.validity {
            Some(bits) if appended => bits.push(valid),
            Some(bits) => bits.set(slot, valid),
            None if valid => {}
            None => self.first_null(slot),
        }
    }

    /// The segment's first NULL, at `slot`: from now on it keeps a validity bitmap.
    #[inline(never)]
    fn first_null(&mut self, slot: usize) {
        let mut bits = Bitmap::filled(self.len(), true);
        bits.set(slot, false);
        self.validity = Some(bits);
    }

    /// Bytes this segment holds on the heap (views, not string blocks, for strings).
    pub fn heap_bytes(&self) -> usize {
        let values = match &self.values {
            SegmentValues::Bool(b) => b.heap_bytes(),
            SegmentValues::I16(v) => v.capacity() * 2,
            SegmentValues::I32(v) => v.capacity() * 4,
            SegmentValues::I64(v) => v.capacity() * 8,
            SegmentValues::F32(v) => v.capacity() * 4,
            SegmentValues::F64(v) => v.capacity() * 8,
            SegmentValues::I128(v) => v.capacity() * 16,
            SegmentValues::Utf8(s) => s.heap_bytes(),
        };
        let bitmaps = self.bitmaps.get().and_then(|b| b.as_deref()).map_or(0, ValueBitmaps::heap_bytes);
        values + self.validity.as_ref().map_or(0, Bitmap::heap_bytes) + bitmaps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_set_get_with_nulls() {
        let mut arena = StringArena::default();
        let mut seg = ColumnSegment::new(PhysicalType::I32, 4);
        seg.push(&Value::Int32(1), &mut arena);
        seg.push(&Value::Int32(2), &mut arena);
        assert!(seg.validity.is_none());
        seg.push(&Value::Null, &mut arena);
        seg.set(0, &Value::Null, &mut arena);
        seg.set(2, &Value::Int32(9), &mut arena);
        assert_eq!(seg.get(0, DataType::Int32), Value::Null);
        assert_eq!(seg.get(1, DataType::Int32), Value::Int32(2));
        assert_eq!(seg.get(2, DataType::Int32), Value::Int32(9));
        assert_eq!(seg.get(1, DataType::Date), Value::Date(2));
        // Integers read in place: NULL and slots past the end are none.
        assert_eq!([seg.get_int(0), seg.get_int(1), seg.get_int(2), seg.get_int(3)], [None, Some(2), Some(9), None]);
        let mut text = ColumnSegment::new(PhysicalType::Utf8, 4);
        text.push(&Value::Text("7".into()), &mut arena);
        assert_eq!(text.get_int(0), None, "a string is not an integer");
    }

    #[test]
    fn a_copy_keeps_room_to_append() {
        let mut arena = StringArena::default();
        for physical in [PhysicalType::I64, PhysicalType::Utf8] {
            let mut seg = ColumnSegment::new(physical, 8192);
            seg.push(&Value::Null, &mut arena);
            let copy = seg.clone();
            let capacity = match copy.values() {
                SegmentValues::I64(v) => v.capacity(),
                SegmentValues::Utf8(s) => s.views.capacity(),
                other => panic!("{other:?}"),
            };
            assert!(capacity >= 8192, "{physical:?}: {capacity}");
            assert_eq!(copy.len(), 1);
        }
    }

    /// The bitmaps hold exactly the slots of each value, a range test keeps exactly the slots
    /// in range, a write drops them, and a segment spanning too many values has none.
    #[test]
    fn value_bitmaps_describe_the_values_and_are_rebuilt_after_a_write() {
        let mut arena = StringArena::default();
        let mut seg = ColumnSegment::new(PhysicalType::I32, 200);
        let value = |i: i32| (i * 7) % 11 - 3;
        for i in 0..200 {
            seg.push(&Value::Int32(value(i)), &mut arena);
        }
        let check = |seg: &ColumnSegment, value: &dyn Fn(i32) -> i32| {
            let bitmaps = seg.value_bitmaps().expect("few values");
            for (lo, hi) in [(-3, -3), (0, 4), (5, 100), (-100, -4), (2, 1), (i64::MIN, i64::MAX)] {
                let mut keep = vec![u64::MAX; 4];
                bitmaps.keep_in_range(&mut keep, lo, hi);
                for i in 0..200 {
                    let v = i64::from(value(i as i32));
                    assert_eq!(keep[i / 64] >> (i % 64) & 1 == 1, lo <= v && v <= hi, "slot {i} ({v}) in {lo}..={hi}");
                }
            }
        };
        check(&seg, &value);
        let copy = seg.clone();
        seg.set(5, &Value::Int32(20), &mut arena);
        let changed = |i: i32| if i == 5 { 20 } else { value(i) };
        check(&seg, &changed);
        check(&copy, &value);
        seg.set(6, &Value::Int32(20 + BITMAP_VALUES as i32), &mut arena);
        assert!(seg.value_bitmaps().is_none());
        assert!(ColumnSegment::new(PhysicalType::F64, 1).value_bitmaps().is_none());
    }

    #[test]
    fn decimal_and_string_segments() {
        let mut arena = StringArena::default();
        let ty = DataType::Decimal { precision: 10, scale: 2 };
        let mut seg = ColumnSegment::new(ty.physical(), 1);
        seg.push(&Value::Decimal(Decimal::new(1234, 2)), &mut arena);
        assert_eq!(seg.get(0, ty), Value::Decimal(Decimal::new(1234, 2)));
        let mut s = ColumnSegment::new(PhysicalType::Utf8, 1);
        s.push(&Value::Text("hello, long world!".into()), &mut arena);
        assert_eq!(s.get_str(0), Some("hello, long world!"));
    }
}
