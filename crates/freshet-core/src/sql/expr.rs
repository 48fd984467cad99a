//! Bound scalar expressions of the short-statement path, and their evaluation.
//!
//! An [`Expr`] is typed when it is built (by `bind`); evaluation is a plain tree walk over one
//! row. The typing rules follow the analytical side's (integer literals are BIGINT, decimal
//! arithmetic widens precision like Arrow's kernels), so that a query gives the same answer
//! whichever path runs it. Integer overflow is an error (22003), as in PostgreSQL.

use std::cmp::Ordering;

use crate::error::{Error, Result, SqlState};
use crate::types::datetime::{self, MICROS_PER_DAY};
use crate::types::{DataType, Decimal, TypeFamily, Value, MAX_DECIMAL_PRECISION};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    And,
    Or,
    Concat,
}

impl BinaryOp {
    pub fn is_comparison(self) -> bool {
        matches!(self, BinaryOp::Eq | BinaryOp::NotEq | BinaryOp::Lt | BinaryOp::LtEq | BinaryOp::Gt | BinaryOp::GtEq)
    }

    pub fn is_arithmetic(self) -> bool {
        matches!(self, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod)
    }

    /// The comparison with its operands swapped (`a < b` is `b > a`).
    pub fn flip(self) -> BinaryOp {
        match self {
            BinaryOp::Lt => BinaryOp::Gt,
            BinaryOp::LtEq => BinaryOp::GtEq,
            BinaryOp::Gt => BinaryOp::Lt,
            BinaryOp::GtEq => BinaryOp::LtEq,
            other => other,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
            BinaryOp::Eq => "=",
            BinaryOp::NotEq => "<>",
            BinaryOp::Lt => "<",
            BinaryOp::LtEq => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::GtEq => ">=",
            BinaryOp::And => "AND",
            BinaryOp::Or => "OR",
            BinaryOp::Concat => "||",
        }
    }
}

/// Scalar functions the short path evaluates itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    Abs,
    Lower,
    Upper,
    Length,
    Coalesce,
    NullIf,
    Substring,
    Btrim,
    Ltrim,
    Rtrim,
    Concat,
    Round,
    Floor,
    Ceil,
    Mod,
    Greatest,
    Least,
    Now,
    /// `clock_timestamp()`: the time when it is evaluated (it changes during a statement).
    ClockTimestamp,
    CurrentDate,
    Replace,
    Repeat,
    Extract,
    /// Sequence functions: they change or read a sequence, so they run only where the
    /// context gives [`EvalContext::session`] (in the session).
    Nextval,
    Currval,
    Setval,
    Lastval,
    PgGetSerialSequence,
    /// The advisory lock functions (`pg_advisory_lock` and its family): they take or release
    /// locks the session holds, so they run only where the context gives
    /// [`EvalContext::session`], as the sequence functions do.
    Advisory(AdvisoryFn),
    /// `pg_notify(channel, payload)`: a notification the session's transaction sends when it
    /// commits (only a session can queue one).
    PgNotify,
    /// `gen_random_uuid()`: a random (version 4) uuid, a new one at every call.
    GenRandomUuid,
    /// `pg_sleep(seconds)`: the session waits (only a session can, as for the advisory locks).
    PgSleep,
    /// `t ± INTERVAL '…'` for a constant interval: (timestamp, months, days, microseconds),
    /// the interval already negated for `-`; a scaled interval (`t + n * INTERVAL '…'`) adds
    /// the factor (float8) and whether it divides. Not callable by name.
    AddInterval,
    /// A timestamp rounded to a number of fractional digits (timestamp, precision 0 – 5):
    /// `CAST(… AS timestamp(p))` and `CURRENT_TIMESTAMP(p)`. Not callable by name.
    TimePrecision,
    /// A NUMERIC without a declared scale as output shows it, without trailing fractional
    /// zeros ([`crate::types::shown_decimal`]): what a cast to text or `||` reads. Not
    /// callable by name.
    ShownNumeric,
}

impl Func {
    /// Whether the function works with sequences ([`SessionFns`]).
    pub fn is_sequence(self) -> bool {
        matches!(self, Func::Nextval | Func::Currval | Func::Setval | Func::Lastval | Func::PgGetSerialSequence)
    }

    /// Whether only a session can evaluate the function ([`SessionFns`]): the sequence and
    /// advisory lock functions.
    pub fn is_session(self) -> bool {
        self.is_sequence() || matches!(self, Func::Advisory(_) | Func::PgSleep | Func::PgNotify)
    }
}

