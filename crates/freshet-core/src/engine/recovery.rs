//! Recovery and checkpoints, as far as the engine is concerned: putting restored tables and
//! rows back exactly where they were, redoing logged changes, and taking the consistent image
//! a checkpoint writes.
//!
//! During recovery nothing else runs: rows are placed at their logged row ids without index
//! maintenance or versions, and [`Engine::finish_recovery`] rebuilds every index and the free
//! slots at the end.

use std::sync::Arc;

use super::{Durable, Engine};
use crate::executor::Reply;
use crate::catalog::{TableDef, TableId, ViewDef};
use crate::sequence::SequenceDef;
use crate::error::{Error, Result};
use crate::storage::{RowId, TableSnapshot, Ts, TxnView};
use crate::types::Value;
use crate::wal::{RedoRecord, RowChange};

/// What a checkpoint writes: the table definitions and, for every partition, every table as
/// of one commit timestamp; and the token of the log record that marks where replay starts.
pub struct CheckpointImage {
    /// Every table, in table id order.
    pub tables: Vec<Arc<TableDef>>,
    /// For each partition, each table's snapshot (chunk `i`, slot `j` is row id `(i, j)`).
    pub partitions: Vec<Vec<TableSnapshot>>,
    /// The newest commit timestamp the image holds.
    pub ts: Ts,
    /// Resolves to the LSN of the checkpoint's start record once it is durable.
    pub start: Option<Durable>,
    /// The CREATE statements of the stored procedures and functions.
    pub procedures: Vec<String>,
    /// The views.
    pub views: Vec<ViewDef>,
    /// The sequences of their own (a table's are in its definition).
    pub sequences: Vec<SequenceDef>,
    /// Every sequence's newest logged position (id, last value, called), read after the start
    /// record was queued: a value handed out since is covered by a record before the start
    /// record or after it, which replay applies.
    pub sequence_values: Vec<(TableId, i64, bool)>,
}

impl Engine {
    /// Recovery: creates a table (storage on every partition) or installs a new definition of
    /// an existing one, and publishes it in the catalog.
    pub async fn restore_put_table(&self, mut def: TableDef) -> Result<()> {
        // A new definition of a table (an index added) keeps its sequences' counters, and so
        // does a free sequence the table now owns (ALTER SEQUENCE … OWNED BY).
        let current = self.catalog.current();
        let old = current.table_by_id(def.id);
        for s in &mut def.sequences {
            let kept = old.and_then(|o| o.sequences.iter().find(|o| o.id == s.id)).or_else(|| current.free_sequences().find(|f| f.id == s.id));
            if let Some(kept) = kept {
                let mut same = (**s).clone();
                same.state = kept.state.clone();
                *s = Arc::new(same);
            }
        }
        for s in &def.sequences {
            self.catalog.ensure_next_table_id(s.id);
        }
        let def = Arc::new(def);
        let exists = self.catalog.current().table_by_id(def.id).is_some();
        let d = def.clone();
        for r in self.on_all(move |p| -> Result<()> {
            if exists {
                p.table_mut(d.id)?.restore_def(d.clone());
            } else {
                p.create_table(d.clone());
            }
            Ok(())
        })
        .await?
        {
            r?;
        }
        let current = self.catalog.current();
        if let Some(old) = current.table_by_id(def.id)
            && old.name != def.name
        {
            self.catalog.remove_table(&old.name)?;
        }
        self.catalog.ensure_next_table_id(def.id);
        self.catalog.put_table(def);
        Ok(())
    }

    /// Recovery: compiles a logged CREATE PROCEDURE/FUNCTION and publishes it.
    pub fn restore_put_procedure(&self, source: &str) -> Result<()> {
        let routine = crate::sql::plpgsql::compile(source)?;
        self.catalog.put_procedure(Arc::new(routine));
        Ok(())
    }

    /// Recovery: drops the routine a `DropProcedure` record names ([`crate::sql::plpgsql::drop_key`]).
    pub fn restore_drop_procedure(&self, key: &str) -> Result<()> {
        let (name, signature) = crate::sql::plpgsql::parse_drop_key(key)?;
        self.catalog.remove_procedure(&name, signature.as_deref());
        Ok(())
    }

    /// Recovery: publishes a logged view.
    pub fn restore_put_view(&self, view: ViewDef) {
        self.catalog.ensure_next_table_id(view.id);
        self.catalog.put_view(Arc::new(view));
    }

