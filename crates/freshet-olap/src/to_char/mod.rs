//! `to_char(value, template)` with PostgreSQL's template patterns, in place of DataFusion's
//! `to_char` (which reads a template as a chrono format, so `YYYY` came out as `YYYY`):
//! - a timestamp or date with a date/time template ([`datetime`]): `YYYY-MM-DD HH24:MI:SS`,
//!   `FMDay, DDth Month`;
//! - a number (integer, numeric, floating point) with a number template ([`number`]):
//!   `999.99`, `FM9,999.00`, `S0000`.
//!
//! Each distinct template of a batch is compiled once (a constant template: once per batch).
//! NULL in either argument gives NULL.
//!
//! The other way, `to_timestamp(text, template)` and `to_date(text, template)` read a date
//! and time with the same templates ([`parse`]), in place of DataFusion's functions of those
//! names (chrono formats); `to_timestamp(seconds)` is the instant that many seconds after
//! 1970-01-01 UTC, as in PostgreSQL.

mod datetime;
mod number;
mod parse;

use std::sync::Arc;

use chrono::DateTime;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType as ArrowType, Decimal128Type, Float64Type, Int64Type, TimeUnit, TimestampMicrosecondType};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};
use freshet_core::{Error, SqlState};

use crate::checked::columnar;
use crate::error::{no_function_for, to_datafusion};

/// Quoted text at the start of `s` (which starts with `"`): the text up to the closing quote,
/// a backslash escaping the character after it, and what follows the closing quote.
fn quoted(s: &str) -> (String, &str) {
    let mut text = String::new();
    let mut chars = s[1..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (text, &s[i + 2..]),
            '\\' => {
                if let Some((_, next)) = chars.next() {
                    text.push(next);
                }
            }
            c => text.push(c),
        }
    }
    (text, "")
}

/// A number's digits rounded half away from zero to `post` decimal places, from its digits
/// without sign (`12.345`); a value that rounds to zero is not negative.
fn decimal_digits(unsigned: &str, negative: bool, post: usize) -> number::Digits {
    let (int, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let mut digits: Vec<u8> = int.bytes().chain(frac.bytes().chain(std::iter::repeat(b'0')).take(post)).collect();
    if frac.as_bytes().get(post).is_some_and(|&d| d >= b'5') {
        // Round up, carrying to the left (a new leading 1 if every digit was 9).
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, b'1');
                break;
            }
            i -= 1;
            if digits[i] == b'9' {
                digits[i] = b'0';
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let int_len = digits.len() - post;
    let leading = digits[..int_len].iter().take_while(|&&d| d == b'0').count().min(int_len.saturating_sub(1));
    let mut text = String::from_utf8_lossy(&digits[leading..int_len]).into_owned();
    if text.is_empty() {
        text.push('0');
    }
    if post > 0 {
        text.push('.');
        text.push_str(&String::from_utf8_lossy(&digits[int_len..]));
    }
    let negative = negative && digits.iter().any(|&d| d != b'0');
    number::Digits { text, negative }
}

/// The digits of a floating-point value for `post` decimal places, and the decimal places
/// kept: as PostgreSQL, at most 15 significant digits in all.
fn float_digits(v: f64, post: usize) -> (number::Digits, usize) {
    const DIGITS: usize = 15;
    let integer_digits = format!("{:.0}", v.abs()).len();
    let post = if integer_digits >= DIGITS { 0 } else { post.min(DIGITS - integer_digits) };
    (number::Digits { text: format!("{:.post$}", v.abs()), negative: v.is_sign_negative() && !v.is_nan() }, post)
}

/// `to_char(timestamp | date | number, text)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct ToChar {
    signature: Signature,
}

impl ToChar {
    pub(crate) fn new() -> ToChar {
        ToChar { signature: Signature::any(2, Volatility::Immutable) }
    }
}

fn is_text(t: &ArrowType) -> bool {
    matches!(t, ArrowType::Utf8 | ArrowType::Utf8View | ArrowType::LargeUtf8 | ArrowType::Null)
}

fn is_time(t: &ArrowType) -> bool {
    matches!(t, ArrowType::Timestamp(..) | ArrowType::Date32 | ArrowType::Date64 | ArrowType::Null)
}

/// Rows of text from each row's value and template, compiling each distinct template once.
fn each_row<T>(
    n: usize,
    templates: &StringArray,
    is_null: impl Fn(usize) -> bool,
    compile: impl Fn(&str) -> DfResult<T>,
    mut write: impl FnMut(usize, &T, &mut String) -> DfResult<()>,
) -> DfResult<ArrayRef> {
    let mut out = StringBuilder::with_capacity(n, n * 16);
    let mut compiled: Option<(String, T)> = None;
    let mut text = String::new();
    for i in 0..n {
        if is_null(i) || templates.is_null(i) {
            out.append_null();
            continue;
        }
        let template = templates.value(i);
        let current = match compiled {
            Some((ref t, ref c)) if t == template => c,
            _ => &compiled.insert((template.to_string(), compile(template)?)).1,
        };
        text.clear();
        write(i, current, &mut text)?;
        out.append_value(&text);
    }
    Ok(Arc::new(out.finish()))
}

