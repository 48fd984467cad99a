//! The catalog: tables, their columns, constraints and indexes, and stored procedures.
//!
//! The catalog is an immutable value ([`Catalog`]) published through a [`CatalogStore`]; a
//! statement takes the current version (an `Arc` clone) and plans against it without locks.
//! DDL builds a new version and publishes it after the partitions have applied the change, so a
//! statement never sees a table whose storage does not exist yet. Every version has a number;
//! a prepared statement re-plans when the number it was planned with is no longer current.
//!
//! Names are stored as they are after identifier folding (unquoted names in lower case). There
//! is one schema, `public`.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::error::{Error, Result, SqlState};
use crate::types::{DataType, Value};

pub type TableId = u32;

/// The default of a column.
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnDefault {
    Value(Value),
    /// CURRENT_TIMESTAMP / now(): the statement's start time.
    CurrentTimestamp,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ColumnDef {
    pub name: String,
    pub ty: DataType,
    pub nullable: bool,
    pub default: Option<ColumnDefault>,
}

/// An index on a table. The primary key is a hash index, which for a key of several columns
/// also keeps its entries in key order (`IndexStore::HashOrdered`); every other index is
/// ordered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexDef {
    pub name: String,
    /// Positions of the key columns in the table.
    pub columns: Vec<usize>,
    pub unique: bool,
    pub primary: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TableDef {
    pub id: TableId,
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// Indexes; the primary key, if any, comes first.
    pub indexes: Vec<IndexDef>,
    /// The column whose hash picks a row's partition (`PARTITION BY HASH (col)`). A table
    /// without one is replicated: every partition holds all of it, reads go to any one
    /// partition, writes to all of them.
    pub partition_key: Option<usize>,
}

impl IndexDef {
    /// Whether the index answers prefixes and ranges of its key in key order; a one-column
    /// primary key answers whole keys only.
    pub fn is_ordered(&self) -> bool {
        !self.primary || self.columns.len() > 1
    }
}

impl TableDef {
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    pub fn primary_key(&self) -> Option<&IndexDef> {
        self.indexes.first().filter(|i| i.primary)
    }

    pub fn types(&self) -> Vec<DataType> {
        self.columns.iter().map(|c| c.ty).collect()
    }

    pub fn index_position(&self, name: &str) -> Option<usize> {
        self.indexes.iter().position(|i| i.name == name)
    }
}

/// A stored procedure or function: its compiled form (whose `source` is what the log and
/// checkpoints keep) and an id that changes with every CREATE OR REPLACE, so that sessions
/// know when their prepared statements for it are stale.
#[derive(Clone, Debug)]
pub struct ProcedureDef {
    pub id: u64,
    pub routine: Arc<crate::sql::plpgsql::Routine>,
}

/// One version of the catalog.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    pub version: u64,
    tables: BTreeMap<String, Arc<TableDef>>,
    procedures: BTreeMap<String, Arc<ProcedureDef>>,
}

impl Catalog {
    pub fn table(&self, name: &str) -> Option<&Arc<TableDef>> {
        self.tables.get(name)
    }

    pub fn table_by_id(&self, id: TableId) -> Option<&Arc<TableDef>> {
        self.tables.values().find(|t| t.id == id)
    }

    pub fn require_table(&self, name: &str) -> Result<&Arc<TableDef>> {
        self.table(name).ok_or_else(|| Error::undefined_table(name))
    }

    pub fn tables(&self) -> impl Iterator<Item = &Arc<TableDef>> {
        self.tables.values()
    }

    /// The table that owns the index called `name`.
    pub fn index_owner(&self, name: &str) -> Option<(&Arc<TableDef>, usize)> {
        self.tables.values().find_map(|t| t.index_position(name).map(|i| (t, i)))
    }

    pub fn procedure(&self, name: &str) -> Option<&Arc<ProcedureDef>> {
        self.procedures.get(name)
    }

    pub fn procedures(&self) -> impl Iterator<Item = &Arc<ProcedureDef>> {
        self.procedures.values()
    }

    /// Whether `name` is taken by a table or an index (they share one namespace).
    pub fn relation_exists(&self, name: &str) -> bool {
        self.tables.contains_key(name) || self.index_owner(name).is_some()
    }
}

/// Publishes catalog versions; serialises DDL.
#[derive(Debug, Default)]
pub struct CatalogStore {
    current: RwLock<Arc<Catalog>>,
    next_table_id: Mutex<TableId>,
    /// Held for the whole of a DDL statement, so that DDL runs one at a time. An async lock:
    /// it is held across the executors' replies, and waiting for it must not block a thread.
    pub ddl_lock: futures::lock::Mutex<()>,
}

impl CatalogStore {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn current(&self) -> Arc<Catalog> {
        self.current.read().clone()
    }

    pub fn allocate_table_id(&self) -> TableId {
        let mut next = self.next_table_id.lock();
        *next += 1;
        *next
    }

    /// Makes sure table ids handed out later are above `id` (recovery).
    pub fn ensure_next_table_id(&self, id: TableId) {
        let mut next = self.next_table_id.lock();
        *next = (*next).max(id);
    }

    /// Publishes a catalog with `table` added or replaced.
    pub fn put_table(&self, table: Arc<TableDef>) {
        let mut cur = self.current.write();
        let mut next = (**cur).clone();
        next.version += 1;
        next.tables.insert(table.name.clone(), table);
        *cur = Arc::new(next);
    }

    /// Publishes a catalog without table `name`.
    pub fn remove_table(&self, name: &str) -> Result<Arc<TableDef>> {
        let mut cur = self.current.write();
        let mut next = (**cur).clone();
        let removed = next.tables.remove(name).ok_or_else(|| Error::undefined_table(name))?;
        next.version += 1;
        *cur = Arc::new(next);
        Ok(removed)
    }
}

impl CatalogStore {
    /// Publishes a catalog with the procedure `routine` added or replaced.
    pub fn put_procedure(&self, routine: Arc<crate::sql::plpgsql::Routine>) {
        let mut cur = self.current.write();
        let mut next = (**cur).clone();
        next.version += 1;
        let def = ProcedureDef { id: next.version, routine };
        next.procedures.insert(def.routine.name.clone(), Arc::new(def));
        *cur = Arc::new(next);
    }

    /// Publishes a catalog without procedure `name`; whether it was there.
    pub fn remove_procedure(&self, name: &str) -> bool {
        let mut cur = self.current.write();
        if !cur.procedures.contains_key(name) {
            return false;
        }
        let mut next = (**cur).clone();
        next.procedures.remove(name);
        next.version += 1;
        *cur = Arc::new(next);
        true
    }
}

/// Checks a new table definition: unique column names, key columns not null.
pub fn validate_table(def: &TableDef) -> Result<()> {
    for (i, c) in def.columns.iter().enumerate() {
        if def.columns[..i].iter().any(|d| d.name == c.name) {
            return Err(Error::new(
                SqlState::DuplicateColumn,
                format!("column \"{}\" specified more than once", c.name),
            ));
        }
    }
    if def.columns.is_empty() {
        return Err(Error::unsupported("a table without columns"));
    }
    Ok(())
}
