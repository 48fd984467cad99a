//! COPY's options in PostgreSQL's grammar.
//!
//! The parser handles `COPY … FROM STDIN` / `TO STDOUT` up to the target, but not all of
//! PostgreSQL's option spellings (`WITH (FREEZE on)`, `HEADER false`, the pre-9.0 `CSV HEADER`
//! forms). So a COPY is parsed in two parts: the statement up to STDIN/STDOUT by the parser,
//! the options after it here.

use sqlparser::ast::{CopyLegacyCsvOption, CopyLegacyOption, CopyOption, Ident, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer, Word};

use crate::error::{Error, Result};

/// Parses a lone COPY statement to or from the client, or returns `None` for anything else.
pub fn parse_copy(sql: &str) -> Option<Result<Statement>> {
    let trimmed = sql.trim_start();
    if trimmed.len() < 4 || !trimmed[..4].eq_ignore_ascii_case("copy") {
        return None;
    }
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize_with_location().ok()?;
    let tokens: Vec<TokenWithSpan> = tokens.into_iter().filter(|t| !matches!(t.token, Token::Whitespace(_))).collect();
    let mut depth = 0i32;
    let target = tokens.iter().position(|t| {
        match &t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Word(w) if depth == 0 && (w.value.eq_ignore_ascii_case("stdin") || w.value.eq_ignore_ascii_case("stdout")) => return true,
            _ => {}
        }
        false
    })?;
    let end = offset(sql, tokens[target].span.end.line, tokens[target].span.end.column)?;
    let mut rest: Vec<&Token> = tokens[target + 1..].iter().map(|t| &t.token).collect();
    while rest.last() == Some(&&Token::SemiColon) {
        rest.pop();
    }
    Some(build(&sql[..end], &rest))
}

fn build(head: &str, rest: &[&Token]) -> Result<Statement> {
    let mut statements = super::parse::parse_plain(head)?;
    if statements.len() != 1 {
        return Err(Error::syntax("syntax error in COPY"));
    }
    let Some(Statement::Copy { options, legacy_options, .. }) = statements.first_mut() else {
        return Err(Error::syntax("syntax error in COPY"));
    };
    let (o, l) = parse_options(rest)?;
    *options = o;
    *legacy_options = l;
    Ok(statements.remove(0))
}

/// The byte offset of a 1-based line and character column.
fn offset(sql: &str, line: u64, column: u64) -> Option<usize> {
    let mut line_start = 0;
    for _ in 1..line {
        line_start += sql[line_start..].find('\n')? + 1;
    }
    let col = column.saturating_sub(1) as usize;
    Some(sql[line_start..].char_indices().nth(col).map_or(sql.len(), |(i, _)| line_start + i))
}

fn word(t: &Token) -> Option<String> {
    match t {
        Token::Word(Word { value, .. }) => Some(value.to_lowercase()),
        _ => None,
    }
}

fn string(t: Option<&&Token>) -> Result<String> {
    match t {
        Some(Token::SingleQuotedString(s)) | Some(Token::EscapedStringLiteral(s)) => Ok(s.clone()),
        other => Err(Error::syntax(format!("COPY option value must be a quoted string, found {other:?}"))),
    }
}

fn single_char(t: Option<&&Token>, what: &str) -> Result<char> {
    let s = string(t)?;
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        // One byte, as PostgreSQL requires: the record splitter compares bytes with it.
        (Some(c), None) if c.is_ascii() => Ok(c),
        _ => Err(Error::new(crate::error::SqlState::FeatureNotSupported, format!("COPY {what} must be a single one-byte character"))),
    }
}

/// A boolean option value: absent, or one of true/false/on/off/1/0.
fn boolean(t: Option<&&Token>) -> Result<(bool, usize)> {
    let text = match t {
        None | Some(Token::Comma) | Some(Token::RParen) => return Ok((true, 0)),
        Some(Token::Number(n, _)) => n.clone(),
        Some(Token::SingleQuotedString(s)) => s.to_lowercase(),
        Some(other) => word(other).unwrap_or_default(),
    };
    match text.as_str() {
        "true" | "on" | "1" => Ok((true, 1)),
        "false" | "off" | "0" => Ok((false, 1)),
        other => Err(Error::syntax(format!("COPY option needs a Boolean value, not \"{other}\""))),
    }
}

fn parse_options(tokens: &[&Token]) -> Result<(Vec<CopyOption>, Vec<CopyLegacyOption>)> {
    let mut i = 0;
    if tokens.first().and_then(|t| word(t)).as_deref() == Some("with") {
        i = 1;
    }
    if tokens.get(i) == Some(&&Token::LParen) {
        return parse_list(&tokens[i + 1..]).map(|o| (o, Vec::new()));
    }
    parse_legacy(&tokens[i..]).map(|l| (Vec::new(), l))
}

