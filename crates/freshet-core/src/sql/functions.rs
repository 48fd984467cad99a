//! Scalar functions of the short-statement path: name resolution, result types, evaluation.
//! Functions not listed here send a SELECT to the analytical side, which has many more.

use std::cmp::Ordering;

use super::expr::{date_of, extract, AdvisoryFn, AdvisoryOp, EvalContext, Func};
use crate::error::{Error, Result, SqlState};
use crate::types::datetime::{self, MICROS_PER_DAY};
use crate::types::{DataType, Decimal, TypeFamily, Value, MAX_DECIMAL_PRECISION};

/// The longest text a function builds (PostgreSQL's limit for a field value).
const MAX_TEXT_BYTES: u64 = (1 << 30) - 1;

/// The function called `name` (lower case), if the short path has it.
pub fn lookup(name: &str) -> Option<Func> {
    Some(match name {
        "abs" => Func::Abs,
        "lower" => Func::Lower,
        "upper" => Func::Upper,
        "length" | "char_length" | "character_length" => Func::Length,
        "coalesce" => Func::Coalesce,
        "nullif" => Func::NullIf,
        "substring" | "substr" => Func::Substring,
        "btrim" | "trim" => Func::Btrim,
        "ltrim" => Func::Ltrim,
        "rtrim" => Func::Rtrim,
        "concat" => Func::Concat,
        "round" => Func::Round,
        "floor" => Func::Floor,
        "ceil" | "ceiling" => Func::Ceil,
        "mod" => Func::Mod,
        "greatest" => Func::Greatest,
        "least" => Func::Least,
        "now" | "current_timestamp" | "localtimestamp" | "transaction_timestamp" => Func::Now,
        "clock_timestamp" => Func::ClockTimestamp,
        "current_date" => Func::CurrentDate,
        "replace" => Func::Replace,
        "repeat" => Func::Repeat,
        "nextval" => Func::Nextval,
        "currval" => Func::Currval,
        "setval" => Func::Setval,
        "lastval" => Func::Lastval,
        "pg_get_serial_sequence" => Func::PgGetSerialSequence,
        "pg_sleep" => Func::PgSleep,
        "pg_notify" => Func::PgNotify,
        "gen_random_uuid" | "uuid_generate_v4" => Func::GenRandomUuid,
        _ => return AdvisoryFn::by_name(name).map(Func::Advisory),
    })
}

fn arity(func: Func, n: usize) -> bool {
    match func {
        Func::Abs | Func::Lower | Func::Upper | Func::Length | Func::Floor | Func::Ceil => n == 1,
        Func::NullIf | Func::Mod | Func::Extract | Func::Repeat => n == 2,
        Func::Substring => n == 2 || n == 3,
        Func::Btrim | Func::Ltrim | Func::Rtrim | Func::Round => n == 1 || n == 2,
        Func::Replace => n == 3,
        Func::Coalesce | Func::Greatest | Func::Least | Func::Concat => n >= 1,
        Func::Now | Func::ClockTimestamp | Func::CurrentDate | Func::Lastval | Func::GenRandomUuid => n == 0,
        Func::Nextval | Func::Currval => n == 1,
        Func::Setval => n == 2 || n == 3,
        Func::PgGetSerialSequence => n == 2,
        Func::AddInterval => n == 4 || n == 6,
        Func::TimePrecision => n == 2,
        Func::ShownNumeric => n == 1,
        Func::Advisory(f) if f.op == AdvisoryOp::UnlockAll => n == 0,
        Func::Advisory(_) => n == 1 || n == 2,
        Func::PgSleep => n == 1,
        Func::PgNotify => n == 2,
    }
}

