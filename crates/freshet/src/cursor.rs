//! SQL cursors: `DECLARE name [NO SCROLL | SCROLL] CURSOR [WITH HOLD | WITHOUT HOLD] FOR
//! query`, `FETCH`, `MOVE` and `CLOSE`, as PostgreSQL has them (psql's `FETCH_COUNT`, the
//! named cursors of Python drivers).
//!
//! DECLARE runs the query as the statement it is and keeps its rows' stream: the short path's
//! rows as they came, an analytical query's batches as the stream gives them, read on
//! demand from the snapshot it took when it started, so a cursor sees the data as it was at
//! DECLARE whatever the session changes later (PostgreSQL's cursors are insensitive too).
//! FETCH and MOVE move along it. Rows stay in the batches they came in: a FETCH forward
//! answers with slices of those batches (an analytical query's Arrow batches reach the wire
//! without being turned into values), and only a row fetched alone — backward, ABSOLUTE,
//! RELATIVE — is converted.
//!
//! Invariants:
//! - `pos` is 0 before the first row, `k` on row `k`, and `taken + 1` after the last row; the
//!   last only once the stream has ended (`rows` is `None`), so that `taken` is then the
//!   number of rows.
//! - `pieces` holds the rows taken from the stream in order, each piece with the number of
//!   its first row; the last piece ends at row `taken`. A scrollable cursor keeps every
//!   piece; one declared NO SCROLL drops each piece once its position has passed the piece's
//!   last row, and refuses to go back (55000, as PostgreSQL does for a plan that cannot scan
//!   backward). A cursor declared with neither is scrollable unless its query locks rows:
//!   PostgreSQL's plans mostly scan backward.
//! - A cursor lives until CLOSE, the end of the transaction block it was declared in, or —
//!   WITH HOLD — the end of the session. A holdable cursor reads its remaining rows into
//!   memory at the COMMIT that makes it outlive its block (outside a block: at DECLARE), as
//!   PostgreSQL materializes one; a ROLLBACK drops every cursor its block declared, and a
//!   ROLLBACK TO those declared after the savepoint.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use freshet_core::error::{Error, Result, SqlState};
use freshet_core::sql::parse::{FetchDirection, FetchStatement};
use freshet_core::types::Value;

use crate::result::{batch_rows, ColumnInfo, Output, RowBatch, RowStream, StatementResult};
use crate::session::{Prepared, Session};

/// A planned `DECLARE … CURSOR`.
pub(crate) struct DeclareCursor {
    pub name: String,
    /// The cursor's query, planned as a statement of its own.
    pub query: Arc<Prepared>,
    pub scroll: bool,
    pub hold: bool,
}

/// An open cursor (see the module documentation).
pub(crate) struct Cursor {
    pub columns: Arc<Vec<ColumnInfo>>,
    scroll: bool,
    hold: bool,
    /// Declared in the open transaction block: a ROLLBACK drops it, WITH HOLD or not.
    uncommitted: bool,
    /// Its number among the session's declarations (a ROLLBACK TO drops those numbered after
    /// the savepoint's).
    number: u64,
    /// The query's rows not yet taken; `None` once they ended.
    rows: Option<RowStream>,
    /// Rows taken from the stream, with the number (from 1) of each piece's first row.
    pieces: VecDeque<(u64, RowBatch)>,
    /// Rows taken from the stream so far.
    taken: u64,
    pos: u64,
}

/// What a FETCH returns, gathered as batches: slices of the cursor's pieces, and rows taken
/// one at a time; for MOVE (`keep` false) only their number.
struct Fetched {
    keep: bool,
    batches: Vec<RowBatch>,
    rows: u64,
}

impl Fetched {
    /// Rows `offset..offset + len` of a piece.
    fn slice(&mut self, piece: &RowBatch, offset: usize, len: usize) {
        self.rows += len as u64;
        if self.keep {
            self.batches.push(match piece {
                RowBatch::Values(rows) => RowBatch::Values(rows[offset..offset + len].to_vec()),
                RowBatch::Arrow(b) => RowBatch::Arrow(b.slice(offset, len)),
            });
        }
    }

    fn row(&mut self, row: Vec<Value>) {
        self.rows += 1;
        if !self.keep {
            return;
        }
        match self.batches.last_mut() {
            Some(RowBatch::Values(rows)) => rows.push(row),
            _ => self.batches.push(RowBatch::Values(vec![row])),
        }
    }
}

/// The cursors of a session.
#[derive(Default)]
pub(crate) struct Cursors {
    open: HashMap<String, Cursor>,
    declared: u64,
}

impl Cursors {
    /// The number the next cursor declared will have (a savepoint's mark).
    pub fn mark(&self) -> u64 {
        self.declared
    }

