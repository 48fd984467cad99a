//! Integer arithmetic that fails on overflow, as PostgreSQL's does.
//!
//! DataFusion's `+`, `-` and `*` on integers wrap around on overflow (its physical planner
//! never asks its binary expressions to check), so `int4 * int4` past 2^31 would return a
//! wrong number where PostgreSQL says `integer out of range` (22003). The short path checks
//! every integer operation (`freshet_core::sql::expr`); this analyzer rule makes the
//! analytical side do the same: after type coercion, each `+`, `-` and `*` whose operands are
//! both 16-, 32- or 64-bit signed integers becomes a call of `freshet_checked_add`, `_sub` or
//! `_mul`, which compute with Arrow's checked kernels. An expression keeps its name, so the
//! plan's schema does not change. Division and remainder already fail on a zero divisor and
//! on overflow in DataFusion.

use std::sync::Arc;

use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use freshet_core::Error;

use crate::error::to_datafusion;
use crate::types::sql_type_of_arrow;

/// One checked operation as a scalar function of two integers of one type.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedOp {
    op: Operator,
    name: &'static str,
    signature: Signature,
}

impl ScalarUDFImpl for CheckedOp {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(args[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalars = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (l, r) = (&arrays[0], &arrays[1]);
        let result = match self.op {
            Operator::Plus => numeric::add(l, r),
            Operator::Minus => numeric::sub(l, r),
            _ => numeric::mul(l, r),
        }
        .map_err(|e| match e {
            // PostgreSQL's words: "integer out of range".
            ArrowError::ArithmeticOverflow(_) => to_datafusion(Error::out_of_range(sql_type_of_arrow(l.data_type()).pg_name())),
            other => other.into(),
        })?;
        Ok(if scalars {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?)
        } else {
            ColumnarValue::Array(result)
        })
    }
}

/// The analyzer rule (see the module documentation).
#[derive(Debug)]
pub struct CheckedIntegerArithmetic {
    add: Arc<ScalarUDF>,
    sub: Arc<ScalarUDF>,
    mul: Arc<ScalarUDF>,
}

impl Default for CheckedIntegerArithmetic {
    fn default() -> Self {
        let udf = |op, name| {
            let signature = Signature::uniform(2, vec![ArrowType::Int16, ArrowType::Int32, ArrowType::Int64], Volatility::Immutable);
            Arc::new(ScalarUDF::new_from_impl(CheckedOp { op, name, signature }))
        };
        CheckedIntegerArithmetic {
            add: udf(Operator::Plus, "freshet_checked_add"),
            sub: udf(Operator::Minus, "freshet_checked_sub"),
            mul: udf(Operator::Multiply, "freshet_checked_mul"),
        }
    }
}

fn signed_integer(t: &ArrowType) -> bool {
    matches!(t, ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64)
}

impl CheckedIntegerArithmetic {
    fn rewrite(&self, expr: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &expr else { return Ok(Transformed::no(expr)) };
        let udf = match op {
            Operator::Plus => &self.add,
            Operator::Minus => &self.sub,
            Operator::Multiply => &self.mul,
            _ => return Ok(Transformed::no(expr)),
        };
        // An operand whose type cannot be told here (an untyped parameter, an outer
        // reference) leaves the operation as it is.
        let (Ok(l), Ok(r)) = (left.get_type(schema), right.get_type(schema)) else { return Ok(Transformed::no(expr)) };
        if l != r || !signed_integer(&l) {
            return Ok(Transformed::no(expr));
        }
        let Expr::BinaryExpr(BinaryExpr { left, right, .. }) = expr else { unreachable!("matched above") };
        Ok(Transformed::yes(udf.call(vec![*left, *right])))
    }
}

impl AnalyzerRule for CheckedIntegerArithmetic {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.transform_up_with_subqueries(|plan| {
            let schema = merge_schema(&plan.inputs());
            let names = NamePreserver::new(&plan);
            plan.map_expressions(|expr| {
                let name = names.save(&expr);
                expr.transform_up(|e| self.rewrite(e, &schema))?.map_data(|e| Ok(name.restore(e)))
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "freshet_checked_integer_arithmetic"
    }
}
