//! Running statements and ending transactions, on one partition or several.
//!
//! A statement outside a transaction block is a transaction of its own. On one partition it
//! starts, runs and commits inside one job; on several it runs as one quiesced step that
//! commits on all of them or on none. A statement of a transaction block runs on the
//! partitions it needs and leaves its changes uncommitted; if it fails on one partition of
//! several, its work is undone on all of them (so that a statement that waits for another
//! transaction can run again from the start). Commit validates and stamps on every partition
//! the transaction touched, quiesced when there are several.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{routing, Durable, Engine, OltpResult, TxnCtx};
use crate::catalog::TableDef;
use crate::error::{Error, Result, SqlState};
use crate::executor::{Partition, Reply};
use crate::sql::exec::{self, RecordChanges, RecordRead, SelectOutcome};
use crate::sql::expr::EvalContext;
use crate::sql::plan::{OltpPlan, OnConflict};
use crate::storage::{RangeTest, TableSnapshot, TableStore, Ts, TxnView};
use smallvec::SmallVec;
use crate::txn::{self, Isolation, LocalTxn, ReadPredicate, TxnRegistry};
use crate::types::Value;
use crate::wal::Wal;

/// What a savepoint remembers: how many versions the transaction had made on each partition.
pub type Savepoint = Vec<(usize, usize)>;

type StatementFn<R> = Arc<dyn Fn(&mut Partition, &mut LocalTxn) -> Result<R> + Send + Sync>;

/// Rows to insert on one partition, shared with the job that inserts them.
type Rows = Arc<Vec<Vec<Value>>>;

