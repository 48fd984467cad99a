//! Mapping between Freshet's SQL types and Arrow's.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef, TimeUnit};
use freshet_core::catalog::TableDef;
use freshet_core::types::{DataType, DEFAULT_NUMERIC};

/// The Arrow type a column of `ty` is scanned as (storage's layout, so no conversion).
pub fn arrow_type(ty: DataType) -> ArrowType {
    match ty {
        DataType::Bool => ArrowType::Boolean,
        DataType::Int16 => ArrowType::Int16,
        DataType::Int32 => ArrowType::Int32,
        DataType::Int64 => ArrowType::Int64,
        DataType::Float32 => ArrowType::Float32,
        DataType::Float64 => ArrowType::Float64,
        DataType::Decimal { precision, scale } => ArrowType::Decimal128(precision, scale as i8),
        DataType::Char(_) | DataType::Varchar(_) | DataType::Text | DataType::Uuid => ArrowType::Utf8View,
        DataType::Date => ArrowType::Date32,
        DataType::Timestamp => ArrowType::Timestamp(TimeUnit::Microsecond, None),
        DataType::TimestampTz => ArrowType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
    }
}

/// The zone of Arrow's timestamps for `timestamp with time zone`: the instants are UTC, and the
/// session's time zone is UTC (DataFusion's default `datafusion.execution.time_zone`).
pub const UTC: &str = "+00:00";

/// Field metadata key holding the SQL type of a column, so that results keep e.g. CHAR(n),
/// VARCHAR(n) and uuid (canonical text) where Arrow only knows "string".
pub const SQL_TYPE_KEY: &str = "freshet.sql_type";

pub fn table_schema(def: &TableDef) -> SchemaRef {
    let fields: Vec<Field> = def
        .columns
        .iter()
        .map(|c| {
            let mut f = Field::new(&c.name, arrow_type(c.ty), c.nullable);
            if matches!(c.ty, DataType::Char(_) | DataType::Varchar(Some(_)) | DataType::Uuid) {
                f = f.with_metadata([(SQL_TYPE_KEY.to_string(), encode_sql_type(c.ty))].into());
            }
            f
        })
        .collect();
    Arc::new(Schema::new(fields))
}

fn encode_sql_type(ty: DataType) -> String {
    match ty {
        DataType::Char(n) => format!("char:{n}"),
        DataType::Varchar(Some(n)) => format!("varchar:{n}"),
        DataType::Uuid => "uuid:".to_string(),
        _ => String::new(),
    }
}

/// The SQL type of a result field: its recorded SQL type if any, else the nearest type of its
/// Arrow type. Types without a SQL counterpart are sent as text.
pub fn sql_type(field: &Field) -> DataType {
    let text = matches!(field.data_type(), ArrowType::Utf8View | ArrowType::Utf8);
    if text && field.metadata().get(SQL_TYPE_KEY).is_some_and(|t| t == "uuid:") {
        return DataType::Uuid;
    }
    if let Some(t) = field.metadata().get(SQL_TYPE_KEY)
        && let Some((kind, n)) = t.split_once(':')
            && let Ok(n) = n.parse() {
                match kind {
                    "char" if field.data_type() == &ArrowType::Utf8View || field.data_type() == &ArrowType::Utf8 => {
                        return DataType::Char(n)
                    }
                    "varchar" if field.data_type() == &ArrowType::Utf8View || field.data_type() == &ArrowType::Utf8 => {
                        return DataType::Varchar(Some(n))
                    }
                    _ => {}
                }
            }
    sql_type_of_arrow(field.data_type())
}

pub fn sql_type_of_arrow(t: &ArrowType) -> DataType {
    match t {
        ArrowType::Boolean => DataType::Bool,
        ArrowType::Int8 | ArrowType::Int16 | ArrowType::UInt8 => DataType::Int16,
        ArrowType::Int32 | ArrowType::UInt16 => DataType::Int32,
        ArrowType::Int64 | ArrowType::UInt32 => DataType::Int64,
        ArrowType::UInt64 => DataType::Decimal { precision: 20, scale: 0 },
        ArrowType::Float16 | ArrowType::Float32 => DataType::Float32,
        ArrowType::Float64 => DataType::Float64,
        ArrowType::Decimal32(p, s) | ArrowType::Decimal64(p, s) | ArrowType::Decimal128(p, s) if *s >= 0 => {
            DataType::Decimal { precision: *p, scale: *s as u8 }
        }
        ArrowType::Decimal256(..) | ArrowType::Decimal128(..) => DEFAULT_NUMERIC,
        ArrowType::Date32 | ArrowType::Date64 => DataType::Date,
        ArrowType::Timestamp(_, None) => DataType::Timestamp,
        ArrowType::Timestamp(_, Some(_)) => DataType::TimestampTz,
        _ => DataType::Text,
    }
}
