//! Transactions: timestamps, per-partition transaction state, commit, rollback, validation,
//! garbage collection.
//!
//! TIMESTAMPS. The [`TxnRegistry`] hands out commit timestamps from one clock and keeps the
//! snapshot timestamps of running transactions. A transaction's snapshot is the clock's value
//! when it starts: it sees exactly the commits stamped at or below it. Taking a snapshot and
//! registering it happen under one lock with reading the clock, so garbage collection (which
//! keeps every version newer than the oldest registered snapshot, or than the clock when none
//! is registered) never drops a version a transaction that has started needs.
//!
//! PER PARTITION. A transaction's state on a partition ([`LocalTxn`]) lives in the partition
//! and is touched only by its executor: the versions it created (its undo, newest last) and,
//! for SERIALIZABLE, the predicates it read. Commit stamps the versions; rollback undoes them
//! newest first; a savepoint is a position in the version list.
//!
//! SERIALIZABLE. At commit, a transaction that wrote checks its read predicates against the
//! rows changed by every transaction that committed after its snapshot (before- and
//! after-images, kept by the partition while anyone might need them). If one of those rows
//! satisfies one of its predicates, it read something that changed under it and it aborts
//! with 40001 (precision locking, as in HyPer). Serial order is commit order; read-only
//! transactions read a committed prefix of it and need no check.
//!
//! DURABILITY. With a redo log, a commit is stamped (visible) once its record is queued, before
//! it is durable (early lock release, HyPer §4.4). Its versions, which hold the before-images,
//! are kept until the record is durable, whatever the readers: if the log fails, [`rewind`]
//! undoes exactly the commits whose records did not become durable.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hashbrown::{HashMap, HashSet};
use parking_lot::Mutex;

use crate::catalog::TableId;
use crate::error::{Error, Result};
use crate::executor::Partition;
use crate::sql::expr::{EvalContext, SliceRow};
use crate::sql::plan::OltpPlan;
use crate::storage::mvcc::{Change, Ts, TxnView, TXN_ID_BASE};
use crate::storage::RowId;
use crate::types::Value;
use crate::wal::{Lsn, RowChange, Wal};

/// Isolation levels. READ UNCOMMITTED behaves as READ COMMITTED, as in PostgreSQL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isolation {
    /// Each statement sees what was committed when it started; writes still fail with 40001
    /// on rows another transaction changed and has not committed.
    ReadCommitted,
    /// Snapshot isolation: one snapshot for the transaction, first updater wins.
    RepeatableRead,
    /// Snapshot isolation plus commit-time validation of the transaction's reads.
    Serializable,
}

impl Isolation {
    pub fn name(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read committed",
            Isolation::RepeatableRead => "repeatable read",
            Isolation::Serializable => "serializable",
        }
    }

    pub fn parse(name: &str) -> Option<Isolation> {
        Some(match name.to_lowercase().as_str() {
            "read uncommitted" | "read committed" => Isolation::ReadCommitted,
            "repeatable read" => Isolation::RepeatableRead,
            "serializable" => Isolation::Serializable,
            _ => return None,
        })
    }
}

/// Engine-wide timestamps and the snapshots in use.
#[derive(Debug, Default)]
pub struct TxnRegistry {
    next_id: AtomicU64,
    /// The newest commit timestamp handed out. Written only under `active`'s lock.
    clock: AtomicU64,
    /// Snapshot timestamps of running transactions (with multiplicity).
    active: Mutex<BTreeMap<Ts, usize>>,
    /// How many of them are SERIALIZABLE (they validate at commit).
    serializable: AtomicU64,
}

