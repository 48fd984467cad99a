//! Advisory locks: `pg_advisory_lock` and its family, locks an application names by numbers
//! and Freshet only keeps (migration tools, job schedulers and leader election use them).
//!
//! One table per database ([`AdvisoryLocks`]) maps each lock key to the sessions holding it,
//! with a count per mode (exclusive, shared) and scope (session, transaction): a lock taken
//! twice is released twice, as in PostgreSQL. A session's [`SessionLocks`] takes and releases
//! its own holds; its transaction-level holds go when its transaction ends
//! ([`SessionLocks::end_transaction`]), those taken after a savepoint when the transaction rolls
//! back to it ([`SessionLocks::mark`]), and everything it holds when it is dropped (the
//! session ended). Session-level holds ignore transactions, as in PostgreSQL: a rollback keeps
//! them.
//!
//! Invariants:
//! - two sessions never hold one key in conflicting modes (exclusive conflicts with any mode
//!   another session holds; shared with another session's exclusive); a session never
//!   conflicts with itself;
//! - a key with no holds has no entry; a session waiting for a key has an entry in `waiting`
//!   only while its wait runs (a dropped wait removes it), and it is what deadlock detection
//!   follows;
//! - every release wakes the waiters of the keys it freed, which then try again.
//!
//! Waiting happens in the session (`Session::execute` evaluating a SELECT without FROM, which
//! is also what PERFORM runs), never on a partition executor: a routine running as one
//! executor job gives the job up at its first lock function and runs statement by statement;
//! a blocking lock function evaluated anywhere else that cannot wait fails with 55P03. A wait ends with the lock,
//! with 40P01 when it would close a cycle of sessions waiting for each other's advisory locks,
//! with 55P03 after `lock_timeout`, or with 57014 after `statement_timeout`. Cycles that pass
//! through row locks as well are not seen; the timeouts end those.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use hashbrown::HashMap;
use parking_lot::Mutex;

use freshet_core::sql::expr::{AdvisoryFn, AdvisoryOp};
use freshet_core::types::Value;
use freshet_core::{Error, Result, SqlState};

/// The name of an advisory lock: one bigint, or two integers (a separate key space).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum LockKey {
    One(i64),
    Two(i32, i32),
}

impl LockKey {
    /// The key named by a lock function's (non-NULL, integer) arguments.
    fn of(args: &[Value]) -> Result<LockKey> {
        let int = |v: &Value| v.as_i64().ok_or_else(|| Error::mismatch("an advisory lock is named by integers"));
        match args {
            [a] => Ok(LockKey::One(int(a)?)),
            [a, b] => {
                let half = |v: &Value| i32::try_from(int(v)?).map_err(|_| Error::new(SqlState::NumericValueOutOfRange, "integer out of range"));
                Ok(LockKey::Two(half(a)?, half(b)?))
            }
            _ => Err(Error::internal("an advisory lock function takes one or two arguments")),
        }
    }

    /// pg_locks' `classid`, `objid` and `objsubid` of the lock: the bigint's high and low
    /// halves and 1, or the two integers and 2.
    pub(crate) fn pg_locks_ids(self) -> (i64, i64, i64) {
        match self {
            LockKey::One(k) => (((k as u64) >> 32) as i64, (k as u32) as i64, 1),
            LockKey::Two(a, b) => (a as u32 as i64, b as u32 as i64, 2),
        }
    }

    /// As PostgreSQL's pg_locks shows an advisory lock (database, classid, objid, objsubid).
    fn describe(self) -> String {
        match self {
            LockKey::One(k) => format!("[{},{},1]", (k as u64) >> 32, k as u32),
            LockKey::Two(a, b) => format!("[{},{},2]", a as u32, b as u32),
        }
    }
}

/// A session's holds on one key: counts by mode and scope.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Holds {
    exclusive: [u32; 2],
    shared: [u32; 2],
}

const SESSION: usize = 0;
const XACT: usize = 1;

impl Holds {
    fn count(&mut self, shared: bool, scope: usize) -> &mut u32 {
        if shared { &mut self.shared[scope] } else { &mut self.exclusive[scope] }
    }