impl Engine {
    /// Runs a statement's job (or a commit's, or a rollback's) on partition `p`: on the
    /// calling thread when the executor is idle and the engine runs statements inline.
    fn call_statement<R, F>(&self, p: usize, f: F) -> Reply<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Partition) -> R + Send + 'static,
    {
        if self.config.inline_statements { self.executors[p].call_inline(f) } else { self.executors[p].call(f) }
    }

    fn touch(&self, id: Ts, parts: &[usize]) {
        let mask = parts.iter().fold(0u64, |m, p| m | 1 << p);
        *self.touched.lock().entry(id).or_default() |= mask;
    }

    /// The partitions a transaction touched, in order.
    fn touched(&self, id: Ts) -> Vec<usize> {
        self.partitions_of(self.touched.lock().get(&id).copied().unwrap_or(0))
    }

    fn partitions_of(&self, mask: u64) -> Vec<usize> {
        (0..self.executors.len()).filter(|p| mask >> p & 1 == 1).collect()
    }

    fn forget(&self, id: Ts) -> Vec<usize> {
        self.partitions_of(self.touched.lock().remove(&id).unwrap_or(0))
    }

    /// The partition that serves a read of a replicated table: one the transaction already
    /// uses, or the next in turn.
    fn reader(&self, txn: Option<&TxnCtx>) -> usize {
        let mask = txn.and_then(|t| self.touched.lock().get(&t.id).copied()).unwrap_or(0);
        if mask != 0 {
            return mask.trailing_zeros() as usize;
        }
        self.next_reader.fetch_add(1, Ordering::Relaxed) % self.executors.len()
    }

    /// Runs a statement on `parts` in `txn` (or as an autocommit statement, which commits and,
    /// with `sync`, returns only once its redo record is durable).
    async fn run_on<R: Send + 'static>(&self, parts: Vec<usize>, txn: Option<TxnCtx>, sync: bool, f: StatementFn<R>) -> Result<Vec<R>> {
        let registry = self.registry.clone();
        let wal = self.wal.get().cloned();
        let (results, token) = match (parts.as_slice(), txn) {
            ([p], _) => {
                let (r, token) = self
                    .call_statement(*p, move |part| match txn {
                        Some(ctx) => (statement(part, &ctx, |part, local| f(part, local)), None),
                        None => match autocommit(part, &registry, wal.as_ref(), sync, |part, local| f(part, local)) {
                            Ok((r, token)) => (Ok(r), token),
                            Err(e) => (Err(e), None),
                        },
                    })
                    .await?;
                (vec![r], token)
            }
            (_, Some(ctx)) => {
                let rs = self
                    .quiesced(&parts, move |part, step, first| {
                        let aborted = part.txns.check_aborted(ctx.id);
                        let mut local = take_local(part, &ctx);
                        let mark = local.versions.len();
                        let mut r = aborted.and_then(|_| f(part, &mut local));
                        step.report(r.is_ok());
                        if step.decide(first, || 0).is_none()
                            && let Err(e) = txn::rollback_versions(part, &mut local.versions, mark)
                        {
                            r = Err(e);
                        }
                        part.txns.local.insert(ctx.id, local);
                        r
                    })
                    .await?;
                (rs, None)
            }
            (_, None) => {
                let id = registry.new_txn_id();
                let (rs, step) = self
                    .quiesced_step(&parts, move |part, step, first| {
                        if first {
                            *step.start.lock() = registry.now();
                        }
                        step.meet();
                        let view = TxnView::new(id, *step.start.lock());
                        let mut local = LocalTxn::new(view, Isolation::RepeatableRead);
                        let r = f(part, &mut local);
                        finish_on_step(part, step, first, local, r.is_ok(), &registry, wal.as_ref(), sync).and(r)
                    })
                    .await?;
                (rs, step.take_durable())
            }
        };
        if let Some(ctx) = txn {
            self.touch(ctx.id, &parts);
        }
        let results = results.into_iter().collect::<Result<Vec<_>>>()?;
        self.wait_durable(token).await?;
        Ok(results)
    }

    /// Inserts rows that already have the table's column types: as one autocommit statement,
    /// or as a statement of `txn`.
    pub async fn insert_rows(&self, table: &Arc<TableDef>, rows: Vec<Vec<Value>>, txn: Option<TxnCtx>, sync: bool) -> Result<u64> {
        let id = table.id;
        let (parts, by_id) = self.rows_by_partition(table, rows);
        if parts.is_empty() {
            return Ok(0);
        }
        let f: StatementFn<u64> = Arc::new(move |p, local| {
            let rows = by_id.iter().find(|(part, _)| *part == p.id).map(|(_, r)| r.clone()).unwrap_or_default();
            exec::insert_rows(p.table_mut(id)?, &rows, local)
        });
        let counts = self.run_on(parts, txn, sync, f).await?;
        Ok(if table.partition_key.is_none() { counts.first().copied().unwrap_or(0) } else { counts.iter().sum() })
    }

    /// Inserts rows with `ON CONFLICT` (see [`exec::upsert_rows`]), as [`Self::insert_rows`]
    /// does; DO UPDATE's expressions take `params` and `now`. Returns how many rows were
    /// inserted or updated and (with `returning`) their new values.
    #[allow(clippy::too_many_arguments)]
    pub async fn upsert_rows(
        &self,
        table: &Arc<TableDef>,
        rows: Vec<Vec<Value>>,
        on: Arc<crate::sql::plan::OnConflict>,
        returning: bool,
        params: Vec<Value>,
        now: i64,
        txn: Option<TxnCtx>,
        sync: bool,
    ) -> Result<(u64, Vec<Vec<Value>>)> {
        let id = table.id;
        let (parts, by_id) = self.rows_by_partition(table, rows);
        if parts.is_empty() {
            return Ok((0, Vec::new()));
        }
        let params: Arc<[Value]> = params.into();
        let f: StatementFn<(u64, Vec<Vec<Value>>)> = Arc::new(move |p, local| {
            let rows = by_id.iter().find(|(part, _)| *part == p.id).map(|(_, r)| r.clone()).unwrap_or_default();
            exec::upsert_rows(p.table_mut(id)?, &rows, &on, returning, &EvalContext { params: &params, now, session: None }, local)
        });
        let mut results = self.run_on(parts, txn, sync, f).await?;
        if table.partition_key.is_none() {
            // Every replica did the same.
            return Ok(results.into_iter().next().unwrap_or_default());
        }
        let count = results.iter().map(|(n, _)| n).sum();
        Ok((count, results.iter_mut().flat_map(|(_, rows)| std::mem::take(rows)).collect()))
    }

    /// Which partitions take which of `rows`: each row the partition of its key, or (a
    /// replicated table) all of them every row.
    fn rows_by_partition(&self, table: &TableDef, rows: Vec<Vec<Value>>) -> (Vec<usize>, Arc<Vec<(usize, Rows)>>) {
        let n = self.executors.len();
        let (parts, groups): (Vec<usize>, Vec<Rows>) = if table.partition_key.is_none() || n == 1 {
            let all = Arc::new(rows);
            let parts: Vec<usize> = if n == 1 { vec![0] } else { (0..n).collect() };
            let groups = parts.iter().map(|_| all.clone()).collect();
            (parts, groups)
        } else {
            let mut by_part: Vec<Vec<Vec<Value>>> = vec![Vec::new(); n];
            for row in rows {
                by_part[self.partition_of_row(table, &row)].push(row);
            }
            by_part.into_iter().enumerate().filter(|(_, r)| !r.is_empty()).map(|(p, r)| (p, Arc::new(r))).unzip()
        };
        let by_id = Arc::new(parts.iter().copied().zip(groups).collect());
        (parts, by_id)
    }

    /// Runs a short statement with its parameters, in `txn` or as an autocommit statement.
    pub async fn run(&self, plan: Arc<OltpPlan>, params: Vec<Value>, now: i64, txn: Option<TxnCtx>, sync: bool) -> Result<OltpResult> {
        let budget = self.config.short_select_budget;
        let parts = self.plan_partitions(&plan, &params, now, self.reader(txn.as_ref()))?;
        if parts.len() > 1
            && let OltpPlan::Select(s) = plan.as_ref()
            && (!s.order_by.is_empty() || s.limit.is_some() || s.offset.is_some() || !s.aggregates.is_empty())
        {
            // Ordering, limits and aggregates across partitions are the analytical side's job.
            if s.lock {
                return Err(Error::unsupported("FOR UPDATE with ORDER BY or LIMIT across partitions"));
            }
            return Ok(OltpResult::TooLarge);
        }
        // A replicated table's statement that ran everywhere did the same on every replica.
        let replicated = plan.table().partition_key.is_none();
        let params: Arc<[Value]> = params.into();
        let p2 = plan.clone();
        let f: StatementFn<OltpResult> = Arc::new(move |p, local| run_on_partition(p, local, &p2, &params, now, budget));
        let results = self.run_on(parts, txn, sync, f).await?;
        Ok(merge(results, replicated))
    }

    /// Runs one short statement once per parameter list, in order, in `txn`: the lists that
    /// reach one partition (all of them, with one) in executor jobs of up to
    /// `RUN_EACH_BATCH` runs each, rather than a job per run. Returns each run's result.
    pub async fn run_each(&self, plan: Arc<OltpPlan>, lists: Vec<Vec<Value>>, now: i64, txn: TxnCtx) -> Result<Vec<OltpResult>> {
        let mut results = Vec::with_capacity(lists.len());
        if self.executors.len() != 1 {
            for params in lists {
                results.push(self.run(plan.clone(), params, now, Some(txn), false).await?);
            }
            return Ok(results);
        }
        let budget = self.config.short_select_budget;
        let mut lists = lists.into_iter().peekable();
        while lists.peek().is_some() {
            let batch: Arc<Vec<Vec<Value>>> = Arc::new(lists.by_ref().take(RUN_EACH_BATCH).collect());
            let p2 = plan.clone();
            let f: StatementFn<Vec<OltpResult>> =
                Arc::new(move |p, local| batch.iter().map(|params| run_on_partition(p, local, &p2, params, now, budget)).collect::<Result<Vec<_>>>());
            for mut r in self.run_on(vec![0], Some(txn), false, f).await? {
                results.append(&mut r);
            }
        }
        Ok(results)
    }

    /// A transaction-consistent snapshot of `tables`, taken between statements, ahead of the
    /// queued ones (`Executor::call_soon`; with several partitions, with all of them quiesced). With a view, the snapshot shows what that
    /// transaction sees; without one, everything committed. Uncommitted changes of running
    /// transactions are reverted in the snapshot.
    ///
    /// `tests` (empty, or one list per table) are zone-map tests of a query's filters: the
    /// snapshot leaves out the chunks that hold no row passing them
    /// ([`TableStore::snapshot_for`](crate::storage::TableStore::snapshot_for)), so such a
    /// snapshot serves only that query.
    pub async fn snapshot(&self, tables: &[Arc<TableDef>], view: Option<TxnView>, tests: Vec<Vec<RangeTest>>) -> Result<Vec<TableSnapshot>> {
        let defs: Vec<_> = tables.to_vec();
        let view = view.unwrap_or_else(TxnView::committed);
        let parts: Vec<Vec<Option<TableSnapshot>>> = if self.executors.len() == 1 {
            vec![self.executors[0].call_soon(move |p| snapshot_partition(p, &defs, &view, 0, &tests)).await??]
        } else {
            let reader = self.reader(None);
            let all: Vec<usize> = (0..self.executors.len()).collect();
            self.quiesced(&all, move |p, _, _| snapshot_partition(p, &defs, &view, reader, &tests)).await?.into_iter().collect::<Result<_>>()?
        };
        merge_snapshots(parts, tables.len())
    }

    /// Records that a SERIALIZABLE transaction read whole tables (an analytical query).
    pub async fn record_table_reads(&self, txn: TxnCtx, tables: &[Arc<TableDef>]) -> Result<()> {
        if txn.isolation != Isolation::Serializable || tables.is_empty() {
            return Ok(());
        }
        let ids: Vec<_> = tables.iter().map(|t| t.id).collect();
        let all: Vec<usize> = (0..self.executors.len()).collect();
        let replies: Vec<_> = all
            .iter()
            .map(|&p| {
                let ids = ids.clone();
                self.executors[p].call(move |part| {
                    statement(part, &txn, |_, local| {
                        local.reads.extend(ids.iter().map(|id| ReadPredicate::Table(*id)));
                        Ok(())
                    })
                })
            })
            .collect();
        for r in replies {
            r.await??;
        }
        self.touch(txn.id, &all);
        Ok(())
    }

    /// Commits a transaction: validates its reads (SERIALIZABLE) and stamps its versions with
    /// one commit timestamp on every partition it touched, logging its changes as one redo
    /// record. If validation or logging fails anywhere, it is rolled back everywhere. With
    /// `sync`, returns once the record is durable.
    pub async fn commit(&self, txn: TxnCtx, sync: bool) -> Result<()> {
        let parts = self.forget(txn.id);
        let registry = self.registry.clone();
        let wal = self.wal.get().cloned();
        let outcome: Result<Option<Durable>> = match parts.as_slice() {
            [] => Ok(None),
            [p] => self
                .call_statement(*p, move |part| -> Result<Option<Durable>> {
                    part.txns.take_aborted(txn.id)?;
                    let Some(mut local) = part.txns.local.remove(&txn.id) else { return Ok(None) };
                    if let Err(e) = txn::validate(part, &local) {
                        txn::rollback_versions(part, &mut local.versions, 0)?;
                        return Err(e);
                    }
                    finish_alone(part, local, &registry, wal.as_ref(), sync)
                })
                .await
                .and_then(|r| r),
            _ => self
                .quiesced_step(&parts, move |part, step, first| -> Result<()> {
                    let local = part.txns.local.remove(&txn.id);
                    let valid = part.txns.take_aborted(txn.id).and_then(|_| local.as_ref().map_or(Ok(()), |l| txn::validate(part, l)));
                    let local = local.unwrap_or_else(|| LocalTxn::new(txn.view(), txn.isolation));
                    finish_on_step(part, step, first, local, valid.is_ok(), &registry, wal.as_ref(), sync).and(valid)
                })
                .await
                .and_then(|(rs, step)| rs.into_iter().collect::<Result<()>>().map(|_| step.take_durable())),
        };
        self.waits.ended(txn.id);
        self.wait_durable(outcome?).await
    }

    /// Rolls a transaction back on every partition it touched.
    pub async fn rollback(&self, id: Ts) -> Result<()> {
        let parts = self.forget(id);
        let replies: Vec<_> = parts
            .iter()
            .map(|&p| {
                let registry = self.registry.clone();
                self.call_statement(p, move |part| -> Result<()> {
                    txn::rollback(part, id)?;
                    txn::collect_garbage(part, registry.oldest_needed())
                })
            })
            .collect();
        let mut result = Ok(());
        for r in replies {
            if let Err(e) = r.await.and_then(|r| r) {
                result = Err(e);
            }
        }
        self.waits.ended(id);
        result
    }

    /// Ends a registered snapshot. When it was the oldest, versions only it needed are
    /// collected (in the background, by each executor).
    pub fn release_snapshot(&self, start: Ts) {
        if self.registry.end_snapshot(start) {
            for e in &self.executors {
                let registry = self.registry.clone();
                e.submit(Box::new(move |p: &mut Partition| {
                    if let Err(e) = txn::collect_garbage(p, registry.oldest_needed()) {
                        tracing::error!("garbage collection failed: {e}");
                    }
                }));
            }
        }
    }

    /// Rolls a transaction back without waiting (for sessions that end abruptly).
    pub fn rollback_detached(&self, id: Ts) {
        let parts = self.forget(id);
        if parts.is_empty() {
            self.waits.ended(id);
            return;
        }
        let remaining = Arc::new(std::sync::atomic::AtomicUsize::new(parts.len()));
        for p in parts {
            let (registry, waits, remaining) = (self.registry.clone(), self.waits.clone(), remaining.clone());
            self.executors[p].submit(Box::new(move |part: &mut Partition| {
                if let Err(e) = txn::rollback(part, id).and_then(|_| txn::collect_garbage(part, registry.oldest_needed())) {
                    tracing::error!("rollback of an abandoned transaction failed: {e}");
                }
                // Waiters may go on once every partition has undone the changes.
                if remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                    waits.ended(id);
                }
            }));
        }
    }

    /// A savepoint: how many versions the transaction has made on each partition so far.
    pub async fn savepoint(&self, id: Ts) -> Result<Savepoint> {
        let mut marks = Vec::new();
        for p in self.touched(id) {
            let n = self.executors[p].call(move |part| part.txns.local.get(&id).map_or(0, |t| t.versions.len())).await?;
            marks.push((p, n));
        }
        Ok(marks)
    }

    /// Undoes what the transaction did after a savepoint.
    pub async fn rollback_to(&self, id: Ts, savepoint: &Savepoint) -> Result<()> {
        for p in self.touched(id) {
            let mark = savepoint.iter().find(|(q, _)| *q == p).map_or(0, |(_, m)| *m);
            self.executors[p]
                .call(move |part| -> Result<()> {
                    let Some(mut local) = part.txns.local.remove(&id) else { return Ok(()) };
                    let result = txn::rollback_versions(part, &mut local.versions, mark);
                    part.txns.local.insert(id, local);
                    result
                })
                .await??;
        }
        Ok(())
    }
}