/// One advisory lock function: what it does, in which mode and for how long. The lock is
/// named by one bigint or by two integers (two separate key spaces, as in PostgreSQL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdvisoryFn {
    pub op: AdvisoryOp,
    /// A shared lock (`…_shared`) rather than an exclusive one.
    pub shared: bool,
    /// Held until the transaction ends (`…_xact_…`) rather than until unlocked or the session
    /// ends.
    pub xact: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdvisoryOp {
    /// Takes the lock, waiting for it if another session holds it in a conflicting mode.
    Lock,
    /// Takes the lock if it is free at once; returns whether it did.
    TryLock,
    /// Releases one hold of a session-level lock; returns whether the session held it.
    Unlock,
    /// Releases every session-level lock the session holds.
    UnlockAll,
}

impl AdvisoryFn {
    /// The function a name calls, if it is an advisory lock function.
    pub fn by_name(name: &str) -> Option<AdvisoryFn> {
        let (op, rest) = if let Some(r) = name.strip_prefix("pg_try_advisory_") {
            (AdvisoryOp::TryLock, r)
        } else if name == "pg_advisory_unlock_all" {
            return Some(AdvisoryFn { op: AdvisoryOp::UnlockAll, shared: false, xact: false });
        } else if let Some(r) = name.strip_prefix("pg_advisory_unlock") {
            (AdvisoryOp::Unlock, r)
        } else if let Some(r) = name.strip_prefix("pg_advisory_") {
            (AdvisoryOp::Lock, r)
        } else {
            return None;
        };
        let (xact, rest) = match rest.strip_prefix("xact_") {
            Some(r) if op != AdvisoryOp::Unlock => (true, r),
            _ => (false, rest),
        };
        let rest = if op == AdvisoryOp::Unlock { rest } else { rest.strip_prefix("lock")? };
        let shared = match rest {
            "" => false,
            "_shared" => true,
            _ => return None,
        };
        Some(AdvisoryFn { op, shared, xact })
    }
}

/// What evaluates the functions only a session can ([`Func::is_session`]): the sequence
/// functions, with the catalog, the log and the session's last values (`currval`,
/// `lastval`); the advisory lock functions, with the locks the session holds; and
/// `pg_sleep`. A function that must wait (a lock another session holds, a sleep) fails, and
/// the session, where it can wait, waits and evaluates the expression again.
pub trait SessionFns {
    fn call(&self, func: Func, args: &[Value]) -> Result<Value>;
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Column { index: usize, ty: DataType },
    Literal { value: Value, ty: DataType },
    /// A `$n` parameter (0-based index); its value arrives already of type `ty`.
    Param { index: usize, ty: DataType },
    Not(Box<Expr>),
    Negate { expr: Box<Expr>, ty: DataType },
    Binary { op: BinaryOp, left: Box<Expr>, right: Box<Expr>, ty: DataType },
    Cast { expr: Box<Expr>, to: DataType },
    IsNull { expr: Box<Expr>, negated: bool },
    /// `IS [NOT] TRUE` / `IS [NOT] FALSE`.
    IsBool { expr: Box<Expr>, value: bool, negated: bool },
    IsDistinct { left: Box<Expr>, right: Box<Expr>, negated: bool },
    InList { expr: Box<Expr>, list: Vec<Expr>, negated: bool },
    Like { expr: Box<Expr>, pattern: Box<Expr>, negated: bool, case_insensitive: bool },
    Case { operand: Option<Box<Expr>>, whens: Vec<(Expr, Expr)>, otherwise: Option<Box<Expr>>, ty: DataType },
    Func { func: Func, args: Vec<Expr>, ty: DataType },
}

/// What an expression reads while it is evaluated.
pub struct EvalContext<'a> {
    pub params: &'a [Value],
    /// The statement's start time (microseconds since 1970), for now() and CURRENT_DATE.
    pub now: i64,
    /// The session's functions (sequences, advisory locks), where they may run (`None`: they
    /// are refused with 0A000).
    pub session: Option<&'a dyn SessionFns>,
}

/// Read access to the current row's columns.
pub trait RowAccess {
    fn column(&self, index: usize) -> Value;
}

/// A row given as its values.
pub struct SliceRow<'a>(pub &'a [Value]);

impl RowAccess for SliceRow<'_> {
    fn column(&self, index: usize) -> Value {
        self.0.get(index).cloned().unwrap_or(Value::Null)
    }
}

/// No row (INSERT … VALUES, parameters, constants).
pub struct NoRow;

impl RowAccess for NoRow {
    fn column(&self, _: usize) -> Value {
        Value::Null
    }
}

impl Expr {
    pub fn ty(&self) -> DataType {
        match self {
            Expr::Column { ty, .. }
            | Expr::Literal { ty, .. }
            | Expr::Param { ty, .. }
            | Expr::Negate { ty, .. }
            | Expr::Binary { ty, .. }
            | Expr::Case { ty, .. }
            | Expr::Func { ty, .. } => *ty,
            Expr::Cast { to, .. } => *to,
            Expr::Not(_)
            | Expr::IsNull { .. }
            | Expr::IsBool { .. }
            | Expr::IsDistinct { .. }
            | Expr::InList { .. }
            | Expr::Like { .. } => DataType::Bool,
        }
    }

