//! Redo records and their binary encoding.
//!
//! A record is what recovery needs to redo one committed change of the database: a
//! transaction's row changes (row images, addressed by stable row ids so that replay puts every
//! row exactly where it was), or a change of the catalog. The encoding is little-endian and
//! self-describing per value (a type tag), versioned by a leading format byte, and framed by the
//! log with a length and a CRC.

use crate::catalog::{ColumnDef, ColumnDefault, IndexDef, TableDef, TableId, ViewDef};
use crate::sequence::{SequenceDef, SequenceOptions};
use crate::error::{Error, Result};
use crate::storage::{RowId, Ts};
use crate::types::{DataType, Decimal, Value};

const FORMAT: u8 = 1;

/// One row change of a committed transaction.
#[derive(Clone, Debug, PartialEq)]
pub enum RowChange {
    /// A new row (full image) in slot `row` of `partition`.
    Insert { table: TableId, partition: u16, row: RowId, values: Vec<Value> },
    /// New values of some columns.
    Update { table: TableId, partition: u16, row: RowId, columns: Vec<(u16, Value)> },
    Delete { table: TableId, partition: u16, row: RowId },
}

impl RowChange {
    pub fn table(&self) -> TableId {
        match self {
            RowChange::Insert { table, .. } | RowChange::Update { table, .. } | RowChange::Delete { table, .. } => *table,
        }
    }
}

/// A redo record.
#[derive(Clone, Debug, PartialEq)]
pub enum RedoRecord {
    /// The changes of one committed transaction, on all its partitions, and its commit
    /// timestamp (recovery sets the clock past the largest).
    Commit { ts: Ts, changes: Vec<RowChange> },
    /// A table was created, or its definition changed (indexes, primary key).
    PutTable(TableDef),
    DropTable(TableId),
    Truncate(Vec<TableId>),
    /// A checkpoint started here: it holds every commit logged before this record.
    CheckpointStart { ts: Ts },
    /// Some of the changes of a large transaction, logged ahead of its `Commit` record with
    /// the same timestamp (which carries the rest). Recovery applies them only with that
    /// commit; parts without one belong to a transaction that did not commit.
    Part { ts: Ts, changes: Vec<RowChange> },
    /// A stored procedure or function was created or replaced: its CREATE statement's text
    /// (recovery compiles it again).
    PutProcedure(String),
    /// A routine was dropped: its name and input parameter types
    /// ([`crate::sql::plpgsql::drop_key`]); a log written before routines could share a name
    /// holds only the name.
    DropProcedure(String),
    /// A view was created or replaced.
    PutView(ViewDef),
    DropView(String),
    /// CREATE SEQUENCE (a table's own sequences travel in its `PutTable`).
    PutSequence(SequenceDef),
    DropSequence(String),
    /// ALTER TABLE … ADD COLUMN: `column` appended to table `table`, every existing slot
    /// holding `fill`.
    AddColumn { table: TableId, column: ColumnDef, fill: Value },
    /// ALTER TABLE … DROP COLUMN: column `column` (a position) of table `table` removed, the
    /// definition becoming [`TableDef::without_column`](crate::catalog::TableDef::without_column).
    DropColumn { table: TableId, column: u32 },
    /// ALTER TABLE … ALTER COLUMN … TYPE: column `column` of table `table` converted to `ty`
    /// (an explicit cast first with `explicit`), the definition becoming
    /// [`TableDef::with_column_type`](crate::catalog::TableDef::with_column_type).
    AlterColumnType { table: TableId, column: u32, ty: DataType, explicit: bool },
    /// A sequence's counter resumes at `last` (after it, with `called`): logged before the
    /// values it covers are handed out (`sequence` module).
    SequenceValue { id: TableId, last: i64, called: bool },
}

/// Row changes per record: a transaction with more is logged as parts and a commit, so that no
/// record nears [`super::log::MAX_RECORD`].
pub const CHANGES_PER_RECORD: usize = 100_000;