/// A transaction that runs whole inside one executor job (a stored procedure's call): its
/// statements run directly on the partition, with no hand-off between threads per statement.
///
/// It serves only statements that stay on the short path, on its partition, and need not
/// wait: a statement that would wait for another transaction's lock, whose result is too
/// large for the short path, or that reaches rows of another partition (on an engine with
/// several) makes the job *give up* — everything it did is rolled back and
/// [`Engine::run_as_one_job`] reports [`JobOutcome::GaveUp`], so the caller runs the
/// transaction again the ordinary way, statement by statement.
///
/// INVARIANT: with several partitions, every statement and record access is checked to stay
/// on this partition before it runs (`on_this_partition`, `rows_here`, `record_table`):
/// another partition's rows are not in this one's stores, so a lookup here would find
/// nothing rather than fail.
pub struct JobTxn<'a> {
    part: &'a mut Partition,
    local: &'a mut LocalTxn,
    /// How many partitions the engine has.
    partitions: usize,
    budget: usize,
    gave_up: bool,
    /// The transaction whose change made the job give up (the first one), if that is why.
    blocked_by: Option<u64>,
}

/// How a one-job transaction ended.
#[derive(Debug)]
pub enum JobOutcome<R> {
    /// It ran and committed.
    Done(R),
    /// It needed something a job cannot do and was rolled back; run it the ordinary way.
    GaveUp,
    /// It met a change of the running transaction `holder` (a row it holds) and was rolled
    /// back: it holds nothing, and may run as one job again once `holder` has ended
    /// ([`Engine::wait_for`]).
    Blocked { holder: u64 },
}

