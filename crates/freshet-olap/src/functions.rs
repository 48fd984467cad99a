//! Scalar functions PostgreSQL has and DataFusion lacks: `md5(text)`, `quote_ident`,
//! `quote_literal`, `quote_nullable`,
//! `width_bucket(operand, low, high, count)`, `age(timestamp, timestamp)` (the one-argument
//! `age(t)`, from midnight today, is rewritten into it: `rewrite::postgres_functions`),
//! `format(text, …)`, `justify_hours`, `justify_days`, `justify_interval` and
//! `make_timestamp`; and `freshet_time_precision(timestamp, digits)`, which the rewrites
//! call for `CAST(… AS timestamp(p))` and `CURRENT_TIMESTAMP(p)`.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Builder, IntervalMonthDayNanoBuilder, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType as ArrowType, Float64Type, Int64Type, IntervalMonthDayNano, IntervalMonthDayNanoType, IntervalUnit, TimeUnit,
    TimestampMicrosecondType,
};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use freshet_core::sql::names::quote_ident;
use freshet_core::types::Value;
use freshet_core::{Error, SqlState};
use md5::{Digest, Md5};

use crate::checked::columnar;
use crate::error::{no_function_for, to_datafusion};

/// The functions, for the engine to register.
pub(crate) fn all() -> Vec<ScalarUDF> {
    vec![
        TextFunction::udf("md5", md5_hex),
        TextFunction::udf("quote_ident", |t| t.map(quote_ident)),
        TextFunction::udf("quote_literal", quote_literal),
        TextFunction::udf("quote_nullable", |t| quote_literal(t).or_else(|| Some("NULL".to_string()))),
        ScalarUDF::new_from_impl(WidthBucket { signature: Signature::any(4, Volatility::Immutable) }),
        ScalarUDF::new_from_impl(Age { signature: Signature::any(2, Volatility::Immutable) }),
        ScalarUDF::new_from_impl(Format { signature: Signature::variadic_any(Volatility::Immutable) }),
        ScalarUDF::new_from_impl(Justify { hours: true, days: false, signature: Signature::any(1, Volatility::Immutable) }),
        ScalarUDF::new_from_impl(Justify { hours: false, days: true, signature: Signature::any(1, Volatility::Immutable) }),
        ScalarUDF::new_from_impl(Justify { hours: true, days: true, signature: Signature::any(1, Volatility::Immutable) }),
        ScalarUDF::new_from_impl(MakeTimestamp { signature: Signature::any(6, Volatility::Immutable) }),
        ScalarUDF::new_from_impl(TimePrecision { signature: Signature::any(2, Volatility::Immutable) }),
        ScalarUDF::new_from_impl(Nullable { signature: Signature::any(1, Volatility::Immutable) }),
        ScalarUDF::new_from_impl(ClockTimestamp { signature: Signature::nullary(Volatility::Volatile) }),
    ]
}

/// `freshet_nullable(x)`: `x`, as a value that may be NULL. A scalar subquery is NULL when it
/// finds no row, but DataFusion gives it the nullability of its column, and a subquery of a
/// NOT NULL column that found nothing failed (`Column … is declared as non-nullable but
/// contains null values`); `rewrite::nullable_scalar_subqueries` wraps such columns in it.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Nullable {
    signature: Signature,
}

pub(crate) const NULLABLE: &str = "freshet_nullable";

impl ScalarUDFImpl for Nullable {
    fn name(&self) -> &str {
        NULLABLE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        match args {
            [t] => Ok(t.clone()),
            _ => Err(no_function_for(self.name(), args)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        args.args.into_iter().next().ok_or_else(|| to_datafusion(Error::internal("freshet_nullable without an argument")))
    }
}

/// `clock_timestamp()`: the time when it is evaluated (once per batch of rows), where now()
/// is the statement's (or transaction's) start.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ClockTimestamp {
    signature: Signature,
}

impl ScalarUDFImpl for ClockTimestamp {
    fn name(&self) -> &str {
        "clock_timestamp"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Timestamp(TimeUnit::Microsecond, Some(crate::types::UTC.into())))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let now = freshet_core::types::datetime::now_micros();
        Ok(ColumnarValue::Scalar(datafusion::common::ScalarValue::TimestampMicrosecond(Some(now), Some(crate::types::UTC.into()))))
    }
}

