//! Floating-point text in PostgreSQL's style.
//!
//! Output is the shortest text that reads back to the same value (PostgreSQL 12 and later with
//! the default `extra_float_digits = 1`), switching to exponent form as `%g` does: below 1e-4 or
//! at 10^15 (10^6 for REAL) and above. Input accepts `Infinity`, `-Infinity` and `NaN`.

use crate::error::{Error, Result};

/// Formats an f64 as PostgreSQL's float8out does.
pub fn format_f64(v: f64, out: &mut String) {
    format_float(v, format!("{v:e}"), 15, out)
}

/// Formats an f32 as PostgreSQL's float4out does.
pub fn format_f32(v: f32, out: &mut String) {
    format_float(v as f64, format!("{v:e}"), 6, out)
}

fn format_float(v: f64, sci: String, max_exp: i32, out: &mut String) {
    if v.is_nan() {
        out.push_str("NaN");
        return;
    }
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    // `sci` is Rust's shortest round-trip form: [-]d[.ddd]e[-]x
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if negative {
        out.push('-');
    }
    if exp < -4 || exp >= max_exp {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push('0');
        }
        out.push_str(&e.to_string());
    } else if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            out.push_str(&digits);
            for _ in digits.len()..int_len {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        }
    }
}

/// Parses float text, accepting PostgreSQL's special values.
pub fn parse_f64(text: &str, type_name: &str) -> Result<f64> {
    let s = text.trim();
    let lower = s.to_ascii_lowercase();
    match lower.as_str() {
        "infinity" | "+infinity" | "inf" | "+inf" => return Ok(f64::INFINITY),
        "-infinity" | "-inf" => return Ok(f64::NEG_INFINITY),
        "nan" => return Ok(f64::NAN),
        _ => {}
    }
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) {
        return Err(Error::invalid_text(type_name, text));
    }
    let v: f64 = s.parse().map_err(|_| Error::invalid_text(type_name, text))?;
    if v.is_infinite() {
        return Err(Error::new(
            crate::error::SqlState::NumericValueOutOfRange,
            format!("\"{s}\" is out of range for type {type_name}"),
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f8(v: f64) -> String {
        let mut s = String::new();
        format_f64(v, &mut s);
        s
    }

    fn f4(v: f32) -> String {
        let mut s = String::new();
        format_f32(v, &mut s);
        s
    }

    #[test]
    fn float8_output_matches_postgres() {
        assert_eq!(f8(1.1), "1.1");
        assert_eq!(f8(100.0), "100");
        assert_eq!(f8(1e20), "1e+20");
        assert_eq!(f8(1e15), "1e+15");
        assert_eq!(f8(1e14), "100000000000000");
        assert_eq!(f8(123456789012345678.0), "1.2345678901234568e+17");
        assert_eq!(f8(0.0001), "0.0001");
        assert_eq!(f8(0.00001), "1e-05");
        assert_eq!(f8(-2.5), "-2.5");
        assert_eq!(f8(f64::INFINITY), "Infinity");
        assert_eq!(f8(0.1 + 0.2), "0.30000000000000004");
    }

    #[test]
    fn float4_output_matches_postgres() {
        assert_eq!(f4(1.1), "1.1");
        assert_eq!(f4(1e6), "1e+06");
        assert_eq!(f4(100000.0), "100000");
    }

    #[test]
    fn special_values_parse() {
        assert!(parse_f64("NaN", "double precision").unwrap().is_nan());
        assert_eq!(parse_f64("-Infinity", "double precision").unwrap(), f64::NEG_INFINITY);
        assert!(parse_f64("1x", "double precision").is_err());
    }
}
