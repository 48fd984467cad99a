//! `SIMILAR TO` as PostgreSQL means it: the SQL-standard pattern language (`%` any string,
//! `_` any character, `|`, `*`, `+`, `?`, `{m,n}`, `( )` and `[…]` as in regular
//! expressions, an escape character for a literal), matched against the whole string.
//! DataFusion read the pattern as an unanchored regular expression (`'abc' SIMILAR TO 'a%'`
//! was false, `'abc' SIMILAR TO 'ab'` true), so [`crate::rewrite::postgres_functions`] turns
//! `x [NOT] SIMILAR TO p [ESCAPE e]` into `x [!]~ freshet_similar_regex(p, e)`, and this
//! function translates the pattern into an anchored regular expression.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility};
use freshet_core::{Error, Result, SqlState};

use crate::error::to_datafusion;

/// The function the rewrite calls.
pub const SIMILAR_REGEX_FUNCTION: &str = "freshet_similar_regex";

/// The anchored regular expression of a `SIMILAR TO` pattern with escape character `escape`
/// (none for an empty ESCAPE).
pub fn similar_to_regex(pattern: &str, escape: &str) -> Result<String> {
    let mut chars = escape.chars();
    let escape = match (chars.next(), chars.next()) {
        (None, _) => None,
        (Some(c), None) => Some(c),
        _ => {
            let mut e = Error::new(SqlState::custom("22025").unwrap_or(SqlState::InvalidParameterValue), "invalid escape string");
            e.hint = Some("Escape string must be empty or one character.".into());
            return Err(e);
        }
    };
    let mut out = String::from("^(?:");
    let mut chars = pattern.chars().peekable();
    // Inside a bracket expression characters are the class's, as written.
    let mut in_brackets = false;
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            match chars.next() {
                Some(literal) => out.push_str(&regex_literal(literal)),
                None => return Err(Error::new(SqlState::custom("2201B").unwrap_or(SqlState::InvalidParameterValue), "invalid escape at the end of a SIMILAR TO pattern")),
            }
            continue;
        }
        if in_brackets {
            if c == ']' {
                in_brackets = false;
            }
            // Rust's classes also know nested classes and `&&`, `~~` operators.
            if matches!(c, '[' | '\\' | '&' | '~') {
                out.push('\\');
            }
            out.push(c);
            continue;
        }
        match c {
            '%' => out.push_str(".*"),
            '_' => out.push('.'),
            '(' => out.push_str("(?:"),
            ')' | '|' | '*' | '+' | '?' | '{' | '}' => out.push(c),
            '[' => {
                in_brackets = true;
                out.push('[');
                // A leading `^` negates, and a `]` right after the opening is a member.
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push_str("\\]");
                    chars.next();
                }
            }
            c => out.push_str(&regex_literal(c)),
        }
    }
    out.push_str(")$");
    Ok(out)
}

/// `c` matching itself in a regular expression (only metacharacters are escaped: `\\<` would
/// be a word boundary).
fn regex_literal(c: char) -> String {
    if "\\.+*?()|[]{}^$#&-~".contains(c) { format!("\\{c}") } else { c.to_string() }
}

/// `freshet_similar_regex(pattern text, escape text) → text`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct SimilarRegex {
    signature: Signature,
}

impl SimilarRegex {
    pub(crate) fn new() -> SimilarRegex {
        SimilarRegex { signature: Signature::any(2, Volatility::Immutable) }
    }
}

impl ScalarUDFImpl for SimilarRegex {
    fn name(&self) -> &str {
        SIMILAR_REGEX_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = args.number_rows;
        let patterns = cast(&args.args[0].to_array(n)?, &ArrowType::Utf8)?;
        let escapes = cast(&args.args[1].to_array(n)?, &ArrowType::Utf8)?;
        let (patterns, escapes) = (patterns.as_string::<i32>(), escapes.as_string::<i32>());
        let mut out = StringBuilder::with_capacity(n, n * 16);
        for i in 0..n {
            if patterns.is_null(i) || escapes.is_null(i) {
                out.append_null();
            } else {
                out.append_value(similar_to_regex(patterns.value(i), escapes.value(i)).map_err(to_datafusion)?);
            }
        }
        crate::checked::columnar(Arc::new(out.finish()), scalar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_become_anchored_regular_expressions() {
        assert_eq!(similar_to_regex("a%", "\\").unwrap(), "^(?:a.*)$");
        assert_eq!(similar_to_regex("a_c.d", "\\").unwrap(), "^(?:a.c\\.d)$");
        assert_eq!(similar_to_regex("%(b|d)%", "\\").unwrap(), "^(?:.*(?:b|d).*)$");
        assert_eq!(similar_to_regex("a\\%b<", "\\").unwrap(), "^(?:a%b<)$");
        assert_eq!(similar_to_regex("a#_b\\", "#").unwrap(), "^(?:a_b\\\\)$");
        assert_eq!(similar_to_regex("[^]a-c]x", "").unwrap(), "^(?:[^\\]a-c]x)$");
        assert_eq!(similar_to_regex("a", "ab").unwrap_err().state.code(), "22025");
    }
}
