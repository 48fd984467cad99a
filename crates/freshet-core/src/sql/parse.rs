//! Parsing SQL text with sqlparser's PostgreSQL dialect, with PostgreSQL-style syntax errors.

use sqlparser::ast::Statement;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::{Parser, ParserError};

use crate::error::{Error, Result};

/// Parses one or more `;`-separated statements.
pub fn parse(sql: &str) -> Result<Vec<Statement>> {
    if let Some(stmt) = postgres_only(sql) {
        return Ok(vec![stmt]);
    }
    if let Some(copy) = super::copy_options::parse_copy(sql) {
        return copy.map(|s| vec![s]);
    }
    let lower = sql.to_ascii_lowercase();
    if (lower.contains("sequence") || lower.contains("identity"))
        && let Some(reordered) = canonical_sequence_options(sql)
    {
        return parse_plain(&reordered);
    }
    if (lower.contains("procedure") || lower.contains("function"))
        && let Some(pieces) = super::plpgsql::parser::split_if_routines(sql)
    {
        let mut out = Vec::new();
        for (text, routine) in pieces {
            match routine {
                Some(create) => out.push(routine_statement(&text, create)),
                None => out.extend(parse(&text)?),
            }
        }
        return Ok(out);
    }
    parse_plain(sql)
}

/// The pragma name that carries CREATE/DROP PROCEDURE|FUNCTION text (sqlparser does not
/// parse PostgreSQL's form of them; Freshet's own parser does, in `plpgsql`).
pub const CREATE_ROUTINE_PRAGMA: &str = "freshet_create_routine";
pub const DROP_ROUTINE_PRAGMA: &str = "freshet_drop_routine";

fn routine_statement(text: &str, create: bool) -> Statement {
    let name = if create { CREATE_ROUTINE_PRAGMA } else { DROP_ROUTINE_PRAGMA };
    Statement::Pragma {
        name: vec![sqlparser::ast::Ident::new(name)].into(),
        value: Some(sqlparser::ast::Value::SingleQuotedString(text.to_string()).with_empty_span()),
        is_eq: true,
    }
}

/// The statement with the options of CREATE SEQUENCE and of identity columns in the order
/// the parser expects them (INCREMENT, MINVALUE, MAXVALUE, START, CACHE, CYCLE, OWNED BY);
/// PostgreSQL takes them in any order. `None` when nothing moved.
fn canonical_sequence_options(sql: &str) -> Option<String> {
    use sqlparser::keywords::Keyword;
    use sqlparser::tokenizer::{Token, Tokenizer};
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let keyword = |t: &Token| match t {
        Token::Word(w) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    };
    let next_solid = |from: usize| (from..tokens.len()).find(|&j| !matches!(tokens[j], Token::Whitespace(_)));
    let mut out: Vec<String> = Vec::with_capacity(tokens.len());
    let mut changed = false;
    let mut i = 0;
    while i < tokens.len() {
        out.push(tokens[i].to_string());
        // Where a list of options starts, and the token that ends it.
        let region = match keyword(&tokens[i]) {
            Some(Keyword::IDENTITY) => next_solid(i + 1).filter(|&j| tokens[j] == Token::LParen).map(|j| (j + 1, true)),
            Some(Keyword::SEQUENCE) if out.iter().rev().filter(|t| !t.trim().is_empty()).nth(1).is_some_and(|t| t.eq_ignore_ascii_case("create") || t.eq_ignore_ascii_case("temp") || t.eq_ignore_ascii_case("temporary")) => {
                // Past `[IF NOT EXISTS] name[.name] [AS type]`.
                let mut j = next_solid(i + 1)?;
                if keyword(&tokens[j]) == Some(Keyword::IF) {
                    j = next_solid(next_solid(next_solid(j + 1)? + 1)? + 1)?;
                }
                j += 1;
                while let Some(k) = next_solid(j).filter(|&k| tokens[k] == Token::Period) {
                    j = next_solid(k + 1)? + 1;
                }
                if let Some(k) = next_solid(j).filter(|&k| keyword(&tokens[k]) == Some(Keyword::AS)) {
                    j = next_solid(k + 1)? + 1;
                }
                Some((j, false))
            }
            _ => None,
        };
        let Some((start, in_parens)) = region else {
            i += 1;
            continue;
        };
        for t in &tokens[i + 1..start] {
            out.push(t.to_string());
        }
        let end = (start..tokens.len()).find(|&j| if in_parens { tokens[j] == Token::RParen } else { tokens[j] == Token::SemiColon }).unwrap_or(tokens.len());
        // Clauses, each from its leading keyword (NO joins the keyword after it).
        let mut clauses: Vec<(u8, String)> = Vec::new();
        let mut after_no = false;
        for t in &tokens[start..end] {
            let rank = match keyword(t) {
                _ if after_no => None,
                Some(Keyword::INCREMENT) => Some(0),
                Some(Keyword::MINVALUE) => Some(1),
                Some(Keyword::MAXVALUE) => Some(2),
                Some(Keyword::START) => Some(3),
                Some(Keyword::CACHE) => Some(4),
                Some(Keyword::CYCLE) => Some(5),
                Some(Keyword::OWNED) => Some(6),
                Some(Keyword::NO) => Some(7),
                _ => None,
            };
            if !matches!(t, Token::Whitespace(_)) {
                after_no = keyword(t) == Some(Keyword::NO);
            }
            match (rank, clauses.last_mut()) {
                (Some(r), _) => clauses.push((r, t.to_string())),
                (None, Some(last)) => {
                    if last.0 == 7 && !matches!(t, Token::Whitespace(_)) {
                        last.0 = match keyword(t) {
                            Some(Keyword::MINVALUE) => 1,
                            Some(Keyword::MAXVALUE) => 2,
                            _ => 5,
                        };
                    }
                    last.1.push_str(&t.to_string());
                }
                (None, None) => out.push(t.to_string()),
            }
        }
        if clauses.windows(2).any(|w| w[0].0 > w[1].0) {
            changed = true;
        }
        clauses.sort_by_key(|c| c.0);
        for (_, text) in clauses {
            out.push(format!(" {} ", text.trim()));
        }
        i = end;
    }
    changed.then(|| out.concat())
}