/// The result type of `func` over arguments of types `args`.
pub fn result_type(name: &str, func: Func, args: &[DataType]) -> Result<DataType> {
    if !arity(func, args.len()) {
        return Err(Error::new(
            SqlState::UndefinedFunction,
            format!("function {name} with {} arguments does not exist", args.len()),
        ));
    }
    let family = |i: usize| args[i].family();
    let need = |ok: bool| -> Result<()> {
        if ok {
            Ok(())
        } else {
            let names: Vec<&str> = args.iter().map(|t| t.pg_name()).collect();
            Err(Error::new(
                SqlState::UndefinedFunction,
                format!("function {name}({}) does not exist", names.join(", ")),
            ))
        }
    };
    Ok(match func {
        Func::Abs | Func::Floor | Func::Ceil => {
            need(args[0].is_numeric())?;
            match (func, args[0]) {
                (Func::Abs, t) => t,
                (_, DataType::Decimal { precision, .. }) => DataType::Decimal { precision, scale: 0 },
                (_, DataType::Float32) => DataType::Float32,
                (_, t) if t.family() == TypeFamily::Integer => DataType::Float64,
                _ => DataType::Float64,
            }
        }
        Func::Round => {
            need(args[0].is_numeric())?;
            match args[0] {
                DataType::Decimal { precision, scale } => DataType::Decimal { precision, scale },
                DataType::Float32 => DataType::Float32,
                _ => DataType::Float64,
            }
        }
        Func::Lower | Func::Upper | Func::Btrim | Func::Ltrim | Func::Rtrim | Func::Substring | Func::Replace => {
            need(args[0].is_string())?;
            DataType::Text
        }
        Func::Concat => DataType::Text,
        Func::Repeat => {
            need(args[0].is_string() && family(1) == TypeFamily::Integer)?;
            DataType::Text
        }
        Func::Length => {
            need(args[0].is_string())?;
            DataType::Int32
        }
        Func::Mod => {
            need(family(0) == TypeFamily::Integer && family(1) == TypeFamily::Integer)?;
            args[0].common_numeric(args[1]).unwrap_or(DataType::Int64)
        }
        Func::Coalesce | Func::Greatest | Func::Least | Func::NullIf => common_type(args).map_err(|_| {
            Error::mismatch(format!("{} types cannot be matched", name.to_uppercase()))
        })?,
        Func::Now | Func::ClockTimestamp => DataType::TimestampTz,
        Func::CurrentDate => DataType::Date,
        Func::Extract => DataType::Float64,
        Func::TimePrecision => {
            need(family(0) == TypeFamily::Timestamp)?;
            args[0]
        }
        Func::ShownNumeric => args[0],
        Func::AddInterval => {
            need(matches!(family(0), TypeFamily::Date | TypeFamily::Timestamp))?;
            if args[0] == DataType::TimestampTz { DataType::TimestampTz } else { DataType::Timestamp }
        }
        Func::Nextval | Func::Currval | Func::Lastval => {
            need(args.iter().all(|t| t.is_string()))?;
            DataType::Int64
        }
        Func::Setval => {
            need(args[0].is_string() && family(1) == TypeFamily::Integer && args.get(2).is_none_or(|t| *t == DataType::Bool))?;
            DataType::Int64
        }
        Func::PgGetSerialSequence => {
            need(args.iter().all(|t| t.is_string()))?;
            DataType::Text
        }
        Func::Advisory(f) => {
            need(args.iter().all(|t| t.family() == TypeFamily::Integer))?;
            match f.op {
                AdvisoryOp::TryLock | AdvisoryOp::Unlock => DataType::Bool,
                // PostgreSQL's void, which a client shows as an empty value.
                AdvisoryOp::Lock | AdvisoryOp::UnlockAll => DataType::Text,
            }
        }
        Func::PgSleep => {
            need(args[0].is_numeric())?;
            DataType::Text
        }
        Func::GenRandomUuid => DataType::Uuid,
        Func::PgNotify => {
            need(args.iter().all(|t| t.is_string()))?;
            DataType::Text
        }
    })
}

/// The type that values of all `types` convert to (CASE, COALESCE, IN lists).
pub fn common_type(types: &[DataType]) -> Result<DataType> {
    let mut acc = types[0];
    for &t in &types[1..] {
        acc = if acc == t {
            acc
        } else if acc.is_numeric() && t.is_numeric() {
            acc.common_numeric(t).unwrap_or(DataType::Float64)
        } else if acc.is_string() && t.is_string() {
            DataType::Text
        } else if matches!((acc.family(), t.family()), (TypeFamily::Date | TypeFamily::Timestamp, TypeFamily::Date | TypeFamily::Timestamp)) {
            // As PostgreSQL prefers: timestamptz over timestamp over date.
            if acc == DataType::TimestampTz || t == DataType::TimestampTz { DataType::TimestampTz } else { DataType::Timestamp }
        } else {
            return Err(Error::mismatch(format!("types {} and {} cannot be matched", acc.pg_name(), t.pg_name())));
        };
    }
    Ok(acc)
}

