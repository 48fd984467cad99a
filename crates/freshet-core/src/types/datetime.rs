//! DATE and TIMESTAMP: days and microseconds since 1970-01-01, proleptic Gregorian calendar.
//!
//! Input accepts ISO 8601 (`2024-02-29`, `2024-02-29 13:45:00.123456`, with `T` as separator)
//! and ignores a trailing time-zone offset, as PostgreSQL does for `timestamp without time
//! zone`. Output is ISO with trailing fractional zeros trimmed (PostgreSQL's DateStyle ISO).

use std::fmt::Write;

use crate::error::{Error, Result, SqlState};

pub const MICROS_PER_SECOND: i64 = 1_000_000;
pub const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;
/// Days from 1970-01-01 to 2000-01-01, PostgreSQL's epoch for binary dates and timestamps.
pub const PG_EPOCH_DAYS: i32 = 10_957;

/// Microseconds since 1970-01-01 00:00:00 UTC now (the system clock; 0 if it is before 1970).
pub fn now_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// Days since 1970-01-01 of a civil date (Hinnant's algorithm).
pub fn days_from_civil(year: i32, month: u32, day: u32) -> i32 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = month as i32;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i32 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date (year, month, day) of days since 1970-01-01.
pub fn civil_from_days(days: i32) -> (i32, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn is_leap(year: i32) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(year) => 29,
        _ => 28,
    }
}

fn field_overflow(kind: &str, text: &str) -> Error {
    Error::new(
        SqlState::DatetimeFieldOverflow,
        format!("date/time field value out of range: \"{text}\""),
    )
    .with_hint(format!("check the {kind} value"))
}

fn parse_number(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses `YYYY-MM-DD` into days since 1970-01-01.
pub fn parse_date(text: &str) -> Result<i32> {
    let s = text.trim();
    let (date_part, _) = split_date_time(s);
    parse_date_part(date_part, text, "date")
}

fn parse_date_part(s: &str, text: &str, type_name: &str) -> Result<i32> {
    let invalid = || Error::new(
        SqlState::InvalidDatetimeFormat,
        format!("invalid input syntax for type {type_name}: \"{text}\""),
    );
    let mut parts = s.splitn(3, '-');
    let (y, m, d) = match (parts.next(), parts.next(), parts.next()) {
        (Some(y), Some(m), Some(d)) => (y, m, d),
        _ => return Err(invalid()),
    };
    let year = parse_number(y).ok_or_else(invalid)? as i32;
    let month = parse_number(m).ok_or_else(invalid)?;
    let day = parse_number(d).ok_or_else(invalid)?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) || year > 294_276 {
        return Err(field_overflow("date", text));
    }
    Ok(days_from_civil(year, month, day))
}

fn split_date_time(s: &str) -> (&str, &str) {
    match s.find([' ', 'T', 't']) {
        Some(i) => (&s[..i], s[i + 1..].trim_start()),
        None => (s, ""),
    }
}

/// Parses a timestamp into microseconds since 1970-01-01; a trailing zone offset is ignored.
pub fn parse_timestamp(text: &str) -> Result<i64> {
    Ok(parse_with_zone(text, "timestamp")?.0)
}

fn invalid_input(type_name: &str, text: &str) -> Error {
    Error::new(SqlState::InvalidDatetimeFormat, format!("invalid input syntax for type {type_name}: \"{text}\""))
}

/// Parses a `timestamp with time zone` into microseconds since 1970-01-01 00:00 UTC. A time
/// without a zone is read in the session's time zone, which is always UTC (see
/// ARCHITECTURE.md, "Time zones").
pub fn parse_timestamptz(text: &str) -> Result<i64> {
    const NAME: &str = "timestamp with time zone";
    let (local, zone) = parse_with_zone(text, NAME)?;
    let offset = match zone {
        None => 0,
        Some(z) => zone_offset(z).ok_or_else(|| {
            let numeric = z.starts_with(['+', '-']);
            if numeric && z[1..].bytes().all(|b| b.is_ascii_digit() || b == b':') {
                Error::new(SqlState::InvalidTimeZoneDisplacement, format!("time zone displacement out of range: \"{text}\""))
            } else if !numeric && z.bytes().any(|b| b.is_ascii_alphabetic()) {
                Error::new(SqlState::InvalidParameterValue, format!("time zone \"{}\" not recognized", z.to_ascii_lowercase()))
            } else {
                invalid_input(NAME, text)
            }
        })?,
    };
    Ok(local - offset * MICROS_PER_SECOND)
}

