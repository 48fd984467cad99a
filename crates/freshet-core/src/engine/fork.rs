//! fork() snapshots, HyPer's original mechanism (§3.2): the process is forked at a
//! transaction boundary and the child reads its private memory image while the parent's
//! transactions go on; the kernel copies a page when the parent first writes to it.
//!
//! The fork happens inside executor jobs, so the image is taken between jobs: with one
//! partition the forking job itself is the boundary; with several, every executor runs one job
//! of a quiesced step, publishes a pointer to its partition and meets the others before the
//! first one forks, so no partition is in the middle of a statement in the image. Open
//! transactions' uncommitted changes are in the image; the child reverts them in its
//! snapshot copies exactly as a copy-on-write snapshot does (`TableStore::snapshot_for`).
//!
//! INVARIANTS (the child's side)
//! - The child has one thread, the forking executor; the other partitions' threads were parked
//!   at the step's barrier, so their partitions are consistent and nobody in the child holds
//!   their locks. The child only reads them.
//! - The child never returns into the parent's code: the callback ends it with `_exit`.

use std::convert::Infallible;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::statements::{merge_snapshots, snapshot_partition};
use super::Engine;
use crate::catalog::TableDef;
use crate::error::{Error, Result};
use crate::executor::Partition;
use crate::storage::{TableSnapshot, TxnView};

/// What the child runs: it receives its snapshots of the requested tables and must end the
/// process (`libc::_exit`) without returning.
pub type ForkChild = Box<dyn FnOnce(Result<Vec<TableSnapshot>>) -> Infallible + Send>;

/// A forked child, seen from the parent.
#[derive(Clone, Copy, Debug)]
pub struct Forked {
    pub pid: i32,
    /// How long fork() itself took in the parent.
    pub fork_time: Duration,
    /// How long the executors were held (the quiesced step, including the fork).
    pub pause: Duration,
}

impl Engine {
    /// Forks the process at a transaction boundary (see the module documentation); `child`
    /// runs in the child, which first closes every descriptor above 2 except `keep` (it must
    /// not hold the data directory's lock, the log or client sockets) and is killed if its
    /// parent dies. Returns once the parent side of fork() has returned.
    pub async fn fork(&self, tables: Vec<Arc<TableDef>>, view: TxnView, keep: Vec<i32>, child: ForkChild) -> Result<Forked> {
        let keep = Arc::new(keep);
        let n = self.executors.len();
        let child = Arc::new(Mutex::new(Some(child)));
        let tables = Arc::new(tables);
        let started = Instant::now();
        let forked = if n == 1 {
            self.executors[0]
                .call(move |p| {
                    let parts = [AtomicPtr::new(p as *mut Partition)];
                    fork_now(&parts, &tables, &view, &keep, &child)
                })
                .await??
        } else {
            let slots: Arc<Vec<AtomicPtr<Partition>>> = Arc::new((0..n).map(|_| AtomicPtr::new(std::ptr::null_mut())).collect());
            let all: Vec<usize> = (0..n).collect();
            let results = self
                .quiesced(&all, move |p, step, first| {
                    slots[p.id].store(p as *mut Partition, Ordering::SeqCst);
                    // Every partition has published itself before the first one forks; the
                    // others wait at the step's last meeting until it has.
                    step.meet();
                    if first { fork_now(&slots, &tables, &view, &keep, &child).map(Some) } else { Ok(None) }
                })
                .await?;
            results.into_iter().collect::<Result<Vec<_>>>()?.into_iter().flatten().next().ok_or_else(|| Error::internal("no partition forked"))?
        };
        Ok(Forked { pause: started.elapsed(), ..forked })
    }
}

fn fork_now(parts: &[AtomicPtr<Partition>], tables: &[Arc<TableDef>], view: &TxnView, keep: &[i32], child: &Mutex<Option<ForkChild>>) -> Result<Forked> {
    let started = Instant::now();
    let nice = crate::executor::cpus::process_niceness();
    // SAFETY: fork() in a multi-threaded process; the child only touches memory that no other
    // thread can be changing at this moment (see the module invariants) and ends with _exit.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(Error::internal(format!("fork failed: {}", std::io::Error::last_os_error()))),
        0 => {
            close_descriptors(keep);
            // The query runs at the process's priority, not at the forking executor's.
            let _ = crate::executor::cpus::set_thread_niceness(nice);
            // SAFETY: every pointer was published by its partition's executor, which is parked
            // at the step's barrier (or is this thread) and in the child no longer runs.
            let parts: Vec<&Partition> = parts.iter().map(|p| unsafe { &*p.load(Ordering::SeqCst) }).collect();
            let shares: Result<Vec<_>> = parts.iter().map(|p| snapshot_partition(p, tables, view, 0, &[])).collect();
            let snapshots = shares.and_then(|s| merge_snapshots(s, tables.len()));
            match child.lock().take() {
                // `f` never returns (its type says so).
                #[allow(unreachable_code)]
                Some(f) => match f(snapshots) {},
                // SAFETY: ends the child without running the parent's destructors.
                None => unsafe { libc::_exit(70) },
            }
        }
        pid => Ok(Forked { pid, fork_time: started.elapsed(), pause: Duration::ZERO }),
    }
}

/// In the child: asks to be killed when the parent dies and closes every inherited descriptor
/// above 2 except `keep`.
fn close_descriptors(keep: &[i32]) {
    let mut keep: Vec<u32> = keep.iter().filter(|&&fd| fd > 2).map(|&fd| fd as u32).collect();
    keep.sort_unstable();
    let mut first = 3u32;
    // SAFETY: plain system calls on this process's own descriptors.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        for fd in keep {
            if fd > first {
                libc::syscall(libc::SYS_close_range, first, fd - 1, 0u32);
            }
            first = fd + 1;
        }
        libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32);
    }
}
