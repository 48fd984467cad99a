//! The COPY sub-protocol.
//!
//! COPY FROM STDIN: CopyInResponse (text format), then CopyData is fed to the engine's
//! [`CopyIn`] until CopyDone (CommandComplete `COPY n`) or CopyFail (57014 with the client's
//! message). Flush and Sync are ignored while copying, as the protocol says: a client using
//! the extended protocol sends Sync right after Execute, before the data. Any other message
//! aborts the COPY with 08P01. A cancel request is honoured while waiting for data; a batch
//! being stored is never interrupted. On every failure the engine's `abort` removes what the
//! COPY had stored.
//!
//! COPY TO STDOUT: CopyOutResponse, the CSV header if any, one CopyData per batch, CopyDone.

use freshet::{CopyIn, CopyOut};

use crate::backend;
use crate::connection::Connection;
use crate::error::{codes, ConnError, SqlError};
use crate::message::Message;

impl Connection<'_> {
    pub async fn copy_in(&mut self, mut copy: CopyIn) -> Result<(), ConnError> {
        backend::copy_response(&mut self.wire.out, b'G', copy.column_count());
        self.wire.flush().await?;
        match self.receive_copy_data(&mut copy).await {
            Ok(()) => {
                let rows = copy.finish().await?;
                backend::command_complete(&mut self.wire.out, &format!("COPY {rows}"));
                Ok(())
            }
            Err(e) => {
                copy.abort().await;
                Err(e)
            }
        }
    }

    /// Feeds CopyData to `copy` until CopyDone.
    async fn receive_copy_data(&mut self, copy: &mut CopyIn) -> Result<(), ConnError> {
        loop {
            let read = self.wire.read_message();
            let canceled = || ConnError::Sql(SqlError::canceled());
            let Some((tag, body)) = self.cancel.race(read, canceled).await? else {
                return Err(ConnError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            };
            match Message::decode(tag, body)? {
                Message::CopyData(data) => copy.write(&data).await?,
                Message::CopyDone => return Ok(()),
                Message::CopyFail(reason) => {
                    return Err(SqlError::new(codes::QUERY_CANCELED, format!("COPY from stdin failed: {reason}")).into())
                }
                Message::Flush | Message::Sync => {}
                _ => {
                    let message = format!("unexpected message type 0x{tag:02X} during COPY from stdin");
                    return Err(SqlError::protocol(message).into());
                }
            }
        }
    }

    pub async fn copy_out(&mut self, mut copy: CopyOut) -> Result<(), ConnError> {
        backend::copy_response(&mut self.wire.out, b'H', copy.columns.len());
        if let Some(header) = copy.header() {
            backend::copy_data(&mut self.wire.out, &header);
        }
        let mut rows = 0;
        let mut data = Vec::new();
        loop {
            let next = self.cancel.race(async { Ok(copy.rows.next().await) }, freshet::Error::canceled).await?;
            let Some(batch) = next else { break };
            let batch = batch?;
            rows += batch.num_rows();
            data.clear();
            copy.format_batch(&batch, &mut data);
            backend::copy_data(&mut self.wire.out, &data);
            self.wire.flush_if_large().await?;
        }
        backend::copy_done(&mut self.wire.out);
        backend::command_complete(&mut self.wire.out, &format!("COPY {rows}"));
        Ok(())
    }
}
