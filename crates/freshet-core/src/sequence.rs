//! Sequences: named counters that hand out integers (`nextval`), the state behind SERIAL and
//! identity columns.
//!
//! A sequence's definition is part of the catalog and immutable; its counter is shared by
//! every catalog version that holds the definition and changes outside transactions, as in
//! PostgreSQL: a value handed out is never handed out again, whether or not the transaction
//! that took it commits.
//!
//! DURABILITY. The counter is logged ahead (PostgreSQL logs 32 values ahead, `SEQ_LOG_VALS`):
//! when a value is handed out that no earlier record covers, the caller logs a record saying
//! "resume after `v + 32 × increment`" before the value is used, and the next 32 values need no
//! record. After a crash the sequence resumes after the logged value, so up to 32 values are
//! skipped but none is handed out twice. The session makes the record durable before the
//! statement that took the value reports success (`Session::sync_sequences`).
//!
//! INVARIANT: every value handed out is at most (in the direction of the increment) the newest
//! logged value, and the newest logged value is what a checkpoint stores.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::catalog::TableId;
use crate::error::{Error, Result, SqlState};
use crate::types::DataType;

/// Values a sequence hands out under one log record.
pub const LOG_AHEAD: i64 = 32;

/// A sequence's definition (`CREATE SEQUENCE`, or the one a SERIAL or identity column owns).
#[derive(Clone, Debug)]
pub struct SequenceDef {
    /// From the same id space as tables and views.
    pub id: TableId,
    pub name: String,
    /// smallint, integer or bigint (bigint by default; a SERIAL column's type).
    pub ty: DataType,
    pub increment: i64,
    pub min: i64,
    pub max: i64,
    pub start: i64,
    pub cache: i64,
    pub cycle: bool,
    /// The table column that owns the sequence (SERIAL, identity): it is dropped with the
    /// table and cannot be dropped on its own.
    pub owned_by: Option<(String, String)>,
    /// The counter, shared by every catalog version holding this definition.
    pub state: Arc<SequenceState>,
}

impl PartialEq for SequenceDef {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.name == other.name
            && self.ty == other.ty
            && (self.increment, self.min, self.max, self.start, self.cache, self.cycle) == (other.increment, other.min, other.max, other.start, other.cache, other.cycle)
            && self.owned_by == other.owned_by
    }
}

/// A sequence's counter.
#[derive(Debug)]
pub struct SequenceState {
    counter: Mutex<Counter>,
}

#[derive(Clone, Copy, Debug)]
struct Counter {
    /// The last value handed out (or, before the first, the start value with `called` false).
    last: i64,
    called: bool,
    /// The newest logged position (value, called): what recovery resumes from.
    logged: (i64, bool),
    /// How many more values may be handed out under the newest logged position.
    covered: i64,
}

/// What a change of a sequence's counter asks its caller to log before the value is used:
/// resume at `last` (with `called`: after it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SequenceRecord {
    pub id: TableId,
    pub last: i64,
    pub called: bool,
}

/// The bounds of a sequence of type `ty`.
pub fn type_bounds(ty: DataType) -> (i64, i64) {
    match ty {
        DataType::Int16 => (i16::MIN as i64, i16::MAX as i64),
        DataType::Int32 => (i32::MIN as i64, i32::MAX as i64),
        _ => (i64::MIN, i64::MAX),
    }
}

/// Options of CREATE SEQUENCE (or of an identity column), `None` where not given.
#[derive(Clone, Debug, Default)]
pub struct SequenceOptions {
    pub ty: Option<DataType>,
    pub increment: Option<i64>,
    /// `Some(None)`: NO MINVALUE.
    pub min: Option<Option<i64>>,
    pub max: Option<Option<i64>>,
    pub start: Option<i64>,
    pub cache: Option<i64>,
    pub cycle: Option<bool>,
}

