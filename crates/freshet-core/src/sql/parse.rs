//! Parsing SQL text with sqlparser's PostgreSQL dialect, with PostgreSQL-style syntax errors.

use sqlparser::ast::Statement;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

use crate::error::{Error, Result, SqlState};

/// Parses one or more `;`-separated statements.
pub fn parse(sql: &str) -> Result<Vec<Statement>> {
    if let Some(stmt) = postgres_only(sql) {
        return Ok(vec![stmt]);
    }
    if let Some(copy) = super::copy_options::parse_copy(sql) {
        return copy.map(|s| vec![s]);
    }
    let lower = sql.to_ascii_lowercase();
    if lower.trim_start().starts_with("alter") && lower.contains("sequence") {
        if let Some(stmt) = alter_sequence_statement(sql) {
            return Ok(vec![stmt]);
        }
        if let Some(stmt) = identity_with_sequence_name(sql) {
            return Ok(vec![stmt]);
        }
    }
    if lower.contains("overriding")
        && let Some(stmt) = insert_overriding(sql)
    {
        return Ok(vec![stmt]);
    }
    if lower.trim_start().starts_with("explain")
        && lower.contains("overriding")
        && let Some(stmt) = explain_insert_overriding(sql)
    {
        return stmt.map(|s| vec![s]);
    }
    if (lower.contains("sequence") || lower.contains("identity"))
        && let Some(reordered) = canonical_sequence_options(sql)
    {
        return parse_plain(&reordered);
    }
    // A DO block starts a statement: the text's first word, or one after a `;` (any word
    // containing "do", such as `double`, need not send the text through the splitter).
    let may_do = lower.trim_start().starts_with("do") || (lower.contains(';') && lower.contains("do"));
    // FETCH and MOVE are parsed here (`postgres_only`), one statement at a time.
    let may_fetch = lower.contains(';') && (lower.contains("fetch") || lower.contains("move"));
    let pieces = if lower.contains("procedure") || lower.contains("function") || may_do {
        super::plpgsql::parser::split_if_routines(sql)
    } else {
        None
    };
    if let Some(pieces) = pieces.or_else(|| may_fetch.then(|| super::plpgsql::parser::split_statements(sql)).flatten().filter(|p| p.len() > 1)) {
        use super::plpgsql::parser::RoutineStatement;
        let mut out = Vec::new();
        for (text, routine) in pieces {
            match routine {
                Some(RoutineStatement::Create) => out.push(routine_statement(&text, true)),
                Some(RoutineStatement::Drop) => out.push(routine_statement(&text, false)),
                Some(RoutineStatement::Alter) => out.push(pragma(ALTER_ROUTINE_PRAGMA, text)),
                Some(RoutineStatement::Do) => out.push(pragma(DO_PRAGMA, text)),
                None => out.extend(parse(&text)?),
            }
        }
        return Ok(out);
    }
    if lower.contains("variadic")
        && let Some(text) = without_variadic(sql)
    {
        return parse_plain(&text);
    }
    parse_plain(sql)
}

/// Built-in functions that take a VARIADIC array of their own: `concat(VARIADIC a)` joins
/// the elements, which the call without the keyword would not.
const VARIADIC_BUILTINS: &[&str] = &["concat", "concat_ws", "format", "greatest", "least", "num_nulls", "num_nonnulls", "json_build_array", "json_build_object", "jsonb_build_array", "jsonb_build_object"];

/// The text without the keyword VARIADIC in front of a call's argument (`f(VARIADIC arr)`,
/// `f(1, VARIADIC arr)`), which the parser does not take: a stored function's VARIADIC
/// parameter takes an array as it is written, so `f(VARIADIC arr)` is `f(arr)`. `None` if
/// there is none, or one in a call of a built-in function ([`VARIADIC_BUILTINS`]).
fn without_variadic(sql: &str) -> Option<String> {
    use sqlparser::tokenizer::Tokenizer;
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize_with_location().ok()?;
    let solid: Vec<usize> = (0..tokens.len()).filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_))).collect();
    // Per open parenthesis, the word in front of it (the function a call names).
    let mut calls: Vec<Option<String>> = Vec::new();
    let mut cuts = Vec::new();
    for (k, &i) in solid.iter().enumerate() {
        let before = k.checked_sub(1).map(|p| &tokens[solid[p]].token);
        match &tokens[i].token {
            Token::LParen => calls.push(match before {
                Some(Token::Word(w)) => Some(w.value.to_ascii_lowercase()),
                _ => None,
            }),
            Token::RParen => {
                calls.pop();
            }
            t if is_word(t, "variadic") && matches!(before, Some(Token::LParen | Token::Comma)) => {
                let function = calls.last().cloned().flatten()?;
                if VARIADIC_BUILTINS.contains(&function.as_str()) {
                    return None;
                }
                let next = solid.get(k + 1).map(|&j| tokens[j].span.start)?;
                cuts.push((byte_offset(sql, tokens[i].span.start)?, byte_offset(sql, next)?));
            }
            _ => {}
        }
    }
    if cuts.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(sql.len());
    let mut at = 0;
    for (from, to) in cuts {
        out.push_str(&sql[at..from]);
        at = to;
    }
    out.push_str(&sql[at..]);
    Some(out)
}