impl ScalarUDFImpl for ToChar {
    fn name(&self) -> &str {
        "to_char"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        match args {
            [v, f] if is_text(f) && (is_time(v) || v.is_numeric()) => Ok(ArrowType::Utf8),
            _ => Err(no_function_for("to_char", args)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = args.number_rows;
        let values = args.args[0].to_array(n)?;
        let templates = cast(&args.args[1].to_array(n)?, &ArrowType::Utf8)?;
        let templates = templates.as_string::<i32>();
        let number = |template: &str| number::compile(template).map_err(to_datafusion);
        let result = match values.data_type() {
            t if is_time(t) => {
                // Every value as microseconds of a wall-clock time (a zoned value's UTC time,
                // which is what Freshet's sessions show).
                let times = cast(&values, &ArrowType::Timestamp(TimeUnit::Microsecond, None))?;
                let times = times.as_primitive::<TimestampMicrosecondType>();
                each_row(n, templates, |i| times.is_null(i), |t| Ok(datetime::compile(t)), |i, pieces, out| {
                    let t = DateTime::from_timestamp_micros(times.value(i))
                        .ok_or_else(|| to_datafusion(Error::new(SqlState::DatetimeFieldOverflow, "timestamp out of range")))?;
                    datetime::format(pieces, &t.naive_utc(), out);
                    Ok(())
                })?
            }
            ArrowType::Decimal128(_, scale) => {
                let scale = (*scale).max(0) as u32;
                let decimals = values.as_primitive::<Decimal128Type>();
                each_row(n, templates, |i| decimals.is_null(i), number, |i, t, out| {
                    let v = decimals.value(i);
                    let unit = 10u128.pow(scale);
                    let (int, frac) = (v.unsigned_abs() / unit, v.unsigned_abs() % unit);
                    let unsigned = if scale == 0 { int.to_string() } else { format!("{int}.{frac:0width$}", width = scale as usize) };
                    t.format(&decimal_digits(&unsigned, v < 0, t.post()), t.post(), out);
                    Ok(())
                })?
            }
            ArrowType::Float16 | ArrowType::Float32 | ArrowType::Float64 => {
                let floats = cast(&values, &ArrowType::Float64)?;
                let floats = floats.as_primitive::<Float64Type>();
                each_row(n, templates, |i| floats.is_null(i), number, |i, t, out| {
                    let (digits, post) = float_digits(floats.value(i), t.post());
                    t.format(&digits, post, out);
                    Ok(())
                })?
            }
            t if t.is_integer() => {
                let integers = cast(&values, &ArrowType::Int64)?;
                let integers = integers.as_primitive::<Int64Type>();
                each_row(n, templates, |i| integers.is_null(i), number, |i, t, out| {
                    let v = integers.value(i);
                    t.format(&decimal_digits(&v.unsigned_abs().to_string(), v < 0, t.post()), t.post(), out);
                    Ok(())
                })?
            }
            _ => return Err(no_function_for("to_char", &[values.data_type().clone(), ArrowType::Utf8])),
        };
        columnar(result, scalar)
    }
}

/// `to_timestamp(text, template) → timestamptz`, `to_timestamp(seconds) → timestamptz` and
/// `to_date(text, template) → date`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct ToTimestamp {
    /// `to_date`: the date of what is read.
    date: bool,
    signature: Signature,
}

impl ToTimestamp {
    pub(crate) fn new(date: bool) -> ToTimestamp {
        ToTimestamp { date, signature: Signature::variadic_any(Volatility::Immutable) }
    }

    fn zoned() -> ArrowType {
        ArrowType::Timestamp(TimeUnit::Microsecond, Some(crate::types::UTC.into()))
    }
}

impl ScalarUDFImpl for ToTimestamp {
    fn name(&self) -> &str {
        if self.date { "to_date" } else { "to_timestamp" }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        match args {
            [t, f] if is_text(t) && is_text(f) => Ok(if self.date { ArrowType::Date32 } else { ToTimestamp::zoned() }),
            [n] if !self.date && (n.is_numeric() || matches!(n, ArrowType::Null)) => Ok(ToTimestamp::zoned()),
            _ => Err(no_function_for(self.name(), args)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = args.number_rows;
        if let [seconds] = args.args.as_slice() {
            // Seconds since the epoch, to the microsecond.
            let seconds = cast(&seconds.to_array(n)?, &ArrowType::Float64)?;
            let seconds = seconds.as_primitive::<Float64Type>();
            let mut out = datafusion::arrow::array::TimestampMicrosecondBuilder::with_capacity(n).with_timezone(crate::types::UTC);
            for i in 0..n {
                let s = seconds.value(i);
                if seconds.is_null(i) {
                    out.append_null();
                } else if !s.is_finite() || s.abs() > 9.0e12 {
                    return Err(to_datafusion(Error::new(SqlState::DatetimeFieldOverflow, "timestamp out of range")));
                } else {
                    out.append_value((s * 1e6).round() as i64);
                }
            }
            return columnar(Arc::new(out.finish()), scalar);
        }
        let texts = cast(&args.args[0].to_array(n)?, &ArrowType::Utf8)?;
        let texts = texts.as_string::<i32>();
        let templates = cast(&args.args[1].to_array(n)?, &ArrowType::Utf8)?;
        let templates = templates.as_string::<i32>();
        let mut compiled: Option<(String, Vec<datetime::Piece>)> = None;
        let mut instants = Vec::with_capacity(n);
        for i in 0..n {
            if texts.is_null(i) || templates.is_null(i) {
                instants.push(None);
                continue;
            }
            let template = templates.value(i);
            let pieces = match compiled {
                Some((ref t, ref p)) if t == template => p,
                _ => &compiled.insert((template.to_string(), datetime::compile(template))).1,
            };
            instants.push(Some(parse::parse(pieces, texts.value(i)).map_err(to_datafusion)?));
        }
        let result: ArrayRef = if self.date {
            let days = freshet_core::types::datetime::MICROS_PER_DAY;
            Arc::new(datafusion::arrow::array::Date32Array::from_iter(instants.iter().map(|t| t.map(|t| t.div_euclid(days) as i32))))
        } else {
            Arc::new(datafusion::arrow::array::TimestampMicrosecondArray::from_iter(instants).with_timezone(crate::types::UTC))
        };
        columnar(result, scalar)
    }
}