/// Parses with the parser alone.
pub(crate) fn parse_plain(sql: &str) -> Result<Vec<Statement>> {
    Parser::new(&PostgreSqlDialect {})
        .with_recursion_limit(200)
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_statements())
        .map_err(|e| syntax_error(sql, e))
}

/// PostgreSQL statements the parser lacks, written on their own: `ABORT [WORK | TRANSACTION]`
/// (ROLLBACK's other name), the VACUUM forms the parser does not know (`VACUUM ANALYZE t`),
/// which Freshet accepts and ignores anyway, and `CHECKPOINT` (carried as a pragma named
/// `checkpoint`).
fn postgres_only(sql: &str) -> Option<Statement> {
    let words: Vec<String> = sql.trim().trim_end_matches(';').split_whitespace().map(str::to_lowercase).collect();
    match words.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["abort"] | ["abort", "work" | "transaction"] => Some(Statement::Rollback { chain: false, savepoint: None }),
        ["vacuum", ..] if words.len() > 1 => parse_plain("VACUUM").ok()?.pop(),
        ["checkpoint"] => Some(Statement::Pragma {
            name: vec![sqlparser::ast::Ident::new("checkpoint")].into(),
            value: None,
            is_eq: false,
        }),
        _ => None,
    }
}

/// Converts a parser error into 42601 with the 1-based character position PostgreSQL reports.
pub(crate) fn syntax_error(sql: &str, e: ParserError) -> Error {
    let text = match &e {
        ParserError::TokenizerError(s) | ParserError::ParserError(s) => s.clone(),
        ParserError::RecursionLimitExceeded => {
            return Error::new(crate::error::SqlState::ProgramLimitExceeded, "statement is too deeply nested")
        }
    };
    let (body, location) = match text.rfind(" at Line: ") {
        Some(i) => (&text[..i], Some(&text[i + " at Line: ".len()..])),
        None => (text.as_str(), None),
    };
    let position = location.and_then(|loc| {
        let (line, col) = loc.split_once(", Column: ")?;
        let (line, col): (usize, usize) = (line.trim().parse().ok()?, col.trim().parse().ok()?);
        let before: usize = sql.split('\n').take(line.saturating_sub(1)).map(|l| l.chars().count() + 1).sum();
        Some((before + col) as u32)
    });
    let message = match body.rsplit_once("found: ") {
        Some((_, "EOF")) => "syntax error at end of input".to_string(),
        Some((_, token)) => format!("syntax error at or near \"{token}\""),
        None => format!("syntax error: {body}"),
    };
    let mut err = Error::syntax(message).with_detail(body.to_string());
    if let Some(p) = position {
        err = err.with_position(p);
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SqlState;

    #[test]
    fn sequence_options_are_taken_in_any_order() {
        let reordered = canonical_sequence_options("CREATE SEQUENCE IF NOT EXISTS public.s AS integer START 3 NO CYCLE INCREMENT BY -2 NO MINVALUE").unwrap();
        assert_eq!(parse_plain(&reordered).unwrap().len(), 1, "{reordered}");
        let identity = canonical_sequence_options("CREATE TABLE t (id int GENERATED ALWAYS AS IDENTITY (START WITH 10 INCREMENT BY 5), v text)").unwrap();
        assert_eq!(parse_plain(&identity).unwrap().len(), 1, "{identity}");
        assert!(canonical_sequence_options("CREATE SEQUENCE s INCREMENT 2 START 5").is_none(), "already in order: unchanged");
        assert!(parse("CREATE SEQUENCE s CACHE 5 MAXVALUE 9").is_ok());
    }

    #[test]
    fn syntax_errors_carry_postgres_message_and_position() {
        let e = parse("SELEC 1").unwrap_err();
        assert_eq!(e.state, SqlState::SyntaxError);
        assert_eq!(e.message, "syntax error at or near \"SELEC\"");
        assert_eq!(e.position, Some(1));
        let e = parse("SELECT * FROM").unwrap_err();
        assert_eq!(e.message, "syntax error at end of input");
        let e = parse("SELECT 1;\nSELECT * FROM t WHERE").unwrap_err();
        assert_eq!(e.state, SqlState::SyntaxError);
        assert!(parse("SELECT 1; SELECT 2").unwrap().len() == 2);
    }
}
