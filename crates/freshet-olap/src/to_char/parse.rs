//! Reading a date or time from text with a template: `to_timestamp(text, template)` and
//! `to_date(text, template)`, as PostgreSQL reads them outside FX mode:
//! - a numeric field reads up to its width of digits (`YYYY` four, `MM` two, `US` six), after
//!   any blanks, and needs at least one; fewer are read when a non-digit follows
//!   (`5/3/24` with `DD/MM/YY`);
//! - month and day names match their full or three-letter forms in any case (day names are
//!   read and ignored), `AM`/`PM` (with or without dots) adjust `HH`/`HH12`;
//! - a blank in the template skips blanks in the input, any other character of the template
//!   skips one character of the input if it is not a letter or digit (any separator matches
//!   any separator), and text after the last field is ignored;
//! - a year of fewer than four digits read with `YY`, `YYY` or `Y` is placed nearest 2020 as
//!   PostgreSQL places it (`95` → 1995, `24` → 2024); `TZH`/`TZM` give the input's offset;
//! - fields missing from the template take year 0 (1 BC, as PostgreSQL's), January, the 1st,
//!   midnight.
//!
//! Errors are PostgreSQL's: 22007 for text that does not match (`invalid value "x202" for
//! "YYYY"`), 22008 for a field out of range (`date/time field value out of range`), 0A000 for
//! template patterns not supported here (ISO weeks and years, Julian days, quarters, …).

use freshet_core::types::datetime::{days_from_civil, MICROS_PER_DAY, MICROS_PER_SECOND};
use freshet_core::{Error, Result, SqlState};

use super::datetime::{Field, Piece, DAYS, MONTHS};