/// The pragma names that carry `ALTER SEQUENCE` text (sqlparser does not parse it; see
/// [`alter_sequence`]) and an `ALTER TABLE … ADD GENERATED … AS IDENTITY (SEQUENCE NAME n …)`
/// (value: the name, a NUL, then the statement without `SEQUENCE NAME n`, which sqlparser
/// does not parse either).
pub const ALTER_SEQUENCE_PRAGMA: &str = "freshet_alter_sequence";
pub const ADD_IDENTITY_PRAGMA: &str = "freshet_add_identity";
/// The pragma that carries `INSERT … OVERRIDING {SYSTEM | USER} VALUE …` (sqlparser does not
/// parse the clause): `SYSTEM` or `USER`, a NUL, then the statement without the clause.
pub const INSERT_OVERRIDING_PRAGMA: &str = "freshet_insert_overriding";
/// The pragma that carries `SET CONSTRAINTS {ALL | name, …} {IMMEDIATE | DEFERRED}`: the text
/// after `SET CONSTRAINTS`.
pub const SET_CONSTRAINTS_PRAGMA: &str = "freshet_set_constraints";
/// The pragma that carries a `DO` block's text (see `plpgsql::parser::do_as_procedure`).
pub const DO_PRAGMA: &str = "freshet_do";

/// The parameter a placeholder `$n` stands for, 0-based (`$1` is 0); `None` for any other
/// expression.
pub fn placeholder_index(e: &sqlparser::ast::Expr) -> Option<usize> {
    let sqlparser::ast::Expr::Value(v) = e else { return None };
    let sqlparser::ast::Value::Placeholder(p) = &v.value else { return None };
    p.strip_prefix('$')?.parse::<usize>().ok()?.checked_sub(1)
}

fn pragma(name: &str, text: String) -> Statement {
    Statement::Pragma {
        name: vec![sqlparser::ast::Ident::new(name)].into(),
        value: Some(sqlparser::ast::Value::SingleQuotedString(text).with_empty_span()),
        is_eq: true,
    }
}

/// The words of a statement (whitespace and a final `;` dropped), or `None` if it does not
/// tokenize.
fn solid_tokens(sql: &str) -> Option<Vec<sqlparser::tokenizer::Token>> {
    use sqlparser::tokenizer::{Token, Tokenizer};
    let mut tokens: Vec<Token> = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?.into_iter().filter(|t| !matches!(t, Token::Whitespace(_))).collect();
    while tokens.last() == Some(&Token::SemiColon) {
        tokens.pop();
    }
    Some(tokens)
}

fn is_word(t: &sqlparser::tokenizer::Token, word: &str) -> bool {
    matches!(t, sqlparser::tokenizer::Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

/// `ALTER SEQUENCE …` as a pragma carrying its text, for [`alter_sequence`].
fn alter_sequence_statement(sql: &str) -> Option<Statement> {
    let tokens = solid_tokens(sql)?;
    (tokens.len() >= 3 && is_word(&tokens[0], "alter") && is_word(&tokens[1], "sequence")).then(|| pragma(ALTER_SEQUENCE_PRAGMA, sql.to_string()))
}

/// `[WITH …] INSERT … OVERRIDING {SYSTEM | USER} VALUE …` as a pragma carrying which and the statement
/// without the clause (outside parentheses, where PostgreSQL's grammar has it: after the
/// column list, before VALUES or the query).
fn insert_overriding(sql: &str) -> Option<Statement> {
    use sqlparser::tokenizer::Tokenizer;
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize_with_location().ok()?;
    let solid: Vec<usize> = (0..tokens.len()).filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_))).collect();
    // The INSERT: the first word, or after a WITH clause (its queries are in parentheses).
    let insert = match solid.first() {
        Some(&i) if is_word(&tokens[i].token, "insert") => 0,
        Some(&i) if is_word(&tokens[i].token, "with") => first_outside_parentheses(&tokens, &solid, &["insert"])?,
        _ => return None,
    };
    let offset = |at| byte_offset(sql, at);
    let mut depth = 0i32;
    for (k, &i) in solid.iter().enumerate().skip(insert) {
        match &tokens[i].token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            // The rows' source has begun: the clause is not where it belongs, and the parser
            // says so.
            t if depth == 0 && ["values", "select", "with", "default", "table"].iter().any(|w| is_word(t, w)) => return None,
            t if depth == 0 && is_word(t, "overriding") => {
                let word = |n: usize| solid.get(k + n).map(|&j| &tokens[j].token);
                let which = match word(1)? {
                    w if is_word(w, "system") => "SYSTEM",
                    w if is_word(w, "user") => "USER",
                    _ => return None,
                };
                if !is_word(word(2)?, "value") {
                    return None;
                }
                // The text without the clause: up to OVERRIDING, then from the token after VALUE.
                let from = offset(tokens[i].span.start)?;
                let to = match tokens.get(solid[k + 2] + 1) {
                    Some(next) => offset(next.span.start)?,
                    None => sql.len(),
                };
                return Some(pragma(INSERT_OVERRIDING_PRAGMA, format!("{which}\0{}{}", &sql[..from], &sql[to..])));
            }
            _ => {}
        }
    }
    None
}

/// The position in `solid` of the first of `words` outside parentheses.
fn first_outside_parentheses(tokens: &[sqlparser::tokenizer::TokenWithSpan], solid: &[usize], words: &[&str]) -> Option<usize> {
    let mut depth = 0i32;
    solid.iter().position(|&i| {
        match &tokens[i].token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            t => return depth == 0 && words.iter().any(|w| is_word(t, w)),
        }
        false
    })
}

