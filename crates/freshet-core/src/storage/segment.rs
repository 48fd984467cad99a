//! Column segments: one column of one chunk, the unit of copy-on-write.
//!
//! A segment is a typed array plus a validity bitmap (`None` while every value is valid). The
//! chunk holds each segment behind an `Arc`; a snapshot clones the `Arc`s. Before its first write
//! after a snapshot took a reference, the executor copies the segment (`Arc::make_mut`), so the
//! snapshot keeps the old contents and the live table gets its own. A segment has at most
//! [`CHUNK_ROWS`](super::CHUNK_ROWS) values, so a copy costs tens of kilobytes.

use std::sync::OnceLock;

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

/// One column of one chunk.
///
/// Invariant: `range`, once computed, bounds every value the segment holds. Every write goes
/// through a `&mut self` method, which clears it; a segment a snapshot shares is never written
/// (the live table copies it first), so its range is computed at most once and stays valid for
/// every later snapshot that shares the segment.
#[derive(Clone, Debug)]
pub struct ColumnSegment {
    values: SegmentValues,
    /// `None` while no value is NULL; a set bit means the value is valid.
    validity: Option<Bitmap>,
    /// The smallest and largest value of an integer segment (16-, 32- or 64-bit: integers,
    /// dates, timestamps) over all its slots, computed on first use ([`Self::int_range`]).
    /// NULL and deleted slots count with the value they store, which only widens the range.
    range: OnceLock<Option<(i64, i64)>>,
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
        ColumnSegment { values, validity: None, range: OnceLock::new() }
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

    fn set_validity(&mut self, slot: usize, valid: bool, appended: bool) {
        match &mut self.validity {
            Some(bits) if appended => bits.push(valid),
            Some(bits) => bits.set(slot, valid),
            None if valid => {}
            None => {
                let mut bits = Bitmap::filled(self.len(), true);
                bits.set(slot, false);
                self.validity = Some(bits);
            }
        }
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
        values + self.validity.as_ref().map_or(0, Bitmap::heap_bytes)
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
