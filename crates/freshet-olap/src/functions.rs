//! Scalar functions PostgreSQL has and DataFusion lacks: `md5(text)` and
//! `width_bucket(operand, low, high, count)`.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Builder, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType as ArrowType, Float64Type, Int64Type};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use freshet_core::{Error, SqlState};
use md5::{Digest, Md5};

use crate::error::to_datafusion;

/// The functions, for the engine to register.
pub(crate) fn all() -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::new_from_impl(Md5Text { signature: Signature::any(1, Volatility::Immutable) }),
        ScalarUDF::new_from_impl(WidthBucket { signature: Signature::any(4, Volatility::Immutable) }),
    ]
}

fn columnar(result: ArrayRef, scalar: bool) -> DfResult<ColumnarValue> {
    Ok(if scalar { ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?) } else { ColumnarValue::Array(result) })
}

fn undefined(name: &str, args: &[ArrowType]) -> datafusion::error::DataFusionError {
    let names: Vec<&str> = args.iter().map(|t| crate::types::sql_type_of_arrow(t).pg_name()).collect();
    let mut e = Error::new(SqlState::UndefinedFunction, format!("function {name}({}) does not exist", names.join(", ")));
    e.hint = Some("No function matches the given name and argument types. You might need to add explicit type casts.".into());
    to_datafusion(e)
}

/// `md5(text) → text`: the MD5 digest of the text's UTF-8 bytes in lower-case hex.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Md5Text {
    signature: Signature,
}

impl ScalarUDFImpl for Md5Text {
    fn name(&self) -> &str {
        "md5"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        match args {
            [ArrowType::Utf8 | ArrowType::Utf8View | ArrowType::LargeUtf8 | ArrowType::Null] => Ok(ArrowType::Utf8),
            _ => Err(undefined("md5", args)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let texts = cast(&args.args[0].to_array(args.number_rows)?, &ArrowType::Utf8)?;
        let texts = texts.as_string::<i32>();
        let mut out = StringBuilder::with_capacity(texts.len(), texts.len() * 32);
        for i in 0..texts.len() {
            if texts.is_null(i) {
                out.append_null();
            } else {
                let digest = Md5::digest(texts.value(i).as_bytes());
                out.append_value(digest.iter().map(|b| format!("{b:02x}")).collect::<String>());
            }
        }
        columnar(Arc::new(out.finish()), scalar)
    }
}

/// `width_bucket(operand, low, high, count) → integer`: the bucket (1 to count) of `operand`
/// among `count` equal-width buckets from `low` to `high` (descending if `low > high`); 0
/// before the first, count + 1 past the last, as PostgreSQL numbers them.
#[derive(Debug, PartialEq, Eq, Hash)]
struct WidthBucket {
    signature: Signature,
}

/// One operand's bucket.
fn bucket(operand: f64, low: f64, high: f64, count: i64) -> Result<i32, Error> {
    let invalid = |m: &str| Error::new(SqlState::custom("2201G").unwrap_or(SqlState::InvalidParameterValue), m.to_string());
    if count <= 0 {
        return Err(invalid("count must be greater than zero"));
    }
    if low == high {
        return Err(invalid("lower bound cannot equal upper bound"));
    }
    if !operand.is_finite() || !low.is_finite() || !high.is_finite() {
        return Err(invalid("operand, lower bound, and upper bound cannot be NaN or infinity"));
    }
    let n = count as f64;
    let b = if low < high {
        if operand < low {
            0.0
        } else if operand >= high {
            n + 1.0
        } else {
            ((operand - low) / (high - low) * n).floor() + 1.0
        }
    } else if operand > low {
        0.0
    } else if operand <= high {
        n + 1.0
    } else {
        ((low - operand) / (low - high) * n).floor() + 1.0
    };
    i32::try_from(b as i64).map_err(|_| Error::out_of_range("integer"))
}

impl ScalarUDFImpl for WidthBucket {
    fn name(&self) -> &str {
        "width_bucket"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        let number = |t: &ArrowType| t.is_numeric() || *t == ArrowType::Null;
        match args {
            [v, l, h, c] if number(v) && number(l) && number(h) && (c.is_integer() || *c == ArrowType::Null) => Ok(ArrowType::Int32),
            _ => Err(undefined("width_bucket", args)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = args.number_rows;
        let floats = |i: usize| -> DfResult<ArrayRef> { Ok(cast(&args.args[i].to_array(n)?, &ArrowType::Float64)?) };
        let (v, l, h) = (floats(0)?, floats(1)?, floats(2)?);
        let (v, l, h) = (v.as_primitive::<Float64Type>(), l.as_primitive::<Float64Type>(), h.as_primitive::<Float64Type>());
        let c = cast(&args.args[3].to_array(n)?, &ArrowType::Int64)?;
        let c = c.as_primitive::<Int64Type>();
        let mut out = Int32Builder::with_capacity(n);
        for i in 0..n {
            if v.is_null(i) || l.is_null(i) || h.is_null(i) || c.is_null(i) {
                out.append_null();
            } else {
                out.append_value(bucket(v.value(i), l.value(i), h.value(i), c.value(i)).map_err(to_datafusion)?);
            }
        }
        columnar(Arc::new(out.finish()), scalar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_numbered_as_postgresql_numbers_them() {
        assert_eq!(bucket(5.35, 0.024, 10.06, 5).unwrap(), 3);
        assert_eq!(bucket(-1.0, 0.0, 10.0, 5).unwrap(), 0);
        assert_eq!(bucket(10.0, 0.0, 10.0, 5).unwrap(), 6);
        assert_eq!(bucket(0.0, 0.0, 10.0, 5).unwrap(), 1);
        assert_eq!(bucket(7.0, 10.0, 0.0, 5).unwrap(), 2);
        assert_eq!(bucket(1.0, 0.0, 10.0, 0).unwrap_err().state.code(), "2201G");
        assert_eq!(bucket(1.0, 2.0, 2.0, 3).unwrap_err().state.code(), "2201G");
    }
}
