//! SQL data types and values.
//!
//! [`DataType`] is the logical type of a column or expression, with PostgreSQL's names, OIDs and
//! type modifiers. [`PhysicalType`] is how storage lays a column out: every logical type maps to
//! one fixed-width array or to the string-view layout, chosen so that the analytical side can
//! wrap a segment as an Arrow array without copying (see `storage`). [`Value`] is one datum, used
//! on the short-statement path and at the edges; bulk data never goes through it.

pub mod datetime;
pub mod decimal;
pub mod float;
pub mod uuid;
pub mod value;

pub use decimal::Decimal;
pub use value::Value;

use std::fmt;

use crate::error::{Error, Result, SqlState};

/// Largest precision of NUMERIC: values are 128-bit scaled integers (Arrow's Decimal128).
pub const MAX_DECIMAL_PRECISION: u8 = 38;
/// NUMERIC written without a precision is stored as NUMERIC(38, 10): a fixed scale keeps the
/// column a plain 128-bit array that the analytical side reads without conversion.
pub const DEFAULT_NUMERIC: DataType = DataType::Decimal { precision: 38, scale: 10 };

/// A NUMERIC value as output shows it for a column of type `ty`: a declared scale is kept
/// (`NUMERIC(10,2)` prints `3.00`); for NUMERIC without a precision ([`DEFAULT_NUMERIC`])
/// trailing fractional zeros are dropped, so `1.5` prints as written rather than with the
/// storage scale. (PostgreSQL keeps each value's own input scale, so `2.50` prints `2.50`
/// there and `2.5` here.)
pub fn shown_decimal(d: Decimal, ty: DataType) -> Decimal {
    if ty == DEFAULT_NUMERIC { d.trimmed() } else { d }
}

/// A logical SQL type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    Bool,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    /// NUMERIC(precision, scale): a scaled 128-bit integer.
    Decimal { precision: u8, scale: u8 },
    /// CHAR(n): stored without trailing blanks, padded to n on output (PostgreSQL's bpchar).
    Char(u32),
    /// VARCHAR(n) or VARCHAR without a limit.
    Varchar(Option<u32>),
    Text,
    /// Days since 1970-01-01.
    Date,
    /// Microseconds since 1970-01-01 00:00:00, without time zone.
    Timestamp,
    /// `timestamp with time zone`: an instant, microseconds since 1970-01-01 00:00:00 UTC.
    TimestampTz,
    /// `uuid`: stored as its canonical text (36 lower-case characters, see [`uuid`]), whose
    /// byte order is the order of the 128-bit values.
    Uuid,
}

/// How a column is laid out in storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PhysicalType {
    Bool,
    I16,
    I32,
    I64,
    F32,
    F64,
    I128,
    /// 16-byte views into append-only byte blocks (Arrow's Utf8View layout).
    Utf8,
}

/// Broad families used by type resolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeFamily {
    Bool,
    Integer,
    Decimal,
    Float,
    String,
    Date,
    Timestamp,
    Uuid,
}

impl DataType {
    pub fn physical(self) -> PhysicalType {
        match self {
            DataType::Bool => PhysicalType::Bool,
            DataType::Int16 => PhysicalType::I16,
            DataType::Int32 | DataType::Date => PhysicalType::I32,
            DataType::Int64 | DataType::Timestamp | DataType::TimestampTz => PhysicalType::I64,
            DataType::Float32 => PhysicalType::F32,
            DataType::Float64 => PhysicalType::F64,
            DataType::Decimal { .. } => PhysicalType::I128,
            DataType::Char(_) | DataType::Varchar(_) | DataType::Text | DataType::Uuid => PhysicalType::Utf8,
        }
    }

