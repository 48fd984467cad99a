//! Date and time templates (`YYYY-MM-DD`, `HH24:MI:SS`, `FMDay`, `Mon DDth`, …), compiled
//! into [`Piece`]s. What is supported, as PostgreSQL's "Template Patterns for Date/Time
//! Formatting" table lists it:
//! - hours `HH`, `HH12`, `HH24`; `MI`, `SS`, `MS`, `US`, `SSSS`/`SSSSS` (seconds past
//!   midnight); `AM`/`PM`/`A.M.`/`P.M.` in either case;
//! - years `Y,YYY`, `YYYY`, `YYY`, `YY`, `Y`, ISO years `IYYY` … `I`; `BC`/`AD`/`B.C.`/`A.D.`;
//!   `CC` (century), `Q`, `J` (Julian day);
//! - months `MM`, `MONTH`/`Month`/`month`, `MON`/`Mon`/`mon`, `RM`/`rm` (Roman numerals);
//! - days `DD`, `DDD`, `IDDD`, `D` (Sunday = 1), `ID` (Monday = 1), `DAY`/`Day`/`day`,
//!   `DY`/`Dy`/`dy`; weeks `W`, `WW`, `IW`;
//! - `TZ`/`tz` (empty: the value has no time zone), `OF`, `TZH`, `TZM` (zero offset);
//! - modifiers `FM` (no padding), `TH`/`th` (ordinal suffix), `FX` and `TM` (accepted, no
//!   effect in English output); `"text"` is copied, `\"` is a quote; any other character is
//!   copied.
//!
//! Numeric fields are zero-padded to their width and names blank-padded to nine characters
//! unless `FM` precedes them, as PostgreSQL pads them.

use chrono::{DateTime, Datelike, NaiveDateTime, Timelike};

/// A letter case of a name or marker: `MONTH`, `Month`, `month`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Case {
    Upper,
    Capital,
    Lower,
}

impl Case {
    fn apply(self, s: &str) -> String {
        match self {
            Case::Upper => s.to_uppercase(),
            Case::Lower => s.to_lowercase(),
            Case::Capital => s.to_string(),
        }
    }
}

/// One field of a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Field {
    Hour24,
    Hour12,
    Minute,
    Second,
    Milli,
    Micro,
    SecondsOfDay,
    Meridiem { dots: bool, case: Case },
    Era { dots: bool, case: Case },
    YearComma,
    /// The year's last `n` digits (4: the whole year).
    Year(u8),
    IsoYear(u8),
    Century,
    Quarter,
    Julian,
    Month,
    MonthName(Case),
    MonthAbbrev(Case),
    Roman(Case),
    DayOfMonth,
    DayOfYear,
    IsoDayOfYear,
    DayOfWeek,
    IsoDayOfWeek,
    DayName(Case),
    DayAbbrev(Case),
    WeekOfMonth,
    WeekOfYear,
    IsoWeek,
    ZoneName,
    Offset,
    OffsetHours,
    OffsetMinutes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Piece {
    Text(String),
    Field { field: Field, fill: bool, ordinal: Option<Case> },
}