pub fn call(func: Func, args: Vec<Value>, ty: DataType, cx: &EvalContext) -> Result<Value> {
    if func.is_session() {
        return match cx.session {
            Some(s) => s.call(func, &args),
            None if func.is_sequence() => Err(Error::unsupported("sequence functions (nextval, currval, setval, lastval) here")
                .with_hint("They run in INSERT … VALUES, column defaults and SELECT without FROM.")),
            None => Err(Error::unsupported(format!("{} here", match func {
                Func::PgSleep => "pg_sleep",
                Func::PgNotify => "pg_notify",
                _ => "advisory lock functions",
            }))
                .with_hint("They run in SELECT without FROM.")),
        };
    }
    if matches!(func, Func::Now) {
        return Ok(Value::TimestampTz(cx.now));
    }
    if func == Func::ClockTimestamp {
        return Ok(Value::TimestampTz(crate::types::datetime::now_micros()));
    }
    if func == Func::GenRandomUuid {
        return Ok(Value::Text(crate::types::uuid::random()));
    }
    if matches!(func, Func::CurrentDate) {
        return Ok(Value::Date(date_of(cx.now)));
    }
    if matches!(func, Func::Greatest | Func::Least) {
        return extreme(func, args, ty);
    }
    if func == Func::Concat {
        let mut s = String::new();
        for a in &args {
            a.write_text(DataType::Text, &mut s);
        }
        return Ok(Value::Text(s));
    }
    if func == Func::NullIf {
        let mut it = args.into_iter();
        let (a, b) = (it.next().unwrap_or(Value::Null), it.next().unwrap_or(Value::Null));
        return if a.sql_cmp(&b)? == Some(Ordering::Equal) { Ok(Value::Null) } else { a.cast(ty) };
    }
    if args.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let text = |i: usize| args[i].as_str().unwrap_or_default();
    let int = |i: usize| args[i].as_i64().unwrap_or(0);
    Ok(match func {
        Func::Lower => Value::Text(text(0).to_lowercase()),
        Func::Upper => Value::Text(text(0).to_uppercase()),
        Func::Length => Value::Int32(text(0).chars().count() as i32),
        Func::Abs => abs(&args[0])?,
        Func::Btrim => Value::Text(trim(text(0), args.get(1).and_then(Value::as_str), true, true)),
        Func::Ltrim => Value::Text(trim(text(0), args.get(1).and_then(Value::as_str), true, false)),
        Func::Rtrim => Value::Text(trim(text(0), args.get(1).and_then(Value::as_str), false, true)),
        Func::Substring => substring(text(0), int(1), args.get(2).map(|v| v.as_i64().unwrap_or(0)))?,
        Func::Replace => Value::Text(text(0).replace(text(1), text(2))),
        Func::Repeat => {
            let n = int(1).max(0) as u64;
            if n.saturating_mul(text(0).len() as u64) > MAX_TEXT_BYTES {
                return Err(Error::new(SqlState::ProgramLimitExceeded, "requested length too large"));
            }
            Value::Text(text(0).repeat(n as usize))
        }
        Func::Mod => {
            if int(1) == 0 {
                return Err(Error::division_by_zero());
            }
            Value::Int64(int(0).checked_rem(int(1)).unwrap_or(0)).cast(ty)?
        }
        Func::Round | Func::Floor | Func::Ceil => round(func, &args[0], args.get(1).map(|v| v.as_i64().unwrap_or(0)), ty)?,
        Func::Extract => extract(text(0), &args[1])?,
        Func::ShownNumeric => match &args[0] {
            Value::Decimal(d) => Value::Decimal(d.trimmed()),
            other => other.clone(),
        },
        Func::TimePrecision => {
            let digits = int(1).clamp(0, 6) as u32;
            match &args[0] {
                Value::Timestamp(t) => Value::Timestamp(datetime::round_to_precision(*t, digits)),
                Value::TimestampTz(t) => Value::TimestampTz(datetime::round_to_precision(*t, digits)),
                other => return Err(Error::mismatch(format!("cannot round {other:?} as a timestamp"))),
            }
        }
        Func::AddInterval => {
            let micros = match &args[0] {
                Value::Timestamp(t) | Value::TimestampTz(t) => *t,
                Value::Date(d) => *d as i64 * MICROS_PER_DAY,
                other => return Err(Error::mismatch(format!("cannot add an interval to {other:?}"))),
            };
            let mut interval = datetime::Interval { months: int(1) as i32, days: int(2) as i32, micros: int(3) };
            if let [.., factor, divide] = &args[4..] {
                interval = interval.scaled(factor.as_f64().unwrap_or(0.0), divide == &Value::Bool(true))?;
            }
            let at = datetime::add_interval(micros, interval)?;
            if ty == DataType::TimestampTz { Value::TimestampTz(at) } else { Value::Timestamp(at) }
        }
        Func::Coalesce
        | Func::NullIf
        | Func::Greatest
        | Func::Least
        | Func::Concat
        | Func::Now
        | Func::ClockTimestamp
        | Func::CurrentDate
        | Func::Nextval
        | Func::Currval
        | Func::Setval
        | Func::Lastval
        | Func::PgGetSerialSequence
        | Func::Advisory(_)
        | Func::PgSleep
        | Func::PgNotify
        | Func::GenRandomUuid => return Err(Error::internal("handled above")),
    })
}

