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
        DataFusionError::NotImplemented(m) => Error::new(SqlState::FeatureNotSupported, format!("{m} is not supported")),
        DataFusionError::Plan(m) => from_plan_message(m),
        DataFusionError::Execution(m) => from_execution_message(m),
        DataFusionError::ResourcesExhausted(m) => Error::new(SqlState::OutOfMemory, m.clone()),
        other => {
            let m = other.to_string();
            if m.contains("Divide by zero") || m.contains("division by zero") {
                return Error::division_by_zero();
            }
            Error::new(SqlState::Internal, m)
        }
    }
}

fn from_arrow(e: &ArrowError) -> Error {
    match e {
        ArrowError::DivideByZero => Error::division_by_zero(),
        ArrowError::ArithmeticOverflow(m) => Error::new(SqlState::NumericValueOutOfRange, m.clone()),
        ArrowError::CastError(m) | ArrowError::ParseError(m) => {
            if m.contains("Divide by zero") {
                Error::division_by_zero()
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
    if m.contains("Invalid function") || m.contains("function") && m.contains("not found") {
        return Error::new(SqlState::UndefinedFunction, m.to_string());
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
    if m.contains("Divide by zero") || m.contains("division by zero") {
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
