//! `generate_series` in FROM as PostgreSQL has it. DataFusion's table function takes bigint
//! literals and nanosecond timestamps only; PostgreSQL's also takes integers of any width
//! (`generate_series(5, 1, -2)`, whose literals the rewrite makes `INTEGER`s), and
//! timestamps, dates or a mix with text (`generate_series('2024-01-01'::timestamp,
//! '2024-01-02', '1 hour')`: the text is read as the other arguments' type) stepped by an
//! interval, which is how time buckets are made. [`GenerateSeries`] takes integer series
//! to DataFusion's function as bigints and makes time series itself: rows of Freshet's
//! microsecond timestamps (`timestamp with time zone` if an argument is one, or if the bounds
//! are dates, as PostgreSQL resolves the call), each the one
//! before plus the step by PostgreSQL's calendar rules (`add_interval`, so a month after
//! January 31 is the last of February), produced a batch at a time as the scan reads them.
//! A NULL argument gives no rows; a zero step is 22023, as in PostgreSQL.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, TimestampMicrosecondArray};
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::TableType;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::memory::{LazyBatchGenerator, LazyMemoryExec};
use freshet_core::error::{Error, SqlState};
use freshet_core::types::datetime::{self, Interval};
use parking_lot::RwLock;

use crate::error::{no_function_for, to_datafusion};

const NAME: &str = "generate_series";

/// The table function (see the module documentation); `integers` is DataFusion's own.
#[derive(Debug)]
pub struct GenerateSeries {
    pub integers: Arc<dyn TableFunctionImpl>,
}

fn zero_step() -> datafusion::error::DataFusionError {
    to_datafusion(Error::new(SqlState::InvalidParameterValue, "step size cannot equal zero"))
}

impl TableFunctionImpl for GenerateSeries {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let exprs = args.exprs();
        let literals: Vec<&ScalarValue> = exprs
            .iter()
            .map(|e| match e {
                Expr::Literal(v, _) => Ok(v),
                _ => Err(to_datafusion(Error::unsupported("generate_series in FROM with arguments that are not constants"))),
            })
            .collect::<DfResult<_>>()?;
        let types: Vec<ArrowType> = literals.iter().map(|v| v.data_type()).collect();
        let timed = types.iter().any(|t| matches!(t, ArrowType::Timestamp(..) | ArrowType::Date32 | ArrowType::Date64 | ArrowType::Interval(_)));
        if timed {
            return time_series(&literals, &types).map(|t| Arc::new(t) as Arc<dyn TableProvider>);
        }
        // Integers of any width as DataFusion's bigints.
        let mut wide = Vec::with_capacity(exprs.len());
        for (v, t) in literals.iter().zip(&types) {
            let value = match v {
                ScalarValue::Null => ScalarValue::Null,
                v if t.is_integer() => v.cast_to(&ArrowType::Int64)?,
                _ => return Err(no_function_for(NAME, &types)),
            };
            if wide.len() == 2 && value == ScalarValue::Int64(Some(0)) {
                return Err(zero_step());
            }
            wide.push(Expr::Literal(value, None));
        }
        self.integers.call_with_args(TableFunctionArgs::new(&wide, args.session()))
    }
}

