//! fork mode: an analytical query runs in a child process forked at a transaction boundary
//! (`Engine::fork`), on DataFusion over the child's memory image, and sends its result back
//! as Arrow IPC over a socket pair; the parent streams it to the client.
//!
//! The child closes every inherited file descriptor but its socket (it never writes to the
//! log, checkpoints or client sockets), asks the kernel to kill it if its parent dies, builds a
//! runtime of its own on its one thread (the parent's worker threads do not exist in it, and
//! it starts none: see `child_main`), runs the plan the
//! parent made, and ends with `_exit`. Frames on the socket: `[tag u8][length u32 LE][payload]`
//! with tag `B` (an IPC stream holding one batch), `E` (an error: five-character SQLSTATE,
//! then the message) or `Z` (the end).
//!
//! The parent's side is a [`ForkProcess`]: dropping it (the query finished, failed, was
//! cancelled or timed out, or the client went away) kills the child if it still runs and
//! reaps it, so no zombie is left.

use std::convert::Infallible;
use std::io::{Cursor, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::execution::context::SessionState;
use datafusion::physical_plan::execute_stream;
use freshet_core::engine::{Engine, Forked};
use freshet_core::storage::{DbSnapshot, LiveSnapshot, SnapshotInfo, SnapshotMode, SnapshotScope, TableSnapshot, TxnView};
use freshet_core::{Error, Result, SqlState};
use futures::StreamExt;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use crate::engine::{BatchStream, OlapEngine, OlapPlan, QueryRun};
use crate::error::from_datafusion;

/// A fork-mode snapshot: the child process that holds the image.
#[derive(Debug)]
pub struct ForkProcess {
    pub id: u64,
    pub forked: Forked,
    pub taken_at: i64,
    pub taken: Instant,
    pub tables: usize,
}

impl ForkProcess {
    /// The child's memory as the kernel accounts it: pages still shared with the parent, and
    /// pages private to the child (the parent wrote them since the fork, so the kernel copied
    /// them, plus the child's own working memory).
    pub fn memory(&self) -> (u64, u64) {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{}/smaps_rollup", self.forked.pid)) else { return (0, 0) };
        let (mut shared, mut private) = (0, 0);
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let (Some(key), Some(kb)) = (words.next(), words.next().and_then(|v| v.parse::<u64>().ok())) else { continue };
            match key {
                "Shared_Clean:" | "Shared_Dirty:" => shared += kb * 1024,
                "Private_Clean:" | "Private_Dirty:" => private += kb * 1024,
                _ => {}
            }
        }
        (shared, private)
    }
}

impl LiveSnapshot for ForkProcess {
    fn info(&self) -> SnapshotInfo {
        let (shared_bytes, copied_bytes) = self.memory();
        SnapshotInfo {
            id: self.id,
            mode: SnapshotMode::Fork,
            scope: SnapshotScope::Shared.name(),
            created_at: self.taken_at,
            age: self.taken.elapsed(),
            tables: self.tables,
            shared_bytes,
            copied_bytes,
            pid: Some(self.forked.pid),
        }
    }
}