impl TxnRegistry {
    pub fn new_txn_id(&self) -> Ts {
        TXN_ID_BASE + 1 + self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The newest commit timestamp: a snapshot taken now includes everything up to it.
    pub fn now(&self) -> Ts {
        self.clock.load(Ordering::Acquire)
    }

    /// Takes a snapshot timestamp and registers it until [`end_snapshot`](Self::end_snapshot).
    pub fn begin_snapshot(&self) -> Ts {
        let mut active = self.active.lock();
        let start = self.clock.load(Ordering::Acquire);
        *active.entry(start).or_default() += 1;
        start
    }

    /// Counts a running SERIALIZABLE transaction (until [`end_serializable`](Self::end_serializable)).
    pub fn begin_serializable(&self) {
        self.serializable.fetch_add(1, Ordering::AcqRel);
    }

    pub fn end_serializable(&self) {
        self.serializable.fetch_sub(1, Ordering::AcqRel);
    }

    /// Running SERIALIZABLE transactions, which will validate against later commits.
    pub fn serializable_running(&self) -> u64 {
        self.serializable.load(Ordering::Acquire)
    }

    /// Unregisters a snapshot; returns whether it was the oldest one (so that versions may
    /// now be collectable).
    pub fn end_snapshot(&self, start: Ts) -> bool {
        let mut active = self.active.lock();
        let was_oldest = active.keys().next() == Some(&start);
        if let Some(n) = active.get_mut(&start) {
            *n -= 1;
            if *n == 0 {
                active.remove(&start);
            }
        }
        was_oldest
    }

    /// Recovery: the clock resumes after `ts`.
    pub fn advance_clock(&self, ts: Ts) {
        let _active = self.active.lock();
        self.clock.fetch_max(ts, Ordering::AcqRel);
    }

    pub fn next_commit_ts(&self) -> Ts {
        let _active = self.active.lock();
        self.clock.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Versions committed at or below this are needed by nobody.
    pub fn oldest_needed(&self) -> Ts {
        let active = self.active.lock();
        active.keys().next().copied().unwrap_or_else(|| self.clock.load(Ordering::Acquire))
    }

    /// Whether any transaction has a registered snapshot.
    pub fn any_active(&self) -> bool {
        !self.active.lock().is_empty()
    }
}

/// Something a SERIALIZABLE transaction read, to be checked against later commits.
#[derive(Clone, Debug)]
pub enum ReadPredicate {
    /// Every row of the table (an analytical query, a scan without a usable predicate).
    Table(TableId),
    /// The rows of a table that satisfy the filter of a short statement, with its parameters;
    /// with a bound, only those up to where its ordered index scan stopped (a LIMIT in index
    /// order: `WHERE no_w_id = $1 AND no_d_id = $2 ORDER BY no_o_id LIMIT 1` depends on no
    /// new order inserted after the one it found).
    Filter { table: TableId, plan: Arc<OltpPlan>, params: Arc<[Value]>, bound: Option<crate::sql::exec::ScanBound> },
}

impl ReadPredicate {
    fn table(&self) -> TableId {
        match self {
            ReadPredicate::Table(t) | ReadPredicate::Filter { table: t, .. } => *t,
        }
    }

    /// The columns the read depends on (see `OltpPlan::columns_depended_on`).
    fn columns(&self) -> u64 {
        match self {
            ReadPredicate::Table(_) => u64::MAX,
            ReadPredicate::Filter { plan, .. } => plan.columns_depended_on(),
        }
    }

    fn matches(&self, row: &[Value]) -> bool {
        match self {
            ReadPredicate::Table(_) => true,
            ReadPredicate::Filter { plan, params, bound, .. } => {
                let filter = plan.filter();
                let cx = EvalContext { params, now: 0, session: None };
                // An error while evaluating counts as a match: abort rather than miss a conflict.
                filter.is_none_or(|f| f.eval_predicate(&SliceRow(row), &cx).unwrap_or(true))
                    && bound.as_ref().is_none_or(|b| b.covers(plan.table(), row))
            }
        }
    }
}

/// One transaction's state on one partition.
#[derive(Debug)]
pub struct LocalTxn {
    pub view: TxnView,
    pub isolation: Isolation,
    /// Whether the transaction is counted among the running SERIALIZABLE ones.
    pub registered: bool,
    /// Versions created, oldest first: the transaction's undo.
    pub versions: Vec<(TableId, u32)>,
    /// Reads to validate at commit (SERIALIZABLE only).
    pub reads: Vec<ReadPredicate>,
}

impl LocalTxn {
    pub fn new(view: TxnView, isolation: Isolation) -> Self {
        LocalTxn { view, isolation, registered: false, versions: Vec::new(), reads: Vec::new() }
    }

    pub fn records_reads(&self) -> bool {
        self.isolation == Isolation::Serializable
    }
}

/// A changed row: its table, its before-image and its after-image (none: no row).
type RowImages = (TableId, Option<Vec<Value>>, Option<Vec<Value>>);

/// Rows one committed transaction changed.
#[derive(Debug)]
struct CommittedWrites {
    ts: Ts,
    rows: Vec<RowImages>,
}

/// The versions of one committed transaction on a partition, waiting to be collected.
#[derive(Debug)]
struct CommittedVersions {
    ts: Ts,
    /// The LSN of the commit's redo record (none without a log, or for a transaction that
    /// only locked rows).
    lsn: Option<Lsn>,
    versions: Vec<(TableId, u32)>,
}

/// The transactions of one partition.
#[derive(Debug, Default)]
pub struct PartitionTxns {
    pub local: HashMap<Ts, LocalTxn>,
    committed: VecDeque<CommittedWrites>,
    /// Committed versions in commit order (which on one partition is also LSN order).
    gc_queue: VecDeque<CommittedVersions>,
    /// The redo log, if the database has one: versions wait for their records to be durable.
    pub log: Option<Arc<Wal>>,
    /// Transactions rolled back here because the log failed, with the error their next
    /// statement or COMMIT gets (until the session rolls back).
    pub aborted: HashMap<Ts, Error>,
}

impl PartitionTxns {
    /// Versions not collected yet (for tests and monitoring).
    pub fn pending_versions(&self) -> usize {
        self.gc_queue.iter().map(|c| c.versions.len()).sum()
    }

    /// At the end of a transaction: fails (once) if the log failure rolled it back here.
    pub fn take_aborted(&mut self, id: Ts) -> Result<()> {
        match self.aborted.remove(&id) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Fails for a transaction the log failure rolled back here.
    pub fn check_aborted(&self, id: Ts) -> Result<()> {
        match self.aborted.get(&id) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

/// Empties a table of this partition (TRUNCATE, which is not transactional): its rows and
/// versions go, and so do the references to those versions held for collection, for the undo
/// of running transactions and for validation.
pub fn truncate_table(p: &mut Partition, table: TableId) -> Result<()> {
    p.table_mut(table)?.truncate();
    for c in &mut p.txns.gc_queue {
        c.versions.retain(|(t, _)| *t != table);
    }
    for txn in p.txns.local.values_mut() {
        txn.versions.retain(|(t, _)| *t != table);
    }
    for c in &mut p.txns.committed {
        c.rows.retain(|(t, _, _)| *t != table);
    }
    Ok(())
}

/// Undoes the versions of `txn` beyond position `keep` (all of them for 0), newest first.
pub fn rollback_versions(p: &mut Partition, versions: &mut Vec<(TableId, u32)>, keep: usize) -> Result<()> {
    while versions.len() > keep {
        let Some((table, v)) = versions.pop() else { break };
        p.table_mut(table)?.rollback_version(v)?;
    }
    Ok(())
}

/// Rolls a transaction back on this partition and forgets it.
pub fn rollback(p: &mut Partition, id: Ts) -> Result<()> {
    p.txns.aborted.remove(&id);
    let Some(mut txn) = p.txns.local.remove(&id) else { return Ok(()) };
    rollback_versions(p, &mut txn.versions, 0)
}

/// Checks a SERIALIZABLE transaction's reads against what committed after its snapshot.
pub fn validate(p: &Partition, txn: &LocalTxn) -> Result<()> {
    if txn.isolation != Isolation::Serializable || txn.versions.is_empty() || txn.reads.is_empty() {
        return Ok(());
    }
    if p.txns.committed.back().is_none_or(|c| c.ts <= txn.view.start) {
        return Ok(()); // nothing committed after the snapshot (the queue is in commit order)
    }
    let columns: Vec<u64> = txn.reads.iter().map(ReadPredicate::columns).collect();
    for c in p.txns.committed.iter().filter(|c| c.ts > txn.view.start) {
        for (table, before, after) in &c.rows {
            // An update that changed none of the columns a read depends on changed neither
            // whether the row qualified nor what the read saw of it (column-level precision:
            // TPC-C's Payment adds to W_YTD, New-Order reads W_TAX of the same row).
            let changed = match (before, after) {
                (Some(b), Some(a)) => changed_columns(b, a),
                _ => u64::MAX,
            };
            for (read, _) in txn.reads.iter().zip(&columns).filter(|(r, cols)| r.table() == *table && changed & **cols != 0) {
                let hit = [before, after].into_iter().flatten().any(|image| read.matches(image));
                if hit {
                    return Err(Error::serialization(
                        "could not serialize access due to read/write dependencies among transactions",
                    )
                    .with_detail("A row this transaction read was changed by a transaction that committed after its snapshot.")
                    .with_hint("The transaction might succeed if retried."));
                }
            }
        }
    }
    Ok(())
}

/// The columns whose values differ between two images of a row (bit `c` for column `c`; a
/// difference past the 63rd column sets every bit).
fn changed_columns(before: &[Value], after: &[Value]) -> u64 {
    let mut mask = 0u64;
    for (c, (b, a)) in before.iter().zip(after).enumerate() {
        if b != a {
            mask |= crate::sql::plan::column_bit(c);
        }
    }
    mask
}

/// Commits `txn` on this partition at `ts`: stamps its versions, keeps its writes for the
/// validation of transactions still running, and collects versions nobody needs.
pub fn commit(p: &mut Partition, mut txn: LocalTxn, ts: Ts, lsn: Option<Lsn>, registry: &TxnRegistry) -> Result<()> {
    if txn.versions.is_empty() {
        return Ok(());
    }
    if txn.view.detached {
        // Read after `ts` was taken: a snapshot registered later starts at or after it.
        let oldest = registry.oldest_needed();
        if lsn.is_none() && registry.serializable_running() == 0 && oldest >= ts {
            // Nobody may see the state before this commit: the detached versions' undo is
            // no longer needed. Linked ones (rows that had versions) are committed below.
            txn.versions.retain(|&(table, v)| match p.table_mut(table) {
                Ok(store) if store.is_detached(v) => {
                    store.forget_version(v);
                    false
                }
                Ok(_) => true,
                Err(_) => false,
            });
            if txn.versions.is_empty() {
                // What other commits left waiting may be collectable by now, as after any
                // commit.
                if !p.txns.gc_queue.is_empty() || !p.txns.committed.is_empty() {
                    collect_garbage(p, oldest)?;
                }
                return Ok(());
            }
        } else {
            for &(table, v) in &txn.versions {
                p.table_mut(table)?.attach_version(v);
            }
        }
    }
    // Keep the writes only if some other SERIALIZABLE transaction may validate against them.
    let own = u64::from(txn.isolation == Isolation::Serializable && txn.registered);
    if registry.serializable_running() > own {
        let writes = changed_rows(p, &txn)?;
        p.txns.committed.push_back(CommittedWrites { ts, rows: writes });
    }
    for &(table, v) in &txn.versions {
        p.table_mut(table)?.commit_version(v, ts);
    }
    p.txns.gc_queue.push_back(CommittedVersions { ts, lsn, versions: txn.versions });
    collect_garbage(p, registry.oldest_needed())
}

/// The row changes `txn` made on this partition, one per row, in the order it first changed
/// them: an insert with the final values (nothing if it also deleted the row), a delete, or an
/// update of the columns it changed with their final values.
pub fn redo_changes(p: &Partition, txn: &LocalTxn, out: &mut Vec<RowChange>) -> Result<()> {
    struct RowState {
        inserted: bool,
        deleted: bool,
        columns: Vec<usize>,
    }
    let partition = p.id as u16;
    // A transaction that only inserted (a load, a COPY): each version is a row of its own,
    // so no bookkeeping per row is needed (at a million rows it cost a fifth of a COPY).
    let mut inserted_only = true;
    for &(table, v) in &txn.versions {
        inserted_only &= matches!(p.table(table)?.version(v).change, Change::Inserted);
    }
    if inserted_only {
        out.reserve(txn.versions.len());
        for &(table, v) in &txn.versions {
            let store = p.table(table)?;
            let row = store.version(v).row;
            out.push(RowChange::Insert { table, partition, row, values: store.row_values(row) });
        }
        return Ok(());
    }
    let mut order: Vec<(TableId, RowId)> = Vec::with_capacity(txn.versions.len());
    let mut states: hashbrown::HashMap<(TableId, RowId), RowState> = hashbrown::HashMap::with_capacity(txn.versions.len());
    for &(table, v) in &txn.versions {
        let version = p.table(table)?.version(v);
        let key = (table, version.row);
        let state = states.entry(key).or_insert_with(|| {
            order.push(key);
            RowState { inserted: false, deleted: false, columns: Vec::new() }
        });
        match &version.change {
            Change::Inserted => state.inserted = true,
            Change::Deleted => state.deleted = true,
            Change::Updated { before, .. } => {
                for (c, _) in before {
                    if !state.columns.contains(c) {
                        state.columns.push(*c);
                    }
                }
            }
            Change::Locked => {}
        }
    }
    for key in order {
        let (table, row) = key;
        let state = &states[&key];
        let store = p.table(table)?;
        out.push(match (state.inserted, state.deleted) {
            (true, true) => continue,
            (true, false) => RowChange::Insert { table, partition, row, values: store.row_values(row) },
            (false, true) => RowChange::Delete { table, partition, row },
            (false, false) if state.columns.is_empty() => continue,
            (false, false) => RowChange::Update {
                table,
                partition,
                row,
                columns: state.columns.iter().map(|&c| (c as u16, store.get(row, c))).collect(),
            },
        });
    }
    Ok(())
}

/// Before- and after-images of every row `txn` changed (before stamping its versions).
fn changed_rows(p: &Partition, txn: &LocalTxn) -> Result<Vec<RowImages>> {
    let mut seen: HashSet<(TableId, RowId)> = HashSet::new();
    let mut out = Vec::new();
    for &(table, v) in &txn.versions {
        let store = p.table(table)?;
        let row = store.version(v).row;
        if !seen.insert((table, row)) {
            continue;
        }
        // Everything but this transaction's changes: the newest committed state.
        let before = store.visible_values(row, &TxnView::committed());
        let after = store.visible_values(row, &txn.view);
        out.push((table, before, after));
    }
    Ok(out)
}

/// Drops versions committed at or before `oldest` whose redo records are durable, in commit
/// order, and the committed write sets no running transaction can validate against any more.
pub fn collect_garbage(p: &mut Partition, oldest: Ts) -> Result<()> {
    let durable = p.txns.log.as_ref().map_or(Lsn::MAX, |w| w.durable_lsn());
    while p.txns.gc_queue.front().is_some_and(|c| c.ts <= oldest && c.lsn.is_none_or(|l| l < durable)) {
        let Some(CommittedVersions { versions, .. }) = p.txns.gc_queue.pop_front() else { break };
        for (table, v) in versions {
            // A dropped table takes its versions with it.
            if let Ok(store) = p.table_mut(table) {
                store.collect_version(v);
            }
        }
    }
    while p.txns.committed.front().is_some_and(|c| c.ts <= oldest) {
        p.txns.committed.pop_front();
    }
    Ok(())
}

/// After a log failure, with every partition quiesced: rolls back the transactions running
/// here (remembering them as aborted) and undoes, newest first, the commits whose records are
/// not below `durable`. Returns (commits undone, transactions rolled back).
///
/// On one partition, commit order is LSN order, so those commits are a suffix of the queue;
/// none of their versions has been collected (see [`collect_garbage`]), and once the running
/// transactions' versions are gone theirs are the newest of their rows.
pub fn rewind(p: &mut Partition, durable: Lsn) -> Result<(usize, usize)> {
    let failure = p
        .txns
        .log
        .as_ref()
        .and_then(|w| w.check_writable().err())
        .unwrap_or_else(|| Error::new(crate::error::SqlState::IoError, "the redo log failed"));
    let running: Vec<Ts> = p.txns.local.keys().copied().collect();
    for id in &running {
        if let Some(mut txn) = p.txns.local.remove(id) {
            rollback_versions(p, &mut txn.versions, 0)?;
        }
        let e = Error::new(failure.state, format!("the transaction was rolled back because the redo log failed: {}", failure.message));
        p.txns.aborted.insert(*id, e);
    }
    let mut undone = 0;
    while p.txns.gc_queue.back().is_some_and(|c| c.lsn.is_none_or(|l| l >= durable)) {
        let Some(mut c) = p.txns.gc_queue.pop_back() else { break };
        rollback_versions(p, &mut c.versions, 0)?;
        undone += usize::from(c.lsn.is_some());
    }
    // Nobody is left to validate against the write sets.
    p.txns.committed.clear();
    Ok((undone, running.len()))
}