    pub fn family(self) -> TypeFamily {
        match self {
            DataType::Bool => TypeFamily::Bool,
            DataType::Int16 | DataType::Int32 | DataType::Int64 => TypeFamily::Integer,
            DataType::Decimal { .. } => TypeFamily::Decimal,
            DataType::Float32 | DataType::Float64 => TypeFamily::Float,
            DataType::Char(_) | DataType::Varchar(_) | DataType::Text => TypeFamily::String,
            DataType::Date => TypeFamily::Date,
            DataType::Timestamp | DataType::TimestampTz => TypeFamily::Timestamp,
            DataType::Uuid => TypeFamily::Uuid,
        }
    }

    pub fn is_numeric(self) -> bool {
        matches!(self.family(), TypeFamily::Integer | TypeFamily::Decimal | TypeFamily::Float)
    }

    pub fn is_string(self) -> bool {
        self.family() == TypeFamily::String
    }

    /// The PostgreSQL type OID.
    pub fn oid(self) -> u32 {
        match self {
            DataType::Bool => 16,
            DataType::Int16 => 21,
            DataType::Int32 => 23,
            DataType::Int64 => 20,
            DataType::Float32 => 700,
            DataType::Float64 => 701,
            DataType::Decimal { .. } => 1700,
            DataType::Char(_) => 1042,
            DataType::Varchar(_) => 1043,
            DataType::Text => 25,
            DataType::Date => 1082,
            DataType::Timestamp => 1114,
            DataType::TimestampTz => 1184,
            DataType::Uuid => 2950,
        }
    }

    /// The type for a PostgreSQL OID, for parameter types a client declares.
    pub fn from_oid(oid: u32) -> Option<DataType> {
        Some(match oid {
            16 => DataType::Bool,
            21 => DataType::Int16,
            23 => DataType::Int32,
            20 => DataType::Int64,
            700 => DataType::Float32,
            701 => DataType::Float64,
            1700 => DEFAULT_NUMERIC,
            1042 => DataType::Char(1),
            1043 => DataType::Varchar(None),
            25 | 19 => DataType::Text,
            1082 => DataType::Date,
            1114 => DataType::Timestamp,
            1184 => DataType::TimestampTz,
            2950 => DataType::Uuid,
            _ => return None,
        })
    }

    /// The OID of the PostgreSQL array type whose elements are of this type (`int4[]` is
    /// 1007).
    pub fn array_oid(self) -> u32 {
        match self {
            DataType::Bool => 1000,
            DataType::Int16 => 1005,
            DataType::Int32 => 1007,
            DataType::Int64 => 1016,
            DataType::Float32 => 1021,
            DataType::Float64 => 1022,
            DataType::Decimal { .. } => 1231,
            DataType::Char(_) => 1014,
            DataType::Varchar(_) => 1015,
            DataType::Text => 1009,
            DataType::Date => 1182,
            DataType::Timestamp => 1115,
            DataType::TimestampTz => 1185,
            DataType::Uuid => 2951,
        }
    }

    /// The element type of the PostgreSQL array type `oid` (`_int4`, OID 1007, has
    /// integer elements), for array parameters a client declares.
    pub fn from_array_oid(oid: u32) -> Option<DataType> {
        Some(match oid {
            1000 => DataType::Bool,
            1005 => DataType::Int16,
            1007 => DataType::Int32,
            1016 => DataType::Int64,
            1021 => DataType::Float32,
            1022 => DataType::Float64,
            1231 => DEFAULT_NUMERIC,
            1014 => DataType::Char(1),
            1015 => DataType::Varchar(None),
            1009 | 1003 => DataType::Text,
            1182 => DataType::Date,
            1115 => DataType::Timestamp,
            1185 => DataType::TimestampTz,
            2951 => DataType::Uuid,
            _ => return None,
        })
    }

    /// The type modifier PostgreSQL reports in RowDescription (-1 for none).
    pub fn typmod(self) -> i32 {
        match self {
            DataType::Decimal { precision, scale } => ((precision as i32) << 16 | scale as i32) + 4,
            DataType::Char(n) | DataType::Varchar(Some(n)) => n as i32 + 4,
            _ => -1,
        }
    }

