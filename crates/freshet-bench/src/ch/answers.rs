//! Comparing query answers across systems that type results differently (PostgreSQL's
//! NUMERIC, DuckDB's HUGEINT and DOUBLE, DataFusion's Decimal128 and Float64): every value
//! becomes text — numbers in a canonical decimal form, timestamps as `YYYY-MM-DD HH:MM:SS`,
//! strings without CHAR padding — and numbers compare with a small relative tolerance (an
//! average computed in binary floating point and one in decimal differ in the last digits).
//!
//! Rows compare in the order the query returned them; if that fails, sorted, because ORDER BY
//! leaves the order of ties to the system.

use std::fmt::Write;

use crate::conn::Cell;

/// A canonical answer: rows of canonical values.
pub type Answer = Vec<Vec<String>>;

fn format_timestamp(micros: i64) -> String {
    let days = micros.div_euclid(86_400_000_000);
    let rest = micros.rem_euclid(86_400_000_000);
    let (y, m, d) = civil_from_days(days);
    let secs = rest / 1_000_000;
    let mut s = format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    if rest % 1_000_000 != 0 {
        let _ = write!(s, ".{:06}", rest % 1_000_000);
    }
    s
}

/// Days since 1970-01-01 to a civil date (the proleptic Gregorian calendar).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

/// A number in canonical form: no exponent, no trailing fractional zeros.
pub fn canonical_number(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e17 {
        return format!("{}", v as i64);
    }
    let s = format!("{v:.10}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn canonical_decimal(v: i128, scale: u8) -> String {
    if scale == 0 {
        return v.to_string();
    }
    let p = 10i128.pow(scale as u32);
    let sign = if v < 0 { "-" } else { "" };
    let (int, frac) = (v.abs() / p, v.abs() % p);
    let frac = format!("{frac:0w$}", w = scale as usize);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() { format!("{sign}{int}") } else { format!("{sign}{int}.{frac}") }
}

pub fn canonical_cell(c: &Cell) -> String {
    match c {
        Cell::Null => "NULL".into(),
        Cell::Bool(b) => b.to_string(),
        Cell::Int(v) => v.to_string(),
        Cell::Decimal(v, s) => canonical_decimal(*v, *s),
        Cell::Float(f) => canonical_number(*f),
        Cell::Text(s) => s.trim_end_matches(' ').to_string(),
        Cell::Timestamp(t) => format_timestamp(*t),
        Cell::Date(d) => format_timestamp(*d as i64 * 86_400_000_000)[..10].to_string(),
    }
}

pub fn canonical(rows: &[Vec<Cell>]) -> Answer {
    rows.iter().map(|r| r.iter().map(canonical_cell).collect()).collect()
}

fn values_agree(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => (x - y).abs() <= 1e-6 * x.abs().max(y.abs()).max(1.0),
        _ => false,
    }
}

fn rows_agree(a: &Answer, b: &Answer) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.len() == y.len() && x.iter().zip(y).all(|(u, v)| values_agree(u, v)))
}

/// Whether two answers agree (in order, or as sorted multisets).
pub fn agree(a: &Answer, b: &Answer) -> bool {
    if rows_agree(a, b) {
        return true;
    }
    // Sort by a key that tolerates tiny numeric differences: numbers rounded to 4 places.
    let key = |r: &Vec<String>| -> Vec<String> {
        r.iter().map(|v| v.parse::<f64>().map(|f| format!("{f:.4}")).unwrap_or_else(|_| v.clone())).collect()
    };
    // Each row's key once (not once per comparison): answers can have thousands of rows.
    let (mut x, mut y) = (a.clone(), b.clone());
    x.sort_by_cached_key(key);
    y.sort_by_cached_key(key);
    rows_agree(&x, &y)
}

/// An answer as text, one row per line with `|` between values (the reference file format).
pub fn to_text(a: &Answer) -> String {
    a.iter().map(|r| r.join("|")).collect::<Vec<_>>().join("\n")
}

pub fn from_text(s: &str) -> Answer {
    s.lines().filter(|l| !l.is_empty()).map(|l| l.split('|').map(str::to_string).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_canonicalize_across_types() {
        assert_eq!(canonical_cell(&Cell::Decimal(12300, 4)), "1.23");
        assert_eq!(canonical_cell(&Cell::Decimal(-500, 2)), "-5");
        assert_eq!(canonical_cell(&Cell::Float(5.0)), "5");
        assert_eq!(canonical_cell(&Cell::Text("AB  ".into())), "AB");
        assert_eq!(canonical_cell(&Cell::Timestamp(1_433_116_800_000_000)), "2015-06-01 00:00:00");
        assert!(agree(&vec![vec!["1.0000001".into()]], &vec![vec!["1".into()]]));
        assert!(!agree(&vec![vec!["1.01".into()]], &vec![vec!["1".into()]]));
        let a = vec![vec!["x".to_string(), "1".to_string()], vec!["y".to_string(), "1".to_string()]];
        let b = vec![a[1].clone(), a[0].clone()];
        assert!(agree(&a, &b));
    }
}