/// `EXPLAIN [ANALYZE] [(options)] INSERT … OVERRIDING {SYSTEM | USER} VALUE …`: the EXPLAIN
/// parsed with the clause left out (which checks its syntax), and the INSERT inside it
/// replaced by [`insert_overriding`]'s pragma. `None` when the explained statement is not such
/// an INSERT.
fn explain_insert_overriding(sql: &str) -> Option<Result<Statement>> {
    use sqlparser::tokenizer::Tokenizer;
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize_with_location().ok()?;
    // The INSERT, or the WITH clause in front of it: the first word `with` or `insert` outside
    // parentheses (EXPLAIN's options are inside).
    let solid: Vec<usize> = (0..tokens.len()).filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_))).collect();
    let at = tokens[solid[first_outside_parentheses(&tokens, &solid, &["insert", "with"])?]].span.start;
    let from = byte_offset(sql, at)?;
    let Statement::Pragma { value: Some(value), .. } = insert_overriding(&sql[from..])? else { return None };
    let sqlparser::ast::Value::SingleQuotedString(text) = &value.value else { return None };
    let (_, without) = text.split_once('\0')?;
    Some(parse_plain(&format!("{}{without}", &sql[..from])).and_then(|mut parsed| match (parsed.pop(), parsed.is_empty()) {
        (Some(Statement::Explain { describe_alias, analyze, verbose, query_plan, estimate, format, options, .. }), true) => {
            let statement = Box::new(pragma(INSERT_OVERRIDING_PRAGMA, text.clone()));
            Ok(Statement::Explain { describe_alias, analyze, verbose, query_plan, estimate, statement, format, options })
        }
        _ => Err(Error::syntax("OVERRIDING … VALUE belongs in INSERT, after the column list")),
    }))
}

/// The byte offset in `sql` of a token's start (locations count lines and characters from 1).
fn byte_offset(sql: &str, at: sqlparser::tokenizer::Location) -> Option<usize> {
    let line_start = if at.line <= 1 { 0 } else { sql.match_indices('\n').nth(at.line as usize - 2).map(|(i, _)| i + 1)? };
    let rest = &sql[line_start..];
    Some(line_start + rest.char_indices().nth((at.column as usize).checked_sub(1)?).map_or(rest.len(), |(i, _)| i))
}

/// What an `ALTER SEQUENCE` statement does.
#[derive(Clone, Debug, PartialEq)]
pub enum AlterSequence {
    /// OWNER TO: Freshet has no roles that own objects.
    Owner,
    /// OWNED BY table.column, or NONE.
    OwnedBy(Option<(String, String)>),
    /// RESTART [WITH n]: at n, or at the sequence's start.
    Restart(Option<i64>),
}

/// Parses `ALTER SEQUENCE [IF EXISTS] name action`: the sequence's name (schema dropped),
/// IF EXISTS, and the action. Other actions are 0A000.
pub fn alter_sequence(sql: &str) -> Result<(String, bool, AlterSequence)> {
    use sqlparser::tokenizer::Token;
    let tokens = solid_tokens(sql).ok_or_else(|| Error::syntax("syntax error in ALTER SEQUENCE"))?;
    let mut i = 2;
    let if_exists = tokens.len() > 4 && is_word(&tokens[2], "if") && is_word(&tokens[3], "exists");
    if if_exists {
        i = 4;
    }
    // A possibly qualified name: the last part names it.
    let name_at = |i: &mut usize| -> Result<Vec<String>> {
        let mut parts = Vec::new();
        loop {
            match tokens.get(*i) {
                Some(Token::Word(w)) => parts.push(if w.quote_style.is_some() { w.value.clone() } else { w.value.to_lowercase() }),
                _ => return Err(Error::syntax("syntax error in ALTER SEQUENCE: a name is missing")),
            }
            *i += 1;
            if tokens.get(*i) != Some(&Token::Period) {
                return Ok(parts);
            }
            *i += 1;
        }
    };
    let name = name_at(&mut i)?.pop().unwrap_or_default();
    let rest = &tokens[i..];
    let action = match rest {
        [o, t, _] if is_word(o, "owner") && is_word(t, "to") => AlterSequence::Owner,
        [o, b, n] if is_word(o, "owned") && is_word(b, "by") && is_word(n, "none") => AlterSequence::OwnedBy(None),
        [o, b, ..] if is_word(o, "owned") && is_word(b, "by") => {
            let mut j = i + 2;
            let mut parts = name_at(&mut j)?;
            if j != tokens.len() || parts.len() < 2 {
                return Err(Error::syntax("OWNED BY needs a table and a column: OWNED BY table.column"));
            }
            let column = parts.pop().unwrap_or_default();
            let table = parts.pop().unwrap_or_default();
            AlterSequence::OwnedBy(Some((table, column)))
        }
        [r] if is_word(r, "restart") => AlterSequence::Restart(None),
        [r, rest @ ..] if is_word(r, "restart") => {
            let number = match rest {
                [w, n] if is_word(w, "with") => n,
                [n] => n,
                _ => return Err(Error::syntax("syntax error in ALTER SEQUENCE … RESTART")),
            };
            let value = match number {
                Token::Number(n, _) => n.parse().ok(),
                _ => None,
            };
            AlterSequence::Restart(Some(value.ok_or_else(|| Error::syntax("RESTART WITH needs an integer"))?))
        }
        _ => return Err(Error::unsupported("ALTER SEQUENCE other than OWNER TO, OWNED BY and RESTART")),
    };
    Ok((name, if_exists, action))
}