    /// The byte length PostgreSQL reports in RowDescription (-1 for variable length).
    pub fn type_len(self) -> i16 {
        match self {
            DataType::Bool => 1,
            DataType::Int16 => 2,
            DataType::Int32 | DataType::Float32 | DataType::Date => 4,
            DataType::Int64 | DataType::Float64 | DataType::Timestamp | DataType::TimestampTz => 8,
            DataType::Uuid => 16,
            _ => -1,
        }
    }

    /// The name of the type without modifiers, as PostgreSQL prints it in messages.
    pub fn pg_name(self) -> &'static str {
        match self {
            DataType::Bool => "boolean",
            DataType::Int16 => "smallint",
            DataType::Int32 => "integer",
            DataType::Int64 => "bigint",
            DataType::Float32 => "real",
            DataType::Float64 => "double precision",
            DataType::Decimal { .. } => "numeric",
            DataType::Char(_) => "character",
            DataType::Varchar(_) => "character varying",
            DataType::Text => "text",
            DataType::Date => "date",
            DataType::Timestamp => "timestamp without time zone",
            DataType::TimestampTz => "timestamp with time zone",
            DataType::Uuid => "uuid",
        }
    }

    /// Parses a type name as written in SQL (already lower case), with its modifiers.
    pub fn from_sql_name(name: &str, mods: &[u64]) -> Result<DataType> {
        let no_mods = |t: DataType| {
            if mods.is_empty() {
                Ok(t)
            } else {
                Err(Error::syntax(format!("type {name} does not take modifiers")))
            }
        };
        match name {
            "bool" | "boolean" => no_mods(DataType::Bool),
            "int2" | "smallint" => no_mods(DataType::Int16),
            "int" | "int4" | "integer" => no_mods(DataType::Int32),
            "int8" | "bigint" => no_mods(DataType::Int64),
            "real" | "float4" => no_mods(DataType::Float32),
            "double precision" | "float8" | "double" => no_mods(DataType::Float64),
            "float" => match mods {
                [] => Ok(DataType::Float64),
                [p] if (1..=24).contains(p) => Ok(DataType::Float32),
                [p] if (25..=53).contains(p) => Ok(DataType::Float64),
                _ => Err(Error::new(
                    SqlState::InvalidParameterValue,
                    "precision for type float must be between 1 and 53 bits",
                )),
            },
            "numeric" | "decimal" => decimal_type(mods),
            "char" | "character" | "bpchar" => match mods {
                [] => Ok(DataType::Char(1)),
                [n] => Ok(DataType::Char(length_mod(name, *n)?)),
                _ => Err(Error::syntax(format!("type {name} takes one modifier"))),
            },
            "varchar" | "character varying" => match mods {
                [] => Ok(DataType::Varchar(None)),
                [n] => Ok(DataType::Varchar(Some(length_mod(name, *n)?))),
                _ => Err(Error::syntax(format!("type {name} takes one modifier"))),
            },
            "text" | "string" | "name" => no_mods(DataType::Text),
            "date" => no_mods(DataType::Date),
            "timestamp" | "timestamp without time zone" | "datetime" => no_mods(DataType::Timestamp),
            "timestamptz" | "timestamp with time zone" => no_mods(DataType::TimestampTz),
            "uuid" => no_mods(DataType::Uuid),
            other => Err(Error::new(
                SqlState::UndefinedObject,
                format!("type \"{other}\" does not exist"),
            )),
        }
    }

    /// The type of an expression that combines `self` and `other` in arithmetic or a comparison,
    /// or `None` when they do not combine.
    pub fn common_numeric(self, other: DataType) -> Option<DataType> {
        use DataType::*;
        if !self.is_numeric() || !other.is_numeric() {
            return None;
        }
        Some(match (self, other) {
            (Float64, _) | (_, Float64) => Float64,
            (Float32, Decimal { .. }) | (Decimal { .. }, Float32) => Float64,
            (Float32, _) | (_, Float32) => Float32,
            (Decimal { precision: p1, scale: s1 }, Decimal { precision: p2, scale: s2 }) => {
                let scale = s1.max(s2);
                let int_digits = (p1 - s1).max(p2 - s2);
                Decimal { precision: (int_digits + scale).min(MAX_DECIMAL_PRECISION), scale }
            }
            (Decimal { .. }, int) | (int, Decimal { .. }) => {
                int.integer_as_decimal().common_numeric(self.max_decimal(other))?
            }
            (a, b) => {
                if a.integer_rank() >= b.integer_rank() {
                    a
                } else {
                    b
                }
            }
        })
    }

    fn max_decimal(self, other: DataType) -> DataType {
        if matches!(self, DataType::Decimal { .. }) { self } else { other }
    }

    fn integer_rank(self) -> u8 {
        match self {
            DataType::Int16 => 1,
            DataType::Int32 => 2,
            _ => 3,
        }
    }

    /// The decimal type that holds every value of an integer type.
    pub fn integer_as_decimal(self) -> DataType {
        match self {
            DataType::Int16 => DataType::Decimal { precision: 5, scale: 0 },
            DataType::Int32 => DataType::Decimal { precision: 10, scale: 0 },
            DataType::Int64 => DataType::Decimal { precision: 20, scale: 0 },
            other => other,
        }
    }
}

