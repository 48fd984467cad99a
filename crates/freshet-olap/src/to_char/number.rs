//! Number templates (`999.99`, `FM9,999.00`, `S0000`, `999MI`, `99th`, `RN`), as PostgreSQL's
//! "Template Patterns for Numeric Formatting" table describes them, in the C locale
//! (decimal point `.`, group separator `,`, currency symbol a blank):
//! - `9` a digit, blank where insignificant; `0` a digit, zero where insignificant (from the
//!   first `0` of the integer part on); `.` or `D` the decimal point; `,` or `G` a group
//!   separator (a blank before the first digit);
//! - signs: without a sign pattern a `-` (or a blank) is written before the first digit; `S`
//!   writes `+` or `-` next to the number (before it, or after it when it follows the
//!   digits); `MI` a `-` (or a blank), `PL` a `+` (or a blank), `SG` either, where they stand;
//!   `PR` puts a negative value in angle brackets;
//! - `FM` drops the padding blanks and the insignificant trailing zeros of `9` positions;
//!   `TH`/`th` the ordinal suffix of a non-negative integer; `L` the currency symbol; `RN`
//!   Roman numerals (1 to 3999); `"text"` is copied, as is any other character.
//!
//! The value is rounded (half away from zero) to the template's decimal digits; one with more
//! integer digits than the template has becomes `#`s. `V`, `EEEE` and `B` are refused (0A000).

use freshet_core::{Error, Result, SqlState};

use super::datetime::ordinal_suffix;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Nine,
    Zero,
    Point,
    Group,
    Minus,
    Plus,
    Sign,
    Ordinal { upper: bool },
    Currency,
    Roman,
    Text(String),
}

/// Where `S` writes the sign: before the first digit or after the last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Anchored {
    None,
    Before,
    After,
}

/// A compiled number template.
#[derive(Clone, Debug)]
pub(super) struct NumTemplate {
    nodes: Vec<Node>,
    /// Digit positions before and after the decimal point.
    pre: usize,
    post: usize,
    /// Whether the integer part has a `0`, and the position (from 0) of its first one.
    zero: bool,
    zero_start: usize,
    /// The number of digit positions up to and including the last `0`.
    zero_end: usize,
    decimal: bool,
    fill: bool,
    anchored: Anchored,
    /// Digit positions before `S` when it precedes the decimal point.
    digits_before_s: usize,
    minus: bool,
    plus: bool,
    brackets: bool,
    roman: bool,
}

fn syntax(message: &str) -> Error {
    Error::new(SqlState::SyntaxError, message.to_string())
}

/// The keyword at the start of `s` (in upper case, or in lower case as PostgreSQL also
/// accepts), and its length.
fn keyword(s: &str) -> Option<&'static str> {
    const KEYWORDS: [&str; 19] = ["EEEE", "FM", "MI", "PL", "PR", "RN", "SG", "TH", "S", "D", "G", "L", "V", "B", "9", "0", ".", ",", "th"];
    KEYWORDS.into_iter().find(|k| {
        s.len() >= k.len() && s.is_char_boundary(k.len()) && {
            let head = &s[..k.len()];
            // `th` and `TH` differ in output; the others match in either case.
            head == *k || (*k != "TH" && head.bytes().zip(k.bytes()).all(|(h, k)| h == k.to_ascii_lowercase()))
        }
    })
}

