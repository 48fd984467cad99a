//! Bind parameters: from wire bytes to values of the statement's parameter types.
//!
//! Text parameters go through the type's input function (`Value::parse`). Binary parameters
//! are read in the layout of the type the client declared in Parse (its OID says how many
//! bytes an integer has), or of the inferred type if it declared none, and then converted to
//! the parameter type with an assignment cast. So a client that binds an int8 against an int4
//! column, or an int2 where int8 was inferred, gets the value, not a format error.

use bytes::Bytes;
use freshet::{DataType, Value};
use freshet_core::types::datetime::{MICROS_PER_DAY, PG_EPOCH_DAYS};

use crate::error::{codes, SqlError};
use crate::numeric;

/// Format code of each parameter: Bind carries 0 codes (all text), 1 (for all) or one each.
pub fn param_formats(codes_in: &[i16], count: usize) -> Result<Vec<i16>, SqlError> {
    let formats = match codes_in.len() {
        0 => vec![0; count],
        1 => vec![codes_in[0]; count],
        n if n == count => codes_in.to_vec(),
        n => return Err(SqlError::protocol(format!("bind message has {n} parameter formats but {count} parameters"))),
    };
    check_formats(&formats)?;
    Ok(formats)
}

/// Format code of each result column, by the same rule.
pub fn result_formats(codes_in: &[i16], columns: usize) -> Result<Vec<i16>, SqlError> {
    let formats = match codes_in.len() {
        0 => vec![0; columns],
        1 => vec![codes_in[0]; columns],
        n if n == columns => codes_in.to_vec(),
        n => return Err(SqlError::protocol(format!("bind message has {n} result formats but query has {columns} columns"))),
    };
    check_formats(&formats)?;
    Ok(formats)
}

fn check_formats(formats: &[i16]) -> Result<(), SqlError> {
    match formats.iter().find(|&&f| f != 0 && f != 1) {
        Some(f) => Err(SqlError::new(codes::INVALID_PARAMETER_VALUE, format!("unsupported format code: {f}"))),
        None => Ok(()),
    }
}

/// Decodes parameter `index`. `wire` is the type whose binary layout the client used.
pub fn decode_param(index: usize, raw: Option<&Bytes>, format: i16, wire: DataType, ty: DataType) -> Result<Value, SqlError> {
    let Some(raw) = raw else { return Ok(Value::Null) };
    if format == 0 {
        let text = utf8(raw)?;
        return Value::parse(text, ty).map_err(SqlError::from);
    }
    let value = decode_binary(index, raw, wire)?;
    value.assign_to(ty).map_err(SqlError::from)
}

fn utf8(raw: &[u8]) -> Result<&str, SqlError> {
    std::str::from_utf8(raw).map_err(|_| SqlError::new(codes::CHARACTER_NOT_IN_REPERTOIRE, "invalid byte sequence for encoding \"UTF8\""))
}

fn fixed<const N: usize>(index: usize, raw: &[u8]) -> Result<[u8; N], SqlError> {
    raw.try_into().map_err(|_| SqlError::binary_format(index))
}

/// Reads a binary value in the layout of `wire`.
pub fn decode_binary(index: usize, raw: &[u8], wire: DataType) -> Result<Value, SqlError> {
    let out_of_range = |what: &str| SqlError::new(codes::NUMERIC_VALUE_OUT_OF_RANGE, format!("{what} out of range"));
    Ok(match wire {
        DataType::Bool => match fixed::<1>(index, raw)? {
            [0] => Value::Bool(false),
            [1] => Value::Bool(true),
            _ => return Err(SqlError::binary_format(index)),
        },
        DataType::Int16 => Value::Int16(i16::from_be_bytes(fixed(index, raw)?)),
        DataType::Int32 => Value::Int32(i32::from_be_bytes(fixed(index, raw)?)),
        DataType::Int64 => Value::Int64(i64::from_be_bytes(fixed(index, raw)?)),
        DataType::Float32 => Value::Float32(f32::from_be_bytes(fixed(index, raw)?)),
        DataType::Float64 => Value::Float64(f64::from_be_bytes(fixed(index, raw)?)),
        DataType::Decimal { .. } => Value::Decimal(numeric::decode(raw, index)?),
        DataType::Char(_) | DataType::Varchar(_) | DataType::Text => Value::Text(utf8(raw)?.to_string()),
        DataType::Uuid => Value::Text(freshet_core::types::uuid::format(&fixed(index, raw)?)),
        DataType::Date => {
            let days = i32::from_be_bytes(fixed(index, raw)?);
            Value::Date(days.checked_add(PG_EPOCH_DAYS).ok_or_else(|| out_of_range("date"))?)
        }
        DataType::Timestamp | DataType::TimestampTz => {
            let micros = i64::from_be_bytes(fixed(index, raw)?);
            let epoch = PG_EPOCH_DAYS as i64 * MICROS_PER_DAY;
            let micros = micros.checked_add(epoch).ok_or_else(|| out_of_range(wire.pg_name()))?;
            if wire == DataType::TimestampTz { Value::TimestampTz(micros) } else { Value::Timestamp(micros) }
        }
    })
}

