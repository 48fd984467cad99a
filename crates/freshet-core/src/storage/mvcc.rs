//! Versions: multi-version concurrency control on in-place storage.
//!
//! VERSIONS. A write changes the row in place and records its before-image as a [`Version`]
//! that heads the row's chain (newest first, HyPer's later MVCC). A version carries a
//! timestamp: while its transaction runs, the transaction's id (at or above [`TXN_ID_BASE`]);
//! from commit on, the commit timestamp. The live row is thus always the newest state,
//! including uncommitted changes; older states are reconstructed by applying before-images.
//!
//! ISOLATION. A reader has a [`TxnView`]: its own id and the commit timestamp its snapshot
//! includes. It walks a row's chain from the newest version and undoes every change it does
//! not see (uncommitted changes of others, commits after its snapshot); its own changes it
//! sees. A writer may change a row only if it sees the row's newest version: otherwise
//! another transaction changed it after the writer's snapshot (or has not committed yet) and
//! the writer fails with 40001 at once — first updater wins; nobody waits, so there are no
//! deadlocks.
//!
//! INDEXES. Index entries are (key, row) pairs that stay as long as any version with that
//! key may be seen; a reader arriving through an index entry accepts the row only if its
//! visible version has that entry's key (see `exec`). Rollback removes the entries its
//! changes added; garbage collection removes entries of versions nobody can see any more.
//!
//! GARBAGE COLLECTION. Once a committed version's timestamp is at or below the oldest
//! snapshot of any running transaction, nobody needs the state before it: the version is
//! dropped, index entries only older states had are removed, and the slot of a deleted row
//! becomes reusable. Versions are collected in commit order, so the one collected is always
//! the oldest of its chain.
//!
//! Not implemented here: the read-set validation that makes SERIALIZABLE serializable lives
//! in `txn`, which keeps the transactions' reads and the committed writes.

use super::index::{encode_key, KeyBuf};
use super::table::TableStore;
use super::RowId;
use crate::error::{Error, Result};
use crate::types::Value;

/// A commit timestamp or, at or above [`TXN_ID_BASE`], the id of a running transaction.
pub type Ts = u64;

/// Timestamps at or above this are transaction ids: the change is not committed.
pub const TXN_ID_BASE: Ts = 1 << 63;

pub(crate) const NO_VERSION: u32 = u32::MAX;

/// `Version::older` of a detached version (see [`TxnView::detached`]): not in its row's chain.
pub(crate) const DETACHED: u32 = u32::MAX - 1;

/// What a transaction sees: its own changes, and every change committed at or before `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnView {
    pub id: Ts,
    pub start: Ts,
    /// The transaction's versions are detached: kept as its undo only, not linked into their
    /// rows' chains (see [`TxnView::detached`]).
    pub detached: bool,
}

impl TxnView {
    /// A transaction whose versions join their rows' chains, where other transactions find
    /// them.
    pub fn new(id: Ts, start: Ts) -> TxnView {
        TxnView { id, start, detached: false }
    }

    /// A transaction that runs alone on its partition from its first change to its commit (a
    /// one-job transaction, HyPer's serial execution): no other transaction reads or writes
    /// the partition meanwhile, so none needs its uncommitted changes in the version chains.
    /// Its versions are its undo only. At commit they are dropped if nobody may need the
    /// state before the commit (no older registered snapshot, no SERIALIZABLE validation, no
    /// redo record waiting to be durable), and otherwise linked into their chains then, as if
    /// they had been all along ([`TableStore::attach_version`]). This saves, per change, the
    /// chain's bookkeeping and its collection right after the commit, and keeps the chains
    /// empty, which is what readers check first.
    ///
    /// An update that changes an index key moves the row's entry at once (the old key's entry
    /// is removed, to be restored by rollback or attaching) instead of keeping both: readers
    /// trust the entries of rows without versions.
    pub fn detached(id: Ts, start: Ts) -> TxnView {
        TxnView { id, start, detached: true }
    }

    /// The view of a reader that is no transaction: everything committed so far.
    pub fn committed() -> TxnView {
        TxnView::new(0, TXN_ID_BASE - 1)
    }

    #[inline]
    pub fn sees(&self, ts: Ts) -> bool {
        ts == self.id || (ts < TXN_ID_BASE && ts <= self.start)
    }
}

/// The before-image of a change.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// The row did not exist before.
    Inserted,
    /// The row existed (its values are still in its slot).
    Deleted,
    /// Columns had these values.
    Updated { before: Vec<(usize, Value)> },
    /// SELECT … FOR UPDATE/SHARE: nothing changed, but the row is claimed.
    Locked,
}