pub(super) fn compile(template: &str) -> Result<NumTemplate> {
    let mut t = NumTemplate {
        nodes: Vec::new(),
        pre: 0,
        post: 0,
        zero: false,
        zero_start: 0,
        zero_end: 0,
        decimal: false,
        fill: false,
        anchored: Anchored::None,
        digits_before_s: 0,
        minus: false,
        plus: false,
        brackets: false,
        roman: false,
    };
    let mut rest = template;
    while let Some(c) = rest.chars().next() {
        if c == '"' {
            let (text, after) = super::quoted(rest);
            t.nodes.push(Node::Text(text));
            rest = after;
            continue;
        }
        if c == '\\' && rest[1..].starts_with('"') {
            t.nodes.push(Node::Text("\"".into()));
            rest = &rest[2..];
            continue;
        }
        let Some(k) = keyword(rest) else {
            t.nodes.push(Node::Text(c.to_string()));
            rest = &rest[c.len_utf8()..];
            continue;
        };
        rest = &rest[k.len()..];
        let s_with = |t: &NumTemplate| t.anchored != Anchored::None;
        match k {
            "9" | "0" => {
                if t.brackets {
                    return Err(syntax(&format!("\"{k}\" must be ahead of \"PR\"")));
                }
                if k == "0" && !t.zero && !t.decimal {
                    t.zero = true;
                    t.zero_start = t.pre;
                }
                if t.decimal {
                    t.post += 1;
                } else {
                    t.pre += 1;
                }
                if k == "0" {
                    t.zero_end = t.pre + t.post;
                }
                t.nodes.push(if k == "9" { Node::Nine } else { Node::Zero });
            }
            "." | "D" => {
                if t.decimal {
                    return Err(syntax("multiple decimal points"));
                }
                t.decimal = true;
                t.nodes.push(Node::Point);
            }
            "," | "G" => t.nodes.push(Node::Group),
            "FM" => t.fill = true,
            "S" => {
                if s_with(&t) {
                    return Err(syntax("cannot use \"S\" twice"));
                }
                if t.plus || t.minus || t.brackets {
                    return Err(syntax("cannot use \"S\" and \"PL\"/\"MI\"/\"SG\"/\"PR\" together"));
                }
                if t.decimal {
                    t.anchored = Anchored::After;
                } else {
                    t.anchored = Anchored::Before;
                    t.digits_before_s = t.pre;
                }
            }
            "MI" | "PL" | "SG" => {
                if s_with(&t) {
                    return Err(syntax(&format!("cannot use \"S\" and \"{k}\" together")));
                }
                t.minus |= k != "PL";
                t.plus |= k != "MI";
                t.nodes.push(match k {
                    "MI" => Node::Minus,
                    "PL" => Node::Plus,
                    _ => Node::Sign,
                });
            }
            "PR" => {
                if s_with(&t) || t.plus || t.minus {
                    return Err(syntax("cannot use \"PR\" and \"S\"/\"PL\"/\"MI\"/\"SG\" together"));
                }
                t.brackets = true;
            }
            "TH" | "th" => t.nodes.push(Node::Ordinal { upper: k == "TH" }),
            "L" => t.nodes.push(Node::Currency),
            "RN" => {
                t.roman = true;
                t.nodes.push(Node::Roman);
            }
            other => {
                let pattern = if other == "EEEE" { "EEEE" } else { other };
                return Err(Error::new(SqlState::FeatureNotSupported, format!("to_char pattern \"{pattern}\" is not supported")));
            }
        }
    }
    // `S` before every digit position of the integer part stands for the sign after them.
    if t.anchored == Anchored::Before && t.pre == t.digits_before_s {
        t.anchored = Anchored::After;
    }
    Ok(t)
}

/// A value to format: its digits without a sign, rounded to the template's decimal places
/// (`12.50`, `0.10`, `13`), and whether it is negative.
pub(super) struct Digits {
    pub(super) text: String,
    pub(super) negative: bool,
}

impl NumTemplate {
    pub(super) fn post(&self) -> usize {
        self.post
    }

    /// Writes `value` as the template says, with `post` decimal places in place of the
    /// template's (fewer for a floating-point value with more digits than it holds).
    pub(super) fn format(&self, value: &Digits, post: usize, out: &mut String) {
        if self.roman {
            return self.format_roman(value, out);
        }
        let integer_digits = value.text.find('.').unwrap_or(value.text.len());
        let (number, blanks) = if integer_digits > self.pre {
            let mut hashes = "#".repeat(self.pre + post + 1);
            hashes.replace_range(self.pre..self.pre + 1, ".");
            (hashes, 0)
        } else {
            (value.text.clone(), self.pre - integer_digits)
        };
        Writer::new(self, number.as_bytes(), post, blanks, if value.negative { '-' } else { '+' }).run(out)
    }

    fn format_roman(&self, value: &Digits, out: &mut String) {
        let n = if value.negative { None } else { value.text.split('.').next().and_then(|i| i.parse::<u32>().ok()) };
        let numeral = match n {
            Some(n @ 1..=3999) => roman(n),
            _ => "#".repeat(15),
        };
        for node in &self.nodes {
            match node {
                Node::Roman if self.fill => out.push_str(&numeral),
                Node::Roman => out.push_str(&format!("{numeral:>15}")),
                Node::Text(s) => out.push_str(s),
                _ => {}
            }
        }
    }
}

