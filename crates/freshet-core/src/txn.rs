//! Statement and transaction bookkeeping: the undo log.
//!
//! Every change a statement makes to a partition appends a typed [`UndoEntry`]. If the
//! statement fails, [`UndoLog::rollback`] walks the entries backwards and restores the
//! before-images exactly (rows, index entries, slots). If it succeeds, [`UndoLog::commit`]
//! performs what may only happen after commit: deleted slots become reusable.
//!
//! Autocommit statements and one-shot transactions keep the log for the duration of one job
//! on the executor; the log never leaves the executor thread.

use crate::catalog::TableId;
use crate::error::Result;
use crate::executor::Partition;
use crate::storage::RowId;
use crate::types::Value;

#[derive(Debug)]
pub enum UndoEntry {
    Inserted { table: TableId, row: RowId },
    Deleted { table: TableId, row: RowId },
    /// Before-images of the columns an update changed.
    Updated { table: TableId, row: RowId, old: Vec<(usize, Value)> },
}

#[derive(Debug, Default)]
pub struct UndoLog {
    entries: Vec<UndoEntry>,
}

impl UndoLog {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, entry: UndoEntry) {
        self.entries.push(entry);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Restores every before-image, newest first.
    pub fn rollback(self, partition: &mut Partition) -> Result<()> {
        for entry in self.entries.into_iter().rev() {
            match entry {
                UndoEntry::Inserted { table, row } => partition.table_mut(table)?.remove_inserted(row),
                UndoEntry::Deleted { table, row } => partition.table_mut(table)?.undelete(row)?,
                UndoEntry::Updated { table, row, old } => {
                    partition.table_mut(table)?.update(row, &old)?;
                }
            }
        }
        Ok(())
    }

    /// Finishes a successful statement: the slots of deleted rows become reusable.
    pub fn commit(self, partition: &mut Partition) -> Result<()> {
        for entry in self.entries {
            if let UndoEntry::Deleted { table, row } = entry {
                partition.table_mut(table)?.free_slot(row);
            }
        }
        Ok(())
    }
}
