//! DataFusion errors as Freshet errors with SQLSTATE codes.

use datafusion::arrow::error::ArrowError;
use datafusion::common::SchemaError;
use datafusion::error::DataFusionError;
use freshet_core::{Error, SqlState};

/// Wraps a core error so it can travel through DataFusion and come out unchanged.
pub fn to_datafusion(e: Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// Maps an error of the analytical side to the SQLSTATE a PostgreSQL client expects.
pub fn from_datafusion(e: DataFusionError) -> Error {
    let root = e.find_root();
    let text = root.to_string();
    if let Some(at) = text.find("regex parse error") {
        // A pattern of `~`, SIMILAR TO or regexp_* that does not compile.
        let detail = text[at..].lines().last().unwrap_or_default().trim().trim_start_matches("error: ");
        return Error::new(SqlState::custom("2201B").unwrap_or(SqlState::InvalidParameterValue), format!("invalid regular expression: {detail}"));
    }
    match root {
        DataFusionError::External(inner) => {
            if let Some(core) = inner.downcast_ref::<Error>() {
                return core.clone();
            }
            Error::new(SqlState::Internal, inner.to_string())
        }
        DataFusionError::SchemaError(se, _) => match se.as_ref() {
            SchemaError::FieldNotFound { field, .. } => Error::undefined_column(&field.name),
            SchemaError::AmbiguousReference { field } => Error::new(
                SqlState::AmbiguousColumn,
                format!("column reference \"{}\" is ambiguous", field.name),
            ),
            SchemaError::DuplicateQualifiedField { name, .. } | SchemaError::DuplicateUnqualifiedField { name } => {
                Error::new(SqlState::DuplicateColumn, format!("column \"{name}\" specified more than once"))
            }
        },
        DataFusionError::ArrowError(ae, _) => from_arrow(ae),
        DataFusionError::NotImplemented(m) => not_implemented(m),
        DataFusionError::Plan(m) => from_plan_message(m),
        DataFusionError::Execution(m) => from_execution_message(m),
        DataFusionError::ResourcesExhausted(m) => Error::new(SqlState::OutOfMemory, m.clone()),
        other => {
            let m = other.to_string();
            if m.contains("Divide by zero") || m.contains("division by zero") {
                return Error::division_by_zero();
            }
            if let Some(e) = no_matching_function(&m) {
                return e;
            }
            Error::new(SqlState::Internal, m)
        }
    }
}

/// 0A000 for what the analytical engine does not plan. A subquery the physical planner meets
/// outside WHERE and HAVING (correlated in a select list, or in an aggregate's FILTER) is
/// named as SQL rather than by the planner's dump of its expression.
fn not_implemented(m: &str) -> Error {
    if let Some(expression) = m.strip_prefix("Physical plan does not support logical expression ") {
        let what = match expression.split(|c: char| !c.is_ascii_alphanumeric()).next().unwrap_or_default() {
            // A select list's IN reaches the planner as EXISTS (see the session's rewrite).
            "InSubquery" | "Exists" => Some("IN or EXISTS (subquery)"),
            "ScalarSubquery" => Some("a scalar subquery"),
            _ => None,
        };
        if let Some(what) = what {
            return Error::new(
                SqlState::FeatureNotSupported,
                format!("{what} is not supported here: in a select list when it refers to the outer query, or in an aggregate's FILTER"),
            )
            .with_hint("Use it in WHERE or HAVING, or write it as a join.");
        }
    }
    Error::new(SqlState::FeatureNotSupported, format!("{m} is not supported"))
}

/// PostgreSQL's error for a call no function accepts: `call` is `name(types)` (or the name
/// alone where the types are not known).
pub(crate) fn undefined_function(call: &str) -> Error {
    let mut e = Error::new(SqlState::UndefinedFunction, format!("function {call} does not exist"));
    e.hint = Some("No function matches the given name and argument types. You might need to add explicit type casts.".into());
    e
}

/// [`undefined_function`] for a call with arguments of Arrow types `args`.
pub(crate) fn no_function_for(name: &str, args: &[datafusion::arrow::datatypes::DataType]) -> DataFusionError {
    let names: Vec<&str> = args.iter().map(|t| crate::types::sql_type_of_arrow(t).pg_name()).collect();
    to_datafusion(undefined_function(&format!("{name}({})", names.join(", "))))
}

/// PostgreSQL's error for a call no function signature accepts, from DataFusion's message.
fn no_matching_function(m: &str) -> Option<Error> {
    Some(undefined_function(&unmatched_call(m)?))
}

/// The SQL name of an Arrow type as DataFusion's messages print it (`Int32` is `integer`).
fn sql_name(t: &str) -> &str {
    match t.trim() {
        "Utf8" | "Utf8View" | "LargeUtf8" => "text",
        "Int16" => "smallint",
        "Int32" => "integer",
        "Int64" => "bigint",
        "Float32" => "real",
        "Float64" => "double precision",
        "Boolean" => "boolean",
        "Date32" => "date",
        "Null" => "unknown",
        t if t.starts_with("Decimal") => "numeric",
        t if t.starts_with("Timestamp") => "timestamp without time zone",
        t if t.starts_with("Interval") => "interval",
        t if t.starts_with("List") => "array",
        t => t,
    }
}

/// The call of a function that no signature matches, in SQL type names (`sum(text)`), from
/// DataFusion's message "No function matches the given name and argument types 'sum(Utf8View)'".
fn unmatched_call(m: &str) -> Option<String> {
    const NEEDLE: &str = "No function matches the given name and argument types '";
    let rest = &m[m.find(NEEDLE)? + NEEDLE.len()..];
    let call = &rest[..rest.find('\'')?];
    let (name, args) = call.strip_suffix(')')?.split_once('(')?;
    // Decimal128(15, 2) holds a comma: split on top-level commas only.
    let (mut depth, mut start, mut types) = (0, 0, Vec::new());
    for (i, c) in args.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                types.push(sql_name(&args[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    if !args.trim().is_empty() {
        types.push(sql_name(&args[start..]));
    }
    Some(format!("{name}({})", types.join(", ")))
}

/// The error PostgreSQL's input function gives for the text Arrow could not cast, from
/// Arrow's "Cannot cast string 'abc' to value of Int32 type": Freshet's own parser of the
/// target type reads the text again and says why, in PostgreSQL's words and SQLSTATE
/// (`invalid input syntax for type integer: "abc"`, 22P02; `value "99999999999" is out of
/// range for type integer`, 22003; `date/time field value out of range`, 22008).
fn input_error(m: &str) -> Option<Error> {
    use freshet_core::types::{DataType, Value};
    let rest = m.split("Cannot cast string '").nth(1).or_else(|| m.split("Cannot cast value '").nth(1))?;
    let (text, rest) = rest.rsplit_once("' to value of ")?;
    let arrow = rest.strip_suffix(" type").unwrap_or(rest).trim();
    let ty = match arrow {
        "Int16" => DataType::Int16,
        "Int32" => DataType::Int32,
        "Int64" => DataType::Int64,
        "Float32" => DataType::Float32,
        "Float64" => DataType::Float64,
        "Boolean" => DataType::Bool,
        "Date32" => DataType::Date,
        t if t.starts_with("Decimal") => DataType::Decimal { precision: 38, scale: 0 },
        t if t.starts_with("Timestamp") && t.contains(", Some(") => DataType::TimestampTz,
        t if t.starts_with("Timestamp") => DataType::Timestamp,
        _ => return None,
    };
    Value::parse(text, ty).err()
}

fn from_arrow(e: &ArrowError) -> Error {
    if let ArrowError::CastError(m) | ArrowError::ParseError(m) = e
        && let Some(input) = input_error(m)
    {
        return input;
    }
    match e {
        ArrowError::DivideByZero => Error::division_by_zero(),
        ArrowError::ArithmeticOverflow(m) => Error::new(SqlState::NumericValueOutOfRange, m.clone()),
        ArrowError::CastError(m) | ArrowError::ParseError(m) => {
            if m.contains("Divide by zero") {
                Error::division_by_zero()
            } else if let Some(ty) = m
                .strip_prefix("Can't cast value ")
                .and_then(|r| r.rsplit(" to type ").next())
                .or_else(|| m.starts_with("value of ").then(|| m.rsplit(" is out of range ").next()).flatten())
            {
                // A number beyond the target integer type (a float's or a numeric's message):
                // "integer out of range".
                Error::out_of_range(sql_name(ty))
            } else if m.contains("overflow") || m.contains("too large") || m.contains("out of range") {
                Error::new(SqlState::NumericValueOutOfRange, m.clone())
            } else {
                Error::new(SqlState::InvalidTextRepresentation, m.clone())
            }
        }
        ArrowError::ExternalError(inner) => match inner.downcast_ref::<Error>() {
            Some(core) => core.clone(),
            None => Error::new(SqlState::Internal, inner.to_string()),
        },
        ArrowError::InvalidArgumentError(m) if m.contains("overflow") => {
            Error::new(SqlState::NumericValueOutOfRange, m.clone())
        }
        other => Error::new(SqlState::Internal, other.to_string()),
    }
}

fn from_plan_message(m: &str) -> Error {
    if let Some(rest) = m.strip_prefix("table '") {
        let name = rest.split('\'').next().unwrap_or(rest);
        let name = name.rsplit('.').next().unwrap_or(name);
        if m.contains("not found") {
            return Error::undefined_table(name);
        }
    }
    if let Some(rest) = m.split("Order by column out of bounds, specified: ").nth(1) {
        let position = rest.split(',').next().unwrap_or(rest);
        return Error::new(SqlState::InvalidColumnReference, format!("ORDER BY position {position} is not in select list"));
    }
    if let Some(name) = m.split("Invalid function '").nth(1).and_then(|rest| rest.split('\'').next()) {
        // DataFusion's "Did you mean …?" names one of its own functions, which may not be
        // PostgreSQL's; PostgreSQL's words, without the argument types DataFusion does not give.
        return undefined_function(name);
    }
    if m.contains("Invalid function") || m.contains("function") && m.contains("not found") {
        return Error::new(SqlState::UndefinedFunction, m.to_string());
    }
    if let Some(e) = no_matching_function(m) {
        return e;
    }
    if m.contains("No function matches") || m.contains("does not support") && m.contains("argument") {
        return Error::new(SqlState::UndefinedFunction, m.to_string());
    }
    if m.contains("Cannot infer common") || m.contains("Cannot coerce") || m.contains("coercion") {
        return Error::new(SqlState::DatatypeMismatch, m.to_string());
    }
    if m.contains("must appear in the GROUP BY") || m.contains("not in the GROUP BY") || m.contains("GROUP BY") {
        return Error::new(SqlState::GroupingError, m.to_string());
    }
    if m.contains("Unsupported") || m.contains("not supported") {
        return Error::new(SqlState::FeatureNotSupported, m.to_string());
    }
    if m.contains("Divide by zero") {
        return Error::division_by_zero();
    }
    Error::new(SqlState::SyntaxError, m.to_string())
}

fn from_execution_message(m: &str) -> Error {
    if let Some(input) = input_error(m) {
        input
    } else if m.contains("Divide by zero") || m.contains("division by zero") {
        Error::division_by_zero()
    } else if m.contains("overflow") {
        Error::new(SqlState::NumericValueOutOfRange, m.to_string())
    } else if m.contains("Cannot cast") || m.contains("Cannot parse") || m.contains("invalid") {
        Error::new(SqlState::InvalidTextRepresentation, m.to_string())
    } else if m.contains("more than one row") {
        Error::new(SqlState::CardinalityViolation, "more than one row returned by a subquery used as an expression")
    } else {
        Error::new(SqlState::Internal, m.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unmatched_signature_is_an_undefined_function() {
        let m = "Error during planning: Internal error: Function 'sum' failed to match any signature. \
                 No function matches the given name and argument types 'sum(Utf8View)'. You might need to add explicit type casts.";
        assert_eq!(unmatched_call(m).as_deref(), Some("sum(text)"));
        let m = "No function matches the given name and argument types 'round(Decimal128(15, 2), Utf8)'.";
        assert_eq!(unmatched_call(m).as_deref(), Some("round(numeric, text)"));
        let e = from_datafusion(DataFusionError::Internal(m.into()));
        assert_eq!(e.state.code(), SqlState::UndefinedFunction.code());
        assert_eq!(e.message, "function round(numeric, text) does not exist");
        assert_eq!(unmatched_call("something else"), None);
    }

    #[test]
    fn text_arrow_cannot_cast_gets_postgresqls_input_error() {
        let cast = |m: &str| from_arrow(&ArrowError::CastError(m.into()));
        let e = cast("Cannot cast string 'abc' to value of Int32 type");
        assert_eq!((e.state.code(), e.message.as_str()), ("22P02", "invalid input syntax for type integer: \"abc\""));
        let e = cast("Cannot cast string '99999999999' to value of Int32 type");
        assert_eq!((e.state.code(), e.message.as_str()), ("22003", "value \"99999999999\" is out of range for type integer"));
        let e = cast("Cannot cast value 'maybe' to value of Boolean type");
        assert_eq!((e.state.code(), e.message.as_str()), ("22P02", "invalid input syntax for type boolean: \"maybe\""));
        let e = cast("Cannot cast string 'x' to value of Decimal128(38, 10) type");
        assert_eq!((e.state.code(), e.message.as_str()), ("22P02", "invalid input syntax for type numeric: \"x\""));
        // Text the type's parser reads (a disagreement) keeps Arrow's message.
        let e = cast("Cannot cast string '12' to value of Int32 type");
        assert_eq!((e.state.code(), e.message.as_str()), ("22P02", "Cannot cast string '12' to value of Int32 type"));
        let e = from_execution_message("Cannot cast string 'z' to value of Int64 type");
        assert_eq!((e.state.code(), e.message.as_str()), ("22P02", "invalid input syntax for type bigint: \"z\""));
    }

    #[test]
    fn a_subquery_the_planner_cannot_place_is_named_as_sql() {
        let m = "Physical plan does not support logical expression InSubquery(InSubquery { expr: Column(Column { relation: None, name: \"v\" }), subquery: <subquery>, negated: false })";
        let e = from_datafusion(DataFusionError::NotImplemented(m.into()));
        assert_eq!(e.state.code(), "0A000");
        assert!(e.message.starts_with("IN or EXISTS (subquery) is not supported here"), "{}", e.message);
        let e = from_datafusion(DataFusionError::NotImplemented("something else".into()));
        assert_eq!(e.message, "something else is not supported");
    }
}