    fn has_exclusive(&self) -> bool {
        self.exclusive.iter().any(|&n| n > 0)
    }

    fn is_empty(&self) -> bool {
        *self == Holds::default()
    }
}

#[derive(Default)]
struct State {
    /// Who holds each key (session id → holds).
    held: HashMap<LockKey, HashMap<u32, Holds>>,
    /// What each waiting session waits for (key, shared).
    waiting: HashMap<u32, (LockKey, bool)>,
    /// Wakers of the sessions waiting for each key.
    waiters: HashMap<LockKey, Vec<oneshot::Sender<()>>>,
}

impl State {
    /// The sessions other than `session` whose holds on `key` keep it from taking the lock.
    fn blockers(&self, key: LockKey, shared: bool, session: u32) -> impl Iterator<Item = u32> + '_ {
        self.held.get(&key).into_iter().flatten().filter(move |(s, h)| **s != session && (!shared || h.has_exclusive())).map(|(s, _)| *s)
    }

    /// Whether `session` waiting for `key` would close a cycle: some session it would wait
    /// for waits, directly or through others, for a lock `session` holds.
    fn closes_cycle(&self, key: LockKey, shared: bool, session: u32) -> bool {
        let mut seen = hashbrown::HashSet::new();
        let mut next: Vec<u32> = self.blockers(key, shared, session).collect();
        while let Some(s) = next.pop() {
            if s == session {
                return true;
            }
            if !seen.insert(s) {
                continue;
            }
            if let Some(&(k, sh)) = self.waiting.get(&s) {
                next.extend(self.blockers(k, sh, s));
            }
        }
        false
    }

    /// Removes `session`'s holds that `keep` does not keep, and wakes the waiters of every
    /// key it no longer holds in some mode.
    fn release_where(&mut self, session: u32, keep: impl Fn(&mut Holds)) {
        let mut freed = Vec::new();
        self.held.retain(|key, holders| {
            if let Some(h) = holders.get_mut(&session) {
                let before = *h;
                keep(h);
                if *h != before {
                    freed.push(*key);
                }
                if h.is_empty() {
                    holders.remove(&session);
                }
            }
            !holders.is_empty()
        });
        for key in freed {
            self.wake(key);
        }
    }

    fn wake(&mut self, key: LockKey) {
        for w in self.waiters.remove(&key).unwrap_or_default() {
            let _ = w.send(());
        }
    }
}

/// The advisory locks of one database.
#[derive(Default)]
pub(crate) struct AdvisoryLocks {
    state: Mutex<State>,
}

/// One row of `pg_locks`: a session's hold of a key in a mode, or its wait for one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LockRow {
    pub key: LockKey,
    pub session: u32,
    pub shared: bool,
    pub granted: bool,
}

impl std::fmt::Debug for AdvisoryLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdvisoryLocks").finish_non_exhaustive()
    }
}

impl AdvisoryLocks {
    /// Every hold (one row per session, key and mode) and every wait, for `pg_locks`.
    pub(crate) fn rows(&self) -> Vec<LockRow> {
        let s = self.state.lock();
        let mut rows = Vec::new();
        for (key, holders) in &s.held {
            for (session, h) in holders {
                for (shared, held) in [(false, h.exclusive.iter().sum::<u32>()), (true, h.shared.iter().sum::<u32>())] {
                    if held > 0 {
                        rows.push(LockRow { key: *key, session: *session, shared, granted: true });
                    }
                }
            }
        }
        rows.extend(s.waiting.iter().map(|(session, (key, shared))| LockRow { key: *key, session: *session, shared: *shared, granted: false }));
        rows.sort_by_key(|r| (r.session, !r.granted, r.key.pg_locks_ids(), r.shared));
        rows
    }

    /// Takes one hold of `key` for `session` if no other session holds it in a conflicting
    /// mode; returns whether it did.
    fn try_take(&self, session: u32, key: LockKey, shared: bool, scope: usize) -> bool {
        let mut s = self.state.lock();
        if s.blockers(key, shared, session).next().is_some() {
            return false;
        }
        *s.held.entry(key).or_default().entry(session).or_default().count(shared, scope) += 1;
        true
    }

