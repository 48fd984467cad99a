//! Scalar functions PostgreSQL has and DataFusion lacks: `md5(text)`,
//! `width_bucket(operand, low, high, count)` and `age(timestamp, timestamp)` (the one-argument
//! `age(t)`, from midnight today, is rewritten into it: `rewrite::postgres_functions`).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Builder, IntervalMonthDayNanoBuilder, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType as ArrowType, Float64Type, Int64Type, IntervalMonthDayNano, IntervalUnit, TimeUnit, TimestampMicrosecondType,
};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use freshet_core::{Error, SqlState};
use md5::{Digest, Md5};

use crate::checked::columnar;
use crate::error::{no_function_for, to_datafusion};

/// The functions, for the engine to register.
pub(crate) fn all() -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::new_from_impl(Md5Text { signature: Signature::any(1, Volatility::Immutable) }),
        ScalarUDF::new_from_impl(WidthBucket { signature: Signature::any(4, Volatility::Immutable) }),
        ScalarUDF::new_from_impl(Age { signature: Signature::any(2, Volatility::Immutable) }),
    ]
}

/// `md5(text) → text`: the MD5 digest of the text's UTF-8 bytes in lower-case hex.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Md5Text {
    signature: Signature,
}

impl ScalarUDFImpl for Md5Text {
    fn name(&self) -> &str {
        "md5"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        match args {
            [ArrowType::Utf8 | ArrowType::Utf8View | ArrowType::LargeUtf8 | ArrowType::Null] => Ok(ArrowType::Utf8),
            _ => Err(no_function_for("md5", args)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let texts = cast(&args.args[0].to_array(args.number_rows)?, &ArrowType::Utf8)?;
        let texts = texts.as_string::<i32>();
        let mut out = StringBuilder::with_capacity(texts.len(), texts.len() * 32);
        for i in 0..texts.len() {
            if texts.is_null(i) {
                out.append_null();
            } else {
                let digest = Md5::digest(texts.value(i).as_bytes());
                out.append_value(digest.iter().map(|b| format!("{b:02x}")).collect::<String>());
            }
        }
        columnar(Arc::new(out.finish()), scalar)
    }
}

/// `width_bucket(operand, low, high, count) → integer`: the bucket (1 to count) of `operand`
/// among `count` equal-width buckets from `low` to `high` (descending if `low > high`); 0
/// before the first, count + 1 past the last, as PostgreSQL numbers them.
#[derive(Debug, PartialEq, Eq, Hash)]
struct WidthBucket {
    signature: Signature,
}

/// One operand's bucket.
fn bucket(operand: f64, low: f64, high: f64, count: i64) -> Result<i32, Error> {
    let invalid = |m: &str| Error::new(SqlState::custom("2201G").unwrap_or(SqlState::InvalidParameterValue), m.to_string());
    if count <= 0 {
        return Err(invalid("count must be greater than zero"));
    }
    if low == high {
        return Err(invalid("lower bound cannot equal upper bound"));
    }
    if !operand.is_finite() || !low.is_finite() || !high.is_finite() {
        return Err(invalid("operand, lower bound, and upper bound cannot be NaN or infinity"));
    }
    let n = count as f64;
    let b = if low < high {
        if operand < low {
            0.0
        } else if operand >= high {
            n + 1.0
        } else {
            ((operand - low) / (high - low) * n).floor() + 1.0
        }
    } else if operand > low {
        0.0
    } else if operand <= high {
        n + 1.0
    } else {
        ((low - operand) / (low - high) * n).floor() + 1.0
    };
    i32::try_from(b as i64).map_err(|_| Error::out_of_range("integer"))
}

impl ScalarUDFImpl for WidthBucket {
    fn name(&self) -> &str {
        "width_bucket"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        let number = |t: &ArrowType| t.is_numeric() || *t == ArrowType::Null;
        match args {
            [v, l, h, c] if number(v) && number(l) && number(h) && (c.is_integer() || *c == ArrowType::Null) => Ok(ArrowType::Int32),
            _ => Err(no_function_for("width_bucket", args)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = args.number_rows;
        let floats = |i: usize| -> DfResult<ArrayRef> { Ok(cast(&args.args[i].to_array(n)?, &ArrowType::Float64)?) };
        let (v, l, h) = (floats(0)?, floats(1)?, floats(2)?);
        let (v, l, h) = (v.as_primitive::<Float64Type>(), l.as_primitive::<Float64Type>(), h.as_primitive::<Float64Type>());
        let c = cast(&args.args[3].to_array(n)?, &ArrowType::Int64)?;
        let c = c.as_primitive::<Int64Type>();
        let mut out = Int32Builder::with_capacity(n);
        for i in 0..n {
            if v.is_null(i) || l.is_null(i) || h.is_null(i) || c.is_null(i) {
                out.append_null();
            } else {
                out.append_value(bucket(v.value(i), l.value(i), h.value(i), c.value(i)).map_err(to_datafusion)?);
            }
        }
        columnar(Arc::new(out.finish()), scalar)
    }
}

/// `age(a, b) → interval`: `a - b` in years, months and days of the calendar and a time of
/// day, as PostgreSQL computes it: fields subtracted one by one (the later timestamp's minus
/// the earlier's), each negative field borrowing from the next larger one (a day borrows the
/// length of the earlier timestamp's month), negated back if `a < b`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Age {
    signature: Signature,
}

/// The symbolic difference `a - b`: months, days, microseconds.
fn age(a: i64, b: i64) -> Option<IntervalMonthDayNano> {
    use chrono::{Datelike, Timelike};
    let (later, earlier, sign) = if a >= b { (a, b, 1) } else { (b, a, -1) };
    let t1 = chrono::DateTime::from_timestamp_micros(later)?.naive_utc();
    let t2 = chrono::DateTime::from_timestamp_micros(earlier)?.naive_utc();
    let mut micros = (t1.nanosecond() / 1_000) as i64 - (t2.nanosecond() / 1_000) as i64;
    let mut seconds = t1.num_seconds_from_midnight() as i64 - t2.num_seconds_from_midnight() as i64;
    let mut days = t1.day() as i64 - t2.day() as i64;
    let mut months = (t1.year() as i64 - t2.year() as i64) * 12 + t1.month() as i64 - t2.month() as i64;
    if micros < 0 {
        micros += 1_000_000;
        seconds -= 1;
    }
    if seconds < 0 {
        seconds += 86_400;
        days -= 1;
    }
    if days < 0 {
        // The length of the earlier timestamp's month.
        let (y, m) = (t2.year(), t2.month());
        let next = if m == 12 { chrono::NaiveDate::from_ymd_opt(y + 1, 1, 1) } else { chrono::NaiveDate::from_ymd_opt(y, m + 1, 1) }?;
        days += next.signed_duration_since(chrono::NaiveDate::from_ymd_opt(y, m, 1)?).num_days();
        months -= 1;
    }
    let time = seconds * 1_000_000 + micros;
    Some(IntervalMonthDayNano::new((sign * months) as i32, (sign * days) as i32, sign * time * 1_000))
}

impl ScalarUDFImpl for Age {
    fn name(&self) -> &str {
        "age"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        let time = |t: &ArrowType| matches!(t, ArrowType::Timestamp(..) | ArrowType::Date32 | ArrowType::Date64 | ArrowType::Null);
        match args {
            [a, b] if time(a) && time(b) => Ok(ArrowType::Interval(IntervalUnit::MonthDayNano)),
            _ => Err(no_function_for("age", args)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = args.number_rows;
        let micros = |i: usize| -> DfResult<ArrayRef> { Ok(cast(&args.args[i].to_array(n)?, &ArrowType::Timestamp(TimeUnit::Microsecond, None))?) };
        let (a, b) = (micros(0)?, micros(1)?);
        let (a, b) = (a.as_primitive::<TimestampMicrosecondType>(), b.as_primitive::<TimestampMicrosecondType>());
        let mut out = IntervalMonthDayNanoBuilder::with_capacity(n);
        for i in 0..n {
            if a.is_null(i) || b.is_null(i) {
                out.append_null();
            } else {
                out.append_option(age(a.value(i), b.value(i)));
            }
        }
        columnar(Arc::new(out.finish()), scalar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_numbered_as_postgresql_numbers_them() {
        assert_eq!(bucket(5.35, 0.024, 10.06, 5).unwrap(), 3);
        assert_eq!(bucket(-1.0, 0.0, 10.0, 5).unwrap(), 0);
        assert_eq!(bucket(10.0, 0.0, 10.0, 5).unwrap(), 6);
        assert_eq!(bucket(0.0, 0.0, 10.0, 5).unwrap(), 1);
        assert_eq!(bucket(7.0, 10.0, 0.0, 5).unwrap(), 2);
        assert_eq!(bucket(1.0, 0.0, 10.0, 0).unwrap_err().state.code(), "2201G");
        assert_eq!(bucket(1.0, 2.0, 2.0, 3).unwrap_err().state.code(), "2201G");
    }

    #[test]
    fn ages_are_postgresqls_symbolic_differences() {
        let at = |s: &str| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap().and_utc().timestamp_micros();
        let parts = |a: &str, b: &str| {
            let v = age(at(a), at(b)).unwrap();
            (v.months, v.days, v.nanoseconds / 1_000)
        };
        // PostgreSQL: 2 mons 4 days; 1 mon 30 days 23:00:00; -2 mons -4 days.
        assert_eq!(parts("2024-03-05 00:00:00", "2024-01-01 00:00:00"), (2, 4, 0));
        assert_eq!(parts("2024-03-01 00:00:00", "2024-01-01 01:00:00"), (1, 30, 23 * 3_600_000_000));
        assert_eq!(parts("2024-01-01 00:00:00", "2024-03-05 00:00:00"), (-2, -4, 0));
    }
}