/// `ALTER TABLE … ADD GENERATED … AS IDENTITY ( SEQUENCE NAME n … )`, which pg_dump writes:
/// a pragma carrying the name and the statement without `SEQUENCE NAME n`.
fn identity_with_sequence_name(sql: &str) -> Option<Statement> {
    use sqlparser::tokenizer::{Token, Tokenizer};
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let solid: Vec<usize> = (0..tokens.len()).filter(|&i| !matches!(tokens[i], Token::Whitespace(_))).collect();
    if !solid.first().is_some_and(|&i| is_word(&tokens[i], "alter")) || !solid.get(1).is_some_and(|&i| is_word(&tokens[i], "table")) {
        return None;
    }
    let at = (0..solid.len().saturating_sub(2)).find(|&k| is_word(&tokens[solid[k]], "sequence") && is_word(&tokens[solid[k + 1]], "name"))?;
    // The name: words joined by periods; the last one names the sequence.
    let mut k = at + 2;
    let last = loop {
        let last = match tokens.get(*solid.get(k)?) {
            Some(Token::Word(w)) => if w.quote_style.is_some() { w.value.clone() } else { w.value.to_lowercase() },
            _ => return None,
        };
        if solid.get(k + 1).map(|&i| &tokens[i]) == Some(&Token::Period) {
            k += 2;
        } else {
            break last;
        }
    };
    let (from, to) = (solid[at], solid[k]);
    let rest: String = tokens[..from].iter().chain(&tokens[to + 1..]).map(|t| t.to_string()).collect();
    Some(pragma(ADD_IDENTITY_PRAGMA, format!("{last}\0{rest}")))
}

/// The pragma name that carries CREATE/DROP PROCEDURE|FUNCTION text (sqlparser does not
/// parse PostgreSQL's form of them; Freshet's own parser does, in `plpgsql`).
pub const CREATE_ROUTINE_PRAGMA: &str = "freshet_create_routine";
pub const DROP_ROUTINE_PRAGMA: &str = "freshet_drop_routine";
/// The pragma that carries `ALTER FUNCTION | PROCEDURE … OWNER TO …` text.
pub const ALTER_ROUTINE_PRAGMA: &str = "freshet_alter_routine";

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
    let statements = Parser::new(&PostgreSqlDialect {})
        .with_recursion_limit(200)
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_statements())
        .map_err(|e| syntax_error(sql, e))?;
    statements.into_iter().map(normalized).collect()
}

/// A parsed statement in the form the planners take: a WITH in front of INSERT, UPDATE or
/// DELETE handed down ([`super::dml_with`]), EXPLAIN's options read.
fn normalized(statement: Statement) -> Result<Statement> {
    let mut statement = explain_options(super::dml_with::distribute(statement)?)?;
    if let Statement::Explain { statement: inner, .. } = &mut statement
        && matches!(**inner, Statement::Query(_))
    {
        **inner = super::dml_with::distribute((**inner).clone())?;
    }
    Ok(statement)
}

/// `EXPLAIN (option [value], …)` as PostgreSQL 15 takes it: ANALYZE and VERBOSE set what the
/// keywords of the same names set (a missing value is true); COSTS, SETTINGS, BUFFERS, WAL,
/// TIMING and SUMMARY only choose what PostgreSQL prints beside its plans, so they change
/// nothing here; FORMAT TEXT is the one format Freshet prints (others are 0A000). An unknown
/// option is 42601, a value that is not a Boolean or a format 22023, as there.
fn explain_options(statement: Statement) -> Result<Statement> {
    let Statement::Explain { describe_alias, mut analyze, mut verbose, query_plan, estimate, statement, format, options: Some(options) } = statement else {
        return Ok(statement);
    };
    let value = |o: &sqlparser::ast::UtilityOption| o.arg.as_ref().map(|a| a.to_string().trim_matches('\'').to_ascii_lowercase());
    for o in &options {
        let name = o.name.value.to_ascii_lowercase();
        match name.as_str() {
            "analyze" | "verbose" | "costs" | "settings" | "buffers" | "wal" | "timing" | "summary" => {
                let on = match value(o).as_deref() {
                    None | Some("true" | "on" | "1" | "yes") => true,
                    Some("false" | "off" | "0" | "no") => false,
                    Some(_) => return Err(Error::new(SqlState::InvalidParameterValue, format!("{name} requires a Boolean value"))),
                };
                match name.as_str() {
                    "analyze" => analyze = on,
                    "verbose" => verbose = on,
                    _ => {}
                }
            }
            "format" => match value(o).as_deref() {
                Some("text") => {}
                Some(f @ ("json" | "xml" | "yaml")) => return Err(Error::unsupported(format!("EXPLAIN (FORMAT {})", f.to_ascii_uppercase())).with_hint("FORMAT TEXT is the one EXPLAIN format.")),
                other => {
                    return Err(Error::new(SqlState::InvalidParameterValue, format!("unrecognized value for EXPLAIN option \"format\": \"{}\"", other.unwrap_or_default())))
                }
            },
            // Named as written when quoted, folded to lower case when not, as PostgreSQL names it.
            _ => return Err(Error::syntax(format!("unrecognized EXPLAIN option \"{}\"", if o.name.quote_style.is_some() { &o.name.value } else { &name }))),
        }
    }
    Ok(Statement::Explain { describe_alias, analyze, verbose, query_plan, estimate, statement, format, options: None })
}