#[derive(Clone, Debug)]
pub struct Version {
    pub ts: Ts,
    pub row: RowId,
    pub(crate) older: u32,
    pub change: Change,
}

/// The version of a row a reader sees.
#[derive(Debug, PartialEq)]
pub enum RowVersion {
    /// The row as stored.
    Current,
    /// An older state, reconstructed.
    Old(Vec<Value>),
}

/// The 40001 of a write that meets a version it does not see; if that version is not
/// committed, the error names its transaction (the writer may wait for it and retry).
pub fn conflict(version: &Version) -> Error {
    let what = if matches!(version.change, Change::Deleted) { "delete" } else { "update" };
    let mut e = Error::serialization(format!("could not serialize access due to concurrent {what}"));
    if version.ts >= TXN_ID_BASE {
        e.blocked_by = Some(version.ts);
    }
    e
}

impl TableStore {
    pub(crate) fn version(&self, idx: u32) -> &Version {
        self.versions[idx as usize].as_ref().expect("a linked version exists")
    }

    /// Whether a change of `row` by the transaction of `view` is kept detached (see
    /// [`TxnView::detached`]): the transaction runs detached and the row has no versions. A
    /// row with versions (committed ones kept for older readers or a pending redo record)
    /// gets its change linked, since the collection of those versions reconstructs every
    /// newer state from the chain.
    #[inline]
    pub(crate) fn detaches(&self, row: RowId, view: &TxnView) -> bool {
        view.detached && !self.heads.contains_key(&row)
    }

    /// Records a change of `row` by the transaction of `view` as a version: at the head of
    /// the row's chain, or detached (`detached`, which [`detaches`](Self::detaches) decided).
    pub(crate) fn push_version(&mut self, row: RowId, view: &TxnView, change: Change, detached: bool) -> u32 {
        let older = if detached { DETACHED } else { self.heads.get(&row).copied().unwrap_or(NO_VERSION) };
        let version = Version { ts: view.id, row, older, change };
        let idx = match self.free_versions.pop() {
            Some(i) => {
                self.versions[i as usize] = Some(version);
                i
            }
            None => {
                self.versions.push(Some(version));
                (self.versions.len() - 1) as u32
            }
        };
        if !detached {
            self.heads.insert(row, idx);
        }
        idx
    }

    /// Whether version `idx` is detached (see [`TxnView::detached`]).
    pub fn is_detached(&self, idx: u32) -> bool {
        self.versions[idx as usize].as_ref().is_some_and(|v| v.older == DETACHED)
    }

    /// Links a detached version into its row's chain, as its newest version: a transaction
    /// that ran detached attaches its versions, oldest first, when someone may need the
    /// states before its commit. An update that moved an index entry puts the old key's entry
    /// back, as a linked update keeps it.
    pub fn attach_version(&mut self, idx: u32) {
        let Some(v) = self.versions[idx as usize].as_mut() else { return };
        if v.older != DETACHED {
            return;
        }
        let row = v.row;
        v.older = self.heads.get(&row).copied().unwrap_or(NO_VERSION);
        self.heads.insert(row, idx);
        if let Some(moved) = self.moved_keys.remove(&idx) {
            for (position, old, _) in moved {
                self.indexes[position].insert(&old, row);
            }
        }
    }

    /// Drops a detached version of a committed transaction that nobody can need: nobody may
    /// see the state before it. A deleted row's entries go and its slot becomes reusable.
    pub fn forget_version(&mut self, idx: u32) {
        let Some(v) = self.versions[idx as usize].take() else { return };
        debug_assert_eq!(v.older, DETACHED, "only a detached version is forgotten");
        self.free_versions.push(idx);
        match v.change {
            Change::Inserted | Change::Locked => {}
            Change::Deleted => {
                for position in 0..self.indexes.len() {
                    let (key, _) = self.key_of(position, v.row);
                    self.indexes[position].remove(&key, v.row);
                }
                self.free.push(v.row);
            }
            Change::Updated { .. } => {
                self.moved_keys.remove(&idx);
            }
        }
    }

    /// The newest version's timestamp and change, if the row has versions.
    pub fn head(&self, row: RowId) -> Option<&Version> {
        self.heads.get(&row).map(|&h| self.version(h))
    }

    /// The version of `row` that `view` sees, or `None` if the row does not exist for it.
    pub fn visible(&self, row: RowId, view: &TxnView) -> Option<RowVersion> {
        self.visible_versioned(row, view).0
    }

