//! Conversions between Freshet values and Arrow scalars and arrays.

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder,
    Int16Builder, Int32Builder, Int64Builder, StringViewBuilder, TimestampMicrosecondBuilder,
};
use datafusion::arrow::datatypes::{self as adt, DataType as ArrowType, IntervalUnit, TimeUnit};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::ScalarValue;
use freshet_core::types::{DataType, Decimal, Value};
use std::sync::Arc;

use crate::types::arrow_type;

/// A parameter value as the scalar DataFusion substitutes for its placeholder.
pub fn scalar(v: &Value, ty: DataType) -> ScalarValue {
    match v {
        Value::Null => ScalarValue::try_from(&arrow_type(ty)).unwrap_or(ScalarValue::Null),
        Value::Bool(b) => ScalarValue::Boolean(Some(*b)),
        Value::Int16(i) => ScalarValue::Int16(Some(*i)),
        Value::Int32(i) => ScalarValue::Int32(Some(*i)),
        Value::Int64(i) => ScalarValue::Int64(Some(*i)),
        Value::Float32(f) => ScalarValue::Float32(Some(*f)),
        Value::Float64(f) => ScalarValue::Float64(Some(*f)),
        Value::Decimal(d) => {
            let precision = match ty {
                DataType::Decimal { precision, .. } => precision.max(d.scale),
                _ => 38,
            };
            ScalarValue::Decimal128(Some(d.value), precision, d.scale as i8)
        }
        Value::Text(s) => ScalarValue::Utf8(Some(s.clone())),
        Value::Date(d) => ScalarValue::Date32(Some(*d)),
        Value::Timestamp(t) => ScalarValue::TimestampMicrosecond(Some(*t), None),
        Value::TimestampTz(t) => ScalarValue::TimestampMicrosecond(Some(*t), Some(crate::types::UTC.into())),
    }
}

