//! Durability of a database kept in a data directory: recovery at open, the redo log while
//! running, checkpoints in the background.
//!
//! LAYOUT of the data directory:
//! - `lock` — held (flock) by the one server using the directory;
//! - `meta` — the format version and the number of partitions (row ids in the log and in
//!   checkpoints are per partition, so a directory keeps its partition count);
//! - `wal/` — redo log segments (`freshet_core::wal`);
//! - `checkpoints/` — the newest checkpoints (`checkpoint`).
//!
//! RECOVERY = the newest checkpoint whose checksums verify (or an older one), then every redo
//! record after its start record, in log order. A torn or corrupt log tail is cut at the last
//! valid record, with a warning naming the LSN. Long recoveries report progress.
//!
//! LOG FAILURES. When a write or sync of the log fails, the commits concerned fail (53100 or
//! 58030) and the log refuses records; reads go on. The background thread then undoes in
//! memory the commits that did not become durable, rolls back the transactions running at
//! that moment, and retries the log every 200 ms: once a write succeeds (the disk has space
//! again) commits are accepted again.
//!
//! CHECKPOINTS run in the background when the log has grown by `checkpoint_bytes` since the
//! last one, or `checkpoint_interval` has passed with writes in between, and on `CHECKPOINT`.
//! The image is taken like an analytical snapshot (microseconds of quiesced executors), then
//! written while transactions go on. Afterwards only the newest two checkpoints are kept, and
//! the log before the older of them is removed.

pub mod checkpoint;

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use freshet_core::engine::Engine;
use freshet_core::executor::Reply;
use freshet_core::wal::log::{read_log, LogScan};
use freshet_core::wal::record::decode;
use freshet_core::wal::{Fs, Lsn, RedoRecord, RowChange, Wal};
use freshet_core::{Error, Result, SqlState};
use parking_lot::Mutex;

/// How a database keeps its data.
#[derive(Clone, Debug)]
pub struct DurabilityConfig {
    pub dir: PathBuf,
    /// Log growth that triggers a checkpoint.
    pub checkpoint_bytes: u64,
    /// Time after which a checkpoint runs if anything was logged since the last one.
    pub checkpoint_interval: Duration,
}

impl DurabilityConfig {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DurabilityConfig { dir: dir.into(), checkpoint_bytes: 256 << 20, checkpoint_interval: Duration::from_secs(300) }
    }
}

/// What recovery did.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    pub checkpoint_lsn: Option<Lsn>,
    pub checkpoint_rows: u64,
    pub records: u64,
    pub bytes: u64,
    pub cut_at: Option<Lsn>,
    /// Row changes redone from the log.
    pub changes: u64,
    /// Time spent loading the checkpoint.
    pub checkpoint_seconds: f64,
    /// Time spent replaying the log (reading, decoding and redoing its records).
    pub replay_seconds: f64,
    /// Time spent rebuilding indexes and free slots after replay.
    pub rebuild_seconds: f64,
    /// All of recovery.
    pub seconds: f64,
}

fn io(what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(SqlState::IoError, format!("{what}: {e}"))
}

/// An open data directory: its lock, the log, the checkpointer.
pub struct DataDir {
    config: DurabilityConfig,
    fs: Arc<dyn Fs>,
    engine: Arc<Engine>,
    wal: Arc<Wal>,
    _lock: File,
    checkpoint_lock: Mutex<()>,
    /// Checkpoints written since the database opened (`pg_stat_bgwriter`).
    pub(crate) checkpoints: CheckpointCounts,
    stop: Arc<AtomicBool>,
    background: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Checkpoints begun since the database opened: by the background checkpointer (the log grew
/// or the interval passed) and requested (CHECKPOINT), and the time spent writing them.
#[derive(Debug, Default)]
pub(crate) struct CheckpointCounts {
    pub timed: AtomicU64,
    pub requested: AtomicU64,
    pub write_ms: AtomicU64,
}

impl std::fmt::Debug for DataDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataDir").field("dir", &self.config.dir).finish()
    }
}