    pub fn columns(&self, name: &str) -> Result<Arc<Vec<ColumnInfo>>> {
        self.open.get(name).map(|c| c.columns.clone()).ok_or_else(|| no_cursor(name))
    }

    /// Before the COMMIT of a block: the cursors it declared WITH HOLD read their remaining
    /// rows, which they keep after it (an error here fails the COMMIT).
    pub async fn before_commit(&mut self) -> Result<()> {
        for cursor in self.open.values_mut().filter(|c| c.uncommitted && c.hold) {
            cursor.read_to_end().await?;
        }
        Ok(())
    }

    /// A transaction block ended. Committed: the cursors it declared WITH HOLD now belong to
    /// the session and the others close. Rolled back: every cursor it declared closes.
    pub fn block_ended(&mut self, committed: bool) {
        self.open.retain(|_, c| !c.uncommitted || (committed && c.hold));
        for cursor in self.open.values_mut() {
            cursor.uncommitted = false;
        }
    }

    /// The block rolled back to a savepoint whose [`mark`](Self::mark) was `mark`: cursors
    /// declared since close.
    pub fn rolled_back_to(&mut self, mark: u64) {
        self.open.retain(|_, c| !c.uncommitted || c.number < mark);
    }

    /// DISCARD ALL.
    pub fn clear(&mut self) {
        self.open.clear();
    }
}

/// A PL/pgSQL cursor variable's cursor still open when its routine returned: it stays open as
/// the SQL cursor of that name (the variable's value, which the routine may return) until the
/// transaction block ends, as PostgreSQL's portals do, and the client FETCHes on from where
/// the routine left it.
pub(crate) struct Portal {
    pub name: String,
    pub columns: Arc<Vec<ColumnInfo>>,
    /// All the query's rows, read when the routine opened it.
    pub rows: Vec<Vec<Value>>,
    /// Its position, as a [`Cursor`]'s.
    pub pos: u64,
    pub scroll: bool,
}

fn no_cursor(name: &str) -> Error {
    Error::new(SqlState::InvalidCursorName, format!("cursor \"{name}\" does not exist"))
}

pub(crate) fn only_forward() -> Error {
    Error::new(SqlState::ObjectNotInPrerequisiteState, "cursor can only scan forward").with_hint("Declare it with SCROLL option to enable backward scan.")
}

/// Whether going `direction` from position `pos` (on a row or not) goes back, which a NO
/// SCROLL cursor cannot.
pub(crate) fn goes_back(pos: u64, on_row: bool, direction: FetchDirection) -> bool {
    match direction {
        FetchDirection::Forward(_) => false,
        FetchDirection::Backward(_) => true,
        FetchDirection::Absolute(k) => k < 0 || (k == 0 && pos > 0) || (k > 0 && k as u64 <= pos),
        FetchDirection::Relative(k) => k < 0 || (k == 0 && on_row),
    }
}

/// Where FETCH or MOVE `direction` takes a cursor at `pos` over `len` rows held in memory
/// (positions as in [`Cursor`]), and how many rows it passes over; a FETCH of one row
/// returns the row at the new position if it passed one. The same moves as
/// [`Cursor::fetch`]'s (PL/pgSQL's cursor variables move this way).
pub(crate) fn step(pos: u64, len: u64, direction: FetchDirection) -> (u64, u64) {
    match direction {
        FetchDirection::Forward(n) => {
            let left = len.saturating_sub(pos);
            if n <= left { (pos + n, n) } else { (len + 1, left) }
        }
        FetchDirection::Backward(n) => {
            let left = pos.saturating_sub(1).min(len);
            if n <= left { (pos.min(len + 1) - n, n) } else { (0, left) }
        }
        FetchDirection::Absolute(0) => (0, 0),
        FetchDirection::Relative(0) => (pos, u64::from(pos >= 1 && pos <= len)),
        FetchDirection::Absolute(k) | FetchDirection::Relative(k) => {
            let target = match direction {
                FetchDirection::Absolute(k) if k < 0 => len as i64 + 1 + k,
                FetchDirection::Relative(_) => pos as i64 + k,
                _ => k,
            };
            if target < 1 {
                (0, 0)
            } else if target as u64 > len {
                (len + 1, 0)
            } else {
                (target as u64, 1)
            }
        }
    }
}