/// Row `i` of `array` as a value of type `ty` (for INSERT … SELECT and result conversion).
pub fn value_at(array: &ArrayRef, i: usize, ty: DataType) -> Value {
    // A NullArray has no validity buffer: `is_null` is false for its rows.
    if array.is_null(i) || array.data_type() == &ArrowType::Null {
        return Value::Null;
    }
    match array.data_type() {
        ArrowType::Boolean => Value::Bool(array.as_boolean().value(i)),
        ArrowType::Int8 => Value::Int16(array.as_primitive::<adt::Int8Type>().value(i) as i16),
        ArrowType::Int16 => Value::Int16(array.as_primitive::<adt::Int16Type>().value(i)),
        ArrowType::Int32 => Value::Int32(array.as_primitive::<adt::Int32Type>().value(i)),
        ArrowType::Int64 => Value::Int64(array.as_primitive::<adt::Int64Type>().value(i)),
        ArrowType::UInt8 => Value::Int16(array.as_primitive::<adt::UInt8Type>().value(i) as i16),
        ArrowType::UInt16 => Value::Int32(array.as_primitive::<adt::UInt16Type>().value(i) as i32),
        ArrowType::UInt32 => Value::Int64(array.as_primitive::<adt::UInt32Type>().value(i) as i64),
        ArrowType::UInt64 => Value::Decimal(Decimal::new(array.as_primitive::<adt::UInt64Type>().value(i) as i128, 0)),
        ArrowType::Float32 => Value::Float32(array.as_primitive::<adt::Float32Type>().value(i)),
        ArrowType::Float64 => Value::Float64(array.as_primitive::<adt::Float64Type>().value(i)),
        ArrowType::Decimal128(_, s) if *s >= 0 => {
            Value::Decimal(Decimal::new(array.as_primitive::<adt::Decimal128Type>().value(i), *s as u8))
        }
        ArrowType::Utf8 => Value::Text(array.as_string::<i32>().value(i).to_string()),
        ArrowType::LargeUtf8 => Value::Text(array.as_string::<i64>().value(i).to_string()),
        ArrowType::Utf8View => Value::Text(array.as_string_view().value(i).to_string()),
        ArrowType::Date32 => Value::Date(array.as_primitive::<adt::Date32Type>().value(i)),
        ArrowType::Date64 => Value::Date((array.as_primitive::<adt::Date64Type>().value(i) / 86_400_000) as i32),
        ArrowType::Timestamp(unit, zone) => {
            let raw = match unit {
                TimeUnit::Second => array.as_primitive::<adt::TimestampSecondType>().value(i) * 1_000_000,
                TimeUnit::Millisecond => array.as_primitive::<adt::TimestampMillisecondType>().value(i) * 1_000,
                TimeUnit::Microsecond => array.as_primitive::<adt::TimestampMicrosecondType>().value(i),
                TimeUnit::Nanosecond => array.as_primitive::<adt::TimestampNanosecondType>().value(i) / 1_000,
            };
            // The instant, whatever zone labels it (each counts from 1970-01-01 UTC).
            if zone.is_some() { Value::TimestampTz(raw) } else { Value::Timestamp(raw) }
        }
        ArrowType::List(_) | ArrowType::LargeList(_) | ArrowType::FixedSizeList(..) => Value::Text(array_literal(array, i)),
        // A difference of timestamps: days and a time under a day, as PostgreSQL's
        // timestamp subtraction gives.
        ArrowType::Duration(unit) => {
            let micros = match unit {
                TimeUnit::Second => array.as_primitive::<adt::DurationSecondType>().value(i).saturating_mul(1_000_000),
                TimeUnit::Millisecond => array.as_primitive::<adt::DurationMillisecondType>().value(i).saturating_mul(1_000),
                TimeUnit::Microsecond => array.as_primitive::<adt::DurationMicrosecondType>().value(i),
                TimeUnit::Nanosecond => array.as_primitive::<adt::DurationNanosecondType>().value(i) / 1_000,
            };
            Value::Text(interval_text(0, micros / MICROS_PER_DAY, micros % MICROS_PER_DAY))
        }
        ArrowType::Interval(IntervalUnit::MonthDayNano) => {
            let v = array.as_primitive::<adt::IntervalMonthDayNanoType>().value(i);
            Value::Text(interval_text(v.months as i64, v.days as i64, v.nanoseconds / 1_000))
        }
        ArrowType::Interval(IntervalUnit::DayTime) => {
            let v = array.as_primitive::<adt::IntervalDayTimeType>().value(i);
            Value::Text(interval_text(0, v.days as i64, v.milliseconds as i64 * 1_000))
        }
        ArrowType::Interval(IntervalUnit::YearMonth) => {
            Value::Text(interval_text(array.as_primitive::<adt::IntervalYearMonthType>().value(i) as i64, 0, 0))
        }
        _ => {
            let _ = ty;
            let options = FormatOptions::default();
            match ArrayFormatter::try_new(array.as_ref(), &options) {
                Ok(f) => Value::Text(f.value(i).to_string()),
                Err(_) => Value::Null,
            }
        }
    }
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// An interval in PostgreSQL's output form (`IntervalStyle = postgres`): `1 year 2 mons`,
/// `3 days 01:30:00`, `-1 days -00:00:01.5`, `00:00:00` for zero.
fn interval_text(months: i64, days: i64, micros: i64) -> String {
    let plural = |n: i64, unit: &str| format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
    let mut parts = Vec::new();
    let (years, months) = (months / 12, months % 12);
    if years != 0 {
        parts.push(plural(years, "year"));
    }
    if months != 0 {
        parts.push(plural(months, "mon"));
    }
    if days != 0 {
        parts.push(plural(days, "day"));
    }
    if micros != 0 || parts.is_empty() {
        let sign = if micros < 0 { "-" } else { "" };
        let m = micros.unsigned_abs();
        let (hours, minutes, seconds, fraction) = (m / 3_600_000_000, m / 60_000_000 % 60, m / 1_000_000 % 60, m % 1_000_000);
        let mut time = format!("{sign}{hours:02}:{minutes:02}:{seconds:02}");
        if fraction != 0 {
            time.push_str(format!(".{fraction:06}").trim_end_matches('0'));
        }
        parts.push(time);
    }
    parts.join(" ")
}

/// A list cell in PostgreSQL's array text form: `{1,2,NULL}`, `{"a b","x\"y"}`, nested
/// lists as `{{1,2},{3}}`.
pub(crate) fn array_literal(array: &ArrayRef, i: usize) -> String {
    let elements = match array.data_type() {
        ArrowType::List(_) => array.as_list::<i32>().value(i),
        ArrowType::LargeList(_) => array.as_list::<i64>().value(i),
        ArrowType::FixedSizeList(..) => array.as_fixed_size_list().value(i),
        _ => return String::new(),
    };
    let nested = matches!(elements.data_type(), ArrowType::List(_) | ArrowType::LargeList(_) | ArrowType::FixedSizeList(..));
    let mut out = String::from("{");
    for j in 0..elements.len() {
        if j > 0 {
            out.push(',');
        }
        let text = match value_at(&elements, j, DataType::Text) {
            Value::Null => {
                out.push_str("NULL");
                continue;
            }
            Value::Text(s) => s,
            v => {
                let mut s = String::new();
                v.write_text(DataType::Text, &mut s);
                s
            }
        };
        if nested {
            out.push_str(&text);
        } else {
            freshet_core::sql::plpgsql::push_array_element(&text, &mut out);
        }
    }
    out.push('}');
    out
}

/// Rows of values as Arrow arrays, one per column (for the embedded API's results).
pub fn build_array(rows: &[Vec<Value>], column: usize, ty: DataType) -> ArrayRef {
    let cell = |r: &Vec<Value>| r.get(column).cloned().unwrap_or(Value::Null);
    macro_rules! build {
        ($builder:expr, $pat:pat => $v:expr) => {{
            let mut b = $builder;
            for r in rows {
                match cell(r) {
                    $pat => b.append_value($v),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish()) as ArrayRef
        }};
    }
    match ty {
        DataType::Bool => build!(BooleanBuilder::new(), Value::Bool(x) => x),
        DataType::Int16 => build!(Int16Builder::new(), Value::Int16(x) => x),
        DataType::Int32 => build!(Int32Builder::new(), Value::Int32(x) => x),
        DataType::Int64 => build!(Int64Builder::new(), Value::Int64(x) => x),
        DataType::Float32 => build!(Float32Builder::new(), Value::Float32(x) => x),
        DataType::Float64 => build!(Float64Builder::new(), Value::Float64(x) => x),
        DataType::Decimal { precision, scale } => {
            let mut b = Decimal128Builder::new();
            for r in rows {
                match cell(r) {
                    Value::Decimal(d) => b.append_value(d.rescale(scale).map(|d| d.value).unwrap_or(d.value)),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish().with_precision_and_scale(precision, scale as i8).unwrap_or_else(|_| {
                datafusion::arrow::array::Decimal128Array::new_null(rows.len())
            }))
        }
        DataType::Char(_) | DataType::Varchar(_) | DataType::Text | DataType::Uuid => {
            build!(StringViewBuilder::new(), Value::Text(x) => x)
        }
        DataType::Date => build!(Date32Builder::new(), Value::Date(x) => x),
        DataType::Timestamp => build!(TimestampMicrosecondBuilder::new(), Value::Timestamp(x) => x),
        DataType::TimestampTz => {
            build!(TimestampMicrosecondBuilder::new().with_timezone(crate::types::UTC), Value::TimestampTz(x) => x)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_print_as_postgresql_prints_them() {
        assert_eq!(interval_text(0, 32, 5_400_000_000), "32 days 01:30:00");
        assert_eq!(interval_text(0, 0, 0), "00:00:00");
        assert_eq!(interval_text(0, 1, 0), "1 day");
        assert_eq!(interval_text(14, -1, -1_500_000), "1 year 2 mons -1 days -00:00:01.5");
        assert_eq!(interval_text(-1, 0, 90_000_000_000), "-1 mons 25:00:00");
    }
}