fn extreme(func: Func, args: Vec<Value>, ty: DataType) -> Result<Value> {
    let mut best: Option<Value> = None;
    for a in args.into_iter().filter(|a| !a.is_null()) {
        best = Some(match best {
            None => a,
            Some(b) => {
                let ord = a.sql_cmp(&b)?.unwrap_or(Ordering::Equal);
                let take = if func == Func::Greatest { ord == Ordering::Greater } else { ord == Ordering::Less };
                if take { a } else { b }
            }
        });
    }
    best.map_or(Ok(Value::Null), |v| v.cast(ty))
}

fn abs(v: &Value) -> Result<Value> {
    Ok(match v {
        Value::Int16(x) => Value::Int16(x.checked_abs().ok_or_else(|| Error::out_of_range("smallint"))?),
        Value::Int32(x) => Value::Int32(x.checked_abs().ok_or_else(|| Error::out_of_range("integer"))?),
        Value::Int64(x) => Value::Int64(x.checked_abs().ok_or_else(|| Error::out_of_range("bigint"))?),
        Value::Float32(x) => Value::Float32(x.abs()),
        Value::Float64(x) => Value::Float64(x.abs()),
        Value::Decimal(d) => Value::Decimal(Decimal::new(d.value.abs(), d.scale)),
        other => other.clone(),
    })
}

fn trim(s: &str, chars: Option<&str>, left: bool, right: bool) -> String {
    let set: Vec<char> = chars.unwrap_or(" ").chars().collect();
    let mut out = s;
    if left {
        out = out.trim_start_matches(|c| set.contains(&c));
    }
    if right {
        out = out.trim_end_matches(|c| set.contains(&c));
    }
    out.to_string()
}

/// PostgreSQL's substring(s FROM start [FOR count]) with 1-based, possibly negative, start.
fn substring(s: &str, start: i64, count: Option<i64>) -> Result<Value> {
    let end = match count {
        Some(c) if c < 0 => {
            return Err(Error::new(SqlState::InvalidParameterValue, "negative substring length not allowed"))
        }
        Some(c) => start.saturating_add(c),
        None => i64::MAX,
    };
    let from = start.max(1);
    if end <= from {
        return Ok(Value::Text(String::new()));
    }
    let taken: String = s.chars().skip((from - 1) as usize).take((end - from).min(i64::from(u32::MAX)) as usize).collect();
    Ok(Value::Text(taken))
}

