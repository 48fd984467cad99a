//! One statement-level connection interface over two transports, so that the workloads are
//! written once: [`Embedded`] runs statements in-process through a `freshet::Session`,
//! [`Wire`] sends them over the PostgreSQL protocol with tokio-postgres (to Freshet's server or
//! to PostgreSQL itself).
//!
//! Parameters ([`Param`]) and result cells ([`Cell`]) are the few value kinds the workloads
//! use; each transport converts them to and from its own types by the statement's declared
//! parameter and column types. NUMERIC travels as an unscaled integer with a scale, never as
//! a float, so amounts stay exact on every system.
//!
//! Non-goals: result streaming (every result is collected), and anything a benchmark does not
//! need (arrays, JSON, intervals).

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use freshet::{Decimal, Output, Value};
use futures::SinkExt;
use postgres_types::{FromSql, IsNull, ToSql, Type};

/// An error a statement reported, with its SQLSTATE (empty when the failure had none, e.g. a
/// lost connection).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message} (SQLSTATE {code})")]
pub struct DbError {
    pub code: String,
    pub message: String,
}

impl DbError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        DbError { code: code.to_string(), message: message.into() }
    }

    /// Whether the transaction should be retried: a serialization failure or a deadlock.
    pub fn is_retryable(&self) -> bool {
        self.code == "40001" || self.code == "40P01"
    }
}

impl From<freshet::Error> for DbError {
    fn from(e: freshet::Error) -> Self {
        DbError { code: e.state.code().to_string(), message: e.to_string() }
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        let code = e.code().map(|c| c.code().to_string()).unwrap_or_default();
        let message = match e.as_db_error() {
            Some(db) => db.message().to_string(),
            None => e.to_string(),
        };
        DbError { code, message }
    }
}

pub type DbResult<T> = Result<T, DbError>;

/// A statement parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    Int(i64),
    /// `value / 10^scale`.
    Decimal(i64, u8),
    Text(String),
    /// Microseconds since 1970-01-01 00:00:00.
    Timestamp(i64),
    Null,
    /// An integer array: sent as `int4[]`/`int8[]` where the statement declares one, else in
    /// its text form `{1,2,3}` (how Freshet types a routine's array parameters).
    IntArray(Vec<i64>),
}

impl Param {
    /// Parses `-12.3` as units of `10^-scale` (`-1230` for scale 2); `None` if it is not a
    /// decimal number or has more fraction digits than `scale`.
    pub fn parse_decimal(text: &str, scale: u8) -> Option<i64> {
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if int.is_empty() && frac.is_empty() || frac.len() > scale as usize {
            return None;
        }
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if !all_digits(int) || !all_digits(frac) {
            return None;
        }
        let int: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let frac: i64 = if frac.is_empty() { 0 } else { frac.parse::<i64>().ok()? * 10i64.pow((scale as usize - frac.len()) as u32) };
        let v = int.checked_mul(10i64.pow(scale as u32))?.checked_add(frac)?;
        Some(if negative { -v } else { v })
    }

    fn array_text(items: &[i64]) -> String {
        let parts: Vec<String> = items.iter().map(i64::to_string).collect();
        format!("{{{}}}", parts.join(","))
    }
}

/// A result value.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Bool(bool),
    Int(i64),
    /// `value / 10^scale`.
    Decimal(i128, u8),
    Float(f64),
    Text(String),
    /// Microseconds since 1970-01-01 00:00:00.
    Timestamp(i64),
    /// Days since 1970-01-01.
    Date(i32),
}

impl Cell {
    pub fn as_i64(&self) -> i64 {
        match self {
            Cell::Int(v) => *v,
            Cell::Decimal(v, s) => (*v / 10i128.pow(*s as u32)) as i64,
            Cell::Float(f) => *f as i64,
            _ => 0,
        }
    }

    /// The value in units of `10^-scale` (rounded toward zero).
    pub fn as_scaled(&self, scale: u8) -> i64 {
        match self {
            Cell::Int(v) => v * 10i64.pow(scale as u32),
            Cell::Decimal(v, s) if *s >= scale => (*v / 10i128.pow((*s - scale) as u32)) as i64,
            Cell::Decimal(v, s) => (*v * 10i128.pow((scale - *s) as u32)) as i64,
            Cell::Float(f) => (f * 10f64.powi(scale as i32)) as i64,
            _ => 0,
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Cell::Text(s) => s,
            _ => "",
        }
    }
}

pub type Rows = Vec<Vec<Cell>>;