    /// [`visible`](Self::visible), and whether the row has versions at all (an index entry
    /// that reached it may then be one an older version keeps): one lookup of the row's
    /// newest version for both.
    #[inline]
    pub fn visible_versioned(&self, row: RowId, view: &TxnView) -> (Option<RowVersion>, bool) {
        let deleted = !self.is_live(row);
        let Some(&head) = self.heads.get(&row) else {
            return ((!deleted).then_some(RowVersion::Current), false);
        };
        (self.visible_from(row, head, deleted, view), true)
    }

    fn visible_from(&self, row: RowId, head: u32, deleted: bool, view: &TxnView) -> Option<RowVersion> {
        let mut exists = !deleted;
        let mut values: Option<Vec<Value>> = None;
        let mut idx = head;
        while idx != NO_VERSION {
            let v = self.version(idx);
            if view.sees(v.ts) {
                break;
            }
            match &v.change {
                Change::Inserted => exists = false,
                Change::Deleted => exists = true,
                Change::Updated { before, .. } => {
                    let vals = values.get_or_insert_with(|| self.row_values(row));
                    for (c, val) in before {
                        vals[*c] = val.clone();
                    }
                }
                Change::Locked => {}
            }
            idx = v.older;
        }
        if !exists {
            return None;
        }
        Some(values.map_or(RowVersion::Current, RowVersion::Old))
    }

    /// The values of the version `view` sees.
    pub fn visible_values(&self, row: RowId, view: &TxnView) -> Option<Vec<Value>> {
        self.visible(row, view).map(|v| match v {
            RowVersion::Current => self.row_values(row),
            RowVersion::Old(values) => values,
        })
    }

    /// Whether `view` may change `row`: it must see the row's newest version.
    pub fn check_writable(&self, row: RowId, view: &TxnView) -> Result<()> {
        match self.head(row) {
            Some(v) if !view.sees(v.ts) => Err(conflict(v)),
            _ => Ok(()),
        }
    }

    pub fn commit_version(&mut self, idx: u32, ts: Ts) {
        if let Some(v) = self.versions[idx as usize].as_mut() {
            v.ts = ts;
        }
    }

    /// Undoes the newest version of its row and drops it.
    pub fn rollback_version(&mut self, idx: u32) -> Result<()> {
        let Some(version) = self.versions[idx as usize].take() else { return Ok(()) };
        self.free_versions.push(idx);
        let row = version.row;
        let detached = version.older == DETACHED;
        if !detached {
            debug_assert_eq!(self.heads.get(&row), Some(&idx), "rollback of a version that is not its row's newest");
            self.unlink_head(row, version.older);
        }
        match version.change {
            Change::Inserted => {
                for position in 0..self.indexes.len() {
                    let (key, _) = self.key_of(position, row);
                    self.indexes[position].remove(&key, row);
                }
                self.set_deleted(row, true);
                self.stats.live_rows -= 1;
                self.free.push(row);
            }
            Change::Deleted => {
                self.set_deleted(row, false);
                self.stats.live_rows += 1;
            }
            Change::Updated { before } if detached => {
                // The entries this update moved go back to their old keys.
                for (position, old, added) in self.moved_keys.remove(&idx).unwrap_or_default() {
                    if let Some(new) = added {
                        self.indexes[position].remove(&new, row);
                    }
                    self.indexes[position].insert(&old, row);
                }
                self.write_values(row, &before);
            }
            Change::Updated { before } => {
                let added = self.keys_added(row, version.older, &before);
                self.write_values(row, &before);
                for (position, key) in added {
                    self.indexes[position].remove(&key, row);
                }
            }
            Change::Locked => {}
        }
        Ok(())
    }

    fn unlink_head(&mut self, row: RowId, older: u32) {
        if older == NO_VERSION {
            self.heads.remove(&row);
        } else {
            self.heads.insert(row, older);
        }
    }

