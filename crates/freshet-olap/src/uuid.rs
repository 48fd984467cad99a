//! `uuid` on the analytical side. A uuid column is scanned as its canonical text (`Utf8View`)
//! with the field metadata that names its SQL type (`types::SQL_TYPE_KEY`), so comparisons,
//! ORDER BY, joins and grouping work on the text, whose order is the uuid order.
//!
//! What text alone would get wrong is input that is not canonical: PostgreSQL reads
//! `'A0EEBC99-…'` or `'{a0eebc99…}'` as the same uuid. So:
//! - `CAST(x AS uuid)` / `x::uuid` becomes `freshet_uuid(x)` (`rewrite::catalog_spellings`),
//!   which gives the canonical text or fails with 22P02, typed uuid;
//! - [`UuidLiterals`], an analyzer rule, rewrites each string constant compared with a uuid
//!   column (`=`, `<>`, `<`, …, `IN (…)`) into its canonical text, or fails with 22P02 as
//!   PostgreSQL's uuid input does;
//! - `gen_random_uuid()` (and `uuid_generate_v4()`) gives a new random uuid per row.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, FieldRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, ExprSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, LogicalPlan, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::logical_expr::Operator as Op;
use datafusion::optimizer::AnalyzerRule;

use crate::error::{no_function_for, to_datafusion};
use crate::types::SQL_TYPE_KEY;

/// The name of the cast function (`x::uuid`).
pub const CAST_FUNCTION: &str = "freshet_uuid";

/// The functions, for the engine to register.
pub(crate) fn functions() -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::new_from_impl(ToUuid { signature: Signature::any(1, Volatility::Immutable) }),
        ScalarUDF::new_from_impl(RandomUuid { name: "gen_random_uuid", signature: Signature::nullary(Volatility::Volatile) }),
        ScalarUDF::new_from_impl(RandomUuid { name: "uuid_generate_v4", signature: Signature::nullary(Volatility::Volatile) }),
    ]
}

/// A result field of type uuid: text with the metadata naming the SQL type.
fn uuid_field(nullable: bool) -> FieldRef {
    Arc::new(Field::new("uuid", ArrowType::Utf8, nullable).with_metadata([(SQL_TYPE_KEY.to_string(), "uuid:".to_string())].into()))
}

fn is_uuid(field: &Field) -> bool {
    field.metadata().get(SQL_TYPE_KEY).is_some_and(|t| t == "uuid:")
}

/// `freshet_uuid(text)`: the canonical text of a uuid, typed uuid (22P02 for other text).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ToUuid {
    signature: Signature,
}

impl ScalarUDFImpl for ToUuid {
    fn name(&self) -> &str {
        CAST_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        match args {
            [ArrowType::Utf8 | ArrowType::Utf8View | ArrowType::LargeUtf8 | ArrowType::Null] => Ok(ArrowType::Utf8),
            _ => Err(no_function_for("uuid", args)),
        }
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let types: Vec<ArrowType> = args.arg_fields.iter().map(|f| f.data_type().clone()).collect();
        self.return_type(&types)?;
        Ok(uuid_field(args.arg_fields.iter().any(|f| f.is_nullable())))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let n = if scalar { 1 } else { args.number_rows };
        let text = cast(&args.args[0].to_array(n)?, &ArrowType::Utf8)?;
        let text = text.as_string::<i32>();
        let mut out = StringBuilder::with_capacity(n, n * 36);
        for i in 0..n {
            if text.is_null(i) {
                out.append_null();
            } else {
                out.append_value(freshet_core::types::uuid::parse(text.value(i)).map_err(to_datafusion)?);
            }
        }
        crate::checked::columnar(Arc::new(out.finish()), scalar)
    }
}

/// `gen_random_uuid()`: a new random (version 4) uuid for every row.
#[derive(Debug, PartialEq, Eq, Hash)]
struct RandomUuid {
    name: &'static str,
    signature: Signature,
}

impl ScalarUDFImpl for RandomUuid {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Utf8)
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> DfResult<FieldRef> {
        Ok(uuid_field(false))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let n = args.number_rows;
        let mut out = StringBuilder::with_capacity(n, n * 36);
        for _ in 0..n {
            out.append_value(freshet_core::types::uuid::random());
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// The analyzer rule that puts string constants compared with uuid columns in canonical form
/// (see the module documentation).
#[derive(Debug, Default)]
pub struct UuidLiterals;

impl AnalyzerRule for UuidLiterals {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        crate::checked::rewrite_expressions(plan, &canonical_comparison)
    }

    fn name(&self) -> &str {
        "freshet_uuid_literals"
    }
}

/// Whether `e` is a column of `schema` that holds uuids.
fn uuid_column(e: &Expr, schema: &DFSchema) -> bool {
    match e {
        Expr::Column(c) => schema.field_from_column(c).is_ok_and(|f| is_uuid(f)),
        Expr::Cast(c) => uuid_column(&c.expr, schema),
        _ => false,
    }
}

/// A string constant (possibly cast to another string type) with its text in canonical uuid
/// form; `None` if `e` is not one.
fn canonical_literal(e: &Expr) -> DfResult<Option<Expr>> {
    let canonical = |s: &str| freshet_core::types::uuid::parse(s).map_err(to_datafusion);
    Ok(match e {
        Expr::Literal(ScalarValue::Utf8(Some(s)), m) => Some(Expr::Literal(ScalarValue::Utf8(Some(canonical(s)?)), m.clone())),
        Expr::Literal(ScalarValue::Utf8View(Some(s)), m) => Some(Expr::Literal(ScalarValue::Utf8View(Some(canonical(s)?)), m.clone())),
        Expr::Literal(ScalarValue::LargeUtf8(Some(s)), m) => Some(Expr::Literal(ScalarValue::LargeUtf8(Some(canonical(s)?)), m.clone())),
        Expr::Cast(c) => canonical_literal(&c.expr)?.map(|inner| Expr::Cast(datafusion::logical_expr::Cast { expr: Box::new(inner), field: c.field.clone() })),
        _ => None,
    })
}

fn canonical_comparison(e: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Op::Eq | Op::NotEq | Op::Lt | Op::LtEq | Op::Gt | Op::GtEq | Op::IsDistinctFrom | Op::IsNotDistinctFrom) =>
        {
            let (l, r) = if uuid_column(&left, schema) {
                (None, canonical_literal(&right)?)
            } else if uuid_column(&right, schema) {
                (canonical_literal(&left)?, None)
            } else {
                (None, None)
            };
            let changed = l.is_some() || r.is_some();
            let e = Expr::BinaryExpr(BinaryExpr { left: l.map(Box::new).unwrap_or(left), op, right: r.map(Box::new).unwrap_or(right) });
            Ok(if changed { Transformed::yes(e) } else { Transformed::no(e) })
        }
        Expr::InList(InList { expr, list, negated }) if uuid_column(&expr, schema) => {
            let mut changed = false;
            let list = list
                .into_iter()
                .map(|item| match canonical_literal(&item)? {
                    Some(c) => {
                        changed = true;
                        Ok(c)
                    }
                    None => Ok(item),
                })
                .collect::<DfResult<Vec<_>>>()?;
            let e = Expr::InList(InList { expr, list, negated });
            Ok(if changed { Transformed::yes(e) } else { Transformed::no(e) })
        }
        other => Ok(Transformed::no(other)),
    }
}