impl<R> JobOutcome<R> {
    /// The result if the job ran, `None` if it gave up.
    pub fn done(self) -> Option<R> {
        match self {
            JobOutcome::Done(r) => Some(r),
            JobOutcome::GaveUp | JobOutcome::Blocked { .. } => None,
        }
    }
}

/// The statements a one-job transaction's body can run (a trait so that the body's context
/// can hold the job behind a reference of its own lifetime).
pub trait JobStatements {
    /// Runs a short statement (SELECT, UPDATE or DELETE) of the transaction.
    fn run(&mut self, plan: &Arc<OltpPlan>, params: &[Value], now: i64) -> Result<OltpResult>;
    /// Inserts rows that already have the table's column types.
    fn insert(&mut self, table: &TableDef, rows: &[Vec<Value>]) -> Result<u64>;
    /// Inserts rows with `ON CONFLICT` (see [`exec::upsert_rows`]): how many were written, and
    /// (with `returning`) their new values.
    fn upsert(&mut self, table: &TableDef, rows: &[Vec<Value>], on: &OnConflict, returning: bool, params: &[Value], now: i64) -> Result<(u64, Vec<Vec<Value>>)>;
    /// Gives the job up (see [`JobTxn`]); the error returned is for the body to pass on.
    fn give_up(&mut self) -> Error;
    /// Record-level access of a native procedure (see [`RecordRead`]): the rows a read finds,
    /// locked as by FOR UPDATE with `lock`.
    fn read_records(&mut self, table: &Arc<TableDef>, read: &RecordRead, lock: bool) -> Result<Vec<Vec<Value>>>;
    /// Sets `changes` (already of the column types) on the rows a read finds; returns the
    /// read's columns of their new versions.
    fn update_records(&mut self, table: &Arc<TableDef>, read: &RecordRead, changes: &[(usize, Value)]) -> Result<Vec<Vec<Value>>>;
    /// Changes each row a read finds by what `f` computes from its values of the read's
    /// columns (see [`exec::modify_records`]); returns those values.
    fn modify_records(&mut self, table: &Arc<TableDef>, read: &RecordRead, f: &mut RecordChanges) -> Result<Vec<Vec<Value>>>;
    /// Deletes the rows a read finds; returns how many.
    fn delete_records(&mut self, table: &Arc<TableDef>, read: &RecordRead) -> Result<u64>;
    /// Calls `f` with each row a read finds, read where it is stored (see
    /// [`exec::visit_records`]); returns how many it saw.
    fn visit_records(&mut self, table: &Arc<TableDef>, read: &RecordRead, f: &mut dyn FnMut(&exec::RecordRow) -> Result<bool>) -> Result<usize>;
    /// Changes each row a read finds by what `f` computes from it, read where it is stored
    /// (see [`exec::modify_each`]); returns how many rows it changed.
    fn modify_each(&mut self, table: &Arc<TableDef>, read: &RecordRead, f: &mut exec::RecordRowChanges) -> Result<usize>;
    /// A hint that the body will make these reads (of several tables) next (see
    /// [`exec::prefetch_records`]).
    fn prefetch_records(&mut self, _reads: &[(&Arc<TableDef>, &[RecordRead])]) {}
    /// A hint that these statements will run next with these parameters (see
    /// [`exec::prefetch_plans`]).
    fn prefetch_plans(&mut self, _lookups: &[(&Arc<OltpPlan>, &[Value])], _now: i64) {}
}