fn roman(mut n: u32) -> String {
    const PARTS: [(u32, &str); 13] =
        [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")];
    let mut s = String::new();
    for (value, text) in PARTS {
        while n >= value {
            s.push_str(text);
            n -= value;
        }
    }
    s
}

/// One value's walk over a template: the number's digits are consumed left to right by the
/// digit positions, after `blanks` positions that fall before its first digit.
struct Writer<'a> {
    t: &'a NumTemplate,
    number: &'a [u8],
    post: usize,
    /// The next character of `number`.
    at: usize,
    /// The digit position being written (from 0).
    position: usize,
    blanks: usize,
    sign: char,
    sign_written: bool,
    /// Whether a digit has been written (a group separator shows from then on).
    in_number: bool,
    /// With FM and a decimal point: the last character of `number` to write (the last
    /// non-zero decimal digit, or the decimal point, kept at least to the last `0`).
    last: Option<usize>,
    /// Digit positions less one (-1 for a template without any), plus one when the sign is
    /// still to be written and no position is blank.
    digit_count: isize,
    brackets: bool,
    anchored: Anchored,
}

impl<'a> Writer<'a> {
    fn new(t: &'a NumTemplate, number: &'a [u8], post: usize, blanks: usize, sign: char) -> Writer<'a> {
        let lone_plus = t.plus && !t.minus;
        let mut w = Writer {
            t,
            number,
            post,
            at: 0,
            position: 0,
            blanks,
            sign,
            sign_written: false,
            in_number: false,
            last: None,
            digit_count: post as isize + t.pre as isize - 1,
            brackets: t.brackets,
            anchored: t.anchored,
        };
        if t.plus || t.minus {
            // `MI`/`SG` write the sign where they stand; `PL` alone leaves the minus (or
            // a blank) before the digits.
            w.sign_written = !lone_plus;
        } else {
            if sign != '-' && t.fill {
                w.brackets = false;
            }
            w.sign_written = sign == '+' && t.fill && t.anchored == Anchored::None;
        }
        if t.fill && t.decimal
            && let Some(point) = number.iter().position(|&c| c == b'.')
        {
            let mut last = number.iter().rposition(|&c| c != b'0').filter(|&i| i > point).unwrap_or(point);
            if t.zero_end > blanks {
                last = last.max((number.len() - 1).min(t.zero_end - blanks));
            }
            w.last = Some(last);
        }
        if !w.sign_written && blanks == 0 {
            w.digit_count += 1;
        }
        w
    }

    /// A `0` integer part before the decimal point, written as a blank (`0.5` as ` .5`).
    fn blank_before_point(&self) -> bool {
        !self.t.zero && self.at == 0 && self.number.first() == Some(&b'0') && self.post != 0
    }

    fn last_is_point(&self) -> bool {
        self.last.is_some_and(|l| self.number.get(l) == Some(&b'.'))
    }

    fn run(mut self, out: &mut String) {
        for node in &self.t.nodes {
            match node {
                Node::Nine | Node::Zero | Node::Point => self.digit(node, out),
                Node::Group if self.in_number => out.push(','),
                Node::Group if !self.t.fill => out.push(' '),
                Node::Group => {}
                Node::Currency => out.push(' '),
                Node::Ordinal { upper } => {
                    if self.number.first() == Some(&b'#') || self.sign == '-' || self.t.decimal {
                        continue;
                    }
                    let n: i64 = std::str::from_utf8(self.number).ok().and_then(|s| s.get(s.len().saturating_sub(2)..)).and_then(|s| s.parse().ok()).unwrap_or(0);
                    let suffix = ordinal_suffix(n);
                    out.push_str(&if *upper { suffix.to_uppercase() } else { suffix.to_string() });
                }
                Node::Minus if self.sign == '-' => out.push('-'),
                Node::Plus if self.sign == '+' => out.push('+'),
                Node::Minus | Node::Plus if !self.t.fill => out.push(' '),
                Node::Minus | Node::Plus => {}
                Node::Sign => out.push(self.sign),
                Node::Roman => {}
                Node::Text(s) => out.push_str(s),
            }
        }
    }

    /// A digit position or the decimal point.
    fn digit(&mut self, node: &Node, out: &mut String) {
        let fill = self.t.fill;
        let zero_here = self.t.zero && self.t.zero_start == self.position;
        if !self.sign_written && (self.position >= self.blanks || zero_here) && (!self.blank_before_point() || self.last_is_point()) {
            if self.anchored != Anchored::None {
                if self.anchored == Anchored::Before {
                    out.push(self.sign);
                    self.sign_written = true;
                }
            } else if self.brackets {
                out.push(if self.sign == '+' { ' ' } else { '<' });
                self.sign_written = true;
            } else {
                if self.sign == '-' || !fill {
                    out.push(if self.sign == '-' { '-' } else { ' ' });
                }
                self.sign_written = true;
            }
        }
        if self.position < self.blanks && (self.t.zero_start > self.position || !self.t.zero) {
            if !fill {
                out.push(' ');
            }
        } else if self.t.zero && self.position < self.blanks && self.t.zero_start <= self.position {
            out.push('0');
            self.in_number = true;
        } else {
            match self.number.get(self.at) {
                Some(b'.') => out.push('.'),
                Some(&c) => {
                    if self.last.is_some_and(|l| self.at > l) && *node != Node::Zero {
                        // An insignificant trailing zero under FM.
                    } else if self.blank_before_point() {
                        if !fill {
                            out.push(' ');
                        } else if self.last_is_point() {
                            out.push('0');
                        }
                    } else {
                        out.push(c as char);
                        self.in_number = true;
                    }
                }
                None => {}
            }
            if self.at < self.number.len() {
                self.at += 1;
            }
        }
        let mut end = self.digit_count + isize::from(self.blanks > 0) + isize::from(self.t.decimal);
        if self.last == Some(self.at) {
            end = self.position as isize;
        }
        if self.position as isize + 1 == end {
            if self.sign_written && self.brackets {
                out.push(if self.sign == '+' { ' ' } else { '>' });
            } else if self.anchored == Anchored::After {
                out.push(self.sign);
            }
        }
        self.position += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to_char(value: &str, template: &str) -> String {
        let t = compile(template).unwrap();
        let digits = super::super::decimal_digits(value.trim_start_matches('-'), value.starts_with('-'), t.post());
        let mut out = String::new();
        t.format(&digits, t.post(), &mut out);
        out
    }

    /// Expected strings as PostgreSQL 15 prints them for a numeric value.
    #[test]
    fn templates_print_as_postgresql_prints_them() {
        let cases = [
            ("0", "999", "   0"),
            ("0", "999.99", "    .00"),
            ("0", "FM999.99", "0."),
            ("0", "S999.99", "   +.00"),
            ("0", "SG999", "+  0"),
            ("0.1", "FM9.9", ".1"),
            ("-0.1", "990.00", "  -0.10"),
            ("-0.1", "999.99PR", "   <.10>"),
            ("0.5", "999", "   1"),
            ("12.5", "999.99", "  12.50"),
            ("-12.5", "999.99", " -12.50"),
            ("-12.5", "0000", "-0013"),
            ("-12.5", "FM9.9", "-#.#"),
            ("12.5", "999S", " 13+"),
            ("-12.5", "999.99MI", " 12.50-"),
            ("-12.5", "999.99PR", " <12.50>"),
            ("485", "PL999", "+ 485"),
            ("-485", "PL999", " -485"),
            ("1234.5", "9,999.99", " 1,234.50"),
            ("-1234.5", "9G999D9", "-1,234.5"),
            ("12345", "999", " ###"),
            ("12345", "9,999.99", " #,###.##"),
            ("99.995", "FM999.99", "100."),
            ("-0.004", "FM9999.9999", "-.004"),
            ("100", "FM999.009", "100.00"),
            ("7", "00.00", " 07.00"),
            ("12", "99th", " 12th"),
            ("12", "FM99TH", "12TH"),
            ("1234", "9\"x\"999", " 1x234"),
            ("1", "L999", "    1"),
            ("12", "RN", "            XII"),
            ("1994", "FMRN", "MCMXCIV"),
        ];
        for (value, template, expected) in cases {
            assert_eq!(to_char(value, template), expected, "to_char({value}, '{template}')");
        }
    }

    #[test]
    fn malformed_templates_are_refused() {
        assert_eq!(compile("99.99.9").unwrap_err().message, "multiple decimal points");
        assert_eq!(compile("S9S").unwrap_err().message, "cannot use \"S\" twice");
        assert_eq!(compile("PR999").unwrap_err().message, "\"9\" must be ahead of \"PR\"");
        assert_eq!(compile("9.9EEEE").unwrap_err().state, SqlState::FeatureNotSupported);
    }
}