/// The local time a timestamp text names and the zone written after the time (with or
/// without a space), if any.
fn parse_with_zone<'a>(text: &'a str, type_name: &str) -> Result<(i64, Option<&'a str>)> {
    let s = text.trim();
    let invalid = || invalid_input(type_name, text);
    if s.eq_ignore_ascii_case("epoch") {
        return Ok((0, None));
    }
    let (date_part, time_part) = split_date_time(s);
    let days = parse_date_part(date_part, text, type_name)?;
    if time_part.is_empty() {
        return Ok((days as i64 * MICROS_PER_DAY, None));
    }
    let (time, zone) = split_zone(time_part);
    let mut fields = time.splitn(3, ':');
    let hour = fields.next().and_then(parse_number).ok_or_else(invalid)?;
    let minute = fields.next().and_then(parse_number).ok_or_else(invalid)?;
    let (second, micros) = match fields.next() {
        None => (0, 0),
        Some(sec) => parse_seconds(sec).ok_or_else(invalid)?,
    };
    if hour > 24 || minute > 59 || second > 60 || (hour == 24 && (minute, second, micros) != (0, 0, 0)) {
        return Err(field_overflow("time", text));
    }
    let time_micros = ((hour as i64 * 60 + minute as i64) * 60 + second as i64) * MICROS_PER_SECOND
        + micros;
    Ok((days as i64 * MICROS_PER_DAY + time_micros, zone))
}

/// The time of day and the zone written after it, if any.
fn split_zone(time_part: &str) -> (&str, Option<&str>) {
    let t = time_part.trim_end();
    if let Some(i) = t.rfind(['+', '-']) {
        return (t[..i].trim_end(), Some(&t[i..]));
    }
    let letters = t.len() - t.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '/' || c == '_').len();
    if letters > 0 {
        return (t[..t.len() - letters].trim_end(), Some(&t[t.len() - letters..]));
    }
    (t, None)
}