/// Takes the directory's lock: a second server on the same directory must not start.
fn lock(dir: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("lock"))
        .map_err(|e| io(&format!("cannot open the data directory {}", dir.display()), e))?;
    // A child forked for an analytical query (fork mode) inherits the lock's descriptor until
    // it closes its descriptors or dies with its parent, so a lock that is busy right after
    // the previous owner closed is waited for briefly before the directory counts as in use.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        // SAFETY: flock on a file descriptor this function owns; no memory is involved.
        let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r == 0 {
            return Ok(file);
        }
        if Instant::now() >= deadline {
            return Err(Error::new(
                SqlState::ObjectInUse,
                format!("the data directory {} is in use by another Freshet server", dir.display()),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Checks (or writes, for a new directory) the format and the partition count.
fn check_meta(fs: &dyn Fs, dir: &Path, partitions: usize) -> Result<()> {
    let path = dir.join("meta");
    let expected = format!("freshet-data 1\npartitions {partitions}\n");
    match fs.read(&path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            if text != expected {
                let found = text.lines().find_map(|l| l.strip_prefix("partitions ")).unwrap_or("?");
                return Err(Error::new(
                    SqlState::InvalidParameterValue,
                    format!("the data directory {} was created with {found} partitions, not {partitions}", dir.display()),
                )
                .with_hint(format!("Start the server with --partitions {found}.")));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs.write_file(&path, expected.as_bytes()).map_err(|e| io("cannot write the data directory's meta file", e))?;
            fs.sync_dir(dir).map_err(|e| io("cannot sync the data directory", e))
        }
        Err(e) => Err(io("cannot read the data directory's meta file", e)),
    }
}

impl DataDir {
    /// Opens (or creates) the data directory, recovers the database into `engine`, and starts
    /// logging and checkpointing.
    pub fn open(config: DurabilityConfig, fs: Arc<dyn Fs>, engine: Arc<Engine>) -> Result<(Arc<DataDir>, RecoveryReport)> {
        let dir = config.dir.clone();
        fs.create_dir_all(&dir).map_err(|e| io(&format!("cannot create the data directory {}", dir.display()), e))?;
        let lock = lock(&dir)?;
        check_meta(fs.as_ref(), &dir, engine.partitions())?;
        let report = recover(fs.as_ref(), &dir, &engine)?;
        let wal = Arc::new(Wal::open(fs.clone(), &dir.join("wal"), report.end)?);
        futures::executor::block_on(engine.attach_wal(wal.clone()))?;
        let data = Arc::new(DataDir {
            config,
            fs,
            engine,
            wal,
            _lock: lock,
            checkpoint_lock: Mutex::new(()),
            checkpoints: CheckpointCounts::default(),
            stop: Arc::new(AtomicBool::new(false)),
            background: Mutex::new(None),
        });
        data.start_checkpointer();
        Ok((data, report.report))
    }

    pub fn wal(&self) -> &Arc<Wal> {
        &self.wal
    }

    /// Writes a checkpoint now (the CHECKPOINT statement).
    pub fn checkpoint(&self) -> Result<checkpoint::CheckpointInfo> {
        self.checkpoints.requested.fetch_add(1, Ordering::Relaxed);
        self.write_checkpoint()
    }

    fn write_checkpoint(&self) -> Result<checkpoint::CheckpointInfo> {
        let _one = self.checkpoint_lock.lock();
        let started = Instant::now();
        let mut image = futures::executor::block_on(self.engine.checkpoint_image())?;
        let start_lsn = match image.start.take() {
            Some(token) => token.wait()??,
            None => self.wal.durable_lsn(),
        };
        let root = self.config.dir.join("checkpoints");
        self.fs.create_dir_all(&root).map_err(|e| io("cannot create the checkpoint directory", e))?;
        let info = checkpoint::write(self.fs.as_ref(), &root, &image, start_lsn)?;
        // Keep this checkpoint and the previous one, and the log since the previous one.
        let all = checkpoint::list(self.fs.as_ref(), &root)?;
        for (_, old) in all.iter().skip(2) {
            let _ = self.fs.remove_dir_all(old);
        }
        if let Some((keep_from, _)) = all.get(1) {
            self.wal.remove_before(*keep_from)?;
        }
        tracing::info!(
            lsn = info.lsn,
            rows = info.rows,
            megabytes = info.bytes as f64 / 1e6,
            seconds = started.elapsed().as_secs_f64(),
            "checkpoint written"
        );
        self.checkpoints.write_ms.fetch_add(started.elapsed().as_millis() as u64, Ordering::Relaxed);
        Ok(info)
    }

    fn start_checkpointer(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let stop = self.stop.clone();
        let handle = std::thread::Builder::new().name("freshet-checkpoint".into()).spawn(move || {
            yield_cpu_to_transactions();
            let mut last = Instant::now();
            let mut told_restart = false;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let Some(data) = weak.upgrade() else { return };
                let grown = data.wal.bytes_since_checkpoint();
                let due = grown >= data.config.checkpoint_bytes || (grown > 0 && last.elapsed() >= data.config.checkpoint_interval);
                if due && !data.wal.is_failed() {
                    data.checkpoints.timed.fetch_add(1, Ordering::Relaxed);
                    if let Err(e) = data.write_checkpoint() {
                        tracing::error!("background checkpoint failed: {e}");
                    }
                    last = Instant::now();
                }
                if data.wal.is_failed() {
                    match futures::executor::block_on(data.engine.resume_log()) {
                        Ok(true) => tracing::info!("the redo log is writable again"),
                        Ok(false) if data.engine.needs_restart() && !told_restart => {
                            tracing::error!("a schema change is not in the redo log: restart the server to write again (reads go on)");
                            told_restart = true;
                        }
                        Ok(false) => {}
                        Err(e) => tracing::error!("cannot recover from the redo log failure: {e}"),
                    }
                }
            }
        });
        *self.background.lock() = handle.ok();
    }
}

impl DataDir {
    /// Stops the checkpointer thread and waits for it (unless called on it). The database
    /// calls this when its last handle goes: the thread holds the directory only while it
    /// works, and must not be the one that releases it (and its lock) after the database
    /// was closed, or an immediate reopen would find the directory still locked.
    pub(crate) fn stop_background(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let handle = self.background.lock().take();
        if let Some(h) = handle
            && h.thread().id() != std::thread::current().id()
        {
            let _ = h.join();
        }
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        self.stop_background();
    }
}

/// Lowers the calling thread's scheduling priority (nice +10; on Linux the nice value is per
/// thread). Checkpoint writing is background work: when the cores are busy with
/// transactions, a checkpoint takes longer rather than taking their CPU. The change lasts as
/// long as the thread, so only threads that do nothing but checkpoint call it.
pub(crate) fn yield_cpu_to_transactions() {
    use freshet_core::executor::cpus;
    let _ = cpus::set_thread_niceness((cpus::thread_niceness() + 10).min(19));
}

struct Recovered {
    report: RecoveryReport,
    end: Lsn,
}

/// Loads the newest valid checkpoint and replays the log after it into `engine`.
fn recover(fs: &dyn Fs, dir: &Path, engine: &Arc<Engine>) -> Result<Recovered> {
    let started = Instant::now();
    let mut report = RecoveryReport::default();
    let mut newest_ts = 0;
    let mut from: Lsn = 0;
    for (lsn, path) in checkpoint::list(fs, &dir.join("checkpoints"))? {
        match checkpoint::verify(fs, &path) {
            Ok(loaded) if loaded.partitions == engine.partitions() => {
                report.checkpoint_rows = load_checkpoint(fs, engine, &loaded)?;
                report.checkpoint_lsn = Some(lsn);
                newest_ts = loaded.ts;
                from = lsn;
                tracing::info!(lsn, rows = report.checkpoint_rows, "loaded checkpoint");
                break;
            }
            Ok(_) => tracing::warn!(lsn, "skipping a checkpoint written with another partition count"),
            Err(e) => tracing::warn!(lsn, "skipping a damaged checkpoint: {e}"),
        }
    }
    report.checkpoint_seconds = started.elapsed().as_secs_f64();
    let replay_started = Instant::now();
    let mut replay = Replay::new(engine);
    let mut progress = Instant::now();
    let mut replayed_bytes = 0u64;
    let scan: LogScan = read_log(fs, &dir.join("wal"), from, &mut |lsn, payload| {
        replayed_bytes += payload.len() as u64 + 8;
        let record = decode(payload)?;
        if lsn == from && matches!(record, RedoRecord::CheckpointStart { .. }) && report.checkpoint_lsn.is_some() {
            return Ok(());
        }
        if let RedoRecord::Commit { ts, .. } = &record {
            newest_ts = newest_ts.max(*ts);
        }
        replay.apply(record)?;
        if progress.elapsed() >= Duration::from_secs(2) {
            let secs = replay_started.elapsed().as_secs_f64();
            tracing::info!(
                records = replay.records,
                megabytes = replayed_bytes as f64 / 1e6,
                at_lsn = lsn,
                records_per_second = (replay.records as f64 / secs) as u64,
                megabytes_per_second = replayed_bytes as f64 / 1e6 / secs,
                "recovery in progress"
            );
            progress = Instant::now();
        }
        Ok(())
    })?;
    replay.drain()?;
    report.replay_seconds = replay_started.elapsed().as_secs_f64();
    let rebuild_started = Instant::now();
    futures::executor::block_on(engine.finish_recovery(newest_ts))?;
    report.rebuild_seconds = rebuild_started.elapsed().as_secs_f64();
    if let Some(cut) = scan.cut_at {
        tracing::warn!(lsn = cut, "the redo log had a torn or corrupt tail; it was cut after the last valid record (LSN {cut})");
    }
    report.records = scan.records;
    report.bytes = scan.bytes;
    report.cut_at = scan.cut_at;
    report.changes = replay.changes;
    report.seconds = started.elapsed().as_secs_f64();
    if report.records > 0 || report.checkpoint_lsn.is_some() {
        tracing::info!(
            checkpoint_rows = report.checkpoint_rows,
            checkpoint_seconds = report.checkpoint_seconds,
            records = report.records,
            changes = report.changes,
            megabytes = report.bytes as f64 / 1e6,
            replay_seconds = report.replay_seconds,
            rebuild_seconds = report.rebuild_seconds,
            records_per_second = (report.records as f64 / report.replay_seconds.max(1e-9)) as u64,
            changes_per_second = (report.changes as f64 / report.replay_seconds.max(1e-9)) as u64,
            seconds = report.seconds,
            "recovery finished"
        );
    }
    let end = scan.end.max(report.checkpoint_lsn.unwrap_or(0));
    Ok(Recovered { report, end })
}

fn load_checkpoint(fs: &dyn Fs, engine: &Arc<Engine>, loaded: &checkpoint::Loaded) -> Result<u64> {
    for def in &loaded.tables {
        futures::executor::block_on(engine.restore_put_table(def.clone()))?;
    }
    for source in &loaded.procedures {
        engine.restore_put_procedure(source)?;
    }
    for view in &loaded.views {
        engine.restore_put_view(view.clone());
    }
    for s in &loaded.sequences {
        engine.restore_put_sequence(s.clone());
    }
    for &(id, last, called) in &loaded.sequence_values {
        engine.restore_sequence_value(id, last, called);
    }
    let mut rows = 0;
    for (name, partition, table) in &loaded.files {
        let Some(def) = loaded.tables.iter().find(|d| d.id == *table) else { continue };
        rows += checkpoint::read_rows(fs, &loaded.dir.join(name), def, &mut |batch| {
            futures::executor::block_on(engine.restore_rows(*table, *partition, batch))
        })?;
    }
    Ok(rows)
}

/// Replays records, batching row changes per partition (order per partition is kept; records
/// that change the catalog flush the batches first).
struct Replay<'a> {
    engine: &'a Arc<Engine>,
    pending: Vec<Vec<RowChange>>,
    pending_count: usize,
    /// Batches the partitions are redoing now.
    inflight: Vec<Reply<()>>,
    records: u64,
    changes: u64,
    /// Parts of large transactions whose commit records have not been read yet.
    parts: std::collections::HashMap<u64, Vec<RowChange>>,
}

impl<'a> Replay<'a> {
    fn new(engine: &'a Arc<Engine>) -> Self {
        Replay { engine, pending: vec![Vec::new(); engine.partitions()], pending_count: 0, inflight: Vec::new(), records: 0, changes: 0, parts: Default::default() }
    }

    fn apply(&mut self, record: RedoRecord) -> Result<()> {
        self.records += 1;
        match record {
            RedoRecord::Commit { ts, changes } => {
                let earlier = self.parts.remove(&ts).unwrap_or_default();
                self.changes += (earlier.len() + changes.len()) as u64;
                for c in earlier.into_iter().chain(changes) {
                    let p = match &c {
                        RowChange::Insert { partition, .. } | RowChange::Update { partition, .. } | RowChange::Delete { partition, .. } => {
                            *partition as usize
                        }
                    };
                    self.pending.get_mut(p).ok_or_else(|| Error::internal(format!("redo record for partition {p}")))?.push(c);
                    self.pending_count += 1;
                }
                if self.pending_count >= 16_384 {
                    self.flush()?;
                }
                Ok(())
            }
            RedoRecord::PutTable(def) => {
                self.drain()?;
                futures::executor::block_on(self.engine.restore_put_table(def))
            }
            RedoRecord::DropTable(id) => {
                self.drain()?;
                futures::executor::block_on(self.engine.restore_drop_table(id))
            }
            RedoRecord::Truncate(ids) => {
                self.drain()?;
                futures::executor::block_on(self.engine.restore_truncate(ids))
            }
            RedoRecord::PutProcedure(source) => self.engine.restore_put_procedure(&source),
            RedoRecord::DropProcedure(key) => self.engine.restore_drop_procedure(&key),
            RedoRecord::PutView(view) => {
                self.engine.restore_put_view(view);
                Ok(())
            }
            RedoRecord::DropView(name) => {
                self.engine.restore_drop_view(&name);
                Ok(())
            }
            RedoRecord::PutSequence(def) => {
                self.engine.restore_put_sequence(def);
                Ok(())
            }
            RedoRecord::DropSequence(name) => {
                self.engine.restore_drop_sequence(&name);
                Ok(())
            }
            RedoRecord::AddColumn { table, column, fill } => {
                self.drain()?;
                futures::executor::block_on(self.engine.restore_add_column(table, column, fill))
            }
            RedoRecord::AlterColumnType { table, column, ty, explicit } => {
                self.drain()?;
                futures::executor::block_on(self.engine.restore_alter_column_type(table, column, ty, explicit))
            }
            RedoRecord::DropColumn { table, column } => {
                self.drain()?;
                futures::executor::block_on(self.engine.restore_drop_column(table, column))
            }
            RedoRecord::SequenceValue { id, last, called } => {
                self.engine.restore_sequence_value(id, last, called);
                Ok(())
            }
            RedoRecord::CheckpointStart { .. } => Ok(()),
            RedoRecord::Part { ts, changes } => {
                self.parts.entry(ts).or_default().extend(changes);
                Ok(())
            }
        }
    }

    /// Hands the pending changes to the partitions. Every partition redoes its share at the
    /// same time, and while they do, the next batch is read and decoded: only the batch
    /// before is waited for.
    fn flush(&mut self) -> Result<()> {
        self.wait_inflight()?;
        self.inflight = self
            .pending
            .iter_mut()
            .enumerate()
            .filter(|(_, c)| !c.is_empty())
            .map(|(p, c)| self.engine.restore_changes(p, std::mem::take(c)))
            .collect::<Result<Vec<_>>>()?;
        self.pending_count = 0;
        Ok(())
    }

    fn wait_inflight(&mut self) -> Result<()> {
        for r in self.inflight.drain(..) {
            r.wait()?;
        }
        Ok(())
    }

    /// Redoes everything read so far before returning.
    fn drain(&mut self) -> Result<()> {
        self.flush()?;
        self.wait_inflight()
    }
}