impl JobStatements for JobTxn<'_> {
    fn run(&mut self, plan: &Arc<OltpPlan>, params: &[Value], now: i64) -> Result<OltpResult> {
        self.on_this_partition(plan, params, now)?;
        let result = run_on_partition(self.part, self.local, plan, params, now, self.budget);
        match self.or_give_up(result)? {
            OltpResult::TooLarge => Err(self.give_up()),
            other => Ok(other),
        }
    }

    fn insert(&mut self, table: &TableDef, rows: &[Vec<Value>]) -> Result<u64> {
        // Rows made for another definition of the table (changed or dropped by DDL since) must
        // not be stored: the ordinary run plans the statement again.
        if !self.stores(table) || !self.rows_here(table, rows) {
            return Err(self.give_up());
        }
        let inserted = exec::insert_rows(self.part.table_mut(table.id)?, rows, self.local);
        self.or_give_up(inserted)
    }

    fn upsert(&mut self, table: &TableDef, rows: &[Vec<Value>], on: &OnConflict, returning: bool, params: &[Value], now: i64) -> Result<(u64, Vec<Vec<Value>>)> {
        if !self.stores(table) || !self.rows_here(table, rows) {
            return Err(self.give_up());
        }
        let written = exec::upsert_rows(self.part.table_mut(table.id)?, rows, on, returning, &EvalContext { params, now, session: None }, self.local);
        self.or_give_up(written)
    }

    fn give_up(&mut self) -> Error {
        self.gave_up = true;
        Error::new(SqlState::QueryCanceled, "the transaction cannot run as one job")
    }

    fn read_records(&mut self, table: &Arc<TableDef>, read: &RecordRead, lock: bool) -> Result<Vec<Vec<Value>>> {
        self.record_table(table, read, lock)?;
        let found = exec::read_records(self.part.table(table.id)?, read, &self.local.view, self.budget);
        let Some(found) = self.or_give_up(found)? else { return Err(self.give_up()) };
        if lock {
            let store = self.part.table_mut(table.id)?;
            for &row in &found.rows {
                match store.lock(row, &self.local.view) {
                    Ok(Some(v)) => self.local.versions.push((table.id, v)),
                    Ok(None) => {}
                    Err(e) => return self.or_give_up(Err(e)),
                }
            }
        }
        Ok(found.values)
    }

    fn update_records(&mut self, table: &Arc<TableDef>, read: &RecordRead, changes: &[(usize, Value)]) -> Result<Vec<Vec<Value>>> {
        self.record_table(table, read, true)?;
        let updated = exec::update_records(self.part.table_mut(table.id)?, read, changes, self.local, self.budget);
        self.or_give_up(updated)?.ok_or_else(|| self.give_up())
    }

    fn modify_records(&mut self, table: &Arc<TableDef>, read: &RecordRead, f: &mut RecordChanges) -> Result<Vec<Vec<Value>>> {
        self.record_table(table, read, true)?;
        let modified = exec::modify_records(self.part.table_mut(table.id)?, read, self.local, self.budget, f);
        Ok(self.or_give_up(modified)?.ok_or_else(|| self.give_up())?.values)
    }

    fn delete_records(&mut self, table: &Arc<TableDef>, read: &RecordRead) -> Result<u64> {
        self.record_table(table, read, true)?;
        let deleted = exec::delete_records(self.part.table_mut(table.id)?, read, self.local, self.budget);
        self.or_give_up(deleted)?.ok_or_else(|| self.give_up())
    }

    fn visit_records(&mut self, table: &Arc<TableDef>, read: &RecordRead, f: &mut dyn FnMut(&exec::RecordRow) -> Result<bool>) -> Result<usize> {
        self.record_table(table, read, false)?;
        let seen = exec::visit_records(self.part.table(table.id)?, read, &self.local.view, self.budget, f);
        self.or_give_up(seen)?.ok_or_else(|| self.give_up())
    }

    fn modify_each(&mut self, table: &Arc<TableDef>, read: &RecordRead, f: &mut exec::RecordRowChanges) -> Result<usize> {
        self.record_table(table, read, true)?;
        let changed = exec::modify_each(self.part.table_mut(table.id)?, read, self.local, self.budget, f);
        self.or_give_up(changed)?.ok_or_else(|| self.give_up())
    }

    fn prefetch_records(&mut self, reads: &[(&Arc<TableDef>, &[RecordRead])]) {
        // Tables changed by DDL since the body resolved them are left out.
        let stored: SmallVec<[(&TableStore, &[RecordRead]); 8]> = reads
            .iter()
            .filter(|(table, _)| self.stores(table))
            .filter_map(|&(table, reads)| Some((self.part.table(table.id).ok()?, reads)))
            .collect();
        exec::prefetch_records(&stored);
    }

    fn prefetch_plans(&mut self, lookups: &[(&Arc<OltpPlan>, &[Value])], now: i64) {
        let stored: SmallVec<[(&TableStore, &OltpPlan, &[Value]); 32]> = lookups
            .iter()
            .filter(|(plan, _)| self.stores(plan.table()))
            .filter_map(|&(plan, params)| Some((self.part.table(plan.table().id).ok()?, plan.as_ref(), params)))
            .collect();
        exec::prefetch_plans(&stored, now);
    }
}

