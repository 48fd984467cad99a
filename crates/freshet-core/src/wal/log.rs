//! The redo log: segment files of framed records, written by one thread with group commit.
//!
//! FRAMES. A record is `[length u32][crc32c u32][payload]`, little endian; its LSN is its
//! frame's byte position in the log as a whole. A segment file is named after the LSN of its
//! first frame (16 hex digits) and holds frames up to [`SEGMENT_BYTES`] or a little more.
//!
//! GROUP COMMIT. Committers hand the writer thread encoded records and (for a synchronous
//! commit) a reply. The writer takes everything queued, writes it with one write, makes it
//! durable with one fdatasync, and then answers every committer of the batch. Executors never
//! wait: they queue and go on; only the client's acknowledgement waits for the reply. An
//! asynchronous commit queues its record without a reply; the writer makes such records
//! durable within [`ASYNC_DELAY`].
//!
//! LSNs are assigned when a record is queued (under one lock with the queueing, so the queue
//! order is the LSN order): the committer learns its record's LSN at once, and a record is
//! durable exactly when its LSN is below [`Wal::durable_lsn`].
//!
//! FAILURE. If a write or sync fails, every commit of the batch gets the error (53100 for a
//! full disk, 58030 otherwise) and the log stops accepting records until [`Wal::resume`]
//! succeeds: nothing after a hole can be durable, so nothing is written after one. Resuming
//! cuts the log back to the durable LSN, so records that were queued or written but never made
//! durable are gone from the log; the engine undoes their commits in memory before it resumes
//! (`Engine::resume_log`). Each failure counts one [`Wal::failures`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use parking_lot::Mutex;

use super::fs::{Fs, LogFile};
use crate::error::{Error, Result, SqlState};
use crate::executor::{reply_channel, Reply, ReplySender};

pub type Lsn = u64;

/// A segment is closed once it holds this many bytes.
pub const SEGMENT_BYTES: u64 = 64 << 20;
/// Asynchronously committed records are durable within this delay.
pub const ASYNC_DELAY: Duration = Duration::from_millis(10);
const FRAME_HEADER: usize = 8;
/// Largest record accepted (guards recovery against a corrupt length field).
pub const MAX_RECORD: usize = 1 << 30;

enum Request {
    Append { payload: Vec<u8>, reply: Option<ReplySender<Result<Lsn>>> },
    /// Make everything queued so far durable.
    Sync(ReplySender<Result<Lsn>>),
}

struct Shared {
    /// Everything before this LSN is durable.
    durable: AtomicU64,
    /// Failures so far.
    failures: AtomicU64,
    /// The log refuses records after a failed write, until resumed.
    failed: AtomicBool,
    failure: Mutex<Option<Error>>,
    /// Bytes appended since the last checkpoint started (drives automatic checkpoints).
    since_checkpoint: AtomicU64,
}

/// A queued record: its LSN, and for a synchronous commit the reply that says it is durable.
pub struct Logged {
    pub lsn: Lsn,
    pub durable: Option<Reply<Result<Lsn>>>,
}

/// The queue's end: the LSN the next record gets.
struct Appender {
    next: Lsn,
    sender: Option<Sender<Request>>,
}

/// The redo log of one data directory.
pub struct Wal {
    appender: Mutex<Appender>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    writer: Arc<Mutex<Writer>>,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal").field("durable", &self.durable_lsn()).finish()
    }
}

/// The writer's state: the open segment and the next LSN.
struct Writer {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    file: Option<Box<dyn LogFile>>,
    segment_start: Lsn,
    next: Lsn,
}

impl Writer {
    fn segment_path(&self, start: Lsn) -> PathBuf {
        segment_path(&self.dir, start)
    }

    fn ensure_file(&mut self) -> std::io::Result<&mut Box<dyn LogFile>> {
        if self.file.is_none() || self.next - self.segment_start >= SEGMENT_BYTES {
            self.segment_start = self.next;
            let path = self.segment_path(self.segment_start);
            self.file = Some(self.fs.append(&path)?);
            self.fs.sync_dir(&self.dir)?;
        }
        Ok(self.file.as_mut().expect("opened above"))
    }