/// The pragma that carries a `FETCH` or `MOVE` statement's text (sqlparser knows only some
/// FETCH forms and no MOVE; see [`fetch_statement`]).
pub const FETCH_PRAGMA: &str = "freshet_fetch";

/// Where a `FETCH` or `MOVE` goes, as PostgreSQL reduces its forms: `NEXT` is `Forward(1)`,
/// `PRIOR` `Backward(1)`, `FIRST` `Absolute(1)`, `LAST` `Absolute(-1)`, a negative count the
/// other way, and a count of 0 (re-reading the current row) `Relative(0)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchDirection {
    /// The next `n` rows ([`FETCH_ALL`]: all the rest).
    Forward(u64),
    /// The `n` rows before the current one, nearest first.
    Backward(u64),
    /// Row `n` (from the end if negative; 0: before the first row).
    Absolute(i64),
    /// The row `n` rows on from the current one (back if negative; 0: the current row).
    Relative(i64),
}

impl FetchDirection {
    /// `FORWARD n`: back if `n` is negative, the current row if 0 (as PostgreSQL's portals
    /// take a count).
    pub fn ahead(n: i64) -> FetchDirection {
        match n {
            0 => FetchDirection::Relative(0),
            n if n < 0 => FetchDirection::Backward(n.unsigned_abs()),
            n => FetchDirection::Forward(n as u64),
        }
    }

    /// `BACKWARD n`.
    pub fn back(n: i64) -> FetchDirection {
        FetchDirection::ahead(n.checked_neg().unwrap_or(i64::MAX))
    }
}

/// The count of `FETCH ALL`.
pub const FETCH_ALL: u64 = u64::MAX;

/// A `FETCH` or `MOVE` statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchStatement {
    /// MOVE: the cursor moves, no rows are returned.
    pub move_only: bool,
    pub direction: FetchDirection,
    /// The cursor's name (folded to lower case unless quoted).
    pub cursor: String,
}

/// Parses `{FETCH | MOVE} [direction] [FROM | IN] cursor` (the text [`FETCH_PRAGMA`] carries).
pub fn fetch_statement(sql: &str) -> Result<FetchStatement> {
    use FetchDirection::{Absolute, Backward, Forward, Relative};
    let tokens = solid_tokens(sql).ok_or_else(|| Error::syntax("syntax error in FETCH"))?;
    let move_only = tokens.first().is_some_and(|t| is_word(t, "move"));
    let mut at = 1;
    let word = |t: Option<&Token>| match t {
        Some(Token::Word(w)) if w.quote_style.is_none() => w.value.to_ascii_lowercase(),
        _ => String::new(),
    };
    // `FETCH name` alone: the name may be one of the directions' words.
    let direction = if tokens.len() == 2 {
        Forward(1)
    } else {
        let first = word(tokens.get(at));
        if !first.is_empty() && first != "from" && first != "in" {
            at += 1;
        }
        match first.as_str() {
            "next" => Forward(1),
            "prior" => Backward(1),
            "first" => Absolute(1),
            "last" => Absolute(-1),
            "absolute" => Absolute(signed_count(&tokens, &mut at)?.ok_or_else(|| near(tokens.get(at)))?),
            "relative" => Relative(signed_count(&tokens, &mut at)?.ok_or_else(|| near(tokens.get(at)))?),
            "all" => Forward(FETCH_ALL),
            "forward" | "backward" if word(tokens.get(at)) == "all" => {
                at += 1;
                if first == "backward" { Backward(FETCH_ALL) } else { Forward(FETCH_ALL) }
            }
            "forward" => FetchDirection::ahead(signed_count(&tokens, &mut at)?.unwrap_or(1)),
            "backward" => FetchDirection::back(signed_count(&tokens, &mut at)?.unwrap_or(1)),
            "" | "from" | "in" => signed_count(&tokens, &mut at)?.map_or(Forward(1), FetchDirection::ahead),
            _ => return Err(near(tokens.get(at - 1))),
        }
    };
    if tokens.get(at).is_some_and(|t| is_word(t, "from") || is_word(t, "in")) {
        at += 1;
    }
    let cursor = match tokens.get(at) {
        Some(Token::Word(w)) if w.quote_style.is_some() => w.value.clone(),
        Some(Token::Word(w)) => w.value.to_lowercase(),
        other => return Err(near(other)),
    };
    if at + 1 < tokens.len() {
        return Err(near(tokens.get(at + 1)));
    }
    Ok(FetchStatement { move_only, direction, cursor })
}

/// A signed integer constant at `at`, if one is there (`at` moves past it).
fn signed_count(tokens: &[Token], at: &mut usize) -> Result<Option<i64>> {
    let negative = match tokens.get(*at) {
        Some(Token::Minus) => true,
        Some(Token::Plus) => false,
        Some(Token::Number(..)) => {
            let Some(Token::Number(digits, _)) = tokens.get(*at) else { return Ok(None) };
            *at += 1;
            return digits.parse().map(Some).map_err(|_| near(tokens.get(*at - 1)));
        }
        _ => return Ok(None),
    };
    *at += 1;
    let Some(Token::Number(digits, _)) = tokens.get(*at) else { return Err(near(tokens.get(*at))) };
    let n: i64 = digits.parse().map_err(|_| near(tokens.get(*at)))?;
    *at += 1;
    Ok(Some(if negative { -n } else { n }))
}