impl JobTxn<'_> {
    /// Whether the partition stores `table` as this definition describes it: not changed or
    /// dropped by DDL since the statement was planned or the procedure resolved it.
    fn stores(&self, table: &TableDef) -> bool {
        self.part.table(table.id).is_ok_and(|store| std::ptr::eq(store.def().as_ref(), table) || store.def().as_ref() == table)
    }

    /// A record-level access may go on if the partition [`stores`](Self::stores) the table
    /// and, on an engine with several partitions, the rows `read` finds are all here: its
    /// key fixes the partition key to a value of this partition, or it reads (without `write`:
    /// changing or locking) a replicated table. Otherwise the job gives up and the call runs
    /// again in the session, where record access is SQL. A job's transaction never records
    /// read predicates (it runs alone on its partition, so REPEATABLE READ is serializable
    /// there), which record reads could not.
    fn record_table(&mut self, table: &Arc<TableDef>, read: &RecordRead, write: bool) -> Result<()> {
        debug_assert!(!self.local.records_reads(), "a one-job transaction records no read predicates");
        if !self.stores(table) {
            return Err(self.give_up());
        }
        if self.partitions > 1 {
            let here = match table.partition_key {
                None => !write,
                Some(k) => table.indexes.get(read.index).is_some_and(|index| {
                    index.columns.iter().zip(&read.eq).any(|(&c, v)| c == k && routing::partition_of_key(self.partitions, table, v) == self.part.id)
                }),
            };
            if !here {
                return Err(self.give_up());
            }
        }
        Ok(())
    }

    /// On an engine with several partitions, gives the job up unless the statement runs on
    /// this partition alone (a read of a replicated table reads this partition's replica).
    fn on_this_partition(&mut self, plan: &OltpPlan, params: &[Value], now: i64) -> Result<()> {
        if self.partitions > 1 && routing::plan_partitions(self.partitions, plan, params, now, self.part.id)? != [self.part.id] {
            return Err(self.give_up());
        }
        Ok(())
    }

    /// Whether rows to be inserted into `table` all belong on this partition (a replicated
    /// table's rows belong on every partition, so not with several).
    fn rows_here(&self, table: &TableDef, rows: &[Vec<Value>]) -> bool {
        self.partitions == 1
            || (table.partition_key.is_some() && rows.iter().all(|row| routing::partition_of_row(self.partitions, table, row) == self.part.id))
    }

    /// A result, except that waiting for another transaction's lock gives the job up.
    fn or_give_up<T>(&mut self, r: Result<T>) -> Result<T> {
        match r {
            Err(e) if e.blocked_by.is_some() => {
                self.blocked_by = self.blocked_by.or(e.blocked_by);
                Err(self.give_up())
            }
            other => other,
        }
    }
}

impl Engine {
    /// Runs `body` as one transaction inside one executor job (see [`JobTxn`]): it commits
    /// (and is logged, durable before this returns with `sync`) if the body succeeds, and
    /// rolls back if it fails or gives up. On an engine with several partitions it runs on
    /// `partition` (see [`Engine::partition_of_value`]) and gives up when a statement leaves
    /// it; without one it gives up at once.
    pub async fn run_as_one_job<R: Send + 'static>(
        &self,
        sync: bool,
        partition: Option<usize>,
        body: impl FnOnce(&mut dyn JobStatements) -> Result<R> + Send + 'static,
    ) -> Result<JobOutcome<R>> {
        let partitions = self.executors.len();
        let index = match partition {
            _ if partitions == 1 => 0,
            Some(p) if p < partitions => p,
            _ => return Ok(JobOutcome::GaveUp),
        };
        let registry = self.registry.clone();
        let wal = self.wal.get().cloned();
        let budget = self.config.short_select_budget;
        let executor = &self.executors[index];
        let call = move |part: &mut Partition| {
            let (mut gave_up, mut blocked_by) = (false, None);
            let ran = autocommit(part, &registry, wal.as_ref(), sync, |part, local| {
                let mut job = JobTxn { part, local, partitions, budget, gave_up: false, blocked_by: None };
                // A panicking body must still roll back what it did (the executor
                // survives a panicking job, but would keep the job's versions).
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&mut job)))
                    .unwrap_or_else(|_| Err(Error::internal("a procedure panicked inside its job")));
                (gave_up, blocked_by) = (job.gave_up, job.blocked_by);
                // A body that gave up but returned Ok still must not commit.
                if gave_up { Err(Error::internal("gave up")) } else { r }
            });
            match ran {
                Ok((r, token)) => (Ok(JobOutcome::Done(r)), token),
                Err(_) if gave_up => (Ok(blocked_by.map_or(JobOutcome::GaveUp, |holder| JobOutcome::Blocked { holder })), None),
                Err(e) => (Err(e), None),
            }
        };
        let (outcome, token) = if self.config.inline_calls { executor.call_inline(call) } else { executor.call(call) }.await?;
        let outcome = outcome?;
        self.wait_durable(token).await?;
        Ok(outcome)
    }
}

/// How many runs of a statement [`Engine::run_each`] puts in one executor job: a few
/// milliseconds of the partition's time, so that other sessions' statements wait no longer.
const RUN_EACH_BATCH: usize = 1024;

