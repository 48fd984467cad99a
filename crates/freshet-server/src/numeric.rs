//! NUMERIC in PostgreSQL's binary format.
//!
//! The wire form is base-10000 digits: `ndigits`, `weight` (the power of 10000 of the first
//! digit), `sign` (0x0000 positive, 0x4000 negative, 0xC000 NaN), `dscale` (decimal digits
//! after the point), then the digits, most significant first, with leading and trailing zero
//! digits left out. Freshet's NUMERIC is a 128-bit integer with a scale of at most 38, so at
//! most 10 digits lie on each side of the point; encoding allocates nothing.

use std::fmt::Write;

use bytes::{BufMut, BytesMut};
use freshet::Decimal;

use crate::error::{codes, SqlError};

const NBASE: u128 = 10_000;
const POSITIVE: u16 = 0x0000;
const NEGATIVE: u16 = 0x4000;
const NAN: u16 = 0xC000;

/// Appends the binary form of `d`, with `dscale = d.scale`.
pub fn encode(d: Decimal, out: &mut BytesMut) {
    let scale = d.scale.min(38) as u32;
    let abs = d.value.unsigned_abs();
    let unit = 10u128.pow(scale);
    let (int_part, frac_part) = (abs / unit, abs % unit);
    // Digits of the integer part, least significant first, then reversed into place.
    let mut digits = [0u16; 24];
    let mut n = 0;
    let mut rest = int_part;
    while rest > 0 {
        digits[n] = (rest % NBASE) as u16;
        rest /= NBASE;
        n += 1;
    }
    digits[..n].reverse();
    let int_digits = n;
    // Digits of the fraction, four decimal places each, the last one padded with zeros.
    let mut place = 0;
    while place < scale {
        let take = (scale - place).min(4);
        let group = (frac_part / 10u128.pow(scale - place - take)) % 10u128.pow(take);
        digits[n] = (group * 10u128.pow(4 - take)) as u16;
        n += 1;
        place += take;
    }
    let mut weight = int_digits as i16 - 1;
    let mut start = 0;
    while start < n && digits[start] == 0 {
        start += 1;
        weight -= 1;
    }
    let mut end = n;
    while end > start && digits[end - 1] == 0 {
        end -= 1;
    }
    if start == end {
        weight = 0;
    }
    out.put_i16((end - start) as i16);
    out.put_i16(weight);
    out.put_u16(if d.value < 0 && start < end { NEGATIVE } else { POSITIVE });
    out.put_u16(scale as u16);
    for &digit in &digits[start..end] {
        out.put_u16(digit);
    }
}

/// Reads the binary form of a NUMERIC; `param` is the parameter index for error messages.
pub fn decode(b: &[u8], param: usize) -> Result<Decimal, SqlError> {
    let bad = || SqlError::binary_format(param);
    let word = |i: usize| -> Result<u16, SqlError> {
        let bytes = b.get(2 * i..2 * i + 2).ok_or_else(bad)?;
        Ok(u16::from_be_bytes([bytes[0], bytes[1]]))
    };
    let ndigits = usize::from(word(0)?);
    let weight = word(1)? as i16 as i32;
    let sign = word(2)?;
    let dscale = word(3)?;
    if b.len() != 8 + 2 * ndigits {
        return Err(bad());
    }
    match sign {
        POSITIVE | NEGATIVE => {}
        NAN => return Err(SqlError::new(codes::FEATURE_NOT_SUPPORTED, "NaN is not supported for type numeric")),
        _ => return Err(SqlError::new(codes::INVALID_BINARY_REPRESENTATION, "invalid sign in external \"numeric\" value")),
    }
    let mut text = String::with_capacity(4 * ndigits + 8);
    if sign == NEGATIVE {
        text.push('-');
    }
    write_digits(&mut text, weight, ndigits, |i| word(4 + i))?;
    // Digits hidden by dscale are cut off, as PostgreSQL's numeric_recv does.
    let scale = dscale.min(38) as usize;
    if let Some(point) = text.find('.') {
        text.truncate(point + 1 + scale.min(text.len() - point - 1));
    }
    let d = Decimal::parse(&text).map_err(SqlError::from)?;
    d.rescale(scale as u8).map_err(SqlError::from)
}

