//! Cells of Arrow arrays, written straight from the array for the common types.
//!
//! A [`ColumnView`] is a column downcast once per range of rows. The fast paths mirror exactly
//! what `value_at` followed by `Value::write_text` produce (the test below holds them to it);
//! any other array, and any array whose type is not the column's in binary, goes through
//! `freshet_olap::values::value_at`.

use std::fmt::Write;

use bytes::{BufMut, BytesMut};
use freshet::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array, Int16Array,
    Int32Array, Int64Array, LargeStringArray, StringArray, StringViewArray, TimestampMicrosecondArray,
};
use freshet::arrow::datatypes::{DataType as ArrowType, TimeUnit};
use freshet::arrow::record_batch::RecordBatch;
use freshet::{ColumnInfo, DataType, Decimal};
use freshet_core::types::{datetime, float};

use super::{begin_cell, binary, finish_cell, write_value};
use crate::error::SqlError;

/// A column of a batch, downcast to its array type.
pub struct ColumnView<'a> {
    array: &'a ArrayRef,
    kind: Kind<'a>,
}

enum Kind<'a> {
    Bool(&'a BooleanArray),
    Int16(&'a Int16Array),
    Int32(&'a Int32Array),
    Int64(&'a Int64Array),
    Float32(&'a Float32Array),
    Float64(&'a Float64Array),
    /// The array, its scale and its precision.
    Decimal(&'a Decimal128Array, u8, u8),
    Utf8(&'a StringArray),
    LargeUtf8(&'a LargeStringArray),
    Utf8View(&'a StringViewArray),
    Date(&'a Date32Array),
    Timestamp(&'a TimestampMicrosecondArray),
    /// Instants (any zone label: the values count from 1970-01-01 UTC).
    TimestampTz(&'a TimestampMicrosecondArray),
    /// Arrow's Null type: every cell is NULL (it has no validity buffer to say so).
    Null,
    Other,
}

/// Views of the batch's columns, in result-column order.
pub fn views<'a>(batch: &'a RecordBatch, columns: &[ColumnInfo]) -> Vec<ColumnView<'a>> {
    batch.columns().iter().take(columns.len()).map(|array| ColumnView { array, kind: kind(array) }).collect()
}

fn kind(a: &ArrayRef) -> Kind<'_> {
    match a.data_type() {
        ArrowType::Boolean => Kind::Bool(a.as_boolean()),
        ArrowType::Int16 => Kind::Int16(a.as_primitive()),
        ArrowType::Int32 => Kind::Int32(a.as_primitive()),
        ArrowType::Int64 => Kind::Int64(a.as_primitive()),
        ArrowType::Float32 => Kind::Float32(a.as_primitive()),
        ArrowType::Float64 => Kind::Float64(a.as_primitive()),
        ArrowType::Decimal128(p, s) if *s >= 0 => Kind::Decimal(a.as_primitive(), *s as u8, *p),
        ArrowType::Utf8 => Kind::Utf8(a.as_string()),
        ArrowType::LargeUtf8 => Kind::LargeUtf8(a.as_string()),
        ArrowType::Utf8View => Kind::Utf8View(a.as_string_view()),
        ArrowType::Date32 => Kind::Date(a.as_primitive()),
        ArrowType::Timestamp(TimeUnit::Microsecond, None) => Kind::Timestamp(a.as_primitive()),
        ArrowType::Timestamp(TimeUnit::Microsecond, Some(_)) => Kind::TimestampTz(a.as_primitive()),
        ArrowType::Null => Kind::Null,
        _ => Kind::Other,
    }
}

impl ColumnView<'_> {
    /// Writes row `i` as one cell (length word and data) of a column of type `ty`.
    pub fn write(&self, i: usize, ty: DataType, binary: bool, scratch: &mut String, out: &mut BytesMut) -> Result<(), SqlError> {
        if i >= self.array.len() || self.array.is_null(i) || matches!(self.kind, Kind::Null) {
            out.put_i32(-1);
            return Ok(());
        }
        let at = begin_cell(out);
        let fast = if binary { self.write_binary(i, ty, out) } else { self.write_text(i, ty, scratch, out) };
        if !fast {
            out.truncate(at);
            return self.write_slow(i, ty, binary, scratch, out);
        }
        finish_cell(out, at);
        Ok(())
    }

    /// Through the value Freshet reads from the cell.
    fn write_slow(&self, i: usize, ty: DataType, binary: bool, scratch: &mut String, out: &mut BytesMut) -> Result<(), SqlError> {
        let v = freshet_olap::values::value_at(self.array, i, ty);
        write_value(&v, ty, binary, scratch, out)
    }

    /// The text form; `false` if this array has no fast path.
    fn write_text(&self, i: usize, ty: DataType, scratch: &mut String, out: &mut BytesMut) -> bool {
        let mut via_scratch = |f: &dyn Fn(&mut String)| {
            scratch.clear();
            f(scratch);
            out.put_slice(scratch.as_bytes());
        };
        match &self.kind {
            Kind::Bool(a) => out.put_u8(if a.value(i) { b't' } else { b'f' }),
            Kind::Int16(a) => integer(a.value(i) as i64, out),
            Kind::Int32(a) => integer(a.value(i) as i64, out),
            Kind::Int64(a) => integer(a.value(i), out),
            Kind::Float32(a) => via_scratch(&|s| float::format_f32(a.value(i), s)),
            Kind::Float64(a) => via_scratch(&|s| float::format_f64(a.value(i), s)),
            Kind::Decimal(a, scale, precision) => via_scratch(&|s| {
                let d = Decimal::new(a.value(i), *scale);
                let own = DataType::Decimal { precision: *precision, scale: *scale };
                let _ = write!(s, "{}", freshet::shown_decimal(d, own));
            }),
            Kind::Utf8(a) => binary::text(a.value(i), ty, out),
            Kind::LargeUtf8(a) => binary::text(a.value(i), ty, out),
            Kind::Utf8View(a) => binary::text(a.value(i), ty, out),
            Kind::Date(a) => via_scratch(&|s| datetime::format_date(a.value(i), s)),
            Kind::Timestamp(a) => via_scratch(&|s| datetime::format_timestamp(a.value(i), s)),
            Kind::TimestampTz(a) => via_scratch(&|s| datetime::format_timestamptz(a.value(i), s)),
            Kind::Null | Kind::Other => return false,
        }
        true
    }

    /// The binary form when the array holds the column type's layout; `false` otherwise.
    fn write_binary(&self, i: usize, ty: DataType, out: &mut BytesMut) -> bool {
        match (&self.kind, ty) {
            (Kind::Bool(a), DataType::Bool) => out.put_u8(a.value(i) as u8),
            (Kind::Int16(a), DataType::Int16) => out.put_i16(a.value(i)),
            (Kind::Int32(a), DataType::Int32) => out.put_i32(a.value(i)),
            (Kind::Int64(a), DataType::Int64) => out.put_i64(a.value(i)),
            (Kind::Float32(a), DataType::Float32) => out.put_f32(a.value(i)),
            (Kind::Float64(a), DataType::Float64) => out.put_f64(a.value(i)),
            (Kind::Decimal(a, s, _), DataType::Decimal { scale, .. }) => {
                binary::decimal(Decimal::new(a.value(i), *s), scale, ty, out)
            }
            (Kind::Utf8(a), DataType::Uuid) => return binary::uuid(a.value(i), out),
            (Kind::LargeUtf8(a), DataType::Uuid) => return binary::uuid(a.value(i), out),
            (Kind::Utf8View(a), DataType::Uuid) => return binary::uuid(a.value(i), out),
            (Kind::Utf8(a), t) if t.is_string() => binary::text(a.value(i), ty, out),
            (Kind::LargeUtf8(a), t) if t.is_string() => binary::text(a.value(i), ty, out),
            (Kind::Utf8View(a), t) if t.is_string() => binary::text(a.value(i), ty, out),
            (Kind::Date(a), DataType::Date) => binary::date(a.value(i), out),
            (Kind::Timestamp(a), DataType::Timestamp) | (Kind::TimestampTz(a), DataType::TimestampTz) => {
                binary::timestamp(a.value(i), out)
            }
            _ => return false,
        }
        true
    }
}

fn integer(v: i64, out: &mut BytesMut) {
    let mut buf = [0u8; 20];
    out.put_slice(freshet_core::types::value::decimal_digits(v, &mut buf));
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use freshet::arrow::array::{ArrayRef, UInt32Array};
    use freshet::arrow::record_batch::RecordBatch;
    use freshet::{batch_rows, ColumnInfo, DataType, RowBatch, Value};

    use super::*;
    use crate::encode::RowEncoder;

    /// Arrays of every fast-path type, each with a NULL, and one type without a fast path.
    fn sample() -> (RecordBatch, Vec<ColumnInfo>) {
        let col = |name: &str, ty| ColumnInfo { name: name.into(), ty };
        let arrays: Vec<(ArrayRef, ColumnInfo)> = vec![
            (Arc::new(BooleanArray::from(vec![Some(true), Some(false), None, Some(true)])), col("b", DataType::Bool)),
            (Arc::new(Int16Array::from(vec![Some(-32768), Some(0), None, Some(7)])), col("s", DataType::Int16)),
            (Arc::new(Int32Array::from(vec![Some(i32::MIN), Some(-1), None, Some(42)])), col("i", DataType::Int32)),
            (Arc::new(Int64Array::from(vec![Some(i64::MIN), Some(i64::MAX), None, Some(0)])), col("l", DataType::Int64)),
            (Arc::new(Float32Array::from(vec![Some(1.5e-5), Some(f32::NAN), None, Some(1234567.0)])), col("r", DataType::Float32)),
            (
                Arc::new(Float64Array::from(vec![Some(0.1), Some(f64::NEG_INFINITY), None, Some(1e15)])),
                col("d", DataType::Float64),
            ),
            (
                Arc::new(Decimal128Array::from(vec![Some(-5), Some(123_456), None, Some(0)]).with_precision_and_scale(12, 2).unwrap()),
                col("n", DataType::Decimal { precision: 12, scale: 2 }),
            ),
            (Arc::new(StringViewArray::from(vec![Some("ab"), Some(""), None, Some("héllo")])), col("c", DataType::Char(6))),
            (Arc::new(StringArray::from(vec![Some("x y"), Some("tab\t"), None, Some("ü")])), col("v", DataType::Varchar(Some(9)))),
            (Arc::new(LargeStringArray::from(vec![Some("long"), Some(""), None, Some("z")])), col("t", DataType::Text)),
            (Arc::new(Date32Array::from(vec![Some(0), Some(-800_000), None, Some(19_782)])), col("dt", DataType::Date)),
            (
                Arc::new(TimestampMicrosecondArray::from(vec![Some(0), Some(-1), None, Some(1_700_000_000_123_400)])),
                col("ts", DataType::Timestamp),
            ),
            (Arc::new(UInt32Array::from(vec![Some(4_000_000_000), Some(0), None, Some(1)])), col("u", DataType::Int64)),
        ];
        let columns: Vec<ColumnInfo> = arrays.iter().map(|(_, c)| c.clone()).collect();
        let batch = RecordBatch::try_from_iter(arrays.into_iter().map(|(a, c)| (c.name, a))).unwrap();
        (batch, columns)
    }

    fn encode(batch: RowBatch, columns: &[ColumnInfo], format: i16) -> Vec<u8> {
        let mut encoder = RowEncoder::new(Arc::new(columns.to_vec()), vec![format; columns.len()]);
        let mut out = BytesMut::new();
        let n = batch.num_rows();
        assert_eq!(encoder.encode(&batch, 0, n, &mut out, usize::MAX).unwrap(), n);
        out.to_vec()
    }

    #[test]
    fn arrow_cells_encode_like_the_values_read_from_them() {
        let (batch, columns) = sample();
        let values = batch_rows(&batch, &columns);
        for format in [0, 1] {
            let from_arrow = encode(RowBatch::Arrow(batch.clone()), &columns, format);
            let from_values = encode(RowBatch::Values(values.clone()), &columns, format);
            assert_eq!(from_arrow, from_values, "format {format}");
        }
    }

    #[test]
    fn arrow_text_matches_write_text_of_the_same_value() {
        let (batch, columns) = sample();
        let expected: Vec<(usize, Value)> = vec![
            (1, Value::Int16(-32768)),
            (4, Value::Float32(1.5e-5)),
            (5, Value::Float64(0.1)),
            (6, Value::Decimal(freshet::Decimal::new(-5, 2))),
            (7, Value::Text("ab".into())),
            (10, Value::Date(0)),
            (11, Value::Timestamp(0)),
        ];
        let views = views(&batch, &columns);
        let mut scratch = String::new();
        for (col, value) in expected {
            let mut out = BytesMut::new();
            views[col].write(0, columns[col].ty, false, &mut scratch, &mut out).unwrap();
            let text = value.to_text(columns[col].ty).unwrap();
            assert_eq!(&out[4..], text.as_bytes(), "column {}", columns[col].name);
        }
        // Arrow's Null type is NULL in every row.
        let nulls: ArrayRef = Arc::new(freshet::arrow::array::NullArray::new(2));
        let mut out = BytesMut::new();
        ColumnView { array: &nulls, kind: kind(&nulls) }.write(1, DataType::Text, false, &mut scratch, &mut out).unwrap();
        assert_eq!(&out[..], &(-1i32).to_be_bytes());
        // CHAR(6) is padded, as PostgreSQL prints bpchar.
        let mut out = BytesMut::new();
        views[7].write(3, DataType::Char(6), false, &mut scratch, &mut out).unwrap();
        assert_eq!(&out[4..], "héllo ".as_bytes());
    }
}
