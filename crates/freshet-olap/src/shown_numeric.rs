//! A NUMERIC without a declared scale as text. Freshet stores it with a fixed scale
//! ([`freshet_core::types::DEFAULT_NUMERIC`], `Decimal128(38, 10)`) and output shows it without
//! the trailing zeros of that scale ([`freshet_core::types::shown_decimal`]). A cast of such a
//! value to text, explicit (`x::text`) or put in by type coercion (`'total: ' || x`), must read
//! the same: [`ShownNumericText`], an analyzer rule that runs after DataFusion's type coercion,
//! makes each such cast read `freshet_shown_numeric(x)`, the text output shows.
//!
//! An array (an Arrow list) as text is the same case: Arrow's cast writes `[1, 2]`, output
//! shows PostgreSQL's `{1,2}` (`values::array_literal`), so the rule makes such a cast read
//! `freshet_array_text(x)`.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::{DataType as ArrowType, Decimal128Type};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, ExprSchema, Result as DfResult};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{Cast, ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TryCast, Volatility};
use datafusion::optimizer::AnalyzerRule;
use freshet_core::types::{Decimal, DEFAULT_NUMERIC};

use crate::checked::columnar;
use crate::error::no_function_for;

const NAME: &str = "freshet_shown_numeric";

/// `Decimal128(38, 10)`, the analytical side's NUMERIC without a declared scale.
fn is_unscaled_numeric(ty: &ArrowType) -> bool {
    let freshet_core::types::DataType::Decimal { precision, scale } = DEFAULT_NUMERIC else { return false };
    *ty == ArrowType::Decimal128(precision, scale as i8)
}

/// `freshet_shown_numeric(numeric) → text`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ShownNumeric {
    signature: Signature,
}

impl ScalarUDFImpl for ShownNumeric {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        match args {
            [ArrowType::Decimal128(..)] => Ok(ArrowType::Utf8),
            _ => Err(no_function_for(NAME, args)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let values = args.args[0].to_array(args.number_rows)?;
        let ArrowType::Decimal128(_, scale) = values.data_type().clone() else { return Err(no_function_for(NAME, &[values.data_type().clone()])) };
        let decimals = values.as_primitive::<Decimal128Type>();
        each_as_text(&values, scalar, |i| Decimal { value: decimals.value(i), scale: scale.max(0) as u8 }.trimmed().to_string())
    }
}

const ARRAY_NAME: &str = "freshet_array_text";

fn is_list(ty: &ArrowType) -> bool {
    matches!(ty, ArrowType::List(_) | ArrowType::LargeList(_) | ArrowType::FixedSizeList(..))
}

/// `freshet_array_text(anyarray) → text`: PostgreSQL's text form of an array.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ArrayText {
    signature: Signature,
}

impl ScalarUDFImpl for ArrayText {
    fn name(&self) -> &str {
        ARRAY_NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        match args {
            [t] if is_list(t) => Ok(ArrowType::Utf8),
            _ => Err(no_function_for(ARRAY_NAME, args)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let values = args.args[0].to_array(args.number_rows)?;
        each_as_text(&values, scalar, |i| crate::values::array_literal(&values, i))
    }
}

/// A one-argument function's result: the text of each non-null row of `values` (`text` of
/// its position; a NULL stays NULL), as a scalar if the argument was one.
fn each_as_text(values: &ArrayRef, scalar: bool, text: impl Fn(usize) -> String) -> DfResult<ColumnarValue> {
    let mut out = StringBuilder::with_capacity(values.len(), values.len() * 8);
    for i in 0..values.len() {
        if values.is_null(i) {
            out.append_null();
        } else {
            out.append_value(text(i));
        }
    }
    columnar(Arc::new(out.finish()), scalar)
}

/// The analyzer rule (see the module documentation); it carries the functions it calls.
#[derive(Debug)]
pub struct ShownNumericText {
    function: Arc<ScalarUDF>,
    array: Arc<ScalarUDF>,
}

impl Default for ShownNumericText {
    fn default() -> Self {
        let signature = Signature::any(1, Volatility::Immutable);
        ShownNumericText {
            function: Arc::new(ScalarUDF::new_from_impl(ShownNumeric { signature: signature.clone() })),
            array: Arc::new(ScalarUDF::new_from_impl(ArrayText { signature })),
        }
    }
}

impl ShownNumericText {
    fn rewrite(&self, e: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
        let (inner, field, try_cast) = match &e {
            Expr::Cast(Cast { expr, field }) => (expr, field, false),
            Expr::TryCast(TryCast { expr, field }) => (expr, field, true),
            _ => return Ok(Transformed::no(e)),
        };
        if !matches!(field.data_type(), ArrowType::Utf8 | ArrowType::Utf8View | ArrowType::LargeUtf8) {
            return Ok(Transformed::no(e));
        }
        let function = match inner.get_type(schema as &dyn ExprSchema) {
            Ok(t) if is_unscaled_numeric(&t) => &self.function,
            Ok(t) if is_list(&t) => &self.array,
            _ => return Ok(Transformed::no(e)),
        };
        // The cast stays (from text now), keeping its result field.
        let text = Box::new(Expr::ScalarFunction(ScalarFunction::new_udf(function.clone(), vec![inner.as_ref().clone()])));
        let field = field.clone();
        Ok(Transformed::yes(if try_cast { Expr::TryCast(TryCast { expr: text, field }) } else { Expr::Cast(Cast::new_from_field(text, field)) }))
    }
}

impl AnalyzerRule for ShownNumericText {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        crate::checked::rewrite_expressions(plan, &|e, schema| self.rewrite(e, schema))
    }

    fn name(&self) -> &str {
        "freshet_shown_numeric_text"
    }
}