    pub fn restore_drop_view(&self, name: &str) {
        self.catalog.remove_view(name);
    }

    /// Recovery: a logged ADD COLUMN, on every partition and in the catalog.
    pub async fn restore_add_column(&self, id: TableId, column: crate::catalog::ColumnDef, fill: Value) -> Result<()> {
        let Some(old) = self.catalog.current().table_by_id(id).cloned() else { return Ok(()) };
        let mut def = (*old).clone();
        def.columns.push(column);
        self.restore_layout_change(def, move |t, d| t.add_column(d, &fill)).await
    }

    /// Recovery: ALTER TABLE … DROP COLUMN as the live change made it.
    pub async fn restore_drop_column(&self, id: TableId, column: u32) -> Result<()> {
        let Some(old) = self.catalog.current().table_by_id(id).cloned() else { return Ok(()) };
        let c = logged_column(&old, column, "DROP COLUMN")?;
        if old.columns.len() == 1 {
            return Err(corrupt_column(&old, column, "DROP COLUMN"));
        }
        self.restore_layout_change(old.without_column(c), move |t, d| t.drop_column(d, c)).await
    }

    /// Recovery: ALTER TABLE … ALTER COLUMN … TYPE as the live change made it.
    pub async fn restore_alter_column_type(&self, id: TableId, column: u32, ty: crate::types::DataType, explicit: bool) -> Result<()> {
        let Some(old) = self.catalog.current().table_by_id(id).cloned() else { return Ok(()) };
        let c = logged_column(&old, column, "ALTER COLUMN … TYPE")?;
        self.restore_layout_change(old.with_column_type(c, ty, explicit)?, move |t, d| t.alter_column_type(d, c, explicit)).await
    }

    /// Applies a logged change of a table's columns to its store on every partition (`change`
    /// gets the store and the new definition), then publishes the definition.
    async fn restore_layout_change<F>(&self, def: TableDef, change: F) -> Result<()>
    where
        F: Fn(&mut crate::storage::TableStore, Arc<TableDef>) + Send + Sync + 'static,
    {
        let def = Arc::new(def);
        let d = def.clone();
        let change = Arc::new(change);
        for r in self
            .on_all(move |p| -> Result<()> {
                change(p.table_mut(d.id)?, d.clone());
                Ok(())
            })
            .await?
        {
            r?;
        }
        self.catalog.put_table(def);
        Ok(())
    }

    /// Recovery: publishes a logged sequence, its counter at its start.
    pub fn restore_put_sequence(&self, def: SequenceDef) {
        self.catalog.ensure_next_table_id(def.id);
        self.catalog.put_sequence(Arc::new(def));
    }

    pub fn restore_drop_sequence(&self, name: &str) {
        self.catalog.remove_sequence(name);
    }

    /// Recovery: a sequence's counter resumes at a logged position (a record of a sequence
    /// dropped later is ignored).
    pub fn restore_sequence_value(&self, id: TableId, last: i64, called: bool) {
        if let Some(s) = self.catalog.current().all_sequences().find(|s| s.id == id) {
            s.restore(last, called);
        }
    }

    pub async fn restore_drop_table(&self, id: TableId) -> Result<()> {
        if let Some(def) = self.catalog.current().table_by_id(id).cloned() {
            self.catalog.remove_table(&def.name)?;
        }
        self.on_all(move |p| drop(p.drop_table(id))).await?;
        Ok(())
    }

    pub async fn restore_truncate(&self, ids: Vec<TableId>) -> Result<()> {
        for r in self.on_all(move |p| -> Result<()> {
            for id in &ids {
                if let Ok(t) = p.table_mut(*id) {
                    t.truncate();
                }
            }
            Ok(())
        })
        .await?
        {
            r?;
        }
        Ok(())
    }

    /// Recovery: puts rows of one table back into their slots on `partition`.
    pub async fn restore_rows(&self, table: TableId, partition: usize, rows: Vec<(RowId, Vec<Value>)>) -> Result<()> {
        let exec = self.executors.get(partition).ok_or_else(|| Error::internal(format!("no partition {partition}")))?;
        exec.call(move |p| -> Result<()> {
            let t = p.table_mut(table)?;
            for (row, values) in &rows {
                t.restore_insert(*row, values);
            }
            Ok(())
        })
        .await?
    }