    pub fn literal(value: Value, ty: DataType) -> Expr {
        Expr::Literal { value, ty }
    }

    /// Whether the expression reads no column (a constant within one execution).
    pub fn is_row_independent(&self) -> bool {
        let mut independent = true;
        self.visit(&mut |e| {
            if matches!(e, Expr::Column { .. }) {
                independent = false;
            }
        });
        independent
    }

    /// Calls `f` on this node and every node below it.
    pub fn visit(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Column { .. } | Expr::Literal { .. } | Expr::Param { .. } => {}
            Expr::Not(e) | Expr::Negate { expr: e, .. } | Expr::Cast { expr: e, .. } => e.visit(f),
            Expr::IsNull { expr, .. } | Expr::IsBool { expr, .. } => expr.visit(f),
            Expr::Binary { left, right, .. } | Expr::IsDistinct { left, right, .. } => {
                left.visit(f);
                right.visit(f);
            }
            Expr::InList { expr, list, .. } => {
                expr.visit(f);
                list.iter().for_each(|e| e.visit(f));
            }
            Expr::Like { expr, pattern, .. } => {
                expr.visit(f);
                pattern.visit(f);
            }
            Expr::Case { operand, whens, otherwise, .. } => {
                if let Some(o) = operand {
                    o.visit(f);
                }
                for (w, t) in whens {
                    w.visit(f);
                    t.visit(f);
                }
                if let Some(o) = otherwise {
                    o.visit(f);
                }
            }
            Expr::Func { args, .. } => args.iter().for_each(|e| e.visit(f)),
        }
    }

    /// Renumbers every `$n` parameter: `$n` becomes `$(to(n))`.
    pub fn renumber_params(&mut self, to: &dyn Fn(usize) -> usize) {
        match self {
            Expr::Param { index, .. } => *index = to(*index),
            Expr::Column { .. } | Expr::Literal { .. } => {}
            Expr::Not(e) | Expr::Negate { expr: e, .. } | Expr::Cast { expr: e, .. } => e.renumber_params(to),
            Expr::IsNull { expr, .. } | Expr::IsBool { expr, .. } => expr.renumber_params(to),
            Expr::Binary { left, right, .. } | Expr::IsDistinct { left, right, .. } | Expr::Like { expr: left, pattern: right, .. } => {
                left.renumber_params(to);
                right.renumber_params(to);
            }
            Expr::InList { expr, list, .. } => {
                expr.renumber_params(to);
                list.iter_mut().for_each(|e| e.renumber_params(to));
            }
            Expr::Case { operand, whens, otherwise, .. } => {
                for e in operand.iter_mut().chain(otherwise.iter_mut()) {
                    e.renumber_params(to);
                }
                for (w, t) in whens {
                    w.renumber_params(to);
                    t.renumber_params(to);
                }
            }
            Expr::Func { args, .. } => args.iter_mut().for_each(|e| e.renumber_params(to)),
        }
    }

    /// Evaluates the expression over `row`. A leaf — a column, a constant, a parameter: most
    /// expressions a statement evaluates and most operands — is read in place, as this
    /// function is inlined into its callers; any other node gets a call of the evaluator
    /// proper ([`eval_node`](Self::eval_node)), with its large frame.
    #[inline(always)]
    pub fn eval(&self, row: &dyn RowAccess, cx: &EvalContext) -> Result<Value> {
        match self {
            Expr::Column { index, .. } => Ok(row.column(*index)),
            Expr::Literal { value, .. } => Ok(value.clone()),
            Expr::Param { index, .. } => match cx.params.get(*index) {
                Some(v) => Ok(v.clone()),
                None => Err(Error::new(SqlState::UndefinedParameter, format!("there is no parameter ${}", index.saturating_add(1)))),
            },
            _ => self.eval_node(row, cx),
        }
    }

    /// Evaluates an inner node: its operands through [`eval`](Self::eval), which reads the
    /// leaves among them in place.
    #[inline(never)]
    fn eval_node(&self, row: &dyn RowAccess, cx: &EvalContext) -> Result<Value> {
        match self {
            // Not reached from `eval`, which reads leaves itself.
            Expr::Column { .. } | Expr::Literal { .. } | Expr::Param { .. } => self.eval(row, cx),
            Expr::Not(e) => Ok(match e.eval(row, cx)? {
                Value::Bool(b) => Value::Bool(!b),
                _ => Value::Null,
            }),
            Expr::Negate { expr, .. } => negate(expr.eval(row, cx)?),
            Expr::Binary { op: BinaryOp::And, left, right, .. } => {
                let l = left.eval(row, cx)?;
                if l == Value::Bool(false) {
                    return Ok(l);
                }
                let r = right.eval(row, cx)?;
                Ok(match (l, r) {
                    (_, Value::Bool(false)) => Value::Bool(false),
                    (Value::Bool(true), Value::Bool(true)) => Value::Bool(true),
                    _ => Value::Null,
                })
            }
            Expr::Binary { op: BinaryOp::Or, left, right, .. } => {
                let l = left.eval(row, cx)?;
                if l == Value::Bool(true) {
                    return Ok(l);
                }
                let r = right.eval(row, cx)?;
                Ok(match (l, r) {
                    (_, Value::Bool(true)) => Value::Bool(true),
                    (Value::Bool(false), Value::Bool(false)) => Value::Bool(false),
                    _ => Value::Null,
                })
            }
            Expr::Binary { op, left, right, ty } => {
                let l = left.eval(row, cx)?;
                let r = right.eval(row, cx)?;
                binary(*op, l, r, *ty)
            }
            Expr::Cast { expr, to } => expr.eval(row, cx)?.cast(*to),
            Expr::IsNull { expr, negated } => Ok(Value::Bool(expr.eval(row, cx)?.is_null() != *negated)),
            Expr::IsBool { expr, value, negated } => {
                let v = expr.eval(row, cx)?;
                Ok(Value::Bool((v == Value::Bool(*value)) != *negated))
            }
            Expr::IsDistinct { left, right, negated } => {
                let (l, r) = (left.eval(row, cx)?, right.eval(row, cx)?);
                let distinct = match (&l, &r) {
                    (Value::Null, Value::Null) => false,
                    (Value::Null, _) | (_, Value::Null) => true,
                    _ => l.sql_cmp(&r)? != Some(Ordering::Equal),
                };
                Ok(Value::Bool(distinct != *negated))
            }
            Expr::InList { expr, list, negated } => in_list(expr.eval(row, cx)?, list, *negated, row, cx),
            Expr::Like { expr, pattern, negated, case_insensitive } => {
                let (v, p) = (expr.eval(row, cx)?, pattern.eval(row, cx)?);
                match (v, p) {
                    (Value::Text(v), Value::Text(p)) => {
                        let m = if *case_insensitive {
                            like_match(&v.to_lowercase(), &p.to_lowercase())?
                        } else {
                            like_match(&v, &p)?
                        };
                        Ok(Value::Bool(m != *negated))
                    }
                    _ => Ok(Value::Null),
                }
            }
            Expr::Case { operand, whens, otherwise, .. } => {
                let subject = operand.as_ref().map(|o| o.eval(row, cx)).transpose()?;
                // An integer subject against integer constants (`CASE p_d_id WHEN 1 … WHEN 10`)
                // compares as integers of any width, as `sql_cmp` would.
                let int_subject = subject.as_ref().and_then(Value::as_i64);
                for (when, then) in whens {
                    let hit = match (&subject, when) {
                        // `CASE x WHEN <constant> …`, the common form: compared in place.
                        (Some(s), Expr::Literal { value, .. }) => match (int_subject, value.as_i64()) {
                            (Some(x), Some(y)) => x == y,
                            _ => s.sql_cmp(value)? == Some(Ordering::Equal),
                        },
                        (Some(s), when) => s.sql_cmp(&when.eval(row, cx)?)? == Some(Ordering::Equal),
                        (None, when) => when.eval(row, cx)? == Value::Bool(true),
                    };
                    if hit {
                        return then.eval(row, cx);
                    }
                }
                match otherwise {
                    Some(e) => e.eval(row, cx),
                    None => Ok(Value::Null),
                }
            }
            Expr::Func { func, args, ty } => {
                let mut values = Vec::with_capacity(args.len());
                // COALESCE evaluates lazily.
                if *func == Func::Coalesce {
                    for a in args {
                        let v = a.eval(row, cx)?;
                        if !v.is_null() {
                            return v.cast(*ty);
                        }
                    }
                    return Ok(Value::Null);
                }
                for a in args {
                    values.push(a.eval(row, cx)?);
                }
                super::functions::call(*func, values, *ty, cx)
            }
        }
    }

    /// Evaluates a predicate: true only for TRUE (NULL and FALSE reject the row).
    pub fn eval_predicate(&self, row: &dyn RowAccess, cx: &EvalContext) -> Result<bool> {
        Ok(self.eval(row, cx)? == Value::Bool(true))
    }
}