/// The state of an interactive transaction on this partition (created on first use).
fn take_local(p: &mut Partition, ctx: &TxnCtx) -> LocalTxn {
    let mut local = p.txns.local.remove(&ctx.id).unwrap_or_else(|| {
        let mut local = LocalTxn::new(ctx.view(), ctx.isolation);
        // SERIALIZABLE transactions are counted from their first statement.
        local.registered = ctx.isolation == Isolation::Serializable;
        local
    });
    local.view.start = ctx.start;
    local
}

/// Runs `f` as a statement of the interactive transaction `ctx` on this partition.
fn statement<R>(p: &mut Partition, ctx: &TxnCtx, f: impl FnOnce(&mut Partition, &mut LocalTxn) -> Result<R>) -> Result<R> {
    p.txns.check_aborted(ctx.id)?;
    let mut local = take_local(p, ctx);
    let mark = local.versions.len();
    let mut result = f(p, &mut local);
    // A statement that must wait for another transaction undoes its partial work, so that it
    // can run again from the start once that transaction has ended.
    if let Err(e) = &result
        && e.blocked_by.is_some()
        && let Err(undo) = txn::rollback_versions(p, &mut local.versions, mark)
    {
        result = Err(undo);
    }
    p.txns.local.insert(ctx.id, local);
    result
}

/// Runs `f` as an autocommit statement within this one job: it commits (and is logged) at once
/// if it succeeds and rolls back if it fails. Never inlined, so that a profile (or
/// `valgrind --tool=callgrind --toggle-collect='*statements::autocommit*'`) finds a one-job
/// transaction's whole cost under this name.
#[inline(never)]
fn autocommit<R>(
    p: &mut Partition,
    registry: &TxnRegistry,
    wal: Option<&Arc<Wal>>,
    sync: bool,
    f: impl FnOnce(&mut Partition, &mut LocalTxn) -> Result<R>,
) -> Result<(R, Option<Durable>)> {
    // The job runs alone on the partition: its versions are its undo, detached from the
    // chains until its commit shows someone needs them (see `TxnView::detached`).
    let view = TxnView::detached(registry.new_txn_id(), registry.now());
    let mut local = LocalTxn::new(view, Isolation::RepeatableRead);
    match f(p, &mut local) {
        Ok(r) => Ok((r, finish_alone(p, local, registry, wal, sync)?)),
        Err(e) => {
            txn::rollback_versions(p, &mut local.versions, 0)?;
            Err(e)
        }
    }
}

/// Commits a transaction that touched only this partition: logs its changes, then stamps its
/// versions; if the log refuses the record, rolls it back instead.
fn finish_alone(p: &mut Partition, mut local: LocalTxn, registry: &TxnRegistry, wal: Option<&Arc<Wal>>, sync: bool) -> Result<Option<Durable>> {
    if local.versions.is_empty() {
        return Ok(None);
    }
    let ts = registry.next_commit_ts();
    let mut changes = Vec::new();
    if wal.is_some() {
        txn::redo_changes(p, &local, &mut changes)?;
    }
    match super::log_commit(wal, ts, changes, sync) {
        Ok(logged) => {
            let (lsn, token) = logged.map_or((None, None), |l| (Some(l.lsn), l.durable));
            txn::commit(p, local, ts, lsn, registry)?;
            Ok(token)
        }
        Err(e) => {
            txn::rollback_versions(p, &mut local.versions, 0)?;
            Err(e)
        }
    }
}

/// The end of a quiesced step that commits. Every participant reports whether its part
/// succeeded (`ok`) and its row changes could be read; with a decision to commit, they all
/// contribute their changes to one redo record (appended by the first), then stamp their
/// versions; if the decision is to roll back or logging fails, every participant rolls back.
///
/// INVARIANT: nothing here returns before the meetings every participant attends (a
/// participant that left early would leave the others waiting for ever).
#[allow(clippy::too_many_arguments)]
fn finish_on_step(
    p: &mut Partition,
    step: &super::quiesce::Quiesce,
    first: bool,
    mut local: LocalTxn,
    ok: bool,
    registry: &TxnRegistry,
    wal: Option<&Arc<Wal>>,
    sync: bool,
) -> Result<()> {
    let mut changes = Vec::new();
    let redo = if ok && wal.is_some() { txn::redo_changes(p, &local, &mut changes) } else { Ok(()) };
    step.report(ok && redo.is_ok());
    let Some(ts) = step.decide(first, || registry.next_commit_ts()) else {
        txn::rollback_versions(p, &mut local.versions, 0)?;
        return redo;
    };
    match step.log(first, changes, |all| super::log_commit(wal, ts, all, sync)) {
        Ok(lsn) => txn::commit(p, local, ts, lsn, registry),
        Err(e) => {
            txn::rollback_versions(p, &mut local.versions, 0)?;
            Err(e)
        }
    }
}

/// An error if the plan was made before a DROP COLUMN or ALTER COLUMN … TYPE that ran
/// meanwhile: its column positions name other columns, or its types are not the stored ones
/// (a later ADD COLUMN appends, which leaves them right).
fn check_planned_table(p: &Partition, planned: &Arc<crate::catalog::TableDef>) -> Result<()> {
    let stored = p.table(planned.id)?.def();
    if !Arc::ptr_eq(stored, planned)
        && (stored.columns.len() < planned.columns.len() || stored.columns.iter().zip(&planned.columns).any(|(a, b)| a.ty != b.ty))
    {
        return Err(Error::new(
            SqlState::SerializationFailure,
            format!("could not serialize access: relation \"{}\" changed during the statement", planned.name),
        ));
    }
    Ok(())
}

