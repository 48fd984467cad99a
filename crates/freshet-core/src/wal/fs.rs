//! The file layer under the redo log and checkpoints.
//!
//! Everything durable goes through [`Fs`], so tests can put a fault-injecting layer underneath
//! ([`FaultyFs`]) that fails or cuts a write, or fails a sync, at a chosen point — the way the
//! recovery tests reach every crash point.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// A file the log appends to.
pub trait LogFile: Send {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Makes what was written durable (fdatasync).
    fn sync(&mut self) -> io::Result<()>;
}

/// The operations durable storage needs.
pub trait Fs: Send + Sync + 'static {
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// The entries of a directory, sorted by name.
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Opens a file for appending, creating it if needed.
    fn append(&self, path: &Path) -> io::Result<Box<dyn LogFile>>;
    /// Writes a whole file and makes it durable.
    fn write_file(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes a directory's entries (creations, renames) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
}

/// The real file system.
#[derive(Debug, Default)]
pub struct RealFs;

struct RealFile(File);

impl LogFile for RealFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
}

impl Fs for RealFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::create_dir_all(path)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut out: Vec<PathBuf> = fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<io::Result<_>>()?;
        out.sort();
        Ok(out)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }

    fn append(&self, path: &Path) -> io::Result<Box<dyn LogFile>> {
        Ok(Box::new(RealFile(OpenOptions::new().create(true).append(true).open(path)?)))
    }

    fn write_file(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut f = File::create(path)?;
        f.write_all(bytes)?;
        f.sync_all()
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let f = OpenOptions::new().write(true).open(path)?;
        f.set_len(len)?;
        f.sync_all()
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }
}

/// What a [`FaultyFs`] does to the write or sync it is armed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The write fails with "no space left on device"; nothing is written.
    DiskFull,
    /// The write fails with an I/O error; nothing is written.
    IoError,
    /// Only the first `n` bytes reach the file, then the "machine stops": every later
    /// operation fails.
    Torn(usize),
    /// The sync fails with an I/O error.
    SyncFails,
}

/// The real file system with one armed fault: at the `at`-th write (or sync, for
/// [`Fault::SyncFails`]) since arming, counting from 1.
#[derive(Debug, Default)]
pub struct FaultyFs {
    /// The fault, the write (or sync) it hits, and whether it stays (every later one fails
    /// too, as a full disk does, until disarmed).
    armed: Mutex<Option<(u64, Fault, bool)>>,
    writes: AtomicU64,
    syncs: AtomicU64,
    /// After a torn write, the machine has "crashed": nothing more reaches the disk.
    dead: std::sync::atomic::AtomicBool,
}

impl FaultyFs {
    pub fn new() -> Arc<FaultyFs> {
        Arc::new(FaultyFs::default())
    }

    pub fn arm(&self, at: u64, fault: Fault) {
        self.writes.store(0, Ordering::SeqCst);
        self.syncs.store(0, Ordering::SeqCst);
        *self.armed.lock() = Some((at, fault, false));
    }

    /// Like [`arm`](Self::arm), but the fault hits every write (or sync) from the `at`-th on,
    /// until [`disarm`](Self::disarm): a disk that stays full until space is freed.
    pub fn arm_lasting(&self, at: u64, fault: Fault) {
        self.writes.store(0, Ordering::SeqCst);
        self.syncs.store(0, Ordering::SeqCst);
        *self.armed.lock() = Some((at, fault, true));
    }

    pub fn disarm(&self) {
        *self.armed.lock() = None;
    }

    pub fn crashed(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    fn check_alive(&self) -> io::Result<()> {
        if self.crashed() {
            return Err(io::Error::other("the machine stopped"));
        }
        Ok(())
    }

    /// The fault for this write, if it is the armed one; `Some(None)` means write normally.
    fn on_write(&self) -> Option<Fault> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        match *self.armed.lock() {
            Some((at, f, lasting)) if (at == n || lasting && n > at) && f != Fault::SyncFails => Some(f),
            _ => None,
        }
    }

    fn on_sync(&self) -> bool {
        let n = self.syncs.fetch_add(1, Ordering::SeqCst) + 1;
        matches!(*self.armed.lock(), Some((at, Fault::SyncFails, lasting)) if at == n || lasting && n > at)
    }

    fn write_through(&self, buf: &[u8], write: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        self.check_alive()?;
        match self.on_write() {
            None => write(buf),
            Some(Fault::DiskFull) => Err(io::Error::new(io::ErrorKind::StorageFull, "no space left on device")),
            Some(Fault::IoError) => Err(io::Error::other("input/output error")),
            Some(Fault::Torn(n)) => {
                let _ = write(&buf[..n.min(buf.len())]);
                self.dead.store(true, Ordering::SeqCst);
                Err(io::Error::other("the machine stopped during a write"))
            }
            Some(Fault::SyncFails) => write(buf),
        }
    }
}

struct FaultyFile {
    fs: Arc<FaultyFs>,
    inner: RealFile,
}

impl LogFile for FaultyFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let inner = &mut self.inner;
        self.fs.write_through(buf, &mut |b| inner.write_all(b))
    }

    fn sync(&mut self) -> io::Result<()> {
        self.fs.check_alive()?;
        if self.fs.on_sync() {
            return Err(io::Error::other("fsync failed"));
        }
        self.inner.sync()
    }
}

/// A handle that implements [`Fs`] for an `Arc<FaultyFs>`.
#[derive(Clone, Debug)]
pub struct FaultyHandle(pub Arc<FaultyFs>);

impl Fs for FaultyHandle {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.0.check_alive()?;
        RealFs.create_dir_all(path)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        RealFs.list(dir)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        RealFs.read(path)
    }

    fn append(&self, path: &Path) -> io::Result<Box<dyn LogFile>> {
        self.0.check_alive()?;
        Ok(Box::new(FaultyFile { fs: self.0.clone(), inner: RealFile(OpenOptions::new().create(true).append(true).open(path)?) }))
    }

    fn write_file(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.0.check_alive()?;
        let mut f = File::create(path)?;
        self.0.write_through(bytes, &mut |b| f.write_all(b))?;
        if self.0.on_sync() {
            return Err(io::Error::other("fsync failed"));
        }
        f.sync_all()
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.0.check_alive()?;
        RealFs.truncate(path, len)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.0.check_alive()?;
        RealFs.remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.0.check_alive()?;
        RealFs.remove_dir_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.0.check_alive()?;
        RealFs.rename(from, to)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.0.check_alive()?;
        RealFs.sync_dir(path)
    }
}