/// The instant a text names under `pieces`, as microseconds since 1970-01-01 UTC (the text's
/// offset, if it gives one, applied).
pub(super) fn parse(pieces: &[Piece], input: &str) -> Result<i64> {
    let mut rest = input;
    let (mut year, mut month, mut day) = (0i64, 1i64, 1i64);
    let (mut hour, mut minute, mut second, mut micro) = (0i64, 0i64, 0i64, 0i64);
    let mut pm: Option<bool> = None;
    let mut hour12 = false;
    let mut offset_minutes = 0i64;
    let mut offset_sign = 1i64;
    for piece in pieces {
        let field = match piece {
            Piece::Text(text) => {
                for c in text.chars() {
                    if c.is_whitespace() {
                        rest = rest.trim_start();
                    } else if let Some(next) = rest.chars().next()
                        && !next.is_alphanumeric()
                    {
                        rest = &rest[next.len_utf8()..];
                    }
                }
                continue;
            }
            Piece::Field { field, .. } => *field,
        };
        rest = rest.trim_start();
        match field {
            Field::Year(4) => year = number(&mut rest, 4, "YYYY")?,
            Field::Year(n) => {
                let name = "Y".repeat(n as usize);
                let v = number(&mut rest, n as usize, &name)?;
                year = nearest_2020(v);
            }
            Field::YearComma => {
                let thousands = number(&mut rest, 1, "Y,YYY")?;
                rest = rest.strip_prefix(',').unwrap_or(rest);
                year = thousands * 1000 + number(&mut rest, 3, "Y,YYY")?;
            }
            Field::Month => month = number(&mut rest, 2, "MM")?,
            Field::DayOfMonth => day = number(&mut rest, 2, "DD")?,
            Field::Hour24 => hour = number(&mut rest, 2, "HH24")?,
            Field::Hour12 => {
                hour = number(&mut rest, 2, "HH12")?;
                hour12 = true;
            }
            Field::Minute => minute = number(&mut rest, 2, "MI")?,
            Field::Second => second = number(&mut rest, 2, "SS")?,
            Field::Milli => micro = fraction(&mut rest, 3, "MS")? * 1_000,
            Field::Micro => micro = fraction(&mut rest, 6, "US")?,
            Field::SecondsOfDay => {
                let s = number(&mut rest, 5, "SSSS")?;
                (hour, minute, second) = (s / 3600, s / 60 % 60, s % 60);
            }
            Field::MonthName(_) | Field::MonthAbbrev(_) => month = name_index(&mut rest, &MONTHS, "MONTH")? as i64 + 1,
            Field::DayName(_) | Field::DayAbbrev(_) => {
                name_index(&mut rest, &DAYS, "DAY")?;
            }
            Field::Meridiem { .. } => {
                let upper = rest.to_ascii_uppercase();
                let (is_pm, len) = if upper.starts_with("A.M.") {
                    (false, 4)
                } else if upper.starts_with("P.M.") {
                    (true, 4)
                } else if upper.starts_with("AM") {
                    (false, 2)
                } else if upper.starts_with("PM") {
                    (true, 2)
                } else {
                    return Err(invalid_value(rest, "AM"));
                };
                pm = Some(is_pm);
                rest = &rest[len..];
            }
            Field::OffsetHours => {
                if let Some(r) = rest.strip_prefix('-') {
                    offset_sign = -1;
                    rest = r;
                } else if let Some(r) = rest.strip_prefix('+') {
                    rest = r;
                }
                offset_minutes += number(&mut rest, 2, "TZH")? * 60;
            }
            Field::OffsetMinutes => offset_minutes += number(&mut rest, 2, "TZM")?,
            other => {
                return Err(Error::unsupported(format!("the template pattern {other:?} in to_timestamp and to_date")));
            }
        }
    }
    if hour12 || pm.is_some() {
        if !(1..=12).contains(&hour) {
            return Err(Error::new(SqlState::InvalidDatetimeFormat, format!("hour \"{hour}\" is invalid for the 12-hour clock"))
                .with_hint("Use the 24-hour clock, or give the hour between 1 and 12."));
        }
        hour = match (hour, pm == Some(true)) {
            (12, false) => 0,
            (12, true) => 12,
            (h, true) => h + 12,
            (h, false) => h,
        };
    }
    let days_in_month = |y: i64, m: i64| -> i64 {
        match m {
            2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        }
    };
    let out_of_range = || Error::new(SqlState::DatetimeFieldOverflow, format!("date/time field value out of range: \"{input}\""));
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) || hour > 24 || minute > 59 || second > 60 {
        return Err(out_of_range());
    }
    let year = i32::try_from(year).map_err(|_| out_of_range())?;
    let days = days_from_civil(year, month as u32, day as u32) as i64;
    let local = days * MICROS_PER_DAY + ((hour * 60 + minute) * 60 + second) * MICROS_PER_SECOND + micro;
    Ok(local - offset_sign * offset_minutes * 60 * MICROS_PER_SECOND)
}

/// Up to `width` digits at the start of `rest` (after blanks), at least one (22007 naming
/// the template pattern `name` otherwise).
fn number(rest: &mut &str, width: usize, name: &str) -> Result<i64> {
    let digits = rest.bytes().take(width).take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        let shown: String = rest.chars().take(width.max(1)).collect();
        return Err(Error::new(SqlState::InvalidDatetimeFormat, format!("invalid value \"{shown}\" for \"{name}\""))
            .with_detail("Value must be an integer."));
    }
    let value = rest[..digits].parse::<i64>().unwrap_or(0);
    *rest = &rest[digits..];
    Ok(value)
}

/// A year read with fewer than four digits, placed as PostgreSQL places it: 0–69 in the
/// 2000s, 70–99 in the 1900s, 100–519 in the 2000s, 520–999 in the 1000s.
fn nearest_2020(year: i64) -> i64 {
    match year {
        0..=69 => year + 2000,
        70..=99 => year + 1900,
        100..=519 => year + 2000,
        520..=999 => year + 1000,
        _ => year,
    }
}