    /// Drops a committed version that is the oldest of its chain and that no reader needs any
    /// more: index entries only the state before it had are removed, and a deleted row's
    /// slot becomes reusable.
    pub fn collect_version(&mut self, idx: u32) {
        let Some(v) = self.versions[idx as usize].as_ref() else { return };
        let row = v.row;
        debug_assert!(v.older == NO_VERSION, "collecting a version that is not the oldest of its chain");
        // The chain from the newest version down to the one being collected.
        let mut chain = Vec::new();
        let mut cur = self.heads.get(&row).copied().unwrap_or(NO_VERSION);
        while cur != NO_VERSION && cur != idx {
            chain.push(cur);
            cur = self.version(cur).older;
        }
        if cur != idx {
            return;
        }
        // The version goes: its before-image is moved out, not copied.
        let Some(Version { change, .. }) = self.versions[idx as usize].take() else { return };
        match change {
            Change::Inserted | Change::Locked => {}
            Change::Deleted => {
                for position in 0..self.indexes.len() {
                    let (key, _) = self.key_of(position, row);
                    self.indexes[position].remove(&key, row);
                }
                self.free.push(row);
            }
            Change::Updated { before, .. } => self.drop_stale_keys(row, &chain, &before),
        }
        self.free_versions.push(idx);
        match chain.last() {
            Some(&newer) => {
                if let Some(n) = self.versions[newer as usize].as_mut() {
                    n.older = NO_VERSION;
                }
            }
            None => {
                self.heads.remove(&row);
            }
        }
    }

    /// The index entries the newest update of `row` (whose before-image is `before`, and whose
    /// next older version is `older`) added: each key of the row's current state, in an index
    /// on a column the update changed, that no older state of the row still held has. Those
    /// are exactly the entries the update inserted, since every state some transaction may
    /// see has its entries. Told from the versions rather than recorded by the update, so it
    /// stays right when the table's indexes change under an open transaction (CREATE INDEX,
    /// DROP INDEX and ADD PRIMARY KEY renumber them).
    fn keys_added(&self, row: RowId, older: u32, before: &[(usize, Value)]) -> Vec<(usize, KeyBuf)> {
        let touched: Vec<usize> = (0..self.indexes.len())
            .filter(|&p| self.def.indexes[p].columns.iter().any(|c| before.iter().any(|(b, _)| b == c)))
            .collect();
        if touched.is_empty() {
            return Vec::new();
        }
        let mut state = self.row_values(row);
        let newest: Vec<KeyBuf> = touched.iter().map(|&p| key_from(&self.def.indexes[p].columns, &state)).collect();
        let mut held: Vec<Vec<KeyBuf>> = vec![Vec::new(); touched.len()];
        let mut apply = |state: &mut Vec<Value>, before: &[(usize, Value)]| {
            for (c, val) in before {
                if let Some(slot) = state.get_mut(*c) {
                    *slot = val.clone();
                }
            }
            for (h, &p) in held.iter_mut().zip(&touched) {
                h.push(key_from(&self.def.indexes[p].columns, state));
            }
        };
        apply(&mut state, before);
        let mut cur = older;
        while cur != NO_VERSION {
            let v = self.version(cur);
            if let Change::Updated { before } = &v.change {
                apply(&mut state, before);
            }
            cur = v.older;
        }
        touched.into_iter().zip(newest).zip(&held).filter(|((_, key), h)| !h.contains(key)).map(|((p, key), _)| (p, key)).collect()
    }

    /// Removes the index entries of the state before an update that no later state shares.
    fn drop_stale_keys(&mut self, row: RowId, newer: &[u32], before: &[(usize, Value)]) {
        let touched: Vec<usize> = (0..self.indexes.len())
            .filter(|&p| self.def.indexes[p].columns.iter().any(|c| before.iter().any(|(b, _)| b == c)))
            .collect();
        if touched.is_empty() {
            return;
        }
        // Every state from now back to the one right after the collected update.
        let mut state = self.row_values(row);
        let mut kept: Vec<Vec<KeyBuf>> = touched.iter().map(|&p| vec![key_from(&self.def.indexes[p].columns, &state)]).collect();
        for &i in newer {
            if let Change::Updated { before, .. } = &self.version(i).change {
                for (c, val) in before {
                    state[*c] = val.clone();
                }
            }
            for (k, &p) in kept.iter_mut().zip(&touched) {
                k.push(key_from(&self.def.indexes[p].columns, &state));
            }
        }
        for (c, val) in before {
            state[*c] = val.clone();
        }
        for (k, &p) in kept.iter().zip(&touched) {
            let old = key_from(&self.def.indexes[p].columns, &state);
            if !k.contains(&old) {
                self.indexes[p].remove(&old, row);
            }
        }
    }

    /// Number of versions held (for tests and monitoring).
    pub fn version_count(&self) -> usize {
        self.versions.len() - self.free_versions.len()
    }
}

fn key_from(columns: &[usize], values: &[Value]) -> KeyBuf {
    let mut key = KeyBuf::new();
    encode_key(columns.iter().map(|&c| &values[c]), &mut key);
    key
}
