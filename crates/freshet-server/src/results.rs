//! Sending a statement's output: command tags, rows (with row limits), COPY.
//!
//! Rows are pulled batch by batch from the statement's [`RowStream`] and encoded into the
//! write buffer in ranges of about one flush, so a large result streams to the client with
//! bounded memory. A [`RowCursor`] remembers where it stopped, which is how a portal resumes
//! after PortalSuspended.

use std::sync::Arc;

use freshet::{ColumnInfo, Output, RowBatch, RowStream};

use crate::backend;
use crate::connection::Connection;
use crate::encode::RowEncoder;
use crate::error::ConnError;
use crate::wire::FLUSH_THRESHOLD;

/// Rows of a result still to send.
pub struct RowCursor {
    rows: RowStream,
    /// The command tag's words before the row count ("SELECT", "UPDATE", …).
    pub verb: &'static str,
    pub encoder: RowEncoder,
    /// The batch being sent and the first row of it not sent yet.
    current: Option<(RowBatch, usize)>,
}

impl RowCursor {
    pub fn new(columns: Arc<Vec<ColumnInfo>>, rows: RowStream, verb: &'static str, formats: Vec<i16>) -> Self {
        RowCursor { rows, verb, encoder: RowEncoder::new(columns, formats), current: None }
    }
}

/// What starting a statement's output left to do.
pub enum Started {
    /// The output is complete (command tag, empty query or COPY sent).
    Done,
    /// Rows to send.
    Rows(RowCursor),
}

impl Connection<'_> {
    /// Sends a command's tag, an empty query, or a whole COPY; returns a cursor for rows.
    /// `formats` are the result formats per column (`None`: all text).
    pub async fn start_output(&mut self, output: Output, formats: Option<Vec<i16>>) -> Result<Started, ConnError> {
        match output {
            Output::Command { tag } => backend::command_complete(&mut self.wire.out, &tag),
            Output::Empty => backend::empty_query_response(&mut self.wire.out),
            Output::CopyIn(copy) => self.copy_in(copy).await?,
            Output::CopyOut(copy) => self.copy_out(copy).await?,
            Output::Rows { columns, rows, verb } => {
                let formats = formats.unwrap_or_else(|| vec![0; columns.len()]);
                return Ok(Started::Rows(RowCursor::new(columns, rows, verb, formats)));
            }
        }
        Ok(Started::Done)
    }

    /// Sends up to `limit` rows (0: all). Returns the number sent and whether the result is
    /// exhausted; with a limit that was reached it is not (PostgreSQL does not look ahead).
    pub async fn send_rows(&mut self, cursor: &mut RowCursor, limit: usize) -> Result<(usize, bool), ConnError> {
        let mut sent = 0;
        loop {
            if let Some((batch, offset)) = &mut cursor.current {
                let n = batch.num_rows();
                while *offset < n {
                    if limit > 0 && sent == limit {
                        return Ok((sent, false));
                    }
                    let end = if limit > 0 { n.min(*offset + (limit - sent)) } else { n };
                    let next = cursor.encoder.encode(batch, *offset, end, &mut self.wire.out, FLUSH_THRESHOLD)?;
                    sent += next - *offset;
                    *offset = next;
                    self.wire.flush_if_large().await?;
                }
                cursor.current = None;
            }
            if limit > 0 && sent == limit {
                return Ok((sent, false));
            }
            // A client that disconnects while its query runs ends the query (and, in fork
            // mode, its child process) rather than leaving it to run to the end.
            let next = tokio::select! {
                // Rows that are ready are taken without looking at the socket.
                biased;
                next = self.cancel.race(async { Ok(cursor.rows.next().await) }, freshet::Error::canceled) => next?,
                () = self.wire.client_gone() => {
                    return Err(ConnError::Io(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "the client disconnected during a query")));
                }
            };
            match next {
                None => return Ok((sent, true)),
                Some(batch) => cursor.current = Some((batch?, 0)),
            }
        }
    }
}