impl Cursor {
    /// Moves the stream's next batch to `pieces`: false once the stream has ended (it is
    /// dropped then, and with it the snapshot it read).
    async fn take_batch(&mut self) -> Result<bool> {
        let Some(stream) = &mut self.rows else { return Ok(false) };
        match stream.next().await {
            None => {
                self.rows = None;
                Ok(false)
            }
            Some(batch) => {
                let batch = batch?;
                let n = batch.num_rows() as u64;
                if n > 0 {
                    self.pieces.push_back((self.taken + 1, batch));
                    self.taken += n;
                }
                Ok(true)
            }
        }
    }

    /// Takes every remaining row of the stream into memory.
    async fn read_to_end(&mut self) -> Result<()> {
        while self.take_batch().await? {}
        Ok(())
    }

    /// The piece holding row `k` (from 1) and the row's offset in it, reading on to it;
    /// `None` past the last row. Row `k` must not have been dropped (see the invariants).
    async fn locate(&mut self, k: u64) -> Result<Option<(usize, usize)>> {
        while self.taken < k {
            if !self.take_batch().await? {
                return Ok(None);
            }
        }
        let i = self.pieces.partition_point(|(first, _)| *first <= k);
        let Some(i) = i.checked_sub(1) else { return Err(Error::internal("a cursor's row was dropped")) };
        Ok(Some((i, (k - self.pieces[i].0) as usize)))
    }

    /// Row `k` (from 1) as values.
    async fn row(&mut self, k: u64) -> Result<Option<Vec<Value>>> {
        let Some((i, offset)) = self.locate(k).await? else { return Ok(None) };
        Ok(Some(match &self.pieces[i].1 {
            RowBatch::Values(rows) => rows[offset].clone(),
            RowBatch::Arrow(b) => batch_rows(&b.slice(offset, 1), &self.columns).pop().unwrap_or_default(),
        }))
    }

    /// The number of rows (reading them all).
    async fn count(&mut self) -> Result<u64> {
        self.read_to_end().await?;
        Ok(self.taken)
    }

    fn on_row(&self) -> bool {
        self.pos >= 1 && self.pos <= self.taken
    }

    fn goes_back(&self, direction: FetchDirection) -> bool {
        goes_back(self.pos, self.on_row(), direction)
    }

    /// Moves forward over up to `count` rows: the rows passed over as slices of the pieces.
    async fn forward(&mut self, count: u64, out: &mut Fetched) -> Result<()> {
        let mut left = count;
        while left > 0 {
            let Some((i, offset)) = self.locate(self.pos + 1).await? else {
                self.pos = self.taken + 1;
                break;
            };
            let piece = &self.pieces[i].1;
            let len = (piece.num_rows() - offset).min(usize::try_from(left).unwrap_or(usize::MAX));
            out.slice(piece, offset, len);
            self.pos += len as u64;
            left -= len as u64;
        }
        Ok(())
    }

    /// Moves the cursor as FETCH or MOVE does: the rows passed over (FETCH's, in the order
    /// it returns them; with `keep` false they are only counted, for MOVE).
    async fn fetch(&mut self, direction: FetchDirection, keep: bool) -> Result<Fetched> {
        if !self.scroll && self.goes_back(direction) {
            return Err(only_forward());
        }
        let mut out = Fetched { keep, batches: Vec::new(), rows: 0 };
        match direction {
            FetchDirection::Forward(count) => self.forward(count, &mut out).await?,
            FetchDirection::Backward(count) => {
                let mut left = count;
                while left > 0 {
                    if self.pos <= 1 {
                        self.pos = 0;
                        break;
                    }
                    self.pos -= 1;
                    if let Some(row) = self.row(self.pos).await? {
                        out.row(row);
                    }
                    left -= 1;
                }
            }
            FetchDirection::Absolute(0) => self.pos = 0,
            FetchDirection::Relative(0) => {
                if self.on_row()
                    && let Some(row) = self.row(self.pos).await?
                {
                    out.row(row);
                }
            }
            FetchDirection::Absolute(k) | FetchDirection::Relative(k) => {
                let target = match direction {
                    FetchDirection::Absolute(k) if k < 0 => self.count().await? as i64 + 1 + k,
                    FetchDirection::Relative(_) => self.pos as i64 + k,
                    _ => k,
                };
                if target < 1 {
                    self.pos = 0;
                } else {
                    match self.row(target as u64).await? {
                        Some(row) => {
                            self.pos = target as u64;
                            out.row(row);
                        }
                        None => self.pos = self.taken + 1,
                    }
                }
            }
        }
        if !self.scroll {
            // Rows at or before the position are never read again.
            while self.pieces.front().is_some_and(|(first, piece)| first + piece.num_rows() as u64 - 1 <= self.pos) {
                self.pieces.pop_front();
            }
        }
        Ok(out)
    }
}