    /// Releases one hold of `scope`; returns whether there was one.
    fn release_one(&self, session: u32, key: LockKey, shared: bool, scope: usize) -> bool {
        let mut s = self.state.lock();
        let Some(holders) = s.held.get_mut(&key) else { return false };
        let Some(h) = holders.get_mut(&session) else { return false };
        let n = h.count(shared, scope);
        if *n == 0 {
            return false;
        }
        *n -= 1;
        if h.is_empty() {
            holders.remove(&session);
            if holders.is_empty() {
                s.held.remove(&key);
            }
        }
        s.wake(key);
        true
    }

    /// Waits until `key` may be free for `session` (the caller then tries again), or fails:
    /// 40P01 if the wait would close a cycle, or `deadline`'s error once it passes.
    async fn wait(&self, session: u32, key: LockKey, shared: bool, deadline: Option<(Instant, Error)>) -> Result<()> {
        let woken = {
            let mut s = self.state.lock();
            if s.blockers(key, shared, session).next().is_none() {
                return Ok(());
            }
            if s.closes_cycle(key, shared, session) {
                let holder = s.blockers(key, shared, session).next().unwrap_or_default();
                let mode = if shared { "ShareLock" } else { "ExclusiveLock" };
                return Err(Error::deadlock().with_detail(format!(
                    "Process {session} waits for {mode} on advisory lock {}; blocked by process {holder}.",
                    key.describe()
                )));
            }
            s.waiting.insert(session, (key, shared));
            let (tx, rx) = oneshot::channel();
            s.waiters.entry(key).or_default().push(tx);
            rx
        };
        let _waiting = Waiting { locks: self, session };
        match deadline {
            None => {
                let _ = woken.await;
                Ok(())
            }
            Some((at, error)) => {
                let timer = timer(at.saturating_duration_since(Instant::now()));
                match futures::future::select(woken, timer).await {
                    futures::future::Either::Left(_) => Ok(()),
                    futures::future::Either::Right(_) => Err(error),
                }
            }
        }
    }
}

/// Removes a session's `waiting` entry when its wait ends, however it ends (a cancelled
/// statement drops the wait).
struct Waiting<'a> {
    locks: &'a AdvisoryLocks,
    session: u32,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.locks.state.lock().waiting.remove(&self.session);
    }
}

/// Completes after `d`, whatever runs the future (an embedded caller may poll it without an
/// async runtime): a thread sleeps for it, in steps of at most 50 ms so that it ends soon
/// after the future is dropped (a cancelled statement). Timed waits are rare: lock waits with
/// a timeout, and `pg_sleep`.
pub(crate) fn timer(d: Duration) -> oneshot::Receiver<()> {
    let (tx, rx) = oneshot::channel();
    let until = Instant::now() + d;
    let spawned = std::thread::Builder::new().name("freshet-timer".into()).spawn(move || {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || tx.is_canceled() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
        let _ = tx.send(());
    });
    if let Err(e) = spawned {
        tracing::warn!("cannot start a timer thread: {e}");
    }
    rx
}

/// Waits `d` (`pg_sleep`), or fails with `deadline`'s error if that passes first.
pub(crate) async fn sleep(d: Duration, deadline: Option<(Instant, Error)>) -> Result<()> {
    match deadline {
        Some((at, error)) if at < Instant::now() + d => {
            let _ = timer(at.saturating_duration_since(Instant::now())).await;
            Err(error)
        }
        _ => {
            let _ = timer(d).await;
            Ok(())
        }
    }
}

/// One session's advisory locks.
pub(crate) struct SessionLocks {
    locks: Arc<AdvisoryLocks>,
    session: u32,
    /// The lock the last blocking call could not take at once: what the session waits for
    /// before evaluating the call again.
    blocked: Mutex<Option<(LockKey, bool)>>,
    /// Warnings for the client (releasing a lock the session does not hold).
    warnings: Mutex<Vec<String>>,
    /// Whether the session may hold transaction-level locks: set when it takes one, cleared
    /// when its transaction ends, so that the end of every other transaction costs no lock of
    /// the shared table.
    holds_xact: std::sync::atomic::AtomicBool,
    /// The transaction-level holds the open transaction took, in order (key, shared): a
    /// rollback to a savepoint releases those taken after it.
    xact_taken: Mutex<Vec<(LockKey, bool)>>,
}