/// A connection that runs prepared statements one at a time.
///
/// Futures are not required to be `Send`: every connection is driven by the one thread that
/// owns it (a terminal thread), which is also how a client program would use it.
#[allow(async_fn_in_trait)]
pub trait Conn {
    type Stmt: Clone;
    async fn prepare(&mut self, sql: &str) -> DbResult<Self::Stmt>;
    /// Runs a prepared statement and returns its rows.
    async fn query(&mut self, stmt: &Self::Stmt, params: &[Param]) -> DbResult<Rows>;
    /// Runs a prepared statement that returns no rows; returns the number of rows it changed.
    async fn execute(&mut self, stmt: &Self::Stmt, params: &[Param]) -> DbResult<u64>;
    /// Runs one prepared statement once per parameter list. Over the wire the executions are
    /// pipelined (sent together, answered in order); in-process they simply run in turn.
    async fn query_many(&mut self, stmt: &Self::Stmt, params: &[Vec<Param>]) -> DbResult<Vec<Rows>> {
        let mut out = Vec::with_capacity(params.len());
        for p in params {
            out.push(self.query(stmt, p).await?);
        }
        Ok(out)
    }
    /// Runs SQL text without parameters (simple protocol over the wire) and returns the rows
    /// of its last statement.
    async fn simple(&mut self, sql: &str) -> DbResult<Rows>;
    /// `COPY … FROM STDIN` with `data` as its input.
    async fn copy_in(&mut self, sql: &str, data: Vec<u8>) -> DbResult<u64>;
}

// ---------------------------------------------------------------------------------------------
// In-process: freshet::Session

/// Statements run in-process through a `freshet::Session`.
pub struct Embedded {
    pub session: freshet::Session,
}

impl Embedded {
    pub fn new(db: &freshet::Database) -> Self {
        Embedded { session: db.session() }
    }
}

pub fn param_value(p: &Param) -> Value {
    match p {
        Param::Int(v) => Value::Int64(*v),
        Param::Decimal(v, s) => Value::Decimal(Decimal::new(*v as i128, *s)),
        Param::Text(s) => Value::Text(s.clone()),
        Param::Timestamp(t) => Value::Timestamp(*t),
        Param::Null => Value::Null,
        Param::IntArray(items) => Value::Text(Param::array_text(items)),
    }
}

pub fn value_cell(v: Value) -> Cell {
    match v {
        Value::Null => Cell::Null,
        Value::Bool(b) => Cell::Bool(b),
        Value::Int16(v) => Cell::Int(v as i64),
        Value::Int32(v) => Cell::Int(v as i64),
        Value::Int64(v) => Cell::Int(v),
        Value::Float32(v) => Cell::Float(v as f64),
        Value::Float64(v) => Cell::Float(v),
        Value::Decimal(d) => Cell::Decimal(d.value, d.scale),
        Value::Text(s) => Cell::Text(s),
        Value::Date(d) => Cell::Date(d),
        Value::Timestamp(t) | Value::TimestampTz(t) => Cell::Timestamp(t),
    }
}

fn tag_count(tag: &str) -> u64 {
    tag.rsplit(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0)
}

impl Embedded {
    async fn run(&mut self, stmt: &Arc<freshet::Prepared>, params: &[Param]) -> DbResult<(Rows, u64)> {
        let mut values = Vec::with_capacity(params.len());
        for (p, ty) in params.iter().zip(&stmt.param_types) {
            values.push(param_value(p).assign_to(*ty)?);
        }
        let result = self.session.execute(stmt, values).await?;
        match result.output {
            Output::Command { tag } => Ok((Vec::new(), tag_count(&tag))),
            Output::Rows { columns, mut rows, .. } => {
                let mut out = Vec::new();
                while let Some(batch) = rows.next().await {
                    let values = match batch {
                        Ok(freshet::RowBatch::Values(v)) => v,
                        Ok(freshet::RowBatch::Arrow(b)) => freshet::batch_rows(&b, &columns),
                        Err(e) => {
                            self.session.statement_failed();
                            return Err(e.into());
                        }
                    };
                    out.extend(values.into_iter().map(|r| r.into_iter().map(value_cell).collect()));
                }
                let n = out.len() as u64;
                Ok((out, n))
            }
            Output::Empty => Ok((Vec::new(), 0)),
            Output::CopyIn(c) => {
                c.abort().await;
                Err(DbError::new("0A000", "COPY FROM STDIN through Conn::query"))
            }
            Output::CopyOut(_) => Err(DbError::new("0A000", "COPY TO STDOUT through Conn::query")),
        }
    }
}

impl Conn for Embedded {
    type Stmt = Arc<freshet::Prepared>;

    async fn prepare(&mut self, sql: &str) -> DbResult<Self::Stmt> {
        Ok(self.session.prepare(sql, &[]).await?)
    }

