//! A session's transaction block: BEGIN … COMMIT/ROLLBACK, savepoints, the failed state.
//!
//! Outside a block every statement is its own transaction (autocommit). Inside one, the
//! session holds a [`SessionTxn`]; its snapshot is taken at the first statement after BEGIN
//! (as PostgreSQL does), registered with the engine until the block ends, and each statement
//! runs on the executors as part of the transaction. After an error the block is failed:
//! every statement but ROLLBACK (or ROLLBACK TO SAVEPOINT) is refused with 25P02.

use std::sync::Arc;

use freshet_core::engine::{Engine, Savepoint, TxnCtx};
use freshet_core::sequence::SequenceDef;
use freshet_core::storage::{DbSnapshot, Ts};
use freshet_core::txn::Isolation;
use freshet_core::{Error, Result, SqlState};
use sqlparser::ast;

use crate::result::StatementResult;
use crate::sequences::SessionSequences;

/// What a savepoint marks besides the engine's changes: how many of the block's view changes
/// and sequence restarts preceded it, and where the session's notifications and
/// transaction-level advisory locks stood.
#[derive(Clone, Copy, Debug, Default)]
pub struct BlockMark {
    pub views: usize,
    pub restarts: usize,
    pub(crate) session: crate::sequences::SessionMark,
    /// `cursor::Cursors::mark`: cursors declared after the savepoint close at ROLLBACK TO.
    pub(crate) cursors: u64,
}

/// The transaction block of a session.
#[derive(Debug)]
pub struct SessionTxn {
    pub id: Ts,
    pub isolation: Isolation,
    pub read_only: bool,
    /// The registered snapshot (REPEATABLE READ, SERIALIZABLE), taken at the first statement.
    pub start: Option<Ts>,
    /// Whether a statement has run (SET TRANSACTION must come before).
    pub started: bool,
    pub failed: bool,
    /// Savepoints: name and how many changes the transaction had made when it was set.
    pub savepoints: Vec<(String, Savepoint)>,
    /// Whether a statement that may write has run.
    pub wrote: bool,
    /// The snapshot of every table, as this transaction sees them, that its analytical
    /// queries read until it writes (REPEATABLE READ and SERIALIZABLE: the view does not
    /// change between statements, so one snapshot serves the whole block).
    pub pinned: parking_lot::Mutex<Option<Arc<DbSnapshot>>>,
    /// When the block began (microseconds since 1970): what `now()` and CURRENT_TIMESTAMP
    /// give in every statement of the block, as in PostgreSQL.
    pub began_at: i64,
    /// The CREATE VIEW and DROP VIEW this block has run: its own statements see them, COMMIT
    /// applies them, ROLLBACK forgets them (`views`).
    pub views: Vec<crate::views::ViewChange>,
    /// For each savepoint, in order, how many of `views` and of `restarts` preceded it.
    pub marks: Vec<BlockMark>,
    /// The position each sequence had before a TRUNCATE … RESTART IDENTITY of this block
    /// restarted it, in order: [`rollback`] and a [`commit`] that does not commit put them
    /// back, newest first, as ROLLBACK TO does those after its savepoint
    /// ([`Self::undo_restarts`]).
    pub restarts: Vec<(Arc<SequenceDef>, (i64, bool))>,
    /// Counts changes of `views`: part of the version of the catalog the block sees.
    pub view_epoch: u64,
}

impl SessionTxn {
    pub fn new(engine: &Engine, isolation: Isolation, read_only: bool) -> Self {
        SessionTxn {
            id: engine.registry().new_txn_id(),
            isolation,
            read_only,
            start: None,
            started: false,
            failed: false,
            savepoints: Vec::new(),
            wrote: false,
            pinned: parking_lot::Mutex::new(None),
            began_at: crate::session::now_micros(),
            views: Vec::new(),
            marks: Vec::new(),
            restarts: Vec::new(),
            view_epoch: 0,
        }
    }

    /// Puts back the sequences restarted after the first `keep` restarts (newest first, so a
    /// sequence restarted twice ends where it was before the first); the records are logged
    /// through `sequences`.
    pub fn undo_restarts(&mut self, keep: usize, sequences: &SessionSequences) -> Result<()> {
        for (seq, (last, called)) in self.restarts.split_off(keep.min(self.restarts.len())).into_iter().rev() {
            sequences.put_back(&seq, last, called)?;
        }
        Ok(())
    }