/// The parameter type a client declared by OID, for decoding and for planning (of an array
/// type, its element type). OID 0 and OIDs Freshet has no type for leave the type to
/// inference.
pub fn declared_type(oid: u32) -> Option<DataType> {
    DataType::from_oid(oid).or_else(|| DataType::from_array_oid(oid))
}

/// Whether `oid` is an array type's.
pub fn is_array(oid: u32) -> bool {
    DataType::from_array_oid(oid).is_some()
}

/// The declared type handed to the planner. `bpchar` without a length would mean CHAR(1),
/// which would reject longer values; it is left to inference instead (the column's CHAR(n)).
pub fn planning_type(oid: u32) -> Option<DataType> {
    match oid {
        1042 | 1014 => None,
        other => declared_type(other),
    }
}

/// Decodes array parameter `index` of element type `elem` into the array's text form,
/// which the statement takes (`Prepared::array_param`): in text format it is that
/// already; in binary (dimensions, a null flag, the element type's OID, per dimension its
/// length and lower bound, then each element as a length, -1 for NULL, and its bytes in
/// its type's binary layout) each element is read and converted to `elem`.
pub fn decode_array_param(index: usize, raw: Option<&Bytes>, format: i16, elem: DataType) -> Result<Value, SqlError> {
    let Some(raw) = raw else { return Ok(Value::Null) };
    if format == 0 {
        return Ok(Value::Text(utf8(raw)?.to_string()));
    }
    let bad = || SqlError::binary_format(index);
    let mut rest: &[u8] = raw;
    let mut take = |n: usize| -> Result<&[u8], SqlError> {
        let (head, tail) = rest.split_at_checked(n).ok_or_else(bad)?;
        rest = tail;
        Ok(head)
    };
    let word = |bytes: &[u8]| i32::from_be_bytes(bytes.try_into().expect("four bytes"));
    let dims = word(take(4)?);
    let _has_nulls = take(4)?;
    let wire = DataType::from_oid(word(take(4)?) as u32).unwrap_or(elem);
    let count = match dims {
        0 => 0,
        1 => {
            let n = word(take(4)?);
            let _lower = take(4)?;
            usize::try_from(n).map_err(|_| bad())?
        }
        d if d > 1 => return Err(SqlError::new(codes::FEATURE_NOT_SUPPORTED, "multidimensional array parameters are not supported")),
        _ => return Err(bad()),
    };
    let mut items = Vec::with_capacity(count.min(raw.len() / 4));
    for _ in 0..count {
        let len = word(take(4)?);
        if len < 0 {
            items.push(Value::Null);
            continue;
        }
        let bytes = take(len as usize)?;
        items.push(decode_binary(index, bytes, wire)?.assign_to(elem).map_err(SqlError::from)?);
    }
    if !rest.is_empty() {
        return Err(bad());
    }
    Ok(Value::Text(freshet_core::sql::plpgsql::array_text(&items, elem)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_by_declared_width_then_assignment_cast() {
        let two = Bytes::from_static(&[0, 42]);
        let v = decode_param(0, Some(&two), 1, DataType::Int16, DataType::Int64).unwrap();
        assert_eq!(v, Value::Int64(42));
        let eight = Bytes::copy_from_slice(&7i64.to_be_bytes());
        assert_eq!(decode_param(0, Some(&eight), 1, DataType::Int64, DataType::Int32).unwrap(), Value::Int32(7));
        let big = Bytes::copy_from_slice(&(1i64 << 40).to_be_bytes());
        assert_eq!(decode_param(0, Some(&big), 1, DataType::Int64, DataType::Int32).unwrap_err().code, "22003");
        assert_eq!(decode_param(2, Some(&two), 1, DataType::Int32, DataType::Int32).unwrap_err().code, "22P03");
    }

    #[test]
    fn text_nulls_dates_and_bad_utf8() {
        assert_eq!(decode_param(0, None, 1, DataType::Int32, DataType::Int32).unwrap(), Value::Null);
        let t = Bytes::from_static(b"2024-02-29 10:00:00+00");
        assert!(matches!(decode_param(0, Some(&t), 0, DataType::Text, DataType::Timestamp).unwrap(), Value::Timestamp(_)));
        let d = Bytes::copy_from_slice(&0i32.to_be_bytes());
        assert_eq!(decode_param(0, Some(&d), 1, DataType::Date, DataType::Date).unwrap(), Value::Date(PG_EPOCH_DAYS));
        let bad = Bytes::from_static(b"\xff");
        assert_eq!(decode_param(0, Some(&bad), 0, DataType::Text, DataType::Text).unwrap_err().code, "22021");
        let max = Bytes::copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_param(0, Some(&max), 1, DataType::Date, DataType::Date).is_err());
    }

    #[test]
    fn format_counts() {
        assert_eq!(param_formats(&[], 2).unwrap(), vec![0, 0]);
        assert_eq!(param_formats(&[1], 3).unwrap(), vec![1, 1, 1]);
        assert!(param_formats(&[0, 1], 3).is_err());
        assert!(result_formats(&[2], 1).is_err());
    }

    fn binary_array(dims: &[i32], oid: u32, items: &[Option<&[u8]>]) -> Bytes {
        let mut b = Vec::new();
        b.extend((dims.len() as i32).to_be_bytes());
        b.extend(1i32.to_be_bytes());
        b.extend(oid.to_be_bytes());
        for d in dims {
            b.extend(d.to_be_bytes());
            b.extend(1i32.to_be_bytes());
        }
        for item in items {
            match item {
                Some(bytes) => {
                    b.extend((bytes.len() as i32).to_be_bytes());
                    b.extend(*bytes);
                }
                None => b.extend((-1i32).to_be_bytes()),
            }
        }
        Bytes::from(b)
    }

    #[test]
    fn array_parameters_become_their_text_form() {
        let seven = 7i16.to_be_bytes();
        let raw = binary_array(&[2], 21, &[Some(&seven), None]);
        assert_eq!(decode_array_param(0, Some(&raw), 1, DataType::Int64).unwrap(), Value::Text("{7,NULL}".into()), "int2 elements as bigint");
        let raw = binary_array(&[2], 25, &[Some(b"a b"), Some(b"")]);
        assert_eq!(decode_array_param(0, Some(&raw), 1, DataType::Text).unwrap(), Value::Text(r#"{"a b",""}"#.into()));
        assert_eq!(decode_array_param(0, Some(&binary_array(&[], 23, &[])), 1, DataType::Int32).unwrap(), Value::Text("{}".into()));
        let text = Bytes::from_static(b"{1,2}");
        assert_eq!(decode_array_param(0, Some(&text), 0, DataType::Int32).unwrap(), Value::Text("{1,2}".into()));
        assert_eq!(decode_array_param(0, None, 1, DataType::Int32).unwrap(), Value::Null);
        let square = binary_array(&[1, 1], 23, &[Some(&1i32.to_be_bytes())]);
        assert_eq!(decode_array_param(0, Some(&square), 1, DataType::Int32).unwrap_err().code, "0A000");
        let short = binary_array(&[2], 23, &[Some(&1i32.to_be_bytes())]);
        assert_eq!(decode_array_param(0, Some(&short), 1, DataType::Int32).unwrap_err().code, "22P03");
        let mut long = binary_array(&[1], 23, &[Some(&1i32.to_be_bytes())]).to_vec();
        long.push(0);
        assert_eq!(decode_array_param(0, Some(&Bytes::from(long)), 1, DataType::Int32).unwrap_err().code, "22P03");
    }
}