fn in_list(v: Value, list: &[Expr], negated: bool, row: &dyn RowAccess, cx: &EvalContext) -> Result<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let mut saw_null = false;
    for e in list {
        match v.sql_cmp(&e.eval(row, cx)?)? {
            Some(Ordering::Equal) => return Ok(Value::Bool(!negated)),
            None => saw_null = true,
            _ => {}
        }
    }
    Ok(if saw_null { Value::Null } else { Value::Bool(negated) })
}

fn negate(v: Value) -> Result<Value> {
    Ok(match v {
        Value::Int16(x) => Value::Int16(x.checked_neg().ok_or_else(|| Error::out_of_range("smallint"))?),
        Value::Int32(x) => Value::Int32(x.checked_neg().ok_or_else(|| Error::out_of_range("integer"))?),
        Value::Int64(x) => Value::Int64(x.checked_neg().ok_or_else(|| Error::out_of_range("bigint"))?),
        Value::Float32(x) => Value::Float32(-x),
        Value::Float64(x) => Value::Float64(-x),
        Value::Decimal(d) => Value::Decimal(Decimal::new(-d.value, d.scale)),
        Value::Null => Value::Null,
        other => return Err(Error::mismatch(format!("cannot negate {other:?}"))),
    })
}

/// The result type of arithmetic on `l` and `r`, as the analytical side computes it.
pub fn arithmetic_type(op: BinaryOp, l: DataType, r: DataType) -> Result<DataType> {
    use DataType::*;
    let undefined = || {
        Error::new(
            SqlState::UndefinedFunction,
            format!("operator does not exist: {} {} {}", l.pg_name(), op.symbol(), r.pg_name()),
        )
    };
    match (l.family(), r.family()) {
        (TypeFamily::Date, TypeFamily::Integer) if matches!(op, BinaryOp::Add | BinaryOp::Sub) => return Ok(Date),
        (TypeFamily::Integer, TypeFamily::Date) if op == BinaryOp::Add => return Ok(Date),
        (TypeFamily::Date, TypeFamily::Date) if op == BinaryOp::Sub => return Ok(Int32),
        _ => {}
    }
    let common = l.common_numeric(r).ok_or_else(undefined)?;
    let Decimal { .. } = common else { return Ok(common) };
    let (Decimal { precision: p1, scale: s1 }, Decimal { precision: p2, scale: s2 }) =
        (l.integer_as_decimal(), r.integer_as_decimal())
    else {
        return Ok(common);
    };
    let max = MAX_DECIMAL_PRECISION;
    Ok(match op {
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mod => {
            let scale = s1.max(s2);
            Decimal { precision: (scale + (p1 - s1).max(p2 - s2) + 1).min(max), scale }
        }
        BinaryOp::Mul => {
            if s1 + s2 > max {
                return Err(Error::out_of_range("numeric scale"));
            }
            Decimal { precision: (p1 + p2 + 1).min(max), scale: s1 + s2 }
        }
        BinaryOp::Div => {
            let scale = (s1 + 4).min(max);
            Decimal { precision: (p1 - s1 + s2 + scale).min(max), scale }
        }
        _ => common,
    })
}