    /// Recovery: redoes logged row changes on `partition`, in order; the reply comes when they
    /// are done (the job starts at once). Changes to tables that no longer exist (dropped
    /// later in the log) are skipped.
    pub fn restore_changes(&self, partition: usize, changes: Vec<RowChange>) -> Result<Reply<()>> {
        let exec = self.executors.get(partition).ok_or_else(|| Error::internal(format!("no partition {partition}")))?;
        Ok(exec.call(move |p| {
            for c in changes {
                let Ok(t) = p.table_mut(c.table()) else { continue };
                match c {
                    RowChange::Insert { row, values, .. } => t.restore_insert(row, &values),
                    RowChange::Update { row, columns, .. } => {
                        let columns: Vec<(usize, Value)> = columns.into_iter().map(|(c, v)| (c as usize, v)).collect();
                        t.restore_update(row, &columns)
                    }
                    RowChange::Delete { row, .. } => t.restore_delete(row),
                }
            }
        }))
    }

    /// Ends recovery: every table's indexes and free slots are rebuilt, and the clock resumes
    /// after the newest recovered commit.
    pub async fn finish_recovery(&self, newest_ts: Ts) -> Result<()> {
        for r in self.on_all(|p| p.finish_restore()).await? {
            r?;
        }
        self.registry.advance_clock(newest_ts);
        Ok(())
    }

    /// Takes the image a checkpoint writes, with every partition quiesced: each table as of the
    /// newest commit, and a start record in the log at exactly that point (every commit before
    /// it is in the image, none after it).
    ///
    /// The tables are those the partitions hold at that moment, not the published catalog: a
    /// schema change's record precedes the start record as soon as its step has run, even if
    /// its catalog version is published a moment later.
    pub async fn checkpoint_image(&self) -> Result<CheckpointImage> {
        // Procedures and views change only under the DDL lock, which their DDL steps hold from
        // the record to the publication: with it held here, the image's procedures and views
        // are exactly those whose records precede the start record.
        let _ddl = self.catalog.ddl_lock.lock().await;
        let current = self.catalog.current();
        let procedures = current.procedures().map(|p| p.routine.source.clone()).collect();
        let views = current.views().map(|v| (**v).clone()).collect();
        let sequences = current.free_sequences().map(|s| (**s).clone()).collect();
        let wal = self.wal.get().cloned();
        let registry = self.registry.clone();
        let all: Vec<usize> = (0..self.executors.len()).collect();
        let (parts, step) = self
            .quiesced_step(&all, move |p, step, first| -> Result<(Vec<TableSnapshot>, Ts)> {
                let ts = registry.now();
                // Nothing before the meeting in `append_once` may fail: the others wait there.
                let snaps: Vec<TableSnapshot> =
                    p.tables().map(|t| t.snapshot_for(&TxnView::committed(), &[])).collect();
                step.append_once(first, || match &wal {
                    Some(wal) => {
                        let mut bytes = Vec::new();
                        crate::wal::record::encode(&RedoRecord::CheckpointStart { ts }, &mut bytes);
                        wal.checkpoint_started();
                        wal.append(bytes, true).map(Some)
                    }
                    None => Ok(None),
                })?;
                Ok((snaps, ts))
            })
            .await?;
        let mut partitions = Vec::with_capacity(parts.len());
        let mut ts = 0;
        for r in parts {
            let (snaps, t) = r?;
            ts = ts.max(t);
            partitions.push(snaps);
        }
        let tables = partitions.first().map(|snaps: &Vec<TableSnapshot>| snaps.iter().map(|s| s.def.clone()).collect()).unwrap_or_default();
        let sequence_values = current.all_sequences().map(|s| {
            let (last, called) = s.logged();
            (s.id, last, called)
        }).collect();
        Ok(CheckpointImage { tables, partitions, ts, start: step.take_durable(), procedures, views, sequences, sequence_values })
    }
}

/// The position a logged column change names, checked against the table it applies to.
fn logged_column(def: &TableDef, column: u32, what: &str) -> Result<usize> {
    let c = column as usize;
    if c >= def.columns.len() {
        return Err(corrupt_column(def, column, what));
    }
    Ok(c)
}

fn corrupt_column(def: &TableDef, column: u32, what: &str) -> Error {
    Error::new(
        crate::error::SqlState::Internal,
        format!("corrupt redo record: a logged {what} names column {column} of \"{}\", which has {} columns", def.name, def.columns.len()),
    )
}