/// Patterns in the order they are tried at each position: a longer one before any pattern it
/// starts with. Numeric fields match in upper or lower case; names and markers take their
/// case from the pattern.
const PATTERNS: &[(&str, Field)] = {
    use Case::*;
    use Field::*;
    &[
        ("A.D.", Era { dots: true, case: Upper }),
        ("a.d.", Era { dots: true, case: Lower }),
        ("AD", Era { dots: false, case: Upper }),
        ("ad", Era { dots: false, case: Lower }),
        ("A.M.", Meridiem { dots: true, case: Upper }),
        ("a.m.", Meridiem { dots: true, case: Lower }),
        ("AM", Meridiem { dots: false, case: Upper }),
        ("am", Meridiem { dots: false, case: Lower }),
        ("B.C.", Era { dots: true, case: Upper }),
        ("b.c.", Era { dots: true, case: Lower }),
        ("BC", Era { dots: false, case: Upper }),
        ("bc", Era { dots: false, case: Lower }),
        ("CC", Century),
        ("DAY", DayName(Upper)),
        ("Day", DayName(Capital)),
        ("day", DayName(Lower)),
        ("DDD", DayOfYear),
        ("DD", DayOfMonth),
        ("DY", DayAbbrev(Upper)),
        ("Dy", DayAbbrev(Capital)),
        ("dy", DayAbbrev(Lower)),
        ("D", DayOfWeek),
        ("HH24", Hour24),
        ("HH12", Hour12),
        ("HH", Hour12),
        ("IDDD", IsoDayOfYear),
        ("ID", IsoDayOfWeek),
        ("IW", IsoWeek),
        ("IYYY", IsoYear(4)),
        ("IYY", IsoYear(3)),
        ("IY", IsoYear(2)),
        ("I", IsoYear(1)),
        ("J", Julian),
        ("MI", Minute),
        ("MM", Month),
        ("MONTH", MonthName(Upper)),
        ("Month", MonthName(Capital)),
        ("month", MonthName(Lower)),
        ("MON", MonthAbbrev(Upper)),
        ("Mon", MonthAbbrev(Capital)),
        ("mon", MonthAbbrev(Lower)),
        ("MS", Milli),
        ("OF", Offset),
        ("P.M.", Meridiem { dots: true, case: Upper }),
        ("p.m.", Meridiem { dots: true, case: Lower }),
        ("PM", Meridiem { dots: false, case: Upper }),
        ("pm", Meridiem { dots: false, case: Lower }),
        ("Q", Quarter),
        ("RM", Roman(Upper)),
        ("rm", Roman(Lower)),
        ("SSSSS", SecondsOfDay),
        ("SSSS", SecondsOfDay),
        ("SS", Second),
        ("TZH", OffsetHours),
        ("TZM", OffsetMinutes),
        ("TZ", ZoneName),
        ("tz", ZoneName),
        ("US", Micro),
        ("WW", WeekOfYear),
        ("W", WeekOfMonth),
        ("Y,YYY", YearComma),
        ("YYYY", Year(4)),
        ("YYY", Year(3)),
        ("YY", Year(2)),
        ("Y", Year(1)),
    ]
};

/// Whether a field's pattern also matches in lower case (a numeric field), or only as
/// written (a name or marker, whose case is the output's).
fn any_case(field: Field) -> bool {
    !matches!(
        field,
        Field::Meridiem { .. }
            | Field::Era { .. }
            | Field::MonthName(_)
            | Field::MonthAbbrev(_)
            | Field::DayName(_)
            | Field::DayAbbrev(_)
            | Field::Roman(_)
            | Field::ZoneName
    )
}

/// Whether `s` starts with `prefix`, or (`lower_too`) with its lower-case form: PostgreSQL
/// knows `mi` and `MI`, not `Mi`.
fn starts_with(s: &str, prefix: &str, lower_too: bool) -> bool {
    s.len() >= prefix.len() && s.is_char_boundary(prefix.len()) && {
        let head = &s[..prefix.len()];
        head == prefix || lower_too && head.bytes().zip(prefix.bytes()).all(|(h, p)| h == p.to_ascii_lowercase())
    }
}

/// The pieces of a template.
pub(super) fn compile(template: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut rest = template;
    let mut fill = false;
    while let Some(c) = rest.chars().next() {
        // Modifiers before a field.
        if starts_with(rest, "FM", true) {
            fill = true;
            rest = &rest[2..];
            continue;
        }
        if starts_with(rest, "FX", true) || starts_with(rest, "TM", true) {
            rest = &rest[2..];
            continue;
        }
        if c == '"' {
            let (quoted, after) = super::quoted(rest);
            text.push_str(&quoted);
            rest = after;
            continue;
        }
        if c == '\\' && rest[1..].starts_with('"') {
            text.push('"');
            rest = &rest[2..];
            continue;
        }
        let found = PATTERNS.iter().find(|(p, field)| starts_with(rest, p, any_case(*field)));
        let Some(&(pattern, field)) = found else {
            text.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        };
        rest = &rest[pattern.len()..];
        let ordinal = if rest.starts_with("TH") {
            Some(Case::Upper)
        } else if rest.starts_with("th") {
            Some(Case::Lower)
        } else {
            None
        };
        if ordinal.is_some() {
            rest = &rest[2..];
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(&mut text)));
        }
        pieces.push(Piece::Field { field, fill: std::mem::take(&mut fill), ordinal });
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    pieces
}