impl Drop for ForkProcess {
    fn drop(&mut self) {
        let pid = self.forked.pid;
        let mut status = 0;
        // SAFETY: plain system calls on our own child.
        unsafe {
            if libc::waitpid(pid, &mut status, libc::WNOHANG) == 0 {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
        }
    }
}

impl OlapEngine {
    /// Runs `plan` in a child forked at a transaction boundary, over the tables as `view`
    /// sees them. Returns the result stream and the child (listed as a snapshot by the
    /// caller); the stream holds the child until it ends or is dropped.
    pub async fn execute_forked(
        &self,
        engine: &Engine,
        plan: &OlapPlan,
        params: Vec<ScalarValue>,
        view: TxnView,
        id: u64,
        run: QueryRun,
    ) -> Result<(BatchStream, Arc<ForkProcess>)> {
        let QueryRun { now, timeout } = run;
        let (parent_end, child_end) = UnixStream::pair().map_err(|e| Error::internal(format!("cannot create a socket pair: {e}")))?;
        let child_fd = child_end.as_raw_fd();
        let state = self.execution_state(None, now);
        let tables = plan.tables.clone();
        let plan = plan.clone();
        let taken_at = freshet_core::types::datetime::now_micros();
        let taken = Instant::now();
        let child = Box::new(move |snapshots: Result<Vec<TableSnapshot>>| -> Infallible {
            let code = child_main(child_end, snapshots, state, plan, params);
            // SAFETY: ends the child without the parent's destructors or atexit handlers.
            unsafe { libc::_exit(code) }
        });
        let count = tables.len();
        let forked = engine.fork(tables, view, vec![child_fd], child).await?;
        let process = Arc::new(ForkProcess { id, forked, taken_at, taken, tables: count });
        parent_end.set_nonblocking(true).map_err(|e| Error::internal(format!("socket: {e}")))?;
        let (tx, rx) = mpsc::channel(2);
        let holder = process.clone();
        let task = self.handle.spawn(async move {
            let errors = tx.clone();
            let read = async move {
                // The child runs as long as this task holds it.
                let _child = holder;
                let socket = tokio::net::UnixStream::from_std(parent_end).map_err(|e| Error::internal(format!("socket: {e}")))?;
                receive(socket, &tx).await
            };
            let outcome = match timeout {
                None => read.await,
                Some(t) => tokio::time::timeout(t, read)
                    .await
                    .unwrap_or_else(|_| Err(Error::new(SqlState::QueryCanceled, "canceling statement due to statement timeout"))),
            };
            if let Err(e) = outcome {
                let _ = errors.send(Err(e)).await;
            }
        });
        Ok((BatchStream::new(rx, task), process))
    }
}

/// Reads the child's frames and forwards its batches.
async fn receive(mut socket: tokio::net::UnixStream, tx: &mpsc::Sender<Result<RecordBatch>>) -> Result<()> {
    let lost = |e: std::io::Error| Error::internal(format!("the fork-mode query process ended without a result ({e})"));
    loop {
        let mut head = [0u8; 5];
        socket.read_exact(&mut head).await.map_err(lost)?;
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut payload = vec![0u8; len];
        socket.read_exact(&mut payload).await.map_err(lost)?;
        match head[0] {
            b'B' => {
                let reader = StreamReader::try_new(Cursor::new(payload), None).map_err(|e| Error::internal(format!("bad batch from the query process: {e}")))?;
                for batch in reader {
                    let batch = batch.map_err(|e| Error::internal(format!("bad batch from the query process: {e}")))?;
                    if tx.send(Ok(batch)).await.is_err() {
                        return Ok(());
                    }
                }
            }
            b'E' if payload.len() >= 5 => {
                let state = std::str::from_utf8(&payload[..5]).ok().and_then(SqlState::custom).unwrap_or(SqlState::Internal);
                return Err(Error::new(state, String::from_utf8_lossy(&payload[5..]).into_owned()));
            }
            b'Z' => return Ok(()),
            _ => return Err(Error::internal("the fork-mode query process sent a malformed frame")),
        }
    }
}

/// The child: runs the plan over its snapshots and writes the frames. Returns the exit code.
fn child_main(
    socket: UnixStream,
    snapshots: Result<Vec<TableSnapshot>>,
    mut state: SessionState,
    plan: OlapPlan,
    params: Vec<ScalarValue>,
) -> i32 {
    // `Engine::fork` has closed every other descriptor and set the parent-death signal.
    let mut out = std::io::BufWriter::with_capacity(1 << 16, socket);
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<()> {
        let tables = snapshots?;
        let snapshot = DbSnapshot {
            id: 0,
            scope: SnapshotScope::Shared,
            taken_at: 0,
            taken: Instant::now(),
            clock: 0,
            catalog_version: 0,
            tables: tables.into_iter().map(|t| (t.def.id, t)).collect(),
        };
        state.config_mut().set_extension(Arc::new(snapshot));
        // On this thread alone: a thread started in the child can wait forever on a lock that
        // another of the parent's threads held when it forked (std's thread start takes a
        // global one, which a parent thread starting at that moment holds — seen as a hung
        // test), so the child starts none. Its query's partitions run interleaved.
        // No I/O driver: tokio's signal handling shares a descriptor created by the parent,
        // which the child closed; the query needs neither.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| Error::internal(format!("cannot start the query process's runtime: {e}")))?;
        let result = runtime.block_on(async {
            let physical = plan.physical(&state, params).await.map_err(from_datafusion)?;
            let mut stream = execute_stream(physical, state.task_ctx()).map_err(from_datafusion)?;
            while let Some(batch) = stream.next().await {
                write_batch(&mut out, &batch.map_err(from_datafusion)?)?;
            }
            Ok(())
        });
        // The runtime is not shut down: the process ends right after.
        std::mem::forget(runtime);
        result
    }));
    let end = match run {
        Ok(Ok(())) => frame(&mut out, b'Z', &[]),
        Ok(Err(e)) => frame(&mut out, b'E', format!("{}{}", e.state.code(), e.message).as_bytes()),
        Err(_) => frame(&mut out, b'E', b"XX000the analytical query failed unexpectedly"),
    };
    match end.and_then(|_| out.flush().map_err(io)) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

fn io(e: std::io::Error) -> Error {
    Error::internal(format!("cannot send the result: {e}"))
}

fn frame(out: &mut impl Write, tag: u8, payload: &[u8]) -> Result<()> {
    out.write_all(&[tag]).map_err(io)?;
    out.write_all(&(payload.len() as u32).to_le_bytes()).map_err(io)?;
    out.write_all(payload).map_err(io)
}

fn write_batch(out: &mut impl Write, batch: &RecordBatch) -> Result<()> {
    let mut bytes = Vec::new();
    {
        let mut writer = StreamWriter::try_new(&mut bytes, &batch.schema()).map_err(|e| Error::internal(format!("IPC: {e}")))?;
        writer.write(batch).map_err(|e| Error::internal(format!("IPC: {e}")))?;
        writer.finish().map_err(|e| Error::internal(format!("IPC: {e}")))?;
    }
    frame(out, b'B', &bytes)
}