    /// Writes a batch of payloads as frames; returns each one's LSN.
    fn write_batch(&mut self, payloads: &[&[u8]], sync: bool) -> std::io::Result<Vec<Lsn>> {
        let mut buf = Vec::with_capacity(payloads.iter().map(|p| p.len() + FRAME_HEADER).sum());
        let mut lsns = Vec::with_capacity(payloads.len());
        let mut at = self.next;
        for p in payloads {
            lsns.push(at);
            buf.extend_from_slice(&(p.len() as u32).to_le_bytes());
            buf.extend_from_slice(&crc32c::crc32c(p).to_le_bytes());
            buf.extend_from_slice(p);
            at += (p.len() + FRAME_HEADER) as Lsn;
        }
        let file = self.ensure_file()?;
        file.write_all(&buf)?;
        if sync {
            file.sync()?;
        }
        self.next = at;
        Ok(lsns)
    }

    fn sync(&mut self) -> std::io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.sync(),
            None => Ok(()),
        }
    }
}

pub fn segment_path(dir: &Path, start: Lsn) -> PathBuf {
    dir.join(format!("{start:016x}.wal"))
}

fn io_error(e: &std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::StorageFull || e.raw_os_error() == Some(28) {
        Error::new(SqlState::DiskFull, format!("could not write to the redo log: {e}"))
            .with_hint("Free disk space; the server retries and goes on committing when the write succeeds.")
    } else {
        Error::new(SqlState::IoError, format!("could not write to the redo log: {e}"))
    }
}

impl Wal {
    /// Opens the log in `dir` for appending after `end` (the end of the valid records found by
    /// [`read_log`]).
    pub fn open(fs: Arc<dyn Fs>, dir: &Path, end: Lsn) -> Result<Wal> {
        fs.create_dir_all(dir).map_err(|e| io_error(&e))?;
        let shared = Arc::new(Shared {
            durable: AtomicU64::new(end),
            failures: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            since_checkpoint: AtomicU64::new(0),
        });
        // Continue in the segment that holds `end`, or start a new one there.
        let segment_start = segments(fs.as_ref(), dir)?.into_iter().map(|(s, _)| s).rfind(|s| *s <= end).unwrap_or(end);
        let writer = Arc::new(Mutex::new(Writer { fs, dir: dir.to_path_buf(), file: None, segment_start, next: end }));
        if segment_start != end || end > 0 {
            let mut w = writer.lock();
            let path = w.segment_path(segment_start);
            if w.fs.list(dir).map_err(|e| io_error(&e))?.contains(&path) {
                w.file = Some(w.fs.append(&path).map_err(|e| io_error(&e))?);
            } else {
                w.segment_start = end;
            }
        }
        let (sender, receiver) = crossbeam_channel::unbounded();
        let (s2, w2) = (shared.clone(), writer.clone());
        let thread = std::thread::Builder::new()
            .name("freshet-wal".into())
            .spawn(move || run(receiver, s2, w2))
            .map_err(|e| Error::internal(format!("cannot start the log writer: {e}")))?;
        Ok(Wal { appender: Mutex::new(Appender { next: end, sender: Some(sender) }), shared, thread: Some(thread), writer })
    }

