//! PostgreSQL's binary output formats.
//!
//! bool is one byte; int2/int4/int8 and float4/float8 are big-endian; numeric is the
//! base-10000 form of [`crate::numeric`] with dscale = the column's scale; date is days and
//! timestamp microseconds since 2000-01-01; text, varchar and bpchar are their UTF-8 bytes
//! (bpchar blank-padded like its text form). A value whose variant differs from the column
//! type is cast to the column type first.

use bytes::{BufMut, BytesMut};
use freshet::{DataType, Decimal, Value};
use freshet_core::types::datetime::{MICROS_PER_DAY, PG_EPOCH_DAYS};

use crate::error::{codes, SqlError};
use crate::numeric;

/// Microseconds from 1970-01-01 to 2000-01-01.
pub const PG_EPOCH_MICROS: i64 = PG_EPOCH_DAYS as i64 * MICROS_PER_DAY;

/// The binary form of a non-null value of a column of type `ty` (without the length word).
pub fn write_value(v: &Value, ty: DataType, out: &mut BytesMut) -> Result<(), SqlError> {
    if write_exact(v, ty, out) {
        return Ok(());
    }
    let cast = v.clone().cast(ty).map_err(SqlError::from)?;
    if write_exact(&cast, ty, out) {
        return Ok(());
    }
    Err(SqlError::new(codes::INTERNAL, format!("cannot send a value of type {ty} in binary: {v:?}")))
}

/// Writes `v` if its variant is the one for `ty`.
fn write_exact(v: &Value, ty: DataType, out: &mut BytesMut) -> bool {
    match (v, ty) {
        (Value::Bool(b), DataType::Bool) => out.put_u8(*b as u8),
        (Value::Int16(x), DataType::Int16) => out.put_i16(*x),
        (Value::Int32(x), DataType::Int32) => out.put_i32(*x),
        (Value::Int64(x), DataType::Int64) => out.put_i64(*x),
        (Value::Float32(x), DataType::Float32) => out.put_f32(*x),
        (Value::Float64(x), DataType::Float64) => out.put_f64(*x),
        (Value::Decimal(d), DataType::Decimal { scale, .. }) => decimal(*d, scale, ty, out),
        (Value::Text(s), DataType::Char(_) | DataType::Varchar(_) | DataType::Text) => text(s, ty, out),
        (Value::Text(s), DataType::Uuid) => return uuid(s, out),
        (Value::Date(d), DataType::Date) => date(*d, out),
        (Value::Timestamp(t), DataType::Timestamp) | (Value::TimestampTz(t), DataType::TimestampTz) => timestamp(*t, out),
        _ => return false,
    }
    true
}

/// NUMERIC at the column's scale (the value's own if it does not fit there).
/// A NUMERIC in binary: the column's scale, or for NUMERIC without a precision the value's
/// own digits (the binary form carries its display scale, as the text form does).
pub fn decimal(d: Decimal, scale: u8, ty: DataType, out: &mut BytesMut) {
    numeric::encode(freshet::shown_decimal(d.rescale(scale).unwrap_or(d), ty), out);
}

pub fn text(s: &str, ty: DataType, out: &mut BytesMut) {
    out.put_slice(s.as_bytes());
    super::pad_char(s, ty, out);
}

/// A uuid's 16 bytes, from its text; `false` (nothing written) if the text is not a uuid.
pub fn uuid(s: &str, out: &mut BytesMut) -> bool {
    match freshet_core::types::uuid::to_bytes(s) {
        Ok(b) => {
            out.put_slice(&b);
            true
        }
        Err(_) => false,
    }
}

pub fn date(days: i32, out: &mut BytesMut) {
    out.put_i32(days.wrapping_sub(PG_EPOCH_DAYS));
}

pub fn timestamp(micros: i64, out: &mut BytesMut) {
    out.put_i64(micros.wrapping_sub(PG_EPOCH_MICROS));
}