    async fn query(&mut self, stmt: &Self::Stmt, params: &[Param]) -> DbResult<Rows> {
        Ok(self.run(stmt, params).await?.0)
    }

    async fn execute(&mut self, stmt: &Self::Stmt, params: &[Param]) -> DbResult<u64> {
        Ok(self.run(stmt, params).await?.1)
    }

    async fn simple(&mut self, sql: &str) -> DbResult<Rows> {
        let results = self.session.execute_sql(sql).await?;
        Ok(results.last().map(|r| r.rows().into_iter().map(|row| row.into_iter().map(value_cell).collect()).collect()).unwrap_or_default())
    }

    async fn copy_in(&mut self, sql: &str, data: Vec<u8>) -> DbResult<u64> {
        Ok(self.session.copy_in(sql, &data).await?)
    }
}

// ---------------------------------------------------------------------------------------------
// Over the wire: tokio-postgres

/// Statements sent over the PostgreSQL protocol (extended protocol, prepared statements).
pub struct Wire {
    pub client: tokio_postgres::Client,
}

impl Wire {
    /// Connects and spawns the connection's task on the current tokio runtime.
    pub async fn connect(conninfo: &str) -> DbResult<Wire> {
        let (client, connection) = tokio_postgres::connect(conninfo, tokio_postgres::NoTls).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Wire { client })
    }
}

/// Microseconds from 1970-01-01 to 2000-01-01 (PostgreSQL's epoch for binary timestamps).
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

impl ToSql for Param {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match (self, ty) {
            (Param::Int(v), &Type::INT2) => out.put_i16(i16::try_from(*v)?),
            (Param::Int(v), &Type::INT4) => out.put_i32(i32::try_from(*v)?),
            (Param::Int(v), &Type::INT8) => out.put_i64(*v),
            (Param::Int(v), &Type::NUMERIC) => encode_numeric(*v as i128, 0, out),
            (Param::Int(v), &Type::FLOAT8) => out.put_f64(*v as f64),
            (Param::Decimal(v, s), &Type::NUMERIC) => encode_numeric(*v as i128, *s, out),
            (Param::Decimal(v, s), &Type::FLOAT8) => out.put_f64(*v as f64 / 10f64.powi(*s as i32)),
            (Param::Text(s), _) => out.put_slice(s.as_bytes()),
            (Param::Null, _) => return Ok(IsNull::Yes),
            (Param::IntArray(items), &Type::INT4_ARRAY) => {
                let items = items.iter().map(|&v| i32::try_from(v)).collect::<Result<Vec<i32>, _>>()?;
                return items.to_sql(ty, out);
            }
            (Param::IntArray(items), &Type::INT8_ARRAY) => return items.to_sql(ty, out),
            (Param::IntArray(items), &Type::TEXT | &Type::VARCHAR | &Type::UNKNOWN) => out.put_slice(Param::array_text(items).as_bytes()),
            (Param::Timestamp(t), &Type::TIMESTAMP) | (Param::Timestamp(t), &Type::TIMESTAMPTZ) => out.put_i64(t - PG_EPOCH_MICROS),
            (p, ty) => return Err(format!("cannot send {p:?} as {ty}").into()),
        }
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres_types::to_sql_checked!();
}

/// PostgreSQL's binary NUMERIC: ndigits, weight, sign, dscale, then base-10000 digits.
fn encode_numeric(unscaled: i128, scale: u8, out: &mut BytesMut) {
    let negative = unscaled < 0;
    let mut magnitude = unscaled.unsigned_abs();
    // Pad the fraction to whole base-10000 digits.
    let pad = (4 - scale as u32 % 4) % 4;
    magnitude *= 10u128.pow(pad);
    let frac_groups = (scale as u32 + pad) / 4;
    let mut groups = Vec::new(); // least significant first
    while magnitude > 0 {
        groups.push((magnitude % 10_000) as i16);
        magnitude /= 10_000;
    }
    while groups.len() as u32 <= frac_groups {
        groups.push(0);
    }
    let weight = groups.len() as i32 - 1 - frac_groups as i32;
    groups.reverse();
    out.put_i16(groups.len() as i16);
    out.put_i16(weight as i16);
    out.put_u16(if negative { 0x4000 } else { 0 });
    out.put_u16(scale as u16);
    for g in groups {
        out.put_i16(g);
    }
}

