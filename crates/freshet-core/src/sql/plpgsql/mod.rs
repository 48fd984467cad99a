//! Stored procedures and functions in a subset of PL/pgSQL.
//!
//! `CREATE PROCEDURE … AS $$ … $$` goes through three steps, all at CREATE time:
//! 1. `parser`: the header (name, parameters, RETURNS, LANGUAGE) and the body's statements.
//!    Expressions and embedded SQL are source text handed to sqlparser, so they are exactly
//!    the SQL Freshet accepts elsewhere.
//! 2. `compile`: names are resolved to variable slots, and every reference to a variable in an
//!    expression or SQL statement becomes a `$n` parameter whose value comes from a
//!    [`ParamSource`] (a variable, an array element, an array's length). Control flow becomes
//!    a flat list of [`Instr`]uctions with jumps, so the interpreter is one loop and never
//!    recurses.
//! 3. The session (`freshet::procedure`) prepares each embedded statement once per session
//!    and catalog version and runs the instructions; expressions run on the short path's
//!    evaluator (`expr::Expr`), without any parsing or planning per call.
//!
//! INVARIANTS. A [`Routine`] is immutable once in the catalog; its source text is what the
//! redo log and checkpoints store, and recovery compiles it again. Arrays exist only as
//! procedure parameters and variables ([`PlValue::Array`]): they are never stored in a table
//! and never passed to SQL whole, only as elements or lengths, or spread one parameter per
//! element into `ARRAY[…]` in a statement's form for the array's length (`spread`).
//!
//! Record variables (`record`, `%ROWTYPE`) and `%TYPE` get their types when the session first
//! runs the routine ([`compile::compile_with`]); a record is a set of hidden scalar slots, one
//! per field.
//!
//! Cursor variables (`CURSOR FOR query`, `refcursor`) keep their query's rows, read when OPEN
//! (or a cursor FOR loop) runs it, as a `FOR … IN query` loop does; FETCH and MOVE move
//! along them in any direction. A cursor variable's value is its portal's name: one still
//! open when the routine returns stays open for the caller under that name (in the session,
//! `freshet::cursor::Portal`).
//!
//! NOT IMPLEMENTED: whole-record assignment (`r := …`), record parameters and results (but
//! `RETURNS SETOF table`), `FOR r IN EXECUTE` over a plain `record`, array OUT parameters,
//! the VARIADIC keyword in a call, a set-returning function inside a larger query (it is
//! called only as `SELECT * FROM f(…)` or `SELECT f(…)`).

pub mod compile;
pub mod lexer;
pub mod overload;
pub mod parser;
pub mod spread;

pub use compile::{classify, compile, home_parameter, compile_with, Classification, Described, ExecuteCode, ExprUnit, FetchStep, HandlerCode, Instr, ParamSource, Routine, SqlUnit, UnitKey};

use crate::error::{Error, Result, SqlState};
use crate::types::{DataType, Value};

/// The type of a parameter or variable.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PlType {
    Scalar(DataType),
    /// A one-dimensional array of the element type.
    Array(DataType),
}

impl PlType {
    /// Whether `other` is the same type, type modifiers aside.
    pub fn same_type(&self, other: &PlType) -> bool {
        match (self, other) {
            (PlType::Scalar(a), PlType::Scalar(b)) | (PlType::Array(a), PlType::Array(b)) => std::mem::discriminant(a) == std::mem::discriminant(b),
            _ => false,
        }
    }

    pub fn name(&self) -> String {
        match self {
            PlType::Scalar(t) => t.pg_name().to_string(),
            PlType::Array(t) => format!("{}[]", t.pg_name()),
        }
    }
}

/// Whether two lists of parameter types are the same, type modifiers aside (`numeric(10,2)`
/// and `numeric`, `varchar(5)` and `varchar` are one type, as in PostgreSQL).
pub fn same_types(a: &[PlType], b: &[PlType]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same_type(y))
}

/// `name(type, type)`, as PostgreSQL names a routine with its argument types in messages.
pub fn signature_text(name: &str, types: impl Iterator<Item = String>) -> String {
    format!("{name}({})", types.collect::<Vec<_>>().join(", "))
}

/// How the log names a dropped routine: its name, then each input parameter's type, each
/// after a NUL (which no identifier holds), so `f()` is `"f\0"`.
pub fn drop_key(name: &str, signature: &[PlType]) -> String {
    let mut key = format!("{name}\0");
    key.push_str(&signature.iter().map(PlType::name).collect::<Vec<_>>().join("\0"));
    key
}

