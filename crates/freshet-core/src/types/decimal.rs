//! NUMERIC values: a 128-bit integer scaled by a power of ten.
//!
//! Rounding follows PostgreSQL: half away from zero. Overflow of the declared precision is
//! `22003 numeric field overflow`, never a silent wrap.

use std::cmp::Ordering;
use std::fmt;

use crate::error::{Error, Result, SqlState};

/// A fixed-point number `value / 10^scale`.
///
/// Aligned to 8 bytes rather than the 16 of `i128`, so that it takes 24 bytes and a
/// [`Value`](super::Value) 32 instead of 48: every row, parameter list and before-image is
/// made of values, and a third less memory to move and cache is a third less. Fields are
/// read and written by value (a packed field cannot be borrowed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C, packed(8))]
pub struct Decimal {
    pub value: i128,
    pub scale: u8,
}

/// 10^n for n in 0..=38.
pub fn pow10(n: u8) -> i128 {
    const TABLE: [i128; 39] = {
        let mut t = [1i128; 39];
        let mut i = 1;
        while i < 39 {
            t[i] = t[i - 1] * 10;
            i += 1;
        }
        t
    };
    TABLE[n as usize]
}

fn overflow() -> Error {
    Error::new(SqlState::NumericValueOutOfRange, "numeric field overflow")
}

impl Decimal {
    pub fn new(value: i128, scale: u8) -> Self {
        Decimal { value, scale }
    }

    pub fn from_i64(v: i64) -> Self {
        Decimal { value: v as i128, scale: 0 }
    }

    /// The same number at another scale, rounding half away from zero when digits are dropped.
    pub fn rescale(self, scale: u8) -> Result<Decimal> {
        match scale.cmp(&self.scale) {
            Ordering::Equal => Ok(self),
            Ordering::Greater => {
                let factor = pow10(scale - self.scale);
                let narrow = i64::try_from(self.value).ok().zip(i64::try_from(factor).ok());
                let value = match narrow.and_then(|(v, f)| v.checked_mul(f)) {
                    Some(v) => v as i128,
                    None => self.value.checked_mul(factor).ok_or_else(overflow)?,
                };
                Ok(Decimal { value, scale })
            }
            Ordering::Less => {
                let factor = pow10(self.scale - scale);
                Ok(Decimal { value: div_round(self.value, factor), scale })
            }
        }
    }

    /// Checks that the number fits NUMERIC(precision, scale) and returns it at that scale.
    pub fn fit(self, precision: u8, scale: u8) -> Result<Decimal> {
        let d = self.rescale(scale)?;
        if d.value.unsigned_abs() >= pow10(precision) as u128 {
            return Err(overflow().with_detail(format!(
                "A field with precision {precision}, scale {scale} must round to an absolute value less than 10^{}.",
                precision - scale
            )));
        }
        Ok(d)
    }

