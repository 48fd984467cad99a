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
