//! Integer arithmetic that fails on overflow, as PostgreSQL's does.
//!
//! DataFusion's `+`, `-` and `*` on integers wrap around on overflow (its physical planner
//! never asks its binary expressions to check), so `int4 * int4` past 2^31 would return a
//! wrong number where PostgreSQL says `integer out of range` (22003). The short path checks
//! every integer operation (`freshet_core::sql::expr`); this analyzer rule makes the
//! analytical side do the same: after type coercion, each `+`, `-` and `*` whose operands are
//! both 16-, 32- or 64-bit signed integers (and each negation of one) becomes a call of `freshet_checked_add`, `_sub` or
//! `_mul`, which compute with Arrow's checked kernels. An expression keeps its name, so the
//! plan's schema does not change. Division and remainder already fail on a zero divisor and
//! on overflow in DataFusion.
//!
//! A cast from numeric or a floating-point type to an integer rounds in PostgreSQL (numeric
//! half away from zero, floating point half to even, as `rint`), where Arrow's cast truncates:
//! the rule rounds the operand first (`freshet_round_to_integer`), so `2.5::int` is 3 and
//! `2.7::float8::int` is 3 on both paths.
//!
//! `sum` of a bigint wraps around in DataFusion too; the rule gives such a sum (one whose
//! argument is a bigint of its own, not an integer widened to one for the sum) a checked
//! accumulator, `freshet_checked_sum`, that fails with `bigint out of range` as the short path
//! does. (PostgreSQL returns numeric for `sum(bigint)`; both of Freshet's paths return bigint.)

use std::sync::Arc;

use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::compute::sum_checked;
use datafusion::arrow::datatypes::{Decimal128Type, Float32Type, Float64Type, Int64Type};
use datafusion::logical_expr::expr::{AggregateFunction, Cast};
use datafusion::logical_expr::function::AccumulatorArgs;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use freshet_core::Error;

use crate::error::to_datafusion;
use crate::types::sql_type_of_arrow;

/// A function's result: one value when every argument was one, else the array.
pub(crate) fn columnar(result: ArrayRef, scalar: bool) -> DfResult<ColumnarValue> {
    Ok(if scalar { ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?) } else { ColumnarValue::Array(result) })
}

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
        columnar(result, scalars)
    }
}

/// Rounds a numeric (half away from zero) or a floating-point value (half to even) to an
/// integral value of the same type, for a cast to an integer type to be exact.
#[derive(Debug, PartialEq, Eq, Hash)]
struct RoundToInteger {
    signature: Signature,
}

impl ScalarUDFImpl for RoundToInteger {
    fn name(&self) -> &str {
        "freshet_round_to_integer"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(args[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let values = args.args[0].to_array(args.number_rows)?;
        let rounded: ArrayRef = match values.data_type() {
            ArrowType::Float64 => Arc::new(values.as_primitive::<Float64Type>().unary::<_, Float64Type>(f64::round_ties_even)),
            ArrowType::Float32 => Arc::new(values.as_primitive::<Float32Type>().unary::<_, Float32Type>(f32::round_ties_even)),
            ArrowType::Decimal128(p, s) => {
                let unit = 10i128.pow(*s as u32);
                let round = |v: i128| {
                    let (q, r) = (v / unit, v % unit);
                    let q = if r.abs() * 2 >= unit { q + r.signum() } else { q };
                    q * unit
                };
                Arc::new(values.as_primitive::<Decimal128Type>().unary::<_, Decimal128Type>(round).with_precision_and_scale(*p, *s)?)
            }
            _ => values,
        };
        columnar(rounded, scalar)
    }
}

/// `sum(bigint)` with an accumulator that fails on overflow.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedSum {
    signature: Signature,
}

impl AggregateUDFImpl for CheckedSum {
    fn name(&self) -> &str {
        "freshet_checked_sum"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Int64)
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(SumAccumulator { sum: None }))
    }
}

/// The sum so far; `None` until a non-NULL value arrives (the sum of no rows is NULL).
#[derive(Debug)]
struct SumAccumulator {
    sum: Option<i64>,
}

impl SumAccumulator {
    fn add(&mut self, values: &ArrayRef) -> DfResult<()> {
        let overflow = || to_datafusion(Error::out_of_range("bigint"));
        let Some(part) = sum_checked(values.as_primitive::<Int64Type>()).map_err(|_| overflow())? else { return Ok(()) };
        self.sum = Some(match self.sum {
            Some(s) => s.checked_add(part).ok_or_else(overflow)?,
            None => part,
        });
        Ok(())
    }
}