impl SessionLocks {
    pub(crate) fn new(locks: Arc<AdvisoryLocks>, session: u32) -> Self {
        SessionLocks {
            locks,
            session,
            blocked: Mutex::new(None),
            warnings: Mutex::new(Vec::new()),
            holds_xact: Default::default(),
            xact_taken: Mutex::new(Vec::new()),
        }
    }

    /// Evaluates an advisory lock function (its arguments are not NULL). A lock that must be
    /// waited for fails with 55P03 and is remembered ([`Self::take_blocked`]).
    pub(crate) fn call(&self, f: AdvisoryFn, args: &[Value]) -> Result<Value> {
        let scope = if f.xact { XACT } else { SESSION };
        if f.xact {
            // Set before the lock can be taken: the transaction's end then finds it.
            self.holds_xact.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        match f.op {
            AdvisoryOp::UnlockAll => {
                self.unlock_all();
                Ok(Value::Text(String::new()))
            }
            AdvisoryOp::TryLock => Ok(Value::Bool(self.take(LockKey::of(args)?, f.shared, scope))),
            AdvisoryOp::Lock => {
                let key = LockKey::of(args)?;
                if self.take(key, f.shared, scope) {
                    return Ok(Value::Text(String::new()));
                }
                *self.blocked.lock() = Some((key, f.shared));
                Err(Error::new(SqlState::LockNotAvailable, format!("could not obtain lock on advisory lock {}", key.describe()))
                    .with_hint("Another session holds it. Only SELECT without FROM (PERFORM in a function) waits for a lock; elsewhere use pg_try_advisory_lock."))
            }
            AdvisoryOp::Unlock => {
                let released = self.locks.release_one(self.session, LockKey::of(args)?, f.shared, SESSION);
                if !released {
                    let mode = if f.shared { "ShareLock" } else { "ExclusiveLock" };
                    self.warnings.lock().push(format!("you don't own a lock of type {mode}"));
                }
                Ok(Value::Bool(released))
            }
        }
    }

    /// `pg_advisory_unlock_all()`: every session-level hold goes.
    pub(crate) fn unlock_all(&self) {
        self.locks.state.lock().release_where(self.session, |h| {
            h.exclusive[SESSION] = 0;
            h.shared[SESSION] = 0;
        });
    }

    /// Takes one hold if no other session's holds conflict; returns whether it did.
    fn take(&self, key: LockKey, shared: bool, scope: usize) -> bool {
        let taken = self.locks.try_take(self.session, key, shared, scope);
        if taken && scope == XACT {
            self.xact_taken.lock().push((key, shared));
        }
        taken
    }

    /// How many transaction-level holds the open transaction has taken: a savepoint set now
    /// keeps them when the transaction rolls back to it ([`Self::rollback_to`]).
    pub(crate) fn mark(&self) -> usize {
        if !self.holds_xact.load(std::sync::atomic::Ordering::Relaxed) {
            return 0;
        }
        self.xact_taken.lock().len()
    }

    /// The transaction rolled back to a savepoint: the transaction-level holds taken after
    /// `mark` are released, newest first.
    pub(crate) fn rollback_to(&self, mark: usize) {
        if !self.holds_xact.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let after = {
            let mut taken = self.xact_taken.lock();
            let keep = mark.min(taken.len());
            taken.split_off(keep)
        };
        for (key, shared) in after.into_iter().rev() {
            self.locks.release_one(self.session, key, shared, XACT);
        }
    }

    /// The lock a blocking call could not take, if the last one could not (and forgets it).
    pub(crate) fn take_blocked(&self) -> Option<(LockKey, bool)> {
        self.blocked.lock().take()
    }

    /// Waits until the lock may be free (see [`AdvisoryLocks::wait`]).
    pub(crate) async fn wait(&self, (key, shared): (LockKey, bool), deadline: Option<(Instant, Error)>) -> Result<()> {
        self.locks.wait(self.session, key, shared, deadline).await
    }

    /// The WARNINGs calls left for the client since the last take.
    pub(crate) fn take_warnings(&self) -> Vec<crate::result::Notice> {
        std::mem::take(&mut *self.warnings.lock()).into_iter().map(crate::result::Notice::warning).collect()
    }

    /// The session's transaction ended: its transaction-level holds are released.
    pub(crate) fn end_transaction(&self) {
        if !self.holds_xact.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        self.xact_taken.lock().clear();
        self.locks.state.lock().release_where(self.session, |h| {
            h.exclusive[XACT] = 0;
            h.shared[XACT] = 0;
        });
    }
}

impl Drop for SessionLocks {
    /// The session ended: everything it holds is released.
    fn drop(&mut self) {
        self.locks.state.lock().release_where(self.session, |h| *h = Holds::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(op: AdvisoryOp, shared: bool, xact: bool) -> AdvisoryFn {
        AdvisoryFn { op, shared, xact }
    }

    #[test]
    fn modes_conflict_as_in_postgresql_and_holds_count() {
        let locks = Arc::new(AdvisoryLocks::default());
        let (a, b) = (SessionLocks::new(locks.clone(), 1), SessionLocks::new(locks.clone(), 2));
        let k = [Value::Int64(7)];
        let try_x = lock(AdvisoryOp::TryLock, false, false);
        let try_s = lock(AdvisoryOp::TryLock, true, false);
        assert_eq!(a.call(try_s, &k).unwrap(), Value::Bool(true));
        assert_eq!(b.call(try_s, &k).unwrap(), Value::Bool(true), "shared holds do not conflict");
        assert_eq!(b.call(try_x, &k).unwrap(), Value::Bool(false), "a's shared hold keeps b from exclusive");
        assert_eq!(a.call(try_x, &k).unwrap(), Value::Bool(false), "b's shared hold keeps a from exclusive");
        let unlock_s = lock(AdvisoryOp::Unlock, true, false);
        assert_eq!(b.call(unlock_s, &k).unwrap(), Value::Bool(true));
        assert_eq!(a.call(try_x, &k).unwrap(), Value::Bool(true), "a session does not conflict with itself");
        assert_eq!(a.call(try_x, &k).unwrap(), Value::Bool(true));
        let unlock_x = lock(AdvisoryOp::Unlock, false, false);
        assert_eq!(a.call(unlock_x, &k).unwrap(), Value::Bool(true));
        assert_eq!(b.call(try_s, &k).unwrap(), Value::Bool(false), "one exclusive hold is left");
        assert_eq!(a.call(unlock_x, &k).unwrap(), Value::Bool(true));
        assert_eq!(b.call(unlock_x, &k).unwrap(), Value::Bool(false));
        assert_eq!(b.take_warnings(), vec![crate::result::Notice::warning("you don't own a lock of type ExclusiveLock")]);
        // The two-integer key space is separate from the bigint one.
        assert_eq!(b.call(try_x, &[Value::Int64(0), Value::Int64(7)]).unwrap(), Value::Bool(true));
        assert!(LockKey::of(&[Value::Int64(1 << 40), Value::Int64(1)]).is_err());
    }

    #[test]
    fn transaction_holds_end_with_the_transaction_and_all_holds_with_the_session() {
        let locks = Arc::new(AdvisoryLocks::default());
        let a = SessionLocks::new(locks.clone(), 1);
        let b = SessionLocks::new(locks.clone(), 2);
        let k = [Value::Int64(1)];
        a.call(lock(AdvisoryOp::Lock, false, true), &k).unwrap();
        a.call(lock(AdvisoryOp::Lock, false, false), &[Value::Int64(2)]).unwrap();
        let try_x = lock(AdvisoryOp::TryLock, false, false);
        assert_eq!(b.call(try_x, &k).unwrap(), Value::Bool(false));
        // pg_advisory_unlock does not release a transaction-level hold.
        assert_eq!(a.call(lock(AdvisoryOp::Unlock, false, false), &k).unwrap(), Value::Bool(false));
        a.end_transaction();
        assert_eq!(b.call(try_x, &k).unwrap(), Value::Bool(true));
        assert_eq!(b.call(try_x, &[Value::Int64(2)]).unwrap(), Value::Bool(false));
        drop(a);
        assert_eq!(b.call(try_x, &[Value::Int64(2)]).unwrap(), Value::Bool(true));
        drop(b);
        assert!(locks.state.lock().held.is_empty());
    }

    #[test]
    fn a_rollback_to_a_savepoint_releases_the_transaction_holds_taken_after_it() {
        let locks = Arc::new(AdvisoryLocks::default());
        let a = SessionLocks::new(locks.clone(), 1);
        let b = SessionLocks::new(locks.clone(), 2);
        let (k1, k2, k3) = ([Value::Int64(1)], [Value::Int64(2)], [Value::Int64(3)]);
        let xact = lock(AdvisoryOp::Lock, false, true);
        let try_x = lock(AdvisoryOp::TryLock, false, false);
        a.call(xact, &k1).unwrap();
        let mark = a.mark();
        a.call(xact, &k1).unwrap();
        a.call(xact, &k2).unwrap();
        a.call(lock(AdvisoryOp::Lock, false, false), &k3).unwrap();
        a.rollback_to(mark);
        assert_eq!(b.call(try_x, &k2).unwrap(), Value::Bool(true), "taken after the savepoint: released");
        assert_eq!(b.call(try_x, &k1).unwrap(), Value::Bool(false), "taken before it: still held once");
        assert_eq!(b.call(try_x, &k3).unwrap(), Value::Bool(false), "session-level holds ignore rollbacks");
        a.end_transaction();
        assert_eq!(b.call(try_x, &k1).unwrap(), Value::Bool(true));
        assert_eq!(a.mark(), 0, "a new transaction has taken nothing");
    }

    #[test]
    fn a_blocked_lock_waits_for_the_release_and_a_cycle_is_a_deadlock() {
        let locks = Arc::new(AdvisoryLocks::default());
        let a = Arc::new(SessionLocks::new(locks.clone(), 1));
        let b = SessionLocks::new(locks.clone(), 2);
        let (k1, k2) = ([Value::Int64(1)], [Value::Int64(2)]);
        let x = lock(AdvisoryOp::Lock, false, false);
        a.call(x, &k1).unwrap();
        b.call(x, &k2).unwrap();
        // b waits for k1, which a holds.
        assert_eq!(b.call(x, &k1).unwrap_err().state, SqlState::LockNotAvailable);
        let blocked = b.take_blocked().unwrap();
        let waiter = {
            let (a, k1, k2) = (a.clone(), k1.clone(), k2.clone());
            std::thread::spawn(move || {
                // a asking for k2 now closes the cycle a → b → a, once b waits.
                while a.locks.state.lock().waiting.is_empty() {
                    std::thread::yield_now();
                }
                assert_eq!(a.call(x, &k2).unwrap_err().state, SqlState::LockNotAvailable);
                let e = futures::executor::block_on(a.wait(a.take_blocked().unwrap(), None)).unwrap_err();
                assert_eq!(e.state, SqlState::DeadlockDetected);
                assert_eq!(a.call(lock(AdvisoryOp::Unlock, false, false), &k1).unwrap(), Value::Bool(true));
            })
        };
        futures::executor::block_on(b.wait(blocked, None)).unwrap();
        assert_eq!(b.call(x, &k1).unwrap(), Value::Text(String::new()));
        waiter.join().unwrap();
        assert!(locks.state.lock().waiting.is_empty());
    }

    #[test]
    fn a_wait_ends_at_its_deadline() {
        let locks = Arc::new(AdvisoryLocks::default());
        let (a, b) = (SessionLocks::new(locks.clone(), 1), SessionLocks::new(locks.clone(), 2));
        let x = lock(AdvisoryOp::Lock, false, false);
        a.call(x, &[Value::Int64(1)]).unwrap();
        assert!(b.call(x, &[Value::Int64(1)]).is_err());
        let deadline = (Instant::now() + Duration::from_millis(20), Error::new(SqlState::LockNotAvailable, "canceling statement due to lock timeout"));
        let e = futures::executor::block_on(b.wait(b.take_blocked().unwrap(), Some(deadline))).unwrap_err();
        assert_eq!(e.message, "canceling statement due to lock timeout");
        assert!(locks.state.lock().waiting.is_empty());
    }
}