/// The routine a [`drop_key`] names; a key of a name alone (an older log's) names every
/// routine of that name.
pub fn parse_drop_key(key: &str) -> Result<(String, Option<Vec<PlType>>)> {
    let Some((name, types)) = key.split_once('\0') else { return Ok((key.to_string(), None)) };
    let types = if types.is_empty() { Vec::new() } else { types.split('\0').map(parser::parse_type).collect::<Result<_>>()? };
    Ok((name.to_string(), Some(types)))
}

/// A variable's value in a running routine.
#[derive(Clone, Debug, PartialEq)]
pub enum PlValue {
    Scalar(Value),
    /// Elements of a one-dimensional array, lower bound 1; `None` is a NULL array.
    Array(Option<Vec<Value>>),
}

impl PlValue {
    pub fn scalar(&self) -> Result<&Value> {
        match self {
            PlValue::Scalar(v) => Ok(v),
            PlValue::Array(_) => Err(Error::mismatch("an array value where a scalar is expected")),
        }
    }
}

/// Parses PostgreSQL's text form of a one-dimensional array (`{1,2,"a b",NULL}`).
pub fn parse_array_text(text: &str, elem: DataType) -> Result<Vec<Value>> {
    let bad = || Error::new(SqlState::InvalidTextRepresentation, format!("malformed array literal: \"{text}\""));
    let inner = text.trim().strip_prefix('{').and_then(|t| t.strip_suffix('}')).ok_or_else(bad)?;
    let mut out = Vec::new();
    if inner.trim().is_empty() {
        return Ok(out);
    }
    let mut chars = inner.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut item = String::new();
        let quoted = chars.peek() == Some(&'"');
        if quoted {
            chars.next();
            loop {
                match chars.next().ok_or_else(bad)? {
                    '"' => break,
                    '\\' => item.push(chars.next().ok_or_else(bad)?),
                    c => item.push(c),
                }
            }
            while chars.peek().is_some_and(|c| c.is_whitespace()) {
                chars.next();
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                if c == '{' || c == '}' || c == '"' {
                    return Err(bad());
                }
                item.push(c);
                chars.next();
            }
            item = item.trim().to_string();
        }
        out.push(if !quoted && item.eq_ignore_ascii_case("null") { Value::Null } else { Value::parse(&item, elem)? });
        match chars.next() {
            None => return Ok(out),
            Some(',') => continue,
            Some(_) => return Err(bad()),
        }
    }
}

/// PostgreSQL's text form of an array (for RAISE, casts to text and an array a function
/// returns): an element is quoted when it is empty, says NULL, or holds a brace, comma,
/// quote, backslash or white space, with its quotes and backslashes escaped.
pub fn array_text(items: &[Value], elem: DataType) -> String {
    let mut out = String::from("{");
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match v.to_text(elem) {
            None => out.push_str("NULL"),
            Some(t) => push_array_element(&t, &mut out),
        }
    }
    out.push('}');
    out
}

/// Appends an element's text to an array's text form, quoted when it is empty, says NULL, or
/// holds a brace, comma, quote, backslash or white space (its quotes and backslashes escaped).
pub fn push_array_element(text: &str, out: &mut String) {
    let quote = text.is_empty() || text.eq_ignore_ascii_case("null") || text.chars().any(|c| matches!(c, '{' | '}' | ',' | '"' | '\\') || c.is_whitespace());
    if !quote {
        out.push_str(text);
        return;
    }
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_text_quotes_as_postgresql_does() {
        let items: Vec<Value> = ["a", "b c", "", "x\"y", "NULL", "p\\q", "{}"].iter().map(|t| Value::Text(t.to_string())).chain([Value::Null]).collect();
        assert_eq!(array_text(&items, DataType::Text), r#"{a,"b c","","x\"y","NULL","p\\q","{}",NULL}"#);
        assert_eq!(array_text(&[Value::Int32(1), Value::Int32(-2)], DataType::Int32), "{1,-2}");
    }

    #[test]
    fn array_literals() {
        assert_eq!(parse_array_text("{1, 2,NULL}", DataType::Int32).unwrap(), vec![Value::Int32(1), Value::Int32(2), Value::Null]);
        assert_eq!(parse_array_text("{}", DataType::Int32).unwrap(), vec![]);
        assert_eq!(parse_array_text("{\"a,b\",c}", DataType::Text).unwrap(), vec![Value::Text("a,b".into()), Value::Text("c".into())]);
        assert!(parse_array_text("1,2", DataType::Int32).is_err());
    }
}
