//! Freshet's analytical side: DataFusion over zero-copy Arrow views of storage snapshots.
//!
//! This crate is the only one that depends on Arrow and DataFusion. It reads the immutable
//! snapshots the core hands out ([`freshet_core::storage::TableSnapshot`]) and never touches
//! live storage. One analytical query: `OlapEngine::plan` turns the parser's AST into a
//! DataFusion `LogicalPlan` whose scans are [`provider::SnapshotTable`]s; the caller takes a
//! snapshot of `OlapPlan::tables` on the executor (microseconds: it clones segment pointers);
//! `OlapEngine::execute` runs the plan on the OLAP worker pool, where each scan wraps the
//! snapshot's chunks as record batches ([`scan`]) without copying them, leaving out the chunks
//! whose value ranges rule out a pushed-down filter ([`prune`]).

mod checked;
pub mod engine;
pub mod error;
pub mod fork;
mod functions;
mod interval;
mod ordered_set;
pub mod join_order;
pub mod provider;
pub mod prune;
pub mod rewrite;
pub mod scan;
mod series;
mod shown_numeric;
pub mod similar;
mod to_char;
pub mod types;
pub mod uuid;
pub mod values;

pub use datafusion;
pub use engine::{BatchStream, OlapEngine, OlapPlan, QueryRun};