fn run_on_partition(
    p: &mut Partition,
    local: &mut LocalTxn,
    plan: &Arc<OltpPlan>,
    params: &[Value],
    now: i64,
    budget: usize,
) -> Result<OltpResult> {
    let cx = EvalContext { params, now, session: None };
    let id = plan.table().id;
    check_planned_table(p, plan.table())?;
    let records = local.records_reads();
    if records && !matches!(plan.as_ref(), OltpPlan::Select(_)) {
        local.reads.push(ReadPredicate::Filter { table: id, plan: plan.clone(), params: params.into(), bound: None });
    }
    // `column IN (subquery)`: the subquery first (its read recorded as any other's), then the
    // lookups of its values.
    if let OltpPlan::Select(s) = plan.as_ref()
        && let Some(sub) = &s.any_from
    {
        let OltpResult::Rows(rows) = run_on_partition(p, local, sub, params, now, budget)? else {
            // A locking statement has no other path to go to.
            if s.lock {
                return Err(Error::unsupported(format!("FOR UPDATE over an IN subquery of more than {budget} rows")));
            }
            return Ok(OltpResult::TooLarge);
        };
        let listed = Arc::new(OltpPlan::Select(s.listing(rows.into_iter().filter_map(|r| r.into_iter().next()))));
        let result = run_on_partition(p, local, &listed, params, now, budget)?;
        // The read to validate is the statement's own: its filter, without the list, covers
        // more rows than the lookups found.
        if let Some(ReadPredicate::Filter { plan: read, .. }) = local.reads.last_mut()
            && Arc::ptr_eq(read, &listed)
        {
            *read = plan.clone();
        }
        return Ok(result);
    }
    match plan.as_ref() {
        OltpPlan::Select(s) => match exec::run_select(p.table(id)?, s, &local.view, &cx, budget)? {
            SelectOutcome::Rows(rows, ids, bound) => {
                if records {
                    local.reads.push(ReadPredicate::Filter { table: id, plan: plan.clone(), params: params.into(), bound });
                }
                if s.lock {
                    let table = p.table_mut(id)?;
                    for row in ids {
                        match table.lock(row, &local.view) {
                            Ok(Some(v)) => local.versions.push((id, v)),
                            Ok(None) => {}
                            Err(e) if e.blocked_by.is_some() && s.lock_wait == crate::sql::plan::LockWait::NoWait => {
                                return Err(Error::new(
                                    SqlState::LockNotAvailable,
                                    format!("could not obtain lock on row in relation \"{}\"", s.table.name),
                                ));
                            }
                            Err(e) => return Err(e),
                        }
                    }
                }
                Ok(OltpResult::Rows(rows))
            }
            SelectOutcome::TooLarge if s.lock => Err(Error::unsupported(format!("FOR UPDATE over more than {budget} rows"))),
            SelectOutcome::TooLarge => Ok(OltpResult::TooLarge),
        },
        OltpPlan::Update(u) => {
            exec::keeps_partition_key(&u.table, u.assignments.iter().map(|(c, _)| *c))?;
            let mut returned = Vec::new();
            let n = exec::run_update(p.table_mut(id)?, u, &cx, local, &mut returned)?;
            Ok(if u.returning.is_some() { OltpResult::Rows(returned) } else { OltpResult::Count(n) })
        }
        OltpPlan::Delete(d) => {
            let mut returned = Vec::new();
            let n = exec::run_delete(p.table_mut(id)?, d, &cx, local, &mut returned)?;
            Ok(if d.returning.is_some() { OltpResult::Rows(returned) } else { OltpResult::Count(n) })
        }
    }
}

/// Combines the results of one statement on several partitions. A statement on a replicated
/// table did the same on every replica: its result is one replica's.
fn merge(mut results: Vec<OltpResult>, replicated: bool) -> OltpResult {
    if replicated || results.len() == 1 {
        return results.drain(..).next().unwrap_or(OltpResult::Rows(Vec::new()));
    }
    let mut rows = Vec::new();
    let mut count = None;
    for r in results {
        match r {
            OltpResult::TooLarge => return OltpResult::TooLarge,
            OltpResult::Rows(r) => rows.extend(r),
            OltpResult::Count(n) => *count.get_or_insert(0) += n,
        }
    }
    count.map_or(OltpResult::Rows(rows), OltpResult::Count)
}

/// One partition's share of a snapshot of `defs` as `view` sees them: its part of every
/// partitioned table, and replicated tables only on partition `reader`.
/// `tests`: none, or each table's zone-map tests ([`Engine::snapshot`]).
pub(super) fn snapshot_partition(p: &Partition, defs: &[Arc<TableDef>], view: &TxnView, reader: usize, tests: &[Vec<RangeTest>]) -> Result<Vec<Option<TableSnapshot>>> {
    defs.iter()
        .enumerate()
        .map(|(i, def)| {
            if def.partition_key.is_none() && p.id != reader {
                return Ok(None);
            }
            let store = p.table(def.id)?;
            if !Arc::ptr_eq(store.def(), def) && store.def().as_ref() != def.as_ref() {
                return Err(Error::new(SqlState::UndefinedTable, format!("relation \"{}\" changed during the query", def.name)));
            }
            Ok(Some(store.snapshot_for(view, tests.get(i).map_or(&[], Vec::as_slice))))
        })
        .collect()
}

/// The partitions' shares of a snapshot, joined per table.
pub(super) fn merge_snapshots(parts: Vec<Vec<Option<TableSnapshot>>>, tables: usize) -> Result<Vec<TableSnapshot>> {
    let mut merged: Vec<Option<TableSnapshot>> = vec![None; tables];
    for part in parts {
        for (slot, snap) in merged.iter_mut().zip(part) {
            match (slot.as_mut(), snap) {
                (None, s) => *slot = s,
                (Some(acc), Some(s)) => acc.chunks.extend(s.chunks),
                (Some(_), None) => {}
            }
        }
    }
    merged.into_iter().map(|s| s.ok_or_else(|| Error::internal("a table has no snapshot"))).collect()
}