/// Applies a non-logical binary operator to two values; `ty` is the result type.
pub fn binary(op: BinaryOp, l: Value, r: Value, ty: DataType) -> Result<Value> {
    // Two integers, the usual operands of keys, counters and quantities, of one width or of
    // two (`quantity + 10` is an integer column and a bigint literal): compared, or computed
    // at 64 bits and checked against the result's width, without the general path's
    // dispatch and cast back.
    if let (Some(a), Some(b)) = (l.as_i64(), r.as_i64())
        && let Some(v) = int_pair(op, a, b, ty)
    {
        return v;
    }
    binary_general(op, l, r, ty)
}

fn binary_general(op: BinaryOp, l: Value, r: Value, ty: DataType) -> Result<Value> {
    if l.is_null() || r.is_null() {
        return Ok(Value::Null);
    }
    if op.is_comparison() {
        let ord = l.sql_cmp(&r)?;
        return Ok(match ord {
            None => Value::Null,
            Some(o) => Value::Bool(match op {
                BinaryOp::Eq => o == Ordering::Equal,
                BinaryOp::NotEq => o != Ordering::Equal,
                BinaryOp::Lt => o == Ordering::Less,
                BinaryOp::LtEq => o != Ordering::Greater,
                BinaryOp::Gt => o == Ordering::Greater,
                _ => o != Ordering::Less,
            }),
        });
    }
    if op == BinaryOp::Concat {
        let mut s = String::new();
        l.write_as_text(&mut s);
        r.write_as_text(&mut s);
        return Ok(Value::Text(s));
    }
    match (&l, &r, ty) {
        (Value::Date(d), _, DataType::Date) => {
            let n = r.as_i64().unwrap_or(0);
            let days = if op == BinaryOp::Sub { *d as i64 - n } else { *d as i64 + n };
            return i32::try_from(days).map(Value::Date).map_err(|_| Error::out_of_range("date"));
        }
        (_, Value::Date(d), DataType::Date) => {
            return i32::try_from(*d as i64 + l.as_i64().unwrap_or(0))
                .map(Value::Date)
                .map_err(|_| Error::out_of_range("date"));
        }
        (Value::Date(a), Value::Date(b), _) => return Ok(Value::Int32(a - b)),
        _ => {}
    }
    match ty {
        DataType::Int16 | DataType::Int32 | DataType::Int64 => {
            let (a, b) = (l.as_i64().unwrap_or(0), r.as_i64().unwrap_or(0));
            let v = integer_op(op, a, b, ty)?;
            Value::Int64(v).cast(ty)
        }
        DataType::Float32 | DataType::Float64 => {
            let (a, b) = (l.as_f64().unwrap_or(0.0), r.as_f64().unwrap_or(0.0));
            let v = match op {
                BinaryOp::Add => a + b,
                BinaryOp::Sub => a - b,
                BinaryOp::Mul => a * b,
                BinaryOp::Div if b == 0.0 => return Err(Error::division_by_zero()),
                BinaryOp::Div => a / b,
                BinaryOp::Mod if b == 0.0 => return Err(Error::division_by_zero()),
                BinaryOp::Mod => a % b,
                _ => return Err(Error::internal("not an arithmetic operator")),
            };
            Ok(if ty == DataType::Float32 { Value::Float32(v as f32) } else { Value::Float64(v) })
        }
        DataType::Decimal { precision, scale } => {
            let to_dec = |v: &Value| -> Result<Decimal> {
                match v {
                    Value::Float32(_) | Value::Float64(_) => Decimal::from_f64(v.as_f64().unwrap_or(0.0), scale),
                    other => other.as_decimal().ok_or_else(|| Error::internal("decimal operand")),
                }
            };
            let (a, b) = (to_dec(&l)?, to_dec(&r)?);
            let d = match op {
                BinaryOp::Add => a.checked_add(b)?,
                BinaryOp::Sub => a.checked_sub(b)?,
                BinaryOp::Mul => a.checked_mul(b)?,
                BinaryOp::Div => a.checked_div(b, scale)?,
                BinaryOp::Mod => {
                    if b.is_zero() {
                        return Err(Error::division_by_zero());
                    }
                    let s = a.scale.max(b.scale);
                    let (x, y) = (a.rescale(s)?, b.rescale(s)?);
                    Decimal::new(x.value % y.value, s)
                }
                _ => return Err(Error::internal("not an arithmetic operator")),
            };
            Ok(Value::Decimal(d.fit(precision, scale)?))
        }
        other => Err(Error::new(
            SqlState::UndefinedFunction,
            format!("operator does not exist: {} {}", other.pg_name(), op.symbol()),
        )),
    }
}