/// Appends the encoding of `record` to `out`.
pub fn encode(record: &RedoRecord, out: &mut Vec<u8>) {
    out.push(FORMAT);
    match record {
        RedoRecord::Commit { ts, changes } | RedoRecord::Part { ts, changes } => {
            out.push(if matches!(record, RedoRecord::Commit { .. }) { 1 } else { 6 });
            put_u64(out, *ts);
            put_u32(out, changes.len() as u32);
            for c in changes {
                encode_change(c, out);
            }
        }
        RedoRecord::PutTable(def) => {
            out.push(2);
            encode_table(def, out);
        }
        RedoRecord::DropTable(id) => {
            out.push(3);
            put_u32(out, *id);
        }
        RedoRecord::Truncate(ids) => {
            out.push(4);
            put_u32(out, ids.len() as u32);
            for id in ids {
                put_u32(out, *id);
            }
        }
        RedoRecord::CheckpointStart { ts } => {
            out.push(5);
            put_u64(out, *ts);
        }
        RedoRecord::PutProcedure(source) => {
            out.push(7);
            put_str(out, source);
        }
        RedoRecord::DropProcedure(name) => {
            out.push(8);
            put_str(out, name);
        }
        RedoRecord::PutView(view) => {
            out.push(9);
            encode_view(view, out);
        }
        RedoRecord::DropView(name) => {
            out.push(10);
            put_str(out, name);
        }
        RedoRecord::PutSequence(def) => {
            out.push(11);
            encode_sequence(def, out);
        }
        RedoRecord::DropSequence(name) => {
            out.push(12);
            put_str(out, name);
        }
        RedoRecord::AddColumn { table, column, fill } => {
            out.push(14);
            put_u32(out, *table);
            encode_column(column, out);
            encode_value(fill, out);
        }
        RedoRecord::DropColumn { table, column } => {
            out.push(15);
            put_u32(out, *table);
            put_u32(out, *column);
        }
        RedoRecord::AlterColumnType { table, column, ty, explicit } => {
            out.push(16);
            put_u32(out, *table);
            put_u32(out, *column);
            encode_type(*ty, out);
            out.push(*explicit as u8);
        }
        RedoRecord::SequenceValue { id, last, called } => {
            out.push(13);
            put_u32(out, *id);
            put_u64(out, *last as u64);
            out.push(*called as u8);
        }
    }
}

/// Appends the encoding of a view definition (also what checkpoints keep of views).
pub fn encode_view(view: &ViewDef, out: &mut Vec<u8>) {
    put_u32(out, view.id);
    put_str(out, &view.name);
    put_u32(out, view.columns.len() as u32);
    for (name, ty) in &view.columns {
        put_str(out, name);
        encode_type(*ty, out);
    }
    put_str(out, &view.query);
    put_u32(out, view.depends_on.len() as u32);
    for d in &view.depends_on {
        put_str(out, d);
    }
}

pub fn decode_view(r: &mut Reader) -> Result<ViewDef> {
    let id = r.u32()?;
    let name = r.string()?;
    let n = r.u32()? as usize;
    let columns = (0..n).map(|_| Ok((r.string()?, decode_type(r)?))).collect::<Result<_>>()?;
    let query = r.string()?;
    let n = r.u32()? as usize;
    let depends_on = (0..n).map(|_| r.string()).collect::<Result<_>>()?;
    Ok(ViewDef { id, name, columns, query, depends_on })
}

