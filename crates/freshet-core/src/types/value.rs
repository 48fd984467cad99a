use std::cmp::Ordering;

use super::datetime::{self, MICROS_PER_DAY};
use super::decimal::Decimal;
use super::float;
use super::{DataType, TypeFamily};
use crate::error::{Error, Result, SqlState};

/// One SQL datum.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    Float32(f32),
    Float64(f64),
    Decimal(Decimal),
    Text(String),
    /// Days since 1970-01-01.
    Date(i32),
    /// Microseconds since 1970-01-01 00:00:00.
    Timestamp(i64),
    /// An instant: microseconds since 1970-01-01 00:00:00 UTC (`timestamp with time zone`).
    TimestampTz(i64),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The integer value of an integer datum.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int16(v) => Some(v as i64),
            Value::Int32(v) => Some(v as i64),
            Value::Int64(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float32(v) => Some(*v as f64),
            Value::Float64(v) => Some(*v),
            Value::Decimal(d) => Some(d.to_f64()),
            other => other.as_i64().map(|v| v as f64),
        }
    }

    pub fn as_decimal(&self) -> Option<Decimal> {
        match self {
            Value::Decimal(d) => Some(*d),
            other => other.as_i64().map(Decimal::from_i64),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// SQL comparison of two non-null values of comparable types; `None` if either is NULL.
    /// Numbers compare by value across integer, decimal and float types.
    pub fn sql_cmp(&self, other: &Value) -> Result<Option<Ordering>> {
        use Value::*;
        Ok(Some(match (self, other) {
            (Null, _) | (_, Null) => return Ok(None),
            (Bool(a), Bool(b)) => a.cmp(b),
            (Text(a), Text(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Date(a), Date(b)) => a.cmp(b),
            // A timestamp without time zone compares with an instant as the time in the
            // session's zone, UTC: the same microseconds.
            (Timestamp(a) | TimestampTz(a), Timestamp(b) | TimestampTz(b)) => a.cmp(b),
            (Date(a), Timestamp(b) | TimestampTz(b)) => (*a as i64 * MICROS_PER_DAY).cmp(b),
            (Timestamp(a) | TimestampTz(a), Date(b)) => a.cmp(&(*b as i64 * MICROS_PER_DAY)),
            (a, b) => match (a.as_i64(), b.as_i64()) {
                (Some(x), Some(y)) => x.cmp(&y),
                _ => match (a, b) {
                    (Float32(_) | Float64(_), _) | (_, Float32(_) | Float64(_)) => {
                        match (a.as_f64(), b.as_f64()) {
                            (Some(x), Some(y)) => float_cmp(x, y),
                            _ => return Err(incomparable(a, b)),
                        }
                    }
                    _ => match (a.as_decimal(), b.as_decimal()) {
                        (Some(x), Some(y)) => x.cmp_value(y),
                        _ => return Err(incomparable(a, b)),
                    },
                },
            },
        }))
    }

    /// Text form of the value as PostgreSQL prints it for a column of type `ty`.
    pub fn write_text(&self, ty: DataType, out: &mut String) {
        match self {
            Value::Null => {}
            Value::Bool(b) => out.push(if *b { 't' } else { 'f' }),
            // Written in place: `to_string` would allocate a string per number.
            Value::Int16(v) => push_int(*v as i64, out),
            Value::Int32(v) => push_int(*v as i64, out),
            Value::Int64(v) => push_int(*v, out),
            Value::Float32(v) => float::format_f32(*v, out),
            Value::Float64(v) => float::format_f64(*v, out),
            Value::Decimal(d) => {
                let _ = std::fmt::Write::write_fmt(out, format_args!("{}", super::shown_decimal(*d, ty)));
            }
            Value::Text(s) => {
                out.push_str(s);
                if let DataType::Char(n) = ty {
                    pad_char(s, n, out);
                }
            }
            Value::Date(d) => datetime::format_date(*d, out),
            Value::Timestamp(t) => datetime::format_timestamp(*t, out),
            Value::TimestampTz(t) => datetime::format_timestamptz(*t, out),
        }
    }

    /// The value cast to text (`v::text`, `||`): its output form, except that a boolean
    /// spells the word (`true`), as PostgreSQL's cast does where output prints `t`.
    pub fn write_as_text(&self, out: &mut String) {
        match self {
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            v => v.write_text(DataType::Text, out),
        }
    }

    pub fn to_text(&self, ty: DataType) -> Option<String> {
        if self.is_null() {
            return None;
        }
        let mut s = String::new();
        self.write_text(ty, &mut s);
        Some(s)
    }

    /// Parses text input for a column of type `ty` (PostgreSQL's type input functions).
    pub fn parse(text: &str, ty: DataType) -> Result<Value> {
        Ok(match ty {
            DataType::Bool => Value::Bool(parse_bool(text)?),
            DataType::Int16 => Value::Int16(parse_int(text, "smallint")?),
            DataType::Int32 => Value::Int32(parse_int(text, "integer")?),
            DataType::Int64 => Value::Int64(parse_int(text, "bigint")?),
            DataType::Float32 => {
                let v = float::parse_f64(text, "real")?;
                if v.is_finite() && (v as f32).is_infinite() {
                    return Err(Error::out_of_range("real"));
                }
                Value::Float32(v as f32)
            }
            DataType::Float64 => Value::Float64(float::parse_f64(text, "double precision")?),
            DataType::Decimal { precision, scale } => {
                Value::Decimal(Decimal::parse(text)?.fit(precision, scale)?)
            }
            DataType::Char(_) | DataType::Varchar(_) | DataType::Text => {
                Value::Text(text.to_string()).assign_to(ty)?
            }
            DataType::Date => Value::Date(datetime::parse_date(text)?),
            DataType::Timestamp => Value::Timestamp(datetime::parse_timestamp(text)?),
            DataType::TimestampTz => Value::TimestampTz(datetime::parse_timestamptz(text)?),
            DataType::Uuid => Value::Text(super::uuid::parse(text)?),
        })
    }

    /// Converts for storing into a column of type `ty` (PostgreSQL's assignment cast): numbers
    /// convert with range checks, strings that are too long are an error, text parses.
    pub fn assign_to(self, ty: DataType) -> Result<Value> {
        if self.is_already(ty) {
            return Ok(self);
        }
        match (self, ty) {
            (Value::Text(s), DataType::Char(n)) => {
                let len = s.trim_end_matches(' ').len();
                check_length(&s[..len], n, "character")?;
                Ok(Value::Text(keep_prefix(s, len)))
            }
            (Value::Text(s), DataType::Varchar(Some(n))) => {
                if s.len() > n as usize && s.chars().count() > n as usize {
                    let trimmed = s.trim_end_matches(' ');
                    check_length(trimmed, n, "character varying")?;
                    return Ok(Value::Text(truncate_chars(trimmed, n).to_string()));
                }
                Ok(Value::Text(s))
            }
            (v, ty) => v.cast(ty),
        }
    }

    /// The type a value has on its own (`None` for NULL): a decimal as the widest NUMERIC.
    pub fn data_type(&self) -> Option<DataType> {
        Some(match self {
            Value::Null => return None,
            Value::Bool(_) => DataType::Bool,
            Value::Int16(_) => DataType::Int16,
            Value::Int32(_) => DataType::Int32,
            Value::Int64(_) => DataType::Int64,
            Value::Float32(_) => DataType::Float32,
            Value::Float64(_) => DataType::Float64,
            Value::Decimal(_) => DataType::Decimal { precision: 38, scale: 10 },
            Value::Text(_) => DataType::Text,
            Value::Date(_) => DataType::Date,
            Value::Timestamp(_) => DataType::Timestamp,
            Value::TimestampTz(_) => DataType::TimestampTz,
        })
    }

    /// Whether the value needs no conversion to be of type `ty`: NULL, a value of exactly that
    /// type whose type has no length or precision to check, or a number or string that already
    /// has the declared scale, precision or length (the usual case of an assignment or cast,
    /// which then costs a comparison or two). Inlined for the exact types, which are most.
    #[inline(always)]
    fn is_already(&self, ty: DataType) -> bool {
        match (self, ty) {
            (Value::Null, _)
            | (Value::Int32(_), DataType::Int32)
            | (Value::Int64(_), DataType::Int64)
            | (Value::Int16(_), DataType::Int16)
            | (Value::Timestamp(_), DataType::Timestamp)
            | (Value::TimestampTz(_), DataType::TimestampTz)
            | (Value::Date(_), DataType::Date)
            | (Value::Float32(_), DataType::Float32)
            | (Value::Float64(_), DataType::Float64)
            | (Value::Bool(_), DataType::Bool)
            | (Value::Text(_), DataType::Text | DataType::Varchar(None)) => true,
            (Value::Decimal(_) | Value::Text(_), _) => self.fits_declared(ty),
            _ => false,
        }
    }

    /// Whether a NUMERIC or string already is what a cast to `ty` would make of it: what
    /// `Decimal::fit` returns unchanged (the scale, and fewer digits than the precision); no
    /// more bytes than characters allowed (so no more characters), and for CHAR no trailing
    /// blanks to strip.
    fn fits_declared(&self, ty: DataType) -> bool {
        match (self, ty) {
            (Value::Decimal(d), DataType::Decimal { precision, scale }) => {
                d.scale == scale && d.value.unsigned_abs() < super::decimal::pow10(precision) as u128
            }
            (Value::Text(s), DataType::Varchar(Some(n))) => s.len() <= n as usize,
            (Value::Text(s), DataType::Char(n)) => s.len() <= n as usize && !s.ends_with(' '),
            _ => false,
        }
    }

    /// Explicit CAST. Strings are truncated to a declared length, as PostgreSQL does.
    pub fn cast(self, ty: DataType) -> Result<Value> {
        use Value::*;
        if self.is_already(ty) {
            return Ok(self);
        }
        Ok(match (self, ty) {
            (Text(s), DataType::Char(n)) => {
                let len = truncate_chars(&s, n).trim_end_matches(' ').len();
                Text(keep_prefix(s, len))
            }
            (Text(s), DataType::Varchar(Some(n))) => {
                let len = truncate_chars(&s, n).len();
                Text(keep_prefix(s, len))
            }
            (Text(s), DataType::Varchar(None) | DataType::Text) => Text(s),
            (Text(s), ty) => Value::parse(&s, ty)?,
            (v, DataType::Char(_) | DataType::Varchar(_) | DataType::Text) => {
                let mut s = String::new();
                v.write_as_text(&mut s);
                Text(s).cast(ty)?
            }
            (Bool(b), DataType::Bool) => Bool(b),
            (v @ Int32(_), DataType::Int32) | (v @ Int64(_), DataType::Int64) | (v @ Int16(_), DataType::Int16) => v,
            (Bool(b), DataType::Int32) => Int32(b as i32),
            (Int32(v), DataType::Bool) => Bool(v != 0),
            (v @ (Int16(_) | Int32(_) | Int64(_)), ty) => cast_integer(v.as_i64().unwrap_or(0), ty)?,
            (Float32(v), ty) => cast_float(v as f64, ty)?,
            (Float64(v), ty) => cast_float(v, ty)?,
            (Decimal(d), ty) => cast_decimal(d, ty)?,
            (Date(d), DataType::Date) => Date(d),
            (Date(d), DataType::Timestamp) => Timestamp(d as i64 * MICROS_PER_DAY),
            (Date(d), DataType::TimestampTz) => TimestampTz(d as i64 * MICROS_PER_DAY),
            // Between local times and instants through the session's zone, UTC.
            (Timestamp(t) | TimestampTz(t), DataType::Timestamp) => Timestamp(t),
            (Timestamp(t) | TimestampTz(t), DataType::TimestampTz) => TimestampTz(t),
            (Timestamp(t) | TimestampTz(t), DataType::Date) => Date(t.div_euclid(MICROS_PER_DAY) as i32),
            (v, ty) => {
                return Err(Error::new(
                    SqlState::CannotCoerce,
                    format!("cannot cast type {} to {}", value_type_name(&v), ty.pg_name()),
                ))
            }
        })
    }
}

fn incomparable(a: &Value, b: &Value) -> Error {
    Error::new(
        SqlState::UndefinedFunction,
        format!("operator does not exist: {} = {}", value_type_name(a), value_type_name(b)),
    )
}

/// PostgreSQL orders NaN above every other float and treats NaN = NaN.
fn float_cmp(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

pub(crate) fn value_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "unknown",
        Value::Bool(_) => "boolean",
        Value::Int16(_) => "smallint",
        Value::Int32(_) => "integer",
        Value::Int64(_) => "bigint",
        Value::Float32(_) => "real",
        Value::Float64(_) => "double precision",
        Value::Decimal(_) => "numeric",
        Value::Text(_) => "text",
        Value::Date(_) => "date",
        Value::Timestamp(_) => "timestamp without time zone",
        Value::TimestampTz(_) => "timestamp with time zone",
    }
}

fn pad_char(s: &str, n: u32, out: &mut String) {
    let len = s.chars().count();
    for _ in len..n as usize {
        out.push(' ');
    }
}

/// Appends the decimal digits of `v`.
fn push_int(v: i64, out: &mut String) {
    let mut buf = [0u8; 20];
    out.push_str(std::str::from_utf8(decimal_digits(v, &mut buf)).unwrap_or_default());
}

/// The text of an integer (`-` and its decimal digits), written into `buf` without allocating.
pub fn decimal_digits(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    // 19 digits and a sign fill the buffer exactly (i64::MIN).
    let mut at = buf.len();
    let mut n = v.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

fn check_length(s: &str, n: u32, type_name: &str) -> Result<()> {
    if s.len() > n as usize && s.chars().count() > n as usize {
        return Err(Error::new(
            SqlState::StringDataRightTruncation,
            format!("value too long for type {type_name}({n})"),
        ));
    }
    Ok(())
}

/// The first `len` bytes of `s` (a character boundary), reusing its allocation.
fn keep_prefix(mut s: String, len: usize) -> String {
    s.truncate(len);
    s
}

fn truncate_chars(s: &str, n: u32) -> &str {
    if s.len() <= n as usize {
        return s;
    }
    match s.char_indices().nth(n as usize) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

pub fn parse_bool(text: &str) -> Result<bool> {
    let s = text.trim().to_ascii_lowercase();
    match s.as_str() {
        "t" | "true" | "y" | "yes" | "on" | "1" => Ok(true),
        "f" | "false" | "n" | "no" | "off" | "0" => Ok(false),
        _ => Err(Error::invalid_text("boolean", text)),
    }
}

fn parse_int<T: TryFrom<i64>>(text: &str, type_name: &str) -> Result<T> {
    let s = text.trim();
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::invalid_text(type_name, text));
    }
    let out_of_range =
        || Error::new(SqlState::NumericValueOutOfRange, format!("value \"{s}\" is out of range for type {type_name}"));
    let v: i64 = s.parse().map_err(|_| out_of_range())?;
    T::try_from(v).map_err(|_| out_of_range())
}

fn cast_integer(v: i64, ty: DataType) -> Result<Value> {
    Ok(match ty {
        DataType::Int16 => Value::Int16(i16::try_from(v).map_err(|_| Error::out_of_range("smallint"))?),
        DataType::Int32 => Value::Int32(i32::try_from(v).map_err(|_| Error::out_of_range("integer"))?),
        DataType::Int64 => Value::Int64(v),
        DataType::Float32 => Value::Float32(v as f32),
        DataType::Float64 => Value::Float64(v as f64),
        DataType::Decimal { precision, scale } => {
            Value::Decimal(Decimal::from_i64(v).fit(precision, scale)?)
        }
        DataType::Bool => Value::Bool(v != 0),
        other => return Err(cannot_cast("integer", other)),
    })
}

fn cast_float(v: f64, ty: DataType) -> Result<Value> {
    let to_int = |max: f64, min: f64, name: &str| -> Result<i64> {
        let r = v.round_ties_even();
        if r.is_nan() || r > max || r < min {
            return Err(Error::out_of_range(name));
        }
        Ok(r as i64)
    };
    Ok(match ty {
        DataType::Int16 => Value::Int16(to_int(i16::MAX as f64, i16::MIN as f64, "smallint")? as i16),
        DataType::Int32 => Value::Int32(to_int(i32::MAX as f64, i32::MIN as f64, "integer")? as i32),
        DataType::Int64 => Value::Int64(to_int(9.223372036854775e18, -9.223372036854776e18, "bigint")?),
        DataType::Float32 => Value::Float32(v as f32),
        DataType::Float64 => Value::Float64(v),
        DataType::Decimal { precision, scale } => {
            Value::Decimal(Decimal::from_f64(v, scale)?.fit(precision, scale)?)
        }
        other => return Err(cannot_cast("double precision", other)),
    })
}

fn cast_decimal(d: Decimal, ty: DataType) -> Result<Value> {
    let int = |name: &str| d.round_to_i64().ok_or_else(|| Error::out_of_range(name));
    Ok(match ty {
        DataType::Int16 => Value::Int16(i16::try_from(int("smallint")?).map_err(|_| Error::out_of_range("smallint"))?),
        DataType::Int32 => Value::Int32(i32::try_from(int("integer")?).map_err(|_| Error::out_of_range("integer"))?),
        DataType::Int64 => Value::Int64(int("bigint")?),
        DataType::Float32 => Value::Float32(d.to_f64() as f32),
        DataType::Float64 => Value::Float64(d.to_f64()),
        DataType::Decimal { precision, scale } => Value::Decimal(d.fit(precision, scale)?),
        other => return Err(cannot_cast("numeric", other)),
    })
}

fn cannot_cast(from: &str, to: DataType) -> Error {
    Error::new(SqlState::CannotCoerce, format!("cannot cast type {from} to {}", to.pg_name()))
}

/// Whether a value of family `from` may be stored in a column of type `to` without an
/// explicit cast (PostgreSQL's assignment casts, plus text for literals of unknown type).
pub fn assignable(from: TypeFamily, to: DataType) -> bool {
    use TypeFamily::*;
    match to.family() {
        Integer | Decimal | Float => matches!(from, Integer | Decimal | Float),
        String => true,
        Bool => from == Bool,
        Date | Timestamp => matches!(from, Date | Timestamp | String),
        Uuid => matches!(from, Uuid | String),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_written_as_their_decimal_text() {
        for v in [0, 7, -1, 10, -305, i64::MAX, i64::MIN, i32::MIN as i64] {
            let mut buf = [0u8; 20];
            assert_eq!(std::str::from_utf8(decimal_digits(v, &mut buf)).unwrap(), v.to_string());
            let mut s = String::from("x");
            Value::Int64(v).write_text(DataType::Int64, &mut s);
            assert_eq!(s, format!("x{v}"));
        }
    }

    #[test]
    fn text_output_of_each_type() {
        let cases: Vec<(Value, DataType, &str)> = vec![
            (Value::Bool(true), DataType::Bool, "t"),
            (Value::Int32(-7), DataType::Int32, "-7"),
            (Value::Decimal(Decimal::new(1250, 2)), DataType::Decimal { precision: 5, scale: 2 }, "12.50"),
            (Value::Text("ab".into()), DataType::Char(4), "ab  "),
            (Value::Text("ab".into()), DataType::Varchar(Some(4)), "ab"),
            (Value::Date(0), DataType::Date, "1970-01-01"),
            (Value::Float64(0.5), DataType::Float64, "0.5"),
        ];
        for (v, ty, want) in cases {
            assert_eq!(v.to_text(ty).unwrap(), want, "{v:?} as {ty}");
        }
        assert_eq!(Value::Null.to_text(DataType::Int32), None);
    }

    #[test]
    fn parse_rejects_bad_input_with_22p02() {
        assert_eq!(Value::parse("12x", DataType::Int32).unwrap_err().state, SqlState::InvalidTextRepresentation);
        assert_eq!(Value::parse("99999", DataType::Int16).unwrap_err().state, SqlState::NumericValueOutOfRange);
        assert_eq!(Value::parse(" 42 ", DataType::Int64).unwrap(), Value::Int64(42));
        assert_eq!(Value::parse("maybe", DataType::Bool).unwrap_err().state, SqlState::InvalidTextRepresentation);
    }

    #[test]
    fn assignment_checks_lengths_and_ranges() {
        let too_long = Value::Text("abcdef".into()).assign_to(DataType::Varchar(Some(3)));
        assert_eq!(too_long.unwrap_err().state, SqlState::StringDataRightTruncation);
        let spaces = Value::Text("abc   ".into()).assign_to(DataType::Varchar(Some(3))).unwrap();
        assert_eq!(spaces, Value::Text("abc".into()));
        let cast = Value::Text("abcdef".into()).cast(DataType::Varchar(Some(3))).unwrap();
        assert_eq!(cast, Value::Text("abc".into()));
        assert_eq!(Value::Int64(1 << 40).assign_to(DataType::Int32).unwrap_err().state, SqlState::NumericValueOutOfRange);
        assert_eq!(
            Value::Float64(2.345).assign_to(DataType::Decimal { precision: 5, scale: 2 }).unwrap(),
            Value::Decimal(Decimal::new(235, 2))
        );
    }

    /// A value that already has the declared scale, precision or length is kept as it is; one
    /// at the edge of a limit is still converted or rejected.
    #[test]
    fn casts_keep_values_that_fit_and_convert_those_at_the_limits() {
        let num = |precision, scale| DataType::Decimal { precision, scale };
        let d = |v, s| Value::Decimal(Decimal::new(v, s));
        assert_eq!(d(99_999, 2).cast(num(5, 2)).unwrap(), d(99_999, 2));
        assert_eq!(d(-99_999, 2).assign_to(num(5, 2)).unwrap(), d(-99_999, 2));
        // As many digits as the precision allows plus one: numeric field overflow.
        assert_eq!(d(100_000, 2).cast(num(5, 2)).unwrap_err().state, SqlState::NumericValueOutOfRange);
        assert_eq!(d(-100_000, 2).assign_to(num(5, 2)).unwrap_err().state, SqlState::NumericValueOutOfRange);
        // Another scale: rounded half away from zero.
        assert_eq!(d(12_345, 3).cast(num(5, 2)).unwrap(), d(1_235, 2));
        assert_eq!(d(5, 0).cast(num(5, 2)).unwrap(), d(500, 2));
        let text = |s: &str| Value::Text(s.into());
        assert_eq!(text("abc").cast(DataType::Varchar(Some(3))).unwrap(), text("abc"));
        assert_eq!(text("abcd").cast(DataType::Varchar(Some(3))).unwrap(), text("abc"));
        // Three characters in six bytes fit VARCHAR(3) and CHAR(3).
        assert_eq!(text("äöü").assign_to(DataType::Varchar(Some(3))).unwrap(), text("äöü"));
        assert_eq!(text("äöü").assign_to(DataType::Char(3)).unwrap(), text("äöü"));
        // CHAR keeps no trailing blanks, even when the value fits.
        assert_eq!(text("ab ").cast(DataType::Char(3)).unwrap(), text("ab"));
        assert_eq!(text("ab ").assign_to(DataType::Char(3)).unwrap(), text("ab"));
        assert_eq!(text("abcd").assign_to(DataType::Char(3)).unwrap_err().state, SqlState::StringDataRightTruncation);
        assert_eq!(Value::Float32(1.5).cast(DataType::Float32).unwrap(), Value::Float32(1.5));
    }

    #[test]
    fn comparison_across_numeric_types() {
        let cmp = |a: Value, b: Value| a.sql_cmp(&b).unwrap();
        assert_eq!(cmp(Value::Int32(3), Value::Int64(3)), Some(Ordering::Equal));
        assert_eq!(cmp(Value::Decimal(Decimal::new(250, 2)), Value::Int32(2)), Some(Ordering::Greater));
        assert_eq!(cmp(Value::Float64(1.5), Value::Decimal(Decimal::new(15, 1))), Some(Ordering::Equal));
        assert_eq!(cmp(Value::Null, Value::Int32(1)), None);
        assert!(Value::Text("a".into()).sql_cmp(&Value::Int32(1)).is_err());
    }
}