/// `justify_hours(interval)`, `justify_days(interval)` and `justify_interval(interval)`
/// ([`freshet_core::types::datetime::Interval::justified`]).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Justify {
    hours: bool,
    days: bool,
    signature: Signature,
}

impl ScalarUDFImpl for Justify {
    fn name(&self) -> &str {
        match (self.hours, self.days) {
            (true, false) => "justify_hours",
            (false, true) => "justify_days",
            _ => "justify_interval",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        match args {
            [ArrowType::Interval(_) | ArrowType::Null] => Ok(ArrowType::Interval(IntervalUnit::MonthDayNano)),
            _ => Err(no_function_for(self.name(), args)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let n = args.number_rows;
        let intervals = cast(&args.args[0].to_array(n)?, &ArrowType::Interval(IntervalUnit::MonthDayNano))?;
        let intervals = intervals.as_primitive::<IntervalMonthDayNanoType>();
        let mut out = IntervalMonthDayNanoBuilder::with_capacity(n);
        for i in 0..n {
            if intervals.is_null(i) {
                out.append_null();
                continue;
            }
            let justified = crate::interval::from_arrow(intervals.value(i)).justified(self.hours, self.days).map_err(to_datafusion)?;
            out.append_value(crate::interval::to_arrow(justified)?);
        }
        columnar(Arc::new(out.finish()), scalar)
    }
}

/// `make_timestamp(year, month, day, hour, min, sec) → timestamp`
/// ([`freshet_core::types::datetime::make_timestamp`]).
#[derive(Debug, PartialEq, Eq, Hash)]
struct MakeTimestamp {
    signature: Signature,
}

impl ScalarUDFImpl for MakeTimestamp {
    fn name(&self) -> &str {
        "make_timestamp"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        let number = |t: &ArrowType| t.is_numeric() || matches!(t, ArrowType::Null);
        if args.iter().all(number) {
            Ok(ArrowType::Timestamp(TimeUnit::Microsecond, None))
        } else {
            Err(no_function_for("make_timestamp", args))
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = args.number_rows;
        let ints = (0..5).map(|i| Ok(cast(&args.args[i].to_array(n)?, &ArrowType::Int64)?)).collect::<DfResult<Vec<ArrayRef>>>()?;
        let ints: Vec<_> = ints.iter().map(|a| a.as_primitive::<Int64Type>()).collect();
        let seconds = cast(&args.args[5].to_array(n)?, &ArrowType::Float64)?;
        let seconds = seconds.as_primitive::<Float64Type>();
        let mut out = datafusion::arrow::array::TimestampMicrosecondBuilder::with_capacity(n);
        for i in 0..n {
            if ints.iter().any(|a| a.is_null(i)) || seconds.is_null(i) {
                out.append_null();
                continue;
            }
            let f = |k: usize| ints[k].value(i);
            let at = freshet_core::types::datetime::make_timestamp(f(0), f(1), f(2), f(3), f(4), seconds.value(i)).map_err(to_datafusion)?;
            out.append_value(at);
        }
        columnar(Arc::new(out.finish()), scalar)
    }
}

/// `freshet_time_precision(timestamp, digits) → timestamp`: the timestamp rounded to `digits`
/// fractional digits of a second ([`freshet_core::types::datetime::round_to_precision`]), in
/// microseconds and with the argument's zone.
#[derive(Debug, PartialEq, Eq, Hash)]
struct TimePrecision {
    signature: Signature,
}

pub(crate) const TIME_PRECISION: &str = "freshet_time_precision";

impl ScalarUDFImpl for TimePrecision {
    fn name(&self) -> &str {
        TIME_PRECISION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        match args {
            [ArrowType::Timestamp(_, zone), digits] if digits.is_integer() => Ok(ArrowType::Timestamp(TimeUnit::Microsecond, zone.clone())),
            [ArrowType::Null, digits] if digits.is_integer() => Ok(ArrowType::Timestamp(TimeUnit::Microsecond, None)),
            _ => Err(no_function_for(self.name(), args)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = args.number_rows;
        let ty = args.return_field.data_type().clone();
        let times = cast(&args.args[0].to_array(n)?, &ty)?;
        let times = times.as_primitive::<TimestampMicrosecondType>();
        let digits = cast(&args.args[1].to_array(n)?, &ArrowType::Int64)?;
        let digits = digits.as_primitive::<Int64Type>();
        let rounded: datafusion::arrow::array::TimestampMicrosecondArray = (0..n)
            .map(|i| {
                (!times.is_null(i) && !digits.is_null(i))
                    .then(|| freshet_core::types::datetime::round_to_precision(times.value(i), digits.value(i).clamp(0, 6) as u32))
            })
            .collect();
        let ArrowType::Timestamp(_, zone) = ty else { return Err(no_function_for(self.name(), &[ty])) };
        columnar(Arc::new(rounded.with_timezone_opt(zone)), scalar)
    }
}

/// A function of one text (an argument of another type is read as its text): `md5(text)`,
/// the MD5 digest of the text's UTF-8 bytes in lower-case hex; `quote_ident(text)`,
/// `quote_literal(text)` and `quote_nullable(text)`, the text quoted for SQL as PostgreSQL
/// quotes it (dynamic SQL in PL/pgSQL builds statements with them).
#[derive(Debug)]
struct TextFunction {
    name: &'static str,
    f: fn(Option<&str>) -> Option<String>,
    signature: Signature,
}

// A function is its name (function pointers do not compare meaningfully).
impl PartialEq for TextFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for TextFunction {}

impl std::hash::Hash for TextFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl TextFunction {
    fn udf(name: &'static str, f: fn(Option<&str>) -> Option<String>) -> ScalarUDF {
        ScalarUDF::new_from_impl(TextFunction { name, f, signature: Signature::any(1, Volatility::Immutable) })
    }
}

fn md5_hex(text: Option<&str>) -> Option<String> {
    text.map(|t| Md5::digest(t.as_bytes()).iter().map(|b| format!("{b:02x}")).collect())
}

/// `'…'` with quotes doubled; with a backslash, PostgreSQL's `E'…'` with backslashes doubled.
fn quote_literal(text: Option<&str>) -> Option<String> {
    text.map(|t| {
        let quoted = t.replace('\'', "''");
        if t.contains('\\') { format!("E'{}'", quoted.replace('\\', "\\\\")) } else { format!("'{quoted}'") }
    })
}

impl ScalarUDFImpl for TextFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let texts = cast(&args.args[0].to_array(args.number_rows)?, &ArrowType::Utf8)?;
        let texts = texts.as_string::<i32>();
        let mut out = StringBuilder::with_capacity(texts.len(), texts.len() * 32);
        for i in 0..texts.len() {
            out.append_option((self.f)((!texts.is_null(i)).then(|| texts.value(i))));
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

/// `format(formatstr, args…) → text`: `%s` (the argument as text, NULL as nothing), `%I` (as a
/// quoted identifier where it needs quotes), `%L` (as a quoted literal, NULL as `NULL`) and
/// `%%`; an argument position (`%2$s`) and a width (`%5s`, `%-5s`) as PostgreSQL reads them.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Format {
    signature: Signature,
}

fn format_error(message: &str) -> Error {
    Error::new(SqlState::InvalidParameterValue, message.to_string())
}

/// One formatted string from the template and the arguments' texts (None: NULL).
fn format_text(template: &str, args: &[Option<String>]) -> Result<String, Error> {
    let mut out = String::new();
    let mut chars = template.chars().peekable();
    let mut next = 0;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        // [position$][-][width]type
        let mut digits = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        let mut position = None;
        if !digits.is_empty() && chars.peek() == Some(&'$') {
            chars.next();
            position = Some(digits.parse::<usize>().map_err(|_| format_error("argument number is out of range"))?);
            digits.clear();
        }
        let left = digits.is_empty() && chars.peek() == Some(&'-');
        if left {
            chars.next();
        }
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        let width: usize = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| format_error("number is out of range"))? };
        let kind = chars.next().ok_or_else(|| format_error("unterminated format() type specifier"))?;
        let index = match position {
            Some(0) => return Err(format_error("format specifies argument 0, but arguments are numbered from 1")),
            Some(p) => p - 1,
            None => next,
        };
        next = index + 1;
        let arg = args.get(index).ok_or_else(|| format_error("too few arguments for format()"))?;
        let text = match (kind, arg) {
            ('s', Some(s)) => s.clone(),
            ('s', None) => String::new(),
            ('I', Some(s)) => quote_ident(s),
            ('I', None) => {
                return Err(Error::new(
                    SqlState::custom("22004").unwrap_or(SqlState::InvalidParameterValue),
                    "null values cannot be formatted as an SQL identifier",
                ))
            }
            ('L', Some(s)) => format!("'{}'", s.replace('\'', "''")),
            ('L', None) => "NULL".to_string(),
            (other, _) => return Err(format_error(&format!("unrecognized format() type specifier \"{other}\""))),
        };
        let pad = width.saturating_sub(text.chars().count());
        if left {
            out.push_str(&text);
            out.extend(std::iter::repeat_n(' ', pad));
        } else {
            out.extend(std::iter::repeat_n(' ', pad));
            out.push_str(&text);
        }
    }
    Ok(out)
}

impl ScalarUDFImpl for Format {
    fn name(&self) -> &str {
        "format"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        match args.first() {
            Some(ArrowType::Utf8 | ArrowType::Utf8View | ArrowType::LargeUtf8 | ArrowType::Null) => Ok(ArrowType::Utf8),
            _ => Err(no_function_for("format", args)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = args.number_rows;
        let arrays = args.args.iter().map(|a| a.to_array(n)).collect::<DfResult<Vec<_>>>()?;
        let mut out = StringBuilder::with_capacity(n, n * 16);
        for i in 0..n {
            // Each value in PostgreSQL's text form (a timestamp as `2024-03-05 10:00:00`).
            let texts: Vec<Option<String>> = arrays
                .iter()
                .map(|a| {
                    let ty = crate::types::sql_type_of_arrow(a.data_type());
                    (crate::values::value_at(a, i, ty), ty)
                })
                .map(|(v, ty)| match v {
                    Value::Null => None,
                    // As output shows it (without the storage scale's trailing zeros).
                    Value::Decimal(d) => Some(freshet_core::types::shown_decimal(d, ty).to_string()),
                    v => {
                        let mut s = String::new();
                        v.write_as_text(&mut s);
                        Some(s)
                    }
                })
                .collect();
            match &texts[0] {
                None => out.append_null(),
                Some(template) => out.append_value(format_text(template, &texts[1..]).map_err(to_datafusion)?),
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
    fn format_follows_postgresql() {
        let args = |a: &[Option<&str>]| a.iter().map(|s| s.map(str::to_string)).collect::<Vec<_>>();
        assert_eq!(format_text("%s has %s orders", &args(&[Some("ann"), Some("2")])).unwrap(), "ann has 2 orders");
        assert_eq!(format_text("%I.%I", &args(&[Some("my table"), Some("col")])).unwrap(), "\"my table\".col");
        assert_eq!(format_text("%L, %L", &args(&[Some("it's"), None])).unwrap(), "'it''s', NULL");
        assert_eq!(format_text("[%5s|%-5s]", &args(&[Some("ab"), Some("cd")])).unwrap(), "[   ab|cd   ]");
        assert_eq!(format_text("%2$s %1$s", &args(&[Some("a"), Some("b")])).unwrap(), "b a");
        assert_eq!(format_text("100%%", &[]).unwrap(), "100%");
        assert_eq!(format_text("%s %s", &args(&[Some("a")])).unwrap_err().message, "too few arguments for format()");
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