/// Seconds east of UTC of a zone written in a timestamp: `Z`, `UTC`, `GMT` or a numeric offset
/// (`+hh`, `+hh:mm`, `+hhmm`, `+hh:mm:ss`, or `-`). Other names are not known: there is no time
/// zone database.
pub fn zone_offset(zone: &str) -> Option<i64> {
    let z = zone.trim();
    if ["z", "utc", "uct", "gmt", "gmt0", "zulu", "etc/utc", "etc/gmt", "universal", "greenwich"].iter().any(|n| z.eq_ignore_ascii_case(n)) {
        return Some(0);
    }
    let (sign, digits) = match z.as_bytes().first()? {
        b'+' => (1, &z[1..]),
        b'-' => (-1, &z[1..]),
        _ => return None,
    };
    if !digits.bytes().all(|b| b.is_ascii_digit() || b == b':') {
        return None;
    }
    let parts: Vec<&str> = if digits.contains(':') {
        digits.split(':').collect()
    } else {
        match digits.len() {
            1 | 2 => vec![digits],
            4 => vec![&digits[..2], &digits[2..]],
            6 => vec![&digits[..2], &digits[2..4], &digits[4..]],
            _ => return None,
        }
    };
    if parts.is_empty() || parts.len() > 3 || parts.iter().any(|p| p.is_empty() || p.len() > 2 || !p.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    let n: Vec<i64> = parts.iter().map(|p| p.parse().unwrap_or(0)).collect();
    let (h, m, s) = (n[0], n.get(1).copied().unwrap_or(0), n.get(2).copied().unwrap_or(0));
    if h > 15 || m > 59 || s > 59 {
        return None;
    }
    Some(sign * (h * 3600 + m * 60 + s))
}

/// `SS` or `SS.ffffff` (more digits are rounded to microseconds).
fn parse_seconds(s: &str) -> Option<(u32, i64)> {
    let (whole, frac) = match s.find('.') {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, ""),
    };
    let second = parse_number(whole)?;
    if frac.is_empty() {
        return Some((second, 0));
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut micros: i64 = 0;
    for (i, b) in frac.bytes().enumerate() {
        if i == 6 {
            if b >= b'5' {
                micros += 1;
            }
            break;
        }
        micros = micros * 10 + (b - b'0') as i64;
    }
    for _ in frac.len()..6 {
        micros *= 10;
    }
    Some((second, micros))
}

pub fn format_date(days: i32, out: &mut String) {
    let (y, m, d) = civil_from_days(days);
    if y <= 0 {
        let _ = write!(out, "{:04}-{m:02}-{d:02} BC", 1 - y);
    } else {
        let _ = write!(out, "{y:04}-{m:02}-{d:02}");
    }
}

pub fn format_timestamp(micros: i64, out: &mut String) {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let rem = micros.rem_euclid(MICROS_PER_DAY);
    let (y, m, d) = civil_from_days(days as i32);
    let secs = rem / MICROS_PER_SECOND;
    let frac = rem % MICROS_PER_SECOND;
    let (year, bc) = if y <= 0 { (1 - y, " BC") } else { (y, "") };
    let _ = write!(
        out,
        "{year:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    if frac != 0 {
        let digits = format!("{frac:06}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    out.push_str(bc);
}

/// A `timestamp with time zone` in the session's time zone (UTC): the timestamp, then `+00`
/// (before the era of a BC date, as PostgreSQL writes it).
pub fn format_timestamptz(micros: i64, out: &mut String) {
    let start = out.len();
    format_timestamp(micros, out);
    if out[start..].ends_with(" BC") {
        out.insert_str(out.len() - 3, "+00");
    } else {
        out.push_str("+00");
    }
}

/// An interval as PostgreSQL keeps one: months, days and microseconds, each signed, added to a
/// timestamp in that order (a month keeps the day of the month, clamped to the month's end).
/// Only constants (and constants scaled by a number, [`Interval::scaled`]) are intervals here:
/// there are no interval columns or values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interval {
    pub months: i32,
    pub days: i32,
    pub micros: i64,
}

impl Interval {
    pub fn negated(self) -> Interval {
        Interval { months: -self.months, days: -self.days, micros: -self.micros }
    }

    /// `justify_hours` (`hours`: whole 24-hour periods of the time become days),
    /// `justify_days` (`days`: whole 30-day periods become months) or both
    /// (`justify_interval`), as PostgreSQL's: the parts then share one sign, except that
    /// `justify_hours` and `justify_days` align only the two fields they move between.
    pub fn justified(self, hours: bool, days: bool) -> Result<Interval> {
        let out_of_range = || Error::new(SqlState::DatetimeFieldOverflow, "interval out of range");
        let (mut months, mut d, mut time) = (self.months as i64, self.days as i64, self.micros);
        if hours {
            d += time / MICROS_PER_DAY;
            time %= MICROS_PER_DAY;
        }
        if days {
            months += d / 30;
            d %= 30;
            let later_negative = d < 0 || (hours && d == 0 && time < 0);
            let later_positive = d > 0 || (hours && d == 0 && time > 0);
            if months > 0 && later_negative {
                d += 30;
                months -= 1;
            } else if months < 0 && later_positive {
                d -= 30;
                months += 1;
            }
        }
        if hours {
            if d > 0 && time < 0 {
                time += MICROS_PER_DAY;
                d -= 1;
            } else if d < 0 && time > 0 {
                time -= MICROS_PER_DAY;
                d += 1;
            }
        }
        Ok(Interval { months: i32::try_from(months).map_err(|_| out_of_range())?, days: i32::try_from(d).map_err(|_| out_of_range())?, micros: time })
    }

    /// `interval * factor`, or `interval / factor` when `divide`, as PostgreSQL computes them
    /// (`interval_mul`, `interval_div`): months and days are scaled and truncated toward zero;
    /// the fraction of a month cascades down as 30 days and the fraction of a day as 24 hours
    /// (each rounded to a microsecond's precision, so that `1.5 * '1 mon'` is exactly 1 mon 15
    /// days); nothing cascades up. 22008 when a field leaves its range, 22012 on a zero
    /// divisor.
    pub fn scaled(self, factor: f64, divide: bool) -> Result<Interval> {
        if divide && factor == 0.0 {
            return Err(Error::division_by_zero());
        }
        let out_of_range = || Error::new(SqlState::DatetimeFieldOverflow, "interval out of range");
        let apply = |x: f64| if divide { x / factor } else { x * factor };
        let to_i32 = |x: f64| if x.is_nan() || x > i32::MAX as f64 || x < i32::MIN as f64 { Err(out_of_range()) } else { Ok(x as i32) };
        // Rounded to six fractional digits, as PostgreSQL's TSROUND.
        let round6 = |x: f64| (x * 1e6).round_ties_even() / 1e6;
        let months_exact = apply(self.months as f64);
        let months = to_i32(months_exact)?;
        let days_exact = apply(self.days as f64);
        let mut days = to_i32(days_exact)?;
        let month_remainder_days = round6((months_exact - months as f64) * 30.0);
        let mut seconds = round6((days_exact - days as f64 + month_remainder_days - month_remainder_days.trunc()) * 86_400.0);
        if seconds.abs() >= 86_400.0 {
            let whole = (seconds / 86_400.0).trunc();
            days = days.checked_add(whole as i32).ok_or_else(out_of_range)?;
            seconds -= whole * 86_400.0;
        }
        days = days.checked_add(month_remainder_days as i32).ok_or_else(out_of_range)?;
        let micros = (apply(self.micros as f64) + seconds * 1e6).round_ties_even();
        if micros.is_nan() || micros >= i64::MAX as f64 || micros < i64::MIN as f64 {
            return Err(out_of_range());
        }
        Ok(Interval { months, days, micros: micros as i64 })
    }
}

/// `make_timestamp(year, month, day, hour, min, sec)`: microseconds since 1970, as PostgreSQL
/// checks the fields (22008 naming the date or the time that is out of range; a negative year
/// is BC, year 0 does not exist; 24:00:00 is the next midnight).
pub fn make_timestamp(year: i64, month: i64, day: i64, hour: i64, minute: i64, second: f64) -> Result<i64> {
    let date_error = || Error::new(SqlState::DatetimeFieldOverflow, format!("date field value out of range: {year}-{month:02}-{day:02}"));
    let time_error = || Error::new(SqlState::DatetimeFieldOverflow, format!("time field value out of range: {hour}:{minute:02}:{second:02}"));
    let y = i32::try_from(year).map_err(|_| date_error())?;
    let y = match y {
        0 => return Err(date_error()),
        y if y < 0 => y + 1,
        y => y,
    };
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(y, month as u32) as i64 {
        return Err(date_error());
    }
    let micros = (second * 1e6).round_ties_even();
    let in_day = (0..24).contains(&hour) && (0..60).contains(&minute) && (0.0..=60.0 * 1e6).contains(&micros);
    let midnight = hour == 24 && minute == 0 && micros == 0.0;
    if !(in_day || midnight) || second.is_nan() {
        return Err(time_error());
    }
    let days = days_from_civil(y, month as u32, day as u32) as i64;
    Ok(days * MICROS_PER_DAY + (hour * 60 + minute) * 60 * MICROS_PER_SECOND + micros as i64)
}

/// Parses interval input: quantities with units (`1 day`, `-2 hours 30 minutes`, `1.5 years`,
/// `3 mons`, `2 weeks`), a time `hh:mm[:ss[.ffffff]]`, optionally `@` first and `ago` last.
/// A number without a unit counts `unit`s (`INTERVAL '5' MINUTE`), or seconds. Fractions spill
/// down as PostgreSQL's do: a month is 30 days, a day 24 hours.
pub fn parse_interval(text: &str, unit: Option<&str>) -> Result<Interval> {
    let invalid = || Error::new(SqlState::InvalidDatetimeFormat, format!("invalid input syntax for type interval: \"{text}\""));
    let lower = text.trim().to_ascii_lowercase();
    let mut words: Vec<&str> = lower.split_whitespace().collect();
    if words.first() == Some(&"@") {
        words.remove(0);
    }
    let ago = words.last() == Some(&"ago");
    if ago {
        words.pop();
    }
    if words.is_empty() {
        return Err(invalid());
    }
    let (mut months, mut days, mut micros) = (0f64, 0f64, 0f64);
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        i += 1;
        if word.contains(':') {
            micros += clock_micros(word).ok_or_else(invalid)?;
            continue;
        }
        // A number, with its unit attached (`10min`) or in the next word.
        let split = word.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(word.len());
        let (number, attached) = word.split_at(split);
        let n: f64 = number.parse().map_err(|_| invalid())?;
        if !n.is_finite() {
            return Err(invalid());
        }
        let unit_word = if !attached.is_empty() {
            attached
        } else if i < words.len() && words[i].starts_with(|c: char| c.is_ascii_alphabetic()) {
            i += 1;
            words[i - 1]
        } else {
            unit.unwrap_or("second")
        };
        let (m, d, us) = match unit_word.trim_end_matches(',') {
            "microsecond" | "microseconds" | "us" | "usec" | "usecs" => (0.0, 0.0, n),
            "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" => (0.0, 0.0, n * 1e3),
            "second" | "seconds" | "s" | "sec" | "secs" => (0.0, 0.0, n * 1e6),
            "minute" | "minutes" | "m" | "min" | "mins" => (0.0, 0.0, n * 60e6),
            "hour" | "hours" | "h" | "hr" | "hrs" => (0.0, 0.0, n * 3600e6),
            "day" | "days" | "d" => (0.0, n, 0.0),
            "week" | "weeks" | "w" => (0.0, n * 7.0, 0.0),
            "month" | "months" | "mon" | "mons" => (n, 0.0, 0.0),
            "year" | "years" | "y" | "yr" | "yrs" => (n * 12.0, 0.0, 0.0),
            "decade" | "decades" => (n * 120.0, 0.0, 0.0),
            "century" | "centuries" => (n * 1200.0, 0.0, 0.0),
            "millennium" | "millennia" | "millenniums" => (n * 12000.0, 0.0, 0.0),
            _ => return Err(invalid()),
        };
        months += m;
        days += d;
        micros += us;
    }
    // Fractions spill down: months to days (30 each), days to microseconds.
    let whole_months = months.trunc();
    days += (months - whole_months) * 30.0;
    let whole_days = days.trunc();
    micros += (days - whole_days) * MICROS_PER_DAY as f64;
    let out_of_range = || Error::new(SqlState::DatetimeFieldOverflow, "interval out of range");
    let months = i32_of(whole_months).ok_or_else(out_of_range)?;
    let days = i32_of(whole_days).ok_or_else(out_of_range)?;
    let micros = micros.round();
    if micros.abs() >= 9.2e18 {
        return Err(out_of_range());
    }
    let interval = Interval { months, days, micros: micros as i64 };
    Ok(if ago { interval.negated() } else { interval })
}

fn i32_of(f: f64) -> Option<i32> {
    (f.abs() <= i32::MAX as f64).then_some(f as i32)
}

/// Microseconds of `[-]hh:mm[:ss[.ffffff]]`.
fn clock_micros(word: &str) -> Option<f64> {
    let (sign, rest) = match word.strip_prefix('-') {
        Some(r) => (-1.0, r),
        None => (1.0, word.strip_prefix('+').unwrap_or(word)),
    };
    let mut parts = rest.splitn(3, ':');
    let h = parse_number(parts.next()?)? as f64;
    let m = parse_number(parts.next()?)? as f64;
    let (s, us) = match parts.next() {
        None => (0, 0),
        Some(sec) => parse_seconds(sec)?,
    };
    if m > 59.0 || s > 59 {
        return None;
    }
    Some(sign * ((h * 3600.0 + m * 60.0 + s as f64) * 1e6 + us as f64))
}

/// `micros` rounded to `precision` fractional digits of a second (0 – 6), as PostgreSQL
/// rounds a value for `timestamp(p)` and `CURRENT_TIMESTAMP(p)`: halves away from its own
/// epoch, 2000-01-01 (so a half second in 1985 rounds down, one in 2024 up).
pub fn round_to_precision(micros: i64, precision: u32) -> i64 {
    if precision >= 6 {
        return micros;
    }
    let scale = 10i128.pow(6 - precision);
    let epoch = PG_EPOCH_DAYS as i128 * MICROS_PER_DAY as i128;
    let since = micros as i128 - epoch;
    let rounded = (since.abs() + scale / 2) / scale * scale;
    let rounded = if since < 0 { -rounded } else { rounded };
    i64::try_from(rounded + epoch).unwrap_or(micros)
}

/// `micros` (a timestamp's microseconds since 1970) plus an interval: months first, keeping
/// the day of the month where the month has it (else its last day), then days, then time.
pub fn add_interval(micros: i64, iv: Interval) -> Result<i64> {
    let out_of_range = || Error::new(SqlState::DatetimeFieldOverflow, "timestamp out of range");
    let mut days = micros.div_euclid(MICROS_PER_DAY);
    let time = micros.rem_euclid(MICROS_PER_DAY);
    if iv.months != 0 {
        let (y, m, d) = civil_from_days(i32::try_from(days).map_err(|_| out_of_range())?);
        let total = y as i64 * 12 + (m as i64 - 1) + iv.months as i64;
        let year = i32::try_from(total.div_euclid(12)).map_err(|_| out_of_range())?;
        let month = total.rem_euclid(12) as u32 + 1;
        days = days_from_civil(year, month, d.min(days_in_month(year, month))) as i64;
    }
    let result = (days + iv.days as i64)
        .checked_mul(MICROS_PER_DAY)
        .and_then(|t| t.checked_add(time))
        .and_then(|t| t.checked_add(iv.micros))
        .ok_or_else(out_of_range)?;
    Ok(result)
}

/// Parts of a timestamp, for EXTRACT and date_part.
pub fn timestamp_field(micros: i64, field: &str) -> Option<f64> {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let rem = micros.rem_euclid(MICROS_PER_DAY);
    let (y, m, d) = civil_from_days(days as i32);
    Some(match field {
        "year" => y as f64,
        "month" => m as f64,
        "day" => d as f64,
        "hour" => (rem / 3_600_000_000) as f64,
        "minute" => (rem / 60_000_000 % 60) as f64,
        "second" => (rem % 60_000_000) as f64 / 1e6,
        "dow" => (days + 4).rem_euclid(7) as f64,
        "doy" => (days - days_from_civil(y, 1, 1) as i64 + 1) as f64,
        "quarter" => ((m - 1) / 3 + 1) as f64,
        "epoch" => micros as f64 / 1e6,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_rounds_halves_away_from_postgresqls_epoch() {
        let at = |text: &str| parse_timestamp(text).unwrap();
        // PostgreSQL 15: '2024-01-01 10:00:00.5'::timestamp(0) = 10:00:01, but
        // '1985-01-01 10:00:00.5'::timestamp(0) = 10:00:00 (before 2000, so "away" is down).
        assert_eq!(round_to_precision(at("2024-01-01 10:00:00.5"), 0), at("2024-01-01 10:00:01"));
        assert_eq!(round_to_precision(at("2024-01-01 10:00:00.499999"), 0), at("2024-01-01 10:00:00"));
        assert_eq!(round_to_precision(at("1985-01-01 10:00:00.5"), 0), at("1985-01-01 10:00:00"));
        assert_eq!(round_to_precision(at("1985-01-01 10:00:00.500001"), 0), at("1985-01-01 10:00:01"));
        assert_eq!(round_to_precision(at("1969-12-31 23:59:59.95"), 1), at("1969-12-31 23:59:59.9"));
        assert_eq!(round_to_precision(at("2024-01-01 10:00:00.56789"), 3), at("2024-01-01 10:00:00.568"));
        assert_eq!(round_to_precision(at("2024-01-01 10:00:00.56789"), 6), at("2024-01-01 10:00:00.56789"));
        assert_eq!(round_to_precision(at("2024-12-31 23:59:59.7"), 0), at("2025-01-01 00:00:00"));
        // The ends of the range do not overflow.
        assert_eq!(round_to_precision(i64::MAX, 0), i64::MAX);
        assert_eq!(round_to_precision(i64::MIN, 0), i64::MIN);
    }

    #[test]
    fn scaled_intervals_cascade_fractions_down_as_postgresql_does() {
        let iv = |months, days, micros| Interval { months, days, micros };
        let hour = 3_600 * MICROS_PER_SECOND;
        // PostgreSQL 15: '1 mon' * 1.5 = 1 mon 15 days; '1 mon 3 days 10:00' * 0.3 =
        // 9 days 24:36:00 (nothing cascades up); '1 day' / 7 = 03:25:42.857143;
        // '-1 mon 2 days' * -2.5 = 2 mons 10 days.
        assert_eq!(iv(1, 0, 0).scaled(1.5, false).unwrap(), iv(1, 15, 0));
        assert_eq!(iv(1, 3, 10 * hour).scaled(0.3, false).unwrap(), iv(0, 9, 24 * hour + 36 * 60 * MICROS_PER_SECOND));
        assert_eq!(iv(0, 1, 0).scaled(7.0, true).unwrap(), iv(0, 0, 12_342_857_143));
        assert_eq!(iv(-1, 2, 0).scaled(-2.5, false).unwrap(), iv(2, 10, 0));
        assert_eq!(iv(1, 0, 0).scaled(3.0, true).unwrap(), iv(0, 10, 0));
        assert_eq!(iv(0, 0, hour).scaled(0.0, true).unwrap_err().state.code(), "22012");
        assert_eq!(iv(0, 0, hour).scaled(1e300, false).unwrap_err().state.code(), "22008");
        assert_eq!(iv(1, 0, 0).scaled(f64::NAN, false).unwrap_err().state.code(), "22008");
    }

    fn ts(s: &str) -> String {
        let mut out = String::new();
        format_timestamp(parse_timestamp(s).unwrap(), &mut out);
        out
    }

    #[test]
    fn civil_round_trip() {
        for days in [-800_000, -1, 0, 1, 10_957, 19_000, 2_000_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(days_from_civil(2000, 1, 1), PG_EPOCH_DAYS);
    }

    #[test]
    fn dates_parse_and_format() {
        let mut out = String::new();
        format_date(parse_date("2024-02-29").unwrap(), &mut out);
        assert_eq!(out, "2024-02-29");
        assert_eq!(parse_date("2023-02-29").unwrap_err().state, SqlState::DatetimeFieldOverflow);
        assert_eq!(parse_date("yesterday").unwrap_err().state, SqlState::InvalidDatetimeFormat);
    }

    #[test]
    fn timestamps_parse_and_format() {
        assert_eq!(ts("2007-01-02 00:00:00.000000"), "2007-01-02 00:00:00");
        assert_eq!(ts("2026-11-21 23:33:57.062+00"), "2026-11-21 23:33:57.062");
        assert_eq!(ts("2026-11-21T23:33:57.5Z"), "2026-11-21 23:33:57.5");
        assert_eq!(ts("1969-12-31 23:59:59.999999"), "1969-12-31 23:59:59.999999");
        assert_eq!(ts("2024-01-01"), "2024-01-01 00:00:00");
        assert!(parse_timestamp("2024-01-01 25:00").is_err());
        assert!(parse_timestamp("nonsense").is_err());
    }

    fn tz(s: &str) -> String {
        let mut out = String::new();
        format_timestamptz(parse_timestamptz(s).unwrap(), &mut out);
        out
    }

    fn iv(s: &str) -> Interval {
        parse_interval(s, None).unwrap()
    }

    #[test]
    fn intervals_parse_as_postgresql_reads_them() {
        assert_eq!(iv("1 hour"), Interval { months: 0, days: 0, micros: 3_600_000_000 });
        assert_eq!(iv("7 days"), Interval { months: 0, days: 7, micros: 0 });
        assert_eq!(iv("1 year 2 mons 3 days 04:05:06.5"), Interval { months: 14, days: 3, micros: 14_706_500_000 });
        assert_eq!(iv("1.5 years"), Interval { months: 18, days: 0, micros: 0 });
        assert_eq!(iv("1.5 months"), Interval { months: 1, days: 15, micros: 0 });
        assert_eq!(iv("1.5 days"), Interval { months: 0, days: 1, micros: 43_200_000_000 });
        assert_eq!(iv("2 weeks"), Interval { months: 0, days: 14, micros: 0 });
        assert_eq!(iv("@ 30 minutes ago"), Interval { months: 0, days: 0, micros: -1_800_000_000 });
        assert_eq!(iv("-1 day +02:00"), Interval { months: 0, days: -1, micros: 7_200_000_000 });
        assert_eq!(iv("10min"), Interval { months: 0, days: 0, micros: 600_000_000 });
        assert_eq!(iv("90"), Interval { months: 0, days: 0, micros: 90_000_000 });
        assert_eq!(parse_interval("5", Some("minute")).unwrap(), Interval { months: 0, days: 0, micros: 300_000_000 });
        for bad in ["", "ago", "1 fortnight", "one day", "1:75", "nan days", "1e10 years"] {
            assert!(parse_interval(bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn intervals_add_months_then_days_then_time() {
        let at = |s: &str| parse_timestamp(s).unwrap();
        let plus = |t: &str, i: &str| {
            let mut out = String::new();
            format_timestamp(add_interval(at(t), iv(i)).unwrap(), &mut out);
            out
        };
        assert_eq!(plus("2024-01-31 10:00", "1 month"), "2024-02-29 10:00:00");
        assert_eq!(plus("2023-01-31 10:00", "1 month"), "2023-02-28 10:00:00");
        assert_eq!(plus("2024-03-31 00:00", "-1 mon"), "2024-02-29 00:00:00");
        assert_eq!(plus("2024-02-28 23:30", "1 day 01:00"), "2024-03-01 00:30:00");
        assert_eq!(plus("2024-01-01 00:00", "-1 second"), "2023-12-31 23:59:59");
        assert_eq!(add_interval(at("2024-01-01"), iv("300000 years")).unwrap_err().state, SqlState::DatetimeFieldOverflow);
    }

    #[test]
    fn timestamps_with_time_zone_parse_to_utc() {
        assert_eq!(tz("2024-03-01 10:00:00+02"), "2024-03-01 08:00:00+00");
        assert_eq!(tz("2024-03-01 10:00:00 -05:30"), "2024-03-01 15:30:00+00");
        assert_eq!(tz("2024-03-01T23:30:00.25-0100"), "2024-03-02 00:30:00.25+00");
        assert_eq!(tz("2024-03-01 10:00Z"), "2024-03-01 10:00:00+00");
        assert_eq!(tz("2024-03-01 10:00:00 UTC"), "2024-03-01 10:00:00+00");
        assert_eq!(tz("2024-03-01"), "2024-03-01 00:00:00+00");
        let mut bc = String::new();
        format_timestamptz(-63_000_000_000_000_000, &mut bc);
        assert!(bc.ends_with("+00 BC"), "{bc}");
        assert_eq!(parse_timestamptz("2024-03-01 10:00 Mars/Olympus").unwrap_err().state, SqlState::InvalidParameterValue);
        assert_eq!(parse_timestamptz("2024-03-01 10:00+99").unwrap_err().state, SqlState::InvalidTimeZoneDisplacement);
        assert_eq!(parse_timestamptz("2024-03-01 10:00+1:2:3:4").unwrap_err().state, SqlState::InvalidTimeZoneDisplacement);
        assert_eq!(parse_timestamptz("2024-03-01 10:00+1x").unwrap_err().state, SqlState::InvalidDatetimeFormat);
        // Not digits, whatever their length in bytes: an error, never a slice inside a character.
        assert_eq!(parse_timestamptz("2024-03-01 10:00+a€").unwrap_err().state, SqlState::InvalidDatetimeFormat);
        assert_eq!(parse_timestamptz("2024-03-01 10:00-€€").unwrap_err().state, SqlState::InvalidDatetimeFormat);
        // A timestamp without time zone ignores the zone, as PostgreSQL does.
        assert_eq!(parse_timestamp("2024-03-01 10:00:00+02").unwrap(), parse_timestamptz("2024-03-01 10:00:00+00").unwrap());
    }
}