/// [`binary`] of two integers of any widths (their values widened to i64): a comparison, or
/// arithmetic whose result type `ty` is integer or bigint, range-checked as the general
/// path's cast back to `ty` is (22003). `None` for anything else (the general path computes
/// it).
#[inline]
fn int_pair(op: BinaryOp, a: i64, b: i64, ty: DataType) -> Option<Result<Value>> {
    let o = a.cmp(&b);
    let holds = match op {
        BinaryOp::Eq => o == Ordering::Equal,
        BinaryOp::NotEq => o != Ordering::Equal,
        BinaryOp::Lt => o == Ordering::Less,
        BinaryOp::LtEq => o != Ordering::Greater,
        BinaryOp::Gt => o == Ordering::Greater,
        BinaryOp::GtEq => o != Ordering::Less,
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod if matches!(ty, DataType::Int32 | DataType::Int64) => {
            return Some(integer_op(op, a, b, ty).and_then(|v| match ty {
                DataType::Int32 => i32::try_from(v).map(Value::Int32).map_err(|_| Error::out_of_range("integer")),
                _ => Ok(Value::Int64(v)),
            }));
        }
        _ => return None,
    };
    Some(Ok(Value::Bool(holds)))
}

fn integer_op(op: BinaryOp, a: i64, b: i64, ty: DataType) -> Result<i64> {
    let overflow = || Error::out_of_range(ty.pg_name());
    match op {
        BinaryOp::Add => a.checked_add(b).ok_or_else(overflow),
        BinaryOp::Sub => a.checked_sub(b).ok_or_else(overflow),
        BinaryOp::Mul => a.checked_mul(b).ok_or_else(overflow),
        BinaryOp::Div if b == 0 => Err(Error::division_by_zero()),
        BinaryOp::Div => a.checked_div(b).ok_or_else(overflow),
        BinaryOp::Mod if b == 0 => Err(Error::division_by_zero()),
        BinaryOp::Mod => Ok(a.checked_rem(b).unwrap_or(0)),
        _ => Err(Error::internal("not an arithmetic operator")),
    }
}

/// SQL LIKE with `%`, `_` and backslash as the escape character.
pub fn like_match(value: &str, pattern: &str) -> Result<bool> {
    let v: Vec<char> = value.chars().collect();
    let p: Vec<char> = pattern.chars().collect();
    // Iterative matcher with backtracking to the last '%'.
    let (mut vi, mut pi) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while vi < v.len() {
        if pi < p.len() {
            match p[pi] {
                '%' => {
                    star = Some((pi, vi));
                    pi += 1;
                    continue;
                }
                '_' => {
                    vi += 1;
                    pi += 1;
                    continue;
                }
                '\\' => {
                    let Some(&lit) = p.get(pi + 1) else {
                        return Err(Error::new(
                            SqlState::InvalidEscapeSequence,
                            "LIKE pattern must not end with escape character",
                        ));
                    };
                    if lit == v[vi] {
                        vi += 1;
                        pi += 2;
                        continue;
                    }
                }
                c if c == v[vi] => {
                    vi += 1;
                    pi += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, sv)) => {
                pi = sp + 1;
                vi = sv + 1;
                star = Some((sp, sv + 1));
            }
            None => return Ok(false),
        }
    }
    while pi < p.len() && p[pi] == '%' {
        pi += 1;
    }
    Ok(pi == p.len())
}