pub fn decode(bytes: &[u8]) -> Result<RedoRecord> {
    let mut r = Reader { bytes, pos: 0 };
    if r.u8()? != FORMAT {
        return Err(corrupt("unknown record format"));
    }
    let record = match r.u8()? {
        tag @ (1 | 6) => {
            let ts = r.u64()?;
            let n = r.u32()? as usize;
            let mut changes = Vec::with_capacity(n.min(1 << 16));
            for _ in 0..n {
                changes.push(decode_change(&mut r)?);
            }
            if tag == 1 { RedoRecord::Commit { ts, changes } } else { RedoRecord::Part { ts, changes } }
        }
        2 => RedoRecord::PutTable(decode_table(&mut r)?),
        3 => RedoRecord::DropTable(r.u32()?),
        4 => {
            let n = r.u32()? as usize;
            RedoRecord::Truncate((0..n).map(|_| r.u32()).collect::<Result<_>>()?)
        }
        5 => RedoRecord::CheckpointStart { ts: r.u64()? },
        7 => RedoRecord::PutProcedure(r.string()?),
        8 => RedoRecord::DropProcedure(r.string()?),
        9 => RedoRecord::PutView(decode_view(&mut r)?),
        10 => RedoRecord::DropView(r.string()?),
        11 => RedoRecord::PutSequence(decode_sequence(&mut r)?),
        12 => RedoRecord::DropSequence(r.string()?),
        14 => RedoRecord::AddColumn { table: r.u32()?, column: decode_column(&mut r)?, fill: decode_value(&mut r)? },
        15 => RedoRecord::DropColumn { table: r.u32()?, column: r.u32()? },
        16 => RedoRecord::AlterColumnType { table: r.u32()?, column: r.u32()?, ty: decode_type(&mut r)?, explicit: r.u8()? != 0 },
        13 => RedoRecord::SequenceValue { id: r.u32()?, last: r.u64()? as i64, called: r.u8()? != 0 },
        t => return Err(corrupt(&format!("unknown record type {t}"))),
    };
    if r.pos != bytes.len() {
        return Err(corrupt("trailing bytes in record"));
    }
    Ok(record)
}

fn corrupt(what: &str) -> Error {
    Error::new(crate::error::SqlState::Internal, format!("corrupt redo record: {what}"))
}

fn encode_change(c: &RowChange, out: &mut Vec<u8>) {
    match c {
        RowChange::Insert { table, partition, row, values } => {
            out.push(1);
            put_u32(out, *table);
            put_u16(out, *partition);
            put_u64(out, row.0);
            put_u16(out, values.len() as u16);
            for v in values {
                encode_value(v, out);
            }
        }
        RowChange::Update { table, partition, row, columns } => {
            out.push(2);
            put_u32(out, *table);
            put_u16(out, *partition);
            put_u64(out, row.0);
            put_u16(out, columns.len() as u16);
            for (c, v) in columns {
                put_u16(out, *c);
                encode_value(v, out);
            }
        }
        RowChange::Delete { table, partition, row } => {
            out.push(3);
            put_u32(out, *table);
            put_u16(out, *partition);
            put_u64(out, row.0);
        }
    }
}

fn decode_change(r: &mut Reader) -> Result<RowChange> {
    let kind = r.u8()?;
    let (table, partition, row) = (r.u32()?, r.u16()?, RowId(r.u64()?));
    Ok(match kind {
        1 => {
            let n = r.u16()? as usize;
            RowChange::Insert { table, partition, row, values: (0..n).map(|_| decode_value(r)).collect::<Result<_>>()? }
        }
        2 => {
            let n = r.u16()? as usize;
            let columns = (0..n).map(|_| Ok((r.u16()?, decode_value(r)?))).collect::<Result<_>>()?;
            RowChange::Update { table, partition, row, columns }
        }
        3 => RowChange::Delete { table, partition, row },
        k => return Err(corrupt(&format!("unknown change kind {k}"))),
    })
}

