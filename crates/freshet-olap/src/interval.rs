//! `interval * number`, `number * interval` and `interval / number`, which DataFusion does not
//! plan (it coerces the number to an interval and then has no kernel for the product).
//!
//! An expression planner sees each binary operation as the SQL planner builds it, before type
//! coercion: when one side is an interval and the other a number, the operation becomes a call
//! of `freshet_interval_mul` or `freshet_interval_div` with the number as float8, which is how
//! PostgreSQL types these operators; and `date ± interval` adds to the date as a timestamp,
//! PostgreSQL's result type. Both functions compute with the short path's arithmetic
//! ([`Interval::scaled`]), so the two paths give the same intervals.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, IntervalMonthDayNanoBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType as ArrowType, Float64Type, IntervalMonthDayNano, IntervalMonthDayNanoType, IntervalUnit, TimeUnit};
use datafusion::common::{DFSchema, Result as DfResult};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{cast as cast_expr, ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};
use datafusion::sql::sqlparser::ast::BinaryOperator;
use freshet_core::types::datetime::Interval;
use freshet_core::{Error, SqlState};

use crate::checked::columnar;
use crate::types::sql_type_of_arrow;
use crate::error::{no_function_for, to_datafusion};

const MONTH_DAY_NANO: ArrowType = ArrowType::Interval(IntervalUnit::MonthDayNano);

/// The expression planner (see the module documentation).
#[derive(Debug)]
pub(crate) struct IntervalArithmetic {
    mul: Arc<ScalarUDF>,
    div: Arc<ScalarUDF>,
}

impl Default for IntervalArithmetic {
    fn default() -> Self {
        let udf = |divide| Arc::new(ScalarUDF::new_from_impl(ScaleInterval { divide, signature: Signature::any(2, Volatility::Immutable) }));
        IntervalArithmetic { mul: udf(false), div: udf(true) }
    }
}

/// A type's SQL name for a message.
fn sql_name(t: &ArrowType) -> String {
    sql_type_of_arrow(t).pg_name().to_string()
}

fn is_number(t: &ArrowType) -> bool {
    t.is_numeric() || matches!(t, ArrowType::Null)
}

impl ExprPlanner for IntervalArithmetic {
    fn plan_binary_op(&self, expr: RawBinaryExpr, schema: &DFSchema) -> DfResult<PlannerResult<RawBinaryExpr>> {
        // A side whose type cannot be told here (an untyped parameter) leaves the operation to
        // DataFusion.
        let (Ok(l), Ok(r)) = (expr.left.get_type(schema), expr.right.get_type(schema)) else { return Ok(PlannerResult::Original(expr)) };
        let interval = |t: &ArrowType| matches!(t, ArrowType::Interval(_));
        let date = |t: &ArrowType| matches!(t, ArrowType::Date32 | ArrowType::Date64);
        // date ± interval is a timestamp in PostgreSQL (DataFusion keeps a date, dropping the
        // interval's time of day).
        let timestamp = |e| cast_expr(e, ArrowType::Timestamp(TimeUnit::Microsecond, None));
        match expr.op {
            BinaryOperator::Plus | BinaryOperator::Minus if date(&l) && interval(&r) => {
                return Ok(PlannerResult::Original(RawBinaryExpr { op: expr.op, left: timestamp(expr.left), right: expr.right }));
            }
            BinaryOperator::Plus if interval(&l) && date(&r) => {
                return Ok(PlannerResult::Original(RawBinaryExpr { op: expr.op, left: expr.left, right: timestamp(expr.right) }));
            }
            _ => {}
        }
        // A string constant is read as the number (PostgreSQL's unknown-type literal, 22P02 if
        // it is not one); any other operand that is no number has no operator.
        let operand = |e: &Expr, t: &ArrowType| -> DfResult<bool> {
            if is_number(t) || matches!(e, Expr::Literal(v, _) if v.data_type().is_string()) {
                return Ok(true);
            }
            let symbol = if expr.op == BinaryOperator::Divide { "/" } else { "*" };
            let (left, right) = if interval(&l) { ("interval".to_string(), sql_name(t)) } else { (sql_name(t), "interval".to_string()) };
            Err(to_datafusion(
                Error::new(SqlState::UndefinedFunction, format!("operator does not exist: {left} {symbol} {right}"))
                    .with_hint("No operator matches the given name and argument types. You might need to add explicit type casts."),
            ))
        };
        let (udf, interval_side, number) = match expr.op {
            BinaryOperator::Multiply if interval(&l) && !interval(&r) && operand(&expr.right, &r)? => (&self.mul, expr.left, expr.right),
            BinaryOperator::Multiply if interval(&r) && !interval(&l) && operand(&expr.left, &l)? => (&self.mul, expr.right, expr.left),
            BinaryOperator::Divide if interval(&l) && !interval(&r) && operand(&expr.right, &r)? => (&self.div, expr.left, expr.right),
            _ => return Ok(PlannerResult::Original(expr)),
        };
        Ok(PlannerResult::Planned(udf.call(vec![cast_expr(interval_side, MONTH_DAY_NANO), cast_expr(number, ArrowType::Float64)])))
    }
}

/// An Arrow interval as Freshet's: Arrow keeps nanoseconds, PostgreSQL microseconds (a
/// result is therefore rounded to a microsecond, as PostgreSQL's is).
pub(crate) fn from_arrow(v: IntervalMonthDayNano) -> Interval {
    Interval { months: v.months, days: v.days, micros: v.nanoseconds / 1_000 }
}

/// Freshet's interval as Arrow's (22008 if its time does not fit in nanoseconds).
pub(crate) fn to_arrow(iv: Interval) -> DfResult<IntervalMonthDayNano> {
    let nanos = iv.micros.checked_mul(1_000).ok_or_else(|| to_datafusion(Error::new(SqlState::DatetimeFieldOverflow, "interval out of range")))?;
    Ok(IntervalMonthDayNano::new(iv.months, iv.days, nanos))
}

/// `freshet_interval_mul(interval, float8)` and `freshet_interval_div(interval, float8)`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ScaleInterval {
    divide: bool,
    signature: Signature,
}

impl ScalarUDFImpl for ScaleInterval {
    fn name(&self) -> &str {
        if self.divide { "freshet_interval_div" } else { "freshet_interval_mul" }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        match args {
            [ArrowType::Interval(_), ArrowType::Float64] => Ok(MONTH_DAY_NANO),
            _ => Err(no_function_for(self.name(), args)),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args.args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = args.number_rows;
        let intervals = cast(&args.args[0].to_array(n)?, &MONTH_DAY_NANO)?;
        let factors = cast(&args.args[1].to_array(n)?, &ArrowType::Float64)?;
        let (intervals, factors) = (intervals.as_primitive::<IntervalMonthDayNanoType>(), factors.as_primitive::<Float64Type>());
        let mut out = IntervalMonthDayNanoBuilder::with_capacity(n);
        for i in 0..n {
            if intervals.is_null(i) || factors.is_null(i) {
                out.append_null();
                continue;
            }
            let scaled = from_arrow(intervals.value(i)).scaled(factors.value(i), self.divide).map_err(to_datafusion)?;
            out.append_value(to_arrow(scaled)?);
        }
        let result: ArrayRef = Arc::new(out.finish());
        columnar(result, scalar)
    }
}