impl SequenceDef {
    /// A definition from its options with PostgreSQL's defaults and checks (22023).
    pub fn new(name: String, options: &SequenceOptions, owned_by: Option<(String, String)>) -> Result<SequenceDef> {
        let ty = options.ty.unwrap_or(DataType::Int64);
        if !matches!(ty, DataType::Int16 | DataType::Int32 | DataType::Int64) {
            return Err(Error::new(SqlState::InvalidParameterValue, "sequence type must be smallint, integer, or bigint"));
        }
        let increment = options.increment.unwrap_or(1);
        if increment == 0 {
            return Err(Error::new(SqlState::InvalidParameterValue, "INCREMENT must not be zero"));
        }
        let (low, high) = type_bounds(ty);
        let max = options.max.flatten().unwrap_or(if increment > 0 { high } else { -1 });
        let min = options.min.flatten().unwrap_or(if increment > 0 { 1 } else { low });
        let out_of_type = |what: &str, v: i64| {
            Error::new(SqlState::InvalidParameterValue, format!("{what} value ({v}) is out of range for sequence data type {}", ty.pg_name()))
        };
        if max < low || max > high {
            return Err(out_of_type("MAXVALUE", max));
        }
        if min < low || min > high {
            return Err(out_of_type("MINVALUE", min));
        }
        if min >= max {
            return Err(Error::new(SqlState::InvalidParameterValue, format!("MINVALUE ({min}) must be less than MAXVALUE ({max})")));
        }
        let start = options.start.unwrap_or(if increment > 0 { min } else { max });
        if start < min {
            return Err(Error::new(SqlState::InvalidParameterValue, format!("START value ({start}) cannot be less than MINVALUE ({min})")));
        }
        if start > max {
            return Err(Error::new(SqlState::InvalidParameterValue, format!("START value ({start}) cannot be greater than MAXVALUE ({max})")));
        }
        let cache = options.cache.unwrap_or(1);
        if cache <= 0 {
            return Err(Error::new(SqlState::InvalidParameterValue, format!("CACHE ({cache}) must be greater than zero")));
        }
        Ok(SequenceDef {
            id: 0,
            name,
            ty,
            increment,
            min,
            max,
            start,
            cache,
            cycle: options.cycle.unwrap_or(false),
            owned_by,
            state: SequenceState::at(start, false),
        })
    }

    /// The next value, and the record to log first when no earlier one covers it (2200H at
    /// the end of a sequence without CYCLE).
    pub fn next(&self) -> Result<(i64, Option<SequenceRecord>)> {
        let mut c = self.state.counter.lock();
        let v = if !c.called {
            c.last
        } else {
            match c.last.checked_add(self.increment).filter(|v| (self.min..=self.max).contains(v)) {
                Some(v) => v,
                None if self.cycle => {
                    if self.increment > 0 {
                        self.min
                    } else {
                        self.max
                    }
                }
                None => {
                    let (which, bound) = if self.increment > 0 { ("maximum", self.max) } else { ("minimum", self.min) };
                    return Err(Error::new(
                        SqlState::SequenceGeneratorLimitExceeded,
                        format!("nextval: reached {which} value of sequence \"{}\" ({bound})", self.name),
                    ));
                }
            }
        };
        c.last = v;
        c.called = true;
        if c.covered > 0 {
            c.covered -= 1;
            return Ok((v, None));
        }
        // Log as far ahead as the bounds allow (no further than the bound: values after a
        // cycle's wrap are logged one record at a time).
        let mut ahead = 0;
        let mut at = v;
        while ahead < LOG_AHEAD - 1 {
            match at.checked_add(self.increment).filter(|n| (self.min..=self.max).contains(n)) {
                Some(n) => {
                    at = n;
                    ahead += 1;
                }
                None => break,
            }
        }
        c.logged = (at, true);
        c.covered = ahead;
        Ok((v, Some(SequenceRecord { id: self.id, last: at, called: true })))
    }

    /// setval: the next nextval returns the value after `value` (`called`) or `value` itself.
    /// Out of the sequence's bounds is 22003.
    pub fn set(&self, value: i64, called: bool) -> Result<SequenceRecord> {
        if value < self.min || value > self.max {
            return Err(Error::new(
                SqlState::NumericValueOutOfRange,
                format!("setval: value {value} is out of bounds for sequence \"{}\" ({}..{})", self.name, self.min, self.max),
            ));
        }
        let mut c = self.state.counter.lock();
        *c = Counter { last: value, called, logged: (value, called), covered: 0 };
        Ok(SequenceRecord { id: self.id, last: value, called })
    }