pub fn encode_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.push(0),
        Value::Bool(b) => out.extend_from_slice(&[1, *b as u8]),
        Value::Int16(x) => {
            out.push(2);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::Int32(x) => {
            out.push(3);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::Int64(x) => {
            out.push(4);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::Float32(x) => {
            out.push(5);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::Float64(x) => {
            out.push(6);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::Decimal(d) => {
            out.push(7);
            out.extend_from_slice(&d.value.to_le_bytes());
            out.push(d.scale);
        }
        Value::Text(s) => {
            out.push(8);
            put_str(out, s);
        }
        Value::Date(d) => {
            out.push(9);
            out.extend_from_slice(&d.to_le_bytes());
        }
        Value::Timestamp(t) => {
            out.push(10);
            out.extend_from_slice(&t.to_le_bytes());
        }
        Value::TimestampTz(t) => {
            out.push(11);
            out.extend_from_slice(&t.to_le_bytes());
        }
    }
}

pub fn decode_value(r: &mut Reader) -> Result<Value> {
    Ok(match r.u8()? {
        0 => Value::Null,
        1 => Value::Bool(r.u8()? != 0),
        2 => Value::Int16(i16::from_le_bytes(r.array()?)),
        3 => Value::Int32(i32::from_le_bytes(r.array()?)),
        4 => Value::Int64(i64::from_le_bytes(r.array()?)),
        5 => Value::Float32(f32::from_le_bytes(r.array()?)),
        6 => Value::Float64(f64::from_le_bytes(r.array()?)),
        7 => {
            let value = i128::from_le_bytes(r.array()?);
            Value::Decimal(Decimal::new(value, r.u8()?))
        }
        8 => Value::Text(r.string()?),
        9 => Value::Date(i32::from_le_bytes(r.array()?)),
        10 => Value::Timestamp(i64::from_le_bytes(r.array()?)),
        11 => Value::TimestampTz(i64::from_le_bytes(r.array()?)),
        t => return Err(corrupt(&format!("unknown value tag {t}"))),
    })
}

fn encode_type(t: DataType, out: &mut Vec<u8>) {
    let (tag, a, b) = match t {
        DataType::Bool => (1, 0, 0),
        DataType::Int16 => (2, 0, 0),
        DataType::Int32 => (3, 0, 0),
        DataType::Int64 => (4, 0, 0),
        DataType::Float32 => (5, 0, 0),
        DataType::Float64 => (6, 0, 0),
        DataType::Decimal { precision, scale } => (7, precision as u32, scale as u32),
        DataType::Char(n) => (8, n, 0),
        DataType::Varchar(None) => (9, 0, 0),
        DataType::Varchar(Some(n)) => (10, n, 0),
        DataType::Text => (11, 0, 0),
        DataType::Date => (12, 0, 0),
        DataType::Timestamp => (13, 0, 0),
        DataType::TimestampTz => (14, 0, 0),
        DataType::Uuid => (15, 0, 0),
    };
    out.push(tag);
    put_u32(out, a);
    put_u32(out, b);
}

fn decode_type(r: &mut Reader) -> Result<DataType> {
    decode_type_and_modifier(r).map(|(ty, _)| ty)
}

/// A type and its first modifier as written (for a column of a timestamp type, its
/// precision + 1, or 0 for microseconds: see [`encode_column`]).
fn decode_type_and_modifier(r: &mut Reader) -> Result<(DataType, u32)> {
    let (tag, a, b) = (r.u8()?, r.u32()?, r.u32()?);
    let ty = match tag {
        1 => DataType::Bool,
        2 => DataType::Int16,
        3 => DataType::Int32,
        4 => DataType::Int64,
        5 => DataType::Float32,
        6 => DataType::Float64,
        7 => DataType::Decimal { precision: a as u8, scale: b as u8 },
        8 => DataType::Char(a),
        9 => DataType::Varchar(None),
        10 => DataType::Varchar(Some(a)),
        11 => DataType::Text,
        12 => DataType::Date,
        13 => DataType::Timestamp,
        14 => DataType::TimestampTz,
        15 => DataType::Uuid,
        t => return Err(corrupt(&format!("unknown type tag {t}"))),
    };
    Ok((ty, a))
}

/// Appends the encoding of a table definition (also used by checkpoints for the catalog).
pub fn encode_table(def: &TableDef, out: &mut Vec<u8>) {
    put_u32(out, def.id);
    put_str(out, &def.name);
    put_u16(out, def.columns.len() as u16);
    for c in &def.columns {
        encode_column(c, out);
    }
    put_u16(out, def.indexes.len() as u16);
    for i in &def.indexes {
        put_str(out, &i.name);
        put_u16(out, i.columns.len() as u16);
        for c in &i.columns {
            put_u16(out, *c as u16);
        }
        out.push(i.unique as u8);
        out.push(i.primary as u8);
    }
    // Bit 0: a partition key follows; bit 1: owned sequences follow; bit 2: CHECK constraints
    // follow (bits 1 and 2 are absent in older logs).
    let owns = if def.sequences.is_empty() { 0 } else { 2 };
    let checks = if def.checks.is_empty() { 0 } else { 4 };
    let comments = if def.comments.is_empty() { 0 } else { 8 };
    match def.partition_key {
        None => out.push(owns | checks | comments),
        Some(k) => {
            out.push(1 | owns | checks | comments);
            put_u16(out, k as u16);
        }
    }
    if owns != 0 {
        put_u16(out, def.sequences.len() as u16);
        for s in &def.sequences {
            encode_sequence(s, out);
        }
    }
    if checks != 0 {
        put_u16(out, def.checks.len() as u16);
        for k in &def.checks {
            put_str(out, &k.name);
            put_str(out, &k.sql);
        }
    }
    if comments != 0 {
        put_u16(out, def.comments.len() as u16);
        for (column, text) in &def.comments {
            match column {
                None => out.push(0),
                Some(c) => {
                    out.push(1);
                    put_str(out, c);
                }
            }
            put_str(out, text);
        }
    }
}

fn encode_column(c: &ColumnDef, out: &mut Vec<u8>) {
    put_str(out, &c.name);
    let at = out.len();
    encode_type(c.ty, out);
    if let Some(p) = c.precision {
        // A timestamp type's first modifier is otherwise unused (0): the column's precision
        // + 1, so logs written before precisions existed read as microseconds.
        out[at + 1..at + 5].copy_from_slice(&(p as u32 + 1).to_le_bytes());
    }
    out.push(c.nullable as u8);
    match &c.default {
        None => out.push(0),
        Some(ColumnDefault::Value(v)) => {
            out.push(1);
            encode_value(v, out);
        }
        Some(ColumnDefault::CurrentTimestamp) => out.push(2),
        Some(ColumnDefault::RandomUuid) => out.push(6),
        Some(ColumnDefault::TimeDependent { sql, .. }) => {
            out.push(7);
            put_str(out, sql);
        }
        Some(ColumnDefault::Nextval(seq)) => {
            out.push(3);
            put_str(out, seq);
        }
        Some(ColumnDefault::Identity { sequence, always }) => {
            out.push(if *always { 4 } else { 5 });
            put_str(out, sequence);
        }
    }
}

fn decode_column(r: &mut Reader) -> Result<ColumnDef> {
    let name = r.string()?;
    let (ty, modifier) = decode_type_and_modifier(r)?;
    let precision = match ty {
        DataType::Timestamp | DataType::TimestampTz if modifier > 0 => Some((modifier - 1).min(6) as u8),
        _ => None,
    };
    let nullable = r.u8()? != 0;
    let default = match r.u8()? {
        0 => None,
        1 => Some(ColumnDefault::Value(decode_value(r)?)),
        2 => Some(ColumnDefault::CurrentTimestamp),
        3 => Some(ColumnDefault::Nextval(r.string()?)),
        t @ (4 | 5) => Some(ColumnDefault::Identity { sequence: r.string()?, always: t == 4 }),
        6 => Some(ColumnDefault::RandomUuid),
        7 => Some(crate::sql::ddl::restore_time_default(&r.string()?, ty, &name).map_err(|e| corrupt(&format!("column default: {e}")))?),
        t => return Err(corrupt(&format!("unknown column default {t}"))),
    };
    Ok(ColumnDef { name, ty, nullable, default, precision })
}

/// Appends the encoding of a sequence definition (also used by checkpoints).
pub fn encode_sequence(s: &SequenceDef, out: &mut Vec<u8>) {
    put_u32(out, s.id);
    put_str(out, &s.name);
    encode_type(s.ty, out);
    for v in [s.increment, s.min, s.max, s.start, s.cache] {
        put_u64(out, v as u64);
    }
    out.push(s.cycle as u8);
    match &s.owned_by {
        None => out.push(0),
        Some((table, column)) => {
            out.push(1);
            put_str(out, table);
            put_str(out, column);
        }
    }
}

pub fn decode_sequence(r: &mut Reader) -> Result<SequenceDef> {
    let id = r.u32()?;
    let name = r.string()?;
    let ty = decode_type(r)?;
    let mut v = [0i64; 5];
    for x in &mut v {
        *x = r.u64()? as i64;
    }
    let [increment, min, max, start, cache] = v;
    let cycle = r.u8()? != 0;
    let owned_by = match r.u8()? {
        0 => None,
        _ => Some((r.string()?, r.string()?)),
    };
    let options = SequenceOptions {
        ty: Some(ty),
        increment: Some(increment),
        min: Some(Some(min)),
        max: Some(Some(max)),
        start: Some(start),
        cache: Some(cache),
        cycle: Some(cycle),
    };
    let mut def = SequenceDef::new(name, &options, owned_by).map_err(|e| corrupt(&e.message))?;
    def.id = id;
    Ok(def)
}

pub fn decode_table(r: &mut Reader) -> Result<TableDef> {
    let id = r.u32()?;
    let name = r.string()?;
    let n = r.u16()? as usize;
    let mut columns = Vec::with_capacity(n);
    for _ in 0..n {
        columns.push(decode_column(r)?);
    }
    let n = r.u16()? as usize;
    let mut indexes = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let k = r.u16()? as usize;
        let cols = (0..k).map(|_| r.u16().map(|c| c as usize)).collect::<Result<_>>()?;
        let unique = r.u8()? != 0;
        let primary = r.u8()? != 0;
        indexes.push(IndexDef { name, columns: cols, unique, primary });
    }
    let flags = r.u8()?;
    let partition_key = if flags & 1 != 0 { Some(r.u16()? as usize) } else { None };
    let mut sequences = Vec::new();
    if flags & 2 != 0 {
        for _ in 0..r.u16()? {
            sequences.push(std::sync::Arc::new(decode_sequence(r)?));
        }
    }
    let mut checks = Vec::new();
    if flags & 4 != 0 {
        for _ in 0..r.u16()? {
            checks.push((r.string()?, r.string()?));
        }
    }
    let mut comments = Vec::new();
    if flags & 8 != 0 {
        for _ in 0..r.u16()? {
            let column = if r.u8()? != 0 { Some(r.string()?) } else { None };
            comments.push((column, r.string()?));
        }
    }
    let mut def = TableDef { id, name, columns, indexes, partition_key, sequences, checks: Vec::new(), comments };
    for (name, sql) in checks {
        let check = crate::catalog::CheckDef::bind(name, sql, &def).map_err(|e| corrupt(&format!("check constraint: {}", e.message)))?;
        def.checks.push(check);
    }
    Ok(def)
}

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len() as u32);
    out.extend_from_slice(s.as_bytes());
}