    /// Parses `[+-]digits[.digits][e[+-]digits]`, keeping the scale written (at least 0).
    pub fn parse(text: &str) -> Result<Decimal> {
        let invalid = || Error::invalid_text("numeric", text);
        let s = text.trim();
        let (negative, body) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let (mantissa, exponent) = match body.find(['e', 'E']) {
            Some(i) => {
                let e: i32 = body[i + 1..].parse().map_err(|_| invalid())?;
                (&body[..i], e)
            }
            None => (body, 0),
        };
        let (int_part, frac_part) = match mantissa.find('.') {
            Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
            None => (mantissa, ""),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let mut value: i128 = 0;
        let mut digits = 0usize;
        for b in int_part.bytes().chain(frac_part.bytes()) {
            if !b.is_ascii_digit() {
                return Err(invalid());
            }
            if value == 0 && b == b'0' {
                continue;
            }
            digits += 1;
            if digits > 38 {
                return Err(overflow());
            }
            value = value * 10 + (b - b'0') as i128;
        }
        let mut scale = frac_part.len() as i32 - exponent;
        if scale < 0 {
            let up = (-scale) as u32;
            if up > 38 {
                return Err(overflow());
            }
            value = value.checked_mul(pow10(up as u8)).ok_or_else(overflow)?;
            scale = 0;
        }
        let mut d = Decimal { value: if negative { -value } else { value }, scale: 0 };
        if scale > 38 {
            // More fractional digits than we can hold: round them away.
            let drop = (scale - 38) as u32;
            d.value = if drop > 38 { 0 } else { div_round(d.value, pow10(drop as u8)) };
            scale = 38;
        }
        d.scale = scale as u8;
        Ok(d)
    }

    pub fn from_f64(v: f64, scale: u8) -> Result<Decimal> {
        if !v.is_finite() {
            return Err(Error::new(
                SqlState::FeatureNotSupported,
                "cannot convert infinity or NaN to numeric",
            ));
        }
        // Go through the shortest decimal text of the float, as PostgreSQL does, so that
        // 0.1::float8::numeric is 0.1 and not 0.1000000000000000055.
        Decimal::parse(&format!("{v:e}"))?.rescale(scale)
    }

    pub fn to_f64(self) -> f64 {
        // Exact for the digits a double can hold; the text round trip gives correct rounding.
        self.to_string().parse().unwrap_or(f64::NAN)
    }

    /// The integral part, rounded half away from zero, or `None` when out of i64's range.
    pub fn round_to_i64(self) -> Option<i64> {
        let v = if self.scale == 0 { self.value } else { div_round(self.value, pow10(self.scale)) };
        i64::try_from(v).ok()
    }

    pub fn checked_add(self, other: Decimal) -> Result<Decimal> {
        let scale = self.scale.max(other.scale);
        let (a, b) = (self.rescale(scale)?, other.rescale(scale)?);
        Ok(Decimal { value: a.value.checked_add(b.value).ok_or_else(overflow)?, scale })
    }

    pub fn checked_sub(self, other: Decimal) -> Result<Decimal> {
        self.checked_add(Decimal { value: -other.value, scale: other.scale })
    }

    pub fn checked_mul(self, other: Decimal) -> Result<Decimal> {
        let scale = self.scale + other.scale;
        if scale > 38 {
            // Keep what fits: multiply at reduced precision.
            let a = self.rescale(self.scale.min(19))?;
            let b = other.rescale(other.scale.min(19))?;
            return a.checked_mul(b);
        }
        Ok(Decimal { value: self.value.checked_mul(other.value).ok_or_else(overflow)?, scale })
    }

    /// `self / other` rounded to `scale` fractional digits.
    pub fn checked_div(self, other: Decimal, scale: u8) -> Result<Decimal> {
        if other.value == 0 {
            return Err(Error::division_by_zero());
        }
        // value = self.value * 10^(scale + other.scale - self.scale) / other.value
        let shift = scale as i32 + other.scale as i32 - self.scale as i32;
        let (num, den) = if shift >= 0 {
            (self.value.checked_mul(pow10(shift as u8)).ok_or_else(overflow)?, other.value)
        } else {
            (self.value, other.value.checked_mul(pow10((-shift) as u8)).ok_or_else(overflow)?)
        };
        Ok(Decimal { value: div_round(num, den), scale })
    }

    pub fn is_zero(self) -> bool {
        self.value == 0
    }

    /// Compares numerically, whatever the scales.
    pub fn cmp_value(self, other: Decimal) -> Ordering {
        let scale = self.scale.max(other.scale);
        match (self.rescale(scale), other.rescale(scale)) {
            (Ok(a), Ok(b)) => {
                let (x, y) = (a.value, b.value);
                x.cmp(&y)
            }
            // A rescale overflows only for a huge magnitude; compare as floats then.
            _ => self.to_f64().total_cmp(&other.to_f64()),
        }
    }
}

/// `n / d` rounded half away from zero.
fn div_round(n: i128, d: i128) -> i128 {
    // Most values and factors fit 64 bits, where division is one instruction rather than a
    // call into the 128-bit division routine.
    if let (Ok(n64), Ok(d64)) = (i64::try_from(n), i64::try_from(d))
        && n64 != i64::MIN
    {
        let (q, r) = (n64 / d64, n64 % d64);
        let up = r.unsigned_abs() * 2 >= d64.unsigned_abs();
        return (if !up { q } else if (n64 < 0) != (d64 < 0) { q - 1 } else { q + 1 }) as i128;
    }
    let q = n / d;
    let r = n % d;
    if r.unsigned_abs() * 2 >= d.unsigned_abs() {
        if (n < 0) != (d < 0) { q - 1 } else { q + 1 }
    } else {
        q
    }
}

impl Decimal {
    /// The same number without trailing fractional zeros (`1.5000000000` → `1.5`, `3.00` → `3`).
    pub fn trimmed(self) -> Decimal {
        let mut d = self;
        while d.scale > 0 && d.value % 10 == 0 {
            d.value /= 10;
            d.scale -= 1;
        }
        d
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let abs = self.value.unsigned_abs();
        let sign = if self.value < 0 { "-" } else { "" };
        if self.scale == 0 {
            return write!(f, "{sign}{abs}");
        }
        let factor = pow10(self.scale) as u128;
        write!(f, "{sign}{}.{:0width$}", abs / factor, abs % factor, width = self.scale as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_keeps_the_written_scale() {
        assert_eq!(Decimal::parse("12.50").unwrap(), Decimal::new(1250, 2));
        assert_eq!(Decimal::parse("-0.5").unwrap(), Decimal::new(-5, 1));
        assert_eq!(Decimal::parse("1e3").unwrap(), Decimal::new(1000, 0));
        assert_eq!(Decimal::parse("1.5E-2").unwrap(), Decimal::new(15, 3));
        assert_eq!(Decimal::parse(".5").unwrap(), Decimal::new(5, 1));
        assert!(Decimal::parse("1.2.3").is_err());
        assert!(Decimal::parse("").is_err());
        assert!(Decimal::parse("abc").is_err());
    }

    #[test]
    fn narrow_and_wide_division_round_alike() {
        // The 64-bit path of div_round against the 128-bit arithmetic it replaces.
        let wide = |n: i128, d: i128| {
            let (q, r) = (n / d, n % d);
            if r.unsigned_abs() * 2 >= d.unsigned_abs() {
                if (n < 0) != (d < 0) { q - 1 } else { q + 1 }
            } else {
                q
            }
        };
        let values = [0i128, 1, -1, 5, -5, 15, -15, 149, -150, 151, i64::MAX as i128, i64::MIN as i128 + 1, (i64::MAX as i128) + 7, -(1i128 << 100)];
        let divisors = [1i128, -1, 2, -2, 10, 100, 1_000_000_007, i64::MAX as i128, (i64::MAX as i128) + 1, -(1i128 << 70)];
        for n in values {
            for d in divisors {
                assert_eq!(div_round(n, d), wide(n, d), "{n} / {d}");
            }
        }
        let value = Decimal::new(i64::MAX as i128, 0).rescale(2).unwrap().value;
        assert_eq!(value, (i64::MAX as i128) * 100);
        assert_eq!(Decimal::new(-7, 1).rescale(3).unwrap(), Decimal::new(-700, 3));
    }

    #[test]
    fn rescale_rounds_half_away_from_zero() {
        assert_eq!(Decimal::new(125, 2).rescale(1).unwrap(), Decimal::new(13, 1));
        assert_eq!(Decimal::new(-125, 2).rescale(1).unwrap(), Decimal::new(-13, 1));
        assert_eq!(Decimal::new(124, 2).rescale(1).unwrap(), Decimal::new(12, 1));
    }

    #[test]
    fn fit_checks_precision() {
        assert_eq!(Decimal::parse("999.99").unwrap().fit(5, 2).unwrap(), Decimal::new(99999, 2));
        let err = Decimal::parse("1000").unwrap().fit(5, 2).unwrap_err();
        assert_eq!(err.state, SqlState::NumericValueOutOfRange);
        // 0.99995 rounds up to 1.0000 which no longer fits NUMERIC(4,4).
        assert!(Decimal::parse("0.99995").unwrap().fit(4, 4).is_err());
    }

    #[test]
    fn display_pads_the_fraction() {
        assert_eq!(Decimal::new(5, 2).to_string(), "0.05");
        assert_eq!(Decimal::new(-1250, 2).to_string(), "-12.50");
        assert_eq!(Decimal::new(7, 0).to_string(), "7");
    }

    #[test]
    fn arithmetic() {
        let a = Decimal::parse("1.25").unwrap();
        let b = Decimal::parse("2.5").unwrap();
        assert_eq!(a.checked_add(b).unwrap().to_string(), "3.75");
        assert_eq!(a.checked_mul(b).unwrap().to_string(), "3.125");
        assert_eq!(a.checked_div(b, 4).unwrap().to_string(), "0.5000");
        assert_eq!(a.checked_div(Decimal::from_i64(0), 2).unwrap_err().state, SqlState::DivisionByZero);
        assert_eq!(Decimal::from_f64(0.1, 3).unwrap().to_string(), "0.100");
    }
}