impl Session {
    /// The columns of the open cursor `name` (a client may describe it as a portal).
    pub fn cursor_columns(&self, name: &str) -> Option<Arc<Vec<ColumnInfo>>> {
        self.cursors.columns(name).ok()
    }

    /// `DECLARE name CURSOR FOR query`: runs the query and keeps its rows as the cursor.
    pub(crate) async fn declare_cursor(&mut self, declare: &DeclareCursor, params: Vec<Value>) -> Result<StatementResult> {
        if self.cursors.open.contains_key(&declare.name) {
            return Err(Error::new(SqlState::DuplicateCursor, format!("cursor \"{}\" already exists", declare.name)));
        }
        let in_block = self.in_block();
        if !in_block && !declare.hold {
            return Err(Error::new(SqlState::NoActiveSqlTransaction, "DECLARE CURSOR can only be used in transaction blocks"));
        }
        self.cursor_query = true;
        let result = Box::pin(self.execute_planned_boxed(&declare.query, params)).await;
        self.cursor_query = false;
        let result = result?;
        let Output::Rows { columns, rows, .. } = result.output else { return Err(Error::internal("a cursor's query returned no rows")) };
        let mut cursor = Cursor {
            columns,
            scroll: declare.scroll,
            hold: declare.hold,
            uncommitted: in_block,
            number: self.cursors.declared,
            rows: Some(rows),
            pieces: VecDeque::new(),
            taken: 0,
            pos: 0,
        };
        self.cursors.declared += 1;
        if !in_block {
            cursor.read_to_end().await?;
        }
        self.cursors.open.insert(declare.name.clone(), cursor);
        Ok(StatementResult::command("DECLARE CURSOR").with_notices(result.notices))
    }

    /// Keeps the cursors a routine left open ([`Portal`]): inside a transaction block they
    /// become the block's (42P03 if a cursor of the same name is open); outside one the
    /// routine's statement has ended its transaction, and they close with it.
    pub(crate) fn keep_portals(&mut self, portals: Vec<Portal>) -> Result<()> {
        if !self.in_block() {
            return Ok(());
        }
        for portal in portals {
            if self.cursors.open.contains_key(&portal.name) {
                return Err(Error::new(SqlState::DuplicateCursor, format!("cursor \"{}\" already in use", portal.name)));
            }
            let taken = portal.rows.len() as u64;
            let pieces = if taken == 0 { VecDeque::new() } else { VecDeque::from([(1, RowBatch::Values(portal.rows))]) };
            let cursor = Cursor {
                columns: portal.columns,
                scroll: portal.scroll,
                hold: false,
                uncommitted: true,
                number: self.cursors.declared,
                rows: None,
                pieces,
                taken,
                pos: portal.pos.min(taken + 1),
            };
            self.cursors.declared += 1;
            self.cursors.open.insert(portal.name, cursor);
        }
        Ok(())
    }

    /// FETCH (rows of `columns`, the cursor's when the statement was planned) or MOVE.
    pub(crate) async fn fetch_cursor(&mut self, fetch: &FetchStatement, columns: Option<&Arc<Vec<ColumnInfo>>>) -> Result<StatementResult> {
        let timeout = self.settings().statement_timeout();
        let cursor = self.cursors.open.get_mut(&fetch.cursor).ok_or_else(|| no_cursor(&fetch.cursor))?;
        if columns.is_some_and(|c| *c != cursor.columns) {
            return Err(Error::new(SqlState::FeatureNotSupported, "cached plan must not change result type"));
        }
        // `statement_timeout` bounds this FETCH (the stream itself is not timed; see
        // `Session::cursor_query`). A FETCH stopped part-way leaves the cursor on the last
        // row it passed.
        let moved = cursor.fetch(fetch.direction, !fetch.move_only);
        let fetched = match timeout {
            None => moved.await?,
            Some(t) => tokio::time::timeout(t, moved)
                .await
                .map_err(|_| Error::new(SqlState::QueryCanceled, "canceling statement due to statement timeout"))??,
        };
        Ok(if fetch.move_only {
            StatementResult::command(format!("MOVE {}", fetched.rows))
        } else {
            StatementResult::returning("FETCH", cursor.columns.clone(), RowStream::from_row_batches(fetched.batches))
        })
    }

    /// `CLOSE name` or `CLOSE ALL` (`None`).
    pub(crate) fn close_cursor(&mut self, name: Option<&str>) -> Result<StatementResult> {
        match name {
            Some(name) => {
                self.cursors.open.remove(name).ok_or_else(|| no_cursor(name))?;
                Ok(StatementResult::command("CLOSE CURSOR"))
            }
            None => {
                self.cursors.clear();
                Ok(StatementResult::command("CLOSE CURSOR ALL"))
            }
        }
    }
}