/// The date part of a timestamp (for CURRENT_DATE).
pub fn date_of(micros: i64) -> i32 {
    micros.div_euclid(MICROS_PER_DAY) as i32
}

/// EXTRACT(field FROM value) as a double.
pub fn extract(field: &str, v: &Value) -> Result<Value> {
    let micros = match v {
        Value::Null => return Ok(Value::Null),
        Value::Timestamp(t) | Value::TimestampTz(t) => *t,
        Value::Date(d) => *d as i64 * MICROS_PER_DAY,
        other => return Err(Error::mismatch(format!("cannot extract {field} from {other:?}"))),
    };
    datetime::timestamp_field(micros, field).map(Value::Float64).ok_or_else(|| {
        Error::new(SqlState::FeatureNotSupported, format!("EXTRACT field \"{field}\" is not supported"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Integers of two widths take `binary`'s integer path; it must answer as the general path
    /// does, overflow and division by zero included.
    #[test]
    fn mixed_width_integers_agree_with_the_general_path() {
        use BinaryOp::*;
        let values = [Value::Int16(-7), Value::Int32(3), Value::Int32(i32::MAX), Value::Int64(10), Value::Int64(i64::MIN), Value::Int64(0), Value::Int64(-1)];
        for op in [Add, Sub, Mul, Div, Mod, Eq, NotEq, Lt, LtEq, Gt, GtEq] {
            for l in &values {
                for r in &values {
                    let ty = if op.is_comparison() { DataType::Bool } else { arithmetic_type(op, l.data_type().unwrap(), r.data_type().unwrap()).unwrap() };
                    let fast = binary(op, l.clone(), r.clone(), ty).map_err(|e| (e.state.code(), e.message.clone()));
                    let general = binary_general(op, l.clone(), r.clone(), ty).map_err(|e| (e.state.code(), e.message.clone()));
                    assert_eq!(fast, general, "{l:?} {} {r:?} as {ty:?}", op.symbol());
                }
            }
        }
        assert_eq!(binary(Add, Value::Int32(5), Value::Int64(10), DataType::Int64).unwrap(), Value::Int64(15));
        assert_eq!(binary(GtEq, Value::Int32(5), Value::Int64(10), DataType::Bool).unwrap(), Value::Bool(false));
        let overflow = binary(Add, Value::Int32(i32::MAX), Value::Int32(1), DataType::Int32).unwrap_err();
        assert_eq!((overflow.state.code(), overflow.message.as_str()), ("22003", "integer out of range"));
    }

    #[test]
    fn case_compares_an_integer_subject_with_constants_of_another_width() {
        let cx = EvalContext { params: &[Value::Int32(3)], now: 0, session: None };
        let lit = |v: i64| Expr::literal(Value::Int64(v), DataType::Int64);
        let text = |t: &str| Expr::literal(Value::Text(t.into()), DataType::Text);
        let case = |subject: Expr, whens: Vec<(Expr, Expr)>| Expr::Case {
            operand: Some(Box::new(subject)),
            whens,
            otherwise: Some(Box::new(text("other"))),
            ty: DataType::Text,
        };
        let param = Expr::Param { index: 0, ty: DataType::Int32 };
        let e = case(param.clone(), (1..=10).map(|k| (lit(k), text(&format!("d{k}")))).collect());
        assert_eq!(e.eval(&NoRow, &cx).unwrap(), Value::Text("d3".into()));
        let missing = case(param, vec![(lit(1), text("d1")), (lit(4), text("d4"))]);
        assert_eq!(missing.eval(&NoRow, &cx).unwrap(), Value::Text("other".into()));
        // A decimal constant equal to the subject still matches (the general comparison).
        let decimal = Expr::literal(Value::Decimal(Decimal::new(30, 1)), DataType::Decimal { precision: 2, scale: 1 });
        let mixed = case(Expr::Param { index: 0, ty: DataType::Int32 }, vec![(decimal, text("three"))]);
        assert_eq!(mixed.eval(&NoRow, &cx).unwrap(), Value::Text("three".into()));
        // A NULL subject matches nothing.
        let null_cx = EvalContext { params: &[Value::Null], now: 0, session: None };
        assert_eq!(e.eval(&NoRow, &null_cx).unwrap(), Value::Text("other".into()));
    }

    #[test]
    fn like_patterns() {
        assert!(like_match("hello", "h%o").unwrap());
        assert!(like_match("hello", "_ello").unwrap());
        assert!(!like_match("hello", "h_o").unwrap());
        assert!(like_match("50%", "50\\%").unwrap());
        assert!(!like_match("501", "50\\%").unwrap());
        assert!(like_match("", "%").unwrap());
        assert!(like_match("abcabc", "%abc").unwrap());
        assert!(like_match("axxbyyc", "a%b%c").unwrap());
    }

    #[test]
    fn advisory_lock_functions_by_name() {
        use AdvisoryOp::*;
        let f = |op, shared, xact| Some(AdvisoryFn { op, shared, xact });
        assert_eq!(AdvisoryFn::by_name("pg_advisory_lock"), f(Lock, false, false));
        assert_eq!(AdvisoryFn::by_name("pg_advisory_lock_shared"), f(Lock, true, false));
        assert_eq!(AdvisoryFn::by_name("pg_advisory_xact_lock"), f(Lock, false, true));
        assert_eq!(AdvisoryFn::by_name("pg_advisory_xact_lock_shared"), f(Lock, true, true));
        assert_eq!(AdvisoryFn::by_name("pg_try_advisory_lock"), f(TryLock, false, false));
        assert_eq!(AdvisoryFn::by_name("pg_try_advisory_lock_shared"), f(TryLock, true, false));
        assert_eq!(AdvisoryFn::by_name("pg_try_advisory_xact_lock"), f(TryLock, false, true));
        assert_eq!(AdvisoryFn::by_name("pg_try_advisory_xact_lock_shared"), f(TryLock, true, true));
        assert_eq!(AdvisoryFn::by_name("pg_advisory_unlock"), f(Unlock, false, false));
        assert_eq!(AdvisoryFn::by_name("pg_advisory_unlock_shared"), f(Unlock, true, false));
        assert_eq!(AdvisoryFn::by_name("pg_advisory_unlock_all"), f(UnlockAll, false, false));
        for other in ["pg_advisory_xact_unlock", "pg_advisory_lockx", "pg_advisory_unlock_xact", "pg_try_advisory_unlock", "pg_advisory"] {
            assert_eq!(AdvisoryFn::by_name(other), None, "{other}");
        }
    }

    #[test]
    fn arithmetic_types_follow_the_analytical_side() {
        use DataType::*;
        assert_eq!(arithmetic_type(BinaryOp::Add, Int32, Int32).unwrap(), Int32);
        assert_eq!(arithmetic_type(BinaryOp::Add, Int32, Int64).unwrap(), Int64);
        let d = |p, s| Decimal { precision: p, scale: s };
        assert_eq!(arithmetic_type(BinaryOp::Add, d(5, 2), d(7, 3)).unwrap(), d(8, 3));
        assert_eq!(arithmetic_type(BinaryOp::Mul, d(5, 2), Int32).unwrap(), d(16, 2));
        assert_eq!(arithmetic_type(BinaryOp::Div, d(12, 2), d(4, 2)).unwrap(), d(18, 6));
        assert!(arithmetic_type(BinaryOp::Add, Text, Int32).is_err());
    }

    #[test]
    fn integer_overflow_and_division_by_zero_are_errors() {
        let e = binary(BinaryOp::Add, Value::Int32(i32::MAX), Value::Int32(1), DataType::Int32).unwrap_err();
        assert_eq!(e.state, SqlState::NumericValueOutOfRange);
        let e = binary(BinaryOp::Div, Value::Int64(1), Value::Int64(0), DataType::Int64).unwrap_err();
        assert_eq!(e.state, SqlState::DivisionByZero);
        assert_eq!(binary(BinaryOp::Div, Value::Int64(-7), Value::Int64(2), DataType::Int64).unwrap(), Value::Int64(-3));
    }

    #[test]
    fn three_valued_logic() {
        let cx = EvalContext { params: &[], now: 0, session: None };
        let t = || Box::new(Expr::literal(Value::Bool(true), DataType::Bool));
        let f = || Box::new(Expr::literal(Value::Bool(false), DataType::Bool));
        let n = || Box::new(Expr::literal(Value::Null, DataType::Bool));
        let and = |l, r| Expr::Binary { op: BinaryOp::And, left: l, right: r, ty: DataType::Bool };
        let or = |l, r| Expr::Binary { op: BinaryOp::Or, left: l, right: r, ty: DataType::Bool };
        assert_eq!(and(n(), f()).eval(&NoRow, &cx).unwrap(), Value::Bool(false));
        assert_eq!(and(n(), t()).eval(&NoRow, &cx).unwrap(), Value::Null);
        assert_eq!(or(n(), t()).eval(&NoRow, &cx).unwrap(), Value::Bool(true));
        assert_eq!(or(n(), f()).eval(&NoRow, &cx).unwrap(), Value::Null);
    }
}
