//! Tokens of PL/pgSQL text (and of the CREATE PROCEDURE statement around it).
//!
//! The lexer only has to find statement boundaries, keywords and nesting: every embedded SQL
//! statement and expression is handed to sqlparser as the source text between two tokens, so a
//! token keeps its byte span and the lexer never needs to understand SQL itself.

use crate::error::{Error, Result};

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// An unquoted word, folded to lower case.
    Word(String),
    /// A double-quoted identifier, as written.
    Quoted(String),
    /// A string constant (single-quoted, or E'…'), unescaped.
    Str(String),
    /// A dollar-quoted string's contents.
    Dollar(String),
    Number,
    /// Punctuation and operators: `;` `,` `(` `)` `[` `]` `:=` `..` `=` and the rest.
    Op(String),
}

#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    pub start: usize,
    pub end: usize,
}

impl Token {
    pub fn is_word(&self, w: &str) -> bool {
        matches!(&self.tok, Tok::Word(x) if x == w)
    }

    pub fn is_op(&self, o: &str) -> bool {
        matches!(&self.tok, Tok::Op(x) if x == o)
    }
}

pub fn tokenize(src: &str) -> Result<Vec<Token>> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'-' && b.get(i + 1) == Some(&b'-') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i = src[i + 2..].find("*/").map(|p| i + 2 + p + 2).ok_or_else(|| Error::syntax("unterminated /* comment"))?;
            continue;
        }
        let tok = if c == b'\'' || ((c == b'e' || c == b'E') && b.get(i + 1) == Some(&b'\'')) {
            let escapes = c != b'\'';
            i += if escapes { 2 } else { 1 };
            let mut text = String::new();
            loop {
                let Some(&ch) = b.get(i) else { return Err(Error::syntax("unterminated quoted string")) };
                if ch == b'\'' {
                    if b.get(i + 1) == Some(&b'\'') {
                        text.push('\'');
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                if escapes && ch == b'\\' && i + 1 < b.len() {
                    let next = b[i + 1] as char;
                    text.push(match next {
                        'n' => '\n',
                        't' => '\t',
                        other => other,
                    });
                    i += 2;
                    continue;
                }
                let len = utf8_len(ch);
                text.push_str(&src[i..i + len]);
                i += len;
            }
            Tok::Str(text)
        } else if c == b'"' {
            let close = src[i + 1..].find('"').ok_or_else(|| Error::syntax("unterminated quoted identifier"))?;
            let name = src[i + 1..i + 1 + close].to_string();
            i += close + 2;
            Tok::Quoted(name)
        } else if c == b'$' && let Some(tag_len) = dollar_tag(&b[i..]) {
            let tag = &src[i..i + tag_len];
            let body_start = i + tag_len;
            let close = src[body_start..].find(tag).ok_or_else(|| Error::syntax("unterminated dollar-quoted string"))?;
            i = body_start + close + tag_len;
            Tok::Dollar(src[body_start..body_start + close].to_string())
        } else if c == b'$' {
            // A parameter reference ($1).
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            Tok::Op(src[start..i].to_string())
        } else if c.is_ascii_digit() {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            // A fraction, but not the `..` of a FOR range.
            if i < b.len() && b[i] == b'.' && b.get(i + 1) != Some(&b'.') {
                i += 1;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') && b.get(i + 1).is_some_and(|d| d.is_ascii_digit() || *d == b'-' || *d == b'+') {
                i += 2;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            Tok::Number
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$' || b[i] >= 0x80) {
                i += 1;
            }
            Tok::Word(src[start..i].to_lowercase())
        } else {
            const TWO: [&str; 10] = [":=", "..", "<>", "!=", "<=", ">=", "::", "||", "<<", ">>"];
            let two = src.get(i..i + 2).filter(|t| TWO.contains(t));
            let op = two.unwrap_or(&src[i..i + 1]).to_string();
            i += op.len();
            Tok::Op(op)
        };
        out.push(Token { tok, start, end: i });
    }
    Ok(out)
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// The length of a dollar-quote tag (`$$` or `$name$`) at the start of `b`, if there is one.
fn dollar_tag(b: &[u8]) -> Option<usize> {
    let mut j = 1;
    while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
        if j == 1 && b[j].is_ascii_digit() {
            return None;
        }
        j += 1;
    }
    (b.get(j) == Some(&b'$')).then_some(j + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_strings_and_dollar_quotes() {
        let toks = tokenize("FOR i IN 1..10 LOOP x := 'it''s' || $$a;b$$; -- c\n $1").unwrap();
        let kinds: Vec<Tok> = toks.into_iter().map(|t| t.tok).collect();
        assert_eq!(kinds[3], Tok::Number);
        assert_eq!(kinds[4], Tok::Op("..".into()));
        assert_eq!(kinds[5], Tok::Number);
        assert_eq!(kinds[8], Tok::Op(":=".into()));
        assert_eq!(kinds[9], Tok::Str("it's".into()));
        assert_eq!(kinds[11], Tok::Dollar("a;b".into()));
        assert_eq!(kinds[13], Tok::Op("$1".into()));
    }
}