fn round(func: Func, v: &Value, places: Option<i64>, ty: DataType) -> Result<Value> {
    match v {
        Value::Decimal(d) => {
            let places_given = places.unwrap_or(0);
            let places = match func {
                Func::Round => places_given.clamp(0, d.scale as i64) as u8,
                _ => 0,
            };
            let factor = crate::types::decimal::pow10(d.scale - places);
            let (q, r) = (d.value.div_euclid(factor), d.value.rem_euclid(factor));
            let at_places = match func {
                Func::Floor => Decimal::new(q, places),
                Func::Ceil => Decimal::new(if r > 0 { q + 1 } else { q }, places),
                // Negative places round to tens, hundreds, …: to units of 10^n (n = -places),
                // half away from zero, at scale 0 (PostgreSQL: round(1250.5, -2) = 1300).
                Func::Round if places_given < 0 => {
                    let n = (-places_given).min(MAX_DECIMAL_PRECISION as i64 + 1) as u8;
                    if d.scale as u32 + n as u32 > MAX_DECIMAL_PRECISION as u32 {
                        // |d| < 10^38 at scale s is below half a unit of 10^n.
                        Decimal::new(0, 0)
                    } else {
                        let units = Decimal::new(d.value, d.scale + n).rescale(0)?.value;
                        let value = units.checked_mul(crate::types::decimal::pow10(n));
                        Decimal::new(value.ok_or_else(|| Error::new(SqlState::NumericValueOutOfRange, "numeric field overflow"))?, 0)
                    }
                }
                _ => d.rescale(places)?,
            };
            let out_scale = if let DataType::Decimal { scale, .. } = ty { scale } else { places };
            Ok(Value::Decimal(at_places.rescale(out_scale)?))
        }
        other => {
            let x = other.as_f64().unwrap_or(0.0);
            let p = 10f64.powi(places.unwrap_or(0) as i32);
            let r = match func {
                Func::Floor => x.floor(),
                Func::Ceil => x.ceil(),
                _ => (x * p).round() / p,
            };
            Ok(if ty == DataType::Float32 { Value::Float32(r as f32) } else { Value::Float64(r) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx() -> EvalContext<'static> {
        EvalContext { params: &[], now: 0, session: None }
    }

    #[test]
    fn substring_follows_postgres() {
        assert_eq!(substring("hello", 2, Some(3)).unwrap(), Value::Text("ell".into()));
        assert_eq!(substring("hello", 0, Some(2)).unwrap(), Value::Text("h".into()));
        assert_eq!(substring("hello", 4, None).unwrap(), Value::Text("lo".into()));
        assert!(substring("hello", 1, Some(-1)).is_err());
    }

    #[test]
    fn rounding() {
        let d = Value::Decimal(Decimal::new(12345, 3));
        let ty = DataType::Decimal { precision: 10, scale: 3 };
        assert_eq!(call(Func::Floor, vec![d.clone()], DataType::Decimal { precision: 10, scale: 0 }, &cx()).unwrap(), Value::Decimal(Decimal::new(12, 0)));
        assert_eq!(call(Func::Ceil, vec![d.clone()], DataType::Decimal { precision: 10, scale: 0 }, &cx()).unwrap(), Value::Decimal(Decimal::new(13, 0)));
        assert_eq!(call(Func::Round, vec![d], ty, &cx()).unwrap(), Value::Decimal(Decimal::new(12000, 3)));
        assert_eq!(call(Func::Round, vec![Value::Float64(2.5)], DataType::Float64, &cx()).unwrap(), Value::Float64(3.0));
        // Negative places: to tens and hundreds, half away from zero, at scale 0.
        let int = DataType::Decimal { precision: 10, scale: 0 };
        let round = |value, scale, places| call(Func::Round, vec![Value::Decimal(Decimal::new(value, scale)), Value::Int64(places)], int, &cx()).unwrap();
        assert_eq!(round(12505, 1, -2), Value::Decimal(Decimal::new(1300, 0)));
        assert_eq!(round(-12495, 1, -2), Value::Decimal(Decimal::new(-1200, 0)));
        assert_eq!(round(15, 0, -1), Value::Decimal(Decimal::new(20, 0)));
        assert_eq!(round(4, 0, -1), Value::Decimal(Decimal::new(0, 0)));
    }

    #[test]
    fn null_handling() {
        assert_eq!(call(Func::Upper, vec![Value::Null], DataType::Text, &cx()).unwrap(), Value::Null);
        assert_eq!(
            call(Func::Greatest, vec![Value::Int32(1), Value::Null, Value::Int32(5)], DataType::Int32, &cx()).unwrap(),
            Value::Int32(5)
        );
        assert_eq!(call(Func::NullIf, vec![Value::Int32(1), Value::Int32(1)], DataType::Int32, &cx()).unwrap(), Value::Null);
    }
}