/// A cursor over encoded bytes; every read checks the bounds.
pub struct Reader<'a> {
    pub bytes: &'a [u8],
    pub pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.bytes.len()).ok_or_else(|| corrupt("truncated"))?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub fn string(&mut self) -> Result<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| corrupt("invalid UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let def = TableDef {
            id: 7,
            name: "t".into(),
            columns: vec![
                ColumnDef { name: "a".into(), ty: DataType::Int32, nullable: false, default: None, precision: None },
                ColumnDef {
                    name: "b".into(),
                    ty: DataType::Decimal { precision: 10, scale: 2 },
                    nullable: true,
                    default: Some(ColumnDefault::Value(Value::Decimal(Decimal::new(150, 2)))),
                    precision: None,
                },
                ColumnDef { name: "c".into(), ty: DataType::Timestamp, nullable: true, default: Some(ColumnDefault::CurrentTimestamp), precision: None },
                ColumnDef { name: "d".into(), ty: DataType::TimestampTz, nullable: true, default: None, precision: Some(0) },
                ColumnDef { name: "e".into(), ty: DataType::Timestamp, nullable: true, default: None, precision: Some(3) },
            ],
            indexes: vec![IndexDef { name: "t_pkey".into(), columns: vec![0], unique: true, primary: true }],
            partition_key: Some(0),
            sequences: vec![std::sync::Arc::new({
                let mut s = SequenceDef::new("t_a_seq".into(), &SequenceOptions { ty: Some(DataType::Int32), start: Some(5), ..Default::default() }, Some(("t".into(), "a".into()))).unwrap();
                s.id = 8;
                s
            })],
            checks: Vec::new(),
            comments: Vec::new(),
        };
        let mut def = def;
        let check = crate::catalog::CheckDef::bind("t_check".into(), "a > 0 AND b < 100".into(), &def).unwrap();
        def.checks.push(check);
        def.set_comment(None, Some("the table".into()));
        def.set_comment(Some("b"), Some("a column".into()));
        let values = vec![
            Value::Null, Value::Bool(true), Value::Int16(-2), Value::Int32(3), Value::Int64(-4), Value::Float32(1.5),
            Value::Float64(-2.25), Value::Decimal(Decimal::new(-12345, 3)), Value::Text("héllo".into()), Value::Date(-1),
            Value::Timestamp(1_700_000_000_000_000),
        ];
        let records = vec![
            RedoRecord::PutTable(def),
            RedoRecord::Commit {
                ts: 42,
                changes: vec![
                    RowChange::Insert { table: 7, partition: 1, row: RowId::new(2, 5), values: values.clone() },
                    RowChange::Update { table: 7, partition: 0, row: RowId::new(0, 1), columns: vec![(1, Value::Int32(9))] },
                    RowChange::Delete { table: 7, partition: 3, row: RowId::new(1, 0) },
                ],
            },
            RedoRecord::DropTable(7),
            RedoRecord::Truncate(vec![1, 2]),
            RedoRecord::CheckpointStart { ts: 99 },
            RedoRecord::PutProcedure("CREATE PROCEDURE p() LANGUAGE plpgsql AS $$ BEGIN NULL; END $$".into()),
            RedoRecord::DropProcedure("p".into()),
            RedoRecord::PutView(crate::catalog::ViewDef {
                id: 9,
                name: "v".into(),
                columns: vec![("a".into(), DataType::Int32), ("total".into(), DataType::Decimal { precision: 22, scale: 2 })],
                query: "SELECT a, sum(b) FROM t GROUP BY a".into(),
                depends_on: vec!["t".into()],
            }),
            RedoRecord::DropView("v".into()),
            RedoRecord::PutSequence(SequenceDef::new("s".into(), &SequenceOptions { increment: Some(-3), cycle: Some(true), ..Default::default() }, None).unwrap()),
            RedoRecord::DropSequence("s".into()),
            RedoRecord::SequenceValue { id: 9, last: -5, called: true },
            RedoRecord::AddColumn {
                table: 7,
                column: ColumnDef { name: "d".into(), ty: DataType::Text, nullable: true, default: Some(ColumnDefault::Value(Value::Text("x".into()))), precision: None },
                fill: Value::Text("x".into()),
            },
            RedoRecord::DropColumn { table: 7, column: 2 },
            RedoRecord::AlterColumnType { table: 7, column: 1, ty: DataType::Varchar(Some(12)), explicit: true },
        ];
        for record in records {
            let mut buf = Vec::new();
            encode(&record, &mut buf);
            assert_eq!(decode(&buf).unwrap(), record);
            // Every truncation is an error, never a panic.
            for cut in 0..buf.len() {
                assert!(decode(&buf[..cut]).is_err());
            }
        }
    }
}