/// Decimal text of base-10000 digits `digit(0..ndigits)` whose first digit has `weight`.
fn write_digits(text: &mut String, weight: i32, ndigits: usize, digit: impl Fn(usize) -> Result<u16, SqlError>) -> Result<(), SqlError> {
    let out_of_range = || SqlError::new(codes::NUMERIC_VALUE_OUT_OF_RANGE, "numeric field overflow");
    if weight > 9 + ndigits as i32 || weight < -(ndigits as i32) - 12 {
        // Too large for 38 digits, or so small that every digit lies beyond scale 38.
        if weight > 0 {
            return Err(out_of_range());
        }
        text.push('0');
        return Ok(());
    }
    let value_at = |w: i32| -> Result<u16, SqlError> {
        let i = weight - w;
        if i < 0 || i as usize >= ndigits {
            return Ok(0);
        }
        let d = digit(i as usize)?;
        if d >= NBASE as u16 {
            return Err(SqlError::new(codes::INVALID_BINARY_REPRESENTATION, "invalid digit in external \"numeric\" value"));
        }
        Ok(d)
    };
    let last = weight - ndigits as i32 + 1;
    for w in (0..=weight.max(0)).rev() {
        let _ = write!(text, "{:04}", value_at(w)?);
    }
    if last < 0 {
        text.push('.');
        for w in (last..0).rev() {
            let _ = write!(text, "{:04}", value_at(w)?);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(value: i128, scale: u8) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode(Decimal::new(value, scale), &mut out);
        out.to_vec()
    }

    fn words(w: &[i16]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_be_bytes()).collect()
    }

    #[test]
    fn matches_postgres_layout() {
        // 12.50 as numeric(5,2): digits [12, 5000], weight 0, dscale 2.
        assert_eq!(encoded(1250, 2), words(&[2, 0, 0, 2, 12, 5000]));
        // -0.05: digit [500] at weight -1.
        assert_eq!(encoded(-5, 2), words(&[1, -1, 0x4000, 2, 500]));
        // 10000: digit [1] at weight 1 (trailing zero digit dropped).
        assert_eq!(encoded(10000, 0), words(&[1, 1, 0, 0, 1]));
        // zero keeps its scale.
        assert_eq!(encoded(0, 3), words(&[0, 0, 0, 3]));
        // 0.0001 at scale 4.
        assert_eq!(encoded(1, 4), words(&[1, -1, 0, 4, 1]));
    }

    #[test]
    fn round_trips() {
        let values = [
            (0i128, 0u8),
            (1, 0),
            (-1, 0),
            (123_456_789, 3),
            (-987_654_321_012, 7),
            (1, 38),
            (-99_999_999_999_999_999_999_999_999_999_999_999_999, 38),
            (99_999_999_999_999_999_999_999_999_999_999_999_999, 0),
            (5, 1),
            (12_345_678, 10),
        ];
        for (value, scale) in values {
            let d = Decimal::new(value, scale);
            let mut out = BytesMut::new();
            encode(d, &mut out);
            assert_eq!(decode(&out, 0).unwrap(), d, "{d}");
        }
    }

    #[test]
    fn rejects_bad_input() {
        assert!(decode(&[0, 1], 0).is_err());
        assert!(decode(&words(&[1, 0, 0, 0]), 0).is_err()); // digit missing
        assert!(decode(&words(&[1, 0, 0, 0, 10000]), 0).is_err()); // digit out of range
        assert!(decode(&words(&[0, 0, 0xC000u16 as i16, 0]), 0).is_err()); // NaN
        assert!(decode(&words(&[1, 20, 0, 0, 1]), 0).is_err()); // 10^80
        assert_eq!(decode(&words(&[1, -30, 0, 2, 1]), 0).unwrap(), Decimal::new(0, 2));
        assert_eq!(decode(&words(&[1, i16::MAX, 0, 0, 1]), 0).unwrap_err().code, "22003");
        // 1.2345 with dscale 2 is cut to 1.23.
        assert_eq!(decode(&words(&[2, 0, 0, 2, 1, 2345]), 0).unwrap(), Decimal::new(123, 2));
    }
}