/// Digits of a fraction of a second (`MS`, `US`), scaled to `width` digits (`.5` with `US`
/// is 500000).
fn fraction(rest: &mut &str, width: usize, name: &str) -> Result<i64> {
    let digits = rest.bytes().take(width).take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(invalid_value(rest, name));
    }
    let value = rest[..digits].parse::<i64>().unwrap_or(0) * 10i64.pow((width - digits) as u32);
    *rest = &rest[digits..];
    Ok(value)
}

/// The index of the name (full, or its first three letters) `rest` starts with, in any case.
fn name_index(rest: &mut &str, names: &[&str], pattern: &str) -> Result<usize> {
    let lower = rest.to_lowercase();
    for (i, name) in names.iter().enumerate() {
        let name = name.to_lowercase();
        for candidate in [name.as_str(), &name[..3]] {
            if lower.starts_with(candidate) {
                *rest = &rest[candidate.len()..];
                return Ok(i);
            }
        }
    }
    Err(invalid_value(rest, pattern))
}

fn invalid_value(rest: &str, pattern: &str) -> Error {
    let shown: String = rest.chars().take(pattern.len().max(3)).collect();
    Error::new(SqlState::InvalidDatetimeFormat, format!("invalid value \"{shown}\" for \"{pattern}\""))
        .with_detail("The given value did not match any of the allowed values for this field.")
}

#[cfg(test)]
mod tests {
    use super::super::datetime::compile;
    use super::*;
    use freshet_core::types::datetime::{parse_timestamp, parse_timestamptz};

    fn read(input: &str, template: &str) -> Result<i64> {
        parse(&compile(template), input)
    }

    #[test]
    fn texts_read_as_postgresql_reads_them() {
        // Answers from PostgreSQL 15 (session zone UTC).
        let at = |s: &str| parse_timestamp(s).unwrap();
        assert_eq!(read("2024-03-05 14:07", "YYYY-MM-DD HH24:MI").unwrap(), at("2024-03-05 14:07"));
        assert_eq!(read("20240305", "YYYYMMDD").unwrap(), at("2024-03-05"));
        assert_eq!(read("5/3/24", "DD/MM/YY").unwrap(), at("2024-03-05"));
        assert_eq!(read("March 5, 2024 2:07 PM", "Month DD, YYYY HH:MI AM").unwrap(), at("2024-03-05 14:07"));
        assert_eq!(read("2024-03-05 14:07:09.123456", "YYYY-MM-DD HH24:MI:SS.US").unwrap(), at("2024-03-05 14:07:09.123456"));
        assert_eq!(read("2024-03-05 10:00 +02", "YYYY-MM-DD HH24:MI TZH").unwrap(), parse_timestamptz("2024-03-05 08:00+00").unwrap());
        assert_eq!(read("2024-03-05 junk", "YYYY-MM-DD").unwrap(), at("2024-03-05"));
        assert_eq!(read("Tue 05 mar 95 12:00 a.m.", "Dy DD Mon YY HH12:MI a.m.").unwrap(), at("1995-03-05 00:00"));
        assert_eq!(read("2024.03.05", "YYYY-MM-DD").unwrap(), at("2024-03-05"));
        assert_eq!(read("2,024 03 05", "Y,YYY MM DD").unwrap(), at("2024-03-05"));
        let code = |r: Result<i64>| r.unwrap_err().state.code();
        assert_eq!(code(read("2024-13-05", "YYYY-MM-DD")), "22008");
        assert_eq!(code(read("2024-02-30", "YYYY-MM-DD")), "22008");
        assert_eq!(code(read("x2024", "YYYY")), "22007");
        assert_eq!(read("x2024", "YYYY").unwrap_err().message, "invalid value \"x202\" for \"YYYY\"");
        assert_eq!(code(read("2024 W10", "IYYY \"W\"IW")), "0A000");
        assert_eq!(code(read("13:00 PM", "HH:MI AM")), "22007");
    }
}