fn decode_numeric(raw: &[u8]) -> Result<Cell, Box<dyn std::error::Error + Sync + Send>> {
    let field = |i: usize| -> Result<u16, Box<dyn std::error::Error + Sync + Send>> {
        raw.get(i..i + 2).map(|b| u16::from_be_bytes([b[0], b[1]])).ok_or_else(|| "short NUMERIC".into())
    };
    let (ndigits, weight, sign, dscale) = (field(0)? as usize, field(2)? as i16 as i32, field(4)?, field(6)? as u8);
    if sign == 0xC000 {
        return Ok(Cell::Float(f64::NAN));
    }
    // value = sum digit[i] * 10000^(weight - i); scaled by 10^dscale.
    let mut unscaled: i128 = 0;
    let mut exponent = weight; // power of 10000 of the next digit
    for i in 0..ndigits {
        unscaled = unscaled * 10_000 + field(8 + 2 * i)? as i128;
        exponent -= 1;
    }
    // Now unscaled = value * 10000^(-(exponent + 1)) ... bring it to 10^dscale.
    let shift10 = 4 * (exponent + 1) + dscale as i32; // value * 10^dscale = unscaled * 10^shift10
    if shift10 >= 0 {
        unscaled *= 10i128.pow(shift10 as u32);
    } else {
        unscaled /= 10i128.pow((-shift10) as u32);
    }
    if sign == 0x4000 {
        unscaled = -unscaled;
    }
    Ok(Cell::Decimal(unscaled, dscale))
}

impl<'a> FromSql<'a> for Cell {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(match *ty {
            Type::BOOL => Cell::Bool(bool::from_sql(ty, raw)?),
            Type::INT2 => Cell::Int(i16::from_sql(ty, raw)? as i64),
            Type::INT4 => Cell::Int(i32::from_sql(ty, raw)? as i64),
            Type::INT8 => Cell::Int(i64::from_sql(ty, raw)?),
            Type::FLOAT4 => Cell::Float(f32::from_sql(ty, raw)? as f64),
            Type::FLOAT8 => Cell::Float(f64::from_sql(ty, raw)?),
            Type::NUMERIC => decode_numeric(raw)?,
            Type::TIMESTAMP | Type::TIMESTAMPTZ => Cell::Timestamp(i64::from_sql(&Type::INT8, raw)? + PG_EPOCH_MICROS),
            Type::DATE => Cell::Date(i32::from_sql(&Type::INT4, raw)? + 10_957),
            _ => Cell::Text(String::from_utf8_lossy(raw).into_owned()),
        })
    }

    fn from_sql_null(_: &Type) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Cell::Null)
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

fn wire_rows(rows: Vec<tokio_postgres::Row>) -> DbResult<Rows> {
    rows.iter()
        .map(|r| (0..r.len()).map(|i| r.try_get::<_, Cell>(i).map_err(DbError::from)).collect())
        .collect()
}

fn refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

impl Conn for Wire {
    type Stmt = tokio_postgres::Statement;

    async fn prepare(&mut self, sql: &str) -> DbResult<Self::Stmt> {
        Ok(self.client.prepare(sql).await?)
    }

    async fn query(&mut self, stmt: &Self::Stmt, params: &[Param]) -> DbResult<Rows> {
        wire_rows(self.client.query(stmt, &refs(params)).await?)
    }

    async fn execute(&mut self, stmt: &Self::Stmt, params: &[Param]) -> DbResult<u64> {
        Ok(self.client.execute(stmt, &refs(params)).await?)
    }

    async fn query_many(&mut self, stmt: &Self::Stmt, params: &[Vec<Param>]) -> DbResult<Vec<Rows>> {
        let client = &self.client;
        let all = futures::future::join_all(params.iter().map(|p| async move { client.query(stmt, &refs(p)).await })).await;
        all.into_iter().map(|r| wire_rows(r?)).collect()
    }

    async fn simple(&mut self, sql: &str) -> DbResult<Rows> {
        // The extended protocol with binary results, so values decode exactly as `query`'s do;
        // several statements are run one by one.
        let mut last = Vec::new();
        for statement in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let stmt = self.client.prepare(statement).await?;
            last = wire_rows(self.client.query(&stmt, &[]).await?)?;
        }
        Ok(last)
    }

    async fn copy_in(&mut self, sql: &str, data: Vec<u8>) -> DbResult<u64> {
        let sink = self.client.copy_in::<_, bytes::Bytes>(sql).await?;
        futures::pin_mut!(sink);
        sink.send(bytes::Bytes::from(data)).await?;
        Ok(sink.finish().await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_round_trips_through_the_binary_format() {
        for (v, s) in [(0i128, 0u8), (12345, 2), (-12345, 2), (1, 4), (99999999, 2), (500000, 2), (7, 0), (-1, 1), (123456789012, 4)] {
            let mut buf = BytesMut::new();
            encode_numeric(v, s, &mut buf);
            assert_eq!(decode_numeric(&buf).unwrap(), Cell::Decimal(v, s), "{v} scale {s}");
        }
    }
}