    /// Queues a record. With `sync`, the reply arrives once the record is durable (or the
    /// write failed); without, the record becomes durable within [`ASYNC_DELAY`].
    pub fn append(&self, payload: Vec<u8>, sync: bool) -> Result<Logged> {
        let (reply, rx) = if sync {
            let (tx, rx) = reply_channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let len = payload.len();
        let mut a = self.appender.lock();
        if self.shared.failed.load(Ordering::Acquire) {
            return Err(self.failure());
        }
        let lsn = a.next;
        a.next += (len + FRAME_HEADER) as Lsn;
        if let Some(s) = &a.sender {
            let _ = s.send(Request::Append { payload, reply });
        }
        drop(a);
        if sync {
            self.wake_writer();
        }
        self.shared.since_checkpoint.fetch_add(len as u64, Ordering::Relaxed);
        Ok(Logged { lsn, durable: rx })
    }

    /// Makes everything queued so far durable (or fails, if the log has failed).
    pub fn sync(&self) -> Reply<Result<Lsn>> {
        let (tx, rx) = reply_channel();
        if let Some(s) = &self.appender.lock().sender {
            let _ = s.send(Request::Sync(tx));
        }
        self.wake_writer();
        rx
    }

    fn wake_writer(&self) {
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }

    /// Failures of the log so far (each stops it until [`resume`](Self::resume)).
    pub fn failures(&self) -> u64 {
        self.shared.failures.load(Ordering::Acquire)
    }

    pub fn durable_lsn(&self) -> Lsn {
        self.shared.durable.load(Ordering::Acquire)
    }

    /// Fails with the log's error while it is stopped after a failed write.
    pub fn check_writable(&self) -> Result<()> {
        if self.is_failed() {
            return Err(self.failure());
        }
        Ok(())
    }

    /// Whether the log stopped after a failed write.
    pub fn is_failed(&self) -> bool {
        self.shared.failed.load(Ordering::Acquire)
    }

    fn failure(&self) -> Error {
        self.shared.failure.lock().clone().unwrap_or_else(|| Error::new(SqlState::IoError, "the redo log is not writable"))
    }

    /// After a failed write: tries to write again (from the durable end, dropping anything
    /// written after it). Returns whether the log accepts records again.
    pub fn resume(&self) -> bool {
        if !self.is_failed() {
            return true;
        }
        // Let the writer answer (with the failure) everything queued before: nothing queued
        // under the old numbering may be written after the log resumes.
        let _ = self.sync().wait();
        let mut w = self.writer.lock();
        let durable = self.durable_lsn();
        let path = w.segment_path(w.segment_start);
        let probe = (|| -> std::io::Result<()> {
            w.file = None;
            if w.segment_start < durable || w.fs.list(&w.dir)?.contains(&path) {
                w.fs.truncate(&path, durable - w.segment_start)?;
                w.file = Some(w.fs.append(&path)?);
            } else {
                w.segment_start = durable;
            }
            w.next = durable;
            // Probe with an empty batch write and a sync.
            w.write_batch(&[], true).map(|_| ())
        })();
        if probe.is_ok() {
            let mut a = self.appender.lock();
            a.next = durable;
            *self.shared.failure.lock() = None;
            self.shared.failed.store(false, Ordering::Release);
            drop(a);
            true
        } else {
            false
        }
    }

    /// Bytes of records appended since the last call of [`checkpoint_started`](Self::checkpoint_started).
    pub fn bytes_since_checkpoint(&self) -> u64 {
        self.shared.since_checkpoint.load(Ordering::Relaxed)
    }

    pub fn checkpoint_started(&self) {
        self.shared.since_checkpoint.store(0, Ordering::Relaxed);
    }

    /// Removes segments that hold only records before `lsn` (a checkpoint covers them).
    pub fn remove_before(&self, lsn: Lsn) -> Result<usize> {
        let w = self.writer.lock();
        let segs = segments(w.fs.as_ref(), &w.dir)?;
        let mut removed = 0;
        for (i, (start, path)) in segs.iter().enumerate() {
            let next_start = segs.get(i + 1).map(|(s, _)| *s);
            if next_start.is_some_and(|n| n <= lsn) && *start != w.segment_start {
                w.fs.remove_file(path).map_err(|e| io_error(&e))?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.appender.lock().sender.take();
        self.wake_writer();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(requests: Receiver<Request>, shared: Arc<Shared>, writer: Arc<Mutex<Writer>>) {
    // Records nobody waits for are gathered and written, with one sync, at most
    // ASYNC_DELAY / 2 after this thread first saw them; it looks at least every ASYNC_DELAY / 2,
    // so they are durable within about ASYNC_DELAY of being queued. A committer that waits
    // (or a sync request) wakes the thread, and its batch is written and synced at once.
    // Asynchronous committers do not wake it: their commits cost no system call.
    let half = ASYNC_DELAY / 2;
    let mut batch: Vec<Request> = Vec::new();
    // When the records not yet durable (queued or written) must be synced.
    let mut deadline: Option<Instant> = None;
    let mut unsynced = false;
    loop {
        let mut closed = false;
        while batch.len() < 4096 {
            match requests.try_recv() {
                Ok(r) => batch.push(r),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    closed = true;
                    break;
                }
            }
        }
        if !batch.is_empty() && deadline.is_none() {
            deadline = Some(Instant::now() + half);
        }
        let full = batch.len() >= 4096;
        let waiter = batch.iter().any(|r| matches!(r, Request::Sync(_) | Request::Append { reply: Some(_), .. }));
        let sync = waiter || closed || deadline.is_some_and(|d| Instant::now() >= d);
        if (sync || full) && (!batch.is_empty() || (sync && unsynced)) {
            unsynced = write(std::mem::take(&mut batch), &shared, &writer, sync, unsynced);
            if !unsynced {
                deadline = None;
            }
        }
        if closed {
            break;
        }
        if full {
            // More may be queued behind a full batch, a waiter among them: no parking.
            continue;
        }
        // A waiter that queued after the drain above has unparked this thread already, so
        // the park returns at once.
        let wait = deadline.map_or(half, |d| d.saturating_duration_since(Instant::now()));
        if !wait.is_zero() {
            std::thread::park_timeout(wait);
        }
    }
    // Make what is left durable before the log closes.
    if unsynced {
        let mut w = writer.lock();
        if w.sync().is_ok() {
            shared.durable.store(w.next, Ordering::Release);
        }
    }
}

/// Writes one batch, and syncs if `sync` or anyone in it waits; returns whether records
/// remain that are written but not yet durable.
fn write(batch: Vec<Request>, shared: &Shared, writer: &Mutex<Writer>, sync: bool, unsynced: bool) -> bool {
    let payloads: Vec<&[u8]> = batch
        .iter()
        .filter_map(|r| match r {
            Request::Append { payload, .. } => Some(payload.as_slice()),
            Request::Sync(_) => None,
        })
        .collect();
    let must_sync = sync || batch.iter().any(|r| matches!(r, Request::Sync(_) | Request::Append { reply: Some(_), .. }));
    let mut w = writer.lock();
    let failed = shared.failed.load(Ordering::Acquire);
    let outcome = if failed {
        Err(shared.failure.lock().clone().unwrap_or_else(|| Error::new(SqlState::IoError, "the redo log is not writable")))
    } else {
        w.write_batch(&payloads, must_sync).map_err(|e| io_error(&e))
    };
    let end = w.next;
    drop(w);
    let wrote_records = !payloads.is_empty();
    drop(payloads);
    match outcome {
        Ok(lsns) => {
            if must_sync {
                shared.durable.store(end, Ordering::Release);
            }
            let mut at = lsns.into_iter();
            for r in batch {
                match r {
                    Request::Append { reply, .. } => {
                        let lsn = at.next().unwrap_or(end);
                        if let Some(reply) = reply {
                            reply.send(Ok(lsn));
                        }
                    }
                    Request::Sync(reply) => reply.send(Ok(end)),
                }
            }
            !must_sync && (unsynced || wrote_records)
        }
        Err(e) => {
            if !failed {
                tracing::error!("redo log write failed: {e}");
                *shared.failure.lock() = Some(e.clone());
                shared.failures.fetch_add(1, Ordering::AcqRel);
                shared.failed.store(true, Ordering::Release);
            }
            for r in batch {
                match r {
                    Request::Append { reply: Some(reply), .. } | Request::Sync(reply) => reply.send(Err(e.clone())),
                    Request::Append { reply: None, .. } => {}
                }
            }
            false
        }
    }
}

/// The segment files of a log directory: (first LSN, path), in LSN order.
pub fn segments(fs: &dyn Fs, dir: &Path) -> Result<Vec<(Lsn, PathBuf)>> {
    let entries = match fs.list(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(&e)),
    };
    let mut out: Vec<(Lsn, PathBuf)> = entries
        .into_iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            let hex = name.strip_suffix(".wal")?;
            Some((Lsn::from_str_radix(hex, 16).ok()?, p))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// What reading the log found.
#[derive(Debug, Default)]
pub struct LogScan {
    /// The LSN after the last valid record: where appending continues.
    pub end: Lsn,
    /// Where a torn or corrupt tail was cut, if one was.
    pub cut_at: Option<Lsn>,
    pub records: u64,
    pub bytes: u64,
}

/// Reads every valid record at or after `from` in order, calling `f(lsn, payload)`. A torn or
/// corrupt tail is cut (the segment is truncated at the last valid record and later segments
/// are removed), so that appending continues right after the valid log.
pub fn read_log(fs: &dyn Fs, dir: &Path, from: Lsn, f: &mut dyn FnMut(Lsn, &[u8]) -> Result<()>) -> Result<LogScan> {
    let segs = segments(fs, dir)?;
    let mut scan = LogScan { end: from, ..LogScan::default() };
    let mut expected: Option<Lsn> = None;
    for (i, (start, path)) in segs.iter().enumerate() {
        if let Some(e) = expected
            && *start != e
        {
            // A gap between segments: what follows cannot be trusted.
            cut(fs, &segs[i..], None)?;
            scan.cut_at = Some(e);
            break;
        }
        let data = fs.read(path).map_err(|e| io_error(&e))?;
        let mut pos = 0usize;
        while pos < data.len() {
            let lsn = start + pos as Lsn;
            match frame_at(&data, pos) {
                Some(payload) => {
                    if lsn >= from {
                        f(lsn, payload)?;
                        scan.records += 1;
                        scan.bytes += (payload.len() + FRAME_HEADER) as u64;
                    }
                    pos += payload.len() + FRAME_HEADER;
                }
                None => {
                    fs.truncate(path, pos as u64).map_err(|e| io_error(&e))?;
                    cut(fs, &segs[i + 1..], None)?;
                    scan.cut_at = Some(lsn);
                    scan.end = scan.end.max(lsn);
                    return Ok(scan);
                }
            }
        }
        let end = start + data.len() as Lsn;
        scan.end = scan.end.max(end);
        expected = Some(end);
    }
    Ok(scan)
}

fn cut(fs: &dyn Fs, rest: &[(Lsn, PathBuf)], _: Option<Lsn>) -> Result<()> {
    for (_, p) in rest {
        fs.remove_file(p).map_err(|e| io_error(&e))?;
    }
    Ok(())
}

/// The payload of a valid frame at `pos`, or `None` if the frame is torn or corrupt.
fn frame_at(data: &[u8], pos: usize) -> Option<&[u8]> {
    let header = data.get(pos..pos + FRAME_HEADER)?;
    let len = u32::from_le_bytes(header[..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(header[4..8].try_into().ok()?);
    if len == 0 || len > MAX_RECORD {
        return None;
    }
    let payload = data.get(pos + FRAME_HEADER..pos + FRAME_HEADER + len)?;
    (crc32c::crc32c(payload) == crc).then_some(payload)
}

#[cfg(test)]
mod tests {
    use super::super::fs::{Fault, FaultyFs, FaultyHandle, RealFs};
    use super::*;

    /// A scratch directory for one test, removed when the test ends (passing or not).
    struct TempDir(PathBuf);

    impl std::ops::Deref for TempDir {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn temp_dir(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("freshet-wal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    /// Appends a record as a synchronous commit and waits for the writer's answer.
    fn commit(wal: &Wal, payload: Vec<u8>) -> Result<Lsn> {
        wal.append(payload, true).unwrap().durable.unwrap().wait().unwrap()
    }

    fn read_all(fs: &dyn Fs, dir: &Path) -> (Vec<Vec<u8>>, LogScan) {
        let mut out = Vec::new();
        let scan = read_log(fs, dir, 0, &mut |_, p| {
            out.push(p.to_vec());
            Ok(())
        })
        .unwrap();
        (out, scan)
    }

    #[test]
    fn records_survive_and_appending_continues() {
        let dir = temp_dir("basic");
        let fs: Arc<dyn Fs> = Arc::new(RealFs);
        {
            let wal = Wal::open(fs.clone(), &dir, 0).unwrap();
            for i in 0..100u32 {
                let logged = wal.append(i.to_le_bytes().to_vec(), i % 10 == 0).unwrap();
                assert_eq!(logged.lsn, u64::from(i) * 12, "LSNs are frame positions");
                if let Some(r) = logged.durable {
                    r.wait().unwrap().unwrap();
                }
            }
            wal.sync().wait().unwrap().unwrap();
        }
        let (records, scan) = read_all(fs.as_ref(), &dir);
        assert_eq!(records.len(), 100);
        assert_eq!(scan.cut_at, None);
        let wal = Wal::open(fs.clone(), &dir, scan.end).unwrap();
        commit(&wal, vec![7; 3]).unwrap();
        drop(wal);
        assert_eq!(read_all(fs.as_ref(), &dir).0.len(), 101);
    }

    #[test]
    fn asynchronous_records_become_durable_while_appends_go_on() {
        let dir = temp_dir("async");
        let fs: Arc<dyn Fs> = Arc::new(RealFs);
        let wal = Wal::open(fs, &dir, 0).unwrap();
        // Appends never pause for longer than the asynchronous delay; the durable end must
        // still advance (the writer syncs on its own clock, not when appends stop).
        let started = std::time::Instant::now();
        let mut last = 0;
        while wal.durable_lsn() == 0 && started.elapsed() < Duration::from_secs(5) {
            last = wal.append(vec![7; 16], false).unwrap().lsn;
            std::thread::sleep(Duration::from_micros(200));
        }
        assert!(wal.durable_lsn() > 0, "no asynchronous record became durable in 5 s of appends");
        assert!(wal.durable_lsn() <= last + 24);
        // A waiting committer is answered at once, behind the asynchronous ones.
        let logged = wal.append(vec![8; 16], true).unwrap();
        assert_eq!(logged.durable.unwrap().wait().unwrap().unwrap(), logged.lsn);
        assert!(wal.durable_lsn() > logged.lsn);
    }

    #[test]
    fn a_torn_tail_is_cut_at_the_last_valid_record() {
        let dir = temp_dir("torn");
        let faulty = FaultyFs::new();
        let fs: Arc<dyn Fs> = Arc::new(FaultyHandle(faulty.clone()));
        let wal = Wal::open(fs.clone(), &dir, 0).unwrap();
        commit(&wal, vec![1; 10]).unwrap();
        faulty.arm(1, Fault::Torn(13));
        let e = commit(&wal, vec![2; 10]).unwrap_err();
        assert_eq!(e.state, SqlState::IoError);
        drop(wal);
        let real: Arc<dyn Fs> = Arc::new(RealFs);
        let (records, scan) = read_all(real.as_ref(), &dir);
        assert_eq!(records, vec![vec![1; 10]]);
        assert_eq!(scan.cut_at, Some(18));
        // The cut file ends at the valid record, so a new log continues cleanly.
        let wal = Wal::open(real.clone(), &dir, scan.end).unwrap();
        commit(&wal, vec![3; 4]).unwrap();
        drop(wal);
        assert_eq!(read_all(real.as_ref(), &dir).0, vec![vec![1; 10], vec![3; 4]]);
    }

    #[test]
    fn disk_full_fails_the_commit_and_the_log_resumes() {
        let dir = temp_dir("full");
        let faulty = FaultyFs::new();
        let fs: Arc<dyn Fs> = Arc::new(FaultyHandle(faulty.clone()));
        let wal = Wal::open(fs.clone(), &dir, 0).unwrap();
        commit(&wal, vec![1; 5]).unwrap();
        faulty.arm(1, Fault::DiskFull);
        let e = commit(&wal, vec![2; 5]).unwrap_err();
        assert_eq!(e.state, SqlState::DiskFull);
        assert_eq!(wal.append(vec![3; 5], true).err().unwrap().state, SqlState::DiskFull, "refused while failed");
        faulty.disarm();
        assert!(wal.resume());
        commit(&wal, vec![4; 5]).unwrap();
        drop(wal);
        assert_eq!(read_all(fs.as_ref(), &dir).0, vec![vec![1; 5], vec![4; 5]]);
    }

    #[test]
    fn a_corrupt_record_ends_the_log() {
        let dir = temp_dir("corrupt");
        let fs: Arc<dyn Fs> = Arc::new(RealFs);
        let wal = Wal::open(fs.clone(), &dir, 0).unwrap();
        for i in 0..3u8 {
            commit(&wal, vec![i; 20]).unwrap();
        }
        drop(wal);
        let path = segment_path(&dir, 0);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[28 + 10] ^= 0xff; // inside the second record's payload
        std::fs::write(&path, bytes).unwrap();
        let (records, scan) = read_all(fs.as_ref(), &dir);
        assert_eq!(records, vec![vec![0; 20]]);
        assert_eq!(scan.cut_at, Some(28));
    }
}
