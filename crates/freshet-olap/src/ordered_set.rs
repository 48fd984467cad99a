//! PostgreSQL's ordered-set aggregates that DataFusion lacks: `percentile_disc(fraction) WITHIN
//! GROUP (ORDER BY v)` and `mode() WITHIN GROUP (ORDER BY v)`. (`percentile_cont` is
//! DataFusion's own.)
//!
//! DataFusion's planner hands an aggregate that accepts WITHIN GROUP the ordered value as its
//! first argument and the direction as its ordering; the aggregate sorts by itself. Both keep
//! the group's non-NULL values (their state is that list, so partial aggregates merge):
//! - `percentile_disc` returns the first value, in the ordering, whose position (k of n) is at
//!   least the fraction: the value at position ceil(fraction * n), or the first for 0. The
//!   fraction is a direct argument, the same for every row; outside [0, 1] it fails with 22003
//!   as in PostgreSQL.
//! - `mode` returns the most frequent value; of several equally frequent ones, the first in the
//!   ordering.
//!
//! A group without non-NULL values gives NULL.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, FieldRef, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, Signature, Volatility};
use freshet_core::{Error, SqlState};

use crate::error::to_datafusion;

/// The aggregates, for the engine to register.
pub(crate) fn all() -> Vec<AggregateUDF> {
    vec![
        AggregateUDF::new_from_impl(OrderedSet { kind: Kind::PercentileDisc, signature: Signature::any(2, Volatility::Immutable) }),
        AggregateUDF::new_from_impl(OrderedSet { kind: Kind::Mode, signature: Signature::any(1, Volatility::Immutable) }),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    PercentileDisc,
    Mode,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct OrderedSet {
    kind: Kind,
    signature: Signature,
}

impl AggregateUDFImpl for OrderedSet {
    fn name(&self) -> &str {
        match self.kind {
            Kind::PercentileDisc => "percentile_disc",
            Kind::Mode => "mode",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(args[0].clone())
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        let item = Field::new_list_field(args.input_fields[0].data_type().clone(), true);
        Ok(vec![Arc::new(Field::new(format!("{}[values]", args.name), ArrowType::List(Arc::new(item)), true))])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        let fraction = match self.kind {
            Kind::PercentileDisc => Some(fraction(&args)?),
            Kind::Mode => None,
        };
        let descending = args.order_bys.first().is_some_and(|s| s.options.descending);
        Ok(Box::new(OrderedSetAccumulator {
            kind: self.kind,
            fraction,
            descending,
            ty: args.expr_fields[0].data_type().clone(),
            values: Vec::new(),
        }))
    }

    fn supports_within_group_clause(&self) -> bool {
        true
    }
}

/// The fraction of `percentile_disc`: a constant in [0, 1] (NULL gives a NULL result, as the
/// group's answer would be for any rows).
fn fraction(args: &AccumulatorArgs) -> DfResult<f64> {
    // A constant evaluates without rows (a cast of a literal too); a column does not.
    let empty = RecordBatch::new_empty(Arc::new(Schema::empty()));
    let constant = args.exprs.get(1).and_then(|e| e.evaluate(&empty).ok()).and_then(|v| match v {
        ColumnarValue::Scalar(s) => Some(s),
        ColumnarValue::Array(_) => None,
    });
    let Some(value) = constant else {
        return Err(to_datafusion(Error::unsupported("percentile_disc with a fraction that is not a constant")));
    };
    if value.is_null() {
        return Ok(f64::NAN);
    }
    let f = match value.cast_to(&ArrowType::Float64)? {
        ScalarValue::Float64(Some(f)) => f,
        _ => f64::NAN,
    };
    if !(0.0..=1.0).contains(&f) {
        return Err(to_datafusion(Error::new(SqlState::NumericValueOutOfRange, format!("percentile value {f} is not between 0 and 1"))));
    }
    Ok(f)
}

#[derive(Debug)]
struct OrderedSetAccumulator {
    kind: Kind,
    /// `percentile_disc`'s fraction (NaN for a NULL one).
    fraction: Option<f64>,
    descending: bool,
    ty: ArrowType,
    values: Vec<ScalarValue>,
}

impl OrderedSetAccumulator {
    fn add(&mut self, array: &ArrayRef) -> DfResult<()> {
        for i in 0..array.len() {
            if array.is_valid(i) {
                self.values.push(ScalarValue::try_from_array(array, i)?);
            }
        }
        Ok(())
    }

    fn sorted(&mut self) {
        let descending = self.descending;
        self.values.sort_by(|a, b| {
            let o = a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal);
            if descending { o.reverse() } else { o }
        });
    }
}

impl Accumulator for OrderedSetAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        self.add(&values[0])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let lists = states[0].as_list::<i32>();
        for i in 0..lists.len() {
            if lists.is_valid(i) {
                self.add(&lists.value(i))?;
            }
        }
        Ok(())
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::List(ScalarValue::new_list_nullable(&self.values, &self.ty))])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let null = ScalarValue::try_from(&self.ty)?;
        if self.values.is_empty() {
            return Ok(null);
        }
        self.sorted();
        match self.kind {
            Kind::PercentileDisc => {
                let f = self.fraction.unwrap_or(f64::NAN);
                if f.is_nan() {
                    return Ok(null);
                }
                let n = self.values.len();
                let k = ((f * n as f64).ceil() as usize).clamp(1, n);
                Ok(self.values[k - 1].clone())
            }
            Kind::Mode => {
                let mut counts: HashMap<&ScalarValue, usize> = HashMap::new();
                for v in &self.values {
                    *counts.entry(v).or_default() += 1;
                }
                // The values are in the ordering: the first with the highest count wins.
                let mut best: Option<(&ScalarValue, usize)> = None;
                for v in &self.values {
                    let c = counts[v];
                    if best.is_none_or(|(_, b)| c > b) {
                        best = Some((v, c));
                    }
                }
                Ok(best.map(|(v, _)| v.clone()).unwrap_or(ScalarValue::Null))
            }
        }
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.values.iter().map(ScalarValue::size).sum::<usize>()
    }
}