fn parse_list(tokens: &[&Token]) -> Result<Vec<CopyOption>> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        let Some(name) = tokens.get(i).and_then(|t| word(t)) else {
            return Err(Error::syntax("syntax error in COPY options"));
        };
        i += 1;
        match name.as_str() {
            "format" => {
                let f = tokens.get(i).and_then(|t| word(t).or_else(|| string(Some(t)).ok())).unwrap_or_default();
                out.push(CopyOption::Format(Ident::new(f)));
                i += 1;
            }
            "freeze" | "header" => {
                let (value, used) = boolean(tokens.get(i))?;
                out.push(if name == "freeze" { CopyOption::Freeze(value) } else { CopyOption::Header(value) });
                i += used;
            }
            "delimiter" => {
                out.push(CopyOption::Delimiter(single_char(tokens.get(i), "delimiter")?));
                i += 1;
            }
            "null" => {
                out.push(CopyOption::Null(string(tokens.get(i))?));
                i += 1;
            }
            "quote" => {
                out.push(CopyOption::Quote(single_char(tokens.get(i), "quote")?));
                i += 1;
            }
            "escape" => {
                out.push(CopyOption::Escape(single_char(tokens.get(i), "escape")?));
                i += 1;
            }
            "encoding" => {
                out.push(CopyOption::Encoding(string(tokens.get(i))?));
                i += 1;
            }
            other => return Err(Error::unsupported(format!("COPY option \"{other}\""))),
        }
        match tokens.get(i) {
            Some(Token::Comma) => i += 1,
            Some(Token::RParen) if i + 1 == tokens.len() => return Ok(out),
            _ => return Err(Error::syntax("syntax error in COPY options")),
        }
    }
}

fn parse_legacy(tokens: &[&Token]) -> Result<Vec<CopyLegacyOption>> {
    let mut out = Vec::new();
    let mut csv: Option<Vec<CopyLegacyCsvOption>> = None;
    let mut i = 0;
    let skip_as = |i: &mut usize| {
        if tokens.get(*i).and_then(|t| word(t)).as_deref() == Some("as") {
            *i += 1;
        }
    };
    while i < tokens.len() {
        let name = word(tokens[i]).ok_or_else(|| Error::syntax("syntax error in COPY options"))?;
        i += 1;
        match name.as_str() {
            "binary" => return Err(Error::unsupported("COPY BINARY")),
            "delimiter" => {
                skip_as(&mut i);
                out.push(CopyLegacyOption::Delimiter(single_char(tokens.get(i), "delimiter")?));
                i += 1;
            }
            "null" => {
                skip_as(&mut i);
                out.push(CopyLegacyOption::Null(string(tokens.get(i))?));
                i += 1;
            }
            "csv" => csv = Some(Vec::new()),
            "header" => csv.get_or_insert_with(Vec::new).push(CopyLegacyCsvOption::Header),
            "quote" => {
                skip_as(&mut i);
                csv.get_or_insert_with(Vec::new).push(CopyLegacyCsvOption::Quote(single_char(tokens.get(i), "quote")?));
                i += 1;
            }
            "escape" => {
                skip_as(&mut i);
                csv.get_or_insert_with(Vec::new).push(CopyLegacyCsvOption::Escape(single_char(tokens.get(i), "escape")?));
                i += 1;
            }
            other => return Err(Error::unsupported(format!("COPY option \"{other}\""))),
        }
    }
    if let Some(c) = csv {
        out.push(CopyLegacyOption::Csv(c));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(sql: &str) -> (Vec<CopyOption>, Vec<CopyLegacyOption>) {
        match parse_copy(sql).unwrap().unwrap() {
            Statement::Copy { options, legacy_options, .. } => (options, legacy_options),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn postgres_option_spellings() {
        assert_eq!(options("copy pgbench_accounts from stdin with (freeze on)").0, vec![CopyOption::Freeze(true)]);
        assert_eq!(
            options("COPY t (a, b) FROM STDIN WITH (FORMAT csv, HEADER false, DELIMITER ';')").0,
            vec![CopyOption::Format(Ident::new("csv")), CopyOption::Header(false), CopyOption::Delimiter(';')]
        );
        assert_eq!(options("COPY (SELECT 1) TO STDOUT;").0, vec![]);
        assert_eq!(
            options("copy t from stdin csv header delimiter as '|'").1,
            vec![CopyLegacyOption::Delimiter('|'), CopyLegacyOption::Csv(vec![CopyLegacyCsvOption::Header])]
        );
        assert!(parse_copy("SELECT 1").is_none());
        assert!(parse_copy("copy t from stdin with (frobnicate)").unwrap().is_err());
    }

    #[test]
    fn delimiter_quote_and_escape_are_one_byte() {
        for sql in ["COPY t FROM STDIN WITH (DELIMITER 'é')", "COPY t FROM STDIN WITH (FORMAT csv, QUOTE '«')", "copy t from stdin csv escape 'ß'", "COPY t FROM STDIN WITH (DELIMITER ';;')"] {
            let e = parse_copy(sql).unwrap().unwrap_err();
            assert_eq!(e.state, crate::error::SqlState::FeatureNotSupported, "{sql}");
            assert!(e.message.contains("single one-byte character"), "{sql}: {}", e.message);
        }
        assert_eq!(options("COPY t FROM STDIN WITH (DELIMITER '|')").0, vec![CopyOption::Delimiter('|')]);
    }
}