pub(super) const MONTHS: [&str; 12] = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
pub(super) const DAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const ROMAN: [&str; 12] = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"];
/// The Julian day number of 1970-01-01.
const JULIAN_EPOCH: i64 = 2_440_588;

/// PostgreSQL's ordinal suffix of `n`.
pub(super) fn ordinal_suffix(n: i64) -> &'static str {
    match (n % 100, n % 10) {
        (11..=13, _) => "th",
        (_, 1) => "st",
        (_, 2) => "nd",
        (_, 3) => "rd",
        _ => "th",
    }
}

/// Writes `t` as `pieces` say.
pub(super) fn format(pieces: &[Piece], t: &NaiveDateTime, out: &mut String) {
    use std::fmt::Write;
    for piece in pieces {
        let (field, fill, ordinal) = match piece {
            Piece::Text(s) => {
                out.push_str(s);
                continue;
            }
            Piece::Field { field, fill, ordinal } => (*field, *fill, *ordinal),
        };
        // Years of the era: 1 BC is year 0 of the proleptic calendar.
        let year = t.year();
        let era_year = if year <= 0 { 1 - year } else { year } as i64;
        let (iso_year, iso_week) = (t.iso_week().year() as i64, t.iso_week().week() as i64);
        let number = |n: i64, width: usize, out: &mut String| {
            let _ = if fill { write!(out, "{n}") } else { write!(out, "{n:0width$}") };
            if let Some(case) = ordinal {
                out.push_str(&case.apply(ordinal_suffix(n)));
            }
        };
        let name = |s: &str, case: Case, width: usize, out: &mut String| {
            let s = case.apply(s);
            let _ = if fill { write!(out, "{s}") } else { write!(out, "{s:<width$}") };
        };
        let last_digits = |y: i64, n: u32| if n >= 4 { y } else { y % 10i64.pow(n) };
        match field {
            Field::Hour24 => number(t.hour() as i64, 2, out),
            Field::Hour12 => number(t.hour12().1 as i64, 2, out),
            Field::Minute => number(t.minute() as i64, 2, out),
            Field::Second => number(t.second() as i64, 2, out),
            Field::Milli => number((t.nanosecond() / 1_000_000) as i64, 3, out),
            Field::Micro => number((t.nanosecond() / 1_000) as i64, 6, out),
            Field::SecondsOfDay => number(t.num_seconds_from_midnight() as i64, 1, out),
            Field::Meridiem { dots, case } => {
                let pm = t.hour12().0;
                let s = match (pm, dots) {
                    (false, false) => "AM",
                    (true, false) => "PM",
                    (false, true) => "A.M.",
                    (true, true) => "P.M.",
                };
                out.push_str(&case.apply(s));
            }
            Field::Era { dots, case } => {
                let s = match (year <= 0, dots) {
                    (false, false) => "AD",
                    (true, false) => "BC",
                    (false, true) => "A.D.",
                    (true, true) => "B.C.",
                };
                out.push_str(&case.apply(s));
            }
            Field::YearComma => {
                let _ = write!(out, "{},{:03}", era_year / 1000, era_year % 1000);
                if let Some(case) = ordinal {
                    out.push_str(&case.apply(ordinal_suffix(era_year)));
                }
            }
            Field::Year(n) => number(last_digits(era_year, n as u32), n as usize, out),
            Field::IsoYear(n) => number(last_digits(iso_year, n as u32), n as usize, out),
            Field::Century => {
                let c = if year > 0 { (year as i64 - 1) / 100 + 1 } else { -((era_year - 1) / 100 + 1) };
                number(c, 2, out)
            }
            Field::Quarter => number((t.month0() / 3 + 1) as i64, 1, out),
            Field::Julian => number(t.date().signed_duration_since(DateTime::UNIX_EPOCH.date_naive()).num_days() + JULIAN_EPOCH, 1, out),
            Field::Month => number(t.month() as i64, 2, out),
            Field::MonthName(case) => name(MONTHS[t.month0() as usize], case, 9, out),
            Field::MonthAbbrev(case) => name(&MONTHS[t.month0() as usize][..3], case, 3, out),
            Field::Roman(case) => name(ROMAN[t.month0() as usize], case, 4, out),
            Field::DayOfMonth => number(t.day() as i64, 2, out),
            Field::DayOfYear => number(t.ordinal() as i64, 3, out),
            Field::IsoDayOfYear => {
                let day = (iso_week - 1) * 7 + t.weekday().number_from_monday() as i64;
                number(day, 3, out)
            }
            Field::DayOfWeek => number(t.weekday().number_from_sunday() as i64, 1, out),
            Field::IsoDayOfWeek => number(t.weekday().number_from_monday() as i64, 1, out),
            Field::DayName(case) => name(DAYS[t.weekday().num_days_from_sunday() as usize], case, 9, out),
            Field::DayAbbrev(case) => name(&DAYS[t.weekday().num_days_from_sunday() as usize][..3], case, 3, out),
            Field::WeekOfMonth => number((t.day0() / 7 + 1) as i64, 1, out),
            Field::WeekOfYear => number((t.ordinal0() / 7 + 1) as i64, 2, out),
            Field::IsoWeek => number(iso_week, 2, out),
            Field::ZoneName => {}
            Field::Offset | Field::OffsetHours => out.push_str("+00"),
            Field::OffsetMinutes => out.push_str("00"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f").unwrap()
    }

    fn to_char(t: &str, template: &str) -> String {
        let mut out = String::new();
        format(&compile(template), &at(t), &mut out);
        out
    }

    /// Expected strings as PostgreSQL 15 prints them.
    #[test]
    fn templates_print_as_postgresql_prints_them() {
        let t = "2024-03-05 14:07:09.123456";
        assert_eq!(to_char(t, "YYYY-MM-DD HH24:MI:SS"), "2024-03-05 14:07:09");
        assert_eq!(to_char(t, "yyyy-mm-dd hh24:mi:ss.us"), "2024-03-05 14:07:09.123456");
        assert_eq!(to_char(t, "HH12:MI AM"), "02:07 PM");
        assert_eq!(to_char(t, "HH:MI:SS.MS a.m."), "02:07:09.123 p.m.");
        assert_eq!(to_char(t, "Day, DD Month YYYY"), "Tuesday  , 05 March     2024");
        assert_eq!(to_char(t, "FMDay, FMDD FMMonth YYYY"), "Tuesday, 5 March 2024");
        assert_eq!(to_char(t, "DY Dy dy MON Mon mon"), "TUE Tue tue MAR Mar mar");
        assert_eq!(to_char(t, "DDth \"of\" FMMonth"), "05th of March");
        assert_eq!(to_char(t, "FMDDTH"), "5TH");
        assert_eq!(to_char(t, "Y,YYY YYY YY Y"), "2,024 024 24 4");
        assert_eq!(to_char(t, "Q CC J DDD D ID W WW IW IYYY"), "1 21 2460375 065 3 2 1 10 10 2024");
        assert_eq!(to_char(t, "RM rm FMRM"), "III  iii  III");
        assert_eq!(to_char(t, "SSSS"), "50829");
        assert_eq!(to_char(t, "AD BC"), "AD AD");
        assert_eq!(to_char(t, "\\\"YYYY\\\""), "\"2024\"");
        assert_eq!(to_char(t, "TZ"), "");
        assert_eq!(to_char("2024-03-01 00:00:00", "FMDDth FMDDth"), "1st 1st");
        assert_eq!(to_char("2024-03-22 00:00:00", "FMDDth"), "22nd");
        assert_eq!(to_char("2024-03-13 00:00:00", "FMDDth"), "13th");
        assert_eq!(to_char("2024-03-13 00:00:00", "HH12 AM"), "12 AM");
        // ISO year and week of 2021-01-03, a Sunday of the last ISO week of 2020.
        assert_eq!(to_char("2021-01-03 00:00:00", "IYYY-IW-ID IDDD"), "2020-53-7 371");
    }
}