    /// The last value handed out, and whether one was (`pg_sequences.last_value` is NULL
    /// before the first).
    pub fn last(&self) -> (i64, bool) {
        let c = self.state.counter.lock();
        (c.last, c.called)
    }

    /// The newest logged position, which a checkpoint stores.
    pub fn logged(&self) -> (i64, bool) {
        self.state.counter.lock().logged
    }

    /// Recovery: the counter resumes at a logged position.
    pub fn restore(&self, last: i64, called: bool) {
        *self.state.counter.lock() = Counter { last, called, logged: (last, called), covered: 0 };
    }

    /// The definition with a new counter at its start (CREATE of a copy, recovery of a
    /// definition).
    pub fn fresh(mut self) -> SequenceDef {
        self.state = SequenceState::at(self.start, false);
        self
    }
}

impl SequenceState {
    fn at(last: i64, called: bool) -> Arc<SequenceState> {
        Arc::new(SequenceState { counter: Mutex::new(Counter { last, called, logged: (last, called), covered: 0 }) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(options: SequenceOptions) -> SequenceDef {
        SequenceDef::new("s".into(), &options, None).unwrap()
    }

    #[test]
    fn values_follow_start_and_increment_and_are_logged_ahead() {
        let s = seq(SequenceOptions { start: Some(10), increment: Some(5), ..Default::default() });
        let (v, rec) = s.next().unwrap();
        assert_eq!((v, rec.map(|r| r.last)), (10, Some(10 + 31 * 5)));
        for i in 1..32 {
            assert_eq!(s.next().unwrap(), (10 + i * 5, None), "covered by the first record");
        }
        let (v, rec) = s.next().unwrap();
        assert_eq!(v, 10 + 32 * 5);
        assert_eq!(rec.map(|r| r.last), Some(10 + 63 * 5));
        assert_eq!(s.logged(), (10 + 63 * 5, true));
    }

    #[test]
    fn the_end_of_a_sequence_is_an_error_unless_it_cycles() {
        let s = seq(SequenceOptions { max: Some(Some(3)), ..Default::default() });
        assert_eq!(s.next().unwrap().1.map(|r| r.last), Some(3), "the log-ahead stops at the bound");
        s.next().unwrap();
        s.next().unwrap();
        assert_eq!(s.next().unwrap_err().state, SqlState::SequenceGeneratorLimitExceeded);
        let c = seq(SequenceOptions { max: Some(Some(2)), cycle: Some(true), ..Default::default() });
        let got: Vec<i64> = (0..5).map(|_| c.next().unwrap().0).collect();
        assert_eq!(got, [1, 2, 1, 2, 1]);
        let down = seq(SequenceOptions { increment: Some(-1), ..Default::default() });
        assert_eq!(down.next().unwrap().0, -1);
        assert_eq!(down.next().unwrap().0, -2);
    }

    #[test]
    fn setval_and_restore_reposition_the_counter() {
        let s = seq(SequenceOptions::default());
        assert_eq!(s.set(41, true).unwrap().last, 41);
        assert_eq!(s.next().unwrap().0, 42);
        s.set(7, false).unwrap();
        assert_eq!(s.next().unwrap().0, 7);
        assert_eq!(s.set(0, true).unwrap_err().state, SqlState::NumericValueOutOfRange);
        s.restore(100, true);
        let (v, rec) = s.next().unwrap();
        assert_eq!(v, 101);
        assert!(rec.is_some(), "after recovery the next value is logged again");
    }

    #[test]
    fn options_are_checked() {
        let bad = |o: SequenceOptions| SequenceDef::new("s".into(), &o, None).unwrap_err().state;
        assert_eq!(bad(SequenceOptions { increment: Some(0), ..Default::default() }), SqlState::InvalidParameterValue);
        assert_eq!(bad(SequenceOptions { start: Some(0), ..Default::default() }), SqlState::InvalidParameterValue);
        assert_eq!(bad(SequenceOptions { ty: Some(DataType::Int16), max: Some(Some(40000)), ..Default::default() }), SqlState::InvalidParameterValue);
        let s = seq(SequenceOptions { ty: Some(DataType::Int32), ..Default::default() });
        assert_eq!(s.max, i32::MAX as i64);
    }
}