/// The table of a series of timestamps: `None` bounds (a NULL argument) give no rows.
fn time_series(values: &[&ScalarValue], types: &[ArrowType]) -> DfResult<TimeSeries> {
    let [start, stop, step] = values else { return Err(no_function_for(NAME, types)) };
    // With time zone if an argument has one, without if one is a timestamp without; of
    // dates, with (PostgreSQL's preferred type of the two). Text is read as that type.
    let zone = types.iter().find_map(|t| match t {
        ArrowType::Timestamp(_, Some(z)) => Some(z.clone()),
        _ => None,
    });
    let zone = zone.or_else(|| (!types.iter().any(|t| matches!(t, ArrowType::Timestamp(_, None)))).then(|| Arc::from(crate::types::UTC)));
    let bound = |v: &ScalarValue| -> DfResult<Option<i64>> {
        let micros = |n: Option<i64>, per: i64| n.map(|n| n.div_euclid(per));
        Ok(match v {
            ScalarValue::Null => None,
            ScalarValue::TimestampSecond(n, _) => n.map(|n| n.saturating_mul(1_000_000)),
            ScalarValue::TimestampMillisecond(n, _) => n.map(|n| n.saturating_mul(1_000)),
            ScalarValue::TimestampMicrosecond(n, _) => *n,
            ScalarValue::TimestampNanosecond(n, _) => micros(*n, 1_000),
            ScalarValue::Date32(d) => d.map(|d| d as i64 * 86_400_000_000),
            ScalarValue::Date64(ms) => ms.map(|ms| ms.saturating_mul(1_000)),
            ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => match s {
                None => None,
                Some(text) if zone.is_some() => Some(datetime::parse_timestamptz(text).map_err(to_datafusion)?),
                Some(text) => Some(datetime::parse_timestamp(text).map_err(to_datafusion)?),
            },
            _ => return Err(no_function_for(NAME, types)),
        })
    };
    let step = match step {
        ScalarValue::Null => None,
        ScalarValue::IntervalMonthDayNano(v) => v.map(crate::interval::from_arrow),
        ScalarValue::IntervalDayTime(v) => v.map(|v| Interval { months: 0, days: v.days, micros: v.milliseconds as i64 * 1_000 }),
        ScalarValue::IntervalYearMonth(v) => v.map(|months| Interval { months, days: 0, micros: 0 }),
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => match s {
            None => None,
            Some(text) => Some(datetime::parse_interval(text, None).map_err(to_datafusion)?),
        },
        _ => return Err(no_function_for(NAME, types)),
    };
    let (start, stop) = (bound(start)?, bound(stop)?);
    if step.is_some_and(|s| span(s) == 0) {
        return Err(zero_step());
    }
    let schema = Arc::new(Schema::new(vec![Field::new("value", ArrowType::Timestamp(TimeUnit::Microsecond, zone.clone()), false)]));
    let run = match (start, stop, step) {
        (Some(start), Some(stop), Some(step)) => Some(Run { start, stop, step }),
        _ => None,
    };
    Ok(TimeSeries { schema, zone, run })
}

/// An interval's length for its sign, as PostgreSQL compares intervals (a month is 30 days).
fn span(iv: Interval) -> i128 {
    const DAY: i128 = 86_400_000_000;
    iv.months as i128 * 30 * DAY + iv.days as i128 * DAY + iv.micros as i128
}

#[derive(Clone, Copy, Debug)]
struct Run {
    start: i64,
    stop: i64,
    step: Interval,
}

#[derive(Debug)]
struct TimeSeries {
    schema: SchemaRef,
    zone: Option<Arc<str>>,
    run: Option<Run>,
}

#[async_trait::async_trait]
impl TableProvider for TimeSeries {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(&self, state: &dyn Session, projection: Option<&Vec<usize>>, _filters: &[Expr], _limit: Option<usize>) -> DfResult<Arc<dyn ExecutionPlan>> {
        let batch = state.config_options().execution.batch_size.get();
        let generator = Steps { schema: self.schema.clone(), zone: self.zone.clone(), run: self.run, next: self.run.map(|r| r.start), batch };
        let exec = LazyMemoryExec::try_new(self.schema.clone(), vec![Arc::new(RwLock::new(generator))])?;
        Ok(Arc::new(exec.with_projection(projection.cloned())))
    }
}

/// The rows of a [`TimeSeries`], a batch at a time: `next` is the next value, `None` once past
/// the stop.
#[derive(Debug, Clone)]
struct Steps {
    schema: SchemaRef,
    zone: Option<Arc<str>>,
    run: Option<Run>,
    next: Option<i64>,
    batch: usize,
}

impl fmt::Display for Steps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{NAME}: {:?}", self.run)
    }
}

impl LazyBatchGenerator for Steps {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn generate_next_batch(&mut self) -> DfResult<Option<RecordBatch>> {
        let Some(run) = self.run else { return Ok(None) };
        let up = span(run.step) > 0;
        let mut values = Vec::with_capacity(self.batch.min(1024));
        while values.len() < self.batch {
            let Some(at) = self.next else { break };
            if (up && at > run.stop) || (!up && at < run.stop) {
                self.next = None;
                break;
            }
            values.push(at);
            // Past the range of timestamps the series ends, as PostgreSQL's does.
            self.next = datetime::add_interval(at, run.step).ok();
        }
        if values.is_empty() {
            return Ok(None);
        }
        let array = TimestampMicrosecondArray::from(values).with_timezone_opt(self.zone.clone());
        Ok(Some(RecordBatch::try_new(self.schema.clone(), vec![Arc::new(array)])?))
    }

    fn reset_state(&self) -> Arc<RwLock<dyn LazyBatchGenerator>> {
        Arc::new(RwLock::new(Steps { next: self.run.map(|r| r.start), ..self.clone() }))
    }
}