impl Accumulator for SumAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        self.add(&values[0])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        self.add(&states[0])
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Int64(self.sum)])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        Ok(ScalarValue::Int64(self.sum))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

/// The analyzer rule (see the module documentation).
#[derive(Debug)]
pub struct CheckedIntegerArithmetic {
    add: Arc<ScalarUDF>,
    sub: Arc<ScalarUDF>,
    mul: Arc<ScalarUDF>,
    sum: Arc<AggregateUDF>,
    round: Arc<ScalarUDF>,
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
            sum: Arc::new(AggregateUDF::new_from_impl(CheckedSum {
                signature: Signature::exact(vec![ArrowType::Int64], Volatility::Immutable),
            })),
            round: Arc::new(ScalarUDF::new_from_impl(RoundToInteger { signature: Signature::any(1, Volatility::Immutable) })),
        }
    }
}

fn signed_integer(t: &ArrowType) -> bool {
    matches!(t, ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64)
}

impl CheckedIntegerArithmetic {
    fn rewrite(&self, expr: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
        if let Expr::Cast(c) = &expr
            && signed_integer(c.field.data_type())
            && matches!(c.expr.get_type(schema), Ok(ArrowType::Float32 | ArrowType::Float64 | ArrowType::Decimal128(_, 1..)))
        {
            let Expr::Cast(c) = expr else { unreachable!("matched above") };
            let rounded = self.round.call(vec![*c.expr]);
            return Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(Box::new(rounded), c.field))));
        }
        if let Expr::Negative(operand) = &expr
            && let Ok(t) = operand.get_type(schema)
            && signed_integer(&t)
        {
            // -x as 0 - x: the negation of the smallest integer is out of range.
            let Expr::Negative(operand) = expr else { unreachable!("matched above") };
            let zero = Expr::Literal(ScalarValue::new_zero(&t)?, None);
            return Ok(Transformed::yes(self.sub.call(vec![zero, *operand])));
        }
        if let Expr::AggregateFunction(f) = &expr {
            return self.rewrite_sum(f, schema).map(|e| e.map_or_else(|| Transformed::no(expr), Transformed::yes));
        }
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

impl CheckedIntegerArithmetic {
    /// A plain `sum` of a bigint of its own, with the checked accumulator.
    fn rewrite_sum(&self, f: &AggregateFunction, schema: &DFSchema) -> DfResult<Option<Expr>> {
        let p = &f.params;
        if f.func.name() != "sum" || p.args.len() != 1 || p.distinct || !p.order_by.is_empty() {
            return Ok(None);
        }
        let arg = &p.args[0];
        if !matches!(arg.get_type(schema), Ok(ArrowType::Int64)) {
            return Ok(None);
        }
        // A smaller integer widened for the sum: its sum cannot reach the bigint range.
        if let Expr::Cast(c) = arg
            && let Ok(inner) = c.expr.get_type(schema)
            && matches!(inner, ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int8 | ArrowType::UInt8 | ArrowType::UInt16)
        {
            return Ok(None);
        }
        Ok(Some(Expr::AggregateFunction(AggregateFunction::new_udf(
            self.sum.clone(),
            p.args.clone(),
            false,
            p.filter.clone(),
            vec![],
            p.null_treatment,
        ))))
    }
}

/// Rewrites every expression of a plan and of its subqueries bottom-up with `f`, which sees
/// the schema of the expression's inputs; output names stay as they were. What each of
/// Freshet's analyzer rules does with its own rewrite.
pub(crate) fn rewrite_expressions(plan: LogicalPlan, f: &dyn Fn(Expr, &DFSchema) -> DfResult<Transformed<Expr>>) -> DfResult<LogicalPlan> {
    plan.transform_up_with_subqueries(|plan| {
        let schema = merge_schema(&plan.inputs());
        let names = NamePreserver::new(&plan);
        plan.map_expressions(|expr| {
            let name = names.save(&expr);
            expr.transform_up(|e| f(e, &schema))?.map_data(|e| Ok(name.restore(e)))
        })
    })
    .map(|t| t.data)
}

impl AnalyzerRule for CheckedIntegerArithmetic {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        rewrite_expressions(plan, &|e, schema| self.rewrite(e, schema))
    }

    fn name(&self) -> &str {
        "freshet_checked_integer_arithmetic"
    }
}