/// 42601 at a token (or at the end of the input).
fn near(t: Option<&Token>) -> Error {
    match t {
        Some(t) => Error::syntax(format!("syntax error at or near \"{t}\"")),
        None => Error::syntax("syntax error at end of input"),
    }
}

/// PostgreSQL statements the parser lacks, written on their own: `ABORT [WORK | TRANSACTION]`
/// (ROLLBACK's other name), the VACUUM forms the parser does not know (`VACUUM ANALYZE t`),
/// which Freshet accepts and ignores anyway, `CHECKPOINT` (carried as a pragma named
/// `checkpoint`) and `SET CONSTRAINTS …` ([`SET_CONSTRAINTS_PRAGMA`]).
fn postgres_only(sql: &str) -> Option<Statement> {
    let words: Vec<String> = sql.trim().trim_end_matches(';').split_whitespace().map(str::to_lowercase).collect();
    match words.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["abort"] | ["abort", "work" | "transaction"] => Some(Statement::Rollback { chain: false, savepoint: None }),
        ["vacuum", ..] if words.len() > 1 => parse_plain("VACUUM").ok()?.pop(),
        ["set", "constraints", _, ..] => {
            let text = sql.trim().trim_end_matches(';');
            let at = text.to_ascii_lowercase().find("constraints")? + "constraints".len();
            Some(pragma(SET_CONSTRAINTS_PRAGMA, text[at..].trim().to_string()))
        }
        ["fetch" | "move", _, ..] => Some(pragma(FETCH_PRAGMA, sql.trim().trim_end_matches(';').to_string())),
        ["checkpoint"] => Some(Statement::Pragma {
            name: vec![sqlparser::ast::Ident::new("checkpoint")].into(),
            value: None,
            is_eq: false,
        }),
        // DROP INDEX CONCURRENTLY: sqlparser does not know the word there; dropping an index
        // blocks no writer in Freshet anyway, so it is the plain DROP INDEX.
        ["drop", "index", "concurrently", ..] => {
            let text = sql.trim_start();
            let at = text.to_ascii_lowercase().find("concurrently")?;
            parse_plain(&format!("{}{}", &text[..at], &text[at + "concurrently".len()..])).ok()?.pop()
        }
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
    fn do_blocks_become_their_procedure() {
        use crate::sql::plpgsql::parser::do_as_procedure;
        let pragma_text = |s: &Statement| match s {
            Statement::Pragma { name, value: Some(v), .. } if name.to_string() == DO_PRAGMA => match &v.value {
                sqlparser::ast::Value::SingleQuotedString(t) => Some(t.clone()),
                _ => None,
            },
            _ => None,
        };
        // Split from the statements around it, a `;` inside the code kept.
        let statements = parse("SELECT 1; DO $$ BEGIN RAISE NOTICE 'a;b'; END $$; SELECT 2").unwrap();
        assert_eq!(statements.len(), 3);
        let text = pragma_text(&statements[1]).unwrap();
        assert_eq!(do_as_procedure(&text).unwrap(), "CREATE PROCEDURE inline_code_block() LANGUAGE plpgsql AS $$ BEGIN RAISE NOTICE 'a;b'; END $$");
        // The language before or after the code; a quoted code string as written.
        let after = do_as_procedure("DO 'BEGIN NULL; END' LANGUAGE plpgsql").unwrap();
        assert_eq!(after, "CREATE PROCEDURE inline_code_block() LANGUAGE plpgsql AS 'BEGIN NULL; END'");
        assert_eq!(do_as_procedure("do language PLPGSQL $x$ BEGIN END $x$").unwrap(), "CREATE PROCEDURE inline_code_block() LANGUAGE plpgsql AS $x$ BEGIN END $x$");
        assert_eq!(do_as_procedure("DO LANGUAGE sql $$ SELECT 1 $$").unwrap_err().state, SqlState::FeatureNotSupported);
        assert!(do_as_procedure("DO LANGUAGE plpgsql").unwrap_err().message.contains("no inline code"));
        assert!(do_as_procedure("DO $$ BEGIN END $$ $$ x $$").is_err());
        // A word that merely starts with "do" is not a DO block.
        assert!(parse("SELECT 'done' AS double").unwrap().iter().all(|s| pragma_text(s).is_none()));
    }

    #[test]
    fn variadic_in_front_of_an_argument() {
        assert_eq!(without_variadic("SELECT f(VARIADIC ARRAY[1, 2]), g(1,  variadic xs)").as_deref(), Some("SELECT f(ARRAY[1, 2]), g(1,  xs)"));
        assert_eq!(parse("SELECT f(VARIADIC ARRAY[1])").unwrap()[0].to_string(), "SELECT f(ARRAY[1])");
        assert!(without_variadic("SELECT concat(VARIADIC ARRAY['a'])").is_none(), "a built-in's own VARIADIC");
        assert!(without_variadic("SELECT 'variadic' AS variadic").is_none());
    }

    #[test]
    fn fetch_and_move_forms() {
        use FetchDirection::*;
        let cases: &[(&str, bool, FetchDirection, &str)] = &[
            ("FETCH c", false, Forward(1), "c"),
            ("fetch next from C", false, Forward(1), "c"),
            ("FETCH \"Next\"", false, Forward(1), "Next"),
            ("FETCH next", false, Forward(1), "next"),
            ("FETCH PRIOR IN c;", false, Backward(1), "c"),
            ("FETCH FIRST c", false, Absolute(1), "c"),
            ("FETCH LAST FROM c", false, Absolute(-1), "c"),
            ("FETCH ABSOLUTE -3 FROM c", false, Absolute(-3), "c"),
            ("FETCH RELATIVE +2 c", false, Relative(2), "c"),
            ("FETCH 5 FROM c", false, Forward(5), "c"),
            ("FETCH -5 FROM c", false, Backward(5), "c"),
            ("FETCH 0 FROM c", false, Relative(0), "c"),
            ("FETCH ALL IN c", false, Forward(FETCH_ALL), "c"),
            ("FETCH FORWARD c", false, Forward(1), "c"),
            ("FETCH FORWARD 3 FROM c", false, Forward(3), "c"),
            ("FETCH FORWARD -3 FROM c", false, Backward(3), "c"),
            ("FETCH FORWARD ALL FROM c", false, Forward(FETCH_ALL), "c"),
            ("FETCH BACKWARD FROM c", false, Backward(1), "c"),
            ("FETCH BACKWARD 2 c", false, Backward(2), "c"),
            ("FETCH BACKWARD ALL c", false, Backward(FETCH_ALL), "c"),
            ("FETCH FROM c", false, Forward(1), "c"),
            ("MOVE 3 IN c", true, Forward(3), "c"),
            ("move absolute 0 c", true, Absolute(0), "c"),
        ];
        for (sql, move_only, direction, cursor) in cases {
            let parsed = parse(sql).unwrap();
            let [Statement::Pragma { name, value: Some(v), .. }] = parsed.as_slice() else { panic!("{sql} is not a pragma") };
            assert_eq!(name.to_string(), FETCH_PRAGMA);
            let sqlparser::ast::Value::SingleQuotedString(text) = &v.value else { panic!("no text") };
            let f = fetch_statement(text).unwrap();
            assert_eq!((f.move_only, f.direction, f.cursor.as_str()), (*move_only, *direction, *cursor), "{sql}");
        }
        for bad in ["FETCH FORWARD ALL 3 c", "FETCH ABSOLUTE c", "FETCH 3 FROM", "FETCH c d", "FETCH SIDEWAYS c", "FETCH - c"] {
            let e = parse(bad).and_then(|s| match &s[..] {
                [Statement::Pragma { value: Some(v), .. }] => match &v.value {
                    sqlparser::ast::Value::SingleQuotedString(text) => fetch_statement(text).map(|_| ()),
                    _ => Ok(()),
                },
                _ => Ok(()),
            });
            assert_eq!(e.map_err(|e| e.state), Err(SqlState::SyntaxError), "{bad}");
        }
        // In a text of several statements; FETCH FIRST … ROWS ONLY stays a query's clause.
        let several = parse("BEGIN; MOVE 2 c; SELECT 1 FETCH FIRST 1 ROWS ONLY").unwrap();
        assert_eq!(several.len(), 3);
        assert!(matches!(&several[1], Statement::Pragma { name, .. } if name.to_string() == FETCH_PRAGMA));
        assert!(matches!(&several[2], Statement::Query(_)));
    }

    #[test]
    fn insert_overriding_forms() {
        let text = |sql: &str| match insert_overriding(sql) {
            Some(Statement::Pragma { value: Some(v), .. }) => match v.value {
                sqlparser::ast::Value::SingleQuotedString(t) => t,
                other => panic!("{other:?}"),
            },
            other => panic!("{sql}: {other:?}"),
        };
        assert_eq!(text("INSERT INTO t (id, v) OVERRIDING SYSTEM VALUE VALUES (1, 'it''s')"), "SYSTEM\0INSERT INTO t (id, v)  VALUES (1, 'it''s')");
        assert_eq!(text("insert into t\n  overriding user value\n  select 1, '\u{e9}t\u{e9}'"), "USER\0insert into t\n  \n  select 1, '\u{e9}t\u{e9}'");
        assert_eq!(text("INSERT INTO \"Ü\" OVERRIDING SYSTEM VALUE VALUES (1)"), "SYSTEM\0INSERT INTO \"Ü\"  VALUES (1)");
        // Inside a string or parentheses, or another statement: not the clause.
        assert!(insert_overriding("INSERT INTO t VALUES ('overriding system value')").is_none());
        assert!(insert_overriding("INSERT INTO t SELECT * FROM (SELECT 1 AS overriding) s").is_none());
        assert!(insert_overriding("SELECT 'x' AS overriding").is_none());
        // After the rows' source, where PostgreSQL's grammar has no such clause.
        assert!(insert_overriding("INSERT INTO t VALUES (1) OVERRIDING SYSTEM VALUE").is_none());
        assert!(insert_overriding("INSERT INTO t SELECT 1 OVERRIDING USER VALUE").is_none());
        assert!(parse("INSERT INTO t VALUES (1) OVERRIDING SYSTEM VALUE").is_err());
        // After a WITH clause, whose queries may hold the words.
        assert_eq!(
            text("WITH s AS (SELECT 1 AS overriding) INSERT INTO t (id) OVERRIDING SYSTEM VALUE SELECT overriding FROM s"),
            "SYSTEM\0WITH s AS (SELECT 1 AS overriding) INSERT INTO t (id)  SELECT overriding FROM s"
        );
        assert!(insert_overriding("WITH s AS (SELECT 1) SELECT 'overriding system value'").is_none());
    }

    #[test]
    fn explain_options_are_postgresql_s() {
        let explain = |sql: &str| match parse(sql).map(|mut v| v.pop()) {
            Ok(Some(Statement::Explain { analyze, verbose, options, .. })) => Ok((analyze, verbose, options.is_none())),
            Ok(other) => panic!("{sql}: {other:?}"),
            Err(e) => Err(e.state.code()),
        };
        assert_eq!(explain("EXPLAIN (ANALYZE) SELECT 1"), Ok((true, false, true)));
        assert_eq!(explain("EXPLAIN (analyze on, verbose true, costs off, buffers, timing 0, summary, settings, wal) SELECT 1"), Ok((true, true, true)));
        assert_eq!(explain("EXPLAIN ANALYZE SELECT 1"), Ok((true, false, true)));
        assert_eq!(explain("EXPLAIN (ANALYZE off) SELECT 1"), Ok((false, false, true)));
        assert_eq!(explain("EXPLAIN (FORMAT text) SELECT 1"), Ok((false, false, true)));
        assert_eq!(explain("EXPLAIN (FORMAT JSON) SELECT 1"), Err("0A000"));
        assert_eq!(explain("EXPLAIN (FORMAT pdf) SELECT 1"), Err("22023"));
        assert_eq!(explain("EXPLAIN (ANALYZE 2) SELECT 1"), Err("22023"));
        assert_eq!(explain("EXPLAIN (COLOUR) SELECT 1"), Err("42601"));
    }

    #[test]
    fn explain_of_an_insert_with_overriding_carries_the_insert_as_its_pragma() {
        for (sql, analyze) in [("EXPLAIN INSERT INTO t (id) OVERRIDING SYSTEM VALUE VALUES (1)", false), ("explain analyze\ninsert into t overriding user value select 2", true)] {
            match parse(sql).unwrap().as_slice() {
                [Statement::Explain { statement, analyze: a, .. }] => {
                    assert_eq!(*a, analyze, "{sql}");
                    assert!(matches!(statement.as_ref(), Statement::Pragma { name, .. } if name.to_string() == INSERT_OVERRIDING_PRAGMA), "{sql}: {statement:?}");
                }
                other => panic!("{sql}: {other:?}"),
            }
        }
        assert!(parse("EXPLAIN INSERT INTO t VALUES (1) OVERRIDING SYSTEM VALUE").is_err());
        // Parenthesized options: ANALYZE as the keyword.
        assert!(matches!(parse("EXPLAIN (ANALYZE, COSTS OFF) INSERT INTO t (id) OVERRIDING SYSTEM VALUE VALUES (1)").unwrap().as_slice(), [Statement::Explain { analyze: true, options: None, .. }]));
        // Not an INSERT: parsed as it was.
        assert!(matches!(parse("EXPLAIN SELECT 'overriding system value'").unwrap().as_slice(), [Statement::Explain { statement, .. }] if matches!(statement.as_ref(), Statement::Query(_))));
    }

    #[test]
    fn alter_sequence_forms() {
        let parsed = |sql: &str| alter_sequence(sql).map_err(|e| e.state);
        assert_eq!(parsed("ALTER SEQUENCE public.s OWNER TO bob;"), Ok(("s".into(), false, AlterSequence::Owner)));
        assert_eq!(
            parsed("alter sequence if exists \"S\" owned by public.t.c"),
            Ok(("S".into(), true, AlterSequence::OwnedBy(Some(("t".into(), "c".into())))))
        );
        assert_eq!(parsed("ALTER SEQUENCE s OWNED BY NONE"), Ok(("s".into(), false, AlterSequence::OwnedBy(None))));
        assert_eq!(parsed("ALTER SEQUENCE s RESTART"), Ok(("s".into(), false, AlterSequence::Restart(None))));
        assert_eq!(parsed("ALTER SEQUENCE s RESTART WITH 42"), Ok(("s".into(), false, AlterSequence::Restart(Some(42)))));
        assert_eq!(parsed("ALTER SEQUENCE s RESTART 7"), Ok(("s".into(), false, AlterSequence::Restart(Some(7)))));
        assert_eq!(parsed("ALTER SEQUENCE s INCREMENT BY 2"), Err(SqlState::FeatureNotSupported));
        assert_eq!(parsed("ALTER SEQUENCE s OWNED BY t"), Err(SqlState::SyntaxError));
        assert_eq!(parsed("ALTER SEQUENCE s RESTART WITH x"), Err(SqlState::SyntaxError));
        // The statement reaches it as a pragma carrying its text.
        assert!(matches!(parse("ALTER SEQUENCE s RESTART").unwrap().as_slice(), [Statement::Pragma { .. }]));
    }

    #[test]
    fn an_identity_keeps_the_sequence_name_pg_dump_gives() {
        let sql = "ALTER TABLE public.e ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (\n SEQUENCE NAME public.e_id_seq\n START WITH 1\n CACHE 1\n);";
        let parsed = parse(sql).unwrap();
        let [Statement::Pragma { value: Some(v), .. }] = parsed.as_slice() else { panic!("not a pragma") };
        let sqlparser::ast::Value::SingleQuotedString(text) = &v.value else { panic!("no text") };
        let (name, rest) = text.split_once('\0').unwrap();
        assert_eq!(name, "e_id_seq");
        assert!(!rest.to_lowercase().contains("sequence name"), "{rest}");
        assert!(matches!(parse(rest).unwrap().as_slice(), [Statement::AlterTable(_)]));
    }

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
