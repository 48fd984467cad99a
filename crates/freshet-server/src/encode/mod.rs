//! Result rows as DataRow messages, in text or binary format per column.
//!
//! Rows come in two shapes ([`freshet::RowBatch`]): values from the short-statement path and
//! Arrow record batches from the analytical side. Both must look the same to a client, so the
//! Arrow path is held to one rule: the text of a cell equals `Value::write_text` of the value
//! Freshet reads out of that cell (`freshet_olap::values::value_at`). Common Arrow types have a
//! fast path that writes straight from the array ([`arrow`]); every other array goes through
//! that value. Binary output follows PostgreSQL's send functions ([`binary`]).
//!
//! Encoding works on a range of rows at a time and stops once the output buffer holds a
//! flush's worth, so the caller can write to the socket between ranges; per row it allocates
//! nothing (text is formatted in one reused scratch string).

pub mod arrow;
pub mod binary;

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use freshet::{ColumnInfo, DataType, RowBatch, Value};

use crate::backend;
use crate::error::SqlError;

/// Format code for binary output.
pub const BINARY: i16 = 1;

/// Writes the rows of one result.
pub struct RowEncoder {
    columns: Arc<Vec<ColumnInfo>>,
    /// Format code per column (0 text, 1 binary).
    formats: Vec<i16>,
    scratch: String,
}

impl RowEncoder {
    pub fn new(columns: Arc<Vec<ColumnInfo>>, formats: Vec<i16>) -> Self {
        RowEncoder { columns, formats, scratch: String::new() }
    }

    pub fn columns(&self) -> &Arc<Vec<ColumnInfo>> {
        &self.columns
    }

    pub fn formats(&self) -> &[i16] {
        &self.formats
    }

    /// Appends DataRows for rows `start..end` of `batch`, stopping early once `out` holds
    /// `budget` bytes. Returns the first row not written.
    pub fn encode(&mut self, batch: &RowBatch, start: usize, end: usize, out: &mut BytesMut, budget: usize) -> Result<usize, SqlError> {
        match batch {
            RowBatch::Values(rows) => {
                let mut i = start;
                while i < end.min(rows.len()) && out.len() < budget {
                    self.value_row(&rows[i], out)?;
                    i += 1;
                }
                Ok(i)
            }
            RowBatch::Arrow(b) => {
                let views = arrow::views(b, &self.columns);
                let mut i = start;
                while i < end.min(b.num_rows()) && out.len() < budget {
                    self.arrow_row(&views, i, out)?;
                    i += 1;
                }
                Ok(i)
            }
        }
    }

    fn value_row(&mut self, row: &[Value], out: &mut BytesMut) -> Result<(), SqlError> {
        let at = backend::begin(out, b'D');
        out.put_i16(self.columns.len() as i16);
        for (i, c) in self.columns.iter().enumerate() {
            let v = row.get(i).unwrap_or(&Value::Null);
            let binary = self.formats.get(i) == Some(&BINARY);
            write_value(v, c.ty, binary, &mut self.scratch, out)?;
        }
        backend::finish(out, at);
        Ok(())
    }

    fn arrow_row(&mut self, views: &[arrow::ColumnView], row: usize, out: &mut BytesMut) -> Result<(), SqlError> {
        let at = backend::begin(out, b'D');
        out.put_i16(self.columns.len() as i16);
        for (i, c) in self.columns.iter().enumerate() {
            let binary = self.formats.get(i) == Some(&BINARY);
            match views.get(i) {
                Some(view) => view.write(row, c.ty, binary, &mut self.scratch, out)?,
                None => out.put_i32(-1),
            }
        }
        backend::finish(out, at);
        Ok(())
    }
}

/// One cell from a value: length word, then the text or binary form.
pub fn write_value(v: &Value, ty: DataType, binary: bool, scratch: &mut String, out: &mut BytesMut) -> Result<(), SqlError> {
    if v.is_null() {
        out.put_i32(-1);
        return Ok(());
    }
    let at = begin_cell(out);
    if binary {
        binary::write_value(v, ty, out)?;
    } else {
        scratch.clear();
        v.write_text(ty, scratch);
        out.put_slice(scratch.as_bytes());
    }
    finish_cell(out, at);
    Ok(())
}

/// Starts a cell; returns where its length goes.
pub fn begin_cell(out: &mut BytesMut) -> usize {
    let at = out.len();
    out.put_i32(0);
    at
}

pub fn finish_cell(out: &mut BytesMut, at: usize) {
    let len = (out.len() - at - 4) as i32;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
}

/// Blank padding of a CHAR(n) value to n characters, as `Value::write_text` pads it.
pub fn pad_char(s: &str, ty: DataType, out: &mut BytesMut) {
    if let DataType::Char(n) = ty {
        let len = s.chars().count();
        for _ in len..n as usize {
            out.put_u8(b' ');
        }
    }
}