    /// The context of the next statement; takes the snapshot on the first one.
    pub fn statement_ctx(&mut self, engine: &Engine) -> TxnCtx {
        if !self.started {
            engine.txn_began(self.id);
            if self.isolation == Isolation::Serializable {
                engine.registry().begin_serializable();
            }
        }
        self.started = true;
        let start = match self.isolation {
            Isolation::ReadCommitted => engine.registry().now(),
            _ => *self.start.get_or_insert_with(|| engine.registry().begin_snapshot()),
        };
        TxnCtx { id: self.id, start, isolation: self.isolation }
    }

    /// Ends the block on the engine's side: the snapshot is no longer needed.
    pub fn release(&mut self, engine: &Engine) {
        if self.started && self.isolation == Isolation::Serializable {
            engine.registry().end_serializable();
            self.started = false;
        }
        if let Some(start) = self.start.take() {
            engine.release_snapshot(start);
        }
    }
}

/// The transaction modes of BEGIN / START TRANSACTION / SET TRANSACTION.
pub fn modes(modes: &[ast::TransactionMode]) -> (Option<Isolation>, Option<bool>) {
    let mut isolation = None;
    let mut read_only = None;
    for m in modes {
        match m {
            ast::TransactionMode::IsolationLevel(level) => {
                isolation = Some(match level {
                    ast::TransactionIsolationLevel::ReadUncommitted | ast::TransactionIsolationLevel::ReadCommitted => {
                        Isolation::ReadCommitted
                    }
                    ast::TransactionIsolationLevel::RepeatableRead => Isolation::RepeatableRead,
                    _ => Isolation::Serializable,
                })
            }
            ast::TransactionMode::AccessMode(ast::TransactionAccessMode::ReadOnly) => read_only = Some(true),
            ast::TransactionMode::AccessMode(ast::TransactionAccessMode::ReadWrite) => read_only = Some(false),
        }
    }
    (isolation, read_only)
}

pub fn aborted_error() -> Error {
    Error::new(SqlState::InFailedSqlTransaction, "current transaction is aborted, commands ignored until end of transaction block")
}

pub fn read_only_error(what: &str) -> Error {
    Error::new(SqlState::ReadOnlySqlTransaction, format!("cannot execute {what} in a read-only transaction"))
}

/// Commits (or, for a failed block, rolls back) a block; the block is over either way.
/// Sets a savepoint of the block (SAVEPOINT, or a PL/pgSQL block with an EXCEPTION section).
pub async fn savepoint(engine: &Engine, txn: &mut SessionTxn) -> Result<Savepoint> {
    txn.started = true;
    engine.savepoint(txn.id).await
}

/// Undoes the block's changes after `mark` and clears its failed state (ROLLBACK TO, or a
/// PL/pgSQL handler that caught an error).
pub async fn rollback_to(engine: &Engine, txn: &mut SessionTxn, mark: &Savepoint) -> Result<()> {
    engine.rollback_to(txn.id, mark).await?;
    txn.failed = false;
    Ok(())
}

/// A block that does not commit (failed, or its commit fails) puts back the sequences it
/// restarted (`sequences`), as [`rollback`] does.
pub async fn commit(engine: &Arc<Engine>, mut txn: SessionTxn, sync: bool, sequences: &SessionSequences) -> Result<StatementResult> {
    let failed = txn.failed;
    let result = if failed {
        engine.rollback(txn.id).await.map(|_| StatementResult::command("ROLLBACK"))
    } else if txn.started {
        let ctx = TxnCtx { id: txn.id, start: txn.start.unwrap_or(0), isolation: txn.isolation };
        engine.commit(ctx, sync).await.map(|_| StatementResult::command("COMMIT"))
    } else {
        Ok(StatementResult::command("COMMIT"))
    };
    txn.release(engine);
    if failed || result.is_err() {
        txn.undo_restarts(0, sequences)?;
    }
    result
}

/// Rolls a block back, with the sequences it restarted.
pub async fn rollback(engine: &Arc<Engine>, mut txn: SessionTxn, sequences: &SessionSequences) -> Result<StatementResult> {
    txn.undo_restarts(0, sequences)?;
    let result = engine.rollback(txn.id).await.map(|_| StatementResult::command("ROLLBACK"));
    txn.release(engine);
    result
}

pub fn no_savepoint(name: &str) -> Error {
    Error::new(SqlState::InvalidSavepointSpecification, format!("savepoint \"{name}\" does not exist"))
}