fn decimal_type(mods: &[u64]) -> Result<DataType> {
    let (precision, scale) = match mods {
        [] => return Ok(DEFAULT_NUMERIC),
        [p] => (*p, 0),
        [p, s] => (*p, *s),
        _ => return Err(Error::syntax("type numeric takes at most two modifiers")),
    };
    if precision < 1 || precision > MAX_DECIMAL_PRECISION as u64 {
        return Err(Error::new(
            SqlState::InvalidParameterValue,
            format!("NUMERIC precision {precision} must be between 1 and {MAX_DECIMAL_PRECISION}"),
        ));
    }
    if scale > precision {
        return Err(Error::new(
            SqlState::InvalidParameterValue,
            format!("NUMERIC scale {scale} must be between 0 and precision {precision}"),
        ));
    }
    Ok(DataType::Decimal { precision: precision as u8, scale: scale as u8 })
}

fn length_mod(name: &str, n: u64) -> Result<u32> {
    if n == 0 || n > 10_485_760 {
        return Err(Error::new(
            SqlState::InvalidParameterValue,
            format!("length for type {name} must be between 1 and 10485760"),
        ));
    }
    Ok(n as u32)
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::Decimal { precision, scale } => write!(f, "numeric({precision},{scale})"),
            DataType::Char(n) => write!(f, "character({n})"),
            DataType::Varchar(Some(n)) => write!(f, "character varying({n})"),
            other => f.write_str(other.pg_name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_names_resolve_with_modifiers() {
        assert_eq!(DataType::from_sql_name("int", &[]).unwrap(), DataType::Int32);
        assert_eq!(
            DataType::from_sql_name("decimal", &[4, 4]).unwrap(),
            DataType::Decimal { precision: 4, scale: 4 }
        );
        assert_eq!(DataType::from_sql_name("float", &[]).unwrap(), DataType::Float64);
        assert_eq!(DataType::from_sql_name("float", &[10]).unwrap(), DataType::Float32);
        assert!(DataType::from_sql_name("numeric", &[3, 5]).is_err());
        assert_eq!(
            DataType::from_sql_name("widget", &[]).unwrap_err().state,
            SqlState::UndefinedObject
        );
    }

    #[test]
    fn numeric_types_combine_like_the_analytical_side() {
        use DataType::*;
        assert_eq!(Int32.common_numeric(Int64), Some(Int64));
        assert_eq!(Int16.common_numeric(Float32), Some(Float32));
        assert_eq!(
            Int32.common_numeric(Decimal { precision: 5, scale: 2 }),
            Some(Decimal { precision: 12, scale: 2 })
        );
        assert_eq!(Text.common_numeric(Int32), None);
    }
}
